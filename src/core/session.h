/* SPDX-License-Identifier: MIT */
/* session: one client connection and its backend connection, two sides and
 * two directions (up: client->backend, down: backend->client).
 *
 * Readiness is edge-triggered (EPOLLET): a side's can_read/can_write flag is
 * set by an event and cleared only when the kernel says EAGAIN (or a short
 * read proves the queue empty), so no edge is ever lost. */
#ifndef SPLICER_SESSION_H
#define SPLICER_SESSION_H
#include <stdint.h>
#include <sys/socket.h>

#include "loop_guard.h"
#include "timer.h"

struct worker;
struct session;
struct addr;

struct side {
	uint8_t kind;      /* EV_CLIENT or EV_BACKEND: epoll data points here */
	uint8_t can_read;  /* readable edge seen and not yet drained */
	uint8_t can_write; /* writable edge seen and not yet filled */
	uint8_t rdhup;     /* peer's FIN seen in an event: a short read is not the end */
	uint8_t fin;       /* the last event: a FIN and no error (session.c: session_on_event) */
	uint8_t urg;       /* EPOLLPRI: urgent data ahead, a short read may stop at its mark */
	uint8_t broken;    /* reset or failed (seen reading or writing): it takes no more bytes */
	int fd;            /* -1 when not open */
	uint32_t ev;       /* epoll events registered (sockmap narrows them) */
	uint32_t watch;    /* worker_watch's handle (0: epoll) */
	struct session *s;
};

struct engine;

/* Why a direction is on the engine it is on (dir_why_name: the access log's
 * engine_reason, ctl show sessions). */
enum dir_why {
	WHY_AS_SET,   /* where its route's engine started it (auto: not a stream so far) */
	WHY_STREAM,   /* auto: reads of at least half the buffer in a row */
	WHY_ONE_WAY,  /* auto: a stream by bytes one way, nothing coming back */
	WHY_FALLBACK, /* its engine could not go on (no pipe, a socket that cannot splice) */
	WHY_KERNEL,   /* sockmap: handed to the kernel's redirect */
	WHY_TURNS,    /* auto: the session behaved as request/response (route->turns) */
	WHY_MAX
};

/* Room for an engine's own state in a direction and in a session; each
 * engine checks its struct fits (engine.h: ENGINE_STATE_FITS). */
#define DIR_PRIV_WORDS     10
#define SESSION_PRIV_WORDS 8

struct dir {
	struct side *src, *dst;
	const struct engine *eng;    /* moves the bytes now (engine.h) */
	const struct engine *stream; /* auto: where it goes once it is a stream; NULL after */
	uint8_t used;         /* bit per engine id that moved bytes, for the log */
	/* Reading src: open, then eof (0 read, or an error: see rst). Writing
	 * dst: open, then shut (the FIN forwarded) or dead (dst failed). */
	uint8_t eof;          /* src ended: forward its end once everything before it is written */
	uint8_t rst;          /* src ended by a reset: dst gets an RST, not a FIN, once delivered */
	uint8_t shut;         /* shutdown(dst, SHUT_WR) done */
	uint8_t dead;         /* dst failed: nothing more can be delivered; pending was dropped */
	uint8_t urg_state;    /* urgent.c: 0 none, 1 urgent byte held, 2 sent, mark to skip */
	char urg_byte;
	uint8_t lowat_set;    /* SO_RCVLOWAT applied to src: a short tail raises no event */
	uint64_t bytes;       /* written to dst (its send queue took them); never decreases */
	int err;              /* errno that ended the direction, 0 if none */
	uint32_t solo;        /* auto: bytes moved since the other direction last moved
				 (saturates): one-way bytes make a stream (engine.h) */
	uint8_t err_at_dst;   /* err came from writing (1) or reading (0) */
	uint8_t why;          /* enum dir_why: why it is on its engine */
	/* the engine's own state (engine.h: ENGINE_STATE), opaque here */
	uint64_t priv[DIR_PRIV_WORDS];
};

/* S_HEADER: accept_proxy, waiting for the client's PROXY header.
 * S_HELLO: a listener with sni routes, waiting for the whole ClientHello.
 * S_QUEUED: every usable backend is at its maxconn: waiting for a slot,
 * nothing read from the client (waitq.h). */
enum session_state { S_HEADER, S_HELLO, S_QUEUED, S_CONNECTING, S_OPEN, S_CLOSED };

struct tls_hello;
struct session_pp;
struct listen_group;

struct session {
	struct worker *w;
	struct route *route;   /* its route: backends, engine, timeouts (S_HEADER and S_HELLO:
				  the listener's default, or first, until one is chosen) */
	const struct listen_group *grp; /* the listener it was accepted on */
	struct tls_hello *hello; /* S_HELLO: the reader's state (tls_hello.h) */
	struct session_pp *pp; /* PROXY v2 TLVs learned and sent (session_pp.h); NULL: none */
	uint32_t hello_lowat;  /* S_HELLO: the client's SO_RCVLOWAT when raised; 0: the default */
	const struct engine *eng; /* the route's engine: its session hooks (engine.h) */
	uint64_t id;
	struct side cli, srv;
	struct dir up, down;
	uint8_t state;         /* enum session_state */
	uint8_t in_runq;
	unsigned first;        /* first backend tried */
	unsigned tries;        /* backends tried so far */
	unsigned backend;      /* index of the current backend */
	uint8_t counted;       /* counted in its backend's active sessions (leastconn) */
	uint8_t attempted;     /* a connect to some backend was tried */
	uint8_t opened;        /* connected to s->backend (its bytes count for it) */
	uint8_t ending;        /* both directions over; waiting for a side's send queue to
				  empty before its RST (an RST would discard what it holds) */
	uint8_t routed;        /* counted in its route's sessions (its route is final) */
	uint8_t src_held;      /* counted against its source's limits (route_admit.h) */
	uint8_t refused;       /* closed by admission or queue_timeout: the client gets an RST */
	uint8_t in_waitq;      /* in the worker's wait queue (S_QUEUED, or retrying) */
	uint8_t admitted;      /* waiting for its hello when an upgrade handed it over: the old
				  process admitted it (hello_admit holds, does not count again) */
	uint8_t cut;           /* closed for its backend going (on_backend_down = close): the
				  backend side gets an RST (session_cut) */
	uint32_t cut_seq;      /* its backend's cut_seq when it took the slot (backend.h) */
	const char *fail;      /* the close reason of the first error a direction met */
	int fail_err;          /* its errno (the access log's error=) */
	int conn_err;          /* errno of the latest failed connect attempt */
	uint8_t ended_by;      /* which side ended it first (session.c: enum end_by) */
	uint8_t in_dirty;      /* on the worker's list of sessions with unreported bytes */
	uint32_t outq[2];      /* ending: client, backend send queues at the last look */
	struct timer timer;    /* the earliest deadline (worker's heap; timer.h) */
	uint64_t start_ms, active_ms;
	uint64_t connect_start_ms, open_ms; /* first connect attempt; backend connection up */
	uint64_t reported[2];  /* up, down bytes already added to the route's and backend's
				  counters (the rest: session_flush_bytes, session_close) */
	const struct addr *listen; /* the listener it came in on (its config's) */
	uint64_t connect_deadline_ms;  /* S_CONNECTING: this attempt's; S_HEADER: the header's */
	uint64_t fd_retry_ms;  /* S_CONNECTING, no backend socket for want of a descriptor: its
				  next try (session_fd_wait); 0: none */
	struct loop_entry loop;      /* backend connection on this host: loop_guard.h */
	struct sockaddr_storage peer;
	socklen_t peerlen;
	struct session *prev, *next; /* worker's list of sessions */
	struct session *rq_next;     /* worker's run queue */
	struct session *dead_next;   /* worker's list of closed sessions to free */
	struct session *wq_prev, *wq_next; /* S_QUEUED: worker's wait queue (waitq.h) */
	uint64_t queued_ms;          /* S_QUEUED: since when */
	struct session *dirty_prev, *dirty_next; /* worker's list of sessions that moved bytes */
	/* the route's histograms (route_hist.h), CLOCK_MONOTONIC microseconds */
	uint64_t connect_us;         /* the first connect attempt */
	uint64_t open_us;            /* the backend connection up */
	uint64_t first_up_us;        /* the first client byte written before any backend byte; 0: none */
	uint8_t answered;            /* the backend's first byte was seen (and recorded) */
	uint64_t log_last_ms;        /* the last interim access-log line (start_ms before one) */
	/* the graceful close (max_session_time, the drain's spread closes) */
	uint64_t expire_ms;          /* when it begins; TIMER_NONE: never */
	uint8_t expire_why;          /* EXPIRE_LIFETIME or EXPIRE_DRAIN: what set expire_ms */
	uint8_t expiring;            /* begun: both sides read to their end, then FINs */
	/* session_sock.c */
	uint32_t tfo_sent;           /* client bytes peeked into the backend's SYN (fastopen) */
	uint32_t rate_div;           /* a per-source rate: the sessions it was shared by */
	uint64_t rate_next_ms;       /* then looked at again; 0: no per-source rate */
	uint64_t priv[SESSION_PRIV_WORDS]; /* the engine's own state (engine.h) */
	/* auto's move to request/response's engine (route->turns, session.c:
	 * turns_due): the times its bytes changed direction, and which
	 * direction moved last (1 up, 2 down, 0 none yet) */
	uint16_t turns;
	uint8_t last_mover;
	uint8_t giving_back;         /* its engine is giving it back for an upgrade (w->giving_back) */
	uint64_t uid[2];             /* its unique id as an old process made it (an upgrade's
					hand-over); 0, 0: this process's (session_pp.h) */
};

enum { EXPIRE_NONE, EXPIRE_LIFETIME, EXPIRE_DRAIN };

/* The drain began (worker.c): with drain_spread, each open session of w is
 * closed gracefully at a moment drawn evenly from [now, now + 90% of the
 * time to deadline], or sooner if its max_session_time says so. */
void session_drain_spread(struct worker *w, uint64_t deadline_ms);

/* Takes ownership of a client fd accepted on listener g and starts
 * (reading a header or hello, or connecting to a backend). Returns 0, or
 * -errno after closing fd. */
int session_new(struct worker *w, const struct listen_group *g, int fd,
		const struct sockaddr *peer, socklen_t peerlen);

/* session_new for a client an upgrade handed over before its route was
 * chosen (reading a PROXY header or ClientHello, which are peeked at, never
 * consumed, but for a whole PROXY header): what it carries from the old
 * process. */
struct session_carry {
	uint64_t start_ms;      /* its accept */
	uint64_t deadline_ms;   /* its header's or hello's */
	uint8_t header_read;    /* accept_proxy: its header was read (peer is its source) */
	uint8_t admitted;       /* its source limits were passed there (waiting for its hello) */
	struct session_pp *pp;  /* its header's TLVs (taken), or NULL */
	uint64_t uid[2];
};
int session_new_at(struct worker *w, const struct listen_group *g, int fd,
		   const struct sockaddr *peer, socklen_t peerlen, struct session_carry *c);

/* S_QUEUED: tries for a backend slot again (waitq.c, when one may have
 * freed or a backend become usable). After a reload or a DNS change it
 * first moves to the new generation's route of its name (its backends and
 * slots; its allow/deny may reset it). Returns 1 when s left the queue
 * (connecting, or closed), 0 when it still waits. */
int session_dequeue(struct session *s);

/* Handles an epoll event on one side of a session. */
void session_event(struct side *sd, uint32_t events);

/* Runs a session from the worker's run queue. */
void session_resume(struct session *s);

/* s's timer is due: timeouts, and what is looked at again (timer.h). */
void session_timer_fired(struct session *s);

/* Closes both sides (RST where data could not be delivered), releases
 * pipes and buffers, logs at -v; the memory is freed by the worker later. */
void session_close(struct session *s, const char *reason);

/* Why d is on its engine, as the access log and ctl show name it:
 * configured (its route's engine), not-a-stream (auto, still on copy),
 * stream, one-way, fallback or kernel (enum dir_why). */
const char *dir_why_name(const struct dir *d);

void session_free(struct session *s);

/* Adds the bytes the worker's sessions moved since the last call to their
 * routes' and backends' counters, so /metrics shows live sessions' traffic
 * (worker.c: every BYTES_FLUSH_MS, 250 ms). Visits only the sessions that moved
 * bytes meanwhile (w->dirty), never an idle one. */
void session_flush_bytes(struct worker *w);

/* uring: the engine moved bytes, met EOF or failed on s; closes the session
 * when a direction failed or both are shut, as session_run() does. */
void session_io_result(struct session *s);

/* The engine s moved to as request/response (route->turns) gives it back
 * to its route's own engines, holding nothing in flight: each direction
 * goes back on the route's start engine with the bytes it had read and not
 * written (h[0] up, h[1] down: bytes and len), its sockets non-blocking
 * again and back in the worker's watch. An engine gives back for an
 * upgrade's hand-over (engine.h: give_back) and when a direction streams.
 * Returns 0, or -errno with s closed. */
struct dir_handoff;
int session_turns_back(struct session *s, const struct dir_handoff *h);

/* on_backend_down = close (backend.h: backend_cut): closes every session of
 * w whose backend was cut since it took its slot. An open session ends as
 * if its backend had reset the connection (semantics.md): the bytes
 * already read from the backend are delivered to the client, then the
 * client gets an RST (its stream was cut, not finished: a FIN would let a
 * truncated reply pass for a whole one), and the backend an RST at once
 * (it is down or gone: no FIN handshake to wait for, and a live one
 * learns at once that its client left). A session still connecting to it
 * goes on to its next backend. Counted on the route (cut_down,
 * cut_removed). w's thread. */
void session_cut_sweep(struct worker *w);

#endif
