/* SPDX-License-Identifier: MIT */
/* backend: see backend.h. */
#include "backend.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "qsbr.h"
#include "worker.h"

_Static_assert(MAX_BACKENDS < 0xff, "maglev stores backend indices in a byte, 0xff marks a free slot");
_Static_assert(MAX_BACKENDS <= 64, "a pick marks the ramping backends it passed over in 64 bits");

/* FNV-1a, then a splitmix64 finish so nearby inputs spread over all bits. */
static uint64_t hash64(const void *data, size_t n, uint64_t seed)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

/* A route's balancing tables, built whole and then only read: a weight
 * changed at run time publishes a new one (the workers load the pointer
 * once per pick, within a loop turn) and retires the old one, freed once no
 * worker can hold it: each is waiting for events or has begun a turn since
 * (qsbr.h). */
struct balance_table {
	struct qsbr_entry retired;   /* replaced: waiting for the workers to pass */
	uint8_t *maglev;             /* balance = maglev: MAGLEV_SIZE backend indices */
	unsigned nsched;
	unsigned sched[];            /* weighted round-robin order of backend indices */
};

/* Guards building and replacing tables, and the list of routes that have
 * them: a weight change rebuilds every generation's route of that name, and
 * a generation being built reads the weights under it, so none misses one. */
static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;
static struct route *built_routes;

/* The weight sessions follow (the admin socket's, else the file's). */
unsigned backend_weight(const struct route *r, unsigned i)
{
	uint32_t w = r->health ? __atomic_load_n(&r->health[i]->weight, __ATOMIC_RELAXED) : 0;

	return w ? w : r->backend[i].weight;
}

/* Smooth weighted round robin (as nginx spreads weights): the order visits
 * backend i weight_i times per cycle, interleaved rather than in runs. */
static struct balance_table *build_schedule(const struct route *r, const unsigned *weight)
{
	unsigned total = 0;
	long cur[MAX_BACKENDS] = { 0 };
	struct balance_table *t;

	for (unsigned i = 0; i < r->nbackend; i++)
		total += weight[i];
	if (!(t = calloc(1, sizeof(*t) + total * sizeof(t->sched[0]))))
		return NULL;
	for (unsigned k = 0; k < total; k++) {
		unsigned best = 0;
		for (unsigned i = 0; i < r->nbackend; i++) {
			cur[i] += weight[i];
			if (cur[i] > cur[best])
				best = i;
		}
		cur[best] -= (long)total;
		t->sched[k] = best;
	}
	t->nsched = total;
	return t;
}

/* Maglev population: each backend walks its own permutation of the table
 * (offset and skip from hashes of its address text, so the table depends
 * only on the backend list, not on the instance) and takes the next free
 * slot, weight times per round. A backend's removal frees only its slots,
 * so about 1/N of clients move. */
static uint8_t *build_maglev(const struct route *r, const unsigned *weight)
{
	const uint32_t m = MAGLEV_SIZE;
	uint32_t offset[MAX_BACKENDS], skip[MAX_BACKENDS], next[MAX_BACKENDS] = { 0 };
	uint32_t filled = 0;
	uint8_t *tab = malloc(m * sizeof(*tab));

	if (!tab)
		return NULL;
	memset(tab, 0xff, m * sizeof(*tab));
	if (!r->nbackend)
		return tab; /* no backend yet (a resolve= name without addresses): backend_pick picks none */
	for (unsigned i = 0; i < r->nbackend; i++) {
		const char *t = r->backend[i].addr.text;
		offset[i] = (uint32_t)(hash64(t, strlen(t), 0x6d61676c6576ULL) % m);
		skip[i] = (uint32_t)(hash64(t, strlen(t), 0x736b6970ULL) % (m - 1)) + 1;
	}
	while (filled < m) {
		for (unsigned i = 0; i < r->nbackend && filled < m; i++) {
			for (unsigned w = 0; w < weight[i] && filled < m; w++) {
				uint32_t c;
				do
					c = (uint32_t)((offset[i] + (uint64_t)next[i]++ * skip[i]) % m);
				while (tab[c] != 0xff);
				tab[c] = (uint8_t)i;
				filled++;
			}
		}
	}
	return tab;
}

/* The tables hold the primaries only: a backup is picked apart, and only
 * while no primary is usable (backend_pick). A route without a primary
 * (refused by config_finalize, kept for safety) uses all of them. */
static int has_primary(const struct route *r)
{
	for (unsigned i = 0; i < r->nbackend; i++)
		if (!r->backend[i].backup)
			return 1;
	return 0;
}

static struct balance_table *build_table(const struct route *r)
{
	unsigned weight[MAX_BACKENDS];
	struct balance_table *t;
	int primaries = has_primary(r);

	for (unsigned i = 0; i < r->nbackend; i++)
		weight[i] = primaries && r->backend[i].backup ? 0 : backend_weight(r, i);
	if (!(t = build_schedule(r, weight)))
		return NULL;
	if (r->o.balance == BALANCE_MAGLEV && !(t->maglev = build_maglev(r, weight))) {
		free(t);
		return NULL;
	}
	return t;
}

static void free_table(struct balance_table *t)
{
	if (!t)
		return;
	free(t->maglev);
	free(t);
}

static void free_retired_cb(struct qsbr_entry *e)
{
	free_table((struct balance_table *)((char *)e - offsetof(struct balance_table, retired)));
}

static const struct balance_table *table_of(const struct route *r)
{
	return __atomic_load_n(&r->tab, __ATOMIC_ACQUIRE);
}

/* ---- run-time state registry -------------------------------------------- */

/* Every state object of the process, keyed by route name, the backend's
 * configured address (or "" for the route's own counters) and which
 * occurrence of that address in the route it is (a backend may be listed
 * twice). Each config generation holds a reference on the objects of its
 * routes, so an object lives while any generation that has it does: a
 * reload adopts the running objects, and a backend dropped from the file
 * keeps its object until the last session of the generation that had it
 * has ended. Only config_finalize() and config_free() come here (the main
 * thread, or `splicer check`); the lock is for form, not for speed. The
 * workers and the checker never do: they follow the route's pointers. */
struct state_obj {
	struct state_obj *next; /* hash chain */
	unsigned refs;
	unsigned nth;
	char route[ROUTE_NAME_MAX];
	char backend[ADDR_TEXT_MAX];
	char addr[ADDR_TEXT_MAX]; /* a backend's address as resolved by the latest
				     generation: what its log lines name */
	union {
		struct route_stats st;
		struct backend_health h;
	} u;
};

#define STATE_BUCKETS 1024

/* The workers run (backend_on_capacity was given a hook): a backend that
 * appears or comes up from now on ramps up (slowstart). */
static int running;

static int backends_running(void)
{
	return __atomic_load_n(&running, __ATOMIC_RELAXED);
}

/* The monotonic clock in ms, never 0 (0 means "up since the start"). */
static uint64_t now_ms_nonzero(void)
{
	uint64_t t = now_monotonic_ms();

	return t ? t : 1;
}

static struct state_obj *state_table[STATE_BUCKETS];
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned state_bucket(const char *route, const char *backend, unsigned nth)
{
	uint64_t h = hash64(route, strlen(route), nth);

	h = hash64(backend, strlen(backend), h);
	return (unsigned)(h % STATE_BUCKETS);
}

/* The object for the key, with one more reference; created (zeroed: up,
 * no traffic) when no generation has it. NULL when out of memory. */
static struct state_obj *state_get(const char *route, const char *backend, unsigned nth,
				   const char *addr)
{
	unsigned k = state_bucket(route, backend, nth);
	struct state_obj *o;

	pthread_mutex_lock(&state_lock);
	for (o = state_table[k]; o; o = o->next)
		if (o->nth == nth && !strcmp(o->route, route) && !strcmp(o->backend, backend))
			break;
	if (!o && (o = calloc(1, sizeof(*o)))) {
		/* added while the proxy runs (a reload, DNS, ctl): it comes up now,
		 * and slowstart ramps it; at start every backend is up from 0 */
		o->u.h.up_since_ms = backends_running() ? now_ms_nonzero() : 0;
		o->nth = nth;
		snprintf(o->route, sizeof(o->route), "%s", route);
		snprintf(o->backend, sizeof(o->backend), "%s", backend);
		o->next = state_table[k];
		state_table[k] = o;
	}
	if (o) {
		o->refs++;
		snprintf(o->addr, sizeof(o->addr), "%s", addr);
	}
	pthread_mutex_unlock(&state_lock);
	return o;
}

static void state_put(struct state_obj *o)
{
	unsigned k = state_bucket(o->route, o->backend, o->nth);

	pthread_mutex_lock(&state_lock);
	if (!--o->refs) {
		struct state_obj **pp = &state_table[k];
		while (*pp != o)
			pp = &(*pp)->next;
		*pp = o->next;
		free(o);
	}
	pthread_mutex_unlock(&state_lock);
}

#define STATE_OF(ptr, member) \
	((struct state_obj *)((char *)(ptr) - offsetof(struct state_obj, member)))

/* The key of backend i: its address as configured, so a host name that
 * resolves elsewhere after a reload is still the same backend. */
static const char *backend_key(const struct route *r, unsigned i)
{
	return r->backend[i].spec[0] ? r->backend[i].spec : r->backend[i].addr.text;
}

static int adopt_state(struct route *r)
{
	struct state_obj *o;

	if (!(r->health = calloc(r->nbackend, sizeof(*r->health))) || !(o = state_get(r->name, "", 0, "")))
		return -1;
	r->st = &o->u.st;
	for (unsigned i = 0; i < r->nbackend; i++) {
		unsigned nth = 0;
		for (unsigned j = 0; j < i; j++)
			nth += !strcmp(backend_key(r, j), backend_key(r, i));
		if (!(o = state_get(r->name, backend_key(r, i), nth, r->backend[i].addr.text)))
			return -1;
		r->health[i] = &o->u.h;
	}
	return 0;
}

static void release_state(struct route *r)
{
	for (unsigned i = 0; r->health && i < r->nbackend; i++)
		if (r->health[i])
			state_put(STATE_OF(r->health[i], u.h));
	if (r->st)
		state_put(STATE_OF(r->st, u.st));
	free(r->health);
	r->health = NULL;
	r->st = NULL;
}

int backend_tables_build(struct route *r)
{
	backend_tables_free(r);
	if (adopt_state(r))
		return -1;
	r->has_backup = 0;
	for (unsigned i = 0; i < r->nbackend; i++)
		r->has_backup |= r->backend[i].backup;
	r->has_backup &= (uint8_t)has_primary(r); /* backups alone are the pool */
	pthread_mutex_lock(&tables_lock);
	if ((r->tab = build_table(r))) {
		r->built_next = built_routes;
		built_routes = r;
	}
	pthread_mutex_unlock(&tables_lock);
	return r->tab ? 0 : -1;
}

void backend_tables_free(struct route *r)
{
	release_state(r);
	pthread_mutex_lock(&tables_lock);
	for (struct route **pp = &built_routes; *pp; pp = &(*pp)->built_next)
		if (*pp == r) {
			*pp = r->built_next;
			break;
		}
	pthread_mutex_unlock(&tables_lock);
	free_table(r->tab); /* no session of r is left to pick with it (reload.c) */
	r->tab = NULL;
	r->built_next = NULL;
}

int backend_set_weight(struct route *r, unsigned i, unsigned weight)
{
	const char *name = r->name;
	int rc = 0;

	pthread_mutex_lock(&tables_lock);
	/* the file's weight is stored as "none": a later reload that changes
	 * the file's weight is then followed */
	__atomic_store_n(&r->health[i]->weight, weight == r->backend[i].weight ? 0 : weight,
			 __ATOMIC_RELAXED);
	for (struct route *g = built_routes; g; g = g->built_next) {
		struct balance_table *t;
		if (strcmp(g->name, name))
			continue;
		if (!(t = build_table(g))) {
			rc = -1; /* that generation keeps its table */
			continue;
		}
		struct balance_table *old = g->tab;
		__atomic_store_n(&g->tab, t, __ATOMIC_RELEASE);
		qsbr_retire(&old->retired, free_retired_cb); /* after the store: qsbr.h */
	}
	pthread_mutex_unlock(&tables_lock);
	return rc;
}

/* ---- capacity ------------------------------------------------------------- */

/* Who hears that a backend may take sessions it could not take before (the
 * wait queue: waitq.h); unset before the workers run and after they stop. */
static void (*capacity_fn)(void *arg);
static void *capacity_arg;

void backend_on_capacity(void (*fn)(void *arg), void *arg)
{
	__atomic_store_n(&capacity_arg, arg, __ATOMIC_RELAXED);
	__atomic_store_n(&capacity_fn, fn, __ATOMIC_RELEASE);
	__atomic_store_n(&running, fn != NULL, __ATOMIC_RELAXED);
}

static void backend_capacity_changed(void)
{
	void (*fn)(void *arg) = __atomic_load_n(&capacity_fn, __ATOMIC_ACQUIRE);

	if (fn)
		fn(__atomic_load_n(&capacity_arg, __ATOMIC_RELAXED));
}

void backend_set_admin(struct route *r, unsigned i, int state)
{
	/* back from drain or disable: clients waiting for a slot may take it,
	 * and slowstart ramps it up again */
	if (__atomic_exchange_n(&r->health[i]->admin, (uint8_t)state, __ATOMIC_RELAXED) != state &&
	    state == BACKEND_READY) {
		__atomic_store_n(&r->health[i]->up_since_ms, now_ms_nonzero(), __ATOMIC_RELAXED);
		backend_capacity_changed();
	}
}

int backend_admin(const struct route *r, unsigned i)
{
	return __atomic_load_n(&r->health[i]->admin, __ATOMIC_RELAXED);
}

void backend_checks_apply(struct route *r)
{
	if (r->o.check)
		return;
	for (unsigned i = 0; i < r->nbackend; i++)
		backend_set_down(r, i, 0, "health checks are off");
}

int backend_is_up(const struct route *r, unsigned i)
{
	return !__atomic_load_n(&r->health[i]->down, __ATOMIC_RELAXED);
}

int backend_usable(const struct route *r, unsigned i)
{
	return backend_is_up(r, i) && !backend_admin(r, i);
}

/* Remembers a change up or down (workers, the checker and the admin
 * thread may all make one: each takes its own slot). */
static void remember_change(struct backend_health *h, int down)
{
	struct timespec ts;
	uint32_t seq = __atomic_fetch_add(&h->event_seq, 1, __ATOMIC_RELAXED);
	uint64_t ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	__atomic_store_n(&h->events[seq % BACKEND_EVENTS], ms << 1 | (uint64_t)!!down,
			 __ATOMIC_RELAXED);
}

void backend_check_seen(struct route *r, unsigned i, int ok)
{
	struct backend_health *h = r->health[i];
	uint64_t bits = __atomic_load_n(&h->check_bits, __ATOMIC_RELAXED);
	uint32_t n = __atomic_load_n(&h->check_n, __ATOMIC_RELAXED);

	/* one writer (the checker thread): plain read-modify-write */
	__atomic_store_n(&h->check_bits, bits << 1 | (uint64_t)!!ok, __ATOMIC_RELAXED);
	if (n < 64)
		__atomic_store_n(&h->check_n, n + 1, __ATOMIC_RELAXED);
}

void backend_history(const struct route *r, unsigned i, struct backend_history *out)
{
	const struct backend_health *h = r->health[i];
	uint32_t seq = __atomic_load_n(&h->event_seq, __ATOMIC_RELAXED);

	memset(out, 0, sizeof(*out));
	out->checks = __atomic_load_n(&h->check_bits, __ATOMIC_RELAXED);
	out->nchecks = __atomic_load_n(&h->check_n, __ATOMIC_RELAXED);
	for (uint32_t k = 0; k < BACKEND_EVENTS && k < seq; k++) {
		uint64_t e = __atomic_load_n(&h->events[(seq - 1 - k) % BACKEND_EVENTS], __ATOMIC_RELAXED);
		if (!e)
			continue; /* its writer has not stored it yet */
		out->event_ms[out->nevents] = e >> 1;
		out->event_down[out->nevents++] = (uint8_t)(e & 1);
	}
}

void backend_set_down(struct route *r, unsigned i, int down, const char *why)
{
	if (__atomic_exchange_n(&r->health[i]->down, (uint8_t)down, __ATOMIC_RELAXED) == down)
		return;
	remember_change(r->health[i], down);
	if (down)
		log_warn("route %s: backend %s is down (%s)%s", r->name, r->backend[i].addr.text, why,
			 r->o.on_backend_down == BACKEND_DOWN_CLOSE ? "; its sessions are closed" : "");
	else
		log_info("route %s: backend %s is up (%s)", r->name, r->backend[i].addr.text, why);
	if (down && r->o.on_backend_down == BACKEND_DOWN_CLOSE)
		backend_cut(r->health[i], BACKEND_CUT_DOWN);
	if (!down) {
		__atomic_store_n(&r->health[i]->up_since_ms, now_ms_nonzero(), __ATOMIC_RELAXED);
		backend_capacity_changed(); /* clients waiting for a slot may take it */
	}
}

void backend_connect_result(struct route *r, unsigned i, int ok)
{
	struct backend_health *h = r->health[i];

	if (!r->o.check)
		return; /* without checks nothing would bring it back */
	if (ok) {
		if (__atomic_load_n(&h->fails, __ATOMIC_RELAXED))
			__atomic_store_n(&h->fails, 0, __ATOMIC_RELAXED);
		return;
	}
	if (__atomic_add_fetch(&h->fails, 1, __ATOMIC_RELAXED) >= r->o.fall &&
	    backend_is_up(r, i)) {
		backend_set_down(r, i, 1, "session connects failed in a row");
		__atomic_store_n(&h->passive_down, 1, __ATOMIC_RELAXED); /* checker: restart its good streak */
	}
}

/* ---- backups ------------------------------------------------------------- */

static int any_primary_usable(const struct route *r)
{
	for (unsigned i = 0; i < r->nbackend; i++)
		if (!r->backend[i].backup && backend_usable(r, i))
			return 1;
	return 0;
}

int backend_eligible(const struct route *r, unsigned i)
{
	if (!backend_usable(r, i))
		return 0;
	/* a backup only while no primary is usable (the check costs nothing
	 * on a route without backups) */
	return !r->backend[i].backup || !any_primary_usable(r);
}

/* No primary is usable: the first usable backup in the file's order, or
 * -1 when there is none. */
static int first_backup(const struct route *r)
{
	for (unsigned i = 0; i < r->nbackend; i++)
		if (r->backend[i].backup && backend_usable(r, i))
			return (int)i;
	return -1;
}

/* ---- slowstart ----------------------------------------------------------- *
 * A backend that came up less than slowstart ago takes a share of new
 * sessions rising linearly from 0 to its weight's: ramp() says how far, in
 * thousandths. roundrobin visits its slots of the schedule and takes each
 * with that probability (a hash of the turn, no state), the others going
 * to the next backend of the schedule; leastconn weighs its sessions by
 * weight x ramp; maglev lets it take that fraction of its table slots
 * (those whose hash is below the ramp: the same ones in every instance,
 * and a client that moved to it never moves back during the ramp), the
 * others' clients staying where they went while it was away. */
#define RAMP_FULL 1000

static unsigned ramp(const struct route *r, unsigned i, uint64_t now)
{
	uint64_t since = __atomic_load_n(&r->health[i]->up_since_ms, __ATOMIC_RELAXED);

	if (!r->o.slowstart_ms || !since || now >= since + r->o.slowstart_ms)
		return RAMP_FULL;
	return now <= since ? 0 : (unsigned)((now - since) * RAMP_FULL / r->o.slowstart_ms);
}

unsigned backend_ramp(const struct route *r, unsigned i)
{
	return r->o.slowstart_ms ? ramp(r, i, now_monotonic_ms()) : RAMP_FULL;
}

/* Whether draw (any well-mixed number) falls within ramp thousandths. */
static int ramp_takes(unsigned ramp_permille, uint64_t draw)
{
	return ramp_permille >= RAMP_FULL || hash64(&draw, sizeof(draw), 0x72616d70ULL) % RAMP_FULL < ramp_permille;
}

/* leastconn's weight: the weight in thousandths, scaled by the ramp. */
static int64_t ramped_weight(const struct route *r, unsigned i, uint64_t now)
{
	unsigned k = ramp(r, i, now);

	return (int64_t)backend_weight(r, i) * (k ? k : 1);
}

/* The next eligible backend of the weighted schedule, with the ramp of
 * those that came up lately; without the ramp when it takes none (a
 * ramping backend alone up takes everything); any when none is eligible. */
static unsigned rr_pick(const struct route *r, const struct balance_table *t, uint64_t turn,
			uint64_t now)
{
	for (int pass = r->o.slowstart_ms ? 0 : 1; pass < 2; pass++) {
		uint64_t passed = 0; /* ramping backends this pick passed over: not again */
		for (unsigned k = 0; k < t->nsched; k++) {
			unsigned b = t->sched[(turn + k) % t->nsched];
			if (!backend_eligible(r, b) || (passed >> b & 1))
				continue;
			if (pass || ramp_takes(ramp(r, b, now), turn))
				return b;
			passed |= 1ULL << b;
		}
	}
	return t->sched[turn % t->nsched];
}

/* The client's IP address picks the slot; its port does not, so all of a
 * client's connections go to one backend. */
static unsigned maglev_pick(const struct route *r, const struct balance_table *t,
			    const struct sockaddr *peer, uint64_t turn, uint64_t now)
{
	uint64_t slot;
	int some = 0;

	if (peer->sa_family == AF_INET)
		slot = hash64(&((const struct sockaddr_in *)peer)->sin_addr, sizeof(struct in_addr), 0);
	else if (peer->sa_family == AF_INET6)
		slot = hash64(&((const struct sockaddr_in6 *)peer)->sin6_addr, sizeof(struct in6_addr), 0);
	else
		return rr_pick(r, t, turn, now);
	slot %= MAGLEV_SIZE;
	for (unsigned i = 0; i < r->nbackend && !some; i++)
		some = backend_eligible(r, i);
	/* A down backend's clients take the next slots' backends, the same in
	 * every instance that sees the same backends down; so do the clients
	 * of the slots a ramping backend does not take yet. */
	for (int pass = r->o.slowstart_ms ? 0 : 1; pass < 2 && some; pass++) {
		uint64_t passed = 0; /* a ramping backend whose slot said no: as if down */
		for (uint32_t k = 0; k < MAGLEV_SIZE; k++) {
			uint32_t at = (uint32_t)((slot + k) % MAGLEV_SIZE);
			unsigned b = t->maglev[at];
			if (b == 0xff || !backend_eligible(r, b) || (passed >> b & 1))
				continue;
			if (pass || ramp_takes(ramp(r, b, now), at))
				return b;
			passed |= 1ULL << b;
		}
	}
	return t->maglev[slot];
}

unsigned backend_pick(struct route *r, const struct sockaddr *peer, socklen_t peerlen)
{
	uint64_t turn = __atomic_fetch_add(&r->rr, 1, __ATOMIC_RELAXED);
	const struct balance_table *t = table_of(r);
	uint64_t now = r->o.slowstart_ms ? now_monotonic_ms() : 0;
	unsigned best, n = r->nbackend;
	int64_t best_load, best_w;
	int backup;

	(void)peerlen;
	if (!n)
		return 0; /* session_connect tries none: the client is closed */
	if (r->has_backup && !any_primary_usable(r) && (backup = first_backup(r)) >= 0)
		return (unsigned)backup; /* the backups, in order, while no primary is usable */
	if (r->o.balance == BALANCE_MAGLEV)
		return maglev_pick(r, t, peer, turn, now);
	if (r->o.balance != BALANCE_LEASTCONN || n == 1)
		return rr_pick(r, t, turn, now);
	/* Compare active/weight as active_i * weight_j against active_j * weight_i,
	 * starting at a rotating index so ties spread; the weight is scaled by
	 * the ramp (slowstart, in thousandths; at least 1 so a ramping backend
	 * is still compared). Ineligible backends (down, draining, disabled,
	 * backups while a primary is usable) only when every one is. */
	best = (unsigned)(turn % n);
	best_load = __atomic_load_n(&r->health[best]->active, __ATOMIC_RELAXED);
	best_w = ramped_weight(r, best, now);
	for (unsigned k = 1; k < n; k++) {
		unsigned i = (unsigned)((turn + k) % n);
		int64_t load = __atomic_load_n(&r->health[i]->active, __ATOMIC_RELAXED);
		int64_t w = ramped_weight(r, i, now);
		int up_i = backend_eligible(r, i), up_best = backend_eligible(r, best);
		if (up_i != up_best) {
			if (up_i) {
				best = i;
				best_load = load;
				best_w = w;
			}
			continue;
		}
		if (load * best_w < best_load * w) {
			best = i;
			best_load = load;
			best_w = w;
		}
	}
	return best;
}

/* ---- closing a backend's sessions ---------------------------------------- */

/* Raised by every backend_cut: a worker that sees it change looks at its
 * sessions (session.h: session_cut_sweep). */
static uint32_t cut_gen;
static void (*cut_fn)(void *arg);
static void *cut_arg;

void backend_on_cut(void (*fn)(void *arg), void *arg)
{
	__atomic_store_n(&cut_arg, arg, __ATOMIC_RELAXED);
	__atomic_store_n(&cut_fn, fn, __ATOMIC_RELEASE);
}

void backend_cut(struct backend_health *h, int why)
{
	void (*fn)(void *arg);

	__atomic_store_n(&h->cut_why, (uint8_t)why, __ATOMIC_RELAXED);
	/* after the mark down: a session that finds the old value took its
	 * slot before (session_connect loads it before it looks at the mark) */
	__atomic_add_fetch(&h->cut_seq, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&cut_gen, 1, __ATOMIC_RELEASE);
	if ((fn = __atomic_load_n(&cut_fn, __ATOMIC_ACQUIRE)))
		fn(__atomic_load_n(&cut_arg, __ATOMIC_RELAXED));
}

uint32_t backend_cut_gen(void)
{
	return __atomic_load_n(&cut_gen, __ATOMIC_ACQUIRE);
}

int backend_try_hold(struct route *r, unsigned i)
{
	int64_t *active = &r->health[i]->active, n;
	unsigned max = r->backend[i].maxconn;

	if (!max) {
		__atomic_add_fetch(active, 1, __ATOMIC_RELAXED);
		return 1;
	}
	/* a compare-and-swap, so two workers never both take the last slot */
	n = __atomic_load_n(active, __ATOMIC_RELAXED);
	do {
		if (n >= (int64_t)max)
			return 0;
	} while (!__atomic_compare_exchange_n(active, &n, n + 1, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return 1;
}

void backend_hold(struct route *r, unsigned i)
{
	__atomic_add_fetch(&r->health[i]->active, 1, __ATOMIC_RELAXED);
}

void backend_release(struct route *r, unsigned i)
{
	__atomic_sub_fetch(&r->health[i]->active, 1, __ATOMIC_RELAXED);
}

/* ---- connect errors in the log ------------------------------------------- */

/* Backends with errors not yet in the log (approximate: it may be off by
 * one for a moment while two workers race; it only decides whether
 * backend_errors_report looks at the registry at all). */
static int64_t errs_waiting;

/* Writes h's line when its interval is over and errors wait; of the
 * threads that try at once, the one that moves err_report_ms writes it. */
static void errors_line(struct backend_health *h, const char *route, const char *addr,
			uint64_t now_ms, int force)
{
	uint64_t last = __atomic_load_n(&h->err_report_ms, __ATOMIC_RELAXED), n, since;

	if (!__atomic_load_n(&h->err_pending, __ATOMIC_RELAXED))
		return;
	if (last && now_ms < last + BACKEND_ERR_REPORT_MS && !force)
		return;
	if (!__atomic_compare_exchange_n(&h->err_report_ms, &last, now_ms ? now_ms : 1, 0,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	since = __atomic_load_n(&h->err_since_ms, __ATOMIC_RELAXED);
	if (!(n = __atomic_exchange_n(&h->err_pending, 0, __ATOMIC_RELAXED)))
		return;
	__atomic_sub_fetch(&errs_waiting, 1, __ATOMIC_RELAXED);
	if (n == 1)
		log_warn("backend %s of route %s: 1 connect error (%s)%s", addr, route,
			 log_errno_name(__atomic_load_n(&h->err_last, __ATOMIC_RELAXED)),
			 __atomic_load_n(&h->down, __ATOMIC_RELAXED) ? "; marked down" : "");
	else
		log_warn("backend %s of route %s: %llu connect errors in %llus (%s)%s", addr, route,
			 (unsigned long long)n,
			 (unsigned long long)((now_ms > since ? now_ms - since : 0) + 999) / 1000,
			 log_errno_name(__atomic_load_n(&h->err_last, __ATOMIC_RELAXED)),
			 __atomic_load_n(&h->down, __ATOMIC_RELAXED) ? "; marked down" : "");
}

void backend_connect_failed(struct route *r, unsigned i, int err, uint64_t now_ms)
{
	struct backend_health *h = r->health[i];

	__atomic_store_n(&h->err_last, err, __ATOMIC_RELAXED);
	if (__atomic_fetch_add(&h->err_pending, 1, __ATOMIC_RELAXED) == 0) {
		__atomic_store_n(&h->err_since_ms, now_ms, __ATOMIC_RELAXED);
		__atomic_add_fetch(&errs_waiting, 1, __ATOMIC_RELAXED);
	}
	errors_line(h, r->name, r->backend[i].addr.text, now_ms, 0);
}

void backend_errors_report(uint64_t now_ms, int force)
{
	if (__atomic_load_n(&errs_waiting, __ATOMIC_RELAXED) <= 0)
		return;
	/* the registry, not a config: a retired generation's backend too */
	if (force)
		pthread_mutex_lock(&state_lock);
	else if (pthread_mutex_trylock(&state_lock))
		return; /* the main thread is adopting state: the next scan */
	for (unsigned k = 0; k < STATE_BUCKETS; k++)
		for (struct state_obj *o = state_table[k]; o; o = o->next)
			if (o->backend[0])
				errors_line(&o->u.h, o->route, o->addr, now_ms, force);
	pthread_mutex_unlock(&state_lock);
}
