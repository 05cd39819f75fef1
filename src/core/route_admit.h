/* SPDX-License-Identifier: MIT */
/* route_admit: who may open a session on a route. The route's allow/deny
 * lists (deny wins; an empty allow list admits every source), then its
 * per-source limits: concurrent sessions (source_max_conns) and new
 * sessions per second (source_conn_rate), kept in a bounded table per route
 * name that outlives reloads (source_table.h), so a reload neither forgets
 * a source's sessions nor lets it open as many again. */
#ifndef SPLICER_ROUTE_ADMIT_H
#define SPLICER_ROUTE_ADMIT_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"

/* TABLE_FULL: every tracked source has live sessions and a new one cannot
 * be tracked, so its limits could not be kept: refused (source_table.h). */
enum admit_result { ADMIT_OK, ADMIT_DENIED, ADMIT_TOO_MANY, ADMIT_TOO_FAST, ADMIT_TABLE_FULL };

/* Parses every route's allow/deny text (already validated by the file
 * reader) and takes its source table. Returns 0, or -1 after printing why
 * (out of memory). */
int route_admit_build(struct config *c);

/* A reload put c in force: the source table of each of its routes takes
 * c's source_table_size, with every source's counts kept
 * (source_table_resize; logged per route, with what a size below the live
 * sources means). route_admit_build leaves a running table at its size, so
 * a reload that fails changes nothing. */
void route_admit_resize(const struct config *c);

/* Gives back what route_admit_build took for r. */
void route_admit_free(struct route *r);

/* Whether a client at peer may start a session on r now: its allow/deny,
 * then its source limits. ADMIT_OK with source limits on counts the
 * session against its source: *held is set and route_admit_release must
 * follow when it ends. */
enum admit_result route_admit(struct route *r, const struct sockaddr *peer, uint64_t now_ms,
			      int *held);
void route_admit_release(struct route *r, const struct sockaddr *peer);
/* Counts a session against its source on r whatever the limits (one an
 * upgrade handed over, admitted by the old process): 1 when held (then
 * route_admit_release follows), 0 when r has no source limits or its table
 * has no room. */
int route_admit_hold(struct route *r, const struct sockaddr *peer, uint64_t now_ms);

/* The two halves of route_admit: r's allow/deny (ADMIT_OK or ADMIT_DENIED),
 * and r's source limits (with *held as above). */
enum admit_result route_admit_acl(const struct route *r, const struct sockaddr *peer);
enum admit_result route_admit_sources(struct route *r, const struct sockaddr *peer,
				      uint64_t now_ms, int *held);

/* A listener with sni routes, before the ClientHello names the route:
 * whether every route of g denies peer by its allow/deny (then no hello can
 * let it in, and it is refused at accept). The source limits meanwhile are
 * those of the route the client is on until then, the listener's default
 * (or its first route: session.c), taken with route_admit_sources. */
bool route_admit_listener_denies(const struct listen_group *g, const struct sockaddr *peer);

/* The close reason and metric label of a refusal. */
const char *admit_reason(enum admit_result a);

#endif
