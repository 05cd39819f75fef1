/* SPDX-License-Identifier: MIT */
/* Integration cases for the core's limits and choices: connect timeout,
 * idle timeout, --max-conns, EMFILE on accept, pipe exhaustion fallback,
 * auto's engine choice and the -v session line. Run against the plain
 * proxy (and the ASan one where a case exercises a distinct code path). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The proxy's log, whole (malloc'd). */
static char *read_log(const struct h_proxy *p)
{
	FILE *f = fopen(p->log, "re");
	char *buf = calloc(1, 1 << 20);
	size_t n = f ? fread(buf, 1, (1 << 20) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

static unsigned long long log_counter(const char *log, const char *name)
{
	const char *p = strstr(log, name);
	return p ? strtoull(p + strlen(name), NULL, 10) : 0;
}

static double proc_cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return -1;
	if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')))
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
	fclose(f);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A listener whose accept queue is full and never drained: further SYNs are
 * dropped, so a connect to it hangs until the caller's timeout. */
struct blackhole {
	int lfd;
	int fill[8];
	int nfill;
	char text[64];
};

static int blackhole_open(struct blackhole *b)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sin;

	b->nfill = 0;
	b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (b->lfd < 0 || bind(b->lfd, (struct sockaddr *)&sin, sizeof sin) || listen(b->lfd, 0) ||
	    getsockname(b->lfd, (struct sockaddr *)&sin, &len))
		return -1;
	snprintf(b->text, sizeof b->text, "127.0.0.1:%u", ntohs(sin.sin_port));
	/* Fill the queue: connects complete until it is full, then hang. */
	while (b->nfill < 8) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		int r = connect(fd, (struct sockaddr *)&sin, sizeof sin);
		b->fill[b->nfill++] = fd;
		if (r < 0 && errno == EINPROGRESS) {
			struct timeval tv = { 0, 200000 };
			fd_set w;
			FD_ZERO(&w);
			FD_SET(fd, &w);
			if (select(fd + 1, NULL, &w, NULL, &tv) == 0)
				return 0; /* this one hangs: the queue is full */
		}
	}
	return -1;
}

static void blackhole_close(struct blackhole *b)
{
	for (int i = 0; i < b->nfill; i++)
		close(b->fill[i]);
	close(b->lfd);
}

/* A backend that never completes the handshake is skipped after
 * --connect-timeout for the next one: every session succeeds, and the ones
 * that met the black hole first took about the timeout. */
static void case_connect_timeout(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	static struct blackhole bh;
	int64_t slowest = 0;

	H_CHECK(blackhole_open(&bh) == 0, "cannot make a backend whose accept queue is full");
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { bh.text, srv.addr.text, NULL };
	const char *extra[] = { "--connect-timeout", "300ms", "-v", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);
	for (int i = 0; i < 4; i++) {
		char why[256];
		int64_t t0 = h_now_ms();
		rc = h_echo_roundtrip(&p.addr, 500, 0xC7 + (uint64_t)i, 5000, why, sizeof why);
		int64_t took = h_now_ms() - t0;
		H_CHECK(rc == 0, "session %d (first backend a black hole, --connect-timeout 300ms) "
				 "failed after %lld ms: %s", i + 1, (long long)took, why);
		if (took > slowest)
			slowest = took;
	}
	H_CHECK(slowest >= 250 && slowest < 3000,
		"the slowest session took %lld ms; expected about the 300 ms connect timeout "
		"(round robin starts half of them at the black hole)", (long long)slowest);
	h_server_stop(&srv);
	h_proxy_down(&p);
	char *log = read_log(&p);
	H_CHECK(strstr(log, "timed out"), "the -v log does not mention the timed-out connect:\n%s", log);
	free(log);
	blackhole_close(&bh);
}

/* A session with no byte either way for --idle-timeout is closed; one that
 * keeps talking is not. */
static void case_idle_timeout(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	char buf[64];

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--idle-timeout", "400ms", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);

	int busy = h_connect(&p.addr, 2000), idle = h_connect(&p.addr, 2000);
	H_CHECK(busy >= 0 && idle >= 0, "connect: %s", strerror(errno));
	memset(buf, 'i', sizeof buf);
	H_CHECK(h_send_all(idle, buf, 64, h_now_ms() + 2000) == 0 &&
		h_recv_exact(idle, buf, 64, h_now_ms() + 2000) == 0, "first echo on the idle session");
	int64_t t0 = h_now_ms();
	/* The busy session talks every 100 ms for 1.2 s: three idle timeouts. */
	for (int i = 0; i < 12; i++) {
		H_CHECK(h_send_all(busy, buf, 64, h_now_ms() + 2000) == 0 &&
			h_recv_exact(busy, buf, 64, h_now_ms() + 2000) == 0,
			"the busy session was cut after %lld ms despite traffic every 100 ms",
			(long long)(h_now_ms() - t0));
		h_sleep_ms(100);
	}
	rc = h_expect_eof(idle, t0 + 3000);
	H_CHECK(rc == 0 || rc == -ECONNRESET, "the idle session was not closed (%s)",
		rc == -ETIMEDOUT ? "still open 3 s later" : strerror(-rc));
	close(idle);
	close(busy);
	h_server_stop(&srv);
	h_proxy_down(&p);
	char *log = read_log(&p);
	H_CHECK(log_counter(log, "idle-timeout ") == 1, "expected exactly 1 idle timeout in the "
		"totals line:\n%s", log);
	free(log);
}

/* --max-conns 2: a third client waits in the backlog, unserved, until one of
 * the first two leaves. */
static void case_max_conns(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	char buf[64] = "max-conns";

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--max-conns", "2", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);
	int a = h_connect(&p.addr, 2000), b = h_connect(&p.addr, 2000);
	H_CHECK(a >= 0 && b >= 0, "connect: %s", strerror(errno));
	H_CHECK(h_send_all(a, buf, 64, h_now_ms() + 2000) == 0 &&
		h_recv_exact(a, buf, 64, h_now_ms() + 2000) == 0, "echo on session 1");
	H_CHECK(h_send_all(b, buf, 64, h_now_ms() + 2000) == 0 &&
		h_recv_exact(b, buf, 64, h_now_ms() + 2000) == 0, "echo on session 2");
	int c = h_connect(&p.addr, 2000); /* completes in the kernel's backlog */
	H_CHECK(c >= 0, "connect 3: %s", strerror(errno));
	H_CHECK(h_send_all(c, buf, 64, h_now_ms() + 2000) == 0, "send on session 3");
	rc = h_recv_exact(c, buf, 64, h_now_ms() + 700);
	H_CHECK(rc == -ETIMEDOUT || rc == -EAGAIN, "session 3 was served beyond --max-conns 2 (%d)", rc);
	close(a);
	int64_t t0 = h_now_ms();
	rc = h_recv_exact(c, buf, 64, h_now_ms() + 2000);
	H_CHECK(rc == 0, "session 3 not served after session 1 closed (%s)", strerror(-rc));
	H_CHECK(h_now_ms() - t0 < 1000, "session 3 waited %lld ms after a slot freed",
		(long long)(h_now_ms() - t0));
	close(b);
	close(c);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

/* Out of descriptors (ulimit -n 64): accepting pauses instead of spinning
 * on EMFILE, it is logged once, and the proxy serves again once clients
 * leave. */
static void case_emfile(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	enum { N = 60 };
	int fds[N];
	char buf[64] = "emfile";

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *args[] = { "--nofile=64", bin, "-l", "127.0.0.1:0", "-b", srv.addr.text,
			       "--engine", engine, "--workers", "1", "--max-conns", "1000", NULL };
	char err[512];
	H_CHECK(h_proxy_start(&p, "/usr/bin/prlimit", args, err, sizeof err) == 0,
		"proxy under prlimit did not start: %s", err);
	for (int i = 0; i < N; i++) /* more than 64 fds can hold: the backlog keeps the rest */
		fds[i] = h_connect(&p.addr, 2000);
	h_sleep_ms(300);
	double c0 = proc_cpu_s(p.pid);
	h_sleep_ms(1000);
	double used = proc_cpu_s(p.pid) - c0;
	H_CHECK(used < 0.3, "the proxy used %.2f CPU-s in 1 s while out of descriptors: it spins", used);
	for (int i = 0; i < N; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* Served again: the pause ends and descriptors are free. */
	int ok = 0;
	for (int i = 0; i < 50 && !ok; i++) {
		char why[256];
		ok = h_echo_roundtrip(&p.addr, 64, 0xE3 + (uint64_t)i, 2000, why, sizeof why) == 0;
		if (!ok)
			h_sleep_ms(100);
	}
	H_CHECK(ok, "the proxy does not serve again after the clients left");
	(void)buf;
	h_server_stop(&srv);
	h_proxy_down(&p);
	char *log = read_log(&p);
	const char *first = strstr(log, "pausing accepts");
	H_CHECK(first && !strstr(first + 1, "pausing accepts"),
		"expected the EMFILE pause logged exactly once:\n%s", log);
	H_CHECK(log_counter(log, "accept pauses fd ") > 0, "no accept pause counted:\n%s", log);
	free(log);
}

/* Out of descriptors with clients accepted already: a client whose backend
 * socket finds no descriptor waits for one (the accept took the last) and
 * is served once others leave; no client is reset. Two limits one apart:
 * the accept takes the last descriptor under one of them, whatever the
 * proxy's own count is. */
static void case_emfile_no_reset(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	enum { N = 40, FIRST = 20 };
	int fds[N];

	for (int limit = 48; limit <= 49; limit++) {
		char nofile[32], err[512];
		unsigned char tag[16], back[16];
		int64_t dl;
		/* (a server of its own each time: it takes H_SERVER_MAX_CONNS in all) */
		int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);

		H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
		snprintf(nofile, sizeof nofile, "--nofile=%d", limit);
		const char *args[] = { nofile, bin, "-l", "127.0.0.1:0", "-b", srv.addr.text, "--engine",
				       engine, "--workers", "1", "--max-conns", "1000", NULL };
		H_CHECK(h_proxy_start(&p, "/usr/bin/prlimit", args, err, sizeof err) == 0,
			"proxy under prlimit did not start: %s", err);
		for (int i = 0; i < N; i++) { /* more than the limit holds: some wait */
			fds[i] = h_connect(&p.addr, 2000);
			H_CHECK(fds[i] >= 0, "client %d: connect: %s", i, strerror(errno));
			h_gen(0xEF00 + (uint64_t)limit, (uint64_t)i * sizeof tag, tag, sizeof tag);
			H_CHECK(h_send_all(fds[i], tag, sizeof tag, h_now_ms() + 2000) == 0,
				"client %d: send", i);
		}
		h_sleep_ms(500); /* every descriptor is taken now */
		dl = h_now_ms() + H_T(3000);
		for (int i = 0; i < FIRST; i++) { /* served, then gone: descriptors free */
			h_gen(0xEF00 + (uint64_t)limit, (uint64_t)i * sizeof tag, tag, sizeof tag);
			rc = h_recv_exact(fds[i], back, sizeof back, dl);
			H_CHECK(rc == 0 && !memcmp(tag, back, sizeof tag),
				"ulimit -n %d: client %d of the first %d: %s", limit, i, FIRST,
				rc ? strerror(-rc) : "another client's bytes");
			close(fds[i]);
		}
		dl = h_now_ms() + H_T(4000); /* within connect_timeout (5 s) */
		for (int i = FIRST; i < N; i++) {
			h_gen(0xEF00 + (uint64_t)limit, (uint64_t)i * sizeof tag, tag, sizeof tag);
			rc = h_recv_exact(fds[i], back, sizeof back, dl);
			H_CHECK(rc == 0 && !memcmp(tag, back, sizeof tag),
				"ulimit -n %d: client %d, waiting while descriptors ran out, was not "
				"served after others left: %s", limit, i,
				rc ? strerror(-rc) : "another client's bytes");
			close(fds[i]);
		}
		h_proxy_down(&p);
		h_server_stop(&srv);
	}
}

/* No pipe to be had (--max-pipes 0): spliced directions fall back to copy,
 * every byte still arrives, and the counter says so. */
static void case_pipe_fallback(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_xfer tx, rx;

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--max-pipes", "0", "-v", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	int64_t dl = h_now_ms() + H_T(30000);
	h_xfer_init(&tx, fd, 0xFA11, 16 * H_MIB, dl);
	tx.shut_wr = 1;
	h_xfer_init(&rx, fd, 0xFA11, 0, dl);
	rx.verify = 1;
	H_CHECK(h_xfer_start_send(&tx) == 0, "cannot start the sender");
	h_xfer_recv(&rx);
	H_CHECK(h_xfer_join(&tx, 2000) == 0, "sender did not finish");
	h_check_stream("client->echo->client", &tx, &rx, 16 * H_MIB);
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
	char *log = read_log(&p);
	H_CHECK(log_counter(log, "splice fallbacks ") >= 1 && strstr(log, "falls back to copy"),
		"no fallback logged and counted with --max-pipes 0:\n%s", log);
	H_CHECK(log_counter(log, "spliced ") == 0, "bytes were spliced without pipes:\n%s", log);
	free(log);
}

/* auto: 64-byte request/response never splices (it moves to io_uring where
 * that runs); a 16 MiB stream after it switches to splice. */
static void case_auto_choice(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_xfer tx, rx;

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "-v", NULL };
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, extra);
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	h_set_nodelay(fd);
	h_echo_rounds(fd, 0xAC, 0, 500, 2000);
	char *log = read_log(&p);
	H_CHECK(!strstr(log, "switched to splice"), "request/response switched to splice:\n%s", log);
	free(log);

	int64_t dl = h_now_ms() + H_T(30000);
	h_xfer_init(&tx, fd, 0xB0, 16 * H_MIB, dl);
	tx.shut_wr = 1;
	h_xfer_init(&rx, fd, 0xB0, 0, dl);
	rx.verify = 1;
	H_CHECK(h_xfer_start_send(&tx) == 0, "cannot start the sender");
	h_xfer_recv(&rx);
	H_CHECK(h_xfer_join(&tx, 2000) == 0, "sender did not finish");
	H_CHECK(rx.err == 0 && rx.eof && rx.bytes == 16 * H_MIB && rx.mismatch_at < 0,
		"stream after the ping-pong: %llu bytes, err %d, mismatch at %lld",
		(unsigned long long)rx.bytes, rx.err, (long long)rx.mismatch_at);
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
	log = read_log(&p);
	H_CHECK(strstr(log, "client->backend switched to splice") &&
		strstr(log, "backend->client switched to splice"),
		"a 16 MiB stream did not switch both directions to splice:\n%s", log);
	/* Where io_uring runs, the 500 round trips moved the session there
	 * (auto_uring_turns), and the stream brought it back to copy, then
	 * splice; elsewhere it went from copy to splice. */
	if (strstr(log, "request/response sessions stay on copy"))
		H_CHECK(strstr(log, "engine=copy+splice/copy+splice"),
			"session line lacks the engines:\n%s", log);
	else
		H_CHECK(strstr(log, "request/response (16 turns): moves to uring") &&
				strstr(log, "back on copy") &&
				strstr(log, "engine=copy+splice+uring/copy+splice+uring"),
			"the session did not go copy -> uring -> copy -> splice, or its line lacks "
			"the engines:\n%s", log);
	free(log);
	(void)engine;
}

/* -v: one line per session at close with route, client, backend, bytes, duration,
 * engines and reason. */
static void case_session_log(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	char why[256], want[256];

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "-v", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);
	rc = h_echo_roundtrip(&p.addr, 1000, 0x106, 3000, why, sizeof why);
	H_CHECK(rc == 0, "echo: %s", why);
	h_server_stop(&srv);
	h_proxy_down(&p);
	char *log = read_log(&p);
	snprintf(want, sizeof want, "backend=%s up=1000 down=1000 duration_ms=", srv.addr.text);
	H_CHECK(strstr(log, "close route=default client=127.0.0.1:") && strstr(log, want) &&
		strstr(log, "reason=done"), "no session line with \"%s\" in:\n%s", want, log);
	free(log);
}

/* --lowat on a spliced route: a message shorter than the mark raises no
 * readiness event, yet it must arrive (after at most one scan period), not
 * wait forever for more bytes. */
static void case_lowat_short_messages(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--lowat", "64k", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	for (int i = 0; i < 10; i++) {
		char buf[100];
		int64_t t0 = h_now_ms();
		h_gen(0x10A7, (uint64_t)i * 100, buf, sizeof buf);
		H_CHECK(h_send_all(fd, buf, sizeof buf, t0 + 1000) == 0, "send %d", i);
		rc = h_recv_exact(fd, buf, sizeof buf, t0 + 1000);
		H_CHECK(rc == 0, "100-byte message %d under --lowat 64k not echoed within 1 s (%s)", i,
			strerror(-rc));
		H_CHECK(h_gen_check(0x10A7, (uint64_t)i * 100, buf, sizeof buf) == sizeof buf,
			"message %d corrupted", i);
	}
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

/* --busy-poll: replies still arrive, and the polling stops once traffic does:
 * an idle proxy must not keep a CPU busy. */
static void case_busy_poll(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--busy-poll", "200", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);
	H_CHECK(strstr(p.ready_line, "ready") != NULL, "no ready line");

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect to the proxy at %s: %s", p.addr.text, strerror(errno));
	h_set_nodelay(fd);
	int64_t deadline = h_now_ms() + H_T(20000);
	unsigned char req[64], rep[64];
	for (int i = 0; i < 2000; i++) {
		h_gen(0xB5B5, (uint64_t)i * 64, req, sizeof req);
		H_CHECK(h_send_all(fd, req, sizeof req, deadline) == 0, "round trip %d: send", i);
		rc = h_recv_exact(fd, rep, sizeof rep, deadline);
		H_CHECK(rc == 0 && !memcmp(req, rep, sizeof req), "round trip %d: %s", i,
			rc ? strerror(-rc) : "reply differs");
	}
	/* Idle for a second with the session open: polling for 200 us after
	 * each event must not turn into spinning (a spinning worker would burn
	 * about a CPU-second here). */
	double c0 = proc_cpu_s(p.pid);
	h_sleep_ms(1000);
	double used = proc_cpu_s(p.pid) - c0;
	H_CHECK(c0 >= 0 && used < 0.3, "idle proxy with --busy-poll 200 used %.2f CPU-s in 1 s", used);
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

#define PLAIN_AND_ASAN(name, tmo)                                                         \
	Test(integ, name, .init = h_init, .fini = h_fini, .timeout = tmo)                 \
	{ case_##name(h_binary(0), "splice"); }                                           \
	Test(integ, name##_asan, .init = h_init, .fini = h_fini, .timeout = tmo)          \
	{ case_##name(h_binary(1), "splice"); }

PLAIN_AND_ASAN(connect_timeout, 60)
PLAIN_AND_ASAN(idle_timeout, 60)
PLAIN_AND_ASAN(max_conns, 60)
PLAIN_AND_ASAN(emfile, 60)
PLAIN_AND_ASAN(emfile_no_reset, 60)
PLAIN_AND_ASAN(pipe_fallback, 60)
PLAIN_AND_ASAN(auto_choice, 60)
PLAIN_AND_ASAN(session_log, 60)
PLAIN_AND_ASAN(lowat_short_messages, 60)
PLAIN_AND_ASAN(busy_poll, 60)
H_SOCKMAP_CASES(idle_timeout, 60)
