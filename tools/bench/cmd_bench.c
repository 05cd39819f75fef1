/* SPDX-License-Identifier: MIT */
/* cmd_bench: `splicer bench`, the project's measurement of itself and of its
 * peers, in one run on the machine at hand.
 *
 *   splicer bench [--quick] [--cases LIST] [--peers LIST] [--reps N]
 *                 [--seconds S] [--workers N[,N...]] [--conns N]
 *                 [--workloads LIST] [--real] [--ref CASE] [--files SIZE]
 *                 [--json FILE] [--chart FILE.png|.svg] [--doc FILE.md]
 *                 [--baseline [NAME=]PATH ... [--baseline-cases LIST]]
 *   splicer bench --pacing [--rates LIST] [--seconds S] [--json FILE]
 *   splicer bench --idle [--sessions LIST] [--cases LIST] [--reps N] [--json FILE]
 *   splicer bench --upgrade [--sessions LIST] [--cases LIST] [--reps N] [--json FILE]
 *
 * Each case (a proxy and its settings, or `direct`, the ceiling) runs the
 * workloads against the built-in sink: one bulk stream, four bulk streams,
 * one connection's 64-byte ping-pong, request/response over --conns
 * connections (64 B and 1 KiB, depth 1 and 16, pipelined), short
 * connections --conns at a time, and with --real redis-benchmark and
 * pgbench against servers of their own (bench_real.c); then the TLS
 * passthrough rows (bench_tls.c: TLS through splicer's sni route against
 * its plain route and against HAProxy's req.ssl_sni). Cases are
 * interleaved (A B C A B C ...) so drift on a shared machine spreads over
 * all of them; every figure is the median of the repetitions, with min-max,
 * and ratios are taken against `direct` and against a reference case of
 * the same run. A --workers list runs every case at each count, for a
 * scaling table. With --files, the file rows (bench_file.c) follow.
 * With --baseline, another build runs each of --baseline-cases (and the
 * TLS rows) as a twin (CASE@NAME) right after the case in every
 * repetition, and every table and conclusion says how this build compares
 * with it (bench_baseline.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
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
#include "bench_idle.h"
#include "bench_link.h"
#include "bench_pacing.h"
#include "bench_proxy.h"
#include "bench_real.h"
#include "bench_run.h"
#include "bench_tls.h"
#include "bench_upgrade.h"
#include "bench_traffic.h"
#include "cmd.h"
#include "json.h"
#include "stats.h"
#include "units.h"

#define RR_MAX_N  2000000
#define MAX_LINKS 8
#define MAX_RUNS  (MAX_LINKS * 96)

const unsigned rr_size[RR_VARIANTS] = { 64, 64, 1024, 1024 };
const unsigned rr_depth[RR_VARIANTS] = { 1, 16, 1, 16 };

const char *const workload_names[NWL] = { "bulk1", "bulk4", "lat", "rr", "conn", "tls", "real" };

#define RRV_KEYS(p) \
	{ p "_req_s", "/s", 1 }, { p "_proxy_cpu_us", "us", 0 }, \
	{ p "_machine_cpu_us", "us", 0 }, { p "_load_cpu_us", "us", 0 }

const struct fig_info bench_figs[NFIG] = {
	{ "bulk1_gbit_s", "Gbit/s", 1 }, { "bulk1_proxy_cpu_s_per_gb", "CPU-s/GB", 0 },
	{ "bulk1_machine_cpu_s_per_gb", "CPU-s/GB", 0 }, { "bulk1_syscalls_per_mb", "/MB", 0 },
	{ "bulk4_gbit_s", "Gbit/s", 1 }, { "bulk4_proxy_cpu_s_per_gb", "CPU-s/GB", 0 },
	{ "bulk4_machine_cpu_s_per_gb", "CPU-s/GB", 0 }, { "bulk4_syscalls_per_mb", "/MB", 0 },
	{ "rr_p50_us", "us", 0 }, { "rr_p99_us", "us", 0 }, { "rr_p999_us", "us", 0 },
	{ "rr_round_trips_s", "/s", 1 },
	RRV_KEYS("rr64_d1"), RRV_KEYS("rr64_d16"), RRV_KEYS("rr1k_d1"), RRV_KEYS("rr1k_d16"),
	{ "conn_per_s", "/s", 1 }, { "conn_proxy_cpu_us", "us", 0 },
	{ "conn_machine_cpu_us", "us", 0 }, { "conn_load_cpu_us", "us", 0 },
	{ "peak_rss_mib", "MiB", 0 },
	{ "redis_set_req_s", "/s", 1 }, { "redis_get_req_s", "/s", 1 },
	{ "redis_proxy_cpu_us", "us", 0 }, { "pgbench_tps", "/s", 1 },
	{ "pgbench_proxy_cpu_us", "us", 0 },
};

#define WL(o, w) ((o)->wl & (1u << (w)))

/* The cases run over veth links unless --cases names others: bulk is what
 * segment sizes change, and these are the rows the seeds argue about. */
#define VETH_CASES "direct,copy,splice-64k,splice,splice-1m,haproxy,haproxy-splice"

static const struct bench_case all_cases[] = {
	{ .name = "direct", .kind = PX_DIRECT, .opts = { NULL },
	  .what = "no proxy: client to sink, the ceiling" },
	{ .name = "copy", .kind = PX_SPLICER, .opts = { "--engine", "copy", NULL },
	  .what = "splicer, recv/send through 64k buffers" },
	{ .name = "splice-64k", .kind = PX_SPLICER, .opts = { "--engine", "splice", "--pipe-size", "64k", NULL },
	  .what = "splicer, splice with the kernel's default 64k pipes" },
	{ .name = "splice", .kind = PX_SPLICER, .opts = { "--engine", "splice", NULL },
	  .what = "splicer, splice with its default 512k pipes" },
	{ .name = "splice-256k", .kind = PX_SPLICER, .opts = { "--engine", "splice", "--pipe-size", "256k", NULL },
	  .what = "splicer, splice with 256k pipes" },
	{ .name = "splice-1m", .kind = PX_SPLICER, .opts = { "--engine", "splice", "--pipe-size", "1m", NULL },
	  .what = "splicer, splice with 1m pipes (the seeds' naive size)" },
	{ .name = "splice-lowat64k", .kind = PX_SPLICER, .opts = { "--engine", "splice", "--lowat", "64k", NULL },
	  .what = "splicer, splice + SO_RCVLOWAT 64k" },
	{ .name = "splice-lowat256k", .kind = PX_SPLICER, .opts = { "--engine", "splice", "--lowat", "256k", NULL },
	  .what = "splicer, splice + SO_RCVLOWAT 256k" },
	{ .name = "auto", .kind = PX_SPLICER, .opts = { "--engine", "auto", NULL },
	  .what = "splicer, its default: copy, then splice for streams" },
	{ .name = "sockmap", .kind = PX_SPLICER, .opts = { "--engine", "sockmap", NULL },
	  .what = "splicer, experimental: eBPF sockmap redirects in the kernel (needs CAP_BPF)" },
	{ .name = "uring", .kind = PX_SPLICER, .opts = { "--engine", "uring", NULL },
	  .what = "splicer, io_uring recvs into provided buffers (one each) + sendmsg (experimental)" },
	{ .name = "auto-nosandbox", .kind = PX_SPLICER, .opts = { "--engine", "auto", "--sandbox", "no", NULL },
	  .what = "splicer auto without its sandbox (seccomp, Landlock): what the sandbox costs" },
	{ .name = "auto-busypoll", .kind = PX_SPLICER, .opts = { "--engine", "auto", "--busy-poll", "50", NULL },
	  .what = "splicer auto, polling 50 us after each event before sleeping" },
	{ .name = "haproxy", .kind = PX_HAPROXY, .opts = { NULL },
	  .what = "HAProxy mode tcp, its defaults (no splicing)" },
	{ .name = "haproxy-splice-auto", .kind = PX_HAPROXY, .opts = { "option splice-auto", NULL },
	  .what = "HAProxy, option splice-auto" },
	{ .name = "haproxy-splice", .kind = PX_HAPROXY, .opts = { "option splice-request", "option splice-response", NULL },
	  .what = "HAProxy, splice forced both ways" },
	{ .name = "haproxy-busypoll", .kind = PX_HAPROXY, .opts = { "global:busy-polling", NULL },
	  .what = "HAProxy defaults + busy-polling (never sleeps)" },
	{ .name = "nginx", .kind = PX_NGINX, .opts = { NULL }, .what = "nginx stream proxy_pass" },
	{ .name = "socat", .kind = PX_SOCAT, .opts = { NULL },
	  .what = "socat TCP-LISTEN,fork (a process per connection)" },
};
#define NCASES (sizeof(all_cases) / sizeof(all_cases[0]))

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

/* On a terminal one line redrawn in place; otherwise (a file, a pipe) a
 * plain line per case and repetition, without control characters. */
static void progress(const struct bench_opts *o, int rep, const struct case_run *cr, const char *what,
		     double eta)
{
	static int tty = -1;

	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	if (tty)
		fprintf(stderr, "\r\033[K[rep %d/%d] %-18s %-20s %-8s ETA %dm%02ds", rep + 1, o->reps,
			cr->link->name, cr->label, what, (int)eta / 60, (int)eta % 60);
	else if (!strcmp(what, "start"))
		fprintf(stderr, "splicer bench: rep %d/%d, %s, %s (ETA %dm%02ds)\n", rep + 1, o->reps,
			cr->link->name, cr->label, (int)eta / 60, (int)eta % 60);
	fflush(stderr);
}

static void progress_end(void)
{
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "\r\033[K");
}

static int run_bulk(const struct bench_proxy *p, const struct bench_link *l, unsigned streams,
		    const struct bench_opts *o, double *out, char *fail, size_t faillen)
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

/* The CPU the proxy keeps off while the load runs: the load's, when the
 * proxy's workers fit on the others. Left to the scheduler, a proxy woken
 * by the load is pulled onto the load's CPU (wake-affine) about half the
 * time, and every send() then preempts it for the thread it woke: a perf
 * profile had 35-45 % of the proxy's samples in that context switch, and
 * the same case moved 2x between runs with the placement. Every proxy,
 * peers included, gets the same treatment. */
static int proxy_avoids(const struct case_run *cr, const struct bench_opts *o)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	return o->pin >= 0 && (long)(cr->workers ? cr->workers : 1) < ncpu ? o->pin : -1;
}

/* One connection's 64 B ping-pong: latency percentiles. The client, the
 * sink and the proxy share one CPU (the load's), so what the proxy adds is
 * its own path: its system calls and the context switches to it and back.
 * Left to the scheduler, the proxy ran on the client's CPU in some runs
 * (p50 47 us) and on the other in others (85 us), so one case's p50 moved
 * 1.8x between runs. On separate CPUs every hop wakes an idle vCPU (a VM
 * exit and the host's wake-up here, about 37 us): copy, auto, uring and
 * HAProxy all measured 153-159 us p50, the host's figure, not theirs
 * (doc/performance.md, "Latency placement"). */
static int run_lat(const struct bench_proxy *p, struct case_run *cr, const struct bench_opts *o,
		   double *v)
{
	struct rr_result rr;
	cpu_set_t was, one;
	int pinned = 0;

	if (o->pin >= 0 && sched_getaffinity(0, sizeof(was), &was) == 0) {
		CPU_ZERO(&one);
		CPU_SET(o->pin, &one);
		pinned = sched_setaffinity(0, sizeof(one), &one) == 0;
	}
	bench_sink_pin(cr->sink, o->pin);
	if (pinned)
		bench_tree_on_cpu(p->pid, o->pin);
	bench_link_enter(cr->link, LINK_CLIENT);
	int r = bench_rr((const struct sockaddr *)&p->ss, p->len, o->seconds, RR_MAX_N, &rr);
	bench_link_leave(cr->link);
	bench_sink_pin(cr->sink, -1);
	if (pinned) {
		bench_tree_avoid_cpu(p->pid, -1);
		sched_setaffinity(0, sizeof(was), &was);
	}
	if (r) {
		snprintf(cr->fail, sizeof(cr->fail), "request/response: %s", rr.why);
		free(rr.rtt_us);
		return -1;
	}
	stats_sort(rr.rtt_us, rr.n);
	v[F_RR_P50] = stats_percentile_sorted(rr.rtt_us, rr.n, 50);
	v[F_RR_P99] = stats_percentile_sorted(rr.rtt_us, rr.n, 99);
	v[F_RR_P999] = stats_percentile_sorted(rr.rtt_us, rr.n, 99.9);
	v[F_RR_RATE] = (double)rr.n / o->seconds;
	free(rr.rtt_us);
	return 0;
}

/* The many-connection loads (variant k of rr, or k < 0: short connections):
 * rate, then the proxy's, the machine's and the load thread's CPU per
 * request or connection into out[0..3]. The sink shares the load's CPU. */
static int run_load(const struct bench_proxy *p, struct case_run *cr, const struct bench_opts *o,
		    int k, double *out)
{
	struct load_result lr;
	double c0, b0, c1, b1;
	int r, away = proxy_avoids(cr, o);

	bench_sink_pin(cr->sink, o->pin);
	if (away >= 0)
		bench_tree_avoid_cpu(p->pid, away);
	c0 = bench_tree_cpu(p->pid);
	b0 = bench_machine_busy();
	bench_link_enter(cr->link, LINK_CLIENT);
	if (k >= 0)
		r = bench_rr_load((const struct sockaddr *)&p->ss, p->len, o->conns, rr_size[k],
				  rr_depth[k], o->seconds, o->pin, &lr);
	else
		r = bench_conn_load((const struct sockaddr *)&p->ss, p->len, o->conns, o->seconds,
				    o->pin, &lr);
	bench_link_leave(cr->link);
	c1 = bench_tree_cpu(p->pid);
	b1 = bench_machine_busy();
	bench_sink_pin(cr->sink, -1);
	if (away >= 0)
		bench_tree_avoid_cpu(p->pid, -1);
	if (r) {
		if (k >= 0)
			snprintf(cr->fail, sizeof(cr->fail), "request/response %u B depth %u: %llu done, "
				 "%llu failed: %s", rr_size[k], rr_depth[k], (unsigned long long)lr.done,
				 (unsigned long long)lr.failed, lr.why);
		else
			snprintf(cr->fail, sizeof(cr->fail), "short connections: %llu ok, %llu failed: %s",
				 (unsigned long long)lr.done, (unsigned long long)lr.failed, lr.why);
		return -1;
	}
	out[0] = (double)lr.done / lr.seconds;
	out[1] = p->pid ? (c1 - c0) * 1e6 / (double)lr.done : NAN;
	out[2] = (b1 - b0) * 1e6 / (double)lr.done;
	out[3] = lr.cpu_s * 1e6 / (double)lr.done;
	return 0;
}

/* The real clients, each through its own proxy of this case in front of
 * its server; a missing server leaves its figures out (said once). */
static int run_real(struct case_run *cr, const struct bench_opts *o, const struct bench_real *e,
		    double *v)
{
	struct bench_proxy p;
	struct real_result rr;
	char err[300];

	for (int which = 0; which < 2; which++) {
		const char *backend = which ? e->pg_addr : e->redis_addr;
		double c0;
		int r;
		if (which ? e->pg <= 0 : e->redis <= 0)
			continue;
		if (bench_proxy_start(&p, cr->c, backend, cr->link->host[LINK_PROXY], cr->workers, err,
				      sizeof(err))) {
			snprintf(cr->fail, sizeof(cr->fail), "%s", err);
			return -1;
		}
		c0 = bench_tree_cpu(p.pid);
		if (which)
			r = bench_pgbench((const struct sockaddr *)&p.ss, o->conns, o->seconds, &rr, err,
					  sizeof(err));
		else
			r = bench_redis((const struct sockaddr *)&p.ss, o->conns, o->seconds, &rr, err,
					sizeof(err));
		if (!r && which) {
			v[F_PG_TPS] = rr.tps;
			v[F_PG_CPU] = p.pid ? (bench_tree_cpu(p.pid) - c0) * 1e6 / rr.requests : NAN;
		} else if (!r) {
			v[F_REDIS_SET] = rr.set_rps;
			v[F_REDIS_GET] = rr.get_rps;
			v[F_REDIS_CPU] = p.pid ? (bench_tree_cpu(p.pid) - c0) * 1e6 / rr.requests : NAN;
		}
		bench_proxy_stop(&p);
		if (r) {
			snprintf(cr->fail, sizeof(cr->fail), "%s", err);
			return -1;
		}
	}
	return 0;
}

static int run_case(struct case_run *cr, const struct bench_opts *o, const struct bench_real *e,
		    int rep, double eta)
{
	struct bench_proxy p;
	double *v = cr->v[rep];
	char err[300];
	int r = -1;

	for (int i = 0; i < NFIG; i++)
		v[i] = NAN;
	progress(o, rep, cr, "start", eta);
	bench_link_enter(cr->link, LINK_PROXY); /* the proxy is forked in there */
	r = bench_proxy_start(&p, cr->c, bench_sink_addr(cr->sink), cr->link->host[LINK_PROXY],
			      cr->workers, err, sizeof(err));
	bench_link_leave(cr->link);
	if (r) {
		snprintf(cr->fail, sizeof(cr->fail), "%s", err);
		return -1;
	}
	r = -1;
	progress(o, rep, cr, "bulk1", eta);
	if (WL(o, W_BULK1) && run_bulk(&p, cr->link, 1, o, &v[F_B1_GBPS], cr->fail, sizeof(cr->fail)))
		goto out;
	progress(o, rep, cr, "bulk4", eta);
	if (WL(o, W_BULK4) && run_bulk(&p, cr->link, 4, o, &v[F_B4_GBPS], cr->fail, sizeof(cr->fail)))
		goto out;
	if (!cr->bulk_only) {
		progress(o, rep, cr, "lat", eta);
		if (WL(o, W_LAT) && run_lat(&p, cr, o, v))
			goto out;
		for (int k = 0; WL(o, W_RR) && k < RR_VARIANTS; k++) {
			char what[16];
			snprintf(what, sizeof(what), "rr%u/%u", rr_size[k], rr_depth[k]);
			progress(o, rep, cr, what, eta);
			if (run_load(&p, cr, o, k, &v[F_RRV + RRV_NFIG * k]))
				goto out;
		}
		progress(o, rep, cr, "conn", eta);
		if (WL(o, W_CONN) && run_load(&p, cr, o, -1, &v[F_CONN_RATE]))
			goto out;
	}
	v[F_RSS_MIB] = p.pid ? (double)bench_tree_peak_rss_kib(p.pid) / 1024 : NAN;
	bench_proxy_stop(&p);
	progress(o, rep, cr, "real", eta);
	return !cr->bulk_only && o->real ? run_real(cr, o, e, v) : 0;
out:
	bench_proxy_log_tail(&p, cr->label);
	bench_proxy_stop(&p);
	return r;
}

/* The seconds of work in one repetition of a case, for the ETA. */
static double case_work(const struct case_run *cr, const struct bench_opts *o)
{
	double w = 0.5;

	w += o->seconds * (!!WL(o, W_BULK1) + !!WL(o, W_BULK4));
	if (!cr->bulk_only)
		w += o->seconds * (!!WL(o, W_LAT) + RR_VARIANTS * !!WL(o, W_RR) + !!WL(o, W_CONN)) +
		     (o->real ? 2 * o->seconds + 2 : 0);
	return w;
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

static void print_legend(FILE *f, int md, const struct case_run *runs, int n, const struct bench_opts *o)
{
	fprintf(f, md ? "\n### Legend\n\n" : "\nLegend:\n");
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int k = 0; k < i; k++)
			seen |= runs[k].c == runs[i].c;
		if (!seen)
			fprintf(f, md ? "- `%s`: %s\n" : "  %-20s %s\n", runs[i].c->name, runs[i].c->what);
	}
	fprintf(f, "%sCPU-s/GB: the proxy's user+sys CPU (all threads and child processes) per GB\n"
		"%sdelivered; busy/GB: the whole machine's busy CPU per GB (client, sink and proxy);\n"
		"%ssysc/MB: the proxy's system calls per MB (perf's raw_syscalls tracepoint); added p50:\n"
		"%sp50 minus direct's; CPU-us: CPU microseconds per request or connection: the proxy's,\n"
		"%sthe machine's (/proc/stat) and the load thread's (one epoll thread, %s, with the sink).\n"
		"%sEvery byte was compared with what was sent, at the sink or by the load thread.\n",
		md ? "\n" : "  ", md ? "" : "  ", md ? "" : "  ", md ? "" : "  ", md ? "" : "  ",
		o->pin >= 0 ? "pinned to one CPU" : "not pinned", md ? "" : "  ");
}

static int write_json(const char *path, struct case_run *runs, int n, const struct bench_opts *o,
		      const struct file_bench *fb, const struct tls_bench *tb, uint64_t verified,
		      uint64_t mism)
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
	json_arr_begin(&j, "workers");
	for (int k = 0; k < o->nworkers; k++)
		json_int(&j, NULL, o->workers[k]);
	json_arr_end(&j);
	json_int(&j, "conns", o->conns);
	json_int(&j, "load_cpu", o->pin);
	json_str(&j, "reference", o->ref ? o->ref : "");
	json_int(&j, "verified_bytes", (long long)verified);
	json_int(&j, "mismatches", (long long)mism);
	json_arr_begin(&j, "baselines");
	for (int b = 0; b < o->nbase; b++) {
		json_obj_begin(&j, NULL);
		json_str(&j, "name", o->base[b].name);
		json_str(&j, "path", o->base[b].path);
		json_str(&j, "revision", o->base[b].rev);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_arr_begin(&j, "cases");
	for (int i = 0; i < n; i++) {
		struct case_run *r = &runs[i];
		json_obj_begin(&j, NULL);
		json_str(&j, "name", r->c->name);
		json_str(&j, "label", r->label);
		json_int(&j, "workers", r->workers);
		json_str(&j, "link", r->link->name);
		json_str(&j, "what", r->c->what);
		if (r->c->base) {
			json_str(&j, "baseline", r->c->base);
			json_str(&j, "baseline_of", r->c->of->name);
		}
		if (r->skip)
			json_str(&j, "skipped", r->skip);
		if (r->fail[0])
			json_str(&j, "failed", r->fail);
		json_arr_begin(&j, "samples");
		for (int k = 0; k < r->nrep; k++) {
			json_obj_begin(&j, NULL);
			json_int(&j, "rep", k + 1);
			for (int fi = 0; fi < NFIG; fi++)
				json_num(&j, bench_figs[fi].key, r->v[k][fi]);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		const char *agg[] = { "median", "min", "max" };
		double *vals[] = { r->med, r->lo, r->hi };
		for (int a = 0; a < 3; a++) {
			json_obj_begin(&j, agg[a]);
			for (int fi = 0; fi < NFIG; fi++)
				json_num(&j, bench_figs[fi].key, vals[a][fi]);
			json_obj_end(&j);
		}
		json_obj_end(&j);
	}
	json_arr_end(&j);
	if (o->files)
		bench_file_json(&j, fb);
	if (WL(o, W_TLS))
		bench_tls_json(&j, tb);
	json_obj_end(&j);
	if (json_finish(&j)) {
		int e = errno;
		fclose(f);
		errno = e;
		return -1;
	}
	return fclose(f);
}

/* The chart's path as the doc links it: relative to the doc's directory
 * when both share a prefix, else as given. */
static const char *chart_link(const char *doc, const char *chart)
{
	const char *slash = strrchr(doc, '/');
	size_t dir = slash ? (size_t)(slash - doc + 1) : 0;

	return dir && !strncmp(doc, chart, dir) ? chart + dir : chart;
}

/* --doc: the results document, regenerated whole on every run. */
static int write_doc(const char *path, int argc, char **argv, const struct case_run *runs, int n,
		     const struct bench_link *links, int nlinks, const struct bench_opts *o,
		     const struct tls_bench *tb, uint64_t verified, uint64_t mism, double secs)
{
	FILE *f = fopen(path, "w");
	struct utsname u;
	char when[32];
	time_t t = time(NULL);

	if (!f)
		return -1;
	uname(&u);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", gmtime(&t));
	fprintf(f, "# splicer bench: latest results\n\n"
		   "Generated by `make perf-doc`; do not edit by hand, run it again. What the bench\n"
		   "measures and how to read it: [performance.md](performance.md).\n\n"
		   "- command: `splicer");
	for (int i = 1; i < argc; i++)
		fprintf(f, " %s", argv[i]);
	fprintf(f, "`\n- date: %s; kernel %s; %ld CPUs; splicer %s\n"
		   "- %d interleaved repetitions of %.1f s per workload; proxies with %u worker(s)%s;\n"
		   "  %u connections for request/response and short connections\n"
		   "- %llu bytes verified at the sink, %llu mismatches; the run took %.0f s\n",
		when, u.release, sysconf(_SC_NPROCESSORS_ONLN), SPLICER_VERSION, o->reps, o->seconds,
		o->workers[0], o->nworkers > 1 ? " (and the --workers sweep)" : "", o->conns,
		(unsigned long long)verified, (unsigned long long)mism, secs);
	for (int b = 0; b < o->nbase; b++)
		fprintf(f, "- baseline `%s`: %s%s%s%s, run as CASE@%s beside each case of %s; the \"x %s\"\n"
			   "  columns divide this build's figure by that build's, from the same repetitions\n",
			o->base[b].name, o->base[b].path, o->base[b].rev[0] ? " (" : "", o->base[b].rev,
			o->base[b].rev[0] ? ")" : "", o->base[b].name, o->base_cases,
			o->base[b].name);
	bench_goals(f, runs, n, links, nlinks, o);
	bench_conclusions(f, 1, runs, n, links, nlinks, o);
	if (WL(o, W_TLS))
		bench_tls_conclusions(f, 1, tb);
	if (o->chart)
		fprintf(f, "\n## Chart\n\n![splicer bench chart](%s)\n", chart_link(path, o->chart));
	fprintf(f, "\n## Tables\n");
	bench_report(f, 1, runs, n, links, nlinks, o);
	if (WL(o, W_TLS))
		bench_tls_print(f, 1, tb);
	if (n)
		print_legend(f, 1, runs, n, o);
	return fclose(f);
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
	       "  --quick            a few minutes: cases direct,copy,splice,auto,haproxy; 1 s per\n"
	       "                     workload; a one-line conclusion per workload\n"
	       "  --cases LIST       cases to run (comma-separated; default: all); known:\n"
	       "                     ");
	for (size_t i = 0; i < NCASES; i++)
		printf("%s%s", all_cases[i].name, i + 1 < NCASES ? "," : "\n");
	printf("  --links LIST       links among %s\n"
	       "                     (default: all; quick: loopback). veth links run the bulk\n"
	       "                     workloads of cases " VETH_CASES "\n"
	       "                     unless --cases is given\n", bench_link_names());
	printf("  --peers LIST       peers among haproxy,nginx,socat (default: all installed; none)\n"
	       "  --workloads LIST   among bulk1,bulk4,lat,rr,conn,tls (default: all); real with\n"
	       "                     --real. tls: its own rows on loopback: one TLS stream through\n"
	       "                     splicer's sni route against its plain route, and full\n"
	       "                     handshakes --conns at a time against HAProxy's req.ssl_sni\n"
	       "                     (only when --links has loopback)\n"
	       "  --conns N          connections of the rr and short-connection workloads (default 50)\n"
	       "  --pacing           only the rate limits: splicer's rate_limit_down (kernel pacing)\n"
	       "                     and nginx's proxy_download_rate at several rates, the rate\n"
	       "                     achieved and the CPU per GB (bench_pacing.h: --rates, --json)\n"
	       "  --idle             only the memory of idle sessions: RSS and kernel memory per\n"
	       "                     session at 1,000 and 8,000 sessions, splicer's engines beside\n"
	       "                     HAProxy and nginx (bench_idle.h: --sessions, --cases, --reps)\n"
	       "  --upgrade          only the cost of an upgrade that hands sessions over: ctl\n"
	       "                     upgrade's time, the hand-over's, the old process's life after\n"
	       "                     ready, every session checked after, at 100, 1,000 and 8,000\n"
	       "                     sessions (bench_upgrade.h: --sessions, --cases, --reps)\n"
	       "  --real             also redis-benchmark and pgbench -S against servers the bench\n"
	       "                     starts (make bench-deps installs them)\n"
	       "  --reps N           repetitions of every case, interleaved (default 3)\n"
	       "  --seconds S        length of each workload (default 2; quick 1)\n"
	       "  --workers N[,N..]  proxy threads/processes for every proxy (default 1); a list\n"
	       "                     runs every case at each count and adds a scaling table\n"
	       "  --pin CPU|off      the CPU of the load thread and the sink in the lat, rr and\n"
	       "                     conn workloads (default 0 when there are 2 CPUs or more); the\n"
	       "                     proxy then runs on the other CPUs when its workers fit\n"
	       "  --ref CASE         reference for ratios (default haproxy, else copy)\n"
	       "  --files SIZE       also the file rows (splicer recv/send), SIZE per run\n"
	       "  --json FILE        every raw sample and the aggregates\n"
	       "  --chart FILE       a chart (PNG, or SVG when FILE ends in .svg), via gnuplot\n"
	       "  --doc FILE         a markdown results document: goals, conclusions, tables, chart\n"
	       "  --baseline [NAME=]PATH\n"
	       "                     another build of splicer (make perf-baseline REV=...) runs\n"
	       "                     each of --baseline-cases (and the TLS rows) as CASE@NAME,\n"
	       "                     interleaved with the case in every repetition; every table\n"
	       "                     and conclusion gains an \"x NAME\" column (NAME: baseline).\n"
	       "                     Up to %d times. A case whose options that build lacks is\n"
	       "                     skipped for it, said why\n"
	       "  --baseline-cases LIST\n"
	       "                     the splicer cases the baselines run (default: auto, or the\n"
	       "                     first splicer case of the run)\n", MAX_BASELINES);
}

static int parse_num(const char *a, const char *v, long lo, long hi, long *out)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (!*v || *end || n < lo || n > hi) {
		fprintf(stderr, "splicer bench: option '%s': invalid value '%s' (expects %ld..%ld)\n", a, v,
			lo, hi);
		return -1;
	}
	*out = n;
	return 0;
}

static int parse_workers(struct bench_opts *o, const char *v)
{
	o->nworkers = 0;
	for (const char *p = v; *p;) {
		char num[16];
		const char *comma = strchr(p, ',');
		long n;
		snprintf(num, sizeof(num), "%.*s", comma ? (int)(comma - p) : (int)strlen(p), p);
		if (o->nworkers == 8) {
			fprintf(stderr, "splicer bench: option '--workers': at most 8 counts\n");
			return -1;
		}
		if (parse_num("--workers", num, 1, 64, &n))
			return -1;
		o->workers[o->nworkers++] = (unsigned)n;
		p = comma ? comma + 1 : p + strlen(p);
	}
	return o->nworkers ? 0 : -1;
}

static int parse_workloads(struct bench_opts *o, const char *v)
{
	o->wl = 0;
	for (const char *p = v; *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int k = 0;
		while (k < NWL && (strlen(workload_names[k]) != len || strncmp(workload_names[k], p, len)))
			k++;
		if (k == NWL) {
			fprintf(stderr, "splicer bench: option '--workloads': unknown workload '%.*s' "
				"(known: bulk1,bulk4,lat,rr,conn,tls,real)\n", (int)len, p);
			return -1;
		}
		o->wl |= 1u << k;
		p = comma ? comma + 1 : p + len;
	}
	return 0;
}

static int given(int argc, char **argv, const char *opt)
{
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], opt))
			return 1;
	return 0;
}

static int parse_opts(struct bench_opts *o, int argc, char **argv)
{
	long n;

	*o = (struct bench_opts){ .reps = 3, .nworkers = 1, .workers = { 1 }, .conns = 50,
				  .seconds = 2, .peers = "haproxy,nginx,socat",
				  .links = bench_link_names(),
				  .wl = (1u << W_REAL) - 1,
				  .pin = sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? 0 : -1 };
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
			return 1;
		} else if (!strcmp(a, "--quick")) {
			o->quick = 1;
			continue;
		} else if (!strcmp(a, "--real")) {
			o->real = 1;
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
		else if (!strcmp(a, "--doc"))
			o->doc = v;
		else if (!strcmp(a, "--baseline-cases"))
			o->base_cases = v;
		else if (!strcmp(a, "--baseline")) {
			char err[PATH_MAX + 200];
			if (o->nbase == MAX_BASELINES) {
				fprintf(stderr, "splicer bench: option '--baseline': at most %d\n", MAX_BASELINES);
				return -1;
			}
			if (bench_baseline_open(&o->base[o->nbase], v, err, sizeof(err))) {
				fprintf(stderr, "splicer bench: %s\n", err);
				return -1;
			}
			for (int k = 0; k < o->nbase; k++)
				if (!strcmp(o->base[k].name, o->base[o->nbase].name)) {
					fprintf(stderr, "splicer bench: option '--baseline': the name '%s' is "
						"given twice (NAME=PATH names each)\n", o->base[k].name);
					return -1;
				}
			o->nbase++;
		}
		else if (!strcmp(a, "--files")) {
			if (!strcmp(v, "off"))
				o->files = 0;
			else if (parse_size(v, (uint64_t *)&o->files) || o->files < (1u << 20) ||
				 o->files > (64ull << 30)) {
				fprintf(stderr, "splicer bench: option '--files': invalid value '%s' "
					"(expects a size 1m..64g, or off)\n", v);
				return -1;
			}
		} else if (!strcmp(a, "--reps")) {
			if (parse_num(a, v, 1, MAX_REPS, &n))
				return -1;
			o->reps = (int)n;
		} else if (!strcmp(a, "--conns")) {
			if (parse_num(a, v, 1, 4096, &n))
				return -1;
			o->conns = (unsigned)n;
		} else if (!strcmp(a, "--pin")) {
			if (!strcmp(v, "off"))
				o->pin = -1;
			else if (parse_num(a, v, 0, sysconf(_SC_NPROCESSORS_ONLN) - 1, &n))
				return -1;
			else
				o->pin = (int)n;
		} else if (!strcmp(a, "--workers")) {
			if (parse_workers(o, v))
				return -1;
		} else if (!strcmp(a, "--workloads")) {
			if (parse_workloads(o, v))
				return -1;
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
	/* the tls rows run on loopback: not when the links asked for exclude it */
	if (!in_list(o->links, "loopback"))
		o->wl &= ~(1u << W_TLS);
	if (o->wl & (1u << W_REAL))
		o->real = 1;
	o->wl &= ~(1u << W_REAL);
	if (o->quick) {
		if (!given(argc, argv, "--seconds"))
			o->seconds = 1;
		if (!o->cases)
			o->cases = "direct,copy,splice,auto,haproxy";
		if (!given(argc, argv, "--links"))
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
	if (o->base_cases && !o->nbase) {
		fprintf(stderr, "splicer bench: option '--baseline-cases' needs --baseline\n");
		return -1;
	}
	for (const char *p = o->base_cases; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int known = 0;
		for (size_t k = 0; k < NCASES; k++)
			known |= all_cases[k].kind == PX_SPLICER && strlen(all_cases[k].name) == len &&
				 !strncmp(all_cases[k].name, p, len);
		if (!known) {
			fprintf(stderr, "splicer bench: option '--baseline-cases': '%.*s' is not a splicer "
				"case (see splicer bench --help)\n", (int)len, p);
			return -1;
		}
		p = comma ? comma + 1 : p + len;
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
static struct bench_real *cleanup_real;

/* Namespaces are system-wide: an interrupted run must not leave them, nor
 * the real clients' servers and their temp dir. */
static void on_signal(int sig)
{
	for (int l = 0; l < cleanup_nlinks; l++)
		bench_link_teardown(&cleanup_links[l]);
	if (cleanup_real)
		bench_real_stop(cleanup_real);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* The case-links-workers of the run, skipped ones included; returns how
 * many, and adds the seconds of work of one repetition to *work. */
/* Whether case c is selected on link l (--cases, else the link's default). */
static int case_selected(const struct bench_case *c, const struct bench_opts *o,
			 const struct bench_link *l)
{
	const char *sel = o->cases ? o->cases : l->mtu ? VETH_CASES : NULL;

	return sel ? in_list(sel, c->name) : peer_kind_selected(c, o->peers);
}

/* The cases the baselines run: --baseline-cases, else the subject (auto
 * when it runs, else the first splicer case); "" when none. */
static const char *baseline_cases(const struct bench_opts *o, const struct bench_link *links, int nlinks)
{
	const char *first = NULL;

	if (o->base_cases)
		return o->base_cases;
	for (size_t i = 0; i < NCASES; i++)
		for (int l = 0; l < nlinks; l++)
			if (all_cases[i].kind == PX_SPLICER && case_selected(&all_cases[i], o, &links[l])) {
				if (!strcmp(all_cases[i].name, "auto"))
					return "auto";
				if (!first)
					first = all_cases[i].name;
			}
	return first ? first : "";
}

/* One case-link-workers of the plan (a twin when t is not NULL). */
static void plan_one(struct case_run *cr, const struct bench_case *c, const struct bench_opts *o,
		     struct bench_link *l, struct bench_sink *sink, unsigned workers, const char *skip)
{
	*cr = (struct case_run){ .c = c, .link = l, .sink = sink, .workers = workers,
				 .bulk_only = l->mtu != 0,
				 .skip = skip ? skip : bench_case_unavailable(c) };
	if (o->nworkers > 1 && c->kind != PX_DIRECT)
		snprintf(cr->label, sizeof(cr->label), "%s w%u", c->name, cr->workers);
	else
		snprintf(cr->label, sizeof(cr->label), "%s", c->name);
	if (!cr->skip && (o->cases || l->mtu) && !o->quick && c->kind > PX_SPLICER &&
	    !peer_kind_selected(c, o->peers))
		cr->skip = "not in --peers";
}

static int plan_runs(struct case_run *runs, const struct bench_opts *o, struct bench_link *links,
		     int nlinks, struct bench_sink **sinks, const char *const *link_skip, double *work,
		     int *active)
{
	static struct bench_twin twins[NCASES][MAX_BASELINES];
	static char twin_why[NCASES][MAX_BASELINES][PATH_MAX + 100];
	const char *bcases = o->base_cases ? o->base_cases : "";
	int n = 0;

	for (int l = 0; l < nlinks; l++) {
		for (size_t i = 0; i < NCASES; i++) {
			const struct bench_case *c = &all_cases[i];
			int nb = c->kind == PX_SPLICER && in_list(bcases, c->name) ? o->nbase : 0;
			const char *bskip[MAX_BASELINES];
			if (!case_selected(c, o, &links[l]))
				continue;
			for (int b = 0; b < nb; b++)
				bskip[b] = bench_baseline_twin(&twins[i][b], c, &o->base[b], twin_why[i][b],
							       sizeof(twin_why[i][b]));
			/* direct has no workers: once; each twin right after its case */
			for (int w = 0; w < (c->kind == PX_DIRECT ? 1 : o->nworkers); w++)
				for (int b = -1; b < nb && n < MAX_RUNS; b++) {
					struct case_run *cr = &runs[n++];
					plan_one(cr, b < 0 ? c : &twins[i][b].c, o, &links[l], sinks[l],
						 o->workers[w], link_skip[l] ? link_skip[l] : b < 0 ? NULL : bskip[b]);
					if (!cr->skip) {
						++*active;
						*work += case_work(cr, o);
					}
				}
		}
	}
	return n;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_opts o;
	static struct case_run runs[MAX_RUNS];
	struct bench_link links[MAX_LINKS];
	struct bench_sink *sinks[MAX_LINKS] = { 0 };
	const char *link_skip[MAX_LINKS] = { 0 };
	static char link_why[MAX_LINKS][300];
	static struct bench_real real;
	static struct file_bench fb;
	static struct tls_bench tb;
	char err[256];
	int n = 0, nlinks = 0, active = 0, failed = 0, r;
	uint64_t verified = 0, mism = 0;
	double t_start, done_work = 0, all_work = 0;

	for (int i = 1; i < argc; i++) { /* rate limits, idle memory: tables of their own */
		if (!strcmp(argv[i], "--pacing"))
			return bench_pacing_main(argc, argv);
		if (!strcmp(argv[i], "--idle"))
			return bench_idle_main(argc, argv);
		if (!strcmp(argv[i], "--upgrade"))
			return bench_upgrade_main(argc, argv);
	}
	if ((r = parse_opts(&o, argc, argv)))
		return r > 0 ? 0 : 2;
	signal(SIGPIPE, SIG_IGN);
	for (const char *p = o.links; *p && nlinks < MAX_LINKS;) {
		const char *comma = strchr(p, ',');
		char name[64];
		snprintf(name, sizeof(name), "%.*s", comma ? (int)(comma - p) : (int)strlen(p), p);
		/* veth links run the bulk workloads only */
		if (!bench_link_find(name)->mtu || WL(&o, W_BULK1) || WL(&o, W_BULK4))
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
	if (o.nbase)
		o.base_cases = baseline_cases(&o, links, nlinks);
	/* only the tls rows: no case to run */
	if ((o.wl & CASE_WORKLOADS) || o.real)
		n = plan_runs(runs, &o, links, nlinks, sinks, link_skip, &all_work, &active);
	if (WL(&o, W_TLS) && !bench_tls_setup(&tb, o.seconds, o.workers[0], o.conns, o.pin,
					      in_list(o.peers, "haproxy"), o.base, o.nbase))
		all_work += bench_tls_work(&tb);
	for (int l = 0; l < nlinks; l++)
		if (link_skip[l])
			fprintf(stderr, "splicer bench: link %s skipped: %s\n", links[l].name, link_skip[l]);
	if (o.real) {
		cleanup_real = &real;
		bench_real_start(&real, "127.0.0.1");
		if (real.redis_skip[0])
			fprintf(stderr, "splicer bench: --real: redis skipped: %s\n", real.redis_skip);
		if (real.pg_skip[0])
			fprintf(stderr, "splicer bench: --real: pgbench skipped: %s\n", real.pg_skip);
	}
	printf("splicer bench: %d case-links x %d reps, workloads of %.1f s, proxies with %u", active,
	       o.reps, o.seconds, o.workers[0]);
	for (int k = 1; k < o.nworkers; k++)
		printf(",%u", o.workers[k]);
	printf(" worker(s), %u connections for rr and conn\n", o.conns);
	for (int b = 0; b < o.nbase; b++)
		printf("baseline %s: %s%s%s%s, beside %s\n", o.base[b].name, o.base[b].path,
		       o.base[b].rev[0] ? " (" : "", o.base[b].rev, o.base[b].rev[0] ? ")" : "",
		       o.base_cases[0] ? o.base_cases : "no case of this run");
	fflush(stdout);
	all_work *= o.reps;
	t_start = bench_now();
	for (int rep = 0; rep < o.reps; rep++) {
		for (int i = 0; i < n; i++) {
			struct case_run *cr = &runs[i];
			double elapsed = bench_now() - t_start, eta;
			if (cr->skip)
				continue;
			/* ETA: the work left at the pace measured so far */
			eta = done_work > 0 ? elapsed / done_work * (all_work - done_work) : all_work - done_work;
			if (run_case(cr, &o, &real, rep, eta)) {
				progress_end();
				fprintf(stderr, "splicer bench: %s on %s, rep %d: %s\n", cr->label,
					cr->link->name, rep + 1, cr->fail);
				failed = 1;
			}
			done_work += case_work(cr, &o);
			cr->nrep = rep + 1;
		}
		if (WL(&o, W_TLS) && !tb.skip[0]) {
			if (isatty(STDERR_FILENO))
				fprintf(stderr, "\r\033[K[rep %d/%d] tls", rep + 1, o.reps);
			else
				fprintf(stderr, "splicer bench: rep %d/%d, tls\n", rep + 1, o.reps);
			failed |= bench_tls_rep(&tb, rep) != 0;
			done_work += bench_tls_work(&tb);
		}
	}
	progress_end();
	if (o.real) {
		bench_real_stop(&real);
		cleanup_real = NULL;
	}
	if (o.files && !bench_file_setup(&fb, o.files))
		for (int rep = 0; rep < o.reps; rep++)
			failed |= bench_file_rep(&fb, rep) != 0;
	if (o.files)
		bench_file_finish(&fb);
	if (WL(&o, W_TLS))
		bench_tls_finish(&tb);
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
	bench_report(stdout, 0, runs, n, links, nlinks, &o);
	if (n)
		print_legend(stdout, 0, runs, n, &o);
	if (o.files)
		bench_file_print(&fb);
	if (WL(&o, W_TLS))
		bench_tls_print(stdout, 0, &tb);
	bench_conclusions(stdout, 0, runs, n, links, nlinks, &o);
	if (WL(&o, W_TLS))
		bench_tls_conclusions(stdout, 0, &tb);
	printf("\nverified: %llu bytes at the sink, %llu mismatches; %.0f s\n",
	       (unsigned long long)verified, (unsigned long long)mism, bench_now() - t_start);
	if (o.json && write_json(o.json, runs, n, &o, &fb, &tb, verified, mism)) {
		fprintf(stderr, "splicer bench: cannot write %s: %s\n", o.json, strerror(errno));
		failed = 1;
	}
	if (o.chart && bench_chart(o.chart, runs, n, links, nlinks)) {
		fprintf(stderr, "splicer bench: cannot draw %s (is gnuplot installed? make bench-deps)\n",
			o.chart);
		failed = 1;
	}
	if (o.doc && write_doc(o.doc, argc, argv, runs, n, links, nlinks, &o, &tb, verified, mism,
			       bench_now() - t_start)) {
		fprintf(stderr, "splicer bench: cannot write %s: %s\n", o.doc, strerror(errno));
		failed = 1;
	}
	return failed || mism ? 1 : 0;
}
