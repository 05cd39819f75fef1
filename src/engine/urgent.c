/* SPDX-License-Identifier: MIT */
/* urgent: see urgent.h. */
#include "urgent.h"

#include <errno.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "engine.h"

/* d->urg_state: 0 none, 1 the byte is held (dst was full), 2 the byte is
 * sent and the next recv() steps over its place. */

static int at_mark(int fd)
{
	int mark = 0;

	return ioctl(fd, SIOCATMARK, &mark) == 0 && mark;
}

static int send_held(struct dir *d)
{
	ssize_t n = send(d->dst->fd, &d->urg_byte, 1, MSG_OOB | MSG_NOSIGNAL | MSG_DONTWAIT);

	if (n == 1) {
		d->urg_state = 2;
		return URG_SKIP;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		if (errno == EAGAIN)
			d->dst->can_write = 0;
		return URG_WAIT;
	}
	if (n < 0 && errno == EOPNOTSUPP) { /* dst is not TCP (Unix): in-band bytes only */
		d->urg_state = 2;
		return URG_SKIP;
	}
	return dir_fail(d, n < 0 ? errno : EIO, 1);
}

int urgent_at_mark(const struct dir *d)
{
	return at_mark(d->src->fd);
}

int urgent_step(struct dir *d, uint64_t pending)
{
	char b;
	ssize_t n;

	if (d->urg_state == 2)
		return pending ? URG_WAIT : URG_SKIP;
	if (d->urg_state == 1)
		return pending || !d->dst->can_write ? URG_WAIT : send_held(d);
	if (!at_mark(d->src->fd))
		return URG_READ;
	if (pending)
		return URG_WAIT; /* the bytes before the mark go first */
	n = recv(d->src->fd, &b, 1, MSG_OOB | MSG_DONTWAIT);
	if (n != 1) {
		/* EINVAL: no urgent byte to read (already taken, or a newer
		 * urgent pointer moved it in-band); step over the mark anyway. */
		d->urg_state = 2;
		return URG_SKIP;
	}
	d->urg_byte = b;
	d->urg_state = 1;
	return d->dst->can_write ? send_held(d) : URG_WAIT;
}

void urgent_passed(struct dir *d)
{
	if (d->urg_state == 2) {
		d->urg_state = 0;
		/* A newer urgent byte raises EPOLLPRI again; until then, no mark. */
		if (!at_mark(d->src->fd))
			d->src->urg = 0;
	}
}
