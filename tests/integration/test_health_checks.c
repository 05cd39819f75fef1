/* SPDX-License-Identifier: MIT */
/* Protocol health checks (issue 24, item 2) against small servers of the
 * test (no MySQL server is installed on the test machine: its greeting and
 * error packets come from here, byte for byte as MySQL 8 sends them; SMTP
 * greetings likewise). The real redis, postgresql, TLS and HTTP servers
 * are in test_health_servers.c.
 *   - smtp: a 220 greeting passes, a 554 fails with its line;
 *   - mysql: a protocol-10 greeting passes, an ERR packet (1040, too many
 *     connections) fails with its code and text;
 *   - send/expect with binary bytes passes; a regex passes; bytes the answer
 *     lacks fail as soon as the server closes, with what it said;
 *   - a backend that accepts and never answers holds only its own probe:
 *     the other backend's checks go on at their interval meanwhile. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "flag_backend.h"

/* What a canned server says: a greeting on connect, and for a request of
 * its bytes, a reply; then it closes (close) or waits for the peer. */
struct canned {
	const char *greet;
	size_t ngreet;
	const char *req, *reply;
	size_t nreq, nreply;
	int close;
};

static void canned_conn(struct h_server *s, int fd, int index, void *arg)
{
	const struct canned *c = arg;
	char buf[256];

	(void)s;
	(void)index;
	if (c->ngreet && h_send_all(fd, c->greet, c->ngreet, h_now_ms() + 1000))
		return;
	if (c->nreq && !h_recv_exact(fd, buf, c->nreq, h_now_ms() + 2000) &&
	    !memcmp(buf, c->req, c->nreq))
		h_send_all(fd, c->reply, c->nreply, h_now_ms() + 1000);
	if (c->close)
		return;
	while (recv(fd, buf, sizeof buf, 0) > 0) /* the checker's close */
		;
}

static int canned_start(struct h_server *s, const struct canned *c)
{
	H_CHECK(h_server_start(s, "127.0.0.1:0", 64, canned_conn, (void *)c) == 0, "server");
	return h_addr_port(&s->addr);
}

/* Waits until backend port of route passed n checks, none failed. */
static void passes(const struct h_proxy *p, const char *route, int port, int n)
{
	int64_t end = h_now_ms() + 10000;

	while (fb_checks(p, route, port, "ok") < n && h_now_ms() < end)
		h_sleep_ms(50);
	H_CHECK(fb_checks(p, route, port, "ok") >= n && fb_checks(p, route, port, "failed") == 0,
		"route %s, backend port %d: %lld passed, %lld failed", route, port,
		fb_checks(p, route, port, "ok"), fb_checks(p, route, port, "failed"));
}

/* MySQL 8's first packet (protocol 10, its version string, the rest of the
 * handshake zeroed: the check reads the head) and an ERR packet 1040. */
static const char mysql_hello[] = "\x4a\x00\x00\x00\x0a" "8.0.36\x00" "\x08\x00\x00\x00" "abcdefgh"
				  "\x00\xff\xff\xff\x02\x00\xff\xdf\x15\x00\x00\x00\x00\x00\x00\x00"
				  "\x00\x00\x00" "ijklmnopqrst\x00" "caching_sha2_password\x00";
static const char mysql_busy[] = "\x1d\x00\x00\x00\xff\x10\x04" "#08004" "Too many connections";

static void case_greetings(const char *bin)
{
	static const struct canned smtp_ok = { "220 mx.test ESMTP ready\r\n", 25, NULL, NULL, 0, 0, 0 };
	static const struct canned smtp_bad = { "554 5.3.2 mx.test busy\r\n", 24, NULL, NULL, 0, 0, 0 };
	static const struct canned my_ok = { mysql_hello, sizeof mysql_hello - 1, NULL, NULL, 0, 0, 0 };
	static const struct canned my_bad = { mysql_busy, sizeof mysql_busy - 1, NULL, NULL, 0, 0, 1 };
	struct h_server s1, s2, m1, m2;
	struct h_proxy p;
	char text[1024];
	int ps1 = canned_start(&s1, &smtp_ok), ps2 = canned_start(&s2, &smtp_bad);
	int pm1 = canned_start(&m1, &my_ok), pm2 = canned_start(&m2, &my_bad);

	snprintf(text, sizeof text,
		 "[global]\nworkers = 1\nstats = 127.0.0.1:0\n\n"
		 "[route mail]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d 127.0.0.1:%d\n"
		 "check = smtp\ncheck_interval = 200ms\nrise = 1\nfall = 1\n\n"
		 "[route db]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d 127.0.0.1:%d\n"
		 "check = mysql\ncheck_interval = 200ms\nrise = 1\nfall = 1\n",
		 ps1, ps2, pm1, pm2);
	fb_proxy(&p, bin, "hc.conf", text);
	passes(&p, "mail", ps1, 3);
	fb_down_because(&p, ps2, "greeting: 554 5.3.2 mx.test busy");
	passes(&p, "db", pm1, 3);
	fb_down_because(&p, pm2, "ERR 1040: Too many connections");
	h_proxy_down(&p);
	h_server_stop(&s1);
	h_server_stop(&s2);
	h_server_stop(&m1);
	h_server_stop(&m2);
}

Test(integ, health_smtp_and_mysql_greetings, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_greetings(h_binary(0));
}

static void case_send_expect(const char *bin)
{
	static const struct canned bin_srv = { NULL, 0, "\x00\x01PING\r\n", "\x00\x02PONG ok\r\n", 7, 11, 1 };
	struct h_server s;
	struct h_proxy p;
	char text[1400];
	int ps = canned_start(&s, &bin_srv);

	snprintf(text, sizeof text,
		 "[global]\nworkers = 1\nstats = 127.0.0.1:0\n\n"
		 "[route bytes]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d\n"
		 "check = send:\"\\x00\\x01PING\\r\\n\" expect:\"\\x00\\x02PONG\"\ncheck_interval = 300ms\n"
		 "rise = 1\nfall = 1\n\n"
		 "[route re]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d\n"
		 "check = send:\"\\x00\\x01PING\\r\\n\" expect-regex:\"PONG (ok|fine)\\r\\n$\"\n"
		 "check_interval = 300ms\nrise = 1\nfall = 1\n\n"
		 "[route miss]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d\n"
		 "check = send:\"\\x00\\x01PING\\r\\n\" expect:\"\\x00\\x03\"\ncheck_interval = 300ms\n"
		 "check_timeout = 5s\nrise = 1\nfall = 1\n",
		 ps, ps, ps);
	fb_proxy(&p, bin, "hc.conf", text);
	passes(&p, "bytes", ps, 3);
	passes(&p, "re", ps, 3);
	/* the server closes after its answer: the verdict comes then, not at
	 * check_timeout (5 s) */
	int64_t t0 = h_now_ms();
	/* (the log writes a backslash as \x5c) */
	fb_down_because(&p, ps, "x03' in 11 bytes: ");
	H_CHECK(h_log_lines(&p, "in 11 bytes: ", "x02PONG ok", NULL) == 1, "the answer is not in the line");
	H_CHECK(h_now_ms() - t0 < 4000, "the mismatch waited for the timeout");
	h_proxy_down(&p);
	h_server_stop(&s);
}

Test(integ, health_send_expect_binary_and_regex, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_send_expect(h_binary(0));
}

/* A backend that never answers, with a long check_timeout, beside one that
 * answers: the second's checks keep their interval. */
static void case_silent(const char *bin)
{
	struct flag_backend g;
	struct h_proxy p;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sin;
	char text[1024];
	int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	/* listens (the kernel completes connects) and never accepts: silent */
	H_CHECK(silent >= 0 && bind(silent, (struct sockaddr *)&sin, sizeof sin) == 0 &&
			listen(silent, 64) == 0 && getsockname(silent, (struct sockaddr *)&sin, &len) == 0,
		"silent backend");
	fb_start(&g, 'G', 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 1\nstats = 127.0.0.1:0\n\n"
		 "[route r]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d 127.0.0.1:%d\n"
		 "check = expect:\"UP\"\ncheck_interval = 100ms\ncheck_timeout = 3s\nrise = 1\nfall = 1\n",
		 ntohs(sin.sin_port), g.port);
	fb_proxy(&p, bin, "hc.conf", text);
	h_sleep_ms(300); /* the silent backend's first check is in flight for 3 s */
	long long before = fb_checks(&p, "r", g.port, "ok");
	h_sleep_ms(1500);
	long long during = fb_checks(&p, "r", g.port, "ok") - before;
	fprintf(stderr, "[health_silent] %lld checks of the answering backend in 1.5 s while the "
		"silent one's check waited (interval 100 ms)\n", during);
	H_CHECK(during >= 8, "only %lld checks in 1.5 s at a 100 ms interval", during);
	H_CHECK(fb_checks(&p, "r", ntohs(sin.sin_port), "failed") + fb_checks(&p, "r", ntohs(sin.sin_port), "ok") == 0,
		"the silent backend's check ended before its timeout");
	h_proxy_down(&p);
	fb_stop(&g);
	close(silent);
}

Test(integ, health_silent_backend_holds_only_its_probe, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_silent(h_binary(0));
}

/* `splicer check` refuses each bad value of the new keys with its line. */
Test(integ, health_check_keys_refused_at_their_line, .init = h_init, .fini = h_fini, .timeout = 30)
{
	static const struct {
		const char *line, *want;
	} bad[] = {
		{ "check = redis-replica", "4: check: invalid value 'redis-replica' (expects none, tcp, redis" },
		{ "check = send:\"PING\"", "4: check: send: needs an expect:\"...\"" },
		{ "check = expect-regex:\"([a-z\"", "4: check: expect-regex: '([a-z':" },
		{ "check = http:GET /health 6xx", "4: check: http: invalid status '6xx'" },
		{ "check = expect:\"\\q\"", "4: check: expect:: unknown escape '\\q'" },
		{ "on_backend_down = drop", "4: on_backend_down: invalid value 'drop' (expects keep|close)" },
		{ "slowstart = 10", "4: slowstart: invalid value '10': a duration needs a unit" },
		{ "slowstart = 50ms", "4: slowstart: invalid value '50ms' (expects a duration 100ms..24h" },
		{ "backend = 127.0.0.1:18091 backup=yes",
		  "4: backend: unknown backend option 'backup=yes' (expects weight=N, maxconn=N, backup" },
	};
	const char *bin = h_binary(0);
	char text[512], name[32];

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *out = NULL, *err = NULL, want[600];
		snprintf(name, sizeof name, "bad%zu.conf", i);
		snprintf(text, sizeof text, "[route web]\nlisten = 127.0.0.1:18080\nbackend = 127.0.0.1:18090\n%s\n",
			 bad[i].line);
		const char *path = h_conf_write(name, text);
		const char *args[] = { "check", "-c", path, NULL };
		int st = h_run_capture(bin, args, 5000, &out, &err);
		snprintf(want, sizeof want, "%s:%s", path, bad[i].want);
		H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && err && !strncmp(err, want, strlen(want)),
			"'%s': status %d, stderr: %s(expected a line starting '%s')", bad[i].line, st,
			err ? err : "", want);
		free(out);
		free(err);
	}
	/* every backend a backup: refused at the first backup's line */
	const char *path = h_conf_write("backups.conf", "[route web]\nlisten = 127.0.0.1:18080\n"
					"backend = 127.0.0.1:18090 backup\nbackend = 127.0.0.1:18091 backup\n");
	const char *args[] = { "check", "-c", path, NULL };
	char *out = NULL, *err = NULL, want[400];
	int st = h_run_capture(bin, args, 5000, &out, &err);
	snprintf(want, sizeof want, "%s:3: route 'web': every backend is a backup; a backup takes "
		 "sessions only while no primary backend is usable, so at least one must be a primary\n",
		 path);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && err && !strcmp(err, want),
		"every backend a backup: status %d, stderr: %s", st, err ? err : "");
	free(out);
	free(err);
}
