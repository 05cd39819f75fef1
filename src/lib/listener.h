/* listener: listening sockets. TCP listeners get one SO_REUSEPORT socket per
 * worker so the kernel spreads connections without a shared accept queue or
 * lock; a Unix listener is one socket that every worker holds a dup of
 * (registered with EPOLLEXCLUSIVE so one worker wakes per connection). */
#ifndef SPLICER_LISTENER_H
#define SPLICER_LISTENER_H
#include "addr.h"

/* Binds and listens on *a. With port 0 the kernel's choice is written back
 * into *a, so the next worker's socket binds the same port. A TCP port
 * another socket listens on is EADDRINUSE, even when that socket set
 * SO_REUSEPORT too. Returns the fd, or -errno with a sentence in err. */
int listener_open(struct addr *a, char *err, unsigned errlen);

/* Opens `n` descriptors for *a: n SO_REUSEPORT sockets (TCP) or one socket
 * and n-1 dups (Unix). fds[] receives them. shared skips the in-use check,
 * for a reload whose old listeners may hold the port until it is done.
 * Returns 0 or -errno with err. */
int listener_open_n(struct addr *a, unsigned n, int *fds, int shared, char *err, unsigned errlen);

/* `splicer check`: can *a be listened on? Binds a socket as the proxy's
 * listeners would and closes it (a Unix path bound here is removed again).
 * Returns 0 when it can; 1, with a note in err, when the address is held by
 * listeners that share it through SO_REUSEPORT as the same user, which is
 * what a running splicer looks like to a check before its reload (a start
 * beside it would be refused: listener_open's in-use check); else -errno
 * with a sentence in err (EADDRNOTAVAIL: not an address of this host,
 * EADDRINUSE: another process listens there, EACCES: a port below 1024). */
int listener_probe(const struct addr *a, char *err, unsigned errlen);

/* Removes a Unix listener's socket file (no-op for other families). */
void listener_unlink(const struct addr *a);

#endif
