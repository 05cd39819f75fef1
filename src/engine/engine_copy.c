/* SPDX-License-Identifier: MIT */
/* engine_copy: recv() into a per-direction buffer, send() it out. The
 * reference engine, the fallback, and the better one for small messages
 * (one copy of 64 bytes costs less than two splices and a pipe). The buffer
 * comes from the worker's pool and goes back as soon as it is empty, so an
 * idle session holds no buffer. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "engine.h"
#include "engine_copy.h"
#include "urgent.h"

ENGINE_STATE_FITS(struct copy_dir, struct dir);

static int copy_probe(char *err, unsigned errlen)
{
	return 0;
}

static int copy_pump(struct worker *w, struct dir *d, unsigned *budget)
{
	struct copy_dir *c = copy_state(d);
	const size_t size = w->bufs.size;
	int ret = 0;
	ssize_t n;

	for (;;) {
		int did = 0;

		if (c->tail > c->head && d->dst->can_write) {
			n = send(d->dst->fd, c->buf + c->head, c->tail - c->head,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0) {
				c->head += (uint32_t)n;
				d->bytes += (uint64_t)n;
				engine_count(w, &engine_copy, ENGINE_CTR_BYTES, (uint64_t)n);
				if (c->head == c->tail)
					c->head = c->tail = 0;
				did = 1;
			} else if (errno == EAGAIN) {
				d->dst->can_write = 0;
			} else if (errno != EINTR) {
				ret = dir_fail(d, errno, 1);
				break;
			}
		}
		if (d->stream && (c->full_reads >= AUTO_STREAM_READS || d->solo >= AUTO_STREAM_SOLO) &&
		    c->head == c->tail) {
			d->why = c->full_reads >= AUTO_STREAM_READS ? WHY_STREAM : WHY_ONE_WAY;
			ret = PUMP_SWITCH;
			break;
		}
		if (!d->eof && d->src->can_read && c->tail < size && *budget) {
			int urg = d->src->urg ? urgent_step(d, c->tail - c->head) : URG_READ;

			if (urg < 0) {
				ret = urg;
				break;
			}
			if (urg == URG_WAIT)
				goto read_done;
			if (!c->buf && !(c->buf = buf_pool_get(&w->bufs))) {
				ret = dir_fail(d, ENOMEM, 0);
				break;
			}
			n = recv(d->src->fd, c->buf + c->tail, size - c->tail, MSG_DONTWAIT);
			if (urg == URG_SKIP)
				urgent_passed(d);
			if (n > 0) {
				/* A read shorter than asked drained the socket: the
				 * next byte brings a new edge, unless it stopped at an
				 * urgent mark (src->urg) or a FIN is queued behind it
				 * (rdhup). A FIN without an error (src->fin) is the
				 * end: no read for the 0 (a short connection's
				 * two FINs cost two system calls fewer). Anything
				 * else behind a FIN (an error) takes one more read. */
				if ((size_t)n < size - c->tail && !d->src->urg) {
					if (d->src->fin && !d->src->broken)
						d->eof = 1;
					else if (!d->src->rdhup)
						d->src->can_read = 0;
				}
				/* auto: big reads in a row make a stream. Not only
				 * reads that fill the buffer: a worker serving
				 * several streams finds each queue part full. */
				if ((size_t)n >= size / AUTO_BIG_READ_DIV)
					c->full_reads++;
				else
					c->full_reads = 0;
				c->tail += (uint32_t)n;
				dir_used(d, &engine_copy);
				(*budget)--;
				did = 1;
			} else if (n == 0) {
				d->eof = 1;
			} else if (errno == EAGAIN) {
				d->src->can_read = 0;
			} else if (errno != EINTR) {
				ret = dir_fail(d, errno, 0);
				break;
			}
		}
read_done:
		if (!did)
			break;
	}
	if (c->head == c->tail && c->buf) {
		buf_pool_put(&w->bufs, c->buf);
		c->buf = NULL;
		c->head = c->tail = 0;
	}
	return ret;
}

static void copy_release(struct worker *w, struct dir *d)
{
	struct copy_dir *c = copy_state(d);

	if (c->buf)
		buf_pool_put(&w->bufs, c->buf);
	c->buf = NULL;
	c->head = c->tail = 0;
}

static uint64_t copy_pending(const struct dir *d)
{
	const struct copy_dir *c = ENGINE_STATE(const struct copy_dir, d);

	return c->tail - c->head;
}

/* The bytes waiting in the buffer go with the session; the buffer itself
 * goes back to this worker's pool (release). */
static int copy_hand_out(const struct dir *d, struct dir_handoff *h)
{
	const struct copy_dir *c = ENGINE_STATE(const struct copy_dir, d);

	h->bytes = c->buf ? c->buf + c->head : NULL;
	h->len = c->tail - c->head;
	h->aux = c->full_reads;
	return 0;
}

static int copy_hand_in(struct worker *w, struct dir *d, const struct dir_handoff *h)
{
	struct copy_dir *c = copy_state(d);

	c->full_reads = h->aux;
	if (!h->len)
		return 0;
	if (h->len > w->bufs.size) /* the old process checked our size: not expected */
		return -E2BIG;
	if (!(c->buf = buf_pool_get(&w->bufs)))
		return -ENOMEM;
	memcpy(c->buf, h->bytes, h->len);
	c->head = 0;
	c->tail = h->len;
	return 0;
}

struct engine engine_copy = {
	.name = "copy",
	.hands_over = 1,
	.hand_out = copy_hand_out,
	.hand_in = copy_hand_in,
	.probe = copy_probe,
	.pump = copy_pump,
	.release = copy_release,
	.pending = copy_pending,
};
