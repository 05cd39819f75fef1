/* SPDX-License-Identifier: MIT */
/* status_rates: see status_rates.h. */
#define _GNU_SOURCE
#include "status_rates.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker.h"

#define POINTS (RATE_POINTS + 1)     /* samples kept: RATE_POINTS intervals */
#define BPOINTS (RATE_BACKEND_S + 1) /* a backend's samples */

/* A backend's last samples (taken at its route's tick times, bt[]). */
struct bseries {
	char key[ADDR_TEXT_MAX];                  /* its address: another one starts afresh */
	uint64_t v[BPOINTS][RATE_BACKEND_KINDS];
};

/* A route's samples, or every route's summed (slot 0). */
struct rseries {
	char name[ROUTE_NAME_MAX];
	int used;
	uint64_t t[POINTS];                       /* monotonic ms */
	uint64_t v[POINTS][RATE_KINDS];
	unsigned head, n;                         /* the next slot, samples held */
	struct bseries *b;                        /* per backend index */
	unsigned nb;
	uint64_t bt[BPOINTS];
	unsigned bhead, bn;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	int started, stop;
	struct config *const *cfgp;
	struct rseries slot[MAX_ROUTES + 1];      /* [0]: all routes */
} rs = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void read_route(const struct route *r, uint64_t v[RATE_KINDS])
{
	const struct route_stats *st = r->st;

	v[RATE_SESSIONS] = STAT_GET(st->sessions);
	v[RATE_BYTES_UP] = STAT_GET(st->bytes_up);
	v[RATE_BYTES_DOWN] = STAT_GET(st->bytes_down);
	v[RATE_REFUSED] = STAT_GET(st->denied) + STAT_GET(st->source_conns_rejected) +
			  STAT_GET(st->source_rate_rejected) + STAT_GET(st->source_table_full);
	v[RATE_ERRORS] = STAT_GET(st->connect_errors);
}

static void push(struct rseries *s, uint64_t now_ms, const uint64_t v[RATE_KINDS])
{
	s->t[s->head] = now_ms;
	memcpy(s->v[s->head], v, sizeof(s->v[0]));
	s->head = (s->head + 1) % POINTS;
	if (s->n < POINTS)
		s->n++;
}

/* The backends' samples: a route whose backends changed in number starts
 * them afresh; one whose address at an index changed starts that one. */
static void push_backends(struct rseries *s, const struct route *r, uint64_t now_ms)
{
	if (s->nb != r->nbackend) {
		free(s->b);
		s->b = r->nbackend ? calloc(r->nbackend, sizeof(*s->b)) : NULL;
		s->nb = s->b ? r->nbackend : 0;
		s->bhead = s->bn = 0;
	}
	if (!s->nb)
		return;
	for (unsigned i = 0; i < s->nb; i++) {
		struct bseries *b = &s->b[i];
		const struct backend_health *h = r->health[i];
		if (strcmp(b->key, r->backend[i].addr.text)) {
			memset(b, 0, sizeof(*b));
			snprintf(b->key, sizeof(b->key), "%s", r->backend[i].addr.text);
		}
		b->v[s->bhead][RATE_SESSIONS] = STAT_GET(h->sessions);
		b->v[s->bhead][RATE_BYTES_UP] = STAT_GET(h->bytes_up);
		b->v[s->bhead][RATE_BYTES_DOWN] = STAT_GET(h->bytes_down);
	}
	s->bt[s->bhead] = now_ms;
	s->bhead = (s->bhead + 1) % BPOINTS;
	if (s->bn < BPOINTS)
		s->bn++;
}

static struct rseries *route_slot(const char *name)
{
	struct rseries *free_slot = NULL;

	for (unsigned i = 1; i <= MAX_ROUTES; i++) {
		if (rs.slot[i].used && !strcmp(rs.slot[i].name, name))
			return &rs.slot[i];
		if (!rs.slot[i].used && !free_slot)
			free_slot = &rs.slot[i];
	}
	if (free_slot) {
		free(free_slot->b);
		memset(free_slot, 0, sizeof(*free_slot));
		free_slot->used = 1;
		snprintf(free_slot->name, sizeof(free_slot->name), "%s", name);
	}
	return free_slot;
}

void status_rates_sample(const struct config *c, uint64_t now_ms)
{
	uint64_t total[RATE_KINDS] = { 0 }, v[RATE_KINDS];
	char seen[MAX_ROUTES + 1] = { 0 };

	pthread_mutex_lock(&rs.lock);
	for (unsigned i = 0; i < c->nroutes; i++) {
		const struct route *r = c->route[i];
		struct rseries *s = route_slot(r->name);
		read_route(r, v);
		for (unsigned k = 0; k < RATE_KINDS; k++)
			total[k] += v[k];
		if (!s)
			continue;
		seen[s - rs.slot] = 1;
		push(s, now_ms, v);
		push_backends(s, r, now_ms);
	}
	rs.slot[0].used = 1;
	push(&rs.slot[0], now_ms, total);
	/* a route that is gone: its slot is free for another name */
	for (unsigned i = 1; i <= MAX_ROUTES; i++)
		if (rs.slot[i].used && !seen[i]) {
			free(rs.slot[i].b);
			rs.slot[i].b = NULL;
			rs.slot[i].nb = 0;
			rs.slot[i].used = 0;
		}
	pthread_mutex_unlock(&rs.lock);
}

/* (b - a) per second over ms; a counter that went back counts from 0. */
static double per_s(uint64_t a, uint64_t b, uint64_t ms)
{
	if (!ms)
		return 0;
	return (double)(b >= a ? b - a : b) * 1000.0 / (double)ms;
}

int status_rates_route(const char *route, struct rate_view *v)
{
	const struct rseries *s = NULL;

	memset(v, 0, sizeof(*v));
	pthread_mutex_lock(&rs.lock);
	if (!route)
		s = rs.slot[0].used ? &rs.slot[0] : NULL;
	for (unsigned i = 1; route && i <= MAX_ROUTES && !s; i++)
		if (rs.slot[i].used && !strcmp(rs.slot[i].name, route))
			s = &rs.slot[i];
	if (s && s->n >= 2) {
		unsigned first = (s->head + POINTS - s->n) % POINTS, last = (s->head + POINTS - 1) % POINTS;
		unsigned back = s->n - 1 < RATE_NOW_S ? s->n - 1 : RATE_NOW_S;
		unsigned from = (last + POINTS - back) % POINTS;
		v->n = s->n - 1;
		for (unsigned i = 0; i < v->n; i++) {
			unsigned a = (first + i) % POINTS, b = (first + i + 1) % POINTS;
			for (unsigned k = 0; k < RATE_KINDS; k++)
				v->per_s[k][i] = (float)per_s(s->v[a][k], s->v[b][k], s->t[b] - s->t[a]);
		}
		for (unsigned k = 0; k < RATE_KINDS; k++)
			v->now[k] = per_s(s->v[from][k], s->v[last][k], s->t[last] - s->t[from]);
	}
	pthread_mutex_unlock(&rs.lock);
	return v->n ? 0 : -1;
}

int status_rates_backend(const char *route, unsigned index, const char *backend,
			 double now[RATE_BACKEND_KINDS])
{
	int rc = -1;

	memset(now, 0, RATE_BACKEND_KINDS * sizeof(*now));
	pthread_mutex_lock(&rs.lock);
	for (unsigned i = 1; i <= MAX_ROUTES; i++) {
		const struct rseries *s = &rs.slot[i];
		if (!s->used || strcmp(s->name, route))
			continue;
		if (index < s->nb && s->bn >= 2 && !strcmp(s->b[index].key, backend)) {
			unsigned last = (s->bhead + BPOINTS - 1) % BPOINTS;
			unsigned first = (s->bhead + BPOINTS - s->bn) % BPOINTS;
			for (unsigned k = 0; k < RATE_BACKEND_KINDS; k++)
				now[k] = per_s(s->b[index].v[first][k], s->b[index].v[last][k],
					       s->bt[last] - s->bt[first]);
			rc = 0;
		}
		break;
	}
	pthread_mutex_unlock(&rs.lock);
	return rc;
}

static void *rates_main(void *arg)
{
	struct timespec until;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &until);
	pthread_mutex_lock(&rs.lock);
	while (!rs.stop) {
		const struct config *c = __atomic_load_n(rs.cfgp, __ATOMIC_ACQUIRE);
		pthread_mutex_unlock(&rs.lock);
		/* a retired config stays 10 s (reload.c): far longer than a sample */
		status_rates_sample(c, now_monotonic_ms());
		pthread_mutex_lock(&rs.lock);
		until.tv_sec += 1;
		while (!rs.stop && pthread_cond_timedwait(&rs.cond, &rs.lock, &until) != ETIMEDOUT) {
		}
	}
	pthread_mutex_unlock(&rs.lock);
	return NULL;
}

int status_rates_start(struct config *const *cfgp)
{
	pthread_condattr_t ca;
	int e;

	rs.cfgp = cfgp;
	rs.stop = 0;
	if ((e = pthread_condattr_init(&ca)))
		return -e;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	e = pthread_cond_init(&rs.cond, &ca);
	pthread_condattr_destroy(&ca);
	if (e)
		return -e;
	if ((e = pthread_create(&rs.thread, NULL, rates_main, NULL))) {
		pthread_cond_destroy(&rs.cond);
		return -e;
	}
	rs.started = 1;
	return 0;
}

void status_rates_stop(void)
{
	if (!rs.started)
		return;
	pthread_mutex_lock(&rs.lock);
	rs.stop = 1;
	pthread_cond_signal(&rs.cond);
	pthread_mutex_unlock(&rs.lock);
	pthread_join(rs.thread, NULL);
	pthread_cond_destroy(&rs.cond);
	rs.started = 0;
	for (unsigned i = 0; i <= MAX_ROUTES; i++) {
		free(rs.slot[i].b);
		memset(&rs.slot[i], 0, sizeof(rs.slot[i]));
	}
}
