/* SPDX-License-Identifier: MIT */
/* backend_edit: backends added and removed at run time,
 *   splicer ctl backend ROUTE add ADDR [weight=N] [backup]
 *   splicer ctl backend ROUTE del ADDR
 * in memory only: the change is a new config generation built from the
 * running one (reload.h: reload_edit), as a DNS answer's is, so every
 * worker takes it between two loop turns, the balancing tables are built
 * whole, clients waiting for a slot look again at once (waitq_reload), and
 * running sessions keep the generation they started with. A removed
 * backend drains (no new session; the running ones finish), or with
 * on_backend_down = close its sessions are closed. `show backends` lists
 * an added one with origin ctl; the next reload keeps what the file says
 * (an added backend goes, a removed one of the file comes back), and so
 * does an upgrade (the new process reads the file). ADDR is numeric (an IP
 * address and port, or unix:/path): the admin thread never waits for a
 * DNS lookup; names that change belong in the file with resolve=.
 *
 * The admin thread asks, the main thread (which owns the running config
 * and every swap) does it within its next tick, 100 ms at most. */
#ifndef SPLICER_BACKEND_EDIT_H
#define SPLICER_BACKEND_EDIT_H
#include <stddef.h>

#include "config.h"
#include "reload.h"

struct backend_edit {
	int del;                     /* 0: add, 1: del */
	char route[ROUTE_NAME_MAX];
	char addr[ADDR_TEXT_MAX];    /* as the command gave it */
	unsigned weight;             /* add: 1..MAX_WEIGHT */
	int backup;                  /* add: a backup */
	/* the outcome, filled by the main thread */
	int rc;                      /* 0, or -errno */
	char msg[512];               /* "ok: ..." or the error's sentence (without "error: ") */
};

/* Admin thread: hands e to the main thread and waits up to timeout_ms for
 * its outcome (e->rc, e->msg). Returns 0 once done, -EBUSY when another
 * request is under way, -ETIMEDOUT when the main thread did not take it
 * (then it never will: the request is withdrawn). */
int backend_edit_ask(struct backend_edit *e, int timeout_ms);

/* Main thread, every tick: does the request waiting, if any. */
void backend_edit_serve(struct reload_ctx *r);

#endif
