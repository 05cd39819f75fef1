/* `splicer bench --quick` as a smoke test: it must finish, the sink must have
 * verified every byte, and every figure of every case must be present and
 * positive (the proxy figures are null only for `direct`, which has none). */
#define _GNU_SOURCE
#include "harness.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *const bench_figs[] = {
	"bulk1_gbit_s", "bulk1_proxy_cpu_s_per_gb", "bulk1_machine_cpu_s_per_gb", "bulk1_syscalls_per_mb",
	"bulk4_gbit_s", "bulk4_proxy_cpu_s_per_gb", "bulk4_machine_cpu_s_per_gb", "bulk4_syscalls_per_mb",
	"rr_p50_us", "rr_p99_us", "rr_p999_us", "rr_round_trips_s", "conn_per_s", "conn_proxy_cpu_us",
	"peak_rss_mib", NULL
};

static int proxy_only(const char *fig)
{
	return strstr(fig, "proxy") || strstr(fig, "syscalls") || strstr(fig, "rss");
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

Test(integ, bench_quick_smoke, .init = h_init, .fini = h_fini, .timeout = 240)
{
	const char *bin = h_binary(0);
	char json[256], *out = NULL, *err = NULL;
	snprintf(json, sizeof json, "%s/bench.json", h_tmpdir());
	const char *args[] = { "bench", "--quick", "--cases", "direct,copy,splice", "--seconds", "0.5",
			       "--json", json, NULL };
	int st = h_run_capture(bin, args, 200000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"splicer bench --quick failed (status %d):\n%s\n%s", st, out ? out : "", err ? err : "");
	const char *v = strstr(out, "verified: ");
	H_CHECK(v && strtoull(v + 10, NULL, 10) > 0 && strstr(v, " 0 mismatches"),
		"no verified bytes, or mismatches:\n%s", out);

	FILE *f = fopen(json, "re");
	H_CHECK(f, "no JSON written at %s", json);
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
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
	free(out);
	free(err);
}
