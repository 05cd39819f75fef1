/* SPDX-License-Identifier: MIT */
/* Unit tests for tools/bench/stats.c: min/max/mean, median, percentiles (numpy's
 * linear method, values worked out by hand below), the in-place sort, and
 * the NAN cases (no samples, NaN samples, p out of range, failed copy). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "stats.h"

#define STATS_EPS 1e-9

/* Expects got == want within a relative STATS_EPS (exactly for 0). */
static void expect_near(double got, double want, const char *what)
{
	double tol = STATS_EPS * (want < 0 ? -want : want);

	cr_expect(got >= want - tol && got <= want + tol, "%s = %.17g, want %.17g", what, got, want);
}

static void expect_nan(double got, const char *what)
{
	cr_expect(isnan(got), "%s = %.17g, want NaN", what, got);
}

/* 1..n in a fixed pseudo-random order (Fisher-Yates, 64-bit LCG): unsorted
 * input whose sorted form is known. Caller frees. */
static double *shuffled_1_to_n(size_t n)
{
	double *v = malloc(n * sizeof(*v));
	uint64_t x = 42;

	cr_assert_not_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = (double)(i + 1);
	for (size_t i = n - 1; i > 0; i--) {
		size_t k;
		double t;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		k = (size_t)((x >> 33) % (i + 1));
		t = v[i];
		v[i] = v[k];
		v[k] = t;
	}
	return v;
}

/* ---- min, max, mean, ratio ---- */

Test(unit_stats, min_max_mean)
{
	const double v[] = { 3, -2.5, 7, 0, 1.5 };

	expect_near(stats_min(v, 5), -2.5, "min");
	expect_near(stats_max(v, 5), 7, "max");
	expect_near(stats_mean(v, 5), 1.8, "mean");
	expect_near(stats_min(v, 1), 3, "min of 1");
	expect_near(stats_max(v + 1, 1), -2.5, "max of 1");
}

Test(unit_stats, ratio)
{
	expect_near(stats_ratio(6, 3), 2, "6/3");
	expect_near(stats_ratio(1, 4), 0.25, "1/4");
	expect_near(stats_ratio(0, 5), 0, "0/5");
	expect_near(stats_ratio(-9, 3), -3, "-9/3");
	expect_nan(stats_ratio(1, 0), "1/0");
	expect_nan(stats_ratio(1, -0.0), "1/-0");
	expect_nan(stats_ratio(0, 0), "0/0");
	expect_nan(stats_ratio(NAN, 2), "NaN/2");
	expect_nan(stats_ratio(2, NAN), "2/NaN");
}

/* ---- median ---- */

Test(unit_stats, median_odd_even_single)
{
	const double odd[] = { 5, 1, 4, 2, 3 };
	const double even[] = { 40, 10, 30, 20 };
	const double one[] = { 7.25 };
	const double dup[] = { 2, 2, 9, 2 };

	expect_near(stats_median(odd, 5), 3, "median {5,1,4,2,3}");
	expect_near(stats_median(even, 4), 25, "median {40,10,30,20}");
	expect_near(stats_median(one, 1), 7.25, "median {7.25}");
	expect_near(stats_median(dup, 4), 2, "median {2,2,9,2}");
	expect_near(stats_median(even, 2), 25, "median {40,10}");
}

/* The mean of the two middle values, correctly rounded ((a + b) / 2: the
 * halving is exact), where interpolating b - (b - a) * 0.5 is one ulp off;
 * and no overflow where a + b would overflow. */
Test(unit_stats, median_even_is_exact_mean)
{
	const double v[] = { 254.0465641087138, 6.5563684359921002 };
	const double big[] = { 1.5e308, 1.7e308 };
	double want = (v[0] + v[1]) / 2;

	cr_expect_eq(stats_median(v, 2), want, "median = %.17g, want %.17g", stats_median(v, 2), want);
	expect_near(stats_median(big, 2), 1.6e308, "median near DBL_MAX");
}

Test(unit_stats, median_leaves_input_untouched)
{
	double v[] = { 9, 3, 7, 1, 8, 2 }, orig[6];
	size_t big_n = 1000;
	double *big = shuffled_1_to_n(big_n), *big_orig = malloc(big_n * sizeof(double));

	memcpy(orig, v, sizeof(v));
	expect_near(stats_median(v, 6), 5, "median {9,3,7,1,8,2}");
	cr_expect(!memcmp(v, orig, sizeof(v)), "stats_median reordered its input (stack copy)");

	/* Past the stack buffer: the heap copy path. */
	cr_assert_not_null(big_orig);
	memcpy(big_orig, big, big_n * sizeof(double));
	expect_near(stats_median(big, big_n), 500.5, "median 1..1000");
	expect_near(stats_percentile(big, big_n, 90), 900.1, "p90 1..1000");
	cr_expect(!memcmp(big, big_orig, big_n * sizeof(double)),
		  "stats_median reordered its input (heap copy)");
	free(big);
	free(big_orig);
}

/* ---- percentiles ---- */

/* v = 1..10, rank = p/100 * 9: p90 -> rank 8.1 -> 9 + 0.1 * (10 - 9). */
Test(unit_stats, percentile_one_to_ten)
{
	const double v[] = { 7, 3, 10, 1, 9, 5, 2, 8, 6, 4 };
	double sorted[10];

	expect_near(stats_percentile(v, 10, 0), 1, "p0");
	expect_near(stats_percentile(v, 10, 100), 10, "p100");
	expect_near(stats_percentile(v, 10, 50), 5.5, "p50");
	expect_near(stats_percentile(v, 10, 25), 3.25, "p25");
	expect_near(stats_percentile(v, 10, 90), 9.1, "p90");
	expect_near(stats_percentile(v, 10, 99), 9.91, "p99");
	expect_near(stats_percentile(v, 10, 10), 1.9, "p10");
	cr_expect_eq(stats_percentile(v, 10, 50), stats_median(v, 10), "p50 is not the median");

	memcpy(sorted, v, sizeof(v));
	stats_sort(sorted, 10);
	for (int i = 0; i < 10; i++)
		cr_expect_eq(sorted[i], i + 1.0, "sorted[%d] = %g", i, sorted[i]);
	expect_near(stats_percentile_sorted(sorted, 10, 90), 9.1, "sorted p90");
	expect_near(stats_percentile_sorted(sorted, 10, 99), 9.91, "sorted p99");
	expect_near(stats_percentile_sorted(sorted, 10, 0), 1, "sorted p0");
	expect_near(stats_percentile_sorted(sorted, 10, 100), 10, "sorted p100");
}

Test(unit_stats, percentile_small_n)
{
	const double one[] = { 4 };
	const double two[] = { 10, 20 };
	const double inf2[] = { INFINITY, INFINITY };

	expect_near(stats_percentile(one, 1, 0), 4, "p0 of {4}");
	expect_near(stats_percentile(one, 1, 37), 4, "p37 of {4}");
	expect_near(stats_percentile(one, 1, 100), 4, "p100 of {4}");
	expect_near(stats_percentile(two, 2, 75), 17.5, "p75 of {10,20}");
	expect_near(stats_percentile(two, 2, 20), 12, "p20 of {10,20}");
	/* inf + t * (inf - inf) would be NaN. */
	cr_expect(isinf(stats_percentile(inf2, 2, 40)), "p40 of {inf,inf} = %g",
		  stats_percentile(inf2, 2, 40));
}

/* The latency case: 1..1e6 shuffled; rank of p99.9 = 0.999 * 999999 =
 * 998999.001 -> 999000 + 0.001. */
Test(unit_stats, percentile_million)
{
	size_t n = 1000000;
	double *v = shuffled_1_to_n(n);

	expect_near(stats_percentile(v, n, 99.9), 999000.001, "p99.9 (copy)");
	expect_near(stats_percentile(v, n, 50), 500000.5, "p50 (copy)");
	cr_expect_neq(v[n - 1], (double)n, "input not shuffled, or sorted in place");
	stats_sort(v, n);
	for (size_t i = 0; i < n; i++)
		if (v[i] != (double)(i + 1))
			cr_assert_fail("sorted[%zu] = %.17g, want %zu", i, v[i], i + 1);
	expect_near(stats_percentile_sorted(v, n, 99.9), 999000.001, "p99.9");
	expect_near(stats_percentile_sorted(v, n, 99), 990000.01, "p99");
	expect_near(stats_percentile_sorted(v, n, 50), 500000.5, "p50");
	expect_near(stats_percentile_sorted(v, n, 0), 1, "p0");
	expect_near(stats_percentile_sorted(v, n, 100), 1000000, "p100");
	free(v);
}

/* ---- sort ---- */

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return (a > b) - (a < b);
}

/* Shapes that break naive quicksorts (sorted, reversed, all equal, few
 * distinct keys, organ pipe), checked against qsort. */
Test(unit_stats, sort_matches_qsort)
{
	enum { N = 5000 };
	static double v[N], want[N];
	uint64_t x = 7;

	for (int shape = 0; shape < 6; shape++) {
		for (int i = 0; i < N; i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			switch (shape) {
			case 0: v[i] = (double)(x >> 11) / 1e9 - 4e6; break;
			case 1: v[i] = i; break;
			case 2: v[i] = N - i; break;
			case 3: v[i] = 42; break;
			case 4: v[i] = (double)((x >> 33) % 3); break;
			default: v[i] = i < N / 2 ? i : N - i; break;
			}
		}
		memcpy(want, v, sizeof(v));
		qsort(want, N, sizeof(double), cmp_double);
		stats_sort(v, N);
		cr_expect(!memcmp(v, want, sizeof(v)), "shape %d: stats_sort differs from qsort", shape);
	}
}

Test(unit_stats, sort_puts_nan_last)
{
	double v[] = { 3, NAN, -INFINITY, 1, NAN, INFINITY, -2 };
	const double want[] = { -INFINITY, -2, 1, 3, INFINITY };

	stats_sort(v, 7);
	for (int i = 0; i < 5; i++)
		cr_expect_eq(v[i], want[i], "v[%d] = %g, want %g", i, v[i], want[i]);
	cr_expect(isnan(v[5]) && isnan(v[6]), "NaNs not last: %g %g", v[5], v[6]);
	expect_nan(stats_percentile_sorted(v, 7, 10), "percentile_sorted with NaNs");
	stats_sort(v, 0);	/* must not touch v[0] */
	cr_expect_eq(v[0], -INFINITY);
}

/* ---- NAN cases ---- */

Test(unit_stats, empty_is_nan)
{
	const double v[] = { 1, 2, 3 };

	expect_nan(stats_min(v, 0), "min n=0");
	expect_nan(stats_max(v, 0), "max n=0");
	expect_nan(stats_mean(v, 0), "mean n=0");
	expect_nan(stats_median(v, 0), "median n=0");
	expect_nan(stats_percentile(v, 0, 50), "percentile n=0");
	expect_nan(stats_percentile_sorted(v, 0, 50), "percentile_sorted n=0");
	expect_nan(stats_median(NULL, 0), "median(NULL, 0)");
}

Test(unit_stats, p_out_of_range_is_nan)
{
	const double v[] = { 1, 2, 3 };

	expect_nan(stats_percentile(v, 3, -0.001), "p=-0.001");
	expect_nan(stats_percentile(v, 3, 100.001), "p=100.001");
	expect_nan(stats_percentile(v, 3, NAN), "p=NaN");
	expect_nan(stats_percentile_sorted(v, 3, -1), "sorted p=-1");
	expect_nan(stats_percentile_sorted(v, 3, 101), "sorted p=101");
	expect_nan(stats_percentile_sorted(v, 3, NAN), "sorted p=NaN");
	expect_near(stats_percentile(v, 3, 100), 3, "p=100 is in range");
}

Test(unit_stats, nan_sample_is_nan)
{
	const double v[] = { 1, NAN, 3 };
	const double last[] = { 1, 2, NAN };

	expect_nan(stats_min(v, 3), "min");
	expect_nan(stats_max(v, 3), "max");
	expect_nan(stats_mean(v, 3), "mean");
	expect_nan(stats_median(v, 3), "median");
	expect_nan(stats_percentile(v, 3, 0), "p0");
	expect_nan(stats_min(last, 3), "min, NaN last");
	expect_nan(stats_max(last, 3), "max, NaN last");
}

/* n * sizeof(double) would wrap to a small size: refused before any copy
 * (a memcpy of n doubles from v would crash). */
Test(unit_stats, percentile_size_overflow_is_nan)
{
	const double v[] = { 1, 2 };

	expect_nan(stats_percentile(v, SIZE_MAX / sizeof(double) + 2, 50), "n beyond SIZE_MAX/8");
	expect_nan(stats_median(v, SIZE_MAX / 4), "median n = SIZE_MAX/4");
}

/* The process's address space in bytes (VmSize), or 0 when unknown. */
static unsigned long vm_bytes(void)
{
	unsigned long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%lu", &pages) != 1)
		pages = 0;
	fclose(f);
	return pages * (unsigned long)sysconf(_SC_PAGESIZE);
}

/* The copy's malloc fails (address space capped 8 MiB above what the process
 * uses, the copy needs 32 MiB): NAN, not a crash. Criterion runs each test in
 * its own process, and the soft limit is restored anyway. */
Test(unit_stats, percentile_malloc_failure_is_nan)
{
	size_t n = 4 << 20;
	struct rlimit old, lim;
	unsigned long used;
	double *v, r;

#ifdef __SANITIZE_ADDRESS__
	/* ASan's allocator aborts on an out-of-memory malloc by default. */
	cr_skip_test("ASan build: malloc does not return NULL");
#endif
	v = calloc(n, sizeof(double));
	cr_assert_not_null(v);
	used = vm_bytes();	/* after the calloc: v counts */
	cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)used + (8 << 20);
	if (!used || (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < lim.rlim_cur) ||
	    setrlimit(RLIMIT_AS, &lim)) {
		free(v);
		cr_skip_test("cannot cap RLIMIT_AS just above the current size");
	}
	r = stats_percentile(v, n, 50);
	setrlimit(RLIMIT_AS, &old);
	expect_nan(r, "percentile with malloc failing");
	expect_near(stats_percentile(v, n, 50), 0, "percentile once malloc works again");
	free(v);
}
