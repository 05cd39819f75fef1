/* tcp_written: how many bytes have entered a TCP socket's send queue (its
 * write_seq, less a constant), and the sockmap engine's arithmetic with it:
 * whether every byte meant for a socket since a base reading is on its send
 * queue, so that a FIN may follow them. The readings are kept apart from
 * the system calls so the arithmetic can be tested on its own. */
#ifndef SPLICER_TCP_WRITTEN_H
#define SPLICER_TCP_WRITTEN_H
#include <stdint.h>

/* One reading of a socket's send sequence state. */
struct tcpw {
	uint64_t acked;   /* tcpi_bytes_acked */
	uint64_t acked2;  /* (unused) */
	int32_t outq;     /* SIOCOUTQ, read after it */
	uint32_t notsent; /* (unused) */
	uint32_t unacked; /* (unused) */
	uint8_t state;    /* (unused) */
};

/* Reads fd. Returns 0, or -errno. */
int tcpw_read(int fd, struct tcpw *r);

/* Whether r gives the bytes written exactly (the base of a later count);
 * sets *written when it does. */
int tcpw_exact(const struct tcpw *r, uint64_t *written);

/* Bytes of `want` (meant for the socket since the base reading) that are
 * not on its send queue yet, per the reading `now` taken after want was:
 * 0 when all are (drained). */
int64_t tcpw_left(uint64_t base, const struct tcpw *now, uint64_t want);

#endif
