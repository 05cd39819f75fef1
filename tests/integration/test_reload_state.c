/* SPDX-License-Identifier: MIT */
/* Integration cases for run-time state across reloads and for health-check
 * scheduling (issue 12, defects 6-8):
 *   - one route's silent backend with a 10 s check_timeout does not delay
 *     another route's checks (each backend has its own schedule);
 *   - 70 reloads in a row apply, and 66 generations that each keep a
 *     session do not block a further reload (no limit on old configs);
 *   - a reload of an unchanged file keeps route and backend counters (a
 *     session spanning it is counted), keeps a backend marked down by its
 *     checks down (no client is sent to it), and keeps the leastconn
 *     counts (sessions from before the reload weigh in the next choice). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers --------------------------------------------------------------- */

static void proxy_from_file(struct h_proxy *p, const char *bin, const char *path)
{
	const char *args[] = { "-c", path, NULL };
	char err[512];

	H_CHECK(h_proxy_start(p, bin, args, err, sizeof err) == 0, "proxy -c %s: %s", path, err);
}

/* Waits up to ms for the count-th log line with the needle; returns how
 * long that took, or -1. */
static int64_t log_wait(const struct h_proxy *p, const char *n1, const char *n2, int count, int ms)
{
	int64_t t0 = h_now_ms();
	for (;;) {
		if (h_log_lines(p, n1, n2, NULL) >= count)
			return h_now_ms() - t0;
		if (h_now_ms() - t0 > ms)
			return -1;
		h_sleep_ms(5);
	}
}

/* SIGHUP, and the reload's log line (the count-th), or fail. The files
 * here listen on fixed ports: an ephemeral one (":0") is bound anew by
 * every reload. */
static void reload(const struct h_proxy *p, int count)
{
	H_CHECK(kill(p->pid, SIGHUP) == 0, "kill SIGHUP: %s", strerror(errno));
	H_CHECK(log_wait(p, "SIGHUP: reloaded", NULL, count, 5000) >= 0,
		"reload %d did not apply within 5 s (%d \"SIGHUP: reloaded\" lines; %d refused for "
		"earlier configs)", count, h_log_lines(p, "SIGHUP: reloaded", NULL),
		h_log_lines(p, "SIGHUP:", "earlier configs", NULL));
}

/* A metric that must reach want within ms; returns its last value. */
static long long metric_wait(const struct h_addr *stats, const char *name, long long want, int ms)
{
	int64_t t0 = h_now_ms();
	long long v;
	while ((v = h_metric(stats, name)) != want && h_now_ms() - t0 < ms)
		h_sleep_ms(20);
	return v;
}

/* ---- a poll-driven echo backend for many sessions ------------------------ */

#define ECHO_MAX 256

struct echo_srv {
	int lfd, port;
	_Atomic int stop;
	_Atomic int accepted;
	pthread_t thr;
};

static void *echo_loop(void *arg)
{
	struct echo_srv *e = arg;
	struct pollfd pfd[ECHO_MAX + 1];
	int n = 0;
	char buf[16384];

	pfd[0] = (struct pollfd){ .fd = e->lfd, .events = POLLIN };
	while (!atomic_load(&e->stop)) {
		if (poll(pfd, (nfds_t)n + 1, 50) <= 0)
			continue;
		for (int i = n; i >= 1; i--) {
			if (!pfd[i].revents)
				continue;
			ssize_t r = read(pfd[i].fd, buf, sizeof buf);
			/* blocking writes, 1 s timeout: the clients here read their echo */
			if (r <= 0 || h_send_all(pfd[i].fd, buf, (size_t)r, h_now_ms() + 2000)) {
				close(pfd[i].fd);
				pfd[i] = pfd[n--];
			}
		}
		if (pfd[0].revents) {
			int fd = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			atomic_fetch_add(&e->accepted, 1);
			if (n == ECHO_MAX) {
				close(fd);
				continue;
			}
			h_set_timeouts(fd, 1000);
			pfd[++n] = (struct pollfd){ .fd = fd, .events = POLLIN };
		}
	}
	for (int i = 1; i <= n; i++)
		close(pfd[i].fd);
	return NULL;
}

static void echo_start(struct echo_srv *e)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sin;

	memset(e, 0, sizeof *e);
	e->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(e->lfd >= 0 && bind(e->lfd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
			listen(e->lfd, 1024) == 0 && getsockname(e->lfd, (struct sockaddr *)&sin, &len) == 0,
		"echo server: %s", strerror(errno));
	e->port = ntohs(sin.sin_port);
	H_CHECK(pthread_create(&e->thr, NULL, echo_loop, e) == 0, "echo server thread");
}

static void echo_stop(struct echo_srv *e)
{
	atomic_store(&e->stop, 1);
	pthread_join(e->thr, NULL);
	close(e->lfd);
}

/* n bytes of stream `seed` from offset off through fd and back. */
static int echo_round(int fd, uint64_t seed, uint64_t off, size_t n)
{
	static char out[65536], in[65536];

	h_gen(seed, off, out, n);
	if (h_send_all(fd, out, n, h_now_ms() + 3000) || h_recv_exact(fd, in, n, h_now_ms() + 3000))
		return -1;
	return h_gen_check(seed, off, in, n) == n ? 0 : -1;
}

/* ---- defect 6: each backend's checks on their own schedule --------------- */

/* A listener whose accept queue is full (backlog 0, filled by connections
 * held here and never accepted): the kernel drops further SYNs, so a
 * connect to it neither succeeds nor fails until it times out. */
struct blackhole {
	int lfd, port;
	int fill[8];
	int nfill;
};

static void blackhole_open(struct blackhole *b)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sin;

	memset(b, 0, sizeof *b);
	b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(b->lfd >= 0 && bind(b->lfd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
			listen(b->lfd, 0) == 0 && getsockname(b->lfd, (struct sockaddr *)&sin, &len) == 0,
		"blackhole listener: %s", strerror(errno));
	b->port = ntohs(sin.sin_port);
	/* connect until one hangs: the queue is full then */
	for (;;) {
		H_CHECK(b->nfill < 8, "8 connections to a backlog-0 listener all completed");
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		H_CHECK(fd >= 0, "socket");
		int rc = connect(fd, (struct sockaddr *)&sin, sizeof sin);
		H_CHECK(rc == 0 || errno == EINPROGRESS, "connect to the blackhole: %s", strerror(errno));
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		if (rc != 0 && poll(&pfd, 1, 300) == 0) {
			close(fd); /* it hangs: the queue is full */
			return;
		}
		b->fill[b->nfill++] = fd;
	}
}

static void blackhole_close(struct blackhole *b)
{
	for (int i = 0; i < b->nfill; i++)
		close(b->fill[i]);
	close(b->lfd);
}

Test(integ, health_check_schedules_are_per_backend, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct blackhole hole;
	static struct echo_srv b;
	static struct h_proxy p;
	struct h_addr stats;
	char text[1024], down[96], metric[160];

	blackhole_open(&hole);
	echo_start(&b);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 1\nstats = 127.0.0.1:0\n\n"
		 "[route slow]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d\n"
		 "check = tcp\ncheck_interval = 1s\ncheck_timeout = 10s\n\n"
		 "[route fast]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d\n"
		 "check = tcp\ncheck_interval = 100ms\ncheck_timeout = 1s\nfall = 1\n",
		 hole.port, b.port);
	proxy_from_file(&p, bin, h_conf_write("sched.conf", text));
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats line");
	/* the fast route's backend passes a check first */
	snprintf(metric, sizeof metric,
		 "splicer_backend_checks_total{route=\"fast\",backend=\"127.0.0.1:%d\",result=\"ok\"}",
		 b.port);
	int64_t t0 = h_now_ms();
	while (h_metric(&stats, metric) < 1 && h_now_ms() - t0 < 3000)
		h_sleep_ms(20);
	H_CHECK(h_metric(&stats, metric) >= 1, "the fast route's backend was never checked");

	/* it dies while the slow route's check hangs in its 10 s timeout */
	echo_stop(&b);
	snprintf(down, sizeof down, "backend 127.0.0.1:%d is down", b.port);
	int64_t took = log_wait(&p, down, NULL, 1, 12000);
	H_CHECK(took >= 0 && took <= 1500,
		"a dead backend on a route with interval 100 ms and fall 1 was marked down after "
		"%lld ms (another route's check had a 10 s timeout)", (long long)took);
	/* the premise: the slow route's check was still hanging meanwhile */
	snprintf(metric, sizeof metric,
		 "splicer_backend_checks_total{route=\"slow\",backend=\"127.0.0.1:%d\",result=\"failed\"}",
		 hole.port);
	long long slow_failed = h_metric(&stats, metric);
	snprintf(metric, sizeof metric,
		 "splicer_backend_checks_total{route=\"slow\",backend=\"127.0.0.1:%d\",result=\"ok\"}",
		 hole.port);
	long long slow_ok = h_metric(&stats, metric);
	H_CHECK(slow_failed == 0 && slow_ok == 0,
		"the slow route's backend was not hanging: checks ok %lld, failed %lld", slow_ok,
		slow_failed);
	h_proxy_down(&p);
	blackhole_close(&hole);
}

/* ---- defect 7: no limit on generations ----------------------------------- */

static void write_one_route(char *text, size_t n, int port, int backend_port)
{
	snprintf(text, n, "[global]\nworkers = 2\nstats = 127.0.0.1:0\n\n"
			  "[route r]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n",
		 port, backend_port);
}

Test(integ, reload_70_in_a_row_all_apply, .init = h_init, .fini = h_fini, .timeout = 90)
{
	const char *bin = h_binary(0);
	static struct echo_srv e;
	static struct h_proxy p;
	char text[512];

	echo_start(&e);
	write_one_route(text, sizeof text, h_free_port(), e.port);
	proxy_from_file(&p, bin, h_conf_write("r70.conf", text));
	for (int i = 1; i <= 70; i++)
		reload(&p, i);
	H_CHECK(h_log_lines(&p, "earlier configs", NULL) == 0, "a reload was refused");
	char why[256];
	H_CHECK(h_echo_roundtrip(&p.addr, 1000, 7, 3000, why, sizeof why) == 0,
		"after 70 reloads: %s", why);
	h_proxy_down(&p);
	echo_stop(&e);
}

Test(integ, reload_66_generations_with_sessions_do_not_block, .init = h_init, .fini = h_fini,
     .timeout = 120)
{
	const char *bin = h_binary(0);
	static struct echo_srv e;
	static struct h_proxy p;
	static int fd[66];
	char text[512];
	const int gens = 66;

	echo_start(&e);
	int port = h_free_port();
	write_one_route(text, sizeof text, port, e.port);
	proxy_from_file(&p, bin, h_conf_write("r66.conf", text));
	/* one session per generation, each seen forwarding before the reload */
	for (int i = 0; i < gens; i++) {
		fd[i] = h_connect(&p.addr, 2000);
		H_CHECK(fd[i] >= 0, "session %d: connect: %s", i, strerror(errno));
		H_CHECK(echo_round(fd[i], (uint64_t)i, 0, 100) == 0, "session %d: no echo", i);
		reload(&p, i + 1);
	}
	/* and one more: 66 earlier configs with sessions must not refuse it */
	reload(&p, gens + 1);
	H_CHECK(h_log_lines(&p, "earlier configs", NULL) == 0, "a reload was refused");
	for (int i = 0; i < gens; i++) {
		H_CHECK(echo_round(fd[i], (uint64_t)i, 100, 1000) == 0,
			"the session of generation %d stopped forwarding", i);
	}
	for (int i = 0; i < gens; i++)
		close(fd[i]);
	h_proxy_down(&p);
	echo_stop(&e);
}

/* ---- defect 8: run-time state outlives a generation ----------------------- */

Test(integ, reload_keeps_route_counters_of_a_spanning_session, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct echo_srv e;
	static struct h_proxy p;
	struct h_addr stats;
	char text[512], name[200];
	const uint64_t total = 1001000, chunk = 10000;

	echo_start(&e);
	write_one_route(text, sizeof text, h_free_port(), e.port);
	proxy_from_file(&p, bin, h_conf_write("counters.conf", text));
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats line");
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	for (uint64_t off = 0; off < total; off += chunk) {
		size_t n = total - off < chunk ? (size_t)(total - off) : (size_t)chunk;
		H_CHECK(echo_round(fd, 42, off, n) == 0, "echo broken at offset %llu",
			(unsigned long long)off);
		if (off == total / 2 / chunk * chunk)
			reload(&p, 1); /* the same file, half way through */
	}
	shutdown(fd, SHUT_WR);
	H_CHECK(h_expect_eof(fd, h_now_ms() + 3000) == 0, "no EOF after the echo");
	close(fd);
	H_CHECK(metric_wait(&stats, "splicer_route_sessions_active{route=\"r\"}", 0, 3000) == 0,
		"the session is still open");
	long long up = h_metric(&stats, "splicer_route_bytes_total{route=\"r\",direction=\"up\"}");
	long long dn = h_metric(&stats, "splicer_route_bytes_total{route=\"r\",direction=\"down\"}");
	long long ss = h_metric(&stats, "splicer_route_sessions_total{route=\"r\"}");
	H_CHECK(up == (long long)total && dn == (long long)total && ss == 1,
		"after a session of %llu bytes each way spanning a reload of the same file, /metrics "
		"shows route bytes up %lld, down %lld, sessions %lld", (unsigned long long)total, up, dn,
		ss);
	snprintf(name, sizeof name,
		 "splicer_backend_bytes_total{route=\"r\",backend=\"127.0.0.1:%d\",direction=\"down\"}",
		 e.port);
	long long bdn = h_metric(&stats, name);
	H_CHECK(bdn == (long long)total, "backend bytes down %lld, expected %llu", bdn,
		(unsigned long long)total);
	h_proxy_down(&p);
	echo_stop(&e);
}

Test(integ, reload_keeps_a_dead_backend_down, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_tag_server a;
	static struct h_refused dead;
	static struct h_proxy p;
	static int fds[8];
	struct h_addr stats;
	char text[800], down[96], up_metric[160], err_metric[200];

	h_tag_start(&a, 'A', 1, 0);
	H_CHECK(h_refused_open(&dead) == 0, "refused port");
	/* fall 3 x 300 ms: a reload that forgot the verdict would send clients
	 * to the dead backend for most of a second */
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\n\n"
		 "[route h]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d %s\n"
		 "check = tcp\ncheck_interval = 300ms\ncheck_timeout = 200ms\nrise = 2\nfall = 3\n",
		 h_free_port(), a.port, dead.text);
	proxy_from_file(&p, bin, h_conf_write("down.conf", text));
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats line");
	snprintf(down, sizeof down, "backend %s is down", dead.text);
	H_CHECK(log_wait(&p, down, NULL, 1, 5000) >= 0, "the dead backend was never marked down");
	snprintf(up_metric, sizeof up_metric, "splicer_backend_up{route=\"h\",backend=\"%s\"}", dead.text);
	snprintf(err_metric, sizeof err_metric,
		 "splicer_backend_connect_errors_total{route=\"h\",backend=\"%s\"}", dead.text);
	H_CHECK(h_metric(&stats, err_metric) == 0, "connect errors before any client");

	reload(&p, 1);
	long long up = h_metric(&stats, up_metric);
	for (int i = 0; i < 8; i++) {
		char t = h_tag_of(&p.addr, &fds[i]);
		H_CHECK(t == 'A', "session %d after the reload got '%c'", i, t ? t : '-');
	}
	long long errs = h_metric(&stats, err_metric);
	long long route_errs = h_metric(&stats, "splicer_route_connect_errors_total{route=\"h\"}");
	H_CHECK(errs == 0 && route_errs == 0,
		"after the reload, sessions were sent to the backend marked down (its connect errors "
		"%lld, the route's %lld)", errs, route_errs);
	H_CHECK(up == 0, "right after a reload of the same file the dead backend shows up = %lld", up);
	H_CHECK(h_log_lines(&p, dead.text, "is up", NULL) == 0 && h_log_lines(&p, down, NULL) == 1,
		"the dead backend was brought up and marked down again");
	for (int i = 0; i < 8; i++)
		close(fds[i]);
	h_proxy_down(&p);
	h_refused_close(&dead);
	h_tag_stop(&a);
}

Test(integ, reload_keeps_leastconn_counts, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_tag_server a, b;
	static struct h_proxy p;
	struct h_addr stats;
	char text[800], ma[160], mb[160];
	int fd[6], nfd = 0, keep[4], nkeep = 0;

	h_tag_start(&a, 'A', 1, 0);
	h_tag_start(&b, 'B', 1, 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\n\n"
		 "[route lc]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d 127.0.0.1:%d\n"
		 "balance = leastconn\n", h_free_port(), a.port, b.port);
	proxy_from_file(&p, bin, h_conf_write("lc.conf", text));
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats line");
	snprintf(ma, sizeof ma, "splicer_backend_sessions_active{route=\"lc\",backend=\"127.0.0.1:%d\"}",
		 a.port);
	snprintf(mb, sizeof mb, "splicer_backend_sessions_active{route=\"lc\",backend=\"127.0.0.1:%d\"}",
		 b.port);
	/* four held sessions, two on each; then the two on B end: A holds 2, B 0 */
	char tags[4];
	for (int i = 0; i < 4; i++) {
		tags[i] = h_tag_of(&p.addr, &fd[nfd++]);
		H_CHECK(tags[i] == 'A' || tags[i] == 'B', "session %d got no tag", i);
	}
	for (int i = 0; i < 4; i++) {
		if (tags[i] == 'B')
			close(fd[i]);
		else
			keep[nkeep++] = fd[i];
	}
	H_CHECK(nkeep == 2, "leastconn put %d of 4 sessions on A", nkeep);
	H_CHECK(metric_wait(&stats, mb, 0, 3000) == 0, "B's sessions did not end");
	H_CHECK(h_metric(&stats, ma) == 2, "A does not hold 2 sessions");

	reload(&p, 1);
	long long held_a = h_metric(&stats, ma);
	/* with A at 2 and B at 0, the next two sessions are B's */
	int accepted_a = atomic_load(&a.accepted);
	char t1 = h_tag_of(&p.addr, &fd[0]);
	char t2 = h_tag_of(&p.addr, &fd[1]);
	H_CHECK(t1 == 'B' && t2 == 'B' && atomic_load(&a.accepted) == accepted_a,
		"with 2 sessions from before the reload on A and none on B, leastconn sent the next "
		"two to %c and %c", t1 ? t1 : '-', t2 ? t2 : '-');
	H_CHECK(held_a == 2, "after a reload of the same file, A's sessions_active is %lld, not 2",
		held_a);
	close(fd[0]);
	close(fd[1]);
	for (int i = 0; i < nkeep; i++)
		close(keep[i]);
	/* every session ended: the counts, shared by both generations, are 0 */
	H_CHECK(metric_wait(&stats, ma, 0, 3000) == 0 && metric_wait(&stats, mb, 0, 3000) == 0,
		"sessions_active did not return to 0 (A %lld, B %lld)", h_metric(&stats, ma),
		h_metric(&stats, mb));
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&b);
}
