/* SPDX-License-Identifier: MIT */
/* bench_real: real clients for `splicer bench --real`: redis-benchmark
 * against a redis-server, and pgbench against a PostgreSQL, both servers
 * started by the bench in a temporary directory on free loopback ports and
 * stopped (by PID) at the end. PostgreSQL refuses to run as root: when the
 * bench is root, initdb and postgres run as the `postgres` user (Debian's
 * package creates it), else as `nobody`, through runuser.
 *
 *   bench_real_start(&e, "127.0.0.1");
 *   ... start a proxy in front of e.redis_addr, then
 *   bench_redis(&proxy_addr, 50, 2.0, &res, err, sizeof(err));
 *   bench_real_stop(&e); */
#ifndef SPLICER_BENCH_REAL_H
#define SPLICER_BENCH_REAL_H
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

struct bench_real {
	char dir[64];             /* the temp dir of both servers */
	pid_t redis, pg;          /* 0: not running */
	char redis_addr[64], pg_addr[64]; /* "127.0.0.1:PORT" */
	char redis_skip[200], pg_skip[200]; /* why one is not running, or "" */
};

/* Starts whichever servers are installed; the skip texts say why not. */
void bench_real_start(struct bench_real *e, const char *host);
void bench_real_stop(struct bench_real *e);

struct real_result {
	double set_rps, get_rps;  /* redis-benchmark */
	double tps;               /* pgbench */
	double requests;          /* requests or transactions made, for CPU per request */
};

/* redis-benchmark -t set,get with `conns` clients through target. 0 or -1
 * with err filled. */
int bench_redis(const struct sockaddr *target, unsigned conns, double seconds,
		struct real_result *r, char *err, size_t len);
/* pgbench -S (select only) with `conns` clients, about `seconds` worth of
 * transactions at a few thousand per second, through target. */
int bench_pgbench(const struct sockaddr *target, unsigned conns, double seconds,
		  struct real_result *r, char *err, size_t len);

/* Parsers of the clients' output, exposed for the unit tests. */
int bench_parse_redis_csv(const char *out, double *set_rps, double *get_rps);
int bench_parse_pgbench(const char *out, double *tps, double *txns);

#endif
