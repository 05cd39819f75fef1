/* SPDX-License-Identifier: MIT */
/* config_listen: a config's listening sockets. Routes that give the same
 * address share one socket (a listen group); the ClientHello's SNI chooses
 * among the routes that have `sni`, and the one route without it takes
 * everyone else. This file builds the groups and their name tables and says
 * what cannot work: two routes that would both take the same clients
 * (errors), and names that more than one route matches where the rule
 * decides (notes: an exact name before a wildcard, a longer wildcard first). */
#define _GNU_SOURCE
#include "config_listen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>

#include "sni_match.h"

static void at(const struct config *c, unsigned line, char *buf, size_t len)
{
	if (c->file[0] && line)
		snprintf(buf, len, "%s:%u: ", c->file, line);
	else
		snprintf(buf, len, "splicer: ");
}

static int same_addr(const struct addr *a, const struct addr *b)
{
	return a->len == b->len && !memcmp(&a->ss, &b->ss, a->len);
}

static int ephemeral(const struct addr *a)
{
	return (a->ss.ss_family == AF_INET && !((const struct sockaddr_in *)&a->ss)->sin_port) ||
	       (a->ss.ss_family == AF_INET6 && !((const struct sockaddr_in6 *)&a->ss)->sin6_port);
}

/* The group listening on a, or NULL. Port 0 asks the kernel for a port of
 * its own each time: never shared. */
static struct listen_group *group_of(struct config *c, const struct addr *a)
{
	if (ephemeral(a))
		return NULL;
	for (unsigned i = 0; i < c->nlst; i++)
		if (same_addr(c->lst[i].addr, a))
			return &c->lst[i];
	return NULL;
}

/* A route joins g; returns the problems it brings. */
static int group_join(const struct config *c, struct listen_group *g, struct route *r,
		      unsigned line)
{
	char where[300];
	int bad = 0;

	at(c, line, where, sizeof(where));
	for (unsigned i = 0; i < g->nroute; i++) {
		const struct route *q = g->route[i];
		if (q == r) {
			fprintf(stderr, "%slisten %s given twice in route '%s'\n", where,
				g->addr->text, r->name);
			return 1;
		}
		if (q->o.accept_proxy != r->o.accept_proxy) {
			fprintf(stderr, "%slisten %s: route '%s' has accept_proxy %s but route '%s' "
				"(line %u) on the same address has it %s: clients of one listener "
				"either all send a PROXY header or none does\n", where, g->addr->text,
				r->name, r->o.accept_proxy ? "on" : "off", q->name, g->line,
				q->o.accept_proxy ? "on" : "off");
			bad++;
		}
	}
	if (!r->sni[0]) {
		if (g->dflt) {
			fprintf(stderr, "%slisten %s: routes '%s' (line %u) and '%s' share this address "
				"and neither has sni: both would take every client; give one of them "
				"sni = NAMES\n", where, g->addr->text, g->dflt->name, g->line, r->name);
			bad++;
		} else {
			g->dflt = r;
		}
	} else {
		g->hello = 1;
	}
	if (r->o.tls_hello_timeout_ms > g->hello_timeout_ms)
		g->hello_timeout_ms = r->o.tls_hello_timeout_ms;
	if (r->o.tls_hello_max > g->hello_max)
		g->hello_max = r->o.tls_hello_max;
	g->route[g->nroute++] = r;
	return bad;
}

/* Every name of every sni route of g, as sni_match rules (route: the
 * index in g->route). Returns the count, or -1 (no memory). */
#define NAMES_MAX (MAX_ROUTES * 64)
static int group_rules(const struct listen_group *g, struct sni_rule *rules, char *store,
		       size_t cap)
{
	size_t used = 0;
	int n = 0;

	for (unsigned i = 0; i < g->nroute; i++) {
		const char *p = g->route[i]->sni;
		while (*p) {
			size_t l = strcspn(p, " ");
			if (n == NAMES_MAX || used + l + 1 > cap)
				return -1;
			memcpy(store + used, p, l);
			store[used + l] = '\0';
			rules[n++] = (struct sni_rule){ store + used, (int)i, g->route[i]->name };
			used += l + 1;
			p += l + (p[l] == ' ');
		}
	}
	return n;
}

struct overlap_ctx {
	const struct config *c;
	const struct listen_group *g;
	const struct sni_rule *rules;
	int bad;
};

/* The same name in two routes is an error unless their alpn lists tell
 * the clients apart; a name the rule decides between is a note. */
static void on_overlap(void *arg, enum sni_overlap kind, size_t a, size_t b, const char *msg)
{
	struct overlap_ctx *x = arg;
	const struct route *ra = x->g->route[x->rules[a].route], *rb = x->g->route[x->rules[b].route];
	const struct route *later = ra->sni_line > rb->sni_line ? ra : rb;
	char where[300];

	at(x->c, later->sni_line, where, sizeof(where));
	if (kind == SNI_DUP_EXACT || kind == SNI_DUP_WILDCARD) {
		if (ra != rb && strcasecmp(ra->alpn, rb->alpn))
			return; /* told apart by the protocols the client offers */
		fprintf(stderr, "%slisten %s: %s: no rule says which gets it; give it to one route, "
			"or tell them apart with alpn\n", where, x->g->addr->text, msg);
		x->bad++;
		return;
	}
	fprintf(stderr, "%snote: listen %s: %s\n", where, x->g->addr->text, msg);
}

/* g's name table: each distinct name once, with the routes that give it. */
static int group_names(const struct config *c, struct listen_group *g)
{
	struct sni_rule *rules = calloc(NAMES_MAX, sizeof(*rules)), *uniq = NULL;
	char *store = malloc(MAX_ROUTES * sizeof(g->route[0]->sni)), err[256];
	struct overlap_ctx x = { c, g, rules, 0 };
	int n, nu = 0;

	if (!rules || !store || (n = group_rules(g, rules, store, MAX_ROUTES *
						 sizeof(g->route[0]->sni))) < 0 ||
	    !(uniq = calloc((size_t)n + 1, sizeof(*uniq))) ||
	    !(g->name_routes = calloc((size_t)n + 1, sizeof(*g->name_routes))) ||
	    !(g->sni = calloc(1, sizeof(*g->sni)))) {
		fprintf(stderr, "splicer: out of memory\n");
		free(rules), free(store), free(uniq);
		return 1;
	}
	sni_check_overlaps(rules, (size_t)n, on_overlap, &x);
	for (int i = 0; i < n; i++) {
		int u = 0;
		while (u < nu && strcasecmp(uniq[u].pattern, rules[i].pattern))
			u++;
		if (u == nu)
			uniq[nu++] = (struct sni_rule){ rules[i].pattern, u, rules[i].owner };
		g->name_routes[u] |= 1ULL << rules[i].route;
	}
	if (!x.bad && sni_table_build(g->sni, uniq, (size_t)nu, err, sizeof(err))) {
		fprintf(stderr, "splicer: listen %s: %s\n", g->addr->text, err);
		x.bad++;
	}
	free(rules), free(store), free(uniq);
	return x.bad;
}

int config_listen_groups(struct config *c)
{
	int bad = 0;

	config_listen_free(c);
	for (unsigned i = 0; i < c->nroutes; i++) {
		struct route *r = c->route[i];
		for (unsigned l = 0; l < r->nlisten; l++) {
			struct listen_group *g = group_of(c, &r->listen[l]);
			if (!g) {
				if (c->nlst == MAX_LISTENERS) {
					fprintf(stderr, "%s%smore than %u listen addresses in all\n",
						c->file, c->file[0] ? ": " : "splicer: ", MAX_LISTENERS);
					return -1;
				}
				g = &c->lst[c->nlst++];
				memset(g, 0, sizeof(*g));
				g->addr = &r->listen[l];
				g->line = r->listen_line[l];
			}
			bad += group_join(c, g, r, r->listen_line[l]);
		}
	}
	for (unsigned k = 0; k < c->nlst && !bad; k++)
		if (c->lst[k].hello)
			bad += group_names(c, &c->lst[k]);
	return bad ? -1 : 0;
}

void config_listen_free(struct config *c)
{
	for (unsigned k = 0; k < c->nlst; k++) {
		if (c->lst[k].sni)
			sni_table_free(c->lst[k].sni);
		free(c->lst[k].sni);
		free(c->lst[k].name_routes);
		c->lst[k].sni = NULL;
		c->lst[k].name_routes = NULL;
	}
	c->nlst = 0;
}
