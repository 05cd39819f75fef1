/* SPDX-License-Identifier: MIT */
/* Unit tests for src/engine/tcp_written.c: the sockmap engine's FIN decision (issue
 * 13, defect 5). A FIN may follow a direction's bytes only once every byte
 * meant for the destination since the hand-off is on its send queue; the
 * count comes from tcpi_bytes_acked + SIOCOUTQ, two readings an ACK can
 * fall between. The readings below are what the kernel returns when it
 * does: a base taken that way is too small, and a count below the base
 * must not wrap around into "all delivered". Numbers are bytes relative to
 * the socket's initial sequence; W is the true write_seq. */
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

#include "tcp_written.h"

/* A reading as tcpw_read() takes it: TCP_INFO (acked, notsent, unacked,
 * state), SIOCOUTQ (outq), TCP_INFO again (acked2). */
static struct tcpw reading(uint8_t state, uint32_t unacked, uint32_t notsent, uint64_t acked,
			   int32_t outq, uint64_t acked2)
{
	struct tcpw r;

	memset(&r, 0, sizeof(r));
	r.state = state;
	r.unacked = unacked;
	r.notsent = notsent;
	r.acked = acked;
	r.outq = outq;
	r.acked2 = acked2;
	return r;
}

/* The defect: W = 1000 at the hand-off, 400 of them in flight; an ACK for
 * 300 lands between TCP_INFO (acked 600) and SIOCOUTQ (100). Taken as the
 * base, 700 makes 300 bytes look written that never were: 500 bytes
 * redirected later, 200 of them written (W = 1200), read FIN-ready. */
Test(unit_tcp_written, base_with_an_ack_between_the_reads_is_refused)
{
	struct tcpw torn = reading(TCP_ESTABLISHED, 3, 0, 600, 100, 900);
	struct tcpw again = reading(TCP_ESTABLISHED, 1, 0, 900, 100, 900);
	struct tcpw later = reading(TCP_ESTABLISHED, 1, 0, 1100, 100, 1100); /* W = 1200 */
	uint64_t base = 0;

	cr_expect_eq(tcpw_exact(&torn, &base), 0,
		     "a reading with an ACK between TCP_INFO and SIOCOUTQ was taken as exact (base %llu, "
		     "W is 1000)", (unsigned long long)base);
	cr_assert_eq(tcpw_exact(&again, &base), 1, "a consistent reading was refused");
	cr_expect_eq(base, 1000, "base %llu, want 1000", (unsigned long long)base);
	cr_expect_eq(tcpw_left(base, &later, 500), 300, "left %lld of 500, want 300",
		     (long long)tcpw_left(base, &later, 500));
}

/* A count below the base: base 1000, 50 bytes redirected and none written
 * yet (W still 1000). TCP_INFO says acked 900, an ACK for the last 100
 * comes, SIOCOUTQ says 0: 900 - 1000 must not wrap into "far ahead". */
Test(unit_tcp_written, count_behind_the_base_is_never_drained)
{
	struct tcpw torn = reading(TCP_ESTABLISHED, 1, 0, 900, 0, 1000);
	int64_t left = tcpw_left(1000, &torn, 50);

	cr_expect(left != 0, "a count 100 below the base was taken as drained (left %lld)",
		  (long long)left);
	cr_expect(left < 0, "a count below the base is not reported as inconsistent (left %lld)",
		  (long long)left);
	/* even with nothing owed: a reading behind the base says nothing */
	cr_expect(tcpw_left(1000, &torn, 0) < 0, "an inconsistent reading was taken as drained");
}

/* The current count errs low, never high: W = 1400 (base 1000, 500
 * redirected, 400 written). TCP_INFO says acked 1100; ACKs move snd_una to
 * 1200 before SIOCOUTQ (200) and to 1400 before the second TCP_INFO.
 * acked2 + outq = 1600 would say drained; acked + outq = 1300 does not. */
Test(unit_tcp_written, count_with_acks_between_the_reads_errs_low)
{
	struct tcpw torn = reading(TCP_ESTABLISHED, 4, 0, 1100, 200, 1400);
	struct tcpw settled = reading(TCP_ESTABLISHED, 0, 0, 1400, -1, 1400); /* W = 1400 */
	int64_t left = tcpw_left(1000, &torn, 500);

	cr_expect(left > 0 && left <= 500, "left %lld of 500 (100 truly left): a torn reading "
		  "must not count more than was written", (long long)left);
	cr_expect_eq(tcpw_left(1000, &settled, 500), 100, "left %lld, want 100",
		     (long long)tcpw_left(1000, &settled, 500));
}

/* Nothing in flight on an established socket: one TCP_INFO is exact
 * (bytes_acked + notsent_bytes, filled under the socket lock). */
Test(unit_tcp_written, one_call_is_exact_with_nothing_in_flight)
{
	struct tcpw r = reading(TCP_ESTABLISHED, 0, 150, 850, -1, 850);
	uint64_t w = 0;

	cr_assert_eq(tcpw_exact(&r, &w), 1, "an idle established socket's reading was refused");
	cr_expect_eq(w, 1000, "written %llu, want 1000", (unsigned long long)w);
	r.state = TCP_CLOSE_WAIT;
	cr_expect_eq(tcpw_exact(&r, &w), 1, "a CLOSE_WAIT socket's reading was refused");
}

/* A reset purges the retransmit queue (packets_out 0) with bytes still
 * unacknowledged: there, tcpi_unacked == 0 does not mean none in flight;
 * SIOCOUTQ (write_seq - snd_una) still counts them. */
Test(unit_tcp_written, reset_socket_needs_the_send_queue)
{
	struct tcpw only_info = reading(TCP_CLOSE, 0, 0, 600, -1, 600);
	struct tcpw full = reading(TCP_CLOSE, 0, 0, 600, 400, 600);
	uint64_t w = 0;

	cr_expect_eq(tcpw_exact(&only_info, &w), 0,
		     "a reset socket's TCP_INFO alone was taken as exact (%llu, W is 1000)",
		     (unsigned long long)w);
	cr_assert_eq(tcpw_exact(&full, &w), 1, "a consistent reading was refused");
	cr_expect_eq(w, 1000, "written %llu, want 1000", (unsigned long long)w);
	cr_expect_eq(tcpw_left(600, &full, 500), 100, "left %lld, want 100",
		     (long long)tcpw_left(600, &full, 500));
}

Test(unit_tcp_written, drained_exactly_when_everything_is_written)
{
	struct tcpw now = reading(TCP_ESTABLISHED, 2, 0, 1300, 200, 1300); /* W = 1500 */

	cr_expect_eq(tcpw_left(1000, &now, 499), 0, "more written than owed is drained");
	cr_expect_eq(tcpw_left(1000, &now, 500), 0, "all written is drained");
	cr_expect_eq(tcpw_left(1000, &now, 501), 1, "one byte short is not drained");
	cr_expect_eq(tcpw_left(1500, &now, 0), 0, "nothing owed, nothing written: drained");
}

/* The readings on a real connection: 70000 bytes written (more than a
 * loopback segment, so some are in flight for a while) show as 70000 more,
 * exactly once the reading is consistent, and never more before. */
Test(unit_tcp_written, read_counts_what_a_socket_took)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	static char buf[70000];
	struct tcpw r0, r;
	uint64_t base, w;
	int ls, c, s, exact = 0;
	size_t got = 0;

	ls = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(ls >= 0 && !bind(ls, (struct sockaddr *)&a, sizeof(a)) && !listen(ls, 1) &&
		  !getsockname(ls, (struct sockaddr *)&a, &alen), "listener: %s", strerror(errno));
	c = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(c >= 0 && !connect(c, (struct sockaddr *)&a, sizeof(a)), "connect: %s",
		  strerror(errno));
	s = accept(ls, NULL, NULL);
	cr_assert(s >= 0, "accept: %s", strerror(errno));

	cr_assert_eq(tcpw_read(c, &r0), 0, "tcpw_read: %s", strerror(errno));
	cr_assert_eq(tcpw_exact(&r0, &base), 1, "an idle socket's reading is not exact");
	cr_assert_eq(send(c, buf, sizeof(buf), 0), (ssize_t)sizeof(buf), "send");
	cr_assert_eq(tcpw_read(c, &r), 0, "tcpw_read");
	cr_expect(tcpw_left(base, &r, sizeof(buf)) >= 0, "a reading right after send() went behind "
		  "the base");
	while (got < sizeof(buf)) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		cr_assert(n > 0, "recv: %s", n ? strerror(errno) : "end of stream");
		got += (size_t)n;
	}
	/* everything was received: the ACKs come, and a reading settles */
	for (int i = 0; i < 2000 && !exact; i++) {
		struct timespec ms = { 0, 1000000 };

		cr_assert_eq(tcpw_read(c, &r), 0, "tcpw_read");
		cr_expect(tcpw_left(base, &r, sizeof(buf)) >= 0, "a reading went behind the base");
		exact = tcpw_exact(&r, &w);
		if (!exact)
			nanosleep(&ms, NULL);
	}
	cr_assert(exact, "no consistent reading in 2 s on an idle socket");
	cr_expect_eq(w - base, sizeof(buf), "written %llu since the base, want %zu",
		     (unsigned long long)(w - base), sizeof(buf));
	cr_expect_eq(tcpw_left(base, &r, sizeof(buf)), 0, "not drained once everything was received");
	cr_expect_eq(tcpw_left(base, &r, sizeof(buf) + 1), 1, "drained one byte early");
	close(s);
	close(c);
	close(ls);
}
