/* SPDX-License-Identifier: MIT */
/* qsbr: quiescent-state-based reclamation of what the workers read without
 * a lock (a route's balancing table that a weight change replaces).
 *
 * A reader (a worker) holds such a pointer only within one loop turn. While
 * it waits for events (epoll_wait) it holds none: it is offline, and nothing
 * waits for it. Coming back online it publishes the global epoch it has
 * seen. A writer unpublishes an object (the new pointer stored first), then
 * retires it: the retirement takes the next epoch E. The object is freed
 * once every reader is offline or has come online at an epoch >= E: each
 * has then let go of it or begun a turn since it was unpublished. A worker
 * goes offline every turn, so a retired object waits at most for the turns
 * under way (microseconds to milliseconds), idle workers do not hold it back
 * at all, and a worker whose loop ended stays offline; only a stalled worker
 * holds retired objects back, as it must (it may be in the middle of a
 * read).
 *
 * Before qsbr_init (splicer check, the unit tests, a process before its
 * workers exist) there is no reader, and a retired object is freed at once.
 *
 *   worker loop:  qsbr_offline(w->id); epoll_wait(...); qsbr_online(w->id);
 *                 ... t = load(&r->tab) ... (same turn)
 *   admin thread: store(&r->tab, new); qsbr_retire(&old->retired, free_cb);
 *   main loop:    qsbr_reclaim();   (every tick: what the last retire left) */
#ifndef SPLICER_QSBR_H
#define SPLICER_QSBR_H
#include <stdint.h>

/* Embedded in a retired object: no allocation, so retiring cannot fail. */
struct qsbr_entry {
	struct qsbr_entry *next;              /* the retired list */
	uint64_t epoch;                       /* freed once every reader has seen it */
	void (*free_fn)(struct qsbr_entry *e); /* frees the object that holds e */
};

/* Readers 0..n-1 (the workers, by id), each online from now, as if it had
 * seen no epoch yet. Call before any reader runs. Returns 0 or -ENOMEM. */
int qsbr_init(unsigned nreaders);

/* Reader id holds no protected pointer from now on (before it waits for
 * events, and when its loop ends): nothing waits for it. Its own thread. */
void qsbr_offline(unsigned id);

/* Reader id may read protected pointers again (after its wait): a load, a
 * store and a full fence, on its own thread. */
void qsbr_online(unsigned id);

/* e's object is no longer reachable by new reads (its replacement was
 * published before this call): free_fn(e) runs once every reader is
 * offline or came online since, here or in a later qsbr_reclaim (any
 * thread). */
void qsbr_retire(struct qsbr_entry *e, void (*free_fn)(struct qsbr_entry *e));

/* Frees the retired objects no reader can still hold. Returns how many
 * (any thread; never waits for a reader). */
unsigned qsbr_reclaim(void);

/* Retired objects waiting for a reader (for tests and /metrics). */
unsigned qsbr_pending(void);

/* At exit, every reader gone: frees every retired object and the readers. */
void qsbr_fini(void);

#endif
