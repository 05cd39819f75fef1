/* tls_route: choosing a listener's route from the ClientHello (tls_route.h). */
#define _GNU_SOURCE
#include "tls_route.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

unsigned sni_specificity(const char *pattern, const char *host)
{
	size_t pl = strlen(pattern), hl = strlen(host);

	if (pattern[0] != '*')
		return !strcasecmp(pattern, host) ? 1000 : 0;
	/* "*.example.com": one or more labels before ".example.com" */
	if (hl < pl || hl == pl - 1 || strcasecmp(host + hl - (pl - 1), pattern + 1))
		return 0;
	return (unsigned)pl; /* longer suffix, more specific; always < 1000 (253 max) */
}

static unsigned route_match(const struct route *r, const char *host)
{
	char names[sizeof(r->sni)], *save, *tok;
	unsigned best = 0;

	snprintf(names, sizeof(names), "%s", r->sni);
	for (tok = strtok_r(names, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		unsigned m = sni_specificity(tok, host);
		if (m > best)
			best = m;
	}
	return best;
}

static int alpn_met(const struct route *r, const struct tls_hello *h)
{
	char protos[sizeof(r->alpn)], *save, *tok;

	if (!r->alpn[0])
		return 1;
	snprintf(protos, sizeof(protos), "%s", r->alpn);
	for (tok = strtok_r(protos, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
		if (tls_hello_offers_alpn(h, tok, strlen(tok)))
			return 1;
	return 0;
}

struct route *tls_route_choose(const struct listen_group *g, const struct tls_hello *hello)
{
	struct route *best = NULL;
	unsigned best_m = 0;

	if (!hello || !hello->has_sni)
		return g->dflt;
	for (unsigned i = 0; i < g->nroute; i++) {
		struct route *r = g->route[i];
		unsigned m;
		if (!r->sni[0] || (m = route_match(r, hello->sni)) <= best_m || !alpn_met(r, hello))
			continue;
		best = r;
		best_m = m;
	}
	return best ? best : g->dflt;
}
