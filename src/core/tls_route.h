/* SPDX-License-Identifier: MIT */
/* tls_route: the route a TLS client asked for. A listener whose routes
 * have `sni` peeks at the client's first bytes until the whole ClientHello
 * is there (tls_hello.h), then chooses: the most specific of its names that
 * matches (an exact name, then the longest wildcard: sni_match.h); among
 * the routes that give that name, the first (file order) whose alpn list,
 * if it has one, meets the client's offer; else the listener's route
 * without sni, never a wider name's route (only the one name is looked
 * up). alpn without sni is refused when the config is read (route_keys.c).
 * Nothing is consumed: the engine forwards the hello itself, byte for
 * byte. */
#ifndef SPLICER_TLS_ROUTE_H
#define SPLICER_TLS_ROUTE_H
#include "config.h"
#include "tls_hello.h"

/* The route for a parsed hello (NULL: none takes it, and the listener has
 * no route without sni). hello NULL: not TLS. */
struct route *tls_route_choose(const struct listen_group *g, const struct tls_hello *hello);

#endif
