/* SPDX-License-Identifier: MIT */
/* loop_guard: stops a connection loop at run time.
 *
 * `check` refuses a backend that is its route's own listener, but a loop can
 * also run through another route or another proxy (A -> B -> A), or appear
 * when a name resolves to this host. Unchecked, each looping connection opens
 * another until max_conns is full. Every backend connection to an address of
 * this host is entered here under its local address (the ephemeral port the
 * kernel chose); an accepted client whose address is one of them is our own
 * connection coming back, and is closed at once (reason "loop").
 *
 * Cost: nothing for backends elsewhere; for backends on this host, one
 * getsockname() and a locked insert per connect, and a lookup per accept
 * while any such connection is open. */
#ifndef SPLICER_LOOP_GUARD_H
#define SPLICER_LOOP_GUARD_H
#include <stdint.h>
#include <sys/socket.h>

struct loop_key {
	uint8_t family; /* 0: not entered */
	uint16_t port;
	uint8_t ip[16];
};

struct loop_entry {
	struct loop_key key;    /* our end of the backend connection */
	struct loop_key remote; /* the backend's end */
	struct loop_entry *next;
};

/* Enters fd (a connect() to `to` was started on it). */
void loop_guard_add(struct loop_entry *e, int fd, const struct sockaddr *to, socklen_t tolen);

/* Removes e if it was entered. */
void loop_guard_del(struct loop_entry *e);

/* 1 when the accepted connection fd (from peer) is one of our backend
 * connections: the same two ends. (Matching the peer alone could take a
 * local client for a loop: connect() reuses an ephemeral port toward
 * another destination.) */
int loop_guard_hit(int fd, const struct sockaddr *peer, socklen_t len);

#endif
