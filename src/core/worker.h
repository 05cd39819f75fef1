/* SPDX-License-Identifier: MIT */
/* worker: one thread, one epoll loop, its own listening sockets, pipe pool,
 * buffer pool and counters. Nothing on the data path is shared between
 * workers; the few process-wide values (active sessions, stop flag) live in
 * struct shared and are touched once per session, not once per byte. */
#ifndef SPLICER_WORKER_H
#define SPLICER_WORKER_H
#include <pthread.h>
#include <stdint.h>

#include "config.h"
#include "pipe_pool.h"
#include "timer.h"

/* The first byte of everything registered in epoll says what it is. */
enum ev_kind { EV_LISTENER = 1, EV_CLIENT, EV_BACKEND, EV_WAKE, EV_ENGINE };

/* Engines (engine.h): how many the registry may hold, and counters each. */
#define ENGINE_MAX      8
#define ENGINE_COUNTERS 5

struct engine;
/* What an engine registers in the worker's epoll set (EV_ENGINE): the
 * worker calls that engine's worker_event hook when it fires. */
struct engine_fd {
	uint8_t kind; /* EV_ENGINE */
	const struct engine *e;
};

/* Per-worker counters. Only the owning worker writes them (CTR_ADD is a
 * relaxed store, not a locked add); any thread may read them. */
struct counters {
	uint64_t accepted;          /* sessions accepted */
	uint64_t closed;            /* sessions closed, any reason */
	uint64_t active;            /* sessions open on this worker */
	uint64_t bytes_up;          /* client -> backend, written */
	uint64_t bytes_down;        /* backend -> client, written */
	uint64_t auto_switches;     /* directions auto switched from copy to splice */
	uint64_t auto_turns_moves;  /* sessions auto moved to io_uring as request/response */
	uint64_t auto_turns_returns; /* ... and back to copy (a stream, an upgrade) */
	uint64_t connect_errors;    /* backend connect attempts that failed or timed out */
	uint64_t connect_retries;   /* attempts on a further backend after a failure */
	uint64_t no_backend;        /* clients closed because every backend failed */
	uint64_t all_down;          /* clients closed at once: every backend marked down */
	uint64_t idle_timeouts;     /* sessions closed by --idle-timeout (both directions open) */
	uint64_t half_close_timeouts; /* sessions closed by --half-close-timeout (one direction
				       * over, or waiting to deliver before an RST) */
	uint64_t resets_sent;       /* sides closed with RST (undelivered data or aborted peer) */
	uint64_t accept_fd_pauses;  /* accepts paused on EMFILE/ENFILE/ENOBUFS/ENOMEM */
	uint64_t max_conns_pauses;  /* accepts paused at --max-conns */
	uint64_t proxy_header_errors; /* accept_proxy: malformed, truncated or late headers */
	uint64_t connect_local_errors; /* backend connects failed by this host (ports, fds, memory) */
	uint64_t loops;             /* clients closed as this proxy's own backend connections */
	uint64_t tls_hello_timeouts; /* sni listeners: no whole ClientHello within tls_hello_timeout */
	uint64_t tls_hello_errors;  /* sni listeners: a malformed or oversized ClientHello */
	uint64_t tls_no_route;      /* sni listeners: no route for the name and no default route */
	uint64_t expired_lifetime;  /* graceful closes begun by max_session_time */
	uint64_t expired_drain;     /* graceful closes begun by the drain (drain_spread) */
	uint64_t dead_client;       /* sessions ended by ETIMEDOUT on the client connection
				       (keepalive unanswered, client_user_timeout) */
	uint64_t dead_backend;      /* the same on the backend connection */
	uint64_t adopted;           /* sessions an upgrade's old process handed to this one */
	uint64_t adopt_failed;      /* handed over but not adopted: closed (session_handoff.h) */
	/* each engine's own (engine.h: engine_count), by engine id */
	uint64_t engine[ENGINE_MAX][ENGINE_COUNTERS];
};
#define CTR_ADD(w, f, n) __atomic_store_n(&(w)->ctr.f, (w)->ctr.f + (n), __ATOMIC_RELAXED)
#define CTR_GET(w, f)    __atomic_load_n(&(w)->ctr.f, __ATOMIC_RELAXED)

/* Process-wide state, read by every worker. */
struct shared {
	const struct config *cfg;
	int64_t active;             /* sessions open in the process (atomic) */
	int stopping;               /* set once by the signal handler thread (atomic) */
	uint64_t drain_deadline_ms; /* monotonic ms after which sessions are cut */
	int fd_warned;              /* EMFILE logged once (atomic) */
	struct worker *workers;     /* all of them, for wake-ups across workers (waitq.h) */
	unsigned nworkers;
	/* after an upgrade's hand-over: listening descriptors whose sockets
	 * the new process keeps, with what they queued; a worker closes them
	 * without accepting again. Set before stopping (its release store). */
	const int *kept_fds;
	unsigned nkept;
	/* an upgrade's hand-over: the new process to give sessions to when the
	 * drain begins (session_handoff.h), NULL: they drain here. Set before
	 * stopping (its release store). */
	struct handoff_target *handoff;
	/* the new process of an upgrade: sessions may still come from the old
	 * one (handoff.c's thread runs); a draining worker waits for them */
	int adopting;               /* atomic */
};

struct listener {
	uint8_t kind;            /* EV_LISTENER */
	int fd;                  /* this worker's socket (TCP: own SO_REUSEPORT socket; Unix: a dup) */
	int armed;               /* watched (worker_watch) */
	uint32_t watch;          /* its watch handle (0: epoll) */
	/* It stopped at its accept budget with connections left: watched
	 * through a ring (edge-triggered), no event will say so again, so
	 * the next turn accepts on without sleeping (w->accept_more). */
	uint8_t more;
	uint32_t turn;           /* w->turns when it last accepted */
	const struct addr *addr; /* as configured */
	const struct listen_group *grp; /* the routes whose clients it accepts */
};

/* Copy buffers, trimmed like the pipe pool (pipe_pool.h): a high-water mark
 * of buffers in use decays by 1/64 per buf_pool_trim (every SCAN_MS, so it
 * halves in about 4.5 s of calm) and free buffers above it plus
 * BUF_POOL_HEADROOM are freed, so a burst of 1 MiB buffers is given back
 * well within a minute (about 10 s from 120 to the headroom). Buffers of 128 KiB and more
 * are mmap()ed, so freeing one returns its memory to the system at once (a
 * malloc()ed one of that size would stay in the allocator's arena). */
#define BUF_POOL_HEADROOM   4
#define BUF_POOL_TRIM_BATCH 64
#define BUF_POOL_MMAP_MIN   (128 * 1024)
struct buf_pool {
	char **free;   /* stack of unused copy buffers */
	unsigned nfree, max;
	unsigned used; /* handed out */
	unsigned peak; /* decaying high-water mark of used */
	size_t size;
};

struct session;

struct worker {
	unsigned id;
	pthread_t thread;
	int epfd;
	struct { uint8_t kind; int fd; } wake; /* EV_WAKE eventfd: stop requests */
	struct shared *sh;
	const struct config *cfg;
	struct listener lst[MAX_LISTENERS];
	unsigned nlst;
	uint64_t accept_resume_ms;  /* accept paused until then (0: not paused on fds) */
	int paused_max_conns;       /* listeners down because of --max-conns */
	struct pipe_pool pipes;
	struct buf_pool bufs;
	struct session *sessions;   /* every open session (doubly linked) */
	struct timer_heap timers;   /* the sessions' deadlines (timer.h) */
	struct session *runq;       /* sessions that ran out of budget with work left */
	struct session *dead;       /* closed, freed at the end of the loop turn */
	struct session *dirty;      /* moved bytes not yet in the route counters (session.h) */
	uint64_t next_flush_ms;     /* next session_flush_bytes */
	uint64_t next_id;           /* session ids: worker id in the top byte */
	uint64_t now_ms;            /* CLOCK_MONOTONIC_COARSE, refreshed each turn */
	uint64_t turn_ms;           /* heartbeat: now_ms of the last loop turn (atomic) */
	uint64_t next_scan_ms;      /* next housekeeping (worker_scan) */
	uint64_t spin_until_us;     /* --busy-poll: epoll_wait does not sleep before this */
	int draining;
	uint8_t in_thread;          /* worker_main runs: engines set up on its thread now */
	uint8_t accept_more;        /* a listener has more (listener.more): no sleep */
	uint32_t turns;             /* loop turns (a listener accepts once a turn) */
	/* The engine the loop sleeps in instead of epoll_wait, and that
	 * watches the sessions' and listeners' descriptors (engine.h: wait);
	 * NULL: epoll. */
	const struct engine *waiter;
	struct session *wq_head, *wq_tail; /* waiting for a backend slot (waitq.h) */
	unsigned wq_len;                   /* atomic: other workers read it */
	int wq_kicked;                     /* atomic: a slot may have freed */
	uint32_t cut_seen;                 /* backend_cut_gen() at its last sweep (backend.h) */
	struct counters ctr;
	uint8_t engine_on[ENGINE_MAX]; /* engines a route of this worker uses (worker_init done) */
	/* auto's request/response engine (route->turns): its start failed on
	 * this worker, so sessions stay where they are */
	uint8_t turns_off;
	/* an upgrade's hand-over waits for the sessions whose engine gives
	 * them back (session.h: session_turns_back), up to handoff_due_ms */
	unsigned giving_back;
	uint8_t handoff_wait;
	uint64_t handoff_due_ms;
	void *engine_priv[ENGINE_MAX];  /* each engine's own per-worker state, by id */
	/* SIGHUP: the main thread fills these, raises reload_gen and wakes the
	 * worker, which swaps its listener table and config between two loop
	 * turns and answers with reload_ack = reload_gen. */
	const struct config *next_cfg;
	int next_fds[MAX_LISTENERS];
	uint64_t reload_gen, reload_ack; /* atomic */
	/* worker_call's mailbox: one request at a time, run between two loop
	 * turns; call_pending is all the loop looks at while none waits */
	pthread_mutex_t call_lock;
	pthread_cond_t call_done;
	void (*call_fn)(struct worker *w, void *arg);
	void *call_arg;
	int call_pending;               /* atomic */
	/* sessions an upgrade's old process handed over, for this worker to
	 * adopt between two loop turns (worker_adopt) */
	pthread_mutex_t adopt_lock;
	struct handoff_msg *adopt_head, *adopt_tail;
	int adopt_pending;              /* atomic */
};

/* Prepares w (epoll, pools, listeners from fds already bound by the caller,
 * one per listen group of the config, cfg->lst order). Returns 0 or -errno. */
int worker_init(struct worker *w, unsigned id, struct shared *sh, const int *listen_fds);

/* Thread body: runs the loop until stop was requested and every session is
 * gone (or the drain deadline passed). */
void *worker_main(void *arg);

/* Asks the worker to stop accepting and drain (async-signal-unsafe; call
 * from a normal thread). */
void worker_wake(struct worker *w);

void worker_destroy(struct worker *w);

/* Watching a descriptor for events (EPOLL* bits, edge-triggered for
 * sessions' sockets), delivered to the loop with ptr: through w's epoll
 * set, or through the engine it waits in (w->waiter), whichever takes it.
 * *handle says which (0: epoll) for the calls below. Owner thread only.
 * Unwatch before close(): a ring's poll holds the socket open until it is
 * removed, where epoll forgets a closed descriptor by itself. */
int worker_watch(struct worker *w, int fd, uint32_t events, void *ptr, uint32_t *handle);
int worker_rewatch(struct worker *w, int fd, uint32_t events, void *ptr, uint32_t *handle);
void worker_unwatch(struct worker *w, int fd, uint32_t *handle);
/* Unwatches and closes fd, a descriptor no other process or table holds
 * (epoll: the close is enough). */
void worker_unwatch_close(struct worker *w, int fd, uint32_t *handle);

/* Runs fn(w, arg) on w's thread between two of its loop turns, where it may
 * walk and close w's sessions, and waits for it (any thread but w's; the
 * admin socket's). Returns 0 once fn ran, or -ETIMEDOUT when w did not take
 * the request within timeout_ms (stalled, or its loop has ended): then fn
 * never runs. */
int worker_call(struct worker *w, void (*fn)(struct worker *w, void *arg), void *arg,
		int timeout_ms);

/* Gives w a session handed over by an upgrade's old process (any thread;
 * w adopts it on its next turn: session_handoff.h). */
struct handoff_msg;
void worker_adopt(struct worker *w, struct handoff_msg *m);

char *buf_pool_get(struct buf_pool *bp);
void buf_pool_put(struct buf_pool *bp, char *buf);
/* Frees idle buffers above the recent need (see struct buf_pool); returns
 * how many. */
unsigned buf_pool_trim(struct buf_pool *bp);
/* Frees every idle buffer and the stack. */
void buf_pool_destroy(struct buf_pool *bp);

/* Heartbeat: a worker turns its loop at least every SCAN_MS (100 ms) even
 * when idle (epoll_wait's timeout), so one whose last turn is older than
 * WORKER_STALL_MS is blocked somewhere (a syscall that should not block, a
 * loop that does not end). Returns that age in ms, or 0 while it turns.
 * 2 s is 20 missed turns: far beyond scheduling noise on a loaded machine,
 * well within a load balancer's patience. */
#define WORKER_STALL_MS 2000
uint64_t worker_stalled_ms(const struct worker *w, uint64_t now_ms);

/* The sum of n workers' counters (any thread; each field read atomically). */
void worker_counters_total(const struct worker *ws, unsigned n, struct counters *t);

/* Listener table of cfg (its listen groups) over fds: the worker's listeners.
 * Used at start and on reload. */
void worker_set_listeners(struct worker *w, const struct config *cfg, const int *fds);

/* Runs the worker_init hook of every engine cfg's routes use that this
 * worker has not started yet (at start, and for a reload's new routes).
 * Returns 0 or the first -errno. */
int worker_engines_init(struct worker *w, const struct config *cfg);

/* Starts engine e on w if it is not running yet (its worker_init; its loop
 * hooks from now on): for an engine a session moves to while it runs
 * (route->turns), so a worker that never needs it never sets it up.
 * w's thread. 0 or -errno. */
int worker_engine_start(struct worker *w, const struct engine *e);

/* Listener arming, used by sessions when --max-conns frees up. Arming is
 * refused while accepting is paused after EMFILE/ENFILE (accept_resume_ms
 * set): worker_scan arms them when the pause ends. */
void worker_listeners_arm(struct worker *w, int on);

/* Out of descriptors (or memory) in `what` (accept, a backend socket):
 * accepting pauses for a moment, logged once. */
void worker_fd_pause(struct worker *w, const char *what, int err);

#endif
