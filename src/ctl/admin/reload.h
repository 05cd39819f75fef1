/* SPDX-License-Identifier: MIT */
/* reload: SIGHUP. Re-reads the config file with the same command line on top
 * (the command line still wins), and only when it is valid swaps it in:
 * listeners whose address did not change keep their sockets (no connection
 * is refused during a reload), new ones are bound, removed ones closed;
 * each worker takes the new listener table between two loop turns; health
 * checks and /metrics move to the new routes. Running sessions keep the
 * routes they started with: an old config is freed only once none of its
 * sessions is left, however many generations that takes (no limit: a valid
 * reload is never refused). Run-time state (health, counters, leastconn
 * counts) belongs to routes and backends by name, not to a generation: the
 * new routes adopt it (backend.c), so a reload of the same file changes
 * nothing a client or /metrics can see. Settings that size the process (workers, buffers,
 * pipes, limits, log, stats, user) keep their running values, with a
 * warning when the file changed them; source_table_size resizes the running
 * source tables, their counts kept (route_admit.h). */
#ifndef SPLICER_RELOAD_H
#define SPLICER_RELOAD_H
#include <stdint.h>

#include "config.h"
#include "worker.h"

struct reload_ctx {
	int argc;
	char **argv;
	struct config *cfg;                /* the running one */
	struct worker *ws;
	unsigned nw;
	int (*fds)[MAX_LISTENERS];         /* per worker, the running listener fds */
	struct shared *sh;
	uint64_t gen;
	/* earlier configs that may still have sessions: as many as it takes */
	struct retired {
		struct config *cfg;
		uint64_t since_ms;
	} *retired;
	unsigned nretired, retired_cap;
};

/* Handles one SIGHUP. Returns 0 when the new config runs, -1 when the old
 * one stays (every reason logged). */
int reload_run(struct reload_ctx *r);

/* A resolve= name's addresses changed (dns_changed()): builds a new config
 * generation from the running one (not from the file, which may have been
 * edited meanwhile) with the resolver thread's answers, and swaps it in as
 * a reload does. Returns 0 when it runs (or nothing changed), -1 when the
 * running config stays (logged). */
int reload_dns(struct reload_ctx *r);

/* `ctl backend ROUTE add|del` (backend_edit.h): builds a new generation
 * from the running one, as reload_dns does, lets edit(nw, arg) change its
 * routes (0, or -errno to give up: nothing changes), and swaps it in.
 * Main thread. Returns 0, edit's -errno, -EINVAL when the result is not a
 * valid config (said in the log), or -ENOMEM. */
int reload_edit(struct reload_ctx *r, int (*edit)(struct config *nw, void *arg), void *arg);

/* The outcome of the last SIGHUP, for /metrics: 1 when it runs the new
 * config, 0 when the old one stayed (also for a SIGHUP with routes from
 * the command line, which has nothing to reload); *unix_ms is when it
 * ended (CLOCK_REALTIME), 0 while there was no SIGHUP. */
void reload_last(int *ok, uint64_t *unix_ms);

/* Frees retired configs without sessions (called from the main loop). */
void reload_reap(struct reload_ctx *r, uint64_t now_ms);

/* At exit: frees every retired config. */
void reload_free_all(struct reload_ctx *r);

#endif
