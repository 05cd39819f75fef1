/* engine: how one direction of a session moves bytes. Each engine is an ops
 * table; `auto` is not an engine of its own but a direction that starts on
 * copy and is moved to splice (see session.c) once it behaves as a stream.
 *
 * pump() contract, shared by every engine: move bytes src -> dst until the
 * kernel says EAGAIN on both ends, src hits EOF, or *budget reads were done.
 *   < 0   -errno: the direction failed; d->err and d->err_at_dst say where
 *   0     blocked or finished (d->eof tells which); nothing is lost
 *   PUMP_SWITCH   (copy, auto) the direction behaves as a stream and its
 *                 buffer is empty: the caller may move it to splice
 *   PUMP_NOPIPE   (splice) no pipe could be had or splice is refused for
 *                 this socket (EINVAL/ENOSYS): the caller falls back to copy
 * Readiness flags are cleared only on EAGAIN (or a provably short read), so
 * an edge-triggered event is never lost. */
#ifndef SPLICER_ENGINE_H
#define SPLICER_ENGINE_H

#include "session.h"
#include "worker.h"

#define PUMP_SWITCH 1
#define PUMP_NOPIPE 2

/* auto: this many reads in a row of at least buffer/AUTO_BIG_READ_DIV bytes
 * (16k of the default 64k) make a stream. Counting only reads that filled
 * the buffer left streams on copy when one worker served four of them
 * (0.48 vs 0.35 CPU-s/GB for splice, `splicer bench`, 4 streams). */
#define AUTO_STREAM_READS 4
#define AUTO_BIG_READ_DIV 4

struct engine_ops {
	const char *name;
	/* 0 if the engine works on this kernel, else -errno with err filled. */
	int (*probe)(char *err, unsigned errlen);
	int (*pump)(struct worker *w, struct dir *d, unsigned *budget);
	/* Frees what the direction holds (buffer, pipe) at session close. */
	void (*release)(struct worker *w, struct dir *d);
};

extern const struct engine_ops engine_copy;
extern const struct engine_ops engine_splice;
extern const struct engine_ops engine_sockmap;

/* Routes on engine sockmap: loads the BPF program once (needs CAP_BPF and
 * CAP_NET_ADMIN); if it cannot, logs why in one line and puts the routes on
 * splice. Called at start (before root is dropped) and on reload. */
void sockmap_setup(struct config *cfg);

/* sockmap (engine_sockmap.c), beside the ops table: a session on a sockmap
 * route starts on copy and moves both directions into the kernel once no
 * partly read segment is left (sm_try_start). */
void sm_try_start(struct session *s);
/* 1 when every byte the kernel took from d's source is on d->dst's send
 * queue, so a FIN may follow; else 0 and the session is put on the
 * worker's drain-wait list, re-run with backoff by sm_poll(). */
int sm_drained(struct session *s, struct dir *d);
/* epoll events of both sides as the directions need them now. */
void sm_update_events(struct session *s);
/* Folds the kernel's byte counts into the directions; 1 if any moved. For
 * the idle timeout, the log and metrics. Also wakes a direction whose
 * source has bytes passed to user space. */
int sm_sync(struct session *s);
/* Before close: in-flight bytes (for the RST decision), pair removed,
 * slots freed. */
void sm_end(struct session *s);
/* Worker loop: runs drain-waiting sessions that are due. */
void sm_poll(struct worker *w);
/* 1 when an error on side sd is the spurious EPIPE of a redirect after we
 * shut sd's write side, to be ignored. */
int sm_spurious_epipe(const struct session *s, const struct side *sd, int err);

/* Records where a direction failed (for the close reason and for which
 * side gets an RST); returns -err for pump() to return. */
static inline int dir_fail(struct dir *d, int err, int at_dst)
{
	d->err = err;
	d->err_at_dst = (uint8_t)at_dst;
	return -err;
}

/* Bytes read from src and not yet written to dst, whatever the engine. */
static inline uint64_t dir_pending(const struct dir *d)
{
	return (uint64_t)(d->tail - d->head) + d->in_pipe + d->sm_inflight + d->in_uring;
}

#endif
