/* SPDX-License-Identifier: MIT */
/* cmd_recv: `splicer recv [options] LISTEN FILE` accepts stream connections
 * and writes their bytes into FILE, one connection after another (each
 * appended where the previous one ended), and reports bytes, seconds, MiB/s
 * and optionally the SHA-256 per connection.
 *
 * Methods (the seeds' thread 003, "using splice/vmsplice to improve file
 * receive performance"):
 *   splice    socket -> pipe -> FILE: the payload pages never enter user
 *             space (the page cache still gets one kernel copy);
 *   vmsplice  read() into page-aligned buffers, vmsplice(SPLICE_F_GIFT) them
 *             into a pipe, splice the pipe into FILE: the 2007 way, before
 *             sockets could splice;
 *   copy      read()/write().
 * With --sha256 the splice method tees the pipe into a second pipe and reads
 * that one (one copy, for the digest only).
 *
 * Errors: one of FILE (ENOSPC, EIO, EPIPE of a stdout pipe) stops recv with
 * what was written reported; one of a peer (reset) ends that connection,
 * and recv goes on to the next one if --count/--keep asks for more. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "addr.h"
#include "cmd.h"
#include "listener.h"
#include "xfer_report.h"

/* How a connection ended. */
enum conn_end { END_EOF, END_PEER, END_FILE, END_STOP };

struct conn {
	int fd;
	char peer[ADDR_TEXT_MAX];
	uint64_t received; /* bytes taken from the socket */
	int err;           /* errno of the failure */
};

struct recv_run {
	struct xfer x;
	const struct xfer_opts *o;
	enum xfer_method method; /* may turn into copy (see pump_*) */
	int out;
	int out_reg;             /* FILE is a regular file or block device: fsync applies */
};

/* The handler cannot reach the blocked call, so it shuts the sockets down:
 * accept() then fails and a socket read returns 0, whether the signal came
 * during the call or just before it. */
static volatile int stop_lfd = -1, stop_cfd = -1;

static void on_stop(int sig)
{
	int e = errno;

	xfer_stop = sig;
	if (stop_lfd >= 0)
		shutdown(stop_lfd, SHUT_RDWR);
	if (stop_cfd >= 0)
		shutdown(stop_cfd, SHUT_RD);
	errno = e;
}

/* A socket error: retry (EINTR, EAGAIN), or the end of the connection. */
static int sock_retry(struct conn *c)
{
	if (errno == EINTR && !xfer_stop)
		return 1;
	if (errno == EAGAIN) {
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		poll(&pfd, 1, 1000);
		return 1;
	}
	return 0;
}

static enum conn_end sock_failed(struct conn *c)
{
	c->err = errno;
	return errno == EINTR ? END_STOP : END_PEER;
}

static enum conn_end file_failed(struct conn *c, int r)
{
	c->err = -r;
	return r == -EINTR ? END_STOP : END_FILE;
}

static enum conn_end pump_copy(struct recv_run *rr, struct conn *c)
{
	for (;;) {
		ssize_t n = read(c->fd, rr->x.buf, rr->x.pipe_size);
		uint64_t before;
		int r;
		if (n == 0)
			return END_EOF;
		if (n < 0) {
			if (sock_retry(c))
				continue;
			return sock_failed(c);
		}
		c->received += (uint64_t)n;
		before = rr->x.out_bytes;
		r = xfer_write_all(&rr->x, rr->out, rr->x.buf, (size_t)n);
		xfer_hash(&rr->x, rr->x.buf, (size_t)(rr->x.out_bytes - before));
		if (r)
			return file_failed(c, r);
	}
}

/* From here on, copy: FILE refused splice, so a pipe in between only adds
 * syscalls. The pipe is empty (every piece was moved out before). */
static enum conn_end switch_to_copy(struct recv_run *rr, struct conn *c)
{
	rr->method = XFER_COPY;
	return pump_copy(rr, c);
}

static enum conn_end pump_splice(struct recv_run *rr, struct conn *c)
{
	for (;;) {
		ssize_t n;
		int r;
		if (rr->x.out_nosplice)
			return switch_to_copy(rr, c);
		n = splice(c->fd, NULL, rr->x.p[1], NULL, rr->x.pipe_size, SPLICE_F_MOVE);
		if (n == 0)
			return END_EOF;
		if (n < 0) {
			if (sock_retry(c))
				continue;
			if (errno == EINVAL && !c->received) {
				fprintf(stderr, "recv: %s: splice from the socket refused (%s): copying\n",
					c->peer, strerror(errno));
				return switch_to_copy(rr, c);
			}
			return sock_failed(c);
		}
		c->received += (uint64_t)n;
		r = xfer_from_pipe(&rr->x, rr->x.p[0], (size_t)n, rr->out, rr->x.sha[0] != NULL);
		if (r)
			return file_failed(c, r);
	}
}

/* vmsplice maps buf's pages into the pipe: they are referenced, not copied.
 * Splicing the pipe into a file or /dev/null copies (or drops) the bytes
 * before splice returns, so once the pipe is empty buf may be refilled. */
static enum conn_end pump_vmsplice(struct recv_run *rr, struct conn *c)
{
	for (;;) {
		ssize_t n = read(c->fd, rr->x.buf, rr->x.pipe_size);
		if (n == 0)
			return END_EOF;
		if (n < 0) {
			if (sock_retry(c))
				continue;
			return sock_failed(c);
		}
		c->received += (uint64_t)n;
		for (size_t off = 0; off < (size_t)n;) {
			struct iovec iov = { rr->x.buf + off, (size_t)n - off };
			uint64_t before = rr->x.out_bytes;
			ssize_t m;
			int r;
			if (rr->x.out_nosplice) {
				/* the pipe is empty: write the rest of buf directly */
				r = xfer_write_all(&rr->x, rr->out, iov.iov_base, iov.iov_len);
				m = (ssize_t)iov.iov_len;
			} else {
				m = vmsplice(rr->x.p[1], &iov, 1, SPLICE_F_GIFT);
				if (m < 0 && errno == EINTR && !xfer_stop)
					continue;
				if (m <= 0)
					return file_failed(c, m < 0 ? -errno : -EIO);
				r = xfer_from_pipe(&rr->x, rr->x.p[0], (size_t)m, rr->out, 0);
			}
			/* buf is still ours to read: hash what reached FILE */
			xfer_hash(&rr->x, iov.iov_base, (size_t)(rr->x.out_bytes - before));
			if (r)
				return file_failed(c, r);
			off += (size_t)m;
		}
		if (rr->x.out_nosplice)
			return switch_to_copy(rr, c);
	}
}

static enum conn_end pump(struct recv_run *rr, struct conn *c)
{
	switch (rr->method) {
	case XFER_SPLICE: return pump_splice(rr, c);
	case XFER_VMSPLICE: return pump_vmsplice(rr, c);
	default: return pump_copy(rr, c);
	}
}

/* Serves one accepted connection and reports it. Returns how it ended. */
static enum conn_end serve(struct recv_run *rr, struct conn *c, double *secs)
{
	const struct xfer_opts *o = rr->o;
	uint64_t start = rr->x.out_bytes, written;
	double t0 = xfer_now();
	enum conn_end end = pump(rr, c);
	char tail[256], hex[65] = "";

	if (end == END_EOF && xfer_stop)
		end = END_STOP; /* the handler's shutdown() made the read return 0 */
	if (end != END_FILE && o->fsync && rr->out_reg && fsync(rr->out) < 0) {
		c->err = errno;
		end = END_FILE;
	}
	*secs = xfer_now() - t0;
	written = rr->x.out_bytes - start;
	if (end == END_PEER)
		fprintf(stderr, "recv: %s: %s after %llu bytes\n", c->peer, strerror(c->err),
			(unsigned long long)written);
	else if (end == END_STOP)
		fprintf(stderr, "recv: %s: interrupted by %s after %llu bytes\n", c->peer,
			xfer_stop == SIGINT ? "SIGINT" : "SIGTERM", (unsigned long long)written);
	else if (end == END_FILE && c->received > written)
		fprintf(stderr, "recv: %s: %s after %llu bytes (%llu more received, not written)\n",
			o->file, strerror(c->err), (unsigned long long)rr->x.out_bytes,
			(unsigned long long)(c->received - written));
	else if (end == END_FILE)
		fprintf(stderr, "recv: %s: %s after %llu bytes\n", o->file, strerror(c->err),
			(unsigned long long)rr->x.out_bytes);
	if (o->sha256)
		xfer_sha_hex(&rr->x, 0, hex);
	snprintf(tail, sizeof(tail), ", method %s, peer %s%s%s%s", xfer_method_names[rr->method],
		 c->peer, hex[0] ? ", sha256 " : "", hex, end == END_EOF ? "" : ", incomplete");
	xfer_report("recv", o->file, written, *secs, tail);
	return end;
}

static int open_out(struct recv_run *rr)
{
	struct stat st;

	if (!strcmp(rr->o->file, "-"))
		rr->out = STDOUT_FILENO;
	else
		rr->out = open(rr->o->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (rr->out < 0 || fstat(rr->out, &st) < 0) {
		fprintf(stderr, "recv: %s: %s\n", rr->o->file, strerror(errno));
		return -1;
	}
	rr->out_reg = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
	if (rr->o->fsync && !rr->out_reg)
		fprintf(stderr, "recv: %s: not a regular file: --fsync does nothing\n", rr->o->file);
	/* A pipe or socket would pass the vmspliced pages on by reference, and
	 * recv could not know when its reader is done with them. */
	if (rr->method == XFER_VMSPLICE && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
		fprintf(stderr, "recv: %s: a pipe or socket would keep referencing the vmspliced "
			"buffers: copying instead\n", rr->o->file);
		rr->method = XFER_COPY;
	}
	return 0;
}

static int listen_on(const char *text, struct addr *a)
{
	char err[256];
	int fd;

	if (addr_parse(text, ADDR_LISTEN, a, err, sizeof(err))) {
		fprintf(stderr, "splicer recv: %s (see splicer recv --help)\n", err);
		return -2;
	}
	if ((fd = listener_open(a, err, sizeof(err))) < 0) {
		fprintf(stderr, "recv: %s\n", err);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK); /* one connection at a time */
	return fd;
}

static void catch_stop(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop; /* no SA_RESTART: blocked calls return EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a closed stdout pipe is EPIPE, reported */
}

/* Accepts the next connection; -1 when stopping or on an accept error. */
static int accept_one(int lfd, struct conn *c, int *rc)
{
	struct sockaddr_storage ss;

	for (;;) {
		socklen_t len = sizeof(ss);
		int fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
		if (fd >= 0) {
			memset(c, 0, sizeof(*c));
			c->fd = fd;
			addr_format((struct sockaddr *)&ss, len, c->peer, sizeof(c->peer));
			stop_cfd = fd;
			if (!xfer_stop)
				return fd;
			stop_cfd = -1;
			close(fd);
			return -1;
		}
		if (xfer_stop)
			return -1;
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		fprintf(stderr, "recv: accept: %s\n", strerror(errno));
		*rc = 1;
		return -1;
	}
}

int cmd_recv(int argc, char **argv)
{
	struct xfer_opts o;
	struct recv_run rr;
	struct addr a;
	struct conn c;
	uint64_t served = 0;
	double busy = 0;
	int lfd, rc = 0, r = xfer_parse_opts(&o, "recv", argc, argv);

	if (r)
		return r > 0 ? 0 : 2;
	memset(&rr, 0, sizeof(rr));
	rr.x = (struct xfer){ .p = { -1, -1 }, .hp = { -1, -1 } }; /* xfer_free() safe */
	rr.o = &o;
	rr.method = o.method;
	if ((lfd = listen_on(o.addr, &a)) < 0)
		return lfd == -2 ? 2 : 1;
	if (open_out(&rr) || xfer_init(&rr.x, &o, rr.method != XFER_COPY,
				       o.sha256 ? (o.keep || o.count > 1 ? 2 : 1) : 0)) {
		close(lfd);
		listener_unlink(&a);
		xfer_free(&rr.x);
		return 1;
	}
	rr.x.out_name = o.file;
	stop_lfd = lfd;
	catch_stop();
	fprintf(stderr, "recv: listening on %s\n", a.text);

	while (o.keep || served < o.count) {
		enum conn_end end;
		double secs;
		if (accept_one(lfd, &c, &rc) < 0)
			break;
		end = serve(&rr, &c, &secs);
		stop_cfd = -1;
		close(c.fd);
		served++;
		busy += secs;
		if (end != END_EOF)
			rc = 1;
		if (end == END_FILE || end == END_STOP)
			break;
	}
	if (xfer_stop && !o.keep && served < o.count && !rc) {
		fprintf(stderr, "recv: stopped by %s after %llu of %llu connections\n",
			xfer_stop == SIGINT ? "SIGINT" : "SIGTERM", (unsigned long long)served,
			(unsigned long long)o.count);
		rc = 1;
	}
	if (served > 1 || o.keep) {
		char tail[160], hex[65] = "";
		if (o.sha256)
			xfer_sha_hex(&rr.x, 1, hex);
		snprintf(tail, sizeof(tail), ", total of %llu connection%s%s%s",
			 (unsigned long long)served, served == 1 ? "" : "s", hex[0] ? ", sha256 " : "",
			 hex);
		xfer_report("recv", o.file, rr.x.out_bytes, busy, tail);
	}
	stop_lfd = -1;
	close(lfd);
	listener_unlink(&a);
	if (rr.out != STDOUT_FILENO)
		close(rr.out);
	xfer_free(&rr.x);
	return rc;
}
