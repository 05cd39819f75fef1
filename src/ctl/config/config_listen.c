/* SPDX-License-Identifier: MIT */
/* config_listen: a config's listening sockets. Routes that give the same
 * address share one socket (a listen group); the ClientHello's SNI chooses
 * among the routes that have `sni`, and the one route without it takes
 * everyone else. This file builds the groups and their name tables and says
 * what cannot work: two routes that would both take the same clients, or
 * a route that never gets one (errors), and what a rule decides (notes:
 * an exact name before a wildcard, a longer wildcard first, the first
 * route in the file for an ALPN protocol two routes of a name share, the
 * largest tls_hello_* of the routes on one address). */
#define _GNU_SOURCE
#include "config_listen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>

#include "sni_match.h"
#include "units.h"

/* The file of a location: the main one or one it includes. */
static const char *loc_file(const struct config *c, unsigned loc)
{
	unsigned f = CONF_LOC_FILE(loc);

	return f && f <= c->nincl ? c->incl[f] : c->file;
}

void config_where(const struct config *c, unsigned line, char *buf, size_t len)
{
	if (c->file[0] && line)
		snprintf(buf, len, "%s:%u: ", loc_file(c, line), CONF_LOC_LINE(line));
	else
		snprintf(buf, len, "splicer: ");
}

const char *config_line_ref(const struct config *c, unsigned loc, char *buf, size_t len)
{
	if (CONF_LOC_FILE(loc))
		snprintf(buf, len, "%s:%u", loc_file(c, loc), CONF_LOC_LINE(loc));
	else
		snprintf(buf, len, "line %u", CONF_LOC_LINE(loc));
	return buf;
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
		if (addr_equal(c->lst[i].addr, a))
			return &c->lst[i];
	return NULL;
}

/* A route joins g; returns the problems it brings. */
static int group_join(const struct config *c, struct listen_group *g, struct route *r,
		      unsigned line)
{
	char where[300], ref[300];
	int bad = 0;

	config_where(c, line, where, sizeof(where));
	for (unsigned i = 0; i < g->nroute; i++) {
		const struct route *q = g->route[i];
		if (q == r) {
			fprintf(stderr, "%slisten %s given twice in route '%s'\n", where,
				g->addr->text, r->name);
			return 1;
		}
		if (q->o.accept_proxy != r->o.accept_proxy) {
			fprintf(stderr, "%slisten %s: route '%s' has accept_proxy %s but route '%s' "
				"(%s) on the same address has it %s: clients of one listener "
				"either all send a PROXY header or none does\n", where, g->addr->text,
				r->name, r->o.accept_proxy ? "on" : "off", q->name,
				config_line_ref(c, g->line, ref, sizeof(ref)),
				q->o.accept_proxy ? "on" : "off");
			bad++;
		}
	}
	if (!r->sni[0]) {
		if (g->dflt) {
			fprintf(stderr, "%slisten %s: routes '%s' (%s) and '%s' share this address "
				"and neither has sni: both would take every client; give one of them "
				"sni = NAMES\n", where, g->addr->text, g->dflt->name,
				config_line_ref(c, g->line, ref, sizeof(ref)), r->name);
			bad++;
		} else {
			g->dflt = r;
		}
	} else {
		g->hello = 1;
	}
	/* the client's server name and ALPN for the PROXY header: read its
	 * ClientHello first, as for sni routes */
	if (r->o.pp_tlvs & (PP_SEND_AUTHORITY | PP_SEND_ALPN))
		g->hello = 1;
	g->route[g->nroute++] = r;
	return bad;
}

/* The line where r listens on g's address. */
static unsigned listen_line_in(const struct route *r, const struct listen_group *g)
{
	for (unsigned l = 0; l < r->nlisten; l++)
		if (addr_equal(&r->listen[l], g->addr))
			return r->listen_line[l];
	return g->line;
}

static uint64_t hello_timeout_of(const struct route *r)
{
	return r->o.tls_hello_timeout_ms;
}

static uint64_t hello_max_of(const struct route *r)
{
	return r->o.tls_hello_max;
}

/* One of the ClientHello's limits on g: the largest its routes set. The
 * hello is read before any route is chosen, so the limit is the
 * listener's; routes that set different values get a note naming the one
 * that applies. */
static uint64_t group_hello_limit(const struct config *c, const struct listen_group *g,
				  const char *key, uint64_t (*of)(const struct route *),
				  void (*fmt)(uint64_t, char *, unsigned))
{
	char where[300], list[1024] = "", v[32];
	uint64_t max = 0;
	unsigned line = 0;
	size_t used = 0;

	for (unsigned i = 0; i < g->nroute; i++) {
		const struct route *r = g->route[i];
		if (of(r) > max)
			max = of(r);
		if (!line && of(r) != of(g->route[0]))
			line = listen_line_in(r, g);
		fmt(of(r), v, sizeof(v));
		if (used < sizeof(list))
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s %s",
						 i ? ", " : "", r->name, v);
	}
	if (!line || !g->hello)
		return max;
	config_where(c, line, where, sizeof(where));
	fmt(max, v, sizeof(v));
	fprintf(stderr, "%snote: listen %s: its routes set different %s (%s): the ClientHello is "
		"read before a route is chosen, so the largest, %s, applies to every client of "
		"this address\n", where, g->addr->text, key, list, v);
	return max;
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

/* Whether the space-separated list has the word w[0..len). ALPN names
 * compare byte for byte, as on the wire (RFC 7301). */
static int list_has(const char *list, const char *w, size_t len)
{
	for (const char *p = list; *p;) {
		size_t l = strcspn(p, " ");
		if (l == len && !memcmp(p, w, len))
			return 1;
		p += l + (p[l] == ' ');
	}
	return 0;
}

/* The words of a that b has too, space-separated ("" if none). */
static void list_common(const char *a, const char *b, char *out, size_t cap)
{
	size_t used = 0;

	out[0] = '\0';
	for (const char *p = a; *p;) {
		size_t l = strcspn(p, " ");
		if (list_has(b, p, l) && used < cap)
			used += (size_t)snprintf(out + used, cap - used, "%s%.*s", used ? " " : "",
						 (int)l, p);
		p += l + (p[l] == ' ');
	}
}

/* "route a" or "routes a, c": the routes of g in mask (bits by index). */
static void route_names(const struct listen_group *g, uint64_t mask, char *out, size_t cap)
{
	size_t used = (size_t)snprintf(out, cap, "%s", mask & (mask - 1) ? "routes" : "route");
	int n = 0;

	for (unsigned i = 0; i < g->nroute; i++)
		if ((mask >> i & 1) && used < cap)
			used += (size_t)snprintf(out + used, cap - used, "%s %s", n++ ? "," : "",
						 g->route[i]->name);
}

/* The earlier routes (before index i, in mask) whose alpn shares a
 * protocol with route i's; in *all, whether they list every one of them. */
static uint64_t alpn_shadows(const struct listen_group *g, uint64_t mask, unsigned i, int *all)
{
	const char *own = g->route[i]->alpn;
	uint64_t by = 0;

	*all = 1;
	for (const char *p = own; *p;) {
		size_t l = strcspn(p, " ");
		int seen = 0;
		for (unsigned j = 0; j < i; j++)
			if ((mask >> j & 1) && list_has(g->route[j]->alpn, p, l)) {
				by |= 1ULL << j;
				seen = 1;
			}
		*all &= seen;
		p += l + (p[l] == ' ');
	}
	return by;
}

/* The routes of g that give one name (mask) are tried in file order, and
 * the first whose alpn the client meets takes it (tls_route.c). So a route
 * after one without alpn, or whose every protocol earlier ones list, never
 * gets a client: an error; a protocol two lists share goes to the earlier
 * route: a note. */
static int name_alpn_check(const struct config *c, const struct listen_group *g,
			   const char *name, uint64_t mask)
{
	char where[300], shared[SETTING_TEXT_MAX], names[512];
	int bad = 0, all;

	for (unsigned i = 0; i < g->nroute; i++) {
		const struct route *r = g->route[i], *open = NULL;
		if (!(mask >> i & 1))
			continue;
		for (unsigned j = 0; j < i && !open; j++)
			if ((mask >> j & 1) && !g->route[j]->alpn[0])
				open = g->route[j];
		config_where(c, r->alpn[0] ? r->alpn_line : r->sni_line, where, sizeof(where));
		if (open) {
			fprintf(stderr, "%slisten %s: server name '%s' is given twice (route %s and "
				"route %s): route %s comes first in the file and has no alpn, so it "
				"takes every client for the name and route %s none; give the name to "
				"one route, or tell them apart with alpn (routes with alpn first)\n",
				where, g->addr->text, name, open->name, r->name, open->name, r->name);
			bad++;
			continue;
		}
		if (!r->alpn[0])
			continue; /* it takes the clients the routes before it leave */
		uint64_t by = alpn_shadows(g, mask, i, &all);
		if (by && all) {
			route_names(g, by, names, sizeof(names));
			fprintf(stderr, "%slisten %s: route %s never gets a client for server name "
				"'%s': every protocol of its alpn (%s) is also in the alpn of %s, "
				"which come%s first in the file, and the first route whose alpn the "
				"client meets takes it\n", where, g->addr->text, r->name, name,
				r->alpn, names, by & (by - 1) ? "" : "s");
			bad++;
			continue;
		}
		for (unsigned j = 0; j < i; j++) {
			if (!(by >> j & 1))
				continue;
			list_common(r->alpn, g->route[j]->alpn, shared, sizeof(shared));
			fprintf(stderr, "%snote: listen %s: server name '%s' is in route %s and "
				"route %s, whose alpn lists share %s: a client offering %s goes to "
				"route %s, the first in the file\n", where, g->addr->text, name,
				g->route[j]->name, r->name, shared,
				strchr(shared, ' ') ? "one of them" : "it", g->route[j]->name);
		}
	}
	return bad;
}

struct overlap_ctx {
	const struct config *c;
	const struct listen_group *g;
	const struct sni_rule *rules;
	const int *name_of; /* rules[i]'s name: index in g->name_routes */
	int bad;
};

/* Two names of which the rule picks the more specific: a note, saying
 * also where a client goes that the specific name's routes turn away by
 * alpn (not to the wider name: only one name is looked up). The same name
 * in two routes is name_alpn_check()'s. */
static void on_overlap(void *arg, enum sni_overlap kind, size_t a, size_t b, const char *msg)
{
	struct overlap_ctx *x = arg;
	const struct listen_group *g = x->g;
	const struct route *ra = g->route[x->rules[a].route], *rb = g->route[x->rules[b].route];
	/* g->route[] is in reading order, includes and all (a line number
	 * alone cannot order two files) */
	const struct route *later = x->rules[a].route > x->rules[b].route ? ra : rb;
	uint64_t mask = g->name_routes[x->name_of[a]];
	char where[300], names[512], turned[1024] = "";
	int every_alpn = 1;

	config_where(x->c, later->sni_line, where, sizeof(where));
	if (kind == SNI_DUP_EXACT || kind == SNI_DUP_WILDCARD) {
		if (ra != rb)
			return;
		fprintf(stderr, "%slisten %s: %s\n", where, g->addr->text, msg);
		x->bad++;
		return;
	}
	for (unsigned i = 0; i < g->nroute; i++)
		if (mask >> i & 1)
			every_alpn &= !!g->route[i]->alpn[0];
	if (every_alpn && !(mask >> x->rules[b].route & 1)) {
		route_names(g, mask, names, sizeof(names));
		snprintf(turned, sizeof(turned), "; a client for it that meets no alpn of %s %s "
			 "route %s", names, g->dflt ? "goes to the listener's default route, not to"
			 : "is closed (the listener has no route without sni), not sent to",
			 rb->name);
	}
	fprintf(stderr, "%snote: listen %s: %s%s\n", where, g->addr->text, msg, turned);
}

/* g's name table: each distinct name once, with the routes that give it. */
static int group_names(const struct config *c, struct listen_group *g)
{
	struct sni_rule *rules = calloc(NAMES_MAX, sizeof(*rules)), *uniq = NULL;
	char *store = malloc(MAX_ROUTES * sizeof(g->route[0]->sni)), err[256];
	int *name_of = NULL, n, nu = 0;
	struct overlap_ctx x = { c, g, rules, NULL, 0 };

	if (!rules || !store || (n = group_rules(g, rules, store, MAX_ROUTES *
						 sizeof(g->route[0]->sni))) < 0 ||
	    !(uniq = calloc((size_t)n + 1, sizeof(*uniq))) ||
	    !(name_of = calloc((size_t)n + 1, sizeof(*name_of))) ||
	    !(g->name_routes = calloc((size_t)n + 1, sizeof(*g->name_routes))) ||
	    !(g->sni = calloc(1, sizeof(*g->sni)))) {
		fprintf(stderr, "splicer: out of memory\n");
		free(rules), free(store), free(uniq), free(name_of);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		int u = 0;
		while (u < nu && strcasecmp(uniq[u].pattern, rules[i].pattern))
			u++;
		if (u == nu)
			uniq[nu++] = (struct sni_rule){ rules[i].pattern, u, rules[i].owner };
		g->name_routes[u] |= 1ULL << rules[i].route;
		name_of[i] = u;
	}
	x.name_of = name_of;
	sni_check_overlaps(rules, (size_t)n, on_overlap, &x);
	for (int u = 0; u < nu; u++)
		if (g->name_routes[u] & (g->name_routes[u] - 1))
			x.bad += name_alpn_check(c, g, uniq[u].pattern, g->name_routes[u]);
	if (!x.bad && sni_table_build(g->sni, uniq, (size_t)nu, err, sizeof(err))) {
		fprintf(stderr, "splicer: listen %s: %s\n", g->addr->text, err);
		x.bad++;
	}
	free(rules), free(store), free(uniq), free(name_of);
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
	for (unsigned k = 0; k < c->nlst && !bad; k++) {
		struct listen_group *g = &c->lst[k];
		g->hello_timeout_ms = group_hello_limit(c, g, "tls_hello_timeout", hello_timeout_of,
							format_duration_ms);
		g->hello_max = group_hello_limit(c, g, "tls_hello_max", hello_max_of, format_size);
		int names = 0;
		for (unsigned i = 0; i < g->nroute; i++)
			names |= g->route[i]->sni[0] != 0;
		if (names) /* (a hello read for the PROXY TLVs alone has no names) */
			bad += group_names(c, g);
	}
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
