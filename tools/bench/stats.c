/* SPDX-License-Identifier: MIT */
/* stats: min/max/mean, median and percentiles of benchmark samples.
 *
 *   stats_sort(rtt, n);
 *   p99 = stats_percentile_sorted(rtt, n, 99);
 *
 * Percentiles follow numpy's default (linear, "R-7") so figures can be
 * checked against `numpy.percentile`. No libm: floor is a cast (the rank is
 * never negative) and isnan/NAN are macros. */
#include "stats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Copies up to this many samples on the stack: a median of a few repetitions
 * never allocates. */
#define STATS_STACK_N 64

/* The smallest (sign 1) or largest (sign -1) sample; NaN if any is NaN. */
static double extreme(const double *v, size_t n, int sign)
{
	double m;

	if (!n)
		return NAN;
	m = v[0];
	for (size_t i = 0; i < n; i++) {
		if (isnan(v[i]))
			return NAN;
		if (sign * v[i] < sign * m)
			m = v[i];
	}
	return m;
}

double stats_min(const double *v, size_t n)
{
	return extreme(v, n, 1);
}

double stats_max(const double *v, size_t n)
{
	return extreme(v, n, -1);
}

/* A NaN sample propagates through the sum by itself. */
double stats_mean(const double *v, size_t n)
{
	double sum = 0;

	if (!n)
		return NAN;
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	return sum / (double)n;
}

double stats_ratio(double a, double b)
{
	if (isnan(a) || isnan(b) || b == 0)
		return NAN;
	return a / b;
}

static void stats_swap(double *v, size_t i, size_t j)
{
	double t = v[i];

	v[i] = v[j];
	v[j] = t;
}

static void stats_insertion_sort(double *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		double x = v[i];
		size_t j = i;

		for (; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

/* Restores the max-heap property below node i of the heap v[0..n-1]. */
static void stats_sift_down(double *v, size_t i, size_t n)
{
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			return;
		if (c + 1 < n && v[c + 1] > v[c])
			c++;
		if (!(v[c] > v[i]))
			return;
		stats_swap(v, i, c);
		i = c;
	}
}

/* The introsort fallback: O(n log n) whatever the input. */
static void stats_heap_sort(double *v, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		stats_sift_down(v, i, n);
	for (size_t end = n - 1; end > 0; end--) {
		stats_swap(v, 0, end);
		stats_sift_down(v, 0, end);
	}
}

/* Introsort of NaN-free v[0..n-1]: quicksort with a median-of-three pivot and
 * Hoare partitioning (equal keys split evenly, so many duplicates, common in
 * microsecond latencies, stay O(n log n)), recursing into the smaller part so
 * the stack stays O(log n), heapsort once depth runs out (adversarial input),
 * insertion sort for short ranges. */
static void stats_introsort(double *v, size_t n, unsigned depth)
{
	while (n > 16) {
		size_t m = n / 2, i = 0, j = n - 1;
		double pivot;

		if (!depth--) {
			stats_heap_sort(v, n);
			return;
		}
		/* Orders v[0] <= v[m] <= v[n-1]: the ends then stop both scans
		 * below without bounds checks. */
		if (v[m] < v[0])
			stats_swap(v, 0, m);
		if (v[n - 1] < v[m]) {
			stats_swap(v, m, n - 1);
			if (v[m] < v[0])
				stats_swap(v, 0, m);
		}
		pivot = v[m];
		for (;;) {
			while (v[++i] < pivot)
				;
			while (v[--j] > pivot)
				;
			if (i >= j)
				break;
			stats_swap(v, i, j);
		}
		/* Now v[0..i-1] <= pivot <= v[i..n-1], and 1 <= i <= n-1. */
		if (i < n - i) {
			stats_introsort(v, i, depth);
			v += i;
			n -= i;
		} else {
			stats_introsort(v + i, n - i, depth);
			n = i;
		}
	}
	stats_insertion_sort(v, n);
}

/* Not qsort: its comparator call per comparison made 10M samples take ~2.7 s
 * against ~1.0 s here, and glibc's qsort mallocs a copy of the array. */
void stats_sort(double *v, size_t n)
{
	size_t k = 0;
	unsigned depth = 0;

	/* NaNs compare false with everything, which would break the
	 * partitioning: move them to the end first, sort the rest. */
	for (size_t i = 0; i < n; i++)
		if (!isnan(v[i]))
			stats_swap(v, k++, i);
	for (size_t m = k; m > 1; m >>= 1)
		depth += 2;
	stats_introsort(v, k, depth);
}

/* a + t*(b-a), t in [0, 1), computed as numpy does: from the nearer end, so
 * the result stays within [a, b]; a == b returns a, so that two infinities
 * do not give inf - inf = NaN. t == 0.5 (every even-n median) is the
 * correctly rounded mean: the halves are exact (bar subnormals), only the
 * sum rounds, and it cannot overflow the way a + b can. */
static double stats_lerp(double a, double b, double t)
{
	if (a == b || t == 0)
		return a;
	if (t == 0.5)
		return a / 2 + b / 2;
	if (t < 0.5)
		return a + (b - a) * t;
	return b - (b - a) * (1 - t);
}

double stats_percentile_sorted(const double *sorted, size_t n, double p)
{
	double rank;
	size_t lo;

	/* !(p >= 0) also catches a NaN p. */
	if (!n || !(p >= 0) || p > 100 || isnan(sorted[n - 1]))
		return NAN;
	rank = p / 100 * (double)(n - 1);
	lo = (size_t)rank;	/* floor: rank >= 0 */
	if (lo >= n - 1)
		return sorted[n - 1];
	return stats_lerp(sorted[lo], sorted[lo + 1], rank - (double)lo);
}

double stats_percentile(const double *v, size_t n, double p)
{
	double stack[STATS_STACK_N], *copy = stack, r;

	if (!n || !(p >= 0) || p > 100)
		return NAN;
	if (n > STATS_STACK_N) {
		/* n * sizeof(double) must not wrap into a small allocation that
		 * the memcpy would then overrun. */
		if (n > SIZE_MAX / sizeof(double))
			return NAN;
		copy = malloc(n * sizeof(double));
		if (!copy)
			return NAN;
	}
	memcpy(copy, v, n * sizeof(double));
	stats_sort(copy, n);
	r = stats_percentile_sorted(copy, n, p);
	if (copy != stack)
		free(copy);
	return r;
}

double stats_median(const double *v, size_t n)
{
	return stats_percentile(v, n, 50);
}

double stats_median_field(const void *base, size_t stride, size_t n, size_t off)
{
	double *v = n ? malloc(n * sizeof(*v)) : NULL, m;

	if (!v)
		return NAN;
	for (size_t i = 0; i < n; i++)
		memcpy(&v[i], (const char *)base + i * stride + off, sizeof(double));
	m = stats_median(v, n);
	free(v);
	return m;
}
