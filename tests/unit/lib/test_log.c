/* SPDX-License-Identifier: MIT */
/* Unit tests for logging (src/lib/log.c: escaping, the bounded sink) and the
 * worker pieces issue 12 touched (src/core/worker.c: the copy buffer pool's trim,
 * listener arming during an EMFILE pause, the heartbeat). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "worker.h"

Test(unit_log, escape_network_bytes)
{
	char out[256];
	static const char in[] = "unix:/a\n route=x \"q\"\\\x01\x7f\xc3\xa9~";
	size_t n = log_escape(in, sizeof in - 1, out, sizeof out, 0);

	cr_expect_str_eq(out, "unix:/a\\x0a route=x \\x22q\\x22\\x5c\\x01\\x7f\\xc3\\xa9~");
	cr_expect_eq(n, strlen(out));
	log_escape(in, sizeof in - 1, out, sizeof out, 1);
	cr_expect_str_eq(out, "unix:/a\\x0a\\x20route=x\\x20\\x22q\\x22\\x5c\\x01\\x7f\\xc3\\xa9~");
}

Test(unit_log, escape_never_cuts_an_escape)
{
	char out[8];
	size_t n = log_escape("ab\n\n", 4, out, sizeof out, 0);

	/* "ab\x0a" is 6 bytes; a second escape would need 4 more: stop */
	cr_expect_str_eq(out, "ab\\x0a");
	cr_expect_eq(n, 6);
	cr_expect_eq(log_escape("xyz", 3, out, 1, 0), 0);
	cr_expect_str_eq(out, "");
}

/* A sink on a pipe nobody reads: puts never wait, the excess is counted,
 * and once the pipe is read everything queued arrives whole. */
Test(unit_log, sink_drops_instead_of_blocking, .timeout = 20)
{
	static struct log_sink s = { .name = "test", .mu = PTHREAD_MUTEX_INITIALIZER,
				     .more = PTHREAD_COND_INITIALIZER,
				     .idle = PTHREAD_COND_INITIALIZER };
	char line[100];
	int p[2], fails = 0;
	static char got[1 << 20];
	size_t n = 0;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	cr_assert_eq(log_sink_start(&s, p[1]), 0);
	memset(line, 'x', sizeof line);
	line[sizeof line - 1] = '\n';
	for (int i = 0; i < 5000; i++) /* 500 KB into 4 KiB + the ring */
		fails += log_sink_put(&s, line, sizeof line) < 0;
	cr_expect_gt(fails, 0, "nothing was dropped");
	cr_expect_eq(log_sink_dropped(&s), (uint64_t)fails);
	/* read until the writer is idle with the ring empty */
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	for (int quiet = 0; quiet < 50;) {
		ssize_t k = read(p[0], got + n, sizeof got - n);
		if (k > 0) {
			n += (size_t)k;
			quiet = 0;
		} else {
			usleep(2000);
			quiet++;
		}
	}
	cr_expect_eq(n % sizeof line, 0, "a line was cut: %zu bytes", n);
	cr_expect_eq(n / sizeof line, 5000 - (size_t)fails, "%zu lines arrived, %d dropped",
		     n / sizeof line, fails);
	cr_expect_eq(log_sink_stop(&s, 1000), 0);
	close(p[0]);
	close(p[1]);
}

Test(unit_log, buffer_pool_trims_after_a_burst)
{
	struct buf_pool bp = { .size = 1 << 20, .max = 256 };
	char *b[120];
	int calls = 0;

	bp.free = calloc(bp.max, sizeof(char *));
	for (int i = 0; i < 120; i++)
		cr_assert(b[i] = buf_pool_get(&bp));
	for (int i = 0; i < 120; i++)
		buf_pool_put(&bp, b[i]);
	cr_expect_eq(bp.nfree, 120);
	/* SCAN_MS is 100 ms: 600 calls are a minute */
	while (bp.nfree > BUF_POOL_HEADROOM && calls < 600) {
		buf_pool_trim(&bp);
		calls++;
	}
	cr_expect_leq(bp.nfree, BUF_POOL_HEADROOM, "%u idle buffers kept after a minute", bp.nfree);
	cr_expect_lt(calls, 150, "trimming took %d calls", calls);

	/* steady use keeps what it uses */
	for (int i = 0; i < 10; i++)
		b[i] = buf_pool_get(&bp);
	for (int i = 0; i < 1000; i++) {
		buf_pool_put(&bp, b[i % 10]);
		b[i % 10] = buf_pool_get(&bp);
		buf_pool_trim(&bp);
	}
	cr_expect_eq(bp.used, 10);
	for (int i = 0; i < 10; i++)
		buf_pool_put(&bp, b[i]);
	buf_pool_destroy(&bp);
}

/* A worker with one listener, registered in a real epoll. */
static struct worker *fake_worker(struct addr *a)
{
	struct worker *w = calloc(1, sizeof(*w));
	struct sockaddr_in *sin = (struct sockaddr_in *)&a->ss;

	cr_assert(w);
	memset(a, 0, sizeof(*a));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a->len = sizeof(*sin);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->lst[0] = (struct listener){ .kind = EV_LISTENER, .addr = a,
				       .fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) };
	cr_assert(w->epfd >= 0 && w->lst[0].fd >= 0);
	cr_assert_eq(bind(w->lst[0].fd, (struct sockaddr *)sin, sizeof(*sin)), 0);
	cr_assert_eq(listen(w->lst[0].fd, 8), 0);
	w->nlst = 1;
	return w;
}

/* session_close re-arms when a --max-conns slot frees; during an EMFILE
 * pause that brought accept back at once (accept/EMFILE churn). */
Test(unit_worker, no_arming_during_an_emfile_pause)
{
	struct addr a;
	struct worker *w = fake_worker(&a);

	w->now_ms = 1000;
	w->accept_resume_ms = 1100;
	w->paused_max_conns = 1;
	worker_listeners_arm(w, 1);
	cr_expect_eq(w->lst[0].armed, 0, "armed during the EMFILE pause");
	w->accept_resume_ms = 0; /* what worker_scan does when the pause ends */
	worker_listeners_arm(w, 1);
	cr_expect_eq(w->lst[0].armed, 1);
	cr_expect_eq(w->paused_max_conns, 0);
	close(w->lst[0].fd);
	close(w->epfd);
	free(w);
}

Test(unit_worker, heartbeat_age)
{
	struct worker w = { .turn_ms = 10000 };

	cr_expect_eq(worker_stalled_ms(&w, 10000 + 100), 0, "an idle worker's 100 ms sleep");
	cr_expect_eq(worker_stalled_ms(&w, 10000 + WORKER_STALL_MS), 0);
	cr_expect_eq(worker_stalled_ms(&w, 10000 + WORKER_STALL_MS + 1), WORKER_STALL_MS + 1);
	cr_expect_eq(worker_stalled_ms(&w, 9000), 0, "a turn newer than the reader's clock");
}
