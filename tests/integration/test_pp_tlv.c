/* SPDX-License-Identifier: MIT */
/* PROXY v2 TLVs on real sockets (issue 24, item 9): the header a backend
 * gets carries the client's server name (authority) and first ALPN protocol
 * from its ClientHello, the session's unique id and a CRC32C that checks;
 * a client's own header's TLVs go on as the route's proxy_protocol_pass
 * says (the listed types, or all but its checksum and padding), splicer's
 * values winning; headers with TLVs that lie (a wrong checksum, a field past
 * the end) close that client only; and the access log shows authority,
 * alpn, unique_id and pp_tlvs, the unique id the same one the backend got. */
#define _GNU_SOURCE
#include "harness.h"
#include "tls_hello_gen.h"
#include "tlv_backend.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy_proto.h"
#include "proxy_tlv.h"

/* Sends msg[0..n) and reads the echo of its last `echo` bytes. */
static void tlv_roundtrip(const struct h_addr *a, const uint8_t *msg, size_t n, size_t echo,
			  const char *what)
{
	uint8_t back[8192];
	int fd = h_connect(a, 2000);

	H_CHECK(fd >= 0, "%s: connect: %s", what, strerror(errno));
	H_CHECK(echo <= sizeof back, "echo too long");
	int rc = h_send_all(fd, msg, n, h_now_ms() + 3000);
	if (!rc)
		rc = h_recv_exact(fd, back, echo, h_now_ms() + 3000);
	close(fd);
	H_CHECK(rc == 0 && !memcmp(back, msg + n - echo, echo),
		"%s: the %zu bytes did not come back intact (%s)", what, echo,
		rc ? strerror(-rc) : "different bytes");
}

/* The access log's value of key in the first line holding `with`. */
static void log_value(const char *path, const char *with, const char *key, char *out, size_t len)
{
	char line[4096], needle[64];

	snprintf(needle, sizeof needle, " %s=", key);
	h_file_line(path, 0, line, sizeof line, with, needle, (char *)NULL);
	h_kv_value(line, key, out, len);
}

/* The access log's lines, once the proxy wrote the close of `n` sessions. */
static void log_wait(const char *path, int n)
{
	for (int64_t end = h_now_ms() + 3000; h_now_ms() < end; h_sleep_ms(10)) {
		char *text = h_read_file(path, NULL);
		int k = 0;
		for (char *p = text; p && (p = strstr(p, "ended_by=")); p++)
			k++;
		free(text);
		if (k >= n)
			return;
	}
	H_CHECK(0, "the access log %s has not %d close lines after 3 s", path, n);
}

static int is_hex32(const char *s)
{
	return strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32;
}

/* ---- splicer's own TLVs -------------------------------------------------- */

Test(integ, pp_tlv_sends_authority_alpn_unique_id_crc32c, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	static struct h_server srv;
	static struct h_proxy p;
	static struct tlv_seen t = TLV_SEEN_INIT;
	uint8_t hello[8192];
	char text[1024], log[300], got[300];

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, tlv_backend_conn, &t);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	snprintf(log, sizeof log, "%s/tlv-access.log", h_tmpdir());
	snprintf(text, sizeof text,
		 "[global]\nlog = %s\nworkers = 1\n"
		 "[route t]\nlisten = 127.0.0.1:0\nbackend = %s\nproxy_protocol = v2\n"
		 "proxy_protocol_tlvs = authority, alpn unique_id crc32c\n", log, srv.addr.text);
	const char *args[] = { "-c", h_conf_write("tlv-send.conf", text), NULL };
	char err[256];
	H_CHECK(h_proxy_start(&p, h_binary(0), args, err, sizeof err) == 0, "proxy: %s", err);

	/* a TLS client: its ClientHello (and nothing else) is echoed */
	size_t n = tls_make_hello("db.example.com", "h2,http/1.1", 0, hello, sizeof hello);
	tlv_seen_reset(&t);
	tlv_roundtrip(&p.addr, hello, n, n, "ClientHello with SNI and ALPN");
	tlv_seen_wait(&t, "TLS client");
	char uid[300];
	pthread_mutex_lock(&t.mu);
	H_CHECK(t.has[PP2_TYPE_AUTHORITY] == 1 && !strcmp(t.val[PP2_TYPE_AUTHORITY], "db.example.com"),
		"authority: %d TLVs, '%s' (expected db.example.com)", t.has[PP2_TYPE_AUTHORITY],
		t.val[PP2_TYPE_AUTHORITY]);
	H_CHECK(t.has[PP2_TYPE_ALPN] == 1 && !strcmp(t.val[PP2_TYPE_ALPN], "h2"),
		"alpn: %d TLVs, '%s' (expected h2, the first offered)", t.has[PP2_TYPE_ALPN],
		t.val[PP2_TYPE_ALPN]);
	H_CHECK(t.has[PP2_TYPE_UNIQUE_ID] == 1 && is_hex32(t.val[PP2_TYPE_UNIQUE_ID]),
		"unique_id: %d TLVs, '%s' (expected 32 hex digits)", t.has[PP2_TYPE_UNIQUE_ID],
		t.val[PP2_TYPE_UNIQUE_ID]);
	H_CHECK(t.has[PP2_TYPE_CRC32C] == 1, "crc32c: %d TLVs (expected one; proxy_parse checked it)",
		t.has[PP2_TYPE_CRC32C]);
	snprintf(uid, sizeof uid, "%s", t.val[PP2_TYPE_UNIQUE_ID]);
	pthread_mutex_unlock(&t.mu);

	/* a plain TCP client: no ClientHello, so neither authority nor alpn, and
	 * served at once (the hello reader sees it is not TLS) */
	uint8_t plain[64];
	memcpy(plain, "PING plain text, not TLS\r\n", 26);
	h_gen(3, 0, plain + 26, sizeof plain - 26);
	tlv_seen_reset(&t);
	int64_t t0 = h_now_ms();
	tlv_roundtrip(&p.addr, plain, sizeof plain, sizeof plain, "plain TCP client");
	int64_t took = h_now_ms() - t0;
	tlv_seen_wait(&t, "plain client");
	pthread_mutex_lock(&t.mu);
	H_CHECK(!t.has[PP2_TYPE_AUTHORITY] && !t.has[PP2_TYPE_ALPN] && t.has[PP2_TYPE_UNIQUE_ID] == 1 &&
			t.has[PP2_TYPE_CRC32C] == 1 && strcmp(t.val[PP2_TYPE_UNIQUE_ID], uid),
		"plain client: authority %d alpn %d unique_id %d ('%s', the TLS one '%s') crc32c %d",
		t.has[PP2_TYPE_AUTHORITY], t.has[PP2_TYPE_ALPN], t.has[PP2_TYPE_UNIQUE_ID],
		t.val[PP2_TYPE_UNIQUE_ID], uid, t.has[PP2_TYPE_CRC32C]);
	pthread_mutex_unlock(&t.mu);
	H_CHECK(took < 1000, "a plain client took %lld ms (waiting for a ClientHello?)", (long long)took);

	log_wait(log, 2);
	log_value(log, "authority=db.example.com", "unique_id", got, sizeof got);
	H_CHECK(!strcmp(got, uid), "the access log's unique_id '%s' is not the backend's '%s'", got, uid);
	log_value(log, "authority=db.example.com", "alpn", got, sizeof got);
	H_CHECK(!strcmp(got, "h2"), "the access log's alpn is '%s', expected h2", got);
	log_value(log, "authority=-", "pp_tlvs", got, sizeof got);
	H_CHECK(!strcmp(got, "-"), "a session whose client sent no PROXY header logs pp_tlvs=%s", got);
	h_proxy_down(&p);
	h_server_stop(&srv);
}

/* ---- a client's TLVs passed on ------------------------------------------ */

/* A v2 header from 203.0.113.9:4242 with the TLVs of a front proxy:
 * authority, a custom 0xe1, a unique id, padding, a custom 0xe2, and a
 * CRC32C (flip: one byte of it wrong). Returns its length. */
static size_t front_header(uint8_t *out, size_t cap, int flip)
{
	size_t n = tlv_front_header(out, cap);

	n = proxy_tlv_add(out, n, cap, PP2_TYPE_AUTHORITY, "front.example", 13);
	n = proxy_tlv_add(out, n, cap, 0xe1, "custom-e1", 9);
	n = proxy_tlv_add(out, n, cap, PP2_TYPE_UNIQUE_ID, "client-uid-42", 13);
	n = proxy_tlv_add(out, n, cap, PP2_TYPE_NOOP, "\0\0\0", 3);
	n = proxy_tlv_add(out, n, cap, 0xe2, "custom-e2", 9);
	n = proxy_tlv_seal(out, n, cap);
	if (flip)
		out[n - 1] ^= 0x01;
	return n;
}

Test(integ, pp_tlv_passes_the_clients_tlvs_as_configured, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	static struct h_server srv1, srv2;
	static struct h_proxy p;
	static struct tlv_seen t1 = TLV_SEEN_INIT;
	static struct tlv_seen t2 = TLV_SEEN_INIT;
	uint8_t msg[PROXY_HDR_MAX + 64];
	char text[1500], log[300], got[300], err[256];
	int p1 = h_free_port(), p2 = h_free_port();

	H_CHECK(h_server_start(&srv1, "127.0.0.1:0", 128, tlv_backend_conn, &t1) == 0 &&
			h_server_start(&srv2, "127.0.0.1:0", 128, tlv_backend_conn, &t2) == 0,
		"backends");
	snprintf(log, sizeof log, "%s/pass-access.log", h_tmpdir());
	snprintf(text, sizeof text,
		 "[global]\nlog = %s\nworkers = 1\naccept_proxy = yes\nproxy_protocol = v2\n"
		 "[route listed]\nlisten = 127.0.0.1:%d\nbackend = %s\n"
		 "proxy_protocol_pass = authority 0xe1 unique_id\nproxy_protocol_tlvs = unique_id crc32c\n"
		 "[route all]\nlisten = 127.0.0.1:%d\nbackend = %s\nproxy_protocol_pass = all\n",
		 log, p1, srv1.addr.text, p2, srv2.addr.text);
	const char *args[] = { "-c", h_conf_write("tlv-pass.conf", text), NULL };
	H_CHECK(h_proxy_start(&p, h_binary(0), args, err, sizeof err) == 0, "proxy: %s", err);
	struct h_addr a1, a2;
	snprintf(text, sizeof text, "127.0.0.1:%d", p1);
	h_addr_parse(text, &a1);
	snprintf(text, sizeof text, "127.0.0.1:%d", p2);
	h_addr_parse(text, &a2);

	size_t n = front_header(msg, sizeof msg, 0);
	h_gen(0x71, 0, msg + n, 64);

	/* listed: authority and 0xe1 go on; unique_id is splicer's own (it
	 * sends one), not the client's; 0xe2, padding and the client's checksum
	 * stay; splicer's CRC32C covers the new header */
	tlv_seen_reset(&t1);
	tlv_roundtrip(&a1, msg, n + 64, 64, "route listed");
	tlv_seen_wait(&t1, "route listed");
	pthread_mutex_lock(&t1.mu);
	H_CHECK(t1.has[PP2_TYPE_AUTHORITY] == 1 && !strcmp(t1.val[PP2_TYPE_AUTHORITY], "front.example") &&
			t1.has[0xe1] == 1 && !strcmp(t1.val[0xe1], "custom-e1") && !t1.has[0xe2] &&
			!t1.has[PP2_TYPE_NOOP] && t1.has[PP2_TYPE_CRC32C] == 1 &&
			t1.has[PP2_TYPE_UNIQUE_ID] == 1 && is_hex32(t1.val[PP2_TYPE_UNIQUE_ID]),
		"route listed: authority %d '%s', 0xe1 %d, 0xe2 %d, noop %d, crc32c %d, unique_id %d '%s'",
		t1.has[PP2_TYPE_AUTHORITY], t1.val[PP2_TYPE_AUTHORITY], t1.has[0xe1], t1.has[0xe2],
		t1.has[PP2_TYPE_NOOP], t1.has[PP2_TYPE_CRC32C], t1.has[PP2_TYPE_UNIQUE_ID],
		t1.val[PP2_TYPE_UNIQUE_ID]);
	char uid[300];
	snprintf(uid, sizeof uid, "%s", t1.val[PP2_TYPE_UNIQUE_ID]);
	pthread_mutex_unlock(&t1.mu);

	/* all: every TLV but the padding and the client's checksum, as sent */
	tlv_seen_reset(&t2);
	tlv_roundtrip(&a2, msg, n + 64, 64, "route all");
	tlv_seen_wait(&t2, "route all");
	pthread_mutex_lock(&t2.mu);
	H_CHECK(t2.has[PP2_TYPE_AUTHORITY] == 1 && t2.has[0xe1] == 1 && t2.has[0xe2] == 1 &&
			!strcmp(t2.val[0xe2], "custom-e2") && !t2.has[PP2_TYPE_NOOP] &&
			!t2.has[PP2_TYPE_CRC32C] && t2.has[PP2_TYPE_UNIQUE_ID] == 1 &&
			!strcmp(t2.val[PP2_TYPE_UNIQUE_ID], "client-uid-42"),
		"route all: authority %d, 0xe1 %d, 0xe2 %d, noop %d, crc32c %d, unique_id %d '%s'",
		t2.has[PP2_TYPE_AUTHORITY], t2.has[0xe1], t2.has[0xe2], t2.has[PP2_TYPE_NOOP],
		t2.has[PP2_TYPE_CRC32C], t2.has[PP2_TYPE_UNIQUE_ID], t2.val[PP2_TYPE_UNIQUE_ID]);
	pthread_mutex_unlock(&t2.mu);

	/* lying TLVs close that client only: a wrong checksum, a field past
	 * the header's end; then a good one is served */
	uint8_t bad[PROXY_HDR_MAX + 8];
	size_t nb = front_header(bad, sizeof bad, 1);
	const char *whats[] = { "wrong CRC32C", "TLV past the end" };
	for (int k = 0; k < 2; k++) {
		if (k == 1) {
			nb = front_header(bad, sizeof bad, 0);
			bad[nb - 6] = 0x40; /* the checksum's length: 0x4000 */
		}
		int fd = h_connect(&a2, 2000);
		H_CHECK(fd >= 0, "connect: %s", strerror(errno));
		int rc = h_send_all(fd, bad, nb, h_now_ms() + 2000);
		if (!rc)
			rc = h_expect_eof(fd, h_now_ms() + 2000);
		H_CHECK(rc == 0 || rc == -ECONNRESET, "%s: the client was not closed within 2 s (%s)",
			whats[k], strerror(-rc));
		close(fd);
	}
	tlv_seen_reset(&t2);
	tlv_roundtrip(&a2, msg, n + 64, 64, "route all, after two lying headers");

	log_wait(log, 5);
	log_value(log, "route=listed", "unique_id", got, sizeof got);
	H_CHECK(!strcmp(got, uid), "route listed logs unique_id=%s, the backend got %s", got, uid);
	log_value(log, "route=listed", "authority", got, sizeof got);
	H_CHECK(!strcmp(got, "front.example"), "route listed logs authority=%s", got);
	log_value(log, "route=listed", "pp_tlvs", got, sizeof got);
	H_CHECK(!strcmp(got, "authority,0xe1,unique_id,noop,0xe2,crc32c"), "route listed logs pp_tlvs=%s",
		got);
	log_value(log, "route=all client=203.0.113.9", "unique_id", got, sizeof got);
	H_CHECK(!strcmp(got, "client-uid-42"), "route all logs unique_id=%s", got);
	h_proxy_down(&p);
	H_CHECK(h_log_lines(&p, "bad proxy headers 2", NULL),
		"the totals line does not count the 2 lying headers (log %s)", p.log);
	h_server_stop(&srv1);
	h_server_stop(&srv2);
}

/* ---- check ----------------------------------------------------------------- */

Test(integ, pp_tlv_check_says_what_is_wrong, .init = h_init, .fini = h_fini, .timeout = 30)
{
	static const struct {
		const char *route, *want;
	} cases[] = {
		{ "proxy_protocol = v2\nproxy_protocol_tlvs = authority sni\n",
		  ":5: proxy_protocol_tlvs: 'sni' is not a TLV splicer sends" },
		{ "proxy_protocol = v1\nproxy_protocol_tlvs = authority\n",
		  ":5: route 'r': proxy_protocol_tlvs needs proxy_protocol = v2 (it is v1)" },
		{ "proxy_protocol = v2\naccept_proxy = yes\nproxy_protocol_pass = crc32c\n",
		  ":6: proxy_protocol_pass: 'crc32c' is never passed on" },
		{ "proxy_protocol = v2\naccept_proxy = yes\nproxy_protocol_pass = 0x1ff\n",
		  ":6: proxy_protocol_pass: '0x1ff' is not a TLV type" },
		{ "proxy_protocol = v2\naccept_proxy = yes\nproxy_protocol_pass = all none\n",
		  ":6: proxy_protocol_pass: 'all' stands alone" },
		{ "proxy_protocol = v2\nproxy_protocol_pass = all\n",
		  ":5: route 'r': proxy_protocol_pass needs accept_proxy = yes" },
	};
	char text[512], *out = NULL, *errout = NULL;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(text, sizeof text, "[route r]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:9\n%s",
			 cases[i].route);
		const char *path = h_conf_write("tlv-check.conf", text);
		const char *args[] = { "check", "-c", path, NULL };
		int st = h_run_capture(h_binary(0), args, 10000, &out, &errout);
		H_CHECK(st != 0 && errout && strstr(errout, path) && strstr(errout, cases[i].want),
			"case %zu: exit %d, stderr:\n%s\nexpected it to hold:\n%s%s", i, st,
			errout ? errout : "", path, cases[i].want);
		free(out);
		free(errout);
		out = errout = NULL;
	}
}

/* A listener whose ClientHello is read only for the TLVs (no sni route):
 * a client that says nothing first (SMTP, MySQL, SSH: the server speaks
 * first) goes on to the backend at tls_hello_timeout, without authority or
 * alpn, where an sni listener would close it. */
Test(integ, pp_tlv_silent_client_goes_on_at_hello_timeout, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	static struct h_server srv;
	static struct h_proxy p;
	static struct tlv_seen t = TLV_SEEN_INIT;
	char text[1024], err[256];
	uint8_t msg[32], back[32];

	H_CHECK(h_server_start(&srv, "127.0.0.1:0", 128, tlv_backend_conn, &t) == 0, "backend");
	snprintf(text, sizeof text,
		 "[route t]\nlisten = 127.0.0.1:0\nbackend = %s\nproxy_protocol = v2\n"
		 "proxy_protocol_tlvs = authority alpn unique_id\ntls_hello_timeout = 300ms\n",
		 srv.addr.text);
	const char *args[] = { "-c", h_conf_write("tlv-silent.conf", text), NULL };
	H_CHECK(h_proxy_start(&p, h_binary(0), args, err, sizeof err) == 0, "proxy: %s", err);

	tlv_seen_reset(&t);
	int64_t t0 = h_now_ms();
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	tlv_seen_wait(&t, "silent client");
	int64_t took = h_now_ms() - t0;
	pthread_mutex_lock(&t.mu);
	int auth = t.has[PP2_TYPE_AUTHORITY], alpn = t.has[PP2_TYPE_ALPN], uid = t.has[PP2_TYPE_UNIQUE_ID];
	pthread_mutex_unlock(&t.mu);
	H_CHECK(took >= 250 && took < 2500 && !auth && !alpn && uid == 1,
		"the backend got the header %lld ms after the connect (tls_hello_timeout 300ms) with "
		"authority %d alpn %d unique_id %d", (long long)took, auth, alpn, uid);
	h_gen(9, 0, msg, sizeof msg);
	int rc = h_send_all(fd, msg, sizeof msg, h_now_ms() + 2000);
	if (!rc)
		rc = h_recv_exact(fd, back, sizeof back, h_now_ms() + 2000);
	close(fd);
	H_CHECK(rc == 0 && !memcmp(msg, back, sizeof msg), "the session did not carry bytes after it");
	h_proxy_down(&p);
	h_server_stop(&srv);
}
