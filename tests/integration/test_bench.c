/* SPDX-License-Identifier: MIT */
/* `splicer bench` smoke tests: a run must finish, the sink must have
 * verified every byte, and every figure of every case must be present and
 * positive (the proxy figures are null only for `direct`, which has none);
 * the output has its tables, conclusions, scaling and doc, and the TLS
 * passthrough rows theirs; a --baseline build runs beside its case with its
 * "x NAME" columns, never timed. */
#define _GNU_SOURCE
#include "harness.h"

#include <limits.h>
#include <stdio.h>
#include <math.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const bench_figs[] = {
	"bulk1_gbit_s", "bulk1_proxy_cpu_s_per_gb", "bulk1_machine_cpu_s_per_gb", "bulk1_syscalls_per_mb",
	"bulk4_gbit_s", "bulk4_proxy_cpu_s_per_gb", "bulk4_machine_cpu_s_per_gb", "bulk4_syscalls_per_mb",
	"rr_p50_us", "rr_p99_us", "rr_p999_us", "rr_round_trips_s", "conn_per_s", "conn_proxy_cpu_us",
	"conn_machine_cpu_us", "conn_load_cpu_us", "peak_rss_mib",
	"rr64_d1_req_s", "rr64_d1_proxy_cpu_us", "rr64_d1_machine_cpu_us", "rr64_d1_load_cpu_us",
	"rr64_d16_req_s", "rr64_d16_proxy_cpu_us", "rr64_d16_machine_cpu_us", "rr64_d16_load_cpu_us",
	"rr1k_d1_req_s", "rr1k_d1_proxy_cpu_us", "rr1k_d1_machine_cpu_us", "rr1k_d1_load_cpu_us",
	"rr1k_d16_req_s", "rr1k_d16_proxy_cpu_us", "rr1k_d16_machine_cpu_us", "rr1k_d16_load_cpu_us",
	NULL
};

static int proxy_only(const char *fig)
{
	return strstr(fig, "proxy") || strstr(fig, "syscalls") || strstr(fig, "rss");
}

static char *slurp(const char *path)
{
	static char buf[1 << 20];
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* The value of `fig` in the "median" object of case `name`; NAN if null, -1 if absent. */
static double median_of(const char *json, const char *name, const char *fig)
{
	char want[96];
	const char *c, *m, *end, *k;

	snprintf(want, sizeof want, "\"name\": \"%s\"", name);
	if (!(c = strstr(json, want)) || !(m = strstr(c, "\"median\"")) || !(end = strchr(m, '}')))
		return -1;
	snprintf(want, sizeof want, "\"%s\":", fig);
	if (!(k = strstr(m, want)) || k > end)
		return -1;
	k += strlen(want);
	while (*k == ' ')
		k++;
	if (!strncmp(k, "null", 4))
		return NAN;
	return strtod(k, NULL);
}

/* Every workload at tiny durations, with a --workers sweep, a doc and
 * the file rows: the structure of the output, not its speed. */
Test(integ, bench_quick_smoke, .init = h_init, .fini = h_fini, .timeout = 240)
{
	const char *bin = h_binary(0);
	char json[256], doc[256], *out = NULL, *err = NULL;
	snprintf(json, sizeof json, "%s/bench.json", h_tmpdir());
	snprintf(doc, sizeof doc, "%s/perf-results.md", h_tmpdir());
	const char *args[] = { "bench", "--quick", "--cases", "direct,copy,splice", "--seconds", "0.2",
			       "--reps", "2", "--conns", "8", "--workers", "1,2", "--ref", "splice",
			       "--files", "64m", "--json", json, "--doc", doc, NULL };
	int st = h_run_capture(bin, args, 200000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"splicer bench --quick failed (status %d):\n%s\n%s", st, out ? out : "", err ? err : "");
	const char *v = strstr(out, "verified: ");
	H_CHECK(v && strtoull(v + 10, NULL, 10) > 0 && strstr(v, " 0 mismatches"),
		"no verified bytes, or mismatches:\n%s", out);
	/* stderr is a pipe here: plain progress lines, no control characters */
	H_CHECK(strstr(err, "splicer bench: rep 2/2, loopback, splice w2") && !strchr(err, '\r') &&
			!strchr(err, '\033'),
		"progress off a terminal:\n%s", err);
	/* column groups name their workload; a conclusion per workload */
	H_CHECK(strstr(out, "- 1 stream -") && strstr(out, "- 4 streams -") &&
			strstr(out, "short connections x8") && strstr(out, "x splice"),
		"grouped headers missing:\n%s", out);
	const char *concl = strstr(out, "Conclusions: copy against splice");
	H_CHECK(concl, "no conclusions:\n%s", out);
	const char *lines[] = { "bulk, 1 stream: copy w1 ", "bulk, 4 streams: copy w1 ",
				"rr 8 conns, 64 B, depth 1: copy w1 ", "rr 8 conns, 64 B, depth 16: copy w1 ",
				"rr 8 conns, 1024 B, depth 1: copy w1 ", "rr 8 conns, 1024 B, depth 16: copy w1 ",
				"short connections, 8 at a time: copy w1 ", NULL };
	for (int i = 0; lines[i]; i++)
		H_CHECK(strstr(concl, lines[i]), "no conclusion '%s':\n%s", lines[i], concl);
	H_CHECK(strstr(out, "Scaling: each figure with N workers") && strstr(out, "rr 1k d16"),
		"no scaling table:\n%s", out);
	/* the TLS rows: both tables, the bulk conclusion, the handshake one when
	 * HAProxy is there to compare with */
	int haproxy = access("/usr/sbin/haproxy", X_OK) == 0;
	H_CHECK(strstr(out, "== TLS passthrough") && strstr(out, "- 1 TLS stream -") &&
			strstr(out, "handshakes x8") && strstr(err, "splicer bench: rep 2/2, tls"),
		"no TLS tables:\n%s\n%s", out, err);
	const char *tls = strstr(out, "Conclusions: TLS passthrough");
	H_CHECK(tls && strstr(tls, "tls bulk, 1 stream: the sni route ") &&
			(!haproxy || strstr(tls, "tls handshakes, 8 at a time: splicer's sni route ")),
		"no TLS conclusions:\n%s", out);

	char *buf = slurp(json);
	H_CHECK(buf, "no JSON written at %s", json);
	const char *cases[] = { "direct", "copy", "splice", NULL };
	for (int c = 0; cases[c]; c++)
		for (int i = 0; bench_figs[i]; i++) {
			double x = median_of(buf, cases[c], bench_figs[i]);
			if (!strcmp(cases[c], "direct") && proxy_only(bench_figs[i]))
				H_CHECK(isnan(x), "direct has a proxy figure %s = %g", bench_figs[i], x);
			else
				H_CHECK(x > 0, "case %s: figure %s is %g (absent: -1, null: nan)\n%s",
					cases[c], bench_figs[i], x, out);
		}
	H_CHECK(strstr(buf, "\"label\": \"copy w2\"") && strstr(buf, "\"conns\": 8"),
		"JSON lacks the sweep or the connection count");
	const char *w2 = strstr(buf, "\"label\": \"splice w2\""), *m = w2 ? strstr(w2, "\"median\"") : NULL;
	H_CHECK(m && strstr(m, "\"rr1k_d16_req_s\": ") && strtod(strstr(m, "\"rr1k_d16_req_s\": ") + 18,
								   NULL) > 0,
		"splice w2 has no positive rr figure");
	/* The file rows: every recv method into each target, every send method. */
	const char *files = strstr(buf, "\"files\"");
	H_CHECK(files && strstr(files, "\"bytes_per_run\": 67108864"), "no file rows in the JSON");
	const char *rows[] = { "recv-splice-null", "recv-vmsplice-tmpfs", "recv-copy-null",
			       "send-sendfile", "send-splice", "send-copy", NULL };
	for (int i = 0; rows[i]; i++) {
		char want[96];
		snprintf(want, sizeof want, "\"name\": \"%s\"", rows[i]);
		const char *r = strstr(files, want);
		H_CHECK(r, "file row %s missing from the JSON", rows[i]);
		const char *mb = strstr(r, "\"median_mib_s\":"), *c = strstr(r, "\"median_cpu_s_per_gib\":");
		H_CHECK(mb && c && strtod(mb + 15, NULL) > 0 && strtod(c + 23, NULL) > 0 &&
				(!strstr(r, "\"failed\"") || strstr(r, "\"failed\"") > mb),
			"file row %s: no positive MiB/s and CPU figures\n%s", rows[i], out);
	}
	H_CHECK(strstr(out, "== files: splicer recv / send"), "no file table in the output:\n%s", out);

	/* The TLS rows: every figure of every row present and positive. */
	const char *tjs = strstr(buf, "\"tls\"");
	H_CHECK(tjs && !strstr(tjs, "\"failed\""), "no TLS rows, or a failed one, in the JSON");
	const struct {
		const char *row, *figs[3];
	} trows[] = {
		{ "bulk-sni", { "gbit_s", "proxy_cpu_s_per_gb", "machine_cpu_s_per_gb" } },
		{ "bulk-plain", { "gbit_s", "proxy_cpu_s_per_gb", "machine_cpu_s_per_gb" } },
		{ "conn-sni", { "conn_per_s", "proxy_cpu_us", "machine_cpu_us" } },
		{ "conn-plain", { "conn_per_s", "proxy_cpu_us", "machine_cpu_us" } },
		{ "conn-haproxy-sni", { "conn_per_s", "proxy_cpu_us", "machine_cpu_us" } },
	};
	for (size_t i = 0; i < sizeof trows / sizeof trows[0]; i++) {
		if (!haproxy && strstr(trows[i].row, "haproxy"))
			continue;
		for (int k = 0; k < 3; k++) {
			double x = median_of(tjs, trows[i].row, trows[i].figs[k]);
			H_CHECK(x > 0, "tls row %s: %s is %g (absent: -1, null: nan)\n%s", trows[i].row,
				trows[i].figs[k], x, out);
		}
	}

	char *d = slurp(doc);
	H_CHECK(d && strstr(d, "# splicer bench: latest results") && strstr(d, "## Goals: ") &&
			strstr(d, "| rr 8 conns, 1024 B, depth 16: >= 1.25x requests/s at <= 0.8x the "
				  "machine's CPU per request | - | not measured |") &&
			strstr(d, "### Conclusions: copy against splice") &&
			strstr(d, "| case | 1 stream: Gbit/s [min-max] | 1 stream: x splice |") &&
			strstr(d, "### Conclusions: TLS passthrough") && strstr(d, "### TLS passthrough"),
		"the doc lacks goals, conclusions or tables:\n%s", d ? d : "(none)");
	free(out);
	free(err);
}

/* Without --files there are no file rows; a workload list runs only those. */
Test(integ, bench_proxy_rows_only, .init = h_init, .fini = h_fini, .timeout = 60)
{
	char *out = NULL, *err = NULL;
	const char *args[] = { "bench", "--cases", "direct,copy", "--workloads", "conn", "--reps", "1",
			       "--seconds", "0.2", "--conns", "4", NULL };
	int st = h_run_capture(h_binary(0), args, 50000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d:\n%s\n%s", st, out, err);
	H_CHECK(!strstr(out, "== files") && !strstr(out, "Bulk uploads") && !strstr(out, "veth") &&
			strstr(out, "short connections x4"),
		"only the short-connection table expected:\n%s", out);
	free(out);
	free(err);
}

/* --real: redis-benchmark and pgbench through a proxy, against servers the
 * bench starts and stops. */
Test(integ, bench_real_clients, .init = h_init, .fini = h_fini, .timeout = 180)
{
	if (access("/usr/bin/redis-server", X_OK) || access("/usr/bin/redis-benchmark", X_OK) ||
	    access("/usr/lib/postgresql/15/bin/postgres", X_OK))
		cr_skip_test("redis-server/redis-benchmark or PostgreSQL 15 not installed (make bench-deps)");
	char json[256], *out = NULL, *err = NULL;
	snprintf(json, sizeof json, "%s/bench-real.json", h_tmpdir());
	const char *args[] = { "bench", "--cases", "direct,copy", "--workloads", "real", "--reps", "1",
			       "--seconds", "0.2", "--conns", "4", "--json", json, NULL };
	int st = h_run_capture(h_binary(0), args, 170000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d:\n%s\n%s", st, out, err);
	H_CHECK(strstr(out, "Real clients: redis-benchmark"), "no real-client table:\n%s", out);
	char *buf = slurp(json);
	H_CHECK(buf, "no JSON at %s", json);
	const char *figs[] = { "redis_set_req_s", "redis_get_req_s", "redis_proxy_cpu_us", "pgbench_tps",
			       "pgbench_proxy_cpu_us", NULL };
	for (int i = 0; figs[i]; i++) {
		double x = median_of(buf, "copy", figs[i]);
		H_CHECK(x > 0, "copy: %s is %g\n%s\n%s", figs[i], x, out, err);
	}
	H_CHECK(median_of(buf, "direct", "pgbench_tps") > 0, "direct: no pgbench figure");
	free(out);
	free(err);
}

/* A veth link the bench builds in its own namespaces: bulk figures present
 * and positive, every byte verified, and no namespace left behind. */
Test(integ, bench_veth_link, .init = h_init, .fini = h_fini, .timeout = 120)
{
	if (geteuid() != 0)
		cr_skip_test("veth links need root (network namespaces)");
	const char *bin = h_binary(0);
	char json[256], *out = NULL, *err = NULL, *ns = NULL, *nserr = NULL;
	snprintf(json, sizeof json, "%s/bench-veth.json", h_tmpdir());
	const char *args[] = { "bench", "--links", "veth1500-nooffload", "--cases", "direct,splice",
			       "--reps", "1", "--seconds", "0.3", "--files", "off", "--json", json, NULL };
	int st = h_run_capture(bin, args, 100000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"splicer bench on veth failed (status %d):\n%s\n%s", st, out ? out : "", err ? err : "");
	H_CHECK(strstr(out, "== link veth1500-nooffload"), "no table for the link:\n%s", out);
	const char *v = strstr(out, "verified: ");
	H_CHECK(v && strtoull(v + 10, NULL, 10) > 0 && strstr(v, " 0 mismatches"),
		"no verified bytes, or mismatches:\n%s", out);

	FILE *f = fopen(json, "re");
	H_CHECK(f, "no JSON written at %s", json);
	static char buf[1 << 18];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	H_CHECK(strstr(buf, "\"link\": \"veth1500-nooffload\""), "JSON lacks the link name");
	double g = median_of(buf, "splice", "bulk1_gbit_s"), c = median_of(buf, "splice", "bulk1_proxy_cpu_s_per_gb");
	H_CHECK(g > 0 && c > 0, "splice over veth: %g Gbit/s, %g CPU-s/GB", g, c);
	H_CHECK(isnan(median_of(buf, "splice", "rr_p50_us")), "veth links run bulk only");

	const char *ip[] = { "netns", "list", NULL };
	st = h_run_capture("/usr/sbin/ip", ip, 10000, &ns, &nserr);
	H_CHECK(st == 0 && !strstr(ns, "sb"), "namespaces left behind:\n%s", ns);
	free(out);
	free(err);
	free(ns);
	free(nserr);
}

/* --baseline: another build (here this one, and an "old" one whose --help
 * lacks --sandbox) runs as CASE@NAME beside its case in every repetition.
 * Every table and conclusion has its "x NAME" column, both builds verify
 * every byte, and a case whose options the old build lacks is skipped for
 * it with the option named, not failed. Structure only, never a speed. */
Test(integ, bench_baseline_columns, .init = h_init, .fini = h_fini, .timeout = 240)
{
	char bin[PATH_MAX], script[2 * PATH_MAX + 300], json[256], doc[256], base[PATH_MAX + 16];
	char old[PATH_MAX + 16], *out = NULL, *err = NULL;
	H_CHECK(realpath(h_binary(0), bin), "realpath %s", h_binary(0));
	/* an older build: the same binary, but its --help knows no --sandbox */
	snprintf(script, sizeof script,
		 "#!/bin/sh\nif [ \"$1\" = --help ]; then '%s' --help | grep -v -e --sandbox; exit 0; fi\n"
		 "exec '%s' \"$@\"\n", bin, bin);
	const char *oldpath = h_conf_write("old-splicer", script);
	H_CHECK(chmod(oldpath, 0755) == 0, "chmod %s", oldpath);
	snprintf(base, sizeof base, "base=%s", bin);
	snprintf(old, sizeof old, "old=%s", oldpath);
	snprintf(json, sizeof json, "%s/bench-base.json", h_tmpdir());
	snprintf(doc, sizeof doc, "%s/perf-base.md", h_tmpdir());
	const char *args[] = { "bench", "--cases", "direct,auto,auto-nosandbox", "--links", "loopback",
			       "--workloads", "bulk1,rr,conn,tls", "--seconds", "0.5", "--reps", "2",
			       "--conns", "4", "--ref", "direct", "--baseline", base, "--baseline", old,
			       "--baseline-cases", "auto,auto-nosandbox", "--json", json, "--doc", doc,
			       NULL };
	int st = h_run_capture(h_binary(0), args, 200000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d:\n%s\n%s", st,
		out ? out : "", err ? err : "");
	const char *v = strstr(out, "verified: ");
	H_CHECK(v && strtoull(v + 10, NULL, 10) > 0 && strstr(v, " 0 mismatches"),
		"no verified bytes, or mismatches:\n%s", out);
	/* the twins ran in every repetition, right after their case */
	const char *order[] = { "rep 1/2, loopback, auto (", "rep 1/2, loopback, auto@base (",
				"rep 1/2, loopback, auto@old (", "rep 1/2, loopback, auto-nosandbox (",
				"rep 1/2, loopback, auto-nosandbox@base (", "rep 2/2, loopback, auto (",
				"rep 2/2, loopback, auto@base (", "rep 2/2, loopback, auto@old (", NULL };
	for (const char *at = err, **o = order; *o; o++)
		H_CHECK((at = strstr(at, *o)), "'%s' missing or out of order:\n%s", *o, err);
	H_CHECK(strstr(out, "auto-nosandbox@old: skipped: the baseline old (") &&
			strstr(out, ") has no --sandbox option"),
		"the old build's missing option is not a clear skip:\n%s", out);
	/* a column per baseline in every table, and its conclusions */
	const char *tables[] = { "Bulk uploads", "short connections x4", "Request/response, 4", NULL };
	for (int i = 0; tables[i]; i++) {
		const char *t = strstr(out, tables[i]), *hdr = t ? strstr(t, "x base") : NULL;
		H_CHECK(hdr && strstr(hdr, "x old") && strstr(hdr, "\n") > hdr,
			"table '%s' lacks its baseline columns:\n%s", tables[i], out);
	}
	const char *cb = strstr(out, "Conclusions: this build against the baseline base");
	const char *co = cb ? strstr(cb, "Conclusions: this build against the baseline old") : NULL;
	H_CHECK(cb && co && strstr(cb, "bulk, 1 stream: auto ") && strstr(cb, "auto@base's") &&
			strstr(cb, "short connections, 4 at a time: auto-nosandbox ") < co &&
			strstr(co, "short connections, 4 at a time: auto ") &&
			!strstr(co, ": auto-nosandbox "),
		"conclusions against each baseline, for each case that has a twin:\n%s", out);

	/* both builds' figures present and positive */
	char *buf = slurp(json);
	H_CHECK(buf, "no JSON at %s", json);
	const char *figs[] = { "bulk1_gbit_s", "bulk1_proxy_cpu_s_per_gb", "rr64_d1_req_s",
			       "rr64_d1_proxy_cpu_us", "conn_per_s", "conn_proxy_cpu_us", NULL };
	const char *runs[] = { "auto", "auto@base", "auto@old", "auto-nosandbox@base", NULL };
	for (int c = 0; runs[c]; c++)
		for (int i = 0; figs[i]; i++) {
			double x = median_of(buf, runs[c], figs[i]);
			H_CHECK(x > 0, "%s: %s is %g (absent: -1, null: nan)\n%s", runs[c], figs[i], x, out);
		}
	/* the TLS rows' twins too, with their columns */
	const char *tjs = strstr(buf, "\"tls\"");
	const char *trows[] = { "bulk-sni@base", "bulk-plain@old", "conn-sni@base", "conn-plain@old", NULL };
	for (int i = 0; trows[i]; i++)
		H_CHECK(tjs && median_of(tjs, trows[i], i < 2 ? "gbit_s" : "conn_per_s") > 0,
			"tls row %s: no positive rate\n%s", trows[i], out);
	const char *tt = strstr(out, "== TLS passthrough");
	H_CHECK(tt && strstr(tt, "x base") && strstr(tt, "x old") &&
			strstr(tt, "tls bulk, 1 stream: the sni route ") && strstr(tt, "bulk-sni@base's"),
		"the TLS tables lack their baseline columns or conclusions:\n%s", out);
	H_CHECK(strstr(buf, "\"baseline\": \"old\"") && strstr(buf, "\"baseline_of\": \"auto\"") &&
			strstr(buf, "\"baselines\": ["),
		"the JSON does not name the baselines");
	char *d = slurp(doc);
	H_CHECK(d && strstr(d, "| goal | measured | | baseline base | baseline old |") &&
			strstr(d, "- baseline `base`: ") &&
			strstr(d, "### Conclusions: this build against the baseline base") &&
			strstr(d, "| 1 stream: x base | 1 stream: x old |"),
		"the doc lacks its baseline columns:\n%s", d ? d : "(none)");
	free(out);
	free(err);
}

/* A baseline that is not there, or not a splicer, is a clear error before
 * anything runs. */
Test(integ, bench_baseline_bad_path, .init = h_init, .fini = h_fini)
{
	struct {
		const char *arg, *want;
	} bad[] = {
		{ "/nonexistent/splicer", "--baseline': /nonexistent/splicer: No such file or directory" },
		{ "/bin/true", "/bin/true does not look like splicer" },
		{ "a b=/bin/true", "invalid name 'a b'" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *out = NULL, *err = NULL;
		const char *args[] = { "bench", "--baseline", bad[i].arg, NULL };
		int st = h_run_capture(h_binary(0), args, 20000, &out, &err);
		H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(err, bad[i].want),
			"--baseline %s: status %d, stderr:\n%s", bad[i].arg, st, err);
		free(out);
		free(err);
	}
}

Test(integ, bench_rejects_unknown_link, .init = h_init, .fini = h_fini)
{
	char *out = NULL, *err = NULL;
	const char *args[] = { "bench", "--links", "ethernet", NULL };
	int st = h_run_capture(h_binary(0), args, 10000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 &&
			strstr(err, "unknown link 'ethernet'"),
		"status %d, stderr:\n%s", st, err);
	free(out);
	free(err);
}

/* --pacing: splicer's rate_limit_down rows (kernel pacing under the splice
 * engine) beside the unlimited one. Every limited row keeps under its
 * limit plus the 5 % the issue allows, and moves at least half of it (a
 * loaded machine still carries 100 Mbit/s on loopback); the CPU figure is
 * there. Shape and bounds, not speed. */
Test(integ, bench_pacing_rows, .init = h_init, .fini = h_fini, .timeout = 60)
{
	char json[256], *out = NULL, *err = NULL;
	snprintf(json, sizeof json, "%s/bench-pacing.json", h_tmpdir());
	const char *args[] = { "bench", "--pacing", "--rates", "10mbit,100mbit", "--seconds", "1",
			       "--peers", "none", "--json", json, NULL };
	int st = h_run_capture(h_binary(0), args, 50000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d:\n%s\n%s", st, out, err);
	H_CHECK(strstr(out, "| splicer  | none") && strstr(out, "| splicer  | 10mbit") &&
			strstr(out, "| splicer  | 100mbit") && !strstr(out, "nginx "),
		"rows expected for splicer only:\n%s", out);
	char *buf = slurp(json);
	H_CHECK(buf, "no JSON at %s", json);
	int limited = 0;
	for (const char *r = strstr(buf, "\"proxy\""); r; r = strstr(r + 1, "\"proxy\"")) {
		const char *l = strstr(r, "\"limit_bytes_per_s\":"), *a = strstr(r, "\"achieved_bytes_per_s\":"),
			   *c = strstr(r, "\"cpu_s_per_gb\":");
		H_CHECK(l && a && c, "a row without its figures:\n%s", buf);
		double lim = strtod(l + 20, NULL), got = strtod(a + 23, NULL), cpu = strtod(c + 15, NULL);
		H_CHECK(got > 0 && cpu > 0, "row at %g B/s: achieved %g, CPU %g s/GB", lim, got, cpu);
		if (lim > 0) {
			limited++;
			H_CHECK(got <= lim * 1.05 && got >= lim * 0.5,
				"limit %g B/s, achieved %g B/s (%+.1f %%)\n%s", lim, got,
				(got / lim - 1) * 100, out);
		}
	}
	H_CHECK(limited == 2, "%d limited rows in the JSON:\n%s", limited, buf);
	free(out);
	free(err);
}

/* `splicer bench MODE OPTION VALUE` for each {option, value, message} of
 * bad: exit 2 and the message on stderr. */
static void bad_options(const char *mode, const char *const (*bad)[3], size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char *out = NULL, *err = NULL;
		const char *args[] = { "bench", mode, bad[i][0], bad[i][1], NULL };
		int st = h_run_capture(h_binary(0), args, 10000, &out, &err);
		H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(err, bad[i][2]),
			"%s %s %s: status %d, stderr:\n%s", mode, bad[i][0], bad[i][1], st, err);
		free(out);
		free(err);
	}
}

Test(integ, bench_pacing_bad_options, .init = h_init, .fini = h_fini)
{
	static const char *const bad[][3] = { { "--peers", "haproxy", "--peers haproxy: nginx or none" },
					      { "--rates", "0", "--rates" },
					      { "--seconds", "0.1", "--seconds 0.1: 0.5 to 600" } };
	bad_options("--pacing", bad, sizeof bad / sizeof bad[0]);
}

/* --idle: the memory of idle sessions. The figures that do not depend on
 * the machine's other work: an idle session of every engine holds no pipe
 * (an idle direction gives its pipe back) and no buffer (RSS per session far
 * below one 64 KiB copy buffer: buffers are held only while bytes are in
 * flight), and two sockets (its client's and its backend's). Kernel slab is
 * machine-wide and moves with other work: only its presence is checked. */
Test(integ, bench_idle_rows, .init = h_init, .fini = h_fini, .timeout = 120)
{
	char json[256], *out = NULL, *err = NULL;
	snprintf(json, sizeof json, "%s/bench-idle.json", h_tmpdir());
	const char *args[] = { "bench", "--idle", "--sessions", "300", "--cases", "copy,splice,auto",
			       "--reps", "1", "--json", json, NULL };
	int st = h_run_capture(h_binary(0), args, 100000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d:\n%s\n%s", st, out, err);
	char *buf = slurp(json);
	H_CHECK(buf, "no JSON at %s", json);
	int rows = 0;
	for (const char *r = strstr(buf, "\"case\""); r; r = strstr(r + 1, "\"case\"")) {
		char name[32] = "";
		sscanf(r, "\"case\": \"%31[^\"]\"", name);
		if (!strcmp(name, "direct"))
			continue;
		const char *rss = strstr(r, "\"proxy_rss_kib_per_session\":"),
			   *k = strstr(r, "\"kernel_kib_per_session\":"),
			   *so = strstr(r, "\"sockets_per_session\":"), *pi = strstr(r, "\"pipes_per_session\":");
		H_CHECK(rss && k && so && pi, "row %s without its figures:\n%s", name, buf);
		/* strtod skips the space after the colon */
		double vrss = strtod(strchr(rss + 1, ':') + 1, NULL), vso = strtod(strchr(so + 1, ':') + 1, NULL),
		       vpi = strtod(strchr(pi + 1, ':') + 1, NULL);
		H_CHECK(vrss > 0 && vrss < 16, "%s: %.2f KiB of RSS per idle session (a buffer held?)\n%s",
			name, vrss, out);
		H_CHECK(vso > 1.9 && vso < 2.1 && vpi < 0.05,
			"%s: %.2f sockets and %.2f pipes per idle session\n%s", name, vso, vpi, out);
		rows++;
	}
	H_CHECK(rows == 3, "%d proxy rows in the JSON:\n%s", rows, buf);
	free(out);
	free(err);
}

Test(integ, bench_idle_bad_options, .init = h_init, .fini = h_fini)
{
	static const char *const bad[][3] = {
		{ "--sessions", "5", "--sessions 5: up to 4 counts, each 10 to 9000" },
		{ "--cases", "socat", "unknown case 'socat' for --idle" },
		{ "--reps", "0", "--reps 0: 1 to 9" } };
	bad_options("--idle", bad, sizeof bad / sizeof bad[0]);
}

/* A figure of the JSON row that starts at r ("key": number), or NAN. */
static double row_num(const char *r, const char *key)
{
	char k[64];
	const char *end = strstr(r + 1, "\"case\""), *p;

	snprintf(k, sizeof k, "\"%s\":", key);
	p = strstr(r, k);
	if (!p || (end && p > end))
		return NAN;
	return strtod(p + strlen(k), NULL);
}

/* --upgrade: the hand-over's cost. What does not depend on the machine's
 * load: every session is handed over (auto) or stays (drain), none fails
 * its round trip afterwards, and the old process is gone well within a
 * second of its "serves now" (the bound). */
Test(integ, bench_upgrade_rows, .init = h_init, .fini = h_fini, .timeout = 120)
{
	char json[256], *out = NULL, *err = NULL;
	snprintf(json, sizeof json, "%s/bench-upgrade.json", h_tmpdir());
	const char *args[] = { "bench", "--upgrade", "--sessions", "50", "--reps", "1", "--cases", "auto",
			       "--json", json, NULL };
	int st = h_run_capture(h_binary(0), args, 100000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d:\n%s\n%s", st, out, err);
	H_CHECK(strstr(out, "| auto | 50 |") && strstr(out, "| drain | 50 |"), "rows:\n%s", out);
	char *buf = slurp(json);
	H_CHECK(buf, "no JSON at %s", json);
	int rows = 0;
	for (const char *r = strstr(buf, "\"case\""); r; r = strstr(r + 1, "\"case\"")) {
		char name[32] = "";
		sscanf(r, "\"case\": \"%31[^\"]\"", name);
		int drain = !strcmp(name, "drain");
		double handed = row_num(r, "handed"), kept = row_num(r, "drained"),
		       failed = row_num(r, "failed"), ctl = row_num(r, "ctl_upgrade_ms"),
		       lived = row_num(r, "old_lived_after_ready_ms");
		H_CHECK(handed == (drain ? 0 : 50) && kept == (drain ? 50 : 0),
			"%s: %.0f handed, %.0f drained\n%s", name, handed, kept, out);
		H_CHECK(failed == 0, "%s: %.0f sessions failed after the upgrade\n%s", name, failed, out);
		H_CHECK(ctl > 0 && ctl < 10000, "%s: ctl upgrade took %.1f ms\n%s", name, ctl, out);
		if (!drain)
			H_CHECK(lived >= 0 && lived < 1000, "%s: the old process lived %.0f ms after ready\n%s",
				name, lived, out);
		rows++;
	}
	H_CHECK(rows == 2, "%d rows in the JSON:\n%s", rows, buf);
	free(out);
	free(err);
}

Test(integ, bench_upgrade_bad_options, .init = h_init, .fini = h_fini)
{
	static const char *const bad[][3] = {
		{ "--sessions", "5", "--sessions 5: up to 4 counts, each 10 to 9000" },
		{ "--cases", "haproxy", "unknown case 'haproxy' for --upgrade" },
		{ "--reps", "0", "--reps 0: 1 to 9" },
		{ "--frobnicate", "1", "usage: splicer bench --upgrade" } };
	bad_options("--upgrade", bad, sizeof bad / sizeof bad[0]);
}
