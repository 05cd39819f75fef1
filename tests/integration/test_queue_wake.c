/* SPDX-License-Identifier: MIT */
/* A client waiting for a backend slot (maxconn, queue_timeout) is served as
 * soon as capacity appears, by the backend that brought it, whatever
 * brought it: a backend enabled through the admin socket, a backend its
 * health checks mark up, a reload that adds a backend or raises a maxconn
 * (the waiter moves to the new generation's route; one the new allow/deny
 * refuses is reset). Each case holds every slot with one client, queues a
 * second, makes room and asserts the second is served within 500 ms of the
 * event, where queue_timeout (10 s) is far away; the time is printed.
 * (A weight change is no such event: weights are 1..256, so it never makes
 * a backend usable, and a waiter tries every backend.) The DNS case, an
 * address added to a resolve= name, is in test_dns.c. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PROMPT_MS 500 /* event to waiter served; queue_timeout is 10 s */
#define QLEN "splicer_route_queue_length{route=\"q\"}"

static const char *sock_path(void)
{
	static char path[300];
	snprintf(path, sizeof path, "%s/admin.sock", h_tmpdir());
	return path;
}

/* A config with stats and the admin socket, route q on 127.0.0.1:port with
 * `backends` and `more` lines. */
static const char *conf(int port, const char *backends, const char *more)
{
	static char text[2048];

	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\nadmin = %s\n"
		 "[route q]\nlisten = 127.0.0.1:%d\nbackend = %s\nqueue_timeout = 10s\n%s",
		 sock_path(), port, backends, more);
	return h_conf_write("q.conf", text);
}

static void proxy_up(struct h_proxy *p, const char *bin, const char *path, struct h_addr *stats)
{
	const char *args[] = { "-c", path, NULL };
	char err[512];

	H_CHECK(h_proxy_start(p, bin, args, err, sizeof err) == 0, "proxy -c %s: %s", path, err);
	H_CHECK(h_stats_addr(p, stats) == 0, "stats address");
}

/* One command through the admin socket (not an error): no process to
 * start between the test's clock and the command. */
static void admin(const char *line)
{
	char ans[4096];
	int fd = h_admin_connect(sock_path());

	h_admin_cmd(fd, line, ans, sizeof ans);
	close(fd);
}

/* A client of the proxy from src (127.0.0.x); its reads look at their
 * deadline every 20 ms. */
static int client(int port, const char *src)
{
	return h_connect_from(port, src, 20);
}

/* The backend's tag on fd within ms, or 0 (closed, reset, or nothing). */
static char tag_within(int fd, int ms)
{
	char c = 0;

	return h_recv_exact(fd, &c, 1, h_now_ms() + ms) == 0 ? c : 0;
}

static long long metric_becomes(const struct h_addr *stats, const char *name, long long want, int ms)
{
	long long v = h_metric(stats, name);

	for (int64_t end = h_now_ms() + ms; v != want && h_now_ms() < end; h_sleep_ms(10))
		v = h_metric(stats, name);
	return v;
}

/* A client that waits: every slot is held; asserts it is queued (the
 * queue length reaches want) and not served. */
static int waiter(const struct h_addr *stats, int port, const char *src, long long want)
{
	int fd = client(port, src);

	H_CHECK(metric_becomes(stats, QLEN, want, 3000) == want, "queue length %lld, not %lld",
		h_metric(stats, QLEN), want);
	H_CHECK(tag_within(fd, 100) == 0, "a client was served with every slot held");
	return fd;
}

/* The waiter's backend tag: served by `want` within PROMPT_MS (plus
 * allow_ms, the event's own delay) of t_event; 3 s to see what happens
 * instead. */
static void served_promptly(int fd, char want, int64_t t_event, int allow_ms, const char *event)
{
	char got = tag_within(fd, 3000);
	int64_t t = h_now_ms() - t_event;

	H_CHECK(got == want, "%s: the waiting client %s (after %lld ms), not served by backend %c",
		event, got ? "went to another backend" : "was not served", (long long)t, want);
	H_CHECK(t < PROMPT_MS + allow_ms, "%s: the waiting client was served %lld ms after it "
		"(bound %d ms)", event, (long long)t, PROMPT_MS + allow_ms);
	fprintf(stderr, "[queue_wake] %s: waiting client served by %c %lld ms after it\n", event, want,
		(long long)t);
}

/* ---- a backend enabled through the admin socket ------------------------ */

static void case_enable(const char *bin)
{
	struct h_tag_server a, b;
	struct h_proxy p;
	struct h_addr stats;
	char backends[256];
	int port = h_free_port();

	h_tag_start(&a, 'a', 1, 0);
	h_tag_start(&b, 'b', 1, 0);
	snprintf(backends, sizeof backends, "127.0.0.1:%d maxconn=1 127.0.0.1:%d maxconn=1", a.port,
		 b.port);
	proxy_up(&p, bin, conf(port, backends, ""), &stats);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "backend q 127.0.0.1:%d disable", b.port);
	admin(cmd);
	int c1 = client(port, "127.0.0.1");
	H_CHECK(tag_within(c1, 3000) == 'a', "the first client was not served by a");
	int c2 = waiter(&stats, port, "127.0.0.1", 1);
	snprintf(cmd, sizeof cmd, "backend q 127.0.0.1:%d enable", b.port);
	int64_t t0 = h_now_ms();
	admin(cmd);
	served_promptly(c2, 'b', t0, 0, "backend q B enable (admin socket)");
	H_CHECK(metric_becomes(&stats, QLEN, 0, 1000) == 0, "the queue is not empty");
	H_CHECK(h_metric(&stats, "splicer_route_queue_served_total{route=\"q\"}") == 1,
		"served from the queue: %lld", h_metric(&stats, "splicer_route_queue_served_total{route=\"q\"}"));
	close(c1);
	close(c2);
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&b);
}

Test(integ, queue_wakes_on_ctl_enable, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_enable(h_binary(0));
}

Test(integ, queue_wakes_on_ctl_enable_asan, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_enable(h_binary(1));
}

/* ---- a backend its health checks mark up --------------------------------- */

Test(integ, queue_wakes_on_health_up, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	struct h_tag_server a, b;
	struct h_refused dead;
	struct h_proxy p;
	struct h_addr stats;
	char backends[256];
	int port = h_free_port();

	h_tag_start(&a, 'a', 1, 0);
	H_CHECK(h_refused_open(&dead) == 0, "a refused port");
	snprintf(backends, sizeof backends, "127.0.0.1:%d maxconn=1 %s maxconn=1", a.port, dead.text);
	proxy_up(&p, bin,
		 conf(port, backends, "check = tcp\ncheck_interval = 100ms\nrise = 1\nfall = 1\n"),
		 &stats);
	int64_t until = h_now_ms() + 3000;
	while (!h_log_lines(&p, dead.text, "is down", NULL) && h_now_ms() < until)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(&p, dead.text, "is down", NULL) == 1, "the refused backend not marked down");
	int c1 = client(port, "127.0.0.1");
	H_CHECK(tag_within(c1, 3000) == 'a', "the first client was not served by a");
	int c2 = waiter(&stats, port, "127.0.0.1", 1);
	/* the backend comes up: its next check (every 100 ms) marks it up */
	h_refused_close(&dead);
	int64_t t0 = h_now_ms();
	h_tag_start(&b, 'b', 1, dead.port);
	served_promptly(c2, 'b', t0, 100 /* the next check */, "backend listening (check_interval 100 ms)");
	H_CHECK(h_log_lines(&p, dead.text, "is up", NULL) == 1, "no 'is up' line");
	close(c1);
	close(c2);
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&b);
}

/* ---- reloads: a backend added, a maxconn raised, a source denied -------- */

/* SIGHUP, and the count-th reload's line within 5 s; *t_sent: when the
 * signal went (the event the waiters are timed from: the reload's own
 * parse and hand-over count in the bound). */
static void reload(const struct h_proxy *p, int count, int64_t *t_sent)
{
	*t_sent = h_now_ms();
	H_CHECK(kill(p->pid, SIGHUP) == 0, "kill SIGHUP: %s", strerror(errno));
	for (int64_t until = h_now_ms() + 5000; h_now_ms() < until; h_sleep_ms(5))
		if (h_log_lines(p, "SIGHUP: reloaded", NULL) >= count)
			return;
	H_CHECK(0, "reload %d did not apply within 5 s", count);
}

static void case_reload(const char *bin)
{
	struct h_tag_server a, b;
	struct h_proxy p;
	struct h_addr stats;
	char backends[256];
	int port = h_free_port(), reset;
	int64_t t;

	h_tag_start(&a, 'a', 1, 0);
	h_tag_start(&b, 'b', 1, 0);
	snprintf(backends, sizeof backends, "127.0.0.1:%d maxconn=1", a.port);
	proxy_up(&p, bin, conf(port, backends, ""), &stats);
	int c1 = client(port, "127.0.0.1");
	H_CHECK(tag_within(c1, 3000) == 'a', "the first client was not served by a");
	int c2 = waiter(&stats, port, "127.0.0.1", 1);

	/* b is added: the waiter moves to the new route and takes b */
	snprintf(backends, sizeof backends, "127.0.0.1:%d maxconn=1 127.0.0.1:%d maxconn=1", a.port,
		 b.port);
	conf(port, backends, "");
	reload(&p, 1, &t);
	served_promptly(c2, 'b', t, 0, "SIGHUP adding backend b");

	/* a's maxconn goes from 1 to 2 */
	int c3 = waiter(&stats, port, "127.0.0.1", 1);
	snprintf(backends, sizeof backends, "127.0.0.1:%d maxconn=2 127.0.0.1:%d maxconn=1", a.port,
		 b.port);
	conf(port, backends, "");
	reload(&p, 2, &t);
	served_promptly(c3, 'a', t, 0, "SIGHUP raising a's maxconn to 2");

	/* a waiter whose source the new config denies is reset, not served
	 * when a slot frees; the one behind it (allowed) is */
	int c4 = waiter(&stats, port, "127.0.0.5", 1);
	int c5 = waiter(&stats, port, "127.0.0.6", 2);
	conf(port, backends, "deny = 127.0.0.5/32\n");
	reload(&p, 3, &t);
	char c = 0;
	h_set_timeouts(c4, 3000);
	ssize_t n = recv(c4, &c, 1, 0); /* (nothing is sent to a waiter: the reset, or 3 s) */
	reset = n < 0 && errno == ECONNRESET;
	H_CHECK(reset && h_now_ms() - t < PROMPT_MS,
		"a waiter the new config denies: recv %zd (%s) after %lld ms; expected a reset at once", n,
		n < 0 ? strerror(errno) : "-", (long long)(h_now_ms() - t));
	H_CHECK(metric_becomes(&stats, "splicer_route_refused_total{route=\"q\",reason=\"denied\"}", 1,
			       1000) == 1, "the denied waiter was not counted as denied");
	H_CHECK(tag_within(c5, 300) == 0, "c5 served with every slot held");
	t = h_now_ms();
	close(c1); /* a slot of a */
	served_promptly(c5, 'a', t, 0, "a slot freed after the reloads");
	H_CHECK(metric_becomes(&stats, QLEN, 0, 1000) == 0, "the queue is not empty");
	H_CHECK(h_metric(&stats, "splicer_route_queue_timeouts_total{route=\"q\"}") == 0,
		"a waiter timed out");
	close(c2);
	close(c3);
	close(c4);
	close(c5);
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&b);
}

Test(integ, queue_wakes_on_reload, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_reload(h_binary(0));
}

Test(integ, queue_wakes_on_reload_asan, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_reload(h_binary(1));
}
