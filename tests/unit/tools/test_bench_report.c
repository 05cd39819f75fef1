/* SPDX-License-Identifier: MIT */
/* Unit tests for the pieces of `splicer bench` that read other programs'
 * output or lay out its own: the redis-benchmark CSV and pgbench summary
 * parsers (bench_real.c, on the texts those tools print, copied from real
 * runs), and the tables (bench_table.c) in text and markdown. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_real.h"
#include "bench_table.h"

Test(unit, bench_parse_redis_csv)
{
	const char *out = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\"\n"
			  "\"SET\",\"21482.28\",\"1.371\",\"0.184\"\n"
			  "\"GET\",\"17167.38\",\"2.030\",\"0.272\"\n";
	double set = 0, get = 0;

	cr_assert_eq(bench_parse_redis_csv(out, &set, &get), 0);
	cr_assert_float_eq(set, 21482.28, 1e-6);
	cr_assert_float_eq(get, 17167.38, 1e-6);
	cr_assert_eq(bench_parse_redis_csv("Could not connect to Redis at 127.0.0.1:1\n", &set, &get), -1);
	cr_assert_eq(bench_parse_redis_csv(NULL, &set, &get), -1);
}

Test(unit, bench_parse_pgbench)
{
	const char *out = "pgbench (15.18 (Debian 15.18-0+deb12u1))\n"
			  "transaction type: <builtin: select only>\n"
			  "number of clients: 50\n"
			  "number of transactions actually processed: 8500/8500\n"
			  "number of failed transactions: 0 (0.000%)\n"
			  "latency average = 18.9 ms\n"
			  "initial connection time = 412.3 ms\n"
			  "tps = 2641.337 (without initial connection time)\n";
	/* what pgbench says when no transaction ran: not a result */
	const char *none = "number of transactions actually processed: 0\n"
			   "number of failed transactions: 0 (NaN%)\n";
	double tps = 0, n = 0;

	cr_assert_eq(bench_parse_pgbench(out, &tps, &n), 0);
	cr_assert_float_eq(tps, 2641.337, 1e-6);
	cr_assert_float_eq(n, 8500, 1e-6);
	cr_assert_eq(bench_parse_pgbench(none, &tps, &n), -1);
}

/* The table printed into a string. */
static char *render(const struct btable *t, int md)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	btable_print(t, f, md);
	fclose(f);
	return buf;
}

Test(unit, bench_table_groups_name_their_columns)
{
	struct btable *t = btable_new("Bulk");
	int r;

	btable_col(t, NULL, "case");
	btable_col(t, "1 stream", "Gbit/s");
	btable_col(t, "1 stream", "x haproxy");
	btable_col(t, "4 streams", "Gbit/s");
	btable_col(t, "4 streams", "x haproxy");
	r = btable_row(t);
	btable_set(t, r, 0, "%s", "auto");
	btable_set(t, r, 1, "%.2f", 7.03);
	btable_set(t, r, 2, "%.2fx", 1.44);
	btable_set(t, r, 3, "%.2f", 5.42);
	btable_note_row(t, "%s", "uring: skipped: no io_uring");

	char *md = render(t, 1), *txt = render(t, 0);
	/* markdown: each ratio column says which workload it belongs to */
	cr_assert(strstr(md, "| case | 1 stream: Gbit/s | 1 stream: x haproxy | 4 streams: Gbit/s | "
			     "4 streams: x haproxy |"), "%s", md);
	cr_assert(strstr(md, "| auto | 7.03 | 1.44x | 5.42 | - |"), "%s", md);
	cr_assert(strstr(md, "| uring: skipped: no io_uring | | | | |"), "%s", md);
	/* text: one ruled group name over each group's columns */
	cr_assert(strstr(txt, "- 1 stream -"), "%s", txt);
	cr_assert(strstr(txt, "- 4 streams -"), "%s", txt);
	/* the group line comes before the column heads */
	cr_assert(strstr(txt, "4 streams") < strstr(txt, "case"), "%s", txt);
	cr_assert(strstr(txt, "uring: skipped"), "%s", txt);
	cr_assert(!strchr(txt, '\r') && !strchr(txt, '\033'));
	free(md);
	free(txt);
	btable_free(t);
}
