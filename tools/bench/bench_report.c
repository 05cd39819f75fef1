/* SPDX-License-Identifier: MIT */
/* bench_report: the tables and conclusions of `splicer bench`, as text for
 * the terminal or markdown for --doc (both from bench_table), and the
 * goals (doc/performance.md) with their ratios.
 *
 * Every ratio column is named after the workload group above it and the
 * case it divides by ("x haproxy"); all figures are medians of the
 * repetitions, [min-max] where a range is shown. */
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
static double added_ratio(const struct case_run *r, const struct case_run *ref,
			  const struct case_run *direct)
{
	double a, b;

	if (!ref || !direct)
		return NAN;
	a = r->med[F_RR_P50] - direct->med[F_RR_P50];
	b = ref->med[F_RR_P50] - direct->med[F_RR_P50];
	return a > 0 && b > 0 ? a / b : NAN;
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

static int any_fig(const struct view *v, int f)
{
	for (int i = 0; i < v->n; i++)
		if (v->runs[i].link == v->l && !v->runs[i].skip && !isnan(v->runs[i].med[f]))
			return 1;
	return 0;
}

static void bulk_table(FILE *f, int md, const struct view *v)
{
	struct btable *t = btable_new("Bulk uploads (Gbit/s; CPU-s/GB: the proxy's CPU seconds per GB)");
	const char *grp[2] = { "1 stream", "4 streams" };

	btable_col(t, NULL, "case");
	for (int s = 0; s < 2; s++) {
		btable_col(t, grp[s], "Gbit/s [min-max]");
		btable_col(t, grp[s], v->x);
		btable_col(t, grp[s], "/direct");
		btable_col(t, grp[s], "CPU-s/GB");
		btable_col(t, grp[s], v->x);
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
			set_range(t, row, col++, "%.2f", r, g);
			setv(t, row, col++, "%.2fx", ratio(r, ref, g));
			setv(t, row, col++, "%.2f", ratio(r, direct, g));
			setv(t, row, col++, "%.3f", r->med[c]);
			setv(t, row, col++, "%.2fx", ratio(r, ref, c));
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
	btable_col(t, cgrp, "conn/s [min-max]");
	btable_col(t, cgrp, v->x);
	btable_col(t, cgrp, "proxy CPU-us");
	btable_col(t, cgrp, v->x);
	btable_col(t, cgrp, "machine CPU-us");
	btable_col(t, cgrp, v->x);
	btable_col(t, cgrp, "load CPU-us");
	btable_col(t, NULL, "peak MiB");
	for (int i = 0; i < v->n; i++) {
		const struct case_run *r = &v->runs[i], *ref = ref_of(v, r);
		const struct case_run *direct = bench_find_run(v->runs, v->n, v->l, "direct", 0);
		int row;
		if (r->link != v->l || r->skip)
			continue;
		row = btable_row(t);
		btable_set(t, row, 0, "%s", r->label);
		setv(t, row, 1, "%.1f", r->med[F_RR_P50]);
		setv(t, row, 2, "%.1f", r->med[F_RR_P99]);
		setv(t, row, 3, "%.1f", r->med[F_RR_P999]);
		setv(t, row, 4, "%+.1f", direct ? r->med[F_RR_P50] - direct->med[F_RR_P50] : NAN);
		setv(t, row, 5, "%.2fx", added_ratio(r, ref, direct));
		set_range(t, row, 6, "%.0f", r, F_CONN_RATE);
		setv(t, row, 7, "%.2fx", ratio(r, ref, F_CONN_RATE));
		setv(t, row, 8, "%.1f", r->med[F_CONN_CPU_US]);
		setv(t, row, 9, "%.2fx", ratio(r, ref, F_CONN_CPU_US));
		setv(t, row, 10, "%.1f", r->med[F_CONN_MCPU]);
		setv(t, row, 11, "%.2fx", ratio(r, ref, F_CONN_MCPU));
		setv(t, row, 12, "%.1f", r->med[F_CONN_LCPU]);
		setv(t, row, 13, "%.1f", r->med[F_RSS_MIB]);
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
	btable_col(t, "proxy CPU", "us/req");
	btable_col(t, "proxy CPU", v->x);
	btable_col(t, "machine CPU", "us/req");
	btable_col(t, "machine CPU", v->x);
	btable_col(t, "load CPU", "us/req");
	for (int k = 0; k < RR_VARIANTS; k++)
		for (int i = 0; i < v->n; i++) {
			const struct case_run *r = &v->runs[i], *ref = ref_of(v, r);
			int b = F_RRV + RRV_NFIG * k, row;
			if (r->link != v->l || r->skip || isnan(r->med[b + RRV_RATE]))
				continue;
			row = btable_row(t);
			btable_set(t, row, 0, "%u B, depth %u", rr_size[k], rr_depth[k]);
			btable_set(t, row, 1, "%s", r->label);
			set_range(t, row, 2, "%.0f", r, b + RRV_RATE);
			setv(t, row, 3, "%.2fx", ratio(r, ref, b + RRV_RATE));
			setv(t, row, 4, "%.2f", r->med[b + RRV_PCPU]);
			setv(t, row, 5, "%.2fx", ratio(r, ref, b + RRV_PCPU));
			setv(t, row, 6, "%.2f", r->med[b + RRV_MCPU]);
			setv(t, row, 7, "%.2fx", ratio(r, ref, b + RRV_MCPU));
			setv(t, row, 8, "%.2f", r->med[b + RRV_LCPU]);
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
	btable_col(t, rgrp, "GET req/s");
	btable_col(t, rgrp, v->x);
	btable_col(t, rgrp, "proxy CPU-us/req");
	btable_col(t, "pgbench -S", "tps [min-max]");
	btable_col(t, "pgbench -S", v->x);
	btable_col(t, "pgbench -S", "proxy CPU-us/txn");
	btable_col(t, "pgbench -S", v->x);
	for (int i = 0; i < v->n; i++) {
		const struct case_run *r = &v->runs[i], *ref = ref_of(v, r);
		int row;
		if (r->link != v->l || r->skip)
			continue;
		row = btable_row(t);
		btable_set(t, row, 0, "%s", r->label);
		set_range(t, row, 1, "%.0f", r, F_REDIS_SET);
		setv(t, row, 2, "%.2fx", ratio(r, ref, F_REDIS_SET));
		set_range(t, row, 3, "%.0f", r, F_REDIS_GET);
		setv(t, row, 4, "%.2fx", ratio(r, ref, F_REDIS_GET));
		setv(t, row, 5, "%.2f", r->med[F_REDIS_CPU]);
		set_range(t, row, 6, "%.0f", r, F_PG_TPS);
		setv(t, row, 7, "%.2fx", ratio(r, ref, F_PG_TPS));
		setv(t, row, 8, "%.1f", r->med[F_PG_CPU]);
		setv(t, row, 9, "%.2fx", ratio(r, ref, F_PG_CPU));
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
		if (!runs[i].skip && runs[i].c->kind == PX_SPLICER)
			return runs[i].c->name;
	return NULL;
}

void bench_conclusions(FILE *f, int md, const struct case_run *runs, int n,
		       const struct bench_link *links, int nlinks, const struct bench_opts *o)
{
	const char *subj = subject_of(runs, n, o);
	unsigned w = o->workers[0];
	char name[120];

	if (!subj || !o->ref || !strcmp(subj, o->ref))
		return;
	fprintf(f, md ? "\n### Conclusions: %s against %s\n\n" : "\nConclusions: %s against %s "
		"(medians; \"within noise\": the min-max ranges overlap)\n", subj, o->ref);
	for (int l = 0; l < nlinks; l++) {
		const struct case_run *s = bench_find_run(runs, n, &links[l], subj, w);
		const struct case_run *r = bench_find_run(runs, n, &links[l], o->ref, w);
		const struct case_run *d = bench_find_run(runs, n, &links[l], "direct", 0);
		const char *ln = links[l].mtu ? links[l].name : NULL;
		if (!s || !r)
			continue;
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
		conclude(f, md, "redis-benchmark GET", s, r, F_REDIS_GET, "requests/s", -1, NULL);
		conclude(f, md, "pgbench -S", s, r, F_PG_TPS, "transactions/s", F_PG_CPU,
			 "proxy CPU per transaction");
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

static void goal_row(FILE *f, const char *goal, const char *measured, int met)
{
	fprintf(f, "| %s | %s | %s |\n", goal, met < 0 && strstr(measured, "nan") ? "-" : measured,
		met < 0 ? "not measured" : met ? "met" : "not met");
}

void bench_goals(FILE *f, const struct case_run *runs, int n, const struct bench_link *links,
		 int nlinks, const struct bench_opts *o)
{
	const char *subj = subject_of(runs, n, o);
	unsigned w = o->workers[0];
	char goal[200], m[200];

	if (!subj)
		return;
	fprintf(f, "\n## Goals: %s against HAProxy, same run\n\n"
		   "| goal | measured | |\n| --- | --- | --- |\n", subj);
	for (int l = 0; l < nlinks; l++) {
		const struct bench_link *lk = &links[l];
		const struct case_run *s = bench_find_run(runs, n, lk, subj, w);
		const struct case_run *h = bench_find_run(runs, n, lk, "haproxy", w);
		const struct case_run *d = bench_find_run(runs, n, lk, "direct", 0);
		if (!s)
			continue;
		if (lk->mtu && lk->mtu != 1500)
			continue;
		for (int st = 0; st < 2; st++) {
			int g = st ? F_B4_GBPS : F_B1_GBPS, c = st ? F_B4_CPU : F_B1_CPU;
			const struct case_run *b = best_haproxy(runs, n, lk, w, g);
			double xg = b ? stats_ratio(s->med[g], b->med[g]) : NAN;
			double xc = b ? stats_ratio(s->med[c], b->med[c]) : NAN;
			snprintf(goal, sizeof(goal), "%s, bulk %d stream%s: >= 1.25x the throughput of "
				 "HAProxy's best mode at <= 0.5x its CPU per GB", lk->name, st ? 4 : 1,
				 st ? "s" : "");
			snprintf(m, sizeof(m), "%.2fx / %.2fx (best: %s)", xg, xc, b ? b->label : "-");
			goal_row(f, goal, m, isnan(xg) || isnan(xc) ? -1 : xg >= 1.25 && xc <= 0.5);
		}
		if (s->bulk_only)
			continue;
		for (int k = 0; k < RR_VARIANTS; k++) {
			int b = F_RRV + RRV_NFIG * k;
			double xr = ratio(s, h, b + RRV_RATE), xm = ratio(s, h, b + RRV_MCPU);
			snprintf(goal, sizeof(goal), "rr %u conns, %u B, depth %u: >= 1.15x requests/s at "
				 "<= 0.85x the machine's CPU per request", o->conns, rr_size[k], rr_depth[k]);
			snprintf(m, sizeof(m), "%.2fx / %.2fx", xr, xm);
			goal_row(f, goal, m, isnan(xr) || isnan(xm) ? -1 : xr >= 1.15 && xm <= 0.85);
		}
		double xc = ratio(s, h, F_CONN_RATE), xp = ratio(s, h, F_CONN_CPU_US);
		snprintf(goal, sizeof(goal), "short connections (%u at a time): >= 1.25x connections/s at "
			 "<= 0.7x the proxy CPU per connection", o->conns);
		snprintf(m, sizeof(m), "%.2fx / %.2fx", xc, xp);
		goal_row(f, goal, m, isnan(xc) || isnan(xp) ? -1 : xc >= 1.25 && xp <= 0.7);
		double xl = added_ratio(s, h, d);
		snprintf(m, sizeof(m), "%.2fx", xl);
		goal_row(f, "one connection, 64 B ping-pong: added p50 <= 0.6x HAProxy's", m,
			 isnan(xl) ? -1 : xl <= 0.6);
		/* two workers: every workload at least as fast as with one, or
		 * within noise of it */
		const struct case_run *s2 = NULL;
		for (int k = 1; k < o->nworkers && !s2; k++)
			if (o->workers[k] == 2 && w == 1)
				s2 = bench_find_run(runs, n, lk, subj, 2);
		double worst = NAN;
		int met = s2 ? 1 : -1;
		for (int k = 0; s2 && k < NSCALED; k++) {
			int fg = scaled[k].fig;
			double x = stats_ratio(s2->med[fg], s->med[fg]);
			if (isnan(x))
				continue;
			if (isnan(worst) || x < worst)
				worst = x;
			if (x < 1 && s2->hi[fg] < s->lo[fg])
				met = 0;
		}
		snprintf(m, sizeof(m), !s2 ? "(run --workers 1,2)"
				       : met == 1 && worst < 1 ? "slowest workload: %.2fx of one worker's, "
								 "within noise (the ranges overlap)"
							       : "slowest workload: %.2fx of one worker's",
			 worst);
		goal_row(f, "two workers on two CPUs: no workload slower than with one", m, met);
	}
}
