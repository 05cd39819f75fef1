/* SPDX-License-Identifier: MIT */
/* pipe_pool: see pipe_pool.h for the rules. */
#define _GNU_SOURCE
#include "pipe_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int pipe_pool_init(struct pipe_pool *p, unsigned max, unsigned size)
{
	*p = (struct pipe_pool){ .max = max, .size = size };
	p->free = calloc(max ? max : 1, sizeof(*p->free));
	return p->free ? 0 : -ENOMEM;
}

/* total and nfree are the owner's, and /metrics reads them from another
 * thread without asking (splicer_pipes): stored atomically, relaxed (a
 * plain store on the machines we run on), so that read is no data race. */
#define SET(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)

static void pipe_close(struct pipe_pool *p, const struct pipe_pair *pp)
{
	close(pp->rd);
	close(pp->wr);
	SET(p->total, p->total - 1);
}

/* A new pipe, within the bound. 0, -ENOSPC or -errno from pipe2(). */
static int pipe_new(struct pipe_pool *p, struct pipe_pair *out)
{
	int fds[2], r;

	if (p->total >= p->max) {
		p->exhausted++;
		return -ENOSPC;
	}
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	if (p->size) {
		r = fcntl(fds[1], F_SETPIPE_SZ, (int)p->size);
		if (r < 0)
			p->resize_failed++;
	}
	r = fcntl(fds[1], F_GETPIPE_SZ);
	if (r > 0)
		p->actual_size = (unsigned)r;
	out->rd = fds[0];
	out->wr = fds[1];
	SET(p->total, p->total + 1);
	p->created++;
	return 0;
}

int pipe_pool_get(struct pipe_pool *p, struct pipe_pair *out)
{
	int r;

	if (p->nfree) {
		SET(p->nfree, p->nfree - 1);
		*out = p->free[p->nfree];
	} else if ((r = pipe_new(p, out)))
		return r;
	if (pipe_pool_in_use(p) > p->peak)
		p->peak = pipe_pool_in_use(p);
	return 0;
}

unsigned pipe_pool_trim(struct pipe_pool *p)
{
	unsigned used = pipe_pool_in_use(p), closed = 0;

	if (p->peak > used)
		p->peak -= (p->peak - used + 63) / 64;
	else
		p->peak = used;
	while (p->nfree && p->total > p->peak + PIPE_POOL_HEADROOM && closed < PIPE_POOL_TRIM_BATCH) {
		SET(p->nfree, p->nfree - 1);
		pipe_close(p, &p->free[p->nfree]);
		closed++;
	}
	return closed;
}

void pipe_pool_put(struct pipe_pool *p, struct pipe_pair *pp, size_t bytes_left)
{
	if (pp->rd < 0)
		return;
	if (bytes_left || p->nfree >= p->max)
		pipe_close(p, pp);
	else {
		p->free[p->nfree] = *pp;
		SET(p->nfree, p->nfree + 1);
	}
	pp->rd = pp->wr = -1;
}

void pipe_pool_adopt(struct pipe_pool *p)
{
	SET(p->total, p->total + 1);
}

void pipe_pool_destroy(struct pipe_pool *p)
{
	while (p->nfree) {
		SET(p->nfree, p->nfree - 1);
		pipe_close(p, &p->free[p->nfree]);
	}
	free(p->free);
	p->free = NULL;
}
