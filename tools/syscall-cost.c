/* SPDX-License-Identifier: MIT */
/* syscall-cost: what a system call and an io_uring operation cost on this
 * machine, beside the kernel's work for one 64-byte message over loopback
 * TCP (doc/performance.md, "What a system call costs here"). It is the
 * ceiling of what moving a proxy's calls into a ring can save: a proxy
 * makes one send and one recv per message and direction whatever carries
 * them.
 *
 *   make build/syscall-cost && taskset -c 1 build/syscall-cost [ROUNDS]
 *
 * Rows (nanoseconds, the best of 3 runs of ROUNDS, default 300000):
 *   getppid               a system call that does nothing
 *   ring NOP, 8 an enter  an io_uring operation that does nothing, per op
 *   send+recv, syscalls   64 B sent on one end of a loopback TCP
 *                         connection and received on the other
 *   send+recv, ring       the same as two linked SQEs, one io_uring_enter
 *   send+recv, ring x8    eight such pairs per io_uring_enter, per pair */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAIRS 8 /* connections for the batched row */

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* A connected loopback TCP pair: fd[0] sends, fd[1] receives. */
static void tcp_pair(int fd[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int one = 1, l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		die("listen");
	if ((fd[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(fd[0], (struct sockaddr *)&a, sizeof(a)) || (fd[1] = accept(l, NULL, NULL)) < 0)
		die("connect");
	setsockopt(fd[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	close(l);
}

static void reap(struct io_uring *r, unsigned want)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	if (io_uring_submit_and_wait(r, want) < 0)
		die("io_uring_submit_and_wait");
	io_uring_for_each_cqe(r, head, cqe) {
		if (cqe->res < 0) {
			fprintf(stderr, "an operation failed: %d\n", cqe->res);
			exit(1);
		}
		n++;
	}
	io_uring_cq_advance(r, n);
}

/* Queues a 64-byte send on p[0] linked to its recv on p[1]. */
static void queue_pair(struct io_uring *r, const int p[2], char *buf)
{
	struct io_uring_sqe *q = io_uring_get_sqe(r);

	io_uring_prep_send(q, p[0], buf, 64, 0);
	q->flags |= IOSQE_IO_LINK;
	q = io_uring_get_sqe(r);
	io_uring_prep_recv(q, p[1], buf, 64, MSG_WAITALL);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 300000;
	double best[5] = { 1e9, 1e9, 1e9, 1e9, 1e9 };
	int p[PAIRS][2];
	char buf[64] = { 0 };
	struct io_uring r;

	if (n <= 0)
		n = 300000;
	for (int i = 0; i < PAIRS; i++)
		tcp_pair(p[i]);
	if (io_uring_queue_init(64, &r, 0))
		die("io_uring_queue_init");
	for (int rep = 0; rep < 3; rep++) {
		double t[6];

		t[0] = now();
		for (long i = 0; i < n; i++)
			syscall(SYS_getppid);
		t[1] = now();
		for (long i = 0; i < n / 8; i++) {
			for (int k = 0; k < 8; k++)
				io_uring_prep_nop(io_uring_get_sqe(&r));
			reap(&r, 8);
		}
		t[2] = now();
		for (long i = 0; i < n; i++)
			if (send(p[0][0], buf, 64, 0) != 64 || recv(p[0][1], buf, 64, MSG_WAITALL) != 64)
				die("send/recv");
		t[3] = now();
		for (long i = 0; i < n; i++) {
			queue_pair(&r, p[0], buf);
			reap(&r, 2);
		}
		t[4] = now();
		for (long i = 0; i < n / PAIRS; i++) {
			for (int k = 0; k < PAIRS; k++)
				queue_pair(&r, p[k], buf);
			reap(&r, 2 * PAIRS);
		}
		t[5] = now();
		for (int k = 0; k < 5; k++) {
			double per = (t[k + 1] - t[k]) / (double)(k == 1 || k == 4 ? n / 8 * 8 : n) * 1e9;
			if (per < best[k])
				best[k] = per;
		}
	}
	printf("%-24s %8.0f ns\n", "getppid", best[0]);
	printf("%-24s %8.0f ns per op\n", "ring NOP, 8 an enter", best[1]);
	printf("%-24s %8.0f ns per message\n", "send+recv, syscalls", best[2]);
	printf("%-24s %8.0f ns per message\n", "send+recv, ring", best[3]);
	printf("%-24s %8.0f ns per message\n", "send+recv, ring x8", best[4]);
	io_uring_queue_exit(&r);
	return 0;
}
