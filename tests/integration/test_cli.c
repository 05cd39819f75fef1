/* SPDX-License-Identifier: MIT */
/* Integration case 13: command-line errors, --help and --version (plain
 * proxy binary only, no engine variants). */
#define _GNU_SOURCE
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

struct cli_run {
	int status; /* wait status, -1 on timeout */
	char *out, *err;
};

static struct cli_run cli_last;

static void cli_free(void)
{
	free(cli_last.out);
	free(cli_last.err);
	cli_last.out = cli_last.err = NULL;
}

static const char *cli_status(int st, char *buf, size_t len)
{
	if (st == -1)
		snprintf(buf, len, "still running after 5 s (killed)");
	else if (WIFEXITED(st))
		snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
	else
		snprintf(buf, len, "signal %d", WTERMSIG(st));
	return buf;
}

static void cli_run(const char *bin, const char *const *args)
{
	cli_free();
	cli_last.status = h_run_capture(bin, args, 5000, &cli_last.out, &cli_last.err);
	if (!cli_last.out)
		cli_last.out = strdup("");
	if (!cli_last.err)
		cli_last.err = strdup("");
}

static int cli_lines(const char *s)
{
	int n = 0;
	for (const char *p = s; *p; p++)
		if (*p == '\n' && p[1])
			n++;
	return *s ? n + 1 : 0;
}

/* Expects a prompt failure with a message on stderr that contains every
 * needle; one_line also requires that message to be one line. */
static void cli_expect_error(const char *bin, const char *const *args, const char *what,
			     const char *const *needles, int one_line)
{
	char sb[64];
	cli_run(bin, args);
	int st = cli_last.status;
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0,
		"%s: expected a prompt non-zero exit, got %s; stderr: %s", what,
		cli_status(st, sb, sizeof sb), cli_last.err);
	H_CHECK(cli_last.err[0], "%s: exited %d with nothing on stderr", what, WEXITSTATUS(st));
	for (int i = 0; needles && needles[i]; i++)
		H_CHECK(strstr(cli_last.err, needles[i]) != NULL,
			"%s: stderr does not mention \"%s\": %s", what, needles[i], cli_last.err);
	if (one_line)
		H_CHECK(cli_lines(cli_last.err) == 1, "%s: expected a one-line message, stderr has %d lines: %s",
			what, cli_lines(cli_last.err), cli_last.err);
}

Test(integ, cli_errors, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);

	{
		const char *args[] = { "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--workers", "abc", NULL };
		const char *needles[] = { "--workers", "abc", NULL };
		cli_expect_error(bin, args, "--workers abc", needles, 1);
	}
	{
		const char *args[] = { "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--nope", NULL };
		const char *needles[] = { "--nope", NULL };
		cli_expect_error(bin, args, "unknown option --nope", needles, 0);
	}
	{
		const char *args[] = { "-l", "127.0.0.1:0", NULL };
		cli_expect_error(bin, args, "-l without -b", NULL, 0);
	}
	{
		const char *args[] = { "-l", "127.0.0.1:0", "-b", "127.0.0.1", NULL };
		const char *needles[] = { "127.0.0.1", NULL };
		cli_expect_error(bin, args, "backend address without a port (-b 127.0.0.1)", needles, 0);
	}

	char sb[64];
	{
		const char *args[] = { "--help", NULL };
		cli_run(bin, args);
		H_CHECK(cli_last.status != -1 && WIFEXITED(cli_last.status) &&
				WEXITSTATUS(cli_last.status) == 0,
			"--help: expected exit status 0, got %s; stderr: %s",
			cli_status(cli_last.status, sb, sizeof sb), cli_last.err);
		size_t lo = strlen(cli_last.out), le = strlen(cli_last.err);
		char *all = malloc(lo + le + 2);
		H_CHECK(all != NULL, "oom");
		memcpy(all, cli_last.out, lo);
		all[lo] = '\n';
		memcpy(all + lo + 1, cli_last.err, le + 1);
		static const char *const want[] = {
			"-l",	      "-b",	     "--engine",	  "copy",	   "splice",
			"auto",	      "--workers",   "--buffer-size",	  "--pipe-size",   "--lowat",
			"--max-pipes", "--max-conns", "--connect-timeout", "--idle-timeout", "--drain-timeout",
			"-v",	      "64k",		  "5s",		   "10m",
			"30s",	      NULL,
		};
		for (int i = 0; want[i]; i++) {
			if (!strstr(all, want[i])) {
				char w[64];
				snprintf(w, sizeof w, "%s", want[i]);
				free(all);
				H_CHECK(0, "--help output does not mention \"%s\"; stdout was: %s", w,
					cli_last.out);
			}
		}
		free(all);
	}
	{
		const char *args[] = { "--version", NULL };
		cli_run(bin, args);
		H_CHECK(cli_last.status != -1 && WIFEXITED(cli_last.status) &&
				WEXITSTATUS(cli_last.status) == 0,
			"--version: expected exit status 0, got %s; stderr: %s",
			cli_status(cli_last.status, sb, sizeof sb), cli_last.err);
		H_CHECK(strstr(cli_last.out, "splicer") || strstr(cli_last.err, "splicer"),
			"--version does not print \"splicer\": stdout \"%s\" stderr \"%s\"", cli_last.out,
			cli_last.err);
	}
	cli_free();
}

/* Expects exit status 2 and exactly `want` (one line) on stderr. */
static void cli_expect_exact(const char *bin, const char *const *args, const char *want,
			     const char *what)
{
	char sb[64];
	cli_run(bin, args);
	H_CHECK(cli_last.status != -1 && WIFEXITED(cli_last.status) && WEXITSTATUS(cli_last.status) == 2,
		"%s: expected exit status 2, got %s; stderr: %s", what,
		cli_status(cli_last.status, sb, sizeof sb), cli_last.err);
	H_CHECK(!strcmp(cli_last.err, want), "%s: stderr is\n%s\nexpected exactly\n%s", what,
		cli_last.err, want);
}

/* Issue 12, defect 13: a backend that is the route's own listener was
 * accepted, and each session connected to the proxy itself until max-conns
 * filled. Refused at start (and by check), naming both options. */
Test(integ, cli_backend_that_is_the_own_listener_is_refused, .init = h_init, .fini = h_fini,
     .timeout = 30)
{
	const char *bin = h_binary(0);
	int port = h_free_port();
	char self[64], any[64], want[300];

	snprintf(self, sizeof self, "127.0.0.1:%d", port);
	snprintf(any, sizeof any, ":%d", port);
	{
		const char *args[] = { "-l", self, "-b", self, NULL };
		snprintf(want, sizeof want, "splicer: -b %s is -l %s: sessions would loop back into "
					    "the proxy\n", self, self);
		cli_expect_exact(bin, args, want, "-l 127.0.0.1:P -b 127.0.0.1:P");
	}
	{
		const char *args[] = { "-l", any, "-b", "127.0.0.1:9", "-b", self, NULL };
		snprintf(want, sizeof want, "splicer: -b %s is an address of this host, where -l "
					    "0.0.0.0:%d listens: sessions would loop back into the proxy\n",
			 self, port);
		cli_expect_exact(bin, args, want, "-l :P -b 127.0.0.1:P");
	}
	/* another port of this host, or the same port elsewhere, is no loop:
	 * check -c with a file holding both (a port taken now: check binds it,
	 * and the one above was free before two proxies ran) */
	char path[300], text[300];
	port = h_free_port();
	snprintf(path, sizeof path, "%s/noloop.conf", h_tmpdir());
	snprintf(text, sizeof text, "[route r]\nlisten = :%d\nbackend = 127.0.0.1:%d 198.51.100.77:%d\n",
		 port, port == 65535 ? 1 : port + 1, port);
	FILE *f = fopen(path, "we");
	H_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
	const char *args[] = { "check", "-c", path, NULL };
	cli_run(bin, args);
	H_CHECK(WIFEXITED(cli_last.status) && WEXITSTATUS(cli_last.status) == 0,
		"check of a route whose backends are not its listener: %s", cli_last.err);
	cli_free();
}

/* Issue 12, item 17: `--verbose N` was documented but only --verbose=N
 * worked ("unexpected argument 'N'"); [::ffff:127.0.0.1]:P as a listener
 * failed with a bare "Invalid argument". */
Test(integ, cli_verbose_n_and_v4_mapped_listen, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	char path[300], want[300], sb[64];

	snprintf(path, sizeof path, "%s/v.conf", h_tmpdir());
	FILE *f = fopen(path, "we");
	H_CHECK(f && fputs("[route r]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:9\n", f) >= 0 &&
			fclose(f) == 0, "write %s", path);
	const char *forms[][6] = { { "check", "-c", path, "--verbose", "2", NULL },
				   { "check", "-c", path, "-v", "1", NULL },
				   { "check", "-c", path, "--verbose=2", NULL },
				   { "check", "--verbose", "-c", path, NULL } };
	for (int i = 0; i < 4; i++) {
		cli_run(bin, forms[i]);
		H_CHECK(cli_last.status != -1 && WIFEXITED(cli_last.status) &&
				WEXITSTATUS(cli_last.status) == 0,
			"check ... %s %s: %s; stderr: %s", forms[i][3], forms[i][4] ? forms[i][4] : "",
			cli_status(cli_last.status, sb, sizeof sb), cli_last.err);
	}
	{
		const char *args[] = { "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--verbose", "3", NULL };
		cli_expect_exact(bin, args, "splicer: option '--verbose': invalid value '3' (expects an "
					    "integer 0..2)\n", "--verbose 3");
	}
	{
		const char *args[] = { "-l", "[::ffff:127.0.0.1]:18555", "-b", "127.0.0.1:9", NULL };
		snprintf(want, sizeof want, "splicer: option '-l': address '[::ffff:127.0.0.1]:18555': "
					    "an IPv4-mapped IPv6 address cannot be listened on; write "
					    "127.0.0.1:18555\n");
		cli_expect_exact(bin, args, want, "-l [::ffff:127.0.0.1]:P");
	}
	cli_free();
}

/* `splicer demo`, the README's first step: a stream each way through each
 * engine, every byte checked by the demo itself (SHA-256 both ways); a bad
 * option or an engine that does not exist is a prompt, clear failure. */
Test(integ, demo_checks_each_engine_and_refuses_bad_options, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	char sb[64];

	setenv("TMPDIR", h_tmpdir(), 1); /* the demo's proxy logs */
	{
		const char *args[] = { "demo", "--size", "8m", "--engines", "copy,splice,auto", NULL };
		cli_run(bin, args);
		H_CHECK(cli_last.status != -1 && WIFEXITED(cli_last.status) &&
				WEXITSTATUS(cli_last.status) == 0,
			"demo: %s; stdout: %s; stderr: %s", cli_status(cli_last.status, sb, sizeof sb),
			cli_last.out, cli_last.err);
		const char *engines[] = { "copy", "splice", "auto" };
		for (unsigned i = 0; i < 3; i++) {
			char want[32];
			const char *row;
			snprintf(want, sizeof(want), "\n  %-7s ", engines[i]);
			row = strstr(cli_last.out, want);
			H_CHECK(row != NULL, "demo: no row for %s in:\n%s", engines[i], cli_last.out);
			size_t n = strcspn(row + 1, "\n");
			H_CHECK(n > 3 && !strncmp(row + 1 + n - 3, "yes", 3) && strstr(row, "8.0 MiB"),
				"demo: %s did not move 8 MiB each way intact: %.*s", engines[i], (int)n,
				row + 1);
		}
	}
	{
		const char *args[] = { "demo", "--size", "0", NULL };
		const char *needles[] = { "--size", NULL };
		cli_expect_error(bin, args, "demo --size 0", needles, 1);
	}
	{
		const char *args[] = { "demo", "--size", "1m", "--engines", "nosuch", NULL };
		const char *needles[] = { "nosuch", NULL };
		cli_expect_error(bin, args, "demo --engines nosuch", needles, 0);
	}
}
