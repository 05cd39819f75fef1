/* health: active TCP health checks. One thread for the process; every
 * check_interval it starts a non-blocking connect to each backend of each
 * route with `check = tcp`, all at once, and waits for them up to
 * check_timeout: `rise` successes in a row bring a down backend up, `fall`
 * failures in a row take an up one down. Workers only read the result (an
 * atomic flag per backend), so a check never delays a session. */
#ifndef SPLICER_HEALTH_H
#define SPLICER_HEALTH_H

#include "config.h"

/* Starts the checker when some route has checks. Returns 0 or -errno. */
int health_start(struct config *cfg);

/* Stops and joins the checker (no-op when not started). */
void health_stop(void);

#endif
