/* SPDX-License-Identifier: MIT */
/* Unit tests for src/ctl/config/config.c: the settings table through the command-line
 * parser (values, units, ranges, "auto", errors) and config_finalize(). */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string.h>

#include "config.h"

static int parse(struct config *c, int argc, const char **argv)
{
	config_defaults(c);
	return config_parse_args(c, argc, (char **)argv, 1);
}

Test(unit_config, defaults)
{
	struct config c;

	config_defaults(&c);
	cr_assert_str_eq(engine_names[c.o.engine], "auto");
	cr_assert_eq(c.o.balance, BALANCE_ROUNDROBIN);
	cr_assert_eq(c.nroutes, 0);
	cr_assert_eq(c.buffer_size, 64 * 1024);
	cr_assert_eq(c.o.connect_timeout_ms, 5000);
	cr_assert_eq(c.o.idle_timeout_ms, 600000);
	cr_assert_eq(c.drain_timeout_ms, 30000);
	cr_assert_eq(c.workers, SETTING_AUTO);
	cr_assert_eq(c.max_pipes, SETTING_AUTO);
	cr_assert_eq(c.o.lowat, 0);
}

Test(unit_config, values_with_units_and_both_spellings)
{
	struct config c;
	const char *argv[] = { "splicer", "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "-b", "unix:/x",
			       "--engine=splice", "-w", "3", "--pipe-size", "1m", "--lowat=64k",
			       "--connect-timeout", "250ms", "--idle-timeout", "2m", "-vv",
			       "--max-pipes", "0" };

	cr_assert_eq(parse(&c, sizeof(argv) / sizeof(*argv), argv), 0);
	cr_assert_eq(c.nroutes, 1);
	cr_assert_eq(c.route[0]->nlisten, 1);
	cr_assert_eq(c.route[0]->nbackend, 2);
	cr_assert_str_eq(c.route[0]->backend[1].addr.text, "unix:/x");
	cr_assert_eq(c.route[0]->backend[1].weight, 1);
	cr_assert_str_eq(engine_names[c.o.engine], "splice");
	cr_assert_eq(c.workers, 3);
	cr_assert_eq(c.pipe_size, 1 << 20);
	cr_assert_eq(c.o.lowat, 64 * 1024);
	cr_assert_eq(c.o.connect_timeout_ms, 250);
	cr_assert_eq(c.o.idle_timeout_ms, 120000);
	cr_assert_eq(c.verbose, 2);
	cr_assert_eq(c.max_pipes, 0, "an explicit 0 is not auto");
	cr_assert_eq(config_finalize(&c), 0);
	cr_assert_eq(c.max_pipes, 0, "finalize keeps an explicit 0");
	cr_assert_eq(c.workers, 3);
	cr_assert_str_eq(engine_names[c.route[0]->o.engine], "splice", "the command line's values reach the route");
	cr_assert_eq(c.route[0]->o.idle_timeout_ms, 120000);
	config_free(&c);
}

Test(unit_config, finalize_derives_auto_values)
{
	struct config c;
	const char *argv[] = { "splicer", "-l", ":0", "-b", ":9" };

	cr_assert_eq(parse(&c, 5, argv), 0);
	cr_assert_eq(config_finalize(&c), 0);
	cr_assert(c.workers >= 1 && c.workers != SETTING_AUTO);
	cr_assert(c.max_conns >= 1 && c.max_conns != SETTING_AUTO);
	cr_assert(c.max_pipes != SETTING_AUTO);
}

/* Parses argv expecting an error; returns what went to stderr. */
static void expect_error(int argc, const char **argv, const char *frag1, const char *frag2)
{
	struct config c;
	char out[1024] = "";
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO), r;
	size_t n;

	fflush(stderr);
	dup2(fileno(tmp), STDERR_FILENO);
	r = parse(&c, argc, argv);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, sizeof(out) - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	cr_assert_eq(r, -1, "expected a parse error for '%s'", argv[argc - 1]);
	cr_assert(strstr(out, frag1) && (!frag2 || strstr(out, frag2)),
		  "error '%s' lacks '%s' / '%s'", out, frag1, frag2 ? frag2 : "");
	cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "one line expected: '%s'", out);
}

Test(unit_config, errors_name_option_and_value)
{
	const char *a1[] = { "splicer", "--workers", "abc" };
	const char *a2[] = { "splicer", "--workers", "0" };
	const char *a3[] = { "splicer", "--engine", "fast" };
	const char *a4[] = { "splicer", "--nope" };
	const char *a5[] = { "splicer", "--pipe-size", "1.5m" };
	const char *a6[] = { "splicer", "--idle-timeout", "5x" };
	const char *a7[] = { "splicer", "-b", "127.0.0.1" };
	const char *a8[] = { "splicer", "--connect-timeout" };

	expect_error(3, a1, "'--workers'", "'abc'");
	expect_error(3, a2, "'--workers'", "1..256");
	expect_error(3, a3, "'--engine'", "auto|copy|splice");
	expect_error(2, a4, "unknown option '--nope'", NULL);
	expect_error(3, a5, "'--pipe-size'", "'1.5m'");
	expect_error(3, a6, "'--idle-timeout'", "'5x'");
	expect_error(3, a7, "'-b'", "missing ':port'");
	expect_error(2, a8, "'--connect-timeout' needs a value", NULL);
}

Test(unit_config, finalize_requires_listen_and_backend, .init = cr_redirect_stderr)
{
	struct config c;
	const char *a1[] = { "splicer", "-b", ":9" };
	const char *a2[] = { "splicer", "-l", ":0" };

	cr_assert_eq(parse(&c, 3, a1), 0);
	cr_assert_eq(config_finalize(&c), -1);
	cr_assert_eq(parse(&c, 3, a2), 0);
	cr_assert_eq(config_finalize(&c), -1);
}


/* Issue 12, item 17: "--verbose N" and "-v N" take the level when the next
 * argument is all digits (no position takes a bare number); without one
 * they count as before. */
Test(unit_config, verbose_takes_a_following_number)
{
	struct config c;
	const char *a1[] = { "splicer", "--verbose", "2", "-l", ":0", "-b", ":9" };
	const char *a2[] = { "splicer", "-v", "1" };
	const char *a3[] = { "splicer", "--verbose", "-l", ":0", "--verbose" };
	const char *a4[] = { "splicer", "--verbose=0", "-vv" };
	const char *bad[] = { "splicer", "--verbose", "3" };

	cr_assert_eq(parse(&c, 7, a1), 0);
	cr_assert_eq(c.verbose, 2);
	cr_assert_eq(c.route[0]->nlisten, 1);
	config_free(&c);
	cr_assert_eq(parse(&c, 3, a2), 0);
	cr_assert_eq(c.verbose, 1);
	cr_assert_eq(parse(&c, 5, a3), 0);
	cr_assert_eq(c.verbose, 2, "two bare --verbose");
	config_free(&c);
	cr_assert_eq(parse(&c, 3, a4), 0);
	cr_assert_eq(c.verbose, 2);
	expect_error(3, bad, "option '--verbose': invalid value '3'", "0..2");
}

/* Issue 12, item 17: a second -c was ignored in silence; --pipe-size 100
 * was refused only at finalize, so a file's value had no FILE:LINE. */
Test(unit_config, second_config_and_pipe_size_below_a_page)
{
	struct config c;
	const char *a1[] = { "splicer", "-c", "/x/a.conf", "--config=/x/b.conf" };
	const char *a2[] = { "splicer", "--pipe-size", "100" };
	const char *a3[] = { "splicer", "--pipe-size", "0" };
	const char *a4[] = { "splicer", "--pipe-size", "4k" };

	expect_error(4, a1, "splicer: option '--config' given twice (/x/a.conf, then /x/b.conf): "
			    "one config file per run", NULL);
	expect_error(3, a2, "option '--pipe-size': invalid value '100'", "4k..64m or 0");
	cr_assert_eq(parse(&c, 3, a3), 0);
	cr_assert_eq(c.pipe_size, 0, "0 is the kernel's default size");
	cr_assert_eq(parse(&c, 3, a4), 0);
	cr_assert_eq(c.pipe_size, 4096);
}

/* Issue 12, defect 13: finalize refuses a backend that is the route's own
 * listener; a port-0 listener, another port or another family is no loop. */
Test(unit_config, finalize_refuses_a_backend_that_is_its_own_listener, .init = cr_redirect_stderr)
{
	struct config c;
	const char *loops[][5] = { { "splicer", "-l", "127.0.0.1:7000", "-b", "127.0.0.1:7000" },
				   { "splicer", "-l", ":7000", "-b", "127.0.0.2:7000" },
				   { "splicer", "-l", ":7000", "-b", ":7000" },
				   { "splicer", "-l", ":7000", "-b", "[::ffff:127.0.0.1]:7000" },
				   { "splicer", "-l", "[::]:7000", "-b", "[::1]:7000" },
				   { "splicer", "-l", "unix:/run/x.sock", "-b", "unix:/run/x.sock" } };
	const char *fine[][5] = { { "splicer", "-l", "127.0.0.1:0", "-b", "127.0.0.1:9" },
				  { "splicer", "-l", ":7000", "-b", "127.0.0.1:7001" },
				  { "splicer", "-l", "127.0.0.1:7000", "-b", "127.0.0.2:7000" },
				  { "splicer", "-l", "[::]:7000", "-b", "127.0.0.1:7000" },
				  { "splicer", "-l", "unix:/run/x.sock", "-b", "unix:/run/y.sock" } };

	for (unsigned i = 0; i < sizeof(loops) / sizeof(*loops); i++) {
		cr_assert_eq(parse(&c, 5, loops[i]), 0);
		cr_assert_eq(config_finalize(&c), -1, "-l %s -b %s was accepted", loops[i][2], loops[i][4]);
		config_free(&c);
	}
	for (unsigned i = 0; i < sizeof(fine) / sizeof(*fine); i++) {
		cr_assert_eq(parse(&c, 5, fine[i]), 0);
		cr_assert_eq(config_finalize(&c), 0, "-l %s -b %s was refused", fine[i][2], fine[i][4]);
		config_free(&c);
	}
}

/* Issue 14: a duration without a unit is refused, naming both readings;
 * "0" (off) is not. */
Test(unit_config, unitless_duration_is_refused_but_zero)
{
	struct config c;
	const char *a1[] = { "splicer", "--idle-timeout", "30000" };
	const char *a2[] = { "splicer", "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--drain-timeout", "0" };

	expect_error(3, a1, "'--idle-timeout'", "a duration needs a unit: 30000ms (30s) or 30000s");
	cr_assert_eq(parse(&c, 7, a2), 0);
	cr_assert_eq(c.drain_timeout_ms, 0);
	config_free(&c);
}

/* Issue 14: an unknown long option names the one it is likely a typo of. */
Test(unit_config, unknown_option_did_you_mean)
{
	const char *a1[] = { "splicer", "--idle-timout", "5s" };
	const char *a2[] = { "splicer", "--wrokers=2" };
	const char *a3[] = { "splicer", "--completely-else" };

	expect_error(3, a1, "unknown option '--idle-timout' (did you mean '--idle-timeout'?)", NULL);
	expect_error(2, a2, "(did you mean '--workers'?)", NULL);
	expect_error(2, a3, "unknown option '--completely-else' (see --help)", NULL);
}

/* Issue 14: "-l *:PORT" is two listeners (0.0.0.0 and [::], when this
 * kernel has IPv6), and finalize takes them as no clash. */
Test(unit_config, star_listen_is_two_listeners)
{
	struct config c;
	const char *a1[] = { "splicer", "-l", "*:18555", "-b", "127.0.0.1:9" };
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	if (fd >= 0)
		close(fd);
	cr_assert_eq(parse(&c, 5, a1), 0);
	cr_assert_eq(c.route[0]->nlisten, fd >= 0 ? 2u : 1u);
	cr_assert_str_eq(c.route[0]->listen[0].text, "0.0.0.0:18555");
	if (fd >= 0)
		cr_assert_str_eq(c.route[0]->listen[1].text, "[::]:18555");
	cr_assert_eq(config_finalize(&c), 0);
	config_free(&c);
}

/* Issue 14: `user` is looked up by finalize, so start, reload and check
 * refuse an unknown one before anything is bound. */
Test(unit_config, finalize_refuses_an_unknown_user, .init = cr_redirect_stderr)
{
	struct config c;
	const char *a1[] = { "splicer", "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--user", "no-such-user-14" };

	cr_assert_eq(parse(&c, 7, a1), 0);
	cr_assert_eq(config_finalize(&c), -1);
	config_free(&c);
}
