/* SPDX-License-Identifier: MIT */
/* Integration cases for the route histograms and the access log's extra
 * lines (issue 16, observability; src/core/route_hist.h, access_log.h):
 *   - sessions of known sizes and durations through an echo backend land in
 *     the buckets they must: bytes exactly, durations by the bounds the
 *     clients' own waits set; _count, the +Inf bucket and _sum agree, and
 *     the sum lies within what the bucket counts allow; a reload keeps the
 *     histograms and the next session adds to them;
 *   - a backend that answers 300 ms after the request puts the first-byte
 *     time above 0.25 s; a backend whose accept queue is full drops the
 *     proxy's first SYN, so its connect time is above 0.5 s (the SYN is
 *     sent again after the kernel's 1 s initial RTO);
 *   - log_interval = 1s writes interim lines with the bytes so far while a
 *     session is open, never earlier than an interval; log_connect = yes a
 *     connect line first; neither without the settings. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- helpers --------------------------------------------------------------- */

static const char *hg_write(const char *name, const char *text)
{
	static char path[300];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", h_tmpdir(), name);
	f = fopen(path, "we");
	H_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
	return path;
}

static char *hg_read(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	if (!f)
		return strdup("");
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
	if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)
		buf[0] = '\0';
	fclose(f);
	return buf;
}

static char *hg_scrape(const struct h_addr *stats)
{
	static char resp[512 * 1024];
	char *body;

	H_CHECK(h_metrics_get(stats, resp, sizeof resp, 3000) == 0, "GET /metrics failed: %.200s", resp);
	body = strstr(resp, "\r\n\r\n");
	H_CHECK(body, "no body in the /metrics answer");
	return strdup(body + 4);
}

/* One histogram of a scrape, for one label set. */
#define HG_MAX 24
struct hg_hist {
	double le[HG_MAX];
	unsigned long long cum[HG_MAX];
	int n;
	double sum;
	unsigned long long count;
};

/* Value of the line `prefix` + ` ` in body; asserts it is there. */
static double hg_value(const char *body, const char *prefix)
{
	size_t n = strlen(prefix);

	for (const char *l = body; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, prefix, n) && l[n] == ' ')
			return strtod(l + n + 1, NULL);
	H_CHECK(0, "no line %s in the scrape:\n%s", prefix, body);
	return -1;
}

/* Parses name's _bucket, _sum and _count lines for labels (`route="web"`),
 * and checks what holds for any histogram: bounds rising to +Inf,
 * cumulative counts never falling, +Inf = _count, and a _sum no smaller
 * than each observation's bucket's lower bound allows and no larger than
 * its upper bound does. */
static void hg_hist(const char *body, const char *name, const char *labels, struct hg_hist *h)
{
	char prefix[256], line[256];
	size_t pn;
	double lo = 0, hi = 0;

	memset(h, 0, sizeof *h);
	pn = (size_t)snprintf(prefix, sizeof prefix, "%s_bucket{%s,le=\"", name, labels);
	for (const char *l = body; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (strncmp(l, prefix, pn))
			continue;
		H_CHECK(h->n < HG_MAX, "%s{%s}: too many buckets", name, labels);
		h->le[h->n] = !strncmp(l + pn, "+Inf\"", 5) ? INFINITY : strtod(l + pn, NULL);
		const char *v = strstr(l + pn, "} ");
		H_CHECK(v, "bad bucket line in %s", name);
		h->cum[h->n] = strtoull(v + 2, NULL, 10);
		H_CHECK(h->n == 0 || (h->le[h->n] > h->le[h->n - 1] && h->cum[h->n] >= h->cum[h->n - 1]),
			"%s{%s}: bucket %d out of order (le %g after %g, count %llu after %llu)", name,
			labels, h->n, h->le[h->n], h->n ? h->le[h->n - 1] : 0, h->cum[h->n],
			h->n ? h->cum[h->n - 1] : 0);
		h->n++;
	}
	H_CHECK(h->n >= 2 && isinf(h->le[h->n - 1]), "%s{%s}: no buckets ending at +Inf:\n%s", name,
		labels, body);
	snprintf(line, sizeof line, "%s_sum{%s}", name, labels);
	h->sum = hg_value(body, line);
	snprintf(line, sizeof line, "%s_count{%s}", name, labels);
	h->count = (unsigned long long)hg_value(body, line);
	H_CHECK(h->count == h->cum[h->n - 1], "%s{%s}: _count %llu but the +Inf bucket %llu", name,
		labels, h->count, h->cum[h->n - 1]);
	for (int i = 0; i < h->n; i++) {
		unsigned long long k = h->cum[i] - (i ? h->cum[i - 1] : 0);
		lo += (double)k * (i ? h->le[i - 1] : 0);
		hi += k ? (double)k * h->le[i] : 0;
	}
	H_CHECK(h->sum >= lo * 0.999999 && h->sum <= hi * 1.000001,
		"%s{%s}: _sum %g outside what the buckets allow [%g, %g]", name, labels, h->sum, lo, hi);
}

/* The cumulative count at bound le (asserts the bound exists). */
static unsigned long long hg_le(const struct hg_hist *h, double le)
{
	for (int i = 0; i < h->n; i++)
		if (fabs(h->le[i] - le) <= le * 1e-9)
			return h->cum[i];
	H_CHECK(0, "no bucket le=%g", le);
	return 0;
}

/* One session through a: n bytes of stream `seed` up, the echo back, the
 * client's FIN, then EOF; hold_ms between the echo and the FIN. */
static void hg_session(const struct h_addr *a, uint64_t n, uint64_t seed, int hold_ms)
{
	struct h_xfer tx, rx;
	int fd = h_connect(a, 2000);

	H_CHECK(fd >= 0, "connect to %s: %s", a->text, strerror(errno));
	h_xfer_init(&rx, fd, seed, n, h_now_ms() + H_T(10000));
	rx.verify = 1;
	h_xfer_init(&tx, fd, seed, n, h_now_ms() + H_T(10000));
	H_CHECK(h_xfer_start_recv(&rx) == 0, "receiver thread");
	h_xfer_send(&tx);
	/* rx reads until EOF: wait for the echo itself before holding */
	for (int64_t end = h_now_ms() + H_T(10000); atomic_load(&rx.progress) < n && h_now_ms() < end;)
		h_sleep_ms(5);
	if (hold_ms)
		h_sleep_ms(hold_ms);
	H_CHECK(tx.err == 0 && shutdown(fd, SHUT_WR) == 0, "send %llu bytes: %s",
		(unsigned long long)n, strerror(tx.err));
	H_CHECK(h_xfer_join(&rx, 2000) == 0, "receiver did not finish");
	h_check_stream("echo", &tx, &rx, n);
	close(fd);
}

static void hg_wait_idle(const struct h_addr *stats, const char *route)
{
	char name[128];

	snprintf(name, sizeof name, "splicer_route_sessions_active{route=\"%s\"}", route);
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20))
		if (h_metric(stats, name) == 0)
			return;
	H_CHECK(0, "route %s: sessions still active after 5 s", route);
}

/* A backend that reads the request (4 bytes), waits 300 ms, answers 100
 * bytes and closes. */
#define HG_ANSWER 100
static void hg_late_conn(struct h_server *s, int fd, int index, void *arg)
{
	char buf[HG_ANSWER];

	(void)s, (void)index, (void)arg;
	h_set_timeouts(fd, 1000);
	if (h_recv_exact(fd, buf, 4, h_now_ms() + 2000) == 0) {
		h_sleep_ms(300);
		memset(buf, 'p', sizeof buf);
		h_send_all(fd, buf, sizeof buf, h_now_ms() + 2000);
	}
}

/* ping, the answer, EOF through a. */
static void hg_ping(const struct h_addr *a)
{
	char buf[HG_ANSWER];
	int fd = h_connect(a, 2000);

	H_CHECK(fd >= 0, "connect to %s: %s", a->text, strerror(errno));
	H_CHECK(h_send_all(fd, "ping", 4, h_now_ms() + 2000) == 0 &&
			h_recv_exact(fd, buf, sizeof buf, h_now_ms() + H_T(5000)) == 0 &&
			h_expect_eof(fd, h_now_ms() + H_T(5000)) == 0,
		"ping through %s", a->text);
	close(fd);
}

static int hg_count(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* ---- histograms against the sessions a test made ---------------------------- */

static const char *hg_conf(char *buf, size_t len, const char *engine, int p_web, int p_late,
			   int p_full, const char *echo, const char *late, const char *full,
			   const char *log, const char *extra)
{
	snprintf(buf, len,
		 "[global]\nworkers = 2\nengine = %s\nstats = 127.0.0.1:0\nlog = %s\n\n"
		 "[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\n%s\n"
		 "[route late]\nlisten = 127.0.0.1:%d\nbackend = %s\n\n"
		 "[route full]\nlisten = 127.0.0.1:%d\nbackend = %s\nconnect_timeout = 20s\n",
		 engine, log, p_web, echo, extra, p_late, late, p_full, full);
	return buf;
}

static void case_histograms(const char *bin, const char *engine)
{
	static struct h_server echo, late;
	static struct h_proxy p;
	struct h_addr stats, a_web, a_late, a_full, full;
	struct hg_hist h;
	char conf[2048], log[300], why[256], t[64];
	socklen_t flen = sizeof(struct sockaddr_storage);
	int p_web = h_free_port(), p_late = h_free_port(), p_full = h_free_port();

	snprintf(log, sizeof log, "%s/access.log", h_tmpdir());
	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	H_CHECK(h_server_start(&late, "127.0.0.1:0", 64, hg_late_conn, NULL) == 0, "late backend");
	/* a listener with backlog 0 and one connection in its queue: a SYN
	 * more is dropped (the accept queue is full) */
	struct sockaddr_storage fss;
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), filler;
	H_CHECK(h_addr_parse("127.0.0.1:0", &full) == 0 && lfd >= 0 &&
			bind(lfd, (struct sockaddr *)&full.ss, full.len) == 0 && listen(lfd, 0) == 0 &&
			getsockname(lfd, (struct sockaddr *)&fss, &flen) == 0,
		"full backend: %s", strerror(errno));
	h_addr_from(&full, (struct sockaddr *)&fss, flen);
	H_CHECK((filler = h_connect(&full, 2000)) >= 0, "filler connection: %s", strerror(errno));

	const char *path = hg_write("hist.conf",
				    hg_conf(conf, sizeof conf, engine, p_web, p_late, p_full,
					    echo.addr.text, late.addr.text, full.text, log, ""));
	const char *args[] = { "-c", path, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats address in %s", p.log);
	snprintf(t, sizeof t, "127.0.0.1:%d", p_web);
	H_CHECK(h_addr_parse(t, &a_web) == 0, "address");
	snprintf(t, sizeof t, "127.0.0.1:%d", p_late);
	H_CHECK(h_addr_parse(t, &a_late) == 0, "address");
	snprintf(t, sizeof t, "127.0.0.1:%d", p_full);
	H_CHECK(h_addr_parse(t, &a_full) == 0, "address");

	/* web: 5 x 1 KiB, 3 x 100 KiB, 10 bytes held 1.2 s */
	for (int i = 0; i < 5; i++)
		hg_session(&a_web, 1024, (uint64_t)i, 0);
	for (int i = 0; i < 3; i++)
		hg_session(&a_web, 100 * 1024, (uint64_t)(10 + i), 0);
	hg_session(&a_web, 10, 20, 1200);
	/* late: two requests answered after 300 ms */
	hg_ping(&a_late);
	hg_ping(&a_late);
	/* full: the proxy's first SYN is dropped; room is made after 300 ms,
	 * the SYN sent again after the initial RTO (1 s) is taken */
	int cfd = h_connect(&a_full, 2000);
	H_CHECK(cfd >= 0, "connect to route full: %s", strerror(errno));
	h_sleep_ms(300);
	int afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	H_CHECK(afd >= 0, "accept the filler: %s", strerror(errno));
	close(afd);
	close(filler);
	struct pollfd pf = { .fd = lfd, .events = POLLIN };
	H_CHECK(poll(&pf, 1, 10000) == 1 && (afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0,
		"the proxy's connection to the full backend never came");
	close(afd);
	H_CHECK(h_expect_eof(cfd, h_now_ms() + 5000) == 0, "route full: no EOF");
	close(cfd);
	hg_wait_idle(&stats, "web");
	hg_wait_idle(&stats, "late");
	hg_wait_idle(&stats, "full");

	char *body = hg_scrape(&stats);
	const uint64_t total = 5 * 1024 + 3 * 100 * 1024 + 10;
	static const char *const dirs[] = { "route=\"web\",direction=\"up\"",
					    "route=\"web\",direction=\"down\"" };
	for (int d = 0; d < 2; d++) {
		hg_hist(body, "splicer_route_session_bytes", dirs[d], &h);
		H_CHECK(h.count == 9 && h.sum == (double)total && hg_le(&h, 64) == 1 &&
				hg_le(&h, 256) == 1 && hg_le(&h, 1024) == 6 && hg_le(&h, 65536) == 6 &&
				hg_le(&h, 262144) == 9,
			"bytes %s: count %llu sum %.0f, le 64: %llu, 1024: %llu, 64k: %llu, 256k: %llu; "
			"expected 9, %llu, 1, 6, 6, 9", dirs[d], h.count, h.sum, hg_le(&h, 64),
			hg_le(&h, 1024), hg_le(&h, 65536), hg_le(&h, 262144), (unsigned long long)total);
	}
	hg_hist(body, "splicer_route_session_duration_seconds", "route=\"web\"", &h);
	H_CHECK(h.count == 9 && hg_le(&h, 1) <= 8 && h.sum >= 1.19,
		"duration: count %llu (9), le 1 s: %llu (at most 8: one session was held 1.2 s), sum "
		"%.3f (at least the 1.2 s one)", h.count, hg_le(&h, 1), h.sum);
	hg_hist(body, "splicer_route_connect_seconds", "route=\"web\"", &h);
	H_CHECK(h.count == 9 && hg_le(&h, 1) == 9,
		"connect to a listening loopback backend: count %llu (9), le 1 s: %llu (9)", h.count,
		hg_le(&h, 1));
	hg_hist(body, "splicer_route_first_byte_seconds", "route=\"web\"", &h);
	H_CHECK(h.count == 9, "first byte, echo: count %llu (9)", h.count);
	hg_hist(body, "splicer_route_first_byte_seconds", "route=\"late\"", &h);
	H_CHECK(h.count == 2 && hg_le(&h, 0.25) == 0 && h.sum >= 0.6,
		"first byte, a backend answering after 300 ms: count %llu (2), le 0.25: %llu (0), "
		"sum %.3f (at least 0.6)", h.count, hg_le(&h, 0.25), h.sum);
	hg_hist(body, "splicer_route_connect_seconds", "route=\"late\"", &h);
	H_CHECK(h.count == 2, "connect, late: count %llu (2)", h.count);
	hg_hist(body, "splicer_route_session_bytes", "route=\"late\",direction=\"up\"", &h);
	H_CHECK(h.count == 2 && h.sum == 8 && hg_le(&h, 64) == 2, "late, bytes up: count %llu (2), "
		"sum %.0f (8), le 64: %llu (2)", h.count, h.sum, hg_le(&h, 64));
	hg_hist(body, "splicer_route_session_bytes", "route=\"late\",direction=\"down\"", &h);
	H_CHECK(h.count == 2 && h.sum == 2 * HG_ANSWER && hg_le(&h, 64) == 0 && hg_le(&h, 256) == 2,
		"late, bytes down: count %llu (2), sum %.0f (%d), le 64: %llu (0), le 256: %llu (2)",
		h.count, h.sum, 2 * HG_ANSWER, hg_le(&h, 64), hg_le(&h, 256));
	hg_hist(body, "splicer_route_connect_seconds", "route=\"full\"", &h);
	H_CHECK(h.count == 1 && hg_le(&h, 0.5) == 0,
		"connect after a dropped SYN: count %llu (1), le 0.5: %llu (0)", h.count,
		hg_le(&h, 0.5));
	hg_hist(body, "splicer_route_first_byte_seconds", "route=\"full\"", &h);
	H_CHECK(h.count == 0, "first byte with no byte from the backend: count %llu (0)", h.count);
	free(body);

	/* without log_interval and log_connect: close lines only */
	char *text = hg_read(log);
	H_CHECK(hg_count(text, " event=close session=") == 12 && !strstr(text, "event=interim") &&
			!strstr(text, "event=connect"),
		"without log_interval and log_connect, one close line per session (12) expected:\n%s",
		text);
	free(text);

	/* a reload keeps the histograms; the next session adds to them */
	hg_write("hist.conf", hg_conf(conf, sizeof conf, engine, p_web, p_late, p_full, echo.addr.text,
				      late.addr.text, full.text, log, "balance = leastconn\n"));
	H_CHECK(kill(p.pid, SIGHUP) == 0, "SIGHUP");
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20))
		if (h_log_lines(&p, "SIGHUP: reloaded", NULL) == 1)
			break;
	H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", NULL) == 1, "the reload did not happen");
	hg_session(&a_web, 1024, 30, 0);
	hg_wait_idle(&stats, "web");
	body = hg_scrape(&stats);
	hg_hist(body, "splicer_route_session_duration_seconds", "route=\"web\"", &h);
	H_CHECK(h.count == 10, "after a reload and one more session: duration count %llu (10)",
		h.count);
	hg_hist(body, "splicer_route_session_bytes", dirs[0], &h);
	H_CHECK(h.count == 10 && h.sum == (double)(total + 1024) && hg_le(&h, 1024) == 7,
		"after a reload: bytes up count %llu (10), sum %.0f, le 1024 %llu (7)", h.count, h.sum,
		hg_le(&h, 1024));
	free(body);
	h_proxy_down(&p);
	h_server_stop(&echo);
	h_server_stop(&late);
	close(lfd);
}

/* auto (copy, then splice), and uring, which drives its sessions itself
 * and reports bytes through session_io_result rather than dir_pump */
Test(integ, histograms_match_sessions_a_test_made, .init = h_init, .fini = h_fini, .timeout = 120)
{
	case_histograms(h_binary(0), "auto");
}

Test(integ, histograms_match_sessions_a_test_made_asan, .init = h_init, .fini = h_fini,
     .timeout = 180)
{
	case_histograms(h_binary(1), "auto");
}

Test(integ, histograms_match_sessions_a_test_made_uring, .init = h_init, .fini = h_fini,
     .timeout = 120)
{
	case_histograms(h_binary(0), "uring");
}

/* ---- interim and connect lines ----------------------------------------------- */

/* The access log's lines of the session whose client port is port, with
 * event=event (a malloc'd copy of the log; the lines stay in it, cut). */
static int hg_lines(const char *path, int port, const char *event, char **lines, int max,
		    char **keep)
{
	char needle[64], ev[32];
	int n = 0;

	*keep = hg_read(path);
	snprintf(needle, sizeof needle, " client=127.0.0.1:%d ", port);
	snprintf(ev, sizeof ev, " event=%s ", event);
	for (char *l = *keep, *nl; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		if (strstr(l, needle) && strstr(l, ev) && n < max)
			lines[n++] = l;
	}
	return n;
}

static unsigned long long hg_field(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	H_CHECK(p, "no %s in: %s", key, line);
	return strtoull(p + strlen(key), NULL, 10);
}

static const char *hg_text_field(const char *line, const char *key, char *buf, size_t len)
{
	const char *p = strstr(line, key);

	H_CHECK(p, "no %s in: %s", key, line);
	p += strlen(key);
	snprintf(buf, len, "%.*s", (int)strcspn(p, " \n"), p);
	return buf;
}

/* Waits until the session on port has n interim lines. */
static void hg_wait_interim(const char *log, int port, int n)
{
	char *lines[16], *keep;

	for (int64_t end = h_now_ms() + H_T(5000); h_now_ms() < end; h_sleep_ms(20)) {
		int k = hg_lines(log, port, "interim", lines, 16, &keep);
		free(keep);
		if (k >= n)
			return;
	}
	H_CHECK(0, "no interim line %d for client port %d within 5 s", n, port);
}

static void case_interim(const char *bin)
{
	static struct h_server echo;
	static struct h_proxy p;
	char conf[1024], log[300], why[256], buf[512], id[40], id2[40], *keep, *lines[16];
	struct h_addr a;
	struct sockaddr_in me;
	socklen_t mlen = sizeof me;
	int port = h_free_port();

	snprintf(log, sizeof log, "%s/access.log", h_tmpdir());
	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0, "echo backend");
	snprintf(conf, sizeof conf,
		 "[global]\nworkers = 2\nlog = %s\nlog_interval = 1s\nlog_connect = yes\n\n"
		 "[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\n", log, port, echo.addr.text);
	const char *args[] = { "-c", hg_write("interim.conf", conf), NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	snprintf(why, sizeof why, "127.0.0.1:%d", port);
	H_CHECK(h_addr_parse(why, &a) == 0, "address");

	int fd = h_connect(&a, 2000);
	H_CHECK(fd >= 0 && getsockname(fd, (struct sockaddr *)&me, &mlen) == 0, "connect: %s",
		strerror(errno));
	int cport = ntohs(me.sin_port);
	/* 100 bytes, the first interim line; 200 more, the second; then close */
	memset(buf, 'a', sizeof buf);
	H_CHECK(h_send_all(fd, buf, 100, h_now_ms() + 2000) == 0 &&
			h_recv_exact(fd, buf, 100, h_now_ms() + 2000) == 0, "echo 100");
	hg_wait_interim(log, cport, 1);
	H_CHECK(h_send_all(fd, buf, 200, h_now_ms() + 2000) == 0 &&
			h_recv_exact(fd, buf, 200, h_now_ms() + 2000) == 0, "echo 200");
	hg_wait_interim(log, cport, 2);
	H_CHECK(shutdown(fd, SHUT_WR) == 0 && h_expect_eof(fd, h_now_ms() + 5000) == 0, "EOF");
	close(fd);

	char *close_line[2];
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20)) {
		int k = hg_lines(log, cport, "close", close_line, 2, &keep);
		if (k)
			break;
		free(keep);
		keep = NULL;
	}
	H_CHECK(keep, "no close line for client port %d", cport);
	unsigned long long total_ms = hg_field(close_line[0], " duration_ms=");
	hg_text_field(close_line[0], " session=", id, sizeof id);
	H_CHECK(hg_field(close_line[0], " up=") == 300 && strstr(close_line[0], " reason=done "),
		"close line: %s", close_line[0]);
	free(keep);

	int n = hg_lines(log, cport, "interim", lines, 16, &keep);
	H_CHECK(n >= 2 && (unsigned long long)n * 1000 <= total_ms,
		"%d interim lines in a session of %llu ms with log_interval 1s: at least 2, and never "
		"one before its interval", n, total_ms);
	for (int i = 0; i < n; i++) {
		unsigned long long ms = hg_field(lines[i], " duration_ms=");
		H_CHECK(ms >= (unsigned long long)(i + 1) * 1000 && strstr(lines[i], " reason=interim ") &&
				strstr(lines[i], " error=- ended_by=- event=interim ") &&
				!strcmp(hg_text_field(lines[i], " session=", id2, sizeof id2), id),
			"interim line %d (session %s, due at %d ms): %s", i + 1, id, (i + 1) * 1000,
			lines[i]);
	}
	H_CHECK(hg_field(lines[0], " up=") == 100 && hg_field(lines[0], " down=") == 100 &&
			hg_field(lines[1], " up=") == 300 && hg_field(lines[1], " down=") == 300,
		"interim lines' bytes so far: 100 then 300 expected:\n%s\n%s", lines[0], lines[1]);
	free(keep);

	n = hg_lines(log, cport, "connect", lines, 16, &keep);
	H_CHECK(n == 1 && strstr(lines[0], " up=0 down=0 ") && strstr(lines[0], " reason=connect ") &&
			!strcmp(hg_text_field(lines[0], " session=", id2, sizeof id2), id) &&
			strspn(hg_text_field(lines[0], " connect_ms=", id2, sizeof id2), "0123456789") ==
				strlen(id2) && id2[0],
		"one connect line with no bytes and a connect time expected (%d):\n%s", n,
		n ? lines[0] : "");
	char *log_text = hg_read(log);
	H_CHECK(strstr(log_text, "event=connect") < strstr(log_text, "event=interim") &&
			strstr(log_text, "event=interim") < strstr(log_text, "event=close"),
		"connect, interim and close lines out of order:\n%s", log_text);
	free(log_text);
	free(keep);
	h_proxy_down(&p);
	h_server_stop(&echo);
}

Test(integ, access_log_interim_and_connect_lines, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_interim(h_binary(0));
}

Test(integ, access_log_interim_and_connect_lines_asan, .init = h_init, .fini = h_fini,
     .timeout = 90)
{
	case_interim(h_binary(1));
}
