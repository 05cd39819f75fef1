/* SPDX-License-Identifier: MIT */
/* Config files made of parts: `include = PATTERN` (src/ctl/config/
 * config_file.c: sorted glob matches, relative to the including file,
 * every message at the included FILE:LINE, loops and depth refused, the
 * sandbox letting a reload read an included directory elsewhere) and
 * ${VAR} / ${VAR:-default} in values (config_env.c). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Writes text to path (made under h_tmpdir(), directories too). */
static void put(const char *rel, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(const char *rel, const char *fmt, ...)
{
	char path[512], text[4096];
	va_list ap;

	snprintf(path, sizeof path, "%s/%s", h_tmpdir(), rel);
	for (char *s = strchr(path + strlen(h_tmpdir()) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		mkdir(path, 0755);
		*s = '/';
	}
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	FILE *f = fopen(path, "w");
	H_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

/* `splicer check [--syntax-only] -c REL`: its status, stderr into *err. */
static int check(const char *bin, const char *rel, int syntax_only, char **out, char **err)
{
	char path[512];
	const char *args[] = { "check", "-c", path, NULL, NULL };

	snprintf(path, sizeof path, "%s/%s", h_tmpdir(), rel);
	if (syntax_only) {
		args[1] = "--syntax-only";
		args[2] = "-c";
		args[3] = path;
	}
	int st = h_run_capture(bin, args, 10000, out, err);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* err holds the line "<tmpdir>/<rel_line>" (rel_line: "a.conf:3: message"). */
static void expect_line(const char *err, const char *rel_line)
{
	char want[1024];

	snprintf(want, sizeof want, "%s/%s\n", h_tmpdir(), rel_line);
	H_CHECK(err && strstr(err, want), "expected the line\n%sin stderr:\n%s", want, err ? err : "");
}

/* err holds the text fmt makes. */
static void expect_text(const char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect_text(const char *err, const char *fmt, ...)
{
	char want[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof want, fmt, ap);
	va_end(ap);
	H_CHECK(err && strstr(err, want), "expected\n%sin\n%s", want, err ? err : "");
}

Test(integ, config_env_vars_and_defaults, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server echo;
	static struct h_proxy p;
	char *out = NULL, *err = NULL, path[512], want[512];
	int port = h_free_port();

	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo server");
	/* set, defaulted (unset and empty), $$, no second expansion */
	setenv("SPL_IT_PORT", "0", 1);
	snprintf(want, sizeof want, "%d", port);
	setenv("SPL_IT_PORT", want, 1);
	setenv("SPL_IT_BACKEND", echo.addr.text, 1);
	setenv("SPL_IT_EMPTY", "", 1);
	setenv("SPL_IT_NESTED", "${SPL_IT_PORT}", 1);
	unsetenv("SPL_IT_UNSET");
	put("env.conf", "[global]\nworkers = ${SPL_IT_UNSET:-2}\nengine = ${SPL_IT_EMPTY:-copy}\n"
			"[route web]\nlisten = 127.0.0.1:${SPL_IT_PORT}\nbackend = ${SPL_IT_BACKEND}\n"
			"idle_timeout = ${SPL_IT_UNSET:-5m}   # $$ is a dollar\n");
	H_CHECK(check(bin, "env.conf", 0, &out, &err) == 0, "check of env.conf: %s", err ? err : "");
	free(out);
	free(err);
	snprintf(path, sizeof path, "%s/env.conf", h_tmpdir());
	const char *args[] = { "-c", path, NULL };
	char why[512];
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "start: %s", why);
	snprintf(want, sizeof want, "127.0.0.1:%d", port);
	H_CHECK(!strcmp(p.addr.text, want), "listen = 127.0.0.1:${SPL_IT_PORT} listens on %s, not %s",
		p.addr.text, want);
	H_CHECK(h_log_lines(&p, "engine copy", NULL) >= 1 && h_log_lines(&p, "workers 2", NULL) >= 1,
		"the defaults (workers 2, engine copy) were not taken");
	H_CHECK(h_echo_roundtrip(&p.addr, 65536, 7, 5000, why, sizeof why) == 0,
		"bytes through the route of expanded addresses: %s", why);
	h_proxy_down(&p);

	/* the errors, each at its line, naming the variable */
	static char big[5001];
	memset(big, 'a', sizeof big - 1);
	setenv("SPL_IT_BIG", big, 1);
	setenv("SPL_IT_NL", "127.0.0.1:1\n[route evil]", 1);
	put("env-bad.conf", "[route web]\nlisten = 127.0.0.1:${SPL_IT_UNSET}\n"
			    "backend = ${SPL_IT_NESTED}\n"
			    "engine = ${SPL_IT_BAD\n"
			    "balance = ${1X}\n"
			    "idle_timeout = ${SPL_IT_EMPTY}\n"
			    "sni = $${SPL_IT_PORT}.example\n"
			    "alpn = ${SPL_IT_BIG}\n"
			    "allow = ${SPL_IT_NL}\n");
	H_CHECK(check(bin, "env-bad.conf", 1, &out, &err) == 1, "check of env-bad.conf: %s",
		err ? err : "");
	expect_line(err, "env-bad.conf:2: listen: environment variable SPL_IT_UNSET is not set "
			 "(give a default: ${SPL_IT_UNSET:-VALUE})");
	/* the value "${SPL_IT_PORT}" is taken as it is: not expanded again */
	expect_line(err, "env-bad.conf:3: backend '${SPL_IT_PORT}': address '${SPL_IT_PORT}': missing "
			 "':port' (forms: host:port, [v6]:port, :port, *:port, unix:/path)");
	expect_line(err, "env-bad.conf:4: engine: '${' without its closing '}' (a literal '$' is "
			 "written $$)");
	expect_line(err, "env-bad.conf:5: balance: '${1X}': a variable name is letters, digits and "
			 "'_', not starting with a digit");
	expect_line(err, "env-bad.conf:6: 'idle_timeout' has no value: '${SPL_IT_EMPTY}' expanded to "
			 "nothing");
	/* $$ is one '$': the sni is the text ${spl_it_port}.example (not a
	 * host name), not the port's digits */
	expect_line(err, "env-bad.conf:7: sni '${spl_it_port}.example' is not a host name (labels of "
			 "1-63 letters, digits, '-' or '_', 253 bytes at most)");
	expect_line(err, "env-bad.conf:8: alpn: longer than 4095 characters once its ${...} are "
			 "expanded");
	expect_line(err, "env-bad.conf:9: allow: environment variable SPL_IT_NL holds a control "
			 "character (a newline?)");
	H_CHECK(!strstr(err, "has no listen address"), "the listen line's problem was said twice:\n%s",
		err);
	free(out);
	free(err);
	h_server_stop(&echo);
}

Test(integ, config_include_sorted_file_line_and_loops, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	char *out = NULL, *err = NULL;

	/* order: 10-a before 20-b (a duplicate route says which came first),
	 * a .conf~ backup and a subdirectory's files are not matched, an
	 * empty directory's pattern is no error, the includer's section goes
	 * on after an include */
	put("main.conf", "[global]\nworkers = 1\ninclude = conf.d/*.conf\ninclude = empty/*.conf\n"
			 "[route m]\nlisten = 127.0.0.1:18501\ninclude = part/only.conf\n"
			 "backend = 127.0.0.1:18502\n");
	put("conf.d/20-b.conf", "[route dup]\nlisten = 127.0.0.1:18503\nbackend = 127.0.0.1:18504\n");
	put("conf.d/10-a.conf", "\n[route dup]\nlisten = 127.0.0.1:18505\nbackend = 127.0.0.1:18506\n"
				"engine = nope\n");
	put("conf.d/30-c.conf~", "this is not read\n");
	put("conf.d/sub/40-d.conf", "this is not read either\n");
	put("empty/.keep", "%s", "");
	put("part/only.conf", "[route p]\nlisten = 127.0.0.1:18507\nbackend = 127.0.0.1:18508\n");
	H_CHECK(check(bin, "main.conf", 1, &out, &err) == 1, "check: %s", err ? err : "");
	expect_line(err, "conf.d/10-a.conf:5: engine: invalid value 'nope' (expects "
			 "auto|copy|splice|sockmap|uring)");
	expect_text(err, "%s/conf.d/20-b.conf:1: duplicate route 'dup' (first defined at "
			 "%s/conf.d/10-a.conf:2)\n", h_tmpdir(), h_tmpdir());
	H_CHECK(!strstr(err, "not read") && !strstr(err, "main.conf"),
		"a file the pattern does not match was read, or main.conf had a problem:\n%s", err);
	free(out);
	free(err);
	/* fixed: ok, and route m kept its backend after the include inside it */
	put("conf.d/20-b.conf", "[route b]\nlisten = 127.0.0.1:18503\nbackend = 127.0.0.1:18504\n");
	put("conf.d/10-a.conf", "\n[route dup]\nlisten = 127.0.0.1:18505\nbackend = 127.0.0.1:18506\n");
	H_CHECK(check(bin, "main.conf", 1, &out, &err) == 0 && out &&
			strstr(out, ": ok: 4 routes, 4 listen addresses, 4 backends"),
		"check of the fixed files: %s%s", out ? out : "", err ? err : "");
	free(out);
	free(err);

	/* a problem found after reading (a clash) names the included line too */
	put("conf.d/30-clash.conf", "[route c]\nlisten = 0.0.0.0:18503\nbackend = 127.0.0.1:18509\n");
	H_CHECK(check(bin, "main.conf", 1, &out, &err) == 1, "clash: %s", err ? err : "");
	expect_text(err, "%s/conf.d/30-clash.conf:2: listen 0.0.0.0:18503 clashes with "
			 "127.0.0.1:18503 of route 'b' (%s/conf.d/20-b.conf:2)\n", h_tmpdir(), h_tmpdir());
	free(out);
	free(err);
	put("conf.d/30-clash.conf", "\n");

	/* a loop, a missing plain file, a missing directory, too deep */
	put("loop.conf", "include = loop/a.conf\n");
	put("loop/a.conf", "include = b.conf\n");
	put("loop/b.conf", "\n\ninclude = ../loop.conf\n");
	H_CHECK(check(bin, "loop.conf", 1, &out, &err) == 1, "loop: %s", err ? err : "");
	expect_text(err, "%s/loop/b.conf:3: include %s/loop/../loop.conf: include loop: it is "
			 "%s/loop.conf, which is being read already\n", h_tmpdir(), h_tmpdir(),
		    h_tmpdir());
	free(out);
	free(err);
	put("missing.conf", "[global]\nworkers = 1\ninclude = nothere.conf\ninclude = nodir/*.conf\n");
	H_CHECK(check(bin, "missing.conf", 1, &out, &err) == 1, "missing: %s", err ? err : "");
	expect_text(err, "%s/missing.conf:3: include %s/nothere.conf: cannot open: No such file or "
			 "directory\n%s/missing.conf:4: include %s/nodir/*.conf: %s/nodir: no such "
			 "directory\n", h_tmpdir(), h_tmpdir(), h_tmpdir(), h_tmpdir(), h_tmpdir());
	free(out);
	free(err);
	put("typo.conf", "[global]\nincludes = conf.d/*.conf\n");
	H_CHECK(check(bin, "typo.conf", 1, &out, &err) == 1 && err &&
			strstr(err, "typo.conf:2: unknown key 'includes' in [global] (did you mean "
				    "'include'?)"),
		"a typo of include: %s", err ? err : "");
	free(out);
	free(err);
	for (int i = 0; i < 10; i++) {
		char rel[64];
		snprintf(rel, sizeof rel, "deep/%d.conf", i);
		put(rel, "include = %d.conf\n", i + 1);
	}
	put("deep/10.conf", "\n");
	H_CHECK(check(bin, "deep/0.conf", 1, &out, &err) == 1 && err &&
			strstr(err, "/deep/8.conf:1: include ") &&
			strstr(err, "/deep/9.conf: includes nested more than 8 deep"),
		"depth: %s", err ? err : "");
	free(out);
	free(err);
}

/* A reload reads the included files again, under the Landlock sandbox,
 * from a directory that is not the main file's. */
Test(integ, config_include_reload_under_sandbox, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_tag_server a, b;
	static struct h_proxy p;
	char path[512], why[512];
	int pa = h_free_port(), pb = h_free_port();
	struct h_addr addr_b;

	h_tag_start(&a, 'A', 0, 0);
	h_tag_start(&b, 'B', 0, 0);
	put("etc/main.conf", "[global]\nworkers = 1\nsandbox = yes\ninclude = ../routes.d/*.conf\n");
	put("routes.d/a.conf", "[route a]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n", pa, a.port);
	snprintf(path, sizeof path, "%s/etc/main.conf", h_tmpdir());
	const char *args[] = { "-c", path, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "start: %s", why);
	if (!h_log_lines(&p, "sandbox:", "Landlock ABI", NULL))
		cr_log_warn("Landlock is not active on this kernel: the reload is not sandboxed");
	H_CHECK(h_tag_of(&p.addr, NULL) == 'A', "route a from routes.d/a.conf does not answer");
	put("routes.d/b.conf", "[route b]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n", pb, b.port);
	kill(p.pid, SIGHUP);
	for (int i = 0; i < 300 && !h_log_lines(&p, "SIGHUP:", NULL); i++)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", NULL) == 1,
		"the reload did not read routes.d/b.conf (the sandbox refused it?)");
	char tb[64];
	snprintf(tb, sizeof tb, "127.0.0.1:%d", pb);
	H_CHECK(h_addr_parse(tb, &addr_b) == 0, "address");
	H_CHECK(h_tag_of(&addr_b, NULL) == 'B', "route b, added by a file the reload included, does "
		"not answer");
	/* an included file with a problem: the reload is refused at its line */
	put("routes.d/b.conf", "[route b]\nlisten = 127.0.0.1:%d\nbackend = nope\n", pb);
	kill(p.pid, SIGHUP);
	for (int i = 0; i < 300 && h_log_lines(&p, "SIGHUP:", NULL) < 2; i++)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(&p, "/routes.d/b.conf:3: backend 'nope'", NULL) == 1,
		"the reload's problem in an included file was not said at its FILE:LINE");
	H_CHECK(h_tag_of(&addr_b, NULL) == 'B', "a refused reload dropped route b");
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&b);
}
