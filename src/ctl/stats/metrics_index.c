/* SPDX-License-Identifier: MIT */
/* metrics_index: see metrics_index.h. */
#include "metrics_index.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REST_MAX 1024 /* the other labels of one sample, as k=v,k=v; a longer set is skipped */

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return (h ^ 0xff) * 0x100000001b3ULL; /* a separator: ("ab","") differs from ("a","b") */
}

static uint64_t key_hash(const char *name, const char *route, const char *backend, const char *rest)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	h = fnv(h, name);
	h = fnv(h, route ? route : "\x01"); /* no label differs from an empty one */
	h = fnv(h, backend ? backend : "\x01");
	return fnv(h, rest);
}

static int same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* Reads the labels at *pp (just past '{') up to '}' and writes, from w on
 * (never past what was read, so the text can be rewritten in place), the
 * route and backend values and the rest, each NUL-terminated. Returns 0
 * with *pp past '}', or -1 for a malformed or oversized set. */
static int read_labels(char **pp, char *w, struct msample *s)
{
	char rest[REST_MAX], *p = *pp;
	size_t nrest = 0;

	s->route = s->backend = NULL;
	for (;;) {
		char *key, *val;
		size_t klen;
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '}')
			break;
		key = p;
		while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		       *p == '_')
			p++;
		klen = (size_t)(p - key);
		if (!klen || p[0] != '=' || p[1] != '"')
			return -1;
		p += 2;
		/* the value, unescaped, into w (w <= the key's start: it only shrinks) */
		int is_route = klen == 5 && !memcmp(key, "route", 5);
		int is_backend = klen == 7 && !memcmp(key, "backend", 7);
		if (!is_route && !is_backend) {
			if (nrest + klen + 2 >= sizeof(rest))
				return -1;
			if (nrest)
				rest[nrest++] = ',';
			memcpy(rest + nrest, key, klen);
			nrest += klen;
			rest[nrest++] = '=';
		}
		val = w;
		for (; *p != '"'; p++) {
			char ch = *p;
			if (!ch || ch == '\n')
				return -1;
			if (ch == '\\') {
				p++;
				if (*p == 'n')
					ch = '\n';
				else if (*p == '\\' || *p == '"')
					ch = *p;
				else
					return -1;
			}
			if (is_route || is_backend)
				*w++ = ch;
			else if (nrest + 1 < sizeof(rest))
				rest[nrest++] = ch;
			else
				return -1;
		}
		p++; /* the closing quote */
		if (is_route || is_backend) {
			*w++ = '\0';
			if (is_route)
				s->route = val;
			else
				s->backend = val;
		}
	}
	*pp = p + 1;
	/* the rest after the values: what was written is still shorter than
	 * what was read (each label lost at least its quotes) */
	memcpy(w, rest, nrest);
	w[nrest] = '\0';
	s->rest = w;
	return 0;
}

static int grow(void **arr, unsigned n, unsigned *cap, size_t size)
{
	if (n < *cap)
		return 0;
	unsigned ncap = *cap ? *cap * 2 : 64;
	void *a = realloc(*arr, (size_t)ncap * size);
	if (!a)
		return -ENOMEM;
	*arr = a;
	*cap = ncap;
	return 0;
}

/* The family a sample named `name` belongs to: the current one (for a
 * histogram or summary also NAME_bucket, _sum, _count), else a new one. */
static int family_of(struct mindex *x, unsigned *fcap, const char *name, unsigned *out)
{
	if (x->nf) {
		const struct mfamily *f = &x->f[x->nf - 1];
		size_t n = strlen(f->name);
		if (!strcmp(name, f->name) ||
		    (!strncmp(name, f->name, n) && (!strcmp(f->type, "histogram") || !strcmp(f->type, "summary")) &&
		     (!strcmp(name + n, "_bucket") || !strcmp(name + n, "_sum") || !strcmp(name + n, "_count")))) {
			*out = x->nf - 1;
			return 0;
		}
	}
	if (grow((void **)&x->f, x->nf, fcap, sizeof(*x->f)))
		return -ENOMEM;
	x->f[x->nf] = (struct mfamily){ .name = name, .type = "untyped", .help = "", .first = x->ns };
	*out = x->nf++;
	return 0;
}

/* "# HELP name text" or "# TYPE name type": starts the family (or names the
 * current one's help or type). */
static int comment(struct mindex *x, unsigned *fcap, char *l)
{
	int help = !strncmp(l, "# HELP ", 7);
	char *name = l + 7, *text;
	unsigned fi;

	if (!help && strncmp(l, "# TYPE ", 7))
		return 0; /* another comment: nothing to keep */
	text = name + strcspn(name, " ");
	if (*text)
		*text++ = '\0';
	if (!*name)
		return 0;
	if (!x->nf || strcmp(x->f[x->nf - 1].name, name)) {
		if (grow((void **)&x->f, x->nf, fcap, sizeof(*x->f)))
			return -ENOMEM;
		x->f[x->nf++] = (struct mfamily){ .name = name, .type = "untyped", .help = "",
						  .first = x->ns };
	}
	fi = x->nf - 1;
	if (help)
		x->f[fi].help = text;
	else
		x->f[fi].type = text;
	return 0;
}

static int sample(struct mindex *x, unsigned *scap, unsigned *fcap, char *l)
{
	struct msample s = { .rest = "" };
	char *p = l + strcspn(l, "{ "), *end;

	if (p == l || !*p)
		return 1;
	s.name = l;
	if (*p == '{') {
		*p = '\0';
		p++;
		if (read_labels(&p, l + strlen(l) + 1, &s))
			return 1;
	} else {
		*p++ = '\0';
	}
	while (*p == ' ')
		p++;
	s.v = strtod(p, &end);
	if (end == p)
		return 1;
	if (family_of(x, fcap, s.name, &s.fam) || grow((void **)&x->s, x->ns, scap, sizeof(*x->s)))
		return -ENOMEM;
	x->f[s.fam].n++;
	x->f[s.fam].has_route |= s.route != NULL;
	x->s[x->ns++] = s;
	return 0;
}

static int build_hash(struct mindex *x)
{
	unsigned n = 64;

	while (n < 2 * x->ns + 1)
		n *= 2;
	if (!(x->slot = calloc(n, sizeof(*x->slot))))
		return -ENOMEM;
	x->nslot = n;
	for (unsigned i = 0; i < x->ns; i++) {
		const struct msample *s = &x->s[i];
		unsigned k = (unsigned)key_hash(s->name, s->route, s->backend, s->rest) & (n - 1);
		while (x->slot[k])
			k = (k + 1) & (n - 1);
		x->slot[k] = i + 1; /* a duplicate stays behind the first: lookups find the first */
	}
	return 0;
}

int metrics_index_parse(char *text, size_t len, struct mindex *x)
{
	unsigned scap = 0, fcap = 0;
	char *l = text, *stop = text + len;

	memset(x, 0, sizeof(*x));
	while (l < stop && *l) {
		char *nl = strchr(l, '\n');
		int r;
		if (nl)
			*nl = '\0';
		if (*l == '#')
			r = comment(x, &fcap, l);
		else
			r = *l ? sample(x, &scap, &fcap, l) : 0;
		if (r < 0) {
			metrics_index_free(x);
			return -ENOMEM;
		}
		x->skipped += r > 0;
		if (!nl)
			break;
		l = nl + 1;
	}
	if (build_hash(x)) {
		metrics_index_free(x);
		return -ENOMEM;
	}
	return 0;
}

void metrics_index_free(struct mindex *x)
{
	free(x->s);
	free(x->f);
	free(x->slot);
	memset(x, 0, sizeof(*x));
}

const struct msample *metrics_index_find(const struct mindex *x, const char *name,
					 const char *route, const char *backend, const char *rest)
{
	if (!x->nslot)
		return NULL;
	if (!rest)
		rest = "";
	unsigned k = (unsigned)key_hash(name, route, backend, rest) & (x->nslot - 1);
	for (; x->slot[k]; k = (k + 1) & (x->nslot - 1)) {
		const struct msample *s = &x->s[x->slot[k] - 1];
		if (!strcmp(s->name, name) && same(s->route, route) && same(s->backend, backend) &&
		    !strcmp(s->rest, rest))
			return s;
	}
	return NULL;
}

double metrics_index_value(const struct mindex *x, const char *name, const char *route,
			   const char *backend, const char *rest, double dflt)
{
	const struct msample *s = metrics_index_find(x, name, route, backend, rest);

	return s ? s->v : dflt;
}
