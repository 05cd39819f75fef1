/* SPDX-License-Identifier: MIT */
/* engine_uring: io_uring drives a session's two directions once its backend
 * is connected. Accept, connect (with retries), the PROXY header and timers
 * stay on the worker's epoll loop; the ring's fd sits in that epoll set and
 * its completions are reaped when it fires. SQEs queued during a loop turn
 * are submitted together at the top of the next turn (one io_uring_enter).
 *
 * Per direction:
 *   - one recv at a time on the source, picking its buffer from the worker's
 *     provided-buffer ring (io_uring_register_buf_ring, group 0). Each
 *     completion hands over one buffer (IORING_CQE_F_BUFFER); the direction
 *     queues them in arrival order (a list threaded through the buffer ids);
 *   - one sendmsg in flight at a time, gathering up to UR_IOV queued buffers,
 *     so bytes leave in the order they came. A short send resends the rest;
 *     a fully sent buffer goes straight back to the ring;
 *   - fairness of the shared ring, three rules. A quota: a direction
 *     holding UR_HIGH_BUFS buffers arms no recv (data stays in the socket)
 *     until a send gives one back. A reserve: a direction holding any
 *     buffer arms one only while more than UR_RESERVE are free beyond what
 *     the other holders' armed recvs may take, so one holding none can
 *     take one. Reclaim: a send to a destination that stopped reading
 *     never completes and keeps the buffers it carries, and each such
 *     direction also takes one from the reserve, so forty of them emptied
 *     the ring and froze the worker's other sessions. When the ring runs
 *     short, sends in flight for UR_STALL_MS are cancelled and what they
 *     carried moves into the direction's own memory (its spill, at most the
 *     quota and one buffer), and the direction receives nothing until that
 *     is sent: a stalled destination costs its own session's memory, as a
 *     full pipe does with the splice engine, never the others' buffers
 *     (reclaim_stalled). (Not a multishot recv: it takes as many buffers as
 *     the socket has data for, up to the whole ring in one burst, before a
 *     cancel can stop it: five stalled clients froze the worker.) ENOBUFS
 *     (the ring empty) or a holder kept from the reserve waits on the
 *     worker's starved list, first in first out, re-armed as buffers come
 *     back;
 *   - EOF (res 0): shutdown(dst, SHUT_WR) once the queue is empty and no
 *     send is in flight; errors close the session through the same rules
 *     as the other engines (session_io_result(), session_close()).
 * Session close detaches both directions: their operations are cancelled by
 * user_data, and the engine owns the session's sockets from then on, fixed
 * slots and plain descriptors alike (uring_sides_close takes them). It
 * closes them once the last completion of both directions came back, cancels
 * included: no SQE naming a descriptor (queued this turn, submitted at the
 * next) or an engine address can then meet a new connection or direction
 * that reused the number. The session itself is freed as usual (nothing
 * here points at it). A cancel or a close never waits on an SQE the ring
 * cannot give (its submit failed with the SQ full): it goes at a later
 * turn, and a close with no RST due is done at once through the file
 * table, so both peers always see the end.
 *
 * Why not IORING_OP_SPLICE: the kernel always punts it to io-wq workers
 * (socket splice has no nonblocking path inside io_uring), one kernel thread
 * hop per splice; see the README for the measurement. Why not SEND_ZC: on
 * loopback the kernel copies anyway (and completes with a notification CQE
 * per send); it pays only on real NICs for large sends.
 *
 * Fixed (direct) descriptors: once open, both sockets move into the ring's
 * sparse file table (FILES_UPDATE SQEs, fixed_register) and their
 * descriptors are closed, so established sessions do not count against
 * ulimit -n; the kernel caps each table at RLIMIT_NOFILE, so N workers hold
 * up to N x ulimit/2 sessions beside the descriptors of those still
 * connecting.
 * Every op then uses IOSQE_FIXED_FILE; FIN is IORING_OP_SHUTDOWN, the RST an
 * SO_LINGER 0 through IORING_OP_URING_CMD (SOCKET_URING_OP_SETSOCKOPT,
 * kernel 6.7+) hard-linked before IORING_OP_CLOSE of the slot. A full table
 * leaves the session on plain descriptors. Accept and connect still take a
 * descriptor each for a moment (epoll), which is where ulimit -n still
 * bites: a burst of connects beyond it pauses accepting, as before. */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine.h"

struct engine engine_uring;
struct uring_dir;

/* A direction's part of struct dir (engine.h: ENGINE_STATE). */
struct ur_dir_state {
	struct uring_dir *ur; /* the engine's direction, NULL before the start */
	uint64_t in_uring;    /* bytes received, not yet sent */
};
ENGINE_STATE_FITS(struct ur_dir_state, struct dir);

static struct ur_dir_state *UR(const struct dir *d)
{
	return ENGINE_STATE(struct ur_dir_state, (struct dir *)d);
}

/* the worker's ring (engine_priv), NULL before uring_worker_init */
#define CTX(w) ((struct uring_ctx *)(w)->engine_priv[engine_uring.id])
#include "log.h"
#include "session.h"
#include "worker.h"

#define UR_SQ_ENTRIES 1024
#define UR_CQ_ENTRIES 16384
/* Provided buffers per worker (a power of two) of --buffer-size, at most
 * UR_BUF_MAX: 64 x 64k, 4 MiB a worker touches at most (the ring hands
 * buffers out in turn, so all of them get touched). 64k buffers cost 0.37-0.40
 * CPU-s/GB against 0.45-0.61 for 128 x 32k (bench/iperf3-cpu.sh, 4 GiB). */
#define UR_NBUFS      64
#define UR_BUF_MAX    (64u << 10)
#define UR_BGID       0
#define UR_HIGH_BUFS  8       /* a direction holding this many (512k) stops receiving */
#define UR_RESERVE    8       /* free buffers a direction holding some may not take */
#define UR_IOV        16      /* buffers gathered into one sendmsg */
/* Under buffer pressure, a send in flight this long holds its buffers for a
 * destination that stopped reading: they are taken back (reclaim_stalled). */
#define UR_STALL_MS   20
/* An operation the ring could not take (its submit failed with the SQ
 * full) is retried at least this often ... */
#define UR_RETRY_MS   10
/* ... and a close due with an RST waits this long for a slot before the
 * socket is closed without it (the peer still sees the end). */
#define UR_CLOSE_WAIT_MS 1000
/* A worker waiting in the ring: while the kernel has completions' task
 * work left after an enter (20 at most each), the turn enters again
 * without waiting, at most this many times (uring_wait). */
#define UR_DRAIN_ROUNDS  16

/* (6.15; Debian 12's headers predate them) */
#ifndef IORING_ENTER_NO_IOWAIT
#define IORING_ENTER_NO_IOWAIT (1U << 7)
#endif
#ifndef IORING_FEAT_NO_IOWAIT
#define IORING_FEAT_NO_IOWAIT (1U << 17)
#endif

/* Its counters (slot 0 is the bytes every engine counts). */
#define UR_CTR_RECLAIMS 1
static const struct engine_counter ur_counters[] = {
	{ "uring_stall_reclaims_total", "Directions of uring sessions whose destination stalled "
					"under buffer pressure: their bytes moved out of the shared buffer ring." },
};

/* user_data: an engine address (8-aligned) | op, or a slot << 3 | OP_CLOSE;
 * 0 is a CQE nobody waits for (the SO_LINGER before a slot's close). */
enum { OP_RECV = 1, OP_SEND = 2, OP_SPLICE_IN = 3, OP_SPLICE_OUT = 4, OP_CLOSE = 5,
       OP_SHUTDOWN = 6, OP_CANCEL = 7 };

/* Socket commands through IORING_OP_URING_CMD (kernel 6.7+): Debian's
 * liburing 2.3 headers predate them, and the sqe fields they use are
 * written by their 2.3 names (cmd_op, addr = level | optname << 32,
 * splice_fd_in = optlen, addr3 = optval). */
#ifndef SOCKET_URING_OP_SETSOCKOPT
#define SOCKET_URING_OP_SETSOCKOPT 3
#endif

struct uring_ctx;
struct uring_sess;

/* Spilled bytes: the direction's own memory, one allocation per spill. */
struct ur_chunk {
	struct ur_chunk *next;
	uint32_t off, len;   /* sent, and all the bytes of data[] */
	char data[];
};

struct uring_dir {
	struct uring_ctx *u;
	struct uring_sess *us; /* the session's part, both directions */
	struct session *s;   /* NULL once detached by session close */
	struct dir *d;
	int src, dst;        /* descriptors, or slots of the ring's file table */
	uint8_t fixed;       /* src/dst are slots (IOSQE_FIXED_FILE) */
	uint8_t recv_armed;  /* a recv is in the kernel (or queued for it) */
	uint8_t recv_hold;   /* ... armed while the direction held buffers */
	uint8_t send_busy;   /* a sendmsg is in the kernel */
	uint8_t starved;     /* on u->starved: re-arm when buffers come back */
	uint8_t finished;    /* detached and its last CQE came back */
	uint8_t sending;     /* on u->sending: its send carries ring buffers */
	uint8_t reclaim;     /* that send is being cancelled to take them back */
	/* The reclaim's cancel has not come back: no new send until it has,
	 * as it names the send by user_data and would cancel the next one. */
	uint8_t reclaim_wait;
	uint8_t cancel_due;  /* 1 << op: cancels waiting for an SQE (on u->cancels) */
	uint8_t arm_due;     /* on u->arming: its recv, send or FIN found no SQE */
	/* a session auto moved here (us->movable): receives of a whole buffer
	 * in a row, and bytes received since the other direction last
	 * received, the rules by which auto's copy finds a stream */
	uint8_t full_reads;
	uint32_t solo;
	unsigned inflight;   /* operations and cancels naming it whose CQE has not come */
	int qhead, qtail;    /* received buffers, oldest first; -1: none */
	unsigned nq;
	/* Bytes taken out of the ring after a stall (reclaim_stalled), in
	 * their order, before anything queued; while any is left no recv is
	 * armed (back-pressure). */
	struct ur_chunk *spill, *spill_tail;
	uint64_t send_ms;    /* when the send on u->sending was queued */
	struct uring_dir *sprev, *snext; /* u->sending, oldest send first */
	struct uring_dir *cnext;         /* u->cancels */
	struct uring_dir *anext;         /* u->arming */
	struct iovec iov[UR_IOV];
	struct msghdr msg;
	/* SPLICER_URING_SPLICE=1 (measurement only, not a supported mode):
	 * IORING_OP_SPLICE src -> pipe -> dst, recv_armed/send_busy standing
	 * for the two splices. Each splice blocks an io-wq thread until its
	 * socket has data, so it fails concurrent_2000 and ping_pong. */
	int pipe[2];
	uint32_t in_pipe, pipe_cap;
	struct uring_dir *next; /* u->starved */
};

/* A session's part, one allocation: either both directions exist or none.
 * After session close the engine owns the sockets: fd[] (plain descriptors
 * taken by uring_sides_close) or slot[], closed with SO_LINGER 0 where rst[]
 * says, once both directions finished. */
struct uring_sess {
	struct uring_dir dir[2]; /* up (client -> backend), down */
	int fd[2];               /* client, backend; -1: not ours (yet) */
	int slot[2];             /* fixed: client, backend slots */
	uint8_t fixed, rst[2];
	uint8_t nfinished;
	/* Auto moved it here as request/response (session.h: WHY_TURNS), on
	 * plain descriptors, and it can go back to copy (give_back_start).
	 * giving: on its way back: its recv and send are cancelled, none is
	 * armed again, and once nothing is in flight it goes (givers_run). */
	uint8_t movable, giving;
	struct uring_sess *gnext;  /* u->givers */
	uint64_t close_since;      /* on u->closing since (its slots wait for SQEs) */
	struct uring_sess *cnext;  /* u->closing */
};

struct uring_ctx {
	struct engine_fd efd; /* EV_ENGINE: epoll data points here (first member) */
	struct worker *w;
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	char *mem;
	unsigned nbufs, bufsize, mask;
	uint32_t *blen, *boff;
	int *bnext;
	unsigned to_add;     /* buffers added to the ring, not yet published */
	unsigned nfree;      /* buffers in the ring (or about to be) */
	unsigned hold_armed; /* armed recvs with recv_hold */
	struct uring_dir *starved, *starved_tail; /* first in, first re-armed */
	unsigned nstarved;   /* directions on it */
	struct uring_dir *sending, *sending_tail; /* sends holding ring buffers, oldest first */
	struct uring_dir *cancels;                /* cancels waiting for an SQE */
	struct uring_dir *arming, *arming_tail;   /* recvs, sends, FINs waiting for one */
	struct uring_dir *arm_run;                /* the part of it arming_retry has yet to try */
	struct uring_sess *closing;               /* slots waiting for SQEs to close */
	struct uring_sess *givers;                /* sessions going back to copy */
	int close_forced;    /* closes without their RST were logged (once) */
	int splice;          /* SPLICER_URING_SPLICE=1: the IORING_OP_SPLICE variant */
	int *slots;          /* free slots of the fixed file table (a stack) */
	unsigned nslots, nfree_slots;
	/* A FILES_UPDATE reads its descriptor from user memory when the kernel
	 * takes the SQE: one int per SQ entry, indexed like the SQE, stays
	 * valid until then (fixed_register). */
	int *sqe_fd;
	unsigned reg_tail;   /* the SQ tail after the newest such SQE ... */
	uint8_t reg_queued;  /* ... while the kernel may not have taken it */
	unsigned detached;   /* detached sessions not yet freed (their sockets open) */
	/* SPLICER_URING_FAULT (tests only, see fault_init): every nth session
	 * start fails after its sockets entered the fixed table ("start:n"), or
	 * every nth io_uring_submit fails with ENOMEM ("submit:n"), or every
	 * nth SQE asked for is refused, as if the SQ were full and the submit
	 * that would have emptied it had failed ("sqe:n"). */
	unsigned fault_start, fault_submit, nstarts, nsubmits, fault_sqe, nsqes;
	int submit_err;      /* the last submit error logged (0: none) */
	/* The worker sleeps in this ring (SINGLE_ISSUER | DEFER_TASKRUN; see
	 * "Waiting in the ring" below): made disabled by the main thread,
	 * enabled by the worker's (ring_start). */
	uint8_t wait_mode, started;
	uint8_t no_iowait;     /* its waits are idle time, not iowait (IORING_FEAT_NO_IOWAIT) */
	uint8_t epoll_ready;  /* the epoll set's poll fired: epoll_wait(0) it */
	uint8_t epoll_again;  /* it gave events: ask again (level-triggered ones) */
	uint8_t cqes_left;    /* a turn's events filled evs: CQEs wait in the ring */
	struct ur_watch *watch; /* by index; user_data UD_WATCH | index << 3 */
	unsigned nwatch, wfree; /* size; head of the free list (index + 1, 0: none) */
	unsigned *due, ndue; /* watches whose arm or remove found no SQE yet */
	unsigned reap_gen;     /* reaps so far (ur_watch.gen) */
};

/* A descriptor the worker watches through the ring: a multishot poll,
 * edge-triggered like the epoll items it replaces. Its index is freed only
 * when the poll's last CQE (no IORING_CQE_F_MORE) came back, so a late CQE
 * never names a reused index or a freed owner. */
enum { W_FREE, W_LIVE, W_DYING, W_FAILED };
struct ur_watch {
	void *ptr;       /* what the loop dispatches on (first byte: its kind) */
	uint32_t events;
	int fd;
	uint8_t state;
	uint8_t unarmed; /* on u->due to be armed: no poll in the kernel yet */
	uint8_t on_due;  /* on u->due (once at most); freed, off the free list till taken off */
	unsigned next;   /* free list (index + 1) */
	/* Its event in evs this turn (reap number, index): one per
	 * descriptor and turn, bits merged, as epoll_wait gives them. A
	 * listener's poll fires once per connection that arrives, and each
	 * event accepts up to a budget: unmerged, the backlog was taken whole
	 * before any connect completed, and with ulimit -n reached, the
	 * backends' sockets found no descriptor (uring_beyond_nofile). */
	unsigned gen, evi;
};
#define UD_WATCH (1ull << 62)

static inline uint64_t ud_data(struct uring_dir *ud, int op)
{
	return (uint64_t)(uintptr_t)ud | (uint64_t)op;
}

static void ring_publish(struct uring_ctx *u)
{
	if (u->to_add) {
		io_uring_buf_ring_advance(u->br, (int)u->to_add);
		u->to_add = 0;
	}
}

static void buf_put(struct uring_ctx *u, int bid)
{
	io_uring_buf_ring_add(u->br, u->mem + (size_t)bid * u->bufsize, u->bufsize,
			      (unsigned short)bid, (int)u->mask, (int)u->to_add++);
	u->nfree++;
}

static void sess_free(struct uring_sess *us)
{
	for (int i = 0; i < 2; i++) {
		for (int k = 0; k < 2; k++)
			if (us->dir[i].pipe[k] >= 0)
				close(us->dir[i].pipe[k]);
		for (struct ur_chunk *c = us->dir[i].spill, *n; c; c = n) {
			n = c->next;
			free(c);
		}
	}
	free(us);
}

/* Submits what the turn queued. An error leaves the SQEs in the ring (the
 * kernel took none of them): they go with the next turn's submit, so a
 * transient failure (EAGAIN: no memory for requests, EBUSY: completions
 * backed up) only delays them. Logged once per kind of error in a row. */
static void ring_submit(struct uring_ctx *u)
{
	int r;

	ring_publish(u);
	if (u->fault_submit && ++u->nsubmits % u->fault_submit == 0)
		r = -ENOMEM;
	else
		do
			r = io_uring_submit(&u->ring);
		while (r == -EINTR);
	if (r < 0 && r != u->submit_err && r != -EBUSY && r != -EAGAIN)
		log_warn("io_uring_submit: %s; retrying at the next loop turn", strerror(-r));
	u->submit_err = r < 0 ? r : 0;
}

static struct io_uring_sqe *sqe_get(struct uring_ctx *u)
{
	struct io_uring_sqe *sqe;

	if (u->fault_sqe && ++u->nsqes % u->fault_sqe == 0) {
		if (u->nsqes == u->fault_sqe)
			log_warn("SPLICER_URING_FAULT: an SQE refused");
		return NULL;
	}
	sqe = io_uring_get_sqe(&u->ring);

	if (!sqe) {
		ring_submit(u);
		sqe = io_uring_get_sqe(&u->ring);
	}
	return sqe;
}

static int fixed_close_both(struct uring_ctx *u, struct uring_sess *us, int force);
static void closes_retry(struct uring_ctx *u);

/* A detached direction whose last completion (cancels included) came back;
 * once both have, nothing names the session's sockets or its memory: the
 * sockets close and the part is freed. Slots the ring cannot close yet (no
 * SQE this turn) wait on u->closing, retried by uring_flush. Callers touch
 * ud no more. */
static void detached_check(struct uring_dir *ud)
{
	struct uring_ctx *u = ud->u;
	struct uring_sess *us = ud->us;

	if (ud->s || ud->inflight || ud->starved || ud->arm_due || ud->finished)
		return;
	ud->finished = 1;
	if (++us->nfinished < 2)
		return;
	if (us->fixed && !fixed_close_both(u, us, 0)) {
		us->close_since = u->w->now_ms;
		us->cnext = u->closing;
		u->closing = us;
		return;
	}
	for (int i = 0; i < 2 && !us->fixed; i++) {
		if (us->fd[i] >= 0) {
			if (us->rst[i]) {
				struct linger lg = { .l_onoff = 1, .l_linger = 0 };
				setsockopt(us->fd[i], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			}
			close(us->fd[i]);
		}
	}
	u->detached--;
	sess_free(us);
}

/* Appends to the starved list (first in, first re-armed). */
static void starve(struct uring_dir *ud)
{
	struct uring_ctx *u = ud->u;

	if (ud->starved || ud->us->giving)
		return;
	ud->starved = 1;
	u->nstarved++;
	ud->next = NULL;
	if (u->starved_tail)
		u->starved_tail->next = ud;
	else
		u->starved = ud;
	u->starved_tail = ud;
}

/* Takes ud off the starved list (it goes back to copy). */
static void unstarve(struct uring_dir *ud)
{
	struct uring_ctx *u = ud->u;

	for (struct uring_dir *x = u->starved, *prev = NULL; x; prev = x, x = x->next) {
		if (x != ud)
			continue;
		if (prev)
			prev->next = x->next;
		else
			u->starved = x->next;
		if (u->starved_tail == x)
			u->starved_tail = prev;
		ud->starved = 0;
		u->nstarved--;
		return;
	}
}

/* ud's next recv, send or FIN found no SQE: the SQ was full and the
 * submit that would have emptied it failed. It waits on u->arming and is
 * tried again at a later turn (arming_retry), as cancels and closes are.
 * (Failed there instead, the session closed as out of memory: a turn that
 * started a few hundred sessions when a submit failed ended healthy ones.)
 * A detached direction on it is freed only once off it (detached_check). */
static void arm_later(struct uring_dir *ud)
{
	struct uring_ctx *u = ud->u;

	if (ud->arm_due)
		return;
	ud->arm_due = 1;
	ud->anext = NULL;
	if (u->arming_tail)
		u->arming_tail->anext = ud;
	else
		u->arming = ud;
	u->arming_tail = ud;
}

/* Takes ud off u->arming, or off the part arming_retry is going through
 * (its session goes back to copy). */
static void unarm(struct uring_dir *ud)
{
	struct uring_ctx *u = ud->u;
	struct uring_dir *prev = NULL;

	for (struct uring_dir **pp = &u->arm_run; *pp; pp = &(*pp)->anext)
		if (*pp == ud) {
			*pp = ud->anext;
			goto off;
		}
	for (struct uring_dir **pp = &u->arming; *pp; prev = *pp, pp = &(*pp)->anext)
		if (*pp == ud) {
			*pp = ud->anext;
			if (u->arming_tail == ud)
				u->arming_tail = prev;
			goto off;
		}
	return;
off:
	ud->arm_due = 0;
	ud->anext = NULL;
}

/* Gives every queued buffer back to the ring. */
static void queue_release(struct uring_dir *ud)
{
	struct uring_ctx *u = ud->u;

	while (ud->qhead >= 0) {
		int b = ud->qhead;
		ud->qhead = u->bnext[b];
		buf_put(u, b);
	}
	ud->qtail = -1;
	ud->nq = 0;
}

/* Drops everything the direction holds (nothing can be delivered): its
 * buffers go back to the ring, its spill is freed. Not while a send that
 * reads them is in flight. */
static void queue_drop(struct uring_dir *ud)
{
	queue_release(ud);
	while (ud->spill) {
		struct ur_chunk *c = ud->spill;

		ud->spill = c->next;
		free(c);
	}
	ud->spill_tail = NULL;
}

/* Moves the queued bytes, behind those already spilled, into the
 * direction's own memory and gives their buffers back to the ring: a
 * destination that stopped reading then holds none of the buffers the
 * worker's other sessions need. Not while a send of ring buffers is in
 * flight (a spill's send reads only its chunks). At most UR_HIGH_BUFS + 1
 * buffers' worth (the quota and the recv that was armed), about what the
 * splice engine's pipe holds. Returns the bytes moved, or -ENOMEM with
 * nothing moved (the buffers stay queued behind the spill: the order
 * holds). */
/* The bytes of ud's queued buffers, oldest first, copied to `to` unless it
 * is NULL; returns how many. */
static size_t queue_copy(const struct uring_dir *ud, char *to)
{
	const struct uring_ctx *u = ud->u;
	size_t n = 0;

	for (int b = ud->qhead; b >= 0; b = u->bnext[b]) {
		if (to)
			memcpy(to + n, u->mem + (size_t)b * u->bufsize + u->boff[b], u->blen[b] - u->boff[b]);
		n += u->blen[b] - u->boff[b];
	}
	return n;
}

static int spill_queue(struct uring_dir *ud)
{
	struct ur_chunk *c;
	size_t add = queue_copy(ud, NULL);

	if (!add)
		return 0;
	if (!(c = malloc(sizeof(*c) + add)))
		return -ENOMEM;
	c->next = NULL;
	c->off = 0;
	c->len = (uint32_t)queue_copy(ud, c->data);
	if (ud->spill_tail)
		ud->spill_tail->next = c;
	else
		ud->spill = c;
	ud->spill_tail = c;
	queue_release(ud);
	return (int)add;
}

/* u->sending: the directions whose send carries ring buffers, in the order
 * the sends were queued (so the oldest, the likeliest stalled, come first). */
static void sending_add(struct uring_dir *ud)
{
	struct uring_ctx *u = ud->u;

	ud->sending = 1;
	ud->send_ms = u->w->now_ms;
	ud->snext = NULL;
	ud->sprev = u->sending_tail;
	if (u->sending_tail)
		u->sending_tail->snext = ud;
	else
		u->sending = ud;
	u->sending_tail = ud;
}

static void sending_del(struct uring_dir *ud)
{
	struct uring_ctx *u = ud->u;

	if (!ud->sending)
		return;
	ud->sending = 0;
	if (ud->sprev)
		ud->sprev->snext = ud->snext;
	else
		u->sending = ud->snext;
	if (ud->snext)
		ud->snext->sprev = ud->sprev;
	else
		u->sending_tail = ud->sprev;
	ud->sprev = ud->snext = NULL;
}

static int arm_recv(struct uring_dir *ud)
{
	struct io_uring_sqe *sqe = sqe_get(ud->u);

	if (!sqe)
		return -EBUSY;
	/* one buffer (len 0: the buffer's size), so the quota holds */
	io_uring_prep_recv(sqe, ud->src, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT | (ud->fixed ? IOSQE_FIXED_FILE : 0);
	sqe->buf_group = UR_BGID;
	io_uring_sqe_set_data64(sqe, ud_data(ud, OP_RECV));
	ud->recv_armed = 1;
	ud->recv_hold = ud->nq > 0;
	ud->u->hold_armed += ud->recv_hold;
	ud->inflight++;
	return 0;
}

static void cancel_prep(struct io_uring_sqe *sqe, struct uring_dir *ud, int op)
{
	io_uring_prep_cancel64(sqe, ud_data(ud, op), 0);
	io_uring_sqe_set_data64(sqe, ud_data(ud, OP_CANCEL));
}

/* The cancel names ud's address: it counts in inflight until its own CQE,
 * so ud is not freed (and the address reused) while it may still run.
 * Without an SQE (the submit that would have freed one failed) it waits on
 * u->cancels, counted already, and goes at a later turn (cancels_retry):
 * a stalled operation left uncancelled would keep the session's sockets
 * open for ever. One waiting cancel serves every request for its op. */
static void cancel_op(struct uring_dir *ud, int op)
{
	struct uring_ctx *u = ud->u;
	struct io_uring_sqe *sqe;

	if (ud->cancel_due & (1u << op))
		return;
	ud->inflight++;
	if ((sqe = sqe_get(u))) {
		cancel_prep(sqe, ud, op);
		return;
	}
	if (!ud->cancel_due) {
		ud->cnext = u->cancels;
		u->cancels = ud;
	}
	ud->cancel_due |= (uint8_t)(1u << op);
}

/* Queues the cancels that waited for an SQE; those the ring still cannot
 * take wait for the next turn. */
static void cancels_retry(struct uring_ctx *u)
{
	struct uring_dir **pp = &u->cancels;

	while (*pp) {
		struct uring_dir *ud = *pp;

		for (int op = 1; op < 8 && ud->cancel_due; op++) {
			struct io_uring_sqe *sqe;

			if (!(ud->cancel_due & (1u << op)))
				continue;
			if (!(sqe = sqe_get(u)))
				return;
			cancel_prep(sqe, ud, op);
			ud->cancel_due &= (uint8_t)~(1u << op);
		}
		*pp = ud->cnext;
		ud->cnext = NULL;
	}
}

/* One sendmsg: the spill if there is one (it came first), else up to UR_IOV
 * queued buffers. A send of ring buffers goes on u->sending. */
static int send_next(struct uring_dir *ud)
{
	struct uring_ctx *u = ud->u;
	struct io_uring_sqe *sqe;
	unsigned n = 0;

	if (ud->send_busy || ud->reclaim_wait || (!ud->nq && !ud->spill) || ud->us->giving)
		return 0;
	for (struct ur_chunk *c = ud->spill; c && n < UR_IOV; c = c->next, n++) {
		ud->iov[n].iov_base = c->data + c->off;
		ud->iov[n].iov_len = c->len - c->off;
	}
	for (int b = ud->qhead; b >= 0 && !ud->spill && n < UR_IOV; b = u->bnext[b], n++) {
		ud->iov[n].iov_base = u->mem + (size_t)b * u->bufsize + u->boff[b];
		ud->iov[n].iov_len = u->blen[b] - u->boff[b];
	}
	memset(&ud->msg, 0, sizeof(ud->msg));
	ud->msg.msg_iov = ud->iov;
	ud->msg.msg_iovlen = n;
	if (!(sqe = sqe_get(u)))
		return -EBUSY;
	io_uring_prep_sendmsg(sqe, ud->dst, &ud->msg, MSG_NOSIGNAL);
	if (ud->fixed)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, ud_data(ud, OP_SEND));
	ud->send_busy = 1;
	ud->inflight++;
	if (!ud->spill)
		sending_add(ud);
	return 0;
}

static int splice_in(struct uring_dir *ud)
{
	struct io_uring_sqe *sqe;

	if (ud->recv_armed || ud->d->eof || ud->d->err || ud->in_pipe >= ud->pipe_cap)
		return 0;
	if (!(sqe = sqe_get(ud->u)))
		return -EBUSY;
	io_uring_prep_splice(sqe, ud->src, -1, ud->pipe[1], -1, ud->pipe_cap - ud->in_pipe, SPLICE_F_MOVE);
	io_uring_sqe_set_data64(sqe, ud_data(ud, OP_SPLICE_IN));
	ud->recv_armed = 1;
	ud->inflight++;
	return 0;
}

static int splice_out(struct uring_dir *ud)
{
	struct io_uring_sqe *sqe;

	if (ud->send_busy || !ud->in_pipe)
		return 0;
	if (!(sqe = sqe_get(ud->u)))
		return -EBUSY;
	io_uring_prep_splice(sqe, ud->pipe[0], -1, ud->dst, -1, ud->in_pipe, SPLICE_F_MOVE);
	io_uring_sqe_set_data64(sqe, ud_data(ud, OP_SPLICE_OUT));
	ud->send_busy = 1;
	ud->inflight++;
	return 0;
}

/* 1 if ud may arm a recv with `avail` buffers free: always when it holds
 * none (the reserve is for it), else only beyond the reserve and the
 * buffers the other holders' armed recvs may take. */
static int may_take(const struct uring_dir *ud, unsigned avail)
{
	return !ud->nq || avail > UR_RESERVE + ud->u->hold_armed;
}

/* Re-arms the recv when the direction has room again and nothing ended it;
 * a holder the reserve keeps out waits on the starved list. */
static int maybe_rearm(struct uring_dir *ud)
{
	struct dir *d = ud->d;

	if (ud->recv_armed || ud->starved || d->eof || d->err || ud->nq >= UR_HIGH_BUFS || ud->spill ||
	    ud->us->giving)
		return 0;
	if (!may_take(ud, ud->u->nfree)) {
		starve(ud);
		return 0;
	}
	return arm_recv(ud);
}

/* EOF forwarding: once every byte before it has been written. */
static void check_fin(struct uring_dir *ud)
{
	struct dir *d = ud->d;

	if (d->eof && !d->shut && !ud->nq && !ud->spill && !ud->in_pipe && !ud->send_busy) {
		/* A reset source on plain descriptors: no FIN, the core passes
		 * the reset on once dst took the bytes before it (as copy does;
		 * session.c: send_queue_blind). */
		if (d->rst && !ud->fixed)
			return;
		if (ud->fixed) {
			/* In the ring, after every send (none is in flight);
			 * a close queued behind it leaves the FIN in place. */
			struct io_uring_sqe *sqe = sqe_get(ud->u);

			if (!sqe) {
				arm_later(ud);
				return;
			}
			d->shut = 1;
			io_uring_prep_shutdown(sqe, ud->dst, SHUT_WR);
			sqe->flags |= IOSQE_FIXED_FILE;
			io_uring_sqe_set_data64(sqe, ud_data(ud, OP_SHUTDOWN));
			ud->inflight++;
		} else {
			d->shut = 1;
			if (shutdown(ud->dst, SHUT_WR) && errno != ENOTCONN)
				dir_fail(d, errno, 1);
		}
	}
}

/* ud goes on: its next send, then its next recv (or splices), whatever
 * the ring can take now; what it cannot waits for an SQE (arm_later). */
static void dir_go_on(struct uring_dir *ud)
{
	int r = ud->u->splice ? splice_out(ud) || splice_in(ud) : send_next(ud) || maybe_rearm(ud);

	if (r)
		arm_later(ud);
}

/* After a completion (or an SQE that came at last): ud goes on, forwards
 * its FIN once everything before it is sent, and the core hears of it. */
static void dir_continue(struct uring_dir *ud)
{
	if (!ud->d->err)
		dir_go_on(ud);
	if (!ud->d->err)
		check_fin(ud);
	session_io_result(ud->s);
}

/* A direction of a session auto moved here behaves as a stream, by auto's
 * rules (engine.h): AUTO_STREAM_READS receives in a row that filled their
 * buffer, or AUTO_STREAM_SOLO bytes while the other direction received
 * nothing. It then goes back to copy, whose own rule moves it on to splice:
 * a stream costs uring two copies through user memory where splice makes
 * none (doc/engines.md). */
static int stream_seen(struct uring_dir *ud, unsigned res)
{
	struct uring_dir *other = &ud->us->dir[ud == &ud->us->dir[0]];
	uint64_t solo = (uint64_t)ud->solo + res;

	ud->full_reads = res >= ud->u->bufsize ? (uint8_t)(ud->full_reads + (ud->full_reads < 255)) : 0;
	ud->solo = solo > UINT32_MAX ? UINT32_MAX : (uint32_t)solo;
	other->solo = 0;
	return ud->full_reads >= AUTO_STREAM_READS || ud->solo >= AUTO_STREAM_SOLO;
}

static int give_back_start(struct uring_sess *us);

static void on_recv(struct uring_dir *ud, int res, unsigned flags)
{
	struct uring_ctx *u = ud->u;
	int bid = (flags & IORING_CQE_F_BUFFER) ? (int)(flags >> IORING_CQE_BUFFER_SHIFT) : -1;
	struct session *s = ud->s;
	struct dir *d = ud->d;

	if (bid >= 0)
		u->nfree--;
	ud->recv_armed = 0;
	u->hold_armed -= ud->recv_hold;
	ud->recv_hold = 0;
	ud->inflight--;
	if (!s) {
		if (bid >= 0)
			buf_put(u, bid);
		detached_check(ud);
		return;
	}
	if (d->dead) { /* nothing can be delivered: buffers go straight back */
		if (bid >= 0)
			buf_put(u, bid);
		return;
	}
	if (res > 0 && bid >= 0) {
		u->blen[bid] = (uint32_t)res;
		u->boff[bid] = 0;
		u->bnext[bid] = -1;
		if (ud->qtail >= 0)
			u->bnext[ud->qtail] = bid;
		else
			ud->qhead = bid;
		ud->qtail = bid;
		ud->nq++;
		UR(d)->in_uring += (uint64_t)res;
		dir_used(d, &engine_uring);
		bid = -1;
		if (ud->us->movable && stream_seen(ud, (unsigned)res))
			give_back_start(ud->us);
		if (ud->spill && !ud->sending)
			spill_queue(ud); /* behind the spill, out of the ring */
	} else if (res == 0) {
		d->eof = 1;
	} else if (res == -ENOBUFS) {
		starve(ud);
	} else if (res != -ECANCELED) {
		log_verbose("session %llx: uring recv: %s", (unsigned long long)s->id, strerror(res < 0 ? -res : EIO));
		dir_fail(d, res < 0 ? -res : EIO, 0);
	}
	if (bid >= 0)
		buf_put(u, bid);
	dir_continue(ud);
}

/* Takes `left` sent bytes off the front of what the send carried: spill
 * chunks (freed once sent) or queued buffers (back to the ring). */
static void sent_take(struct uring_dir *ud, int ring, uint32_t left)
{
	struct uring_ctx *u = ud->u;

	while (left && !ring && ud->spill) {
		struct ur_chunk *c = ud->spill;
		uint32_t take = c->len - c->off < left ? c->len - c->off : left;

		c->off += take;
		left -= take;
		if (c->off == c->len) {
			if (!(ud->spill = c->next))
				ud->spill_tail = NULL;
			free(c);
		}
	}
	while (left && ring && ud->qhead >= 0) {
		int b = ud->qhead;
		uint32_t take = u->blen[b] - u->boff[b] < left ? u->blen[b] - u->boff[b] : left;

		u->boff[b] += take;
		left -= take;
		if (u->boff[b] == u->blen[b]) {
			ud->qhead = u->bnext[b];
			if (ud->qhead < 0)
				ud->qtail = -1;
			ud->nq--;
			buf_put(u, b);
		}
	}
}

/* A send came back. One that reclaim_stalled cancelled (-ECANCELED, -EINTR,
 * or what it sent before the cancel reached it) leaves the rest of its
 * queue in the direction's own memory. */
static void on_send(struct uring_dir *ud, int res)
{
	struct session *s = ud->s;
	struct dir *d = ud->d;
	int ring = ud->sending, reclaim = ud->reclaim;

	ud->send_busy = 0;
	ud->inflight--;
	ud->reclaim = 0;
	sending_del(ud);
	if (!s) {
		queue_drop(ud);
		detached_check(ud);
		return;
	}
	if (d->dead) {
		queue_drop(ud);
		UR(d)->in_uring = 0;
		return;
	}
	/* A cancelled send ends with -ECANCELED, or with -EINTR when it was
	 * blocked in an io-wq thread (a send the poll retry gave up on):
	 * nothing of it was sent either way (a partial send returns its count). */
	if (res > 0 || (reclaim && (res == -ECANCELED || res == -EINTR))) {
		struct worker *w = s->w;

		if (res > 0) {
			sent_take(ud, ring, (uint32_t)res);
			UR(d)->in_uring -= (uint64_t)res;
			d->bytes += (uint64_t)res;
			s->active_ms = w->now_ms;
			engine_count(w, &engine_uring, ENGINE_CTR_BYTES, (uint64_t)res);
			if (d == &s->up)
				CTR_ADD(w, bytes_up, (uint64_t)res);
			else
				CTR_ADD(w, bytes_down, (uint64_t)res);
		}
		if (reclaim && spill_queue(ud) > 0 && !ud->us->giving) {
			engine_count(w, &engine_uring, UR_CTR_RECLAIMS, 1);
			log_verbose("session %llx: %s stalled for %llu ms: its %llu bytes wait outside the "
				    "buffer ring", (unsigned long long)s->id, d == &s->up ? "up" : "down",
				    (unsigned long long)(w->now_ms - ud->send_ms), (unsigned long long)UR(d)->in_uring);
		}
		dir_go_on(ud);
	} else {
		log_verbose("session %llx: uring send: %s", (unsigned long long)s->id, strerror(res < 0 ? -res : EPIPE));
		dir_fail(d, res < 0 ? -res : EPIPE, 1);
	}
	if (!d->err)
		check_fin(ud);
	session_io_result(s);
}

/* The cancel of a reclaim came back (before or after the send it named):
 * nothing can cancel a later send any more, so sending resumes once that
 * send's own completion is in too. */
static void on_reclaimed(struct uring_dir *ud)
{
	struct dir *d = ud->d;

	ud->inflight--;
	ud->reclaim_wait = 0;
	if (!ud->s) {
		detached_check(ud);
		return;
	}
	if (ud->send_busy || d->dead || d->err)
		return;
	dir_continue(ud);
}

static void on_splice(struct uring_dir *ud, int op, int res)
{
	struct session *s = ud->s;
	struct dir *d = ud->d;

	if (op == OP_SPLICE_IN)
		ud->recv_armed = 0;
	else
		ud->send_busy = 0;
	ud->inflight--;
	if (!s) {
		detached_check(ud);
		return;
	}
	if (res < 0 && res != -ECANCELED) {
		dir_fail(d, -res, op == OP_SPLICE_OUT);
	} else if (op == OP_SPLICE_IN && res == 0) {
		d->eof = 1;
	} else if (op == OP_SPLICE_IN && res > 0) {
		ud->in_pipe += (uint32_t)res;
		UR(d)->in_uring += (uint64_t)res;
		dir_used(d, &engine_uring);
	} else if (res > 0) {
		ud->in_pipe -= (uint32_t)res;
		UR(d)->in_uring -= (uint64_t)res;
		d->bytes += (uint64_t)res;
		s->active_ms = s->w->now_ms;
		engine_count(s->w, &engine_uring, ENGINE_CTR_BYTES, (uint64_t)res);
		if (d == &s->up)
			CTR_ADD(s->w, bytes_up, (uint64_t)res);
		else
			CTR_ADD(s->w, bytes_down, (uint64_t)res);
	}
	dir_continue(ud);
}

static int watch_cqe(struct uring_ctx *u, struct io_uring_cqe *cqe, struct epoll_event *evs, int nev);

/* Takes every completion in the ring: the engine's own are handled here,
 * the watched descriptors' events go to evs (at most max; the rest wait in
 * the ring for the next turn: cqes_left). Returns how many. */
static int reap(struct uring_ctx *u, struct epoll_event *evs, int max)
{
	struct io_uring_cqe *cqe;
	unsigned head, n;
	int nev = 0;

	u->cqes_left = 0;
	u->reap_gen++;
	do {
		n = 0;
		io_uring_for_each_cqe(&u->ring, head, cqe) {
			uint64_t data = io_uring_cqe_get_data64(cqe);
			struct uring_dir *ud = (struct uring_dir *)(uintptr_t)(data & ~(uint64_t)7);

			if (data & UD_WATCH) {
				if (nev == max) { /* evs is full: the next turn takes it */
					u->cqes_left = 1;
					break;
				}
				n++;
				nev += watch_cqe(u, cqe, evs, nev);
				continue;
			}
			n++;
			if ((data & 7) == OP_CLOSE) { /* a slot is free once closed */
				u->slots[u->nfree_slots++] = (int)(data >> 3);
				continue;
			}
			if (!ud)
				continue;
			if ((data & 7) == OP_CANCEL && ud->reclaim_wait) {
				on_reclaimed(ud);
			} else if ((data & 7) == OP_SHUTDOWN || (data & 7) == OP_CANCEL) {
				/* FIN errors are ignored, as ENOTCONN is for
				 * shutdown(2): the next send or recv reports a
				 * dead peer. A cancel's result is the op's CQE. */
				ud->inflight--;
				detached_check(ud);
			} else if ((data & 7) == OP_RECV)
				on_recv(ud, cqe->res, cqe->flags);
			else if ((data & 7) == OP_SEND)
				on_send(ud, cqe->res);
			else
				on_splice(ud, (int)(data & 7), cqe->res);
		}
		io_uring_cq_advance(&u->ring, n);
	} while (n && !u->cqes_left);
	if (io_uring_cq_has_overflow(&u->ring))
		io_uring_get_events(&u->ring); /* moves overflowed CQEs in: the fd fires again */
	return nev;
}

/* The ring's fd fired in epoll (the worker waits in epoll_wait). */
static void uring_reap(struct worker *w)
{
	if (CTX(w))
		reap(CTX(w), NULL, 0);
}

/* Fairness of the buffer ring. A send to a destination that stopped
 * reading never completes, and the buffers it carries stay out of the
 * ring: enough such directions (forty clients that download and never
 * read) emptied it, and every other session of the worker stopped. So
 * when the ring runs short (a direction waits for a buffer, or no more
 * than the reserve is left), every send in flight for UR_STALL_MS or more
 * is cancelled; its completion (on_send) moves what it still holds into
 * the direction's own memory and gives the buffers back, and the
 * direction receives no more until that is sent. Oldest first, and only
 * as many as the buffers wanted (one per waiting direction, and the
 * reserve back): a send that is merely slow, under heavy load, pays one
 * copy, and few of them do. Sends younger than that shorten the loop's
 * sleep, so the check comes when the oldest turns stalled. */
static void reclaim_stalled(struct uring_ctx *u, int *timeout_ms)
{
	uint64_t now = u->w->now_ms;
	long want = (long)u->nstarved + (u->nfree <= UR_RESERVE ? (long)(UR_RESERVE + 1 - u->nfree) : 0);

	for (struct uring_dir *ud = u->sending; ud && want > 0; ud = ud->snext) {
		uint64_t age = now > ud->send_ms ? now - ud->send_ms : 0;

		if (age < UR_STALL_MS) {
			if (*timeout_ms < 0 || *timeout_ms > (int)(UR_STALL_MS - age))
				*timeout_ms = (int)(UR_STALL_MS - age);
			break;
		}
		want -= (long)ud->nq; /* what it gives back, or will once its cancel is in */
		if (ud->reclaim || !ud->s || ud->d->dead)
			continue; /* its cancel is on the way, or nothing is to be sent */
		ud->reclaim = ud->reclaim_wait = 1;
		cancel_op(ud, OP_SEND);
	}
}

static void watch_retry(struct uring_ctx *u);

/* The directions that waited for an SQE go on (dir_go_on, then their FIN);
 * one the ring still cannot take waits again, on a new list. One whose
 * session closed meanwhile is only taken off (its memory may go now). */
static void arming_retry(struct uring_ctx *u)
{
	struct uring_dir *ud;

	u->arm_run = u->arming;
	u->arming = u->arming_tail = NULL;
	while ((ud = u->arm_run)) {
		u->arm_run = ud->anext;
		ud->anext = NULL;
		ud->arm_due = 0;
		if (!ud->s) {
			detached_check(ud);
			continue;
		}
		/* (a session closed by this leaves the other direction, if it
		 * is on the list still, detached until its own turn here) */
		dir_continue(ud);
	}
}

static void uring_flush(struct worker *w, int *timeout_ms)
{
	struct uring_ctx *u = CTX(w);
	struct uring_dir *ud, *next, *keep = NULL, *keep_tail = NULL;
	unsigned budget;

	if (!u)
		return;
	/* What an earlier turn could not queue first (a submit failed with
	 * the SQ full), retried at least every UR_RETRY_MS, never spinning. */
	cancels_retry(u);
	closes_retry(u);
	if (u->ndue)
		watch_retry(u);
	if (u->arming)
		arming_retry(u);
	if ((u->cancels || u->closing || u->arming || u->ndue) && (*timeout_ms < 0 || *timeout_ms > UR_RETRY_MS))
		*timeout_ms = UR_RETRY_MS;
	reclaim_stalled(u, timeout_ms);
	/* Starved directions get the buffers that came back, one each, in the
	 * order they starved; those that may not take one yet keep their
	 * place. (maybe_rearm may append a direction again: to the new list.) */
	budget = u->nfree;
	ud = u->starved;
	u->starved = u->starved_tail = NULL;
	for (; ud; ud = next) {
		next = ud->next;
		if (ud->s && !ud->d->eof && !ud->d->err && (!budget || !may_take(ud, budget))) {
			/* Kept for want of budget, not of buffers: a re-armed recv
			 * takes a buffer only when bytes come, and those re-armed
			 * may have none. Kept, a direction with bytes waiting slept
			 * until something else woke the worker (a 100 ms stall in
			 * 1 batch of 100 new sessions in 3, 4,900 open). The next
			 * turn comes at once and sees what the enter took. */
			if (!budget && u->nfree)
				*timeout_ms = 0;
			ud->next = NULL;
			if (keep_tail)
				keep_tail->next = ud;
			else
				keep = ud;
			keep_tail = ud;
			continue;
		}
		ud->starved = 0;
		u->nstarved--;
		if (!ud->s) {
			detached_check(ud);
			continue;
		}
		budget -= budget > 0;
		if (maybe_rearm(ud))
			arm_later(ud);
	}
	if (keep) { /* ahead of any appended again */
		keep_tail->next = u->starved;
		if (!u->starved)
			u->starved_tail = keep_tail;
		u->starved = keep;
	}
	/* (a worker that sleeps in the ring submits with its wait) */
	if (!w->waiter && (io_uring_sq_ready(&u->ring) || u->to_add))
		ring_submit(u);
	if (u->submit_err && (*timeout_ms < 0 || *timeout_ms > UR_RETRY_MS))
		*timeout_ms = UR_RETRY_MS; /* the SQEs left wait for no event */
}

/* ---- Waiting in the ring ---------------------------------------------------
 *
 * Where the kernel has IORING_SETUP_DEFER_TASKRUN (6.1+), a worker with a
 * ring sleeps in it, not in epoll_wait: one io_uring_enter per loop turn
 * submits what the turn queued and waits for the next completion or the
 * first timer (uring_wait). The descriptors the loop watches (sessions'
 * sockets before and beside the ring's own operations, listeners) are
 * multishot polls in the same ring (uring_watch), so a connection's events
 * and its sessions' receives and sends come back in the same enter, and
 * watching or forgetting a socket is an SQE of that enter, not an
 * epoll_ctl of its own. With DEFER_TASKRUN the completions' work runs in
 * that enter, on the worker's thread, never interrupting it elsewhere.
 * The epoll set keeps what only it can do (EPOLLEXCLUSIVE listeners, the
 * wake eventfd, other engines' descriptors); it is itself polled through
 * the ring, and epoll_wait(0) asked only when that poll fired.
 * (An earlier try kept every descriptor in epoll and polled the epoll set
 * through the ring: each event then took two wake-ups, and short
 * connections cost 1.12x-1.31x the CPU: doc/performance.md.) */

static struct ur_watch *watch_of(struct uring_ctx *u, uint32_t handle)
{
	return handle && handle <= u->nwatch ? &u->watch[handle - 1] : NULL;
}

static int watch_arm(struct uring_ctx *u, unsigned i)
{
	struct io_uring_sqe *sqe = sqe_get(u);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_multishot(sqe, u->watch[i].fd, u->watch[i].events);
	io_uring_sqe_set_data64(sqe, UD_WATCH | (uint64_t)i << 3);
	return 0;
}

static void watch_due(struct uring_ctx *u, unsigned i, int state);

static void watch_free(struct uring_ctx *u, unsigned i)
{
	u->watch[i].state = W_FREE;
	u->watch[i].ptr = NULL;
	if (u->watch[i].on_due)
		return; /* reused only once watch_retry has taken it off u->due */
	u->watch[i].next = u->wfree;
	u->wfree = i + 1;
}

/* One CQE of a watch: an event for its owner (1), or nothing (0). A live
 * poll that ended without an error (the CQ overflowed) is armed again, and
 * the event it carried still counts; one that failed stays failed (W_FAILED:
 * not armed again, which could repeat the failure at every turn; its index
 * is kept until the owner's unwatch) and says so once. */
static int watch_cqe(struct uring_ctx *u, struct io_uring_cqe *cqe, struct epoll_event *evs, int nev)
{
	unsigned i = (unsigned)((io_uring_cqe_get_data64(cqe) & ~UD_WATCH) >> 3);
	struct ur_watch *wt = &u->watch[i];
	uint32_t res;

	if (wt->state == W_DYING) {
		if (!(cqe->flags & IORING_CQE_F_MORE))
			watch_free(u, i);
		return 0;
	}
	if (wt->state != W_LIVE)
		return 0;
	if (!(cqe->flags & IORING_CQE_F_MORE)) {
		if (cqe->res < 0) {
			log_warn("worker %u: io_uring poll of descriptor %d: %s", u->w->id, wt->fd,
				 strerror(-cqe->res));
			wt->state = W_FAILED;
			if (wt->ptr == u || wt->gen == u->reap_gen)
				return 0;
			evs[nev].events = EPOLLERR; /* its owner looks, and finds out */
			evs[nev].data.ptr = wt->ptr;
			return 1;
		}
		watch_due(u, i, W_LIVE);
	}
	if (wt->ptr == u) { /* the epoll set */
		u->epoll_ready = 1;
		return 0;
	}
	if (cqe->res <= 0)
		return 0;
	res = (uint32_t)cqe->res;
	/* A ring's poll reports the mask its wake-up carried, and a socket
	 * that receives anything wakes with EPOLLIN | EPOLLPRI: every arrival
	 * looked like urgent data, which costs a copy or splice direction an
	 * ioctl and an extra recv per read (urgent.h) and kept auto's sessions
	 * from moving to io_uring. epoll asks the socket itself; so does this,
	 * only when the wake-up says PRI. */
	if (res & EPOLLPRI) {
		struct pollfd pf = { .fd = wt->fd, .events = POLLPRI };

		if (poll(&pf, 1, 0) != 1 || !(pf.revents & POLLPRI))
			res &= ~(uint32_t)EPOLLPRI;
		if (!res)
			return 0;
	}
	if (wt->gen == u->reap_gen) { /* it has one this turn already */
		evs[wt->evi].events |= res;
		return 0;
	}
	wt->gen = u->reap_gen;
	wt->evi = (unsigned)nev;
	evs[nev].events = res;
	evs[nev].data.ptr = wt->ptr;
	return 1;
}

static void uring_unwatch(struct worker *w, uint32_t handle);

static int uring_watch(struct worker *w, int fd, uint32_t events, void *ptr)
{
	struct uring_ctx *u = CTX(w);
	unsigned i;

	if (!u || !u->started)
		return -EAGAIN;
	if (!u->wfree) { /* grow by half: indexes stay, owners hold handles */
		unsigned n = u->nwatch ? u->nwatch + u->nwatch / 2 : 256;
		struct ur_watch *nw = realloc(u->watch, n * sizeof(*nw));
		unsigned *due;

		if (!nw)
			return -ENOMEM;
		u->watch = nw;
		/* room on u->due for every watch (each is on it once at most):
		 * watch_due never needs memory */
		if (!(due = realloc(u->due, n * sizeof(*due))))
			return -ENOMEM;
		u->due = due;
		memset(nw + u->nwatch, 0, (n - u->nwatch) * sizeof(*nw));
		for (unsigned k = n; k-- > u->nwatch;)
			watch_free(u, k);
		u->nwatch = n;
	}
	i = u->wfree - 1;
	u->wfree = u->watch[i].next;
	u->watch[i] = (struct ur_watch){ .ptr = ptr, .events = events, .fd = fd, .state = W_LIVE };
	watch_due(u, i, W_LIVE); /* without an SQE now, armed at a later turn */
	return (int)i + 1;
}

/* New events for a watch: a new poll, the old one cancelled (a
 * POLL_UPDATE fails as POLL_REMOVE does on a pending wake-up). */
static int uring_rewatch(struct worker *w, uint32_t *handle, uint32_t events)
{
	struct uring_ctx *u = CTX(w);
	struct ur_watch *wt = watch_of(u, *handle);
	int h;

	if (!wt || wt->state != W_LIVE)
		return -EINVAL;
	if ((h = uring_watch(w, wt->fd, events, wt->ptr)) < 0)
		return h;
	uring_unwatch(w, *handle);
	*handle = (uint32_t)h;
	return 0;
}

/* Arms watch i again (W_LIVE) or removes it (W_DYING): an SQE now, or
 * at the next turn when the ring has none (watch_retry); meanwhile a
 * dying one holds its socket open and its events are dropped. */
static void watch_due(struct uring_ctx *u, unsigned i, int state)
{
	struct io_uring_sqe *sqe;

	if (state == W_LIVE && watch_arm(u, i) == 0) {
		u->watch[i].unarmed = 0;
		return;
	}
	if (state == W_DYING && u->watch[i].unarmed)
		return; /* no poll to cancel: watch_retry frees it, on u->due already */
	/* An ASYNC_CANCEL, not a POLL_REMOVE: the remove fails (EALREADY) on
	 * a poll whose wake-up is pending, and with DEFER_TASKRUN every
	 * wake-up is pending until the next enter; such a poll stayed armed,
	 * and held its socket open, for good (a client never saw its
	 * backend's reset). A cancel marks it and lets its wake-up end it. */
	if (state == W_DYING && (sqe = sqe_get(u))) {
		io_uring_prep_cancel64(sqe, UD_WATCH | (uint64_t)i << 3, 0);
		io_uring_sqe_set_data64(sqe, 0); /* its own result: nobody waits for it */
		return;
	}
	if (!u->watch[i].on_due) /* (room for every watch: uring_watch) */
		u->due[u->ndue++] = i;
	u->watch[i].on_due = 1;
	u->watch[i].unarmed = (uint8_t)(state == W_LIVE);
}

/* Goes through u->due in place: an index that waits again is written back
 * at or before the one being read (each adds one at most). */
static void watch_retry(struct uring_ctx *u)
{
	unsigned n = u->ndue;

	u->ndue = 0;
	for (unsigned k = 0; k < n; k++) {
		unsigned i = u->due[k];

		u->watch[i].on_due = 0;
		if (u->watch[i].state == W_FREE)
			watch_free(u, i); /* its last CQE came meanwhile: reusable now */
		else if (u->watch[i].state == W_DYING && u->watch[i].unarmed)
			watch_free(u, i); /* unwatched before its poll was ever armed */
		else if (u->watch[i].state == W_LIVE || u->watch[i].state == W_DYING)
			watch_due(u, i, u->watch[i].state);
	}
}

static void uring_unwatch(struct worker *w, uint32_t handle)
{
	struct uring_ctx *u = CTX(w);
	struct ur_watch *wt = watch_of(u, handle);

	if (!wt)
		return;
	if (wt->state == W_FAILED) { /* no poll left in the kernel */
		watch_free(u, handle - 1);
		return;
	}
	if (wt->state != W_LIVE)
		return;
	wt->state = W_DYING; /* freed by its last CQE */
	wt->ptr = NULL;
	watch_due(u, handle - 1, W_DYING);
}

static void fixed_setup(struct uring_ctx *u);

/* On the worker's thread: the ring becomes usable (its submitter is this
 * thread from now on), the fixed file table is set up, the epoll set is
 * watched, and the worker sleeps here from its next turn. */
static void ring_start(struct worker *w)
{
	struct uring_ctx *u = CTX(w);
	int r;

	if (!u || u->started || !u->wait_mode)
		return;
	/* (Debian's liburing 2.3 declares io_uring_enable_rings, exports it not) */
	if ((r = (int)syscall(__NR_io_uring_register, u->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS,
			      NULL, 0)) < 0) {
		log_warn("worker %u: io_uring enable: %s", w->id, strerror(errno));
		return; /* the engine fails its sessions (uring-error) */
	}
	u->started = 1;
	fixed_setup(u);
	if (uring_watch(w, w->epfd, EPOLLIN, u) < 0) { /* for good: never unwatched */
		log_warn("worker %u: io_uring: no room to watch the epoll set", w->id);
		return;
	}
	u->epoll_ready = 1; /* what epoll may hold already */
	w->waiter = &engine_uring;
	log_verbose("worker %u: waits in its io_uring (%u fixed file slots; %s)", w->id, u->nslots,
		    u->no_iowait ? "not counted as iowait" : "counted as iowait by this kernel");
}

/* The loop is over, and the last turn's SQEs were not submitted: a
 * listener's poll removal among them, without which its socket would stay
 * open (and take connections nobody accepts) until the ring's exit. */
static void uring_thread_end(struct worker *w)
{
	struct uring_ctx *u = CTX(w);

	if (!u || !u->started)
		return;
	ring_publish(u);
	io_uring_submit_and_get_events(&u->ring);
	reap(u, NULL, 0);
}

/* Hands the kernel the SQEs queued since the last enter and returns how
 * many it has not taken yet (liburing 2.3 keeps this step to itself; the
 * ring is not SQPOLL, so the tail is written plainly, as it does). */
static unsigned sq_flush(struct io_uring *ring)
{
	struct io_uring_sq *sq = &ring->sq;

	if (sq->sqe_head != sq->sqe_tail) {
		sq->sqe_head = sq->sqe_tail;
		__atomic_store_n(sq->ktail, sq->sqe_tail, __ATOMIC_RELEASE);
	}
	return sq->sqe_tail - __atomic_load_n(sq->khead, __ATOMIC_ACQUIRE);
}

/* Completions whose task work the kernel has not run yet: with
 * IORING_SETUP_TASKRUN_FLAG it says so in the SQ ring's flags, set when
 * the first one is queued and kept while an enter leaves some behind. */
static int taskrun_pending(const struct uring_ctx *u)
{
	return !!(__atomic_load_n(u->ring.sq.kflags, __ATOMIC_ACQUIRE) & IORING_SQ_TASKRUN);
}

/* Submits and sleeps until a completion or ts: the turn's one system call.
 * Not as iowait where the kernel can tell (NO_IOWAIT): an idle proxy's
 * workers showed as 100 % iowait in top and /proc/stat, what monitoring
 * reads as a disk that cannot keep up. */
static int ring_wait_enter(struct uring_ctx *u, struct __kernel_timespec *ts)
{
	struct io_uring_getevents_arg arg = { .ts = (uint64_t)(uintptr_t)ts };
	unsigned flags = IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG |
			 (u->no_iowait ? IORING_ENTER_NO_IOWAIT : 0);
	int r = (int)syscall(__NR_io_uring_enter, u->ring.ring_fd, sq_flush(&u->ring), 1, flags, &arg,
			     sizeof(arg));

	return r < 0 ? -errno : r;
}

/* Submits what the turn queued and runs up to 20 completions' task work
 * (IO_LOCAL_TW_DEFAULT_MAX; 20 more when it submitted), without waiting:
 * GETEVENTS asking for none. Without GETEVENTS the kernel only submits;
 * asking for more than it finds, with a zero timeout, made it arm an
 * hrtimer already expired and cancel it, two timer reprogrammings with
 * interrupts off per call, a VM exit each here: 15% of a busy worker's
 * CPU and 0.78x the epoll loop's requests/s (doc/performance.md,
 * "Waiting in the ring"). */
static int ring_poke(struct uring_ctx *u)
{
	int r = io_uring_enter(u->ring.ring_fd, sq_flush(&u->ring), 0, IORING_ENTER_GETEVENTS, NULL);

	return r < 0 ? -errno : r;
}

/* The loop's sleep (engine.h: wait). A submit that fails (the kernel short
 * of memory) leaves the SQEs for the next turn, and the turn sleeps in
 * epoll at most UR_RETRY_MS instead, never spinning. */
static int uring_wait(struct worker *w, struct epoll_event *evs, int max, int timeout_ms)
{
	struct uring_ctx *u = CTX(w);
	struct __kernel_timespec ts;
	int r = 0, n, k;

	if (u->epoll_again || u->cqes_left || u->epoll_ready || taskrun_pending(u))
		timeout_ms = 0;
	ts.tv_sec = timeout_ms / 1000;
	ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000;
	ring_publish(u);
	if (u->fault_submit && ++u->nsubmits % u->fault_submit == 0)
		r = -ENOMEM; /* SPLICER_URING_FAULT=submit:n */
	else if (timeout_ms) /* the timer is armed only if the kernel has to sleep */
		r = ring_wait_enter(u, &ts);
	else if (io_uring_sq_ready(&u->ring) || taskrun_pending(u))
		r = ring_poke(u); /* (nothing to give or run: no system call) */
	if (r < 0 && r != -ETIME && r != -EINTR && r != -EBUSY) {
		if (r != u->submit_err)
			log_warn("io_uring_submit: %s; retrying at the next loop turn", strerror(-r));
		u->submit_err = r;
		n = epoll_wait(w->epfd, evs, max, timeout_ms < UR_RETRY_MS ? timeout_ms : UR_RETRY_MS);
		return n < 0 ? 0 : n;
	}
	u->submit_err = 0;
	n = reap(u, evs, max);
	/* An enter runs at most 20 completions' task work: a busy turn left
	 * the rest for the next turns, while accepting went on at 64 a turn
	 * (the pending sessions held descriptors until ulimit -n ran out).
	 * It goes on while the kernel says some are left, a few rounds. */
	for (int round = 0; round < UR_DRAIN_ROUNDS && taskrun_pending(u) && !u->cqes_left && n < max;
	     round++) {
		if (ring_poke(u) < 0)
			break;
		n += reap(u, evs + n, max - n);
	}
	if ((u->epoll_ready || u->epoll_again) && n < max) {
		u->epoll_ready = 0;
		k = epoll_wait(w->epfd, evs + n, max - n, 0);
		/* a level-triggered item still ready wakes nobody again */
		u->epoll_again = k > 0;
		n += k > 0 ? k : 0;
	}
	return n;
}

static int uring_busy(const struct worker *w)
{
	return CTX(w) && CTX(w)->detached;
}

static void ctx_free(struct uring_ctx *u)
{
	free(u->mem);
	free(u->blen);
	free(u->boff);
	free(u->bnext);
	free(u->slots);
	free(u->sqe_fd);
	free(u->br);
	free(u->watch);
	free(u->due);
	free(u);
}

/* A fresh ring with a sparse table: can it set SO_LINGER on a slot (the
 * RST of a fixed-file session needs IORING_OP_URING_CMD setsockopt, kernel
 * 6.7+)? Without it sessions stay on plain descriptors. */
static int fixed_works(struct uring_ctx *u)
{
	static const struct linger lg = { .l_onoff = 0, .l_linger = 0 };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int sv[2], ok = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return 0;
	if (io_uring_register_files_update(&u->ring, 0, &sv[0], 1) == 1 &&
	    (sqe = io_uring_get_sqe(&u->ring))) {
		memset(sqe, 0, sizeof(*sqe));
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->flags = IOSQE_FIXED_FILE;
		sqe->fd = 0;
		sqe->cmd_op = SOCKET_URING_OP_SETSOCKOPT;
		sqe->addr = (uint64_t)SOL_SOCKET | ((uint64_t)SO_LINGER << 32);
		sqe->splice_fd_in = (int)sizeof(lg);
		sqe->addr3 = (uint64_t)(uintptr_t)&lg;
		if (io_uring_submit_and_wait(&u->ring, 1) == 1 && io_uring_peek_cqe(&u->ring, &cqe) == 0) {
			ok = cqe->res == 0;
			io_uring_cqe_seen(&u->ring, cqe);
		}
	}
	close(sv[0]);
	close(sv[1]);
	if (!ok)
		io_uring_unregister_files(&u->ring);
	else /* the slot's reference goes; the table stays */
		io_uring_register_files_update(&u->ring, 0, &(int){ -1 }, 1);
	return ok;
}

/* SPLICER_URING_FAULT=start:n, submit:n or sqe:n (comma-separated), for the
 * tests of tests/integration/test_uring_defects.c only: not a setting. */
static void fault_init(struct uring_ctx *u)
{
	const char *f = getenv("SPLICER_URING_FAULT");

	for (; f && *f; f = strchr(f, ',') ? strchr(f, ',') + 1 : "") {
		if (!strncmp(f, "start:", 6))
			u->fault_start = (unsigned)atoi(f + 6);
		else if (!strncmp(f, "submit:", 7))
			u->fault_submit = (unsigned)atoi(f + 7);
		else if (!strncmp(f, "sqe:", 4))
			u->fault_sqe = (unsigned)atoi(f + 4);
	}
	if (u->fault_start || u->fault_submit || u->fault_sqe)
		log_warn("SPLICER_URING_FAULT=%s: failing on purpose (tests only)", getenv("SPLICER_URING_FAULT"));
}

/* A sparse fixed file table as large as the descriptor limit allows (the
 * kernel caps it at RLIMIT_NOFILE): established sessions live there, not
 * in the process's descriptor table. Its check submits: on the thread that
 * submits from now on. */
static void fixed_setup(struct uring_ctx *u)
{
	struct rlimit rl;
	unsigned n = 0;

	if (u->splice)
		return;
	if (!getrlimit(RLIMIT_NOFILE, &rl))
		n = rl.rlim_cur > (1u << 20) ? (1u << 20) : (unsigned)rl.rlim_cur;
	if (n && (u->slots = calloc(n, sizeof(*u->slots))) &&
	    (u->sqe_fd = calloc(u->ring.sq.ring_entries, sizeof(*u->sqe_fd))) &&
	    io_uring_register_files_sparse(&u->ring, n) == 0 && fixed_works(u)) {
		u->nslots = n;
		for (unsigned i = 0; i < n; i++)
			u->slots[u->nfree_slots++] = (int)(n - 1 - i);
	}
}

static int ctx_create(struct worker *w)
{
	struct uring_ctx *u = calloc(1, sizeof(*u));
	struct io_uring_params p = { 0 };
	struct io_uring_buf_reg reg = { 0 };
	struct epoll_event ev = { .events = EPOLLIN };
	size_t bs = w->cfg->buffer_size;
	int r;

	if (!u)
		return -ENOMEM;
	u->efd.kind = EV_ENGINE;
	u->efd.e = &engine_uring;
	u->w = w;
	u->splice = getenv("SPLICER_URING_SPLICE") && atoi(getenv("SPLICER_URING_SPLICE"));
	fault_init(u);
	/* The worker waits in the ring where the kernel can (DEFER_TASKRUN:
	 * completions run in the worker's own io_uring_enter; it needs
	 * SINGLE_ISSUER, and the ring made here by the main thread is
	 * enabled by the worker's: ring_start). SPLICER_URING_WAIT=epoll keeps
	 * the epoll loop, for measurements. Otherwise COOP_TASKRUN:
	 * completions run when the worker enters the kernel anyway (no IPI),
	 * and the ring's fd wakes the worker's epoll_wait (with DEFER_TASKRUN
	 * it would not: the completions wait for an io_uring_enter). */
	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		  IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED;
	p.cq_entries = UR_CQ_ENTRIES;
	r = getenv("SPLICER_URING_WAIT") && !strcmp(getenv("SPLICER_URING_WAIT"), "epoll")
		    ? -EINVAL : io_uring_queue_init_params(UR_SQ_ENTRIES, &u->ring, &p);
	u->wait_mode = r == 0;
	u->no_iowait = r == 0 && (p.features & IORING_FEAT_NO_IOWAIT);
	if (r == -EINVAL) {
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN;
		p.cq_entries = UR_CQ_ENTRIES;
		r = io_uring_queue_init_params(UR_SQ_ENTRIES, &u->ring, &p);
	}
	if (r == -EINVAL) {
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE;
		p.cq_entries = UR_CQ_ENTRIES;
		r = io_uring_queue_init_params(UR_SQ_ENTRIES, &u->ring, &p);
	}
	if (r < 0) {
		free(u);
		return r;
	}
	u->nbufs = UR_NBUFS;
	u->mask = UR_NBUFS - 1;
	u->bufsize = (unsigned)(bs > UR_BUF_MAX ? UR_BUF_MAX : bs);
	u->mem = malloc((size_t)u->nbufs * u->bufsize);
	u->blen = calloc(u->nbufs, sizeof(*u->blen));
	u->boff = calloc(u->nbufs, sizeof(*u->boff));
	u->bnext = calloc(u->nbufs, sizeof(*u->bnext));
	if (posix_memalign((void **)&u->br, 4096, u->nbufs * sizeof(struct io_uring_buf)))
		u->br = NULL;
	if (!u->mem || !u->blen || !u->boff || !u->bnext || !u->br) {
		r = -ENOMEM;
		goto fail;
	}
	memset(u->br, 0, u->nbufs * sizeof(struct io_uring_buf));
	reg.ring_addr = (uint64_t)(uintptr_t)u->br;
	reg.ring_entries = u->nbufs;
	reg.bgid = UR_BGID;
	if ((r = io_uring_register_buf_ring(&u->ring, &reg, 0)) < 0)
		goto fail;
	io_uring_buf_ring_init(u->br);
	for (unsigned i = 0; i < u->nbufs; i++)
		buf_put(u, (int)i);
	ring_publish(u);
	if (!u->wait_mode) {
		fixed_setup(u);
		ev.data.ptr = u;
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, u->ring.ring_fd, &ev)) {
			r = -errno;
			goto fail;
		}
	}
	w->engine_priv[engine_uring.id] = u;
	if (w->in_thread) /* a reload's new route, or a session's lazy start */
		ring_start(w);
	log_verbose("worker %u: io_uring up (%u SQ, %u CQ entries, %u buffers of %u bytes, %s)",
		    w->id, p.sq_entries, p.cq_entries, u->nbufs, u->bufsize,
		    u->wait_mode ? "the worker waits in it" : "polled through epoll");
	return 0;
fail:
	io_uring_queue_exit(&u->ring);
	ctx_free(u);
	return r;
}

/* Urgent data: the ring sees no EPOLLPRI, and a multishot recv can stop at
 * the urgent mark (1 stall in 10, tests/peer). In line, the urgent byte is
 * forwarded in its place in the stream, as the sockmap engine does (see
 * urgent.h). */
static void oob_inline_fd(int fd)
{
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
}

/* The same on a slot, through the ring (IORING_OP_URING_CMD setsockopt,
 * which fixed_works found). */
static void oob_inline_slot(int slot, struct io_uring_sqe *sqe)
{
	static const int one = 1;

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->fd = slot;
	sqe->cmd_op = SOCKET_URING_OP_SETSOCKOPT;
	sqe->addr = (uint64_t)SOL_SOCKET | ((uint64_t)SO_OOBINLINE << 32);
	sqe->splice_fd_in = (int)sizeof(one);
	sqe->addr3 = (uint64_t)(uintptr_t)&one;
	io_uring_sqe_set_data64(sqe, 0);
}

/* SQEs fixed_register queues per session: FILES_UPDATE, CLOSE and
 * SO_OOBINLINE, for each socket. */
#define UR_REG_SQES 6

/* Whether a FILES_UPDATE fixed_register queued may still wait in the SQ:
 * the kernel has not taken everything up to it. */
static int reg_pending(struct uring_ctx *u)
{
	if (u->reg_queued && (int)(u->reg_tail - __atomic_load_n(u->ring.sq.khead, __ATOMIC_ACQUIRE)) <= 0)
		u->reg_queued = 0;
	return u->reg_queued;
}

/* Moves the session's two sockets into the ring's fixed file table (slot[0]
 * client, slot[1] backend) and gives up their descriptors. Returns 1, or 0
 * when the table is full or absent: the session then uses descriptors
 * (their SO_OOBINLINE set here too).
 *
 * Through the ring where it has room, as SQEs queued before the session's
 * first recv: a FILES_UPDATE of each slot, a CLOSE of each descriptor and
 * SO_OOBINLINE on each slot, where io_uring_register, close(2) and
 * setsockopt(2) cost six system calls a session (a third of a short
 * connection's: doc/performance.md). The kernel takes a submission's SQEs
 * in order, and these three complete inline (a socket has no flush, so its
 * close is not punted to io-wq), so the slots are filled before anything
 * names them, and the descriptors stay taken until they are: none can be
 * reused by accept4() or socket() while an SQE names it. The CLOSEs are
 * not linked to the updates: a failed update (the kernel short of memory)
 * still closes the descriptor, and the session's recv then fails with
 * EBADF and closes it, its peers see the end, and nothing leaks. */
static int fixed_register(struct uring_ctx *u, struct session *s, int slot[2])
{
	int fds[2] = { s->cli.fd, s->srv.fd };

	if (u->nfree_slots < 2)
		return 0;
	if (io_uring_sq_space_left(&u->ring) < UR_REG_SQES)
		ring_submit(u);
	if (io_uring_sq_space_left(&u->ring) >= UR_REG_SQES) {
		struct io_uring_sqe *sqe;

		for (int i = 0; i < 2; i++) {
			unsigned idx;

			slot[i] = u->slots[--u->nfree_slots];
			sqe = io_uring_get_sqe(&u->ring);
			idx = (unsigned)(sqe - u->ring.sq.sqes);
			u->sqe_fd[idx] = fds[i];
			io_uring_prep_files_update(sqe, &u->sqe_fd[idx], 1, slot[i]);
			io_uring_sqe_set_data64(sqe, 0);
		}
		for (int i = 0; i < 2; i++) {
			sqe = io_uring_get_sqe(&u->ring);
			io_uring_prep_close(sqe, fds[i]);
			io_uring_sqe_set_data64(sqe, 0);
		}
		for (int i = 0; i < 2; i++)
			if ((sqe = io_uring_get_sqe(&u->ring))) /* (room was made) */
				oob_inline_slot(slot[i], sqe);
		u->reg_tail = u->ring.sq.sqe_tail;
		u->reg_queued = 1;
		s->cli.fd = s->srv.fd = -1;
		return 1;
	}
	/* The SQ stays full (its submit failed): through the file table. */
	oob_inline_fd(fds[0]);
	oob_inline_fd(fds[1]);
	for (int i = 0; i < 2; i++) {
		slot[i] = u->slots[--u->nfree_slots];
		if (io_uring_register_files_update(&u->ring, (unsigned)slot[i], &fds[i], 1) != 1) {
			int none = -1;

			if (i)
				io_uring_register_files_update(&u->ring, (unsigned)slot[0], &none, 1);
			u->nfree_slots += (unsigned)i + 1;
			return 0;
		}
	}
	close(s->cli.fd);
	close(s->srv.fd);
	s->cli.fd = s->srv.fd = -1;
	return 1;
}

/* Fills sqe with SO_LINGER {1, 0} on a slot, hard-linked before its close
 * (which then sends an RST): the caller made room for both SQEs. */
static void fixed_linger0(int slot, struct io_uring_sqe *sqe)
{
	static const struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->flags = IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK; /* before the close, whatever it returns */
	sqe->fd = slot;
	sqe->cmd_op = SOCKET_URING_OP_SETSOCKOPT;
	sqe->addr = (uint64_t)SOL_SOCKET | ((uint64_t)SO_LINGER << 32); /* level, optname */
	sqe->splice_fd_in = (int)sizeof(lg);                            /* optlen */
	sqe->addr3 = (uint64_t)(uintptr_t)&lg;                          /* optval */
	io_uring_sqe_set_data64(sqe, 0);
}

/* Closes a session's slots (those not closed yet: >= 0), with SO_LINGER 0
 * first where us->rst says. Returns 1 when queued, 2 when closed at once,
 * 0 when the ring has no room for the SQEs (its submit failed with the SQ
 * full): the caller retries at a later turn (uring_flush). Without an RST
 * due, or with `force`, the slots are closed at once instead by removing
 * them from the table (io_uring_register_files_update, the removal that
 * IORING_OP_CLOSE does): safe, as no operation names them any more (the
 * session's directions finished); the peers see a FIN. */
static int fixed_close_both(struct uring_ctx *u, struct uring_sess *us, int force)
{
	unsigned need = 0;

	for (int i = 0; i < 2; i++)
		need += us->slot[i] >= 0 ? 1u + us->rst[i] : 0;
	if (io_uring_sq_space_left(&u->ring) < need)
		ring_submit(u);
	if (io_uring_sq_space_left(&u->ring) >= need) {
		for (int i = 0; i < 2; i++) {
			struct io_uring_sqe *sqe;

			if (us->slot[i] < 0)
				continue;
			if (!(sqe = io_uring_get_sqe(&u->ring)))
				return 0; /* (not reached: room was made) */
			if (us->rst[i]) {
				fixed_linger0(us->slot[i], sqe);
				sqe = io_uring_get_sqe(&u->ring);
			}
			io_uring_prep_close_direct(sqe, (unsigned)us->slot[i]);
			io_uring_sqe_set_data64(sqe, ((uint64_t)us->slot[i] << 3) | OP_CLOSE);
			us->slot[i] = -1; /* its CQE frees it */
		}
		return 1;
	}
	if ((us->rst[0] || us->rst[1]) && !force)
		return 0;
	/* Not before the kernel took a queued FILES_UPDATE (fixed_register):
	 * it would fill the slot again after its removal here. */
	if (reg_pending(u))
		return 0;
	for (int i = 0; i < 2; i++) {
		if (us->slot[i] < 0)
			continue;
		if (io_uring_register_files_update(&u->ring, (unsigned)us->slot[i], &(int){ -1 }, 1) != 1)
			return 0; /* (no memory for the update) the rest at a later turn */
		u->slots[u->nfree_slots++] = us->slot[i];
		us->slot[i] = -1;
	}
	return 2;
}

/* Closes the slots that waited for SQEs. A close due with an RST waits at
 * most UR_CLOSE_WAIT_MS: then it goes without the RST (logged once), as
 * a peer that sees a FIN late is better off than one that never sees the
 * end. */
static void closes_retry(struct uring_ctx *u)
{
	struct uring_sess **pp = &u->closing;

	while (*pp) {
		struct uring_sess *us = *pp;
		int force = u->w->now_ms - us->close_since >= UR_CLOSE_WAIT_MS, r;

		if (!(r = fixed_close_both(u, us, force))) {
			pp = &us->cnext;
			continue;
		}
		if (r == 2 && (us->rst[0] || us->rst[1]) && !u->close_forced++)
			log_warn("io_uring: no submission slot for %u ms: sockets due an RST were closed "
				 "with a FIN instead", UR_CLOSE_WAIT_MS);
		*pp = us->cnext;
		u->detached--;
		sess_free(us);
	}
}

/* The engine closes both sockets once the last operation of both directions
 * is back (detached_check): a plain descriptor closed now could be reused
 * by accept4() or socket() this very turn, before the SQEs of the turn
 * naming it are submitted (the session's bytes would go to another
 * client); IORING_OP_SHUTDOWN always runs in io-wq and looks its slot up
 * there, so a slot closed (and handed to a new session) while one is
 * queued would shut the new session's socket. */
static int uring_sides_close(struct session *s, int reset_cli, int reset_srv)
{
	struct uring_dir *up = UR(&s->up)->ur;
	struct uring_sess *us;

	if (!up)
		return 0;
	us = up->us;
	if (!us->fixed) {
		us->fd[0] = s->cli.fd;
		us->fd[1] = s->srv.fd;
		s->cli.fd = s->srv.fd = -1; /* side_close() leaves them to us */
	}
	us->rst[0] = (uint8_t)(reset_cli && (us->fixed || us->fd[0] >= 0));
	us->rst[1] = (uint8_t)(reset_srv && (us->fixed || us->fd[1] >= 0));
	return us->rst[0] + us->rst[1];
}

static int uring_worker_init(struct worker *w)
{
	return CTX(w) ? 0 : ctx_create(w);
}

/* Every failure after the session's part exists leaves it attached: the
 * session closes as usual (uring-error), and uring_sides_close and
 * uring_dir_release cancel what was armed and close the sockets, slots
 * included, so both peers see the end. */
static int uring_session_start(struct session *s)
{
	struct worker *w = s->w;
	struct dir *dirs[2] = { &s->up, &s->down };
	struct uring_sess *us;
	int r, fixed, slot[2] = { -1, -1 };

	if (!CTX(w) && (r = ctx_create(w)) < 0) {
		log_warn("session %llx: io_uring setup: %s", (unsigned long long)s->id, strerror(-r));
		return r;
	}
	/* From here the ring reports everything about these sockets. They
	 * become blocking: io_uring honours O_NONBLOCK and would complete a
	 * send to a full socket with -EAGAIN instead of waiting for room.
	 * O_NONBLOCK is the only status flag a proxy's socket has, so it is
	 * cleared without reading the flags first (a system call less). */
	for (int i = 0; i < 2; i++) {
		struct side *sd = i ? &s->srv : &s->cli;

		worker_unwatch(w, sd->fd, &sd->watch);
		if (fcntl(sd->fd, F_SETFL, 0))
			return -errno;
	}
	/* Before anything that cannot be undone here (the fixed table). */
	if (!(us = calloc(1, sizeof(*us))))
		return -ENOMEM;
	us->fd[0] = us->fd[1] = -1;
	for (int i = 0; i < 2; i++) {
		us->dir[i].pipe[0] = us->dir[i].pipe[1] = -1;
		if (CTX(w)->splice && pipe2(us->dir[i].pipe, O_CLOEXEC)) {
			r = -errno;
			sess_free(us);
			return r;
		}
	}
	/* A session auto moved here stays on its descriptors, so it can go
	 * back to copy (give_back_start): they were counted against ulimit -n
	 * on copy already. */
	us->movable = s->up.why == WHY_TURNS && !CTX(w)->splice;
	if (us->movable || !(fixed = fixed_register(CTX(w), s, slot))) {
		fixed = 0;
		oob_inline_fd(s->cli.fd);
		oob_inline_fd(s->srv.fd);
	}
	us->fixed = (uint8_t)fixed;
	us->slot[0] = slot[0];
	us->slot[1] = slot[1];
	for (int i = 0; i < 2; i++) {
		struct uring_dir *ud = &us->dir[i];

		ud->u = CTX(w);
		ud->us = us;
		ud->s = s;
		ud->d = dirs[i];
		ud->fixed = (uint8_t)fixed;
		ud->src = fixed ? slot[i] : dirs[i]->src->fd;
		ud->dst = fixed ? slot[!i] : dirs[i]->dst->fd;
		ud->qhead = ud->qtail = -1;
		UR(dirs[i])->ur = ud;
		dirs[i]->eng = &engine_uring; /* its release and pending from now on */
	}
	CTX(w)->nstarts++;
	for (int i = 0; i < 2; i++) {
		struct uring_dir *ud = &us->dir[i];

		/* SPLICER_URING_FAULT=start:n: a start that fails once its sockets
		 * are in the fixed table (nothing fails there now: a recv without
		 * an SQE waits for one; the cleanup stays tested) */
		if (i && fixed && CTX(w)->fault_start && CTX(w)->nstarts % CTX(w)->fault_start == 0)
			return -EBUSY;
		if (CTX(w)->splice) {
			if (w->cfg->pipe_size)
				fcntl(ud->pipe[1], F_SETPIPE_SZ, (int)w->cfg->pipe_size);
			ud->pipe_cap = (uint32_t)fcntl(ud->pipe[1], F_GETPIPE_SZ);
		}
		dir_go_on(ud);
	}
	return 0;
}

static void uring_dir_dead(struct session *s, struct dir *d)
{
	struct uring_dir *ud = UR(d)->ur;

	if (!ud)
		return;
	/* its buffers would be held for ever: other directions starve (an armed
	 * recv gives its buffer back on completion: on_recv, d->dead) */
	if (!ud->send_busy)
		queue_drop(ud);
	UR(d)->in_uring = 0;
}

/* A graceful close on fixed slots: IORING_OP_SHUTDOWN(SHUT_RD) on both
 * sources. Each armed recv then returns what the socket holds, then 0, and
 * the direction ends as on a peer's FIN: its queue is sent, then the FIN.
 * Both SQEs or none: a full ring leaves the session to be closed at once
 * instead of half shut. */
static int uring_shut_read(struct session *s)
{
	struct uring_dir *ud[2] = { UR(&s->up)->ur, UR(&s->down)->ur };
	struct io_uring_sqe *sqe[2];

	if (!ud[0] || !ud[1])
		return -EINVAL;
	if (!ud[0]->fixed) { /* plain descriptors: the armed recvs then return 0 */
		for (int i = 0; i < 2; i++)
			if (shutdown(ud[i]->src, SHUT_RD) && errno != ENOTCONN)
				return -errno;
		return 0;
	}
	/* room for both first: a submit between taking the two would send
	 * the first before it was filled */
	if (io_uring_sq_space_left(&ud[0]->u->ring) < 2)
		ring_submit(ud[0]->u);
	if (io_uring_sq_space_left(&ud[0]->u->ring) < 2)
		return -EBUSY;
	for (int i = 0; i < 2; i++) {
		sqe[i] = io_uring_get_sqe(&ud[0]->u->ring);
		io_uring_prep_shutdown(sqe[i], ud[i]->src, SHUT_RD);
		sqe[i]->flags |= IOSQE_FIXED_FILE;
		io_uring_sqe_set_data64(sqe[i], ud_data(ud[i], OP_SHUTDOWN));
		ud[i]->inflight++;
	}
	return 0;
}

static void uring_dir_ended(struct session *s, struct dir *d)
{
	if (UR(d)->ur)
		check_fin(UR(d)->ur);
}

static void uring_dir_release(struct worker *w, struct dir *d)
{
	struct uring_dir *ud = UR(d)->ur;
	struct uring_ctx *u;

	if (!ud)
		return;
	u = ud->u;
	if (ud->us->giving) { /* closed on its way back: it ends here */
		for (struct uring_sess **pp = &u->givers; *pp; pp = &(*pp)->gnext)
			if (*pp == ud->us) {
				*pp = ud->us->gnext;
				break;
			}
		ud->us->giving = 0;
	}
	UR(d)->ur = NULL;
	UR(d)->in_uring = 0;
	ud->s = NULL;
	ud->d = NULL;
	if (ud->us->dir[ud == &ud->us->dir[0]].s)
		u->detached++; /* the session's first: freed after its second */
	/* A send in flight still reads the queued buffers: they go back to
	 * the ring (where a recv may refill them) only after its CQE. */
	if (!ud->send_busy)
		queue_drop(ud);
	if (ud->recv_armed)
		cancel_op(ud, u->splice ? OP_SPLICE_IN : OP_RECV);
	if (ud->send_busy)
		cancel_op(ud, u->splice ? OP_SPLICE_OUT : OP_SEND);
	detached_check(ud);
}

static void uring_destroy(struct worker *w)
{
	struct uring_ctx *u = CTX(w);

	if (!u)
		return;
	if (!u->wait_mode)
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, u->ring.ring_fd, NULL);
	if (w->waiter == &engine_uring)
		w->waiter = NULL;
	io_uring_queue_exit(&u->ring); /* closes what the table still holds */
	while (u->closing) {
		struct uring_sess *us = u->closing;

		u->closing = us->cnext;
		sess_free(us);
	}
	ctx_free(u);
	w->engine_priv[engine_uring.id] = NULL;
}

/* A multishot recv of one byte from a socketpair into a provided-buffer ring:
 * fails on kernels before 6.0 and where io_uring is disabled or filtered. */
static int uring_probe(char *err, unsigned errlen)
{
	struct io_uring ring;
	struct io_uring_buf_ring *br = NULL;
	struct io_uring_buf_reg reg = { 0 };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	char buf[64];
	int sv[2] = { -1, -1 }, r;

	if ((r = io_uring_queue_init(8, &ring, 0)) < 0) {
		snprintf(err, errlen, "io_uring_setup: %s", strerror(-r));
		return r;
	}
	if (posix_memalign((void **)&br, 4096, 4096)) {
		r = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	memset(br, 0, 4096);
	reg.ring_addr = (uint64_t)(uintptr_t)br;
	reg.ring_entries = 1;
	reg.bgid = UR_BGID;
	if ((r = io_uring_register_buf_ring(&ring, &reg, 0)) < 0) {
		snprintf(err, errlen, "io_uring_register_buf_ring: %s (kernel 5.19+ needed)", strerror(-r));
		goto out;
	}
	io_uring_buf_ring_init(br);
	io_uring_buf_ring_add(br, buf, sizeof(buf), 0, 0, 0);
	io_uring_buf_ring_advance(br, 1);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) || write(sv[0], "x", 1) != 1) {
		r = -errno;
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		goto out;
	}
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_recv_multishot(sqe, sv[1], NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = UR_BGID;
	io_uring_sqe_set_data64(sqe, 1);
	if ((r = io_uring_submit_and_wait(&ring, 1)) < 0 || (r = io_uring_peek_cqe(&ring, &cqe)) < 0) {
		snprintf(err, errlen, "io_uring_enter: %s", strerror(-r));
		goto out;
	}
	if (cqe->res != 1 || !(cqe->flags & IORING_CQE_F_BUFFER)) {
		r = cqe->res < 0 ? cqe->res : -EINVAL;
		snprintf(err, errlen, "multishot recv with a provided buffer: %s (kernel 6.0+ needed)",
			 cqe->res < 0 ? strerror(-cqe->res) : "unexpected result");
		goto out;
	}
	r = 0;
out:
	io_uring_queue_exit(&ring); /* cancels the recv still armed */
	for (int i = 0; i < 2; i++)
		if (sv[i] >= 0)
			close(sv[i]);
	free(br);
	return r;
}

/* ---- Back to copy ------------------------------------------------------------
 *
 * A session auto moved here as request/response (us->movable) goes back to
 * its route's engines when a direction streams (stream_seen) or an upgrade
 * hands sessions over (uring_give_back): what each direction has received
 * and not sent goes with it, as a copy direction's buffer. The operations in
 * flight are cancelled first: an armed recv completes with its bytes or
 * -ECANCELED, a send with what it sent (the rest moves out of the ring as a
 * reclaim does), and no new one starts (maybe_rearm, send_next). Once none
 * is in flight (givers_run, after the turn's completions), the sockets are
 * made non-blocking again and the core takes the session back
 * (session_turns_back). */

static int give_back_start(struct uring_sess *us)
{
	struct uring_ctx *u = us->dir[0].u;

	if (!us->movable || !us->dir[0].s || !us->dir[1].s)
		return 0;
	if (us->giving)
		return 1;
	us->giving = 1;
	for (int i = 0; i < 2; i++) {
		struct uring_dir *ud = &us->dir[i];

		if (ud->starved)
			unstarve(ud);
		if (ud->arm_due)
			unarm(ud);
		if (ud->recv_armed)
			cancel_op(ud, OP_RECV);
		if (ud->send_busy && !ud->reclaim) {
			ud->reclaim = ud->reclaim_wait = 1;
			cancel_op(ud, OP_SEND);
		}
	}
	us->gnext = u->givers;
	u->givers = us;
	return 1;
}

/* Bytes ud holds: its spill, then its queued buffers (queue_copy). */
static size_t held_bytes(const struct uring_dir *ud, char *to)
{
	size_t n = 0;

	for (const struct ur_chunk *c = ud->spill; c; c = c->next) {
		if (to)
			memcpy(to + n, c->data + c->off, c->len - c->off);
		n += c->len - c->off;
	}
	return n + queue_copy(ud, to ? to + n : NULL);
}

/* Nothing of us is in flight: its session goes back to copy. One holding
 * more than a copy buffer takes (a stream to a slow reader) goes on here
 * instead, its receives and sends armed again, and tries again after as
 * many more full receives as made it a stream (an upgrade leaves it to
 * drain); one that failed, or found no memory, stays for good. Never does
 * a direction wait with nothing armed: that could stop a peer that sends
 * before it reads. */
static void give_back_now(struct uring_sess *us)
{
	struct session *s = us->dir[0].s;
	struct worker *w = s->w;
	struct dir_handoff h[2];
	char *mem[2] = { NULL, NULL };
	int ok = !s->up.err && !s->down.err && !s->up.dead && !s->down.dead;

	int big = 0;

	memset(h, 0, sizeof(h));
	us->giving = 0;
	for (int i = 0; i < 2 && ok; i++) {
		h[i].len = (uint32_t)held_bytes(&us->dir[i], NULL);
		if (h[i].len > w->bufs.size)
			ok = 0, big = 1;
		else if (h[i].len && !(mem[i] = malloc(h[i].len)))
			ok = 0;
		else if (h[i].len)
			held_bytes(&us->dir[i], mem[i]);
		h[i].bytes = mem[i];
	}
	if (!ok) {
		free(mem[0]);
		free(mem[1]);
		if (s->giving_back) { /* the upgrade need not wait for it */
			s->giving_back = 0;
			w->giving_back--;
		}
		us->movable = (uint8_t)big; /* a stream's: after as many full receives again */
		for (int i = 0; i < 2; i++)
			us->dir[i].full_reads = 0, us->dir[i].solo = 0;
		log_verbose("session %llx: stays on uring (%s)", (unsigned long long)s->id,
			    big ? "more bytes held than a copy buffer takes"
				: "a direction failed, or no memory");
		for (int i = 0; i < 2; i++)
			if (!us->dir[i].d->err)
				dir_go_on(&us->dir[i]);
		session_io_result(s);
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct side *sd = i ? &s->srv : &s->cli;
		int off = 0;

		queue_drop(&us->dir[i]);
		fcntl(sd->fd, F_SETFL, O_NONBLOCK);
		setsockopt(sd->fd, SOL_SOCKET, SO_OOBINLINE, &off, sizeof(off));
		UR(us->dir[i].d)->ur = NULL;
		UR(us->dir[i].d)->in_uring = 0;
	}
	sess_free(us);
	session_turns_back(s, h);
	free(mem[0]);
	free(mem[1]);
}

/* After the turn's completions: the sessions going back whose last
 * operation came back. */
static void givers_run(struct worker *w)
{
	struct uring_ctx *u = CTX(w);
	struct uring_sess **pp;

	if (!u)
		return;
	for (pp = &u->givers; *pp;) {
		struct uring_sess *us = *pp;

		if (us->dir[0].inflight || us->dir[1].inflight) {
			pp = &us->gnext;
			continue;
		}
		*pp = us->gnext;
		give_back_now(us);
	}
}

static int uring_give_back(struct session *s)
{
	struct uring_dir *ud = UR(&s->up)->ur;

	if (!ud)
		return 0;
	return give_back_start(ud->us);
}

/* The session is connected: the ring drives it from here on. */
static int uring_drive(struct session *s)
{
	if (!UR(&s->up)->ur && uring_session_start(s) < 0)
		session_close(s, "uring-error");
	return 1;
}

static uint64_t uring_pending(const struct dir *d)
{
	return UR(d)->in_uring;
}

static int uring_pump(struct worker *w, struct dir *d, unsigned *budget)
{
	return 0; /* the ring moves the bytes (uring_drive) */
}

struct engine engine_uring = {
	.name = "uring",
	.blind_send_queue = 1,
	.probe = uring_probe,
	.worker_init = uring_worker_init,
	.worker_fini = uring_destroy,
	.worker_event = uring_reap,
	.before_wait = uring_flush,
	.busy = uring_busy,
	.thread_start = ring_start,
	.thread_end = uring_thread_end,
	.wait = uring_wait,
	.watch = uring_watch,
	.rewatch = uring_rewatch,
	.unwatch = uring_unwatch,
	.drive = uring_drive,
	.give_back = uring_give_back,
	.each_turn = givers_run,
	.dir_ended = uring_dir_ended,
	.dir_dead = uring_dir_dead,
	.close = uring_sides_close,
	.shut_read = uring_shut_read,
	.pump = uring_pump,
	.release = uring_dir_release,
	.pending = uring_pending,
	.counters = ur_counters,
	.ncounters = 1,
};
