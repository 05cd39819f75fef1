/* SPDX-License-Identifier: MIT */
/* The control endpoints beside clients that do not play along (the
 * hardening issue's "the stats endpoint blocks up to 2 s per client that
 * does not read"): each endpoint is one thread, and it must serve every
 * client while one is slow.
 *   - stats, on a Unix socket and on TCP: 8 clients ask for /metrics (about
 *     390 KB here: 40 routes of 4 backends, more than a socket buffer takes),
 *     or for the status page `/` (larger), and never read; /health answers within PROMPT_MS all the same, a
 *     well-behaved scrape gets the whole of /metrics, and the 8 are dropped
 *     as slow readers (counted), each with a cut answer;
 *   - admin: clients that pipeline `show backends --json` and never read,
 *     clients that send half a line and stall, an oversized line, then a
 *     flood of 100 silent connections: `show` by another client (raw, and
 *     `splicer ctl`) answers within PROMPT_MS throughout, and the flood's
 *     evictions are counted.
 * The figures measured are printed (stderr). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUTES    40
#define STALLED   8
#define PROMPT_MS 300 /* the promise is "at once" (well under 100 ms); this holds on a loaded
			 2-CPU machine, and the unfixed endpoint takes seconds per stalled client */
#define METRICS_MAX (2 * H_MIB)

/* ROUTES sni routes on one listener, each with 4 backends (nothing listens
 * there: no session is made): a /metrics of about 10 KB per route. */
static const char *many_routes_conf(const char *stats, const char *admin)
{
	static char text[ROUTES * 160 + 512];
	size_t n = 0;
	int port = h_free_port();

	n += (size_t)snprintf(text + n, sizeof text - n, "[global]\nworkers = 1\nstats = %s\n", stats);
	if (admin)
		n += (size_t)snprintf(text + n, sizeof text - n, "admin = %s\n", admin);
	for (int i = 0; i < ROUTES; i++)
		n += (size_t)snprintf(text + n, sizeof text - n,
				      "[route r%02d]\nlisten = 127.0.0.1:%d\nsni = r%d.example.com\n"
				      "backend = 127.0.0.1:1 127.0.0.1:2 127.0.0.1:3 127.0.0.1:4\n",
				      i, port, i);
	H_CHECK(n < sizeof text, "config text too long");
	return h_conf_write("many.conf", text);
}

/* A client whose receive side is as small as the kernel allows (and, on
 * TCP, whose segments are small, so the proxy's send buffer stays small
 * too): an answer of any size stays mostly with the proxy. */
static int stalled_connect(const struct h_addr *a)
{
	int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), small = 4096, mss = 536;

	H_CHECK(fd >= 0, "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
	if (a->ss.ss_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss);
	H_CHECK(connect(fd, (const struct sockaddr *)&a->ss, a->len) == 0, "connect %s: %s", a->text,
		strerror(errno));
	h_set_timeouts(fd, 200);
	return fd;
}

/* Waits (up to ms) until every fd has bytes to read; on an endpoint that
 * answers one client at a time, only the first ever has. */
static void wait_answers_started(const int *fd, int n, int ms)
{
	for (int64_t end = h_now_ms() + ms; h_now_ms() < end; h_sleep_ms(10)) {
		int all = 1;
		for (int i = 0; i < n && all; i++) {
			int q = 0;
			all = ioctl(fd[i], FIONREAD, &q) == 0 && q > 0;
		}
		if (all)
			return;
	}
}

/* An HTTP answer in buf is whole: its head, and a body of its
 * Content-Length. Returns the body, or NULL. */
static const char *http_whole(const char *buf, size_t n)
{
	const char *body = strstr(buf, "\r\n\r\n"), *cl = strstr(buf, "Content-Length: ");
	size_t want;

	if (!body || !cl || cl > body || sscanf(cl + 16, "%zu", &want) != 1)
		return NULL;
	body += 4;
	return (size_t)(buf + n - body) == want ? body : NULL;
}

/* GET path (until the proxy closes, within limit_ms): the answer in buf,
 * and how long it took from the connect on; -1 when it was not whole. */
static int64_t timed_get(const struct h_addr *a, const char *path, char *buf, size_t cap,
			 int limit_ms, size_t *got)
{
	char req[128];
	int64_t t0 = h_now_ms();
	int fd = h_connect(a, limit_ms);
	size_t n = 0;

	buf[0] = '\0';
	if (fd >= 0) {
		h_set_timeouts(fd, 50);
		snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
		if (h_send_all(fd, req, strlen(req), t0 + limit_ms) == 0)
			n = h_recv_all(fd, buf, cap, t0 + limit_ms);
		close(fd);
	}
	if (got)
		*got = n;
	return http_whole(buf, n) ? h_now_ms() - t0 : -1;
}

/* One sample of a whole scrape (the new families are near the end of a
 * 390 KB body: h_metric reads 256 KB), or -1. */
static long long dropped(const struct h_addr *stats, const char *endpoint, const char *reason)
{
	char *buf = malloc(METRICS_MAX), name[160];
	long long v = -1;
	size_t n;

	H_CHECK(buf, "out of memory");
	snprintf(name, sizeof name,
		 "\nsplicer_control_clients_dropped_total{endpoint=\"%s\",reason=\"%s\"} ", endpoint,
		 reason);
	if (timed_get(stats, "/metrics", buf, METRICS_MAX, 3000, &n) >= 0) {
		const char *l = strstr(buf, name);
		if (l)
			v = atoll(l + strlen(name));
	}
	free(buf);
	return v;
}

/* Waits (up to ms) for a drop counter to reach want; returns its last value. */
static long long dropped_reaches(const struct h_addr *stats, const char *endpoint,
				 const char *reason, long long want, int ms)
{
	long long v = -1;

	for (int64_t end = h_now_ms() + ms; h_now_ms() < end; h_sleep_ms(100))
		if ((v = dropped(stats, endpoint, reason)) >= want)
			break;
	return v;
}

/* ---- stats ----------------------------------------------------------------- */

/* STALLED clients ask for path (/metrics, or / the status page: larger)
 * and never read. */
static void case_stalled_scrapers(const char *bin, int unix_socket, const char *path)
{
	static struct h_proxy p;
	static char where[300], buf[METRICS_MAX];
	struct h_addr stats;
	int fd[STALLED];
	char err[512];
	size_t full, n;

	if (unix_socket)
		snprintf(where, sizeof where, "unix:%s/stats.sock", h_tmpdir());
	else
		snprintf(where, sizeof where, "127.0.0.1:0");
	const char *args[] = { "-c", many_routes_conf(where, NULL), NULL };
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "start: %s", err);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "stats address");
	H_CHECK(timed_get(&stats, path, buf, sizeof buf, 3000, &full) >= 0 && full > 300 * 1000,
		"%s before the stalled clients: %zu bytes, whole: %s (more than a socket "
		"buffer takes is the point)", path, full, http_whole(buf, full) ? "yes" : "no");
	fprintf(stderr, "endpoints: GET %s of %d routes x 4 backends: %zu bytes\n", path, ROUTES, full);

	char req[64];
	snprintf(req, sizeof req, "GET %s HTTP/1.1\r\n\r\n", path);
	for (int i = 0; i < STALLED; i++) {
		fd[i] = stalled_connect(&stats);
		H_CHECK(h_send_all(fd[i], req, strlen(req), h_now_ms() + 1000) == 0,
			"stalled client %d: send", i);
	}
	/* each answer is drawn before it is queued (a page under ASan: some 150 ms):
	 * /health comes once they all are, slow readers every one */
	wait_answers_started(fd, STALLED, 5000);

	int64_t took = timed_get(&stats, "/health", buf, sizeof buf, 3000, &n);
	fprintf(stderr, "endpoints: %s stats, %d clients not reading %s: /health in %lld ms\n",
		unix_socket ? "unix" : "tcp", STALLED, path, (long long)took);
	H_CHECK(took >= 0 && !strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) &&
			!strcmp(http_whole(buf, n), "ok\n"),
		"/health with %d clients not reading their %s: no whole 200 answer within 3 s "
		"(got %zu bytes: '%.40s')", STALLED, path, n, buf);
	H_CHECK(took < PROMPT_MS, "/health took %lld ms with %d clients not reading their %s "
				  "(limit %d ms)", (long long)took, STALLED, path, PROMPT_MS);
	if (strcmp(path, "/metrics")) {
		took = timed_get(&stats, path, buf, sizeof buf, 3000, &n);
		fprintf(stderr, "endpoints: and a whole %s (%zu bytes) in %lld ms\n", path, n, (long long)took);
		H_CHECK(took >= 0 && took < 1000 && strstr(buf, "</html>"),
			"a well-behaved reader of %s beside the stalled ones: %zu bytes, whole: %s, in "
			"%lld ms", path, n, http_whole(buf, n) ? "yes" : "no", (long long)took);
	}

	took = timed_get(&stats, "/metrics", buf, sizeof buf, 3000, &n);
	fprintf(stderr, "endpoints: and a whole /metrics (%zu bytes) in %lld ms\n", n, (long long)took);
	H_CHECK(took >= 0 && took < 1000 && strstr(buf, "\nsplicer_pipes{state=\"free\"} "),
		"a well-behaved scrape beside the stalled ones: %zu bytes, whole: %s, in %lld ms", n,
		http_whole(buf, n) ? "yes" : "no", (long long)took);

	/* the stalled ones are dropped after 2 s without taking a byte, each
	 * with what its socket took: less than the answer */
	long long v = dropped_reaches(&stats, "stats", "slow_reader", STALLED, 6000);
	H_CHECK(v == STALLED, "slow readers dropped: %lld, expected %d", v, STALLED);
	for (int i = 0; i < STALLED; i++) {
		size_t got = h_recv_all(fd[i], buf, sizeof buf, h_now_ms() + 2000);
		H_CHECK(got > 0 && got < full && !http_whole(buf, got) &&
				h_expect_eof(fd[i], h_now_ms() + 500) == 0,
			"stalled client %d: %zu bytes of a %zu-byte answer, then EOF expected", i, got, full);
		close(fd[i]);
	}
	H_CHECK(dropped(&stats, "stats", "request_timeout") == 0 &&
			dropped(&stats, "stats", "evicted") == 0,
		"only slow readers were dropped");
	h_proxy_down(&p);
}

Test(integ, endpoints_stats_unix_stalled_readers_delay_no_probe, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	case_stalled_scrapers(h_binary(0), 1, "/metrics");
}
Test(integ, endpoints_stats_unix_stalled_readers_delay_no_probe_asan, .init = h_init,
     .fini = h_fini, .timeout = 90)
{
	case_stalled_scrapers(h_binary(1), 1, "/metrics");
}
Test(integ, endpoints_stats_tcp_stalled_readers_delay_no_probe, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	case_stalled_scrapers(h_binary(0), 0, "/metrics");
}
/* the status page: larger than /metrics, drawn on the same thread */
Test(integ, endpoints_stats_tcp_stalled_page_readers_delay_no_probe, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	case_stalled_scrapers(h_binary(0), 0, "/");
}
Test(integ, endpoints_stats_unix_stalled_page_readers_delay_no_probe_asan, .init = h_init,
     .fini = h_fini, .timeout = 90)
{
	case_stalled_scrapers(h_binary(1), 1, "/");
}

/* ---- admin ----------------------------------------------------------------- */

static int unix_connect(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	H_CHECK(strlen(path) < sizeof sun.sun_path, "socket path too long");
	memcpy(sun.sun_path, path, strlen(path) + 1);
	H_CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0, "connect %s: %s",
		path, strerror(errno));
	h_set_timeouts(fd, 50);
	return fd;
}

/* Sends line on a new connection and reads its answer to the empty line;
 * returns how long it took (connect included), or -1 without a whole
 * answer within limit_ms. */
static int64_t timed_show(const char *path, const char *line, char *buf, size_t cap, int limit_ms)
{
	int64_t t0 = h_now_ms(), end = t0 + limit_ms;
	int fd = unix_connect(path);
	size_t n = 0;

	buf[0] = '\0';
	if (h_send_all(fd, line, strlen(line), end) == 0)
		while (n < cap - 1 && h_now_ms() < end && !(n >= 2 && !strcmp(buf + n - 2, "\n\n"))) {
			ssize_t k = recv(fd, buf + n, cap - 1 - n, 0);
			if (k < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (k <= 0)
				break;
			n += (size_t)k;
			buf[n] = '\0';
		}
	close(fd);
	return n >= 2 && !strcmp(buf + n - 2, "\n\n") ? h_now_ms() - t0 : -1;
}

static void case_admin_hostile(const char *bin)
{
	static struct h_proxy p;
	static char sock[300], buf[256 * 1024], lines[4000];
	static int flood[100];
	struct h_addr stats;
	int reader[4], half[4], big;
	char err[512], *out = NULL, *errout = NULL;
	size_t n = 0;

	snprintf(sock, sizeof sock, "%s/admin.sock", h_tmpdir());
	const char *args[] = { "-c", many_routes_conf("127.0.0.1:0", sock), NULL };
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "start: %s", err);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "stats address");

	/* readers that never read: 180 `show backends --json` (about 35 KB
	 * each here) in one go, 6 MB of answers for a socket that takes some
	 * 200 KB */
	while (n + 22 < sizeof lines)
		n += (size_t)snprintf(lines + n, sizeof lines - n, "show backends --json\n");
	for (int i = 0; i < 4; i++) {
		reader[i] = unix_connect(sock);
		H_CHECK(h_send_all(reader[i], lines, n, h_now_ms() + 1000) == 0, "stalled reader %d: send", i);
	}
	/* half a line each, and then nothing */
	for (int i = 0; i < 4; i++) {
		half[i] = unix_connect(sock);
		H_CHECK(h_send_all(half[i], "show rou", 8, h_now_ms() + 1000) == 0, "half-liner %d", i);
	}
	wait_answers_started(reader, 4, 1000);

	int64_t took = timed_show(sock, "show process\n", buf, sizeof buf, 3000);
	fprintf(stderr, "endpoints: admin with 4 readers not reading and 4 half lines: show process "
			"in %lld ms\n", (long long)took);
	H_CHECK(took >= 0 && !strncmp(buf, "PID ", 4), "show process beside 4 stalled readers and 4 "
		"half lines: no whole answer within 3 s ('%.60s')", buf);
	H_CHECK(took < PROMPT_MS, "show process took %lld ms beside 4 stalled readers and 4 half "
				  "lines (limit %d ms)", (long long)took, PROMPT_MS);

	/* an oversized line: its error at once, then the close */
	static char x[5000];
	memset(x, 'x', sizeof x);
	int64_t t0 = h_now_ms();
	big = unix_connect(sock);
	h_send_all(big, x, sizeof x, t0 + 1000);
	size_t got = h_recv_all(big, buf, sizeof buf, t0 + 3000);
	took = h_now_ms() - t0;
	close(big);
	H_CHECK(got && strstr(buf, "error: a line longer than 4095 bytes\n\n") && took < 1000,
		"an oversized line: '%s' after %lld ms", buf, (long long)took);

	/* splicer ctl itself: its process start is in the figure */
	t0 = h_now_ms();
	int st = h_run_capture(bin, (const char *const[]){ "ctl", "-s", sock, "show", "routes", NULL },
			       5000, &out, &errout);
	took = h_now_ms() - t0;
	fprintf(stderr, "endpoints: splicer ctl show routes (a process start included) in %lld ms\n",
		(long long)took);
	H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && out && strstr(out, "r39 ") && took < 2000,
		"ctl show routes beside stalled clients: exit %d after %lld ms, '%s' / '%s'", st,
		(long long)took, out ? out : "", errout ? errout : "");
	free(out);
	free(errout);

	/* a flood of silent connections: every slot taken, over and over */
	for (int i = 0; i < 100; i++)
		flood[i] = unix_connect(sock);
	took = timed_show(sock, "show routes\n", buf, sizeof buf, 3000);
	fprintf(stderr, "endpoints: admin with 100 silent connections more: show routes in %lld ms\n",
		(long long)took);
	H_CHECK(took >= 0 && took < PROMPT_MS && !strncmp(buf, "ROUTE ", 6),
		"show routes beside a flood of 100 connections: %lld ms ('%.60s')", (long long)took, buf);
	/* 108 clients and a probe for 16 slots: the stalled and the half
	 * lines went first (they moved nothing for the longest) */
	long long ev = dropped(&stats, "admin", "evicted");
	H_CHECK(ev >= 100 + 8 - 16, "admin clients evicted: %lld, expected at least %d", ev, 100 + 8 - 16);
	for (int i = 0; i < 4; i++) {
		H_CHECK(h_expect_eof(half[i], h_now_ms() + 1000) == 0, "half-liner %d: evicted, not closed", i);
		close(reader[i]);
		close(half[i]);
	}
	for (int i = 0; i < 100; i++)
		close(flood[i]);
	H_CHECK(h_proxy_alive(&p), "the proxy died");
	h_proxy_down(&p);
}

Test(integ, endpoints_admin_stalled_half_lines_and_flood_delay_no_show, .init = h_init,
     .fini = h_fini, .timeout = 60)
{
	case_admin_hostile(h_binary(0));
}
Test(integ, endpoints_admin_stalled_half_lines_and_flood_delay_no_show_asan, .init = h_init,
     .fini = h_fini, .timeout = 90)
{
	case_admin_hostile(h_binary(1));
}
