/* tcp_written: see tcp_written.h. */
#define _GNU_SOURCE
#include "tcp_written.h"

#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_acked */
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* bytes_acked is read before SIOCOUTQ, so an ACK in between makes this
 * smaller, never larger. */
int tcpw_read(int fd, struct tcpw *r)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int outq = 0;

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) || ioctl(fd, SIOCOUTQ, &outq))
		return -errno;
	r->acked = ti.tcpi_bytes_acked;
	r->outq = outq;
	return 0;
}

static uint64_t written(const struct tcpw *r)
{
	return r->acked + (uint64_t)(r->outq > 0 ? r->outq : 0);
}

int tcpw_exact(const struct tcpw *r, uint64_t *w)
{
	*w = written(r);
	return 1;
}

int64_t tcpw_left(uint64_t base, const struct tcpw *now, uint64_t want)
{
	uint64_t w = written(now) - base;

	return w >= want ? 0 : (int64_t)(want - w);
}
