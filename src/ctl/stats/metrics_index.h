/* SPDX-License-Identifier: MIT */
/* metrics_index: the Prometheus text that /metrics serves, read back into a
 * table the status page looks values up in. The page is drawn from the same
 * text a scraper gets, so a family added to stats_http.c shows on the page
 * without a line here (status_page.c lays out the families it knows and
 * lists every other one as it comes).
 *
 * Each sample is split into its name, the values of its `route` and
 * `backend` labels (NULL when absent) and the rest of its labels in their
 * order, unescaped, as `k=v,k=v` ("" when none): e.g.
 *   splicer_backend_checks_total{route="web",backend="10.0.0.1:80",result="ok"} 12
 * is ("splicer_backend_checks_total", "web", "10.0.0.1:80", "result=ok", 12). */
#ifndef SPLICER_METRICS_INDEX_H
#define SPLICER_METRICS_INDEX_H
#include <stddef.h>

struct msample {
	const char *name;     /* as written: a histogram's NAME_bucket, NAME_sum, NAME_count */
	const char *route;    /* the route label's value, or NULL */
	const char *backend;  /* the backend label's value, or NULL */
	const char *rest;     /* the other labels, "k=v,k=v", or "" */
	double v;
	unsigned fam;         /* index of its family */
};

struct mfamily {
	const char *name;
	const char *type;     /* "counter", "gauge", "histogram", ... ("untyped" when not given) */
	const char *help;     /* "" when not given */
	unsigned first, n;    /* its samples: s[first .. first + n) */
	int has_route;        /* some sample has a route label */
};

struct mindex {
	struct msample *s;
	unsigned ns;
	struct mfamily *f;
	unsigned nf;
	unsigned *slot;       /* hash of (name, route, backend, rest) -> 1 + sample index */
	unsigned nslot;       /* a power of two */
	unsigned skipped;     /* lines that were not a sample, a HELP or a TYPE */
};

/* Reads text[0..len) (NUL-terminated at len; rewritten in place: the
 * index points into it, so text must outlive it). Samples of one family
 * must be contiguous, as the exposition format wants (a family seen again
 * later starts a second entry). Returns 0, or -ENOMEM (x is then empty). */
int metrics_index_parse(char *text, size_t len, struct mindex *x);
void metrics_index_free(struct mindex *x);

/* The sample with exactly these labels (route, backend NULL: none; rest
 * NULL: ""), or NULL. */
const struct msample *metrics_index_find(const struct mindex *x, const char *name,
					 const char *route, const char *backend, const char *rest);
/* Its value, or dflt when there is no such sample. */
double metrics_index_value(const struct mindex *x, const char *name, const char *route,
			   const char *backend, const char *rest, double dflt);

#endif
