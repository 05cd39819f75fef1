/* SPDX-License-Identifier: MIT */
/* bench_tls: the TLS passthrough rows of `splicer bench` (workload `tls`),
 * with an OpenSSL client and server inside the bench process; the proxies
 * in between never decrypt.
 *
 *   bulk   one TLS stream (TLS 1.3, TLS_AES_128_GCM_SHA256) for the
 *          workload's seconds, client to server, through splicer's sni
 *          route and through a plain route of the same splicer process
 *          (bench/splicer-sni.conf): Gbit/s and the proxy's CPU per GB. The
 *          SNI lookup happens once per connection, so per byte it should
 *          cost nothing: the goal is >= 0.95x the plain route's throughput
 *          at <= 1.05x its CPU per GB.
 *   conn   full handshakes (no resumption, X25519, an ECDSA P-256
 *          certificate), --conns at a time: connect, handshake, 64 B each
 *          way, close, through splicer's sni route, its plain route and
 *          HAProxy routing on req.ssl_sni (bench/haproxy-sni.cfg):
 *          handshakes/s and the proxy's and the machine's CPU per
 *          connection. Client and server share one epoll thread, pinned
 *          like the other load threads (--pin), so the proxies get the
 *          other CPUs.
 *
 * With --baseline, each splicer row has a twin run by that build
 * ("bulk-sni@NAME"), right after this build's rows in every repetition.
 *
 * TLS's record MAC checks every byte end to end: a proxy that changed one
 * fails the run, and the server's count of bytes must equal the client's. */
#ifndef SPLICER_BENCH_TLS_H
#define SPLICER_BENCH_TLS_H
#include <stdio.h>

#include "bench_baseline.h"
#include "json.h"

#define TLS_MAX_REPS 20
#define TLS_ROWS     (5 + 4 * MAX_BASELINES)

/* Figures of a row: bulk: Gbit/s, proxy CPU-s/GB, machine CPU-s/GB; conn:
 * handshakes/s, proxy CPU-us per connection, machine CPU-us per connection. */
enum { TF_RATE, TF_PCPU, TF_MCPU, TF_N };

struct tls_row {
	const char *name;     /* "bulk-sni", "conn-haproxy-sni" */
	const char *what;     /* legend line */
	int conn;             /* a handshake row (else bulk) */
	int haproxy;          /* through HAProxy (else splicer) */
	int plain;            /* splicer's plain route (else its sni route) */
	int base;             /* 0: this build; b + 1: the twin run by baseline b */
	char label[64];       /* name, or name@BASELINE for a twin */
	const char *skip;     /* why it does not run, or NULL */
	double v[TLS_MAX_REPS][TF_N];
	int nrep;
	double med[TF_N], lo[TF_N], hi[TF_N];
	char fail[300];
};

struct tls_bench {
	double seconds;
	unsigned workers, conns;
	int pin;              /* CPU of the handshake load thread, -1: none */
	int nrows;
	struct tls_row row[TLS_ROWS];
	void *sctx, *cctx;    /* SSL_CTX of the server and of the clients */
	int port;             /* the TLS server's port on 127.0.0.1 */
	char skip[300];       /* why nothing ran, or "" */
	const struct bench_baseline *bases; /* --baseline builds (their twins' rows) */
	int nbase;
	struct bench_twin twin[MAX_BASELINES]; /* splicer-sni run by each */
	char twin_why[MAX_BASELINES][PATH_MAX + 100];
};

/* The rows (HAProxy's when with_haproxy and installed; the splicer rows'
 * twins for each of nbase baselines), the certificate and the contexts.
 * Returns 0, or -1 with tb->skip saying why. */
int bench_tls_setup(struct tls_bench *tb, double seconds, unsigned workers, unsigned conns, int pin,
		    int with_haproxy, const struct bench_baseline *bases, int nbase);
/* One repetition of every row. Returns 0, or -1 if a row failed (its fail
 * says why). */
int bench_tls_rep(struct tls_bench *tb, int rep);
/* Seconds of work in one repetition, for the ETA. */
double bench_tls_work(const struct tls_bench *tb);
/* Medians and [min-max]; frees the contexts. */
void bench_tls_finish(struct tls_bench *tb);
void bench_tls_print(FILE *f, int md, const struct tls_bench *tb);
/* The two one-line conclusions: SNI route against the plain route (bulk),
 * splicer's SNI route against HAProxy's req.ssl_sni (handshakes). */
void bench_tls_conclusions(FILE *f, int md, const struct tls_bench *tb);
void bench_tls_json(struct json *j, const struct tls_bench *tb);

#endif
