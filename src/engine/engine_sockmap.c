/* SPDX-License-Identifier: MIT */
/* engine_sockmap (experimental): both sockets of a session go into the BPF
 * SOCKHASH of bpf/sockmap.bpf.c, whose stream verdict redirects every skb
 * one socket receives to the other's send path, so no byte crosses into
 * user space. User space keeps three jobs:
 *
 * - The hand-off. A session starts on copy (PROXY header, first bytes) and
 *   moves into the map once no source has a partly read segment queued
 *   (the verdict would resend such a segment whole). Bytes user space still
 *   holds, and bytes the program passes to user space while the peer is not
 *   in the map yet, go first: the program redirects only once user space has
 *   written all it was passed (passed == user_sent), so nothing is reordered.
 *   Until then this engine is the copy engine over the socket's psock.
 *
 * - FIN. The kernel does not forward it. recv() returning 0 on the source
 *   says the FIN came, but the bytes before it may still wait on the peer's
 *   redirect queue (the psock backlog, run by a workqueue, slowed by a full
 *   send buffer): shutting the peer's write side then would cut them off,
 *   and closing drops the queue. So the FIN goes out only when the peer's
 *   written bytes (its write_seq, counted from insertion) reach what the
 *   program redirected plus what user space wrote (sm_drained). No call
 *   returns write_seq; tcp_written.h reads it free of the race with ACKs,
 *   and the base at insertion must be exact: off by the bytes an ACK moved,
 *   it would let the FIN overtake as many. Until then the session waits on
 *   the worker's drain-wait list, re-checked with backoff (1..64 ms). A
 *   zero-length skb (bare FIN) is dropped by the program: redirected, it
 *   would fail on the peer with EPIPE. Any EPIPE that still shows up on a
 *   side we have shut for writing is ignored (sm_spurious_epipe).
 *
 * - Back-pressure. The kernel charges a redirect queue to no socket and puts
 *   no bound on it: a client that stops reading let the backend push
 *   hundreds of MB per session into kernel memory (then "TCP: out of
 *   memory" and every connection of the host stalls). So each direction
 *   keeps what the program redirected and its destination has not yet
 *   taken (in flight: redirected - dst written since insertion) near
 *   SM_CREDIT. The program wakes the worker through its alarm ring when
 *   `redirected` reaches `alarm`, armed at SM_CREDIT past what dst had
 *   taken (so in flight cannot pass SM_CREDIT unseen); the worker measures:
 *   under SM_PAUSE_AT it arms the next alarm, else it pauses the direction:
 *   its source leaves `verd` (the verdict stops; the psock lives on in
 *   `socks`, so its own redirect queue, the other direction's, is still
 *   sent and nothing is purged), and the source's bytes wait in its receive
 *   queue, whose window closes: the sender stops. A paused direction is
 *   looked at with the drain-wait backoff; once in flight is down to
 *   SM_RESUME_AT its source goes back into `verd` and the verdict runs over
 *   what queued meanwhile (bpf_sockmap.c: SO_RCVLOWAT). The kernel takes
 *   only ESTABLISHED sockets: after the source's FIN user space copies the
 *   rest itself (SM_USER), once in flight is 0. Pausing races with a
 *   verdict run on another CPU, which would drop an skb (bpf_sockmap.h:
 *   sm_pause); after each pause the source's consumed bytes
 *   (tcp_received.h) must equal what the program counted, or the
 *   direction ends with a reset and an error line: never a silent hole.
 *   What a session holds in the kernel is then at most SM_CREDIT + what
 *   arrives before the worker acts, plus the socket buffers; a resumed
 *   source's queued bytes (at most its receive buffer) are redirected at
 *   once.
 *
 * - Repeats. A retransmission overlapping bytes already received reaches the
 *   verdict whole; the program cuts the overlap (bpf/sockmap.bpf.c). One it
 *   cannot cut marks the direction broken: it ends with a reset and an error
 *   line (dir_broken), never a FIN after a hole.
 *
 * - Time and counts. Idle timeout, log and metrics take the program's
 *   counters (shared memory) each time the session's timer looks (100 ms).
 *   A redirected byte is counted once it is on the destination's send
 *   queue (as the other engines count a byte once send() took it), not
 *   when the program redirected it: the peer's redirect queue may still
 *   hold it, and a reset drops what it holds. So no count is ever taken
 *   back (a published counter never goes down), and a session's bytes
 *   end as what its destinations took (doc/engines.md).
 *
 * Sessions that cannot use it (not TCP on both sides, no counter slot, the
 * insert refused) carry on as `auto` (copy, then splice). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <bpf/libbpf.h>

#include "bpf_sockmap.h"
#include "config.h"
#include "engine.h"
#include "engine_copy.h"

extern struct engine engine_splice;
struct engine engine_sockmap;

enum { SM_CTR_SESSIONS = 1, SM_CTR_FALLBACKS = 2, SM_CTR_PAUSES = 3, SM_CTR_REPEATED = 4 };

/* Back-pressure (above). In flight may pass SM_CREDIT only by what arrives
 * while the worker reacts to an alarm; 2 MiB is a few 512k pipes' worth,
 * what the splice engine holds per direction besides the socket buffers. */
#define SM_CREDIT    (2u << 20)
#define SM_PAUSE_AT  (1u << 20)   /* an alarm pauses from this much in flight */
#define SM_RESUME_AT (256u << 10) /* and the verdict resumes at this much */

/* How a direction in the map moves its bytes. */
enum sm_mode {
	SM_KERNEL, /* its source is in `verd`: the program redirects */
	SM_PAUSED, /* out of `verd` until dst has taken what was redirected */
	SM_USER,   /* out for good (the kernel refused it): user space copies */
	SM_LOST,   /* the kernel dropped bytes while pausing, or repeated bytes the
		      program could not cut: it ends with a reset */
};

/* No consumed base: the loss check is skipped for that direction. */
#define SM_NO_BASE UINT64_MAX

/* A direction: the copy engine's state first (what the program passes to
 * user space is copied through it), then the kernel's counts. */
struct sm_dir {
	struct copy_dir copy;
	unsigned slot;     /* counter slot (bpf/sockmap_abi.h) */
	uint8_t mode;      /* enum sm_mode */
	uint64_t user;     /* bytes user space wrote to dst since insertion */
	uint64_t seen;     /* the slot's `redirected` at the last look (activity) */
	uint64_t counted;  /* of those, added to bytes: on dst's send queue */
	uint64_t base;     /* dst's bytes written (acked + queued) at insertion */
	uint64_t inflight; /* at close: redirected bytes not yet on dst's send queue */
	uint64_t acked;    /* dst's bytes acknowledged at the last drain check */
};
ENGINE_STATE_FITS(struct sm_dir, struct dir);

enum sm_state { SM_NO, SM_WANTED, SM_ON };

/* A session. Index 0 is up (the client's socket, its source), 1 down. */
struct sm_sess {
	uint8_t state;          /* enum sm_state */
	uint8_t in_wait;        /* on the worker's drain-wait list */
	uint16_t backoff;       /* drain-wait: ms until the next check (doubles) */
	uint32_t peak_kib[2];   /* the most in flight measured (at pauses and alarms) */
	uint64_t due_ms;        /* drain-wait: next check */
	uint64_t cookie[2];     /* client, backend socket cookies */
	uint64_t cbase[2];      /* source's consumed bytes at insertion less what user space
				   held (tcp_received.h), or SM_NO_BASE */
	struct session *next;   /* the worker's drain-wait list */
};
ENGINE_STATE_FITS(struct sm_sess, struct session);

/* A worker. */
struct sm_worker {
	struct engine_fd efd;   /* EV_ENGINE: the alarm ring's epoll fd (first member) */
	struct worker *w;
	struct ring_buffer *ring; /* the program's alarms for this worker's slots */
	struct session *wait;   /* sessions waiting for a redirect queue to drain */
	uint64_t next_due_ms;   /* the earliest due_ms on wait */
	unsigned *free;         /* counter slots (pairs) this worker may use */
	unsigned nfree;
	unsigned first, per;    /* its pairs: slots (first + i) * 2, i < per */
	struct session **by_slot; /* pair i's session, for the alarms */
	int init;
};

static struct sm_dir *SD(const struct dir *d)
{
	return ENGINE_STATE(struct sm_dir, (struct dir *)d);
}

static struct sm_sess *SS(const struct session *s)
{
	return ENGINE_STATE(struct sm_sess, (struct session *)s);
}

static struct sm_worker *SW(struct worker *w)
{
	return w->engine_priv[engine_sockmap.id];
}
#include "log.h"
#include "tcp_received.h"
#include "tcp_written.h"

#define SM_BACKOFF_MAX_MS 64

/* Loads the BPF program once (before root is dropped, and at a reload that
 * puts a route on sockmap), sized from max-conns: two counter slots a
 * session, at most SM_MAX_SLOTS. When it cannot be loaded, the registry
 * moves the routes to their fallback (splice) and says why. */
static int sm_setup(const struct config *cfg, char *why, unsigned len)
{
	uint64_t slots = cfg->max_conns * 2;

	if (sm_loaded())
		return 0;
	if (slots > SM_MAX_SLOTS)
		slots = SM_MAX_SLOTS;
	if (sm_open((unsigned)slots, (unsigned)cfg->workers, why, len))
		return -1;
	log_info("sockmap engine (experimental): BPF program loaded, %llu sessions at most "
		 "in the kernel", (unsigned long long)slots / 2);
	return 0;
}

static int sm_probe(char *err, unsigned errlen)
{
	return 0; /* the real test is sm_open(), in sm_setup */
}

static struct dir *other_dir(struct session *s, const struct dir *d)
{
	return d == &s->up ? &s->down : &s->up;
}

static int64_t in_flight(struct dir *d, uint64_t *acked);
static void smwait_add(struct session *s);
static int sm_spurious_epipe(const struct session *s, const struct side *sd, int err);

/* Index of d in the session's per-direction arrays (sm_sess). */
static int dix(const struct session *s, const struct dir *d)
{
	return d == &s->down;
}

/* Whether user space has bytes of d to write: passed to it by the program
 * (during the hand-off, or when the peer left the map), in its buffer, or
 * every byte (SM_USER). */
static int owes(const struct session *s, const struct dir *d)
{
	(void)s;
	return SD(d)->mode == SM_USER || SD(d)->copy.head != SD(d)->copy.tail ||
	       __atomic_load_n(&sm_ctr(SD(d)->slot)->passed, __ATOMIC_SEQ_CST) != SD(d)->user;
}

static void peak_note(struct session *s, struct dir *d, int64_t left)
{
	uint32_t kib = left > 0 ? (uint32_t)(((uint64_t)left + 1023) >> 10) : 0;

	if (kib > SS(s)->peak_kib[dix(s, d)])
		SS(s)->peak_kib[dix(s, d)] = kib;
}

/* The next alarm: SM_CREDIT past what dst has taken of what was redirected
 * (`left` of it was in flight just now), so that in flight reaches at most
 * SM_CREDIT before the worker looks again. */
static void alarm_arm(struct dir *d, int64_t left)
{
	volatile struct sm_ctr *c = sm_ctr(SD(d)->slot);
	uint64_t red = __atomic_load_n(&c->redirected, __ATOMIC_SEQ_CST);
	uint64_t done = left > 0 && (uint64_t)left < red ? red - (uint64_t)left : left > 0 ? 0 : red;

	__atomic_store_n(&c->alarm, done + SM_CREDIT, __ATOMIC_SEQ_CST);
}

/* Bytes of d the program may have lost while the verdict stopped: the
 * source's consumed bytes less what the program counted since insertion;
 * 0 when the check cannot be made. */
static uint64_t dir_lost(struct session *s, struct dir *d)
{
	volatile struct sm_ctr *c = sm_ctr(SD(d)->slot);
	uint64_t base = SS(s)->cbase[dix(s, d)], now, counted;
	int r;

	if (base == SM_NO_BASE)
		return 0;
	if ((r = tcpr_consumed(d->src->fd, &now))) {
		log_debug("session %llx: sockmap: no loss check after the pause (%s)",
			  (unsigned long long)s->id, strerror(-r));
		return 0;
	}
	/* read after the source's lock was taken (tcpr_consumed): no verdict
	 * run is under way any more, the counts are final */
	counted = __atomic_load_n(&c->redirected, __ATOMIC_SEQ_CST) +
		  __atomic_load_n(&c->passed, __ATOMIC_SEQ_CST);
	return now - base > counted ? now - base - counted : 0;
}

/* Whether the program marked d broken: the kernel repeated bytes it could
 * not cut out (bpf/sockmap.bpf.c), so it drops all that follows and d must
 * end with a reset, never a FIN. */
static int dir_broken(struct session *s, struct dir *d)
{
	if (SD(d)->mode == SM_LOST)
		return 1;
	if (SS(s)->state != SM_ON || !__atomic_load_n(&sm_ctr(SD(d)->slot)->broken, __ATOMIC_SEQ_CST))
		return 0;
	SD(d)->mode = SM_LOST;
	log_err("session %llx: sockmap %s: the kernel handed the program bytes a second time that "
		"it could not cut out; the direction ends with a reset", (unsigned long long)s->id,
		dix(s, d) ? "down" : "up");
	SS(s)->backoff = 0;
	smwait_add(s); /* the session runs again soon: sm_pump ends d */
	return 1;
}

/* d's bytes wait in its source's receive queue from now (see the top). */
static void dir_pause(struct session *s, struct dir *d)
{
	int64_t left;
	uint64_t lost;
	int r;

	if ((r = sm_pause(d->src->fd, SS(s)->cookie[dix(s, d)]))) {
		log_debug("session %llx: sockmap %s: pause refused (%s)", (unsigned long long)s->id,
			  dix(s, d) ? "down" : "up", strerror(-r));
		alarm_arm(d, 0);
		return;
	}
	SD(d)->mode = SM_PAUSED;
	engine_count(s->w, &engine_sockmap, SM_CTR_PAUSES, 1);
	if ((lost = dir_lost(s, d))) {
		/* the bytes after the hole never leave the source: what came
		 * before it is delivered, then dst gets an RST (sm_pump) */
		SD(d)->mode = SM_LOST;
		log_err("session %llx: sockmap %s: the kernel dropped %llu bytes while the verdict "
			"stopped; the direction ends with a reset", (unsigned long long)s->id,
			dix(s, d) ? "down" : "up", (unsigned long long)lost);
		SS(s)->backoff = 0;
		smwait_add(s); /* the session runs again soon: sm_pump ends d */
		return;
	}
	left = in_flight(d, &SD(d)->acked);
	peak_note(s, d, left);
	log_debug("session %llx: sockmap %s paused: %lld bytes in flight", (unsigned long long)s->id,
		  dix(s, d) ? "down" : "up", (long long)left);
	SS(s)->backoff = 0;
	smwait_add(s);
}

/* Whether d may pause: redirecting, and user space owes its destination
 * nothing (a pass still unread would stand in the loss check's way). */
static int can_pause(const struct session *s, const struct dir *d)
{
	return SS(s)->state == SM_ON && SD(d)->mode == SM_KERNEL && !d->eof && !d->dead &&
	       !owes(s, d);
}

/* d's alarm fired (or the timer looks): pause, or arm the next. */
static void dir_look(struct session *s, struct dir *d, int64_t left)
{
	if (!can_pause(s, d)) {
		if (SS(s)->state == SM_ON && SD(d)->mode == SM_KERNEL)
			alarm_arm(d, 0); /* owed bytes: redirects wait for them anyway */
		return;
	}
	peak_note(s, d, left);
	if (left < 0 || left >= SM_PAUSE_AT)
		dir_pause(s, d);
	else
		alarm_arm(d, left);
}

/* A paused direction: once dst has taken all but SM_RESUME_AT, the verdict
 * starts again over what the source queued; when the kernel refuses (a FIN
 * came: the socket is no longer ESTABLISHED) user space moves the rest.
 * Returns 1 when d goes on in user space now (sm_pump copies, once nothing
 * is in flight), 0 when there is nothing more to do in this run. */
static int paused_step(struct session *s, struct dir *d)
{
	uint64_t acked = SD(d)->acked;
	int64_t left = in_flight(d, &acked);
	int r;

	if (acked != SD(d)->acked) {
		SD(d)->acked = acked;
		s->active_ms = s->w->now_ms; /* dst is taking it: look again soon */
		SS(s)->backoff = 0;
	}
	if (left < 0 || left > SM_RESUME_AT) {
		smwait_add(s);
		return 0;
	}
	if (!(r = sm_resume(d->src->fd, SS(s)->cookie[dix(s, d)]))) {
		SD(d)->mode = SM_KERNEL;
		alarm_arm(d, left);
		log_debug("session %llx: sockmap %s resumed: %lld bytes in flight",
			  (unsigned long long)s->id, dix(s, d) ? "down" : "up", (long long)left);
		return 0;
	}
	SD(d)->mode = SM_USER;
	d->src->can_read = 1;
	log_verbose("session %llx: sockmap %s: the verdict cannot start again (%s): user space "
		    "copies the rest", (unsigned long long)s->id, dix(s, d) ? "down" : "up",
		    strerror(-r));
	return 1;
}

static int sm_pump(struct worker *w, struct dir *d, unsigned *budget)
{
	struct session *s = d->src->s;
	uint64_t before = d->bytes;
	int r;

	if (SD(d)->mode == SM_LOST || dir_broken(s, d))
		return dir_fail(d, EIO, 0); /* never a FIN after a hole */
	if (SD(d)->mode == SM_PAUSED && !paused_step(s, d))
		return 0;
	/* Bytes passed to user space, and a source's bytes after a pause that
	 * could not resume, come after everything redirected before them:
	 * written while the peer's redirect queue still holds bytes, they
	 * would overtake those. So wait for it to drain. */
	if (owes(s, d) && !d->eof && in_flight(d, NULL)) {
		smwait_add(s);
		return 0;
	}
	if (owes(s, d))
		SS(s)->backoff = 0;
	r = engine_copy.pump(w, d, budget);
	if (r == -EPIPE && sm_spurious_epipe(s, d->src, EPIPE)) {
		/* recv() returned the error once and cleared it: go on */
		d->err = 0;
		r = engine_copy.pump(w, d, budget);
	}
	if (d->bytes != before) {
		SD(d)->user += d->bytes - before;
		__atomic_store_n(&sm_ctr(SD(d)->slot)->user_sent, SD(d)->user, __ATOMIC_SEQ_CST);
	}
	return r;
}


/* Worker w's share of the slots: pairs of adjacent slots (up, down). */
static int slot_get(struct worker *w, unsigned *slot)
{
	if (!SW(w)->init) {
		unsigned n = (unsigned)w->cfg->workers, per = sm_slots() / (n ? n : 1) / 2;
		SW(w)->init = 1;
		SW(w)->free = calloc(per ? per : 1, sizeof(unsigned));
		SW(w)->by_slot = calloc(per ? per : 1, sizeof(struct session *));
		if (!SW(w)->free || !SW(w)->by_slot)
			per = 0;
		SW(w)->first = w->id * per;
		SW(w)->per = per;
		for (unsigned i = 0; i < per; i++)
			SW(w)->free[SW(w)->nfree++] = (w->id * per + (per - 1 - i)) * 2;
	}
	if (!SW(w)->nfree)
		return -1;
	*slot = SW(w)->free[--SW(w)->nfree];
	return 0;
}

static void slot_put(struct worker *w, unsigned slot)
{
	SW(w)->by_slot[slot / 2 - SW(w)->first] = NULL;
	SW(w)->free[SW(w)->nfree++] = slot;
}

static int side_events(struct side *sd, uint32_t ev)
{
	int r;

	if (sd->fd < 0 || sd->ev == ev)
		return 0;
	if ((r = worker_rewatch(sd->s->w, sd->fd, ev, sd, &sd->watch)) < 0)
		return r;
	sd->ev = ev;
	return 0;
}

static void fall_back(struct session *s, const char *why)
{
	SS(s)->state = SM_NO;
	s->up.stream = s->down.stream = &engine_splice; /* go on as auto */
	engine_count(s->w, &engine_sockmap, SM_CTR_FALLBACKS, 1);
	log_verbose("session %llx: sockmap not used (%s): continuing as auto", (unsigned long long)s->id,
		    why);
}

static int is_tcp(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	return !getsockname(fd, (struct sockaddr *)&ss, &len) &&
	       (ss.ss_family == AF_INET || ss.ss_family == AF_INET6);
}

/* A source may hold a partly read segment when its last read filled the
 * buffer (can_read still set after reading). EAGAIN, a short read, or no
 * read at all leave whole segments only. */
static int clean_source(const struct dir *d)
{
	return d->eof || !d->src->can_read || !(d->used & (1u << engine_copy.id));
}

static void sm_try_start(struct session *s)
{
	struct worker *w = s->w;
	uint64_t base_up, base_down;
	struct tcpw rd_up, rd_down;
	unsigned slot;
	int r;

	if (!clean_source(&s->up) || !clean_source(&s->down))
		return; /* the next run, once the copy engine has drained them */
	if (s->up.eof && s->down.eof) {
		SS(s)->state = SM_NO; /* both FINs seen: nothing left to move */
		return;
	}
	if (s->up.eof || s->down.eof) {
		/* the kernel inserts only ESTABLISHED sockets (CLOSE_WAIT is not) */
		fall_back(s, "a FIN came before the hand-off");
		return;
	}
	if (!is_tcp(s->cli.fd) || !is_tcp(s->srv.fd)) {
		fall_back(s, "not TCP on both sides");
		return;
	}
	if (slot_get(w, &slot)) {
		fall_back(s, "no counter slot free");
		return;
	}
	if ((r = tcpw_read(s->srv.fd, &rd_up)) || (r = tcpw_read(s->cli.fd, &rd_down))) {
		slot_put(w, slot);
		fall_back(s, strerror(-r));
		return;
	}
	if (!tcpw_exact(&rd_up, &base_up) || !tcpw_exact(&rd_down, &base_down)) {
		/* ACKs kept landing between the calls: a base that is off
		 * would send the FIN early (too small) or never (too large).
		 * Stay on copy; the next run tries again. */
		slot_put(w, slot);
		log_debug("session %llx: sockmap hand-off put off: no consistent send queue reading",
			  (unsigned long long)s->id);
		return;
	}
	/* The loss check's bases (dir_lost): what each source has given up so
	 * far; user space holds dir_pending() of it, which the program counts
	 * as passed (sm_insert). Nothing reads the sources until insertion. */
	for (int i = 0; i < 2; i++) {
		struct dir *d = i ? &s->down : &s->up;
		uint64_t c;

		SS(s)->cbase[i] = tcpr_consumed(d->src->fd, &c) ? SM_NO_BASE : c - dir_pending(d);
	}
	/* Readable edges are needed while the program may pass bytes to user
	 * space: from now until both sockets are in and user space caught up. */
	side_events(&s->cli, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
	side_events(&s->srv, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
	r = sm_insert(s->cli.fd, s->srv.fd, slot, slot + 1, dir_pending(&s->up), dir_pending(&s->down),
		      w->id, SM_CREDIT, &SS(s)->cookie[0], &SS(s)->cookie[1]);
	if (r < 0) {
		slot_put(w, slot);
		/* EOPNOTSUPP: a FIN arrived meanwhile (not ESTABLISHED any more) */
		fall_back(s, strerror(-r));
		return;
	}
	SD(&s->up)->slot = slot;
	SD(&s->down)->slot = slot + 1;
	SD(&s->up)->mode = r & SM_A_OUT ? SM_USER : SM_KERNEL;
	SD(&s->down)->mode = r & SM_B_OUT ? SM_USER : SM_KERNEL;
	SD(&s->up)->base = base_up;
	SD(&s->down)->base = base_down;
	SD(&s->up)->acked = rd_up.acked;
	SD(&s->down)->acked = rd_down.acked;
	SD(&s->up)->user = SD(&s->down)->user = SD(&s->up)->seen = SD(&s->down)->seen = 0;
	SD(&s->up)->counted = SD(&s->down)->counted = 0;
	SS(s)->peak_kib[0] = SS(s)->peak_kib[1] = 0;
	SW(w)->by_slot[slot / 2 - SW(w)->first] = s;
	s->up.eng = s->down.eng = &engine_sockmap;
	s->up.stream = s->down.stream = NULL;
	SS(s)->state = SM_ON;
	s->up.why = s->down.why = WHY_KERNEL;
	/* the insert may have passed bytes to user space: look */
	s->cli.can_read = s->srv.can_read = 1;
	if (r) {
		/* a socket was refused (a FIN came during the hand-off): its
		 * bytes stay in its receive queue and user space copies them */
		engine_count(w, &engine_sockmap, SM_CTR_FALLBACKS, 1);
		log_verbose("session %llx: sockmap: the %s socket was refused (a FIN came during the "
			    "hand-off): user space copies its bytes", (unsigned long long)s->id,
			    r & SM_A_OUT ? "client" : "backend");
		return;
	}
	engine_count(w, &engine_sockmap, SM_CTR_SESSIONS, 1);
	log_verbose("session %llx: both directions in the sockmap", (unsigned long long)s->id);
}

static void sm_update_events(struct session *s)
{
	struct dir *ds[2] = { &s->up, &s->down };

	for (int i = 0; i < 2; i++) {
		struct dir *d = ds[i], *o = other_dir(s, d);
		uint32_t ev = EPOLLRDHUP | EPOLLET;

		/* Readable edges only while the program may pass bytes to user
		 * space (hand-off): registered, every redirected batch would wake
		 * the worker (sk_data_ready runs after the verdict) for nothing.
		 * A pass that races with dropping EPOLLIN is found by sm_sync()
		 * when the session's timer next looks (at most 100 ms late). */
		if (owes(s, d) && !d->eof)
			ev |= EPOLLIN;
		if (SD(o)->copy.head != SD(o)->copy.tail)
			ev |= EPOLLOUT;
		side_events(d->src, ev);
	}
}

/* Of the `red` bytes the program redirected for d, how many are not on
 * d->dst's send queue yet, per a reading taken now (red was read before
 * it: bytes redirected since can only make it look more drained, never
 * less); -1 when not known (no socket, or a torn reading). */
static int64_t red_left(struct dir *d, uint64_t red)
{
	struct tcpw now;
	int64_t left;

	if (d->dst->fd < 0 || tcpw_read(d->dst->fd, &now))
		return -1;
	left = tcpw_left(SD(d)->base, &now, red + SD(d)->user);
	if (left < 0)
		return -1;
	/* more than red left: the reading shows fewer bytes than user space
	 * itself wrote (a low reading), so none of red is known to be queued */
	return (uint64_t)left > red ? (int64_t)red : left;
}

/* Brings d's counts up to date: what the program redirected since the last
 * look is activity; what of it reached d->dst's send queue is added to the
 * direction's bytes and the engine's and worker's totals, never more than
 * once and never taken back (a lower reading counts nothing). Returns 1
 * when either moved (the caller marks the session active and reports its
 * bytes), 0 otherwise. *left (if asked, with a reading whatever the
 * counts): the redirected bytes not on the send queue, -1 not known. */
static int sync_dir(struct session *s, struct dir *d, int64_t *left)
{
	uint64_t red = __atomic_load_n(&sm_ctr(SD(d)->slot)->redirected, __ATOMIC_SEQ_CST);
	uint64_t on, delta;
	int64_t l = -1;
	int moved = 0;

	if (__atomic_load_n(&sm_ctr(SD(d)->slot)->passed, __ATOMIC_RELAXED) != SD(d)->user && !d->eof &&
	    !d->src->can_read) {
		d->src->can_read = 1; /* bytes passed without an edge we listen to */
		moved = 1;
	}
	if (red != SD(d)->seen) {
		SD(d)->seen = red;
		dir_used(d, &engine_sockmap);
		moved = 1;
	}
	/* a reading costs two or three calls: only with something to count */
	if (SD(d)->counted < red || left)
		l = red_left(d, red);
	if (left)
		*left = l;
	on = l < 0 ? SD(d)->counted : red - (uint64_t)l;
	if (on <= SD(d)->counted)
		return moved;
	delta = on - SD(d)->counted;
	SD(d)->counted = on;
	d->bytes += delta;
	engine_count(s->w, &engine_sockmap, ENGINE_CTR_BYTES, delta);
	if (d == &s->up)
		CTR_ADD(s->w, bytes_up, delta);
	else
		CTR_ADD(s->w, bytes_down, delta);
	return 1;
}

/* The timer's look (100 ms): counts, and a second net under the alarms (a
 * direction whose reading shows SM_PAUSE_AT in flight is looked at). */
static int sm_sync(struct session *s)
{
	int moved = 0;

	if (SS(s)->state != SM_ON)
		return 0;
	for (int i = 0; i < 2; i++) {
		struct dir *d = i ? &s->down : &s->up;

		moved |= sync_dir(s, d, NULL);
		if (dir_broken(s, d))
			continue;
		if (SD(d)->mode == SM_KERNEL && SD(d)->seen - SD(d)->counted >= SM_PAUSE_AT)
			dir_look(s, d, (int64_t)(SD(d)->seen - SD(d)->counted));
	}
	return moved;
}

/* Bytes meant for d->dst since the insertion: what the program redirected
 * and what user space wrote. */
static uint64_t owed(struct dir *d)
{
	return __atomic_load_n(&sm_ctr(SD(d)->slot)->redirected, __ATOMIC_SEQ_CST) + SD(d)->user;
}

/* Bytes taken from d's source that are not yet on d->dst's send queue; -1
 * when the reading is torn (not drained, count unknown). `want` is read
 * before the socket: bytes redirected after it can only add to the count.
 * *acked (if asked): dst's bytes acknowledged so far. */
static int64_t in_flight(struct dir *d, uint64_t *acked)
{
	uint64_t want = owed(d);
	struct tcpw now;

	if (d->dst->fd < 0 || tcpw_read(d->dst->fd, &now))
		return 0; /* the socket is gone: nothing more will be delivered */
	if (acked)
		*acked = now.acked;
	return tcpw_left(SD(d)->base, &now, want);
}

static void smwait_add(struct session *s)
{
	struct worker *w = s->w;

	/* backoff grows while the wait lasts; progress resets it to 0 */
	if (SS(s)->in_wait) {
		if (!SS(s)->backoff && SS(s)->due_ms > w->now_ms + 1)
			SS(s)->due_ms = w->now_ms + 1; /* progress: sooner than planned */
	} else {
		SS(s)->in_wait = 1;
		SS(s)->next = SW(w)->wait;
		SW(w)->wait = s;
		SS(s)->backoff = !SS(s)->backoff                   ? 1
				 : SS(s)->backoff < SM_BACKOFF_MAX_MS ? SS(s)->backoff * 2
								      : SM_BACKOFF_MAX_MS;
		SS(s)->due_ms = w->now_ms + SS(s)->backoff;
	}
	if (SS(s)->due_ms < SW(w)->next_due_ms)
		SW(w)->next_due_ms = SS(s)->due_ms;
}

/* While d waits for its redirect queue (its source ended), nothing is
 * redirected any more, so sm_sync sees no activity; the destination's peer
 * taking the queue is the progress instead, as each write is on copy:
 * half_close_timeout counts from the last byte it acknowledged. */
static int sm_drained(struct session *s, struct dir *d)
{
	uint64_t acked = SD(d)->acked;

	if (in_flight(d, &acked) == 0) {
		SS(s)->backoff = 0;
		return 1;
	}
	if (acked != SD(d)->acked) {
		SD(d)->acked = acked;
		s->active_ms = s->w->now_ms;
	}
	smwait_add(s);
	return 0;
}

static void sm_poll(struct worker *w)
{
	struct session **pp = &SW(w)->wait;
	uint64_t next = UINT64_MAX;

	if (w->now_ms < SW(w)->next_due_ms)
		return; /* nothing due yet */
	SW(w)->next_due_ms = UINT64_MAX; /* what resume puts back lowers it */
	while (*pp) {
		struct session *s = *pp;

		if (s->state == S_CLOSED) {
			*pp = SS(s)->next;
			SS(s)->in_wait = 0;
			continue;
		}
		if (w->now_ms < SS(s)->due_ms) {
			if (SS(s)->due_ms < next)
				next = SS(s)->due_ms;
			pp = &SS(s)->next;
			continue;
		}
		*pp = SS(s)->next;
		SS(s)->in_wait = 0;
		/* may put it back, at the head, due later: skipped above */
		session_resume(s);
	}
	if (next < SW(w)->next_due_ms)
		SW(w)->next_due_ms = next;
}

static int sm_spurious_epipe(const struct session *s, const struct side *sd, int err)
{
	const struct dir *into = sd == &s->cli ? &s->down : &s->up;

	return SS(s)->state == SM_ON && err == EPIPE && into->shut;
}

/* Takes s off the worker's drain-wait list (a closed session is freed at
 * the end of the loop turn: nothing may point at it then). */
static void smwait_del(struct session *s)
{
	struct session **pp;

	if (!SS(s)->in_wait)
		return;
	for (pp = &SW(s->w)->wait; *pp; pp = &SS(*pp)->next)
		if (*pp == s) {
			*pp = SS(s)->next;
			break;
		}
	SS(s)->in_wait = 0;
}

static void sm_end(struct session *s)
{
	struct worker *w = s->w;

	smwait_del(s);

	if (SS(s)->state != SM_ON)
		return;
	/* The last count. What never reached a send queue was not delivered:
	 * it was never counted (sync_dir), and it is pending, so its side
	 * gets an RST; with a torn reading, all not known to be queued is. */
	for (int i = 0; i < 2; i++) {
		struct dir *d = i ? &s->down : &s->up;
		int64_t left;

		uint64_t rep;

		sync_dir(s, d, &left);
		SD(d)->inflight = left >= 0 ? (uint64_t)left : SD(d)->seen - SD(d)->counted;
		if ((rep = __atomic_load_n(&sm_ctr(SD(d)->slot)->repeated, __ATOMIC_SEQ_CST))) {
			engine_count(w, &engine_sockmap, SM_CTR_REPEATED, rep);
			log_verbose("session %llx: sockmap %s: the kernel handed the program %llu bytes "
				    "a second time (a retransmission overlapping bytes already received); "
				    "cut before they went out", (unsigned long long)s->id,
				    i ? "down" : "up", (unsigned long long)rep);
		}
	}
	if (log_level >= LOG_DEBUG) {
		struct dir *ds[2] = { &s->up, &s->down };
		for (int i = 0; i < 2; i++) {
			volatile struct sm_ctr *c = sm_ctr(SD(ds[i])->slot);
			struct tcpw rd = { 0 };
			uint64_t wr = SD(ds[i])->base;
			int exact = ds[i]->dst->fd >= 0 && !tcpw_read(ds[i]->dst->fd, &rd) &&
				    tcpw_exact(&rd, &wr);
			static const char *const modes[] = { "kernel", "paused", "user", "lost" };
			log_debug("session %llx: sockmap %s: passed %llu redirected %llu user %llu; dst written "
				  "%lld since insertion%s; in flight %llu; peak in flight %u KiB; %s",
				  (unsigned long long)s->id, i ? "down" : "up", (unsigned long long)c->passed,
				  (unsigned long long)c->redirected, (unsigned long long)SD(ds[i])->user,
				  (long long)(wr - SD(ds[i])->base), exact ? "" : " (not known)",
				  (unsigned long long)SD(ds[i])->inflight, SS(s)->peak_kib[i],
				  modes[SD(ds[i])->mode & 3]);
		}
	}
	sm_remove(SS(s)->cookie[0], SS(s)->cookie[1]);
	slot_put(w, SD(&s->up)->slot);
	SS(s)->state = SM_NO;
}

/* Connected, PROXY header sent: the hand-off is tried after the next run. */
static void sm_opened(struct session *s)
{
	SS(s)->state = SM_WANTED;
}

static int sm_after_run(struct session *s)
{
	int more = 0;

	if (SS(s)->state == SM_WANTED) {
		sm_try_start(s);
		if (SS(s)->state == SM_ON)
			more = 1; /* read what the insert may have passed to user space */
	}
	if (SS(s)->state == SM_ON)
		sm_update_events(s);
	return more;
}

/* A direction in the map ends only once the kernel's redirect queue is on
 * its destination's send queue. */
static int sm_fin_ready(struct session *s, struct dir *d)
{
	return d->eng != &engine_sockmap || (!dir_broken(s, d) && sm_drained(s, d));
}

static void sm_each_turn(struct worker *w)
{
	if (SW(w)->wait)
		sm_poll(w);
}

static void sm_before_wait(struct worker *w, int *timeout_ms)
{
	uint64_t due = SW(w)->next_due_ms;
	int t;

	if (!SW(w)->wait)
		return;
	/* drain-waiting sessions are looked at with backoff: sleep until the
	 * first is due */
	t = due <= w->now_ms ? 0 : due - w->now_ms > 1000 ? 1000 : (int)(due - w->now_ms);
	if (*timeout_ms < 0 || *timeout_ms > t)
		*timeout_ms = t;
}

/* One alarm (bpf/sockmap.bpf.c): slot's direction redirected SM_CREDIT past
 * what its destination had taken. Stale ones (the session has gone, or its
 * slot went to another) only make a needless look. */
static int alarm_cb(void *ctx, void *data, size_t len)
{
	struct sm_worker *sw = ctx;
	struct session *s;
	struct dir *d;
	uint32_t slot;
	unsigned i;

	if (len < sizeof(slot))
		return 0;
	memcpy(&slot, data, sizeof(slot));
	i = slot / 2 - sw->first;
	if (slot / 2 < sw->first || i >= sw->per || !(s = sw->by_slot[i]))
		return 0;
	if (s->state == S_CLOSED || SS(s)->state != SM_ON)
		return 0;
	d = slot & 1 ? &s->down : &s->up;
	if (SD(d)->slot != slot || SD(d)->mode != SM_KERNEL)
		return 0;
	dir_look(s, d, in_flight(d, NULL));
	return 0;
}

static void sm_worker_event(struct worker *w)
{
	ring_buffer__consume(SW(w)->ring);
}

/* The worker's alarm ring goes into its loop (its epoll fd is readable
 * while the ring holds events). */
static int sm_worker_init(struct worker *w)
{
	struct sm_worker *sw = calloc(1, sizeof(*sw));
	struct epoll_event ev = { .events = EPOLLIN };
	int fd = sm_alarm_fd(w->id);

	if (!sw)
		return -ENOMEM;
	w->engine_priv[engine_sockmap.id] = sw;
	sw->efd.kind = EV_ENGINE;
	sw->efd.e = &engine_sockmap;
	sw->w = w;
	sw->next_due_ms = UINT64_MAX;
	if (fd < 0)
		return 0; /* not loaded: every session falls back (sm_setup said why) */
	if (!(sw->ring = ring_buffer__new(fd, alarm_cb, sw, NULL)))
		return -errno;
	ev.data.ptr = &sw->efd;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(sw->ring), &ev))
		return -errno;
	return 0;
}

static void sm_worker_fini(struct worker *w)
{
	if (!SW(w))
		return;
	ring_buffer__free(SW(w)->ring);
	free(SW(w)->free);
	free(SW(w)->by_slot);
	free(SW(w));
	w->engine_priv[engine_sockmap.id] = NULL;
}

static uint64_t sm_pending(const struct dir *d)
{
	return (uint64_t)(SD(d)->copy.tail - SD(d)->copy.head) + SD(d)->inflight;
}

static void sm_release(struct worker *w, struct dir *d)
{
	engine_copy.release(w, d); /* bytes passed to user space wait in a copy buffer */
}

static const struct engine_counter sm_counters[] = {
	{ "sockmap_sessions_total", "Sessions moved into the sockmap (experimental engine)." },
	{ "sockmap_fallbacks_total", "Sockmap-route sessions left on copy/splice." },
	{ "sockmap_pauses_total", "Sockmap directions paused: their destination had not taken what "
				  "was redirected (back-pressure)." },
	{ "sockmap_repeated_bytes_total", "Bytes the kernel handed the sockmap program a second time "
					  "(retransmissions overlapping bytes already received), cut "
					  "before they went out." },
};

struct engine engine_sockmap = {
	.name = "sockmap",
	.probe = sm_probe,
	.setup = sm_setup,
	.worker_init = sm_worker_init,
	.worker_fini = sm_worker_fini,
	.worker_event = sm_worker_event,
	.before_wait = sm_before_wait,
	.each_turn = sm_each_turn,
	.opened = sm_opened,
	.after_run = sm_after_run,
	.fin_ready = sm_fin_ready,
	.sync = sm_sync,
	.ignore_error = sm_spurious_epipe,
	.end = sm_end,
	.pump = sm_pump,
	.release = sm_release,
	.pending = sm_pending,
	.counters = sm_counters,
	.ncounters = 4,
};
