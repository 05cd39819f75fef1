/* SPDX-License-Identifier: MIT */
/* Unit tests for src/core/backend.c's backups and slowstart: a backup takes
 * sessions only while no primary is usable, the first usable one in order;
 * a backend in its slowstart ramp takes a share that grows linearly to its
 * weight's, for roundrobin, leastconn and maglev (where a ramping backend
 * takes a growing set of its own table slots: a client that moved to it
 * stays there as the ramp goes on). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "config.h"
#include "worker.h"

static const struct sockaddr_storage unix_peer = { .ss_family = AF_UNIX };

/* A route with n backends of weight 1, those in backup[] backups. */
static struct config *route_of(unsigned n, const int *backup, const char *balance,
			       uint64_t slowstart_ms)
{
	static struct config c;
	struct route *r;

	config_defaults(&c);
	r = config_add_route(&c, "t", 0);
	cr_assert(r);
	r->listen[0].ss.ss_family = AF_UNIX; /* never bound here */
	r->listen[0].len = sizeof(sa_family_t);
	r->nlisten = 1;
	for (unsigned i = 0; i < n; i++) {
		r->backend[i].weight = 1;
		r->backend[i].backup = (uint8_t)(backup && backup[i]);
		snprintf(r->backend[i].addr.text, sizeof(r->backend[i].addr.text), "10.0.1.%u:80", i + 1);
	}
	r->nbackend = n;
	c.o.balance = !strcmp(balance, "leastconn") ? BALANCE_LEASTCONN
		      : !strcmp(balance, "maglev") ? BALANCE_MAGLEV : BALANCE_ROUNDROBIN;
	c.o.slowstart_ms = slowstart_ms;
	cr_assert_eq(config_finalize(&c), 0);
	return &c;
}

static unsigned pick(struct route *r)
{
	return backend_pick(r, (struct sockaddr *)&unix_peer, sizeof(sa_family_t));
}

static unsigned pick_ip(struct route *r, uint32_t ip)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(ip) };

	return backend_pick(r, (struct sockaddr *)&a, sizeof(a));
}

static void backups_in_order(const char *balance)
{
	const int backup[] = { 0, 1, 1 };
	struct config *c = route_of(3, backup, balance, 0);
	struct route *r = c->route[0];

	for (unsigned k = 0; k < 200; k++)
		cr_assert_eq(pick_ip(r, 0x0a000000 + k), 0, "%s: a backup picked while the primary is up",
			     balance);
	cr_assert(backend_eligible(r, 0) && !backend_eligible(r, 1) && !backend_eligible(r, 2));
	backend_set_down(r, 0, 1, "test");
	for (unsigned k = 0; k < 200; k++)
		cr_assert_eq(pick_ip(r, 0x0a000000 + k), 1, "%s: not the first backup", balance);
	cr_assert(backend_eligible(r, 1) && backend_eligible(r, 2), "backups in use: each may be tried");
	backend_set_down(r, 1, 1, "test");
	for (unsigned k = 0; k < 200; k++)
		cr_assert_eq(pick_ip(r, 0x0a000000 + k), 2, "%s: not the second backup", balance);
	backend_set_down(r, 0, 0, "test");
	for (unsigned k = 0; k < 200; k++)
		cr_assert_eq(pick_ip(r, 0x0a000000 + k), 0, "%s: the primary is back", balance);
	/* a drained primary is not usable either */
	backend_set_admin(r, 0, BACKEND_DRAIN);
	backend_set_down(r, 1, 0, "test");
	cr_assert_eq(pick(r), 1);
	backend_set_admin(r, 0, BACKEND_READY);
	config_free(c);
}

Test(unit_backend_ramp, backups_roundrobin) { backups_in_order("roundrobin"); }
Test(unit_backend_ramp, backups_leastconn) { backups_in_order("leastconn"); }
Test(unit_backend_ramp, backups_maglev) { backups_in_order("maglev"); }

/* Backend 1 came up `ago_ms` ago with slowstart 10 s. */
static void came_up(struct route *r, unsigned i, uint64_t ago_ms)
{
	r->health[i]->up_since_ms = now_monotonic_ms() - ago_ms;
}

Test(unit_backend_ramp, roundrobin_share_rises_linearly)
{
	struct config *c = route_of(2, NULL, "roundrobin", 10000);
	struct route *r = c->route[0];
	const uint64_t at[] = { 1000, 2500, 5000, 7500 };

	for (unsigned k = 0; k < 4; k++) {
		unsigned to1 = 0, n = 20000;
		came_up(r, 1, at[k]);
		for (unsigned i = 0; i < n; i++)
			to1 += pick(r) == 1;
		/* weight 1 of 2: half of the picks at full weight, times the ramp */
		double want = 0.5 * (double)at[k] / 10000.0, got = (double)to1 / n;
		cr_assert(got > want - 0.03 && got < want + 0.03,
			  "%llu ms into a 10 s ramp: share %.3f, want %.3f", (unsigned long long)at[k], got,
			  want);
		cr_assert_eq(backend_ramp(r, 1) / 100, (unsigned)(at[k] / 1000), "ramp %u", backend_ramp(r, 1));
	}
	came_up(r, 1, 20000);
	unsigned to1 = 0;
	for (unsigned i = 0; i < 1000; i++)
		to1 += pick(r) == 1;
	cr_assert_eq(to1, 500, "ramp over: its whole weight");
	/* the only backend up takes everything, ramp or not */
	came_up(r, 1, 100);
	backend_set_down(r, 0, 1, "test");
	for (unsigned i = 0; i < 100; i++)
		cr_assert_eq(pick(r), 1);
	config_free(c);
}

Test(unit_backend_ramp, leastconn_share_rises_linearly)
{
	struct config *c = route_of(2, NULL, "leastconn", 10000);
	struct route *r = c->route[0];
	unsigned held[2] = { 0 };

	came_up(r, 1, 2500); /* a quarter of the way */
	for (unsigned i = 0; i < 1000; i++) {
		unsigned b = pick(r);
		cr_assert(backend_try_hold(r, b));
		held[b]++;
	}
	/* sessions per ramped weight even out: held1 / 0.25 == held0 / 1 */
	double ratio = (double)held[1] / held[0];
	cr_assert(ratio > 0.22 && ratio < 0.28, "held %u and %u: ratio %.3f, want 0.25", held[0],
		  held[1], ratio);
	config_free(c);
}

Test(unit_backend_ramp, maglev_ramp_takes_a_growing_set_of_its_clients)
{
	struct config *c = route_of(2, NULL, "maglev", 10000);
	struct route *r = c->route[0];
	static uint8_t full[8000], quarter[8000], half[8000];
	unsigned n1_full = 0, n1_q = 0, n1_h = 0, n = 8000;

	came_up(r, 1, 20000);
	for (unsigned i = 0; i < n; i++)
		n1_full += (full[i] = (uint8_t)pick_ip(r, 0xc0a80000 + i * 7919)) == 1;
	came_up(r, 1, 2500);
	for (unsigned i = 0; i < n; i++)
		n1_q += (quarter[i] = (uint8_t)pick_ip(r, 0xc0a80000 + i * 7919)) == 1;
	came_up(r, 1, 5000);
	for (unsigned i = 0; i < n; i++)
		n1_h += (half[i] = (uint8_t)pick_ip(r, 0xc0a80000 + i * 7919)) == 1;
	double q = (double)n1_q / n1_full, h = (double)n1_h / n1_full;
	cr_assert(q > 0.20 && q < 0.30, "a quarter into the ramp it has %.3f of its clients", q);
	cr_assert(h > 0.45 && h < 0.55, "half way it has %.3f of its clients", h);
	for (unsigned i = 0; i < n; i++) {
		/* only its own clients move to it, and none moves back */
		cr_assert(quarter[i] == 0 || full[i] == 1, "client %u went to 1 but is not its", i);
		cr_assert(quarter[i] != 1 || half[i] == 1, "client %u left the ramping backend", i);
		cr_assert(half[i] == 0 || full[i] == 1);
		/* the clients of backend 0 never move */
		cr_assert(full[i] != 0 || (quarter[i] == 0 && half[i] == 0));
	}
	config_free(c);
}
