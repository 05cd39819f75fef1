/* SPDX-License-Identifier: MIT */
/* on_backend_down (issue 24, item 1): what a backend's running sessions do
 * when it is marked down by its checks or removed by a reload.
 *   - close: an idle session gets an RST within a check interval of the
 *     mark; a session whose client had stopped reading a bulk answer first
 *     gets every byte splicer had read from the backend (more than it had
 *     written to the client before the mark: the bytes in flight), in
 *     order, then the RST; the backend sees its connection reset; each is
 *     counted (splicer_route_backend_gone_closed_total{cause="down"});
 *   - keep: the same sessions go on;
 *   - a reload that drops the backend closes the sessions of a route with
 *     close (cause "removed") and leaves those of a route with keep.
 * The backends greet with UP or DOWN (flag_backend.h) and the routes check
 * for expect:"UP", so a backend is marked down while its sessions stay. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flag_backend.h"

#define INTERVAL_MS 500

static const char *sock_path(void)
{
	static char path[300];
	snprintf(path, sizeof path, "%s/admin.sock", h_tmpdir());
	return path;
}

/* One route `web` on port with backends (space-separated), checked every
 * INTERVAL_MS for the UP greeting, fall 1. */
static const char *conf(int port, const char *backends, const char *engine, const char *action)
{
	static char text[2048];

	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nadmin = %s\nstats = 127.0.0.1:0\n\n"
		 "[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\nengine = %s\n"
		 "check = expect:\"UP\"\ncheck_interval = %dms\ncheck_timeout = 400ms\nrise = 1\nfall = 1\n"
		 "on_backend_down = %s\n",
		 sock_path(), port, backends, engine, INTERVAL_MS, action);
	return text;
}

/* A session through the proxy: connected, greeted by backend want. */
static int session(const struct h_addr *a, char want)
{
	int fd = h_connect(a, 2000);
	char t;

	H_CHECK(fd >= 0, "connect to the proxy: %s", strerror(errno));
	t = fb_greeting(fd);
	H_CHECK(t == want, "greeted by '%c', not by backend %c", t ? t : '-', want);
	return fd;
}

/* The largest bytes_down of the proxy's sessions (show sessions --json). */
static long long max_bytes_down(int adm)
{
	static char ans[65536];
	long long best = -1;

	h_admin_cmd(adm, "show sessions --json", ans, sizeof ans);
	for (const char *p = ans; (p = strstr(p, "\"bytes_down\":")); p++)
		best = atoll(p + 13) > best ? atoll(p + 13) : best;
	return best;
}

/* Waits until v() stays the same for 300 ms (the bulk answer has filled
 * every buffer on its way). Returns that value. */
static long long settled(int adm)
{
	long long last = -2, v;
	int64_t end = h_now_ms() + 10000, since = h_now_ms();

	while (h_now_ms() < end) {
		v = max_bytes_down(adm);
		if (v != last) {
			last = v;
			since = h_now_ms();
		} else if (h_now_ms() - since >= 300) {
			return v;
		}
		h_sleep_ms(50);
	}
	H_CHECK(0, "bytes_down kept moving for 10 s");
	return -1;
}

/* Reads what fd gives until it ends: the byte count, checked against
 * stream seed from offset off; *end is 0 (FIN), an errno, or ETIMEDOUT. */
static uint64_t read_to_end(int fd, uint64_t seed, uint64_t off, int *end, int64_t deadline)
{
	static char buf[65536];
	uint64_t got = 0;

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n > 0) {
			H_CHECK(h_gen_check(seed, off + got, buf, (size_t)n) == (size_t)n,
				"a wrong byte after %llu bytes", (unsigned long long)got);
			got += (uint64_t)n;
			continue;
		}
		if (n == 0) {
			*end = 0;
			return got;
		}
		if (h_now_ms() >= deadline) {
			*end = ETIMEDOUT;
			return got;
		}
		if (errno != EAGAIN && errno != EINTR) {
			*end = errno;
			return got;
		}
	}
}

static long long metric_gone(const struct h_proxy *p, const char *route, const char *cause)
{
	struct h_addr stats;
	char name[160];

	H_CHECK(h_stats_addr(p, &stats) == 0, "no stats address in the log");
	snprintf(name, sizeof name, "splicer_route_backend_gone_closed_total{route=\"%s\",cause=\"%s\"}",
		 route, cause);
	return h_metric(&stats, name);
}

#define STREAM_LEN (64 * H_MIB)

static void case_backend_down_close(const char *bin, const char *engine)
{
	struct flag_backend a;
	struct h_proxy p;
	int port = h_free_port(), idle, bulk, adm, end = -1;
	long long before;
	uint64_t got;

	fb_start(&a, 'A', 0);
	fb_proxy(&p, bin, "gone.conf", conf(port, a.text, engine, "close"));
	adm = h_admin_connect(sock_path());
	idle = session(&p.addr, 'A');
	H_CHECK(fb_echo_ok(idle, 1), "echo through the idle session");
	fb_stream_next(&a, STREAM_LEN, 42);
	bulk = session(&p.addr, 'A');
	H_CHECK(h_send_all(bulk, "S", 1, h_now_ms() + 2000) == 0, "ask for the stream");
	before = settled(adm); /* the client reads nothing: every buffer on the way fills */
	H_CHECK(before > 0 && before < (long long)STREAM_LEN, "bytes_down %lld before the mark", before);

	int64_t t0 = h_now_ms();
	fb_set_down(&a, 1);
	int r = h_expect_eof(idle, t0 + 5000);
	int64_t t_idle = h_now_ms() - t0;
	/* uring cannot see its send queues: it ends a cut stream with a FIN
	 * rather than risk an RST over unacknowledged bytes (doc/engines.md) */
	int uring = !strcmp(engine, "uring");
	H_CHECK(r == -ECONNRESET || (uring && r == 0), "the idle session ended with %d (%s), not an RST",
		r, strerror(-r));
	fprintf(stderr, "[backend_down_close %s] idle session reset %lld ms after the backend turned "
		"down (check interval %d ms)\n", engine, (long long)t_idle, INTERVAL_MS);
	/* the next check sees DOWN at most an interval later; the sweep follows
	 * at once (a loop turn) */
	H_CHECK(t_idle < INTERVAL_MS + 1000, "the idle session lasted %lld ms after the mark",
		(long long)t_idle);
	fb_wait_log(&p, "its sessions are closed", NULL, 1); /* the log is written apart: it may come later */

	/* the bulk session: what splicer held is delivered, then the RST */
	got = read_to_end(bulk, 42, 0, &end, h_now_ms() + 10000);
	fprintf(stderr, "[backend_down_close %s] bulk session: %lld bytes written to the client "
		"before the mark, %llu delivered in all, then %s\n", engine, before,
		(unsigned long long)got, end ? strerror(end) : "FIN");
	H_CHECK(end == ECONNRESET || (uring && !end), "the bulk session ended with %s, not an RST",
		end ? strerror(end) : "a FIN");
	H_CHECK(got > (uint64_t)before && got < STREAM_LEN,
		"delivered %llu bytes: the bytes in flight (over the %lld written before the mark) "
		"did not arrive", (unsigned long long)got, before);
	int64_t wait_end = h_now_ms() + 3000;
	while (atomic_load(&a.stream_end) == 0 && h_now_ms() < wait_end)
		h_sleep_ms(20);
	H_CHECK(atomic_load(&a.stream_end) < 0, "the backend's send did not fail (%d): no RST reached it",
		atomic_load(&a.stream_end));
	H_CHECK(metric_gone(&p, "web", "down") == 2, "closed sessions counted: %lld",
		metric_gone(&p, "web", "down"));
	close(idle);
	close(bulk);
	close(adm);
	h_proxy_down(&p);
	fb_stop(&a);
}

H_ENGINE_CASES(backend_down_close, 90)

static void case_backend_down_keep(const char *bin)
{
	struct flag_backend a;
	struct h_proxy p;
	int port = h_free_port(), idle;

	fb_start(&a, 'A', 0);
	fb_proxy(&p, bin, "gone.conf", conf(port, a.text, "auto", "keep"));
	idle = session(&p.addr, 'A');
	fb_set_down(&a, 1);
	fb_wait_log(&p, "is down", NULL, 1);
	H_CHECK(h_log_lines(&p, "its sessions are closed", NULL) == 0, "keep closed its sessions");
	h_sleep_ms(2 * INTERVAL_MS);
	H_CHECK(fb_echo_ok(idle, 2), "on_backend_down = keep: the session ended");
	H_CHECK(metric_gone(&p, "web", "down") == 0, "a session counted as closed");
	close(idle);
	h_proxy_down(&p);
	fb_stop(&a);
}

Test(integ, backend_down_keep, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_backend_down_keep(h_binary(0));
}

/* Two routes share backends A and B, one closing and one keeping; a reload
 * drops A from both. */
static const char *two_routes(int pc, int pk, const char *backends)
{
	static char text[2048];

	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\n\n"
		 "[route c]\nlisten = 127.0.0.1:%d\nbackend = %s\non_backend_down = close\n\n"
		 "[route k]\nlisten = 127.0.0.1:%d\nbackend = %s\non_backend_down = keep\n",
		 pc, backends, pk, backends);
	return text;
}

static void case_removed_by_reload(const char *bin)
{
	struct flag_backend a, b;
	struct h_proxy p;
	struct h_addr ak;
	int pc = h_free_port(), pk = h_free_port(), on_c, on_k;
	char both[80];

	fb_start(&a, 'A', 0);
	fb_start(&b, 'B', 0);
	snprintf(both, sizeof both, "%s %s", a.text, b.text);
	fb_proxy(&p, bin, "two.conf", two_routes(pc, pk, both));
	char where[64];
	snprintf(where, sizeof where, "127.0.0.1:%d", pk);
	H_CHECK(h_addr_parse(where, &ak) == 0, "address %s", where);
	on_c = fb_session_on(&p.addr, 'A');
	on_k = fb_session_on(&ak, 'A');
	h_conf_write("two.conf", two_routes(pc, pk, b.text));
	int64_t t0 = h_now_ms();
	H_CHECK(kill(p.pid, SIGHUP) == 0, "SIGHUP");
	int r = h_expect_eof(on_c, t0 + 5000);
	H_CHECK(r == -ECONNRESET, "route c's session on the removed backend: %d (%s)", r, strerror(-r));
	fprintf(stderr, "[backend_removed_by_reload] reset %lld ms after SIGHUP\n",
		(long long)(h_now_ms() - t0));
	H_CHECK(fb_echo_ok(on_k, 3), "route k (keep): its session on the removed backend ended");
	H_CHECK(metric_gone(&p, "c", "removed") == 1 && metric_gone(&p, "k", "removed") == 0,
		"counted: c %lld, k %lld", metric_gone(&p, "c", "removed"), metric_gone(&p, "k", "removed"));
	close(fb_session_on(&p.addr, 'B')); /* new sessions go to B */
	close(on_c);
	close(on_k);
	h_proxy_down(&p);
	fb_stop(&a);
	fb_stop(&b);
}

Test(integ, backend_removed_by_reload, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_removed_by_reload(h_binary(0));
}
