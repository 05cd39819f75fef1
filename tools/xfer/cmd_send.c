/* SPDX-License-Identifier: MIT */
/* cmd_send: `splicer send [options] FILE ADDRESS` connects to ADDRESS, sends
 * FILE ('-': stdin), half-closes, waits for the receiver to close, and
 * reports bytes, seconds, MiB/s and optionally the SHA-256.
 *
 * Methods:
 *   sendfile  the kernel reads the file's pages straight into the socket
 *             (with --sha256 each range sent is read again with pread for
 *             the digest, from the page cache);
 *   splice    FILE -> pipe -> socket (with --sha256: a tee of the pipe);
 *   copy      read()/write().
 * A pipe (stdin) cannot be sendfile'd nor needs an own pipe: sendfile and
 * splice both splice it straight into the socket, reported as "splice". An
 * input that refuses splice (a terminal) is copied, with a note. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addr.h"
#include "cmd.h"
#include "xfer_report.h"

#define SENDFILE_CHUNK (16u << 20) /* without --sha256: few syscalls */

/* Where a send failed. */
enum send_end { SEND_OK, SEND_INPUT, SEND_PEER };

struct send_run {
	struct xfer x;
	const struct xfer_opts *o;
	enum xfer_method method; /* as used */
	int in, sock;
	int in_pipe;             /* FILE is a pipe */
	int in_seekable;         /* regular file or block device */
	off_t off;               /* next offset of a seekable FILE */
	int err;
};

static enum send_end failed(struct send_run *s, int e, enum send_end where)
{
	s->err = e;
	/* sendfile/splice report either side's errno: sort them by kind */
	if (where == SEND_INPUT && xfer_peer_errno(e))
		where = SEND_PEER;
	return where;
}

static enum send_end pump_copy(struct send_run *s)
{
	if (s->in_seekable && lseek(s->in, s->off, SEEK_SET) < 0)
		return failed(s, errno, SEND_INPUT);
	for (;;) {
		ssize_t n = read(s->in, s->x.buf, s->x.pipe_size);
		uint64_t before = s->x.out_bytes;
		int r;
		if (n == 0)
			return SEND_OK;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return failed(s, errno, SEND_INPUT);
		r = xfer_write_all(&s->x, s->sock, s->x.buf, (size_t)n);
		xfer_hash(&s->x, s->x.buf, (size_t)(s->x.out_bytes - before));
		if (r)
			return failed(s, -r, SEND_PEER);
	}
}

/* The input refused splice/sendfile before any byte went: copy instead. */
static enum send_end fall_back(struct send_run *s, const char *what)
{
	fprintf(stderr, "send: %s: %s refused (%s): copying\n", s->o->file, what, strerror(errno));
	s->method = XFER_COPY;
	return pump_copy(s);
}

/* Hashes [from, to) of FILE for the digest of what sendfile sent. */
static int hash_range(struct send_run *s, off_t from, off_t to)
{
	while (from < to) {
		size_t want = s->x.pipe_size;
		if ((off_t)want > to - from)
			want = (size_t)(to - from);
		ssize_t n = pread(s->in, s->x.buf, want, from);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO; /* the file shrank meanwhile */
		xfer_hash(&s->x, s->x.buf, (size_t)n);
		from += n;
	}
	return 0;
}

static enum send_end pump_sendfile(struct send_run *s)
{
	size_t chunk = s->x.sha[0] ? s->x.pipe_size : SENDFILE_CHUNK;

	for (;;) {
		off_t from = s->off;
		ssize_t n = sendfile(s->sock, s->in, &s->off, chunk);
		int r;
		if (n == 0)
			return SEND_OK;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EINVAL || errno == ENOSYS) && !s->x.out_bytes)
			return fall_back(s, "sendfile");
		if (n < 0)
			return failed(s, errno, SEND_INPUT);
		s->x.out_bytes += (uint64_t)n;
		if (s->x.sha[0] && (r = hash_range(s, from, s->off)))
			return failed(s, -r, SEND_INPUT);
	}
}

/* FILE -> pipe -> socket. */
static enum send_end pump_splice(struct send_run *s)
{
	for (;;) {
		ssize_t n = splice(s->in, s->in_seekable ? &s->off : NULL, s->x.p[1], NULL,
				   s->x.pipe_size, SPLICE_F_MOVE);
		int r;
		if (n == 0)
			return SEND_OK;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EINVAL && !s->x.out_bytes)
			return fall_back(s, "splice");
		if (n < 0)
			return failed(s, errno, SEND_INPUT);
		if ((r = xfer_from_pipe(&s->x, s->x.p[0], (size_t)n, s->sock, s->x.sha[0] != NULL)))
			return failed(s, -r, SEND_PEER);
	}
}

/* A pipe (stdin) -> socket, no pipe of our own. With --sha256 the length
 * of each piece must be known before it moves (xfer_from_pipe tees it into
 * the hash pipe first): wait for data, then ask the pipe how much it holds. */
static enum send_end pump_pipe(struct send_run *s)
{
	s->method = XFER_SPLICE;
	for (;;) {
		struct pollfd pfd = { .fd = s->in, .events = POLLIN };
		ssize_t n;
		int r, avail = 0;

		if (s->x.sha[0]) {
			if (poll(&pfd, 1, -1) < 0 && errno == EINTR)
				continue;
			if (ioctl(s->in, FIONREAD, &avail) < 0)
				return failed(s, errno, SEND_INPUT);
			if (!avail && (pfd.revents & (POLLHUP | POLLERR)))
				return SEND_OK;
			if (avail && (r = xfer_from_pipe(&s->x, s->in, (size_t)avail, s->sock, 1)))
				return failed(s, -r, SEND_PEER);
			continue;
		}
		n = splice(s->in, NULL, s->sock, NULL, s->x.pipe_size, SPLICE_F_MOVE);
		if (n > 0)
			s->x.out_bytes += (uint64_t)n;
		else if (n == 0)
			return SEND_OK;
		else if (errno == EINVAL && !s->x.out_bytes)
			return fall_back(s, "splice");
		else if (errno != EINTR)
			return failed(s, errno, SEND_INPUT);
	}
}

static enum send_end pump(struct send_run *s)
{
	if (s->method == XFER_COPY)
		return pump_copy(s);
	if (s->in_pipe)
		return pump_pipe(s);
	/* a terminal or socket on stdin: no offsets, so no sendfile */
	if (s->method == XFER_SENDFILE && s->in_seekable)
		return pump_sendfile(s);
	s->method = XFER_SPLICE;
	return pump_splice(s);
}

/* After the last byte: half-close, then wait for the receiver's close, so
 * that exit 0 means it took everything (and a reset is still seen). */
static enum send_end finish(struct send_run *s)
{
	if (shutdown(s->sock, SHUT_WR) < 0) {
		/* ENOTCONN: a reset closed it meanwhile; SO_ERROR still holds why */
		int e = errno, soe = 0;
		socklen_t len = sizeof(soe);
		if (e == ENOTCONN && !getsockopt(s->sock, SOL_SOCKET, SO_ERROR, &soe, &len))
			e = soe ? soe : ECONNRESET;
		return failed(s, e, SEND_PEER);
	}
	while (!s->o->no_wait) {
		ssize_t n = read(s->sock, s->x.buf, s->x.pipe_size);
		if (n == 0)
			break;
		if (n < 0 && errno != EINTR)
			return failed(s, errno, SEND_PEER);
	}
	return SEND_OK;
}

static int open_in(struct send_run *s)
{
	struct stat st;

	s->in = !strcmp(s->o->file, "-") ? STDIN_FILENO : open(s->o->file, O_RDONLY | O_CLOEXEC);
	if (s->in < 0 || fstat(s->in, &st) < 0) {
		fprintf(stderr, "send: %s: %s\n", s->o->file, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		fprintf(stderr, "send: %s: %s\n", s->o->file, strerror(EISDIR));
		return -1;
	}
	s->in_pipe = S_ISFIFO(st.st_mode);
	s->in_seekable = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
	if (s->in_seekable && (s->off = lseek(s->in, 0, SEEK_CUR)) < 0)
		s->off = 0; /* stdin redirected from a file keeps its position */
	return 0;
}

static int connect_to(struct send_run *s, const struct addr *a)
{
	s->sock = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->sock < 0 || connect(s->sock, (const struct sockaddr *)&a->ss, a->len) < 0) {
		fprintf(stderr, "send: %s: connect: %s\n", a->text, strerror(errno));
		return -1;
	}
	return 0;
}

int cmd_send(int argc, char **argv)
{
	struct xfer_opts o;
	struct send_run s;
	struct addr a;
	enum send_end end;
	char err[256], tail[256], hex[65] = "";
	double t0, secs;
	int r = xfer_parse_opts(&o, "send", argc, argv), pipes;

	if (r)
		return r > 0 ? 0 : 2;
	if (addr_parse(o.addr, ADDR_CONNECT, &a, err, sizeof(err))) {
		fprintf(stderr, "splicer send: %s (see splicer send --help)\n", err);
		return 2;
	}
	memset(&s, 0, sizeof(s));
	s.o = &o;
	s.method = o.method;
	s.sock = -1;
	signal(SIGPIPE, SIG_IGN); /* a reset shows as EPIPE/ECONNRESET, reported */
	if (open_in(&s))
		return 1;
	/* a pipe of our own to splice a file (or a terminal, socket: anything
	 * sendfile cannot take); from a pipe, only the hash pipe for its tee */
	pipes = o.method != XFER_COPY &&
		(s.in_pipe ? o.sha256 : o.method == XFER_SPLICE || !s.in_seekable);
	if (xfer_init(&s.x, &o, pipes, o.sha256) || connect_to(&s, &a)) {
		xfer_free(&s.x);
		return 1;
	}
	s.x.out_name = a.text;
	t0 = xfer_now();
	end = pump(&s);
	if (end == SEND_OK)
		end = finish(&s);
	secs = xfer_now() - t0;
	if (end == SEND_PEER)
		fprintf(stderr, "send: %s: %s after %llu bytes\n", a.text, strerror(s.err),
			(unsigned long long)s.x.out_bytes);
	else if (end == SEND_INPUT)
		fprintf(stderr, "send: %s: %s after %llu bytes\n", o.file, strerror(s.err),
			(unsigned long long)s.x.out_bytes);
	if (o.sha256)
		xfer_sha_hex(&s.x, 0, hex);
	snprintf(tail, sizeof(tail), ", method %s, peer %s%s%s%s", xfer_method_names[s.method], a.text,
		 hex[0] ? ", sha256 " : "", hex, end == SEND_OK ? "" : ", incomplete");
	xfer_report("send", o.file, s.x.out_bytes, secs, tail);
	close(s.sock);
	if (s.in != STDIN_FILENO)
		close(s.in);
	xfer_free(&s.x);
	return end == SEND_OK ? 0 : 1;
}
