/* SPDX-License-Identifier: MIT */
/* xfer_report: see xfer_report.h.
 *
 * Default pipe size 1m: recv's CPU time per GiB over loopback (5 runs each,
 * splice method) fell with the pipe size: into /dev/null 0.20-0.31 s at 256k,
 * 0.11-0.19 s at 512k, 0.09-0.13 s at 1m; into tmpfs 0.9-1.9 s, 0.8-1.2 s,
 * 0.85-1.1 s. The seeds' thread 000 finds pipes above 512k slower for a
 * proxy, whose pipes are mostly part-filled; recv and send fill and drain
 * the whole pipe on every call, so a larger one only saves syscalls. send's
 * CPU did not depend on it (sendfile does not use it at all). 1m is also
 * fs.pipe-max-size's default, so unprivileged users get it. */
#define _GNU_SOURCE
#include "xfer_report.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "units.h"

const char *const xfer_method_names[] = {
	[XFER_SPLICE] = "splice", [XFER_VMSPLICE] = "vmsplice", [XFER_COPY] = "copy",
	[XFER_SENDFILE] = "sendfile",
};

volatile sig_atomic_t xfer_stop;

/* ---- command line ---------------------------------------------------------- */

static const char *def_pipe(void)
{
	static char b[16];

	format_size(XFER_PIPE_DEFAULT, b, sizeof(b));
	return b;
}

static void usage_recv(void)
{
	printf("usage: splicer recv [options] LISTEN FILE\n"
	       "Accepts a stream connection on LISTEN (host:port, [v6]:port, :port, unix:/path)\n"
	       "and writes its bytes into FILE (created or truncated; '-' is stdout; /dev/null\n"
	       "discards).\n"
	       "  --method M        splice (default): socket -> pipe -> FILE, no copy into user\n"
	       "                    space; vmsplice: read into page-aligned buffers, vmsplice\n"
	       "                    them (SPLICE_F_GIFT) into a pipe, splice that into FILE;\n"
	       "                    copy: read/write\n"
	       "  --count N         serve N connections one after another, each appended to FILE\n"
	       "                    in the order accepted (default 1)\n"
	       "  --keep            serve connections until SIGTERM/SIGINT, each appended to FILE\n"
	       "  --fsync           fsync FILE after each connection (its time includes the sync)\n"
	       "  --sha256          add the SHA-256 of the bytes written to each report\n"
	       "  --pipe-size SIZE  pipe size, and buffer size of vmsplice and copy (default %s)\n"
	       "  -h, --help        this text\n"
	       "Once listening it prints \"recv: listening on ADDR\" (port 0: the port chosen) to\n"
	       "stderr, then a line per connection (and a total after more than one):\n"
	       "  recv: FILE: BYTES bytes in SECONDS s, RATE MiB/s, method M, peer ADDR[, sha256 HEX]\n"
	       "An error of FILE (no space, I/O) stops recv with what was written reported; an\n"
	       "error of a peer (reset) ends its connection only. Exit status: 0 when every\n"
	       "connection ended cleanly (with --keep: and SIGTERM came between connections),\n"
	       "1 after an error, 2 for a bad command line.\n",
	       def_pipe());
}

static void usage_send(void)
{
	printf("usage: splicer send [options] FILE ADDRESS\n"
	       "Connects to ADDRESS (host:port, [v6]:port, unix:/path) and sends FILE ('-' is\n"
	       "stdin), then half-closes and waits until the receiver closes the connection.\n"
	       "  --method M        sendfile (default), splice (FILE -> pipe -> socket) or copy\n"
	       "                    (read/write); from a pipe, sendfile and splice both splice\n"
	       "                    it straight into the socket\n"
	       "  --sha256          add the SHA-256 of the bytes sent to the report\n"
	       "  --pipe-size SIZE  pipe size, and buffer size of copy (default %s)\n"
	       "  --no-wait         exit after the half-close, without waiting for the receiver\n"
	       "  -h, --help        this text\n"
	       "Prints to stderr:\n"
	       "  send: FILE: BYTES bytes in SECONDS s, RATE MiB/s, method M, peer ADDR[, sha256 HEX]\n"
	       "where SECONDS runs from the connect to the receiver's close. Exit status: 0 when\n"
	       "FILE was sent and the receiver closed cleanly, 1 after an error (reset, refused,\n"
	       "unreadable FILE), 2 for a bad command line.\n",
	       def_pipe());
}

static int usage_err(const char *cmd, const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "splicer %s: ", cmd);
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, " (see splicer %s --help)\n", cmd);
	return -1;
}

static int parse_method(struct xfer_opts *o, const char *v)
{
	int recv = !strcmp(o->cmd, "recv");

	for (int m = 0; m <= XFER_SENDFILE; m++)
		if (!strcmp(v, xfer_method_names[m]) && m != (recv ? XFER_SENDFILE : XFER_VMSPLICE)) {
			o->method = (enum xfer_method)m;
			return 0;
		}
	return usage_err(o->cmd, "option '--method': unknown method '%s' (%s)", v,
			 recv ? "splice, vmsplice or copy" : "sendfile, splice or copy");
}

/* An option with a value: "--name VALUE" or "--name=VALUE". */
static int valued(const char *a, const char *name, int *i, int argc, char **argv, const char **v)
{
	size_t n = strlen(name);

	if (strncmp(a, name, n) || (a[n] && a[n] != '='))
		return 0;
	if (a[n] == '=')
		*v = a + n + 1;
	else
		*v = *i + 1 < argc ? argv[++*i] : NULL;
	return 1;
}

int xfer_parse_opts(struct xfer_opts *o, const char *cmd, int argc, char **argv)
{
	int recv = !strcmp(cmd, "recv"), npos = 0, dashdash = 0, count_given = 0;
	const char *pos[2] = { NULL, NULL };

	*o = (struct xfer_opts){ .cmd = cmd, .method = recv ? XFER_SPLICE : XFER_SENDFILE,
				 .pipe_size = XFER_PIPE_DEFAULT, .count = 1 };
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		uint64_t n;

		if (dashdash || a[0] != '-' || !strcmp(a, "-")) {
			if (npos == 2)
				return usage_err(cmd, "unexpected argument '%s'%s", a, "");
			pos[npos++] = a;
		} else if (!strcmp(a, "--")) {
			dashdash = 1;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			recv ? usage_recv() : usage_send();
			return 1;
		} else if (!strcmp(a, "--sha256")) {
			o->sha256 = 1;
		} else if (recv && !strcmp(a, "--fsync")) {
			o->fsync = 1;
		} else if (recv && !strcmp(a, "--keep")) {
			o->keep = 1;
		} else if (!recv && !strcmp(a, "--no-wait")) {
			o->no_wait = 1;
		} else if (valued(a, "--method", &i, argc, argv, &v)) {
			if (!v)
				return usage_err(cmd, "option '%s' needs a value%s", a, "");
			if (parse_method(o, v))
				return -1;
		} else if (valued(a, "--pipe-size", &i, argc, argv, &v)) {
			if (!v || parse_size(v, &n) || n < XFER_PIPE_MIN || n > XFER_PIPE_MAX)
				return usage_err(cmd, "option '--pipe-size': invalid value '%s' %s",
						 v ? v : "", "(expects 4k..64m)");
			o->pipe_size = (unsigned)n;
		} else if (recv && valued(a, "--count", &i, argc, argv, &v)) {
			if (!v || parse_uint(v, &n) || n < 1)
				return usage_err(cmd, "option '--count': invalid value '%s' %s", v ? v : "",
						 "(expects a number of connections, 1 or more)");
			o->count = n;
			count_given = 1;
		} else {
			return usage_err(cmd, "unknown option '%s'%s", a, "");
		}
	}
	if (npos < 2)
		return usage_err(cmd, "missing %s%s", recv ? (npos ? "FILE" : "LISTEN and FILE")
							      : (npos ? "ADDRESS" : "FILE and ADDRESS"), "");
	if (o->keep && count_given)
		return usage_err(cmd, "--keep and --count exclude each other%s%s", "", "");
	o->addr = recv ? pos[0] : pos[1];
	o->file = recv ? pos[1] : pos[0];
	return 0;
}

/* ---- buffers, pipes, digests ------------------------------------------------- */

static int make_pipe(struct xfer *x, int p[2], unsigned want)
{
	int got;

	if (pipe2(p, O_CLOEXEC)) {
		fprintf(stderr, "%s: pipe: %s\n", x->cmd, strerror(errno));
		return -1;
	}
	if (fcntl(p[1], F_SETPIPE_SZ, (int)want) < 0)
		fprintf(stderr, "%s: pipe size %u refused (%s; see /proc/sys/fs/pipe-max-size): "
			"using the kernel's\n", x->cmd, want, strerror(errno));
	got = fcntl(p[1], F_GETPIPE_SZ);
	return got > 0 ? got : 65536;
}

int xfer_init(struct xfer *x, const struct xfer_opts *o, int pipes, int nsha)
{
	unsigned size = (o->pipe_size + 4095) & ~4095u;

	*x = (struct xfer){ .cmd = o->cmd, .p = { -1, -1 }, .hp = { -1, -1 } };
	if (pipes) {
		int got = make_pipe(x, x->p, size);
		if (got < 0)
			return -1;
		size = (unsigned)got;
		/* a smaller hash pipe (a refused size) only makes tees shorter */
		if (nsha && make_pipe(x, x->hp, size) < 0)
			return -1;
	}
	x->pipe_size = size;
	x->buf = aligned_alloc(4096, size);
	for (int i = 0; i < nsha; i++) {
		x->sha[i] = EVP_MD_CTX_new();
		if (!x->sha[i] || !EVP_DigestInit_ex(x->sha[i], EVP_sha256(), NULL)) {
			fprintf(stderr, "%s: SHA-256 unavailable\n", x->cmd);
			return -1;
		}
	}
	if (!x->buf) {
		fprintf(stderr, "%s: out of memory\n", x->cmd);
		return -1;
	}
	return 0;
}

void xfer_free(struct xfer *x)
{
	for (int i = 0; i < 2; i++) {
		if (x->p[i] >= 0)
			close(x->p[i]);
		if (x->hp[i] >= 0)
			close(x->hp[i]);
		if (x->sha[i])
			EVP_MD_CTX_free(x->sha[i]);
	}
	free(x->buf);
	*x = (struct xfer){ .p = { -1, -1 }, .hp = { -1, -1 } };
}

void xfer_hash(struct xfer *x, const void *b, size_t n)
{
	for (int i = 0; i < 2; i++)
		if (x->sha[i] && n)
			EVP_DigestUpdate(x->sha[i], b, n);
}

void xfer_sha_hex(struct xfer *x, int i, char hex[65])
{
	unsigned char d[32];
	unsigned len = 32;

	memset(d, 0, sizeof(d));
	if (x->sha[i]) {
		EVP_DigestFinal_ex(x->sha[i], d, &len);
		EVP_DigestInit_ex(x->sha[i], EVP_sha256(), NULL);
	}
	for (int k = 0; k < 32; k++)
		snprintf(hex + 2 * k, 3, "%02x", d[k]);
}

/* ---- moving bytes ------------------------------------------------------------ */

int xfer_write_all(struct xfer *x, int out, const void *b, size_t n)
{
	const unsigned char *p = b;

	while (n) {
		ssize_t r = write(out, p, n);
		if (r > 0) {
			p += r;
			n -= (size_t)r;
			x->out_bytes += (uint64_t)r;
		} else if (r < 0 && errno == EINTR && !xfer_stop) {
			continue;
		} else {
			return r < 0 ? -errno : -EIO;
		}
	}
	return 0;
}

/* Reads exactly n bytes of a pipe that holds them. */
static int read_exact(int fd, unsigned char *b, size_t n)
{
	while (n) {
		ssize_t r = read(fd, b, n);
		if (r > 0) {
			b += r;
			n -= (size_t)r;
		} else if (r < 0 && errno == EINTR && !xfer_stop) {
			continue;
		} else {
			return r < 0 ? -errno : -EIO;
		}
	}
	return 0;
}

/* Copies the next up-to-n bytes of in into buf without consuming them (a
 * tee into the hash pipe, read back). Returns the bytes copied or -errno. */
static ssize_t tee_ahead(struct xfer *x, int in, size_t n)
{
	ssize_t t;
	int r;

	if (n > x->pipe_size)
		n = x->pipe_size;
	do
		t = tee(in, x->hp[1], n, 0);
	while (t < 0 && errno == EINTR && !xfer_stop);
	if (t <= 0)
		return t < 0 ? -errno : -EIO;
	if ((r = read_exact(x->hp[0], x->buf, (size_t)t)))
		return r;
	return t;
}

int xfer_from_pipe(struct xfer *x, int in, size_t n, int out, int hash)
{
	size_t at = 0, held = 0; /* buf[at, at + held): tee'd head of in, not yet hashed */

	while (n) {
		uint64_t before = x->out_bytes;
		unsigned char *from = x->buf + at;
		size_t moved;
		ssize_t r;
		int w = 0;

		if (hash && !held) {
			if ((r = tee_ahead(x, in, n)) < 0)
				return (int)r;
			at = 0;
			held = (size_t)r;
			from = x->buf;
		}
		if (x->out_nosplice) {
			/* with hash, these are the bytes buf already holds */
			size_t want = hash ? held : n < x->pipe_size ? n : x->pipe_size;
			r = read(in, hash ? from : x->buf, want);
			if (r < 0 && errno == EINTR && !xfer_stop)
				continue;
			if (r <= 0)
				return r < 0 ? -errno : -EIO;
			w = xfer_write_all(x, out, hash ? from : x->buf, (size_t)r);
		} else {
			/* no SPLICE_F_MORE: it corks a socket and delays the last chunk */
			r = splice(in, NULL, out, NULL, hash ? held : n, SPLICE_F_MOVE);
			if (r < 0 && errno == EINTR && !xfer_stop)
				continue;
			if (r < 0 && errno == EINVAL) {
				fprintf(stderr, "%s: %s: splice into it refused (%s): writing with write()\n",
					x->cmd, x->out_name ? x->out_name : "output", strerror(errno));
				x->out_nosplice = 1;
				continue;
			}
			if (r <= 0)
				return r < 0 ? -errno : -EIO;
			x->out_bytes += (uint64_t)r;
		}
		/* the digest covers exactly what reached out */
		moved = (size_t)(x->out_bytes - before);
		if (hash) {
			xfer_hash(x, from, moved);
			at += moved;
			held -= moved;
		}
		n -= moved;
		if (w)
			return w;
	}
	return 0;
}

int xfer_peer_errno(int e)
{
	switch (e) {
	case ECONNRESET: case EPIPE: case ECONNABORTED: case ETIMEDOUT: case ENOTCONN:
	case EHOSTUNREACH: case ENETUNREACH: case ENETDOWN: case EHOSTDOWN: case ECONNREFUSED:
	case ENETRESET: case EPROTO:
		return 1;
	default:
		return 0;
	}
}

double xfer_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void xfer_report(const char *cmd, const char *name, uint64_t bytes, double secs, const char *tail)
{
	double s = secs > 1e-6 ? secs : 1e-6;

	fprintf(stderr, "%s: %s: %llu bytes in %.3f s, %.1f MiB/s%s\n", cmd, name,
		(unsigned long long)bytes, secs, (double)bytes / s / (1024.0 * 1024.0), tail);
}
