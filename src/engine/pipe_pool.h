/* SPDX-License-Identifier: MIT */
/* pipe_pool: a bounded, per-worker pool of pipes for the splice engine.
 *
 * Rules (from HAProxy's pipe.c and the netdev threads): a pipe is created
 * non-blocking and resized to the configured size; only an *empty* pipe goes
 * back to the free list, a pipe that still holds bytes is closed so data can
 * never leak from one session into another; the pool never holds more than
 * `max` pipes in total (in use + free), because each costs two descriptors.
 * Not thread-safe: each worker owns one pool. */
#ifndef SPLICER_PIPE_POOL_H
#define SPLICER_PIPE_POOL_H
#include <stddef.h>
#include <stdint.h>

struct pipe_pair {
	int rd; /* read end, spliced to the destination socket */
	int wr; /* write end, spliced from the source socket */
};

struct pipe_pool {
	struct pipe_pair *free; /* stack of empty pipes ready for reuse */
	unsigned nfree;         /* entries in free[] */
	unsigned total;         /* pipes alive: in use + free */
	unsigned max;           /* bound on total */
	unsigned size;          /* requested pipe size in bytes (0: kernel default) */
	unsigned actual_size;   /* size the kernel granted to the last new pipe */
	unsigned peak;          /* decaying high-water mark of pipes in use (pipe_pool_trim) */
	uint64_t created;       /* pipes created over the pool's life */
	uint64_t exhausted;     /* gets refused because total reached max */
	uint64_t resize_failed; /* F_SETPIPE_SZ refusals (pipe-max-size, user pages) */
};

/* Returns 0 or -ENOMEM. */
int pipe_pool_init(struct pipe_pool *p, unsigned max, unsigned size);

/* Takes a pipe from the free list, or creates one if total < max.
 * Returns 0 with *out set, -ENOSPC when the bound is reached, or -errno from
 * pipe2() (EMFILE, ENFILE). A pipe whose resize fails is still returned at the
 * kernel's default size (counted in resize_failed). */
int pipe_pool_get(struct pipe_pool *p, struct pipe_pair *out);

/* Gives a pipe back. bytes_left is what the caller knows to be still in it:
 * 0 returns it to the free list, anything else closes it. */
void pipe_pool_put(struct pipe_pool *p, struct pipe_pair *pp, size_t bytes_left);

/* Called about every 100 ms by the worker: lets the pool shrink back after a
 * burst, so a proxy that once carried 4,000 streams does not hold 8,000
 * descriptors (and each pipe's ring) for the rest of its life. The pool keeps
 * a high-water mark of pipes in use that decays by 1/64 per call (at least
 * one pipe), i.e. halves in about 4.5 s of calm, and closes free pipes beyond
 * it plus PIPE_POOL_HEADROOM, at most PIPE_POOL_TRIM_BATCH per call. Steady
 * traffic keeps its pipes: the mark stays at what it uses. Returns the
 * number of pipes closed. */
#define PIPE_POOL_HEADROOM 8
#define PIPE_POOL_TRIM_BATCH 64
unsigned pipe_pool_trim(struct pipe_pool *p);

/* A pipe this pool did not create (an upgrade's hand-over: the old
 * process's, with bytes in it) is now one of its pipes in use. */
void pipe_pool_adopt(struct pipe_pool *p);

/* Pipes currently handed out. */
static inline unsigned pipe_pool_in_use(const struct pipe_pool *p)
{
	return p->total - p->nfree;
}

/* Closes every free pipe and frees the pool. Pipes still in use must have
 * been put back first. */
void pipe_pool_destroy(struct pipe_pool *p);

#endif
