/* bench_traffic: see bench_traffic.h. */
#define _GNU_SOURCE
#include "bench_traffic.h"

#include <arpa/inet.h>
#include <errno.h>
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
	char msg[4096];       /* ECHO/CONN: bytes to send back */
	unsigned mlen, moff;
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
	free(c);
}

/* Sends what is pending; returns 0, 1 when blocked, -1 on error. */
static int sconn_flush(struct bench_sink *s, struct sconn *c)
{
	while (c->moff < c->mlen) {
		ssize_t n = send(c->fd, c->msg + c->moff, c->mlen - c->moff, MSG_NOSIGNAL);
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
	case MODE_ECHO:
		if (c->mlen + n > sizeof(c->msg))
			return -1; /* the client sends one message at a time */
		memcpy(c->msg + c->mlen, p, n);
		c->mlen += (unsigned)n;
		return sconn_flush(s, c) < 0 ? -1 : 0;
	case MODE_CONN:
		if (c->got + n > MSG)
			return -1;
		memcpy(c->msg + c->got, p, n);
		c->got += (unsigned)n;
		if (c->got == MSG) {
			c->mlen = MSG;
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

struct conn_job {
	const struct sockaddr *target;
	socklen_t len;
	double end;
	uint64_t conns, failed;
	char why[128];
};

static void *conn_loop(void *arg)
{
	struct conn_job *j = arg;
	char msg[sizeof(struct hdr) + MSG], back[MSG + 1];
	struct hdr h = { .magic = MAGIC, .mode = MODE_CONN };

	memcpy(msg, &h, sizeof(h));
	memset(msg + sizeof(h), 'c', MSG);
	while (bench_now() < j->end) {
		int fd = dial(j->target, j->len, 5);
		if (fd >= 0 && !send_all(fd, msg, sizeof(msg)) && !recv_all(fd, back, MSG) &&
		    !memcmp(back, msg + sizeof(h), MSG) && recv(fd, back, 1, 0) == 0) {
			j->conns++;
		} else {
			if (!j->failed++)
				snprintf(j->why, sizeof(j->why), "short connection: %s",
					 errno ? strerror(errno) : "bad reply");
		}
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

int bench_conns(const struct sockaddr *target, socklen_t len, unsigned threads, double seconds,
		struct conn_result *r)
{
	struct conn_job jobs[16];
	pthread_t t[16];
	double t0 = bench_now();

	memset(r, 0, sizeof(*r));
	if (threads > 16)
		threads = 16;
	for (unsigned i = 0; i < threads; i++) {
		jobs[i] = (struct conn_job){ .target = target, .len = len, .end = t0 + seconds };
		pthread_create(&t[i], NULL, conn_loop, &jobs[i]);
	}
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		r->conns += jobs[i].conns;
		r->failed += jobs[i].failed;
		if (jobs[i].failed && !r->why[0])
			snprintf(r->why, sizeof(r->why), "%s", jobs[i].why);
	}
	r->seconds = bench_now() - t0;
	r->ok = r->conns > 0 && !r->failed;
	return r->ok ? 0 : -1;
}
