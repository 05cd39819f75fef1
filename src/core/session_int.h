/* SPDX-License-Identifier: MIT */
/* session_int: what session.c lends the core's other session files
 * (session_handoff.c) and nobody else: a session leaving the process and
 * one joining it at an upgrade. */
#ifndef SPLICER_SESSION_INT_H
#define SPLICER_SESSION_INT_H

#include "session.h"

/* The old process, once s's descriptors and state were sent: s leaves its
 * worker without a close (no FIN, no RST, no log line: it goes on in the
 * new process). Its sockets leave the epoll set, its descriptors and what
 * its engines hold are given back; it is freed with the turn's dead. */
void session_handed(struct session *s);

/* The new process: s, filled in by session_handoff.c (sides with their
 * descriptors, directions with their engines' state, route, backend,
 * times, flags as they were), joins its worker as if accepted: counted,
 * holding its backend slot and source again, registered in epoll, queued,
 * run or timed as its state says. Returns 0, or -1 when it was closed. */
int session_adopted(struct session *s);

#endif
