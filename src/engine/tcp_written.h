/* SPDX-License-Identifier: MIT */
/* tcp_written: how many bytes have entered a TCP socket's send queue (its
 * write_seq, less a constant), read without a race against ACKs, and the
 * sockmap engine's arithmetic with it: whether every byte meant for a
 * socket since a base reading is on its send queue, so that a FIN may
 * follow them. The readings are kept apart from the system calls so the
 * arithmetic can be tested on its own.
 *
 * The kernel exports write_seq only in repair mode. tcp_get_info() (TCP_INFO)
 * fills struct tcp_info under lock_sock_fast(), which holds off the softirq
 * that processes ACKs, so its fields agree with each other:
 *	tcpi_bytes_acked   = snd_una - c       (c fixed once established:
 *	                                        tcp_snd_una_update() moves both)
 *	tcpi_notsent_bytes = write_seq - snd_nxt
 *	tcpi_unacked       = packets_out, the segments in [snd_una, snd_nxt)
 * so write_seq - c = bytes_acked + (snd_nxt - snd_una) + notsent_bytes, and
 * the middle term, the bytes in flight, is in no field: tcpi_unacked counts
 * segments, and tcpi_bytes_sent - tcpi_bytes_retrans is not snd_nxt - c
 * (both are counted before the segment goes to IP: a new segment whose
 * transmit fails locally is sent again and counted twice in bytes_sent,
 * never in bytes_retrans, an over-count: the unsafe side). So one call is
 * exact only with nothing in flight: tcpi_unacked == 0 on an ESTABLISHED or
 * CLOSE_WAIT socket (a reset purges the retransmit queue, zeroing
 * packets_out with bytes unacknowledged).
 *
 * Otherwise three calls: TCP_INFO (a1), SIOCOUTQ (q = write_seq - snd_una,
 * read without the lock), TCP_INFO (a2). snd_una only grows, and only with
 * bytes_acked, so for the write_seq W at the time of q
 *	a1 + q <= W - c <= a2 + q
 * with equality when a1 == a2 (no ACK in between): exact. The reading is
 * retried a few times until it is; a1 + q remains a lower bound if not.
 * A base must be exact (too small, it makes bytes look written that were
 * not: the FIN goes out before them; too large, the FIN never goes); a
 * current count may err low, which only delays the FIN to a later check. */
#ifndef SPLICER_TCP_WRITTEN_H
#define SPLICER_TCP_WRITTEN_H
#include <stdint.h>

/* One reading of a socket's send sequence state. */
struct tcpw {
	uint64_t acked;   /* tcpi_bytes_acked, first TCP_INFO */
	uint64_t acked2;  /* tcpi_bytes_acked, second TCP_INFO (after outq) */
	int32_t outq;     /* SIOCOUTQ between them; -1: not read */
	uint32_t notsent; /* tcpi_notsent_bytes, first TCP_INFO */
	uint32_t unacked; /* tcpi_unacked (segments in flight), first TCP_INFO */
	uint8_t state;    /* tcpi_state, first TCP_INFO */
};

/* Reads fd, retrying a few times until the reading is exact. Returns 0
 * (exact or not: see tcpw_exact), or -errno. */
int tcpw_read(int fd, struct tcpw *r);

/* Whether r gives the bytes written exactly (what a base must be); sets
 * *written when it does. */
int tcpw_exact(const struct tcpw *r, uint64_t *written);

/* Bytes of `want` (meant for the socket since the exact reading `base`)
 * that are not on its send queue yet, per the reading `now` taken after
 * want was: 0 when all are (drained), -1 when `now` counts fewer bytes
 * than the base (a torn reading: not drained, and how many are left is not
 * known). Signed: a count below the base must not wrap into "far ahead". */
int64_t tcpw_left(uint64_t base, const struct tcpw *now, uint64_t want);

#endif
