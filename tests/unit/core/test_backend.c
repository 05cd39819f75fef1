/* SPDX-License-Identifier: MIT */
/* Unit tests for src/core/backend.c: weighted round robin, leastconn, and Maglev
 * (same client -> same backend whatever the instance, about 1/N of clients
 * moved when one of N backends goes). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "config.h"

static const struct sockaddr_storage unix_peer = { .ss_family = AF_UNIX };

/* A route with n backends of the given weights, finalized as the proxy would. */
static struct config *weighted(const unsigned *w, unsigned n, const char *balance)
{
	static struct config cs[2];
	static int next;
	struct config *cp = &cs[next++ % 2];
#define c (*cp)
	struct route *r;

	config_defaults(&c);
	r = config_add_route(&c, "t", 0);
	cr_assert(r);
	r->listen[0].ss.ss_family = AF_UNIX; /* never bound here */
	r->listen[0].len = sizeof(sa_family_t);
	r->nlisten = 1;
	for (unsigned i = 0; i < n; i++)
		r->backend[i].weight = w[i];
	r->nbackend = n;
	for (unsigned i = 0; i < n; i++)
		snprintf(r->backend[i].addr.text, sizeof(r->backend[i].addr.text), "10.0.0.%u:80", i + 1);
	c.o.balance = !strcmp(balance, "leastconn") ? BALANCE_LEASTCONN
		      : !strcmp(balance, "maglev") ? BALANCE_MAGLEV : BALANCE_ROUNDROBIN;
	cr_assert_eq(config_finalize(&c), 0);
	return &c;
#undef c
}

Test(unit_backend, roundrobin_follows_weights_interleaved)
{
	const unsigned w[] = { 1, 3, 2 };
	struct config *c = weighted(w, 3, "roundrobin");
	unsigned seen[3] = { 0 }, run = 0, longest = 0, last = 99;

	for (unsigned k = 0; k < 600; k++) {
		unsigned b = backend_pick(c->route[0], (struct sockaddr *)&unix_peer, sizeof(sa_family_t));
		cr_assert_lt(b, 3);
		seen[b]++;
		run = b == last ? run + 1 : 1;
		longest = run > longest ? run : longest;
		last = b;
	}
	cr_assert_eq(seen[0], 100);
	cr_assert_eq(seen[1], 300);
	cr_assert_eq(seen[2], 200);
	cr_assert_leq(longest, 2, "weight 3 of 6 should interleave, not come in runs of %u", longest);
	config_free(c);
}

Test(unit_backend, leastconn_picks_fewest_per_weight)
{
	const unsigned w[] = { 1, 1, 2 };
	struct config *c = weighted(w, 3, "leastconn");
	struct route *r = c->route[0];

	(void)backend_try_hold(r, 0);
	(void)backend_try_hold(r, 1);
	cr_assert_eq(backend_pick(r, (struct sockaddr *)&unix_peer, sizeof(sa_family_t)), 2, "the idle backend wins");
	(void)backend_try_hold(r, 2);
	(void)backend_try_hold(r, 2); /* 2 sessions at weight 2 = 1 per weight, like the others */
	backend_release(r, 1);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(backend_pick(r, (struct sockaddr *)&unix_peer, sizeof(sa_family_t)), 1, "backend 1 has none left");
	config_free(c);
}

static struct sockaddr_in client(unsigned k)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(1024 + k)) };
	sin.sin_addr.s_addr = htonl(0x0a640000u + k); /* 10.100.x.y */
	return sin;
}

Test(unit_backend, maglev_same_client_same_backend_in_every_instance)
{
	const unsigned w[] = { 1, 1, 1, 1, 1 };
	struct config *a = weighted(w, 5, "maglev");
	struct config *b = weighted(w, 5, "maglev"); /* another instance, same backends */
	static unsigned first[10000];
	unsigned per[5] = { 0 };

	for (unsigned k = 0; k < 10000; k++) {
		struct sockaddr_in sin = client(k);
		first[k] = backend_pick(a->route[0], (struct sockaddr *)&sin, sizeof(sin));
		per[first[k]]++;
	}
	/* the other instance sees the clients in another order, from other ports */
	for (unsigned k = 10000; k-- > 0;) {
		struct sockaddr_in sin = client(k);
		sin.sin_port = htons(40000);
		unsigned y = backend_pick(b->route[0], (struct sockaddr *)&sin, sizeof(sin));
		cr_assert_eq(first[k], y, "client %u: backend %u in one instance, %u in the other",
			     k, first[k], y);
	}
	for (unsigned i = 0; i < 5; i++)
		cr_assert(per[i] > 1700 && per[i] < 2300, "backend %u got %u of 10000 clients", i, per[i]);
	config_free(a);
	config_free(b);
}

Test(unit_backend, maglev_removing_one_of_five_moves_few_clients)
{
	const unsigned w5[] = { 1, 1, 1, 1, 1 }, w4[] = { 1, 1, 1, 1 };
	struct config *five = weighted(w5, 5, "maglev");
	struct config *four = weighted(w4, 5, "maglev");
	unsigned moved = 0, moved_needlessly = 0;

	/* the same backends minus 10.0.0.3 */
	four->route[0]->nbackend = 4;
	snprintf(four->route[0]->backend[2].addr.text, sizeof(four->route[0]->backend[2].addr.text),
		 "10.0.0.4:80");
	snprintf(four->route[0]->backend[3].addr.text, sizeof(four->route[0]->backend[3].addr.text),
		 "10.0.0.5:80");
	cr_assert_eq(backend_tables_build(four->route[0]), 0);
	for (unsigned k = 0; k < 10000; k++) {
		struct sockaddr_in sin = client(k);
		const char *before = five->route[0]->backend[backend_pick(
			five->route[0], (struct sockaddr *)&sin, sizeof(sin))].addr.text;
		const char *after = four->route[0]->backend[backend_pick(
			four->route[0], (struct sockaddr *)&sin, sizeof(sin))].addr.text;
		if (strcmp(before, after)) {
			moved++;
			moved_needlessly += strcmp(before, "10.0.0.3:80") != 0;
		}
	}
	cr_assert_leq(moved, 2500, "%u of 10000 clients changed backend (limit 25%%)", moved);
	cr_assert_leq(moved_needlessly, 500, "%u clients of the remaining backends moved", moved_needlessly);
	config_free(five);
	config_free(four);
}

Test(unit_backend, down_backends_are_skipped_by_every_balance)
{
	const unsigned w[] = { 1, 1, 1 };
	const char *modes[] = { "roundrobin", "leastconn", "maglev" };

	for (int m = 0; m < 3; m++) {
		struct config *c = weighted(w, 3, modes[m]);
		struct route *r = c->route[0];
		r->health[1]->down = 1;
		for (unsigned k = 0; k < 300; k++) {
			struct sockaddr_in sin = client(k);
			unsigned b = backend_pick(r, (struct sockaddr *)&sin, sizeof(sin));
			cr_assert_neq(b, 1, "%s picked the backend marked down", modes[m]);
		}
		config_free(c);
	}
}
