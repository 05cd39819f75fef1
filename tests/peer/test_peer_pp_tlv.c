/* SPDX-License-Identifier: MIT */
/* The differential case of PROXY v2 TLVs (issue 24, item 9), on one
 * HAProxy, one nginx and one splicer, each in three roles:
 *
 * - a middle proxy in front of a backend that records the header it gets
 *   (tlv_backend.h): what each sends for a TLS client with SNI and ALPN
 *   (HAProxy: `send-proxy-v2 proxy-v2-options authority,unique-id,crc32c`
 *   in mode tcp; nginx: `proxy_protocol on`, v1 only; splicer:
 *   `proxy_protocol_tlvs = authority alpn unique_id crc32c`), and what each
 *   passes on of a front proxy's v2 header with authority, unique_id, a
 *   custom 0xE1 and a CRC32C (HAProxy: accept-proxy and the same options;
 *   nginx: `listen ... proxy_protocol`; splicer: `proxy_protocol_pass =
 *   all`). splicer's backend must get every type a peer's gets, with the
 *   client's values;
 * - a receiver of splicer's header: HAProxy (accept-proxy) checks its CRC32C
 *   and logs fc_pp_authority and fc_pp_unique_id, which must be the
 *   ClientHello's name and the unique id splicer logged; nginx (listen
 *   proxy_protocol) must take the header with its TLVs and log the client's
 *   address (1.22 has no $proxy_protocol_tlv_*: 1.23.2 added them);
 * - a sender: HAProxy's own header (unique-id, crc32c) read by splicer, its
 *   unique id passed through to the HAProxy receiver and logged by both. */
#define _GNU_SOURCE
#include "peers.h"
#include "tls_hello_gen.h"
#include "tlv_backend.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy_proto.h"
#include "proxy_tlv.h"

static pid_t haproxy_pid, nginx_pid;
static struct h_proxy splicer;
static struct h_server echo_srv, rec[3];
static struct tlv_seen seen[3] = { TLV_SEEN_INIT, TLV_SEEN_INIT, TLV_SEEN_INIT };

enum { HAP, NGX, SPL };
static const char *const col_name[] = { "haproxy", "nginx", "splicer" };

static void tl_fini(void)
{
	pr_pid_stop(haproxy_pid);
	pr_pid_stop(nginx_pid);
	haproxy_pid = nginx_pid = 0;
	if (splicer.pid)
		h_proxy_stop(&splicer, 3000);
	h_fini();
}

/* The ports: each proxy's middle for TLS clients and for front headers,
 * the receivers, HAProxy's sender, and splicer's routes to the receivers
 * and from the sender. */
struct tl_ports {
	int mid_tls[3], mid_front[3];
	int hap_rx, ngx_rx, hap_tx;
	int spl_to_hap, spl_to_ngx, spl_from_hap;
};

static void addr_of(int port, struct h_addr *a)
{
	char text[32];

	snprintf(text, sizeof text, "127.0.0.1:%d", port);
	H_CHECK(h_addr_parse(text, a) == 0, "address %s", text);
}

static void start_haproxy(const struct tl_ports *p, char *log, size_t loglen)
{
	char conf[4096];

	snprintf(conf, sizeof conf,
		 "global\n  log stderr format raw local0\n"
		 "defaults\n  mode tcp\n  log global\n  timeout connect 2s\n"
		 "  timeout client 10s\n  timeout server 10s\n"
		 "frontend mid_tls\n  bind 127.0.0.1:%d\n  unique-id-format %%{+X}o%%ci%%cp%%fp%%Ts%%rt\n"
		 "  default_backend to_rec\n"
		 "frontend mid_front\n  bind 127.0.0.1:%d accept-proxy\n"
		 "  unique-id-format %%{+X}o%%ci%%cp%%fp%%Ts%%rt\n  default_backend to_rec\n"
		 "backend to_rec\n  server s %s send-proxy-v2 proxy-v2-options authority,unique-id,crc32c\n"
		 "frontend rx\n  bind 127.0.0.1:%d accept-proxy\n"
		 "  log-format \"rx authority=%%[fc_pp_authority] uid=%%[fc_pp_unique_id] src=%%ci:%%cp\"\n"
		 "  default_backend to_echo\n"
		 "backend to_echo\n  server s %s\n"
		 "frontend tx\n  bind 127.0.0.1:%d\n  unique-id-format %%{+X}o%%ci%%cp%%fp%%Ts%%rt\n"
		 "  log-format \"tx uid=%%ID\"\n  default_backend to_splicer\n"
		 "backend to_splicer\n  server s 127.0.0.1:%d send-proxy-v2 proxy-v2-options unique-id,crc32c\n",
		 p->mid_tls[HAP], p->mid_front[HAP], rec[HAP].addr.text, p->hap_rx, echo_srv.addr.text,
		 p->hap_tx, p->spl_from_hap);
	haproxy_pid = pr_haproxy_start("tlv-haproxy", conf, p->hap_tx, log, loglen);
}

static void start_nginx(const struct tl_ports *p, const char *access, char *log, size_t loglen)
{
	char stream[2048];

	snprintf(stream, sizeof stream,
		 "  log_format rx 'rx ppaddr=$proxy_protocol_addr:$proxy_protocol_port "
		 "bytes=$bytes_received';\n"
		 "  server {\n    listen 127.0.0.1:%d;\n    proxy_pass %s;\n    proxy_protocol on;\n  }\n"
		 "  server {\n    listen 127.0.0.1:%d proxy_protocol;\n    proxy_pass %s;\n"
		 "    proxy_protocol on;\n  }\n"
		 "  server {\n    listen 127.0.0.1:%d proxy_protocol;\n    access_log %s rx;\n"
		 "    proxy_pass %s;\n  }\n",
		 p->mid_tls[NGX], rec[NGX].addr.text, p->mid_front[NGX], rec[NGX].addr.text, p->ngx_rx,
		 access, echo_srv.addr.text);
	nginx_pid = pr_nginx_start("tlv-nginx", stream, p->ngx_rx, log, loglen);
}

static void start_splicer(const struct tl_ports *p, const char *access)
{
	char conf[2048], err[256];

	snprintf(conf, sizeof conf,
		 "[global]\nlog = %s\nworkers = 1\nproxy_protocol = v2\n"
		 "[route mid_tls]\nlisten = 127.0.0.1:%d\nbackend = %s\n"
		 "proxy_protocol_tlvs = authority alpn unique_id crc32c\n"
		 "[route mid_front]\nlisten = 127.0.0.1:%d\nbackend = %s\naccept_proxy = yes\n"
		 "proxy_protocol_pass = all\nproxy_protocol_tlvs = crc32c\n"
		 "[route to_hap]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n"
		 "proxy_protocol_tlvs = authority alpn unique_id crc32c\n"
		 "[route to_ngx]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n"
		 "proxy_protocol_tlvs = authority alpn unique_id crc32c\n"
		 "[route from_hap]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\naccept_proxy = yes\n"
		 "proxy_protocol_pass = all\n",
		 access, p->mid_tls[SPL], rec[SPL].addr.text, p->mid_front[SPL], rec[SPL].addr.text,
		 p->spl_to_hap, p->hap_rx, p->spl_to_ngx, p->ngx_rx, p->spl_from_hap, p->hap_rx);
	const char *args[] = { "-c", h_conf_write("tlv-peer.conf", conf), NULL };
	H_CHECK(h_proxy_start(&splicer, h_binary(0), args, err, sizeof err) == 0, "splicer: %s", err);
}

/* Sends msg[0..n) to port and expects its last `echo` bytes back. */
static void roundtrip(int port, const uint8_t *msg, size_t n, size_t echo, const char *what,
		      int *client_port)
{
	uint8_t back[8192];
	struct h_addr a;
	struct sockaddr_in me;
	socklen_t melen = sizeof me;

	addr_of(port, &a);
	int fd = h_connect(&a, 2000);
	H_CHECK(fd >= 0, "%s: connect to %s: %s", what, a.text, strerror(errno));
	getsockname(fd, (struct sockaddr *)&me, &melen);
	if (client_port)
		*client_port = ntohs(me.sin_port);
	int rc = h_send_all(fd, msg, n, h_now_ms() + 3000);
	if (!rc)
		rc = h_recv_exact(fd, back, echo, h_now_ms() + 3000);
	close(fd);
	H_CHECK(rc == 0 && !memcmp(back, msg + n - echo, echo), "%s: the %zu bytes did not come back "
		"intact (%s)", what, echo, rc ? strerror(-rc) : "different bytes");
}

/* The first line of the file holding every needle, within 3 s, into out
 * (a char array); asserts. */
#define WAIT_LINE(path, out, ...)                                                          \
	H_CHECK(h_file_line(path, 3000, out, sizeof out, __VA_ARGS__, (char *)NULL),        \
		"no line of %s holds what was expected", path)

/* A front proxy's v2 header for 203.0.113.9:4242 with authority,
 * unique_id, a custom 0xE1 and a CRC32C. */
static size_t front_header(uint8_t *out, size_t cap)
{
	size_t n = tlv_front_header(out, cap);

	n = proxy_tlv_add(out, n, cap, PP2_TYPE_AUTHORITY, "front.example", 13);
	n = proxy_tlv_add(out, n, cap, PP2_TYPE_UNIQUE_ID, "front-uid-7", 11);
	n = proxy_tlv_add(out, n, cap, 0xe1, "custom", 6);
	return proxy_tlv_seal(out, n, cap);
}

/* One table row: the TLV types each column's backend got. */
static void table_row(const char *name, char types[3][96])
{
	char head[512], row[512];

	snprintf(head, sizeof head, "[peer] %-34s %30s %30s %30s", "PROXY v2 TLVs the backend got",
		 col_name[HAP], col_name[NGX], col_name[SPL]);
	snprintf(row, sizeof row, "[peer] %-34s %30s %30s %30s", name, types[HAP], types[NGX],
		 types[SPL]);
	fprintf(stderr, "%s\n%s\n", head, row);
	pr_table_append(head, row);
}

/* Every type a peer's backend got, splicer's got too. */
static void superset(const char *what)
{
	for (int c = HAP; c <= NGX; c++)
		for (unsigned t = 0; t < 256; t++)
			H_CHECK(!seen[c].has[t] || seen[SPL].has[t],
				"%s: %s's backend got TLV type 0x%02x, splicer's did not", what,
				col_name[c], t);
}

Test(peer, proxy_v2_tlvs_sent_passed_and_read, .init = h_init, .fini = tl_fini, .timeout = 120)
{
	struct tl_ports p;
	char hlog[300], nlog[300], nacc[300], sacc[300], line[1024], types[3][96], uid[160], v[300];
	uint8_t hello[8192], front[PROXY_HDR_MAX + 64];
	int cport;

	H_CHECK(h_server_start(&echo_srv, "127.0.0.1:0", 128, h_echo_conn, NULL) == 0, "echo backend");
	for (int c = HAP; c <= SPL; c++)
		H_CHECK(h_server_start(&rec[c], "127.0.0.1:0", 128, tlv_backend_conn, &seen[c]) == 0,
			"recording backend");
	int *all[] = { &p.mid_tls[0], &p.mid_tls[1], &p.mid_tls[2], &p.mid_front[0], &p.mid_front[1],
		       &p.mid_front[2], &p.hap_rx, &p.ngx_rx, &p.hap_tx, &p.spl_to_hap, &p.spl_to_ngx,
		       &p.spl_from_hap };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		*all[i] = h_free_port();
	snprintf(nacc, sizeof nacc, "%s/tlv-nginx-access.log", h_tmpdir());
	snprintf(sacc, sizeof sacc, "%s/tlv-splicer-access.log", h_tmpdir());
	start_haproxy(&p, hlog, sizeof hlog);
	start_nginx(&p, nacc, nlog, sizeof nlog);
	start_splicer(&p, sacc);

	/* 1. a middle proxy, a TLS client */
	size_t n = tls_make_hello("db.example.com", "h2,http/1.1", 0, hello, sizeof hello);
	for (int c = HAP; c <= SPL; c++) {
		tlv_seen_reset(&seen[c]);
		roundtrip(p.mid_tls[c], hello, n, n, col_name[c], NULL);
		tlv_seen_wait(&seen[c], col_name[c]);
		tlv_seen_types(&seen[c], types[c], sizeof types[c]);
		if (seen[c].version == 1)
			snprintf(types[c], sizeof types[c], "v1 header: none");
	}
	table_row("middle, TLS client (SNI, ALPN)", types);
	H_CHECK(!strcmp(seen[SPL].val[PP2_TYPE_AUTHORITY], "db.example.com") &&
			!strcmp(seen[SPL].val[PP2_TYPE_ALPN], "h2") && seen[SPL].has[PP2_TYPE_UNIQUE_ID] &&
			seen[SPL].has[PP2_TYPE_CRC32C],
		"splicer's backend got authority '%s', alpn '%s', unique_id %d, crc32c %d",
		seen[SPL].val[PP2_TYPE_AUTHORITY], seen[SPL].val[PP2_TYPE_ALPN],
		seen[SPL].has[PP2_TYPE_UNIQUE_ID], seen[SPL].has[PP2_TYPE_CRC32C]);
	superset("TLS client");

	/* 2. a middle proxy, a front proxy's header */
	size_t fn = front_header(front, sizeof front);
	h_gen(0x33, 0, front + fn, 64);
	for (int c = HAP; c <= SPL; c++) {
		tlv_seen_reset(&seen[c]);
		roundtrip(p.mid_front[c], front, fn + 64, 64, col_name[c], NULL);
		tlv_seen_wait(&seen[c], col_name[c]);
		tlv_seen_types(&seen[c], types[c], sizeof types[c]);
		if (seen[c].version == 1)
			snprintf(types[c], sizeof types[c], "v1 header: none");
	}
	table_row("middle, front proxy's v2 TLVs", types);
	H_CHECK(!strcmp(seen[SPL].val[PP2_TYPE_AUTHORITY], "front.example") &&
			!strcmp(seen[SPL].val[PP2_TYPE_UNIQUE_ID], "front-uid-7") &&
			!strcmp(seen[SPL].val[0xe1], "custom") && seen[SPL].has[PP2_TYPE_CRC32C],
		"splicer's backend got authority '%s', unique_id '%s', 0xe1 '%s', crc32c %d",
		seen[SPL].val[PP2_TYPE_AUTHORITY], seen[SPL].val[PP2_TYPE_UNIQUE_ID],
		seen[SPL].val[0xe1], seen[SPL].has[PP2_TYPE_CRC32C]);
	superset("front proxy's header");

	/* 3. HAProxy reads splicer's header (checks its CRC32C) and logs its TLVs */
	roundtrip(p.spl_to_hap, hello, n, n, "splicer -> HAProxy", &cport);
	snprintf(v, sizeof v, "client=127.0.0.1:%d ", cport);
	WAIT_LINE(sacc, line, "route=to_hap", v);
	h_kv_value(line, "unique_id", uid, sizeof uid);
	snprintf(v, sizeof v, "uid=%s src=127.0.0.1:%d", uid, cport);
	WAIT_LINE(hlog, line, "rx authority=db.example.com");
	H_CHECK(strstr(line, v), "HAProxy logged '%s', expected '%s' (splicer's unique id, the client)",
		line, v);

	/* 4. nginx takes splicer's header with its TLVs */
	roundtrip(p.spl_to_ngx, hello, n, n, "splicer -> nginx", &cport);
	snprintf(v, sizeof v, "rx ppaddr=127.0.0.1:%d bytes=%zu", cport, n);
	WAIT_LINE(nacc, line, v);

	/* 5. HAProxy's own header read by splicer, its unique id passed on */
	uint8_t ping[64];
	h_gen(0x34, 0, ping, sizeof ping);
	roundtrip(p.hap_tx, ping, sizeof ping, sizeof ping, "HAProxy -> splicer -> HAProxy", NULL);
	WAIT_LINE(hlog, line, "tx uid=");
	snprintf(uid, sizeof uid, "%s", strstr(line, "tx uid=") + 7);
	WAIT_LINE(sacc, line, "route=from_hap");
	h_kv_value(line, "unique_id", v, sizeof v);
	H_CHECK(!strcmp(v, uid), "splicer logged unique_id=%s of HAProxy's header, HAProxy's is %s", v,
		uid);
	h_kv_value(line, "pp_tlvs", v, sizeof v);
	H_CHECK(strstr(v, "unique_id") && strstr(v, "crc32c"), "splicer logged pp_tlvs=%s", v);
	snprintf(v, sizeof v, "rx authority=- uid=%s ", uid);
	WAIT_LINE(hlog, line, v);
	fprintf(stderr, "[peer]   HAProxy 2.6 reads splicer's authority, unique_id and CRC32C; nginx "
		"1.22 takes the header (TLV variables from 1.23.2); HAProxy -> splicer -> HAProxy "
		"carries the unique id %s\n", uid);

	h_proxy_down(&splicer);
	h_server_stop(&echo_srv);
	for (int c = HAP; c <= SPL; c++)
		h_server_stop(&rec[c]);
}
