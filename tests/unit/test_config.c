/* Unit tests for src/config.c: the settings table through the command-line
 * parser (values, units, ranges, "auto", errors) and config_finalize(). */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
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
	cr_assert_eq(c.o.engine, ENGINE_AUTO);
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
	cr_assert_eq(c.o.engine, ENGINE_SPLICE);
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
	cr_assert_eq(c.route[0]->o.engine, ENGINE_SPLICE, "the command line's values reach the route");
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

