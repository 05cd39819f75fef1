/* SPDX-License-Identifier: MIT */
/* status_rates: per-second rates for the status page. A thread of its own
 * reads, once a second, the counters /metrics shows for each route (struct
 * route_stats) and each backend (struct backend_health), and keeps the
 * last minute of them: the page draws a route's rates as small charts and
 * gives each backend its rate over the last ten seconds. Reading takes no
 * lock the workers take; the page copies what it needs under the
 * sampler's own lock. Routes and backends are followed by name across
 * reloads; a counter that went back (a route removed and added again)
 * counts as a new one. */
#ifndef SPLICER_STATUS_RATES_H
#define SPLICER_STATUS_RATES_H
#include "config.h"

#define RATE_POINTS 60  /* intervals of a route's history: one a second */
#define RATE_NOW_S 5    /* a route's current rate: over the last this many seconds */
#define RATE_BACKEND_S 10 /* a backend's rate: over the last this many seconds */

enum rate_kind {
	RATE_SESSIONS,    /* sessions accepted (a backend: connected to it) */
	RATE_BYTES_UP,    /* bytes client to backend */
	RATE_BYTES_DOWN,  /* bytes backend to client */
	RATE_BACKEND_KINDS, /* a backend has the three above */
	RATE_REFUSED = RATE_BACKEND_KINDS, /* clients refused by admission */
	RATE_ERRORS,      /* failed backend connects */
	RATE_KINDS
};

/* A route's rates (or every route's together): per second, oldest first. */
struct rate_view {
	unsigned n;                            /* intervals in per_s (0: none yet) */
	float per_s[RATE_KINDS][RATE_POINTS];
	double now[RATE_KINDS];                /* over the last RATE_NOW_S (or fewer) seconds */
};

/* Starts the sampler over *cfgp (read again at each sample: a reload's
 * new config is followed). Returns 0 or -errno. */
int status_rates_start(struct config *const *cfgp);
/* Stops and joins it; the history is dropped. */
void status_rates_stop(void);

/* One sample of every route and backend of c taken at now_ms (monotonic):
 * what the thread does each second (tests call it with their own clock). */
void status_rates_sample(const struct config *c, uint64_t now_ms);

/* route's rates (NULL: all routes summed). Returns 0, or -1 when there is
 * no interval yet (v->n is then 0). */
int status_rates_route(const char *route, struct rate_view *v);
/* The rates of backend `index` of route (whose address is `backend`) over
 * the last RATE_BACKEND_S seconds, per RATE_SESSIONS..RATE_BYTES_DOWN.
 * Returns 0, or -1 when not known yet. */
int status_rates_backend(const char *route, unsigned index, const char *backend,
			 double now[RATE_BACKEND_KINDS]);

#endif
