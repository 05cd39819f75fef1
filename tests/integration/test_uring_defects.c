/* SPDX-License-Identifier: MIT */
/* Regression cases for the uring engine's defects (issue 13, then the hardening issue):
 *   1. descriptor reuse: with the sessions on plain descriptors (the fixed
 *      file table full under a small ulimit -n), a session closed while an
 *      SQE naming its socket was still queued sent its backend's bytes to
 *      the next client that got the same descriptor number. Every client
 *      here checks that each byte it receives is its own backend's;
 *   2. starvation: five clients that never read, each pushed by a backend
 *      writing as fast as it can, must not freeze an unrelated session on
 *      the same worker (it echoes 1 MiB); nor must forty, arriving in waves
 *      (they emptied the worker's buffer ring), and their own
 *      bytes must all come once they read;
 *   3. leaks: a session whose start fails after its sockets moved into the
 *      fixed table still closes both peers (fault injection through
 *      SPLICER_URING_FAULT, see engine_uring.c), a failing io_uring_submit
 *      does not end the process, a close that finds the SQ full still
 *      happens (it was skipped, and a peer never saw the end), and a recv,
 *      send or FIN that finds no SQE waits for one (it ended its session);
 *   4. a reload that moves a route to uring where io_uring_setup is denied
 *      (a seccomp filter, tests/tools/no_uring.c) keeps it on copy and says
 *      why, rather than closing every session with uring-error. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "load_driver.h"

/* A case's two tests: with the plain proxy, and with the ASan+UBSan one
 * (name_asan, allowed more time). */
#define URING_DEFECT_TESTS(name, fn, tmo, tmo_asan)                                         \
	Test(integ, name, .init = h_init, .fini = h_fini, .timeout = tmo) { fn(h_binary(0)); } \
	Test(integ, name##_asan, .init = h_init, .fini = h_fini, .timeout = tmo_asan) { fn(h_binary(1)); }

/* ---- a backend loop: the session's first 8 bytes say what it does -------- */

#define M_SHIFT 56
#define M_HOLD 1ull   /* answer 'h', then stay silent */
#define M_STREAM 2ull /* push stream_seed(id) as fast as the socket takes it */
#define M_ECHO 3ull   /* echo until EOF */
#define B_SLOTS 4096
#define B_CHUNK (64 * 1024)

struct bconn {
	int fd;
	uint8_t got;
	unsigned char idb[8];
	uint64_t id, off;
	uint32_t mask;
	size_t blen, bpos; /* echo: bytes in buf not yet sent back */
	unsigned char *buf;
};

struct backend {
	int lfd;
	struct h_addr addr;
	uint64_t seed;
	_Atomic int stop;
	_Atomic int accepted, closed;
	_Atomic uint64_t pushed; /* stream bytes sent, all sessions */
	pthread_t thr;
	int started;
};

static uint64_t stream_seed(uint64_t seed, uint64_t id)
{
	return seed ^ ((id & ((1ull << M_SHIFT) - 1)) * 0x9E3779B97F4A7C15ull);
}

static void bconn_close(struct bconn *c)
{
	close(c->fd);
	free(c->buf);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* Returns 1 when the connection is over. */
static int bconn_step(struct backend *b, struct bconn *c, uint32_t ev)
{
	unsigned char tmp[B_CHUNK];

	if (c->got < 8) {
		ssize_t r = recv(c->fd, c->idb + c->got, 8 - c->got, 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			return 1;
		if (r < 0 || (c->got += (uint8_t)r) < 8)
			return 0;
		memcpy(&c->id, c->idb, 8);
		switch (c->id >> M_SHIFT) {
		case M_HOLD:
			return send(c->fd, "h", 1, MSG_NOSIGNAL) != 1;

		case M_STREAM:
			c->mask = EPOLLOUT;
			return 0;
		case M_ECHO:
			if (!(c->buf = malloc(B_CHUNK)))
				return 1;
			return 0;
		default:
			return 1;
		}
	}
	switch (c->id >> M_SHIFT) {
	case M_HOLD:
		if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
			ssize_t r = recv(c->fd, tmp, sizeof tmp, 0);
			return r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
		}
		return 0;
	case M_STREAM:
		for (int i = 0; i < 16; i++) {
			h_gen(stream_seed(b->seed, c->id), c->off, tmp, sizeof tmp);
			ssize_t r = send(c->fd, tmp, sizeof tmp, MSG_NOSIGNAL);
			if (r < 0)
				return errno != EAGAIN && errno != EINTR;
			c->off += (uint64_t)r;
			atomic_fetch_add(&b->pushed, (uint64_t)r);
		}
		return 0;
	default: /* M_ECHO */
		if (c->bpos == c->blen) {
			ssize_t r = recv(c->fd, c->buf, B_CHUNK, 0);
			if (r == 0) {
				shutdown(c->fd, SHUT_WR);
				return 1;
			}
			if (r < 0)
				return errno != EAGAIN && errno != EINTR;
			c->blen = (size_t)r;
			c->bpos = 0;
		}
		while (c->bpos < c->blen) {
			ssize_t r = send(c->fd, c->buf + c->bpos, c->blen - c->bpos, MSG_NOSIGNAL);
			if (r < 0) {
				if (errno != EAGAIN && errno != EINTR)
					return 1;
				break;
			}
			c->bpos += (size_t)r;
		}
		c->mask = c->bpos < c->blen ? EPOLLOUT : EPOLLIN;
		return 0;
	}
}

static void *backend_main(void *arg)
{
	struct backend *b = arg;
	struct bconn *cs = calloc(B_SLOTS, sizeof(*cs));
	struct epoll_event evs[64];
	int ep = epoll_create1(EPOLL_CLOEXEC), nfree = 0;
	static int freel[B_SLOTS];

	if (!cs || ep < 0)
		goto out;
	for (int k = B_SLOTS; k-- > 0;) {
		cs[k].fd = -1;
		freel[nfree++] = k;
	}
	struct epoll_event lev = { .events = EPOLLIN, .data.u32 = B_SLOTS };
	epoll_ctl(ep, EPOLL_CTL_ADD, b->lfd, &lev);
	while (!atomic_load(&b->stop)) {
		int n = epoll_wait(ep, evs, 64, 20);
		for (int i = 0; i < n; i++) {
			uint32_t k = evs[i].data.u32;
			if (k == B_SLOTS) {
				int fd;
				while (nfree && (fd = accept4(b->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					int s = freel[--nfree];
					cs[s] = (struct bconn){ .fd = fd, .mask = EPOLLIN };
					struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)s };
					epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
					atomic_fetch_add(&b->accepted, 1);
				}
				continue;
			}
			struct bconn *c = &cs[k];
			if (c->fd < 0)
				continue;
			if (bconn_step(b, c, evs[i].events)) {
				bconn_close(c);
				atomic_fetch_add(&b->closed, 1);
				freel[nfree++] = (int)k;
			} else {
				struct epoll_event ev = { .events = c->mask, .data.u32 = k };
				epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
			}
		}
	}
out:
	for (int k = 0; cs && k < B_SLOTS; k++)
		if (cs[k].fd >= 0)
			bconn_close(&cs[k]);
	if (ep >= 0)
		close(ep);
	free(cs);
	return NULL;
}

static void backend_start(struct backend *b, uint64_t seed)
{
	memset(b, 0, sizeof(*b));
	b->seed = seed;
	b->lfd = ld_listen(&b->addr, 4096);
	H_CHECK(b->lfd >= 0, "backend listen: %s", strerror(-b->lfd));
	H_CHECK(pthread_create(&b->thr, NULL, backend_main, b) == 0, "backend thread");
	b->started = 1;
}

static void backend_stop(struct backend *b)
{
	if (!b->started)
		return;
	atomic_store(&b->stop, 1);
	pthread_join(b->thr, NULL);
	close(b->lfd);
	b->started = 0;
}

/* Waits until the backends pushed nothing for quiet_ms (every buffer on
 * the way is full), at most max_ms; returns the bytes pushed so far. */
static uint64_t backend_wait_quiet(struct backend *b, int quiet_ms, int max_ms)
{
	int64_t t0 = h_now_ms(), quiet_since = t0;
	uint64_t last = atomic_load(&b->pushed);

	while (h_now_ms() - quiet_since < quiet_ms && h_now_ms() - t0 < max_ms) {
		h_sleep_ms(50);
		uint64_t now = atomic_load(&b->pushed);
		if (now != last)
			quiet_since = h_now_ms();
		last = now;
	}
	return last;
}

/* A client of the proxy whose backend session does `mode`; blocking, 1 s
 * timeouts. */
static int client_open(const struct h_addr *proxy, uint64_t mode, uint64_t id)
{
	int fd = h_connect(proxy, 5000);
	uint64_t w = (mode << M_SHIFT) | id;

	H_CHECK(fd >= 0, "connect to the proxy: %s", strerror(errno));
	H_CHECK(h_send_all(fd, &w, 8, h_now_ms() + 5000) == 0, "send the session's mode");
	return fd;
}

/* n held sessions, opened `batch` at a time (each batch connects, then
 * waits for every answer). */
static void hold_open_batched(const struct h_addr *proxy, int *fds, int n, int batch)
{
	for (int i = 0; i < n; i += batch) {
		int k = n - i < batch ? n - i : batch;

		for (int j = i; j < i + k; j++)
			fds[j] = client_open(proxy, M_HOLD, (uint64_t)j);
		for (int j = i; j < i + k; j++) {
			char c = 0;
			H_CHECK(h_recv_exact(fds[j], &c, 1, h_now_ms() + 5000) == 0 && c == 'h',
				"held session %d did not open", j);
		}
	}
}

static void hold_open(const struct h_addr *proxy, int *fds, int n)
{
	hold_open_batched(proxy, fds, n, 1);
}

/* ---- 1. descriptor reuse ----------------------------------------------------- */

#define R_INFLIGHT 16
#define R_HOLD 32      /* sessions filling the 64-slot fixed table */
#define R_NOFILE "64"

struct rconn {
	int fd;
	uint64_t id, got, want;
	int64_t since;
};

struct reuse_run {
	uint64_t started, ok, cut, stuck, cross;
	char why[256], stuck_why[256];
};

static void rconn_open(const struct h_addr *proxy, struct rconn *c, uint64_t id, int ep, int k)
{
	uint64_t w = (M_STREAM << M_SHIFT) | id;

	c->id = id;
	c->got = 0;
	c->want = 1 + (id * 7919) % (96 * 1024);
	c->since = h_now_ms();
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(c->fd >= 0, "socket: %s", strerror(errno));
	/* blocking connect: the proxy's backlog takes it even while it pauses accepting */
	h_set_timeouts(c->fd, 1000);
	if (connect(c->fd, (const struct sockaddr *)&proxy->ss, proxy->len) ||
	    send(c->fd, &w, 8, MSG_NOSIGNAL) != 8) {
		close(c->fd);
		c->fd = -1;
		return;
	}
	fcntl(c->fd, F_SETFL, O_NONBLOCK);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)k };
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void rconn_end(struct rconn *c, int rst)
{
	if (rst) {
		struct linger lg = { 1, 0 };
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(c->fd);
	c->fd = -1;
}

/* Clients, R_INFLIGHT at a time, each reading up to 96 KiB of its backend's
 * stream and then closing (every other one with an RST) while that backend
 * still pushes; every received byte is checked against the client's own
 * stream. */
static void reuse_clients(const struct h_addr *proxy, uint64_t seed, uint64_t count, int64_t deadline,
			  struct reuse_run *run)
{
	struct rconn cs[R_INFLIGHT];
	struct epoll_event evs[R_INFLIGHT];
	unsigned char buf[32 * 1024];
	int ep = epoll_create1(EPOLL_CLOEXEC), live = 0;

	for (int k = 0; k < R_INFLIGHT; k++)
		cs[k].fd = -1;
	for (;;) {
		for (int k = 0; k < R_INFLIGHT && run->started < count && h_now_ms() < deadline; k++) {
			if (cs[k].fd >= 0)
				continue;
			rconn_open(proxy, &cs[k], run->started++, ep, k);
			if (cs[k].fd >= 0)
				live++;
			else
				run->cut++;
		}
		if (!live)
			break;
		int n = epoll_wait(ep, evs, R_INFLIGHT, 20);
		int64_t now = h_now_ms();
		for (int i = 0; i < n; i++) {
			struct rconn *c = &cs[evs[i].data.u32];
			if (c->fd < 0)
				continue;
			uint64_t room = c->want - c->got < sizeof buf ? c->want - c->got : sizeof buf;
			ssize_t r = recv(c->fd, buf, room, 0);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r <= 0) { /* the proxy cut it (a descriptor limit): not this defect */
				run->cut++;
				rconn_end(c, 0);
				live--;
				continue;
			}
			size_t bad = h_gen_check(stream_seed(seed, c->id), c->got, buf, (size_t)r);
			if (bad != (size_t)r) {
				if (!run->cross)
					snprintf(run->why, sizeof run->why,
						 "client %llu: byte %llu is not its backend's (another session's?)",
						 (unsigned long long)c->id, (unsigned long long)(c->got + bad));
				run->cross++;
				rconn_end(c, 1);
				live--;
				continue;
			}
			c->got += (uint64_t)r;
			c->since = now;
			if (c->got == c->want) {
				run->ok++;
				rconn_end(c, c->id & 1);
				live--;
			}
		}
		for (int k = 0; k < R_INFLIGHT; k++)
			if (cs[k].fd >= 0 && now - cs[k].since > 10000) {
				if (!run->stuck)
					snprintf(run->stuck_why, sizeof run->stuck_why,
						 "client %llu: no byte for 10 s after %llu of %llu",
						 (unsigned long long)cs[k].id, (unsigned long long)cs[k].got,
						 (unsigned long long)cs[k].want);
				run->stuck++;
				rconn_end(&cs[k], 1);
				live--;
			}
	}
	close(ep);
}

static void case_fd_reuse(const char *bin)
{
	static struct h_proxy p;
	static struct backend b;
	struct reuse_run run = { 0 };
	int hold[R_HOLD];
	char err[512];
	uint64_t seed = 0x13d1a5e5ull << 20;
	uint64_t count = 3000;

	backend_start(&b, seed);
	const char *args[] = { "--nofile=" R_NOFILE, bin, "-l", "127.0.0.1:0", "-b", b.addr.text,
			       "--engine", "uring", "--workers", "1", "--max-conns", "100000", "-v", NULL };
	H_CHECK(h_proxy_start(&p, "/usr/bin/prlimit", args, err, sizeof err) == 0,
		"proxy under prlimit did not start: %s", err);
	/* The ring's table has RLIMIT_NOFILE (64) slots: these take them all,
	 * so every session below runs on plain descriptors. */
	hold_open(&p.addr, hold, R_HOLD);
	struct ld_fds f0, f1;
	H_CHECK(ld_fd_kinds(p.pid, &f0) == 0, "the proxy's descriptors");
	reuse_clients(&p.addr, seed, count, h_now_ms() + H_T(60000), &run);
	fprintf(stderr, "[uring fd reuse] %llu clients: %llu whole, %llu cut by the proxy, "
			"%llu stuck, %llu got another session's bytes\n",
		(unsigned long long)run.started, (unsigned long long)run.ok, (unsigned long long)run.cut,
		(unsigned long long)run.stuck, (unsigned long long)run.cross);
	H_CHECK(run.cross == 0, "%llu of %llu clients received bytes that were not their backend's: %s",
		(unsigned long long)run.cross, (unsigned long long)run.started, run.why);
	H_CHECK(run.stuck == 0, "%llu clients stuck: %s", (unsigned long long)run.stuck, run.stuck_why);
	H_CHECK(run.ok >= run.started / 2, "only %llu of %llu clients got their bytes",
		(unsigned long long)run.ok, (unsigned long long)run.started);
	/* every session ended: its sockets are closed (the held ones live in
	 * the fixed table) */
	int64_t t0 = h_now_ms();
	while (ld_fd_kinds(p.pid, &f1) == 0 && f1.sockets > f0.sockets && h_now_ms() - t0 < 5000)
		h_sleep_ms(20);
	H_CHECK(f1.sockets <= f0.sockets, "the proxy holds %d sockets after the sessions ended, %d before",
		f1.sockets, f0.sockets);
	for (int i = 0; i < R_HOLD; i++)
		close(hold[i]);
	H_CHECK(h_proxy_alive(&p), "the proxy died");
	h_proxy_down(&p);
	backend_stop(&b);
}

URING_DEFECT_TESTS(uring_fd_reuse_plain_descriptors, case_fd_reuse, 120, 240)

/* ---- 2. starvation ------------------------------------------------------------ */

#define S_STALLED 5

/* Five clients that never read, each pushed by a backend writing as fast as
 * its socket takes it, until they stop taking; then an unrelated session
 * on the same worker must echo 1 MiB. */
static void case_starvation(const char *bin)
{
	static struct h_proxy p;
	static struct backend b;
	int stalled[S_STALLED];
	uint64_t seed = 0x57a4e5ull << 24, last;
	struct h_xfer tx, rx;
	char err[512];
	const char *args[] = { "-l", "127.0.0.1:0", "-b", NULL, "--engine", "uring", "--workers", "1", NULL };

	backend_start(&b, seed);
	args[3] = b.addr.text;
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "proxy: %s", err);
	for (int i = 0; i < S_STALLED; i++)
		stalled[i] = client_open(&p.addr, M_STREAM, (uint64_t)i);
	/* until the backends stop getting anywhere: every buffer on the way
	 * (and every one the proxy lets them have) is full */
	last = backend_wait_quiet(&b, 500, 20000);
	H_CHECK(last > 0, "the backends pushed nothing");
	int fd = client_open(&p.addr, M_ECHO, 99);
	int64_t deadline = h_now_ms() + H_T(20000);
	h_xfer_init(&tx, fd, seed ^ 0x1e40, 1024 * 1024, deadline);
	tx.shut_wr = 1;
	h_xfer_init(&rx, fd, seed ^ 0x1e40, 0, deadline);
	rx.verify = 1;
	H_CHECK(h_xfer_start_send(&tx) == 0 && h_xfer_start_recv(&rx) == 0, "transfer threads");
	h_xfer_join(&tx, 2000);
	h_xfer_join(&rx, 2000);
	fprintf(stderr, "[uring starvation] %d stalled sessions (%llu MiB pushed); the echo session: "
			"%llu of 1024 KiB back in %lld ms\n", S_STALLED,
		(unsigned long long)(last >> 20), (unsigned long long)(rx.bytes >> 10),
		(long long)(h_now_ms() - (deadline - H_T(20000))));
	h_check_stream("echo session beside five stalled ones", &tx, &rx, 1024 * 1024);
	close(fd);
	for (int i = 0; i < S_STALLED; i++)
		close(stalled[i]);
	h_proxy_down(&p);
	backend_stop(&b);
}

URING_DEFECT_TESTS(uring_stalled_readers_do_not_starve_others, case_starvation, 90, 120)

/* ---- 2b. many stalled readers: fairness of the shared buffer ring ------------ */

#define F_STALLED 40
#define F_WAVE 5
#define F_ROUNDS 3
#define F_CHECK (2 * 1024 * 1024) /* bytes each stalled client reads back at the end */

/* Forty clients that download and never read (each pushed by a backend
 * writing as fast as it can), on one worker's ring of 64 provided buffers:
 * each parked at least one buffer in a send that never completed, and the
 * ring emptied, so every other uring session of the worker stopped (0 of 3
 * echoes answered). A stalled direction must hand its buffers back (its
 * bytes wait in its own memory, and it receives no more until they are
 * sent): three echo round trips of another client are each answered within
 * 2 s (about 20 ms here, most of it the stall detection). Then the stalled
 * clients read: each must get the first 2 MiB of its own stream, in order,
 * so nothing parked aside was lost, doubled or reordered. */
static void case_many_stalled(const char *bin)
{
	static struct h_proxy p;
	static struct backend b;
	static unsigned char buf[F_CHECK];
	int stalled[F_STALLED], answered = 0;
	int64_t lat[F_ROUNDS], worst = 0;
	uint64_t seed = 0xfa1aull << 32, last = 0;
	char err[512];
	const char *args[] = { "-l", "127.0.0.1:0", "-b", NULL, "--engine", "uring", "--workers", "1", NULL };

	backend_start(&b, seed);
	args[3] = b.addr.text;
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "proxy: %s", err);
	/* They come in waves, each stalling before the next comes (as
	 * downloads start over time): the first of them each took a stalled
	 * direction's full quota (8 buffers), the later ones the reserve. */
	for (int i = 0; i < F_STALLED; i++) {
		stalled[i] = client_open(&p.addr, M_STREAM, (uint64_t)i);
		if (i % F_WAVE == F_WAVE - 1)
			last = backend_wait_quiet(&b, 300, 10000);
	}
	last = backend_wait_quiet(&b, 1000, 20000);
	H_CHECK(last > 0, "the backends pushed nothing");
	int fd = client_open(&p.addr, M_ECHO, 1000);
	for (int i = 0; i < F_ROUNDS; i++) {
		unsigned char out[64], in[64];
		int64_t t1 = h_now_ms();

		h_gen(seed ^ 0xec0, (uint64_t)i * sizeof out, out, sizeof out);
		lat[i] = -1;
		if (h_send_all(fd, out, sizeof out, t1 + 2000) || h_recv_exact(fd, in, sizeof in, t1 + 2000))
			break;
		H_CHECK(!memcmp(in, out, sizeof in), "echo %d came back altered", i);
		lat[i] = h_now_ms() - t1;
		worst = lat[i] > worst ? lat[i] : worst;
		answered++;
	}
	fprintf(stderr, "[uring many stalled] %d stalled sessions (%llu MiB pushed, proxy RSS %ld MiB): "
			"%d of %d echoes answered, round trips %lld/%lld/%lld ms\n", F_STALLED,
		(unsigned long long)(last >> 20), h_rss_kib(p.pid) >> 10, answered, F_ROUNDS, (long long)lat[0],
		(long long)(answered > 1 ? lat[1] : -1), (long long)(answered > 2 ? lat[2] : -1));
	H_CHECK(answered == F_ROUNDS, "%d of %d echo round trips answered within 2 s each beside %d "
		"stalled sessions on the worker", answered, F_ROUNDS, F_STALLED);
	close(fd);
	/* The stalled sessions flow again once their clients read. */
	for (int i = 0; i < F_STALLED; i++) {
		int r = h_recv_exact(stalled[i], buf, sizeof buf, h_now_ms() + H_T(10000));
		H_CHECK(r == 0, "stalled client %d: its first %d KiB did not come once it read (%s)", i,
			F_CHECK >> 10, strerror(-r));
		size_t good = h_gen_check(stream_seed(seed, (uint64_t)i), 0, buf, sizeof buf);
		H_CHECK(good == sizeof buf, "stalled client %d: byte %zu is not its stream's", i, good);
		close(stalled[i]);
	}
	H_CHECK(h_proxy_alive(&p), "the proxy died");
	h_proxy_down(&p);
	backend_stop(&b);
}

URING_DEFECT_TESTS(uring_many_stalled_readers_keep_others_flowing, case_many_stalled, 120, 180)

/* ---- 3. failures after the fixed table, submit errors ------------------------ */

/* With SPLICER_URING_FAULT=start:2 every second session's start fails after
 * both sockets moved into the ring's fixed table: the session closes with
 * uring-error, and both its peers must see the end (the slots were leaked
 * with the sockets in them: both peers hung). The others echo. */
static void case_start_fails_after_fixed(const char *bin)
{
	static struct h_proxy p;
	static struct backend b;
	enum { N = 20 };
	int fds[N], ended = 0, echoed = 0;
	char err[512];

	backend_start(&b, 0x5ab1e);
	const char *args[] = { "SPLICER_URING_FAULT=start:2", bin, "-l", "127.0.0.1:0", "-b", b.addr.text,
			       "--engine", "uring", "--workers", "1", NULL };
	H_CHECK(h_proxy_start(&p, "/usr/bin/env", args, err, sizeof err) == 0, "proxy: %s", err);
	for (int i = 0; i < N; i++) {
		char got[4];
		fds[i] = client_open(&p.addr, M_ECHO, (uint64_t)i);
		/* a send refused (the end came first) counts as the end */
		int r = h_send_all(fds[i], "ping", 4, h_now_ms() + 3000);
		if (!r)
			r = h_recv_exact(fds[i], got, 4, h_now_ms() + 3000);
		H_CHECK(r != -ETIMEDOUT && r != -EAGAIN,
			"session %d: neither its echo nor its end within 3 s (the peers hang)", i);
		if (r == 0 && !memcmp(got, "ping", 4))
			echoed++;
		else
			ended++;
	}
	H_CHECK(ended == N / 2 && echoed == N / 2, "%d sessions ended, %d echoed; expected %d each "
		"(h_proxy log: SPLICER_URING_FAULT)", ended, echoed, N / 2);
	/* the backend side of each failed session was closed too */
	int64_t t0 = h_now_ms();
	while (atomic_load(&b.closed) < ended && h_now_ms() - t0 < 3000)
		h_sleep_ms(10);
	H_CHECK(atomic_load(&b.closed) == ended, "the backend saw %d of the %d failed sessions end",
		atomic_load(&b.closed), ended);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	h_proxy_down(&p);
	backend_stop(&b);
}

URING_DEFECT_TESTS(uring_start_failure_after_fixed_table_closes_peers, case_start_fails_after_fixed, 90, 120)

/* SPLICER_URING_FAULT=submit:3: every third io_uring_submit fails (ENOMEM,
 * an error the ring did not expect): the SQEs wait for the next turn, the
 * process does not end. */
static void case_submit_errors(const char *bin)
{
	static struct h_proxy p;
	static struct backend b;
	char err[512], why[256];

	backend_start(&b, 0x50b);
	const char *args[] = { "SPLICER_URING_FAULT=submit:3", bin, "-l", "127.0.0.1:0", "-b", b.addr.text,
			       "--engine", "uring", "--workers", "1", NULL };
	H_CHECK(h_proxy_start(&p, "/usr/bin/env", args, err, sizeof err) == 0, "proxy: %s", err);
	for (int i = 0; i < 20; i++) {
		int fd = client_open(&p.addr, M_ECHO, (uint64_t)i);
		struct h_xfer tx, rx;
		int64_t deadline = h_now_ms() + H_T(10000);

		h_xfer_init(&tx, fd, 0x50b + (uint64_t)i, 256 * 1024, deadline);
		tx.shut_wr = 1;
		h_xfer_init(&rx, fd, 0x50b + (uint64_t)i, 0, deadline);
		rx.verify = 1;
		H_CHECK(h_xfer_start_send(&tx) == 0 && h_xfer_start_recv(&rx) == 0, "transfer threads");
		h_xfer_join(&tx, 2000);
		h_xfer_join(&rx, 2000);
		snprintf(why, sizeof why, "session %d (the proxy is %s)", i,
			 h_proxy_alive(&p) ? "running" : "gone");
		h_check_stream(why, &tx, &rx, 256 * 1024);
		close(fd);
	}
	H_CHECK(h_log_lines(&p, "io_uring_submit", "retrying", NULL) >= 1,
		"no submit error was logged: the fault did not apply");
	h_proxy_down(&p);
	backend_stop(&b);
}

URING_DEFECT_TESTS(uring_submit_error_does_not_end_the_process, case_submit_errors, 90, 120)

/* ---- 3b. closes when the submission queue is full ---------------------------- */

#define C_SESS 1600
#define C_IDLE_MS ((int)H_T(5000))

/* Sessions whose sockets are closed are all ended: each client got EOF or
 * an RST. Returns how many of n are still open (non-blocking fds). */
static int clients_still_open(const int *fds, uint8_t *ended, int n)
{
	char c[64];
	int open = 0;

	for (int i = 0; i < n; i++) {
		if (ended[i])
			continue;
		ssize_t r = recv(fds[i], c, sizeof c, 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			ended[i] = 1;
		else
			open++;
	}
	return open;
}

/* 1,600 idle sessions on one worker reach their idle timeout together (the
 * proxy is stopped past it), with SPLICER_URING_FAULT=submit:3 (every third
 * io_uring_submit fails). Closing them queues thousands of SQEs (cancels,
 * then a close per slot) in a turn or two, overflowing the 1,024-entry SQ
 * at least three times in a row, so one of the submits meant to make room
 * fails and an operation finds the SQ full. A close was then skipped
 * silently: its slot kept the socket, and that peer never saw the end. Now
 * a close with no RST due is done at once through the file table (one with
 * an RST due, and a cancel, wait for a later turn). Every client and every
 * backend connection must see the end within 5 s. */
static void case_close_with_sq_full(const char *bin)
{
	static struct h_proxy p;
	static struct backend b;
	static int fds[C_SESS];
	static uint8_t ended[C_SESS];
	char err[512], idle[32];

	memset(ended, 0, sizeof ended);
	backend_start(&b, 0xc105e);
	snprintf(idle, sizeof idle, "%dms", C_IDLE_MS);
	const char *args[] = { "SPLICER_URING_FAULT=submit:3", "/usr/bin/prlimit", "--nofile=20000", bin,
			       "-l", "127.0.0.1:0", "-b", b.addr.text, "--engine", "uring", "--workers", "1",
			       "--max-conns", "100000", "--idle-timeout", idle, NULL };
	H_CHECK(h_proxy_start(&p, "/usr/bin/env", args, err, sizeof err) == 0, "proxy: %s", err);
	int64_t t0 = h_now_ms();
	hold_open_batched(&p.addr, fds, C_SESS, 400);
	/* every session active a moment ago, so all idle out together */
	for (int i = 0; i < C_SESS; i++) {
		H_CHECK(send(fds[i], "k", 1, MSG_NOSIGNAL) == 1, "client %d: send: %s", i, strerror(errno));
		fcntl(fds[i], F_SETFL, O_NONBLOCK);
	}
	int64_t opened = h_now_ms() - t0;
	H_CHECK(opened < C_IDLE_MS - 500, "opening %d sessions took %lld ms: some idled out meanwhile",
		C_SESS, (long long)opened);
	h_sleep_ms(200);
	H_CHECK(clients_still_open(fds, ended, C_SESS) == C_SESS, "sessions ended before their idle timeout");
	H_CHECK(kill(p.pid, SIGSTOP) == 0, "SIGSTOP: %s", strerror(errno));
	h_sleep_ms(C_IDLE_MS + 500);
	H_CHECK(kill(p.pid, SIGCONT) == 0, "SIGCONT: %s", strerror(errno));
	int64_t t1 = h_now_ms(), left;
	while ((left = clients_still_open(fds, ended, C_SESS)) && h_now_ms() - t1 < 5000)
		h_sleep_ms(20);
	while (atomic_load(&b.closed) < C_SESS && h_now_ms() - t1 < 5000)
		h_sleep_ms(20);
	fprintf(stderr, "[uring close, SQ full] %d sessions opened in %lld ms; after their idle timeout: "
			"%lld clients and %d backend connections without the end after %lld ms\n",
		C_SESS, (long long)opened, (long long)left, C_SESS - atomic_load(&b.closed),
		(long long)(h_now_ms() - t1));
	H_CHECK(left == 0, "%lld of %d clients never saw the end of their session", (long long)left, C_SESS);
	H_CHECK(atomic_load(&b.closed) == C_SESS, "%d of %d backend connections never saw the end",
		C_SESS - atomic_load(&b.closed), C_SESS);
	H_CHECK(h_log_lines(&p, "io_uring_submit", "retrying", NULL) >= 1,
		"no submit error was logged: the fault did not apply");
	H_CHECK(h_proxy_alive(&p), "the proxy died");
	for (int i = 0; i < C_SESS; i++)
		close(fds[i]);
	h_proxy_down(&p);
	backend_stop(&b);
}

URING_DEFECT_TESTS(uring_close_with_sq_full_reaches_both_peers, case_close_with_sq_full, 120, 180)

/* SPLICER_URING_FAULT=sqe:4: every fourth SQE the engine asks for is
 * refused, as when the SQ is full and the submit that would have emptied it
 * failed (what a turn starting hundreds of sessions met under load in CI).
 * A recv, send, FIN or poll that found no SQE ended its session as out of
 * memory; now it waits for a later turn. 32 sessions, each 24 echo round
 * trips of 64 bytes (auto moves a session to the ring after 16), then all
 * at once 256 KiB each way (auto brings them back, to copy then splice)
 * and a FIN; on uring and on auto: every byte must come back, in order,
 * and every end. */
#define Q_SESS 32
#define Q_BYTES (256 * 1024)

static void sqe_shortage_run(const char *bin, const char *engine)
{
	static struct h_proxy p;
	static struct backend b;
	static struct h_xfer tx[Q_SESS], rx[Q_SESS];
	int fds[Q_SESS];
	char err[512], why[256];

	backend_start(&b, 0x5e9);
	const char *args[] = { "SPLICER_URING_FAULT=sqe:4", bin, "-l", "127.0.0.1:0", "-b", b.addr.text,
			       "--engine", engine, "--workers", "1", NULL };
	H_CHECK(h_proxy_start(&p, "/usr/bin/env", args, err, sizeof err) == 0, "proxy: %s", err);
	int64_t deadline = h_now_ms() + H_T(20000);
	for (int i = 0; i < Q_SESS; i++) {
		fds[i] = client_open(&p.addr, M_ECHO, (uint64_t)i);
		h_echo_rounds(fds[i], 0x5e9 + (uint64_t)i, 0, 24, 3000);
	}
	for (int i = 0; i < Q_SESS; i++) {
		h_xfer_init(&tx[i], fds[i], 0x5e9 + (uint64_t)i, Q_BYTES, deadline);
		tx[i].shut_wr = 1;
		h_xfer_init(&rx[i], fds[i], 0x5e9 + (uint64_t)i, 0, deadline);
		rx[i].verify = 1;
		H_CHECK(h_xfer_start_send(&tx[i]) == 0 && h_xfer_start_recv(&rx[i]) == 0, "transfer threads");
	}
	for (int i = 0; i < Q_SESS; i++) {
		h_xfer_join(&tx[i], 2000);
		h_xfer_join(&rx[i], 2000);
		snprintf(why, sizeof why, "%s, session %d (the proxy is %s; its log: out-of-memory closes)",
			 engine, i, h_proxy_alive(&p) ? "running" : "gone");
		h_check_stream(why, &tx[i], &rx[i], Q_BYTES);
		close(fds[i]);
	}
	H_CHECK(h_log_lines(&p, "SPLICER_URING_FAULT: an SQE refused", NULL) >= 1,
		"%s: no SQE was refused: the fault did not apply", engine);
	fprintf(stderr, "[uring SQE shortage] %s: %d sessions x (24 round trips, then %d KiB each way) with "
			"every 4th SQE refused: all whole\n", engine, Q_SESS, Q_BYTES / 1024);
	h_proxy_down(&p);
	backend_stop(&b);
}

static void case_sqe_shortage(const char *bin)
{
	sqe_shortage_run(bin, "uring");
	sqe_shortage_run(bin, "auto");
}

URING_DEFECT_TESTS(uring_sqe_shortage_delays_and_ends_no_session, case_sqe_shortage, 90, 150)

/* ---- 4. a reload to uring where io_uring is blocked -------------------------- */

static const char *conf_write(const char *text)
{
	static char path[300];
	snprintf(path, sizeof path, "%s/uring-reload.conf", h_tmpdir());
	FILE *f = fopen(path, "we");
	H_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
	return path;
}

/* The proxy runs under tests/tools/no_uring (io_uring_setup fails with
 * EPERM, as in a container whose seccomp profile blocks io_uring), its
 * route on copy; the file then moves the route to uring and SIGHUP applies
 * it. The reload must keep the route on copy and say why: sessions work. */
static void case_reload_to_blocked_uring(const char *bin)
{
	static struct h_proxy p;
	static struct h_server srv;
	const char *wrap = getenv("SPLICER_NO_URING");
	char text[512], err[512], why[256];
	int port = h_free_port();

	if (!wrap || access(wrap, X_OK))
		cr_skip_test("SPLICER_NO_URING (the seccomp wrapper, tests/tools/no_uring.c) is not set: "
			     "make test builds it");
	H_CHECK(h_server_start(&srv, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	snprintf(text, sizeof text, "[global]\nworkers = 2\n\n[route r]\nlisten = 127.0.0.1:%d\n"
				    "backend = %s\nengine = copy\n", port, srv.addr.text);
	const char *path = conf_write(text);
	const char *args[] = { bin, "-c", path, NULL };
	H_CHECK(h_proxy_start(&p, wrap, args, err, sizeof err) == 0, "proxy under no_uring: %s", err);
	H_CHECK(h_echo_roundtrip(&p.addr, 4096, 1, 3000, why, sizeof why) == 0, "before the reload: %s", why);

	snprintf(text, sizeof text, "[global]\nworkers = 2\n\n[route r]\nlisten = 127.0.0.1:%d\n"
				    "backend = %s\nengine = uring\n", port, srv.addr.text);
	conf_write(text);
	H_CHECK(kill(p.pid, SIGHUP) == 0, "SIGHUP: %s", strerror(errno));
	int64_t t0 = h_now_ms();
	while (h_log_lines(&p, "SIGHUP: reloaded", NULL) < 1 && h_now_ms() - t0 < 5000)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", NULL) == 1, "the reload did not apply within 5 s");
	for (int i = 0; i < 8; i++)
		H_CHECK(h_echo_roundtrip(&p.addr, 4096, 2 + (uint64_t)i, 3000, why, sizeof why) == 0,
			"session %d after the reload to uring: %s (%d closed with uring-error)", i, why,
			h_log_lines(&p, "uring-error", NULL));
	H_CHECK(h_log_lines(&p, "uring engine unavailable: io_uring_setup", "; using copy", NULL) == 1,
		"the log does not say why the route stayed on copy");
	h_proxy_down(&p);
	h_server_stop(&srv);
}

URING_DEFECT_TESTS(uring_reload_where_io_uring_is_blocked_falls_back, case_reload_to_blocked_uring, 60, 90)

/* auto where io_uring is blocked (tests/tools/no_uring): request/response
 * sessions stay on copy, as before auto moved them to io_uring, one line
 * says why, and the session carries on unharmed. */
static void case_auto_where_io_uring_is_blocked(const char *bin)
{
	static struct h_proxy p;
	static struct h_server srv;
	const char *wrap = getenv("SPLICER_NO_URING");
	char err[512];

	if (!wrap || access(wrap, X_OK))
		cr_skip_test("SPLICER_NO_URING (the seccomp wrapper, tests/tools/no_uring.c) is not set: "
			     "make test builds it");
	H_CHECK(h_server_start(&srv, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	char backend[200];
	snprintf(backend, sizeof backend, "%s", srv.addr.text);
	const char *args[] = { bin, "-v", "-l", "127.0.0.1:0", "-b", backend, NULL };
	H_CHECK(h_proxy_start(&p, wrap, args, err, sizeof err) == 0, "proxy under no_uring: %s", err);
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	h_set_nodelay(fd);
	h_echo_rounds(fd, 0xAD, 0, 100, 2000);
	close(fd);
	H_CHECK(h_log_lines_wait(&p, 3000, "session", "engine=copy/copy", NULL) == 1,
		"the session did not stay on copy; log %s", p.log);
	H_CHECK(h_log_lines(&p, "request/response sessions stay on copy (uring engine unavailable",
			    NULL) == 1 && h_log_lines(&p, "moves to uring", NULL) == 0,
		"the log does not say once why request/response stays on copy; log %s", p.log);
	h_proxy_down(&p);
	h_server_stop(&srv);
}

URING_DEFECT_TESTS(uring_auto_where_io_uring_is_blocked_stays_on_copy,
		   case_auto_where_io_uring_is_blocked, 60, 90)
