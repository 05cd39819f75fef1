/* SPDX-License-Identifier: MIT */
/* Integration cases: session semantics of issue 12 that the differential
 * suite (tests/peer) does not pin down against a peer.
 *   - half_close_timeout bounds a half-closed session's silence (15), and
 *     is counted apart from idle_timeout (hardening issue 9);
 *   - this host's connect errors never mark a backend down (14);
 *   - a connection loop through two routes is stopped at run time (13);
 *   - urgent bytes reach the far end as urgent, at their place (2). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* A backend that reads until EOF and then holds the connection, silent and
 * unclosed, until the test lets go (*arg): the client's FIN leaves the
 * session half-closed, with nothing more happening. */
static void hold_after_eof(struct h_server *s, int fd, int index, void *arg)
{
	atomic_int *release = arg;
	char buf[4096];
	int64_t end = h_now_ms() + 20000;

	while (h_now_ms() < end) {
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
	}
	while (!atomic_load(release) && h_now_ms() < end)
		h_sleep_ms(10);
}

static void case_half_close_timeout(const char *bin, const char *engine)
{
	struct h_server be;
	struct h_proxy p;
	char baddr[64];
	atomic_int release = 0;

	H_CHECK(h_server_start(&be, "127.0.0.1:0", 16, hold_after_eof, &release) == 0, "backend");
	snprintf(baddr, sizeof baddr, "127.0.0.1:%d", h_addr_port(&be.addr));
	const char *backends[] = { baddr, NULL };
	const char *extra[] = { "--half-close-timeout", "1s", "--idle-timeout", "60s", "-v",
				"--stats", "127.0.0.1:0", NULL };
	struct h_addr stats;
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats address in %s", p.log);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	H_CHECK(h_send_all(fd, "request", 7, h_now_ms() + 2000) == 0, "send");
	H_CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown");
	int64_t t0 = h_now_ms();
	int r = h_expect_eof(fd, t0 + 10000);
	int64_t took = h_now_ms() - t0;
	/* 1 s of silence, then the next 100 ms scan: never the idle timeout */
	H_CHECK(r == 0 || r == -ECONNRESET, "the half-closed session did not end: %s", strerror(-r));
	H_CHECK(took >= 900 && took < 3000, "ended after %lld ms, expected about 1 s", (long long)took);
	atomic_store(&release, 1);
	H_CHECK(h_server_wait_done(&be, 1, 3000) == 0, "the backend handler did not end");
	/* the log has a writer thread of its own: the line may follow the close */
	for (int64_t end = h_now_ms() + 2000; h_now_ms() < end; h_sleep_ms(10))
		if (h_log_lines(&p, "reason=half-close-timeout", NULL) == 1)
			break;
	H_CHECK(h_log_lines(&p, "reason=half-close-timeout", NULL) == 1,
		"no close line with reason=half-close-timeout");
	/* counted as what it is, and only so */
	long long half = h_metric(&stats, "splicer_half_close_timeouts_total"),
		  idle = h_metric(&stats, "splicer_idle_timeouts_total");
	H_CHECK(half == 1 && idle == 0, "a half-close timeout counted as %lld half-close and %lld "
		"idle timeouts (1 and 0 expected)", half, idle);
	close(fd);
	h_proxy_down(&p);
	h_server_stop(&be);
}
H_ENGINE_CASES(half_close_timeout, 60)
H_TINY_CASE(half_close_timeout, 60)

/* A backend that sends what the sockets take at once (at most *arg bytes,
 * 0: no limit), then resets: with a client that reads nothing, the proxy
 * holds bytes it cannot deliver, in its own hands (a lot) or only in the
 * client socket's send queue (a little). */
static void fill_then_reset(struct h_server *s, int fd, int index, void *arg)
{
	static char buf[64 * 1024];
	struct linger lg = { 1, 0 };
	size_t most = *(const size_t *)arg, n = 0;
	ssize_t k;

	(void)s, (void)index;
	memset(buf, 'r', sizeof buf);
	for (size_t len = most && most < sizeof buf ? most : sizeof buf;
	     n < 256 * sizeof buf && (!most || n < most) &&
	     (k = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL)) > 0;
	     n += (size_t)k)
		;
	h_sleep_ms(200); /* the proxy reads what is in flight */
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg); /* the harness closes: RST */
}

static long long sem_metric(const struct h_addr *stats, const char *name)
{
	long long v = h_metric(stats, name);

	H_CHECK(v >= 0, "no %s in /metrics", name);
	return v;
}

/* Waits (up to 5 s) until the two timeout counters read half and idle. */
static void sem_wait_timeouts(const struct h_addr *stats, const char *what, long long half,
			      long long idle)
{
	long long h = -1, i = -1;

	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20)) {
		h = h_metric(stats, "splicer_half_close_timeouts_total"); /* -1: absent */
		i = sem_metric(stats, "splicer_idle_timeouts_total");
		if (h == half && i == idle)
			return;
	}
	H_CHECK(0, "%s: half_close_timeouts_total %lld (%lld expected), idle_timeouts_total %lld "
		"(%lld expected)", what, h, half, i, idle);
}

static int sem_count(const char *path, const char *needle, const char *also)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen(path, "re");

	while (f && fgets(line, sizeof line, f))
		n += strstr(line, needle) && (!also || strstr(line, also));
	if (f)
		fclose(f);
	return n;
}

/* Issue "splicer_idle_timeouts_total also counts half-close timeouts": each
 * timeout has its own counter, in /metrics and the exit line; the access
 * log says which by its reason. A half-closed session, an idle one, and one
 * whose backend reset with bytes the client never takes (the proxy holds
 * them for half_close_timeout, then cuts). */
Test(integ, half_close_and_idle_timeouts_counted_apart, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server holder, resetter;
	static struct h_proxy p;
	struct h_addr stats, a_hold, a_reset;
	atomic_int release = 0;
	static size_t most; /* fill_then_reset's limit */
	char conf[1024], log[300], at[64];
	int hport = h_free_port(), rport = h_free_port();

	most = 0;
	H_CHECK(h_server_start(&holder, "127.0.0.1:0", 16, hold_after_eof, &release) == 0 &&
			h_server_start(&resetter, "127.0.0.1:0", 16, fill_then_reset, &most) == 0,
		"backends");
	snprintf(log, sizeof log, "%s/access.log", h_tmpdir());
	snprintf(conf, sizeof conf,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\nlog = %s\n\n"
		 "[route hold]\nlisten = 127.0.0.1:%d\nbackend = %s\n"
		 "half_close_timeout = 1s\nidle_timeout = 2s\n\n"
		 "[route reset]\nlisten = 127.0.0.1:%d\nbackend = %s\n"
		 "half_close_timeout = 1s\nidle_timeout = 30s\n",
		 log, hport, holder.addr.text, rport, resetter.addr.text);
	const char *args[] = { "-c", h_conf_write("timeouts.conf", conf), NULL };
	char why[512];
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats address in %s", p.log);
	snprintf(at, sizeof at, "127.0.0.1:%d", hport);
	H_CHECK(h_addr_parse(at, &a_hold) == 0, "address %s", at);
	snprintf(at, sizeof at, "127.0.0.1:%d", rport);
	H_CHECK(h_addr_parse(at, &a_reset) == 0, "address %s", at);
	H_CHECK(sem_metric(&stats, "splicer_idle_timeouts_total") == 0, "idle timeouts before any");

	/* half-closed: the client's FIN, the backend silent */
	int fd = h_connect(&a_hold, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	H_CHECK(h_send_all(fd, "request", 7, h_now_ms() + 2000) == 0 && shutdown(fd, SHUT_WR) == 0,
		"send, shutdown");
	int r = h_expect_eof(fd, h_now_ms() + 5000);
	H_CHECK(r == 0 || r == -ECONNRESET, "the half-closed session did not end: %s", strerror(-r));
	close(fd);
	sem_wait_timeouts(&stats, "a half-closed session timed out", 1, 0);

	/* idle: both directions open, nothing moves */
	fd = h_connect(&a_hold, 2000);
	H_CHECK(fd >= 0 && h_send_all(fd, "x", 1, h_now_ms() + 2000) == 0, "connect, send");
	r = h_expect_eof(fd, h_now_ms() + 6000);
	H_CHECK(r == 0 || r == -ECONNRESET, "the idle session did not end: %s", strerror(-r));
	close(fd);
	sem_wait_timeouts(&stats, "an idle session timed out", 1, 1);

	/* the backend resets; the client never reads what the proxy holds for it */
	fd = h_connect(&a_reset, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	H_CHECK(h_server_wait_done(&resetter, 1, 5000) == 0, "the resetting backend did not end");
	sem_wait_timeouts(&stats, "undeliverable bytes timed out", 2, 1);
	close(fd);

	/* the same with a little: all of it written to the client's socket,
	 * whose small window keeps it in the send queue, where an RST would
	 * discard it; the session waits, then gives up (reason backend-reset) */
	int small = 4096;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0 &&
			connect(fd, (const struct sockaddr *)&a_reset.ss, a_reset.len) == 0,
		"a client with a small receive buffer: %s", strerror(errno));
	most = 64 * 1024;
	H_CHECK(h_server_wait_done(&resetter, 2, 5000) == 0, "the resetting backend did not end");
	sem_wait_timeouts(&stats, "bytes in the send queue timed out", 3, 1);
	close(fd);

	atomic_store(&release, 1);
	h_proxy_down(&p);
	h_server_stop(&holder);
	h_server_stop(&resetter);
	/* ended_by says who ended it first (the client's FIN, the backend's
	 * RST); a reset session's reason is the reset when the proxy had
	 * written all it held (it waited on the send queue), else the timeout */
	int nhalf = sem_count(log, "reason=half-close-timeout", "ended_by=client"),
	    nidle = sem_count(log, "reason=idle-timeout", "ended_by=timeout"),
	    nrst = sem_count(log, "reason=backend-reset", "ended_by=backend") +
		   sem_count(log, "reason=half-close-timeout", "ended_by=backend");
	H_CHECK(nhalf == 1 && nidle == 1 && nrst == 2, "the access log does not tell the timeouts "
		"apart by reason: %d half-close-timeout ended by the client (1 expected), %d "
		"idle-timeout (1), %d backend-reset or half-close-timeout ended by the backend (2) "
		"in %s", nhalf, nidle, nrst, log);
	H_CHECK(h_log_lines(&p, "stopped: sessions", "idle-timeout 1, half-close-timeout 3)", NULL) == 1,
		"the exit line does not count 1 idle and 3 half-close timeouts apart (log %s)", p.log);
}

/* ---- a local connect error (out of ephemeral ports: EADDRNOTAVAIL) ----- */

struct netns {
	char name[64];
	int fd, root;
};

static void ns_run(const struct netns *ns, const char *cmd)
{
	char full[512];

	snprintf(full, sizeof full, "ip netns exec %s %s >/dev/null 2>&1", ns->name, cmd);
	H_CHECK(system(full) == 0, "in %s: %s", ns->name, cmd);
}

/* A namespace with only loopback; the calling thread enters it, so every
 * socket and every process it starts from here on lives there. */
static void ns_enter_new(struct netns *ns)
{
	char path[128], cmd[160];

	snprintf(ns->name, sizeof ns->name, "splicer-sem-%d", (int)getpid());
	snprintf(cmd, sizeof cmd, "ip netns del %s >/dev/null 2>&1; ip netns add %s", ns->name, ns->name);
	H_CHECK(system(cmd) == 0, "ip netns add %s", ns->name);
	ns_run(ns, "ip link set lo up");
	snprintf(path, sizeof path, "/run/netns/%s", ns->name);
	ns->fd = open(path, O_RDONLY | O_CLOEXEC);
	ns->root = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	H_CHECK(ns->fd >= 0 && ns->root >= 0, "open the namespaces: %s", strerror(errno));
	H_CHECK(setns(ns->fd, CLONE_NEWNET) == 0, "setns: %s", strerror(errno));
}

static void ns_leave(struct netns *ns)
{
	char cmd[160];

	if (ns->root >= 0 && setns(ns->root, CLONE_NEWNET)) {
		/* nothing better to do: the test fails below anyway */
	}
	if (ns->fd >= 0)
		close(ns->fd);
	if (ns->root >= 0)
		close(ns->root);
	snprintf(cmd, sizeof cmd, "ip netns del %s >/dev/null 2>&1", ns->name);
	if (system(cmd)) {
		/* left behind: named after our pid, deleted by the next run */
	}
}

/* A client from a fixed port (outside the namespace's ephemeral range,
 * which the proxy's backend connections exhaust). */
static int client_from(const struct h_addr *to, int port)
{
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	H_CHECK(fd >= 0, "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	H_CHECK(bind(fd, (struct sockaddr *)&me, sizeof me) == 0, "bind %d: %s", port, strerror(errno));
	H_CHECK(connect(fd, (const struct sockaddr *)&to->ss, to->len) == 0, "connect: %s", strerror(errno));
	h_set_timeouts(fd, 1000);
	return fd;
}

/* Before: EADDRNOTAVAIL, ENOBUFS ... from connect() counted as the
 * backend's failure, so with checks on (fall 1 here) a proxy out of
 * ephemeral ports marked every backend down. */
Test(integ, local_connect_errors_never_mark_a_backend_down, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	struct netns ns = { .fd = -1, .root = -1 };
	struct h_server be;
	struct h_proxy p;
	struct h_addr stats;
	char baddr[64], metric[160], why[160];
	int held[6], nheld = 0, echoed = 0;

	ns_enter_new(&ns);
	H_CHECK(h_server_start(&be, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0, "backend");
	snprintf(baddr, sizeof baddr, "127.0.0.1:%d", h_addr_port(&be.addr));
	const char *backends[] = { baddr, NULL };
	const char *extra[] = { "--check", "tcp", "--check-interval", "1h", "--fall", "1",
				"--stats", "127.0.0.1:0", NULL };
	h_proxy_up(&p, h_binary(0), "auto", "127.0.0.1:0", backends, extra);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "stats address");
	snprintf(metric, sizeof metric, "splicer_backend_up{route=\"default\",backend=\"%s\"}", baddr);
	for (int i = 0; i < 50 && h_metric(&stats, metric) != 1; i++)
		h_sleep_ms(50); /* the first check */
	H_CHECK(h_metric(&stats, metric) == 1, "backend not up at the start");
	/* two ephemeral ports: a third connection to the backend finds none */
	ns_run(&ns, "sysctl -q -w net.ipv4.ip_local_port_range='40000 40001'");

	/* sessions held open, one byte echoed through each that got a backend */
	for (int i = 0; i < 6; i++) {
		char c = 'x';
		held[nheld] = client_from(&p.addr, 50000 + i);
		if (h_send_all(held[nheld], &c, 1, h_now_ms() + 1000) == 0 &&
		    h_recv_exact(held[nheld], &c, 1, h_now_ms() + 2000) == 0)
			echoed++;
		nheld++;
	}
	H_CHECK(echoed >= 1 && echoed <= 2, "%d sessions echoed through 2 ephemeral ports", echoed);
	H_CHECK(h_metric(&stats, metric) == 1, "the backend was marked down by this host's errors");
	long long local = h_metric(&stats, "splicer_connect_local_errors_total");
	H_CHECK(local >= 1, "no local connect error counted (%d of 6 sessions echoed)", echoed);
	for (int i = 0; i < nheld; i++)
		close(held[i]);
	ns_run(&ns, "sysctl -q -w net.ipv4.ip_local_port_range='32768 60999'");
	H_CHECK(h_echo_roundtrip(&p.addr, 1000, 7, 3000, why, sizeof why) == 0,
		"no session once ports were free again: %s", why);
	/* the log is written by its own thread: the line may come a moment
	 * after the counter (cc12 read the file before it did) */
	char line[512];
	H_CHECK(h_file_line(p.log, 3000, line, sizeof line, "an error of this host, not of the "
			    "backend", NULL) == 1 &&
		h_log_lines(&p, "an error of this host, not of the backend", NULL) == 1,
		"the local error is not logged exactly once");
	h_proxy_down(&p);
	h_server_stop(&be);
	ns_leave(&ns);
}

/* ---- a loop through two routes ------------------------------------------ */

/* Route a's backend is route b's listener and the other way round: `check`
 * cannot see it (each backend is another route's listener). Before: each
 * looping connection opened another until max_conns was full. */
Test(integ, connection_loop_is_stopped_at_run_time, .init = h_init, .fini = h_fini, .timeout = 60)
{
	struct h_proxy p;
	struct h_addr stats, a;
	char path[300], text[400], err[200], addr_a[64];
	int pa = h_free_port(), pb = h_free_port();

	while (pb == pa)
		pb = h_free_port();
	snprintf(path, sizeof path, "%s/loop.conf", h_tmpdir());
	snprintf(text, sizeof text,
		 "[global]\nstats = 127.0.0.1:0\nmax_conns = 200\n"
		 "[route a]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n"
		 "[route b]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n",
		 pa, pb, pb, pa);
	FILE *f = fopen(path, "we");
	H_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
	const char *args[] = { "-c", path, "-v", NULL };
	H_CHECK(h_proxy_start(&p, h_binary(0), args, err, sizeof err) == 0, "start: %s", err);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "stats address");
	snprintf(addr_a, sizeof addr_a, "127.0.0.1:%d", pa);
	H_CHECK(h_addr_parse(addr_a, &a) == 0, "address");

	for (int i = 0; i < 5; i++) {
		int fd = h_connect(&a, 2000);
		H_CHECK(fd >= 0, "connect: %s", strerror(errno));
		int r = h_expect_eof(fd, h_now_ms() + 3000);
		H_CHECK(r == 0 || r == -ECONNRESET, "a looping session was not ended: %s", strerror(-r));
		close(fd);
	}
	long long active = -1;
	for (int i = 0; i < 40; i++) {
		active = h_metric(&stats, "splicer_route_sessions_active{route=\"a\"}") +
			 h_metric(&stats, "splicer_route_sessions_active{route=\"b\"}");
		if (active == 0)
			break;
		h_sleep_ms(50);
	}
	H_CHECK(active == 0, "%lld sessions still open: the loop goes on", active);
	long long loops = h_metric(&stats, "splicer_loops_total");
	/* each client's first hop loops back once (occasionally twice, when
	 * the accept on another worker wins the race with the entry) */
	H_CHECK(loops >= 5 && loops <= 10, "splicer_loops_total = %lld for 5 clients", loops);
	long long total = h_metric(&stats, "splicer_route_sessions_total{route=\"a\"}") +
			  h_metric(&stats, "splicer_route_sessions_total{route=\"b\"}");
	H_CHECK(total >= 10 && total <= 20, "%lld sessions accepted for 5 clients", total);
	h_proxy_down(&p);
}

/* ---- urgent data -------------------------------------------------------- */

/* Reads the 100 in-band bytes before the mark, then the urgent byte and
 * the 100 after it, and answers with what it saw: "OK" + the byte when it
 * came out of band at its mark, "IN" + the byte when it came in line (arg
 * points at 1: uring). Out of band, the reader must take the urgent byte
 * before it reads on: a plain recv() at the mark skips it for good, and it
 * may arrive together with the bytes behind it. */
static void urgent_reader(struct h_server *s, int fd, int index, void *arg)
{
	const int in_line = *(const int *)arg;
	char buf[256], reply[3] = { 'N', 'O', '?' };
	size_t got = 0, want = in_line ? 201 : 200;
	int64_t end = h_now_ms() + 5000;
	int mark = 0, oob = -1;

	while (got < want && h_now_ms() < end) {
		size_t room = want - got;
		if (!in_line && oob == -1) {
			if (got == 100) { /* at the mark: the urgent byte first */
				char b;
				if (recv(fd, &b, 1, MSG_OOB | MSG_DONTWAIT) == 1)
					oob = (unsigned char)b;
				else
					h_sleep_ms(1);
				continue;
			}
			room = 100 - got; /* never read across the mark */
		}
		ssize_t n = recv(fd, buf + got, room, MSG_DONTWAIT);
		if (n > 0)
			got += (size_t)n;
		else if (n == 0)
			break;
		else
			h_sleep_ms(1);
		if (!in_line && oob == -1 && got > 0 && got < 100 && ioctl(fd, SIOCATMARK, &mark) == 0 && mark)
			oob = -2; /* a mark before the sender's */
	}
	if (!in_line && got == 200 && oob == '!') {
		int ok = 1;
		for (int i = 0; i < 200; i++)
			ok &= buf[i] == (i < 100 ? 'a' : 'b');
		if (ok)
			memcpy(reply, "OK", 2);
	} else if (in_line && got == 201 && buf[100] == '!') {
		int ok = 1; /* in line (uring, sockmap: see src/engine/urgent.h) */
		for (int i = 0; i < 201; i++)
			ok &= i == 100 || buf[i] == (i < 100 ? 'a' : 'b');
		if (ok)
			memcpy(reply, "IN", 2);
	}
	reply[2] = oob >= 0 ? (char)oob : got == 201 ? buf[100] : '?';
	h_send_all(fd, reply, 3, h_now_ms() + 2000);
}

static void case_urgent_passed_as_urgent(const char *bin, const char *engine)
{
	struct h_server be;
	struct h_proxy p;
	char baddr[64], a[100], b[100], reply[3];

	memset(a, 'a', sizeof a);
	memset(b, 'b', sizeof b);
	static int in_line;

	in_line = !strcmp(engine, "uring");
	H_CHECK(h_server_start(&be, "127.0.0.1:0", 16, urgent_reader, &in_line) == 0, "backend");
	snprintf(baddr, sizeof baddr, "127.0.0.1:%d", h_addr_port(&be.addr));
	const char *backends[] = { baddr, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, NULL);
	for (int i = 0; i < 5; i++) {
		int fd = h_connect(&p.addr, 2000);
		H_CHECK(fd >= 0, "connect: %s", strerror(errno));
		H_CHECK(h_send_all(fd, a, sizeof a, h_now_ms() + 2000) == 0, "send");
		h_sleep_ms(20); /* the first 100 bytes leave on their own */
		H_CHECK(send(fd, "!", 1, MSG_OOB) == 1, "send MSG_OOB: %s", strerror(errno));
		H_CHECK(h_send_all(fd, b, sizeof b, h_now_ms() + 2000) == 0, "send");
		int r = h_recv_exact(fd, reply, 3, h_now_ms() + 5000);
		H_CHECK(r == 0, "no answer: the stream stalled at the urgent mark (%s)", strerror(-r));
		const char *want = strcmp(engine, "uring") ? "OK!" : "IN!";
		H_CHECK(!memcmp(reply, want, 3), "the backend saw '%.3s' (want %s: 200 in-band bytes "
			"in order and the urgent byte '!' at its mark, out of band (OK) or in line (IN))",
			reply, want);
		close(fd);
	}
	h_proxy_down(&p);
	h_server_stop(&be);
}
H_ENGINE_CASES(urgent_passed_as_urgent, 60)
