/* SPDX-License-Identifier: MIT */
/* stats_http: the operator's endpoint (`stats = ADDR`): HTTP/1.1
 *   GET /metrics  Prometheus text exposition (version 0.0.4)
 *   GET /health   200 "ok" while the proxy runs; 503 with the reason while
 *                 draining (from SIGTERM on: during the lame duck the
 *                 listeners still accept), or while a worker has not turned
 *                 its loop for WORKER_STALL_MS (worker.h: the heartbeat)
 * HEAD answers the same head as GET (Content-Length included), no body.
 * anything else 404 (unknown path), 405 (method), 400 (garbage), 431
 * (request over 4 KiB) or 408 (not complete within 2 s). One thread serves
 * up to 32 clients at once (ctl_server.h), answers each as soon as its
 * request is whole, at the pace its reader takes the answer, and closes it:
 * clients that never finish a request or never read their answer delay no
 * probe, no scrape, nor forwarding. */
#ifndef SPLICER_STATS_HTTP_H
#define SPLICER_STATS_HTTP_H

#include "config.h"
#include "worker.h"

/* Binds cfg->stats (when not "off") and starts serving. Returns 0, or -1
 * with the reason in err. */
int stats_http_start(struct config *cfg, struct worker *ws, unsigned nworkers, struct shared *sh,
		     char *err, size_t errlen);
/* Stops accepting, answers the requests already read (for up to 1 s) and
 * closes the endpoint. */
void stats_http_stop(void);

/* The lame duck (SIGTERM's, or `ctl lameduck`): /health answers 503
 * "draining" from now on; the listeners still accept. */
void stats_http_set_lameduck(void);
/* 1 once set. */
int stats_http_lameduck(void);

/* The endpoint's listening socket (for an upgrade to hand over), or -1. */
int stats_http_fd(void);

/* After a reload: render the new routes from now on. */
void stats_http_set_config(struct config *cfg);

/* Renders the Prometheus text into buf (NUL-terminated). Returns its length,
 * or the length it would need (>= len). */
size_t stats_http_metrics(char *buf, size_t len);

#endif
