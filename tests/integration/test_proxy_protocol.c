/* SPDX-License-Identifier: MIT */
/* Integration cases for the PROXY protocol: headers sent to a backend carry
 * the client's real address (IPv4, IPv6, Unix; v1 and v2), and accept_proxy
 * takes a client's header, forwards its address, and closes clients whose
 * header is truncated, oversized, of the wrong signature or too slow, while
 * serving the others. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proxy_proto.h"

/* What a header-reading backend saw on its last connection. */
struct pp_seen {
	pthread_mutex_t mu;
	int ok;                       /* a complete, valid header arrived */
	int version;                  /* 1 or 2 */
	struct sockaddr_storage src;
	socklen_t srclen;
	char why[128];
};

/* Backend: reads a PROXY header, records it, then echoes the stream. */
static void pp_conn(struct h_server *s, int fd, int index, void *arg)
{
	struct pp_seen *seen = arg;
	uint8_t buf[PROXY_HDR_MAX + 4096];
	size_t have = 0;
	int r = 0;
	(void)s;
	(void)index;

	while (have < sizeof buf) {
		ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
		if (n <= 0)
			break;
		have += (size_t)n;
		pthread_mutex_lock(&seen->mu);
		r = proxy_parse(buf, have, &seen->src, &seen->srclen, seen->why, sizeof seen->why);
		seen->ok = r > 0;
		seen->version = buf[0] == 'P' ? 1 : 2;
		pthread_mutex_unlock(&seen->mu);
		if (r != 0)
			break;
	}
	if (r <= 0)
		return;
	if (have > (size_t)r && h_send_all(fd, buf + r, have - (size_t)r, h_now_ms() + 2000))
		return;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n <= 0 || h_send_all(fd, buf, (size_t)n, h_now_ms() + 2000))
			break;
	}
	shutdown(fd, SHUT_WR);
}

static void pp_reset(struct pp_seen *seen)
{
	pthread_mutex_lock(&seen->mu);
	seen->ok = 0;
	seen->version = 0;
	memset(&seen->src, 0, sizeof seen->src);
	pthread_mutex_unlock(&seen->mu);
}

/* An echo round trip through p from a socket bound (if from) to a source,
 * then the backend's record of the header; returns the client's own
 * address in *me. */
static void pp_roundtrip(const struct h_addr *proxy, struct sockaddr_storage *me, socklen_t *melen)
{
	char why[256];
	int fd = h_connect(proxy, 2000);
	uint8_t buf[300], back[300];

	H_CHECK(fd >= 0, "connect to the proxy %s: %s", proxy->text, strerror(errno));
	*melen = sizeof *me;
	getsockname(fd, (struct sockaddr *)me, melen);
	h_gen(0x99, 0, buf, sizeof buf);
	int rc = h_send_all(fd, buf, sizeof buf, h_now_ms() + 2000);
	if (!rc)
		rc = h_recv_exact(fd, back, sizeof back, h_now_ms() + 2000);
	snprintf(why, sizeof why, "%s", rc ? strerror(-rc) : "");
	close(fd);
	H_CHECK(rc == 0 && !memcmp(buf, back, sizeof buf),
		"echo through %s behind a PROXY header failed: %s", proxy->text, why);
}

static void expect_src(struct pp_seen *seen, int version, const struct sockaddr_storage *want,
		       const char *what)
{
	char got[160], exp[160];
	int64_t end = h_now_ms() + 2000;

	while (h_now_ms() < end) {
		pthread_mutex_lock(&seen->mu);
		int ok = seen->ok;
		pthread_mutex_unlock(&seen->mu);
		if (ok)
			break;
		h_sleep_ms(10);
	}
	struct h_addr g, e;
	h_addr_from(&g, (struct sockaddr *)&seen->src, seen->srclen ? seen->srclen : sizeof seen->src);
	h_addr_from(&e, (const struct sockaddr *)want, sizeof *want);
	snprintf(got, sizeof got, "%s", seen->src.ss_family == AF_UNSPEC ? "UNSPEC" : g.text);
	snprintf(exp, sizeof exp, "%s", want->ss_family == AF_UNSPEC ? "UNSPEC" : e.text);
	H_CHECK(seen->ok && seen->version == version && !strcmp(got, exp),
		"%s: backend saw %s v%d header with source %s, expected v%d with %s (%s)", what,
		seen->ok ? "a" : "no valid", seen->version, got, version, exp, seen->why);
}

static void pp_send_case(const char *bin, const char *engine, const char *listen, const char *ver)
{
	static struct h_server srv;
	static struct h_proxy p;
	static struct pp_seen seen = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct sockaddr_storage me;
	socklen_t melen;

	pp_reset(&seen);
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, pp_conn, &seen);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--proxy-protocol", ver, NULL };
	h_proxy_up(&p, bin, engine, listen, backends, extra);
	pp_roundtrip(&p.addr, &me, &melen);
	if (me.ss_family == AF_UNIX && ver[1] == '1')
		me.ss_family = AF_UNSPEC; /* v1 has no Unix family: "PROXY UNKNOWN" */
	else if (me.ss_family == AF_UNIX)
		memset(((struct sockaddr_un *)&me)->sun_path, 0, 108); /* unnamed client */
	char what[128];
	snprintf(what, sizeof what, "%s client, --proxy-protocol %s", listen, ver);
	expect_src(&seen, ver[1] - '0', &me, what);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

static void case_proxy_protocol_send(const char *bin, const char *engine)
{
	char unixp[200];

	for (int v = 1; v <= 2; v++) {
		const char *ver = v == 1 ? "v1" : "v2";
		pp_send_case(bin, engine, "127.0.0.1:0", ver);
		if (h_ipv6_available())
			pp_send_case(bin, engine, "[::1]:0", ver);
		snprintf(unixp, sizeof unixp, "unix:%s/pp%d.sock", h_tmpdir(), v);
		pp_send_case(bin, engine, unixp, ver);
	}
}

H_ENGINE_CASES(proxy_protocol_send, 60)
H_TINY_CASE(proxy_protocol_send, 60)

/* Sends raw bytes as a client and expects the proxy to close the
 * connection (EOF or reset) within limit_ms; returns how long it took. */
static int64_t expect_closed(const struct h_addr *proxy, const void *bytes, size_t n, int shut,
			     int limit_ms, const char *what)
{
	int fd = h_connect(proxy, 2000);
	H_CHECK(fd >= 0, "%s: connect: %s", what, strerror(errno));
	int64_t t0 = h_now_ms();
	if (n)
		H_CHECK(h_send_all(fd, bytes, n, t0 + 2000) == 0, "%s: send", what);
	if (shut)
		shutdown(fd, SHUT_WR);
	int rc = h_expect_eof(fd, t0 + limit_ms);
	int64_t took = h_now_ms() - t0;
	close(fd);
	H_CHECK(rc == 0 || rc == -ECONNRESET, "%s: the proxy did not close the client within %d ms "
					      "(%s)", what, limit_ms,
		rc == -EPROTO ? "data came back" : strerror(-rc));
	return took;
}

Test(integ, accept_proxy_valid_and_bad_headers, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	static struct pp_seen seen = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct sockaddr_storage want = { 0 };
	struct sockaddr_in *w4 = (struct sockaddr_in *)&want;

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, pp_conn, &seen);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--accept-proxy", "yes", "--proxy-protocol", "v2", "--proxy-timeout",
				"500ms", "-v", NULL };
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, extra);

	/* valid v1 and v2 headers, each followed by stream bytes in the same send */
	w4->sin_family = AF_INET;
	inet_pton(AF_INET, "203.0.113.9", &w4->sin_addr);
	w4->sin_port = htons(4242);
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(443) };
	inet_pton(AF_INET, "198.51.100.1", &dst.sin_addr);
	for (int v = 1; v <= 2; v++) {
		uint8_t msg[PROXY_HDR_MAX + 64], back[64];
		size_t n = proxy_build(v, (struct sockaddr *)w4, sizeof *w4, (struct sockaddr *)&dst,
				       sizeof dst, msg);
		h_gen(0x50 + (uint64_t)v, 0, msg + n, 64);
		pp_reset(&seen);
		int fd = h_connect(&p.addr, 2000);
		H_CHECK(fd >= 0, "connect: %s", strerror(errno));
		H_CHECK(h_send_all(fd, msg, n + 64, h_now_ms() + 2000) == 0 &&
				h_recv_exact(fd, back, 64, h_now_ms() + 2000) == 0 &&
				!memcmp(back, msg + n, 64),
			"v%d client header + 64 bytes: the echo did not come back intact", v);
		close(fd);
		expect_src(&seen, 2, &want, v == 1 ? "client v1 header forwarded as v2"
						   : "client v2 header forwarded as v2");
	}

	/* bad headers: each closes that client only */
	char longhdr[130];
	memset(longhdr, 'x', sizeof longhdr);
	memcpy(longhdr, "PROXY TCP4 ", 11);
	expect_closed(&p.addr, "PROXY TCP4 192.0", 16, 1, 1000, "truncated header then FIN");
	expect_closed(&p.addr, longhdr, sizeof longhdr, 0, 1000, "v1 header over 107 bytes");
	expect_closed(&p.addr, "GET / HTTP/1.0\r\n\r\n", 18, 0, 1000, "no PROXY signature");
	int64_t took = expect_closed(&p.addr, "", 0, 0, 2000, "silent client (proxy_timeout 500ms)");
	H_CHECK(took >= 400, "a silent client was closed after %lld ms, before proxy_timeout (500 ms)",
		(long long)took);

	/* the proxy still serves */
	pp_reset(&seen);
	uint8_t msg[PROXY_HDR_MAX + 8], back[8];
	size_t n = proxy_build(1, (struct sockaddr *)w4, sizeof *w4, (struct sockaddr *)&dst,
			       sizeof dst, msg);
	memcpy(msg + n, "payload!", 8);
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0 && h_send_all(fd, msg, n + 8, h_now_ms() + 2000) == 0 &&
			h_recv_exact(fd, back, 8, h_now_ms() + 2000) == 0 && !memcmp(back, "payload!", 8),
		"after bad clients, a valid one was not served");
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
	H_CHECK(h_log_lines(&p, "bad proxy headers 4", NULL),
		"the totals line does not count 4 bad PROXY headers (log %s)", p.log);
	H_CHECK(h_log_lines(&p, "client=203.0.113.9:4242", NULL),
		"the session log does not show the header's client 203.0.113.9:4242");
}
/* sockmap: the header goes first, then the hand-off (TCP clients); a Unix
 * client is not for sockmap and must count as a fallback */
H_SOCKMAP_CASES_MAY_FALL_BACK(proxy_protocol_send, 60)

/* Issue 12, defect 9: a front proxy announces an IPv4 client to an IPv6
 * listener (accept_proxy), and the backend wants a header too. The client
 * address used to be dropped (v1 "UNKNOWN", v2 LOCAL) because the listener's
 * address is IPv6; now it arrives as ::ffff:a.b.c.d (v1 and v2), and an
 * IPv4 client on a Unix listener keeps its IPv4 address. */
static void pp_cross_family(const char *bin, const char *listen, const char *ver)
{
	static struct h_server srv;
	static struct h_proxy p;
	static struct pp_seen seen = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct sockaddr_in client = { .sin_family = AF_INET, .sin_port = htons(4242) };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(443) };
	struct sockaddr_storage want = { 0 };
	uint8_t msg[PROXY_HDR_MAX + 64], back[64];
	char what[160];

	inet_pton(AF_INET, "203.0.113.9", &client.sin_addr);
	inet_pton(AF_INET, "198.51.100.1", &dst.sin_addr);
	if (listen[0] == '[') { /* the backend sees the client v4-mapped */
		struct sockaddr_in6 *w6 = (struct sockaddr_in6 *)&want;
		w6->sin6_family = AF_INET6;
		w6->sin6_port = client.sin_port;
		inet_pton(AF_INET6, "::ffff:203.0.113.9", &w6->sin6_addr);
	} else {
		memcpy(&want, &client, sizeof client);
	}
	pp_reset(&seen);
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, pp_conn, &seen);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--accept-proxy", "yes", "--proxy-protocol", ver, NULL };
	h_proxy_up(&p, bin, "auto", listen, backends, extra);

	size_t n = proxy_build(1, (struct sockaddr *)&client, sizeof client, (struct sockaddr *)&dst,
			       sizeof dst, msg);
	h_gen(0x59, 0, msg + n, 64);
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	H_CHECK(h_send_all(fd, msg, n + 64, h_now_ms() + 2000) == 0 &&
			h_recv_exact(fd, back, 64, h_now_ms() + 2000) == 0 && !memcmp(back, msg + n, 64),
		"%s: PROXY TCP4 header + 64 bytes: the echo did not come back intact", listen);
	close(fd);
	snprintf(what, sizeof what, "IPv4 client announced on listener %s, --proxy-protocol %s",
		 listen, ver);
	expect_src(&seen, ver[1] - '0', &want, what);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

Test(integ, proxy_protocol_ipv4_client_on_ipv6_listener, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	char unixp[200];

	for (int v = 1; v <= 2; v++) {
		const char *ver = v == 1 ? "v1" : "v2";
		if (h_ipv6_available())
			pp_cross_family(bin, "[::1]:0", ver);
		snprintf(unixp, sizeof unixp, "unix:%s/cross%d.sock", h_tmpdir(), v);
		pp_cross_family(bin, unixp, ver);
	}
	if (!h_ipv6_available())
		cr_log_warn("no IPv6 on this host: only the Unix listener case ran");
}
