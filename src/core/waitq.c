/* SPDX-License-Identifier: MIT */
/* waitq: the maxconn wait queue (waitq.h). */
#include "waitq.h"

#include "session.h"

void waitq_add(struct worker *w, struct session *s)
{
	s->wq_next = NULL;
	s->wq_prev = w->wq_tail;
	if (w->wq_tail)
		w->wq_tail->wq_next = s;
	else
		w->wq_head = s;
	w->wq_tail = s;
	__atomic_add_fetch(&w->wq_len, 1, __ATOMIC_RELAXED);
	/* a slot may be free already (the waiters ahead were served
	 * elsewhere): look once this turn, in order */
	__atomic_store_n(&w->wq_kicked, 1, __ATOMIC_RELAXED);
}

void waitq_insert(struct worker *w, struct session *s)
{
	struct session *after = w->wq_tail;

	while (after && after->queued_ms > s->queued_ms)
		after = after->wq_prev;
	s->wq_prev = after;
	s->wq_next = after ? after->wq_next : w->wq_head;
	if (s->wq_next)
		s->wq_next->wq_prev = s;
	else
		w->wq_tail = s;
	if (after)
		after->wq_next = s;
	else
		w->wq_head = s;
	__atomic_add_fetch(&w->wq_len, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&w->wq_kicked, 1, __ATOMIC_RELAXED);
}

void waitq_del(struct worker *w, struct session *s)
{
	if (s->wq_prev)
		s->wq_prev->wq_next = s->wq_next;
	else
		w->wq_head = s->wq_next;
	if (s->wq_next)
		s->wq_next->wq_prev = s->wq_prev;
	else
		w->wq_tail = s->wq_prev;
	s->wq_prev = s->wq_next = NULL;
	__atomic_sub_fetch(&w->wq_len, 1, __ATOMIC_RELAXED);
}

void waitq_kick(struct shared *sh)
{
	/* the change that made room (a slot, a backend enabled) comes before
	 * the look at wq_len, as waitq_run's fence puts a new waiter's wq_len
	 * before its look at the backends: one of the two sees the other */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (unsigned i = 0; i < sh->nworkers; i++) {
		struct worker *w = &sh->workers[i];
		if (!__atomic_load_n(&w->wq_len, __ATOMIC_RELAXED))
			continue;
		if (!__atomic_exchange_n(&w->wq_kicked, 1, __ATOMIC_ACQ_REL))
			worker_wake(w);
	}
}

void waitq_run(struct worker *w)
{
	struct session *s = w->wq_head, *next;

	if (!__atomic_exchange_n(&w->wq_kicked, 0, __ATOMIC_ACQ_REL))
		return;
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* waitq_kick's pair */
	/* a session that stays keeps its place; one that leaves is the only
	 * one removed, so next stays valid */
	for (; s; s = next) {
		next = s->wq_next;
		session_dequeue(s);
	}
}

void waitq_reload(struct worker *w)
{
	if (w->wq_head)
		__atomic_store_n(&w->wq_kicked, 1, __ATOMIC_RELAXED);
}
