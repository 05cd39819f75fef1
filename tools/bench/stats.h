/* SPDX-License-Identifier: MIT */
/* stats: summary statistics over benchmark samples (doubles), e.g. the median
 * of five runs or the p99.9 of ten million round-trip times.
 *
 * Shared rules: n == 0 gives NAN; NaN in, NaN out (a NaN sample makes the
 * result NAN, as numpy does); no function modifies its input except
 * stats_sort. Nothing here needs libm. */
#ifndef SPLICER_STATS_H
#define SPLICER_STATS_H
#include <stddef.h>

/* Smallest, largest and arithmetic mean of v[0..n-1]. */
double stats_min(const double *v, size_t n);
double stats_max(const double *v, size_t n);
double stats_mean(const double *v, size_t n);

/* Median of v[0..n-1] (v is copied, not reordered); for even n the mean of the
 * two middle values. Same as stats_percentile(v, n, 50). NAN also when the
 * copy cannot be allocated (n > 64). */
double stats_median(const double *v, size_t n);

/* The median of one double field (at byte offset off) of n records of
 * stride bytes from base: a row's repetitions. NAN for n = 0. */
double stats_median_field(const void *base, size_t stride, size_t n, size_t off);

/* The p-th percentile, p in [0, 100], of v[0..n-1] (v is copied, not
 * reordered): linear interpolation between the closest ranks, numpy's default
 * ("R-7"): rank = p/100 * (n-1), so p=0 is the min, p=100 the max, p=50 the
 * median. NAN when p is outside [0, 100] or NaN, or when the copy cannot be
 * allocated (n > 64). Costs one sort: for several percentiles of a big array
 * use stats_sort once and stats_percentile_sorted. */
double stats_percentile(const double *v, size_t n, double p);

/* Sorts v[0..n-1] ascending in place, -inf first, NaNs last (so a NaN
 * anywhere shows in v[n-1]). */
void stats_sort(double *v, size_t n);

/* stats_percentile over an array already sorted by stats_sort: O(1), no
 * allocation. */
double stats_percentile_sorted(const double *sorted, size_t n, double p);

/* a / b, or NAN when b == 0 or either is NaN ("x times the reference" cells
 * whose reference is missing or zero). */
double stats_ratio(double a, double b);

#endif
