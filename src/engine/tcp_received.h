/* SPDX-License-Identifier: MIT */
/* tcp_received: how many bytes a TCP socket's receive side has taken out of
 * its queue since the connection began (its copied_seq, less a constant):
 * read by user space or eaten by a sockmap verdict. The sockmap engine
 * compares it with what its program counted to prove that pausing a
 * verdict lost no skb (bpf_sockmap.h: sm_pause).
 *
 *	consumed = tcpi_bytes_received - queued - (1 once a FIN came)
 *
 * tcpi_bytes_received counts every in-order byte that entered the queue,
 * and the FIN's sequence number too. queued is read with recv(MSG_PEEK |
 * MSG_TRUNC | MSG_WAITALL | MSG_DONTWAIT), which walks the receive queue
 * without copying: SIOCINQ cannot, on a socket with a psock (6.18 answers
 * the psock's own queue only). An arrival between the calls adds to both
 * received and queued, so two peeks around TCP_INFO that agree make the
 * reading exact; TCP_INFO also waits for any softirq at work on the socket
 * (it takes the socket's lock). Only for a socket whose verdict is not
 * running (before the hand-off, or paused): a running verdict consumes
 * bytes between the calls. */
#ifndef SPLICER_TCP_RECEIVED_H
#define SPLICER_TCP_RECEIVED_H
#include <stdint.h>

/* Reads fd's consumed count into *consumed. Returns 0 (exact), -EAGAIN
 * (bytes kept arriving between the calls, a few tries in a row), or
 * -errno (the socket failed, or is closed: nothing can be said). */
int tcpr_consumed(int fd, uint64_t *consumed);

#endif
