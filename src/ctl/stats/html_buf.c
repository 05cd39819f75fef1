/* SPDX-License-Identifier: MIT */
/* html_buf: see html_buf.h. */
#include "html_buf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void html_init(struct html_buf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->max = max;
}

void html_free(struct html_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Room for n more bytes and a NUL, within the ceiling. Returns 0, or -1
 * (the buffer is then full). */
static int room(struct html_buf *b, size_t n)
{
	if (b->full)
		return -1;
	if (b->n + n + 1 > b->max) {
		b->full = HTML_CEILING;
		return -1;
	}
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 16384;
		while (cap < b->n + n + 1)
			cap *= 2;
		if (cap > b->max)
			cap = b->max;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->full = HTML_NOMEM;
			return -1;
		}
		b->p = p;
		b->cap = cap;
	}
	return 0;
}

static void append(struct html_buf *b, const char *s, size_t n)
{
	if (room(b, n))
		return;
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

void html_put(struct html_buf *b, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	if ((size_t)k < sizeof(small)) {
		append(b, small, (size_t)k);
		return;
	}
	if (room(b, (size_t)k))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)k;
}

void html_text(struct html_buf *b, const char *s)
{
	const char *run = s;

	for (; *s; s++) {
		const char *rep;
		unsigned char ch = (unsigned char)*s;
		switch (ch) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&#39;"; break;
		default:
			if (ch >= 0x20 && ch != 0x7f)
				continue;
			rep = "&#xfffd;";
		}
		append(b, run, (size_t)(s - run));
		append(b, rep, strlen(rep));
		run = s + 1;
	}
	append(b, run, (size_t)(s - run));
}

void html_count(struct html_buf *b, double v)
{
	char d[32], out[48];
	int n, k = 0;

	if (!isfinite(v)) {
		html_put(b, "%s", isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v != floor(v) || fabs(v) >= 1e18) {
		html_put(b, "%.3g", v);
		return;
	}
	n = snprintf(d, sizeof(d), "%.0f", fabs(v));
	if (v < 0)
		out[k++] = '-';
	for (int i = 0; i < n; i++) {
		if (i && (n - i) % 3 == 0)
			out[k++] = ',';
		out[k++] = d[i];
	}
	out[k] = '\0';
	append(b, out, (size_t)k);
}

/* v with 3 significant digits and no trailing ".0". */
static void sig3(struct html_buf *b, double v, const char *unit)
{
	if (v >= 100 || v == floor(v))
		html_put(b, "%.0f%s", v, unit);
	else if (v >= 10)
		html_put(b, "%.1f%s", v, unit);
	else
		html_put(b, "%.2f%s", v, unit);
}

void html_bytes(struct html_buf *b, double v)
{
	static const char *const unit[] = { "\xc2\xa0" "B", "\xc2\xa0KiB", "\xc2\xa0MiB",
					    "\xc2\xa0GiB", "\xc2\xa0TiB", "\xc2\xa0PiB" };
	unsigned u = 0;

	if (!isfinite(v) || v < 0) {
		html_count(b, v);
		return;
	}
	while (v >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		v /= 1024;
		u++;
	}
	if (!u)
		html_put(b, "%.0f%s", v, unit[0]);
	else
		sig3(b, v, unit[u]);
}

void html_seconds(struct html_buf *b, double s)
{
	if (!isfinite(s) || s < 0)
		html_count(b, s);
	else if (s == 0)
		html_put(b, "0");
	else if (s < 1e-3)
		sig3(b, s * 1e6, "\xc2\xa0\xc2\xb5s");
	else if (s < 1)
		sig3(b, s * 1e3, "\xc2\xa0ms");
	else if (s < 60)
		sig3(b, s, "\xc2\xa0s");
	else
		html_age(b, (uint64_t)(s * 1000));
}

void html_age(struct html_buf *b, uint64_t ms)
{
	uint64_t s = ms / 1000;

	if (s < 60)
		html_put(b, "%llus", (unsigned long long)s);
	else if (s < 3600)
		html_put(b, "%llum\xc2\xa0%llus", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
	else if (s < 86400)
		html_put(b, "%lluh\xc2\xa0%llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	else
		html_put(b, "%llud\xc2\xa0%lluh", (unsigned long long)(s / 86400),
			 (unsigned long long)(s % 86400 / 3600));
}

void html_rate(struct html_buf *b, double v)
{
	if (!isfinite(v) || v < 0)
		html_count(b, v);
	else if (v >= 1000)
		html_count(b, floor(v + 0.5));
	else if (v == 0)
		html_put(b, "0");
	else
		sig3(b, v, "");
}
