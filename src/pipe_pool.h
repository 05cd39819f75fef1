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

/* Pipes currently handed out. */
static inline unsigned pipe_pool_in_use(const struct pipe_pool *p)
{
	return p->total - p->nfree;
}

/* Closes every free pipe and frees the pool. Pipes still in use must have
 * been put back first. */
void pipe_pool_destroy(struct pipe_pool *p);

#endif
