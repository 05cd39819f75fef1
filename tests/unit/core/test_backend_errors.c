/* SPDX-License-Identifier: MIT */
/* Unit tests for the connect-error lines of src/core/backend.c: the first
 * error of a quiet backend is logged at once, the ones after it within
 * BACKEND_ERR_REPORT_MS wait and come as one line with their count, the
 * interval is per backend, and a forced report (a stopping worker) says
 * what still waits. The clock is passed in, so nothing here sleeps. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "config.h"
#include "log.h"

static struct config *gen(const char *name, const char *b1, const char *b2)
{
	struct config *c = calloc(1, sizeof(*c));
	struct route *r;

	cr_assert(c);
	config_defaults(c);
	r = config_add_route(c, name, 0);
	cr_assert(r);
	r->listen[0].ss.ss_family = AF_UNIX; /* never bound here */
	r->listen[0].len = sizeof(sa_family_t);
	r->nlisten = 1;
	snprintf(r->backend[0].addr.text, sizeof(r->backend[0].addr.text), "%s", b1);
	snprintf(r->backend[1].addr.text, sizeof(r->backend[1].addr.text), "%s", b2);
	r->backend[0].weight = r->backend[1].weight = 1;
	r->nbackend = 2;
	cr_assert_eq(config_finalize(c), 0);
	return c;
}

/* The error log (stderr, written directly: no writer thread here) goes to
 * a file while a test runs; lines() reads what came since the last call. */
static FILE *cap;
static int saved = -1;
static long seen;

static void cap_init(void)
{
	cap = tmpfile();
	cr_assert(cap);
	saved = dup(STDERR_FILENO);
	dup2(fileno(cap), STDERR_FILENO);
	seen = 0;
}

static void cap_fini(void)
{
	dup2(saved, STDERR_FILENO);
	close(saved);
	fclose(cap);
}

/* The lines logged since the last call, joined (static). */
static const char *lines(void)
{
	static char buf[8192];
	size_t n;

	fflush(stderr);
	fseek(cap, seen, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, cap);
	buf[n] = '\0';
	seen += (long)n;
	return buf;
}

static int count(const char *hay, const char *needle)
{
	int k = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		k++;
	return k;
}

Test(unit_backend_errors, first_at_once_then_one_counted_line_per_interval, .init = cap_init,
     .fini = cap_fini)
{
	struct config *c = gen("web", "127.0.0.1:9", "127.0.0.1:10");
	struct route *r = c->route[0];
	const char *l;

	backend_connect_failed(r, 0, ECONNREFUSED, 100000);
	l = lines();
	cr_expect(strstr(l, "warning: backend 127.0.0.1:9 of route web: 1 connect error (ECONNREFUSED)\n"),
		  "the first error is not logged at once: '%s'", l);
	for (int i = 1; i <= 36; i++)
		backend_connect_failed(r, 0, i < 36 ? ECONNREFUSED : ETIMEDOUT, 100000 + 250 * (uint64_t)i);
	backend_errors_report(105000, 0);
	l = lines();
	cr_expect_eq(l[0], '\0', "a line within the interval: '%s'", l);
	backend_errors_report(110000, 0);
	l = lines();
	cr_expect(strstr(l, "warning: backend 127.0.0.1:9 of route web: 36 connect errors in 10s "
			    "(ETIMEDOUT)\n"), "no counted line once the interval is over: '%s'", l);
	cr_expect_eq(count(l, "connect error"), 1, "more than one line: '%s'", l);
	backend_errors_report(200000, 0);
	l = lines();
	cr_expect_eq(l[0], '\0', "a line with nothing to say: '%s'", l);
	config_free(c);
	free(c);
}

Test(unit_backend_errors, the_interval_is_per_backend_and_down_is_said, .init = cap_init,
     .fini = cap_fini)
{
	struct config *c = gen("db", "127.0.0.1:11", "127.0.0.1:12");
	struct route *r = c->route[0];
	const char *l;

	backend_connect_failed(r, 0, ECONNREFUSED, 1000);
	backend_connect_failed(r, 0, ECONNREFUSED, 1001);
	backend_connect_failed(r, 1, EHOSTUNREACH, 1002); /* its own interval: at once */
	l = lines();
	cr_expect_eq(count(l, "connect error"), 2, "one line per backend expected: '%s'", l);
	cr_expect(strstr(l, "backend 127.0.0.1:12 of route db: 1 connect error (EHOSTUNREACH)"),
		  "the second backend's first error: '%s'", l);
	backend_set_down(r, 0, 1, "test");
	backend_errors_report(3000, 1); /* a stopping worker: whatever the interval */
	l = lines();
	cr_expect(strstr(l, "backend 127.0.0.1:11 of route db: 1 connect error (ECONNREFUSED); "
			    "marked down\n"), "the waiting error with the backend's state: '%s'", l);
	config_free(c);
	free(c);
}
