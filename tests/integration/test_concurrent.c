/* SPDX-License-Identifier: MIT */
/* Integration case 9: 2,000 concurrent sessions, 1 MiB each way.
 *
 * One client thread and one backend thread, each an epoll loop over
 * non-blocking sockets. The client opens every session and sends an 8-byte
 * header (the session's seed); only when the backend has received all 2,000
 * headers (so 2,000 sessions are open through the proxy at once) do the
 * clients send their 1 MiB bodies. The backend answers each header with
 * 1 MiB of its own. Both sides check every byte against the generated stream
 * (h_gen), so no SHA is needed, and each side finishes a session only after
 * exactly 1 MiB and then EOF. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define CC_N 2000
#define CC_LEN (1024u * 1024u)
#define CC_HDR 8u
#define CC_SEED0 0xC0C0000000000000ull
#define CC_REPLY_KEY 0x00005EED00005EEDull
#define CC_CHUNK (64 * 1024)

struct cc_shared {
	struct h_addr proxy;
	int64_t deadline;
	int64_t barrier_deadline;
	_Atomic int headers; /* headers fully received by the backend */
	_Atomic int stop;    /* the client gave up: the backend stops too */
	/* results, each written by its own thread, read after the joins */
	int c_ok, c_fail, c_connected, c_barrier;
	char c_why[256];
	int b_ok, b_fail, b_accepted;
	char b_why[256];
	int lfd;
};

static struct cc_shared cc;

/* Counts a failed session and keeps the first reason. */
__attribute__((format(printf, 4, 5))) static void cc_note(char *why, size_t len, int *fail,
							   const char *fmt, ...)
{
	if (!why[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	(*fail)++;
}

/* ---- client --------------------------------------------------------------- */

struct cc_csess {
	int fd;
	uint32_t sent; /* header + body bytes sent */
	uint32_t rcvd; /* reply bytes received */
	uint32_t mask;
	uint8_t connected, wdone, rdone, closed;
};

static uint32_t cc_client_want(const struct cc_csess *s, int go)
{
	if (!s->connected)
		return EPOLLIN | EPOLLOUT;
	uint32_t limit = go ? CC_HDR + CC_LEN : CC_HDR;
	return (s->rdone ? 0u : (uint32_t)EPOLLIN) | (!s->wdone && s->sent < limit ? (uint32_t)EPOLLOUT : 0u);
}

static void *cc_client_main(void *unused)
{
	(void)unused;
	struct cc_csess *ss = calloc(CC_N, sizeof *ss);
	unsigned char *buf = malloc(CC_CHUNK);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event *evs = malloc(512 * sizeof *evs);
	int live = 0, go = 0;
	if (!ss || !buf || ep < 0 || !evs) {
		snprintf(cc.c_why, sizeof cc.c_why, "client setup failed");
		cc.c_fail = CC_N;
		goto out;
	}
	for (unsigned i = 0; i < CC_N; i++) {
		struct cc_csess *s = &ss[i];
		s->fd = socket(cc.proxy.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (s->fd < 0) {
			cc_note(cc.c_why, sizeof cc.c_why, &cc.c_fail, "session %u: socket: %s", i,
				strerror(errno));
			s->closed = 1;
			continue;
		}
		if (connect(s->fd, (struct sockaddr *)&cc.proxy.ss, cc.proxy.len) < 0 &&
		    errno != EINPROGRESS) {
			cc_note(cc.c_why, sizeof cc.c_why, &cc.c_fail, "session %u: connect: %s", i,
				strerror(errno));
			close(s->fd);
			s->closed = 1;
			continue;
		}
		s->mask = EPOLLIN | EPOLLOUT;
		struct epoll_event ev = { .events = s->mask, .data.u32 = i };
		epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
		live++;
	}
	while (live > 0) {
		int64_t now = h_now_ms();
		if (now > cc.deadline) {
			size_t l = strlen(cc.c_why);
			snprintf(cc.c_why + l, sizeof cc.c_why - l,
				 "%sclient deadline passed with %d sessions unfinished", l ? "; " : "",
				 live);
			break;
		}
		if (!go && atomic_load(&cc.headers) >= CC_N) {
			go = 1;
			cc.c_barrier = 1;
			for (unsigned i = 0; i < CC_N; i++)
				if (!ss[i].closed)
					h_epoll_arm(ep, ss[i].fd, i, &ss[i].mask, cc_client_want(&ss[i], go));
		}
		if (!go && (now > cc.barrier_deadline || cc.c_fail)) {
			size_t l = strlen(cc.c_why);
			snprintf(cc.c_why + l, sizeof cc.c_why - l,
				 "%sonly %d of %d sessions had reached the backend (header received) "
				 "when the client gave up; %d connected to the proxy",
				 l ? "; " : "", atomic_load(&cc.headers), CC_N, cc.c_connected);
			break;
		}
		int n = epoll_wait(ep, evs, 512, 50);
		for (int k = 0; k < n; k++) {
			unsigned i = evs[k].data.u32;
			uint32_t ev = evs[k].events;
			struct cc_csess *s = &ss[i];
			if (s->closed)
				continue;
			int failed = 0;
			if (!s->connected && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
				int err = 0;
				socklen_t sl = sizeof err;
				getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
				if (err) {
					cc_note(cc.c_why, sizeof cc.c_why, &cc.c_fail,
						"session %u: connect to the proxy: %s", i, strerror(err));
					failed = 1;
				} else {
					s->connected = 1;
					cc.c_connected++;
				}
			}
			/* send: the header at once, the body after the barrier */
			uint32_t limit = go ? CC_HDR + CC_LEN : CC_HDR;
			if (!failed && s->connected && !s->wdone && s->sent < limit &&
			    (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
				size_t n2;
				if (s->sent < CC_HDR) {
					uint64_t seed = CC_SEED0 + i;
					memcpy(buf, &seed, CC_HDR);
					n2 = CC_HDR - s->sent;
					memmove(buf, buf + s->sent, n2);
				} else {
					uint32_t off = s->sent - CC_HDR;
					n2 = CC_LEN - off < CC_CHUNK ? CC_LEN - off : CC_CHUNK;
					h_gen(CC_SEED0 + i, off, buf, n2);
				}
				ssize_t r = send(s->fd, buf, n2, MSG_NOSIGNAL);
				if (r > 0) {
					s->sent += (uint32_t)r;
					if (s->sent == CC_HDR + CC_LEN) {
						shutdown(s->fd, SHUT_WR);
						s->wdone = 1;
					}
				} else if (r < 0 && errno != EAGAIN && errno != EINTR) {
					cc_note(cc.c_why, sizeof cc.c_why, &cc.c_fail,
						"session %u: send after %u bytes: %s", i, s->sent,
						strerror(errno));
					failed = 1;
				}
			}
			if (!failed && s->connected && !s->rdone && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
				ssize_t r = recv(s->fd, buf, CC_CHUNK, 0);
				if (r > 0) {
					if (s->rcvd + (uint64_t)r > CC_LEN) {
						cc_note(cc.c_why, sizeof cc.c_why, &cc.c_fail,
							"session %u: received more than 1 MiB (%llu)", i,
							(unsigned long long)s->rcvd + (uint64_t)r);
						failed = 1;
					} else {
						size_t bad = h_gen_check((CC_SEED0 + i) ^ CC_REPLY_KEY, s->rcvd,
									 buf, (size_t)r);
						if (bad < (size_t)r) {
							cc_note(cc.c_why, sizeof cc.c_why, &cc.c_fail,
								"session %u: reply corrupted at offset %llu", i,
								(unsigned long long)(s->rcvd + bad));
							failed = 1;
						}
						s->rcvd += (uint32_t)r;
					}
				} else if (r == 0) {
					if (s->rcvd != CC_LEN) {
						cc_note(cc.c_why, sizeof cc.c_why, &cc.c_fail,
							"session %u: EOF after %u of 1048576 reply bytes", i,
							s->rcvd);
						failed = 1;
					} else {
						s->rdone = 1;
					}
				} else if (errno != EAGAIN && errno != EINTR) {
					cc_note(cc.c_why, sizeof cc.c_why, &cc.c_fail,
						"session %u: recv after %u reply bytes: %s", i, s->rcvd,
						strerror(errno));
					failed = 1;
				}
			}
			if (failed || (s->wdone && s->rdone)) {
				if (!failed)
					cc.c_ok++;
				close(s->fd);
				s->closed = 1;
				live--;
			} else {
				h_epoll_arm(ep, s->fd, i, &s->mask, cc_client_want(s, go));
			}
		}
	}
out:
	if (cc.c_ok != CC_N)
		atomic_store(&cc.stop, 1);
	for (unsigned i = 0; ss && i < CC_N; i++)
		if (!ss[i].closed)
			close(ss[i].fd);
	if (ep >= 0)
		close(ep);
	free(ss);
	free(buf);
	free(evs);
	return NULL;
}

/* ---- backend -------------------------------------------------------------- */

struct cc_bconn {
	int fd;
	uint64_t seed;
	uint32_t hdr, rcvd, sent, mask;
	unsigned char hbuf[CC_HDR];
	uint8_t rdone, wdone;
};

static uint32_t cc_backend_want(const struct cc_bconn *c)
{
	return (c->rdone ? 0u : (uint32_t)EPOLLIN) |
	       (c->hdr == CC_HDR && !c->wdone ? (uint32_t)EPOLLOUT : 0u);
}

static void *cc_backend_main(void *unused)
{
	(void)unused;
	int cap = CC_N + 64;
	struct cc_bconn *cs = calloc((size_t)cap, sizeof *cs);
	unsigned char *buf = malloc(CC_CHUNK);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event *evs = malloc(512 * sizeof *evs);
	int nconn = 0, live = 0;
	if (!cs || !buf || ep < 0 || !evs) {
		snprintf(cc.b_why, sizeof cc.b_why, "backend setup failed");
		goto out;
	}
	struct epoll_event lev = { .events = EPOLLIN, .data.u32 = UINT32_MAX };
	epoll_ctl(ep, EPOLL_CTL_ADD, cc.lfd, &lev);
	while (!atomic_load(&cc.stop) && (cc.b_ok + cc.b_fail < CC_N || live > 0)) {
		if (h_now_ms() > cc.deadline) {
			size_t l = strlen(cc.b_why);
			snprintf(cc.b_why + l, sizeof cc.b_why - l,
				 "%sbackend deadline passed with %d sessions unfinished", l ? "; " : "",
				 live);
			break;
		}
		int n = epoll_wait(ep, evs, 512, 50);
		for (int k = 0; k < n; k++) {
			uint32_t id = evs[k].data.u32;
			uint32_t ev = evs[k].events;
			if (id == UINT32_MAX) {
				for (;;) {
					int fd = accept4(cc.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
					if (fd < 0)
						break;
					cc.b_accepted++;
					if (nconn >= cap) {
						cc_note(cc.b_why, sizeof cc.b_why, &cc.b_fail,
							"connection %d: more connections than sessions", nconn);
						close(fd);
						continue;
					}
					struct cc_bconn *c = &cs[nconn];
					c->fd = fd;
					c->mask = EPOLLIN;
					struct epoll_event nev = { .events = c->mask, .data.u32 = (uint32_t)nconn };
					epoll_ctl(ep, EPOLL_CTL_ADD, fd, &nev);
					nconn++;
					live++;
				}
				continue;
			}
			struct cc_bconn *c = &cs[id];
			if (c->fd < 0)
				continue;
			unsigned sess = (unsigned)(c->seed - CC_SEED0);
			int failed = 0;
			if (!c->rdone && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
				if (c->hdr < CC_HDR) {
					ssize_t r = recv(c->fd, c->hbuf + c->hdr, CC_HDR - c->hdr, 0);
					if (r > 0) {
						c->hdr += (uint32_t)r;
						if (c->hdr == CC_HDR) {
							memcpy(&c->seed, c->hbuf, CC_HDR);
							sess = (unsigned)(c->seed - CC_SEED0);
							if (c->seed < CC_SEED0 || c->seed >= CC_SEED0 + CC_N) {
								cc_note(cc.b_why, sizeof cc.b_why, &cc.b_fail,
									"connection %u: bad header %llx", id,
									(unsigned long long)c->seed);
								failed = 1;
							} else {
								atomic_fetch_add(&cc.headers, 1);
							}
						}
					} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
						cc_note(cc.b_why, sizeof cc.b_why, &cc.b_fail,
							"connection %u: %s after %u header bytes", id,
							r == 0 ? "EOF" : strerror(errno), c->hdr);
						failed = 1;
					}
				} else {
					ssize_t r = recv(c->fd, buf, CC_CHUNK, 0);
					if (r > 0) {
						if (c->rcvd + (uint64_t)r > CC_LEN) {
							cc_note(cc.b_why, sizeof cc.b_why, &cc.b_fail,
								"session %u: backend received more than 1 MiB (%llu)",
								sess, (unsigned long long)c->rcvd + (uint64_t)r);
							failed = 1;
						} else {
							size_t bad = h_gen_check(c->seed, c->rcvd, buf, (size_t)r);
							if (bad < (size_t)r) {
								cc_note(cc.b_why, sizeof cc.b_why, &cc.b_fail,
									"session %u: request body corrupted at offset %llu",
									sess, (unsigned long long)(c->rcvd + bad));
								failed = 1;
							}
							c->rcvd += (uint32_t)r;
						}
					} else if (r == 0) {
						if (c->rcvd != CC_LEN) {
							cc_note(cc.b_why, sizeof cc.b_why, &cc.b_fail,
								"session %u: backend got EOF after %u of 1048576 "
								"body bytes",
								sess, c->rcvd);
							failed = 1;
						} else {
							c->rdone = 1;
						}
					} else if (errno != EAGAIN && errno != EINTR) {
						cc_note(cc.b_why, sizeof cc.b_why, &cc.b_fail,
							"session %u: backend recv after %u bytes: %s", sess,
							c->rcvd, strerror(errno));
						failed = 1;
					}
				}
			}
			if (!failed && c->hdr == CC_HDR && !c->wdone &&
			    (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
				uint32_t left = CC_LEN - c->sent;
				size_t n2 = left < CC_CHUNK ? left : CC_CHUNK;
				h_gen(c->seed ^ CC_REPLY_KEY, c->sent, buf, n2);
				ssize_t r = send(c->fd, buf, n2, MSG_NOSIGNAL);
				if (r > 0) {
					c->sent += (uint32_t)r;
					if (c->sent == CC_LEN) {
						shutdown(c->fd, SHUT_WR);
						c->wdone = 1;
					}
				} else if (r < 0 && errno != EAGAIN && errno != EINTR) {
					cc_note(cc.b_why, sizeof cc.b_why, &cc.b_fail,
						"session %u: backend send after %u bytes: %s", sess, c->sent,
						strerror(errno));
					failed = 1;
				}
			}
			if (failed || (c->rdone && c->wdone)) {
				if (!failed)
					cc.b_ok++;
				close(c->fd);
				c->fd = -1;
				live--;
			} else {
				h_epoll_arm(ep, c->fd, id, &c->mask, cc_backend_want(c));
			}
		}
	}
	for (int i = 0; i < nconn; i++)
		if (cs[i].fd >= 0)
			close(cs[i].fd);
out:
	if (ep >= 0)
		close(ep);
	free(cs);
	free(buf);
	free(evs);
	return NULL;
}

static void case_concurrent_2000(const char *bin, const char *engine)
{
	static struct h_proxy p;
	static pthread_t ct, bt;
	memset(&cc, 0, sizeof cc);
	cc.lfd = -1;
	struct h_addr baddr;
	h_addr_parse("127.0.0.1:0", &baddr);
	cc.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	H_CHECK(cc.lfd >= 0, "socket: %s", strerror(errno));
	int one = 1;
	setsockopt(cc.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	H_CHECK(bind(cc.lfd, (struct sockaddr *)&baddr.ss, baddr.len) == 0 && listen(cc.lfd, 4096) == 0 &&
			getsockname(cc.lfd, (struct sockaddr *)&ss, &sl) == 0,
		"backend listen: %s", strerror(errno));
	h_addr_from(&baddr, (struct sockaddr *)&ss, sl);

	const char *backends[] = { baddr.text, NULL };
	const char *extra[] = { "--max-conns", "4000", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);
	cc.proxy = p.addr;
	int64_t t0 = h_now_ms();
	cc.deadline = t0 + H_T(60000);
	cc.barrier_deadline = t0 + H_T(20000);

	H_CHECK(pthread_create(&bt, NULL, cc_backend_main, NULL) == 0, "backend thread");
	H_CHECK(pthread_create(&ct, NULL, cc_client_main, NULL) == 0, "client thread");
	pthread_join(ct, NULL); /* both loops are bounded by cc.deadline */
	pthread_join(bt, NULL);
	int64_t took = h_now_ms() - t0;
	close(cc.lfd);
	cc.lfd = -1;

	H_CHECK(h_proxy_alive(&p), "proxy died during the 2000 sessions");
	H_CHECK(cc.c_barrier,
		"the 2000 sessions were never open at the same time: %s (client: %d connected; "
		"backend: %d accepted, %d headers)",
		cc.c_why[0] ? cc.c_why : "?", cc.c_connected, cc.b_accepted, atomic_load(&cc.headers));
	H_CHECK(cc.c_ok == CC_N && cc.b_ok == CC_N,
		"after %lld ms: client verified %d of %d sessions (%d failed; first problem: %s); "
		"backend verified %d (%d failed; first problem: %s), accepted %d",
		(long long)took, cc.c_ok, CC_N, cc.c_fail, cc.c_why[0] ? cc.c_why : "none", cc.b_ok,
		cc.b_fail, cc.b_why[0] ? cc.b_why : "none", cc.b_accepted);
	H_CHECK(cc.b_accepted == CC_N, "backend accepted %d connections, expected %d", cc.b_accepted,
		CC_N);
	h_proxy_down(&p);
}

H_ENGINE_CASES(concurrent_2000, 280)
H_SOCKMAP_CASES(concurrent_2000, 280)
