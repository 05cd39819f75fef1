/* SPDX-License-Identifier: MIT */
/* urgent: TCP urgent data (send(MSG_OOB)) on a direction's source.
 *
 * A receiver without SO_OOBINLINE never sees the urgent byte in the stream:
 * recv() stops just before it (a short read that does not mean an empty
 * socket) and splice() stops there for good (EAGAIN, or 0 after a FIN).
 * Read naively, a direction stalls at the mark (issue 12, defect 2).
 *
 * What splicer does, decided against HAProxy and nginx (tests/peer): both
 * deliver every in-band byte and drop the urgent byte. splicer delivers the
 * same in-band bytes and also passes the urgent byte on *as urgent*: once
 * every byte before the mark is written to dst, the byte is read out of band
 * and sent out of band, so the far receiver finds it where the sender put
 * it (Telnet Synch, FTP ABOR, SQL*Net breaks keep working); the next
 * ordinary recv() skips its place in the stream. A receiver that reads only
 * in-band data sees exactly what it would see through HAProxy.
 *
 * The copy and splice engines call urgent_step() before a read when the
 * source raised EPOLLPRI (side->urg). Only TCP sockets have urgent data.
 * The experimental engines forward the urgent byte in-band instead, in its
 * place in the stream: sockmap because the kernel redirects it so, uring by
 * SO_OOBINLINE (the ring sees no EPOLLPRI). */
#ifndef SPLICER_URGENT_H
#define SPLICER_URGENT_H

#include "session.h"

enum urgent_step {
	URG_READ,  /* not at the mark: read as usual, but a short read is not an empty socket */
	URG_WAIT,  /* at the mark with bytes before it unwritten, or dst full: read nothing now */
	URG_SKIP,  /* the urgent byte is passed on: the next read must be a recv() */
};

/* pending: bytes of d read and not yet written. Returns enum urgent_step,
 * or -errno when sending the byte failed (d->err set by dir_fail). */
int urgent_step(struct dir *d, uint64_t pending);

/* 1 when the next byte of d's source is the urgent mark. */
int urgent_at_mark(const struct dir *d);

/* After a recv() at or past the mark: the mark is behind us. */
void urgent_passed(struct dir *d);

#endif
