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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

/* Calls of name in a `strace -c` summary (0 if absent). Its rows are
 * "% time, seconds, usecs/call, calls, [errors,] syscall". */
static long strace_calls(const char *summary, const char *name)
{
	for (const char *l = summary; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char line[256], w[6][64];
		size_t len = strcspn(l, "\n");
		int n;

		snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
		n = sscanf(line, "%63s %63s %63s %63s %63s %63s", w[0], w[1], w[2], w[3], w[4], w[5]);
		if ((n == 5 || n == 6) && !strcmp(w[n - 1], name))
			return atol(w[3]);
	}
	return 0;
}

/* Every thread of pid traced (strace -f attached to all of them). */
static int all_traced(pid_t pid)
{
	char path[320], line[256];
	struct dirent *e;
	DIR *d;
	int n = 0, traced = 0;

	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return 0;
	while ((e = readdir(d))) {
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		n++;
		snprintf(path, sizeof path, "/proc/%d/task/%s/status", (int)pid, e->d_name);
		if (!(f = fopen(path, "re")))
			continue;
		while (fgets(line, sizeof line, f))
			if (!strncmp(line, "TracerPid:", 10) && atoi(line + 10) > 0)
				traced++;
		fclose(f);
	}
	closedir(d);
	return n > 0 && traced == n;
}

/* A uring session's start hands its two descriptors to the ring's fixed
 * file table through SQEs (FILES_UPDATE, CLOSE, SO_OOBINLINE as a socket
 * command) queued before its first recv, not through io_uring_register,
 * close and setsockopt: six system calls a session, a third of what a short
 * connection cost. Counted with strace over N sequential echo sessions
 * once the rings are up: the old start made 2 io_uring_register, 2 close,
 * 3 setsockopt (SO_OOBINLINE twice, the backend's TCP_NODELAY) and 4 fcntl
 * per session; now about none, none, 1 and 2. Every echo must still come
 * back whole, so the slots were filled before the recvs named them. */
Test(integ, uring_session_start_through_the_ring, .init = h_init, .fini = h_fini, .timeout = 120)
{
	enum { N = 200 };
	static struct h_proxy p;
	static struct echo_bk bk;
	struct h_addr baddr;
	pthread_t thr;
	char why[256], out[PATH_MAX], *summary;
	const char *strace = h_which("strace");

	H_CHECK(strace, "strace is not installed (make deps)");
	bk.lfd = ld_listen(&baddr, 4096);
	H_CHECK(bk.lfd >= 0, "backend listen: %s", strerror(-bk.lfd));
	H_CHECK(pthread_create(&thr, NULL, echo_bk_main, &bk) == 0, "backend thread");
	const char *backends[] = { baddr.text, NULL };
	h_proxy_up(&p, h_binary(0), "uring", "127.0.0.1:0", backends, NULL);
	for (int i = 0; i < 40; i++) /* both workers' rings up */
		H_CHECK(h_echo_roundtrip(&p.addr, 64, (uint64_t)i, 5000, why, sizeof why) == 0,
			"warm-up session %d: %s", i, why);

	char pid[16];
	snprintf(out, sizeof out, "%s/strace.txt", h_tmpdir());
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	char *const sargv[] = { (char *)strace, "-f", "-c", "-qq", "-o", out, "-e",
				"trace=io_uring_register,close,setsockopt,fcntl,accept4", "-p", pid, NULL };
	pid_t tr = fork();
	H_CHECK(tr >= 0, "fork: %s", strerror(errno));
	if (tr == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		h_child_exec(getppid(), null, null, null, strace, sargv);
	}
	for (int64_t dl = h_now_ms() + 5000; !all_traced(p.pid) && h_now_ms() < dl;)
		h_sleep_ms(20);
	H_CHECK(all_traced(p.pid), "strace did not attach to every thread of the proxy");
	for (int i = 0; i < N; i++)
		H_CHECK(h_echo_roundtrip(&p.addr, 64, 1000 + (uint64_t)i, 5000, why, sizeof why) == 0,
			"session %d: %s", i, why);
	h_sleep_ms(300); /* the last sessions' closes */
	kill(tr, SIGINT);
	int st;
	waitpid(tr, &st, 0);
	summary = h_read_file(out, NULL);
	h_proxy_down(&p);
	__atomic_store_n(&bk.stop, 1, __ATOMIC_RELAXED);
	pthread_join(thr, NULL);
	close(bk.lfd);
	H_CHECK(summary, "no strace summary at %s", out);
	long acc = strace_calls(summary, "accept4"), reg = strace_calls(summary, "io_uring_register"),
	     cl = strace_calls(summary, "close"), so = strace_calls(summary, "setsockopt"),
	     fc = strace_calls(summary, "fcntl");
	fprintf(stderr, "[uring] %d sessions: %ld accept4, %ld io_uring_register, %ld close, "
		"%ld setsockopt, %ld fcntl\n", N, acc, reg, cl, so, fc);
	H_CHECK(acc >= N, "strace saw %ld accept4 for %d sessions: it did not trace them\n%s", acc, N,
		summary);
	H_CHECK(reg <= N / 10 && cl <= N / 10 && so <= N + N / 2 && fc <= 2 * N + N / 2,
		"per-session system calls of the start for %d sessions: %ld io_uring_register, %ld close, "
		"%ld setsockopt, %ld fcntl\n%s", N, reg, cl, so, fc, summary);
	free(summary);
}
