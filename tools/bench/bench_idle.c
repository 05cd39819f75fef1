/* SPDX-License-Identifier: MIT */
/* bench_idle: see bench_idle.h. */
#define _GNU_SOURCE
#include "bench_idle.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_proxy.h"
#include "bench_sessions.h"
#include "bench_traffic.h"
#include "json.h"
#include "stats.h"

#define ID_MAX_SIZES 4
#define ID_MAX_CASES 12
#define ID_MAX_REPS  9
#define ID_SETTLE_MS 1000 /* after the last session opened: lazy frees done */

/* ---- what the machine holds --------------------------------------------- */

struct mem_sample {
	long rss_kib;     /* the proxy's processes */
	long slab_kib;    /* the kernel's slab (sockets, files, epoll items, pipes' rings) */
	int sockets, pipes; /* descriptors the proxy holds */
};

static long meminfo_kib(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	size_t k = strlen(key);
	long v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, k) && line[k] == ':')
			v = atol(line + k + 1);
	if (f)
		fclose(f);
	return v;
}

/* The sockets and pipes among the descriptors of the pids in list
 * ("PID,PID,..."). */
static void count_fds(const char *list, int *sockets, int *pipes)
{
	char copy[1024], *save, *t;

	*sockets = *pipes = 0;
	snprintf(copy, sizeof(copy), "%s", list);
	for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char dir[64], path[340], to[64];
		struct dirent *d;
		DIR *dp;
		snprintf(dir, sizeof(dir), "/proc/%s/fd", t);
		if (!(dp = opendir(dir)))
			continue;
		while ((d = readdir(dp))) {
			snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
			ssize_t n = readlink(path, to, sizeof(to) - 1);
			if (n <= 0)
				continue;
			to[n] = 0;
			*sockets += !strncmp(to, "socket:", 7);
			*pipes += !strncmp(to, "pipe:", 5);
		}
		closedir(dp);
	}
}

static void sample(pid_t pid, struct mem_sample *m)
{
	char list[1024];

	m->rss_kib = pid ? bench_tree_rss_kib(pid) : 0;
	m->slab_kib = meminfo_kib("Slab");
	bench_tree_pids(pid, list, sizeof(list));
	if (pid)
		count_fds(list, &m->sockets, &m->pipes);
	else
		m->sockets = m->pipes = 0;
}

/* ---- one measurement ------------------------------------------------------ */

struct idle_case {
	const char *name;
	struct bench_case c;
};

/* The same room for 8,000 sessions in every proxy, within `ulimit -n`
 * 20,000: splicer's automatic max-conns leaves fds for a pipe per direction
 * (4,981 sessions here), HAProxy's bench config has maxconn 7500 for its
 * splice modes' pipes (bench/haproxy-idle.cfg: 8500). Neither pipes nor
 * splicing matter to idle sessions. */
static const struct idle_case known[] = {
	{ "direct", { .name = "direct", .kind = PX_DIRECT } },
	{ "copy", { .name = "copy", .kind = PX_SPLICER,
		    .opts = { "--engine", "copy", "--max-conns", "8500", NULL } } },
	{ "splice", { .name = "splice", .kind = PX_SPLICER,
		      .opts = { "--engine", "splice", "--max-conns", "8500", NULL } } },
	{ "auto", { .name = "auto", .kind = PX_SPLICER,
		    .opts = { "--engine", "auto", "--max-conns", "8500", NULL } } },
	{ "uring", { .name = "uring", .kind = PX_SPLICER,
		     .opts = { "--engine", "uring", "--max-conns", "8500", NULL } } },
	{ "sockmap", { .name = "sockmap", .kind = PX_SPLICER,
		       .opts = { "--engine", "sockmap", "--max-conns", "8500", NULL } } },
	{ "haproxy", { .name = "haproxy", .kind = PX_HAPROXY,
		       .opts = { "conf:haproxy-idle.cfg", NULL } } },
	{ "nginx", { .name = "nginx", .kind = PX_NGINX } },
};
#define NKNOWN (sizeof(known) / sizeof(known[0]))

struct idle_fig {
	double rss, kernel, total;   /* KiB per session (kernel: less direct's) */
	double sockets, pipes;       /* descriptors per session */
	double open_s;               /* seconds to open them all */
};

struct idle_row {
	const struct idle_case *ic;
	unsigned sessions;
	int nrep;
	struct idle_fig rep[ID_MAX_REPS];
	struct idle_fig med;
	char err[240];
};

/* One repetition of one row: the proxy up, a sample, n sessions, a sample
 * once they idle, all closed, the proxy down. The kernel figure is raw
 * here (direct's is subtracted once every row has run). */
static int measure(struct idle_row *row, struct bench_holder *h, struct idle_fig *f)
{
	struct bench_proxy p;
	struct mem_sample a, b;
	char err[256];
	int *fds = calloc(row->sessions, sizeof(int)), r = -1;

	if (!fds) {
		snprintf(row->err, sizeof(row->err), "out of memory");
		return -1;
	}
	if (bench_proxy_start(&p, &row->ic->c, h->addr, "127.0.0.1", 1, err, sizeof(err))) {
		snprintf(row->err, sizeof(row->err), "%.200s", err);
		free(fds);
		return -1;
	}
	bench_sleep_ms(200);
	sample(p.pid, &a);
	double t0 = bench_now();
	if (bench_sessions_open(&p.ss, p.len, row->sessions, fds, row->err, sizeof(row->err)) == 0) {
		f->open_s = bench_now() - t0;
		bench_sleep_ms(ID_SETTLE_MS);
		sample(p.pid, &b);
		double n = row->sessions;
		f->rss = (double)(b.rss_kib - a.rss_kib) / n;
		/* not TCP's buffer pages (/proc/net/sockstat): an idle session's queues are
		 * empty, and the machine's other traffic moves them by hundreds of MB */
		f->kernel = (double)(b.slab_kib - a.slab_kib) / n;
		if (getenv("SPLICER_IDLE_DEBUG"))
			fprintf(stderr, "\n%s %u: rss %ld -> %ld KiB, slab %ld -> %ld KiB\n",
				row->ic->name, row->sessions, a.rss_kib, b.rss_kib, a.slab_kib, b.slab_kib);
		f->sockets = (double)(b.sockets - a.sockets) / n;
		f->pipes = (double)(b.pipes - a.pipes) / n;
		r = 0;
	}
	bench_sessions_close(fds, row->sessions, h);
	bench_proxy_stop(&p);
	free(fds);
	return r;
}

/* ---- the run ---------------------------------------------------------------- */

static double med_of(const struct idle_row *r, size_t off)
{
	return stats_median_field(r->rep, sizeof(r->rep[0]), (size_t)r->nrep, off);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: splicer bench --idle [--sessions N[,N...]] [--cases LIST] [--reps N] [--json FILE]\n"
		"  --sessions LIST  idle sessions held at once (default 1000,8000; at most 9000: each\n"
		"                   takes two descriptors in the bench and two in the proxy)\n"
		"  --cases LIST     among direct,copy,splice,auto,uring,sockmap,haproxy,nginx\n"
		"                   (default: direct,copy,splice,auto,uring,haproxy,nginx; direct is\n"
		"                   always run: the kernel's cost of the client and backend sockets)\n"
		"  --reps N         repetitions, interleaved (default 3)\n"
		"  --json FILE      the rows as JSON too\n");
}

static const struct idle_case *find_case(const char *name)
{
	for (size_t i = 0; i < NKNOWN; i++)
		if (!strcmp(known[i].name, name))
			return &known[i];
	return NULL;
}

/* The better (lower) total per session of HAProxy and nginx at n sessions. */
static double best_peer(const struct idle_row *rows, unsigned nrows, unsigned n)
{
	double best = NAN;

	for (unsigned k = 0; k < nrows; k++)
		if (rows[k].sessions == n && rows[k].nrep &&
		    (rows[k].ic->c.kind == PX_HAPROXY || rows[k].ic->c.kind == PX_NGINX) &&
		    (isnan(best) || rows[k].med.total < best))
			best = rows[k].med.total;
	return best;
}

/* The goal of doc/performance.md: auto's memory per idle session at the
 * most sessions measured, at most 0.7x the better peer's. */
static void print_goal(const struct idle_row *rows, unsigned nrows)
{
	const struct idle_row *a = NULL;

	for (unsigned i = 0; i < nrows; i++)
		if (!strcmp(rows[i].ic->name, "auto") && rows[i].nrep &&
		    (!a || rows[i].sessions > a->sessions))
			a = &rows[i];
	if (!a)
		return;
	double best = best_peer(rows, nrows, a->sessions), x = best > 0 ? a->med.total / best : NAN;
	if (isnan(x))
		printf("\nGoal: auto's memory per idle session <= 0.7x the better of HAProxy and "
		       "nginx: not measured (run them beside it)\n");
	else
		printf("\nGoal: auto's memory per idle session at %u sessions <= 0.7x the better of "
		       "HAProxy and nginx: %.2fx, %s\n", a->sessions, x, x <= 0.7 ? "met" : "not met");
}

static void print_table(struct idle_row *rows, unsigned nrows)
{
	printf("| case | sessions | proxy RSS KiB/session | kernel KiB/session | total KiB/session | "
	       "x best peer | sockets/session | pipes/session | open s |\n"
	       "|---|---|---|---|---|---|---|---|---|\n");
	for (unsigned i = 0; i < nrows; i++) {
		struct idle_row *r = &rows[i];
		if (r->ic->c.kind == PX_DIRECT)
			continue;
		if (!r->nrep) {
			printf("| %s | %u | not run: %s |\n", r->ic->name, r->sessions, r->err);
			continue;
		}
		double best = best_peer(rows, nrows, r->sessions);
		char x[32] = "-";
		if (!isnan(best) && best > 0)
			snprintf(x, sizeof(x), "%.2fx", r->med.total / best);
		printf("| %s | %u | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.1f |\n", r->ic->name,
		       r->sessions, r->med.rss, r->med.kernel, r->med.total, x, r->med.sockets,
		       r->med.pipes, r->med.open_s);
	}
}

static int write_json(const char *path, struct idle_row *rows, unsigned nrows, int reps)
{
	FILE *f = fopen(path, "we");
	struct json j;

	if (!f) {
		fprintf(stderr, "splicer bench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	json_init(&j, f);
	json_obj_begin(&j, NULL);
	json_int(&j, "reps", reps);
	json_arr_begin(&j, "rows");
	for (unsigned i = 0; i < nrows; i++) {
		json_obj_begin(&j, NULL);
		json_str(&j, "case", rows[i].ic->name);
		json_int(&j, "sessions", rows[i].sessions);
		if (!rows[i].nrep) {
			json_str(&j, "error", rows[i].err);
		} else {
			json_num(&j, "proxy_rss_kib_per_session", rows[i].med.rss);
			json_num(&j, "kernel_kib_per_session", rows[i].med.kernel);
			json_num(&j, "total_kib_per_session", rows[i].med.total);
			json_num(&j, "sockets_per_session", rows[i].med.sockets);
			json_num(&j, "pipes_per_session", rows[i].med.pipes);
			json_num(&j, "open_seconds", rows[i].med.open_s);
		}
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	int bad = json_finish(&j) != 0;
	fclose(f);
	return bad ? -1 : 0;
}

int bench_idle_main(int argc, char **argv)
{
	unsigned sizes[ID_MAX_SIZES] = { 1000, 8000 }, nsizes = 2, nrows = 0;
	const struct idle_case *cases[ID_MAX_CASES];
	unsigned ncases = 0;
	int reps = 3, bad = 0;
	const char *json = NULL, *list = "direct,copy,splice,auto,uring,haproxy,nginx";
	static struct idle_row rows[ID_MAX_SIZES * ID_MAX_CASES];
	struct bench_holder h = { .lfd = -1 };

	for (int i = 2; i < argc; i++) { /* splicer bench ... */
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--idle")) {
			continue;
		} else if (!strcmp(a, "--sessions") && v) {
			int k = bench_sessions_parse(v, sizes, ID_MAX_SIZES);
			if (k < 0)
				return 2;
			nsizes = (unsigned)k, i++;
		} else if (!strcmp(a, "--cases") && v) {
			list = v, i++;
		} else if (!strcmp(a, "--reps") && v) {
			reps = atoi(v), i++;
			if (reps < 1 || reps > ID_MAX_REPS) {
				fprintf(stderr, "splicer bench: --reps %s: 1 to %d\n", v, ID_MAX_REPS);
				return 2;
			}
		} else if (!strcmp(a, "--json") && v) {
			json = v, i++;
		} else {
			usage();
			return 2;
		}
	}
	/* direct first, always: the client's and the backend's sockets */
	char copy[512], *save, *t;
	cases[ncases++] = &known[0];
	snprintf(copy, sizeof(copy), "%s", list);
	for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const struct idle_case *c = find_case(t);
		if (!c) {
			fprintf(stderr, "splicer bench: --cases: unknown case '%s' for --idle\n", t);
			usage();
			return 2;
		}
		if (c != &known[0] && ncases < ID_MAX_CASES)
			cases[ncases++] = c;
	}
	unsigned most = 0;
	for (unsigned s = 0; s < nsizes; s++)
		most = sizes[s] > most ? sizes[s] : most;
	if (bench_sessions_fit(most, "--idle"))
		return 2;
	signal(SIGPIPE, SIG_IGN);
	if (bench_holder_start(&h)) {
		fprintf(stderr, "splicer bench: the backend: %s\n", strerror(errno));
		return 1;
	}
	for (unsigned s = 0; s < nsizes; s++)
		for (unsigned c = 0; c < ncases; c++) {
			rows[nrows].ic = cases[c];
			rows[nrows].sessions = sizes[s];
			const char *why = bench_case_unavailable(&cases[c]->c);
			if (why)
				snprintf(rows[nrows].err, sizeof(rows[nrows].err), "%s", why);
			nrows++;
		}
	/* interleaved: every row once per repetition, so drift spreads */
	for (int rep = 0; rep < reps; rep++)
		for (unsigned i = 0; i < nrows; i++) {
			struct idle_row *r = &rows[i];
			if (r->err[0] && !r->nrep)
				continue;
			fprintf(stderr, "\r\033[Kidle: rep %d/%d, %s, %u sessions", rep + 1, reps,
				r->ic->name, r->sessions);
			if (measure(r, &h, &r->rep[r->nrep]) == 0)
				r->nrep++;
		}
	fprintf(stderr, "\r\033[K");
	/* the kernel's part of a proxied session: less what direct's sockets took */
	for (unsigned i = 0; i < nrows; i++) {
		struct idle_row *r = &rows[i];
		double direct = NAN;
		for (unsigned k = 0; k < nrows; k++)
			if (rows[k].ic->c.kind == PX_DIRECT && rows[k].sessions == r->sessions &&
			    rows[k].nrep)
				direct = med_of(&rows[k], offsetof(struct idle_fig, kernel));
		for (int k = 0; k < r->nrep; k++) {
			if (r->ic->c.kind != PX_DIRECT)
				r->rep[k].kernel -= isnan(direct) ? 0 : direct;
			r->rep[k].total = r->rep[k].rss + r->rep[k].kernel;
		}
		r->med.rss = med_of(r, offsetof(struct idle_fig, rss));
		r->med.kernel = med_of(r, offsetof(struct idle_fig, kernel));
		r->med.total = med_of(r, offsetof(struct idle_fig, total));
		r->med.sockets = med_of(r, offsetof(struct idle_fig, sockets));
		r->med.pipes = med_of(r, offsetof(struct idle_fig, pipes));
		r->med.open_s = med_of(r, offsetof(struct idle_fig, open_s));
		if (!r->nrep && !r->err[0])
			snprintf(r->err, sizeof(r->err), "no repetition ran");
		bad |= !r->nrep && r->ic->c.kind == PX_SPLICER;
	}
	printf("Idle sessions held at once on loopback, each having carried %d bytes each way; "
	       "median of %d interleaved repetitions. Proxy RSS: its processes' VmRSS; kernel: "
	       "slab, less what the same sessions cost without a proxy "
	       "(direct); x best peer: total against the better of HAProxy and nginx.\n\n",
	       BENCH_SESSION_MSG, reps);
	print_table(rows, nrows);
	print_goal(rows, nrows);
	if (json && write_json(json, rows, nrows, reps))
		bad = 1;
	bench_holder_stop(&h);
	return bad;
}
