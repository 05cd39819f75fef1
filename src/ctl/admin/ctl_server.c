/* SPDX-License-Identifier: MIT */
/* ctl_server: see ctl_server.h. */
#define _GNU_SOURCE
#include "ctl_server.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker.h"

#define ANSWERS_PER_TURN 8   /* a pipelining client's answers in one turn; then the others' */
#define ACCEPT_PAUSE_MS  100 /* EMFILE/ENFILE: the listener leaves the poll set this long */

const char *const ctl_endpoint_names[CTL_EP_N] = { "stats", "admin" };
const char *const ctl_drop_names[CTL_DROP_N] = { "evicted", "request_timeout", "slow_reader" };

static uint64_t dropped[CTL_EP_N][CTL_DROP_N]; /* atomic: the stats thread reads them */

uint64_t ctl_server_dropped(enum ctl_endpoint ep, enum ctl_drop why)
{
	return __atomic_load_n(&dropped[ep][why], __ATOMIC_RELAXED);
}

/* The loop's state beside the endpoint's settings. */
struct loop {
	struct ctl_server *s;
	struct ctl_conn *t;  /* the clients: t[0..n) */
	unsigned n;
	size_t held;         /* bytes of the answers under way */
	struct pollfd *p;    /* p[0] the listener, p[1] stop, p[2 + i] client i */
	unsigned char *again; /* client i has input left to parse after its turn ended */
};

int ctl_conn_answer(struct ctl_conn *c, char *buf, size_t n)
{
	if (!buf)
		return -EINVAL;
	if (c->out) {
		free(buf);
		return -EBUSY;
	}
	c->out = buf;
	c->out_n = n;
	c->out_off = 0;
	return 0;
}

void ctl_conn_consume(struct ctl_conn *c, size_t n)
{
	if (n > c->in_n)
		n = c->in_n;
	memmove(c->in, c->in + n, c->in_n - n);
	c->in_n -= n;
}

/* When c is due: its request, or its answer's reader (stalled, or slow in
 * all). */
static uint64_t conn_due(const struct ctl_server *s, const struct ctl_conn *c)
{
	uint64_t stall;

	if (!c->out)
		return c->request_end_ms;
	stall = c->progress_ms + (uint64_t)s->stall_ms;
	return stall < c->answer_end_ms ? stall : c->answer_end_ms;
}

/* Closes client i (the last one moves into its place; the slots keep their
 * own input buffers) and counts why, unless why < 0 (the peer or the
 * protocol ended it). A client whose request was due and that was told
 * nothing yet gets the endpoint's last words, sent once without waiting:
 * its socket buffer is empty, so they fit. */
static void conn_drop(struct loop *L, unsigned i, int why)
{
	struct ctl_server *s = L->s;
	struct ctl_conn *c = &L->t[i], tmp;

	if (why >= 0) {
		__atomic_fetch_add(&dropped[s->ep][why], 1, __ATOMIC_RELAXED);
		if (s->last_words && !c->out && !c->spoke && !c->close_after &&
		    send(c->fd, s->last_words, strlen(s->last_words), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			/* the client left or cannot take it: nothing more to do */
		}
	}
	close(c->fd);
	if (c->out)
		L->held -= c->out_n;
	free(c->out);
	c->out = NULL;
	tmp = *c;
	*c = L->t[--L->n];
	L->t[L->n] = tmp;
	L->again[i] = L->again[L->n];
	L->again[L->n] = 0;
}

/* Sends what c's reader takes of its answer. Returns 0 when all of it went
 * (the answer is freed), 1 when the socket is full, -1 when the reader
 * left. */
static int conn_flush(struct loop *L, struct ctl_conn *c, uint64_t now)
{
	while (c->out_off < c->out_n) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_n - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			c->out_off += (size_t)w;
			c->progress_ms = now;
			c->spoke = 1;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else {
			return w < 0 && errno == EAGAIN ? 1 : -1;
		}
	}
	L->held -= c->out_n;
	free(c->out);
	c->out = NULL;
	c->out_n = c->out_off = 0;
	return 0;
}

/* Reads what arrived, up to a full input buffer. Returns 0, or -1 on an
 * error (a reset). */
static int conn_read(const struct ctl_server *s, struct ctl_conn *c, uint64_t now)
{
	while (!c->eof && c->in_n < s->in_max) {
		ssize_t k = recv(c->fd, c->in + c->in_n, s->in_max - c->in_n, MSG_DONTWAIT);
		if (k > 0) {
			c->in_n += (size_t)k;
			c->progress_ms = now;
		} else if (k == 0) {
			c->eof = 1;
		} else if (errno != EINTR) {
			return errno == EAGAIN ? 0 : -1;
		}
	}
	return 0;
}

/* Moves client i on as far as it goes without waiting: sends its answer,
 * reads, lets the protocol answer, sends that, and so on (a pipelining
 * client: up to ANSWERS_PER_TURN, then again[i] asks for another turn).
 * Returns 1 when i is done with (its peer left, or the protocol or its
 * answer ended it), 0 when it waits for its socket. */
static int conn_step(struct loop *L, unsigned i, uint64_t now)
{
	struct ctl_server *s = L->s;
	struct ctl_conn *c = &L->t[i];
	int r;

	L->again[i] = 0;
	for (unsigned answers = 0;;) {
		if (c->out) {
			if ((r = conn_flush(L, c, now)) != 0)
				return r < 0;
			if (c->close_after)
				return 1;
			c->request_end_ms = now + (uint64_t)s->request_ms;
			if (++answers == ANSWERS_PER_TURN) {
				L->again[i] = 1; /* the others' turn first */
				return 0;
			}
		}
		if (conn_read(s, c, now))
			return 1;
		if (!c->in_n && !c->eof)
			return 0;
		r = s->on_input(c, s->arg);
		if (c->out) { /* held until sent or dropped: the reader's clocks start now */
			L->held += c->out_n;
			c->progress_ms = now;
			c->answer_end_ms = now + (uint64_t)s->answer_ms;
		}
		if (r)
			return 1;
		if (!c->out)
			/* no answer: a request that is not whole yet, unless nothing
			 * more can come (EOF) or fit (a full buffer) */
			return c->eof || c->in_n == s->in_max;
	}
}

/* The client that moved nothing for the longest (only those with an
 * answer under way, when with_answer), or -1. */
static int least_progressed(const struct loop *L, int with_answer)
{
	int k = -1;

	for (unsigned i = 0; i < L->n; i++)
		if ((!with_answer || L->t[i].out) && (k < 0 || L->t[i].progress_ms < L->t[k].progress_ms))
			k = (int)i;
	return k;
}

/* The answers held may not pass out_budget while more than one client
 * holds one: the slowest readers give way (one answer alone may be any
 * size: it is served). */
static void budget_enforce(struct loop *L)
{
	unsigned holders = 0;

	for (unsigned i = 0; i < L->n; i++)
		holders += L->t[i].out != NULL;
	for (; L->held > L->s->out_budget && holders > 1; holders--)
		conn_drop(L, (unsigned)least_progressed(L, 1), CTL_DROP_EVICTED);
}

/* Takes the connections waiting (up to a tableful per turn), each served
 * at once as far as it goes: a probe whose request came with its
 * connection is answered before the next poll. Returns the time until
 * which the listener rests (EMFILE/ENFILE), or 0. */
static uint64_t accept_some(struct loop *L, uint64_t now)
{
	struct ctl_server *s = L->s;

	for (unsigned k = 0; k < s->max_conns; k++) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return errno == EMFILE || errno == ENFILE ? now + ACCEPT_PAUSE_MS : 0;
		if (L->n == s->max_conns)
			conn_drop(L, (unsigned)least_progressed(L, 0), CTL_DROP_EVICTED);
		struct ctl_conn *c = &L->t[L->n];
		char *in = c->in;
		*c = (struct ctl_conn){ .fd = fd, .in = in, .progress_ms = now,
					.request_end_ms = now + (uint64_t)s->request_ms };
		if (conn_step(L, L->n++, now))
			conn_drop(L, L->n - 1, -1);
	}
	return 0;
}

static void loop_free(struct loop *L)
{
	if (L->t)
		for (unsigned i = 0; i < L->s->max_conns; i++)
			free(L->t[i].in);
	free(L->t);
	free(L->p);
	free(L->again);
}

int ctl_server_run(struct ctl_server *s)
{
	struct loop L = { .s = s };
	uint64_t stop_by = 0, rest_until = 0;
	int ok, err = 0;

	L.t = calloc(s->max_conns, sizeof(*L.t));
	L.p = calloc(2 + s->max_conns, sizeof(*L.p));
	L.again = calloc(s->max_conns, 1);
	ok = L.t && L.p && L.again;
	for (unsigned i = 0; ok && i < s->max_conns; i++)
		ok = (L.t[i].in = malloc(s->in_max)) != NULL;
	if (!ok) {
		loop_free(&L);
		return -ENOMEM;
	}
	for (;;) {
		uint64_t now = now_monotonic_ms(), due;
		int timeout = -1, nready;

		/* asked to stop: the clients under way finish, for drain_ms */
		if (stop_by && (!L.n || now >= stop_by))
			break;
		for (unsigned i = L.n; i-- > 0;) {
			if (now >= (due = conn_due(s, &L.t[i]))) {
				conn_drop(&L, i, L.t[i].out ? CTL_DROP_SLOW_READER : CTL_DROP_REQUEST_TIMEOUT);
				continue;
			}
			if (L.again[i])
				due = now;
			if (timeout < 0 || due - now < (uint64_t)timeout)
				timeout = (int)(due - now);
		}
		if (rest_until && now >= rest_until)
			rest_until = 0;
		due = stop_by ? stop_by : rest_until;
		if (due && (timeout < 0 || due - now < (uint64_t)timeout))
			timeout = (int)(due - now);
		L.p[0] = (struct pollfd){ .fd = stop_by || rest_until ? -1 : s->lfd, .events = POLLIN };
		L.p[1] = (struct pollfd){ .fd = stop_by ? -1 : s->stop_fd, .events = POLLIN };
		for (unsigned i = 0; i < L.n; i++) {
			const struct ctl_conn *c = &L.t[i];
			L.p[2 + i] = (struct pollfd){
				.fd = c->fd,
				/* one answer at a time: no reading while it is under way */
				.events = c->out ? POLLOUT : c->eof || c->in_n == s->in_max ? 0 : POLLIN
			};
		}
		if ((nready = poll(L.p, 2 + L.n, timeout)) < 0 && errno != EINTR) {
			err = -errno; /* ENOMEM: nothing to wait on */
			break;
		}
		if (nready < 0)
			continue;
		now = now_monotonic_ms();
		if (L.p[1].revents) {
			stop_by = now + (uint64_t)s->drain_ms;
			continue;
		}
		/* backwards: a drop moves the last client, already seen, into i */
		for (unsigned i = L.n; i-- > 0;)
			if ((L.p[2 + i].revents || L.again[i]) && conn_step(&L, i, now))
				conn_drop(&L, i, -1);
		budget_enforce(&L);
		if (L.p[0].revents & POLLIN) {
			rest_until = accept_some(&L, now);
			budget_enforce(&L);
		}
	}
	while (L.n)
		conn_drop(&L, L.n - 1, -1);
	loop_free(&L);
	return err;
}
