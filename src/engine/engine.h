/* SPDX-License-Identifier: MIT */
/* engine: how bytes move, as plug-ins. An engine is one file with its own
 * state and one row in the registry (engine_registry.c); the core (session,
 * worker, main, reload, stats) calls the hooks below and names no engine.
 *
 * Two levels:
 *   - a direction's engine (dir->eng) moves its bytes: pump() and release();
 *   - a session's engine (session->eng, the route's choice) may also take
 *     part in the session's life: a hand-off after the connect (sockmap),
 *     driving the whole session itself (uring), an end that must wait
 *     (fin_ready), descriptors it must close itself (close).
 * Every hook but pump is optional (NULL: nothing to do).
 *
 * A route chooses a registry row (`engine = NAME`): the session's engine,
 * the engine its directions start on, and the one a direction moves to once
 * it behaves as a stream (`auto`: start on copy, hand off to splice). A
 * direction that cannot go on with its engine (no pipe, a socket splice
 * refuses) moves to that engine's fallback.
 *
 * pump() contract, shared by every engine: move bytes src -> dst until the
 * kernel says EAGAIN on both ends, src hits EOF, or *budget reads were done.
 *   < 0           -errno: the direction failed; d->err and d->err_at_dst say where
 *   0             blocked or finished (d->eof tells which); nothing is lost
 *   PUMP_SWITCH   the direction behaves as a stream and holds nothing: the
 *                 core may move it to the route's stream engine
 *   PUMP_FALLBACK this engine cannot go on for this direction and holds
 *                 nothing: the core moves it to eng->fallback
 * Readiness flags are cleared only on EAGAIN (or a provably short read), so
 * an edge-triggered event is never lost. */
#ifndef SPLICER_ENGINE_H
#define SPLICER_ENGINE_H

#include <stdint.h>
#include <sys/epoll.h>

#include "session.h"
#include "worker.h"

#define PUMP_SWITCH   1
#define PUMP_FALLBACK 2

/* auto: this many reads in a row of at least buffer/AUTO_BIG_READ_DIV bytes
 * (32k of the default 64k) make a stream. Counting only reads that filled
 * the buffer left streams on copy when one worker served four of them
 * (0.48 vs 0.35 CPU-s/GB for splice, `splicer bench`, 4 streams); counting
 * reads of 16k took pipelined requests for a stream (16 requests of 1 KiB
 * in flight are read 16k at a time), and splice served them at 0.77x
 * copy's requests/s (tests/integration/test_auto_shape.c). */
#define AUTO_STREAM_READS 4
#define AUTO_BIG_READ_DIV 2
/* auto: or this many bytes one way without the other direction moving a
 * byte (dir.solo). Read sizes show a stream only when the proxy lags the
 * sender; one that keeps up reads 64k, then what arrived since, and so on,
 * so 4 big reads in a row were rare: in `splicer bench` (bulk, 4 streams,
 * one worker) streams stayed on copy for the whole run in 4 repetitions of
 * 12 (45 system calls per MB instead of 8). Request/response turns reset
 * it, so a 16 KiB pipeline window never gets near. */
#define AUTO_STREAM_SOLO (1u << 20)

/* A counter of an engine's own, kept per worker, shown in /metrics as
 * splicer_NAME. Every engine also has ENGINE_CTR_BYTES (slot 0: bytes it
 * moved, splicer_engine_bytes_total{engine=...}: counted as they are added
 * to the direction's bytes, once written, and never taken back); its own
 * start at slot 1. Counters only ever grow. */
struct engine_counter {
	const char *name, *help;
};

struct dir_handoff;

struct engine {
	const char *name;
	uint8_t id;                      /* registry index (engine_registry.c) */
	/* As a session's engine: its sessions may move to a new process at an
	 * upgrade (session_handoff.h), their directions through hand_out and
	 * hand_in below. 0: they stay in the old process and drain there. */
	uint8_t hands_over;
	const struct engine *fallback;   /* where a direction goes on PUMP_FALLBACK */
	uint8_t uses_pipes;              /* draws on the worker's pipe pool */
	/* Its sockets may be out of SIOCOUTQ's reach (uring's fixed file
	 * table: a session's descriptors are -1 then): a side it delivered to
	 * is closed with a FIN, never an RST that could discard what is not yet
	 * acknowledged. Sessions on descriptors close as copy's do. */
	uint8_t blind_send_queue;
	/* Usable on this kernel and in this sandbox? 0, or -errno with why.
	 * Run at start and at every reload, before a route is put on it. */
	int (*probe)(char *why, unsigned len);
	/* Privileged preparation, before root is dropped (and at reload). */
	int (*setup)(const struct config *cfg, char *why, unsigned len);

	/* A worker that serves a route on this engine. */
	int (*worker_init)(struct worker *w);
	void (*worker_fini)(struct worker *w);
	void (*worker_event)(struct worker *w);        /* its descriptor in the loop fired */
	void (*before_wait)(struct worker *w, int *timeout_ms); /* flush; may shorten the sleep */
	void (*each_turn)(struct worker *w);           /* after the events of a turn */
	int (*busy)(const struct worker *w);           /* 1: the loop must go on at exit */
	void (*thread_start)(struct worker *w);        /* first thing on the worker's thread */
	void (*thread_end)(struct worker *w);          /* its last, once the loop is over */
	/* The loop's sleep, when the engine took it (w->waiter): submit what
	 * the turn queued, wait up to timeout_ms, and return the events of
	 * the descriptors it watches (and of the epoll set's, which it polls)
	 * in evs, at most max. Those descriptors go through watch (a handle
	 * > 0, or <0: the worker uses epoll for this one), rewatch (new
	 * events) and unwatch (before the close). */
	int (*wait)(struct worker *w, struct epoll_event *evs, int max, int timeout_ms);
	int (*watch)(struct worker *w, int fd, uint32_t events, void *ptr);
	int (*rewatch)(struct worker *w, uint32_t *handle, uint32_t events);
	void (*unwatch)(struct worker *w, uint32_t handle);

	/* A session on a route of this engine. */
	void (*opened)(struct session *s);             /* connected (PROXY header sent) */
	int (*drive)(struct session *s);               /* 1: it moves the session itself from now */
	int (*after_run)(struct session *s);           /* after the pumps; 1: run again */
	int (*fin_ready)(struct session *s, struct dir *d); /* 0: d's end must wait (re-run later) */
	int (*sync)(struct session *s);                /* timer: 1 when bytes moved meanwhile */
	int (*ignore_error)(const struct session *s, const struct side *sd, int err);
	void (*dir_ended)(struct session *s, struct dir *d); /* d's source was reset: end it */
	void (*dir_dead)(struct session *s, struct dir *d);  /* d's destination failed */
	void (*end)(struct session *s);                /* before the sides close */
	/* A graceful close (max_session_time, the drain) on sockets the engine
	 * holds: both shut for reading, as shutdown(SHUT_RD) does. 0, or <0
	 * when it cannot (the session is then closed at once). */
	int (*shut_read)(struct session *s);
	/* A session it took over as request/response (engine_choice.turns)
	 * starts going back to its route's engines (session_turns_back, once
	 * nothing of it is in flight), for an upgrade's hand-over. 1: on its
	 * way; 0: not such a session, or it cannot (it stays, and drains). */
	int (*give_back)(struct session *s);
	/* Takes the descriptors it must close itself (so no number is reused
	 * while the kernel may still act on it); returns the RSTs it will send. */
	int (*close)(struct session *s, int rst_cli, int rst_srv);

	/* A direction on this engine. */
	void (*attach)(struct dir *d);                 /* starts on it: state is zero */
	int (*pump)(struct worker *w, struct dir *d, unsigned *budget);
	void (*release)(struct worker *w, struct dir *d); /* drop what it holds */
	uint64_t (*pending)(const struct dir *d);      /* bytes read, not yet written */
	/* An upgrade's hand-over (session_handoff.h). hand_out describes what d
	 * holds in *h without changing it (0, or <0: it cannot go); once sent,
	 * release() follows as at a close, so a held pipe that was sent must
	 * count as holding bytes (it is closed, never pooled). hand_in takes it
	 * over in the new process (0 or -errno; the descriptors are d's then). */
	int (*hand_out)(const struct dir *d, struct dir_handoff *h);
	int (*hand_in)(struct worker *w, struct dir *d, const struct dir_handoff *h);

	const struct engine_counter *counters;         /* its own: slots 1..ncounters */
	unsigned ncounters;                            /* below ENGINE_COUNTERS */
};

/* What a direction holds, as an upgrade hands it to the new process:
 * the descriptors it owns (splice: a pipe with in_pipe bytes), the bytes it
 * read and has not sent (copy: bytes[0..len)), and a word of its own
 * state (aux). */
struct dir_handoff {
	int fds[2];
	unsigned nfds;
	const char *bytes;
	uint32_t len;
	uint32_t in_pipe;
	uint32_t aux;
};

/* A route's choice (`engine = NAME`): a row of engine_list.h. */
struct engine_choice {
	const char *name;
	const char *help;
	const struct engine *session;   /* its session hooks */
	const struct engine *start;     /* directions start here */
	const struct engine *stream;    /* and move here once they are streams (auto), or NULL */
	const struct engine *turns;     /* a session moves here once it behaves as request/response
					   (auto: uring; session.c, engine.h: give_back), or NULL */
	const char *fallback;           /* the choice used when a probe or setup fails */
	int hidden;                     /* test-only: not in --help */
};

extern const struct engine_choice engine_choices[];
extern const unsigned engine_nchoices;
extern const struct engine *engines[];      /* by id, engine_nengines of them */
extern unsigned engine_nengines;
extern const char *const engine_names[];     /* the choices' names (engine_names.c) */

/* What the documentation says of each choice, in engine_names' order and
 * ended by a NULL name (engine_names.c: no engine linked in). */
struct engine_choice_doc {
	const char *name, *help, *fallback;
	int hidden;
};
extern const struct engine_choice_doc engine_docs[];

/* 1 for an engine only tests choose (not in --help or /metrics). */
int engine_hidden(const struct engine *e);

/* Numbers the engines (ids); once, before any use. */
void engine_registry_init(void);

/* Probes (and, privileged, sets up) every engine a route of cfg uses, and
 * moves a route whose engine cannot run here to its choice's fallback, with
 * one warning that says why. At start and at every reload. Returns how many
 * routes moved. */
unsigned engine_routes_check(struct config *cfg);

/* 1 when some route of cfg moves bytes through pipes (splice). */
int engine_routes_use_pipes(const struct config *cfg);

/* 1 when an engine a route of cfg uses has a privileged setup (sockmap's
 * BPF program): an upgrade's new process needs the capabilities for it. */
int engine_routes_need_setup(const struct config *cfg);

/* Counts n in counter k of engine e, on worker w (owner thread only). */
#define ENGINE_CTR_BYTES 0
static inline void engine_count(struct worker *w, const struct engine *e, unsigned k, uint64_t n)
{
	CTR_ADD(w, engine[e->id][k], n);
}

/* An engine's own state in a direction or a session (their priv words):
 * opaque to the core, a struct of the engine's in its file. */
#define ENGINE_STATE(type, obj) ((type *)(void *)(obj)->priv)
#define ENGINE_STATE_FITS(type, objtype)                                             \
	_Static_assert(sizeof(type) <= sizeof(((objtype *)0)->priv), #type " too big")

/* d moved bytes with engine e (the log's engine=copy+splice). */
static inline void dir_used(struct dir *d, const struct engine *e)
{
	d->used |= (uint8_t)(1u << e->id);
}

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
	return d->eng && d->eng->pending ? d->eng->pending(d) : 0;
}

#endif
