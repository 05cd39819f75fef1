/* SPDX-License-Identifier: MIT */
/* Unit tests for the run-time state registry of src/core/backend.c: config
 * generations with the same route and backend share one state object (so
 * a reload keeps health, counters and leastconn counts), keyed by the route
 * name and the backend address as configured; an object outlives the
 * generation that dropped it while an older one still has it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "config.h"

static const struct sockaddr_storage unix_peer = { .ss_family = AF_UNIX };

/* A config with one route `name` whose backends are given as
 * "SPEC=TEXT" (configured form, resolved text) or just "TEXT". */
static struct config *gen(const char *name, const char *balance, const char *const *backends)
{
	struct config *c = calloc(1, sizeof(*c));
	struct route *r;

	cr_assert(c);
	config_defaults(c);
	r = config_add_route(c, name, 0);
	cr_assert(r);
	r->listen[0].ss.ss_family = AF_UNIX; /* never bound here */
	r->listen[0].len = sizeof(sa_family_t);
	r->nlisten = 1;
	for (unsigned i = 0; backends[i]; i++) {
		const char *eq = strchr(backends[i], '=');
		struct backend_conf *b = &r->backend[r->nbackend++];
		b->weight = 1;
		if (eq) {
			snprintf(b->spec, sizeof(b->spec), "%.*s", (int)(eq - backends[i]), backends[i]);
			snprintf(b->addr.text, sizeof(b->addr.text), "%s", eq + 1);
		} else {
			snprintf(b->addr.text, sizeof(b->addr.text), "%s", backends[i]);
		}
	}
	c->o.balance = !strcmp(balance, "leastconn") ? BALANCE_LEASTCONN : BALANCE_ROUNDROBIN;
	cr_assert_eq(config_finalize(c), 0);
	return c;
}

static void gen_free(struct config *c)
{
	config_free(c);
	free(c);
}

Test(unit_backend_state, a_new_generation_adopts_the_running_state)
{
	const char *const two[] = { "10.0.0.1:80", "10.0.0.2:80", NULL };
	struct config *old = gen("web", "leastconn", two);
	struct route *o = old->route[0];

	STAT_ADD(o->st->bytes_up, 1001000);
	(void)backend_try_hold(o, 0);
	(void)backend_try_hold(o, 0);
	backend_set_down(o, 1, 1, "test");
	struct config *nw = gen("web", "leastconn", two);
	struct route *n = nw->route[0];
	cr_assert_eq(n->st, o->st, "the route's counters are one object");
	cr_assert_eq(n->health[0], o->health[0]);
	cr_assert_eq(STAT_GET(n->st->bytes_up), 1001000);
	cr_assert(!backend_is_up(n, 1), "a backend marked down stays down in the new generation");
	backend_set_down(n, 1, 0, "test");
	/* leastconn in the new generation counts the old one's sessions */
	cr_assert_eq(backend_pick(n, (struct sockaddr *)&unix_peer, sizeof(sa_family_t)), 1);
	cr_assert_eq(backend_pick(n, (struct sockaddr *)&unix_peer, sizeof(sa_family_t)), 1);
	/* an old session ends: the shared count drops for both */
	backend_release(o, 0);
	backend_release(o, 0);
	cr_assert_eq(__atomic_load_n(&n->health[0]->active, __ATOMIC_RELAXED), 0);
	gen_free(old);
	cr_assert_eq(STAT_GET(n->st->bytes_up), 1001000, "freeing the old generation keeps the state");
	gen_free(nw);
}

Test(unit_backend_state, keyed_by_route_name_and_configured_address)
{
	const char *const first[] = { "db.local:5432=10.0.0.1:5432", "10.0.0.9:80", NULL };
	/* the name resolves elsewhere now: still the same backend */
	const char *const moved[] = { "db.local:5432=10.0.0.2:5432", "10.0.0.9:80", NULL };
	struct config *a = gen("r", "roundrobin", first);
	struct config *b = gen("r", "roundrobin", moved);
	struct config *other = gen("s", "roundrobin", first);

	cr_assert_eq(a->route[0]->health[0], b->route[0]->health[0]);
	cr_assert_eq(a->route[0]->health[1], b->route[0]->health[1]);
	cr_assert_neq(a->route[0]->health[0], other->route[0]->health[0], "another route's backend");
	cr_assert_neq(a->route[0]->st, other->route[0]->st);
	gen_free(a);
	gen_free(b);
	gen_free(other);
}

Test(unit_backend_state, a_backend_listed_twice_has_two_states)
{
	const char *const twice[] = { "10.0.0.1:80", "10.0.0.1:80", NULL };
	struct config *a = gen("r", "leastconn", twice);
	struct config *b = gen("r", "leastconn", twice);

	cr_assert_neq(a->route[0]->health[0], a->route[0]->health[1]);
	cr_assert_eq(a->route[0]->health[1], b->route[0]->health[1]);
	gen_free(a);
	gen_free(b);
}

Test(unit_backend_state, a_dropped_backend_lives_while_an_old_generation_has_it)
{
	const char *const xy[] = { "10.0.0.1:80", "10.0.0.2:80", NULL };
	const char *const x[] = { "10.0.0.1:80", NULL };
	const char *const y[] = { "10.0.0.2:80", NULL };
	struct config *g1 = gen("r", "roundrobin", xy);
	struct backend_health *yh = g1->route[0]->health[1];

	STAT_ADD(yh->sessions, 5);
	struct config *g2 = gen("r", "roundrobin", x); /* Y left the file */
	struct config *g3 = gen("r", "roundrobin", y); /* and came back while g1 lives */
	cr_assert_eq(g3->route[0]->health[0], yh);
	cr_assert_eq(STAT_GET(g3->route[0]->health[0]->sessions), 5);
	gen_free(g1);
	gen_free(g3);
	/* no generation had Y: it starts afresh */
	struct config *g4 = gen("r", "roundrobin", y);
	cr_assert_eq(STAT_GET(g4->route[0]->health[0]->sessions), 0);
	cr_assert(backend_is_up(g4->route[0], 0));
	gen_free(g2);
	gen_free(g4);
}

Test(unit_backend_state, checks_off_brings_down_backends_back)
{
	const char *const one[] = { "10.0.0.1:80", NULL };
	struct config *a = gen("r", "roundrobin", one);

	a->route[0]->o.check = 1;
	backend_set_down(a->route[0], 0, 1, "test");
	backend_checks_apply(a->route[0]);
	cr_assert(!backend_is_up(a->route[0], 0), "with checks on, the checks decide");
	a->route[0]->o.check = 0;
	backend_checks_apply(a->route[0]);
	cr_assert(backend_is_up(a->route[0], 0), "without checks nothing else would bring it back");
	gen_free(a);
}
