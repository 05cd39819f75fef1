/* SPDX-License-Identifier: MIT */
/* engine_tiny (tests only: `engine = test-tiny`): recv() and send() through
 * a 7-byte window of a copy buffer. Every stream is cut into the smallest
 * pieces and every read is short, so the core's half-close, reset, back-
 * pressure and budget paths run at every step. It is also the proof that an
 * engine is one file and one registry row: it names no core internals beyond
 * the engine interface (engine.h). */
#include <errno.h>
#include <sys/socket.h>

#include "engine.h"

#define TINY 7

extern struct engine engine_tiny;

struct tiny_dir {
	char *buf;           /* a pool buffer, of which TINY bytes are used */
	uint32_t head, tail; /* bytes [head, tail) wait to be sent */
};
ENGINE_STATE_FITS(struct tiny_dir, struct dir);

static int tiny_pump(struct worker *w, struct dir *d, unsigned *budget)
{
	struct tiny_dir *t = ENGINE_STATE(struct tiny_dir, d);
	ssize_t n;


	for (;;) {
		int did = 0;

		if (t->tail > t->head && d->dst->can_write) {
			n = send(d->dst->fd, t->buf + t->head, t->tail - t->head, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0) {
				t->head += (uint32_t)n;
				d->bytes += (uint64_t)n;
				engine_count(w, &engine_tiny, ENGINE_CTR_BYTES, (uint64_t)n);
				if (t->head == t->tail)
					t->head = t->tail = 0;
				did = 1;
			} else if (errno == EAGAIN) {
				d->dst->can_write = 0;
			} else if (errno != EINTR) {
				return dir_fail(d, errno, 1);
			}
		}
		if (!d->eof && d->src->can_read && t->tail == 0 && *budget) {
			if (!t->buf && !(t->buf = buf_pool_get(&w->bufs)))
				return dir_fail(d, ENOMEM, 0);
			n = recv(d->src->fd, t->buf, TINY, MSG_DONTWAIT);
			if (n > 0) {
				/* short on purpose: only EAGAIN says the socket is empty */
				t->tail = (uint32_t)n;
				dir_used(d, &engine_tiny);
				(*budget)--;
				did = 1;
			} else if (n == 0) {
				d->eof = 1;
			} else if (errno == EAGAIN) {
				d->src->can_read = 0;
			} else if (errno != EINTR) {
				return dir_fail(d, errno, 0);
			}
		}
		if (!did)
			break;
	}
	if (t->head == t->tail && t->buf) {
		buf_pool_put(&w->bufs, t->buf);
		t->buf = NULL;
	}
	return 0;
}

static void tiny_release(struct worker *w, struct dir *d)
{
	struct tiny_dir *t = ENGINE_STATE(struct tiny_dir, d);

	if (t->buf)
		buf_pool_put(&w->bufs, t->buf);
	t->buf = NULL;
	t->head = t->tail = 0;
}

static uint64_t tiny_pending(const struct dir *d)
{
	const struct tiny_dir *t = ENGINE_STATE(const struct tiny_dir, d);

	return t->tail - t->head;
}

struct engine engine_tiny = {
	.name = "test-tiny",
	.pump = tiny_pump,
	.release = tiny_release,
	.pending = tiny_pending,
};
