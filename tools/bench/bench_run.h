/* SPDX-License-Identifier: MIT */
/* bench_run: what one `splicer bench` run measured, shared by the runner
 * (cmd_bench.c), the reports (bench_report.c), the chart (bench_chart.c)
 * and the real clients (bench_real.c).
 *
 * A case_run is one case (a proxy and its settings) on one link with one
 * worker count; v holds every figure of every repetition (NAN where a
 * workload did not run or does not apply), med/lo/hi their median and
 * min-max. */
#ifndef SPLICER_BENCH_RUN_H
#define SPLICER_BENCH_RUN_H
#include <stdio.h>

#include "bench_baseline.h"
#include "bench_link.h"
#include "bench_proxy.h"

#define MAX_REPS 20

/* The many-connection request/response variants: message size x depth. */
#define RR_VARIANTS 4
extern const unsigned rr_size[RR_VARIANTS], rr_depth[RR_VARIANTS];

/* Per rr variant, four figures from F_RRV + 4 * variant: */
enum { RRV_RATE, RRV_PCPU, RRV_MCPU, RRV_LCPU, RRV_NFIG };

enum fig {
	F_B1_GBPS, F_B1_CPU, F_B1_BUSY, F_B1_SYSC,
	F_B4_GBPS, F_B4_CPU, F_B4_BUSY, F_B4_SYSC,
	F_RR_P50, F_RR_P99, F_RR_P999, F_RR_RATE,
	F_RRV,
	F_CONN_RATE = F_RRV + RR_VARIANTS * RRV_NFIG, F_CONN_CPU_US, F_CONN_MCPU, F_CONN_LCPU,
	F_RSS_MIB,
	F_REDIS_SET, F_REDIS_GET, F_REDIS_CPU, F_PG_TPS, F_PG_CPU,
	NFIG
};

struct fig_info {
	const char *key, *unit;
	int higher_better;
};
extern const struct fig_info bench_figs[NFIG];

/* The workloads, selectable with --workloads. */
enum workload { W_BULK1, W_BULK4, W_LAT, W_RR, W_CONN, W_TLS, W_REAL, NWL };
/* The workloads each case runs (tls has rows of its own, bench_tls.c). */
#define CASE_WORKLOADS ((1u << W_BULK1) | (1u << W_BULK4) | (1u << W_LAT) | (1u << W_RR) | \
			(1u << W_CONN))
extern const char *const workload_names[NWL];

struct case_run {
	const struct bench_case *c;
	struct bench_link *link;
	struct bench_sink *sink;
	unsigned workers;
	int bulk_only;                 /* veth links: the bulk workloads only */
	const char *skip;              /* why it did not run, or NULL */
	char label[48];                /* "auto", or "auto w2" in a --workers sweep */
	double v[MAX_REPS][NFIG];
	double med[NFIG], lo[NFIG], hi[NFIG];
	int nrep;
	char fail[400];
};

struct bench_opts {
	int quick, reps, nworkers, pin, real;
	unsigned workers[8];     /* the --workers sweep; workers[0] is the base */
	unsigned conns;          /* --conns: rr and short-connection concurrency */
	unsigned wl;             /* bit per enum workload */
	double seconds;
	unsigned long long files; /* bytes per file-row run; 0: no file rows */
	const char *cases, *peers, *ref, *json, *chart, *links, *doc, *subject;
	struct bench_baseline base[MAX_BASELINES]; /* --baseline: other builds, as twins */
	int nbase;
	const char *base_cases;  /* --baseline-cases: the cases they run (default: the subject) */
};

/* The run of a case (by name, and worker count; 0: the base) on a link. */
const struct case_run *bench_find_run(const struct case_run *runs, int n,
				      const struct bench_link *l, const char *name, unsigned workers);
/* r's twin run by baseline `base` (the same case, link and workers), or
 * NULL (none, skipped, or r is that twin). */
const struct case_run *bench_find_twin(const struct case_run *runs, int n, const struct case_run *r,
				       const char *base);

/* Reports (bench_report.c): the tables of every link, the scaling and real
 * tables, the one-line conclusions; markdown for --doc. */
void bench_report(FILE *f, int markdown, const struct case_run *runs, int n,
		  const struct bench_link *links, int nlinks, const struct bench_opts *o);
void bench_conclusions(FILE *f, int markdown, const struct case_run *runs, int n,
		       const struct bench_link *links, int nlinks, const struct bench_opts *o);
/* The goals of doc/performance.md, met or not, as a markdown table. */
void bench_goals(FILE *f, const struct case_run *runs, int n, const struct bench_link *links,
		 int nlinks, const struct bench_opts *o);

/* gnuplot chart (bench_chart.c). Returns 0 or -1. */
int bench_chart(const char *path, const struct case_run *runs, int n, struct bench_link *links,
		int nlinks);

#endif
