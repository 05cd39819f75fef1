/* SPDX-License-Identifier: MIT */
/* tls_route: choosing a listener's route from the ClientHello (tls_route.h). */
#define _GNU_SOURCE
#include "tls_route.h"

#include <stdio.h>
#include <string.h>

#include "sni_match.h"

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
	int name;

	if (!hello || !hello->has_sni || !g->sni ||
	    (name = sni_lookup(g->sni, hello->sni, hello->sni_len)) < 0)
		return g->dflt;
	for (unsigned i = 0; i < g->nroute; i++)
		if ((g->name_routes[name] >> i & 1) && alpn_met(g->route[i], hello))
			return g->route[i];
	return g->dflt;
}
