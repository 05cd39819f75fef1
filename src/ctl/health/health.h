/* SPDX-License-Identifier: MIT */
/* health: active health checks. One thread for the process, but each
 * backend of each route with `check` has its own schedule: every
 * check_interval it gets a non-blocking connect, then for a check that
 * speaks (check_spec.h: redis, pgsql, tls, http, send/expect, ...) its
 * request and a bounded read of the answer (check_proto.h says what
 * passes), all within check_timeout. The thread polls every check in
 * flight at once and sleeps until
 * the nearest start or deadline, so one route's silent backend and long
 * timeout never delay another's checks. `rise` successes in a row bring a
 * down backend up, `fall` failures in a row take an up one down. Workers
 * only read the result (an atomic flag per backend), so a check never
 * delays a session; the results live in the backend's run-time state,
 * which a reload keeps. */
#ifndef SPLICER_HEALTH_H
#define SPLICER_HEALTH_H

#include "config.h"

/* Starts the checker when some route has checks. Returns 0 or -errno. */
int health_start(struct config *cfg);

/* Stops and joins the checker (no-op when not started). */
void health_stop(void);

#endif
