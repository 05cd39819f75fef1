/* SPDX-License-Identifier: MIT */
/* Backups and slowstart (issue 24, item 3), through real sessions.
 *   - backup: while the primary is up every session goes to it; marked down,
 *     every session goes to the first backup; that one down too, to the
 *     second; the primary back, to it again.
 *   - slowstart: a backend marked up again takes a share of new sessions
 *     that rises with the time since it came up, measured in windows:
 *     roundrobin (share = ramp x its weight's), maglev (the fraction of its
 *     own clients, from 400 source addresses, that reach it: rising, none of
 *     the other backend's clients ever moves, and none that reached it goes
 *     back), leastconn (a backend coming up with no sessions does not take
 *     every new session, as leastconn alone would).
 * The backends greet UP or DOWN (flag_backend.h); the routes check for UP. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flag_backend.h"

#define INTERVAL_MS 100

static const char *conf(int port, const char *backends, const char *extra)
{
	static char text[2048];

	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\n\n"
		 "[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\n"
		 "check = expect:\"UP\"\ncheck_interval = %dms\ncheck_timeout = 150ms\nrise = 1\nfall = 1\n%s",
		 port, backends, INTERVAL_MS, extra);
	return text;
}

/* Every one of 10 new sessions lands on `want`. */
static void all_on(const struct h_addr *a, char want, const char *when)
{
	for (int i = 0; i < 10; i++) {
		char t = fb_tag_of(a, NULL);
		H_CHECK(t == want, "%s: a session went to %c, not %c", when, t ? t : '-', want);
	}
}

static void case_backups(const char *bin)
{
	struct flag_backend pr, b1, b2;
	struct h_proxy p;
	char list[160];
	int port = h_free_port();

	fb_start(&pr, 'P', 0);
	fb_start(&b1, '1', 0);
	fb_start(&b2, '2', 0);
	snprintf(list, sizeof list, "%s %s backup %s backup", pr.text, b1.text, b2.text);
	fb_proxy(&p, bin, "ss.conf", conf(port, list, ""));
	all_on(&p.addr, 'P', "all up");
	fb_set_down(&pr, 1);
	fb_wait_log(&p, pr.text, "is down", 1);
	all_on(&p.addr, '1', "the primary down");
	fb_set_down(&b1, 1);
	fb_wait_log(&p, b1.text, "is down", 1);
	all_on(&p.addr, '2', "the primary and the first backup down");
	fb_set_down(&pr, 0);
	fb_wait_log(&p, pr.text, "is up", 1);
	all_on(&p.addr, 'P', "the primary up again");
	h_proxy_down(&p);
	fb_stop(&pr);
	fb_stop(&b1);
	fb_stop(&b2);
}

Test(integ, backup_backends_in_order, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_backups(h_binary(0));
}

#define RAMP_MS 2000

/* A and B (weight 1 each), B down at first; B comes up. Returns when the
 * proxy logged it up (the ramp's start, within a few ms). */
static int64_t b_comes_up(struct h_proxy *p, struct flag_backend *b)
{
	fb_set_down(b, 0);
	return fb_wait_log(p, b->text, "is up", 1);
}

static void case_ramp_roundrobin(const char *bin)
{
	struct flag_backend a, b;
	struct h_proxy p;
	char list[80], extra[64];
	int port = h_free_port();
	/* windows of 400 ms: [0,400) [400,800) ... and one past the ramp */
	const int64_t from[] = { 0, 400, 800, 1200, 1600, RAMP_MS + 300 };
	unsigned n[6] = { 0 }, on_b[6] = { 0 };

	fb_start(&a, 'A', 0);
	fb_start(&b, 'B', 0);
	fb_set_down(&b, 1);
	snprintf(list, sizeof list, "%s %s", a.text, b.text);
	snprintf(extra, sizeof extra, "slowstart = %dms\n", RAMP_MS);
	fb_proxy(&p, bin, "ss.conf", conf(port, list, extra));
	fb_wait_log(&p, b.text, "is down", 1);
	int64_t t_up = b_comes_up(&p, &b);
	for (;;) {
		int64_t t = h_now_ms() - t_up;
		int w = -1;
		for (int k = 0; k < 6; k++)
			if (t >= from[k] && t < from[k] + 400)
				w = k;
		if (t >= from[5] + 400)
			break;
		char tag = fb_tag_of(&p.addr, NULL);
		H_CHECK(tag == 'A' || tag == 'B', "no greeting");
		if (w >= 0) {
			n[w]++;
			on_b[w] += tag == 'B';
		}
		h_sleep_ms(1);
	}
	for (int k = 0; k < 6; k++) {
		double mid = (double)(from[k] + 200) / RAMP_MS, want = 0.5 * (mid < 1 ? mid : 1);
		double got = n[k] ? (double)on_b[k] / n[k] : -1;
		fprintf(stderr, "[slowstart roundrobin] %4lld-%4lld ms after up: %3u of %3u sessions on the "
			"new backend (%.2f; ramp says %.2f)\n", (long long)from[k], (long long)from[k] + 400,
			on_b[k], n[k], got, want);
		H_CHECK(n[k] >= 30, "only %u sessions in window %d", n[k], k);
		H_CHECK(got > want - 0.13 && got < want + 0.13,
			"window %d: share %.2f, the ramp says %.2f", k, got, want);
	}
	H_CHECK((double)on_b[0] / n[0] < (double)on_b[3] / n[3], "the share did not rise");
	h_proxy_down(&p);
	fb_stop(&a);
	fb_stop(&b);
}

Test(integ, slowstart_roundrobin_share_rises, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_ramp_roundrobin(h_binary(0));
}

#define CLIENTS 400

/* Each client address's backend now (maglev hashes the source address). */
static void sweep(int port, char *owner)
{
	for (int i = 0; i < CLIENTS; i++) {
		char src[32];
		snprintf(src, sizeof src, "127.1.%d.%d", i / 200, 1 + i % 200);
		int fd = h_connect_from(port, src, 2000);
		owner[i] = fb_greeting(fd);
		close(fd);
	}
}

static void case_ramp_maglev(const char *bin)
{
	struct flag_backend a, b;
	struct h_proxy p;
	char list[80], extra[80], full[CLIENTS], now[CLIENTS], prev[CLIENTS];
	int port = h_free_port(), mine = 0, sweeps = 0;
	double last_share = -1;
	int64_t next_print = 0;

	fb_start(&a, 'A', 0);
	fb_start(&b, 'B', 0);
	snprintf(list, sizeof list, "%s %s", a.text, b.text);
	snprintf(extra, sizeof extra, "balance = maglev\nslowstart = %dms\n", RAMP_MS);
	fb_proxy(&p, bin, "ss.conf", conf(port, list, extra));
	sweep(port, full); /* both up since the start: no ramp */
	for (int i = 0; i < CLIENTS; i++)
		mine += full[i] == 'B';
	H_CHECK(mine > CLIENTS / 4 && mine < 3 * CLIENTS / 4, "B owns %d of %d clients", mine, CLIENTS);
	fb_set_down(&b, 1);
	fb_wait_log(&p, b.text, "is down", 1);
	sweep(port, prev);
	for (int i = 0; i < CLIENTS; i++)
		H_CHECK(prev[i] == 'A', "client %d on %c while B is down", i, prev[i] ? prev[i] : '-');
	int64_t t_up = b_comes_up(&p, &b);
	for (;;) {
		int64_t t0 = h_now_ms() - t_up;
		if (t0 > RAMP_MS + 400)
			break;
		sweep(port, now);
		int64_t t1 = h_now_ms() - t_up;
		int on = 0;
		for (int i = 0; i < CLIENTS; i++) {
			H_CHECK(full[i] == 'B' || now[i] == 'A', "client %d of A went to B during the ramp", i);
			H_CHECK(prev[i] != 'B' || now[i] == 'B', "client %d left B during the ramp", i);
			on += now[i] == 'B';
		}
		double share = (double)on / mine, lo = (double)t0 / RAMP_MS, hi = (double)t1 / RAMP_MS;
		if (t0 >= next_print) /* a line every 300 ms: the table stays short */
			next_print = t0 + 300, fprintf(stderr, "[slowstart maglev] %4lld-%4lld ms after up: %3d of B's %d clients on B "
			"(%.2f; ramp says %.2f-%.2f)\n", (long long)t0, (long long)t1, on, mine, share,
			lo < 1 ? lo : 1, hi < 1 ? hi : 1);
		H_CHECK(share > (lo < 1 ? lo : 1) - 0.15 && share < (hi < 1 ? hi : 1) + 0.15,
			"share %.2f out of the ramp's %.2f-%.2f", share, lo, hi);
		H_CHECK(share >= last_share, "the share fell, %.2f to %.2f", last_share, share);
		last_share = share;
		memcpy(prev, now, sizeof prev);
		sweeps++;
	}
	H_CHECK(sweeps >= 3, "only %d sweeps in the ramp", sweeps);
	H_CHECK(last_share == 1.0, "after the ramp %.2f of B's clients are on B", last_share);
	h_proxy_down(&p);
	fb_stop(&a);
	fb_stop(&b);
}

Test(integ, slowstart_maglev_moves_its_clients_back_gradually, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	case_ramp_maglev(h_binary(0));
}

static void case_ramp_leastconn(const char *bin, int slowstart)
{
	struct flag_backend a, b;
	struct h_proxy p;
	char list[80], extra[80];
	int port = h_free_port(), held[120], nheld = 0, first_b = 0, first_n = 0;

	fb_start(&a, 'A', 0);
	fb_start(&b, 'B', 0);
	fb_set_down(&b, 1);
	snprintf(list, sizeof list, "%s %s", a.text, b.text);
	snprintf(extra, sizeof extra, "balance = leastconn\nslowstart = %dms\n", slowstart ? RAMP_MS : 0);
	fb_proxy(&p, bin, "ss.conf", conf(port, list, extra));
	fb_wait_log(&p, b.text, "is down", 1);
	for (int i = 0; i < 40; i++)
		H_CHECK(fb_tag_of(&p.addr, &held[nheld++]) == 'A', "B is down");
	int64_t t_up = b_comes_up(&p, &b);
	/* new long sessions, one every 10 ms, for 400 ms */
	while (h_now_ms() - t_up < 400 && nheld < 120) {
		char t = fb_tag_of(&p.addr, &held[nheld++]);
		first_b += t == 'B';
		first_n++;
		h_sleep_ms(10);
	}
	fprintf(stderr, "[slowstart leastconn %s] the first 400 ms after up: %d of %d new sessions on the "
		"new backend (A holds 40)\n", slowstart ? "on" : "off", first_b, first_n);
	if (slowstart)
		H_CHECK(first_b * 2 < first_n, "%d of %d new sessions rushed to the backend coming up",
			first_b, first_n);
	else /* the control: leastconn alone sends every one to the empty backend */
		H_CHECK(first_b == first_n, "without slowstart %d of %d went to B", first_b, first_n);
	for (int i = 0; i < nheld; i++)
		close(held[i]);
	h_proxy_down(&p);
	fb_stop(&a);
	fb_stop(&b);
}

Test(integ, slowstart_leastconn_no_rush, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_ramp_leastconn(h_binary(0), 1);
}

Test(integ, slowstart_leastconn_off_is_the_control, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_ramp_leastconn(h_binary(0), 0);
}
