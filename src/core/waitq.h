/* SPDX-License-Identifier: MIT */
/* waitq: clients waiting for a backend slot (backend maxconn). Each worker
 * keeps its waiting sessions in arrival order; when a session releases a
 * slot of a backend with maxconn and its route has clients waiting, every
 * worker with waiters is woken and offers the slot to its queue in order.
 * Order is first-come within a worker; across workers the first to wake
 * wins, which the kernel's SO_REUSEPORT spread makes fair on average. */
#ifndef SPLICER_WAITQ_H
#define SPLICER_WAITQ_H
#include "worker.h"

struct session;

void waitq_add(struct worker *w, struct session *s);
void waitq_del(struct worker *w, struct session *s);

/* A slot may have freed: wake the workers with waiters (any thread). */
void waitq_kick(struct shared *sh);

/* The worker's loop, when kicked: offers slots to its waiters in order. */
void waitq_run(struct worker *w);

#endif
