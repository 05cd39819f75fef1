/* SPDX-License-Identifier: MIT */
/* sni_match: chooses a route by the server name of a ClientHello, among the
 * routes that share one listener.
 *
 * Patterns (the `sni =` names of a route), case-insensitive:
 *   a.example.com     that name only
 *   *.example.com     any name that ends in ".example.com" with one or more
 *                     labels before it: x.example.com, x.y.example.com; not
 *                     example.com itself
 * Lookup: an exact name first, then the longest matching wildcard (the one
 * with the most labels), so *.a.example.com beats *.example.com for
 * x.a.example.com. No match: -1 (the listener's default route, if any).
 *
 * A table is built once per listener at config time (it allocates) and is
 * then read-only: any number of threads may look up at once. Lookup costs a
 * binary search for the exact names and one per dot of the name for the
 * wildcards. */
#ifndef SPLICER_SNI_MATCH_H
#define SPLICER_SNI_MATCH_H
#include <stdbool.h>
#include <stddef.h>

#include "tls_hello.h"

#define SNI_PATTERN_MAX (TLS_HOST_NAME_MAX + 2) /* "*." and a name */

struct sni_rule {
	const char *pattern; /* as configured: "a.example.com", "*.Example.com" */
	int route;           /* what lookup returns for it (>= 0) */
	const char *owner;   /* for messages: the route's name (may be NULL) */
};

struct sni_ent;

struct sni_table {
	struct sni_ent *exact; /* sorted by name */
	size_t nexact;
	struct sni_ent *wild;  /* sorted by suffix: ".example.com" for *.example.com */
	size_t nwild;
};

/* Checks one pattern. Returns true, or false with a sentence in err
 * ("'*' may only stand as the first label, as in *.example.com", ...). */
bool sni_pattern_valid(const char *pattern, char *err, size_t errlen);

/* Builds t from rules[0..n). Returns 0, or -1 with the reason in err: a bad
 * pattern, the same pattern twice, or no memory. */
int sni_table_build(struct sni_table *t, const struct sni_rule *rules, size_t n, char *err,
		    size_t errlen);

void sni_table_free(struct sni_table *t);

/* The route for name[0..len) (any case), or -1. */
int sni_lookup(const struct sni_table *t, const char *name, size_t len);

/* What sni_check_overlaps() reports. The first two are errors (lookup
 * could not tell the routes apart; sni_table_build refuses them); the
 * others are facts for `check` to print, saying which pattern wins. */
enum sni_overlap {
	SNI_DUP_EXACT,               /* the same name twice (any case) */
	SNI_DUP_WILDCARD,            /* the same wildcard twice */
	SNI_EXACT_UNDER_WILDCARD,    /* a.example.com and *.example.com: the exact name wins */
	SNI_WILDCARD_UNDER_WILDCARD, /* *.a.example.com and *.example.com: the longer wins */
};

/* Called once per overlapping pair: a and b index rules, msg is a sentence
 * naming both patterns, their owners and which one wins. */
typedef void sni_report_fn(void *ctx, enum sni_overlap kind, size_t a, size_t b, const char *msg);

/* Reports every overlap among rules[0..n) (the patterns of one listener;
 * invalid patterns are skipped: sni_pattern_valid() reports them). Returns
 * the number of errors (SNI_DUP_*). */
size_t sni_check_overlaps(const struct sni_rule *rules, size_t n, sni_report_fn *report,
			  void *ctx);

#endif
