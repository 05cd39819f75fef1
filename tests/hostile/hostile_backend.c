/* SPDX-License-Identifier: MIT */
/* hostile_backend: see hostile_backend.h. */
#define _GNU_SOURCE
#include "hostile_backend.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define HB_MAX 4096 /* connections tracked for the close at stop */

enum { HB_NEW, HB_ECHO, HB_STREAM };

struct hb_conn {
	int fd;
	int mode;
	size_t pend, off; /* echo: bytes read, not yet written back */
	char buf[16384];
};

static char stream_chunk[65536];

static void hb_arm(int ep, struct hb_conn *c, uint32_t ev)
{
	struct epoll_event e = { .events = ev, .data.ptr = c };
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
}

static void hb_drop(int ep, struct hb_conn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
}

/* Moves what it can; returns 0, or -1 when c is done (closed). */
static int hb_step(struct hb *b, struct hb_conn *c)
{
	for (;;) {
		if (c->mode == HB_STREAM) {
			ssize_t w = send(c->fd, stream_chunk, sizeof stream_chunk, MSG_NOSIGNAL);
			if (w > 0)
				continue;
			if (w < 0 && errno == EAGAIN) {
				/* drain what the client sent meanwhile, then wait */
				char sink[4096];
				ssize_t r;
				while ((r = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT)) > 0)
					;
				if (r == 0)
					return -1;
				hb_arm(b->ep, c, EPOLLOUT | EPOLLIN);
				return 0;
			}
			return -1;
		}
		if (c->pend > c->off) {
			ssize_t w = send(c->fd, c->buf + c->off, c->pend - c->off, MSG_NOSIGNAL);
			if (w > 0) {
				c->off += (size_t)w;
				continue;
			}
			if (w < 0 && errno == EAGAIN) {
				hb_arm(b->ep, c, EPOLLOUT);
				return 0;
			}
			return -1;
		}
		c->pend = c->off = 0;
		ssize_t r = recv(c->fd, c->buf, sizeof c->buf, 0);
		if (r == 0) {
			shutdown(c->fd, SHUT_WR);
			return -1;
		}
		if (r < 0) {
			if (errno != EAGAIN)
				return -1;
			hb_arm(b->ep, c, EPOLLIN);
			return 0;
		}
		if (c->mode == HB_NEW)
			c->mode = c->buf[0] == 'S' ? HB_STREAM : HB_ECHO;
		c->pend = (size_t)r;
	}
}

static void *hb_main(void *arg)
{
	struct hb *b = arg;
	struct hb_conn **all = calloc(HB_MAX, sizeof(*all));
	struct epoll_event ev[64];
	int n_all = 0;

	for (int stop = 0; !stop && all;) {
		int n = epoll_wait(b->ep, ev, 64, 200);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == &b->stop_fd) {
				stop = 1;
			} else if (ev[i].data.ptr == &b->lfd) {
				int fd;
				while ((fd = accept4(b->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct hb_conn *c = calloc(1, sizeof(*c));
					struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
					if (!c || n_all == HB_MAX) {
						free(c);
						close(fd);
						continue;
					}
					c->fd = fd;
					all[n_all++] = c;
					b->accepted++;
					epoll_ctl(b->ep, EPOLL_CTL_ADD, fd, &e);
				}
			} else {
				struct hb_conn *c = ev[i].data.ptr;
				if (c->fd >= 0 && hb_step(b, c) < 0)
					hb_drop(b->ep, c);
			}
		}
	}
	for (int i = 0; all && i < n_all; i++) {
		if (all[i]->fd >= 0)
			close(all[i]->fd);
		free(all[i]);
	}
	free(all);
	return NULL;
}

void hb_start(struct hb *b)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sin;
	struct epoll_event e = { .events = EPOLLIN };

	memset(b, 0, sizeof(*b));
	memset(stream_chunk, 'x', sizeof stream_chunk);
	b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	H_CHECK(b->lfd >= 0 && bind(b->lfd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
			listen(b->lfd, 1024) == 0 && getsockname(b->lfd, (struct sockaddr *)&sin, &len) == 0,
		"hostile backend: listen");
	h_addr_from(&b->addr, (struct sockaddr *)&sin, len);
	b->ep = epoll_create1(EPOLL_CLOEXEC);
	b->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	e.data.ptr = &b->lfd;
	epoll_ctl(b->ep, EPOLL_CTL_ADD, b->lfd, &e);
	e.data.ptr = &b->stop_fd;
	epoll_ctl(b->ep, EPOLL_CTL_ADD, b->stop_fd, &e);
	H_CHECK(pthread_create(&b->thr, NULL, hb_main, b) == 0, "hostile backend: thread");
}

void hb_stop(struct hb *b)
{
	uint64_t one = 1;

	if (write(b->stop_fd, &one, sizeof one) != sizeof one)
		return;
	pthread_join(b->thr, NULL);
	close(b->ep);
	close(b->stop_fd);
	close(b->lfd);
}

int hb_echo(const struct h_addr *a, size_t n, int ms, char *why, size_t len)
{
	static char out[65536], in[65536];
	int64_t t0 = h_now_ms(), end = t0 + ms;
	int fd, rc;

	n = n > sizeof out ? sizeof out : n < 1 ? 1 : n;
	if ((fd = h_connect(a, ms)) < 0) {
		snprintf(why, len, "connect: %s", strerror(errno));
		return -1;
	}
	h_set_nodelay(fd);
	h_gen((uint64_t)t0, 0, out, n);
	out[0] = 'E';
	if ((rc = h_send_all(fd, out, n, end)) || (rc = h_recv_exact(fd, in, n, end))) {
		snprintf(why, len, "round trip: %s", rc == -ENODATA ? "EOF" : strerror(-rc));
		close(fd);
		return -1;
	}
	close(fd);
	if (memcmp(in, out, n)) {
		snprintf(why, len, "the echo differs");
		return -1;
	}
	return (int)(h_now_ms() - t0);
}

int hb_stalled_download(const struct h_addr *a)
{
	int small = 4096, fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
	h_set_timeouts(fd, 2000);
	if (connect(fd, (const struct sockaddr *)&a->ss, a->len) || send(fd, "S", 1, 0) != 1) {
		close(fd);
		return -1;
	}
	return fd;
}

int hb_health_ms(const struct h_addr *stats, int timeout_ms)
{
	int64_t t0 = h_now_ms();
	char body[1024];
	int fd = h_connect(stats, timeout_ms);

	if (fd < 0)
		return -1;
	if (h_send_all(fd, "GET /health HTTP/1.0\r\n\r\n", 24, t0 + timeout_ms)) {
		close(fd);
		return -1;
	}
	h_recv_all(fd, body, sizeof body, t0 + timeout_ms);
	close(fd);
	if (!strstr(body, " 200 ") && !strstr(body, " 503 "))
		return -1;
	return (int)(h_now_ms() - t0);
}
