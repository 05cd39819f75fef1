/* SPDX-License-Identifier: MIT */
/* source_table: see source_table.h. */
#include "source_table.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define NIL UINT32_MAX
#define PERIOD_MS 1000

struct src_ent {
	struct ip key;
	uint32_t conns;     /* live sessions */
	uint32_t hnext;     /* next in the hash chain */
	uint32_t prev, next; /* idle list (conns == 0), or the free list (next) */
	uint32_t cur, last; /* sessions admitted in this period and the one before */
	uint64_t start_ms;  /* this period's start */
};

struct source_table {
	pthread_mutex_t lock;
	uint64_t seed;
	uint32_t size;       /* entries in use at most (the setting) */
	uint32_t cap;        /* entries allocated: size, or more after a shrink below
				the live ones (source_table_resize) */
	uint32_t mask;       /* buckets - 1 */
	uint32_t *bucket;
	struct src_ent *e;
	uint32_t free_head;
	uint32_t idle_head, idle_tail; /* least recently used first */
	size_t used, live;
	uint64_t conns, evicted, full;
};

bool source_key(const struct sockaddr *sa, struct ip *key)
{
	if (!ip_from_sockaddr(sa, key))
		return false;
	if (!key->v4)
		memset(key->a + 8, 0, 8); /* per /64 */
	return true;
}

static uint64_t mix(uint64_t h)
{
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

static uint32_t hash(const struct source_table *t, const struct ip *k)
{
	uint64_t w0, w1;

	memcpy(&w0, k->a, 8);
	memcpy(&w1, k->a + 8, 8);
	return (uint32_t)mix(mix(t->seed ^ w0 ^ k->v4) ^ w1) & t->mask;
}

static bool same(const struct ip *a, const struct ip *b)
{
	return a->v4 == b->v4 && !memcmp(a->a, b->a, 16);
}

static size_t buckets_for(size_t cap)
{
	size_t nb = 1;

	while (nb < cap)
		nb <<= 1;
	return nb;
}

/* Entries from..cap-1 of t->e, unused, become the free list. */
static void free_list_from(struct source_table *t, uint32_t from)
{
	for (uint32_t i = from; i < t->cap; i++)
		t->e[i].next = i + 1 < t->cap ? i + 1 : NIL;
	t->free_head = from < t->cap ? from : NIL;
}

struct source_table *source_table_new(size_t size)
{
	struct source_table *t;
	size_t nb = buckets_for(size);

	if (!size || size > SOURCE_TABLE_MAX)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->bucket = malloc(nb * sizeof(*t->bucket));
	t->e = calloc(size, sizeof(*t->e));
	if (!t->bucket || !t->e) {
		source_table_free(t);
		return NULL;
	}
	if (getrandom(&t->seed, sizeof t->seed, GRND_NONBLOCK) != sizeof t->seed)
		t->seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)t;
	t->size = t->cap = (uint32_t)size;
	t->mask = (uint32_t)(nb - 1);
	memset(t->bucket, 0xff, nb * sizeof(*t->bucket));
	free_list_from(t, 0);
	t->idle_head = t->idle_tail = NIL;
	return t;
}

void source_table_free(struct source_table *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t->bucket);
	free(t->e);
	free(t);
}

/* ---- the idle list: entries without live sessions, oldest first ---- */

static void idle_unlink(struct source_table *t, uint32_t i)
{
	struct src_ent *e = &t->e[i];

	if (e->prev != NIL)
		t->e[e->prev].next = e->next;
	else
		t->idle_head = e->next;
	if (e->next != NIL)
		t->e[e->next].prev = e->prev;
	else
		t->idle_tail = e->prev;
	e->prev = e->next = NIL;
}

static void idle_append(struct source_table *t, uint32_t i)
{
	struct src_ent *e = &t->e[i];

	e->prev = t->idle_tail;
	e->next = NIL;
	if (t->idle_tail != NIL)
		t->e[t->idle_tail].next = i;
	else
		t->idle_head = i;
	t->idle_tail = i;
}

/* ---- the hash ---- */

static uint32_t find(const struct source_table *t, const struct ip *k, uint32_t b)
{
	for (uint32_t i = t->bucket[b]; i != NIL; i = t->e[i].hnext)
		if (same(&t->e[i].key, k))
			return i;
	return NIL;
}

static void unhash(struct source_table *t, uint32_t i)
{
	uint32_t *p = &t->bucket[hash(t, &t->e[i].key)];

	while (*p != i)
		p = &t->e[*p].hnext;
	*p = t->e[i].hnext;
}

/* A new entry for k in bucket b: a free one, else the least recently used
 * idle one. NIL when every entry has live sessions. */
static uint32_t take(struct source_table *t, const struct ip *k, uint32_t b, uint64_t now)
{
	uint32_t i = t->free_head;

	if (i != NIL && t->used < t->size) { /* (not while over a shrunk size) */
		t->free_head = t->e[i].next;
		t->used++;
	} else if ((i = t->idle_head) != NIL) {
		idle_unlink(t, i);
		unhash(t, i);
		t->evicted++;
	} else {
		return NIL;
	}
	struct src_ent *e = &t->e[i];
	memset(e, 0, sizeof(*e));
	e->key = *k;
	e->start_ms = now;
	e->hnext = t->bucket[b];
	t->bucket[b] = i;
	idle_append(t, i);
	return i;
}

/* Moves the window to now and returns the rate scaled by 1000. */
static uint64_t rate_x1000(struct src_ent *e, uint64_t now)
{
	uint64_t t = now > e->start_ms ? now - e->start_ms : 0;

	if (t >= 2 * PERIOD_MS) {
		e->cur = e->last = 0;
		e->start_ms = now;
		t = 0;
	} else if (t >= PERIOD_MS) {
		e->last = e->cur;
		e->cur = 0;
		e->start_ms += PERIOD_MS;
		t -= PERIOD_MS;
	}
	return (uint64_t)e->cur * PERIOD_MS + (uint64_t)e->last * (PERIOD_MS - t);
}

static enum source_verdict admit(struct source_table *t, const struct sockaddr *sa,
				 uint64_t now_ms, unsigned max_conns, unsigned max_rate, int arrival);

enum source_verdict source_admit(struct source_table *t, const struct sockaddr *sa,
				 uint64_t now_ms, unsigned max_conns, unsigned max_rate)
{
	return admit(t, sa, now_ms, max_conns, max_rate, 1);
}

enum source_verdict source_hold(struct source_table *t, const struct sockaddr *sa,
				uint64_t now_ms)
{
	return admit(t, sa, now_ms, 0, 0, 0);
}

static enum source_verdict admit(struct source_table *t, const struct sockaddr *sa,
				 uint64_t now_ms, unsigned max_conns, unsigned max_rate, int arrival)
{
	enum source_verdict v = SOURCE_OK;
	struct ip k;

	if (!source_key(sa, &k))
		return SOURCE_OK;
	pthread_mutex_lock(&t->lock);
	uint32_t b = hash(t, &k), i = find(t, &k, b);
	if (i == NIL && (i = take(t, &k, b, now_ms)) == NIL) {
		t->full++;
		pthread_mutex_unlock(&t->lock);
		return SOURCE_TABLE_FULL;
	}
	struct src_ent *e = &t->e[i];
	uint64_t rate = rate_x1000(e, now_ms);
	if (max_conns && e->conns >= max_conns)
		v = SOURCE_TOO_MANY_CONNS;
	else if (max_rate && rate >= (uint64_t)max_rate * PERIOD_MS)
		v = SOURCE_TOO_FAST;
	if (v == SOURCE_OK) {
		e->cur += (uint32_t)arrival;
		if (!e->conns++) {
			idle_unlink(t, i);
			t->live++;
		}
		t->conns++;
	} else if (!e->conns) { /* refused and idle: still recently used */
		idle_unlink(t, i);
		idle_append(t, i);
	}
	pthread_mutex_unlock(&t->lock);
	return v;
}

void source_release(struct source_table *t, const struct sockaddr *sa)
{
	struct ip k;

	if (!source_key(sa, &k))
		return;
	pthread_mutex_lock(&t->lock);
	uint32_t i = find(t, &k, hash(t, &k));
	/* an admitted source is always there: live entries are not evicted */
	if (i != NIL && t->e[i].conns) {
		t->conns--;
		if (!--t->e[i].conns) {
			t->live--;
			if (t->used > t->size) {
				/* over a size shrunk below the live entries: the
				 * entry goes, so the table comes down to its size */
				unhash(t, i);
				t->e[i].next = t->free_head;
				t->free_head = i;
				t->used--;
			} else {
				idle_append(t, i);
			}
		}
	}
	pthread_mutex_unlock(&t->lock);
}

/* Moves t's entries into e (cap entries) and bucket (nb): every live one,
 * then the most recently used idle ones while fewer than size are kept
 * (in their order). Under t's lock; the old arrays are the caller's. */
static void rebuild(struct source_table *t, struct src_ent *e, uint32_t cap, uint32_t *bucket,
		    size_t nb, uint32_t size)
{
	struct src_ent *old = t->e;
	uint32_t ocap = t->cap, n = 0, keep = 0, i;

	for (i = t->idle_tail; i != NIL && t->live + keep < size; i = old[i].prev)
		keep++; /* the newest idle ones that fit; i: the newest left out */
	i = i == NIL ? t->idle_head : old[i].next;
	t->e = e;
	t->cap = cap;
	t->size = size;
	t->bucket = bucket;
	t->mask = (uint32_t)(nb - 1);
	memset(bucket, 0xff, nb * sizeof(*bucket));
	t->idle_head = t->idle_tail = NIL;
	for (uint32_t k = 0; k < ocap; k++) {
		if (!old[k].conns)
			continue;
		e[n] = old[k];
		e[n].prev = e[n].next = NIL;
		uint32_t b = hash(t, &e[n].key);
		e[n].hnext = bucket[b];
		bucket[b] = n++;
	}
	for (; keep; keep--, i = old[i].next) {
		e[n] = old[i];
		uint32_t b = hash(t, &e[n].key);
		e[n].hnext = bucket[b];
		bucket[b] = n;
		idle_append(t, n++);
	}
	t->used = n;
	free_list_from(t, n);
}

int source_table_resize(struct source_table *t, size_t size)
{
	struct src_ent *e;
	uint32_t *bucket;
	size_t cap, nb;

	if (!size || size > SOURCE_TABLE_MAX)
		return -EINVAL;
	for (;;) {
		pthread_mutex_lock(&t->lock);
		if (size == t->size) {
			pthread_mutex_unlock(&t->lock);
			return 0;
		}
		/* below the live entries: room for them all, and for a few more
		 * that may start while the arrays are allocated (unlocked); never
		 * more than now, which holds every entry there can be */
		cap = t->live + t->live / 8 + 16;
		if (cap > t->cap)
			cap = t->cap;
		if (cap < size)
			cap = size;
		pthread_mutex_unlock(&t->lock);
		nb = buckets_for(cap);
		e = calloc(cap, sizeof(*e));
		bucket = malloc(nb * sizeof(*bucket));
		if (!e || !bucket) {
			free(e);
			free(bucket);
			return -ENOMEM;
		}
		pthread_mutex_lock(&t->lock);
		if (t->live <= cap)
			break; /* with the lock */
		pthread_mutex_unlock(&t->lock);
		free(e);
		free(bucket);
	}
	struct src_ent *old_e = t->e;
	uint32_t *old_bucket = t->bucket;
	rebuild(t, e, (uint32_t)cap, bucket, nb, (uint32_t)size);
	pthread_mutex_unlock(&t->lock);
	free(old_e);
	free(old_bucket);
	return 0;
}

unsigned source_conns(struct source_table *t, const struct sockaddr *sa)
{
	struct ip k;
	unsigned n = 0;

	if (!source_key(sa, &k))
		return 0;
	pthread_mutex_lock(&t->lock);
	uint32_t i = find(t, &k, hash(t, &k));
	if (i != NIL)
		n = t->e[i].conns;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void source_table_get_stats(struct source_table *t, struct source_table_stats *st)
{
	pthread_mutex_lock(&t->lock);
	st->size = t->size;
	st->used = t->used;
	st->live = t->live;
	st->conns = t->conns;
	st->evicted = t->evicted;
	st->full = t->full;
	pthread_mutex_unlock(&t->lock);
}

/* ---- an upgrade's hand-over ---- */

/* The key as text: 4 or 6, then its 16 bytes in hex. */
static void key_text(const struct ip *k, char out[SOURCE_KEY_TEXT])
{
	int n = snprintf(out, SOURCE_KEY_TEXT, "%d:", k->v4 ? 4 : 6);

	for (int i = 0; i < 16; i++)
		n += snprintf(out + n, (size_t)(SOURCE_KEY_TEXT - n), "%02x", k->a[i]);
}

static int key_parse(const char *s, struct ip *k)
{
	memset(k, 0, sizeof(*k));
	if ((s[0] != '4' && s[0] != '6') || s[1] != ':' || strlen(s + 2) != 32)
		return -1;
	k->v4 = s[0] == '4';
	for (int i = 0; i < 16; i++) {
		unsigned b;
		if (sscanf(s + 2 + 2 * i, "%2x", &b) != 1)
			return -1;
		k->a[i] = (uint8_t)b;
	}
	return 0;
}

unsigned source_table_export(struct source_table *t, uint64_t now_ms,
			     void (*put)(void *arg, const char *key, uint32_t cur, uint32_t last,
					 uint64_t start_ms),
			     void *arg)
{
	unsigned n = 0;

	pthread_mutex_lock(&t->lock);
	for (uint32_t b = 0; b <= t->mask; b++)
		for (uint32_t i = t->bucket[b]; i != NIL; i = t->e[i].hnext) {
			struct src_ent *e = &t->e[i];
			char key[SOURCE_KEY_TEXT];
			rate_x1000(e, now_ms); /* to now: a window that has passed is 0 */
			if (!e->cur && !e->last)
				continue;
			key_text(&e->key, key);
			put(arg, key, e->cur, e->last, e->start_ms);
			n++;
		}
	pthread_mutex_unlock(&t->lock);
	return n;
}

int source_table_import(struct source_table *t, const char *key, uint32_t cur, uint32_t last,
			uint64_t start_ms, uint64_t now_ms)
{
	struct ip k;
	uint32_t b, i;
	int r = 0;

	if (key_parse(key, &k))
		return -1;
	pthread_mutex_lock(&t->lock);
	b = hash(t, &k);
	if ((i = find(t, &k, b)) == NIL && (i = take(t, &k, b, start_ms)) == NIL) {
		r = -1;
	} else {
		struct src_ent *e = &t->e[i];
		rate_x1000(e, now_ms);
		if (!e->cur && !e->last) { /* only the old process's: its window as it was */
			e->start_ms = start_ms;
			e->cur = cur;
			e->last = last;
			rate_x1000(e, now_ms);
		} else { /* this process's too (it accepted before the hand-over): both */
			e->cur += cur;
			e->last += last;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}
