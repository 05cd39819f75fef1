/* backend: which backend of a route a new session tries first, and the
 * per-backend session counts that leastconn reads. Lock-free: the cursor and
 * the counts are atomics in struct route, shared by every worker. */
#ifndef SPLICER_BACKEND_H
#define SPLICER_BACKEND_H

#include "config.h"

/* roundrobin: the next entry of the route's weighted schedule. leastconn:
 * the backend with the fewest sessions per unit of weight, ties going
 * round-robin so equal backends share the load. */
unsigned backend_pick(struct route *r);

/* A session is (no longer) attempting or using backend i. */
void backend_hold(struct route *r, unsigned i);
void backend_release(struct route *r, unsigned i);

#endif
