/* SPDX-License-Identifier: MIT */
/* handoff: the exchange that carries an upgrade's sessions from the old
 * process to the new one (core/session_handoff.h is each session's part).
 *
 * The old process makes a SOCK_SEQPACKET socketpair when it starts the new
 * one and hands it one end (upgrade.c: SPLICER_UPGRADE_SESSIONS). The new
 * process, once its workers run, starts a thread on it that first sends its
 * catalog, what it can take: "catalog" messages of lines "L\tLISTEN",
 * "R\tROUTE", "B\tROUTE\tBACKEND", "E\tENGINE", "buf SIZE", then "end";
 * its answer to the old process then says "sessions VERSION" (the format
 * it reads). The old process reads the catalog, and when the version is
 * its own and `upgrade_sessions = handover`, its workers send each session
 * that can move as they stop accepting (session_hand_over), then it sends
 * "done handed=N kept=M" and closes its end; the new process's thread hands
 * each session to a worker (round robin) as it comes, and ends at EOF.
 * The old process exits as soon as nothing is left to drain. */
#ifndef SPLICER_HANDOFF_H
#define SPLICER_HANDOFF_H
#include <stdint.h>

#include "config.h"
#include "session_handoff.h"

struct worker;

/* ---- the old process ------------------------------------------------------ */

/* The socketpair: *mine stays here, *theirs goes to the new process.
 * 0, or -errno. */
int handoff_pair(int *mine, int *theirs);

/* After "ready" ("sessions VERSION" in it, 0 when not): reads the new
 * process's catalog from fd (bounded wait) and returns the target the
 * workers hand sessions to. With drain (upgrade_sessions = drain), another
 * version or no catalog, its refuse says why every session stays here
 * (logged); they are counted all the same, and the new process told. NULL
 * only out of memory. Takes fd. */
struct handoff_target *handoff_begin(int fd, int pid, unsigned version, int drain);

/* Waits (bounded) until the nw workers have handed over what they could,
 * tells the new process the counts, closes the socket, logs, and writes
 * the outcome's sentence in why: "process P serves now; N sessions handed
 * over in X ms, M drain here". ready_ms: when the new process said ready.
 * The target stays allocated (the workers may still look at it). */
void handoff_finish(struct handoff_target *t, unsigned nw, uint64_t ready_ms, char *why,
		    unsigned len);

/* Once no worker looks at it any more (they have ended). */
void handoff_target_free(struct handoff_target *t);

/* ---- the new process ------------------------------------------------------ */

/* Starts the thread that sends cfg's catalog on fd and then adopts what
 * comes into the nw workers. Takes fd. 0, or -errno (fd closed: the old
 * process drains its sessions). */
int handoff_adopt_start(int fd, const struct config *cfg, struct worker *ws, unsigned nw);

/* At the end of the process, before the workers are destroyed: the thread
 * ends (an old process that never closed the socket is cut off) and is
 * waited for. */
void handoff_adopt_stop(void);

/* Sessions the old process said it kept to drain (its "done" line), for
 * splicer_upgrade_sessions_total{outcome="drained"}. */
uint64_t handoff_drained(void);

#endif
