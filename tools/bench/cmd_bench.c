/* cmd_bench: `splicer bench`, the project's measurement of itself and of its
 * peers, in one run on the machine at hand.
 *
 *   splicer bench [--quick] [--cases LIST] [--peers LIST] [--reps N]
 *                 [--seconds S] [--workers N] [--ref CASE] [--files SIZE|off]
 *                 [--json FILE] [--chart FILE.png|.svg]
 *
 * Each case (a proxy and its settings, or `direct`, the ceiling) runs four
 * workloads against the built-in sink: one bulk stream, four bulk streams,
 * 64-byte request/response, and short connections. Cases are interleaved
 * (A B C A B C ...) so drift on a shared machine spreads over all of them;
 * every figure is the median of the repetitions, with min-max, and ratios are
 * taken against `direct` and against a reference case of the same run.
 * Then the file rows (bench_file.c): `splicer recv` / `splicer send`. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_file.h"
#include "bench_link.h"
#include "bench_proxy.h"
#include "bench_traffic.h"
#include "cmd.h"
#include "json.h"
#include "stats.h"
#include "units.h"

#define MAX_REPS  20
#define RR_MAX_N  2000000
#define MAX_LINKS 8
/* Short-connection clients. 1, 2, 4 and 8 were measured: from 2 on the two
 * CPUs are saturated (client, sink and proxy together) and the rate stays
 * flat, so 2 measures capacity without piling up queueing delay. */
#define CONN_THREADS 2

/* The cases run over veth links unless --cases names others: bulk is what
 * segment sizes change, and these are the rows the seeds argue about. */
#define VETH_CASES "direct,copy,splice-64k,splice,splice-1m,haproxy,haproxy-splice"

static const struct bench_case all_cases[] = {
	{ "direct", PX_DIRECT, { NULL }, "no proxy: client to sink, the ceiling" },
	{ "copy", PX_SPLICER, { "--engine", "copy", NULL }, "splicer, recv/send through 64k buffers" },
	{ "splice-64k", PX_SPLICER, { "--engine", "splice", "--pipe-size", "64k", NULL },
	  "splicer, splice with the kernel's default 64k pipes" },
	{ "splice", PX_SPLICER, { "--engine", "splice", NULL }, "splicer, splice with its default 512k pipes" },
	{ "splice-256k", PX_SPLICER, { "--engine", "splice", "--pipe-size", "256k", NULL },
	  "splicer, splice with 256k pipes" },
	{ "splice-1m", PX_SPLICER, { "--engine", "splice", "--pipe-size", "1m", NULL },
	  "splicer, splice with 1m pipes (the seeds' naive size)" },
	{ "splice-lowat64k", PX_SPLICER, { "--engine", "splice", "--lowat", "64k", NULL },
	  "splicer, splice + SO_RCVLOWAT 64k" },
	{ "splice-lowat256k", PX_SPLICER, { "--engine", "splice", "--lowat", "256k", NULL },
	  "splicer, splice + SO_RCVLOWAT 256k" },
	{ "auto", PX_SPLICER, { "--engine", "auto", NULL }, "splicer, its default: copy, then splice for streams" },
	{ "sockmap", PX_SPLICER, { "--engine", "sockmap", NULL },
	  "splicer, experimental: eBPF sockmap redirects in the kernel (needs CAP_BPF)" },
	{ "uring", PX_SPLICER, { "--engine", "uring", NULL },
	  "splicer, io_uring multishot recv into provided buffers + sendmsg (experimental)" },
	{ "auto-busypoll", PX_SPLICER, { "--engine", "auto", "--busy-poll", "50", NULL },
	  "splicer auto, polling 50 us after each event before sleeping" },
	{ "haproxy", PX_HAPROXY, { NULL }, "HAProxy mode tcp, its defaults (no splicing)" },
	{ "haproxy-splice-auto", PX_HAPROXY, { "option splice-auto", NULL }, "HAProxy, option splice-auto" },
	{ "haproxy-splice", PX_HAPROXY, { "option splice-request", "option splice-response", NULL },
	  "HAProxy, splice forced both ways" },
	{ "haproxy-busypoll", PX_HAPROXY, { "global:busy-polling", NULL },
	  "HAProxy defaults + busy-polling (never sleeps)" },
	{ "nginx", PX_NGINX, { NULL }, "nginx stream proxy_pass" },
	{ "socat", PX_SOCAT, { NULL }, "socat TCP-LISTEN,fork (a process per connection)" },
};
#define NCASES (sizeof(all_cases) / sizeof(all_cases[0]))

/* The figures of one case in one repetition; NAN where it does not apply. */
enum fig {
	F_B1_GBPS, F_B1_CPU, F_B1_BUSY, F_B1_SYSC,
	F_B4_GBPS, F_B4_CPU, F_B4_BUSY, F_B4_SYSC,
	F_RR_P50, F_RR_P99, F_RR_P999, F_RR_RATE,
	F_CONN_RATE, F_CONN_CPU_US, F_RSS_MIB,
	NFIG
};
static const struct {
	const char *key, *unit;
	int higher_better;
} figs[NFIG] = {
	{ "bulk1_gbit_s", "Gbit/s", 1 }, { "bulk1_proxy_cpu_s_per_gb", "CPU-s/GB", 0 },
	{ "bulk1_machine_cpu_s_per_gb", "CPU-s/GB", 0 }, { "bulk1_syscalls_per_mb", "/MB", 0 },
	{ "bulk4_gbit_s", "Gbit/s", 1 }, { "bulk4_proxy_cpu_s_per_gb", "CPU-s/GB", 0 },
	{ "bulk4_machine_cpu_s_per_gb", "CPU-s/GB", 0 }, { "bulk4_syscalls_per_mb", "/MB", 0 },
	{ "rr_p50_us", "us", 0 }, { "rr_p99_us", "us", 0 }, { "rr_p999_us", "us", 0 },
	{ "rr_round_trips_s", "/s", 1 },
	{ "conn_per_s", "/s", 1 }, { "conn_proxy_cpu_us", "us", 0 }, { "peak_rss_mib", "MiB", 0 },
};

struct case_run {
	const struct bench_case *c;
	struct bench_link *link;
	struct bench_sink *sink;
	int bulk_only;                 /* veth links: the bulk workloads only */
	const char *skip;              /* why it did not run, or NULL */
	double v[MAX_REPS][NFIG];
	double med[NFIG], lo[NFIG], hi[NFIG];
	int nrep;
	char fail[400];
};

struct opts {
	int quick, reps, workers;
	double seconds;
	uint64_t files;          /* bytes per file-row run; 0: no file rows */
	const char *cases, *peers, *ref, *json, *chart, *links;
};

/* ---- syscall counting: perf's raw_syscalls tracepoint, if available ------- */

struct sysc {
	pid_t perf;
	char out[64];
};

static void sysc_start(struct sysc *s, pid_t target)
{
	char pidarg[512];

	s->perf = 0;
	if (target <= 0 || access("/usr/bin/perf", X_OK))
		return;
	snprintf(s->out, sizeof(s->out), "/tmp/splicer-bench-perf-%d.txt", (int)getpid());
	/* the workers nginx forked before perf attaches are not inherited */
	bench_tree_pids(target, pidarg, sizeof(pidarg));
	s->perf = fork();
	if (s->perf == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (!freopen("/dev/null", "w", stderr) || !freopen("/dev/null", "w", stdout))
			_exit(127);
		execl("/usr/bin/perf", "perf", "stat", "-x,", "-o", s->out, "-e",
		      "raw_syscalls:sys_enter", "-p", pidarg, (char *)NULL);
		_exit(127);
	}
	usleep(150000); /* perf attaches asynchronously */
}

static double sysc_stop(struct sysc *s)
{
	char line[256];
	double n = NAN;
	FILE *f;

	if (s->perf <= 0)
		return NAN;
	kill(s->perf, SIGINT);
	waitpid(s->perf, NULL, 0);
	if ((f = fopen(s->out, "re"))) {
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "raw_syscalls:sys_enter") && line[0] >= '0' && line[0] <= '9')
				n = strtod(line, NULL);
		fclose(f);
	}
	unlink(s->out);
	return n;
}

/* ---- one case, one repetition -------------------------------------------- */

static void progress(const struct opts *o, int rep, const struct case_run *cr, const char *what,
		     double eta)
{
	fprintf(stderr, "\r\033[K[rep %d/%d] %-18s %-20s %-6s ETA %dm%02ds", rep + 1, o->reps,
		cr->link->name, cr->c->name, what, (int)eta / 60, (int)eta % 60);
	fflush(stderr);
}

static int run_bulk(const struct bench_proxy *p, const struct bench_link *l, unsigned streams,
		    const struct opts *o, double *out, char *fail, size_t faillen)
{
	struct bulk_result r;
	struct sysc sc;
	double c0, b0, c1, b1, calls, gb;

	sysc_start(&sc, p->pid);
	c0 = bench_tree_cpu(p->pid);
	b0 = bench_machine_busy();
	bench_link_enter(l, LINK_CLIENT); /* the streams' threads inherit it */
	bench_bulk((const struct sockaddr *)&p->ss, p->len, streams, o->seconds,
		   0x5eed0000ULL + streams, &r);
	bench_link_leave(l);
	c1 = bench_tree_cpu(p->pid);
	b1 = bench_machine_busy();
	calls = sysc_stop(&sc);
	if (!r.ok || !r.bytes || r.seconds <= 0) {
		snprintf(fail, faillen, "bulk x%u: %s", streams, r.why[0] ? r.why : "no bytes");
		return -1;
	}
	gb = (double)r.bytes / 1e9;
	out[0] = (double)r.bytes * 8 / r.seconds / 1e9;
	out[1] = p->pid ? (c1 - c0) / gb : NAN;
	out[2] = (b1 - b0) / gb;
	out[3] = p->pid ? calls / ((double)r.bytes / 1e6) : NAN;
	return 0;
}

static int run_case(struct case_run *cr, const struct opts *o, int rep, double eta)
{
	struct bench_proxy p;
	struct rr_result rr;
	struct conn_result cn;
	double *v = cr->v[rep], c0;
	char err[300];
	int r = -1;

	for (int i = 0; i < NFIG; i++)
		v[i] = NAN;
	progress(o, rep, cr, "start", eta);
	bench_link_enter(cr->link, LINK_PROXY); /* the proxy is forked in there */
	r = bench_proxy_start(&p, cr->c, bench_sink_addr(cr->sink), cr->link->host[LINK_PROXY],
			      (unsigned)o->workers, err, sizeof(err));
	bench_link_leave(cr->link);
	if (r) {
		snprintf(cr->fail, sizeof(cr->fail), "%s", err);
		return -1;
	}
	r = -1;
	progress(o, rep, cr, "bulk1", eta);
	if (run_bulk(&p, cr->link, 1, o, &v[F_B1_GBPS], cr->fail, sizeof(cr->fail)))
		goto out;
	progress(o, rep, cr, "bulk4", eta);
	if (run_bulk(&p, cr->link, 4, o, &v[F_B4_GBPS], cr->fail, sizeof(cr->fail)))
		goto out;
	v[F_RSS_MIB] = p.pid ? (double)bench_tree_peak_rss_kib(p.pid) / 1024 : NAN;
	if (cr->bulk_only) {
		r = 0;
		goto out;
	}
	progress(o, rep, cr, "rr", eta);
	bench_link_enter(cr->link, LINK_CLIENT);
	r = bench_rr((const struct sockaddr *)&p.ss, p.len, o->seconds, RR_MAX_N, &rr);
	bench_link_leave(cr->link);
	if (r) {
		r = -1;
		snprintf(cr->fail, sizeof(cr->fail), "request/response: %s", rr.why);
		free(rr.rtt_us);
		goto out;
	}
	stats_sort(rr.rtt_us, rr.n);
	v[F_RR_P50] = stats_percentile_sorted(rr.rtt_us, rr.n, 50);
	v[F_RR_P99] = stats_percentile_sorted(rr.rtt_us, rr.n, 99);
	v[F_RR_P999] = stats_percentile_sorted(rr.rtt_us, rr.n, 99.9);
	v[F_RR_RATE] = (double)rr.n / o->seconds;
	free(rr.rtt_us);
	progress(o, rep, cr, "conn", eta);
	c0 = bench_tree_cpu(p.pid);
	bench_link_enter(cr->link, LINK_CLIENT);
	r = bench_conns((const struct sockaddr *)&p.ss, p.len, CONN_THREADS, o->seconds, &cn);
	bench_link_leave(cr->link);
	if (r) {
		r = -1;
		snprintf(cr->fail, sizeof(cr->fail), "short connections: %llu ok, %llu failed: %s",
			 (unsigned long long)cn.conns, (unsigned long long)cn.failed, cn.why);
		goto out;
	}
	v[F_CONN_RATE] = (double)cn.conns / cn.seconds;
	v[F_CONN_CPU_US] = p.pid ? (bench_tree_cpu(p.pid) - c0) * 1e6 / (double)cn.conns : NAN;
	v[F_RSS_MIB] = p.pid ? (double)bench_tree_peak_rss_kib(p.pid) / 1024 : NAN;
	r = 0;
out:
	bench_proxy_stop(&p);
	return r;
}

/* ---- aggregation and output ---------------------------------------------- */

static void aggregate(struct case_run *cr)
{
	double col[MAX_REPS];

	for (int f = 0; f < NFIG; f++) {
		int n = 0;
		for (int r = 0; r < cr->nrep; r++)
			if (!isnan(cr->v[r][f]))
				col[n++] = cr->v[r][f];
		cr->med[f] = n ? stats_median(col, (size_t)n) : NAN;
		cr->lo[f] = n ? stats_min(col, (size_t)n) : NAN;
		cr->hi[f] = n ? stats_max(col, (size_t)n) : NAN;
	}
}

static void cell(char *buf, size_t len, double v, const char *fmt)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, fmt, v);
}

/* The run of a case on a link, if it ran. */
static const struct case_run *find_run(const struct case_run *runs, int n,
				       const struct bench_link *l, const char *name)
{
	for (int i = 0; i < n; i++)
		if (runs[i].link == l && !runs[i].skip && name && !strcmp(runs[i].c->name, name))
			return &runs[i];
	return NULL;
}

/* r's added p50 latency (over direct's) as a multiple of ref's; undefined
 * ("-") when either is not above direct's, which noise can make it. */
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

/* The tables of one link; x columns are ratios to ref of the same link. */
static void print_link(const struct case_run *all, int nall, const struct bench_link *l,
		       const char *ref_name)
{
	const struct case_run *runs = NULL, *direct = find_run(all, nall, l, "direct");
	const struct case_run *ref = find_run(all, nall, l, ref_name);
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32];
	int n = 0, any_rr = 0;

	for (int i = 0; i < nall; i++)
		if (all[i].link == l) {
			if (!runs)
				runs = &all[i];
			n++;
			any_rr |= !all[i].skip && !isnan(all[i].med[F_RR_P50]);
		}
	if (!runs)
		return;
	printf("\n== link %s: %s\n", l->name, l->what);
	printf("\nBulk (medians of %d runs; [min-max]; x = ratio to %s)\n", runs[0].nrep,
	       ref ? ref->c->name : "-");
	printf("  %-20s %22s %6s %7s %9s %6s %22s %6s %7s %9s %6s %8s %8s\n", "case",
	       "1 stream Gbit/s", "x", "/direct", "CPU-s/GB", "x", "4 streams Gbit/s", "x", "/direct",
	       "CPU-s/GB", "x", "busy/GB", "sysc/MB");
	for (int i = 0; i < n; i++) {
		const struct case_run *r = &runs[i];
		char range1[48], range4[48];
		if (r->skip) {
			printf("  %-20s skipped: %s\n", r->c->name, r->skip);
			continue;
		}
		snprintf(range1, sizeof(range1), "%.2f [%.2f-%.2f]", r->med[F_B1_GBPS], r->lo[F_B1_GBPS],
			 r->hi[F_B1_GBPS]);
		snprintf(range4, sizeof(range4), "%.2f [%.2f-%.2f]", r->med[F_B4_GBPS], r->lo[F_B4_GBPS],
			 r->hi[F_B4_GBPS]);
		char x1[32], x4[32], d1[32], d4[32];
		cell(x1, sizeof(x1), ref ? stats_ratio(r->med[F_B1_GBPS], ref->med[F_B1_GBPS]) : NAN, "%.2fx");
		cell(d1, sizeof(d1), direct ? stats_ratio(r->med[F_B1_GBPS], direct->med[F_B1_GBPS]) : NAN,
		     "%.2f");
		cell(b, sizeof(b), r->med[F_B1_CPU], "%.3f");
		cell(c, sizeof(c), ref ? stats_ratio(r->med[F_B1_CPU], ref->med[F_B1_CPU]) : NAN, "%.2fx");
		cell(x4, sizeof(x4), ref ? stats_ratio(r->med[F_B4_GBPS], ref->med[F_B4_GBPS]) : NAN, "%.2fx");
		cell(d4, sizeof(d4), direct ? stats_ratio(r->med[F_B4_GBPS], direct->med[F_B4_GBPS]) : NAN,
		     "%.2f");
		cell(d, sizeof(d), r->med[F_B4_CPU], "%.3f");
		cell(e, sizeof(e), ref ? stats_ratio(r->med[F_B4_CPU], ref->med[F_B4_CPU]) : NAN, "%.2fx");
		cell(f, sizeof(f), r->med[F_B1_BUSY], "%.3f");
		cell(g, sizeof(g), r->med[F_B1_SYSC], "%.1f");
		printf("  %-20s %22s %6s %7s %9s %6s %22s %6s %7s %9s %6s %8s %8s\n", r->c->name,
		       isnan(r->med[F_B1_GBPS]) ? "FAILED" : range1, x1, d1, b, c,
		       isnan(r->med[F_B4_GBPS]) ? "-" : range4, x4, d4, d, e, f, g);
	}
	if (!any_rr)
		return;
	printf("\nRequest/response (64 B ping-pong) and short connections (connect, 64 B each way, close)\n");
	printf("  %-20s %9s %9s %9s %11s %6s %10s %6s %11s %6s %9s\n", "case", "p50 us", "p99 us",
	       "p99.9 us", "added p50", "x", "conn/s", "x", "CPU-us/conn", "x", "peak MiB");
	for (int i = 0; i < n; i++) {
		const struct case_run *r = &runs[i];
		char h[32], k[32], m[32];
		if (r->skip || isnan(r->med[F_RR_P50]))
			continue;
		cell(a, sizeof(a), r->med[F_RR_P50], "%.1f");
		cell(b, sizeof(b), r->med[F_RR_P99], "%.1f");
		cell(c, sizeof(c), r->med[F_RR_P999], "%.1f");
		cell(d, sizeof(d), direct ? r->med[F_RR_P50] - direct->med[F_RR_P50] : NAN, "%+.1f us");
		cell(e, sizeof(e), r->med[F_CONN_RATE], "%.0f");
		cell(f, sizeof(f), ref ? stats_ratio(r->med[F_CONN_RATE], ref->med[F_CONN_RATE]) : NAN, "%.2fx");
		cell(g, sizeof(g), r->med[F_CONN_CPU_US], "%.1f");
		cell(h, sizeof(h), ref ? stats_ratio(r->med[F_CONN_CPU_US], ref->med[F_CONN_CPU_US]) : NAN,
		     "%.2fx");
		cell(k, sizeof(k), r->med[F_RSS_MIB], "%.1f");
		/* added latency against the reference's: the figure a proxy owns */
		cell(m, sizeof(m), added_ratio(r, ref, direct), "%.2fx");
		printf("  %-20s %9s %9s %9s %11s %6s %10s %6s %11s %6s %9s\n", r->c->name, a, b, c, d, m,
		       e, f, g, h, k);
	}
}

static void print_legend(const struct case_run *runs, int n)
{
	printf("\nLegend:\n");
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int k = 0; k < i; k++)
			seen |= runs[k].c == runs[i].c;
		if (!seen)
			printf("  %-20s %s\n", runs[i].c->name, runs[i].c->what);
	}
	printf("  CPU-s/GB: the proxy's user+sys CPU (all threads and child processes) per GB delivered;\n"
	       "  busy/GB: the whole machine's busy CPU per GB (client, sink and proxy); sysc/MB: the\n"
	       "  proxy's system calls per MB (perf's raw_syscalls tracepoint); added p50: p50 minus\n"
	       "  direct's. Every byte was compared with what was sent, at the sink.\n");
}

static int write_json(const char *path, struct case_run *runs, int n, const struct opts *o,
		      const struct file_bench *fb,
		      uint64_t verified, uint64_t mism)
{
	FILE *f = fopen(path, "w");
	struct json j;
	struct utsname u;
	char when[32];
	time_t t = time(NULL);

	if (!f)
		return -1;
	uname(&u);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	json_init(&j, f);
	json_obj_begin(&j, NULL);
	json_str(&j, "tool", "splicer bench " SPLICER_VERSION);
	json_str(&j, "date", when);
	json_str(&j, "kernel", u.release);
	json_int(&j, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
	json_num(&j, "seconds_per_workload", o->seconds);
	json_int(&j, "reps", o->reps);
	json_int(&j, "workers", o->workers);
	json_str(&j, "reference", o->ref ? o->ref : "");
	json_int(&j, "verified_bytes", (long long)verified);
	json_int(&j, "mismatches", (long long)mism);
	json_arr_begin(&j, "cases");
	for (int i = 0; i < n; i++) {
		struct case_run *r = &runs[i];
		json_obj_begin(&j, NULL);
		json_str(&j, "name", r->c->name);
		json_str(&j, "link", r->link->name);
		json_str(&j, "what", r->c->what);
		if (r->skip)
			json_str(&j, "skipped", r->skip);
		if (r->fail[0])
			json_str(&j, "failed", r->fail);
		json_arr_begin(&j, "samples");
		for (int k = 0; k < r->nrep; k++) {
			json_obj_begin(&j, NULL);
			json_int(&j, "rep", k + 1);
			for (int fi = 0; fi < NFIG; fi++)
				json_num(&j, figs[fi].key, r->v[k][fi]);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		const char *agg[] = { "median", "min", "max" };
		double *vals[] = { r->med, r->lo, r->hi };
		for (int a = 0; a < 3; a++) {
			json_obj_begin(&j, agg[a]);
			for (int fi = 0; fi < NFIG; fi++)
				json_num(&j, figs[fi].key, vals[a][fi]);
			json_obj_end(&j);
		}
		json_obj_end(&j);
	}
	json_arr_end(&j);
	if (o->files)
		bench_file_json(&j, fb);
	json_obj_end(&j);
	if (json_finish(&j)) {
		int e = errno;
		fclose(f);
		errno = e;
		return -1;
	}
	return fclose(f);
}

/* Whether any case ran on link l (links are torn down before the chart). */
static int link_ran(const struct case_run *runs, int n, const struct bench_link *l)
{
	for (int i = 0; i < n; i++)
		if (runs[i].link == l && !runs[i].skip && !isnan(runs[i].med[F_B1_GBPS]))
			return 1;
	return 0;
}

/* gnuplot, from the medians: on loopback, throughput and CPU/GB bars per
 * case, latency percentiles and connection rate; when veth links ran, one
 * stream's throughput and CPU/GB per case with a bar per link. */
static int write_chart(const char *path, const struct case_run *runs, int n,
		       struct bench_link *links, int nlinks)
{
	char dat[] = "/tmp/splicer-chart-XXXXXX", ldat[] = "/tmp/splicer-chartl-XXXXXX";
	int fd = mkstemp(dat), lfd = mkstemp(ldat), svg, r, veth = 0;
	FILE *d = fd >= 0 ? fdopen(fd, "w") : NULL, *ld = lfd >= 0 ? fdopen(lfd, "w") : NULL, *g;
	size_t plen = strlen(path);

	svg = plen > 4 && !strcmp(path + plen - 4, ".svg");
	if (!d || !ld) {
		if (d)
			fclose(d);
		if (ld)
			fclose(ld);
		unlink(dat);
		unlink(ldat);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const struct case_run *c = &runs[i];
		const int cols[] = { F_B1_GBPS, F_B4_GBPS, F_B1_CPU, F_B4_CPU, F_RR_P50, F_RR_P99,
				     F_RR_P999, F_CONN_RATE };
		if (c->skip || isnan(c->med[F_B1_GBPS]) || c->link->mtu)
			continue;
		fprintf(d, "\"%s\"", c->c->name);
		for (size_t k = 0; k < sizeof(cols) / sizeof(*cols); k++)
			fprintf(d, " %g", isnan(c->med[cols[k]]) ? 0 : c->med[cols[k]]);
		fprintf(d, "\n");
	}
	/* links table: a row per case that ran on a veth link, a column pair
	 * (Gbit/s, CPU-s/GB) per link */
	for (int l = 0; l < nlinks; l++)
		veth += links[l].mtu && link_ran(runs, n, &links[l]);
	for (int i = 0; veth && i < n; i++) {
		const struct case_run *c = &runs[i];
		int first = 1;
		if (!c->link->mtu)
			continue;
		for (int k = 0; k < i; k++)
			first &= !(runs[k].link->mtu && runs[k].c == c->c);
		if (!first)
			continue;
		fprintf(ld, "\"%s\"", c->c->name);
		for (int l = 0; l < nlinks; l++) {
			const struct case_run *x;
			if (!links[l].mtu || !link_ran(runs, n, &links[l]))
				continue;
			x = find_run(runs, n, &links[l], c->c->name);
			fprintf(ld, " %g %g", x && !isnan(x->med[F_B1_GBPS]) ? x->med[F_B1_GBPS] : 0,
				x && !isnan(x->med[F_B1_CPU]) ? x->med[F_B1_CPU] : 0);
		}
		fprintf(ld, "\n");
	}
	fclose(d);
	fclose(ld);
	if (!(g = popen("gnuplot", "w"))) {
		unlink(dat);
		unlink(ldat);
		return -1;
	}
	fprintf(g, "set terminal %s size 1400,%d font ',10'\nset output '%s'\n",
		svg ? "svg" : "pngcairo", veth ? 1500 : 1000, path);
	fprintf(g, "set multiplot layout %d,2 title 'splicer bench: medians, one run on this machine'\n"
		   "set style data histograms\nset style histogram clustered gap 1\n"
		   "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset grid ytics\n"
		   "set xtics rotate by -35 scale 0\nset key top right\nset yrange [0:*]\n",
		veth ? 3 : 2);
	fprintf(g, "set title 'loopback: throughput (Gbit/s, higher is better)'\n"
		   "plot '%s' using 2:xtic(1) title '1 stream', '' using 3 title '4 streams'\n", dat);
	fprintf(g, "set title 'loopback: proxy CPU seconds per GB (lower is better)'\n"
		   "plot '%s' using 4:xtic(1) title '1 stream', '' using 5 title '4 streams'\n", dat);
	/* log scale: --lowat cases wait for the proxy's 100 ms scan, 1000x the others */
	fprintf(g, "set title 'loopback: 64-byte request/response latency (us, log scale, lower is better)'\n"
		   "set logscale y\nset yrange [10:*]\n"
		   "plot '%s' using 6:xtic(1) title 'p50', '' using 7 title 'p99', '' using 8 title 'p99.9'\n"
		   "unset logscale y\nset yrange [0:*]\n", dat);
	fprintf(g, "set title 'loopback: short connections per second (higher is better)'\n"
		   "plot '%s' using 9:xtic(1) title 'conn/s'\n", dat);
	for (int panel = 0; veth && panel < 2; panel++) {
		int col = 2 + panel, first = 1;
		fprintf(g, "set title 'one stream over links: %s'\nplot ",
			panel ? "proxy CPU seconds per GB (lower is better)" : "Gbit/s (higher is better)");
		for (int l = 0; l < nlinks; l++) {
			if (!links[l].mtu || !link_ran(runs, n, &links[l]))
				continue;
			fprintf(g, "%s'%s' using %d%s title '%s'", first ? "" : ", ", ldat, col,
				first ? ":xtic(1)" : "", links[l].name);
			first = 0;
			col += 2;
		}
		fprintf(g, "\n");
	}
	fprintf(g, "unset multiplot\n");
	r = pclose(g);
	unlink(dat);
	unlink(ldat);
	return r == 0 ? 0 : -1;
}

/* ---- options ------------------------------------------------------------- */

static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == n && !strncmp(p, name, n))
			return 1;
		p = comma ? comma + 1 : NULL;
	}
	return 0;
}

static int peer_kind_selected(const struct bench_case *c, const char *peers)
{
	switch (c->kind) {
	case PX_HAPROXY: return in_list(peers, "haproxy");
	case PX_NGINX: return in_list(peers, "nginx");
	case PX_SOCAT: return in_list(peers, "socat");
	default: return 1;
	}
}

static void usage(void)
{
	printf("usage: splicer bench [options]\n"
	       "  --quick            about a minute: cases direct,copy,splice,auto,haproxy; 1 s per workload\n"
	       "  --cases LIST       cases to run (comma-separated; default: all); known:\n"
	       "                     ");
	for (size_t i = 0; i < NCASES; i++)
		printf("%s%s", all_cases[i].name, i + 1 < NCASES ? "," : "\n");
	printf("  --links LIST       links among %s\n"
	       "                     (default: all; quick: loopback). veth links run the bulk\n"
	       "                     workloads of cases " VETH_CASES "\n"
	       "                     unless --cases is given\n", bench_link_names());
	printf("  --peers LIST       peers among haproxy,nginx,socat (default: all installed; none)\n"
	       "  --reps N           repetitions of every case, interleaved (default 3)\n"
	       "  --seconds S        length of each workload (default 2; quick 1)\n"
	       "  --workers N        proxy threads/processes for every proxy (default 1)\n"
	       "  --ref CASE         reference for ratios (default haproxy, else copy)\n"
	       "  --files SIZE|off   file rows (splicer recv/send) with SIZE per run (default 1g;\n"
	       "                     quick 256m)\n"
	       "  --json FILE        every raw sample and the aggregates\n"
	       "  --chart FILE       a chart (PNG, or SVG when FILE ends in .svg), via gnuplot\n");
}

static int parse_opts(struct opts *o, int argc, char **argv)
{
	*o = (struct opts){ .reps = 3, .workers = 1, .seconds = 2, .peers = "haproxy,nginx,socat",
			    .links = bench_link_names(), .files = 1ull << 30 };
	int files_given = 0;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
			return 1;
		} else if (!strcmp(a, "--quick")) {
			o->quick = 1;
			continue;
		} else if (!v) {
			fprintf(stderr, "splicer bench: option '%s' %s (see splicer bench --help)\n", a,
				a[0] == '-' ? "needs a value or is unknown" : "is not an option");
			return -1;
		}
		i++;
		if (!strcmp(a, "--cases"))
			o->cases = v;
		else if (!strcmp(a, "--peers"))
			o->peers = !strcmp(v, "none") ? "" : v;
		else if (!strcmp(a, "--ref"))
			o->ref = v;
		else if (!strcmp(a, "--links"))
			o->links = v;
		else if (!strcmp(a, "--json"))
			o->json = v;
		else if (!strcmp(a, "--chart"))
			o->chart = v;
		else if (!strcmp(a, "--files")) {
			files_given = 1;
			if (!strcmp(v, "off"))
				o->files = 0;
			else if (parse_size(v, &o->files) || o->files < (1u << 20) || o->files > (64ull << 30)) {
				fprintf(stderr, "splicer bench: option '--files': invalid value '%s' "
					"(expects a size 1m..64g, or off)\n", v);
				return -1;
			}
		}
		else if (!strcmp(a, "--reps") || !strcmp(a, "--workers")) {
			long n = strtol(v, &end, 10);
			if (*end || n < 1 || n > (a[2] == 'r' ? MAX_REPS : 64)) {
				fprintf(stderr, "splicer bench: option '%s': invalid value '%s' (expects 1..%d)\n",
					a, v, a[2] == 'r' ? MAX_REPS : 64);
				return -1;
			}
			*(a[2] == 'r' ? &o->reps : &o->workers) = (int)n;
		} else if (!strcmp(a, "--seconds")) {
			o->seconds = strtod(v, &end);
			if (*end || !(o->seconds >= 0.2 && o->seconds <= 600)) {
				fprintf(stderr, "splicer bench: option '--seconds': invalid value '%s' "
					"(expects 0.2..600)\n", v);
				return -1;
			}
		} else {
			fprintf(stderr, "splicer bench: unknown option '%s' (see splicer bench --help)\n", a);
			return -1;
		}
	}
	if (o->quick) {
		int seconds_given = 0;
		for (int i = 2; i < argc; i++)
			seconds_given |= !strcmp(argv[i], "--seconds");
		if (!seconds_given)
			o->seconds = 1;
		if (!files_given)
			o->files = 256u << 20;
		if (!o->cases)
			o->cases = "direct,copy,splice,auto,haproxy";
		int links_given = 0;
		for (int i = 2; i < argc; i++)
			links_given |= !strcmp(argv[i], "--links");
		if (!links_given)
			o->links = "loopback";
	}
	for (const char *p = o->links; *p;) {
		const char *comma = strchr(p, ',');
		char name[64];
		snprintf(name, sizeof(name), "%.*s", comma ? (int)(comma - p) : (int)strlen(p), p);
		if (!bench_link_find(name)) {
			fprintf(stderr, "splicer bench: option '--links': unknown link '%s' (known: %s)\n",
				name, bench_link_names());
			return -1;
		}
		p = comma ? comma + 1 : p + strlen(p);
	}
	if (o->cases) {
		for (const char *p = o->cases; *p;) {
			const char *comma = strchr(p, ',');
			size_t len = comma ? (size_t)(comma - p) : strlen(p);
			int known = 0;
			for (size_t k = 0; k < NCASES; k++)
				known |= strlen(all_cases[k].name) == len && !strncmp(all_cases[k].name, p, len);
			if (!known) {
				fprintf(stderr, "splicer bench: option '--cases': unknown case '%.*s' "
					"(see splicer bench --help)\n", (int)len, p);
				return -1;
			}
			p = comma ? comma + 1 : p + len;
		}
	}
	return 0;
}

static struct bench_link *cleanup_links;
static int cleanup_nlinks;

/* Namespaces are system-wide: an interrupted run must not leave them. */
static void on_signal(int sig)
{
	for (int l = 0; l < cleanup_nlinks; l++)
		bench_link_teardown(&cleanup_links[l]);
	signal(sig, SIG_DFL);
	raise(sig);
}

int cmd_bench(int argc, char **argv)
{
	struct opts o;
	static struct case_run runs[MAX_LINKS * NCASES];
	struct bench_link links[MAX_LINKS];
	struct bench_sink *sinks[MAX_LINKS] = { 0 };
	const char *link_skip[MAX_LINKS] = { 0 };
	static char link_why[MAX_LINKS][300];
	char err[256];
	int n = 0, nlinks = 0, active = 0, failed = 0, r;
	uint64_t verified = 0, mism = 0;
	double t_start, done_work = 0, all_work = 0;

	if ((r = parse_opts(&o, argc, argv)))
		return r > 0 ? 0 : 2;
	signal(SIGPIPE, SIG_IGN);
	for (const char *p = o.links; *p && nlinks < MAX_LINKS;) {
		const char *comma = strchr(p, ',');
		char name[64];
		snprintf(name, sizeof(name), "%.*s", comma ? (int)(comma - p) : (int)strlen(p), p);
		links[nlinks++] = *bench_link_find(name);
		p = comma ? comma + 1 : p + strlen(p);
	}
	cleanup_links = links;
	cleanup_nlinks = nlinks;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (int l = 0; l < nlinks; l++) {
		struct bench_link *lk = &links[l];
		if (bench_link_setup(lk, link_why[l], sizeof(link_why[l]))) {
			link_skip[l] = link_why[l];
			continue;
		}
		bench_link_enter(lk, LINK_SINK);
		snprintf(err, sizeof(err), "%s:0", lk->host[LINK_SINK]);
		sinks[l] = bench_sink_start(err, err, sizeof(err));
		bench_link_leave(lk);
		if (!sinks[l]) {
			snprintf(link_why[l], sizeof(link_why[l]), "%s", err);
			link_skip[l] = link_why[l];
			bench_link_teardown(lk);
		}
	}
	for (int l = 0; l < nlinks; l++) {
		const char *sel = o.cases ? o.cases : links[l].mtu ? VETH_CASES : NULL;
		for (size_t i = 0; i < NCASES; i++) {
			const struct bench_case *c = &all_cases[i];
			struct case_run *cr = &runs[n];
			if (sel ? !in_list(sel, c->name) : !peer_kind_selected(c, o.peers))
				continue;
			*cr = (struct case_run){ .c = c, .link = &links[l], .sink = sinks[l],
						 .bulk_only = links[l].mtu != 0,
						 .skip = link_skip[l] ? link_skip[l] : bench_case_unavailable(c) };
			if (!cr->skip && sel && !o.quick && c->kind > PX_SPLICER && !peer_kind_selected(c, o.peers))
				cr->skip = "not in --peers";
			if (!cr->skip) {
				active++;
				all_work += (cr->bulk_only ? 2 : 4) * o.seconds + 0.5;
			}
			n++;
		}
	}
	for (int l = 0; l < nlinks; l++)
		if (link_skip[l])
			fprintf(stderr, "splicer bench: link %s skipped: %s\n", links[l].name, link_skip[l]);
	printf("splicer bench: %d case-links x %d reps, workloads of %.1f s, proxies with %d worker(s)\n",
	       active, o.reps, o.seconds, o.workers);
	fflush(stdout);
	all_work *= o.reps;
	t_start = bench_now();
	for (int rep = 0; rep < o.reps; rep++)
		for (int i = 0; i < n; i++) {
			struct case_run *cr = &runs[i];
			double elapsed = bench_now() - t_start, eta;
			if (cr->skip)
				continue;
			/* ETA: the work left at the pace measured so far */
			eta = done_work > 0 ? elapsed / done_work * (all_work - done_work) : all_work - done_work;
			if (run_case(cr, &o, rep, eta)) {
				fprintf(stderr, "\nsplicer bench: %s on %s, rep %d: %s\n", cr->c->name,
					cr->link->name, rep + 1, cr->fail);
				failed = 1;
			}
			done_work += (cr->bulk_only ? 2 : 4) * o.seconds + 0.5;
			cr->nrep = rep + 1;
		}
	fprintf(stderr, "\r\033[K");
	static struct file_bench fb;
	if (o.files && !bench_file_setup(&fb, o.files))
		for (int rep = 0; rep < o.reps; rep++)
			failed |= bench_file_rep(&fb, rep) != 0;
	if (o.files)
		bench_file_finish(&fb);
	for (int l = 0; l < nlinks; l++) {
		uint64_t v, m;
		if (!sinks[l])
			continue;
		bench_sink_totals(sinks[l], &v, &m);
		verified += v;
		mism += m;
		bench_sink_stop(sinks[l]);
		bench_link_teardown(&links[l]);
	}
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	for (int i = 0; i < n; i++)
		if (!runs[i].skip)
			aggregate(&runs[i]);
	if (!o.ref) {
		o.ref = "copy";
		for (int i = 0; i < n; i++)
			if (!runs[i].skip && !strcmp(runs[i].c->name, "haproxy"))
				o.ref = "haproxy";
	}
	for (int l = 0; l < nlinks; l++)
		if (link_skip[l])
			printf("\n== link %s skipped: %s\n", links[l].name, link_skip[l]);
		else
			print_link(runs, n, &links[l], o.ref);
	print_legend(runs, n);
	if (o.files)
		bench_file_print(&fb);
	printf("\nverified: %llu bytes at the sink, %llu mismatches; %.0f s\n",
	       (unsigned long long)verified, (unsigned long long)mism, bench_now() - t_start);
	if (o.json && write_json(o.json, runs, n, &o, &fb, verified, mism)) {
		fprintf(stderr, "splicer bench: cannot write %s: %s\n", o.json, strerror(errno));
		failed = 1;
	}
	if (o.chart && write_chart(o.chart, runs, n, links, nlinks)) {
		fprintf(stderr, "splicer bench: cannot draw %s (is gnuplot installed? make bench-deps)\n",
			o.chart);
		failed = 1;
	}
	return failed || mism ? 1 : 0;
}
