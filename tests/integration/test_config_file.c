/* SPDX-License-Identifier: MIT */
/* Integration cases for the config file (-c) and `splicer check`: one test
 * per error class with its exact FILE:LINE: message, a valid file, two
 * routes end to end, weighted round robin over 3,000 connections, leastconn
 * preferring the idle backend, the command line overriding the file, and
 * the README's quick start run as written (its ports mapped to free ones). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs `splicer check -c FILE` and expects exit 1 with exactly one line on
 * stderr: "FILE:" + expected. */
static void check_one_error(const char *bin, const char *name, const char *text,
			    const char *expected)
{
	const char *path = h_conf_write(name, text);
	const char *args[] = { "check", "-c", path, NULL };
	char *out = NULL, *err = NULL, want[1024];
	int st = h_run_capture(bin, args, 5000, &out, &err);

	/* "PATH" starting a further line of expected stands for the file's path */
	int n = snprintf(want, sizeof want, "%s:", path);
	for (const char *e = expected; *e && n < (int)sizeof want - 2; e++)
		n += e > expected && e[-1] == '\n' && !strncmp(e, "PATH", 4)
			     ? (e += 3, snprintf(want + n, sizeof want - (size_t)n, "%s", path))
			     : (want[n] = *e, 1);
	snprintf(want + n, sizeof want - (size_t)n, "\n");
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1,
		"%s: check expected exit 1, got status %d; stderr: %s", name, st, err ? err : "");
	H_CHECK(err && !strcmp(err, want), "%s: check printed\n%s\nexpected exactly\n%s", name,
		err ? err : "(nothing)", want);
	H_CHECK(!out || !out[0], "%s: check printed on stdout for a bad file: %s", name, out);
	free(out);
	free(err);
}

/* One file per error class: text before + a valid route + text after. */
static const struct {
	const char *name, *before, *after, *expected;
} error_cases[] = {
	{ "unknown-key.conf", "[global]\nworkers = 1\nnonsense = 3\n", "",
	  "3: unknown key 'nonsense' in [global]; expects engine, auto_uring_turns, balance, workers, buffer_size, "
	  "pipe_size, lowat, busy_poll, max_pipes, max_conns, connect_timeout, idle_timeout, "
	  "half_close_timeout, log, log_format, log_facility, log_interval, log_connect, "
	  "proxy_protocol, accept_proxy, proxy_protocol_tlvs, proxy_protocol_pass, proxy_timeout, "
	  "check, "
	  "check_interval, check_timeout, rise, fall, on_backend_down, slowstart, stats, user, "
	  "sandbox, admin, verbose, drain_timeout, lameduck, "
	  "source_max_conns, source_conn_rate, source_table_size, tls_hello_timeout, tls_hello_max, "
	  "queue_timeout, resolvers, max_session_time, max_session_jitter, upgrade_sessions, "
	  "drain_spread, "
	  "client_keepalive, backend_keepalive, client_user_timeout, backend_user_timeout, source, "
	  "mptcp, fastopen, mark, tos, defer_accept, interface, backlog, rate_limit_up, "
	  "rate_limit_down" },
	{ "unknown-route-key.conf", "", "bogus = 1\n",
	  "4: unknown key 'bogus' in a route; expects listen, backend, sni, alpn, allow, deny, engine, "
	  "auto_uring_turns, balance, lowat, connect_timeout, idle_timeout, half_close_timeout, proxy_protocol, "
	  "accept_proxy, proxy_protocol_tlvs, proxy_protocol_pass, proxy_timeout, check, check_interval, check_timeout, rise, fall, "
	  "on_backend_down, slowstart, source_max_conns, source_conn_rate, tls_hello_timeout, "
	  "tls_hello_max, queue_timeout, max_session_time, max_session_jitter, client_keepalive, "
	  "backend_keepalive, client_user_timeout, backend_user_timeout, source, mptcp, fastopen, "
	  "mark, tos, defer_accept, interface, backlog, rate_limit_up, rate_limit_down" },
	/* issue 14: a typo gets the key it is most likely of, in a route and in [global] */
	{ "typo-route-key.conf", "", "idle_timout = 5s\n",
	  "4: unknown key 'idle_timout' in a route (did you mean 'idle_timeout'?); expects listen, "
	  "backend, sni, alpn, allow, deny, engine, auto_uring_turns, balance, lowat, connect_timeout, idle_timeout, "
	  "half_close_timeout, proxy_protocol, accept_proxy, proxy_protocol_tlvs, proxy_protocol_pass, proxy_timeout, check, check_interval, "
	  "check_timeout, rise, fall, on_backend_down, slowstart, source_max_conns, source_conn_rate, "
	  "tls_hello_timeout, tls_hello_max, queue_timeout, max_session_time, max_session_jitter, "
	  "client_keepalive, backend_keepalive, client_user_timeout, backend_user_timeout, source, "
	  "mptcp, fastopen, mark, tos, defer_accept, interface, backlog, rate_limit_up, "
	  "rate_limit_down" },
	{ "typo-global-key.conf", "[global]\nwrokers = 2\n", "",
	  "2: unknown key 'wrokers' in [global] (did you mean 'workers'?); expects engine, auto_uring_turns, balance, "
	  "workers, buffer_size, pipe_size, lowat, busy_poll, max_pipes, max_conns, connect_timeout, "
	  "idle_timeout, half_close_timeout, log, log_format, log_facility, log_interval, "
	  "log_connect, proxy_protocol, accept_proxy, proxy_protocol_tlvs, proxy_protocol_pass, "
	  "proxy_timeout, check, "
	  "check_interval, check_timeout, rise, fall, on_backend_down, slowstart, stats, user, "
	  "sandbox, admin, verbose, drain_timeout, lameduck, "
	  "source_max_conns, source_conn_rate, source_table_size, tls_hello_timeout, tls_hello_max, "
	  "queue_timeout, resolvers, max_session_time, max_session_jitter, upgrade_sessions, "
	  "drain_spread, "
	  "client_keepalive, backend_keepalive, client_user_timeout, backend_user_timeout, source, "
	  "mptcp, fastopen, mark, tos, defer_accept, interface, backlog, rate_limit_up, "
	  "rate_limit_down" },
	/* issue 14: a number without a unit is refused with both readings */
	{ "unitless-duration.conf", "", "idle_timeout = 30000\n",
	  "4: idle_timeout: invalid value '30000': a duration needs a unit: 30000ms (30s) or 30000s "
	  "(500m) (suffixes ms, s, m, h)" },
	{ "unitless-duration-global.conf", "[global]\nconnect_timeout = 3\n", "",
	  "2: connect_timeout: invalid value '3': a duration needs a unit: 3ms or 3s (suffixes ms, s, "
	  "m, h)" },
	/* issue 14: a key in [global] that start trips on has its line */
	{ "unknown-user.conf", "[global]\nworkers = 1\nuser = no-such-user-14\n", "",
	  "3: user no-such-user-14: no such user" },
	{ "log-dir-missing.conf", "[global]\nlog = /nonexistent-14/splicer/access.log\n", "",
	  "2: access log /nonexistent-14/splicer/access.log: directory /nonexistent-14/splicer does "
	  "not exist (No such file or directory)" },
	/* issue 14: a bad backend or listen line is reported once, not again as
	 * "route has no backend" / "has no listen address" */
	{ "bad-backend-only.conf", "[route web]\nlisten = 127.0.0.1:18080\nbackend = 127.0.0.1\n#", "",
	  "3: backend '127.0.0.1': address '127.0.0.1': missing ':port' (forms: host:port, "
	  "[v6]:port, :port, *:port, unix:/path)" },
	{ "bad-listen-only.conf", "[route web]\nlisten = 127.0.0.1:99999\nbackend = 127.0.0.1:18090\n#", "",
	  "2: listen: address '127.0.0.1:99999': port 99999 out of range 0..65535" },
	{ "star-backend.conf", "", "backend = *:80\n",
	  "4: backend '*:80': address '*:80': '*' (every address of this host) is for listening; a "
	  "backend needs a host" },
	{ "bad-value.conf", "[global]\nworkers = zero\n", "",
	  "2: workers: invalid value 'zero' (expects an integer 1..256 or auto)" },
	{ "bad-enum.conf", "", "engine = fast\n",
	  "4: engine: invalid value 'fast' (expects auto|copy|splice|sockmap|uring)" },
	{ "bad-duration.conf", "", "idle_timeout = 5 minutes\n",
	  "4: idle_timeout: invalid value '5 minutes' (expects a duration 1ms..8760h (suffix ms, s, m, h))" },
	{ "duplicate-route.conf", "", "\n[route web]\nlisten = 127.0.0.1:18081\nbackend = :9\n",
	  "5: duplicate route 'web' (first defined at line 1)" },
	{ "listen-clash.conf", "", "[route api]\nlisten = 0.0.0.0:18080\nbackend = :9\n",
	  "5: listen 0.0.0.0:18080 clashes with 127.0.0.1:18080 of route 'web' (line 2)" },
	{ "no-backend.conf", "[global]\n\n[route web]\nlisten = 127.0.0.1:18080\n#", "",
	  "3: route 'web' has no backend" },
	{ "no-listen.conf", "[route web]\nbackend = 127.0.0.1:18090\n#", "",
	  "1: route 'web' has no listen address" },
	{ "empty-route.conf", "", "[route empty]\n",
	  "4: route 'empty' has no listen address\nPATH:4: route 'empty' has no backend" },
	{ "bad-weight.conf", "", "backend = 127.0.0.1:18091 weight=999\n",
	  "4: backend 127.0.0.1:18091: invalid weight '999' (expects an integer 1..256)" },
	{ "bad-address.conf", "", "backend = 127.0.0.1\n",
	  "4: backend '127.0.0.1': address '127.0.0.1': missing ':port' (forms: host:port, "
	  "[v6]:port, :port, *:port, unix:/path)" },
	{ "global-in-route.conf", "", "workers = 2\n",
	  "4: 'workers' is a [global] setting; a route cannot set it" },
	{ "duplicate-key.conf", "", "engine = copy\nengine = splice\n",
	  "5: duplicate key 'engine' (first set at line 4)" },
	{ "unknown-section.conf", "[listener x]\n", "",
	  "1: unknown section [listener x] (expected [global] or [route NAME])" },
	{ "outside-section.conf", "workers = 2\n", "",
	  "1: 'workers' outside a section: put it under [global] or [route NAME]" },
	{ "syntax.conf", "", "this is not a key\n",
	  "4: syntax error: expected '[section]', 'key = value' or a comment" },
	{ "listen-in-global.conf", "[global]\nlisten = :80\n", "",
	  "2: 'listen' belongs in a [route NAME] section" },
	/* issue 12, item 17: each of these had no FILE:LINE, or no message */
	{ "pipe-size-below-page.conf", "[global]\npipe_size = 100\n", "",
	  "2: pipe_size: invalid value '100' (expects a size 4k..64m or 0 (suffix k, m, g))" },
	{ "stats-clash.conf", "[global]\nstats = 127.0.0.1:18080\n", "",
	  "2: stats 127.0.0.1:18080 clashes with listen 127.0.0.1:18080 of route 'web' (line 4)" },
	{ "weight-twice.conf", "", "backend = 127.0.0.1:18091 weight=2 weight=3\n",
	  "4: backend 127.0.0.1:18091: weight given twice ('weight=2', then 'weight=3')" },
	{ "indented-continuation.conf", "", "    127.0.0.1:18092\n",
	  "4: indented line '127.0.0.1:18092' is not 'key = value': continuation lines are not "
	  "supported (repeat the key, as in another 'backend =' line)" },
	/* issue 24, item 10: the access log's format, facility and syslog targets */
	{ "bad-log-format.conf", "[global]\nlog_format = xml\n", "",
	  "2: log_format: invalid value 'xml' (expects kv|json)" },
	{ "bad-log-facility.conf", "[global]\nlog_facility = kernel\n", "",
	  "2: log_facility: invalid value 'kernel' (expects user|mail|daemon|auth|syslog|lpr|news|"
	  "uucp|cron|authpriv|ftp|local0|local1|local2|local3|local4|local5|local6|local7)" },
	{ "syslog-no-host.conf", "[global]\nlog = syslog:udp://\n", "",
	  "2: log: syslog:udp://: no host (syslog:udp://HOST[:PORT])" },
	{ "syslog-bad-port.conf", "[global]\nlog = syslog:udp://127.0.0.1:99999\n", "",
	  "2: log: syslog:udp://127.0.0.1:99999: address '127.0.0.1:99999': port 99999 out of range "
	  "0..65535" },
	{ "syslog-tcp.conf", "[global]\nlog = syslog:tcp://127.0.0.1\n", "",
	  "2: log: syslog:tcp://127.0.0.1: unknown syslog target (syslog, syslog:udp://HOST[:PORT] or "
	  "syslog:unix:PATH)" },
	{ "syslog-relative-path.conf", "[global]\nlog = syslog:unix:dev/log\n", "",
	  "2: log: syslog:unix:dev/log: a socket path starts with / (or @ for the abstract "
	  "namespace): syslog:unix:/dev/log" },
	{ "syslog-missing-socket.conf", "[global]\nlog = syslog:unix:/nonexistent-24/log\n", "",
	  "2: log: /nonexistent-24/log: No such file or directory (start the syslog daemon first)" },
	/* issue 12, defect 13: a backend that is its own route's listener */
	{ "backend-is-own-listener.conf", "", "backend = 127.0.0.1:18080\n",
	  "4: backend 127.0.0.1:18080 is listen 127.0.0.1:18080 of its own route (line 2): sessions "
	  "would loop back into the proxy" },
	{ "backend-on-own-wildcard.conf", "[route w]\nlisten = :18100\nbackend = 127.0.0.1:18100\n", "",
	  "3: backend 127.0.0.1:18100 is an address of this host, where its own route listens on "
	  "0.0.0.0:18100 (line 2): sessions would loop back into the proxy" },
};

Test(integ, config_check_each_error_class, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	/* A "#" ending `before` comments the route out (cases about a bad route). */
	const char *route = "[route web]\nlisten = 127.0.0.1:18080\nbackend = 127.0.0.1:18090\n";
	char text[600];

	for (unsigned i = 0; i < sizeof error_cases / sizeof *error_cases; i++) {
		const char *b = error_cases[i].before;
		size_t bl = strlen(b);
		int commented = bl && b[bl - 1] == '#';
		snprintf(text, sizeof text, "%.*s%s%s", (int)(bl - (size_t)commented), b,
			 commented ? "" : route, error_cases[i].after);
		check_one_error(bin, error_cases[i].name, text, error_cases[i].expected);
	}
}

Test(integ, config_check_lists_every_problem_and_missing_file, .init = h_init, .fini = h_fini,
     .timeout = 30)
{
	const char *bin = h_binary(0);
	const char *path = h_conf_write("many.conf", "[global]\nworkers = 0\n[route a]\nlisten = :1\n"
						  "[route b]\nbackend = :9\nnope = 1\n");
	const char *args[] = { "check", "-c", path, NULL };
	char *out = NULL, *err = NULL;
	int st = h_run_capture(bin, args, 5000, &out, &err);
	const char *needles[] = { ":2: workers: invalid value '0'", ":7: unknown key 'nope'",
				  ":3: route 'a' has no backend", ":5: route 'b' has no listen address" };

	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "check: status %d", st);
	for (unsigned i = 0; i < sizeof needles / sizeof *needles; i++)
		H_CHECK(err && strstr(err, needles[i]), "check did not report \"%s\"; stderr:\n%s",
			needles[i], err ? err : "");
	free(out);
	free(err);

	const char *args2[] = { "check", "-c", "/nonexistent/splicer.conf", NULL };
	st = h_run_capture(bin, args2, 5000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && err &&
			!strcmp(err, "/nonexistent/splicer.conf: cannot open: No such file or directory\n"),
		"missing file: status %d, stderr: %s", st, err ? err : "");
	free(out);
	free(err);
}

Test(integ, config_check_valid_file, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	const char *path = h_conf_write("ok.conf",
				      "# a comment\n"
				      "[global]\n"
				      "workers = 2\n"
				      "pipe_size = 256k   ; inline comment\n"
				      "busy_poll = 0      # another inline comment\n"
				      "\n"
				      "[route web]\n"
				      "listen = 127.0.0.1:18080 [::1]:18080\n"
				      "backend = 127.0.0.1:18090 weight=3\n"
				      "backend = 127.0.0.1:18091\n"
				      "balance = leastconn\n"
				      "connect-timeout = 2s\n"
				      "\n"
				      "[route api]\n"
				      "listen = unix:@splicer-check-test\n"
				      "backend = unix:/run/app.sock\n"
				      "engine = copy\n");
	const char *args[] = { "check", "-c", path, NULL };
	char *out = NULL, *err = NULL, want[400];
	int st = h_run_capture(bin, args, 5000, &out, &err);

	snprintf(want, sizeof want, "%s: ok: 2 routes, 3 listen addresses, 3 backends\n", path);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "check of a valid file: status %d, "
		"stderr: %s", st, err ? err : "");
	H_CHECK(out && !strcmp(out, want), "check printed '%s', expected '%s'", out ? out : "", want);
	free(out);
	free(err);
}

/* Issue 12, item 17: layout an editor adds. An indented key was read as a
 * continuation of the key above (two bad listen addresses and a route
 * without backend); a UTF-8 byte-order mark hid the first section header,
 * so its keys were "outside a section". Both files are valid now. */
Test(integ, config_indentation_and_byte_order_mark_are_layout, .init = h_init, .fini = h_fini,
     .timeout = 30)
{
	const char *bin = h_binary(0);
	const char *files[] = {
		h_conf_write("indented.conf", "[global]\n    workers = 2\n[route web]\n"
					    "    listen = 127.0.0.1:18080\n\tbackend = 127.0.0.1:18090\n"
					    "    # an indented comment\n\t; and another\n"
					    "  [route api]\n  listen = 127.0.0.1:18081\n"
					    "  backend = 127.0.0.1:18091\n"),
		h_conf_write("bom.conf", "\xef\xbb\xbf[route web]\nlisten = 127.0.0.1:18080\n"
				       "backend = 127.0.0.1:18090\n"),
	};
	const char *routes[] = { "2 routes, 2 listen addresses, 2 backends",
				 "1 route, 1 listen address, 1 backend" };

	for (int i = 0; i < 2; i++) {
		const char *args[] = { "check", "-c", files[i], NULL };
		char *out = NULL, *err = NULL, want[400];
		int st = h_run_capture(bin, args, 5000, &out, &err);
		snprintf(want, sizeof want, "%s: ok: %s\n", files[i], routes[i]);
		H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && out && !strcmp(out, want),
			"check %s: status %d, stdout '%s' (expected '%s'), stderr:\n%s", files[i], st,
			out ? out : "", want, err ? err : "");
		free(out);
		free(err);
	}
}

/* Issue 12, item 17: `check -c DIR` said "no [route NAME] section" (fopen
 * opens a directory; reading it looked like an empty file), and a second
 * -c was ignored in silence. */
Test(integ, config_directory_and_second_file_are_refused, .init = h_init, .fini = h_fini,
     .timeout = 30)
{
	const char *bin = h_binary(0);
	const char *ok = h_conf_write("one.conf", "[route web]\nlisten = 127.0.0.1:18080\n"
						"backend = 127.0.0.1:18090\n");
	char want[600], other[300];
	char *out = NULL, *err = NULL;

	snprintf(other, sizeof other, "%s", ok);
	{
		const char *args[] = { "check", "-c", h_tmpdir(), NULL };
		int st = h_run_capture(bin, args, 5000, &out, &err);
		snprintf(want, sizeof want, "%s: is a directory, not a config file\n", h_tmpdir());
		H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && err && !strcmp(err, want),
			"check -c DIR: status %d, stderr '%s', expected '%s'", st, err ? err : "", want);
		free(out);
		free(err);
	}
	const char *forms[][6] = { { "check", "-c", ok, "-c", "/nonexistent/two.conf", NULL },
				   { "check", "--config", ok, "--config=/nonexistent/two.conf", NULL },
				   { "-c", ok, "-c", "/nonexistent/two.conf", NULL } };
	const char *opt[] = { "-c", "--config", "-c" };
	for (int i = 0; i < 3; i++) {
		int st = h_run_capture(bin, forms[i], 5000, &out, &err);
		snprintf(want, sizeof want, "splicer: option '%s' given twice (%s, then "
					    "/nonexistent/two.conf): one config file per run\n", opt[i], other);
		H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0 && err && !strcmp(err, want),
			"form %d: status %d, stderr '%s', expected '%s'", i, st, err ? err : "", want);
		free(out);
		free(err);
	}
}

/* The n-th address of the proxy's ready line. */
static void ready_addr(const struct h_proxy *p, int n, struct h_addr *out)
{
	const char *s = strstr(p->ready_line, "listening on ");
	char buf[160];

	H_CHECK(s, "no ready line");
	s += strlen("listening on ");
	for (int i = 0; i < n && s; i++)
		if ((s = strchr(s, ',')))
			s += 2;
	H_CHECK(s && sscanf(s, "%159[^, ]", buf) == 1 && h_addr_parse(buf, out) == 0,
		"ready line '%s' has no address %d", p->ready_line, n);
}

static void proxy_from_file(struct h_proxy *p, const char *bin, const char *path,
			    const char *const *extra)
{
	const char *args[16] = { "-c", path };
	int n = 2;
	char err[512];

	for (int i = 0; extra && extra[i] && n < 15; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	H_CHECK(h_proxy_start(p, bin, args, err, sizeof err) == 0, "proxy -c %s: %s", path, err);
}

static void case_routes(const char *bin, const char *engine)
{
	static struct h_tag_server a, b;
	static struct h_proxy p;
	struct h_addr web, api;
	char text[600];

	h_tag_start(&a, 'A', 0, 0);
	h_tag_start(&b, 'B', 0, 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\n\n"
		 "[route web]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d\nengine = %s\n\n"
		 "[route api]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d\nengine = %s\n",
		 a.port, engine, b.port, engine);
	proxy_from_file(&p, bin, h_conf_write("routes.conf", text), NULL);
	ready_addr(&p, 0, &web);
	ready_addr(&p, 1, &api);
	for (int i = 0; i < 20; i++) {
		char t1 = h_tag_of(&web, NULL), t2 = h_tag_of(&api, NULL);
		H_CHECK(t1 == 'A' && t2 == 'B', "round %d: route web reached '%c', api reached '%c' "
						 "(expected A and B)", i, t1 ? t1 : '-', t2 ? t2 : '-');
	}
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&b);
}

H_ENGINE_CASES(routes, 60)

Test(integ, config_weighted_roundrobin_3000, .init = h_init, .fini = h_fini, .timeout = 120)
{
	const char *bin = h_binary(0);
	static struct h_tag_server a, b, c;
	static struct h_proxy p;
	char text[600];
	int count[3] = { 0 }, fails = 0;
	const int total = 3000, weight[3] = { 1, 3, 2 };

	h_tag_start(&a, 'A', 0, 0);
	h_tag_start(&b, 'B', 0, 0);
	h_tag_start(&c, 'C', 0, 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\n[route w]\nlisten = 127.0.0.1:0\n"
		 "backend = 127.0.0.1:%d 127.0.0.1:%d weight=3 127.0.0.1:%d weight=2\n",
		 a.port, b.port, c.port);
	proxy_from_file(&p, bin, h_conf_write("weights.conf", text), NULL);
	for (int i = 0; i < total; i++) {
		char t = h_tag_of(&p.addr, NULL);
		if (t >= 'A' && t <= 'C')
			count[t - 'A']++;
		else
			fails++;
	}
	H_CHECK(fails == 0, "%d of %d sessions got no tag", fails, total);
	for (int i = 0; i < 3; i++) {
		double want = total * weight[i] / 6.0;
		H_CHECK(count[i] >= want * 0.95 && count[i] <= want * 1.05,
			"backend %c (weight %d) got %d of %d sessions, expected %.0f +-5%% (A %d, B %d, C %d)",
			'A' + i, weight[i], count[i], total, want, count[0], count[1], count[2]);
	}
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&b);
	h_tag_stop(&c);
}

Test(integ, config_leastconn_prefers_idle_backend, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_tag_server a, b;
	static struct h_proxy p;
	char text[600];
	int held[4], nheld = 0;

	/* Backends hold their sessions open: leastconn must see them as busy. */
	h_tag_start(&a, 'A', 1, 0);
	h_tag_start(&b, 'B', 1, 0);
	snprintf(text, sizeof text,
		 "[route lc]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d 127.0.0.1:%d\n"
		 "balance = leastconn\n", a.port, b.port);
	proxy_from_file(&p, bin, h_conf_write("leastconn.conf", text), NULL);
	/* Three sessions held on whichever backend they land: then the next
	 * ones must all go to the one with fewer, until the counts are equal. */
	char first = h_tag_of(&p.addr, &held[nheld++]);
	H_CHECK(first == 'A' || first == 'B', "first session got no tag");
	char second = h_tag_of(&p.addr, &held[nheld++]);
	H_CHECK(second && second != first, "with %c busy (1 session) and the other idle, leastconn "
					   "sent the second session to %c", first, second ? second : '-');
	/* Both hold one now; release the first: its backend is idle again. */
	close(held[0]);
	h_sleep_ms(300); /* the proxy sees the close and releases the backend */
	for (int i = 0; i < 3; i++) {
		int fd;
		char t = h_tag_of(&p.addr, &fd);
		H_CHECK(t == first, "after %c's session ended, session %d went to %c, not the idle %c",
			first, i, t ? t : '-', first);
		close(fd);
		h_sleep_ms(200);
	}
	close(held[1]);
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&b);
}

Test(integ, config_command_line_overrides_file, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_tag_server a;
	static struct h_proxy p;
	char text[600];

	h_tag_start(&a, 'A', 0, 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 1\n[route r]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d\n"
		 "engine = splice\nidle_timeout = 1m\n", a.port);
	const char *extra[] = { "--engine", "copy", "--workers", "2", NULL };
	proxy_from_file(&p, bin, h_conf_write("override.conf", text), extra);
	H_CHECK(h_tag_of(&p.addr, NULL) == 'A', "no session through the proxy");
	int route_ok = h_log_lines(&p, "route r:", "engine copy", "idle 60000 ms", NULL);
	int workers_ok = h_log_lines(&p, "workers 2;", NULL);
	H_CHECK(route_ok && workers_ok, "the startup log does not show --engine copy over the file's "
					"splice (with its idle_timeout kept) and --workers 2 (route %d, "
					"workers %d)", route_ok, workers_ok);
	h_proxy_down(&p);
	h_tag_stop(&a);

	/* -l/-b cannot be mixed with -c. */
	const char *args[] = { "-c", "/dev/null", "-l", "127.0.0.1:0", NULL };
	char *out = NULL, *err = NULL;
	int st = h_run_capture(bin, args, 5000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && err &&
			strstr(err, "option '-l': routes come from /dev/null when -c is given"),
		"-c with -l: status %d, stderr %s", st, err ? err : "");
	free(out);
	free(err);
}

/* The backend tag seen by a client bound to source address 127.0.0.src. */
static char tag_from(const struct h_addr *proxy, unsigned src)
{
	struct sockaddr_in from = { .sin_family = AF_INET };
	char c = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	from.sin_addr.s_addr = htonl(0x7f000000u | src);
	h_set_timeouts(fd, 1000);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&from, sizeof from) == 0 &&
	    connect(fd, (const struct sockaddr *)&proxy->ss, proxy->len) == 0 &&
	    h_recv_exact(fd, &c, 1, h_now_ms() + 2000) != 0)
		c = 0;
	if (fd >= 0)
		close(fd);
	return c;
}

Test(integ, config_maglev_same_client_same_backend_across_restarts, .init = h_init,
     .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_tag_server srv[3];
	static struct h_proxy p;
	char text[600], first[41] = "", again[41] = "";
	enum { CLIENTS = 40 };

	for (int i = 0; i < 3; i++)
		h_tag_start(&srv[i], (char)('A' + i), 0, 0);
	snprintf(text, sizeof text,
		 "[route m]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d\n"
		 "balance = maglev\n", srv[0].port, srv[1].port, srv[2].port);
	const char *path = h_conf_write("maglev.conf", text);
	for (int run = 0; run < 2; run++) {
		char *seen = run ? again : first;
		proxy_from_file(&p, bin, path, NULL);
		for (unsigned k = 0; k < CLIENTS; k++) {
			seen[k] = tag_from(&p.addr, 2 + k);
			H_CHECK(seen[k], "client 127.0.0.%u: no backend tag", 2 + k);
			/* the same client again, from another port: the same backend */
			char t = tag_from(&p.addr, 2 + k);
			H_CHECK(t == seen[k], "client 127.0.0.%u went to %c, then to %c", 2 + k, seen[k],
				t ? t : '-');
		}
		h_proxy_down(&p);
	}
	H_CHECK(!strcmp(first, again), "a restart moved clients: before %s, after %s", first, again);
	int used[3] = { 0 };
	for (int k = 0; k < CLIENTS; k++)
		used[first[k] - 'A'] = 1;
	H_CHECK(used[0] + used[1] + used[2] == 3, "%d clients used only some backends: %s", CLIENTS,
		first);
	for (int i = 0; i < 3; i++)
		h_tag_stop(&srv[i]);
}

/* Waits for the count-th log line with both needles. */
static int64_t wait_log(const struct h_proxy *p, const char *n1, const char *n2, int count, int ms)
{
	int64_t t0 = h_now_ms();
	while (h_log_lines(p, n1, n2, NULL) < count && h_now_ms() - t0 < ms)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(p, n1, n2, NULL) >= count, "no log line %d with \"%s\" \"%s\" within %d ms",
		count, n1, n2 ? n2 : "", ms);
	return h_now_ms() - t0;
}

Test(integ, health_checks_mark_down_and_up, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_tag_server a, b;
	static struct h_proxy p;
	char text[600], bname[64], aname[64];
	int seen[2];

	h_tag_start(&a, 'A', 0, 0);
	h_tag_start(&b, 'B', 0, 0);
	int bport = b.port;
	snprintf(aname, sizeof aname, "backend 127.0.0.1:%d", a.port);
	snprintf(bname, sizeof bname, "backend 127.0.0.1:%d", bport);
	snprintf(text, sizeof text,
		 "[route h]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d 127.0.0.1:%d\n"
		 "check = tcp\ncheck_interval = 100ms\ncheck_timeout = 200ms\nrise = 2\nfall = 2\n",
		 a.port, bport);
	const char *extra[] = { "-v", NULL };
	proxy_from_file(&p, bin, h_conf_write("health.conf", text), extra);

	/* B dies: marked down within fall x interval (+ a round of slack), and
	 * no session tries it afterwards. */
	h_tag_stop(&b);
	int64_t took = wait_log(&p, bname, "is down", 1, 1500);
	/* fall x interval = 200 ms, plus up to one interval of phase; the rest
	 * is slack for a loaded machine */
	H_CHECK(took <= 1000, "a dead backend was marked down after %lld ms (fall 2 x 100 ms)",
		(long long)took);
	int tried_before = h_log_lines(&p, bname, "connect:", NULL);
	seen[0] = seen[1] = 0;
	for (int i = 0; i < 20; i++) {
		char t = h_tag_of(&p.addr, NULL);
		H_CHECK(t == 'A', "session %d with B down reached %c", i, t ? t : '-');
	}
	H_CHECK(h_log_lines(&p, bname, "connect:", NULL) == tried_before,
		"sessions still tried the backend marked down (%d connect failures logged, %d before)",
		h_log_lines(&p, bname, "connect:", NULL), tried_before);

	/* B comes back on its port: up after rise good checks, and used again. */
	h_tag_start(&b, 'B', 0, bport);
	took = wait_log(&p, bname, "is up", 1, 1500);
	H_CHECK(took <= 1000, "a revived backend came up after %lld ms (rise 2 x 100 ms)", (long long)took);
	for (int i = 0; i < 20; i++) {
		char t = h_tag_of(&p.addr, NULL);
		H_CHECK(t == 'A' || t == 'B', "session %d got no tag", i);
		seen[t - 'A']++;
	}
	H_CHECK(seen[0] && seen[1], "with both up, 20 sessions went A %d, B %d times", seen[0], seen[1]);

	/* every backend down: clients are closed at once, and counted */
	h_tag_stop(&a);
	h_tag_stop(&b);
	wait_log(&p, aname, "is down", 1, 1500);
	wait_log(&p, bname, "is down", 2, 1500);
	for (int i = 0; i < 3; i++) {
		int fd = h_connect(&p.addr, 2000);
		H_CHECK(fd >= 0, "connect with every backend down: %s", strerror(errno));
		int64_t t0 = h_now_ms();
		int rc = h_expect_eof(fd, t0 + 2000);
		close(fd);
		H_CHECK((rc == 0 || rc == -ECONNRESET) && h_now_ms() - t0 < 300,
			"with every backend down, a client waited %lld ms (rc %d)",
			(long long)(h_now_ms() - t0), rc);
	}
	h_proxy_down(&p);
	H_CHECK(h_log_lines(&p, "all-backends-down 3", NULL) == 1,
		"the totals line does not count 3 clients closed with every backend down");
}

/* ---- SIGHUP reload ------------------------------------------------------- */

struct client_loop {
	struct h_addr target;
	_Atomic int stop;
	_Atomic int ok, failed;
	char last_fail[128];
	pthread_t thr;
};

/* Connects through the proxy again and again; every session must get the
 * backend's tag. */
static void *client_loop_main(void *arg)
{
	struct client_loop *c = arg;

	while (!atomic_load(&c->stop)) {
		int fd = h_connect(&c->target, 2000);
		char t = 0;
		if (fd < 0) {
			snprintf(c->last_fail, sizeof c->last_fail, "connect: %s", strerror(errno));
			atomic_fetch_add(&c->failed, 1);
			continue;
		}
		int rc = h_recv_exact(fd, &t, 1, h_now_ms() + 2000);
		close(fd);
		if (rc || t != 'A') {
			snprintf(c->last_fail, sizeof c->last_fail, "no tag: %s",
				 rc ? strerror(-rc) : "wrong tag");
			atomic_fetch_add(&c->failed, 1);
		} else {
			atomic_fetch_add(&c->ok, 1);
		}
	}
	return NULL;
}

static void write_reload_conf(const char *path, int pa, int pb, int with_b, int a_port, int b_port,
			      int broken)
{
	FILE *f = fopen(path, "we");
	H_CHECK(f, "cannot write %s", path);
	fprintf(f, "[global]\nworkers = 2\n\n[route a]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n",
		pa, a_port);
	if (with_b)
		fprintf(f, "\n[route b]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n", pb, b_port);
	if (broken)
		fprintf(f, "balance = random\n");
	fclose(f);
}

Test(integ, reload_keeps_listeners_adds_and_removes_routes, .init = h_init, .fini = h_fini,
     .timeout = 120)
{
	const char *bin = h_binary(0);
	static struct h_tag_server a, b;
	static struct h_proxy p;
	static struct client_loop cl;
	char path[300];
	int pa = h_free_port(), pb = h_free_port();
	struct h_addr addr_b;

	h_tag_start(&a, 'A', 0, 0);
	h_tag_start(&b, 'B', 0, 0);
	snprintf(path, sizeof path, "%s/reload.conf", h_tmpdir());
	write_reload_conf(path, pa, pb, 0, a.port, b.port, 0);
	proxy_from_file(&p, bin, path, NULL);
	char tb[64];
	snprintf(tb, sizeof tb, "127.0.0.1:%d", pb);
	H_CHECK(h_addr_parse(tb, &addr_b) == 0, "address");
	memset(&cl, 0, sizeof cl);
	cl.target = p.addr;
	H_CHECK(pthread_create(&cl.thr, NULL, client_loop_main, &cl) == 0, "client loop thread");

	for (int i = 1; i <= 20; i++) {
		int with_b = i % 2;
		write_reload_conf(path, pa, pb, with_b, a.port, b.port, 0);
		kill(p.pid, SIGHUP);
		wait_log(&p, "SIGHUP: reloaded", NULL, i, 3000);
		if (with_b) {
			char t = h_tag_of(&addr_b, NULL);
			H_CHECK(t == 'B', "reload %d added route b on %s, but it answered '%c'", i, tb,
				t ? t : '-');
		} else {
			int fd = h_connect(&addr_b, 1000);
			int e = errno;
			if (fd >= 0)
				close(fd);
			H_CHECK(fd < 0 && e == ECONNREFUSED, "reload %d removed route b, but %s %s", i, tb,
				fd >= 0 ? "still accepts" : strerror(e));
		}
		h_sleep_ms(50);
	}
	/* an invalid file: reported, and the running config stays */
	write_reload_conf(path, pa, pb, 1, a.port, b.port, 1);
	kill(p.pid, SIGHUP);
	wait_log(&p, "is not valid", NULL, 1, 3000);
	H_CHECK(h_log_lines(&p, "balance: invalid value 'random'", NULL) == 1,
		"the bad line was not reported with its message");
	int fd = h_connect(&addr_b, 1000);
	int e = errno;
	if (fd >= 0)
		close(fd);
	H_CHECK(fd < 0 && e == ECONNREFUSED, "after a rejected reload, route b (absent from the running "
					     "config) is reachable");
	h_sleep_ms(200);
	atomic_store(&cl.stop, 1);
	pthread_join(cl.thr, NULL);
	H_CHECK(atomic_load(&cl.failed) == 0 && atomic_load(&cl.ok) > 20,
		"across 20 reloads, a client looping on route a had %d failed and %d good sessions "
		"(last failure: %s)", atomic_load(&cl.failed), atomic_load(&cl.ok), cl.last_fail);
	H_CHECK(h_tag_of(&p.addr, NULL) == 'A', "route a stopped answering");
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&b);
}

/* The configs users copy must stay valid: the README's quick start (the
 * heredoc into /tmp/splicer.conf) and doc/configuration.md's example. */

/* The lines of doc between the first line containing start and the next
 * line starting with end (leading spaces dropped), into buf. Returns the
 * number of lines; skips the test when doc is not here. */
static int doc_block(const char *doc, const char *start, const char *end, char *buf, size_t len)
{
	FILE *in = fopen(doc, "re");
	char line[512];
	int inside = 0, lines = 0;
	size_t n = 0;

	if (!in)
		cr_skip_test("%s not in the working directory", doc);
	buf[0] = '\0';
	while (fgets(line, sizeof line, in)) {
		const char *t = line + strspn(line, " ");
		if (!inside && strstr(t, start)) {
			inside = 1;
			continue;
		}
		if (inside && !strncmp(t, end, strlen(end)))
			break;
		if (inside && n + strlen(t) < len) {
			n += (size_t)snprintf(buf + n, len - n, "%s", t);
			lines++;
		}
	}
	fclose(in);
	return lines;
}

static void example_is_valid(const char *bin, const char *doc, const char *start, const char *end)
{
	char text[8192];

	H_CHECK(doc_block(doc, start, end, text, sizeof text) > 8, "no example config found in %s", doc);
	const char *path = h_conf_write("example.conf", text);
	/* the file alone: its user, log directory and listen addresses are the
	 * reader's host's, not this test machine's (test_preflight.c checks those) */
	const char *args[] = { "check", "--syntax-only", "-c", path, NULL };
	char *o = NULL, *e = NULL;
	int st = h_run_capture(bin, args, 5000, &o, &e);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && o && strstr(o, ": ok: "),
		"the example config of %s fails check: %s%s", doc, o ? o : "", e ? e : "");
	free(o);
	free(e);
}

Test(integ, config_readme_example_is_valid, .init = h_init, .fini = h_fini, .timeout = 30)
{
	example_is_valid(h_binary(0), "README.md", "cat > /tmp/splicer.conf <<'EOF'", "EOF");
	example_is_valid(h_binary(0), "doc/configuration.md", "```ini", "```");
}

#define QUICK_START "cat > /tmp/splicer.conf <<'EOF'"

/* The quick start's config, then the route its `printf '...' >>` line
 * appends (its \n made newlines), into conf and extra. */
static void quick_start(char *conf, size_t clen, char *extra, size_t elen)
{
	char text[16384];
	const char *p, *q;
	size_t n = 0;

	H_CHECK(doc_block("README.md", QUICK_START, "EOF", conf, clen) > 8, "no quick start config in "
		"README.md (a heredoc: %s)", QUICK_START);
	doc_block("README.md", "## Quick start", "## Documentation", text, sizeof text);
	p = strstr(text, "printf '[route ");
	q = p ? strstr(p, "' >> /tmp/splicer.conf") : NULL;
	H_CHECK(p && q, "the README's quick start appends no route (printf '[route ...' >> /tmp/splicer.conf)");
	for (p += strlen("printf '"); p < q && n + 1 < elen; p++)
		extra[n++] = p[0] == '\\' && p[1] == 'n' ? (p++, '\n') : *p;
	extra[n] = '\0';
}

/* One address of a listen or stats line: its host ("" for :PORT and *:PORT)
 * and port. */
struct cf_addr {
	char host[96];
	int port;
};

/* The listen and stats addresses of a config text. */
static int listen_addrs(const char *text, struct cf_addr *out, int max)
{
	int n = 0;

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *v = l + strspn(l, " \t");
		if (strncmp(v, "listen", 6) && strncmp(v, "stats", 5))
			continue;
		v = strchr(v, '=');
		for (v = v ? v + 1 : ""; *v && *v != '\n' && *v != '#' && n < max;) {
			char tok[96];
			int k = 0;
			v += strspn(v, " \t");
			while (*v && !strchr(" \t\n#", *v) && k < 95)
				tok[k++] = *v++;
			tok[k] = '\0';
			char *colon = strrchr(tok, ':');
			if (!k || !colon)
				continue;
			*colon = '\0';
			snprintf(out[n].host, sizeof out[n].host, "%s", strcmp(tok, "*") ? tok : "");
			out[n++].port = atoi(colon + 1);
		}
	}
	return n;
}

/* A user who enabled the packaged service (contrib/splicer.conf) and then
 * follows the quick start gets no "Address already in use": the two share
 * no listen or stats address (a wildcard host clashes with every host). */
Test(integ, config_readme_quick_start_apart_from_packaged, .init = h_init, .fini = h_fini, .timeout = 30)
{
	char conf[8192], extra[512], pkg[8192], all[9000];
	struct cf_addr q[32], k[32];
	FILE *f = fopen("contrib/splicer.conf", "re");
	size_t n;

	H_CHECK(f, "contrib/splicer.conf: %s", strerror(errno));
	n = fread(pkg, 1, sizeof pkg - 1, f);
	fclose(f);
	pkg[n] = '\0';
	quick_start(conf, sizeof conf, extra, sizeof extra);
	snprintf(all, sizeof all, "%s%s", conf, extra);
	int nq = listen_addrs(all, q, 32), nk = listen_addrs(pkg, k, 32);
	H_CHECK(nq >= 4 && nk >= 2, "addresses found: %d in the quick start, %d in contrib/splicer.conf",
		nq, nk);
	for (int i = 0; i < nq; i++)
		for (int j = 0; j < nk; j++)
			H_CHECK(q[i].port != k[j].port || (q[i].host[0] && k[j].host[0] &&
							   strcmp(q[i].host, k[j].host)),
				"the README's quick start and contrib/splicer.conf both use %s:%d and %s:%d",
				q[i].host, q[i].port, k[j].host, k[j].port);
}

/* Every 127.0.0.1:PORT of in, with PORT replaced: from[i] by to[i], any
 * other port by a free one (the same for each occurrence). */
static void map_ports(const char *in, char *out, size_t len, int *from, int *to, int *n, int max)
{
	size_t o = 0;

	while (*in && o + 1 < len) {
		if (strncmp(in, "127.0.0.1:", 10)) {
			out[o++] = *in++;
			continue;
		}
		char *end;
		int port = (int)strtol(in + 10, &end, 10), i;
		for (i = 0; i < *n && from[i] != port; i++)
			;
		if (i == *n) {
			H_CHECK(*n < max, "more than %d ports", max);
			from[i] = port;
			to[(*n)++] = h_free_port();
		}
		o += (size_t)snprintf(out + o, len - o, "127.0.0.1:%d", to[i]);
		in = end;
	}
	out[o] = '\0';
}

/* The proxy's address for the quick start's 127.0.0.1:port. */
static struct h_addr mapped(const int *from, const int *to, int n, int port)
{
	struct h_addr a;
	char text[32];
	int i;

	for (i = 0; i < n && from[i] != port; i++)
		;
	H_CHECK(i < n, "the quick start has no 127.0.0.1:%d", port);
	snprintf(text, sizeof text, "127.0.0.1:%d", to[i]);
	H_CHECK(h_addr_parse(text, &a) == 0, "address %s", text);
	return a;
}

/* The README's quick start, run: its config (its ports mapped to free
 * ones, the two web servers and SSH to backends of the test) passes a full
 * check, starts, serves each route (web from both servers), takes the
 * appended web2 route on SIGHUP, and counts every session in /metrics. */
Test(integ, config_readme_quick_start_runs, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_tag_server w1, w2, sshd;
	static struct h_proxy p;
	char conf[8192], extra[512], text[8192], more[512], err[512];
	int from[16] = { 8001, 8002, 22 }, to[16], n = 3;
	struct h_addr stats, web, ssh, web2;

	quick_start(conf, sizeof conf, extra, sizeof extra);
	h_tag_start(&w1, '1', 0, 0);
	h_tag_start(&w2, '2', 0, 0);
	h_tag_start(&sshd, 'S', 0, 0);
	to[0] = w1.port;
	to[1] = w2.port;
	to[2] = sshd.port;
	map_ports(conf, text, sizeof text, from, to, &n, 16);
	map_ports(extra, more, sizeof more, from, to, &n, 16);
	const char *path = h_conf_write("quick-start.conf", text);

	const char *check[] = { "check", "-c", path, NULL };
	char *o = NULL, *e = NULL;
	int st = h_run_capture(bin, check, 5000, &o, &e);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && o &&
			strstr(o, ": ok: 2 routes, 2 listen addresses, 3 backends"),
		"check of the quick start: status %d: %s%s", st, o ? o : "", e ? e : "");
	free(o);
	free(e);
	const char *args[] = { "-c", path, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "start: %s", err);
	web = mapped(from, to, n, 18080);
	ssh = mapped(from, to, n, 2222);
	web2 = mapped(from, to, n, 18081);
	char a = h_tag_of(&web, NULL), b = h_tag_of(&web, NULL);
	H_CHECK((a == '1' && b == '2') || (a == '2' && b == '1'), "route web: two sessions went to "
		"'%c' and '%c', not one web server each", a ? a : '-', b ? b : '-');
	H_CHECK(h_tag_of(&ssh, NULL) == 'S', "route ssh does not reach its backend");

	FILE *f = fopen(path, "ae");
	H_CHECK(f && fputs(more, f) >= 0 && fclose(f) == 0, "append web2");
	kill(p.pid, SIGHUP);
	char t = 0;
	for (int64_t end = h_now_ms() + 5000; !t && h_now_ms() < end;)
		if (!(t = h_tag_of(&web2, NULL)))
			h_sleep_ms(50);
	H_CHECK(t == '2', "after SIGHUP, route web2 answered '%c', not the second web server", t ? t : '-');
	H_CHECK(h_tag_of(&web, NULL) && h_tag_of(&ssh, NULL) == 'S', "the old routes stopped after the reload");

	struct h_addr want = mapped(from, to, n, 19180);
	H_CHECK(h_stats_addr(&p, &stats) == 0 && h_addr_port(&stats) == h_addr_port(&want),
		"the proxy's stats address is not the quick start's");
	/* closed sessions are counted at once, but a scrape may race the
	 * close of the last one: bounded retries */
	long long sw = -1, ss = -1, s2 = -1;
	for (int64_t end = h_now_ms() + 3000; h_now_ms() < end; h_sleep_ms(50)) {
		sw = h_metric(&stats, "splicer_route_sessions_total{route=\"web\"}");
		ss = h_metric(&stats, "splicer_route_sessions_total{route=\"ssh\"}");
		s2 = h_metric(&stats, "splicer_route_sessions_total{route=\"web2\"}");
		if (sw == 3 && ss == 2 && s2 == 1)
			break;
	}
	H_CHECK(sw == 3 && ss == 2 && s2 == 1, "route_sessions_total: web %lld (3 expected), ssh %lld (2), "
		"web2 %lld (1)", sw, ss, s2);
	h_proxy_down(&p);
	h_tag_stop(&w1);
	h_tag_stop(&w2);
	h_tag_stop(&sshd);
}
