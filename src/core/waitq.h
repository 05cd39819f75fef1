/* SPDX-License-Identifier: MIT */
/* waitq: clients waiting for a backend slot (backend maxconn). Each worker
 * keeps its waiting sessions in arrival order; when a session releases a
 * slot of a backend with maxconn and its route has clients waiting, or
 * capacity appears otherwise (a backend marked up by its checks or enabled
 * through the admin socket: backend.h; a reload or DNS change that brings
 * backends or slots: waitq_reload), every worker with waiters is woken and
 * offers the slot to its queue in order.
 * Order is first-come within a worker; across workers the first to wake
 * wins, which the kernel's SO_REUSEPORT spread makes fair on average. */
#ifndef SPLICER_WAITQ_H
#define SPLICER_WAITQ_H
#include "worker.h"

struct session;

void waitq_add(struct worker *w, struct session *s);
void waitq_del(struct worker *w, struct session *s);
/* waitq_add for a waiter that queued earlier (an upgrade's hand-over: its
 * queued_ms is the old process's): its place is by that time, ahead of
 * those that came later. */
void waitq_insert(struct worker *w, struct session *s);

/* A slot may have freed, or a backend become usable (backend.h:
 * backend_on_capacity): wake the workers with waiters (any thread). */
void waitq_kick(struct shared *sh);

/* w took a newer config (a reload, a DNS change): its waiters look again
 * at the next turn, on the new generation's route (session.h). */
void waitq_reload(struct worker *w);

/* The worker's loop, when kicked: offers slots to its waiters in order. */
void waitq_run(struct worker *w);

#endif
