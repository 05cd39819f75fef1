/* SPDX-License-Identifier: MIT */
/* qsbr: quiescent-state-based reclamation (qsbr.h).
 *
 * Ordering. The writer publishes the replacement, then a sequentially
 * consistent fence, then takes epoch E and scans the readers. A reader
 * coming online stores the epoch it loads, then a sequentially consistent
 * fence, then reads. Either the writer's fence comes first (in the single
 * order of such fences): the reader's reads after its fence find the
 * replacement; or the reader's comes first: the writer's scan finds the
 * reader's store (or a later one), an epoch below E that keeps the object,
 * or offline again after the turn. A reader that loaded an epoch >= E
 * (acquire: it synchronizes with the retirement, the replacement came
 * before) cannot find the old object either. And every read of a turn comes
 * before the release store of the reader's next offline state, which the
 * scan loads with acquire: before the free. A scan on another thread than
 * the retirement's comes after it through the lock, so it sees no older
 * reader state than that one did. */
#include "qsbr.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define QSBR_OFFLINE UINT64_MAX /* holds nothing: above every epoch */

/* One cache line per reader: each worker writes only its own. */
struct reader {
	uint64_t seen; /* atomic: the epoch it came online at, or QSBR_OFFLINE */
	char pad[64 - sizeof(uint64_t)];
};

static uint64_t epoch = 1;          /* atomic: 1 + retirements so far */
static struct reader *readers;      /* set by qsbr_init before any reader runs */
static unsigned nreaders;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct qsbr_entry *retired;  /* newest first; under lock */
static unsigned nretired;           /* atomic; written under lock */

int qsbr_init(unsigned n)
{
	struct reader *r = aligned_alloc(64, (n ? n : 1) * sizeof(*r));

	if (!r)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		r[i].seen = 0; /* online, nothing seen: retirements from now wait for it */
	pthread_mutex_lock(&lock);
	readers = r;
	nreaders = n;
	pthread_mutex_unlock(&lock);
	return 0;
}

void qsbr_offline(unsigned id)
{
	if (id < nreaders)
		__atomic_store_n(&readers[id].seen, QSBR_OFFLINE, __ATOMIC_RELEASE);
}

void qsbr_online(unsigned id)
{
	if (id >= nreaders)
		return; /* not a registered reader (no qsbr_init): nothing waits for it */
	/* release: a scan that finds this epoch comes after the last turn's reads */
	__atomic_store_n(&readers[id].seen, __atomic_load_n(&epoch, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* the store before this turn's reads */
}

/* The oldest epoch a reader may still hold objects of (under lock). */
static uint64_t min_seen(void)
{
	uint64_t m = QSBR_OFFLINE;

	for (unsigned i = 0; i < nreaders; i++) {
		uint64_t s = __atomic_load_n(&readers[i].seen, __ATOMIC_ACQUIRE);
		if (s < m)
			m = s;
	}
	return m;
}

unsigned qsbr_reclaim(void)
{
	struct qsbr_entry *done = NULL, **pp;
	unsigned n = 0;

	if (!__atomic_load_n(&nretired, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&lock);
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* (the retirement's, for a scan of its own) */
	uint64_t m = min_seen();
	for (pp = &retired; *pp;) {
		struct qsbr_entry *e = *pp;
		if (e->epoch <= m) {
			*pp = e->next;
			e->next = done;
			done = e;
			n++;
		} else {
			pp = &e->next;
		}
	}
	__atomic_store_n(&nretired, nretired - n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lock);
	/* outside the lock: a free_fn may take others */
	while (done) {
		struct qsbr_entry *e = done;
		done = e->next;
		e->free_fn(e);
	}
	return n;
}

void qsbr_retire(struct qsbr_entry *e, void (*free_fn)(struct qsbr_entry *e))
{
	e->free_fn = free_fn;
	pthread_mutex_lock(&lock);
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* the replacement's store before the scan */
	e->epoch = __atomic_add_fetch(&epoch, 1, __ATOMIC_SEQ_CST);
	e->next = retired;
	retired = e;
	__atomic_store_n(&nretired, nretired + 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lock);
	qsbr_reclaim(); /* what earlier retirements left, and this one without readers */
}

unsigned qsbr_pending(void)
{
	return __atomic_load_n(&nretired, __ATOMIC_RELAXED);
}

void qsbr_fini(void)
{
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nreaders; i++)
		__atomic_store_n(&readers[i].seen, QSBR_OFFLINE, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	qsbr_reclaim();
	pthread_mutex_lock(&lock);
	free(readers);
	readers = NULL;
	nreaders = 0;
	pthread_mutex_unlock(&lock);
}
