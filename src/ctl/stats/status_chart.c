/* SPDX-License-Identifier: MIT */
/* status_chart: see status_chart.h. */
#include "status_chart.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* a histogram's drawing: bars in [PAD, W - PAD] x [TOP, BASE] */
#define HW 224
#define HH 74
#define HPAD 2
#define HTOP 4
#define HBASE 56

double chart_quantile(const struct chart_hist *h, double q)
{
	double total, rank, below = 0, lower = 0;
	unsigned b;

	if (h->n < 2 || !(total = h->cum[h->n - 1]) || q < 0 || q > 1)
		return NAN;
	rank = q * total;
	for (b = 0; b < h->n && h->cum[b] < rank; b++)
		;
	if (b >= h->n - 1)
		return h->le[h->n - 2]; /* in +Inf: the largest finite bound is all we know */
	if (b) {
		below = h->cum[b - 1];
		lower = h->le[b - 1];
	}
	if (h->cum[b] <= below)
		return h->le[b];
	return lower + (h->le[b] - lower) * (rank - below) / (h->cum[b] - below);
}

void chart_value(struct html_buf *b, enum chart_unit u, double v)
{
	if (u == UNIT_SECONDS)
		html_seconds(b, v);
	else if (u == UNIT_BYTES)
		html_bytes(b, v);
	else
		html_count(b, v);
}

/* A bound as short as an axis needs: 0.5ms, 25ms, 1s, 30s, 64, 16K, 4M. */
static void bound_label(char *out, size_t len, enum chart_unit u, double v)
{
	static const char *const bu[] = { "", "K", "M", "G", "T" };
	unsigned k = 0;

	if (isinf(v)) {
		snprintf(out, len, "+Inf");
	} else if (u == UNIT_SECONDS) {
		if (v < 1e-3)
			snprintf(out, len, "%gµs", v * 1e6);
		else if (v < 1)
			snprintf(out, len, "%gms", v * 1e3);
		else if (v < 60)
			snprintf(out, len, "%gs", v);
		else
			snprintf(out, len, "%gm", v / 60);
	} else if (u == UNIT_BYTES) {
		while (v >= 1024 && k + 1 < sizeof(bu) / sizeof(bu[0])) {
			v /= 1024;
			k++;
		}
		snprintf(out, len, "%g%s", v, bu[k]);
	} else {
		snprintf(out, len, "%g", v);
	}
}

void chart_histogram(struct html_buf *b, const struct chart_hist *h, enum chart_unit u,
		     const char *title, const char *family, const char *labels)
{
	double per[CHART_BUCKETS_MAX], max = 0, prev = 0;
	unsigned n = h->n < CHART_BUCKETS_MAX ? h->n : CHART_BUCKETS_MAX;
	char lab[32];

	for (unsigned i = 0; i < n; i++) {
		per[i] = h->cum[i] >= prev ? h->cum[i] - prev : 0;
		prev = h->cum[i];
		if (per[i] > max)
			max = per[i];
	}
	html_put(b, "<figure class=\"hist\" data-family=\"");
	html_text(b, family);
	html_put(b, "\" data-labels=\"");
	html_text(b, labels);
	html_put(b, "\" data-count=\"%.0f\"><figcaption><b>", h->count);
	html_text(b, title);
	html_put(b, "</b><br>");
	if (h->count > 0) {
		static const double qs[] = { 0.5, 0.9, 0.99 };
		html_put(b, "n=");
		html_count(b, h->count);
		html_put(b, " \xc2\xb7 mean ");
		chart_value(b, u, h->sum / h->count);
		html_put(b, "<br><span class=\"q\">");
		for (unsigned k = 0; k < 3; k++) {
			double q = chart_quantile(h, qs[k]);
			/* in +Inf: only "at least the last bound" is known */
			int over = h->n >= 2 && h->cum[h->n - 2] < qs[k] * h->count;
			html_put(b, "%sp%g %s", k ? " \xc2\xb7 " : "", qs[k] * 100, over ? "\xe2\x89\xa5" : "");
			chart_value(b, u, q);
		}
		html_put(b, "</span>");
	} else {
		html_put(b, "no observations yet<br><span class=\"q\">\xc2\xa0</span>");
	}
	html_put(b, "</figcaption><svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
		    "role=\"img\" aria-label=\"", HW, HH, HW, HH);
	html_text(b, title);
	html_put(b, " histogram\"><line class=\"axis\" x1=\"%d\" y1=\"%d.5\" x2=\"%d\" y2=\"%d.5\"/>",
		 HPAD, HBASE, HW - HPAD, HBASE);
	if (!n) {
		html_put(b, "</svg></figure>");
		return;
	}
	double slot = (double)(HW - 2 * HPAD) / n;
	unsigned every = (n + 4) / 5;
	for (unsigned i = 0; i < n; i++) {
		double x = HPAD + slot * i + 1, w = slot - 2 > 1 ? slot - 2 : 1;
		double hh = max > 0 ? (HBASE - HTOP) * per[i] / max : 0;
		if (per[i] > 0 && hh < 1.5)
			hh = 1.5; /* a bucket with anything in it is seen */
		html_put(b, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>",
			 per[i] > 0 ? "bar" : "bar0", x, per[i] > 0 ? HBASE - hh : HBASE - 1.0, w,
			 per[i] > 0 ? hh : 1.0);
		if (i == 0) {
			html_put(b, "\xe2\x89\xa4 ");
		} else {
			chart_value(b, u, h->le[i - 1]);
			html_put(b, " \xe2\x80\x93 ");
		}
		if (isinf(h->le[i]))
			html_put(b, "+Inf");
		else
			chart_value(b, u, h->le[i]);
		html_put(b, ": ");
		html_count(b, per[i]);
		if (h->count > 0)
			html_put(b, " (%.1f%%)", 100.0 * per[i] / h->count);
		html_put(b, "</title></rect>");
		if (i % every == 0 || i == n - 1) {
			bound_label(lab, sizeof(lab), u, h->le[i]);
			/* the first and last labels stay inside the chart */
			const char *anchor = i == 0 ? " s" : i == n - 1 ? " e" : "";
			double lx = i == 0 ? HPAD : i == n - 1 ? HW - HPAD : HPAD + slot * (i + 0.5);
			html_put(b, "<text class=\"ax%s\" x=\"%.1f\" y=\"%d\">", anchor, lx, HH - 4);
			html_text(b, lab);
			html_put(b, "</text>");
		}
	}
	html_put(b, "</svg></figure>");
}

#define SW 150
#define SH 30

void chart_spark(struct html_buf *b, const float *v, unsigned n, unsigned cap, const char *cls)
{
	double max = 0;

	if (n > cap)
		n = cap;
	for (unsigned i = 0; i < n; i++)
		if (v[i] > max)
			max = v[i];
	html_put(b, "<svg class=\"spark %s\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
		    "preserveAspectRatio=\"none\" aria-hidden=\"true\"><line class=\"axis\" x1=\"0\" "
		    "y1=\"%d.5\" x2=\"%d\" y2=\"%d.5\" vector-effect=\"non-scaling-stroke\"/>",
		    cls, SW, SH, SW, SH, SH - 1, SW, SH - 1);
	if (n >= 2) {
		html_put(b, "<polygon class=\"area\" points=\"");
		for (unsigned i = 0; i < n; i++) {
			double x = cap > 1 ? (double)SW * (cap - n + i) / (cap - 1) : 0;
			double y = SH - 1.5 - (max > 0 ? (SH - 4) * v[i] / max : 0);
			if (!i)
				html_put(b, "%.1f,%d ", x, SH - 1);
			html_put(b, "%.1f,%.1f ", x, y);
			if (i == n - 1)
				html_put(b, "%.1f,%d", x, SH - 1);
		}
		html_put(b, "\"/><polyline class=\"line\" vector-effect=\"non-scaling-stroke\" points=\"");
		for (unsigned i = 0; i < n; i++) {
			double x = cap > 1 ? (double)SW * (cap - n + i) / (cap - 1) : 0;
			double y = SH - 1.5 - (max > 0 ? (SH - 4) * v[i] / max : 0);
			html_put(b, "%s%.1f,%.1f", i ? " " : "", x, y);
		}
		html_put(b, "\"/>");
	}
	html_put(b, "</svg>");
}

#define CELL 4  /* a check's cell: 3 px and a gap */
#define CH 14

void chart_strip(struct html_buf *b, uint64_t bits, unsigned n, unsigned show)
{
	static const char *const cls[3] = { "none", "fail", "pass" };

	if (show > 64)
		show = 64;
	if (n > show)
		n = show;
	html_put(b, "<svg class=\"strip\" viewBox=\"0 0 %u %d\" width=\"%u\" height=\"%d\" role=\"img\" "
		    "aria-label=\"last %u checks\">", show * CELL, CH, show * CELL, CH, n);
	/* one path per kind: a 64-check strip costs about a kilobyte */
	for (int k = 0; k < 3; k++) {
		int any = 0;
		for (unsigned c = 0; c < show; c++) {
			/* cell c from the left; the newest check is the rightmost */
			unsigned age = show - 1 - c;
			int kind = age >= n ? 0 : (bits >> age & 1) ? 2 : 1;
			if (kind != k)
				continue;
			if (!any)
				html_put(b, "<path class=\"%s\" d=\"", cls[k]);
			any = 1;
			html_put(b, "M%u 0h3v%dh-3z", c * CELL, CH);
		}
		if (any)
			html_put(b, "\"/>");
	}
	html_put(b, "</svg>");
}
