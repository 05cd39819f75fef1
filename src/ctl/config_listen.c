/* config_listen: a config's listening sockets. Routes that give the same
 * address share one socket (a listen group); the ClientHello's SNI chooses
 * among the routes that have `sni`, and the one route without it takes
 * everyone else. This file builds the groups and says what cannot work:
 * two routes that would both take the same clients, and names that more
 * than one route matches (which one wins, when the rule decides it). */
#define _GNU_SOURCE
#include "config_listen.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "tls_route.h"

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

/* The group listening on a, or NULL. */
static struct listen_group *group_of(struct config *c, const struct addr *a)
{
	for (unsigned i = 0; i < c->nlst; i++)
		if (same_addr(c->lst[i].addr, a))
			return &c->lst[i];
	return NULL;
}

/* Each name of a's sni against each of b's, on one listener: the same
 * name twice is an error (no rule picks one) unless their alpn lists tell
 * the clients apart; an exact name under the other's wildcard, or two
 * nested wildcards, is decided by the rule and said as a note. */
static int sni_overlaps(const struct config *c, const struct listen_group *g,
			const struct route *a, const struct route *b)
{
	char wa[SETTING_TEXT_MAX * 4], wb[SETTING_TEXT_MAX * 4], where[300];
	char *sa, *sb, *na, *nb;
	int bad = 0;

	snprintf(wa, sizeof(wa), "%s", a->sni);
	for (na = strtok_r(wa, " \t", &sa); na; na = strtok_r(NULL, " \t", &sa)) {
		snprintf(wb, sizeof(wb), "%s", b->sni);
		for (nb = strtok_r(wb, " \t", &sb); nb; nb = strtok_r(NULL, " \t", &sb)) {
			at(c, b->sni_line, where, sizeof(where));
			if (!strcasecmp(na, nb)) {
				if (strcasecmp(a->alpn, b->alpn))
					continue; /* told apart by the protocols offered */
				fprintf(stderr, "%ssni %s of route '%s' is also in route '%s' (line %u) on "
					"listen %s: no rule says which gets it; give it to one route, "
					"or tell them apart with alpn\n", where, nb, b->name, a->name,
					a->sni_line, g->addr->text);
				bad++;
			} else if (na[0] == '*' && sni_specificity(na, nb[0] == '*' ? nb + 2 : nb)) {
				fprintf(stderr, "%snote: sni %s of route '%s' is within %s of route '%s' on "
					"listen %s: %s wins (exact names before wildcards, longer "
					"wildcards first)\n", where, nb, b->name, na, a->name,
					g->addr->text, nb);
			} else if (nb[0] == '*' && sni_specificity(nb, na[0] == '*' ? na + 2 : na)) {
				fprintf(stderr, "%snote: sni %s of route '%s' is within %s of route '%s' on "
					"listen %s: %s wins (exact names before wildcards, longer "
					"wildcards first)\n", where, na, a->name, nb, b->name,
					g->addr->text, na);
			}
		}
	}
	return bad;
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
		if (r->sni[0] && q->sni[0])
			bad += sni_overlaps(c, g, q, r);
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

int config_listen_groups(struct config *c)
{
	int bad = 0;

	c->nlst = 0;
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
	return bad ? -1 : 0;
}
