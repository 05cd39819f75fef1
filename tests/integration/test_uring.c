/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
/* The uring engine past the descriptor limit: established sessions live in
 * the workers' fixed file tables, not in the process's descriptor table, so
 * a proxy under `ulimit -n 1024` holds 1,200 sessions (2,400 sockets) open
 * at once and moves bytes both ways through every one of them. (The copy and
 * splice engines stop at about 500 there: accepting pauses on EMFILE.) And
 * 4,000 sessions x 1 MiB both ways at once on 2 workers: 8,000 directions
 * share 128 provided buffers, so most receives end on ENOBUFS and wait on
 * the starved list; every byte must still arrive, in order. The rest of the
 * engine runs the shared cases through H_ENGINE_CASES. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "load_driver.h"

static struct ld_bulk ub;

/* n sessions open at once, then len bytes both ways through each. With
 * nofile, the proxy runs under that ulimit -n and must hold fewer socket
 * descriptors than that with every session open. */
static void bulk(const char *bin, int N, uint64_t len, int NOFILE, const char *workers,
		 int64_t budget_ms)
{
	static struct h_proxy p;
	struct h_addr baddr;
	struct ld_fds f;
	char nofile[32], err[512];
	int64_t t0 = h_now_ms();

	int lfd = ld_listen(&baddr, 4096);
	H_CHECK(lfd >= 0, "backend listen: %s", strerror(-lfd));
	snprintf(nofile, sizeof nofile, "--nofile=%d", NOFILE ? NOFILE : 20000);
	const char *args[] = { nofile, bin, "-l", "127.0.0.1:0", "-b", baddr.text, "--engine", "uring",
			       "--workers", workers, "--max-conns", "100000", NULL };
	H_CHECK(h_proxy_start(&p, "/usr/bin/prlimit", args, err, sizeof err) == 0,
		"proxy under prlimit did not start: %s", err);

	memset(&ub, 0, sizeof ub);
	ub = (struct ld_bulk){ .proxy = p.addr, .lfd = lfd, .n = (unsigned)N, .len = len, .tag = 1,
			       .seed = 0x0121460000000000ull ^ (uint64_t)N, .deadline = t0 + H_T(budget_ms) };
	int rc = ld_bulk_start(&ub);
	H_CHECK(rc == 0, "driver threads: %s", strerror(-rc));
	while ((atomic_load(&ub.c_ready) < N || atomic_load(&ub.b_ready) < N) &&
	       !atomic_load(&ub.c_fail) && !atomic_load(&ub.b_fail) && h_now_ms() < t0 + H_T(30000))
		h_sleep_ms(50);
	int c_ready = atomic_load(&ub.c_ready), b_ready = atomic_load(&ub.b_ready);
	int fds_ok = ld_fd_kinds(p.pid, &f) == 0;
	if (c_ready < N || b_ready < N || !fds_ok) {
		atomic_store(&ub.stop, 1);
		ld_bulk_join(&ub);
		H_CHECK(0, "with ulimit -n %d, %d of %d sessions opened (clients), %d (backends); "
			   "client: %s; backend: %s", NOFILE, c_ready, N, b_ready,
			ub.c_why[0] ? ub.c_why : "-", ub.b_why[0] ? ub.b_why : "-");
	}
	/* Every session is open: the descriptors are not where they live. */
	if (NOFILE)
		H_CHECK(f.sockets < NOFILE, "the proxy holds %d socket descriptors for %d open sessions",
			f.sockets, N);
	atomic_store(&ub.go, 1);
	ld_bulk_join(&ub);
	close(lfd);
	H_CHECK(!ub.c_fail && !ub.b_fail && ub.c_done == N && ub.b_done == N,
		"client: %d of %d sessions done, %d failed (%s); backend: %d done, %d failed (%s)",
		ub.c_done, N, ub.c_fail, ub.c_why[0] ? ub.c_why : "-", ub.b_done, ub.b_fail,
		ub.b_why[0] ? ub.b_why : "-");
	H_CHECK(ub.c_verified == (uint64_t)N * ub.len && ub.b_verified == (uint64_t)N * ub.len,
		"bytes checked: %llu by the clients, %llu by the backends, expected %llu each",
		(unsigned long long)ub.c_verified, (unsigned long long)ub.b_verified,
		(unsigned long long)((uint64_t)N * ub.len));
	fprintf(stderr, "[uring] %d sessions x %llu KiB both ways (ulimit -n %d, %s workers): %lld ms\n",
		N, (unsigned long long)(len >> 10), NOFILE ? NOFILE : 20000, workers,
		(long long)(h_now_ms() - t0));
	h_proxy_down(&p);
}

/* Four workers: the kernel caps each ring's table at RLIMIT_NOFILE. */
static void case_beyond_nofile(const char *bin)
{
	bulk(bin, 1200, 64 * 1024, 1024, "4", 60000);
}

Test(integ, uring_beyond_nofile, .init = h_init, .fini = h_fini, .timeout = 120)
{
	case_beyond_nofile(h_binary(0));
}

Test(integ, uring_beyond_nofile_asan, .init = h_init, .fini = h_fini, .timeout = 180)
{
	case_beyond_nofile(h_binary(1));
}

Test(integ, uring_4000_sessions_1mib_both_ways, .init = h_init, .fini = h_fini, .timeout = 180)
{
	bulk(h_binary(0), 4000, 1024 * 1024, 0, "2", 150000);
}

/* The machine's iowait, in USER_HZ ticks summed over its CPUs (/proc/stat). */
static long long iowait_ticks(void)
{
	long long v[5] = { 0 };
	FILE *f = fopen("/proc/stat", "re");
	int ok = f && fscanf(f, "cpu %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5;

	if (f)
		fclose(f);
	return ok ? v[4] : -1;
}

/* Workers that sleep in their rings are idle, not in iowait, where the
 * kernel can say so (IORING_ENTER_NO_IOWAIT, 6.15): an idle proxy with two
 * workers counted as two CPUs of iowait (top's "wa" at 100 %), what
 * monitoring reads as storage that cannot keep up. Over 2 s the two
 * workers would make about 400 ticks; other tests' disk writes, far
 * fewer. */
Test(integ, uring_idle_not_iowait, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static struct h_proxy p;
	const char *backends[] = { "127.0.0.1:9", NULL };
	const char *extra[] = { "-v", NULL };

	h_proxy_up(&p, h_binary(0), "uring", "127.0.0.1:0", backends, extra);
	h_sleep_ms(300);
	char *log = h_read_file(p.log, NULL);
	H_CHECK(log && strstr(log, "waits in its io_uring"), "no worker waits in its ring:\n%s",
		log ? log : "(no log)");
	if (!strstr(log, "not counted as iowait")) {
		fprintf(stderr, "[uring] this kernel counts ring waits as iowait: not checked\n");
		free(log);
		h_proxy_down(&p);
		return;
	}
	free(log);
	long long a = iowait_ticks();
	h_sleep_ms(2000);
	long long b = iowait_ticks();
	h_proxy_down(&p);
	H_CHECK(a >= 0 && b >= 0, "cannot read /proc/stat");
	H_CHECK(b - a < 100, "%lld ticks of iowait in 2 s with an idle uring proxy (2 workers)", b - a);
	fprintf(stderr, "[uring] idle proxy: %lld ticks of iowait in 2 s\n", b - a);
}

/* An epoll echo backend for thousands of connections (h_server takes 64). */
struct echo_bk {
	int lfd, stop;
};

static void *echo_bk_main(void *arg)
{
	struct echo_bk *e = arg;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = e->lfd }, evs[64];
	char buf[4096];

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, e->lfd, &ev))
		return NULL;
	while (!__atomic_load_n(&e->stop, __ATOMIC_RELAXED)) {
		int n = epoll_wait(ep, evs, 64, 50);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == e->lfd) {
				int c;
				while ((c = accept4(e->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event ce = { .events = EPOLLIN, .data.fd = c };
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
				}
				continue;
			}
			ssize_t r = recv(fd, buf, sizeof buf, 0);
			if (r > 0)
				(void)!send(fd, buf, (size_t)r, MSG_NOSIGNAL); /* 64 B: the socket has room */
			else if (r == 0 || errno != EAGAIN)
				close(fd);
		}
	}
	close(ep);
	return NULL;
}

/* Starved directions with bytes waiting are re-armed without waiting for
 * another wake-up. 4,000 sessions open in batches of 100 (connect and send
 * 64 B each, then read the echoes) through one worker, so 8,000 idle recvs
 * share the ring's buffers: a re-arm budget spent on idle directions left
 * one with a request behind it for SCAN_MS (100 ms), in about one batch in
 * three. Counted: batches whose echoes took 90 ms or more (a loaded
 * machine may make one or two; the defect made about 13). */
Test(integ, uring_starved_no_stall, .init = h_init, .fini = h_fini, .timeout = 120)
{
	enum { N = 4000, BATCH = 100 };
	static struct h_proxy p;
	static int fds[N];
	static struct echo_bk bk;
	struct h_addr baddr;
	pthread_t thr;
	int slow = 0;
	char msg[64], back[64];

	bk.lfd = ld_listen(&baddr, 4096);
	H_CHECK(bk.lfd >= 0, "backend listen: %s", strerror(-bk.lfd));
	H_CHECK(pthread_create(&thr, NULL, echo_bk_main, &bk) == 0, "backend thread");
	const char *args[] = { "-l", "127.0.0.1:0", "-b", baddr.text, "--engine", "uring", "--workers",
			       "1", "--max-conns", "10000", NULL };
	char err[512];
	H_CHECK(h_proxy_start(&p, h_binary(0), args, err, sizeof err) == 0, "proxy: %s", err);
	memset(msg, 's', sizeof msg);
	for (int b = 0; b < N; b += BATCH) {
		int64_t t0 = h_now_ms(), dl = t0 + H_T(10000);

		for (int i = b; i < b + BATCH; i++) {
			fds[i] = h_connect(&p.addr, 5000);
			H_CHECK(fds[i] >= 0, "session %d: connect: %s", i, strerror(errno));
			H_CHECK(h_send_all(fds[i], msg, sizeof msg, dl) == 0, "session %d: send", i);
		}
		for (int i = b; i < b + BATCH; i++) {
			int rc = h_recv_exact(fds[i], back, sizeof back, dl);
			H_CHECK(rc == 0 && !memcmp(back, msg, sizeof back), "session %d: no echo: %s", i,
				rc ? strerror(-rc) : "other bytes");
		}
		slow += h_now_ms() - t0 >= 90;
	}
	for (int i = 0; i < N; i++)
		close(fds[i]);
	h_proxy_down(&p);
	__atomic_store_n(&bk.stop, 1, __ATOMIC_RELAXED);
	pthread_join(thr, NULL);
	close(bk.lfd);
	fprintf(stderr, "[uring] %d sessions opened in batches of %d: %d batches took 90 ms or more\n",
		N, BATCH, slow);
	H_CHECK(slow <= 3, "%d of %d batches of new sessions waited 90 ms or more for their echoes",
		slow, N / BATCH);
}
