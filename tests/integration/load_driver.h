/* SPDX-License-Identifier: MIT */
/* Load drivers for test_load.c: thousands of sockets on non-blocking,
 * level-triggered epoll loops (a thread per loop, not per connection), and
 * probes of the proxy process (/proc fds and memory, /metrics).
 *
 * Helper threads never call Criterion assertions; they record counts and the
 * first failure reason, which the test's main thread checks. Every loop is
 * bounded by an absolute deadline. Exported names start with ld_. */
#ifndef SPLICER_IT_LOAD_DRIVER_H
#define SPLICER_IT_LOAD_DRIVER_H

#include "harness.h"

/* ---- bulk sessions: N held open at once, then bodies both ways ----------- */

/* Per session: connect; with tag, the client sends an 8-byte tag (its index)
 * and the backend answers it, which pairs the two ends and proves the path;
 * the session is then "ready". Nothing more moves until the main thread sets
 * go: then each end sends len bytes of its own h_gen stream (ld_seed_up/down)
 * and shuts down its write side, and receives and checks the peer's len bytes
 * followed by EOF. An end closes its socket when both directions are done. */
struct ld_bulk {
	/* inputs */
	struct h_addr proxy;
	int lfd;          /* the backend's listening socket (non-blocking) */
	unsigned n;       /* sessions */
	uint64_t len;     /* body bytes each way after go */
	int tag;          /* exchange the tag (required when len > 0) */
	uint64_t seed;    /* per-run base of the streams */
	int64_t deadline; /* absolute (h_now_ms) for everything */
	unsigned first;   /* the client opens this many at once (0: all n)... */
	/* control, set by the main thread */
	_Atomic int open_rest; /* ...and the others once this is set */
	_Atomic int go;
	_Atomic int stop; /* give up (also set by a loop that failed) */
	/* progress */
	_Atomic int c_connected, c_ready, b_accepted, b_ready;
	_Atomic int c_done, b_done; /* sessions whose both directions ended well */
	_Atomic int c_eof, b_eof;   /* EOFs seen exactly after len bytes */
	_Atomic uint64_t c_verified, b_verified; /* body bytes received and checked */
	/* failures: counts and the first reason of each side */
	_Atomic int c_fail, b_fail;
	char c_why[256], b_why[256];
	pthread_t ct, bt;
	int started;
};

uint64_t ld_seed_up(const struct ld_bulk *b, unsigned i);
uint64_t ld_seed_down(const struct ld_bulk *b, unsigned i);

/* Starts the client and backend loops. Returns 0 or -errno. */
int ld_bulk_start(struct ld_bulk *b);
/* Joins both loops (they end by the deadline). */
void ld_bulk_join(struct ld_bulk *b);

/* ---- short connections: many in a row, a few in flight ------------------- */

/* Each connection: the client sends LD_SHORT_REQ bytes (its number and a
 * stream derived from it), the backend checks them, answers LD_SHORT_REP
 * bytes and closes first; the client checks the answer and the EOF right
 * after it, then closes. So the TIME_WAIT states fall on the accepting side
 * of each leg (the backend's socket, and the proxy's client socket, which
 * forwards the backend's FIN first), never on a connecting side's ephemeral
 * port: 100,000 connections cannot exhaust the port range. */
#define LD_SHORT_REQ 16
#define LD_SHORT_REP 16

struct ld_short {
	/* inputs */
	struct h_addr proxy;
	int lfd;          /* the backend's listening socket (non-blocking) */
	unsigned inflight;/* client connections at once */
	uint64_t seed;
	/* the backend loop's state */
	_Atomic int stop;
	_Atomic uint64_t b_served, b_closed;
	_Atomic int b_fail;
	char b_why[256];
	pthread_t bt;
	int started;
	/* the client's totals (main thread) */
	uint64_t next;    /* number of the next connection */
	uint64_t c_ok, c_fail;
	char c_why[256];
};

/* Starts the backend loop. Returns 0 or -errno. */
int ld_short_start(struct ld_short *s);
/* Runs `count` more connections from the calling thread, `inflight` at a
 * time; returns when all have ended or at the deadline. Failures are counted
 * in c_fail (first reason in c_why); the run stops early after one. */
void ld_short_run(struct ld_short *s, uint64_t count, int64_t deadline);
void ld_short_stop(struct ld_short *s);

/* ---- probes of the proxy process ----------------------------------------- */

struct ld_fds {
	int total, sockets, pipes, other;
};

/* Counts them by kind (readlink each). Returns 0 or -1. */
int ld_fd_kinds(pid_t pid, struct ld_fds *f);
/* A "Key:" line of /proc/PID/status in KiB (e.g. "RssAnon"), or -1. */
long ld_status_kib(pid_t pid, const char *key);

/* The stats address from the proxy's "stats: listening on" log line. */
int ld_stats_addr(const struct h_proxy *p, struct h_addr *out);
/* The value of the sample named exactly `name` ("splicer_pipes{state=\"free\"}"),
 * or -1 when absent. */
long long ld_metric(const char *body, const char *name);

/* A non-blocking listening socket on 127.0.0.1 (port chosen by the kernel).
 * Returns the fd (address in out) or -errno. */
int ld_listen(struct h_addr *out, int backlog);

#endif
