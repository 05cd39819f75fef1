/* SPDX-License-Identifier: MIT */
/* Unit tests for src/engine/tcp_received.c: the sockmap engine's loss check
 * after a pause counts the bytes a source gave up (tcpi_bytes_received less
 * what is still queued), so a count that is off would end healthy sessions
 * (too high) or hide a hole (too low). On a real loopback connection: what
 * user space read, exactly, while bytes wait in the queue, and after the
 * peer's FIN (which tcpi_bytes_received counts as one). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tcp_received.h"

/* Waits until fd has n bytes queued (the loopback's softirq may lag). */
static void wait_queued(int fd, size_t n)
{
	for (int i = 0; i < 2000; i++) {
		struct timespec ms = { 0, 1000000 };
		ssize_t q = recv(fd, NULL, n + 1, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT | MSG_WAITALL);

		if (q >= (ssize_t)n)
			return;
		nanosleep(&ms, NULL);
	}
	cr_assert_fail("%zu bytes never arrived", n);
}

Test(unit_tcp_received, counts_what_was_read_not_what_waits)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	static char buf[300000];
	uint64_t c0, c;
	size_t got = 0;
	int ls, cl, s;

	ls = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(ls >= 0 && !bind(ls, (struct sockaddr *)&a, sizeof(a)) && !listen(ls, 1) &&
		  !getsockname(ls, (struct sockaddr *)&a, &alen), "listener: %s", strerror(errno));
	cl = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(cl >= 0 && !connect(cl, (struct sockaddr *)&a, sizeof(a)), "connect: %s",
		  strerror(errno));
	s = accept(ls, NULL, NULL);
	cr_assert(s >= 0, "accept: %s", strerror(errno));

	cr_assert_eq(tcpr_consumed(s, &c0), 0, "tcpr_consumed on an idle socket");
	/* several segments queued: none of them is consumed */
	cr_assert_eq(send(cl, buf, 100000, 0), 100000, "send");
	wait_queued(s, 100000);
	cr_assert_eq(tcpr_consumed(s, &c), 0, "tcpr_consumed with bytes queued");
	cr_expect_eq(c - c0, 0, "consumed %llu with nothing read", (unsigned long long)(c - c0));
	/* a partial read: exactly that much */
	while (got < 12345) {
		ssize_t n = recv(s, buf, 12345 - got, 0);
		cr_assert(n > 0, "recv: %s", n ? strerror(errno) : "end of stream");
		got += (size_t)n;
	}
	cr_assert_eq(tcpr_consumed(s, &c), 0, "tcpr_consumed after a read");
	cr_expect_eq(c - c0, 12345, "consumed %llu, read 12345", (unsigned long long)(c - c0));
	/* the FIN: counted by the kernel, not by tcpr_consumed */
	shutdown(cl, SHUT_WR);
	for (int i = 0; i < 2000; i++) {
		struct timespec ms = { 0, 1000000 };
		struct tcp_info ti;
		socklen_t len = sizeof(ti);

		cr_assert(!getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &len), "TCP_INFO");
		if (ti.tcpi_state == TCP_CLOSE_WAIT)
			break;
		nanosleep(&ms, NULL);
	}
	cr_assert_eq(tcpr_consumed(s, &c), 0, "tcpr_consumed after the FIN");
	cr_expect_eq(c - c0, 12345, "consumed %llu after the FIN, read 12345",
		     (unsigned long long)(c - c0));
	while (got < 100000) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		cr_assert(n > 0, "recv: %s", n ? strerror(errno) : "end of stream");
		got += (size_t)n;
	}
	cr_assert_eq(tcpr_consumed(s, &c), 0, "tcpr_consumed at the end");
	cr_expect_eq(c - c0, 100000, "consumed %llu, read 100000", (unsigned long long)(c - c0));
	close(s);
	close(cl);
	close(ls);
}
