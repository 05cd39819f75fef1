/* SPDX-License-Identifier: MIT */
/* bench_traffic: see bench_traffic.h. */
#define _GNU_SOURCE
#include "bench_traffic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"

#define MAGIC       0x53504c42u /* "SPLB" */
#define PATTERN     (1u << 20)  /* a stream repeats its seeded pattern every MiB */
#define CHUNK       (128u << 10)/* sender write size (iperf3's default) */
#define MSG         64
#define SINK_BUF    (256u << 10)

enum { MODE_SINK = 1, MODE_ECHO, MODE_CONN };

struct hdr {
	uint32_t magic;
	uint8_t mode;
	uint8_t pad[3];
	uint64_t seed;
};

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The pattern of a seed, PATTERN + CHUNK bytes so any CHUNK-long window
 * starting below PATTERN is contiguous. */
static char *pattern_new(uint64_t seed)
{
	uint64_t *p = malloc(PATTERN + CHUNK), x = seed;

	if (!p)
		return NULL;
	for (size_t i = 0; i < PATTERN / 8; i++) {
		uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		p[i] = z ^ (z >> 31);
	}
	memcpy((char *)p + PATTERN, p, CHUNK);
	return (char *)p;
}

/* ---- the sink ------------------------------------------------------------ */

struct sconn {
	int fd;
	uint8_t mode;
	struct hdr h;
	unsigned hlen;        /* header bytes received */
	char *pattern;        /* SINK */
	uint64_t off;         /* SINK: bytes received and compared */
	int mismatch;
	char msg[MSG];        /* CONN: the request, sent back */
	char *pend;           /* ECHO: bytes the socket did not take yet */
	unsigned mlen, moff, pcap;
	unsigned got;         /* CONN: request bytes received */
};

struct bench_sink {
	int lfd, epfd, stopfd;
	pthread_t thr;
	char addr[ADDR_TEXT_MAX];
	uint64_t verified, mismatches; /* atomic reads */
	char buf[SINK_BUF];
};

static void sconn_close(struct bench_sink *s, struct sconn *c)
{
	/* Deregister before close: the bench forks (perf, the proxies), and a
	 * child that has not exec'd yet holds a copy of this socket, which
	 * would keep it registered and deliver events for a freed sconn. */
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->pattern);
	free(c->pend);
	free(c);
}

/* Sends what is pending; returns 0, 1 when blocked, -1 on error. */
static int sconn_flush(struct bench_sink *s, struct sconn *c)
{
	while (c->moff < c->mlen) {
		ssize_t n = send(c->fd, c->pend + c->moff, c->mlen - c->moff, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN) {
				struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
				epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
				return 1;
			}
			return -1;
		}
		c->moff += (unsigned)n;
	}
	c->moff = c->mlen = 0;
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	}
	return 0;
}

/* Consumes n bytes of payload. Returns 0 to go on, -1 to close. */
static int sconn_payload(struct bench_sink *s, struct sconn *c, const char *p, size_t n)
{
	switch (c->mode) {
	case MODE_SINK:
		while (n) {
			size_t at = c->off % PATTERN, k = n < PATTERN - at ? n : PATTERN - at;
			if (!c->mismatch && memcmp(p, c->pattern + at, k))
				c->mismatch = 1;
			c->off += k;
			p += k;
			n -= k;
		}
		return 0;
	case MODE_ECHO: {
		/* Straight back from the receive buffer; what the socket does not
		 * take waits in pend, and reading stops until it is gone (the
		 * clients pipeline at most a few KiB per connection). */
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno != EAGAIN)
			return -1;
		if (w < 0)
			w = 0;
		if ((size_t)w == n)
			return 0;
		n -= (size_t)w;
		if (n > c->pcap) {
			char *q = realloc(c->pend, n);
			if (!q)
				return -1;
			c->pend = q;
			c->pcap = (unsigned)n;
		}
		memcpy(c->pend, p + w, n);
		c->mlen = (unsigned)n;
		c->moff = 0;
		return sconn_flush(s, c) < 0 ? -1 : 0;
	}
	case MODE_CONN:
		if (c->got + n > MSG)
			return -1;
		memcpy(c->msg + c->got, p, n);
		c->got += (unsigned)n;
		if (c->got == MSG) {
			/* 64 bytes always fit an empty socket buffer; the sink
			 * closes first so TIME_WAIT lands on its fixed port, not on
			 * the client's ephemeral ones. */
			if (send(c->fd, c->msg, MSG, MSG_NOSIGNAL) != MSG)
				return -1;
			return -1;
		}
		return 0;
	}
	return -1;
}

static int sconn_readable(struct bench_sink *s, struct sconn *c)
{
	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t n = recv(c->fd, s->buf, sizeof(s->buf), MSG_DONTWAIT);
		const char *p = s->buf;

		if (n == 0) {
			if (c->mode == MODE_SINK) { /* the verdict */
				uint64_t v[2] = { c->off, (uint64_t)c->mismatch };
				__atomic_add_fetch(&s->verified, c->mismatch ? 0 : c->off, __ATOMIC_RELAXED);
				__atomic_add_fetch(&s->mismatches, (uint64_t)c->mismatch, __ATOMIC_RELAXED);
				if (send(c->fd, v, sizeof(v), MSG_NOSIGNAL) < 0) {
					/* the sender gave up; nothing to tell */
				}
			}
			return -1;
		}
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		if (c->hlen < sizeof(c->h)) {
			size_t k = sizeof(c->h) - c->hlen < (size_t)n ? sizeof(c->h) - c->hlen : (size_t)n;
			memcpy((char *)&c->h + c->hlen, p, k);
			c->hlen += (unsigned)k;
			p += k;
			n -= (ssize_t)k;
			if (c->hlen < sizeof(c->h))
				continue;
			if (c->h.magic != MAGIC)
				return -1;
			c->mode = c->h.mode;
			if (c->mode == MODE_SINK && !(c->pattern = pattern_new(c->h.seed)))
				return -1;
		}
		if (n && sconn_payload(s, c, p, (size_t)n) < 0)
			return -1;
		if (c->mlen)
			return 0; /* blocked: read on once it is sent */
	}
	return 0;
}

static void *sink_main(void *arg)
{
	struct bench_sink *s = arg;
	struct epoll_event evs[64];

	for (;;) {
		int n = epoll_wait(s->epfd, evs, 64, -1);
		for (int i = 0; i < n; i++) {
			void *ptr = evs[i].data.ptr;
			if (ptr == &s->stopfd)
				return NULL;
			if (ptr == &s->lfd) {
				int fd;
				while ((fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct sconn *c = calloc(1, sizeof(*c));
					struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
					int one = 1;
					if (!c) {
						close(fd);
						continue;
					}
					c->fd = fd;
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
				}
				continue;
			}
			struct sconn *c = ptr;
			int r = 0;
			if (evs[i].events & EPOLLOUT)
				r = sconn_flush(s, c) < 0 ? -1 : 0;
			if (r == 0 && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->mlen)
				r = sconn_readable(s, c);
			if (r < 0)
				sconn_close(s, c);
		}
	}
}

struct bench_sink *bench_sink_start(const char *where, char *err, unsigned errlen)
{
	struct bench_sink *s = calloc(1, sizeof(*s));
	struct addr a;
	struct epoll_event ev = { .events = EPOLLIN };
	int one = 1;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (addr_parse(where ? where : "127.0.0.1:0", ADDR_LISTEN, &a, err, errlen))
		goto fail;
	s->lfd = socket(a.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a.ss, a.len) || listen(s->lfd, 4096)) {
		snprintf(err, errlen, "sink: listen on %s: %s", a.text, strerror(errno));
		goto fail;
	}
	a.len = sizeof(a.ss);
	getsockname(s->lfd, (struct sockaddr *)&a.ss, &a.len);
	addr_format((struct sockaddr *)&a.ss, a.len, s->addr, sizeof(s->addr));
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->stopfd = eventfd(0, EFD_CLOEXEC);
	ev.data.ptr = &s->lfd;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
	ev.data.ptr = &s->stopfd;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->stopfd, &ev);
	if (pthread_create(&s->thr, NULL, sink_main, s)) {
		snprintf(err, errlen, "sink: cannot start its thread");
		goto fail;
	}
	return s;
fail:
	free(s);
	return NULL;
}

const char *bench_sink_addr(const struct bench_sink *s)
{
	return s->addr;
}

void bench_sink_totals(const struct bench_sink *s, uint64_t *verified, uint64_t *mismatches)
{
	*verified = __atomic_load_n(&s->verified, __ATOMIC_RELAXED);
	*mismatches = __atomic_load_n(&s->mismatches, __ATOMIC_RELAXED);
}

void bench_sink_stop(struct bench_sink *s)
{
	uint64_t one = 1;

	if (write(s->stopfd, &one, sizeof(one)) < 0) {
		/* cannot happen on a fresh eventfd */
	}
	pthread_join(s->thr, NULL);
	close(s->lfd);
	close(s->epfd);
	close(s->stopfd);
	free(s);
}

/* ---- clients ------------------------------------------------------------- */

static int dial(const struct sockaddr *target, socklen_t len, int timeout_s)
{
	struct timeval tv = { .tv_sec = timeout_s };
	int one = 1, fd = socket(target->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (target->sa_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, target, len)) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

static int recv_all(int fd, void *p, size_t n)
{
	while (n) {
		ssize_t r = recv(fd, p, n, 0);
		if (r <= 0)
			return -1;
		p = (char *)p + r;
		n -= (size_t)r;
	}
	return 0;
}

struct stream_job {
	const struct sockaddr *target;
	socklen_t len;
	double seconds;
	uint64_t seed, sent, verified;
	double t0, t1;
	int ok;
	char why[128];
};

static void *bulk_stream(void *arg)
{
	struct stream_job *j = arg;
	struct hdr h = { .magic = MAGIC, .mode = MODE_SINK, .seed = j->seed };
	uint64_t verdict[2];
	char *pat = pattern_new(j->seed);
	double end;
	int fd = dial(j->target, j->len, 10);

	if (fd < 0 || !pat) {
		snprintf(j->why, sizeof(j->why), "connect: %s", strerror(errno));
		goto out;
	}
	j->t0 = bench_now();
	end = j->t0 + j->seconds;
	if (send_all(fd, &h, sizeof(h)))
		goto io;
	do {
		for (int k = 0; k < 8; k++) { /* check the clock every 1 MiB */
			if (send_all(fd, pat + j->sent % PATTERN, CHUNK))
				goto io;
			j->sent += CHUNK;
		}
	} while (bench_now() < end);
	shutdown(fd, SHUT_WR);
	if (recv_all(fd, verdict, sizeof(verdict)))
		goto io;
	j->t1 = bench_now();
	j->verified = verdict[0];
	j->ok = verdict[0] == j->sent && !verdict[1];
	if (!j->ok)
		snprintf(j->why, sizeof(j->why), "sink verified %llu of %llu bytes%s",
			 (unsigned long long)verdict[0], (unsigned long long)j->sent,
			 verdict[1] ? ", content MISMATCH" : "");
	goto out;
io:
	snprintf(j->why, sizeof(j->why), "stream I/O after %llu bytes: %s",
		 (unsigned long long)j->sent, strerror(errno));
out:
	if (fd >= 0)
		close(fd);
	free(pat);
	return NULL;
}

int bench_bulk(const struct sockaddr *target, socklen_t len, unsigned streams, double seconds,
	       uint64_t seed, struct bulk_result *r)
{
	struct stream_job jobs[64];
	pthread_t t[64];
	double t0 = 1e300, t1 = 0;

	memset(r, 0, sizeof(*r));
	if (streams > 64)
		streams = 64;
	for (unsigned i = 0; i < streams; i++) {
		jobs[i] = (struct stream_job){ .target = target, .len = len, .seconds = seconds,
					       .seed = seed + i };
		pthread_create(&t[i], NULL, bulk_stream, &jobs[i]);
	}
	r->ok = 1;
	for (unsigned i = 0; i < streams; i++) {
		pthread_join(t[i], NULL);
		if (!jobs[i].ok && r->ok) {
			r->ok = 0;
			snprintf(r->why, sizeof(r->why), "stream %u: %s", i, jobs[i].why);
		}
		r->bytes += jobs[i].verified;
		if (jobs[i].t0 && jobs[i].t0 < t0)
			t0 = jobs[i].t0;
		if (jobs[i].t1 > t1)
			t1 = jobs[i].t1;
	}
	r->seconds = t1 > t0 ? t1 - t0 : 0;
	return r->ok ? 0 : -1;
}

int bench_rr(const struct sockaddr *target, socklen_t len, double seconds, size_t max_n,
	     struct rr_result *r)
{
	char msg[sizeof(struct hdr) + MSG], back[MSG];
	struct hdr h = { .magic = MAGIC, .mode = MODE_ECHO };
	double end;
	int fd;

	memset(r, 0, sizeof(*r));
	r->rtt_us = malloc(max_n * sizeof(double));
	fd = dial(target, len, 5);
	if (fd < 0 || !r->rtt_us) {
		snprintf(r->why, sizeof(r->why), "connect: %s", strerror(errno));
		goto out;
	}
	memcpy(msg, &h, sizeof(h));
	end = bench_now() + seconds;
	for (size_t i = 0; i < max_n; i++) {
		const char *p = i ? msg + sizeof(h) : msg;
		size_t n = i ? MSG : sizeof(msg);
		double t0;

		memset(msg + sizeof(h), (int)(i & 0xff), MSG);
		t0 = bench_now();
		if (send_all(fd, p, n) || recv_all(fd, back, MSG)) {
			snprintf(r->why, sizeof(r->why), "round trip %zu: %s", i, strerror(errno));
			goto out;
		}
		r->rtt_us[r->n++] = (bench_now() - t0) * 1e6;
		if (memcmp(back, msg + sizeof(h), MSG)) {
			snprintf(r->why, sizeof(r->why), "round trip %zu: reply differs", i);
			goto out;
		}
		if (!(i & 63) && bench_now() > end)
			break;
	}
	r->ok = r->n > 0;
out:
	if (fd >= 0)
		close(fd);
	return r->ok ? 0 : -1;
}

/* ---- load: many connections driven by one epoll thread -------------------
 *
 * The request/response and short-connection workloads keep N connections
 * busy from a single thread, pinned to one CPU when asked, so the client
 * side costs one CPU at most on a small box and its own CPU time can be
 * reported beside the proxy's. */

#define LOAD_BUF (64u << 10)

struct lconn {
	int fd;
	unsigned char fill;    /* rr: every byte this connection sends */
	char *out;             /* rr: depth * size bytes of fill */
	uint64_t rcvd;         /* rr: payload bytes echoed back */
	unsigned want;         /* rr: bytes due to be sent, not yet taken */
	unsigned got;          /* conn: reply bytes received */
	int writing;           /* EPOLLOUT is registered */
	int reading;           /* conn: request sent, reading the reply */
};

struct load_job {
	const struct sockaddr *target;
	socklen_t len;
	unsigned conns, size, depth;
	double seconds;
	int cpu, conn_mode;
	struct load_result *r;
	int ep;
	struct lconn *c;
	char buf[LOAD_BUF];
};

static void load_fail(struct load_job *j, const char *what, int err)
{
	if (!j->r->failed++)
		snprintf(j->r->why, sizeof(j->r->why), "%s: %s", what,
			 err ? strerror(err) : "unexpected bytes");
}

static void lconn_events(struct load_job *j, struct lconn *c, unsigned idx, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u32 = idx };

	epoll_ctl(j->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* rr: sends what is due; returns -1 on error. */
static int lconn_push(struct load_job *j, struct lconn *c, unsigned idx)
{
	unsigned cap = j->size * j->depth;

	while (c->want) {
		ssize_t w = send(c->fd, c->out, c->want < cap ? c->want : cap, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno != EAGAIN)
				return -1;
			if (!c->writing) {
				c->writing = 1;
				lconn_events(j, c, idx, EPOLLIN | EPOLLOUT);
			}
			return 0;
		}
		c->want -= (unsigned)w;
	}
	if (c->writing) {
		c->writing = 0;
		lconn_events(j, c, idx, EPOLLIN);
	}
	return 0;
}

/* Whether n bytes are all `fill` (a proxy that mixed up connections or
 * bytes fails here). */
static int all_fill(const char *p, size_t n, unsigned char fill)
{
	unsigned char bad = 0;

	for (size_t i = 0; i < n; i++)
		bad |= (unsigned char)p[i] ^ fill;
	return !bad;
}

/* rr: reads the echoes and sends one request per completed reply. */
static int lconn_rr_readable(struct load_job *j, struct lconn *c, unsigned idx)
{
	for (;;) {
		ssize_t n = recv(c->fd, j->buf, sizeof(j->buf), 0);
		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (n < 0)
			return errno == EAGAIN ? lconn_push(j, c, idx) : -1;
		if (!all_fill(j->buf, (size_t)n, c->fill)) {
			errno = 0;
			return -1;
		}
		c->want += (unsigned)((c->rcvd + (uint64_t)n) / j->size - c->rcvd / j->size) * j->size;
		c->rcvd += (uint64_t)n;
	}
}

static int rr_setup(struct load_job *j)
{
	struct hdr h = { .magic = MAGIC, .mode = MODE_ECHO };

	for (unsigned i = 0; i < j->conns; i++) {
		struct lconn *c = &j->c[i];
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
		c->fill = (unsigned char)(1 + i % 251);
		c->fd = dial(j->target, j->len, 5);
		if (c->fd < 0 || !(c->out = malloc((size_t)j->size * j->depth)))
			return -1;
		memset(c->out, c->fill, (size_t)j->size * j->depth);
		if (send_all(c->fd, &h, sizeof(h)))
			return -1;
		fcntl(c->fd, F_SETFL, O_NONBLOCK);
		epoll_ctl(j->ep, EPOLL_CTL_ADD, c->fd, &ev);
	}
	for (unsigned i = 0; i < j->conns; i++) {
		j->c[i].want = j->size * j->depth; /* the pipeline, primed */
		if (lconn_push(j, &j->c[i], i))
			return -1;
	}
	return 0;
}

/* conn: opens slot idx's next connection (non-blocking connect). */
static void lconn_open(struct load_job *j, struct lconn *c, unsigned idx)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.u32 = idx };

	c->got = 0;
	c->reading = 0;
	c->fd = socket(j->target->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		load_fail(j, "socket", errno);
		return;
	}
	if (connect(c->fd, j->target, j->len) && errno != EINPROGRESS) {
		load_fail(j, "connect", errno);
		close(c->fd);
		c->fd = -1;
		return;
	}
	epoll_ctl(j->ep, EPOLL_CTL_ADD, c->fd, &ev);
}

/* conn: one event on a slot; returns 1 when a connection completed. */
static int lconn_conn_event(struct load_job *j, struct lconn *c, unsigned idx)
{
	static const char reply[MSG] = { [0 ... MSG - 1] = 'c' };
	char req[sizeof(struct hdr) + MSG];
	struct hdr h = { .magic = MAGIC, .mode = MODE_CONN };
	int done = 0;

	if (!c->reading) {
		/* connected (or failed: send reports the connect's error) */
		memcpy(req, &h, sizeof(h));
		memset(req + sizeof(h), 'c', MSG);
		if (send(c->fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
			load_fail(j, "short connection: connect/send", errno);
			goto reopen;
		}
		c->reading = 1;
		lconn_events(j, c, idx, EPOLLIN);
		return 0;
	}
	for (;;) {
		ssize_t n = recv(c->fd, j->buf, sizeof(j->buf), 0);
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0) {
			load_fail(j, "short connection: recv", errno);
			goto reopen;
		}
		if (n == 0) {
			done = c->got == MSG;
			if (!done)
				load_fail(j, "short connection: reply cut short", 0);
			goto reopen;
		}
		if (c->got + (size_t)n > MSG || memcmp(j->buf, reply, (size_t)n)) {
			load_fail(j, "short connection: reply", 0);
			goto reopen;
		}
		c->got += (unsigned)n;
	}
reopen:
	close(c->fd); /* closing removes it from the epoll set */
	lconn_open(j, c, idx);
	return done;
}

static double thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Anything completed yet: a connection (conn mode) or a response byte. */
static int load_progress(const struct load_job *j)
{
	if (j->conn_mode)
		return j->r->done > 0;
	for (unsigned i = 0; i < j->conns; i++)
		if (j->c[i].rcvd >= j->size)
			return 1;
	return 0;
}

static void *load_main(void *arg)
{
	struct load_job *j = arg;
	struct load_result *r = j->r;
	struct epoll_event evs[256];
	double t0, end, cpu0, now;
	uint64_t base = 0;

	if (j->conn_mode) {
		for (unsigned i = 0; i < j->conns; i++)
			lconn_open(j, &j->c[i], i);
	} else if (rr_setup(j)) {
		load_fail(j, "connect", errno);
		return NULL;
	}
	t0 = now = bench_now();
	end = t0 + j->seconds;
	cpu0 = thread_cpu();
	/* past the workload's seconds only while nothing completed (a loaded
	 * machine, a proxy slow to start: 0.2 s once saw no connection end),
	 * for at most 10 s more, as the TLS handshakes do */
	while ((now < end || (!load_progress(j) && now < end + 10)) && r->failed < 100) {
		int n = epoll_wait(j->ep, evs, 256, 5);
		for (int i = 0; i < n; i++) {
			unsigned idx = evs[i].data.u32;
			struct lconn *c = &j->c[idx];
			if (j->conn_mode) {
				r->done += (uint64_t)lconn_conn_event(j, c, idx);
				continue;
			}
			if ((evs[i].events & EPOLLOUT) && lconn_push(j, c, idx) < 0) {
				load_fail(j, "request/response send", errno);
				continue;
			}
			if ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) &&
			    lconn_rr_readable(j, c, idx) < 0)
				load_fail(j, "request/response", errno);
		}
		now = bench_now();
	}
	r->seconds = now - t0;
	r->cpu_s = thread_cpu() - cpu0;
	if (!j->conn_mode)
		for (unsigned i = 0; i < j->conns; i++)
			base += j->c[i].rcvd / j->size;
	if (!j->conn_mode)
		r->done = base;
	return NULL;
}

static int load_run(struct load_job *j)
{
	pthread_attr_t attr;
	pthread_t t;
	cpu_set_t set;
	int rc;

	memset(j->r, 0, sizeof(*j->r));
	j->ep = epoll_create1(EPOLL_CLOEXEC);
	j->c = calloc(j->conns, sizeof(*j->c));
	if (j->ep < 0 || !j->c) {
		snprintf(j->r->why, sizeof(j->r->why), "out of memory");
		free(j->c);
		return -1;
	}
	for (unsigned i = 0; i < j->conns; i++)
		j->c[i].fd = -1;
	pthread_attr_init(&attr);
	if (j->cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(j->cpu, &set);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	rc = pthread_create(&t, &attr, load_main, j);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		pthread_join(t, NULL);
	else
		snprintf(j->r->why, sizeof(j->r->why), "cannot start the load thread");
	for (unsigned i = 0; i < j->conns; i++) {
		if (j->c[i].fd >= 0)
			close(j->c[i].fd);
		free(j->c[i].out);
	}
	free(j->c);
	close(j->ep);
	j->r->ok = rc == 0 && j->r->done > 0 && !j->r->failed;
	if (rc == 0 && !j->r->done && !j->r->why[0])
		snprintf(j->r->why, sizeof(j->r->why), "nothing completed in %.1f s", j->seconds + 10);
	return j->r->ok ? 0 : -1;
}

int bench_rr_load(const struct sockaddr *target, socklen_t len, unsigned conns, unsigned size,
		  unsigned depth, double seconds, int cpu, struct load_result *r)
{
	struct load_job *j = calloc(1, sizeof(*j));
	int rc;

	if (!j)
		return -1;
	*j = (struct load_job){ .target = target, .len = len, .conns = conns, .size = size,
				.depth = depth, .seconds = seconds, .cpu = cpu, .r = r };
	rc = load_run(j);
	free(j);
	return rc;
}

int bench_conn_load(const struct sockaddr *target, socklen_t len, unsigned conns, double seconds,
		    int cpu, struct load_result *r)
{
	struct load_job *j = calloc(1, sizeof(*j));
	int rc;

	if (!j)
		return -1;
	*j = (struct load_job){ .target = target, .len = len, .conns = conns, .seconds = seconds,
				.cpu = cpu, .conn_mode = 1, .r = r };
	rc = load_run(j);
	free(j);
	return rc;
}

void bench_sink_pin(struct bench_sink *s, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (cpu >= 0)
		CPU_SET(cpu, &set);
	else
		for (int i = 0; i < CPU_SETSIZE && i < sysconf(_SC_NPROCESSORS_CONF); i++)
			CPU_SET(i, &set);
	pthread_setaffinity_np(s->thr, sizeof(set), &set);
}

double bench_sink_cpu(const struct bench_sink *s)
{
	struct timespec ts;
	clockid_t id;

	if (pthread_getcpuclockid(s->thr, &id) || clock_gettime(id, &ts))
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
