/* SPDX-License-Identifier: MIT */
/* admin: the admin socket (`admin = PATH` in [global]) and `splicer ctl`,
 * its client. A Unix stream socket, mode 0600, the run-as user's (made
 * before root is dropped), served by one thread that waits for no client
 * (ctl_server.h: a client that never reads its answer, sends half a line or
 * floods the socket with connections delays nobody else); kept across
 * reloads (a new path needs a restart).
 *
 * The protocol is lines: a command per line, as many lines per connection
 * as the client likes; each answer is lines of text ending with an empty
 * line, and an answer whose first line starts with "error: " says why the
 * command failed (that line; lines after it give detail: a failed upgrade's
 * are the new process's last messages). `--json` anywhere on a show line
 * answers one JSON document instead of the aligned table.
 *   show routes | backends | sessions | process [--json]
 *                                       process: the pid answering (after an
 *                                       upgrade, the new one), its state
 *   backend ROUTE ADDR drain            no new sessions; running ones finish
 *   backend ROUTE ADDR disable [--kill] no new sessions; --kill ends running ones
 *   backend ROUTE ADDR enable           back from drain or disable
 *   backend ROUTE ADDR weight N         1..MAX_WEIGHT, for every balance kind
 *   backend ROUTE add ADDR [weight=N] [backup]
 *   backend ROUTE del ADDR              in memory only (backend_edit.h): the next
 *                                       reload keeps what the file says
 *   session kill ID                     ID as `show sessions` prints it (hex)
 *   reload                              SIGHUP to this process; answers its outcome
 *   upgrade                             SIGUSR2 to this process; answers its outcome
 *   lameduck                            /health 503, the listeners accept on; a
 *                                       SIGTERM then drains at once (preStop)
 *   drain                               SIGTERM to this process
 *   help
 * ADDR is a backend's address as configured or as resolved. Drain, disable
 * and weight live in the backend's run-time state (backend.h), so they last
 * across reloads while the backend stays in the file (and across upgrades:
 * upgrade.h hands them over), and `show backends`
 * says where they differ from the file ("5 (file: 1)").
 *
 * The process-wide commands (reload, upgrade, lameduck, drain) sit beside
 * each other in admin.c's command table. */
#ifndef SPLICER_ADMIN_H
#define SPLICER_ADMIN_H
#include <stddef.h>

#include "config.h"
#include "worker.h"

/* Binds cfg->admin (when not "off"), gives it to cfg->user when root, and
 * starts serving (an upgrade's new process takes the socket the old one
 * handed over instead of binding: upgrade.h). Returns 0, or -1 with the
 * reason in err. */
int admin_start(const struct config *cfg, struct worker *ws, unsigned nworkers, struct shared *sh,
		char *err, size_t errlen);
/* Stops the thread (answers under way get up to 1 s to finish), closes and
 * removes the socket (no-op when not started). After an upgrade's
 * hand-over the path is the new process's: listener_unlink_enable(0) first
 * leaves it in place. */
void admin_stop(void);

/* The listening socket (for an upgrade to hand over), or -1. */
int admin_fd(void);

/* splicer ctl [-s PATH | -c FILE] COMMAND... [--json] (cmd_ctl.c): sends the
 * command, prints the answer; exit 0, 1 when the answer is an error or the
 * socket cannot be reached, 2 for a usage error. */
int cmd_ctl(int argc, char **argv);

#endif
