/* SPDX-License-Identifier: MIT */
/* backend: which backend of a route a new session tries first, the
 * per-backend session counts that leastconn reads, and the run-time state
 * (health, counters, those counts) that survives reloads. Lock-free on the
 * data path: the cursor and the counts are atomics shared by every worker;
 * the tables are built by config_finalize() and only read afterwards (a
 * weight change through the admin socket publishes new ones).
 * The state objects belong to a registry keyed by route name and backend
 * address as configured: every config generation that has a route or a
 * backend points at the same object, so a reload neither resets health nor
 * counters, and sessions of the old and the new generation count together.
 * An object goes when the last generation that has it is freed. */
#ifndef SPLICER_BACKEND_H
#define SPLICER_BACKEND_H
#include <sys/socket.h>

#include "config.h"

/* Maglev lookup table size: a prime well above 100 x MAX_BACKENDS, as the
 * paper (Eisenbud et al., NSDI 2016) advises for an even spread. */
#define MAGLEV_SIZE 65537

/* Builds a route's tables: the weighted round-robin order, the Maglev
 * table (for balance = maglev), and adopts (or creates) the run-time state
 * of the route and of each backend. Returns 0 or -1 (out of memory). */
int backend_tables_build(struct route *r);
/* Frees the tables and lets go of the state objects. */
void backend_tables_free(struct route *r);

/* A reload made r the running route: without checks nothing would bring a
 * backend marked down by an earlier generation back, so mark each up. */
void backend_checks_apply(struct route *r);

/* roundrobin: the next entry of the weighted schedule. leastconn: the
 * backend with the fewest sessions per unit of weight, ties going in turn.
 * maglev: the Maglev table's entry for the client's IP address (not its
 * port), so every splicer with the same backends picks the same one for a
 * client; a Unix-socket client has no address and goes round-robin.
 * The tables hold the primaries: while none of them is usable, the first
 * usable backup (the file's order) is picked. A backend that came up less
 * than slowstart ago takes a share rising linearly to its weight's
 * (backend.c says how, for each balance). */
unsigned backend_pick(struct route *r, const struct sockaddr *peer, socklen_t peerlen);

/* Whether a session may try backend i now: usable, and a primary, or a
 * backup while no primary is usable. */
int backend_eligible(const struct route *r, unsigned i);

/* slowstart: how far backend i is in its ramp, in thousandths of its
 * weight's share (1000: done, or no slowstart). */
unsigned backend_ramp(const struct route *r, unsigned i);

/* Health: whether backend i is up (its checks' and sessions' verdict);
 * marking it (logs a change). */
int backend_is_up(const struct route *r, unsigned i);
/* Whether new sessions may use backend i: up, and not drained or disabled
 * through the admin socket. */
int backend_usable(const struct route *r, unsigned i);
void backend_set_down(struct route *r, unsigned i, int down, const char *why);
/* Passive health: a session's connect to backend i succeeded or failed;
 * `fall` failures in a row mark it down (when the route has checks, which
 * alone can bring it back). */
void backend_connect_result(struct route *r, unsigned i, int ok);

/* A session's connect to backend i failed with err (not an error of this
 * host). Logged at the default level, at most one line per backend per
 * BACKEND_ERR_REPORT_MS: the first error at once, the ones after it in one
 * line with their count once the interval is over, e.g.
 *   backend 127.0.0.1:9 of route web: 37 connect errors in 10s (ECONNREFUSED); marked down
 * Never waits: a worker calls it. */
#define BACKEND_ERR_REPORT_MS 10000
void backend_connect_failed(struct route *r, unsigned i, int err, uint64_t now_ms);
/* Writes the lines of backends whose errors wait for their interval to end
 * (every worker calls it often; it returns at once when none waits, and it
 * skips a turn rather than wait for a lock). With force, every waiting
 * line now, whatever the interval (a worker that stops). */
void backend_errors_report(uint64_t now_ms, int force);


/* Health history (the status page). The checker reports each check's
 * result (ok: 1 passed); backend_set_down remembers each change up or down
 * with its time. */
void backend_check_seen(struct route *r, unsigned i, int ok);
struct backend_history {
	uint64_t checks;                    /* the last nchecks results, newest in bit 0 (1: passed) */
	unsigned nchecks;                   /* 0..64 */
	unsigned nevents;                   /* changes remembered, newest first */
	uint64_t event_ms[BACKEND_EVENTS];  /* when (Unix ms) */
	uint8_t event_down[BACKEND_EVENTS]; /* 1: marked down, 0: up */
};
/* Backend i's history as it stands (any thread; a change being recorded
 * at that moment may show as the one before it). */
void backend_history(const struct route *r, unsigned i, struct backend_history *out);

/* The admin socket's overrides (admin.h). They live in the backend's
 * run-time state, so every generation that has the backend sees them and a
 * reload keeps them. backend_admin: BACKEND_READY, _DRAIN or _DISABLED. */
int backend_admin(const struct route *r, unsigned i);
void backend_set_admin(struct route *r, unsigned i, int state);
/* The weight new sessions follow: the admin socket's, else the file's. */
unsigned backend_weight(const struct route *r, unsigned i);
/* Sets backend i's weight (1..MAX_WEIGHT; the file's own clears the
 * override) and rebuilds the balancing tables of every generation of the
 * route, published to the workers as a whole (they read a table lock-free;
 * a replaced one is freed once no worker can hold it, within a loop turn:
 * qsbr.h, so any number of calls costs no memory). Returns 0, or -1 when
 * out of memory (a generation then keeps its old table). */
int backend_set_weight(struct route *r, unsigned i, unsigned weight);

/* Capacity: a backend may take sessions it could not take before (marked
 * up, or enabled through the admin socket): fn(arg) is called, on the
 * thread that made the change, to have the clients waiting for a slot look
 * again (main.c: waitq_kick). A reload's new backends and slots reach the
 * waiters through each worker's own reload (waitq.h). Set it before the
 * threads that change backends start and clear it (NULL) after they stop.
 * While it is set the proxy runs: a backend that appears (a reload, DNS,
 * ctl) or comes up is ramped by slowstart; the ones of the start are not. */
void backend_on_capacity(void (*fn)(void *arg), void *arg);

/* on_backend_down = close: backend h's running sessions are to be closed
 * (why: BACKEND_CUT_DOWN, marked down; BACKEND_CUT_REMOVED, removed by a
 * reload, DNS or `ctl backend del`). Raises h's cut_seq and the process's
 * cut generation, then calls the hook (main.c wakes every worker); each
 * worker then closes its sessions that hold a slot of h taken before the
 * cut (session.h: session_cut_sweep), within a loop turn. Any thread. */
enum { BACKEND_CUT_DOWN = 1, BACKEND_CUT_REMOVED };
void backend_cut(struct backend_health *h, int why);
/* The cut generation: a worker sweeps its sessions when it changed. */
uint32_t backend_cut_gen(void);
/* Who wakes the workers after a cut (NULL: nobody; they look every turn,
 * at least every SCAN_MS). Set before the threads that cut start. */
void backend_on_cut(void (*fn)(void *arg), void *arg);

/* A session takes a slot of backend i (it attempts or uses it): 0 when the
 * backend is at its maxconn; backend_release gives the slot back. */
int backend_try_hold(struct route *r, unsigned i);
void backend_release(struct route *r, unsigned i);
/* A slot taken whatever the maxconn: a session an upgrade handed over,
 * which held it in the old process (session_handoff.h). */
void backend_hold(struct route *r, unsigned i);

#endif
