/* SPDX-License-Identifier: MIT */
/* session_handoff: see session_handoff.h. */
#define _GNU_SOURCE
#include "session_handoff.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "engine.h"
#include "log.h"
#include "scm_fds.h"
#include "session.h"
#include "session_int.h"
#include "session_pp.h"
#include "worker.h"

_Static_assert(sizeof(struct handoff_rec) < 65536, "handoff_rec's size is a uint16_t");

/* ---- the old process ------------------------------------------------------- */

/* 1 when the new process's catalog has the line "KIND\tA" or "KIND\tA\tB". */
static int catalog_has(const struct handoff_target *t, char kind, const char *a, const char *b)
{
	char line[4 + ROUTE_NAME_MAX + ADDR_TEXT_MAX + HANDOFF_ENGINE_MAX];
	unsigned lo = 0, hi = t->nnames;

	if (b)
		snprintf(line, sizeof(line), "%c\t%s\t%s", kind, a, b);
	else
		snprintf(line, sizeof(line), "%c\t%s", kind, a);
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		int c = strcmp(t->names[mid], line);
		if (!c)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static int engine_taken(const struct handoff_target *t, const struct engine *e)
{
	return !e || (e->hands_over && e->hand_out && catalog_has(t, 'E', e->name, NULL));
}

/* NULL when s can go to t now, with what its directions hold in h[];
 * else why it stays (the log's word at -v). */
static const char *stays(const struct session *s, const struct handoff_target *t,
			 struct dir_handoff h[2])
{
	const struct dir *d[2] = { &s->up, &s->down };

	if (t->refuse)
		return t->refuse;
	if (!s->eng->hands_over || !engine_taken(t, s->eng))
		return "its engine does not hand over";
	for (int i = 0; i < 2; i++) {
		memset(&h[i], 0, sizeof(h[i]));
		if (!engine_taken(t, d[i]->eng) || !engine_taken(t, d[i]->stream) ||
		    d[i]->eng->hand_out(d[i], &h[i]))
			return "a direction's engine does not hand over";
		if (h[i].len > t->buf_size)
			return "more unsent bytes than the new process's buffer";
	}
	switch (s->state) {
	case S_HEADER:
	case S_HELLO:
		return catalog_has(t, 'L', s->listen->text, NULL) ? NULL
		       : "its listener is not in the new config";
	case S_QUEUED:
		return catalog_has(t, 'R', s->route->name, NULL) ? NULL
		       : "its route is not in the new config";
	case S_CONNECTING:
	case S_OPEN:
		if (s->srv.fd < 0)
			return "no backend socket";
		return catalog_has(t, 'B', s->route->name, s->route->backend[s->backend].addr.text)
		       ? NULL : "its route or backend is not in the new config";
	}
	return "closed";
}

static void dir_record(struct handoff_dir_rec *r, const struct dir *d, const struct dir_handoff *h)
{
	r->bytes = d->bytes;
	r->err = d->err;
	r->len = h->len;
	r->in_pipe = h->in_pipe;
	r->aux = h->aux;
	r->eof = d->eof;
	r->rst = d->rst;
	r->shut = d->shut;
	r->dead = d->dead;
	r->urg_state = d->urg_state;
	r->urg_byte = d->urg_byte;
	r->lowat_set = d->lowat_set;
	r->used = d->used;
	r->err_at_dst = d->err_at_dst;
	r->why = d->why;
	r->pipe = h->nfds == 2;
	snprintf(r->eng, sizeof(r->eng), "%s", d->eng->name);
	snprintf(r->stream, sizeof(r->stream), "%s", d->stream ? d->stream->name : "");
}

static void record(struct handoff_rec *r, const struct session *s, const struct dir_handoff h[2])
{
	memset(r, 0, sizeof(*r));
	r->magic = HANDOFF_MAGIC;
	r->version = HANDOFF_VERSION;
	r->size = sizeof(*r);
	r->id = s->id;
	session_pp_uid(s, r->uid);
	r->state = s->state;
	r->ending = s->ending;
	r->expiring = s->expiring;
	r->expire_why = s->expire_why;
	r->counted = s->counted;
	r->attempted = s->attempted;
	r->opened = s->opened;
	r->routed = s->routed;
	r->src_held = s->src_held;
	r->ended_by = s->ended_by;
	r->answered = s->answered;
	r->refused = s->refused;
	r->header_read = s->state == S_HELLO && s->route->o.accept_proxy;
	r->cli_broken = s->cli.broken;
	r->srv_broken = s->srv.broken;
	r->has_srv = s->srv.fd >= 0;
	r->tries = s->tries;
	r->first = s->first;
	r->tfo_sent = s->tfo_sent;
	r->rate_div = s->rate_div;
	r->hello_lowat = s->hello_lowat;
	r->outq[0] = s->outq[0];
	r->outq[1] = s->outq[1];
	r->fail_err = s->fail_err;
	r->conn_err = s->conn_err;
	r->start_ms = s->start_ms;
	r->active_ms = s->active_ms;
	r->connect_start_ms = s->connect_start_ms;
	r->open_ms = s->open_ms;
	r->connect_deadline_ms = s->connect_deadline_ms;
	r->expire_ms = s->expire_ms;
	r->queued_ms = s->queued_ms;
	r->log_last_ms = s->log_last_ms;
	r->rate_next_ms = s->rate_next_ms;
	r->connect_us = s->connect_us;
	r->open_us = s->open_us;
	r->first_up_us = s->first_up_us;
	r->reported[0] = s->reported[0];
	r->reported[1] = s->reported[1];
	dir_record(&r->dir[0], &s->up, &h[0]);
	dir_record(&r->dir[1], &s->down, &h[1]);
	r->peerlen = s->peerlen;
	memcpy(&r->peer, &s->peer, sizeof(r->peer));
	snprintf(r->fail, sizeof(r->fail), "%s", s->fail ? s->fail : "");
	snprintf(r->engine, sizeof(r->engine), "%s", s->eng->name);
	snprintf(r->route, sizeof(r->route), "%s", s->route->name);
	if (s->state >= S_CONNECTING && s->srv.fd >= 0)
		snprintf(r->backend, sizeof(r->backend), "%s", s->route->backend[s->backend].addr.text);
	snprintf(r->listen, sizeof(r->listen), "%s", s->listen->text);
	if (s->pp) {
		r->authority_len = s->pp->authority_len;
		memcpy(r->authority, s->pp->authority, s->pp->authority_len);
		r->alpn_len = s->pp->alpn_len;
		memcpy(r->alpn, s->pp->alpn, s->pp->alpn_len);
		r->pp_rx_len = s->pp->rx_len;
	}
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p = (const char *)p + k;
		n -= (size_t)k;
	}
	return 0;
}

/* The bytes the message carries besides the sockets and pipes (copy
 * directions' unsent bytes, the client's TLVs) in a memfd: any size, and
 * no copy through the socket's buffer. -1 (errno) when it cannot be made. */
static int data_fd(const struct session *s, const struct dir_handoff h[2])
{
	int fd = memfd_create("splicer-handoff", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if ((h[0].len && write_all(fd, h[0].bytes, h[0].len)) ||
	    (h[1].len && write_all(fd, h[1].bytes, h[1].len)) ||
	    (s->pp && s->pp->rx_len && write_all(fd, s->pp->rx, s->pp->rx_len))) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Sends s (blocking, bounded by the socket's SO_SNDTIMEO). 0, or -errno:
 * nothing was sent, s is as it was. */
static int send_session(const struct session *s, const struct handoff_target *t,
			const struct dir_handoff h[2])
{
	struct handoff_rec rec;
	char cbuf[CMSG_SPACE(HANDOFF_MAX_FDS * sizeof(int))];
	int fds[HANDOFF_MAX_FDS], n = 0, dfd = -1, r = 0;
	struct iovec iov = { &rec, sizeof(rec) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	record(&rec, s, h);
	fds[n++] = s->cli.fd;
	if (s->srv.fd >= 0)
		fds[n++] = s->srv.fd;
	for (int i = 0; i < 2; i++)
		for (unsigned k = 0; k < h[i].nfds; k++)
			fds[n++] = h[i].fds[k];
	if (h[0].len || h[1].len || rec.pp_rx_len) {
		if ((dfd = data_fd(s, h)) < 0)
			return -errno;
		fds[n++] = dfd;
		rec.has_data = 1;
	}
	scm_fds_put(&mh, cbuf, fds, (unsigned)n);
	while (sendmsg(t->fd, &mh, MSG_NOSIGNAL) < 0)
		if (errno != EINTR) {
			r = -errno;
			break;
		}
	if (dfd >= 0)
		close(dfd);
	return r;
}

/* What became of the sessions a worker looked at. */
struct hand_count {
	unsigned handed, kept, failed;
	int gone; /* the new process stopped taking them: the rest stay */
};

static void hand_one(struct session *s, const struct handoff_target *t, struct hand_count *c)
{
	struct dir_handoff h[2];
	const char *why = stays(s, t, h);
	int r;

	if (!why && c->gone)
		why = "the new process took no more";
	if (why) {
		log_verbose("session %llx: stays in this process to drain: %s",
			    (unsigned long long)s->id, why);
		c->kept++;
		return;
	}
	if ((r = send_session(s, t, h)) < 0) {
		log_warn("upgrade: session %llx could not be handed over (%s); it drains here",
			 (unsigned long long)s->id, strerror(-r));
		c->failed++;
		c->gone = r != -ENOMEM && r != -EMFILE && r != -ENFILE;
		return;
	}
	log_verbose("session %llx: handed over to process %d", (unsigned long long)s->id, t->pid);
	session_handed(s);
	c->handed++;
}

void session_hand_over(struct worker *w, struct handoff_target *t)
{
	struct hand_count c = { 0 };

	/* the waiters first, in their order: the new process's queue takes
	 * them by when they queued (waitq_insert) */
	for (struct session *s = w->wq_head, *next; s; s = next) {
		next = s->wq_next;
		hand_one(s, t, &c);
	}
	for (struct session *s = w->sessions, *next; s; s = next) {
		next = s->next;
		if (!s->in_waitq) /* one that stayed in the queue was counted above */
			hand_one(s, t, &c);
	}
	__atomic_add_fetch(&t->handed, c.handed, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->kept, c.kept + c.failed, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->failed, c.failed, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->workers_done, 1, __ATOMIC_RELEASE);
}

/* ---- the wire: the new process ------------------------------------------------ */

void handoff_msg_free(struct handoff_msg *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < m->nfds; i++)
		if (m->fds[i] >= 0)
			close(m->fds[i]);
	free(m->data);
	free(m);
}

static int read_data(struct handoff_msg *m, int fd)
{
	const struct handoff_rec *r = &m->rec;
	uint64_t len = (uint64_t)r->dir[0].len + r->dir[1].len + r->pp_rx_len, got = 0;

	if (!(m->data = malloc(len ? len : 1)))
		return -ENOMEM;
	while (got < len) {
		ssize_t k = pread(fd, m->data + got, len - got, (off_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EPROTO;
		got += (uint64_t)k;
	}
	m->len = len;
	return 0;
}

int handoff_recv(int fd, struct handoff_msg **out, char *other, unsigned len)
{
	struct handoff_msg *m = calloc(1, sizeof(*m));
	char cbuf[CMSG_SPACE(HANDOFF_MAX_FDS * sizeof(int))];
	struct iovec iov = { m ? (void *)&m->rec : NULL, sizeof(m->rec) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	ssize_t n;

	*out = NULL;
	if (!m)
		return -ENOMEM;
	while ((n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n < 0) {
		int e = errno;
		free(m);
		return -e;
	}
	m->nfds = scm_fds_take(&mh, m->fds, HANDOFF_MAX_FDS);
	if (n == 0 && !m->nfds) {
		free(m);
		return 0;
	}
	if ((size_t)n != sizeof(m->rec) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    m->rec.magic != HANDOFF_MAGIC || m->rec.version != HANDOFF_VERSION ||
	    m->rec.size != sizeof(m->rec)) {
		/* a line of the exchange (handoff.c), or a session of another layout */
		size_t k = (size_t)n < len ? (size_t)n : len - 1;
		memcpy(other, &m->rec, k);
		other[k] = '\0';
		handoff_msg_free(m);
		return 2;
	}
	if (m->rec.has_data && m->nfds) {
		int dfd = m->fds[--m->nfds], r = read_data(m, dfd);
		close(dfd);
		if (r < 0) {
			handoff_msg_free(m);
			return r;
		}
	}
	*out = m;
	return 1;
}

/* ---- the new process: adoption -------------------------------------------------- */

static const struct engine *engine_named(const char *name)
{
	for (unsigned i = 0; i < engine_nengines; i++)
		if (!strcmp(engines[i]->name, name))
			return engines[i];
	return NULL;
}

/* The close reason of a session's first error, as the old process had it
 * (session.h: fail is a constant text): the same few dozen words each
 * time, so each is kept once for the life of the process. */
static const char *reason_kept(const char *text)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static const char *kept[64];
	static unsigned n;
	const char *r = "handed-over-error";

	if (!text[0])
		return NULL;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(kept[i], text)) {
			r = kept[i];
			goto out;
		}
	if (n < sizeof(kept) / sizeof(kept[0]) && (kept[n] = strdup(text)))
		r = kept[n++];
out:
	pthread_mutex_unlock(&lock);
	return r;
}

/* The listener of this config with the address text, or NULL. */
static const struct listen_group *listener_named(const struct config *c, const char *text)
{
	for (unsigned k = 0; k < c->nlst; k++)
		if (!strcmp(c->lst[k].addr->text, text))
			return &c->lst[k];
	return NULL;
}

/* The route named, and the listener it is taken on (the one it came in on
 * when the route is still there, else its first). */
static struct route *route_named(const struct config *c, const char *name, const char *listen,
				 const struct listen_group **g)
{
	const struct listen_group *at = listener_named(c, listen);

	*g = NULL;
	for (unsigned k = 0; k < c->nlst; k++)
		for (unsigned i = 0; i < c->lst[k].nroute; i++) {
			struct route *r = c->lst[k].route[i];
			if (strcmp(r->name, name))
				continue;
			if (!*g || &c->lst[k] == at)
				*g = &c->lst[k];
			if (*g == at)
				return r;
		}
	for (unsigned k = 0; *g && k < (*g)->nroute; k++)
		if (!strcmp((*g)->route[k]->name, name))
			return (*g)->route[k];
	return NULL;
}

static int backend_named(const struct route *r, const char *text)
{
	for (unsigned b = 0; b < r->nbackend; b++)
		if (!strcmp(r->backend[b].addr.text, text))
			return (int)b;
	return -1;
}

/* A direction as the record says, its engine taking what it held. */
static int dir_adopt(struct worker *w, struct dir *d, const struct handoff_dir_rec *r,
		     const char *bytes, int *fds)
{
	struct dir_handoff h = { .fds = { -1, -1 }, .bytes = bytes, .len = r->len,
				 .in_pipe = r->in_pipe, .aux = r->aux };
	const struct engine *e = engine_named(r->eng);

	if (r->pipe) {
		h.fds[0] = fds[0];
		h.fds[1] = fds[1];
		h.nfds = 2;
	}
	d->stream = r->stream[0] ? engine_named(r->stream) : NULL;
	if (!e || !e->hand_in || (r->stream[0] && !d->stream))
		return -ENOENT;
	d->eng = e;
	memset(d->priv, 0, sizeof(d->priv));
	if (e->attach)
		e->attach(d);
	if (e->hand_in(w, d, &h))
		return -ENOMEM;
	if (r->pipe)
		fds[0] = fds[1] = -1; /* the engine's now */
	d->bytes = r->bytes;
	d->err = r->err;
	d->eof = r->eof;
	d->rst = r->rst;
	d->shut = r->shut;
	d->dead = r->dead;
	d->urg_state = r->urg_state;
	d->urg_byte = r->urg_byte;
	d->lowat_set = r->lowat_set;
	d->used = r->used;
	d->err_at_dst = r->err_at_dst;
	d->why = r->why < WHY_MAX ? r->why : WHY_AS_SET;
	return 0;
}

/* The client's TLVs, and what the access log shows of its hello. */
static int pp_adopt(struct session *s, const struct handoff_rec *r, const char *rx)
{
	if (!r->authority_len && !r->alpn_len && !r->pp_rx_len)
		return 0;
	if (!(s->pp = calloc(1, sizeof(*s->pp))))
		return -ENOMEM;
	s->pp->authority_len = r->authority_len;
	memcpy(s->pp->authority, r->authority, r->authority_len);
	s->pp->alpn_len = r->alpn_len;
	memcpy(s->pp->alpn, r->alpn, r->alpn_len);
	if (r->pp_rx_len) {
		if (!(s->pp->rx = malloc(r->pp_rx_len)))
			return -ENOMEM;
		memcpy(s->pp->rx, rx, r->pp_rx_len);
		s->pp->rx_len = (uint16_t)r->pp_rx_len;
	}
	return 0;
}

/* Waiting for a slot, connecting or open: the session as it was. Returns
 * -1 when m was not taken (it still holds its descriptors), 0 when it was
 * adopted, 1 when it was taken and then closed (session_adopted). */
static int adopt_routed(struct worker *w, struct handoff_msg *m)
{
	const struct handoff_rec *r = &m->rec;
	const struct listen_group *g;
	struct route *rt = route_named(w->cfg, r->route, r->listen, &g);
	const struct engine *se = engine_named(r->engine);
	int b = r->backend[0] && rt ? backend_named(rt, r->backend) : -1;
	unsigned want = 1u + r->has_srv + 2u * r->dir[0].pipe + 2u * r->dir[1].pipe;
	int *pipes = m->fds + 1 + r->has_srv;
	struct session *s;

	if (!rt || !se || m->nfds != want || (r->state != S_QUEUED && (b < 0 || !r->has_srv)) ||
	    (r->pp_rx_len && m->len < (uint64_t)r->dir[0].len + r->dir[1].len + r->pp_rx_len))
		return -1;
	if (!(s = calloc(1, sizeof(*s))))
		return -1;
	s->w = w;
	s->grp = g;
	s->route = rt;
	s->listen = g->addr;
	s->eng = se;
	s->id = ((uint64_t)w->id << 56) | ++w->next_id;
	s->uid[0] = r->uid[0];
	s->uid[1] = r->uid[1];
	s->cli = (struct side){ .kind = EV_CLIENT, .fd = m->fds[0], .s = s, .broken = r->cli_broken };
	s->srv = (struct side){ .kind = EV_BACKEND, .fd = r->has_srv ? m->fds[1] : -1, .s = s,
				.broken = r->srv_broken };
	m->fds[0] = -1;
	if (r->has_srv)
		m->fds[1] = -1;
	s->up.src = &s->cli;
	s->up.dst = &s->srv;
	s->down.src = &s->srv;
	s->down.dst = &s->cli;
	s->timer.due_ms = TIMER_NONE;
	if (dir_adopt(w, &s->up, &r->dir[0], m->data, pipes) ||
	    dir_adopt(w, &s->down, &r->dir[1], m->data + r->dir[0].len, pipes + 2 * r->dir[0].pipe) ||
	    pp_adopt(s, r, m->data + r->dir[0].len + r->dir[1].len)) {
		/* what the engines took is theirs to give back; the sockets are
		 * closed with the rest of the message (an RST: counted closed) */
		if (s->up.eng && s->up.eng->release)
			s->up.eng->release(w, &s->up);
		if (s->down.eng && s->down.eng->release)
			s->down.eng->release(w, &s->down);
		m->fds[0] = s->cli.fd;
		if (r->has_srv)
			m->fds[1] = s->srv.fd;
		session_free(s);
		return -1;
	}
	s->state = r->state;
	s->ending = r->ending;
	s->expiring = r->expiring;
	s->expire_why = r->expire_why;
	s->counted = r->counted;
	s->attempted = r->attempted;
	s->opened = r->opened;
	s->routed = r->routed;
	s->src_held = r->src_held;
	s->ended_by = r->ended_by;
	s->answered = r->answered;
	s->refused = r->refused;
	s->tries = r->tries;
	s->first = r->first < rt->nbackend ? r->first : 0;
	s->backend = b >= 0 ? (unsigned)b : 0;
	s->cut_seq = b >= 0 ? __atomic_load_n(&rt->health[b]->cut_seq, __ATOMIC_ACQUIRE) : 0;
	s->tfo_sent = r->tfo_sent;
	s->rate_div = r->rate_div;
	s->outq[0] = r->outq[0];
	s->outq[1] = r->outq[1];
	s->fail = reason_kept(r->fail);
	s->fail_err = r->fail_err;
	s->conn_err = r->conn_err;
	s->start_ms = r->start_ms;
	s->active_ms = r->active_ms;
	s->connect_start_ms = r->connect_start_ms;
	s->open_ms = r->open_ms;
	s->connect_deadline_ms = r->connect_deadline_ms;
	s->expire_ms = r->expire_ms;
	s->queued_ms = r->queued_ms;
	s->log_last_ms = r->log_last_ms;
	s->rate_next_ms = r->rate_next_ms;
	s->connect_us = r->connect_us;
	s->open_us = r->open_us;
	s->first_up_us = r->first_up_us;
	s->reported[0] = r->reported[0];
	s->reported[1] = r->reported[1];
	memcpy(&s->peer, &r->peer, sizeof(s->peer));
	s->peerlen = r->peerlen <= sizeof(s->peer) ? r->peerlen : sizeof(s->peer);
	/* what the kernel holds is looked at again: each flag clears on EAGAIN */
	if (s->state == S_OPEN)
		s->cli.can_read = s->cli.can_write = s->srv.can_read = s->srv.can_write = 1;
	CTR_ADD(w, accepted, 1);
	for (unsigned i = 0; i < m->nfds; i++)
		m->fds[i] = -1; /* every descriptor is the session's now */
	handoff_msg_free(m);
	return session_adopted(s) ? 1 : 0;
}

int session_adopt(struct worker *w, struct handoff_msg *m)
{
	const struct handoff_rec *r = &m->rec;
	int r_ok;

	if (r->state == S_HEADER || r->state == S_HELLO) {
		/* nothing was consumed (peeked): accepted again on its
		 * listener, its deadline kept */
		const struct listen_group *g = listener_named(w->cfg, r->listen);
		int fd = m->fds[0];
		if (!g || m->nfds != 1 || (r->pp_rx_len && m->len < (uint64_t)r->dir[0].len +
								 r->dir[1].len + r->pp_rx_len)) {
			handoff_msg_free(m);
			return -1;
		}
		if (r->hello_lowat > 1) { /* the hello's wait is read again from 1 */
			int one = 1;
			setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
		}
		struct session_carry c = { .start_ms = r->start_ms, .deadline_ms = r->connect_deadline_ms,
					   .header_read = r->header_read,
					   .admitted = r->state == S_HELLO && r->src_held,
					   .uid = { r->uid[0], r->uid[1] } };
		struct session tmp = { .pp = NULL };
		if (pp_adopt(&tmp, r, m->data ? m->data + r->dir[0].len + r->dir[1].len : NULL)) {
			session_pp_free(&tmp);
			handoff_msg_free(m);
			return -1;
		}
		c.pp = tmp.pp;
		m->fds[0] = -1;
		r_ok = session_new_at(w, g, fd, (const struct sockaddr *)&r->peer,
				      r->peerlen <= sizeof(r->peer) ? r->peerlen : sizeof(r->peer), &c);
		if (c.pp) { /* not taken */
			tmp.pp = c.pp;
			session_pp_free(&tmp);
		}
		handoff_msg_free(m);
		return r_ok < 0 ? -1 : 0;
	}
	if (r->state != S_QUEUED && r->state != S_CONNECTING && r->state != S_OPEN) {
		handoff_msg_free(m);
		return -1;
	}
	if ((r_ok = adopt_routed(w, m)) >= 0)
		return r_ok ? -1 : 0;
	/* not adopted: m still holds its descriptors, closed with an RST */
	for (unsigned i = 0; i < 1u + r->has_srv && i < m->nfds; i++)
		if (m->fds[i] >= 0) {
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };
			setsockopt(m->fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
	handoff_msg_free(m);
	return -1;
}
