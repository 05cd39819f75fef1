/* SPDX-License-Identifier: MIT */
/* Unit tests for src/core/qsbr.c: a retired object is freed only once every
 * reader is offline or came online after its retirement, at once without
 * readers, never waits for an offline (idle) reader, and under threads
 * (readers in loop turns, a writer replacing the object as fast as it can)
 * no reader ever finds the object it holds freed within its turn, while
 * the objects waiting stay few. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "qsbr.h"

struct obj {
	struct qsbr_entry retired;
	int dead; /* atomic: set by the "free" (the memory itself is kept, to look at) */
};

static unsigned freed;

static void mark_dead(struct qsbr_entry *e)
{
	struct obj *o = (struct obj *)e;
	__atomic_store_n(&o->dead, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&freed, 1, __ATOMIC_RELAXED);
}

Test(unit_qsbr, without_readers_a_retired_object_goes_at_once)
{
	struct obj o = { 0 };

	qsbr_retire(&o.retired, mark_dead);
	cr_assert_eq(o.dead, 1);
	cr_assert_eq(qsbr_pending(), 0);
}

Test(unit_qsbr, each_online_reader_must_come_online_again)
{
	struct obj a = { 0 }, b = { 0 }, c = { 0 };

	cr_assert_eq(qsbr_init(3), 0);
	qsbr_online(0);
	qsbr_online(1);
	qsbr_online(2);
	qsbr_retire(&a.retired, mark_dead);
	cr_assert_eq(a.dead, 0, "the readers came online before the retirement");
	qsbr_offline(0);
	qsbr_online(0);
	qsbr_online(1);
	cr_assert_eq(qsbr_reclaim(), 0);
	cr_assert_eq(a.dead, 0, "reader 2 is still in its turn");
	qsbr_retire(&b.retired, mark_dead);
	qsbr_online(2);
	cr_assert_eq(qsbr_reclaim(), 1, "a goes, b waits for readers 0 and 1");
	cr_assert(a.dead && !b.dead);
	qsbr_online(0);
	qsbr_offline(1); /* waiting for events, or its loop ended: not waited for */
	cr_assert_eq(qsbr_reclaim(), 1);
	cr_assert(b.dead);
	qsbr_offline(0);
	qsbr_offline(2);
	qsbr_retire(&c.retired, mark_dead);
	cr_assert(c.dead, "every reader offline (idle): freed at once");
	cr_assert_eq(qsbr_pending(), 0);
	qsbr_fini();
}

Test(unit_qsbr, fini_frees_what_still_waits)
{
	struct obj a = { 0 };

	cr_assert_eq(qsbr_init(1), 0);
	qsbr_retire(&a.retired, mark_dead);
	cr_assert_eq(qsbr_pending(), 1, "reader 0 never ran");
	qsbr_fini();
	cr_assert(a.dead);
}

/* ---- threads: readers hold the published object within a turn ---- */


#define NREADERS 3
#define NOBJ     20000

static struct obj *pool;
static struct obj *published; /* atomic */
static int stop;              /* atomic */
static long seen_dead, turns;

static void *reader(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	long dead = 0, n = 0;

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		qsbr_online(id);
		struct obj *o = __atomic_load_n(&published, __ATOMIC_ACQUIRE);
		for (int k = 0; k < 50; k++) /* the turn goes on using it */
			dead += __atomic_load_n(&o->dead, __ATOMIC_RELAXED);
		if (n++ % 4 == 0)
			qsbr_offline(id); /* a wait for events, every 4th turn */
	}
	qsbr_offline(id);
	__atomic_add_fetch(&seen_dead, dead, __ATOMIC_RELAXED);
	__atomic_add_fetch(&turns, n, __ATOMIC_RELAXED);
	return NULL;
}

Test(unit_qsbr, readers_never_see_a_freed_object, .timeout = 60)
{
	pthread_t th[NREADERS];
	unsigned most_pending = 0;

	pool = calloc(NOBJ, sizeof(*pool));
	cr_assert(pool);
	cr_assert_eq(qsbr_init(NREADERS), 0);
	published = &pool[0];
	for (unsigned i = 0; i < NREADERS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, reader, (void *)(uintptr_t)i), 0);
	for (unsigned i = 1; i < NOBJ; i++) {
		struct obj *old = published;
		__atomic_store_n(&published, &pool[i], __ATOMIC_RELEASE);
		qsbr_retire(&old->retired, mark_dead);
		if (qsbr_pending() > most_pending)
			most_pending = qsbr_pending();
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < NREADERS; i++)
		pthread_join(th[i], NULL);
	qsbr_reclaim();
	cr_assert_eq(freed, NOBJ - 1, "every replaced object freed once the readers left");
	cr_assert_eq(seen_dead, 0, "a reader found its object freed within its turn %ld times", seen_dead);
	cr_assert_eq(published->dead, 0, "the published object is never freed");
	cr_assert_gt(turns, 0);
	fprintf(stderr, "[qsbr] %d replacements, %ld reader turns, at most %u waiting\n", NOBJ - 1,
		turns, most_pending);
	qsbr_fini();
	free(pool);
}
