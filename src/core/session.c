/* SPDX-License-Identifier: MIT */
/* session: connecting to a backend (with retries), pumping both directions,
 * half-close, errors, timeouts and the close line of the log. */
#define _GNU_SOURCE
#include "session.h"

#include <alloca.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "access_log.h"
#include "addr.h"
#include "backend.h"
#include "engine.h"
#include "log.h"
#include "proxy_proto.h"
#include "route_admit.h"
#include "route_hist.h"
#include "session_int.h"
#include "session_pp.h"
#include "session_sock.h"
#include "tls_hello.h"
#include "tls_route.h"
#include "waitq.h"
#include "worker.h"

/* Reads per direction per turn before other sessions get theirs: with 512k
 * pipes up to 8 MiB, with 64k buffers up to 1 MiB. */
#define PUMP_BUDGET 16
/* A session short of a descriptor for its backend tries again this much later. */
#define SESSION_FD_RETRY_MS 100

static void session_timer_update(struct session *s);
static void session_log_line(struct session *s, const char *event);

/* Which side ended a session first, for the access log (access_log.h:
 * ended_by): the first FIN, reset or error seen, the first deadline that
 * passed, or this process's own decision. */
enum end_by { END_NONE, END_CLIENT, END_BACKEND, END_TIMEOUT, END_PROXY };
static const char *const end_names[] = { "-", "client", "backend", "timeout", "proxy" };

static void ended(struct session *s, enum end_by by)
{
	if (!s->ended_by)
		s->ended_by = (uint8_t)by;
}

static enum end_by end_of(const struct session *s, const struct side *sd)
{
	return sd == &s->cli ? END_CLIENT : END_BACKEND;
}

/* ---- the graceful close ------------------------------------------------------
 * max_session_time, and the drain's spread closes (session_drain_spread):
 * both sides are shut for reading (SHUT_RD: the kernel returns what it
 * holds, then the end), so each direction delivers every byte it read and
 * forwards a FIN, as a half-close does; the session closes once both peers
 * took everything (session_end), bounded by half_close_timeout without
 * progress. What a peer sends after its side was shut is not forwarded. */

/* A random fraction in [0, 1): a session id and a clock mixed (splitmix64);
 * spreading closes needs no better. */
static double unit_random(const struct session *s, uint64_t salt)
{
	uint64_t z = s->id ^ (salt * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)(uintptr_t)s;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (double)(z >> 11) / (double)(1ULL << 53);
}

/* max_session_time less a random share of up to max_session_jitter. */
static uint64_t lifetime_ms(const struct session *s, const struct route *r)
{
	double cut = (double)r->o.max_session_jitter / 100.0 * unit_random(s, s->start_ms);

	return (uint64_t)((double)r->o.max_session_time_ms * (1.0 - cut));
}

/* The graceful close begins at `when` (or sooner, if it was due sooner). */
static void session_expire_at(struct session *s, uint64_t when, uint8_t why)
{
	if (s->expiring || when >= s->expire_ms)
		return;
	s->expire_ms = when;
	s->expire_why = why;
}

static const char *expire_reason(const struct session *s)
{
	return s->expire_why == EXPIRE_DRAIN ? "drain" : "max-session-time";
}

static void session_run(struct session *s);

/* Begins the graceful close of an open session. */
static void session_expire(struct session *s)
{
	s->expiring = 1;
	ended(s, END_PROXY);
	if (s->expire_why == EXPIRE_DRAIN)
		CTR_ADD(s->w, expired_drain, 1);
	else
		CTR_ADD(s->w, expired_lifetime, 1);
	log_verbose("session %llx: %s: closing gracefully", (unsigned long long)s->id,
		    expire_reason(s));
	if (s->cli.fd < 0 || s->srv.fd < 0) {
		/* the engine holds the sockets (uring's fixed files): it shuts
		 * them; where it cannot, closed now, with a FIN where nothing of
		 * the kernel's is pending */
		if (!s->eng->shut_read || s->eng->shut_read(s) < 0) {
			session_close(s, expire_reason(s));
			return;
		}
	} else {
		shutdown(s->cli.fd, SHUT_RD);
		shutdown(s->srv.fd, SHUT_RD);
	}
	s->cli.can_read = s->srv.can_read = 1; /* read to the end now, no edge needed */
	session_run(s);
}

/* Before a graceful close's close(): what the peers sent after their side
 * was shut is dropped, so close() sends a FIN, not an RST (an RST would
 * discard what the kernel still holds for the peer). */
static void drop_unread(const struct side *sd)
{
	for (int i = 0; i < 64 && sd->fd >= 0; i++)
		if (recv(sd->fd, NULL, 1 << 20, MSG_TRUNC | MSG_DONTWAIT) <= 0)
			break;
}

/* The first half of the drain is the sessions' own: those that end by
 * themselves in it (a client finishing its exchange during a proper
 * leave) are never cut. The ones still open then are closed at moments
 * spread over the next 40 %, so their clients do not all reconnect at
 * once, and the last 10 % is left for their bytes and FINs. (Spread over
 * the whole drain, the closes cut 2 of 9 sessions the fleet's lame-duck
 * leave holds through the drain, in its first second.) */
void session_drain_spread(struct worker *w, uint64_t deadline_ms)
{
	uint64_t now = w->now_ms, left = deadline_ms > now ? deadline_ms - now : 0;
	uint64_t start = now + left / 2, span = left * 4 / 10;

	if (!w->cfg->drain_spread)
		return;
	for (struct session *s = w->sessions; s; s = s->next) {
		session_expire_at(s, start + (uint64_t)((double)span * unit_random(s, now)),
				  EXPIRE_DRAIN);
		if (s->state == S_OPEN)
			timer_set_earlier(&w->timers, &s->timer, s->expire_ms);
	}
}

/* ---- live bytes ------------------------------------------------------------
 * The route's and backend's byte counters take a session's bytes about once
 * a second while it runs, not only when it ends (a pooled connection would
 * look idle for hours): a session that moved bytes goes on the worker's
 * dirty list once (a flag test per pump, nothing per byte), and
 * session_flush_bytes adds the deltas of the listed ones only. */
static void bytes_dirty(struct session *s)
{
	struct worker *w = s->w;

	if (s->in_dirty)
		return;
	s->in_dirty = 1;
	s->dirty_prev = NULL;
	s->dirty_next = w->dirty;
	if (w->dirty)
		w->dirty->dirty_prev = s;
	w->dirty = s;
}

static void bytes_undirty(struct session *s)
{
	if (!s->in_dirty)
		return;
	if (s->dirty_prev)
		s->dirty_prev->dirty_next = s->dirty_next;
	else
		s->w->dirty = s->dirty_next;
	if (s->dirty_next)
		s->dirty_next->dirty_prev = s->dirty_prev;
	s->dirty_prev = s->dirty_next = NULL;
	s->in_dirty = 0;
}

/* What moved since the last report goes to the counters. They are
 * Prometheus counters, which never go down: a direction's bytes below what
 * was reported (an engine taking a count back) would wrap into an
 * enormous addition, so such a direction adds nothing until it passes its
 * reported mark again (struct dir: bytes never decrease). */
static void bytes_report(struct session *s)
{
	uint64_t up = s->up.bytes > s->reported[0] ? s->up.bytes - s->reported[0] : 0;
	uint64_t down = s->down.bytes > s->reported[1] ? s->down.bytes - s->reported[1] : 0;

	if (!up && !down)
		return;
	s->reported[0] += up;
	s->reported[1] += down;
	STAT_ADD(s->route->st->bytes_up, up);
	STAT_ADD(s->route->st->bytes_down, down);
	if (s->opened) {
		STAT_ADD(s->route->health[s->backend]->bytes_up, up);
		STAT_ADD(s->route->health[s->backend]->bytes_down, down);
	}
}

/* The backend's answer time (route_hist.h, first_byte): from the first
 * client byte written to it, or from its connection being up when it
 * speaks first, to its first byte written to the client. A flag test per
 * pump once seen. */
static void first_bytes(struct session *s)
{
	uint64_t now;

	if (s->answered || (!s->down.bytes && s->first_up_us) || (!s->down.bytes && !s->up.bytes))
		return;
	now = route_hist_now_us();
	if (!s->down.bytes) {
		s->first_up_us = now;
		return;
	}
	s->answered = 1;
	now -= s->first_up_us ? s->first_up_us : s->open_us;
	route_hist_add(s->route, s->w->id, HIST_FIRST_BYTE, (int64_t)now > 0 ? now : 0);
}

/* For engines that count bytes outside dir_pump (a completion, a sync). */
static void bytes_check(struct session *s)
{
	if (s->up.bytes != s->reported[0] || s->down.bytes != s->reported[1]) {
		bytes_dirty(s);
		first_bytes(s);
	}
}

void session_flush_bytes(struct worker *w)
{
	struct session *s = w->dirty, *next;

	w->dirty = NULL;
	for (; s; s = next) {
		next = s->dirty_next;
		s->dirty_prev = s->dirty_next = NULL;
		s->in_dirty = 0;
		bytes_report(s);
	}
}

static int local_warned; /* a local connect error was logged (atomic) */
static int loop_warned;  /* a connection loop was logged (atomic) */

static int side_register(struct worker *w, struct side *sd)
{
	sd->ev = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
	return worker_watch(w, sd->fd, sd->ev, sd, &sd->watch);
}

/* Out of the worker's watch, then closed (worker.h: a ring's poll would
 * hold the socket open). */
static void side_unwatch_close(struct worker *w, struct side *sd)
{
	worker_unwatch_close(w, sd->fd, &sd->watch);
	sd->fd = -1;
}

static void dir_init(struct dir *d, struct side *src, struct side *dst, const struct route *r)
{
	const struct engine_choice *c = &engine_choices[r->o.engine];

	d->src = src;
	d->dst = dst;
	d->eng = c->start;
	d->stream = c->stream;
	if (d->eng->attach)
		d->eng->attach(d);
}

/* d moves to engine e; the one it leaves holds nothing (PUMP_SWITCH and
 * PUMP_FALLBACK say so), so its state starts afresh. */
static void dir_move(struct dir *d, const struct engine *e)
{
	memset(d->priv, 0, sizeof(d->priv));
	d->eng = e;
	if (e->attach)
		e->attach(d);
}

static const char *dir_name(const struct session *s, const struct dir *d)
{
	return d == &s->up ? "client->backend" : "backend->client";
}

/* Moves one direction as far as it goes; switches engines as asked. Returns
 * 0, or -errno when the direction failed. *more is set when the budget ran
 * out with the source still readable. */
static int dir_pump(struct session *s, struct dir *d, int *more)
{
	struct worker *w = s->w;
	unsigned budget = PUMP_BUDGET;
	uint64_t before = d->bytes;
	int r;

	for (;;) {
		r = d->eng->pump(w, d, &budget);
		if (r == PUMP_SWITCH && d->stream) {
			/* auto: a stream, and the engine holds nothing, so the
			 * next one takes over without reordering. */
			dir_move(d, d->stream);
			d->stream = NULL;
			CTR_ADD(w, auto_switches, 1);
			log_verbose("session %llx: %s switched to %s after %llu bytes",
				    (unsigned long long)s->id, dir_name(s, d), d->eng->name,
				    (unsigned long long)d->bytes);
			continue;
		}
		if (r == PUMP_FALLBACK && d->eng->fallback) {
			/* the engine cannot go on here (no pipe, a socket that
			 * refuses splice) and holds nothing */
			log_verbose("session %llx: %s falls back to %s (%s cannot go on)",
				    (unsigned long long)s->id, dir_name(s, d), d->eng->fallback->name,
				    d->eng->name);
			dir_move(d, d->eng->fallback);
			d->stream = NULL;
			d->why = WHY_FALLBACK;
			continue;
		}
		if (r > 0)
			r = 0;
		break;
	}
	if (d->bytes != before) {
		uint64_t solo = d->solo + (d->bytes - before);

		d->solo = solo > UINT32_MAX ? UINT32_MAX : (uint32_t)solo;
		(d == &s->up ? &s->down : &s->up)->solo = 0; /* a turn: not one-way */
		if (s->last_mover != (d == &s->up ? 1 : 2)) { /* request/response (turns_due) */
			s->last_mover = d == &s->up ? 1 : 2;
			s->turns += s->turns < UINT16_MAX;
		}
		s->active_ms = w->now_ms;
		bytes_dirty(s);
		first_bytes(s);
		if (d == &s->up)
			CTR_ADD(w, bytes_up, d->bytes - before);
		else
			CTR_ADD(w, bytes_down, d->bytes - before);
	}
	if (r < 0)
		return r;
	if (!budget && d->src->can_read && !d->eof)
		*more = 1;
	/* The end of a stream read from a reset socket is a reset, whatever
	 * read() said (the error may have been taken by a write). */
	if (d->eof && d->src->broken)
		d->rst = 1;
	if (d->eof)
		ended(s, end_of(s, d->src));
	/* FIN forwarding: only once every byte before it has been written,
	 * and once the engine agrees (bytes it moves in the kernel). */
	if (d->eof && !d->rst && !d->shut && !dir_pending(d) &&
	    (!s->eng->fin_ready || s->eng->fin_ready(s, d))) {
		const struct dir *other = d == &s->up ? &s->down : &s->up;

		d->shut = 1;
		/* The other direction already ended cleanly (its FIN read from
		 * dst and forwarded): the session closes in this run, and close()
		 * sends this FIN too (dst's receive queue is empty), so the
		 * shutdown() would be a system call for nothing. */
		if (other->shut && other->eof && !other->rst && !other->dead)
			return 0;
		if (shutdown(d->dst->fd, SHUT_WR) && errno != ENOTCONN)
			return dir_fail(d, errno, 1);
	}
	return 0;
}

static void runq_push(struct session *s)
{
	struct worker *w = s->w;

	if (s->in_runq)
		return;
	s->in_runq = 1;
	s->rq_next = w->runq;
	w->runq = s;
}

static const char *failure_reason(const struct session *s, const struct dir *d)
{
	int at_client = (d->err_at_dst ? d->dst : d->src) == &s->cli;

	if (d->err == ECONNRESET || d->err == EPIPE)
		return at_client ? "client-reset" : "backend-reset";
	if (d->err == ETIMEDOUT)
		return at_client ? "client-timeout" : "backend-timeout";
	if (d->err == ENOMEM)
		return "out-of-memory";
	return at_client ? "client-error" : "backend-error";
}

/* Per-direction state (issue 12): an error ends what it touches, not the
 * session. HAProxy keeps shutr/shutw per channel and nginx closes lingering
 * for the same reason: a backend that answers early and resets (a 413 to an
 * upload) must still have its answer delivered.
 *   - An error writing to a socket ends the direction that writes to it
 *     (dead: its pending bytes are dropped) and marks the socket broken.
 *   - The direction reading a broken socket (or one whose read failed)
 *     drains what the kernel still returns, delivers it, and ends with a
 *     reset (rst) instead of a FIN.
 *   - A side gets an RST at the end when the stream toward it was cut, bytes
 *     for it were lost, or its own bytes could not be delivered; never before
 *     everything delivered to it has left its send queue (session_end). */
static void dir_kill(struct session *s, struct dir *d)
{
	if (d->dead)
		return;
	d->dead = 1;
	if (d->eng->release)
		d->eng->release(s->w, d);
	if (s->eng->dir_dead)
		s->eng->dir_dead(s, d);
}

static void side_broken(struct session *s, struct side *sd)
{
	if (sd->broken)
		return;
	sd->broken = 1;
	sd->can_read = 1; /* a broken socket returns data, 0 or an error: never EAGAIN */
	dir_kill(s, sd == &s->cli ? &s->down : &s->up);
}

static void dir_error(struct session *s, struct dir *d)
{
	ended(s, end_of(s, d->err_at_dst ? d->dst : d->src));
	if (!s->fail) {
		s->fail = failure_reason(s, d);
		s->fail_err = d->err;
	}
	if (d->err_at_dst) {
		side_broken(s, d->dst);
	} else {
		d->eof = d->rst = 1;
		side_broken(s, d->src);
	}
}

/* Nothing more will move in d. An engine may hold a reset's end back
 * (bytes it moves in the kernel not yet on dst's send queue; it re-runs
 * the session then). */
static int dir_over(struct session *s, struct dir *d)
{
	if (d->shut || d->dead)
		return 1;
	if (!d->rst || dir_pending(d))
		return 0;
	return !s->eng->fin_ready || s->eng->fin_ready(s, d);
}

/* Pumps d; an error changes the state of the session rather than closing
 * it. Returns 1 when the state changed (run both directions again), 0, or
 * -1 when the session was closed. */
static int dir_step(struct session *s, struct dir *d, int *more)
{
	if (d->dead || d->shut)
		return 0;
	if (dir_pump(s, d, more) >= 0)
		return 0;
	if (d->err == ENOMEM) {
		ended(s, END_PROXY);
		s->fail_err = ENOMEM;
		session_close(s, failure_reason(s, d));
		return -1;
	}
	dir_error(s, d);
	return 1;
}

static int side_outq(const struct side *sd)
{
	int q = 0;

	if (sd->fd < 0 || ioctl(sd->fd, SIOCOUTQ, &q) || q < 0)
		return 0;
	return q;
}

/* The engine holds the sockets where SIOCOUTQ cannot reach them (uring's
 * fixed file table: its descriptors were closed). A session auto moved to
 * io_uring keeps its descriptors, and so the RSTs of copy: a reset source
 * is passed on as a reset once the other side took what came before it. */
static int send_queue_blind(const struct session *s)
{
	return s->eng->blind_send_queue && (s->cli.fd < 0 || s->srv.fd < 0);
}

static int wants_rst(const struct session *s, const struct side *sd)
{
	const struct dir *to = sd == &s->cli ? &s->down : &s->up;
	const struct dir *from = sd == &s->cli ? &s->up : &s->down;

	return !sd->broken && (to->rst || dir_pending(to) || from->dead);
}

/* Both directions are over: close, unless a side that gets an RST still
 * holds delivered bytes in its send queue (an RST discards them; HAProxy
 * and nginx deliver them). Then wait (session_check_timeouts looks again)
 * while the peer takes them, bounded by half_close_timeout without progress. */
static void session_end(struct session *s, int timed_out)
{
	struct side *sides[2] = { &s->cli, &s->srv };
	int wait = 0;

	for (int i = 0; i < 2 && !timed_out; i++) {
		/* a graceful close waits for both: a peer that sends after its
		 * side was shut would have the kernel reset it at close() */
		int q = wants_rst(s, sides[i]) || s->expiring ? side_outq(sides[i]) : 0;

		if (q && (!s->ending || (uint32_t)q < s->outq[i]))
			s->active_ms = s->w->now_ms; /* the peer is taking them */
		s->outq[i] = (uint32_t)q;
		wait |= q > 0;
	}
	if (wait) {
		s->ending = 1;
		return;
	}
	if (s->expiring) {
		drop_unread(&s->cli);
		drop_unread(&s->srv);
	}
	session_close(s, s->fail ? s->fail : timed_out ? "half-close-timeout"
		      : s->expiring ? expire_reason(s) : "done");
}

/* auto: a session that behaves as request/response moves whole to the
 * route's turns engine (io_uring, engine_list.h): its bytes changed direction
 * auto_uring_turns times, both directions are still on the start engine
 * (neither was a stream), hold nothing, and have ended nothing. A short
 * connection (one question, one answer) never gets there: it costs less on
 * copy (doc/performance.md). Not while the worker drains (an upgrade hands
 * copy sessions over as they are). */
static int turns_due(const struct session *s)
{
	const struct route *r = s->route;
	const struct engine_choice *c = &engine_choices[r->o.engine];
	const struct dir *d[2] = { &s->up, &s->down };

	if (!r->turns || s->turns < r->o.auto_uring_turns || s->state != S_OPEN || s->ending ||
	    s->expiring || s->w->draining || s->w->turns_off || s->eng != c->session)
		return 0;
	if (s->cli.urg || s->srv.urg || s->cli.broken || s->srv.broken)
		return 0;
	for (int i = 0; i < 2; i++)
		if (d[i]->eng != c->start || !d[i]->stream || d[i]->eof || d[i]->shut || d[i]->dead ||
		    d[i]->err || d[i]->urg_state || d[i]->lowat_set ||
		    (d[i]->eng->pending && d[i]->eng->pending(d[i])))
			return 0;
	return 1;
}

static void turns_move(struct session *s)
{
	struct worker *w = s->w;
	const struct engine *e = s->route->turns;
	unsigned turns = s->turns;
	int r;

	s->turns = 0;
	if ((r = worker_engine_start(w, e)) < 0) {
		log_warn("worker %u: %s engine: %s; request/response sessions stay on copy", w->id,
			 e->name, strerror(-r));
		w->turns_off = 1;
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct dir *d = i ? &s->down : &s->up;

		if (d->eng->release)
			d->eng->release(w, d); /* holds nothing: its pool buffer, if any */
		memset(d->priv, 0, sizeof(d->priv));
		d->stream = NULL;
		d->why = WHY_TURNS;
	}
	s->eng = e;
	CTR_ADD(w, auto_turns_moves, 1);
	log_verbose("session %llx: request/response (%u turns): moves to %s", (unsigned long long)s->id,
		    turns, e->name);
	e->drive(s); /* the engine's start; a failure closes the session */
}

int session_turns_back(struct session *s, const struct dir_handoff *h)
{
	struct worker *w = s->w;
	const struct engine_choice *c = &engine_choices[s->route->o.engine];
	int r = 0;

	if (s->giving_back) {
		s->giving_back = 0;
		w->giving_back--;
	}
	s->eng = c->session;
	s->turns = 0;
	s->last_mover = 0;
	for (int i = 0; i < 2; i++) {
		struct dir *d = i ? &s->down : &s->up;

		dir_move(d, c->start);
		d->stream = c->stream;
		d->why = WHY_AS_SET;
		if (!r && h[i].len && (!d->eng->hand_in || (r = d->eng->hand_in(w, d, &h[i])) < 0))
			r = r < 0 ? r : -EINVAL;
	}
	for (int i = 0; i < 2; i++) {
		struct side *sd = i ? &s->srv : &s->cli;

		sd->can_read = sd->can_write = 1;
		if (!r)
			r = side_register(w, sd);
	}
	CTR_ADD(w, auto_turns_returns, 1);
	if (r < 0) {
		log_warn("session %llx: back from its request/response engine: %s",
			 (unsigned long long)s->id, strerror(-r));
		session_close(s, "engine-return");
		return r;
	}
	log_verbose("session %llx: back on %s", (unsigned long long)s->id, c->start->name);
	runq_push(s);
	return 0;
}

static void session_run(struct session *s)
{
	int more = 0;

	if (s->state != S_OPEN)
		return;
	if (s->eng->drive && s->eng->drive(s))
		return; /* the engine moves this session itself from here on */
	/* Each state change (a direction ends, a side breaks) is final, so
	 * a few passes settle it. */
	for (int pass = 0; pass < 4; pass++) {
		int a = dir_step(s, &s->up, &more), b;

		if (a < 0 || (b = dir_step(s, &s->down, &more)) < 0)
			return;
		if (!a && !b)
			break;
	}
	if (dir_over(s, &s->up) && dir_over(s, &s->down)) {
		session_end(s, 0);
		return;
	}
	if (s->eng->after_run && s->eng->after_run(s))
		more = 1;
	if (!more && turns_due(s)) {
		turns_move(s);
		return;
	}
	if (more)
		runq_push(s);
}

/* An engine that drives its sessions itself (engine.h, drive) reports here:
 * the same model with its means. A reset source ends its direction
 * (dir_ended: like a FIN once its queue is sent); a failed destination ends
 * the direction writing to it (dir_dead), and the other one's source is
 * that broken socket, so it ends too. */
void session_io_result(struct session *s)
{
	struct dir *dirs[2] = { &s->up, &s->down };

	if (s->state != S_OPEN)
		return;
	bytes_check(s);
	for (int i = 0; i < 2; i++) {
		struct dir *d = dirs[i], *other = dirs[!i];

		if (d->eof && !d->err)
			ended(s, end_of(s, d->src));
		if (!d->err || d->dead || d->rst)
			continue;
		ended(s, d->err == ENOMEM ? END_PROXY : end_of(s, d->err_at_dst ? d->dst : d->src));
		if (!s->fail) {
			s->fail = failure_reason(s, d);
			s->fail_err = d->err;
		}
		if (d->err == ENOMEM) {
			session_close(s, s->fail);
			return;
		}
		if (d->err_at_dst) {
			d->dead = 1;
			d->dst->broken = 1;
			if (s->eng->dir_dead)
				s->eng->dir_dead(s, d);
			continue;
		}
		d->src->broken = 1;
		d->rst = d->eof = 1;
		d->err = 0;
		if (s->eng->dir_ended)
			s->eng->dir_ended(s, d);
		if (!other->err && !other->shut) { /* it writes to the reset socket */
			dir_fail(other, ECONNRESET, 1), other->dead = 1;
			if (s->eng->dir_dead)
				s->eng->dir_dead(s, other);
		}
	}
	if (dir_over(s, &s->up) && dir_over(s, &s->down)) {
		if (send_queue_blind(s))
			session_close(s, s->fail ? s->fail : s->expiring ? expire_reason(s) : "done");
		else
			session_end(s, 0); /* an RST due waits for its side's send queue */
	} else {
		session_timer_update(s); /* half-closed now: a nearer deadline */
	}
}

void session_resume(struct session *s)
{
	session_run(s);
	session_timer_update(s);
}

/* The backend connection is up: with proxy_protocol, its first bytes are
 * the header. A fresh socket's send buffer is empty, so the header (at most
 * PROXY_V2_MAX bytes with its TLVs) goes in one non-blocking send; a short one ends the session
 * rather than let a later engine write stream bytes ahead of it. Returns 0,
 * or -1 when the session was closed. */
static int mark_open(struct session *s)
{
	uint8_t hdr[PROXY_HDR_MAX];
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	size_t n;
	int r;

	s->state = S_OPEN;
	s->opened = 1;
	s->open_ms = s->w->now_ms;
	s->open_us = route_hist_now_us();
	route_hist_add(s->route, s->w->id, HIST_CONNECT,
		       s->open_us > s->connect_us ? s->open_us - s->connect_us : 0);
	STAT_ADD(s->route->health[s->backend]->sessions, 1);
	backend_connect_result(s->route, s->backend, 1);
	if ((r = session_sock_opened(s)) < 0) { /* fastopen: what the SYN took */
		ended(s, END_PROXY);
		session_close(s, "fastopen-error");
		return -1;
	} else if (r) {
		s->up.bytes += (uint64_t)r;
		CTR_ADD(s->w, bytes_up, (uint64_t)r);
		bytes_dirty(s);
	}
	if (!s->route->o.proxy_protocol)
		goto opened;
	if (getsockname(s->cli.fd, (struct sockaddr *)&local, &llen))
		llen = 0, local.ss_family = AF_UNSPEC;
	n = proxy_build((int)s->route->o.proxy_protocol, (struct sockaddr *)&s->peer, s->peerlen,
			(struct sockaddr *)&local, llen, hdr);
	if (s->route->o.proxy_protocol == 2)
		n = session_pp_build(s, hdr, n, sizeof(hdr));
	if (send(s->srv.fd, hdr, n, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)n) {
		log_verbose("session %llx: PROXY header to %s: %s", (unsigned long long)s->id,
			    s->route->backend[s->backend].addr.text, strerror(errno));
		s->fail_err = errno;
		ended(s, END_BACKEND);
		session_close(s, "proxy-header-send");
		return -1;
	}
opened:
	if (s->eng->opened) /* after the header, which goes first */
		s->eng->opened(s);
	if (s->w->cfg->log_connect)
		session_log_line(s, "connect");
	return 0;
}

/* Errors of this host, not of the backend: out of ports, buffers, memory or
 * descriptors, no local route, a local firewall. They say nothing about the
 * backend's health, so they never count toward marking it down (with checks
 * on, an overloaded proxy would otherwise take every backend down). */
static int local_error(int err)
{
	switch (err) {
	case EADDRNOTAVAIL: case EADDRINUSE: case ENOBUFS: case ENOMEM:
	case EMFILE: case ENFILE: case ENETUNREACH: case ENETDOWN:
	case EPERM: case EACCES:
		return 1;
	}
	return 0;
}

/* A connect to the current backend failed, at once or later: counted for
 * the worker, the route and the backend, and for passive health unless it
 * was this host's error (local, 1: only synchronous connect() errors are
 * ours for sure; an ENETUNREACH reported later came from the network). */
static void connect_error(struct session *s, int err, int local)
{
	const char *backend = s->route->backend[s->backend].addr.text;

	s->conn_err = err;
	if (local) {
		CTR_ADD(s->w, connect_local_errors, 1);
		if (!__atomic_exchange_n(&local_warned, 1, __ATOMIC_RELAXED))
			log_warn("connect to backend %s: %s: an error of this host, not of the "
				 "backend (not counted against its health); logged once, counted in "
				 "splicer_connect_local_errors_total", backend, strerror(err));
		log_verbose("session %llx: backend %s: connect: %s (local)", (unsigned long long)s->id,
			    backend, strerror(err));
		return;
	}
	CTR_ADD(s->w, connect_errors, 1);
	STAT_ADD(s->route->st->connect_errors, 1);
	STAT_ADD(s->route->health[s->backend]->connect_errors, 1);
	log_verbose("session %llx: backend %s: connect: %s", (unsigned long long)s->id, backend,
		    strerror(err));
	backend_connect_result(s->route, s->backend, 0);
	/* at the default level too, one line per backend per interval */
	backend_connect_failed(s->route, s->backend, err, s->w->now_ms);
}

/* Gives back the backend slot s holds; a route with clients waiting for a
 * slot has them look (waitq.h). */
static void session_unhold(struct session *s)
{
	if (!s->counted)
		return;
	s->counted = 0;
	backend_release(s->route, s->backend);
	if (!s->route->backend[s->backend].maxconn)
		return;
	/* the slot given back before the look at the queue, as a new waiter
	 * counts itself before it looks at the slots (waitq_run): one of the
	 * two sees the other */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->route->st->queued, __ATOMIC_RELAXED))
		waitq_kick(s->w->sh);
}

/* Every usable backend is at its maxconn: s waits for a slot, in arrival
 * order; a retry that finds them full again keeps its place and its time. */
static void session_enqueue(struct session *s)
{
	s->state = S_QUEUED;
	if (s->in_waitq)
		return;
	s->in_waitq = 1;
	s->queued_ms = s->w->now_ms;
	STAT_ADD(s->route->st->queued, 1);
	waitq_add(s->w, s);
}

static void session_leave_queue(struct session *s)
{
	if (!s->in_waitq)
		return;
	s->in_waitq = 0;
	waitq_del(s->w, s);
	__atomic_sub_fetch(&s->route->st->queued, 1, __ATOMIC_RELAXED);
}

/* No descriptor for the backend socket (ulimit -n): a shortage of this
 * host that sessions closing or moving into a ring's fixed table end
 * within moments. The client, accepted already, waits for one (the same
 * backend again in SESSION_FD_RETRY_MS, while its connect_timeout lasts)
 * rather than being reset; accepting pauses meanwhile (worker_fd_pause).
 * Returns 1 when s waits. */
static int session_fd_wait(struct session *s)
{
	uint64_t deadline = s->connect_start_ms + s->route->o.connect_timeout_ms;

	if (s->w->now_ms + SESSION_FD_RETRY_MS >= deadline)
		return 0;
	s->tries--; /* this backend, once it can */
	s->fd_retry_ms = s->w->now_ms + SESSION_FD_RETRY_MS;
	s->connect_deadline_ms = deadline;
	return 1;
}

/* Tries backends from the current one on, each at most once. Returns 0 when
 * a connect is under way or done (or s waits in the queue), -1 when the
 * session was closed. */
static int session_connect(struct session *s)
{
	struct worker *w = s->w;
	struct route *rt = s->route;
	unsigned attempts = 0;

	unsigned full = 0;

	while (s->tries < rt->nbackend) {
		const struct addr *b;
		int fd, r;

		s->backend = (s->first + s->tries++) % rt->nbackend;
		b = &rt->backend[s->backend].addr;
		/* before the look at its mark: backend_cut raises it after */
		s->cut_seq = __atomic_load_n(&rt->health[s->backend]->cut_seq, __ATOMIC_ACQUIRE);
		if (!backend_eligible(rt, s->backend))
			continue; /* marked down, draining, disabled, or a backup while a primary
				     is usable: never waited on */
		if (!backend_try_hold(rt, s->backend)) {
			full++; /* at its maxconn */
			continue;
		}
		s->counted = 1;
		if (attempts++ || s->attempted) {
			CTR_ADD(w, connect_retries, 1);
			STAT_ADD(rt->st->retries, 1);
		} else {
			s->connect_start_ms = w->now_ms;
			s->connect_us = route_hist_now_us();
		}
		s->attempted = 1;
		/* with the route's socket options and source (session_sock.h) */
		fd = session_sock_backend(s, &rt->backend[s->backend]);
		if (fd < 0) {
			connect_error(s, -fd, 1); /* warns once, not once per session */
			session_unhold(s);
			if (fd != -EMFILE && fd != -ENFILE && fd != -ENOBUFS && fd != -ENOMEM)
				continue; /* a source or an option of this backend's */
			if (fd != -ENOBUFS && fd != -ENOMEM) { /* no descriptor for the backend: */
				worker_fd_pause(w, "backend socket", -fd); /* stop taking clients */
				if (session_fd_wait(s))
					return 0;
			}
			break; /* out of descriptors: another backend will not help */
		}
		r = session_sock_connect(s, fd, &rt->backend[s->backend]);
		if (r == 0 || r == -EINPROGRESS) {
			if (rt->backend[s->backend].this_host)
				loop_guard_add(&s->loop, fd, (const struct sockaddr *)&b->ss, b->len);
			s->srv.fd = fd;
			if (side_register(w, &s->srv)) {
				log_warn("session %llx: epoll_ctl: %s", (unsigned long long)s->id,
					 strerror(errno));
				break;
			}
			s->connect_deadline_ms = w->now_ms + rt->o.connect_timeout_ms;
			if (r == 0 && mark_open(s))
				return -1;
			return 0;
		}
		connect_error(s, -r, local_error(-r));
		session_unhold(s);
		close(fd);
	}
	if (full) {
		/* every backend that is up and not tried is at its maxconn: wait
		 * for a slot (nothing is read from the client meanwhile) */
		session_enqueue(s);
		return 0;
	}
	if (!s->attempted) {
		CTR_ADD(w, all_down, 1);
		STAT_ADD(rt->st->all_down, 1);
		ended(s, END_PROXY);
		session_close(s, "all-backends-down");
		return -1;
	}
	CTR_ADD(w, no_backend, 1);
	STAT_ADD(rt->st->no_backend, 1);
	ended(s, s->conn_err == ETIMEDOUT ? END_TIMEOUT : END_BACKEND);
	session_close(s, "no-backend");
	return -1;
}

/* The current backend attempt failed (refused, unreachable or timed out):
 * drop its socket and go on with the next. */
static void session_try_next(struct session *s);

static void session_connect_failed(struct session *s, int err, int local)
{
	connect_error(s, err, local);
	session_try_next(s);
}

/* Drops the backend attempt under way and goes on with the next backend. */
static void session_try_next(struct session *s)
{
	loop_guard_del(&s->loop);
	session_unhold(s);
	s->tfo_sent = 0; /* what rode in its SYN is still the client's: the next one sends it */
	side_unwatch_close(s->w, &s->srv);
	s->srv.can_read = s->srv.can_write = s->srv.rdhup = 0;
	if (session_connect(s) == 0 && s->state == S_OPEN)
		session_run(s);
}

/* s moves to route r before any byte went either way and without a
 * backend: its engine and directions start afresh on r's. Its hold moves
 * too: r's generation counts it, s->route's no longer. */
static void session_move_route(struct session *s, struct route *r)
{
	STAT_ADD(r->live, 1);
	__atomic_sub_fetch(&s->route->live, 1, __ATOMIC_RELEASE);
	s->route = r;
	s->eng = engine_choices[r->o.engine].session;
	memset(s->up.priv, 0, sizeof(s->up.priv));
	memset(s->down.priv, 0, sizeof(s->down.priv));
	dir_init(&s->up, &s->cli, &s->srv, r);
	dir_init(&s->down, &s->srv, &s->cli, r);
}

/* s's route is final: its engine, its counters, its backend choice. */
static void session_set_route(struct session *s, struct route *r)
{
	if (r != s->route)
		session_move_route(s, r); /* the same config generation */
	s->routed = 1;
	STAT_ADD(r->st->sessions, 1);
	STAT_ADD(r->st->active, 1);
	session_sock_client(s); /* keepalive, user timeout, rate limit: what the listener lacks */
	if (r->o.max_session_time_ms)
		session_expire_at(s, s->start_ms + lifetime_ms(s, r), EXPIRE_LIFETIME);
}

/* Refusals are logged at most once per route every REFUSE_LOG_MS, with how
 * many there were since; each is counted in /metrics by reason. */
#define REFUSE_LOG_MS 10000

static void log_refusal(struct session *s, const char *why)
{
	struct route_stats *st = s->route->st;
	uint64_t last = __atomic_load_n(&st->refuse_logged_ms, __ATOMIC_RELAXED);
	uint64_t n = __atomic_add_fetch(&st->refused_unlogged, 1, __ATOMIC_RELAXED);
	char peer[ADDR_TEXT_MAX];

	if (last && s->w->now_ms - last < REFUSE_LOG_MS)
		return;
	if (!__atomic_compare_exchange_n(&st->refuse_logged_ms, &last, s->w->now_ms, 0,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	__atomic_sub_fetch(&st->refused_unlogged, n, __ATOMIC_RELAXED);
	addr_format((struct sockaddr *)&s->peer, s->peerlen, peer, sizeof(peer));
	log_warn("route %s: refused client %s (%s)%s; refusals are logged at most every %d s "
		 "and counted in splicer_route_refused_total", s->route->name, peer, why,
		 n > 1 ? " and others since the last line" : "", REFUSE_LOG_MS / 1000);
}

/* Admission said no: the client is reset at once (as HAProxy's reject
 * does), counted on s's route by reason and logged rate-limited. Returns -1
 * (closed). */
static int session_refuse(struct session *s, enum admit_result a)
{
	struct route_stats *st = s->route->st;

	STAT_ADD(*(a == ADMIT_DENIED ? &st->denied
		   : a == ADMIT_TOO_FAST ? &st->source_rate_rejected
		   : a == ADMIT_TABLE_FULL ? &st->source_table_full
		   : &st->source_conns_rejected), 1);
	log_refusal(s, admit_reason(a));
	s->refused = 1;
	ended(s, END_PROXY);
	session_close(s, admit_reason(a));
	return -1;
}

/* The route is known (and, with accept_proxy, the real client): admission,
 * then a backend. A client that waited for its ClientHello may hold its
 * source's count on this route already (session_begin): it is not counted
 * twice. Returns -1 when the session was closed. */
static int session_start(struct session *s)
{
	struct route *r = s->route;
	const struct sockaddr *peer = (struct sockaddr *)&s->peer;
	enum admit_result a = route_admit_acl(r, peer);
	int held = 0;

	if (a == ADMIT_OK && !s->src_held) {
		a = route_admit_sources(r, peer, s->w->now_ms, &held);
		s->src_held = (uint8_t)held;
	}
	if (a != ADMIT_OK)
		return session_refuse(s, a);
	s->first = backend_pick(r, (struct sockaddr *)&s->peer, s->peerlen);
	s->state = S_CONNECTING;
	/* waiters first: a newcomer does not take a slot someone waits for */
	if (r->has_queue && __atomic_load_n(&r->st->queued, __ATOMIC_RELAXED)) {
		session_enqueue(s);
		return 0;
	}
	if (session_connect(s))
		return -1;
	if (s->state == S_OPEN)
		session_run(s);
	return 0;
}

/* A listener with sni routes, before the ClientHello names the route: a
 * client that every route's allow/deny refuses is reset now (no hello can
 * let it in), and one waiting for its hello counts against the source
 * limits of the route it is on until then, the listener's default (or,
 * without one, its first route: session_new), counted and refused there.
 * That is the route of the clients nobody else takes, and a client that has
 * not said its name is one of them: its limits are what a silent or plain
 * client gets anyway, so waiting for a hello is no way around them. The
 * hold is released when the hello chooses another route, whose own limits
 * then apply (session_read_hello); a new connection counts against the
 * default's source_conn_rate at accept. Returns -1 when s was closed. */
static int hello_admit(struct session *s)
{
	const struct sockaddr *peer = (struct sockaddr *)&s->peer;
	enum admit_result a;
	int held = 0;

	if (route_admit_listener_denies(s->grp, peer))
		return session_refuse(s, ADMIT_DENIED);
	if (s->admitted) { /* by the old process of an upgrade: held again, not counted again */
		s->src_held = (uint8_t)route_admit_hold(s->route, peer, s->w->now_ms);
		return 0;
	}
	a = route_admit_sources(s->route, peer, s->w->now_ms, &held);
	s->src_held = (uint8_t)held;
	return a == ADMIT_OK ? 0 : session_refuse(s, a);
}

/* After the PROXY header, if any: a listener with sni routes reads the
 * ClientHello first. */
static int session_begin(struct session *s)
{
	if (!s->grp->hello)
		return session_start(s); /* routed at accept */
	if (hello_admit(s))
		return -1;
	s->hello = malloc(sizeof(*s->hello));
	if (!s->hello) {
		session_close(s, "out-of-memory");
		return -1;
	}
	tls_hello_init(s->hello);
	s->state = S_HELLO;
	s->connect_deadline_ms = s->w->now_ms + s->grp->hello_timeout_ms;
	return 0;
}

/* A reload (or a DNS change) gave s's worker a newer config while s waits
 * for a slot. s has no backend and nothing was read from it, so it moves to
 * the new generation's route of the same name: that route's backends and
 * slots (those a reload added among them), its settings, its allow/deny (a
 * client it denies is reset, counted as denied). s stays where it is when
 * the new config has no such route or that route no longer takes clients
 * where s came in: its old backends still serve it. The run-time state
 * (the queue's counts, source counts) belongs to the route's name, so it
 * moves unchanged; a source hold whose table the new route does not use
 * is given back. Returns -1 when s was closed. */
static int session_follow_config(struct session *s)
{
	const struct config *c = s->w->cfg;
	const struct listen_group *g = NULL;
	struct route *nr = NULL;

	/* accepted on a listener of the worker's config: its route is too */
	if ((uintptr_t)s->grp >= (uintptr_t)c->lst && (uintptr_t)s->grp < (uintptr_t)(c->lst + c->nlst))
		return 0;
	for (unsigned k = 0; k < c->nlst && !g; k++)
		if (addr_equal(c->lst[k].addr, s->listen))
			g = &c->lst[k];
	for (unsigned i = 0; g && i < g->nroute && !nr; i++)
		if (!strcmp(g->route[i]->name, s->route->name))
			nr = g->route[i];
	if (!nr)
		return 0;
	if (route_admit_acl(nr, (struct sockaddr *)&s->peer) != ADMIT_OK)
		return session_refuse(s, ADMIT_DENIED);
	if (s->src_held && nr->sources != s->route->sources) {
		route_admit_release(s->route, (struct sockaddr *)&s->peer);
		s->src_held = 0;
	}
	s->grp = g;
	s->listen = g->addr;
	session_move_route(s, nr);
	session_timer_update(s); /* nr's queue_timeout may be shorter */
	return 0;
}

int session_dequeue(struct session *s)
{
	struct worker *w = s->w;

	if (s->state != S_QUEUED)
		return 1;
	if (session_follow_config(s))
		return 1; /* refused by the new allow/deny: closed */
	s->state = S_CONNECTING;
	s->tries = 0;
	s->first = backend_pick(s->route, (struct sockaddr *)&s->peer, s->peerlen);
	if (session_connect(s))
		return 1; /* closed (and out of the queue) */
	if (s->state == S_QUEUED)
		return 0; /* still full: same place in the queue */
	STAT_ADD(s->route->st->dequeued, 1);
	STAT_ADD(s->route->st->queue_wait_ms, w->now_ms - s->queued_ms);
	session_leave_queue(s);
	if (s->state == S_OPEN)
		session_run(s);
	session_timer_update(s);
	return 1;
}

int session_new(struct worker *w, const struct listen_group *g, int fd,
		const struct sockaddr *peer, socklen_t peerlen)
{
	return session_new_at(w, g, fd, peer, peerlen, NULL);
}

int session_new_at(struct worker *w, const struct listen_group *g, int fd,
		   const struct sockaddr *peer, socklen_t peerlen, struct session_carry *c)
{
	struct session *s = calloc(1, sizeof(*s));
	struct route *route = g->dflt ? g->dflt : g->route[0];

	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->w = w;
	s->grp = g;
	s->route = route;
	s->listen = g->addr;
	s->eng = engine_choices[route->o.engine].session;
	s->id = ((uint64_t)w->id << 56) | ++w->next_id;
	s->cli = (struct side){ .kind = EV_CLIENT, .fd = fd, .s = s };
	s->srv = (struct side){ .kind = EV_BACKEND, .fd = -1, .s = s };
	dir_init(&s->up, &s->cli, &s->srv, route);
	dir_init(&s->down, &s->srv, &s->cli, route);
	s->state = route->o.accept_proxy ? S_HEADER : S_CONNECTING;
	s->start_ms = s->active_ms = s->log_last_ms = w->now_ms;
	s->timer.due_ms = TIMER_NONE;
	s->expire_ms = TIMER_NONE;
	s->connect_deadline_ms = w->now_ms + route->o.proxy_timeout_ms;
	if (c) { /* handed over: its time runs from its accept, its header's is done */
		s->start_ms = s->active_ms = s->log_last_ms = c->start_ms;
		if (c->header_read)
			s->state = S_CONNECTING;
		else if (s->state == S_HEADER)
			s->connect_deadline_ms = c->deadline_ms;
		s->admitted = c->admitted;
		s->pp = c->pp;
		c->pp = NULL;
		s->uid[0] = c->uid[0];
		s->uid[1] = c->uid[1];
	}
	memcpy(&s->peer, peer, peerlen);
	s->peerlen = peerlen;
	s->next = w->sessions;
	if (w->sessions)
		w->sessions->prev = s;
	w->sessions = s;
	CTR_ADD(w, accepted, 1);
	STAT_ADD(route->live, 1);
	CTR_ADD(w, active, 1);
	if (!g->hello) /* one route: it counts the session from its accept */
		session_set_route(s, route);
	/* (TCP_NODELAY comes from the listener: worker_set_listeners) */
	if (side_register(w, &s->cli)) {
		ended(s, END_PROXY);
		session_close(s, "epoll-error");
		return -1;
	}
	if (loop_guard_hit(fd, peer, peerlen)) {
		CTR_ADD(w, loops, 1);
		if (!__atomic_exchange_n(&loop_warned, 1, __ATOMIC_RELAXED))
			log_warn("route %s: a client is this proxy's own backend connection: a "
				 "connection loop (a backend leads back to a listener of this process); "
				 "closed, logged once, counted in splicer_loops_total", route->name);
		ended(s, END_PROXY);
		session_close(s, "loop");
		return 0;
	}
	if (s->state == S_CONNECTING && session_begin(s))
		return 0;
	if (c && s->state == S_HELLO && c->deadline_ms < s->connect_deadline_ms)
		s->connect_deadline_ms = c->deadline_ms; /* its hello's, from the old process */
	session_timer_update(s);
	return 0;
}

static void session_read_hello(struct session *s);

static void header_failed(struct session *s, const char *reason, const char *why)
{
	CTR_ADD(s->w, proxy_header_errors, 1);
	ended(s, END_CLIENT); /* unless its deadline passed first */
	log_verbose("session %llx: PROXY header from client: %s", (unsigned long long)s->id, why);
	session_close(s, reason);
}

/* accept_proxy: reads the client's header without taking a byte of the
 * stream behind it (peek, parse, then consume exactly its length). */
static void session_read_header(struct session *s)
{
	uint8_t buf[PROXY_HDR_MAX];
	struct sockaddr_storage src;
	socklen_t srclen = 0;
	char why[128];
	ssize_t n = recv(s->cli.fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	int r;

	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR) {
			s->cli.can_read = 0;
		} else {
			s->fail_err = errno;
			header_failed(s, "client-error", strerror(errno));
		}
		return;
	}
	if (n == 0) {
		header_failed(s, "proxy-header-truncated", "connection closed before a complete header");
		return;
	}
	r = proxy_parse(buf, (size_t)n, &src, &srclen, why, sizeof(why));
	if (r < 0) {
		header_failed(s, "bad-proxy-header", why);
		return;
	}
	if (r == 0) {
		/* Incomplete: the next segment raises a new edge; a FIN will not. */
		if (s->cli.rdhup)
			header_failed(s, "proxy-header-truncated", "connection closed inside the header");
		else
			s->cli.can_read = 0;
		return;
	}
	if (recv(s->cli.fd, buf, (size_t)r, MSG_DONTWAIT) != r) {
		header_failed(s, "client-error", "header vanished between peek and read");
		return;
	}
	if (src.ss_family != AF_UNSPEC) {
		memcpy(&s->peer, &src, srclen);
		s->peerlen = srclen;
	}
	if (session_pp_received(s, buf, (size_t)r)) {
		ended(s, END_PROXY);
		session_close(s, "out-of-memory");
		return;
	}
	s->state = S_CONNECTING;
	if (session_begin(s) == 0 && s->state == S_HELLO && s->cli.can_read)
		session_read_hello(s); /* the hello may have come with the header */
}

static void hello_failed(struct session *s, const char *reason, const char *why)
{
	if (!strcmp(reason, "tls-hello-timeout"))
		CTR_ADD(s->w, tls_hello_timeouts, 1);
	else if (!strcmp(reason, "tls-no-route"))
		CTR_ADD(s->w, tls_no_route, 1);
	else
		CTR_ADD(s->w, tls_hello_errors, 1);
	log_verbose("session %llx: ClientHello: %s", (unsigned long long)s->id, why);
	ended(s, !strcmp(reason, "tls-hello-timeout") ? END_TIMEOUT
		 : !strcmp(reason, "tls-no-route") ? END_PROXY : END_CLIENT);
	session_close(s, reason);
}

/* The client's SO_RCVLOWAT while its hello is read: epoll then wakes only
 * once `lowat` bytes are queued (or a FIN), not per segment. 1 is the
 * kernel's default, which the engines expect (splice sets its own with
 * --lowat only). */
static void hello_lowat(struct session *s, size_t lowat)
{
	int v = (int)lowat;

	if ((s->hello_lowat ? s->hello_lowat : 1) == (uint32_t)v)
		return;
	if (setsockopt(s->cli.fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)))
		log_debug("session %llx: SO_RCVLOWAT %d: %s", (unsigned long long)s->id, v,
			  strerror(errno));
	else
		s->hello_lowat = (uint32_t)v;
}

/* Whether fewer bytes are queued than the parser said it needs: a peek now
 * would only copy again what it saw (a hello one byte per segment cost
 * bytes times segments: 300 ms of CPU for 16 KB). The lowat goes first, so
 * bytes that arrive after the look raise an edge once there are enough. A
 * FIN is looked at (the hello is truncated), and so is a socket whose queue
 * is unknown.
 *
 * So no cap on peeks is needed: each peek finds more than the one before
 * (need is always past the bytes already walked), a hello in one record
 * takes three however finely it is cut, and even one byte per TLS record
 * (need assumes full records, so it undershoots) gains a sixth of what is
 * left per peek: about 40 peeks for tls_hello_max's 16k, 50 for 64k. */
static int hello_short(struct session *s)
{
	size_t need = s->hello->need;
	int queued = 0;

	if (!need || s->cli.rdhup)
		return 0;
	hello_lowat(s, need);
	if (ioctl(s->cli.fd, SIOCINQ, &queued) || queued < 0 || (size_t)queued >= need)
		return 0;
	s->cli.can_read = 0;
	return 1;
}

/* A listener with sni routes: peeks at the client's bytes until the whole
 * ClientHello is there (any number of segments and TLS records, up to
 * tls_hello_max), then chooses the route. Nothing is consumed: the engine
 * forwards every byte, the hello first. */
static void hello_done(struct session *s, struct route *r, enum tls_hello_status st);

static void session_read_hello(struct session *s)
{
	size_t max = s->grp->hello_max;
	uint8_t *buf;
	ssize_t n;
	struct route *r;
	enum tls_hello_status st;

	if (hello_short(s))
		return;
	buf = alloca(max + 1);
	n = recv(s->cli.fd, buf, max + 1, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			s->cli.can_read = 0;
		else
			hello_failed(s, "client-error", strerror(errno));
		return;
	}
	st = n ? tls_hello_parse(s->hello, buf, (size_t)n, max) : TLS_HELLO_NEED_MORE;
	switch (st) {
	case TLS_HELLO_NEED_MORE:
		/* the next segment raises a new edge; a FIN will not */
		if (s->cli.rdhup || n == 0) {
			hello_failed(s, "tls-hello-truncated", "connection closed inside the ClientHello");
			return;
		}
		if ((size_t)n > max) {
			hello_failed(s, "tls-hello-too-big", "over tls_hello_max");
			return;
		}
		s->cli.can_read = 0;
		return;
	case TLS_HELLO_DONE:
		r = tls_route_choose(s->grp, s->hello);
		break;
	case TLS_HELLO_NOT_TLS:
		r = s->grp->dflt;
		break;
	case TLS_HELLO_TOO_BIG:
		hello_failed(s, "tls-hello-too-big", s->hello->why ? s->hello->why : "over tls_hello_max");
		return;
	default:
		hello_failed(s, "bad-tls-hello", s->hello->why ? s->hello->why : "malformed");
		return;
	}
	if (!r) {
		hello_failed(s, "tls-no-route", st == TLS_HELLO_DONE && s->hello->has_sni
			     ? "no route for this name and no route without sni on the listener"
			     : "not TLS or no SNI, and no route without sni on the listener");
		return;
	}
	log_debug("session %llx: ClientHello for '%s': route %s", (unsigned long long)s->id,
		  st == TLS_HELLO_DONE && s->hello->has_sni ? s->hello->sni : "", r->name);
	hello_done(s, r, st);
}

/* A listener whose ClientHello is read only for the PROXY header's
 * authority and alpn (no sni routes) has its one route whatever the client
 * sends: a client still silent at tls_hello_timeout (a protocol where the
 * server speaks first: SMTP, MySQL, SSH) goes on to it without them, as
 * nginx's preread goes on at preread_timeout. Returns 1 when it did. */
static int hello_gave_up(struct session *s)
{
	if (s->grp->sni || !s->grp->dflt)
		return 0;
	log_debug("session %llx: no ClientHello within tls_hello_timeout: route %s without "
		  "authority or alpn", (unsigned long long)s->id, s->grp->dflt->name);
	hello_done(s, s->grp->dflt, TLS_HELLO_NOT_TLS);
	return 1;
}

/* The route r is chosen (st: what was read): on to connecting. */
static void hello_done(struct session *s, struct route *r, enum tls_hello_status st)
{
	if (st == TLS_HELLO_DONE && session_pp_hello(s, r, s->hello)) {
		ended(s, END_PROXY);
		session_close(s, "out-of-memory");
		return;
	}
	free(s->hello);
	s->hello = NULL;
	hello_lowat(s, 1); /* forwarding reads whatever is queued */
	if (r != s->route && s->src_held) { /* the wait's hold (hello_admit) */
		route_admit_release(s->route, (struct sockaddr *)&s->peer);
		s->src_held = 0;
	}
	s->state = S_CONNECTING;
	session_set_route(s, r);
	session_start(s);
}

static int sock_error(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		return errno;
	return err;
}

static void session_on_event(struct side *sd, uint32_t events);

void session_event(struct side *sd, uint32_t events)
{
	struct session *s = sd->s;

	session_on_event(sd, events);
	session_timer_update(s);
}

/* A waiting client (S_QUEUED) that is gone: reset or failed, or its FIN
 * with nothing before it (SIOCINQ 0): a client that gave up, or that has
 * nothing to say, whose place would go to a connection nobody waits on.
 * One that sent bytes and then its FIN still wants an answer (a half-close,
 * which HAProxy and nginx forward): it keeps its place. */
static int queued_client_gone(const struct side *sd, uint32_t events)
{
	int queued = 0;

	if (events & (EPOLLERR | EPOLLHUP))
		return 1;
	if (!(events & EPOLLRDHUP))
		return 0;
	return !ioctl(sd->fd, SIOCINQ, &queued) && queued == 0;
}

static void session_on_event(struct side *sd, uint32_t events)
{
	struct session *s = sd->s;

	if (s->state == S_CLOSED)
		return;
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		sd->can_read = 1;
	if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		sd->can_write = 1;
	if (events & (EPOLLRDHUP | EPOLLHUP))
		sd->rdhup = 1;
	/* The peer's FIN was taken in order, so every byte before it is in the
	 * receive queue: a read shorter than asked has them all, and an engine
	 * may take the end from it instead of reading again for the 0. Not
	 * after an error or a reset: that read must return the error. (Every
	 * edge reports the whole state, so the last event is the one to go by.) */
	sd->fin = (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == EPOLLRDHUP;
	if (events & EPOLLPRI)
		sd->urg = sd->can_read = 1; /* urgent data: see urgent.h */

	if (s->state == S_HEADER) {
		if (sd == &s->cli && sd->can_read)
			session_read_header(s);
		return;
	}
	if (s->state == S_HELLO) {
		if (sd == &s->cli && sd->can_read)
			session_read_hello(s);
		return;
	}
	if (s->state == S_QUEUED) {
		/* nothing is read while waiting; a client that is gone frees
		 * its place now rather than at queue_timeout */
		if (sd == &s->cli && queued_client_gone(sd, events))
			ended(s, END_CLIENT), session_close(s, "client-gone-while-queued");
		return;
	}
	if (s->state == S_CONNECTING) {
		if (sd == &s->srv) {
			/* writable without an error flag: connected (SO_ERROR is 0
			 * then; asking costs a system call per session) */
			int err = events & (EPOLLERR | EPOLLHUP) ? sock_error(sd->fd) : 0;
			if (err == ECONNRESET || err == EPIPE) {
				/* Connected, then reset before this turn saw it (a
				 * backend that answers at once and resets): what it
				 * sent is in the socket and is delivered. */
				if (mark_open(s))
					return;
				/* (an engine that drives the session finds the end itself: it reads the
				 * bytes, then 0, since the error is taken now) */
				if (!s->eng->drive) {
					dir_fail(&s->down, err, 0);
					dir_error(s, &s->down);
				}
				session_run(s);
				return;
			}
			if (err || (events & (EPOLLERR | EPOLLHUP)) == EPOLLHUP) {
				session_connect_failed(s, err ? err : ECONNREFUSED, 0);
				return;
			}
			if (!(events & EPOLLOUT))
				return;
			if (mark_open(s))
				return;
		} else {
			return; /* client bytes wait in the kernel until a backend is up */
		}
	}
	session_run(s);
	if (s->state == S_OPEN && (events & EPOLLERR) && sd->fd >= 0) {
		/* An RST or ICMP error on a side whose directions had nothing to
		 * do: the I/O above did not surface it, so close here rather
		 * than leave the other peer hanging until the idle timeout. */
		int err = sd->broken ? 0 : sock_error(sd->fd);
		if (err && !(s->eng->ignore_error && s->eng->ignore_error(s, sd, err))) {
			struct dir *from = sd == &s->cli ? &s->up : &s->down;

			ended(s, end_of(s, sd));
			if (!s->fail)
				s->fail_err = err;

			/* The reading direction could not see it now (ended,
			 * or waiting for its destination): it still drains what
			 * the socket holds and ends with a reset (the socket is
			 * broken), and nothing more can be written to sd. */
			if (!from->shut && !from->dead) {
				if (!s->fail)
					dir_fail(from, err, 0), s->fail = failure_reason(s, from);
			} else if (!s->fail) {
				struct dir *to = sd == &s->cli ? &s->down : &s->up;
				dir_fail(to, err, 1), s->fail = failure_reason(s, to);
			}
			side_broken(s, sd);
			session_run(s);
		}
	}
}

/* With SO_RCVLOWAT, fewer than --lowat bytes never raise a readiness event:
 * a stream that pauses with a short tail queued would stall. The session's
 * timer (every RECHECK_MS while a lowat source is open) looks
 * at lowat sources that have been quiet and pulls such a tail out, so the
 * price of --lowat is at most RECHECK_MS of latency, never a stall. */
static int lowat_tail_waiting(struct dir *d)
{
	int queued = 0;

	if (!d->lowat_set || d->src->can_read || d->eof || d->src->fd < 0)
		return 0;
	if (ioctl(d->src->fd, SIOCINQ, &queued) || queued <= 0)
		return 0;
	d->src->can_read = 1;
	return 1;
}

/* The connect deadline passed. A worker that was too busy to see the
 * connect complete must not blame the backend: if the socket is connected
 * after all, the session opens. */
static void connect_timed_out(struct session *s)
{
	struct pollfd p = { .fd = s->srv.fd, .events = POLLOUT };

	if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP)) &&
	    !sock_error(s->srv.fd)) {
		s->srv.can_write = 1;
		if (mark_open(s) == 0)
			session_run(s);
		return;
	}
	session_connect_failed(s, ETIMEDOUT, 0);
}

/* Once one direction is over (a FIN forwarded, a reset, a failed side),
 * half_close_timeout bounds the silence instead of idle_timeout (HAProxy's
 * timeout client-fin / server-fin). UINT64_MAX while both are open. */
static uint64_t half_closed_limit(const struct session *s)
{
	const struct route_opts *o = &s->route->o;

	if (s->state != S_OPEN || !(s->up.eof || s->down.eof || s->up.dead || s->down.dead))
		return UINT64_MAX;
	return o->half_close_timeout_ms < o->idle_timeout_ms ? o->half_close_timeout_ms
							      : o->idle_timeout_ms;
}

/* How often a session waiting on something the kernel does not signal is
 * looked at: a send queue to empty (ending), a short tail under SO_RCVLOWAT,
 * an engine's counters (engine.h, sync). */
#define RECHECK_MS 100

/* When an open session's next interim access-log line is due: the next
 * multiple of log_interval (counted from accept) after its last line. The
 * running config's setting, so a reload that changes it reaches the
 * sessions already open. The line rides on the session's own timer: an
 * idle session is visited once per interval, not once per tick. */
static uint64_t interim_due(const struct session *s)
{
	uint64_t iv = s->w->cfg->log_interval_ms;

	if (!iv || s->state != S_OPEN || !access_log_enabled())
		return TIMER_NONE;
	return s->start_ms + ((s->log_last_ms - s->start_ms) / iv + 1) * iv;
}

/* The session's next deadline: what its timer is set to. */
static uint64_t session_deadline(const struct session *s)
{
	const struct route_opts *o = &s->route->o;
	uint64_t now = s->w->now_ms, due, limit;

	switch (s->state) {
	case S_CONNECTING:
		if (s->fd_retry_ms)
			return s->fd_retry_ms;
		/* fall through */
	case S_HEADER:
	case S_HELLO:
		return s->connect_deadline_ms;
	case S_QUEUED:
		return s->queued_ms + o->queue_timeout_ms;
	case S_OPEN:
		break;
	default:
		return TIMER_NONE;
	}
	limit = half_closed_limit(s);
	if (limit > o->idle_timeout_ms)
		limit = o->idle_timeout_ms;
	due = s->active_ms + limit;
	if (!s->expiring && s->expire_ms < due)
		due = s->expire_ms;
	if (s->rate_next_ms && s->rate_next_ms < due)
		due = s->rate_next_ms;
	if (s->ending || s->eng->sync ||
	    (o->lowat && ((s->up.lowat_set && !s->up.eof) || (s->down.lowat_set && !s->down.eof))))
		if (now + RECHECK_MS < due)
			due = now + RECHECK_MS;
	limit = interim_due(s);
	return limit < due ? limit : due;
}

/* After any event: a deadline that came nearer (a session that became
 * half-closed or started ending) moves its timer; a later one is left to
 * session_timer_fired (lazy: bytes never touch the heap). */
static void session_timer_update(struct session *s)
{
	if (s->state != S_CLOSED)
		timer_set_earlier(&s->w->timers, &s->timer, session_deadline(s));
}

static void session_check_timeouts(struct session *s, uint64_t now_ms)
{
	const struct route_opts *o = &s->route->o;

	if (s->state == S_OPEN && s->rate_next_ms && now_ms >= s->rate_next_ms)
		session_sock_rate_share(s); /* a per-source rate: its share again */
	if (s->state == S_OPEN && !s->expiring && now_ms >= s->expire_ms) {
		session_expire(s);
		return;
	}

	if (s->state == S_HEADER && now_ms >= s->connect_deadline_ms) {
		ended(s, END_TIMEOUT);
		header_failed(s, "proxy-header-timeout", "no complete header within proxy_timeout");
	} else if (s->state == S_HELLO && now_ms >= s->connect_deadline_ms) {
		if (!hello_gave_up(s))
			hello_failed(s, "tls-hello-timeout", "no whole ClientHello within tls_hello_timeout");
	} else if (s->state == S_QUEUED) {
		if (now_ms >= s->queued_ms + o->queue_timeout_ms) {
			STAT_ADD(s->route->st->queue_timeouts, 1);
			log_verbose("session %llx: no backend slot within queue_timeout",
				    (unsigned long long)s->id);
			ended(s, END_TIMEOUT);
			s->refused = 1; /* an RST, like admission's refusals */
			session_close(s, "queue-timeout");
		}
	} else if (s->state == S_CONNECTING && s->srv.fd >= 0 && now_ms >= s->connect_deadline_ms) {
		connect_timed_out(s);
	} else if (s->state == S_CONNECTING && s->fd_retry_ms && now_ms >= s->fd_retry_ms) {
		s->fd_retry_ms = 0; /* (session_fd_wait) */
		if (session_connect(s) == 0 && s->state == S_OPEN)
			session_run(s);
	} else if (s->state == S_OPEN && s->eng->sync && s->eng->sync(s)) {
		s->active_ms = now_ms; /* bytes moved in the kernel since the last look */
		bytes_check(s);
		session_run(s);        /* and a direction may have been passed bytes */
	} else if (s->state == S_OPEN && s->ending) {
		/* waiting for a send queue to empty before an RST: the peer took
		 * nothing for half_close_timeout, so what is left is cut */
		int timed_out = now_ms - s->active_ms >= half_closed_limit(s);
		if (timed_out) {
			CTR_ADD(s->w, half_close_timeouts, 1);
			ended(s, END_TIMEOUT);
		}
		session_end(s, timed_out);
	} else if (s->state != S_CLOSED && now_ms - s->active_ms >= half_closed_limit(s)) {
		/* its own counter: idle_timeouts is for open sessions only */
		CTR_ADD(s->w, half_close_timeouts, 1);
		ended(s, END_TIMEOUT);
		session_close(s, "half-close-timeout");
	} else if (s->state != S_CLOSED && now_ms - s->active_ms >= o->idle_timeout_ms) {
		CTR_ADD(s->w, idle_timeouts, 1);
		ended(s, END_TIMEOUT);
		session_close(s, "idle-timeout");
	} else if (s->state == S_OPEN && o->lowat &&
		   (lowat_tail_waiting(&s->up) | lowat_tail_waiting(&s->down))) {
		session_run(s);
	}
}

void session_timer_fired(struct session *s)
{
	if (s->w->now_ms >= interim_due(s)) {
		s->log_last_ms = s->w->now_ms;
		session_log_line(s, "interim");
	}
	session_check_timeouts(s, s->w->now_ms);
	if (s->state != S_CLOSED)
		timer_set(&s->w->timers, &s->timer, session_deadline(s));
}

/* Closes a side; with reset, SO_LINGER 0 makes close() send an RST so the
 * peer knows its stream was cut rather than finished. */
static int side_close(struct side *sd, int reset)
{
	if (sd->fd < 0)
		return 0;
	if (reset) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };
		setsockopt(sd->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	side_unwatch_close(sd->s->w, sd);
	return reset;
}

static void engines_text(const struct dir *d, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < engine_nengines && n < len; i++)
		if (d->used & (1u << i))
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "+" : "", engines[i]->name);
	if (!n)
		snprintf(buf, len, "none");
}

const char *dir_why_name(const struct dir *d)
{
	static const char *const names[WHY_MAX] = {
		[WHY_STREAM] = "stream", [WHY_ONE_WAY] = "one-way", [WHY_FALLBACK] = "fallback",
		[WHY_KERNEL] = "kernel", [WHY_TURNS] = "turns",
	};

	if (d->why != WHY_AS_SET && d->why < WHY_MAX)
		return names[d->why];
	return d->stream ? "not-a-stream" : "configured";
}

/* The access log's line (access_log.h): event "close" with the close
 * reason, or "connect" / "interim" (the reason is the event's name). */
static void session_access_log(struct session *s, const char *peer, const char *reason,
			       const char *event)
{
	int closing = !strcmp(event, "close");
	struct session_pp_log pl;
	char eng[2 * 48 + 2], why[32];
	struct access_entry e = {
		.route = s->routed ? s->route->name : "-",
		.client = peer,
		.backend = s->tries ? s->route->backend[s->backend].addr.text : "-",
		.reason = reason,
		.listener = s->listen ? s->listen->text : "-",
		.up = s->up.bytes,
		.down = s->down.bytes,
		.duration_ms = s->w->now_ms - s->start_ms,
		.connect_ms = s->opened ? (int64_t)(s->open_ms - s->connect_start_ms) : -1,
		.err = !closing ? 0 : s->fail_err ? s->fail_err : s->opened ? 0 : s->conn_err,
		.event = event,
		.id = s->id,
		.authority = pl.authority,
		.alpn = pl.alpn,
		.unique_id = pl.unique_id,
		.pp_tlvs = pl.tlvs,
		.engine = eng,
		.engine_reason = why,
	};
	size_t n;

	session_pp_log(s, &pl);
	engines_text(&s->up, eng, sizeof(eng) / 2);
	n = strlen(eng);
	eng[n++] = '/';
	engines_text(&s->down, eng + n, sizeof(eng) - n);
	snprintf(why, sizeof(why), "%s/%s", dir_why_name(&s->up), dir_why_name(&s->down));

	if (!closing) {
		e.ended_by = end_names[END_NONE];
		access_log_session(&e);
		return;
	}
	/* nothing recorded who ended it (a drain deadline, say): its state says */
	if (!s->ended_by)
		s->ended_by = s->up.eof ? END_CLIENT : s->down.eof ? END_BACKEND : END_PROXY;
	e.ended_by = end_names[s->ended_by];
	access_log_session(&e);
}

/* A line of an open session: its backend is up (connect), or it has been
 * open another log_interval (interim). */
static void session_log_line(struct session *s, const char *event)
{
	char peer[ADDR_TEXT_MAX];

	if (!access_log_enabled())
		return;
	addr_format((struct sockaddr *)&s->peer, s->peerlen, peer, sizeof(peer));
	session_access_log(s, peer, event, event);
}

/* The session's histograms of the whole session (route_hist.h): those of
 * every session its route counted. */
static void session_hist_close(struct session *s)
{
	struct worker *w = s->w;

	if (!s->routed)
		return;
	route_hist_add(s->route, w->id, HIST_DURATION, (w->now_ms - s->start_ms) * 1000);
	route_hist_add(s->route, w->id, HIST_BYTES_UP, s->up.bytes);
	route_hist_add(s->route, w->id, HIST_BYTES_DOWN, s->down.bytes);
}

/* s gives back its backend slot, its source count and what its engines
 * hold (a direction changes engines only with nothing held). */
static void session_let_go(struct session *s)
{
	session_unhold(s);
	if (s->src_held)
		route_admit_release(s->route, (struct sockaddr *)&s->peer);
	s->src_held = 0;
	if (s->up.eng->release)
		s->up.eng->release(s->w, &s->up);
	if (s->down.eng->release)
		s->down.eng->release(s->w, &s->down);
}

/* s leaves its worker's list for the dead one (freed at the end of the
 * turn); its bytes go to the counters. */
static void session_unlink(struct session *s)
{
	struct worker *w = s->w;

	s->state = S_CLOSED;
	if (s->prev)
		s->prev->next = s->next;
	else
		w->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	s->dead_next = w->dead;
	w->dead = s;
	bytes_undirty(s);
	bytes_report(s); /* what session_flush_bytes has not added yet */
}

/* s no longer counts as active; the last touch of its route. */
static void session_uncount(struct session *s)
{
	if (s->routed)
		__atomic_sub_fetch(&s->route->st->active, 1, __ATOMIC_RELAXED);
	/* Last touch of the route: after a reload, its config is freed once
	 * this reaches 0 (reload_reap). */
	__atomic_sub_fetch(&s->route->live, 1, __ATOMIC_RELEASE);
	CTR_ADD(s->w, active, (uint64_t)-1);
	__atomic_sub_fetch(&s->w->sh->active, 1, __ATOMIC_RELAXED);
}

void session_close(struct session *s, const char *reason)
{
	struct worker *w = s->w;
	char peer[ADDR_TEXT_MAX], eu[32], ed[32];
	int resets, rst_cli, rst_srv;

	if (s->state == S_CLOSED)
		return;
	timer_del(&w->timers, &s->timer);
	session_leave_queue(s);
	free(s->hello);
	s->hello = NULL;
	if (s->eng->end)
		s->eng->end(s); /* bytes still in its hands count as pending below */
	loop_guard_del(&s->loop);
	/* A side gets an RST when bytes meant for it are still in our hands, or
	 * when the stream toward it was cut by an error at the other end: a
	 * FIN would tell it the stream ended cleanly. */
	if (send_queue_blind(s)) {
		/* a side whose direction forwarded a FIN has every byte for it
		 * queued; an RST would discard what is not acknowledged */
		rst_cli = !s->cli.broken && (dir_pending(&s->down) || (s->up.dead && !s->down.shut));
		rst_srv = !s->srv.broken && (dir_pending(&s->up) || (s->down.dead && !s->up.shut));
	} else {
		rst_cli = wants_rst(s, &s->cli);
		rst_srv = wants_rst(s, &s->srv);
	}
	rst_cli |= s->refused; /* admission or the queue says no, as HAProxy's reject does */
	rst_srv |= s->cut;     /* its backend is down or gone (session_cut) */
	/* first the engine: it takes the descriptors it owns (engine.h, close),
	 * and closes them once nothing it queued names them any more */
	resets = s->eng->close ? s->eng->close(s, rst_cli, rst_srv) : 0;
	resets += side_close(&s->cli, rst_cli) + side_close(&s->srv, rst_srv);
	if (resets)
		CTR_ADD(w, resets_sent, (uint64_t)resets);
	session_let_go(s);

	if (log_level >= LOG_VERBOSE || access_log_enabled())
		addr_format((struct sockaddr *)&s->peer, s->peerlen, peer, sizeof(peer));
	if (access_log_enabled())
		session_access_log(s, peer, reason, "close");
	/* the kernel gave up on a peer of an open session: keepalive probes
	 * unanswered, TCP_USER_TIMEOUT or retransmissions (failure_reason) */
	if (!strcmp(reason, "client-timeout"))
		CTR_ADD(w, dead_client, 1);
	else if (!strcmp(reason, "backend-timeout"))
		CTR_ADD(w, dead_backend, 1);
	if (log_level >= LOG_VERBOSE) {
		engines_text(&s->up, eu, sizeof(eu));
		engines_text(&s->down, ed, sizeof(ed));
		log_verbose("session %llx: close route=%s client=%s backend=%s up=%llu down=%llu "
			    "duration_ms=%llu engine=%s/%s reason=%s",
			    (unsigned long long)s->id, s->route->name, peer,
			    s->tries ? s->route->backend[s->backend].addr.text : "-",
			    (unsigned long long)s->up.bytes, (unsigned long long)s->down.bytes,
			    (unsigned long long)(w->now_ms - s->start_ms), eu, ed, reason);
	}
	session_unlink(s);
	CTR_ADD(w, closed, 1);
	session_hist_close(s);
	session_uncount(s);
	if (w->paused_max_conns)
		worker_listeners_arm(w, 1);
}

/* ---- an upgrade's hand-over (session_handoff.c) ------------------------------ */

void session_handed(struct session *s)
{
	struct worker *w = s->w;
	struct side *sides[2] = { &s->cli, &s->srv };

	timer_del(&w->timers, &s->timer);
	session_leave_queue(s);
	free(s->hello);
	s->hello = NULL;
	loop_guard_del(&s->loop);
	/* out of this worker's watch first: the sockets live on in the new
	 * process, and an epoll item (or a ring's poll) lasts as long as its
	 * file does, not its descriptor */
	for (int i = 0; i < 2; i++)
		if (sides[i]->fd >= 0) {
			worker_unwatch(w, sides[i]->fd, &sides[i]->watch);
			close(sides[i]->fd);
			sides[i]->fd = -1;
		}
	session_let_go(s); /* a pipe sent with bytes in it is closed, never pooled (engine.h) */
	session_unlink(s);
	session_uncount(s);
}

int session_adopted(struct session *s)
{
	struct worker *w = s->w;
	struct route *r = s->route;
	const struct backend_conf *b = s->srv.fd >= 0 ? &r->backend[s->backend] : NULL;

	s->next = w->sessions;
	if (w->sessions)
		w->sessions->prev = s;
	w->sessions = s;
	CTR_ADD(w, active, 1);
	__atomic_add_fetch(&w->sh->active, 1, __ATOMIC_RELAXED);
	STAT_ADD(r->live, 1);
	if (s->routed)
		STAT_ADD(r->st->active, 1);
	if (s->counted)
		backend_hold(r, s->backend); /* leastconn sees it as before */
	if (s->src_held)
		s->src_held = (uint8_t)route_admit_hold(r, (struct sockaddr *)&s->peer, w->now_ms);
	if (b && b->this_host)
		loop_guard_add(&s->loop, s->srv.fd, (const struct sockaddr *)&b->addr.ss, b->addr.len);
	if (side_register(w, &s->cli) || (s->srv.fd >= 0 && side_register(w, &s->srv))) {
		log_warn("session %llx: epoll_ctl: %s", (unsigned long long)s->id, strerror(errno));
		ended(s, END_PROXY);
		session_close(s, "handoff-error");
		return -1;
	}
	if (s->state == S_QUEUED) { /* in its place by when it queued */
		s->in_waitq = 1;
		STAT_ADD(r->st->queued, 1);
		waitq_insert(w, s);
	} else if (s->state == S_OPEN) {
		runq_push(s); /* what the kernel holds is looked at now */
	}
	session_timer_update(s);
	return 0;
}

void session_free(struct session *s)
{
	if (s->giving_back)
		s->w->giving_back--;
	session_pp_free(s);
	free(s);
}

/* ---- on_backend_down = close ----------------------------------------------- */


/* s's backend was cut (session.h: session_cut_sweep). One still connecting
 * to it goes on to its next backend: nothing went either way (not counted
 * as the backend's connect error: the cut said so, not the backend). */
static void session_cut(struct session *s, int why)
{
	struct dir *d = &s->down;

	STAT_ADD(*(why == BACKEND_CUT_REMOVED ? &s->route->st->cut_removed : &s->route->st->cut_down), 1);
	if (s->state == S_CONNECTING) {
		session_try_next(s);
		return;
	}
	ended(s, END_PROXY);
	s->cut = 1;
	if (!s->fail)
		s->fail = why == BACKEND_CUT_REMOVED ? "backend-removed" : "backend-down";
	if (s->ending || (d->rst && d->eof) || d->dead) {
		session_close(s, s->fail); /* over but for its send queues: the backend's end now */
		return;
	}
	/* as a reset read from the backend: what was read from it is delivered,
	 * then the client gets an RST; the other direction ends (the bytes the
	 * client sent that the backend has not taken are dropped) */
	d->err = ECONNABORTED;
	d->err_at_dst = 0;
	if (s->eng->drive) {
		session_io_result(s); /* the engine's own means (uring) */
		return;
	}
	dir_error(s, d);
	session_run(s);
	session_timer_update(s);
}

void session_cut_sweep(struct worker *w)
{
	struct session *s, *next;

	for (s = w->sessions; s; s = next) {
		const struct backend_health *h;
		next = s->next; /* session_cut may close s, never another */
		if (!s->counted || (s->state != S_CONNECTING && s->state != S_OPEN))
			continue;
		h = s->route->health[s->backend];
		if (__atomic_load_n(&h->cut_seq, __ATOMIC_ACQUIRE) != s->cut_seq)
			session_cut(s, __atomic_load_n(&h->cut_why, __ATOMIC_RELAXED));
	}
}
