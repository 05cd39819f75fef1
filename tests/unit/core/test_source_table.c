/* SPDX-License-Identifier: MIT */
/* Unit tests for src/core/source_table.c: per-source session counts and
 * rates, IPv6 keyed by /64, least-recently-used eviction that never takes
 * an entry with live sessions, resizing that keeps every count (as a reload
 * does), and threads admitting and releasing at once while the size changes.
 * The cost of an admit+release pair is printed, not asserted. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>

#include "source_table.h"

struct sa {
	struct sockaddr_storage ss;
};

static struct sa A(const char *s)
{
	struct sa a = { 0 };
	if (strchr(s, ':')) {
		struct sockaddr_in6 *s6 = (void *)&a.ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(40000);
		cr_assert_eq(inet_pton(AF_INET6, s, &s6->sin6_addr), 1, "%s", s);
	} else {
		struct sockaddr_in *s4 = (void *)&a.ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(40000);
		cr_assert_eq(inet_pton(AF_INET, s, &s4->sin_addr), 1, "%s", s);
	}
	return a;
}

#define SA(x) ((const struct sockaddr *)&(x).ss)

static enum source_verdict admit(struct source_table *t, const char *who, uint64_t now,
				 unsigned conns, unsigned rate)
{
	struct sa a = A(who);
	return source_admit(t, SA(a), now, conns, rate);
}

static void release(struct source_table *t, const char *who)
{
	struct sa a = A(who);
	source_release(t, SA(a));
}

static unsigned conns(struct source_table *t, const char *who)
{
	struct sa a = A(who);
	return source_conns(t, SA(a));
}

Test(unit_source_table, concurrent_sessions_per_source)
{
	struct source_table *t = source_table_new(16);

	cr_assert_eq(admit(t, "10.0.0.1", 0, 2, 0), SOURCE_OK);
	cr_assert_eq(admit(t, "10.0.0.1", 0, 2, 0), SOURCE_OK);
	cr_assert_eq(admit(t, "10.0.0.1", 0, 2, 0), SOURCE_TOO_MANY_CONNS);
	cr_assert_eq(admit(t, "10.0.0.2", 0, 2, 0), SOURCE_OK, "another source has its own count");
	cr_assert_eq(conns(t, "10.0.0.1"), 2, "a refusal is not counted");
	release(t, "10.0.0.1");
	cr_assert_eq(admit(t, "10.0.0.1", 0, 2, 0), SOURCE_OK);
	cr_assert_eq(admit(t, "::ffff:10.0.0.1", 0, 2, 0), SOURCE_TOO_MANY_CONNS,
		     "a v4-mapped client is its IPv4 address");
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	cr_assert_eq(source_admit(t, (void *)&un, 0, 1, 1), SOURCE_OK, "Unix clients are not counted");
	source_release(t, (void *)&un);
	struct source_table_stats st;
	source_table_get_stats(t, &st);
	cr_assert_eq(st.conns, 3);
	cr_assert_eq(st.live, 2);
	cr_assert_eq(st.used, 2);
	source_table_free(t);
}

Test(unit_source_table, ipv6_is_keyed_by_its_64)
{
	struct source_table *t = source_table_new(16);

	cr_assert_eq(admit(t, "2001:db8:1:2::1", 0, 2, 0), SOURCE_OK);
	cr_assert_eq(admit(t, "2001:db8:1:2:ffff:ffff:ffff:ffff", 0, 2, 0), SOURCE_OK);
	cr_assert_eq(admit(t, "2001:db8:1:2:abcd::9", 0, 2, 0), SOURCE_TOO_MANY_CONNS,
		     "three addresses of one /64 are one source");
	cr_assert_eq(admit(t, "2001:db8:1:3::1", 0, 2, 0), SOURCE_OK, "the next /64 is another");
	cr_assert_eq(conns(t, "2001:db8:1:2::77"), 2);
	/* an IPv6 /64 with the bytes of an IPv4 address is not that address */
	cr_assert_eq(admit(t, "a00:1::", 0, 2, 0), SOURCE_OK);
	cr_assert_eq(conns(t, "10.0.0.1"), 0);
	source_table_free(t);
}

Test(unit_source_table, rate_is_a_one_second_sliding_window)
{
	struct source_table *t = source_table_new(16);
	const char *c = "192.0.2.9";

	for (int i = 0; i < 5; i++)
		cr_assert_eq(admit(t, c, 1000, 0, 5), SOURCE_OK);
	cr_assert_eq(admit(t, c, 1000, 0, 5), SOURCE_TOO_FAST);
	for (int i = 0; i < 5; i++)
		release(t, c);
	cr_assert_eq(admit(t, c, 1999, 0, 5), SOURCE_TOO_FAST, "ended sessions still count");
	/* a second on, the five weigh 5 * (1000 - t) / 1000, t ms into it */
	cr_assert_eq(admit(t, c, 2000, 0, 5), SOURCE_TOO_FAST, "5 * 1.0");
	cr_assert_eq(admit(t, c, 2001, 0, 5), SOURCE_OK, "5 * 0.999");
	for (uint64_t now = 2001; now <= 2200; now++)
		cr_assert_eq(admit(t, c, now, 0, 5), SOURCE_TOO_FAST, "1 + 5 * (1000 - %llu) / 1000",
			     (unsigned long long)(now - 2000));
	cr_assert_eq(admit(t, c, 2201, 0, 5), SOURCE_OK, "1 + 3.995: the refusals were not counted");
	cr_assert_eq(admit(t, c, 2400, 0, 5), SOURCE_TOO_FAST, "2 + 3");
	/* the next period: the 2 of the last one weigh 2 * 0.9 at 3100 */
	cr_assert_eq(admit(t, c, 3100, 0, 5), SOURCE_OK, "0 + 1.8");
	cr_assert_eq(admit(t, c, 3100, 0, 5), SOURCE_OK, "1 + 1.8");
	cr_assert_eq(admit(t, c, 3100, 0, 5), SOURCE_OK, "2 + 1.8");
	cr_assert_eq(admit(t, c, 3100, 0, 5), SOURCE_OK, "3 + 1.8");
	cr_assert_eq(admit(t, c, 3100, 0, 5), SOURCE_TOO_FAST, "4 + 1.8");
	for (int i = 0; i < 5; i++)
		cr_assert_eq(admit(t, c, 5200, 0, 5), SOURCE_OK, "two quiet seconds: a fresh window");
	cr_assert_eq(admit(t, c, 5200, 0, 5), SOURCE_TOO_FAST);
	cr_assert_eq(admit(t, c, 5100, 0, 5), SOURCE_TOO_FAST, "an older clock reading");
	/* connections are checked before the rate */
	cr_assert_eq(admit(t, c, 5200, 1, 5), SOURCE_TOO_MANY_CONNS);
	source_table_free(t);
}

Test(unit_source_table, least_recently_used_idle_entry_is_evicted)
{
	struct source_table *t = source_table_new(3);
	struct source_table_stats st;

	/* max_rate 1 shows whether an entry is still there: it refuses a
	 * second session in the same second; a new entry admits it */
	cr_assert_eq(admit(t, "10.0.0.1", 0, 0, 1), SOURCE_OK);
	cr_assert_eq(admit(t, "10.0.0.2", 0, 0, 1), SOURCE_OK);
	cr_assert_eq(admit(t, "10.0.0.3", 0, 0, 1), SOURCE_OK);
	release(t, "10.0.0.1");
	release(t, "10.0.0.3");
	release(t, "10.0.0.2"); /* idle, oldest first: .1 .3 .2 */
	cr_assert_eq(admit(t, "10.0.0.4", 0, 0, 1), SOURCE_OK, "evicts .1");
	cr_assert_eq(admit(t, "10.0.0.3", 0, 0, 1), SOURCE_TOO_FAST, ".3 is there (and now recent)");
	cr_assert_eq(admit(t, "10.0.0.1", 0, 0, 1), SOURCE_OK, ".1 was evicted: evicts .2");
	cr_assert_eq(admit(t, "10.0.0.3", 0, 0, 1), SOURCE_TOO_FAST, ".3 is still there");
	cr_assert_eq(admit(t, "10.0.0.2", 0, 0, 1), SOURCE_OK, ".2 was evicted: evicts .3");
	source_table_get_stats(t, &st);
	cr_assert_eq(st.evicted, 3);
	cr_assert_eq(st.used, 3);
	source_table_free(t);
}

Test(unit_source_table, live_entries_are_never_evicted)
{
	struct source_table *t = source_table_new(2);
	struct source_table_stats st;

	cr_assert_eq(admit(t, "10.0.0.1", 0, 5, 0), SOURCE_OK);
	cr_assert_eq(admit(t, "2001:db8::1", 0, 5, 0), SOURCE_OK);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(admit(t, "10.0.0.3", (uint64_t)i, 5, 0), SOURCE_TABLE_FULL);
	cr_assert_eq(admit(t, "10.0.0.1", 0, 5, 0), SOURCE_OK, "a source in the table still gets in");
	cr_assert_eq(conns(t, "10.0.0.1"), 2);
	cr_assert_eq(conns(t, "2001:db8::1"), 1);
	source_table_get_stats(t, &st);
	cr_assert_eq(st.full, 10);
	cr_assert_eq(st.evicted, 0);
	release(t, "2001:db8::1");
	cr_assert_eq(admit(t, "10.0.0.3", 0, 5, 0), SOURCE_OK, "an idle entry makes room");
	release(t, "10.0.0.1");
	cr_assert_eq(admit(t, "10.0.0.4", 0, 5, 0), SOURCE_TABLE_FULL, ".1 still has a session");
	release(t, "10.0.0.1");
	cr_assert_eq(admit(t, "10.0.0.4", 0, 5, 0), SOURCE_OK);
	release(t, "10.0.0.99"); /* never admitted: nothing happens */
	source_table_free(t);
}

/* ---- resizing (a reload's source_table_size) ---- */

Test(unit_source_table, grow_keeps_every_count_and_rate)
{
	struct source_table *t = source_table_new(16);
	struct source_table_stats st;
	char ip[32];

	for (int i = 1; i <= 16; i++) {
		snprintf(ip, sizeof ip, "10.0.0.%d", i);
		cr_assert_eq(admit(t, ip, 0, 2, 3), SOURCE_OK);
	}
	cr_assert_eq(admit(t, "10.0.0.1", 0, 2, 3), SOURCE_OK, "its second session");
	release(t, "10.0.0.16"); /* idle, with its rate */
	cr_assert_eq(admit(t, "10.0.1.1", 0, 2, 3), SOURCE_OK, "evicts .16");
	cr_assert_eq(admit(t, "10.0.1.2", 0, 2, 3), SOURCE_TABLE_FULL);
	cr_assert_eq(source_table_resize(t, 64), 0);
	cr_assert_eq(admit(t, "10.0.1.2", 0, 2, 3), SOURCE_OK, "room after growing");
	cr_assert_eq(admit(t, "10.0.0.1", 0, 2, 3), SOURCE_TOO_MANY_CONNS, "its 2 sessions kept");
	cr_assert_eq(conns(t, "10.0.0.1"), 2);
	cr_assert_eq(admit(t, "10.0.0.2", 0, 2, 3), SOURCE_OK);
	cr_assert_eq(admit(t, "10.0.0.2", 0, 2, 3), SOURCE_TOO_MANY_CONNS);
	release(t, "10.0.0.2");
	release(t, "10.0.0.2");
	cr_assert_eq(admit(t, "10.0.0.2", 0, 5, 2), SOURCE_TOO_FAST, "its rate kept (2 in this second)");
	for (int i = 1; i <= 64 - 17; i++) { /* 17 sources so far */
		snprintf(ip, sizeof ip, "10.0.2.%d", i);
		cr_assert_eq(admit(t, ip, 0, 2, 3), SOURCE_OK, "%s", ip);
	}
	source_table_get_stats(t, &st);
	cr_assert_eq(st.size, 64);
	cr_assert_eq(st.used, 64);
	cr_assert_eq(admit(t, "10.0.3.1", 0, 2, 3), SOURCE_OK, "evicts the idle .2");
	cr_assert_eq(admit(t, "10.0.3.2", 0, 2, 3), SOURCE_TABLE_FULL, "64 and no more");
	cr_assert_eq(source_table_resize(t, 0), -EINVAL);
	cr_assert_eq(source_table_resize(t, SOURCE_TABLE_MAX + (size_t)1), -EINVAL);
	source_table_free(t);
}

Test(unit_source_table, shrink_keeps_the_newest_idle_entries)
{
	struct source_table *t = source_table_new(8);
	struct source_table_stats st;
	char ip[32];

	for (int i = 1; i <= 6; i++) { /* .1-.6 idle, oldest first, each at its rate of 1 */
		snprintf(ip, sizeof ip, "10.0.0.%d", i);
		cr_assert_eq(admit(t, ip, 0, 0, 1), SOURCE_OK);
		release(t, ip);
	}
	cr_assert_eq(admit(t, "10.0.1.1", 0, 0, 1), SOURCE_OK); /* live */
	cr_assert_eq(source_table_resize(t, 4), 0);
	source_table_get_stats(t, &st);
	cr_assert_eq(st.size, 4);
	cr_assert_eq(st.used, 4, "the live one and the 3 newest idle ones");
	cr_assert_eq(st.live, 1);
	for (int i = 4; i <= 6; i++) {
		snprintf(ip, sizeof ip, "10.0.0.%d", i);
		cr_assert_eq(admit(t, ip, 0, 0, 1), SOURCE_TOO_FAST, "%s kept, with its rate", ip);
	}
	cr_assert_eq(admit(t, "10.0.0.1", 0, 0, 1), SOURCE_OK, ".1 forgotten: evicts .4");
	source_table_free(t);
}

Test(unit_source_table, shrink_below_the_live_entries_waits_for_them)
{
	struct source_table *t = source_table_new(16);
	struct source_table_stats st;
	char ip[32];

	for (int i = 1; i <= 10; i++) {
		snprintf(ip, sizeof ip, "10.0.0.%d", i);
		cr_assert_eq(admit(t, ip, 0, 3, 0), SOURCE_OK);
		cr_assert_eq(admit(t, ip, 0, 3, 0), SOURCE_OK);
	}
	cr_assert_eq(source_table_resize(t, 4), 0);
	source_table_get_stats(t, &st);
	cr_assert_eq(st.size, 4);
	cr_assert_eq(st.used, 10, "every live entry stays");
	cr_assert_eq(st.conns, 20);
	cr_assert_eq(admit(t, "10.0.1.1", 0, 3, 0), SOURCE_TABLE_FULL, "a new source: over the size");
	cr_assert_eq(admit(t, "10.0.0.1", 0, 3, 0), SOURCE_OK, "a known source still gets in");
	cr_assert_eq(admit(t, "10.0.0.1", 0, 3, 0), SOURCE_TOO_MANY_CONNS, "and its count holds");
	/* sources .1-.7 end: each entry goes as its last session ends while
	 * the table is over its size; within it (.7) the entry stays, idle */
	for (int i = 1; i <= 7; i++) {
		snprintf(ip, sizeof ip, "10.0.0.%d", i);
		for (unsigned n = conns(t, ip); n; n--)
			release(t, ip);
		source_table_get_stats(t, &st);
		cr_assert_eq(st.used, (size_t)(10 - i > 4 ? 10 - i : 4), "after %s ended", ip);
		cr_assert_eq(admit(t, "10.0.1.1", 0, 3, 0), i < 7 ? SOURCE_TABLE_FULL : SOURCE_OK,
			     "a new source with %zu entries live of 4", st.live);
	}
	release(t, "10.0.1.1"); /* 4 used, within the size: idle entries stay again */
	source_table_get_stats(t, &st);
	cr_assert_eq(st.used, 4);
	cr_assert_eq(st.live, 3);
	cr_assert_eq(admit(t, "10.0.1.2", 0, 3, 0), SOURCE_OK, "evicts the idle .1.1");
	cr_assert_eq(admit(t, "10.0.1.3", 0, 3, 0), SOURCE_TABLE_FULL);
	cr_assert_eq(source_table_resize(t, 32), 0, "and back up");
	cr_assert_eq(admit(t, "10.0.1.3", 0, 3, 0), SOURCE_OK);
	cr_assert_eq(conns(t, "10.0.0.8"), 2);
	source_table_free(t);
}

/* ---- threads ---- */

#define NADDR 300
#define HOLD 8
static struct sa addrs[NADDR];
static struct source_table *shared;

struct worker {
	unsigned seed;
	long ops, refused;
	unsigned max_seen;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	int held[HOLD], nheld = 0;

	for (long i = 0; i < 200000; i++) {
		unsigned r = rand_r(&w->seed);
		if (nheld && (nheld == HOLD || r % 2)) {
			int k = (int)(r / 2 % (unsigned)nheld);
			source_release(shared, SA(addrs[held[k]]));
			held[k] = held[--nheld];
		} else {
			int a = (int)(r / 2 % NADDR);
			enum source_verdict v = source_admit(shared, SA(addrs[a]), 0, 3, 0);
			if (v == SOURCE_OK) {
				held[nheld++] = a;
				unsigned c = source_conns(shared, SA(addrs[a]));
				if (c > w->max_seen)
					w->max_seen = c;
			} else {
				cr_assert(v == SOURCE_TOO_MANY_CONNS || v == SOURCE_TABLE_FULL);
				w->refused++;
			}
		}
		w->ops++;
	}
	while (nheld)
		source_release(shared, SA(addrs[held[--nheld]]));
	return NULL;
}

static void make_addrs(void)
{
	for (int i = 0; i < NADDR; i++) {
		char s[64];
		if (i % 3 == 2)
			snprintf(s, sizeof s, "2001:db8:%x::%x", i, i); /* each its own /64 */
		else if (i % 3 == 1)
			snprintf(s, sizeof s, "::ffff:10.1.%d.%d", i / 256, i % 256);
		else
			snprintf(s, sizeof s, "10.0.%d.%d", i / 256, i % 256);
		addrs[i] = A(s);
	}
}

Test(unit_source_table, threads_hammering_end_with_every_count_zero, .timeout = 120)
{
	pthread_t th[4];
	struct worker w[4];
	struct source_table_stats st;

	make_addrs();
	shared = source_table_new(24); /* below the sources (evictions) and the 32 sessions held at most (full) */
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .seed = 100u + (unsigned)i };
		cr_assert_eq(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
	}
	/* sizes changing under them (a reload's), below and above the held */
	for (int k = 0; k < 200; k++)
		cr_assert_eq(source_table_resize(shared, k % 2 ? 8 : 24), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	source_table_get_stats(shared, &st);
	cr_assert_eq(st.conns, 0, "%llu sessions left", (unsigned long long)st.conns);
	cr_assert_eq(st.live, 0);
	for (int i = 0; i < NADDR; i++)
		cr_assert_eq(source_conns(shared, SA(addrs[i])), 0, "address %d", i);
	for (int i = 0; i < 4; i++)
		cr_assert_leq(w[i].max_seen, 3, "a source above max_conns");
	cr_assert_gt(st.evicted, 0, "the run evicted entries");
	cr_assert_gt(st.full, 0, "the run found the table full");
	fprintf(stderr, "[source_table] 4 threads x 200000 ops: %llu evicted, %llu refused as full\n",
		(unsigned long long)st.evicted, (unsigned long long)st.full);
	source_table_free(shared);
}

/* ---- the cost, printed ---- */

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define PAIRS 1000000

static void *pairs(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	for (long k = 0; k < PAIRS; k++, i += 7) {
		const struct sockaddr *sa = SA(addrs[i % NADDR]);
		if (source_admit(shared, sa, (uint64_t)k / 1000, 1000, 0) == SOURCE_OK)
			source_release(shared, sa);
	}
	return NULL;
}

Test(unit_source_table, cost_of_admit_and_release, .timeout = 120)
{
	pthread_t th[2];

	make_addrs();
	shared = source_table_new(4096);
	double t0 = now_ns();
	pairs((void *)0);
	double one = (now_ns() - t0) / PAIRS;
	t0 = now_ns();
	for (uintptr_t i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, pairs, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	double two = (now_ns() - t0) / (2.0 * PAIRS);
	fprintf(stderr, "[source_table] admit+release: %.0f ns per pair on one thread, %.0f ns per "
		"pair (wall / pairs) with two threads contending\n", one, two);
	source_table_free(shared);
}

/* An upgrade's hand-over (session_handoff.h): a session the old process
 * admitted is held in the new one without counting as an arrival (50
 * long-lived sessions of one client must not make it "too fast"), and the
 * rate history of the last two seconds goes over with export and import,
 * so the upgrade gives no client a fresh allowance. */
struct exported {
	char key[SOURCE_KEY_TEXT];
	uint32_t cur, last;
	uint64_t start;
	unsigned n;
};

static void take_one(void *arg, const char *key, uint32_t cur, uint32_t last, uint64_t start)
{
	struct exported *e = arg;

	snprintf(e->key, sizeof(e->key), "%s", key);
	e->cur = cur;
	e->last = last;
	e->start = start;
	e->n++;
}

Test(unit_source_table, hand_over_holds_without_arrivals_and_carries_the_rate)
{
	struct source_table *old = source_table_new(16), *new = source_table_new(16);
	struct sa a = A("192.0.2.7"), b = A("2001:db8:1:2::9");
	struct exported e = { .n = 0 };

	for (int i = 0; i < 50; i++)
		cr_assert_eq(source_hold(new, SA(a), 1000), SOURCE_OK);
	cr_assert_eq(source_conns(new, SA(a)), 50);
	cr_assert_eq(admit(new, "192.0.2.7", 1000, 0, 5), SOURCE_OK, "held sessions are no arrivals");

	for (int i = 0; i < 5; i++)
		cr_assert_eq(admit(old, "2001:db8:1:2::9", 1500, 0, 5), SOURCE_OK);
	cr_assert_eq(source_table_export(old, 1600, take_one, &e), 1);
	cr_assert_eq(e.n, 1);
	cr_assert_eq(e.cur, 5);
	cr_assert_eq(source_table_import(new, e.key, e.cur, e.last, e.start, 1600), 0);
	cr_assert_eq(source_admit(new, SA(b), 1600, 0, 5), SOURCE_TOO_FAST,
		     "the old process's five arrivals count in the new one");
	cr_assert_eq(source_admit(new, SA(b), 3600, 0, 5), SOURCE_OK, "and age out as there");
	cr_assert_eq(source_table_import(new, "5:00", 1, 1, 1, 1), -1, "not a key");
	e.n = 0;
	cr_assert_eq(source_table_export(old, 9000, take_one, &e), 0, "nothing in the last 2 s");
	source_table_free(old);
	source_table_free(new);
}
