/* SPDX-License-Identifier: MIT */
/* Runtime backends (issue 24, item 12): `ctl backend ROUTE add ADDR
 * [weight=N] [backup]` and `del ADDR`, in memory only.
 *   - add: the new backend takes new sessions at once, and a client waiting
 *     in the queue (every backend at maxconn) is served by it without
 *     waiting for another slot to free; show backends lists it (origin ctl);
 *   - del drains: no new session, the running one goes on (keep), or is
 *     reset (on_backend_down = close, counted as removed);
 *   - the next reload keeps what the file says: the deleted backend of the
 *     file is back, the added one gone;
 *   - bad requests get their sentence, and change nothing. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flag_backend.h"

static const char *sock_path(void)
{
	static char path[300];
	snprintf(path, sizeof path, "%s/admin.sock", h_tmpdir());
	return path;
}

static const char *conf(int port, const char *backends, const char *extra)
{
	static char text[2048];

	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nadmin = %s\nstats = 127.0.0.1:0\n\n"
		 "[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\n%s", sock_path(), port, backends,
		 extra);
	return text;
}

/* show backends' text line of addr, or NULL. */
static const char *row_of(const char *table, const char *addr, char *line, size_t len)
{
	const char *p = strstr(table, addr), *s, *e;

	if (!p)
		return NULL;
	for (s = p; s > table && s[-1] != '\n'; s--)
		;
	e = strchr(p, '\n');
	snprintf(line, len, "%.*s", (int)(e ? e - s : (long)strlen(s)), s);
	return line;
}

static void case_add_wakes_queue(const char *bin)
{
	struct flag_backend a, b;
	struct h_proxy p;
	int port = h_free_port(), adm, held, waiting;
	char cmd[200], line[400];
	static char ans[16384];

	fb_start(&a, 'A', 0);
	fb_start(&b, 'B', 0);
	char backends[80];
	snprintf(backends, sizeof backends, "%s maxconn=1", a.text);
	fb_proxy(&p, bin, "rt.conf", conf(port, backends, "queue_timeout = 10s\n"));
	adm = h_admin_connect(sock_path());
	held = fb_session_on(&p.addr, 'A');
	waiting = h_connect(&p.addr, 2000);
	H_CHECK(waiting >= 0, "connect");
	/* queued: no greeting while A's one slot is taken */
	char c;
	h_set_timeouts(waiting, 300);
	H_CHECK(recv(waiting, &c, 1, 0) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
		"the second client was served while A is at its maxconn");
	h_set_timeouts(waiting, 1000);

	snprintf(cmd, sizeof cmd, "backend web add %s weight=2", b.text);
	int64_t t0 = h_now_ms();
	h_admin_cmd(adm, cmd, ans, sizeof ans);
	H_CHECK(strstr(ans, "ok: backend") && strstr(ans, "added to route web (weight 2)"), "add: %s", ans);
	H_CHECK(fb_greeting(waiting) == 'B', "the waiting client was not served by the added backend");
	int64_t took = h_now_ms() - t0;
	fprintf(stderr, "[runtime add] the queued client served by the new backend %lld ms after the "
		"command\n", (long long)took);
	H_CHECK(took < 2000, "the queued client waited %lld ms after the add", (long long)took);
	H_CHECK(fb_echo_ok(waiting, 1) && fb_echo_ok(held, 2), "both sessions work");

	h_admin_cmd(adm, "show backends", ans, sizeof ans);
	H_CHECK(row_of(ans, b.text, line, sizeof line) && strstr(line, " ctl") &&
			strstr(line, " primary ") && strstr(line, " 2 "),
		"show backends lists the added backend:\n%s", ans);
	H_CHECK(row_of(ans, a.text, line, sizeof line) && strstr(line, " file"), "%s", ans);
	h_admin_cmd(adm, "show backends --json", ans, sizeof ans);
	H_CHECK(strstr(ans, "\"origin\":\"ctl\"") && strstr(ans, "\"origin\":\"file\""), "%s", ans);
	H_CHECK(h_log_lines_wait(&p, 2000, "ctl: route web: backend", "added", NULL) == 1,
		"no log line of the add, or more than one");
	close(held);
	close(waiting);
	close(adm);
	h_proxy_down(&p);
	fb_stop(&a);
	fb_stop(&b);
}

Test(integ, ctl_backend_add_serves_the_queue, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_add_wakes_queue(h_binary(0));
}

Test(integ, ctl_backend_add_serves_the_queue_asan, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_add_wakes_queue(h_binary(1));
}

static void case_del_drains_and_reload_restores(const char *bin)
{
	struct flag_backend a, b, c;
	struct h_proxy p;
	int port = h_free_port(), adm, on_a, n_a = 0;
	char cmd[200], both[80], line[400];
	static char ans[16384];

	fb_start(&a, 'A', 0);
	fb_start(&b, 'B', 0);
	fb_start(&c, 'C', 0);
	snprintf(both, sizeof both, "%s %s", a.text, b.text);
	fb_proxy(&p, bin, "rt.conf", conf(port, both, ""));
	adm = h_admin_connect(sock_path());
	on_a = fb_session_on(&p.addr, 'A');

	snprintf(cmd, sizeof cmd, "backend web del %s", a.text);
	h_admin_cmd(adm, cmd, ans, sizeof ans);
	H_CHECK(strstr(ans, "removed: no new sessions; 1 running finish"), "del: %s", ans);
	for (int i = 0; i < 10; i++)
		n_a += fb_tag_of(&p.addr, NULL) == 'A';
	H_CHECK(n_a == 0, "%d of 10 new sessions went to the deleted backend", n_a);
	H_CHECK(fb_echo_ok(on_a, 3), "the running session on the deleted backend ended (keep)");
	h_admin_cmd(adm, "show backends", ans, sizeof ans);
	H_CHECK(!strstr(ans, a.text), "show backends still lists the deleted backend:\n%s", ans);
	snprintf(cmd, sizeof cmd, "backend web add %s backup", c.text);
	h_admin_cmd(adm, cmd, ans, sizeof ans);
	h_admin_cmd(adm, "show backends", ans, sizeof ans);
	H_CHECK(row_of(ans, c.text, line, sizeof line) && strstr(line, " backup ") && strstr(line, " ctl"),
		"the added backup:\n%s", ans);

	/* the next reload keeps what the file says */
	h_admin_cmd(adm, "reload", ans, sizeof ans);
	h_admin_cmd(adm, "show backends", ans, sizeof ans);
	H_CHECK(strstr(ans, a.text) && strstr(ans, b.text) && !strstr(ans, c.text),
		"after a reload the file's backends, and only them:\n%s", ans);
	H_CHECK(fb_echo_ok(on_a, 4), "the session from before went on");
	close(fb_session_on(&p.addr, 'A'));
	close(on_a);
	close(adm);
	h_proxy_down(&p);
	fb_stop(&a);
	fb_stop(&b);
	fb_stop(&c);
}

Test(integ, ctl_backend_del_drains_reload_restores, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_del_drains_and_reload_restores(h_binary(0));
}

static void case_del_closes(const char *bin)
{
	struct flag_backend a, b;
	struct h_proxy p;
	struct h_addr stats;
	int port = h_free_port(), adm, on_a, on_b;
	char cmd[200], both[80];
	static char ans[16384];

	fb_start(&a, 'A', 0);
	fb_start(&b, 'B', 0);
	snprintf(both, sizeof both, "%s %s", a.text, b.text);
	fb_proxy(&p, bin, "rt.conf", conf(port, both, "on_backend_down = close\n"));
	adm = h_admin_connect(sock_path());
	on_a = fb_session_on(&p.addr, 'A');
	on_b = fb_session_on(&p.addr, 'B');
	snprintf(cmd, sizeof cmd, "backend web del %s", a.text);
	int64_t t0 = h_now_ms();
	h_admin_cmd(adm, cmd, ans, sizeof ans);
	H_CHECK(strstr(ans, "no new sessions; 1 running closed (on_backend_down = close)"), "del: %s", ans);
	int r = h_expect_eof(on_a, t0 + 3000);
	H_CHECK(r == -ECONNRESET, "the session on the deleted backend: %d (%s)", r, strerror(-r));
	fprintf(stderr, "[runtime del, close] reset %lld ms after the command\n",
		(long long)(h_now_ms() - t0));
	H_CHECK(fb_echo_ok(on_b, 5), "the other backend's session ended too");
	H_CHECK(h_stats_addr(&p, &stats) == 0, "stats");
	H_CHECK(h_metric(&stats, "splicer_route_backend_gone_closed_total{route=\"web\",cause=\"removed\"}") == 1,
		"not counted as removed");
	close(on_a);
	close(on_b);
	close(adm);
	h_proxy_down(&p);
	fb_stop(&a);
	fb_stop(&b);
}

Test(integ, ctl_backend_del_closes, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_del_closes(h_binary(0));
}

/* Each bad request: its sentence, and the backends as they were. */
static void case_bad_requests(const char *bin)
{
	struct flag_backend a, b;
	struct h_proxy p;
	int port = h_free_port(), adm;
	char cmd[300], before[4096];
	static char ans[16384];

	fb_start(&a, 'A', 0);
	fb_start(&b, 'B', 0);
	char list[120];
	snprintf(list, sizeof list, "%s %s backup", a.text, b.text);
	fb_proxy(&p, bin, "rt.conf", conf(port, list, ""));
	adm = h_admin_connect(sock_path());
	h_admin_cmd(adm, "show backends", before, sizeof before);
	const struct {
		const char *cmd, *want;
	} bad[] = {
		{ "backend web add localhost:80", "expects an IP address and port" },
		{ "backend web add 127.0.0.1", "port" },
		{ "backend web add 127.0.0.1:1 weight=0", "weight expects an integer 1..256" },
		{ "backend web add 127.0.0.1:1 maxconn=3", "unknown option 'maxconn=3'" },
		{ "backend nope add 127.0.0.1:1", "no route 'nope'" },
		{ "backend web del 127.0.0.1:1", "route web has no backend '127.0.0.1:1'" },
		{ "backend web del 127.0.0.1:1 extra", "usage: backend ROUTE add" },
		{ "backend web add", "usage: backend ROUTE add" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		h_admin_try(adm, bad[i].cmd, ans, sizeof ans);
		H_CHECK(!strncmp(ans, "error: ", 7) && strstr(ans, bad[i].want), "'%s': %s (expected '%s')",
			bad[i].cmd, ans, bad[i].want);
	}
	snprintf(cmd, sizeof cmd, "backend web add %s", a.text);
	h_admin_try(adm, cmd, ans, sizeof ans);
	H_CHECK(strstr(ans, "has backend") && strstr(ans, "already"), "a duplicate: %s", ans);
	snprintf(cmd, sizeof cmd, "backend web del %s", a.text);
	h_admin_try(adm, cmd, ans, sizeof ans);
	H_CHECK(strstr(ans, "the last primary backend of route web"), "the last primary: %s", ans);
	h_admin_cmd(adm, "show backends", ans, sizeof ans);
	H_CHECK(!strcmp(ans, before) || (strstr(ans, a.text) && strstr(ans, b.text) &&
					 !strstr(ans, "127.0.0.1:1 ")),
		"a refused request changed the backends:\n%s", ans);
	close(adm);
	h_proxy_down(&p);
	fb_stop(&a);
	fb_stop(&b);
}

Test(integ, ctl_backend_add_del_bad_requests, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_bad_requests(h_binary(0));
}
