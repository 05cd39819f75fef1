/* SPDX-License-Identifier: MIT */
/* listener: listening sockets. TCP listeners get one SO_REUSEPORT socket per
 * worker so the kernel spreads connections without a shared accept queue or
 * lock; a Unix listener is one socket that every worker holds a dup of
 * (registered with EPOLLEXCLUSIVE so one worker wakes per connection). */
#ifndef SPLICER_LISTENER_H
#define SPLICER_LISTENER_H
#include "addr.h"
#include "sockopt.h"

/* Binds and listens on *a. With port 0 the kernel's choice is written back
 * into *a, so the next worker's socket binds the same port. A TCP port
 * another socket listens on is EADDRINUSE, even when that socket set
 * SO_REUSEPORT too. Returns the fd, or -errno with a sentence in err. */
int listener_open(struct addr *a, char *err, unsigned errlen);

/* Opens `n` descriptors for *a: n SO_REUSEPORT sockets (TCP) or one socket
 * and n-1 dups (Unix). fds[] receives them. shared skips the in-use check,
 * for a reload whose old listeners may hold the port until it is done. o:
 * the sockets' options (sockopt.h; NULL: none): MPTCP at socket(), the
 * device before bind(), the rest after listen(). Returns 0 or -errno with
 * err. */
int listener_open_n(struct addr *a, unsigned n, int *fds, int shared, const struct listen_opts *o,
		    char *err, unsigned errlen);

/* `splicer check`: can *a be listened on? Binds a socket as the proxy's
 * listeners would and closes it (a Unix path bound here is removed again).
 * Returns 0 when it can; 1, with a note in err, when the address is held by
 * listeners that share it through SO_REUSEPORT as the same user, which is
 * what a running splicer looks like to a check before its reload (a start
 * beside it would be refused: listener_open's in-use check); else -errno
 * with a sentence in err (EADDRNOTAVAIL: not an address of this host,
 * EADDRINUSE: another process listens there, EACCES: a port below 1024). */
int listener_probe(const struct addr *a, char *err, unsigned errlen);

/* Removes a Unix listener's socket file (no-op for other families, and
 * while listener_unlink_enable(0) holds). */
void listener_unlink(const struct addr *a);

/* Sockets another process holds for good and hands to each process it
 * starts (systemd's socket activation: activation.h): closing one never
 * stops its SYNs (the filter would stay on the socket, and the next
 * process, or systemd itself waiting for a connection to start one, would
 * never see a client again) nor removes its path; what its queue holds is
 * the next process's. listener_keep is called at start, before threads. */
#define LISTENER_KEPT_MAX 64
void listener_keep(const struct addr *a);
int listener_kept(const struct addr *a);

/* 0: listener_unlink leaves every path alone. For sockets shared with
 * another process (an upgrade): the path belongs to whichever still serves. */
void listener_unlink_enable(int on);

/* Closing a listener never drops a connection in its accept queue: the
 * closer first stops new connections from arriving (this), lets the
 * handshakes under way complete (LISTENER_CLOSE_GRACE_MS), accepts until
 * the queue is empty, and only then closes. listener_stop_syns attaches a
 * socket filter that drops SYN segments, and only those, to a TCP
 * listener: a client whose SYN is dropped retries it after about a second,
 * by when the socket is gone (refused, or taken by another socket of the
 * SO_REUSEPORT group: never reset after its connect succeeded). The filter
 * sits on the socket, so every process holding it sees it. Returns 0 or
 * -errno. */
int listener_stop_syns(int fd);

/* The first step of a close, for one socket of *a: TCP, listener_stop_syns
 * (returns 1: wait LISTENER_CLOSE_GRACE_MS before the last accepts); Unix,
 * its path unlinked (returns 0: a connect() is complete once queued).
 * -errno when the filter was refused. */
int listener_quiesce(const struct addr *a, int fd);

/* A SYN-ACK's round trip: a handshake under way when the SYNs stopped
 * completes within it (a client further away than 100 ms may see its
 * half-made connection reset). Meanwhile a new client's SYN is dropped and
 * it retries after a second: the grace is kept short so that a closed port
 * soon refuses at once again. */
#define LISTENER_CLOSE_GRACE_MS 100

/* 1 when net.ipv4.tcp_migrate_req is 1 (Linux >= 5.14): closing one socket
 * of an SO_REUSEPORT group then moves its queue to another of the group. */
int listener_migrates(void);

#endif
