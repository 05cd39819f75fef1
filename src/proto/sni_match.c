/* SPDX-License-Identifier: MIT */
/* sni_match: see sni_match.h. */
#include "sni_match.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sni_ent {
	char key[SNI_PATTERN_MAX + 1]; /* lower-cased name, or ".suffix" of a wildcard */
	size_t len;
	int route;
};

static void lower(char *dst, const char *src, size_t len)
{
	for (size_t i = 0; i < len; i++)
		dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i]);
	dst[len] = '\0';
}

static bool is_wild(const char *p)
{
	return p[0] == '*' && p[1] == '.';
}

bool sni_pattern_valid(const char *p, char *err, size_t errlen)
{
	const char *name = is_wild(p) ? p + 2 : p;
	size_t len = strlen(name);

	if (strchr(name, '*')) {
		snprintf(err, errlen, "'%s': '*' may only stand as the first label, as in *.example.com", p);
		return false;
	}
	if (len && name[len - 1] == '.') {
		snprintf(err, errlen, "'%s': a server name has no trailing dot", p);
		return false;
	}
	if (!tls_host_name_valid(name, len)) {
		snprintf(err, errlen, "'%s' is not a host name (labels of 1-63 letters, digits, '-' "
			 "or '_', 253 bytes at most)", p);
		return false;
	}
	return true;
}

static int ent_cmp(const void *a, const void *b)
{
	const struct sni_ent *x = a, *y = b;
	return strcmp(x->key, y->key);
}

int sni_table_build(struct sni_table *t, const struct sni_rule *rules, size_t n, char *err,
		    size_t errlen)
{
	memset(t, 0, sizeof(*t));
	t->exact = calloc(n ? n : 1, sizeof(*t->exact));
	t->wild = calloc(n ? n : 1, sizeof(*t->wild));
	if (!t->exact || !t->wild) {
		sni_table_free(t);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const char *p = rules[i].pattern;
		if (!sni_pattern_valid(p, err, errlen)) {
			sni_table_free(t);
			return -1;
		}
		struct sni_ent *e = is_wild(p) ? &t->wild[t->nwild++] : &t->exact[t->nexact++];
		const char *name = is_wild(p) ? p + 1 : p; /* a wildcard keeps its dot */
		e->len = strlen(name);
		lower(e->key, name, e->len);
		e->route = rules[i].route;
	}
	qsort(t->exact, t->nexact, sizeof(*t->exact), ent_cmp);
	qsort(t->wild, t->nwild, sizeof(*t->wild), ent_cmp);
	for (int w = 0; w < 2; w++) {
		struct sni_ent *v = w ? t->wild : t->exact;
		size_t m = w ? t->nwild : t->nexact;
		for (size_t i = 1; i < m; i++)
			if (!strcmp(v[i - 1].key, v[i].key)) {
				snprintf(err, errlen, "server name '%s%s' is given twice", w ? "*" : "",
					 v[i].key);
				sni_table_free(t);
				return -1;
			}
	}
	return 0;
}

void sni_table_free(struct sni_table *t)
{
	free(t->exact);
	free(t->wild);
	memset(t, 0, sizeof(*t));
}

static const struct sni_ent *find(const struct sni_ent *v, size_t n, const char *key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(key, v[mid].key);
		if (!c)
			return &v[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

int sni_lookup(const struct sni_table *t, const char *name, size_t len)
{
	char key[TLS_HOST_NAME_MAX + 1];
	const struct sni_ent *e;

	if (!len || len > TLS_HOST_NAME_MAX)
		return -1;
	lower(key, name, len);
	if ((e = find(t->exact, t->nexact, key)))
		return e->route;
	/* Suffixes from the longest: ".b.c" of "a.b.c" before ".c". The first
	 * byte is never a dot in a valid name, so a label stays in front. */
	for (size_t i = 1; i < len; i++)
		if (key[i] == '.' && (e = find(t->wild, t->nwild, key + i)))
			return e->route;
	return -1;
}

/* ---- overlaps, for `check` ---- */

/* Whether wildcard suffix s (".example.com") matches name n (a full name
 * or another wildcard's suffix) with at least one label in front. */
static bool covers(const char *s, const char *n)
{
	size_t ls = strlen(s), ln = strlen(n);

	if (ln <= ls || strcmp(n + ln - ls, s))
		return false;
	return n[0] != '.' || ln - ls > 1; /* a suffix ".x.example.com" has a label "x" */
}

static const char *who(const struct sni_rule *r)
{
	return r->owner ? r->owner : "?";
}

size_t sni_check_overlaps(const struct sni_rule *rules, size_t n, sni_report_fn *report, void *ctx)
{
	char a[SNI_PATTERN_MAX + 1], b[SNI_PATTERN_MAX + 1], msg[768], err[8];
	size_t errors = 0;

	for (size_t i = 0; i < n; i++) {
		if (!sni_pattern_valid(rules[i].pattern, err, sizeof err))
			continue;
		for (size_t j = i + 1; j < n; j++) {
			const struct sni_rule *x = &rules[i], *y = &rules[j];
			if (!sni_pattern_valid(y->pattern, err, sizeof err))
				continue;
			bool wx = is_wild(x->pattern), wy = is_wild(y->pattern);
			lower(a, x->pattern + (wx ? 1 : 0), strlen(x->pattern) - (wx ? 1 : 0));
			lower(b, y->pattern + (wy ? 1 : 0), strlen(y->pattern) - (wy ? 1 : 0));
			if (wx == wy && !strcmp(a, b)) {
				snprintf(msg, sizeof msg, "server name '%s' is given twice (route %s and "
					 "route %s)", x->pattern, who(x), who(y));
				report(ctx, wx ? SNI_DUP_WILDCARD : SNI_DUP_EXACT, i, j, msg);
				errors++;
				continue;
			}
			/* order the pair as (wider wildcard, what it covers) */
			size_t wi = i, ci = j;
			const char *ws = a, *cs = b;
			if (!wx || (wy && strlen(b) < strlen(a))) {
				wi = j, ci = i, ws = b, cs = a;
			}
			if (!is_wild(rules[wi].pattern) || !covers(ws, cs))
				continue;
			const struct sni_rule *w = &rules[wi], *c = &rules[ci];
			bool exact = !is_wild(c->pattern);
			snprintf(msg, sizeof msg, "server name '%s' (route %s) is also matched by '%s' "
				 "(route %s): %s", c->pattern, who(c), w->pattern, who(w),
				 exact ? "the exact name wins" : "the longer wildcard wins");
			report(ctx, exact ? SNI_EXACT_UNDER_WILDCARD : SNI_WILDCARD_UNDER_WILDCARD,
			       ci, wi, msg);
		}
	}
	return errors;
}
