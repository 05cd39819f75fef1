/* SPDX-License-Identifier: MIT */
/* bench_sessions: see bench_sessions.h. */
#define _GNU_SOURCE
#include "bench_sessions.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_traffic.h"

#define BATCH 100 /* sessions sent to before their echoes are read */

void bench_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

void bench_close_rst(int fd)
{
	struct linger lg = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

/* ---- the backend: echoes, then holds every connection ------------------ */

static void *holder_main(void *arg)
{
	struct bench_holder *h = arg;
	struct epoll_event ev[256];
	char buf[4096];

	while (!h->stop) {
		int n = epoll_wait(h->ep, ev, 256, 100);
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			if (fd == h->lfd) {
				int c;
				while ((c = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event e = { .events = EPOLLIN, .data.fd = c };
					if (epoll_ctl(h->ep, EPOLL_CTL_ADD, c, &e))
						close(c);
					else
						__atomic_add_fetch(&h->open, 1, __ATOMIC_RELAXED);
				}
				continue;
			}
			ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r > 0 && send(fd, buf, (size_t)r, MSG_DONTWAIT | MSG_NOSIGNAL) == r)
				continue;
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			epoll_ctl(h->ep, EPOLL_CTL_DEL, fd, NULL);
			bench_close_rst(fd);
			__atomic_sub_fetch(&h->open, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

int bench_holder_start(struct bench_holder *h)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t l = sizeof(sin);
	struct epoll_event e = { .events = EPOLLIN };

	memset(h, 0, sizeof(*h));
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	h->ep = epoll_create1(EPOLL_CLOEXEC);
	e.data.fd = h->lfd;
	if (h->lfd < 0 || h->ep < 0 || bind(h->lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(h->lfd, 4096) || getsockname(h->lfd, (struct sockaddr *)&sin, &l) ||
	    epoll_ctl(h->ep, EPOLL_CTL_ADD, h->lfd, &e))
		return -1;
	snprintf(h->addr, sizeof(h->addr), "127.0.0.1:%d", ntohs(sin.sin_port));
	return pthread_create(&h->thr, NULL, holder_main, h) ? -1 : 0;
}

void bench_holder_stop(struct bench_holder *h)
{
	h->stop = 1;
	pthread_join(h->thr, NULL);
	close(h->lfd);
	close(h->ep);
}

/* ---- the sessions --------------------------------------------------------- */

int bench_sessions_open(const struct sockaddr_storage *ss, socklen_t len, unsigned n, int *fds,
			char *err, size_t errlen)
{
	char msg[BENCH_SESSION_MSG], back[BENCH_SESSION_MSG];
	struct timeval tv = { .tv_sec = 5 };

	memset(msg, 'i', sizeof(msg));
	for (unsigned i = 0; i < n; i++)
		fds[i] = -1;
	for (unsigned b = 0; b < n; b += BATCH) {
		unsigned e = b + BATCH < n ? b + BATCH : n;
		for (unsigned i = b; i < e; i++) {
			int one = 1;
			fds[i] = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fds[i] < 0 || setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
			    setsockopt(fds[i], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
			    setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
			    connect(fds[i], (const struct sockaddr *)ss, len) ||
			    send(fds[i], msg, sizeof(msg), MSG_NOSIGNAL) != (ssize_t)sizeof(msg)) {
				snprintf(err, errlen, "session %u of %u: connect or send: %s", i + 1, n,
					 strerror(errno));
				return -1;
			}
		}
		for (unsigned i = b; i < e; i++) {
			size_t got = 0;
			while (got < sizeof(back)) {
				ssize_t r = recv(fds[i], back + got, sizeof(back) - got, 0);
				if (r <= 0) {
					snprintf(err, errlen, "session %u of %u: no echo: %s", i + 1, n,
						 r ? strerror(errno) : "closed");
					return -1;
				}
				got += (size_t)r;
			}
			if (memcmp(back, msg, sizeof(msg))) {
				snprintf(err, errlen, "session %u of %u: wrong bytes back", i + 1, n);
				return -1;
			}
		}
	}
	return 0;
}

void bench_sessions_close(int *fds, unsigned n, struct bench_holder *h)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0) {
			bench_close_rst(fds[i]);
			fds[i] = -1;
		}
	for (double end = bench_now() + 10; __atomic_load_n(&h->open, __ATOMIC_RELAXED) && bench_now() < end;)
		bench_sleep_ms(20);
}

/* ---- options -------------------------------------------------------------- */

int bench_sessions_parse(const char *list, unsigned *sizes, unsigned max)
{
	char copy[512], *save, *t;
	unsigned n = 0;

	snprintf(copy, sizeof(copy), "%s", list);
	for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(t, &end, 10);
		if (*end || v < BENCH_SESSIONS_MIN || v > BENCH_SESSIONS_MAX || n == max) {
			fprintf(stderr, "splicer bench: --sessions %s: up to %u counts, each %d to %d\n",
				list, max, BENCH_SESSIONS_MIN, BENCH_SESSIONS_MAX);
			return -1;
		}
		sizes[n++] = (unsigned)v;
	}
	if (!n) {
		fprintf(stderr, "splicer bench: --sessions %s: up to %u counts, each %d to %d\n", list,
			max, BENCH_SESSIONS_MIN, BENCH_SESSIONS_MAX);
		return -1;
	}
	return (int)n;
}

int bench_sessions_fit(unsigned most, const char *mode)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 2 * most + 200) {
		fprintf(stderr, "splicer bench: %s with %u sessions needs %u descriptors here "
			"(two per session); ulimit -n is %llu\n", mode, most, 2 * most + 200,
			(unsigned long long)rl.rlim_cur);
		return -1;
	}
	return 0;
}
