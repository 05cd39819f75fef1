/* SPDX-License-Identifier: MIT */
/* xfer_report: what `splicer recv` and `splicer send` share: their command
 * line, the report line, SHA-256 of the bytes moved, and the loops that move
 * bytes out of a pipe or a buffer (partial writes, EINTR, an output that
 * refuses splice).
 *
 * The report line, on stderr (stdout may be the data):
 *   recv: FILE: BYTES bytes in SECONDS s, MIBS MiB/s, method M, peer ADDR[, sha256 HEX][, incomplete] */
#ifndef SPLICER_XFER_REPORT_H
#define SPLICER_XFER_REPORT_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

enum xfer_method { XFER_SPLICE, XFER_VMSPLICE, XFER_COPY, XFER_SENDFILE };
extern const char *const xfer_method_names[];

/* Pipe size (and copy buffer) unless --pipe-size says otherwise: see the
 * measurement in xfer_report.c. */
#define XFER_PIPE_DEFAULT (1024u * 1024u)
#define XFER_PIPE_MIN 4096u
#define XFER_PIPE_MAX (64u * 1024u * 1024u)

struct xfer_opts {
	const char *cmd;         /* "recv" or "send": the prefix of every message */
	enum xfer_method method;
	unsigned pipe_size;      /* requested */
	int sha256, fsync, keep, no_wait;
	uint64_t count;          /* recv: connections to serve (--keep: unbounded) */
	const char *file;        /* FILE ("-": stdout for recv, stdin for send) */
	const char *addr;        /* recv: LISTEN, send: ADDRESS */
};

/* Parses argv[2..] of `splicer recv|send`. Returns 0, 1 after --help was
 * printed, or -1 after a usage message on stderr. */
int xfer_parse_opts(struct xfer_opts *o, const char *cmd, int argc, char **argv);

/* Set by recv's SIGTERM/SIGINT handler: the loops then return -EINTR
 * instead of retrying an interrupted call. */
extern volatile sig_atomic_t xfer_stop;

struct xfer {
	const char *cmd;
	const char *out_name;   /* for the note when out refuses splice */
	unsigned pipe_size;     /* granted by F_SETPIPE_SZ (or the buffer size) */
	int p[2];               /* data pipe (-1: none) */
	int hp[2];              /* hash pipe: a tee of the data pipe, read for SHA-256 */
	unsigned char *buf;     /* pipe_size bytes, page-aligned */
	void *sha[2];           /* EVP_MD_CTX *, NULL when unused */
	int out_nosplice;       /* out refused splice: write() into it from now on */
	uint64_t out_bytes;     /* bytes that reached out */
};

/* Allocates the buffer and, when pipes != 0, the data pipe (and the hash pipe
 * when nsha > 0) at the requested size; nsha digests (0..2) are started.
 * Returns 0 or -1 with a message on stderr. */
int xfer_init(struct xfer *x, const struct xfer_opts *o, int pipes, int nsha);
void xfer_free(struct xfer *x);

/* Feeds every digest in use. */
void xfer_hash(struct xfer *x, const void *b, size_t n);
/* Finishes digest i into 64 hex digits (and a NUL), and starts it again. */
void xfer_sha_hex(struct xfer *x, int i, char hex[65]);

/* Writes all n bytes, resuming after partial writes and EINTR. Returns 0 or
 * -errno (-EINTR only once xfer_stop is set). */
int xfer_write_all(struct xfer *x, int out, const void *b, size_t n);

/* Moves exactly n bytes, which the pipe `in` holds, into out with splice.
 * With hash, each piece is first tee'd into the hash pipe and read from
 * there, so the digest covers exactly what reached out while out still gets
 * the pipe's pages without a copy. An out that refuses splice (EINVAL: a
 * terminal, an O_APPEND file on some kernels) is noted once and then written
 * with read/write. Returns 0 or -errno of out (-EINTR as above). */
int xfer_from_pipe(struct xfer *x, int in, size_t n, int out, int hash);

/* 1 for the errno values that mean the peer or the network failed (reset,
 * broken pipe, timeout, unreachable), 0 for local ones (disk, memory). */
int xfer_peer_errno(int e);

double xfer_now(void); /* CLOCK_MONOTONIC seconds */

/* "CMD: NAME: BYTES bytes in S s, R MiB/s" followed by tail, on stderr. */
void xfer_report(const char *cmd, const char *name, uint64_t bytes, double secs, const char *tail);

#endif
