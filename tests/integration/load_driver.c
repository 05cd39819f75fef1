/* SPDX-License-Identifier: MIT */
/* Load drivers: see load_driver.h. */
#define _GNU_SOURCE
#include "load_driver.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define LD_CHUNK (64 * 1024)
#define LD_EVENTS 512
#define LD_TAG 8u
#define LD_TAG_MAGIC 0x7A60000000000000ull
#define LD_ANSWER_KEY 0x00A115E700A115E7ull
#define LD_SEED_STEP 0xD6E8FEB86659FD93ull /* odd, unlike the stream's own step */
#define LD_LISTENER UINT32_MAX

/* Records a failure: counts it and keeps the first reason. */
__attribute__((format(printf, 4, 5))) static void ld_note(char *why, size_t len, _Atomic int *fail,
							  const char *fmt, ...)
{
	if (!why[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	atomic_fetch_add(fail, 1);
}

int ld_listen(struct h_addr *out, int backlog)
{
	struct h_addr a;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	int one = 1, fd;

	h_addr_parse("127.0.0.1:0", &a);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&a.ss, a.len) || listen(fd, backlog) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		int e = errno;
		close(fd);
		return -e;
	}
	h_addr_from(out, (struct sockaddr *)&ss, sl);
	return fd;
}

/* ---- bulk sessions ------------------------------------------------------- */

uint64_t ld_seed_up(const struct ld_bulk *b, unsigned i)
{
	return b->seed + (2 * (uint64_t)i) * LD_SEED_STEP;
}

uint64_t ld_seed_down(const struct ld_bulk *b, unsigned i)
{
	return b->seed + (2 * (uint64_t)i + 1) * LD_SEED_STEP;
}

enum ld_role { LD_CLIENT, LD_BACKEND };

/* One end of a session: the same code drives the client's and the backend's,
 * only the tag exchange and the stream seeds differ by role. */
struct ld_end {
	int fd;
	uint32_t idx;  /* session number (backend: from the tag) */
	uint32_t mask; /* armed epoll events */
	uint8_t tag_out, tag_in; /* tag bytes sent / received */
	uint8_t connected, wdone, rdone, closed, ready;
	unsigned char tin[LD_TAG];
	uint64_t sent, rcvd;
};

struct ld_loop {
	struct ld_bulk *b;
	enum ld_role role;
	struct ld_end *e;
	unsigned cap, nend, live;
	unsigned char *buf;
	uint8_t *seen; /* backend: tags already paired */
	int ep;
	int go;
	uint64_t verified;
};

static char *ld_why(struct ld_loop *l)
{
	return l->role == LD_CLIENT ? l->b->c_why : l->b->b_why;
}

static _Atomic int *ld_failp(struct ld_loop *l)
{
	return l->role == LD_CLIENT ? &l->b->c_fail : &l->b->b_fail;
}

#define LD_FAIL(l, ...) ld_note(ld_why(l), 256, ld_failp(l), __VA_ARGS__)

static const char *ld_side(const struct ld_loop *l)
{
	return l->role == LD_CLIENT ? "client" : "backend";
}

static unsigned ld_tagn(const struct ld_loop *l)
{
	return l->b->tag ? LD_TAG : 0;
}

/* What this end sends and expects: the client's tag is its number, the
 * backend's answer the tag under a key. */
static uint64_t ld_tag_word(const struct ld_loop *l, const struct ld_end *e, int outgoing)
{
	uint64_t t = LD_TAG_MAGIC + e->idx;
	int is_answer = (l->role == LD_CLIENT) != outgoing;
	return is_answer ? t ^ LD_ANSWER_KEY : t;
}

static uint32_t ld_want(const struct ld_loop *l, const struct ld_end *e)
{
	unsigned tn = ld_tagn(l);
	uint32_t w = 0;

	if (!e->connected)
		return EPOLLIN | EPOLLOUT;
	if (!e->rdone)
		w |= EPOLLIN;
	if (e->tag_out < tn && (l->role == LD_CLIENT || e->tag_in == tn))
		w |= EPOLLOUT;
	else if (l->go && e->ready && !e->wdone)
		w |= EPOLLOUT;
	return w;
}

static void ld_mark_ready(struct ld_loop *l, struct ld_end *e)
{
	unsigned tn = ld_tagn(l);

	if (e->ready || !e->connected || e->tag_in < tn || e->tag_out < tn)
		return;
	e->ready = 1;
	atomic_fetch_add(l->role == LD_CLIENT ? &l->b->c_ready : &l->b->b_ready, 1);
}

/* The tag bytes have all arrived: check them (the backend learns which
 * session it serves). Returns 0 or -1 after recording a failure. */
static int ld_tag_done(struct ld_loop *l, struct ld_end *e)
{
	uint64_t got;

	memcpy(&got, e->tin, LD_TAG);
	if (l->role == LD_CLIENT) {
		if (got != ld_tag_word(l, e, 0)) {
			LD_FAIL(l, "session %u: the client got answer %016llx, expected %016llx",
				e->idx, (unsigned long long)got,
				(unsigned long long)ld_tag_word(l, e, 0));
			return -1;
		}
		return 0;
	}
	if (got < LD_TAG_MAGIC || got >= LD_TAG_MAGIC + l->b->n) {
		LD_FAIL(l, "backend connection %u: bad tag %016llx", e->idx,
			(unsigned long long)got);
		return -1;
	}
	e->idx = (uint32_t)(got - LD_TAG_MAGIC);
	if (l->seen[e->idx]++) {
		LD_FAIL(l, "session %u: its tag reached the backend on two connections", e->idx);
		return -1;
	}
	return 0;
}

static int ld_recv_body(struct ld_loop *l, struct ld_end *e)
{
	const struct ld_bulk *b = l->b;
	uint64_t seed = l->role == LD_CLIENT ? ld_seed_down(b, e->idx) : ld_seed_up(b, e->idx);
	ssize_t r = recv(e->fd, l->buf, LD_CHUNK, 0);

	if (r > 0) {
		if (e->rcvd + (uint64_t)r > b->len) {
			LD_FAIL(l, "session %u: the %s received more than %llu bytes", e->idx,
				ld_side(l), (unsigned long long)b->len);
			return -1;
		}
		size_t bad = h_gen_check(seed, e->rcvd, l->buf, (size_t)r);
		if (bad < (size_t)r) {
			LD_FAIL(l, "session %u: the %s received a wrong byte at offset %llu",
				e->idx, ld_side(l), (unsigned long long)(e->rcvd + bad));
			return -1;
		}
		e->rcvd += (uint64_t)r;
		l->verified += (uint64_t)r;
	} else if (r == 0) {
		if (e->rcvd != b->len || !atomic_load(&l->b->go)) {
			LD_FAIL(l, "session %u: the %s got EOF after %llu of %llu bytes%s", e->idx,
				ld_side(l), (unsigned long long)e->rcvd, (unsigned long long)b->len,
				atomic_load(&l->b->go) ? "" : " (before the bodies were released)");
			return -1;
		}
		e->rdone = 1;
		atomic_fetch_add(l->role == LD_CLIENT ? &l->b->c_eof : &l->b->b_eof, 1);
	} else if (errno != EAGAIN && errno != EINTR) {
		LD_FAIL(l, "session %u: the %s's recv after %llu bytes: %s", e->idx, ld_side(l),
			(unsigned long long)e->rcvd, strerror(errno));
		return -1;
	}
	return 0;
}

static int ld_on_readable(struct ld_loop *l, struct ld_end *e)
{
	unsigned tn = ld_tagn(l);

	if (e->tag_in >= tn)
		return ld_recv_body(l, e);
	ssize_t r = recv(e->fd, e->tin + e->tag_in, tn - e->tag_in, 0);
	if (r > 0) {
		e->tag_in += (uint8_t)r;
		if (e->tag_in == tn && ld_tag_done(l, e))
			return -1;
		ld_mark_ready(l, e);
	} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
		LD_FAIL(l, "%s end %u: %s during the tag exchange (%u bytes in)", ld_side(l),
			e->idx, r == 0 ? "EOF" : strerror(errno), e->tag_in);
		return -1;
	}
	return 0;
}

static int ld_on_writable(struct ld_loop *l, struct ld_end *e)
{
	const struct ld_bulk *b = l->b;
	unsigned tn = ld_tagn(l);
	size_t n;

	if (e->tag_out < tn) {
		if (l->role == LD_BACKEND && e->tag_in < tn)
			return 0;
		uint64_t t = ld_tag_word(l, e, 1);
		memcpy(l->buf, (unsigned char *)&t + e->tag_out, tn - e->tag_out);
		n = tn - e->tag_out;
	} else if (l->go && e->ready && !e->wdone) {
		uint64_t left = b->len - e->sent;
		n = left < LD_CHUNK ? (size_t)left : LD_CHUNK;
		h_gen(l->role == LD_CLIENT ? ld_seed_up(b, e->idx) : ld_seed_down(b, e->idx),
		      e->sent, l->buf, n);
	} else {
		return 0;
	}
	if (n) {
		ssize_t r = send(e->fd, l->buf, n, MSG_NOSIGNAL);
		if (r < 0 && errno != EAGAIN && errno != EINTR) {
			LD_FAIL(l, "session %u: the %s's send after %llu bytes: %s", e->idx,
				ld_side(l), (unsigned long long)e->sent, strerror(errno));
			return -1;
		}
		if (r <= 0)
			return 0;
		if (e->tag_out < tn) {
			e->tag_out += (uint8_t)r;
			ld_mark_ready(l, e);
			return 0;
		}
		e->sent += (uint64_t)r;
	}
	if (e->sent == b->len) {
		/* half-close: the peer must see EOF right after the body */
		if (shutdown(e->fd, SHUT_WR)) {
			LD_FAIL(l, "session %u: the %s's shutdown: %s", e->idx, ld_side(l),
				strerror(errno));
			return -1;
		}
		e->wdone = 1;
	}
	return 0;
}

static int ld_on_connect(struct ld_loop *l, struct ld_end *e)
{
	int err = 0;
	socklen_t sl = sizeof err;

	getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
	if (err) {
		LD_FAIL(l, "session %u: connect to the proxy: %s", e->idx, strerror(err));
		return -1;
	}
	e->connected = 1;
	atomic_fetch_add(&l->b->c_connected, 1);
	ld_mark_ready(l, e);
	return 0;
}

static void ld_end_close(struct ld_loop *l, struct ld_end *e, int ok)
{
	close(e->fd);
	e->closed = 1;
	l->live--;
	if (ok)
		atomic_fetch_add(l->role == LD_CLIENT ? &l->b->c_done : &l->b->b_done, 1);
}

static void ld_on_event(struct ld_loop *l, uint32_t id, uint32_t ev)
{
	struct ld_end *e = &l->e[id];
	int bad = 0;

	if (e->closed)
		return;
	if (!e->connected && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
		bad = ld_on_connect(l, e);
	if (!bad && e->connected && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
		bad = ld_on_writable(l, e);
	if (!bad && e->connected && !e->rdone && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)))
		bad = ld_on_readable(l, e);
	if (bad || (e->wdone && e->rdone))
		ld_end_close(l, e, !bad);
	else
		h_epoll_arm(l->ep, e->fd, id, &e->mask, ld_want(l, e));
}

static void ld_accept(struct ld_loop *l)
{
	for (;;) {
		int fd = accept4(l->b->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		atomic_fetch_add(&l->b->b_accepted, 1);
		if (l->nend >= l->cap) {
			LD_FAIL(l, "the backend accepted more connections than %u sessions",
				l->b->n);
			close(fd);
			continue;
		}
		struct ld_end *e = &l->e[l->nend];
		e->fd = fd;
		e->idx = l->nend; /* until the tag says otherwise */
		e->connected = 1;
		e->mask = ld_want(l, e);
		struct epoll_event ev = { .events = e->mask, .data.u32 = l->nend };
		epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev);
		l->nend++;
		l->live++;
		ld_mark_ready(l, e);
	}
}

/* The client opens sessions [nend, to) at once (non-blocking connects). */
static int ld_open(struct ld_loop *l, unsigned to)
{
	const struct ld_bulk *b = l->b;
	const int type = SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC;

	for (unsigned i = l->nend; i < to; i++) {
		struct ld_end *e = &l->e[i];
		e->idx = i;
		e->fd = socket(b->proxy.ss.ss_family, type, 0);
		if (e->fd < 0 ||
		    (connect(e->fd, (const struct sockaddr *)&b->proxy.ss, b->proxy.len) &&
		     errno != EINPROGRESS)) {
			LD_FAIL(l, "session %u: socket/connect: %s", i, strerror(errno));
			if (e->fd >= 0)
				close(e->fd);
			e->closed = 1;
			return -1;
		}
		e->mask = EPOLLIN | EPOLLOUT;
		struct epoll_event ev = { .events = e->mask, .data.u32 = i };
		epoll_ctl(l->ep, EPOLL_CTL_ADD, e->fd, &ev);
		l->nend++;
		l->live++;
	}
	return 0;
}

/* Runs until all n ends were opened and have closed, the deadline, or a
 * stop. */
static void ld_run(struct ld_loop *l)
{
	struct ld_bulk *b = l->b;
	struct epoll_event evs[LD_EVENTS];

	while (l->live > 0 || l->nend < b->n) {
		if (atomic_load(&b->stop))
			return;
		if (l->role == LD_CLIENT && l->nend < b->n && atomic_load(&b->open_rest) &&
		    ld_open(l, b->n))
			return;
		if (h_now_ms() > b->deadline) {
			LD_FAIL(l, "the %s loop passed its deadline with %u of %u ends open",
				ld_side(l), l->live, l->nend);
			return;
		}
		if (!l->go && atomic_load(&b->go)) {
			l->go = 1;
			for (unsigned i = 0; i < l->nend; i++)
				if (!l->e[i].closed)
					h_epoll_arm(l->ep, l->e[i].fd, i, &l->e[i].mask,
					       ld_want(l, &l->e[i]));
		}
		int n = epoll_wait(l->ep, evs, LD_EVENTS, 20);
		for (int k = 0; k < n; k++) {
			if (evs[k].data.u32 == LD_LISTENER)
				ld_accept(l);
			else
				ld_on_event(l, evs[k].data.u32, evs[k].events);
		}
	}
}

static void ld_loop_free(struct ld_loop *l)
{
	for (unsigned i = 0; i < l->nend; i++)
		if (!l->e[i].closed)
			close(l->e[i].fd);
	if (l->ep >= 0)
		close(l->ep);
	free(l->e);
	free(l->buf);
	free(l->seen);
}

static void *ld_role_main(struct ld_bulk *b, enum ld_role role)
{
	struct ld_loop l = { .b = b, .role = role, .cap = b->n };

	l.ep = epoll_create1(EPOLL_CLOEXEC);
	l.e = calloc(b->n ? b->n : 1, sizeof *l.e);
	l.buf = malloc(LD_CHUNK);
	l.seen = calloc(b->n ? b->n : 1, 1);
	if (l.ep < 0 || !l.e || !l.buf || !l.seen) {
		LD_FAIL(&l, "%s loop setup failed", ld_side(&l));
	} else if (role == LD_BACKEND) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = LD_LISTENER };
		epoll_ctl(l.ep, EPOLL_CTL_ADD, b->lfd, &ev);
		ld_run(&l);
	} else if (ld_open(&l, b->first && b->first < b->n ? b->first : b->n) == 0) {
		ld_run(&l);
	}
	atomic_fetch_add(role == LD_CLIENT ? &b->c_verified : &b->b_verified, l.verified);
	/* Ends left open (deadline, setup or connect failure): the other loop
	 * would wait for its deadline in vain. Ends that failed and closed
	 * reach the other side as a reset or EOF, so that loop finishes. */
	if (l.live > 0 || l.nend < b->n)
		atomic_store(&b->stop, 1);
	ld_loop_free(&l);
	return NULL;
}

static void *ld_client_main(void *arg)
{
	return ld_role_main(arg, LD_CLIENT);
}

static void *ld_backend_main(void *arg)
{
	return ld_role_main(arg, LD_BACKEND);
}

int ld_bulk_start(struct ld_bulk *b)
{
	int r;

	if (b->len && !b->tag)
		return -EINVAL; /* without the tag the backend cannot know the seeds */
	r = pthread_create(&b->bt, NULL, ld_backend_main, b);
	if (r)
		return -r;
	r = pthread_create(&b->ct, NULL, ld_client_main, b);
	if (r) {
		atomic_store(&b->stop, 1);
		pthread_join(b->bt, NULL);
		return -r;
	}
	b->started = 1;
	return 0;
}

void ld_bulk_join(struct ld_bulk *b)
{
	if (!b->started)
		return;
	pthread_join(b->ct, NULL);
	pthread_join(b->bt, NULL);
	b->started = 0;
}

/* ---- short connections --------------------------------------------------- */

#define LD_SHORT_SLOTS 1024
#define LD_SHORT_MAX_INFLIGHT 64

static uint64_t ld_short_seed(const struct ld_short *s, uint64_t i)
{
	return s->seed + i * LD_SEED_STEP;
}

/* The request: the connection's number, then 8 bytes of its stream. */
static void ld_short_request(const struct ld_short *s, uint64_t i, unsigned char req[LD_SHORT_REQ])
{
	memcpy(req, &i, 8);
	h_gen(ld_short_seed(s, i), 0, req + 8, LD_SHORT_REQ - 8);
}

static void ld_short_reply(const struct ld_short *s, uint64_t i, unsigned char rep[LD_SHORT_REP])
{
	h_gen(ld_short_seed(s, i) ^ LD_ANSWER_KEY, 0, rep, LD_SHORT_REP);
}

struct ld_sconn {
	int fd;
	uint64_t idx;
	uint32_t mask;
	uint8_t got, sent, connected;
	unsigned char in[LD_SHORT_REQ > LD_SHORT_REP ? LD_SHORT_REQ : LD_SHORT_REP];
	unsigned char out[LD_SHORT_REQ > LD_SHORT_REP ? LD_SHORT_REQ : LD_SHORT_REP];
};

#define LD_SFAIL(s, ...) ld_note((s)->b_why, sizeof(s)->b_why, &(s)->b_fail, __VA_ARGS__)

/* Backend: reads a request, checks it, answers and closes first. Returns 1
 * when the connection is over (closed), 0 to wait for more. */
static int ld_sback_step(struct ld_short *s, struct ld_sconn *c, uint32_t ev)
{
	if (c->got < LD_SHORT_REQ && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
		ssize_t r = recv(c->fd, c->in + c->got, LD_SHORT_REQ - c->got, 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			LD_SFAIL(s, "backend: %s after %u request bytes",
				 r ? strerror(errno) : "EOF", c->got);
			return 1;
		}
		if (r > 0 && (c->got += (uint8_t)r) == LD_SHORT_REQ) {
			unsigned char want[LD_SHORT_REQ];
			memcpy(&c->idx, c->in, 8);
			ld_short_request(s, c->idx, want);
			if (memcmp(want, c->in, LD_SHORT_REQ)) {
				LD_SFAIL(s, "backend: connection %llu: request corrupted",
					 (unsigned long long)c->idx);
				return 1;
			}
			atomic_fetch_add(&s->b_served, 1);
			ld_short_reply(s, c->idx, c->out);
		}
	}
	if (c->got == LD_SHORT_REQ && c->sent < LD_SHORT_REP) {
		ssize_t r = send(c->fd, c->out + c->sent, LD_SHORT_REP - c->sent, MSG_NOSIGNAL);
		if (r < 0 && errno != EAGAIN && errno != EINTR) {
			LD_SFAIL(s, "backend: connection %llu: send: %s",
				 (unsigned long long)c->idx, strerror(errno));
			return 1;
		}
		if (r > 0)
			c->sent += (uint8_t)r;
	}
	return c->sent == LD_SHORT_REP; /* answered: the backend closes first */
}

static void ld_sback_accept(struct ld_short *s, int ep, struct ld_sconn *cs, unsigned *freel,
			    unsigned *nfree)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (!*nfree) {
			LD_SFAIL(s, "backend: more than %d connections at once", LD_SHORT_SLOTS);
			close(fd);
			continue;
		}
		unsigned k = freel[--*nfree];
		cs[k] = (struct ld_sconn){ .fd = fd, .mask = EPOLLIN, .connected = 1 };
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = k };
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	}
}

static void *ld_sback_main(void *arg)
{
	struct ld_short *s = arg;
	struct ld_sconn *cs = calloc(LD_SHORT_SLOTS, sizeof *cs);
	unsigned *freel = calloc(LD_SHORT_SLOTS, sizeof *freel), nfree = 0;
	struct epoll_event evs[LD_EVENTS];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (!cs || !freel || ep < 0) {
		LD_SFAIL(s, "backend setup failed");
		goto out;
	}
	for (unsigned k = LD_SHORT_SLOTS; k-- > 0;) {
		cs[k].fd = -1;
		freel[nfree++] = k;
	}
	struct epoll_event lev = { .events = EPOLLIN, .data.u32 = LD_LISTENER };
	epoll_ctl(ep, EPOLL_CTL_ADD, s->lfd, &lev);
	while (!atomic_load(&s->stop)) {
		int n = epoll_wait(ep, evs, LD_EVENTS, 20);
		for (int i = 0; i < n; i++) {
			uint32_t k = evs[i].data.u32;
			if (k == LD_LISTENER) {
				ld_sback_accept(s, ep, cs, freel, &nfree);
				continue;
			}
			struct ld_sconn *c = &cs[k];
			if (c->fd < 0)
				continue;
			if (ld_sback_step(s, c, evs[i].events)) {
				close(c->fd);
				c->fd = -1;
				freel[nfree++] = k;
				atomic_fetch_add(&s->b_closed, 1);
			} else {
				h_epoll_arm(ep, c->fd, k, &c->mask,
				       c->got < LD_SHORT_REQ ? EPOLLIN : EPOLLOUT);
			}
		}
	}
out:
	for (unsigned k = 0; cs && k < LD_SHORT_SLOTS; k++)
		if (cs[k].fd >= 0)
			close(cs[k].fd);
	if (ep >= 0)
		close(ep);
	free(cs);
	free(freel);
	return NULL;
}

int ld_short_start(struct ld_short *s)
{
	int r = pthread_create(&s->bt, NULL, ld_sback_main, s);
	if (r)
		return -r;
	s->started = 1;
	return 0;
}

void ld_short_stop(struct ld_short *s)
{
	if (!s->started)
		return;
	atomic_store(&s->stop, 1);
	pthread_join(s->bt, NULL);
	s->started = 0;
}

/* The client runs on the main thread: plain counts, first reason kept. */
__attribute__((format(printf, 2, 3))) static void ld_cfail(struct ld_short *s, const char *fmt, ...)
{
	if (!s->c_why[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->c_why, sizeof s->c_why, fmt, ap);
		va_end(ap);
	}
	s->c_fail++;
}

/* Client: connect, send the request, read the answer and then EOF (the
 * backend closed first), close. Returns 1 when the connection is over. */
static int ld_sclient_step(struct ld_short *s, struct ld_sconn *c, uint32_t ev)
{
	if (!c->connected) {
		int err = 0;
		socklen_t sl = sizeof err;
		if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return 0;
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
		if (err) {
			ld_cfail(s, "connection %llu: connect: %s", (unsigned long long)c->idx,
				 strerror(err));
			return 1;
		}
		c->connected = 1;
	}
	if (c->sent < LD_SHORT_REQ) {
		ssize_t r = send(c->fd, c->out + c->sent, LD_SHORT_REQ - c->sent, MSG_NOSIGNAL);
		if (r < 0 && errno != EAGAIN && errno != EINTR) {
			ld_cfail(s, "connection %llu: send: %s", (unsigned long long)c->idx,
				 strerror(errno));
			return 1;
		}
		if (r > 0)
			c->sent += (uint8_t)r;
		return 0;
	}
	if (!(ev & (EPOLLIN | EPOLLERR | EPOLLHUP)))
		return 0;
	unsigned char tmp[LD_SHORT_REP + 1];
	/* one byte more than the answer: the EOF must come right after it */
	ssize_t r = recv(c->fd, tmp, LD_SHORT_REP + 1 - c->got, 0);
	if (r < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		ld_cfail(s, "connection %llu: recv after %u bytes: %s", (unsigned long long)c->idx,
			 c->got, strerror(errno));
		return 1;
	}
	if (r > 0) {
		if (c->got + r > LD_SHORT_REP) {
			ld_cfail(s, "connection %llu: more than %d answer bytes",
				 (unsigned long long)c->idx, LD_SHORT_REP);
			return 1;
		}
		memcpy(c->in + c->got, tmp, (size_t)r);
		c->got += (uint8_t)r;
		return 0;
	}
	unsigned char want[LD_SHORT_REP];
	ld_short_reply(s, c->idx, want);
	if (c->got != LD_SHORT_REP || memcmp(want, c->in, LD_SHORT_REP)) {
		ld_cfail(s, "connection %llu: EOF after %u answer bytes%s",
			 (unsigned long long)c->idx, c->got,
			 c->got == LD_SHORT_REP ? " (wrong content)" : "");
		return 1;
	}
	s->c_ok++;
	return 1;
}

static int ld_sclient_open(struct ld_short *s, int ep, struct ld_sconn *c, uint32_t k)
{
	*c = (struct ld_sconn){ .idx = s->next++, .mask = EPOLLIN | EPOLLOUT };
	ld_short_request(s, c->idx, c->out);
	c->fd = socket(s->proxy.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || (connect(c->fd, (const struct sockaddr *)&s->proxy.ss, s->proxy.len) &&
			  errno != EINPROGRESS)) {
		ld_cfail(s, "connection %llu: socket/connect: %s", (unsigned long long)c->idx,
			 strerror(errno));
		if (c->fd >= 0)
			close(c->fd);
		c->fd = -1;
		return -1;
	}
	struct epoll_event ev = { .events = c->mask, .data.u32 = k };
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	return 0;
}

void ld_short_run(struct ld_short *s, uint64_t count, int64_t deadline)
{
	struct ld_sconn cs[LD_SHORT_MAX_INFLIGHT];
	struct epoll_event evs[LD_SHORT_MAX_INFLIGHT];
	unsigned k, slots = s->inflight;
	uint64_t launched = 0;
	int live = 0, ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0) {
		ld_cfail(s, "epoll_create1: %s", strerror(errno));
		return;
	}
	if (!slots || slots > LD_SHORT_MAX_INFLIGHT)
		slots = LD_SHORT_MAX_INFLIGHT;
	for (k = 0; k < slots; k++)
		cs[k].fd = -1;
	for (;;) {
		/* refill the free slots, unless a failure stops the run */
		for (k = 0; k < slots && launched < count && !s->c_fail; k++) {
			if (cs[k].fd >= 0)
				continue;
			launched++;
			if (ld_sclient_open(s, ep, &cs[k], k) == 0)
				live++;
		}
		if (!live)
			break;
		if (h_now_ms() > deadline) {
			ld_cfail(s,
				 "deadline passed with %d connections open, %llu of %llu started",
				 live, (unsigned long long)launched, (unsigned long long)count);
			break;
		}
		int n = epoll_wait(ep, evs, LD_SHORT_MAX_INFLIGHT, 20);
		for (int i = 0; i < n; i++) {
			struct ld_sconn *c = &cs[evs[i].data.u32];
			if (c->fd < 0)
				continue;
			if (ld_sclient_step(s, c, evs[i].events)) {
				close(c->fd);
				c->fd = -1;
				live--;
			} else {
				h_epoll_arm(ep, c->fd, evs[i].data.u32, &c->mask,
				       c->sent < LD_SHORT_REQ ? EPOLLOUT : EPOLLIN);
			}
		}
	}
	for (k = 0; k < slots; k++)
		if (cs[k].fd >= 0)
			close(cs[k].fd);
	close(ep);
}

/* ---- probes -------------------------------------------------------------- */

int ld_fd_kinds(pid_t pid, struct ld_fds *f)
{
	char path[64], link[128];
	struct dirent *de;

	memset(f, 0, sizeof *f);
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		ssize_t k = readlinkat(dirfd(d), de->d_name, link, sizeof link - 1);
		if (k < 0)
			continue; /* closed meanwhile */
		link[k] = '\0';
		f->total++;
		if (!strncmp(link, "socket:", 7))
			f->sockets++;
		else if (!strncmp(link, "pipe:", 5))
			f->pipes++;
		else
			f->other++;
	}
	closedir(d);
	return 0;
}

long ld_status_kib(pid_t pid, const char *key)
{
	char path[64], line[256];
	size_t kl = strlen(key);
	long v = -1;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtol(line + kl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

int ld_stats_addr(const struct h_proxy *p, struct h_addr *out)
{
	static const char needle[] = "stats: listening on ";
	char l[1024], a[160] = "";
	FILE *f = fopen(p->log, "re");

	while (f && fgets(l, sizeof l, f)) {
		const char *at = strstr(l, needle);
		if (at)
			sscanf(at + sizeof needle - 1, "%159s", a);
	}
	if (f)
		fclose(f);
	return a[0] ? h_addr_parse(a, out) : -1;
}

long long ld_metric(const char *body, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = strstr(body, name); p; p = strstr(p + 1, name))
		if (p > body && p[-1] == '\n' && p[nl] == ' ')
			return strtoll(p + nl + 1, NULL, 10);
	return -1;
}
