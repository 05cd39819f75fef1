/* SPDX-License-Identifier: MIT */
/* bench_report: the tables and conclusions of `splicer bench`, as text for
 * the terminal or markdown for --doc (both from bench_table), and the
 * goals (doc/performance.md) with their ratios.
 *
 * Every ratio column is named after the workload group above it and the
 * case it divides by ("x haproxy"); all figures are medians of the
 * repetitions, [min-max] where a range is shown. With --baseline, each
 * ratio to the reference is followed by one to each baseline ("x NAME"):
 * the row's figure over its twin's (the same case run by that build). */
#include "bench_run.h"

#include <math.h>
#include <string.h>

#include "bench_table.h"
#include "stats.h"

const struct case_run *bench_find_run(const struct case_run *runs, int n,
				      const struct bench_link *l, const char *name, unsigned workers)
{
	for (int i = 0; i < n; i++)
		if (runs[i].link == l && !runs[i].skip && name && !strcmp(runs[i].c->name, name) &&
		    (!workers || runs[i].workers == workers))
			return &runs[i];
	return NULL;
}

const struct case_run *bench_find_twin(const struct case_run *runs, int n, const struct case_run *r,
				       const char *base)
{
	const struct bench_case *c = r->c->of ? r->c->of : r->c;

	for (int i = 0; i < n; i++)
		if (&runs[i] != r && runs[i].link == r->link && !runs[i].skip && runs[i].c->of == c &&
		    !strcmp(runs[i].c->base, base) && runs[i].workers == r->workers)
			return &runs[i];
	return NULL;
}

static double ratio(const struct case_run *r, const struct case_run *ref, int f)
{
	return ref ? stats_ratio(r->med[f], ref->med[f]) : NAN;
}

/* Sets a cell to fmt of v, or leaves it "-" for NAN. */
static void setv(struct btable *t, int row, int col, const char *fmt, double v)
{
	if (!isnan(v))
		btable_set(t, row, col, fmt, v);
}

static void set_range(struct btable *t, int row, int col, const char *fmt, const struct case_run *r,
		      int f)
{
	btable_set_range(t, row, col, fmt, r->med[f], r->lo[f], r->hi[f], r->nrep);
}

/* r's added p50 latency (over direct's) as a multiple of ref's; undefined
 * when either is not above direct's, which noise can make it. */
static double added_ratio_at(const struct case_run *r, const struct case_run *ref,
			     const struct case_run *direct, int f)
{
	double a, b;

	if (!ref || !direct)
		return NAN;
	a = r->med[f] - direct->med[f];
	b = ref->med[f] - direct->med[f];
	return a > 0 && b > 0 ? a / b : NAN;
}

static double added_ratio(const struct case_run *r, const struct case_run *ref,
			  const struct case_run *direct)
{
	return added_ratio_at(r, ref, direct, F_RR_P50);
}

struct view {
	const struct case_run *runs;
	int n;
	const struct bench_link *l;
	const struct bench_opts *o;
	char x[40];                  /* "x haproxy" */
};

static const struct case_run *ref_of(const struct view *v, const struct case_run *r)
{
	return bench_find_run(v->runs, v->n, v->l, v->o->ref, r->workers);
}

/* A column "x NAME" per baseline, in group grp. */
static void base_cols(struct btable *t, const char *grp, const struct view *v)
{
	char head[48];

	for (int b = 0; b < v->o->nbase; b++) {
		snprintf(head, sizeof(head), "x %s", v->o->base[b].name);
		btable_col(t, grp, head);
	}
}

/* The cells of base_cols for row r and figure f, from column col; returns
 * the column after them. "-" where r has no twin (or is one of them). */
static int set_base(struct btable *t, int row, int col, const struct view *v,
		    const struct case_run *r, int f)
{
	for (int b = 0; b < v->o->nbase; b++)
		setv(t, row, col++, "%.2fx",
		     ratio(r, bench_find_twin(v->runs, v->n, r, v->o->base[b].name), f));
	return col;
}

static int any_fig(const struct view *v, int f)
{
	for (int i = 0; i < v->n; i++)
		if (v->runs[i].link == v->l && !v->runs[i].skip && !isnan(v->runs[i].med[f]))
			return 1;
	return 0;
}

/* A figure's cell, its ratio to the reference and to each baseline, from
 * column col (with [min-max] when range); returns the column after them. */
static int set_fig(struct btable *t, int row, int col, const struct view *v, const struct case_run *r,
		   const struct case_run *ref, int f, const char *fmt, int range)
{
	if (range)
		set_range(t, row, col, fmt, r, f);
	else
		setv(t, row, col, fmt, r->med[f]);
	setv(t, row, col + 1, "%.2fx", ratio(r, ref, f));
	return set_base(t, row, col + 2, v, r, f);
}

static void bulk_table(FILE *f, int md, const struct view *v)
{
	struct btable *t = btable_new("Bulk uploads (Gbit/s; CPU-s/GB: the proxy's CPU seconds per GB)");
	const char *grp[2] = { "1 stream", "4 streams" };

	btable_col(t, NULL, "case");
	for (int s = 0; s < 2; s++) {
		btable_col(t, grp[s], "Gbit/s [min-max]");
		btable_col(t, grp[s], v->x);
		base_cols(t, grp[s], v);
		btable_col(t, grp[s], "/direct");
		btable_col(t, grp[s], "CPU-s/GB");
		btable_col(t, grp[s], v->x);
		base_cols(t, grp[s], v);
		if (!s) {
			btable_col(t, grp[s], "busy/GB");
			btable_col(t, grp[s], "sysc/MB");
		}
	}
	for (int i = 0; i < v->n; i++) {
		const struct case_run *r = &v->runs[i], *ref = ref_of(v, r);
		const struct case_run *direct = bench_find_run(v->runs, v->n, v->l, "direct", 0);
		int row, col = 1;
		if (r->link != v->l)
			continue;
		if (r->skip) {
			btable_note_row(t, "%s: skipped: %s", r->label, r->skip);
			continue;
		}
		row = btable_row(t);
		btable_set(t, row, 0, "%s", r->label);
		for (int s = 0; s < 2; s++) {
			int g = s ? F_B4_GBPS : F_B1_GBPS, c = s ? F_B4_CPU : F_B1_CPU;
			col = set_fig(t, row, col, v, r, ref, g, "%.2f", 1);
			setv(t, row, col++, "%.2f", ratio(r, direct, g));
			col = set_fig(t, row, col, v, r, ref, c, "%.3f", 0);
			if (!s) {
				setv(t, row, col++, "%.3f", r->med[F_B1_BUSY]);
				setv(t, row, col++, "%.1f", r->med[F_B1_SYSC]);
			}
		}
	}
	btable_print(t, f, md);
	btable_free(t);
}

static void lat_conn_table(FILE *f, int md, const struct view *v)
{
	char title[200], cgrp[40];
	struct btable *t;

	snprintf(title, sizeof(title), "One connection's 64 B ping-pong (us), and short connections "
		 "(connect, 64 B each way, close; %u at a time)", v->o->conns);
	snprintf(cgrp, sizeof(cgrp), "short connections x%u", v->o->conns);
	t = btable_new(title);
	btable_col(t, NULL, "case");
	btable_col(t, "64 B ping-pong", "p50");
	btable_col(t, "64 B ping-pong", "p99");
	btable_col(t, "64 B ping-pong", "p99.9");
	btable_col(t, "64 B ping-pong", "added p50");
	btable_col(t, "64 B ping-pong", v->x);
	base_cols(t, "64 B ping-pong", v);
	btable_col(t, cgrp, "conn/s [min-max]");
	btable_col(t, cgrp, v->x);
	base_cols(t, cgrp, v);
	btable_col(t, cgrp, "proxy CPU-us");
	btable_col(t, cgrp, v->x);
	base_cols(t, cgrp, v);
	btable_col(t, cgrp, "machine CPU-us");
	btable_col(t, cgrp, v->x);
	btable_col(t, cgrp, "load CPU-us");
	btable_col(t, NULL, "peak MiB");
	for (int i = 0; i < v->n; i++) {
		const struct case_run *r = &v->runs[i], *ref = ref_of(v, r);
		const struct case_run *direct = bench_find_run(v->runs, v->n, v->l, "direct", 0);
		int row, col = 1;
		if (r->link != v->l || r->skip)
			continue;
		row = btable_row(t);
		btable_set(t, row, 0, "%s", r->label);
		setv(t, row, col++, "%.1f", r->med[F_RR_P50]);
		setv(t, row, col++, "%.1f", r->med[F_RR_P99]);
		setv(t, row, col++, "%.1f", r->med[F_RR_P999]);
		setv(t, row, col++, "%+.1f", direct ? r->med[F_RR_P50] - direct->med[F_RR_P50] : NAN);
		setv(t, row, col++, "%.2fx", added_ratio(r, ref, direct));
		for (int b = 0; b < v->o->nbase; b++)
			setv(t, row, col++, "%.2fx",
			     added_ratio(r, bench_find_twin(v->runs, v->n, r, v->o->base[b].name), direct));
		col = set_fig(t, row, col, v, r, ref, F_CONN_RATE, "%.0f", 1);
		col = set_fig(t, row, col, v, r, ref, F_CONN_CPU_US, "%.1f", 0);
		setv(t, row, col++, "%.1f", r->med[F_CONN_MCPU]);
		setv(t, row, col++, "%.2fx", ratio(r, ref, F_CONN_MCPU));
		setv(t, row, col++, "%.1f", r->med[F_CONN_LCPU]);
		setv(t, row, col++, "%.1f", r->med[F_RSS_MIB]);
	}
	btable_print(t, f, md);
	btable_free(t);
}

static void rr_table(FILE *f, int md, const struct view *v)
{
	char title[200];
	struct btable *t;

	snprintf(title, sizeof(title), "Request/response, %u connections (requests/s; CPU "
		 "microseconds per request: the proxy's, the whole machine's, the load thread's)",
		 v->o->conns);
	t = btable_new(title);
	btable_col(t, NULL, "workload");
	btable_col(t, NULL, "case");
	btable_col(t, "requests/s", "req/s [min-max]");
	btable_col(t, "requests/s", v->x);
	base_cols(t, "requests/s", v);
	btable_col(t, "proxy CPU", "us/req");
	btable_col(t, "proxy CPU", v->x);
	base_cols(t, "proxy CPU", v);
	btable_col(t, "machine CPU", "us/req");
	btable_col(t, "machine CPU", v->x);
	base_cols(t, "machine CPU", v);
	btable_col(t, "load CPU", "us/req");
	for (int k = 0; k < RR_VARIANTS; k++)
		for (int i = 0; i < v->n; i++) {
			const struct case_run *r = &v->runs[i], *ref = ref_of(v, r);
			int b = F_RRV + RRV_NFIG * k, row, col = 2;
			if (r->link != v->l || r->skip || isnan(r->med[b + RRV_RATE]))
				continue;
			row = btable_row(t);
			btable_set(t, row, 0, "%u B, depth %u", rr_size[k], rr_depth[k]);
			btable_set(t, row, 1, "%s", r->label);
			col = set_fig(t, row, col, v, r, ref, b + RRV_RATE, "%.0f", 1);
			col = set_fig(t, row, col, v, r, ref, b + RRV_PCPU, "%.2f", 0);
			col = set_fig(t, row, col, v, r, ref, b + RRV_MCPU, "%.2f", 0);
			setv(t, row, col++, "%.2f", r->med[b + RRV_LCPU]);
		}
	btable_print(t, f, md);
	btable_free(t);
}

static void real_table(FILE *f, int md, const struct view *v)
{
	struct btable *t = btable_new("Real clients: redis-benchmark (SET, GET) against redis-server, "
				      "pgbench -S against PostgreSQL");
	char rgrp[48];

	snprintf(rgrp, sizeof(rgrp), "redis-benchmark -c %u", v->o->conns);
	btable_col(t, NULL, "case");
	btable_col(t, rgrp, "SET req/s");
	btable_col(t, rgrp, v->x);
	base_cols(t, rgrp, v);
	btable_col(t, rgrp, "GET req/s");
	btable_col(t, rgrp, v->x);
	base_cols(t, rgrp, v);
	btable_col(t, rgrp, "proxy CPU-us/req");
	base_cols(t, rgrp, v);
	btable_col(t, "pgbench -S", "tps [min-max]");
	btable_col(t, "pgbench -S", v->x);
	base_cols(t, "pgbench -S", v);
	btable_col(t, "pgbench -S", "proxy CPU-us/txn");
	btable_col(t, "pgbench -S", v->x);
	base_cols(t, "pgbench -S", v);
	for (int i = 0; i < v->n; i++) {
		const struct case_run *r = &v->runs[i], *ref = ref_of(v, r);
		int row, col = 1;
		if (r->link != v->l || r->skip)
			continue;
		row = btable_row(t);
		btable_set(t, row, 0, "%s", r->label);
		col = set_fig(t, row, col, v, r, ref, F_REDIS_SET, "%.0f", 1);
		col = set_fig(t, row, col, v, r, ref, F_REDIS_GET, "%.0f", 1);
		setv(t, row, col++, "%.2f", r->med[F_REDIS_CPU]);
		col = set_base(t, row, col, v, r, F_REDIS_CPU);
		col = set_fig(t, row, col, v, r, ref, F_PG_TPS, "%.0f", 1);
		col = set_fig(t, row, col, v, r, ref, F_PG_CPU, "%.1f", 0);
	}
	btable_print(t, f, md);
	btable_free(t);
}

/* The throughput-like figures the scaling table and goal compare. */
static const struct {
	const char *name;
	int fig;
} scaled[] = {
	{ "bulk 1", F_B1_GBPS }, { "bulk 4", F_B4_GBPS },
	{ "rr 64 d1", F_RRV + 0 * RRV_NFIG }, { "rr 64 d16", F_RRV + 1 * RRV_NFIG },
	{ "rr 1k d1", F_RRV + 2 * RRV_NFIG }, { "rr 1k d16", F_RRV + 3 * RRV_NFIG },
	{ "conn/s", F_CONN_RATE }, { "redis GET", F_REDIS_GET }, { "pgbench", F_PG_TPS },
};
#define NSCALED (int)(sizeof(scaled) / sizeof(scaled[0]))

static void scaling_table(FILE *f, int md, const struct view *v)
{
	char title[160];
	struct btable *t;

	snprintf(title, sizeof(title), "Scaling: each figure with N workers over the same case's with %u "
		 "(higher is better; below 1.00 is slower)", v->o->workers[0]);
	t = btable_new(title);
	btable_col(t, NULL, "case");
	btable_col(t, NULL, "workers");
	for (int s = 0; s < NSCALED; s++)
		if (any_fig(v, scaled[s].fig))
			btable_col(t, "scaling", scaled[s].name);
	for (int i = 0; i < v->n; i++) {
		const struct case_run *r = &v->runs[i], *base;
		int row, col = 2;
		if (r->link != v->l || r->skip || r->workers == v->o->workers[0])
			continue;
		base = bench_find_run(v->runs, v->n, v->l, r->c->name, v->o->workers[0]);
		row = btable_row(t);
		btable_set(t, row, 0, "%s", r->c->name);
		btable_set(t, row, 1, "%u", r->workers);
		for (int s = 0; s < NSCALED; s++)
			if (any_fig(v, scaled[s].fig))
				setv(t, row, col++, "%.2fx", ratio(r, base, scaled[s].fig));
	}
	btable_print(t, f, md);
	btable_free(t);
}

void bench_report(FILE *f, int md, const struct case_run *runs, int n,
		  const struct bench_link *links, int nlinks, const struct bench_opts *o)
{
	for (int l = 0; l < nlinks; l++) {
		struct view v = { runs, n, &links[l], o, "" };
		int ran = 0;
		for (int i = 0; i < n; i++)
			ran |= runs[i].link == &links[l];
		if (!ran)
			continue;
		snprintf(v.x, sizeof(v.x), "x %s", o->ref);
		fprintf(f, md ? "\n### Link %s: %s\n" : "\n== link %s: %s\n", links[l].name, links[l].what);
		if (any_fig(&v, F_B1_GBPS) || any_fig(&v, F_B4_GBPS))
			bulk_table(f, md, &v);
		if (any_fig(&v, F_RR_P50) || any_fig(&v, F_CONN_RATE))
			lat_conn_table(f, md, &v);
		if (any_fig(&v, F_RRV + RRV_RATE) || any_fig(&v, F_RRV + 3 * RRV_NFIG + RRV_RATE))
			rr_table(f, md, &v);
		if (any_fig(&v, F_REDIS_GET) || any_fig(&v, F_PG_TPS))
			real_table(f, md, &v);
		if (o->nworkers > 1)
			scaling_table(f, md, &v);
	}
}

/* ---- conclusions ---------------------------------------------------------- */

/* "1.80x haproxy's Gbit/s" or "Gbit/s within noise of haproxy's (1.02x)":
 * within noise when the min-max ranges of the two overlap. */
static int phrase(char *buf, size_t len, const struct case_run *s, const struct case_run *r, int f,
		  const char *what, int its)
{
	double x = stats_ratio(s->med[f], r->med[f]);

	if (isnan(x))
		return 0;
	if (s->nrep > 1 && r->nrep > 1 && !(s->lo[f] > r->hi[f] || s->hi[f] < r->lo[f]))
		snprintf(buf, len, its ? "%s within noise (%.2fx)" : "%s within noise of the reference's (%.2fx)",
			 what, x);
	else
		snprintf(buf, len, "%.2fx %s %s", x, its ? "its" : "the reference's", what);
	return 1;
}

static void conclude(FILE *f, int md, const char *workload, const struct case_run *s,
		     const struct case_run *r, int rate, const char *rate_what, int cpu,
		     const char *cpu_what)
{
	char a[120], b[120];

	if (!phrase(a, sizeof(a), s, r, rate, rate_what, 0))
		return;
	/* the reference's name reads better than "the reference's" */
	char *p = strstr(a, "the reference's");
	char named[200];
	if (p)
		snprintf(named, sizeof(named), "%.*s%s's%s", (int)(p - a), a, r->label,
			 p + strlen("the reference's"));
	else
		snprintf(named, sizeof(named), "%s", a);
	if (cpu >= 0 && phrase(b, sizeof(b), s, r, cpu, cpu_what, 1))
		fprintf(f, "%s%s: %s %s, %s\n", md ? "- " : "  ", workload, s->label, named, b);
	else
		fprintf(f, "%s%s: %s %s\n", md ? "- " : "  ", workload, s->label, named);
}

static const char *subject_of(const struct case_run *runs, int n, const struct bench_opts *o)
{
	if (o->subject)
		return o->subject;
	for (int i = 0; i < n; i++)
		if (!runs[i].skip && !strcmp(runs[i].c->name, "auto"))
			return "auto";
	for (int i = 0; i < n; i++)
		if (!runs[i].skip && runs[i].c->kind == PX_SPLICER && !runs[i].c->of)
			return runs[i].c->name;
	return NULL;
}

/* The conclusions of s against r on one link, a line per workload. */
static void conclude_link(FILE *f, int md, const struct case_run *s, const struct case_run *r,
			  const struct case_run *d, const struct bench_link *lk,
			  const struct bench_opts *o)
{
	const char *ln = lk->mtu ? lk->name : NULL;
	char name[120];

	snprintf(name, sizeof(name), "%s%sbulk, 1 stream", ln ? ln : "", ln ? " " : "");
	conclude(f, md, name, s, r, F_B1_GBPS, "throughput", F_B1_CPU, "CPU per GB");
	snprintf(name, sizeof(name), "%s%sbulk, 4 streams", ln ? ln : "", ln ? " " : "");
	conclude(f, md, name, s, r, F_B4_GBPS, "throughput", F_B4_CPU, "CPU per GB");
	double x = added_ratio(s, r, d);
	if (!isnan(x))
		fprintf(f, "%s64 B ping-pong: %s adds %.2fx %s's p50 latency\n", md ? "- " : "  ",
			s->label, x, r->label);
	for (int k = 0; k < RR_VARIANTS; k++) {
		int b = F_RRV + RRV_NFIG * k;
		snprintf(name, sizeof(name), "rr %u conns, %u B, depth %u", o->conns, rr_size[k],
			 rr_depth[k]);
		conclude(f, md, name, s, r, b + RRV_RATE, "requests/s", b + RRV_MCPU,
			 "machine CPU per request");
	}
	snprintf(name, sizeof(name), "short connections, %u at a time", o->conns);
	conclude(f, md, name, s, r, F_CONN_RATE, "connections/s", F_CONN_CPU_US,
		 "proxy CPU per connection");
	conclude(f, md, "redis-benchmark GET", s, r, F_REDIS_GET, "requests/s", F_REDIS_CPU,
		 "proxy CPU per request");
	conclude(f, md, "pgbench -S", s, r, F_PG_TPS, "transactions/s", F_PG_CPU,
		 "proxy CPU per transaction");
}

void bench_conclusions(FILE *f, int md, const struct case_run *runs, int n,
		       const struct bench_link *links, int nlinks, const struct bench_opts *o)
{
	const char *subj = subject_of(runs, n, o);
	unsigned w = o->workers[0];

	if (subj && o->ref && strcmp(subj, o->ref)) {
		fprintf(f, md ? "\n### Conclusions: %s against %s\n\n" : "\nConclusions: %s against %s "
			"(medians; \"within noise\": the min-max ranges overlap)\n", subj, o->ref);
		for (int l = 0; l < nlinks; l++) {
			const struct case_run *s = bench_find_run(runs, n, &links[l], subj, w);
			const struct case_run *r = bench_find_run(runs, n, &links[l], o->ref, w);
			if (s && r)
				conclude_link(f, md, s, r, bench_find_run(runs, n, &links[l], "direct", 0),
					      &links[l], o);
		}
	}
	/* this build against each baseline: every case that has a twin */
	for (int b = 0; b < o->nbase; b++) {
		int head = 0;
		for (int i = 0; i < n; i++) {
			const struct case_run *s = &runs[i], *t;
			if (s->skip || s->c->of || s->workers != w ||
			    !(t = bench_find_twin(runs, n, s, o->base[b].name)))
				continue;
			if (!head++)
				fprintf(f, md ? "\n### Conclusions: this build against the baseline %s\n\n"
					      : "\nConclusions: this build against the baseline %s (each case "
						"against its twin CASE@%s; medians; \"within noise\": the "
						"min-max ranges overlap)\n", o->base[b].name, o->base[b].name);
			conclude_link(f, md, s, t, bench_find_run(runs, n, s->link, "direct", 0), s->link, o);
		}
		if (!head && n) /* (only the tls rows ran: theirs say it) */
			fprintf(f, md ? "\n### Conclusions: this build against the baseline %s\n\n- no case "
				      "ran with it (skipped: see the tables)\n"
				      : "\nConclusions: this build against the baseline %s: no case ran with "
					"it (skipped: see the tables)\n", o->base[b].name);
	}
}

/* ---- the goals -------------------------------------------------------------- */

/* The best (highest median throughput) haproxy mode on a link for figure f. */
static const struct case_run *best_haproxy(const struct case_run *runs, int n,
					   const struct bench_link *l, unsigned w, int f)
{
	const struct case_run *best = NULL;

	for (int i = 0; i < n; i++) {
		const struct case_run *r = &runs[i];
		if (r->link == l && !r->skip && r->c->kind == PX_HAPROXY && r->workers == w &&
		    !isnan(r->med[f]) && (!best || r->med[f] > best->med[f]))
			best = r;
	}
	return best;
}

/* One goal, as measured for one run. */
struct goal {
	char goal[200], m[200];
	int met;                /* 1 met, 0 not met, -1 not measured */
};

#define MAX_GOALS (2 + RR_VARIANTS + 4 + 3)

static void goal_set(struct goal *g, const char *m, int met)
{
	g->met = met;
	snprintf(g->m, sizeof(g->m), "%s", met < 0 && strstr(m, "nan") ? "-" : m);
}

/* The goals of doc/performance.md for run s on link lk (its own case's
 * two-worker run for the scaling goal); returns how many are in g. */
static int goals_of(struct goal *g, const struct case_run *runs, int n, const struct bench_link *lk,
		    const struct case_run *s, const struct bench_opts *o)
{
	const struct case_run *h = bench_find_run(runs, n, lk, "haproxy", s->workers);
	const struct case_run *d = bench_find_run(runs, n, lk, "direct", 0);
	char m[200];
	int k = 0;

	for (int st = 0; st < 2; st++, k++) {
		int fg = st ? F_B4_GBPS : F_B1_GBPS, c = st ? F_B4_CPU : F_B1_CPU;
		const struct case_run *b = best_haproxy(runs, n, lk, s->workers, fg);
		double xg = b ? stats_ratio(s->med[fg], b->med[fg]) : NAN;
		double xc = b ? stats_ratio(s->med[c], b->med[c]) : NAN;
		snprintf(g[k].goal, sizeof(g[k].goal), "%s, bulk %d stream%s: >= 1.25x the throughput of "
			 "HAProxy's best mode at <= 0.5x its CPU per GB", lk->name, st ? 4 : 1,
			 st ? "s" : "");
		snprintf(m, sizeof(m), "%.2fx / %.2fx (best: %s)", xg, xc, b ? b->label : "-");
		goal_set(&g[k], m, isnan(xg) || isnan(xc) ? -1 : xg >= 1.25 && xc <= 0.5);
	}
	if (s->bulk_only)
		return k;
	for (int v = 0; v < RR_VARIANTS; v++, k++) {
		int b = F_RRV + RRV_NFIG * v;
		double xr = ratio(s, h, b + RRV_RATE), xm = ratio(s, h, b + RRV_MCPU);
		snprintf(g[k].goal, sizeof(g[k].goal), "rr %u conns, %u B, depth %u: >= 1.25x requests/s "
			 "at <= 0.8x the machine's CPU per request", o->conns, rr_size[v], rr_depth[v]);
		snprintf(m, sizeof(m), "%.2fx / %.2fx", xr, xm);
		goal_set(&g[k], m, isnan(xr) || isnan(xm) ? -1 : xr >= 1.25 && xm <= 0.8);
	}
	double xc = ratio(s, h, F_CONN_RATE), xp = ratio(s, h, F_CONN_CPU_US);
	snprintf(g[k].goal, sizeof(g[k].goal), "short connections (%u at a time): >= 1.25x "
		 "connections/s at <= 0.7x the proxy CPU per connection", o->conns);
	snprintf(m, sizeof(m), "%.2fx / %.2fx", xc, xp);
	goal_set(&g[k], m, isnan(xc) || isnan(xp) ? -1 : xc >= 1.25 && xp <= 0.7);
	k++;
	/* the real clients (--real): each figure 1.3x HAProxy's */
	static const struct { int f; const char *what; } real[] = {
		{ F_REDIS_SET, "redis-benchmark SET: >= 1.3x requests/s" },
		{ F_REDIS_GET, "redis-benchmark GET: >= 1.3x requests/s" },
		{ F_PG_TPS, "pgbench -S: >= 1.3x transactions/s" },
	};
	for (unsigned i = 0; i < sizeof(real) / sizeof(real[0]); i++, k++) {
		double x = ratio(s, h, real[i].f);
		snprintf(g[k].goal, sizeof(g[k].goal), "%s", real[i].what);
		snprintf(m, sizeof(m), isnan(x) ? "(run --real)" : "%.2fx", x);
		goal_set(&g[k], m, isnan(x) ? -1 : x >= 1.3);
	}
	double xl = added_ratio(s, h, d), xl99 = added_ratio_at(s, h, d, F_RR_P99);
	snprintf(g[k].goal, sizeof(g[k].goal), "one connection, 64 B ping-pong: added p50 <= 0.6x "
		 "HAProxy's, added p99 <= 0.8x");
	snprintf(m, sizeof(m), "%.2fx / %.2fx", xl, xl99);
	goal_set(&g[k], m, isnan(xl) || isnan(xl99) ? -1 : xl <= 0.6 && xl99 <= 0.8);
	k++;
	/* two workers: every workload at least as fast as with one, or within
	 * noise of it */
	const struct case_run *s2 = NULL;
	for (int w = 1; w < o->nworkers && !s2; w++)
		if (o->workers[w] == 2 && s->workers == 1)
			s2 = bench_find_run(runs, n, lk, s->c->name, 2);
	double worst = NAN;
	int met = s2 ? 1 : -1;
	for (int v = 0; s2 && v < NSCALED; v++) {
		int fg = scaled[v].fig;
		double x = stats_ratio(s2->med[fg], s->med[fg]);
		if (isnan(x))
			continue;
		if (isnan(worst) || x < worst)
			worst = x;
		if (x < 1 && s2->hi[fg] < s->lo[fg])
			met = 0;
	}
	snprintf(g[k].goal, sizeof(g[k].goal), "two workers on two CPUs: no workload slower than with one");
	snprintf(m, sizeof(m), !s2 ? "(run --workers 1,2)"
			   : met == 1 && worst < 1 ? "slowest workload: %.2fx of one worker's, "
						     "within noise (the ranges overlap)"
						   : "slowest workload: %.2fx of one worker's",
		 worst);
	goal_set(&g[k], m, met);
	return k + 1;
}

static const char *met_word(int met)
{
	return met < 0 ? "not measured" : met ? "met" : "not met";
}

void bench_goals(FILE *f, const struct case_run *runs, int n, const struct bench_link *links,
		 int nlinks, const struct bench_opts *o)
{
	const char *subj = subject_of(runs, n, o);
	struct goal g[MAX_GOALS], t[MAX_BASELINES][MAX_GOALS];

	if (!subj)
		return;
	fprintf(f, "\n## Goals: %s against HAProxy, same run\n\n| goal | measured | |", subj);
	for (int b = 0; b < o->nbase; b++)
		fprintf(f, " baseline %s |", o->base[b].name);
	fprintf(f, "\n| --- | --- | --- |");
	for (int b = 0; b < o->nbase; b++)
		fprintf(f, " --- |");
	fprintf(f, "\n");
	for (int l = 0; l < nlinks; l++) {
		const struct bench_link *lk = &links[l];
		const struct case_run *s = bench_find_run(runs, n, lk, subj, o->workers[0]);
		int ng, nt[MAX_BASELINES];
		if (!s || (lk->mtu && lk->mtu != 1500))
			continue;
		ng = goals_of(g, runs, n, lk, s, o);
		for (int b = 0; b < o->nbase; b++) {
			const struct case_run *tw = bench_find_twin(runs, n, s, o->base[b].name);
			nt[b] = tw ? goals_of(t[b], runs, n, lk, tw, o) : 0;
		}
		for (int k = 0; k < ng; k++) {
			fprintf(f, "| %s | %s | %s |", g[k].goal, g[k].m, met_word(g[k].met));
			for (int b = 0; b < o->nbase; b++)
				if (k < nt[b])
					fprintf(f, " %s (%s) |", t[b][k].m, met_word(t[b][k].met));
				else
					fprintf(f, " - |");
			fprintf(f, "\n");
		}
	}
}
