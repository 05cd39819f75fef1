/* SPDX-License-Identifier: MIT */
/* bench_traffic: the traffic of `splicer bench`, generated and checked inside
 * splicer (threads of the bench process), so a run needs no other tool.
 *
 * Every connection opens with a 16-byte header saying what it is for; the
 * sink (one epoll thread) then plays its part:
 *   SINK   bulk upload: every byte is compared with the sender's pattern
 *          (seeded, position-addressed) and the count and verdict are sent
 *          back when the sender shuts down, so a fast but wrong proxy
 *          cannot score;
 *   ECHO   request/response: every byte echoed back (pipelined messages
 *          of any size);
 *   CONN   short connection: a 64-byte request, a 64-byte reply, close. */
#ifndef SPLICER_BENCH_TRAFFIC_H
#define SPLICER_BENCH_TRAFFIC_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct bench_sink;

/* Starts the sink listening on 127.0.0.1:0 (or the given address text,
 * e.g. "198.18.0.2:0" inside a namespace). Returns NULL with err filled. */
struct bench_sink *bench_sink_start(const char *where, char *err, unsigned errlen);
/* "127.0.0.1:PORT" */
const char *bench_sink_addr(const struct bench_sink *s);
/* Bytes verified and mismatches seen so far, over the sink's life. */
void bench_sink_totals(const struct bench_sink *s, uint64_t *verified, uint64_t *mismatches);
void bench_sink_stop(struct bench_sink *s);

struct bulk_result {
	uint64_t bytes;      /* acknowledged by the sink as verified */
	double seconds;      /* first byte sent .. verdict received */
	int ok;              /* every stream verified intact */
	char why[128];       /* first failure */
};
/* `streams` parallel uploads to `target` for `seconds`. */
int bench_bulk(const struct sockaddr *target, socklen_t len, unsigned streams, double seconds,
	       uint64_t seed, struct bulk_result *r);

struct rr_result {
	double *rtt_us;      /* malloc'd, one per round trip */
	size_t n;
	int ok;
	char why[128];
};
/* 64-byte ping-pong on one connection for `seconds` (at most max_n). */
int bench_rr(const struct sockaddr *target, socklen_t len, double seconds, size_t max_n,
	     struct rr_result *r);

/* What a load run did: `done` requests answered (rr) or connections
 * completed (request sent, reply verified, EOF seen), inside `seconds`. */
struct load_result {
	uint64_t done;
	uint64_t failed;
	double seconds;
	double cpu_s;        /* the load thread's own CPU over the run */
	int ok;
	char why[128];       /* first failure */
};
/* `conns` connections, each keeping `depth` messages of `size` bytes in
 * flight to the sink's echo (pipelined: a new one per reply), for
 * `seconds`, from one epoll thread pinned to `cpu` (-1: not pinned).
 * Every echoed byte is checked. size * depth <= 64 KiB. */
int bench_rr_load(const struct sockaddr *target, socklen_t len, unsigned conns, unsigned size,
		  unsigned depth, double seconds, int cpu, struct load_result *r);
/* Short connections, `conns` at a time (connect, 64 B each way, the server
 * closes), for `seconds`, from one epoll thread pinned to `cpu`. */
int bench_conn_load(const struct sockaddr *target, socklen_t len, unsigned conns, double seconds,
		    int cpu, struct load_result *r);

/* Pins the sink's thread to `cpu` (-1: every CPU again); its CPU time. */
void bench_sink_pin(struct bench_sink *s, int cpu);
double bench_sink_cpu(const struct bench_sink *s);

double bench_now(void); /* CLOCK_MONOTONIC seconds */

#endif
