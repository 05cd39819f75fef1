/* SPDX-License-Identifier: MIT */
/* tcp_written: see tcp_written.h for why these readings and this order. */
#define _GNU_SOURCE
#include "tcp_written.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_acked, tcpi_notsent_bytes */
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* An ACK between the first and the last call is rare (microseconds apart);
 * three in a row mean a busy socket, whose count may as well err low. */
#define TCPW_TRIES 3

/* tcpi_state values (the kernel's TCP_ESTABLISHED, TCP_CLOSE_WAIT: glibc's
 * <netinet/tcp.h> names them but clashes with <linux/tcp.h>) */
#define TCPW_ESTABLISHED 1
#define TCPW_CLOSE_WAIT 8

/* Nothing in flight, so one TCP_INFO is exact. */
static int one_call(const struct tcpw *r)
{
	return r->unacked == 0 && (r->state == TCPW_ESTABLISHED || r->state == TCPW_CLOSE_WAIT);
}

static int info(int fd, struct tcpw *r, int first)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return -errno;
	if (len < offsetof(struct tcp_info, tcpi_notsent_bytes) + sizeof(ti.tcpi_notsent_bytes))
		return -EOPNOTSUPP; /* before Linux 4.6 */
	r->acked2 = ti.tcpi_bytes_acked;
	if (first) {
		r->acked = ti.tcpi_bytes_acked;
		r->notsent = ti.tcpi_notsent_bytes;
		r->unacked = ti.tcpi_unacked;
		r->state = ti.tcpi_state;
	}
	return 0;
}

int tcpw_read(int fd, struct tcpw *r)
{
	int q, e;

	for (int i = 0; i < TCPW_TRIES; i++) {
		memset(r, 0, sizeof(*r));
		r->outq = -1;
		if ((e = info(fd, r, 1)))
			return e;
		if (one_call(r))
			return 0;
		if (ioctl(fd, SIOCOUTQ, &q))
			return -errno;
		r->outq = q < 0 ? 0 : q;
		if ((e = info(fd, r, 0)))
			return e;
		if (r->acked2 == r->acked)
			return 0;
	}
	return 0;
}

int tcpw_exact(const struct tcpw *r, uint64_t *written)
{
	if (one_call(r)) {
		*written = r->acked + r->notsent;
		return 1;
	}
	if (r->outq < 0 || r->acked2 != r->acked)
		return 0;
	*written = r->acked + (uint64_t)r->outq;
	return 1;
}

/* A lower bound of the bytes written at an instant within the reading. */
static uint64_t written_low(const struct tcpw *r)
{
	uint64_t w;

	if (tcpw_exact(r, &w))
		return w;
	if (r->outq >= 0)
		return r->acked + (uint64_t)r->outq; /* the first acked: ACKs only lower it */
	return r->acked + r->notsent;                /* one consistent call, less what is in flight */
}

int64_t tcpw_left(uint64_t base, const struct tcpw *now, uint64_t want)
{
	int64_t done = (int64_t)(written_low(now) - base);

	if (done < 0)
		return -1;
	if ((uint64_t)done >= want)
		return 0;
	return want - (uint64_t)done > INT64_MAX ? INT64_MAX : (int64_t)(want - (uint64_t)done);
}
