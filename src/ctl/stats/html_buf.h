/* SPDX-License-Identifier: MIT */
/* html_buf: a growing buffer of HTML with a ceiling, for the status page:
 * markup written as is, every name and address escaped (a route name, a
 * backend's address from DNS, a label value: none may inject markup), and
 * numbers written for people (1,234,567; 1.5 MiB; 12.3 ms). Once a write
 * would pass the ceiling the buffer is `full` and takes nothing more: the
 * page is then refused whole rather than served cut. */
#ifndef SPLICER_HTML_BUF_H
#define SPLICER_HTML_BUF_H
#include <stddef.h>
#include <stdint.h>

struct html_buf {
	char *p;          /* NUL-terminated (malloc'd), or NULL before the first write */
	size_t n, cap;
	size_t max;       /* the ceiling, in bytes */
	int full;         /* a write did not fit: HTML_CEILING, or HTML_NOMEM (no memory);
			     the page is incomplete */
};
enum { HTML_CEILING = 1, HTML_NOMEM = 2 };

void html_init(struct html_buf *b, size_t max);
void html_free(struct html_buf *b);

/* Markup (never a value from outside: see html_text). */
void html_put(struct html_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Text or an attribute's value (quoted with "), escaped: & < > " ' and
 * control characters (shown as U+FFFD). */
void html_text(struct html_buf *b, const char *s);

/* Numbers for people. html_count: an integer with thousands separators;
 * html_bytes: B, KiB, MiB, GiB, TiB (3 significant digits); html_seconds: µs, ms, s,
 * then m/h; html_age: a duration in ms as "42s", "3m 12s", "2h 5m", "4d 3h";
 * html_rate: a per-second figure with up to 3 significant digits. */
void html_count(struct html_buf *b, double v);
void html_bytes(struct html_buf *b, double v);
void html_seconds(struct html_buf *b, double s);
void html_age(struct html_buf *b, uint64_t ms);
void html_rate(struct html_buf *b, double v);

#endif
