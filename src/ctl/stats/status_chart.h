/* SPDX-License-Identifier: MIT */
/* status_chart: the status page's small charts as inline SVG drawn on the
 * server (so they show with JavaScript off): a histogram's buckets as bars
 * with its quantiles, a minute of rates as a sparkline, a backend's last
 * health checks as a strip. Colours come from the page's style sheet
 * (classes), never from style attributes: the page's Content-Security-Policy
 * allows its own <style> element only. */
#ifndef SPLICER_STATUS_CHART_H
#define SPLICER_STATUS_CHART_H
#include <stdint.h>

#include "html_buf.h"

#define CHART_BUCKETS_MAX 40 /* a histogram's buckets drawn at most (+Inf included) */

enum chart_unit { UNIT_COUNT, UNIT_SECONDS, UNIT_BYTES };

/* One histogram as /metrics gives it: cumulative counts per upper bound,
 * the last bound +Inf. */
struct chart_hist {
	unsigned n;                        /* bounds, +Inf included */
	double le[CHART_BUCKETS_MAX];
	double cum[CHART_BUCKETS_MAX];
	double sum, count;
};

/* The q-quantile (0..1) as Prometheus's histogram_quantile estimates it:
 * linear within the bucket that holds it; the last finite bound when it
 * falls in +Inf; NaN without observations. */
double chart_quantile(const struct chart_hist *h, double q);

/* A value in its unit, for people (html_buf.h). */
void chart_value(struct html_buf *b, enum chart_unit u, double v);

/* <figure class="hist"> with a caption (title, then count, mean and
 * p50/p90/p99), one bar per bucket (each with a <title> saying its range
 * and count) and a few bounds under them. family and labels go into
 * data- attributes (escaped) for tests and scripts. */
void chart_histogram(struct html_buf *b, const struct chart_hist *h, enum chart_unit u,
		     const char *title, const char *family, const char *labels);

/* A sparkline of v[0..n) (oldest first) in a slot of `cap` points, right
 * aligned (the newest at the right edge), scaled to its maximum. */
void chart_spark(struct html_buf *b, const float *v, unsigned n, unsigned cap, const char *cls);

/* The last n (at most 64) check results of bits (newest in bit 0, 1:
 * passed) as a strip of `show` cells, oldest left; cells without a check
 * yet are blank. */
void chart_strip(struct html_buf *b, uint64_t bits, unsigned n, unsigned show);

#endif
