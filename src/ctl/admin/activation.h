/* SPDX-License-Identifier: MIT */
/* activation: systemd socket activation. A .socket unit (contrib/
 * splicer.socket) binds the listening sockets and starts splicer with them
 * as descriptors 3, 4, ... (LISTEN_FDS=N, LISTEN_PID=its pid, and
 * LISTEN_FDNAMES=a:b:... from each socket's FileDescriptorName=). A route
 * takes one by address (`listen = 127.0.0.1:80` equal to the socket's
 * getsockname(): family, address and port, or the Unix path) or by name
 * (`listen = systemd:NAME`: every socket of that name); splicer then binds
 * nothing there. A socket systemd passed that no route takes refuses the
 * start: a port whose connections nobody accepts (systemd keeps queueing
 * them) is worse than a failed unit.
 *
 * The sockets are systemd's for good (listener_keep): closing one at a
 * reload or at stop leaves what it queued to the next process. Across an
 * upgrade (SIGUSR2) the new process inherits them like any listener (by
 * address, upgrade.h); SPLICER_SYSTEMD_SOCKETS carries their names and
 * addresses to it, so `systemd:NAME` still means the same socket there and
 * in every reload after. LISTEN_* are removed from the environment once
 * read: nothing started later takes them for its own. */
#ifndef SPLICER_ACTIVATION_H
#define SPLICER_ACTIVATION_H
#include <stddef.h>
#include <sys/socket.h>

#include "addr.h"
#include "config.h"
#include "sockopt.h"

/* At start, after upgrade_init: upgraded is upgrade_inherited() (an
 * upgrade's new process has no LISTEN_*, but the names the old one had).
 * Problems with what systemd passed (not a listening stream socket) are
 * said and the descriptor left alone. */
void activation_init(int upgraded);

/* Whether this process was socket-activated (or inherited the names of
 * sockets that were). */
int activation_active(void);

/* `splicer check`: a `listen = systemd:NAME` without activation is a note
 * (ExecStartPre= gets no sockets), not a problem. */
extern int activation_check_only;

/* The addresses of the sockets named name, into a[0..max): returns how
 * many (0: none of that name, why says what was passed), or -1 when there
 * is nothing to look in and this is a check (a note in why). */
int activation_lookup(const char *name, struct addr *a, unsigned max, char *why, size_t len);

/* The n descriptors of listener a when systemd passed its socket: the
 * socket, with o's options applied, and what the other workers need (more
 * sockets of its SO_REUSEPORT group when it has ReusePort=yes and they can
 * join it, else dups of it, as a Unix listener's). Returns 1 (fds filled),
 * 0 (not an activated address: bind as usual) or -errno with err. */
int activation_listener_open_n(struct addr *a, unsigned n, int *fds, const struct listen_opts *o,
			       char *err, unsigned errlen);

/* 1 when the socket address is one of systemd's sockets (listener_keep):
 * an upgrade's new process that does not take it leaves its SYNs alone. */
int activation_kept_sockaddr(const struct sockaddr_storage *ss, socklen_t len);

/* At start: each socket systemd passed is a listen address of c. Prints
 * one line per one that is not and returns how many. */
int activation_check(const struct config *c);

#endif
