/* SPDX-License-Identifier: MIT */
/* route_hist: latency, duration and size histograms per route, for
 * Prometheus (splicer_route_*_seconds, splicer_route_session_bytes).
 *
 * What each one observes, once per session of the route:
 *   connect     from the first connect attempt to the backend connection
 *               being up (retries on other backends included, as the
 *               access log's connect_ms); sessions whose backend came up
 *   first_byte  the backend's answer time (HAProxy's Tr, for a stream):
 *               from the first client byte written to the backend to the
 *               first backend byte written to the client; when the backend
 *               speaks first (a banner), from its connection being up.
 *               Sessions in which the backend sent a byte. Engines that
 *               move bytes in the kernel (sockmap) see their bytes at their
 *               next count (within 100 ms), so it reads later there
 *   duration    from accept to close; every session counted in
 *               splicer_route_sessions_total (refused ones too), when it ends
 *   bytes_up,   bytes written to the backend, to the client; the same
 *   bytes_down  sessions as duration (so the two directions' histograms
 *               tell uploads from downloads, which one of their sum cannot)
 *
 * Buckets (upper bounds; Prometheus's le, +Inf after the last):
 *   connect     0.5 ms 1 2.5 5 10 25 50 100 250 500 ms 1 2.5 5 10 s
 *   first_byte  1 ms 2.5 5 10 25 50 100 250 500 ms 1 2.5 5 10 30 60 s
 *   duration    1 ms 5 10 50 100 500 ms 1 5 10 30 s 1 5 10 30 min 1 h
 *   bytes       64 B and every power of 4 after it up to 64 GiB (16 bounds)
 * Times are measured in microseconds (connect and first_byte on
 * CLOCK_MONOTONIC, duration on the worker's millisecond clock); _sum is
 * their total in seconds (bytes: in bytes).
 *
 * Recording takes no lock and no locked instruction: each worker has its
 * own slice of a route's histograms (its own cache lines, allocated the
 * first time it records for the route) and is the only thread that writes
 * it, with relaxed stores; /metrics sums the slices. The histograms belong
 * to the route's name, not to a config generation (like struct
 * route_stats): a reload keeps them, and sessions of the old and the new
 * generation count together. */
#ifndef SPLICER_ROUTE_HIST_H
#define SPLICER_ROUTE_HIST_H
#include <stdint.h>

#include "config.h"

enum hist_kind { HIST_CONNECT, HIST_FIRST_BYTE, HIST_DURATION, HIST_BYTES_UP, HIST_BYTES_DOWN,
		 HIST_KINDS };

#define HIST_BOUNDS_MAX 16            /* finite bounds of the widest kind */
#define HIST_WORKERS_MAX 256          /* the workers setting's range */

/* One histogram as read: per bucket (not cumulative; [nbounds] is +Inf),
 * the observations' sum (microseconds, or bytes) and count. */
struct hist_read {
	uint64_t bucket[HIST_BOUNDS_MAX + 1];
	uint64_t sum, count;
};

struct route_hist;

/* Adopts (or creates) the histograms of each route of c, by name. Returns
 * 0, or -1 after printing why (out of memory). */
int route_hist_build(struct config *c);

/* Lets go of r's (the last generation to let go frees them). */
void route_hist_free(struct route *r);

/* Records value (microseconds, or bytes) in r's histogram of kind, in the
 * slice of worker `worker` (the calling worker's id: only it writes there). */
void route_hist_add(struct route *r, unsigned worker, enum hist_kind kind, uint64_t value);

/* The finite bounds of kind (microseconds, or bytes), and how many. */
const uint64_t *route_hist_bounds(enum hist_kind kind, unsigned *n);

/* The sum of every worker's slice of r's histogram of kind (any thread; a
 * moment's approximation while workers record). */
void route_hist_read(const struct route *r, enum hist_kind kind, struct hist_read *out);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t route_hist_now_us(void);

#endif
