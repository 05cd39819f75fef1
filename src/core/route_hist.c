/* SPDX-License-Identifier: MIT */
/* route_hist: see route_hist.h. */
#define _GNU_SOURCE
#include "route_hist.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MS 1000ULL
#define S  1000000ULL

static const uint64_t connect_bounds[] = {
	500, 1 * MS, 2500, 5 * MS, 10 * MS, 25 * MS, 50 * MS, 100 * MS, 250 * MS, 500 * MS,
	1 * S, 2500 * MS, 5 * S, 10 * S,
};
static const uint64_t first_byte_bounds[] = {
	1 * MS, 2500, 5 * MS, 10 * MS, 25 * MS, 50 * MS, 100 * MS, 250 * MS, 500 * MS,
	1 * S, 2500 * MS, 5 * S, 10 * S, 30 * S, 60 * S,
};
static const uint64_t duration_bounds[] = {
	1 * MS, 5 * MS, 10 * MS, 50 * MS, 100 * MS, 500 * MS, 1 * S, 5 * S, 10 * S, 30 * S,
	60 * S, 300 * S, 600 * S, 1800 * S, 3600 * S,
};
/* 64 B, 256 B, ... 64 GiB: powers of 4 */
static const uint64_t bytes_bounds[] = {
	64ULL << 0, 64ULL << 2, 64ULL << 4, 64ULL << 6, 64ULL << 8, 64ULL << 10, 64ULL << 12,
	64ULL << 14, 64ULL << 16, 64ULL << 18, 64ULL << 20, 64ULL << 22, 64ULL << 24,
	64ULL << 26, 64ULL << 28, 64ULL << 30,
};

#define NB(a) (unsigned)(sizeof(a) / sizeof((a)[0]))
static const struct {
	const uint64_t *b;
	unsigned n;
} bounds[HIST_KINDS] = {
	[HIST_CONNECT] = { connect_bounds, NB(connect_bounds) },
	[HIST_FIRST_BYTE] = { first_byte_bounds, NB(first_byte_bounds) },
	[HIST_DURATION] = { duration_bounds, NB(duration_bounds) },
	[HIST_BYTES_UP] = { bytes_bounds, NB(bytes_bounds) },
	[HIST_BYTES_DOWN] = { bytes_bounds, NB(bytes_bounds) },
};
_Static_assert(NB(bytes_bounds) <= HIST_BOUNDS_MAX && NB(connect_bounds) <= HIST_BOUNDS_MAX &&
	       NB(first_byte_bounds) <= HIST_BOUNDS_MAX && NB(duration_bounds) <= HIST_BOUNDS_MAX,
	       "a kind has more bounds than struct hist_read holds");

/* What one worker recorded for a route: written by that worker only.
 * No count: it is the buckets' total, so _count always equals the +Inf
 * bucket, however a scrape interleaves with the worker. */
struct hist_cell {
	uint64_t bucket[HIST_BOUNDS_MAX + 1];
	uint64_t sum;
};
struct hist_slice {
	struct hist_cell h[HIST_KINDS];
} __attribute__((aligned(64)));

/* A route name's histograms; each config generation that has the route
 * holds a reference (see backend.c's registry: the same lifetime rules). */
struct route_hist {
	struct route_hist *next;
	unsigned refs;
	char route[ROUTE_NAME_MAX];
	struct hist_slice *slice[HIST_WORKERS_MAX]; /* by worker id; NULL until it records */
};

static struct route_hist *hists;
static pthread_mutex_t hists_lock = PTHREAD_MUTEX_INITIALIZER;

static struct route_hist *hist_get(const char *route)
{
	struct route_hist *h;

	pthread_mutex_lock(&hists_lock);
	for (h = hists; h && strcmp(h->route, route); h = h->next)
		;
	if (!h && (h = calloc(1, sizeof(*h)))) {
		snprintf(h->route, sizeof(h->route), "%s", route);
		h->next = hists;
		hists = h;
	}
	if (h)
		h->refs++;
	pthread_mutex_unlock(&hists_lock);
	return h;
}

static void hist_put(struct route_hist *h)
{
	struct route_hist **pp;

	pthread_mutex_lock(&hists_lock);
	if (!--h->refs) {
		for (pp = &hists; *pp != h; pp = &(*pp)->next)
			;
		*pp = h->next;
		for (unsigned w = 0; w < HIST_WORKERS_MAX; w++)
			free(h->slice[w]);
		free(h);
	}
	pthread_mutex_unlock(&hists_lock);
}

int route_hist_build(struct config *c)
{
	for (unsigned i = 0; i < c->nroutes; i++) {
		route_hist_free(c->route[i]);
		if (!(c->route[i]->hist = hist_get(c->route[i]->name))) {
			fprintf(stderr, "splicer: out of memory\n");
			return -1;
		}
	}
	return 0;
}

void route_hist_free(struct route *r)
{
	if (r->hist)
		hist_put(r->hist);
	r->hist = NULL;
}

const uint64_t *route_hist_bounds(enum hist_kind kind, unsigned *n)
{
	*n = bounds[kind].n;
	return bounds[kind].b;
}

static unsigned bucket_of(enum hist_kind kind, uint64_t v)
{
	unsigned i = 0;

	while (i < bounds[kind].n && v > bounds[kind].b[i])
		i++;
	return i;
}

/* The worker's slice, allocated the first time it records for the route
 * (a few hundred bytes once per route and worker). */
static struct hist_slice *slice_of(struct route_hist *h, unsigned worker)
{
	struct hist_slice *s = h->slice[worker]; /* only this worker stores it */

	if (s)
		return s;
	if (!(s = aligned_alloc(64, sizeof(*s))))
		return NULL; /* the observation is lost, not the session */
	memset(s, 0, sizeof(*s));
	__atomic_store_n(&h->slice[worker], s, __ATOMIC_RELEASE);
	return s;
}

void route_hist_add(struct route *r, unsigned worker, enum hist_kind kind, uint64_t value)
{
	struct hist_slice *s;
	struct hist_cell *c;
	unsigned b;

	if (!r->hist || worker >= HIST_WORKERS_MAX || !(s = slice_of(r->hist, worker)))
		return;
	c = &s->h[kind];
	b = bucket_of(kind, value);
	/* one writer: plain increments, stored whole for the scraper */
	__atomic_store_n(&c->bucket[b], c->bucket[b] + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&c->sum, c->sum + value, __ATOMIC_RELAXED);
}

void route_hist_read(const struct route *r, enum hist_kind kind, struct hist_read *out)
{
	memset(out, 0, sizeof(*out));
	if (!r->hist)
		return;
	for (unsigned w = 0; w < HIST_WORKERS_MAX; w++) {
		const struct hist_slice *s = __atomic_load_n(&r->hist->slice[w], __ATOMIC_ACQUIRE);
		if (!s)
			continue;
		for (unsigned b = 0; b <= bounds[kind].n; b++)
			out->bucket[b] += __atomic_load_n(&s->h[kind].bucket[b], __ATOMIC_RELAXED);
		out->sum += __atomic_load_n(&s->h[kind].sum, __ATOMIC_RELAXED);
	}
	for (unsigned b = 0; b <= bounds[kind].n; b++)
		out->count += out->bucket[b];
}

uint64_t route_hist_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}
