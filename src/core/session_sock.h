/* SPDX-License-Identifier: MIT */
/* session_sock: a session's sockets as its route asks (sockopt.h): the
 * backend socket (MPTCP, device, mark, tos, keepalive, user timeout,
 * pacing, source address or the client's own), Fast Open of the client's
 * first bytes, the client side's options, and a per-source rate shared out
 * among the source's sessions. */
#ifndef SPLICER_SESSION_SOCK_H
#define SPLICER_SESSION_SOCK_H
#include "config.h"
#include "session.h"

/* How often a session with a per-source rate looks at its source's count of
 * sessions again (its share follows sessions that come and go). */
#define RATE_SHARE_MS 1000

/* A socket for a connection of s to backend b, with every option of s's
 * route and its source bound. Returns the fd, or -errno: this host's doing
 * (no descriptor, a source address or a capability missing, a client of
 * another address family than the backend with source = client), which
 * never counts against the backend; a refused option is logged once. */
int session_sock_backend(struct session *s, const struct backend_conf *b);

/* Connects fd to b; with the route's backend fastopen, the client bytes
 * already queued go in the SYN (peeked: taken from the client only once the
 * connection is up, so a retry sends them again). Returns 0 (connected),
 * -EINPROGRESS, or -errno. */
int session_sock_connect(struct session *s, int fd, const struct backend_conf *b);

/* The backend connection is up: the client bytes that rode in its SYN are
 * taken from the client socket. Returns how many (the caller counts them
 * as written), or -errno. */
int session_sock_opened(struct session *s);

/* s's route is final: what its client connection needs beyond what its
 * listener gave it (keepalive and user timeout when the listener's routes
 * disagree, the rate limit down). */
void session_sock_client(struct session *s);

/* Per-source rates: s's share again (its source's session count may have
 * changed). Sets rate_next_ms. */
void session_sock_rate_share(struct session *s);

#endif
