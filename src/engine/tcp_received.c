/* SPDX-License-Identifier: MIT */
/* tcp_received: see tcp_received.h for the arithmetic and the order. */
#define _GNU_SOURCE
#include "tcp_received.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */
#include <sys/socket.h>

#define TCPR_TRIES 3

/* tcpi_state values in which the peer's FIN has come (<linux/tcp.h> has no
 * names for them; glibc's clash with it) */
#define TCPR_TIME_WAIT  6
#define TCPR_CLOSE      7
#define TCPR_CLOSE_WAIT 8
#define TCPR_LAST_ACK   9
#define TCPR_CLOSING    11

/* Bytes in fd's receive queue, or -errno. */
static int64_t queued(int fd)
{
	ssize_t n = recv(fd, NULL, 1 << 30, MSG_PEEK | MSG_TRUNC | MSG_WAITALL | MSG_DONTWAIT);

	if (n >= 0)
		return n;
	return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
}

int tcpr_consumed(int fd, uint64_t *consumed)
{
	for (int i = 0; i < TCPR_TRIES; i++) {
		struct tcp_info ti;
		socklen_t len = sizeof(ti);
		int64_t q1, q2;

		memset(&ti, 0, sizeof(ti));
		if ((q1 = queued(fd)) < 0)
			return (int)q1;
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
			return -errno;
		if (len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received))
			return -EOPNOTSUPP; /* before Linux 4.1 */
		if (ti.tcpi_state == TCPR_CLOSE)
			return -ENOTCONN; /* reset: its queue was purged */
		if ((q2 = queued(fd)) < 0)
			return (int)q2;
		if (q1 != q2)
			continue;
		*consumed = ti.tcpi_bytes_received - (uint64_t)q1;
		if (ti.tcpi_state == TCPR_CLOSE_WAIT || ti.tcpi_state == TCPR_LAST_ACK ||
		    ti.tcpi_state == TCPR_CLOSING || ti.tcpi_state == TCPR_TIME_WAIT)
			*consumed -= 1;
		return 0;
	}
	return -EAGAIN;
}
