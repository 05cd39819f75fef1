/* SPDX-License-Identifier: MIT */
/* upgrade: SIGUSR2 (and `splicer ctl upgrade`, which sends it and answers
 * the outcome) replaces the running process with the binary now on disk,
 * with the same arguments, without refusing or resetting a client.
 *
 * The old process has the new one started (by its spawner, below), which
 * inherits every listening socket (the routes', the stats endpoint's and the
 * admin socket's): the descriptors
 * are left open across exec, and SPLICER_INHERIT=fd,fd,... names them
 * (inherited descriptors rather than SCM_RIGHTS: the child is ours, so a
 * socketpair adds a protocol and nothing the exec does not already give;
 * the new process learns each socket's address from getsockname(), from the
 * kernel rather than a text the old one wrote). SPLICER_UPGRADE_FD is the
 * write end of a pipe on which the new process answers "ready" once it
 * accepts. Until then its stderr is a pipe to the old process
 * (SPLICER_UPGRADE_LOG), which writes each line to the log and keeps the
 * last ones for `ctl upgrade`'s answer; SPLICER_UPGRADE_STATE is a file of
 * the admin socket's overrides (drain, disable, weight: backend.h), which
 * the new process puts in force on the backends its config still has (by
 * route and address) before it accepts, so they last across an upgrade as
 * across a reload. The new process reads and checks
 * the config like any start
 * (invalid: it prints the problems and exits non-zero;
 * the old one sees the pipe close without "ready" and serves on as it was),
 * takes the inherited sockets whose address is still configured, binds only
 * what is new, starts its workers, tells systemd MAINPID=<its pid> and
 * READY=1 (NOTIFY_SOCKET is inherited), stops SYNs on the inherited sockets
 * it does not keep (listener.h: their last holder, the old process, accepts
 * their queues empty before it closes them) and answers "ready", then
 * "keep I,J,..." (the places in SPLICER_INHERIT of the sockets whose queues
 * stay with it). Then the old process stops its stats endpoint and its
 * admin socket (leaving their paths, the new process's now), sends
 * MAINPID=<new pid> too (under NotifyAccess=main only the old, still the
 * main PID, is heard), closes the listeners the new process keeps without
 * accepting from them again (what they queued is the new process's: a
 * session the old one took now would get the old config and the old
 * drain_timeout), accepts the others' queues empty before it closes them,
 * and drains its sessions up to drain_timeout, without sending systemd
 * anything more. No verdict within
 * UPGRADE_TIMEOUT_MS: the new process is killed and the old serves on.
 * SIGTERM or SIGINT to the old process meanwhile: a new process that has
 * answered "ready" takes over (the old one drains, as after any hand-over;
 * the signal stopped the old process, and the service runs on in the new
 * one); one that has not is sent SIGTERM (it drains what its workers
 * accepted already and exits) and the old process stops as the signal says:
 * nothing serves afterwards.
 *
 * The binary: the path this process was started as (argv[0], made absolute
 * at start; found in PATH when it had no '/'), not /proc/self/exe, which
 * names the running inode: a package upgrade renames a new file over the
 * path, and /proc/self/exe would start the old binary again.
 *
 * The fork is a spawner's (upgrade.c says why): a process forked at start.
 * With `user =` it is not root: it becomes the user at once, keeping only
 * CAP_NET_BIND_SERVICE (and CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN when an
 * engine loads BPF) as ambient capabilities, so the new process binds what
 * is new (a port below 1024 too), sets its engines up and sheds them; it
 * opens every file as the user. The listening sockets it inherits and joins are the
 * user's (the first process made them with the user's file-system
 * identity, privs.h), so the SO_REUSEPORT groups take its new sockets.
 * A SIGUSR2 the user sends thus starts nothing the user could not start,
 * but for those capabilities and the binary root installed (doc/
 * security.md). `user` changed in the file: the new process cannot become
 * another user and exits with the reason; the old one serves on. */
#ifndef SPLICER_UPGRADE_H
#define SPLICER_UPGRADE_H
#include <stdint.h>

#include "config.h"

#define UPGRADE_TIMEOUT_MS 30000

/* At the start of the proxy (before the config is read): remembers the
 * binary's path and argv, and takes what an upgrade handed over (the
 * environment variables are removed; the descriptors closed on exec again;
 * stderr goes to the old process until upgrade_ready). */
void upgrade_init(int argc, char **argv);

/* Puts the admin overrides the old process handed over (drain, disable,
 * weight) in force on cfg's backends of the same route and address, before
 * any session; once (no-op without). */
void upgrade_apply_state(struct config *cfg);

/* ---- the new process --------------------------------------------------- */

/* 1 when this process was started by an upgrade and has not answered yet. */
int upgrade_inherited(void);

/* listener_open_n (listener.h) for a process that may have inherited
 * sockets: takes up to n inherited sockets bound to *a that are the socket
 * o asks for (MPTCP or not, its device; the other options of o are put on
 * them), and opens the rest (in the same SO_REUSEPORT group; a Unix
 * listener's are dups). Returns 0 or -errno with err. */
struct listen_opts;
int upgrade_listener_open_n(struct addr *a, unsigned n, int *fds, const struct listen_opts *o,
			    char *err, unsigned errlen);

/* An inherited socket bound to *a (the stats endpoint, the admin socket),
 * or -1. */
int upgrade_take_one(const struct addr *a);

/* Once accepting: tells systemd and the old process; closes the inherited
 * sockets not taken. No-op when not started by an upgrade. Returns 1 when
 * it answered an upgrade (the caller sends no READY=1 of its own). */
struct worker;
int upgrade_ready(const struct config *cfg, struct worker *ws, unsigned nw);

/* ---- the old process --------------------------------------------------- */

/* Forks the spawner: call before any thread starts and any socket is open.
 * Started as root with a user, it becomes that user and keeps only the
 * capabilities in keep (privs.h), ambient for the new process. Returns 0
 * or -errno (upgrades are then refused, with a log line). */
int upgrade_spawner_start(const char *user, unsigned long long keep);

/* Starts the new process with every listener of cfg (fds: per worker, nw
 * workers), the stats socket and the admin socket (-1: none). Returns 0, or
 * -1 (logged; the outcome is this failure, unless one is starting already:
 * the outcome is then that one's). */
int upgrade_start(const struct config *cfg, int (*fds)[MAX_LISTENERS], unsigned nw, int stats_fd,
		  int admin_fd);

/* 1 while a new process is starting. */
int upgrade_pending(void);

/* Called each main-loop turn: returns 1 once the new process said "ready"
 * (the caller then stops accepting and drains), 0 otherwise; a new process
 * that exited or timed out is reaped and logged. Also writes the lines of
 * the new process's stderr to the log while it sends any. */
int upgrade_poll(uint64_t now_ms);

/* After upgrade_poll returned 1: the descriptors of this process whose
 * sockets the new one keeps, in *fds (valid until the next upgrade). The
 * workers close them without accepting from them again: what they queued
 * is the new process's. 0 when it did not say (an older binary): every
 * queue is then accepted empty here, as before. */
unsigned upgrade_kept(const int **fds);

/* Gives up on a starting new process that has not said "ready" (call
 * upgrade_poll first: one that did takes over): SIGTERM or SIGINT to the
 * old process meanwhile (why names it). It is sent SIGTERM, not SIGKILL:
 * its workers accept before it answers, and it drains what they took. */
void upgrade_abandon(const char *why);

/* After upgrade_poll returned 1, as the old process stops accepting: the
 * new process to hand sessions to (its catalog read: handoff.h), or NULL
 * when they drain here (upgrade_sessions = drain, a new binary of another
 * format or none, a catalog that did not come). Put it in struct shared
 * before the workers stop; then upgrade_handoff_finish. */
struct handoff_target;
struct handoff_target *upgrade_handoff_begin(void);

/* Waits for the nw workers to hand theirs over, tells the new process,
 * logs, and sets the outcome `ctl upgrade` answers with the counts. */
void upgrade_handoff_finish(struct handoff_target *t, unsigned nw);

/* `ctl upgrade`: the outcome of the last upgrade asked. seq grows with each
 * outcome; ok with the new pid, else why and the new process's last lines
 * of stderr (msgs, newline-separated; empty when it said nothing). */
#define UPGRADE_MSGS_MAX 3072
struct upgrade_outcome {
	uint64_t seq;
	int ok;
	int pid;
	char why[256];
	char msgs[UPGRADE_MSGS_MAX];
};
void upgrade_outcome(struct upgrade_outcome *o);

/* SIGUSR2 that the caller does not act on (the proxy is stopping): logged,
 * and the outcome is this failure. */
void upgrade_refuse(const char *why);

#endif
