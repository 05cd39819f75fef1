/* SPDX-License-Identifier: MIT */
/* route_admit: ACLs and per-source limits of a route (route_admit.h). */
#define _GNU_SOURCE
#include "route_admit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "source_table.h"

/* Source tables by route name: a reload's new route takes the table of the
 * old route of the same name, so sessions still open count against their
 * sources across the reload. Touched at config build and free only. */
struct shared_table {
	struct shared_table *next;
	char route[ROUTE_NAME_MAX];
	unsigned refs;
	struct source_table *t;
};

static struct shared_table *tables;
static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;

static struct source_table *table_get(const char *route, size_t size)
{
	struct shared_table *e;
	struct source_table *t = NULL;

	pthread_mutex_lock(&tables_lock);
	for (e = tables; e && strcmp(e->route, route); e = e->next)
		;
	if (!e && (e = calloc(1, sizeof(*e)))) {
		snprintf(e->route, sizeof(e->route), "%s", route);
		if (!(e->t = source_table_new(size))) {
			free(e);
			e = NULL;
		} else {
			e->next = tables;
			tables = e;
		}
	}
	if (e) {
		e->refs++;
		t = e->t;
	}
	pthread_mutex_unlock(&tables_lock);
	return t;
}

static void table_put(struct source_table *t)
{
	struct shared_table **pp, *e;

	pthread_mutex_lock(&tables_lock);
	for (pp = &tables; (e = *pp) && e->t != t; pp = &e->next)
		;
	if (e && !--e->refs) {
		*pp = e->next;
		source_table_free(e->t);
		free(e);
	}
	pthread_mutex_unlock(&tables_lock);
}

int route_admit_build(struct config *c)
{
	char err[256];

	for (unsigned i = 0; i < c->nroutes; i++) {
		struct route *r = c->route[i];

		route_admit_free(r);
		/* the reader checked every range: these do not fail but on memory */
		if ((r->allow[0] && cidr_list_parse(&r->acl.allow, r->allow, err, sizeof(err), NULL, 0)) ||
		    (r->deny[0] && cidr_list_parse(&r->acl.deny, r->deny, err, sizeof(err), NULL, 0))) {
			fprintf(stderr, "splicer: route %s: %s\n", r->name, err);
			return -1;
		}
		/* a rate limit per source shares out by the source's sessions */
		if ((r->o.source_max_conns || r->o.source_conn_rate ||
		     ((r->o.rate_up | r->o.rate_down) & SOCKOPT_RATE_PER_SOURCE)) &&
		    !(r->sources = table_get(r->name, c->source_table_size))) {
			fprintf(stderr, "splicer: out of memory\n");
			return -1;
		}
		r->has_queue = 0;
		for (unsigned b = 0; b < r->nbackend; b++)
			r->has_queue |= r->backend[b].maxconn > 0;
	}
	return 0;
}

void route_admit_resize(const struct config *c)
{
	for (unsigned i = 0; i < c->nroutes; i++) {
		const struct route *r = c->route[i];
		struct source_table_stats st;
		int rc;

		if (!r->sources)
			continue;
		source_table_get_stats(r->sources, &st);
		if (st.size == c->source_table_size)
			continue; /* (another route of this name did it, or no change) */
		if ((rc = source_table_resize(r->sources, c->source_table_size))) {
			log_warn("route %s: source_table_size %llu not applied (%s); the table keeps %zu "
				 "sources", r->name, (unsigned long long)c->source_table_size,
				 strerror(-rc), st.size);
			continue;
		}
		if (st.live > c->source_table_size)
			log_warn("route %s: source_table_size %zu -> %llu, below the %zu sources with live "
				 "sessions: they keep their counts, and new sources are refused "
				 "(source_table_full) until fewer than %llu have sessions", r->name, st.size,
				 (unsigned long long)c->source_table_size, st.live,
				 (unsigned long long)c->source_table_size);
		else
			log_info("route %s: source_table_size %zu -> %llu; %zu sources with live sessions "
				 "kept with their counts", r->name, st.size,
				 (unsigned long long)c->source_table_size, st.live);
	}
}

void route_admit_free(struct route *r)
{
	cidr_list_free(&r->acl.allow);
	cidr_list_free(&r->acl.deny);
	if (r->sources)
		table_put(r->sources);
	r->sources = NULL;
}

enum admit_result route_admit_acl(const struct route *r, const struct sockaddr *peer)
{
	if ((r->acl.allow.n || r->acl.deny.n) && !acl_allows_sockaddr(&r->acl, peer))
		return ADMIT_DENIED;
	return ADMIT_OK;
}

enum admit_result route_admit_sources(struct route *r, const struct sockaddr *peer,
				      uint64_t now_ms, int *held)
{
	struct ip ip;

	*held = 0;
	if (!r->sources || !ip_from_sockaddr(peer, &ip))
		return ADMIT_OK; /* no limits, or a Unix client: nothing to key on */
	switch (source_admit(r->sources, peer, now_ms, (unsigned)r->o.source_max_conns,
			     (unsigned)r->o.source_conn_rate)) {
	case SOURCE_OK:
		*held = 1;
		return ADMIT_OK;
	case SOURCE_TOO_MANY_CONNS:
		return ADMIT_TOO_MANY;
	case SOURCE_TOO_FAST:
		return ADMIT_TOO_FAST;
	default:
		return ADMIT_TABLE_FULL;
	}
}

enum admit_result route_admit(struct route *r, const struct sockaddr *peer, uint64_t now_ms,
			      int *held)
{
	*held = 0;
	if (route_admit_acl(r, peer) != ADMIT_OK)
		return ADMIT_DENIED;
	return route_admit_sources(r, peer, now_ms, held);
}

bool route_admit_listener_denies(const struct listen_group *g, const struct sockaddr *peer)
{
	for (unsigned i = 0; i < g->nroute; i++)
		if (route_admit_acl(g->route[i], peer) == ADMIT_OK)
			return false;
	return g->nroute > 0;
}

int route_admit_hold(struct route *r, const struct sockaddr *peer, uint64_t now_ms)
{
	struct ip ip;

	if (!r->sources || !ip_from_sockaddr(peer, &ip))
		return 0;
	return source_hold(r->sources, peer, now_ms) == SOURCE_OK;
}

void route_admit_release(struct route *r, const struct sockaddr *peer)
{
	struct ip ip;

	if (r->sources && ip_from_sockaddr(peer, &ip))
		source_release(r->sources, peer);
}

const char *admit_reason(enum admit_result a)
{
	switch (a) {
	case ADMIT_DENIED:
		return "denied";
	case ADMIT_TOO_MANY:
		return "source-max-conns";
	case ADMIT_TOO_FAST:
		return "source-conn-rate";
	case ADMIT_TABLE_FULL:
		return "source-table-full";
	default:
		return "admitted";
	}
}
