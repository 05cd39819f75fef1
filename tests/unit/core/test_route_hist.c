/* SPDX-License-Identifier: MIT */
/* Unit tests for src/core/route_hist.c: a value on a bound goes into that
 * bound's bucket (Prometheus's le is "less than or equal"), one above the
 * last into +Inf; workers' slices add up; routes of the same name in two
 * config generations share their histograms, and a name no generation
 * has any more starts from zero. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "route_hist.h"

static struct config *gen(const char *name)
{
	struct config *c = calloc(1, sizeof(*c));
	struct route *r;

	cr_assert(c);
	config_defaults(c);
	r = config_add_route(c, name, 0);
	cr_assert(r);
	cr_assert_eq(route_hist_build(c), 0);
	return c;
}

static void gen_free(struct config *c)
{
	config_free(c);
	free(c);
}

Test(unit_route_hist, bounds_are_inclusive_and_over_the_last_is_inf)
{
	struct config *c = gen("web");
	struct route *r = c->route[0];
	struct hist_read h;
	unsigned n;
	const uint64_t *b = route_hist_bounds(HIST_BYTES_UP, &n);

	cr_assert_eq(n, 16);
	cr_assert_eq(b[0], 64);
	cr_assert_eq(b[n - 1], 64ULL << 30, "the last bytes bound is 64 GiB");
	route_hist_add(r, 0, HIST_BYTES_UP, 0);
	route_hist_add(r, 0, HIST_BYTES_UP, 64);
	route_hist_add(r, 0, HIST_BYTES_UP, 65);
	route_hist_add(r, 0, HIST_BYTES_UP, 64ULL << 30);
	route_hist_add(r, 0, HIST_BYTES_UP, (64ULL << 30) + 1);
	route_hist_read(r, HIST_BYTES_UP, &h);
	cr_assert_eq(h.bucket[0], 2, "0 and 64 are le 64");
	cr_assert_eq(h.bucket[1], 1, "65 is le 256");
	cr_assert_eq(h.bucket[n - 1], 1, "64 GiB is le 64 GiB");
	cr_assert_eq(h.bucket[n], 1, "above the last bound: +Inf");
	cr_assert_eq(h.count, 5);
	cr_assert_eq(h.sum, 64 + 65 + (64ULL << 30) + (64ULL << 30) + 1);
	route_hist_read(r, HIST_BYTES_DOWN, &h);
	cr_assert_eq(h.count, 0, "the kinds are apart");

	b = route_hist_bounds(HIST_CONNECT, &n);
	cr_assert_eq(b[0], 500, "connect starts at 0.5 ms");
	cr_assert_eq(b[n - 1], 10000000, "connect ends at 10 s");
	b = route_hist_bounds(HIST_DURATION, &n);
	cr_assert_eq(b[0], 1000, "duration starts at 1 ms");
	cr_assert_eq(b[n - 1], 3600000000ULL, "duration ends at 1 h");
	gen_free(c);
}

Test(unit_route_hist, workers_slices_add_up)
{
	struct config *c = gen("web");
	struct route *r = c->route[0];
	struct hist_read h;

	route_hist_add(r, 0, HIST_CONNECT, 700);
	route_hist_add(r, 3, HIST_CONNECT, 700);
	route_hist_add(r, HIST_WORKERS_MAX - 1, HIST_CONNECT, 20000000);
	route_hist_add(r, HIST_WORKERS_MAX, HIST_CONNECT, 1); /* no such worker: dropped */
	route_hist_read(r, HIST_CONNECT, &h);
	cr_assert_eq(h.count, 3);
	cr_assert_eq(h.bucket[1], 2, "0.7 ms is le 1 ms, from two workers");
	cr_assert_eq(h.bucket[14], 1, "20 s is over 10 s: +Inf");
	cr_assert_eq(h.sum, 20001400);
	gen_free(c);
}

Test(unit_route_hist, a_route_name_keeps_its_histograms_across_generations)
{
	struct config *old = gen("web"), *other = gen("db"), *nw;
	struct hist_read h;

	route_hist_add(old->route[0], 1, HIST_DURATION, 5000);
	route_hist_add(other->route[0], 1, HIST_DURATION, 5000);
	nw = gen("web");
	route_hist_add(nw->route[0], 0, HIST_DURATION, 5000);
	route_hist_read(old->route[0], HIST_DURATION, &h);
	cr_assert_eq(h.count, 2, "the old and the new generation count together");
	gen_free(old);
	route_hist_read(nw->route[0], HIST_DURATION, &h);
	cr_assert_eq(h.count, 2, "the old generation's end keeps what it recorded");
	gen_free(nw);
	nw = gen("web");
	route_hist_read(nw->route[0], HIST_DURATION, &h);
	cr_assert_eq(h.count, 0, "no generation had the name: it starts from zero");
	route_hist_read(other->route[0], HIST_DURATION, &h);
	cr_assert_eq(h.count, 1, "another name's are its own");
	gen_free(nw);
	gen_free(other);
}
