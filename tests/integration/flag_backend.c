/* SPDX-License-Identifier: MIT */
/* flag_backend: see flag_backend.h. */
#define _GNU_SOURCE
#include "flag_backend.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>


static void *fb_stream_main(void *arg)
{
	struct flag_backend *b = arg;
	int fd = b->stream_armed - 1; /* set by the loop: the descriptor + 1 */
	static char buf[65536];
	uint64_t off = 0;

	h_set_timeouts(fd, 500);
	while (off < b->stream_len && !atomic_load(&b->stop)) {
		size_t n = b->stream_len - off < sizeof buf ? (size_t)(b->stream_len - off) : sizeof buf;
		h_gen(b->stream_seed, off, buf, n);
		ssize_t k = send(fd, buf, n, MSG_NOSIGNAL);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue; /* the peer does not read: wait on */
		if (k <= 0) {
			atomic_store(&b->stream_end, -(k < 0 ? errno : EPIPE));
			close(fd);
			return NULL;
		}
		off += (uint64_t)k;
		atomic_store(&b->streamed, off);
	}
	if (off == b->stream_len)
		atomic_store(&b->stream_end, 1);
	/* the peer's end (reset or close) before ours */
	char c;
	while (!atomic_load(&b->stop) && recv(fd, &c, 1, 0) < 0 && errno == EAGAIN)
		;
	close(fd);
	return NULL;
}

static void *fb_loop(void *arg)
{
	struct flag_backend *b = arg;
	struct pollfd pfd[FB_MAX_CONNS + 1];
	int n = 0;
	char buf[16384];

	pfd[0] = (struct pollfd){ .fd = b->lfd, .events = POLLIN };
	while (!atomic_load(&b->stop)) {
		if (poll(pfd, (nfds_t)n + 1, 50) <= 0)
			continue;
		for (int i = n; i >= 1; i--) {
			if (!pfd[i].revents)
				continue;
			ssize_t r = read(pfd[i].fd, buf, sizeof buf);
			int one = 1;
			if (r < 0 && errno == EAGAIN)
				continue;
			/* "S" asks for the armed stream: the connection is the stream's */
			if (r == 1 && buf[0] == 'S' &&
			    atomic_compare_exchange_strong(&b->stream_armed, &one, pfd[i].fd + 1)) {
				b->sthr_started = !pthread_create(&b->sthr, NULL, fb_stream_main, b);
				atomic_fetch_sub(&b->open, 1);
				pfd[i] = pfd[n--];
				continue;
			}
			if (r <= 0 || h_send_all(pfd[i].fd, buf, (size_t)r, h_now_ms() + 2000)) {
				close(pfd[i].fd);
				atomic_fetch_sub(&b->open, 1);
				pfd[i] = pfd[n--];
			}
		}
		if (!(pfd[0].revents & POLLIN))
			continue;
		int fd = accept4(b->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		char hello[16];
		int len = snprintf(hello, sizeof hello, "%s %c\n", atomic_load(&b->down) ? "DOWN" : "UP",
				   b->tag);
		atomic_fetch_add(&b->accepted, 1);
		h_set_timeouts(fd, 1000);
		if (send(fd, hello, (size_t)len, MSG_NOSIGNAL) != len) {
			close(fd);
			continue;
		}
		if (n == FB_MAX_CONNS) {
			close(fd);
			continue;
		}
		atomic_fetch_add(&b->open, 1);
		pfd[++n] = (struct pollfd){ .fd = fd, .events = POLLIN };
	}
	for (int i = 1; i <= n; i++)
		close(pfd[i].fd);
	return NULL;
}

void fb_start(struct flag_backend *b, char tag, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				   .sin_port = htons((uint16_t)port) };
	socklen_t len = sizeof sin;
	int one = 1;

	memset(b, 0, sizeof *b);
	b->tag = tag;
	b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(b->lfd >= 0, "socket: %s", strerror(errno));
	setsockopt(b->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	H_CHECK(bind(b->lfd, (struct sockaddr *)&sin, sizeof sin) == 0 && listen(b->lfd, 1024) == 0 &&
			getsockname(b->lfd, (struct sockaddr *)&sin, &len) == 0,
		"flag backend %c: %s", tag, strerror(errno));
	b->port = ntohs(sin.sin_port);
	snprintf(b->text, sizeof b->text, "127.0.0.1:%d", b->port);
	H_CHECK(pthread_create(&b->thr, NULL, fb_loop, b) == 0, "flag backend thread");
}

void fb_stop(struct flag_backend *b)
{
	atomic_store(&b->stop, 1);
	pthread_join(b->thr, NULL);
	if (b->sthr_started)
		pthread_join(b->sthr, NULL);
	close(b->lfd);
}

void fb_set_down(struct flag_backend *b, int down)
{
	atomic_store(&b->down, down);
}

void fb_stream_next(struct flag_backend *b, uint64_t len, uint64_t seed)
{
	b->stream_len = len;
	b->stream_seed = seed;
	atomic_store(&b->streamed, 0);
	atomic_store(&b->stream_end, 0);
	atomic_store(&b->stream_armed, 1);
}

char fb_greeting(int fd)
{
	char line[16];
	size_t n = 0;

	while (n < sizeof line - 1) {
		if (h_recv_exact(fd, line + n, 1, h_now_ms() + 3000))
			return 0;
		if (line[n++] == '\n')
			break;
	}
	line[n] = '\0';
	if (n >= 4 && !strncmp(line, "UP ", 3))
		return line[3];
	if (n >= 6 && !strncmp(line, "DOWN ", 5))
		return line[5];
	return 0;
}

/* ---- what the backend tests share ---------------------------------------- */

void fb_proxy(struct h_proxy *p, const char *bin, const char *name, const char *text)
{
	const char *path = h_conf_write(name, text);
	const char *args[] = { "-c", path, NULL };
	char err[512];

	H_CHECK(h_proxy_start(p, bin, args, err, sizeof err) == 0, "proxy -c %s: %s", path, err);
}

char fb_tag_of(const struct h_addr *a, int *keep)
{
	int fd = h_connect(a, 2000);
	char t = fd >= 0 ? fb_greeting(fd) : 0;

	if (keep)
		*keep = fd;
	else if (fd >= 0)
		close(fd);
	return t;
}

int fb_session_on(const struct h_addr *a, char want)
{
	for (int i = 0; i < 8; i++) {
		int fd;
		if (fb_tag_of(a, &fd) == want)
			return fd;
		if (fd >= 0)
			close(fd);
	}
	H_CHECK(0, "no session reached backend %c", want);
	return -1;
}

int fb_echo_ok(int fd, uint64_t seed)
{
	char out[1000], in[1000];

	h_gen(seed, 0, out, sizeof out);
	return !h_send_all(fd, out, sizeof out, h_now_ms() + 2000) &&
	       !h_recv_exact(fd, in, sizeof in, h_now_ms() + 2000) && !memcmp(in, out, sizeof in);
}

int64_t fb_wait_log(const struct h_proxy *p, const char *a, const char *b, int n)
{
	int64_t end = h_now_ms() + 5000;

	while (h_log_lines(p, a, b, NULL) < n && h_now_ms() < end)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(p, a, b, NULL) >= n, "no log line %d with '%s'%s%s", n, a, b ? " and " : "",
		b ? b : "");
	return h_now_ms();
}

long long fb_checks(const struct h_proxy *p, const char *route, int port, const char *result)
{
	struct h_addr stats;
	char name[200];

	H_CHECK(h_stats_addr(p, &stats) == 0, "no stats address in the proxy's log");
	snprintf(name, sizeof name,
		 "splicer_backend_checks_total{route=\"%s\",backend=\"127.0.0.1:%d\",result=\"%s\"}", route,
		 port, result);
	return h_metric(&stats, name);
}

void fb_down_because(const struct h_proxy *p, int port, const char *why)
{
	char addr[48];

	snprintf(addr, sizeof addr, "backend 127.0.0.1:%d is down", port);
	fb_wait_log(p, addr, why, 1);
}
