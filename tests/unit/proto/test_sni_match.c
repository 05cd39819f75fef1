/* SPDX-License-Identifier: MIT */
/* Unit tests for src/proto/sni_match.c: exact names before wildcards, the
 * longest wildcard first, case, and what `check` is told about overlaps. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sni_match.h"

static int look(const struct sni_table *t, const char *name)
{
	return sni_lookup(t, name, strlen(name));
}

Test(unit_sni_match, exact_then_longest_wildcard_any_case)
{
	const struct sni_rule r[] = {
		{ "a.example.com", 0, "a" },   { "*.a.example.com", 1, "a" },
		{ "*.example.com", 2, "star" }, { "B.Example.COM", 3, "b" },
		{ "*.x.y.example.com", 4, "deep" },
	};
	struct sni_table t;
	char err[256];

	cr_assert_eq(sni_table_build(&t, r, 5, err, sizeof err), 0, "%s", err);
	cr_assert_eq(look(&t, "a.example.com"), 0, "exact beats *.example.com");
	cr_assert_eq(look(&t, "A.EXAMPLE.com"), 0);
	cr_assert_eq(look(&t, "b.example.com"), 3, "a pattern in capitals matches");
	cr_assert_eq(look(&t, "w.a.example.com"), 1, "*.a.example.com is longer than *.example.com");
	cr_assert_eq(look(&t, "v.w.a.example.com"), 1, "a wildcard covers several labels");
	cr_assert_eq(look(&t, "c.example.com"), 2);
	cr_assert_eq(look(&t, "q.x.y.example.com"), 4);
	cr_assert_eq(look(&t, "x.y.example.com"), 2, "*.x.y.example.com needs a label in front");
	cr_assert_eq(look(&t, "example.com"), -1, "*.example.com does not match example.com");
	cr_assert_eq(look(&t, "aexample.com"), -1);
	cr_assert_eq(look(&t, "a.example.org"), -1);
	cr_assert_eq(look(&t, ""), -1);
	sni_table_free(&t);
}

Test(unit_sni_match, bad_patterns_and_duplicates_are_refused)
{
	struct sni_table t;
	char err[256];
	const char *bad[] = { "a.*.com", "*a.example.com", "*", "*.", "a.example.com.", "a..b",
			      "a b.com", "", "**.example.com" };

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct sni_rule r = { bad[i], 0, "x" };
		cr_assert_eq(sni_table_build(&t, &r, 1, err, sizeof err), -1, "'%s' accepted", bad[i]);
		cr_assert(strchr(err, '\''), "the message names it: %s", err);
	}
	struct sni_rule dup[] = { { "a.example.com", 0, "a" }, { "A.example.com", 1, "b" } };
	cr_assert_eq(sni_table_build(&t, dup, 2, err, sizeof err), -1);
	cr_assert(strstr(err, "twice"), "%s", err);
	struct sni_rule wdup[] = { { "*.example.com", 0, "a" }, { "*.EXAMPLE.com", 1, "b" } };
	cr_assert_eq(sni_table_build(&t, wdup, 2, err, sizeof err), -1);
	struct sni_rule none[1];
	cr_assert_eq(sni_table_build(&t, none, 0, err, sizeof err), 0, "no names is a table");
	cr_assert_eq(look(&t, "a.example.com"), -1);
	sni_table_free(&t);
}

struct seen {
	int n[4];
	char last[4][512];
};

static void note(void *ctx, enum sni_overlap kind, size_t a, size_t b, const char *msg)
{
	struct seen *s = ctx;
	s->n[kind]++;
	snprintf(s->last[kind], sizeof s->last[kind], "%zu %zu %s", a, b, msg);
}

Test(unit_sni_match, overlaps_say_which_wins)
{
	const struct sni_rule r[] = {
		{ "a.example.com", 0, "one" },   /* 0 */
		{ "*.example.com", 1, "two" },   /* 1: covers 0 and 3 */
		{ "*.b.example.com", 2, "three" }, /* 2 */
		{ "A.Example.com", 3, "four" },  /* 3: 0 again */
		{ "*.EXAMPLE.COM", 4, "five" },  /* 4: 1 again, covers 0, 2, 3 */
		{ "example.com", 5, "six" },     /* 5: covered by nothing */
		{ "*.bad*", 6, "seven" },        /* 6: invalid, skipped */
	};
	struct seen s = { 0 };

	cr_assert_eq(sni_check_overlaps(r, 7, note, &s), 2);
	cr_assert_eq(s.n[SNI_DUP_EXACT], 1);
	cr_assert(strstr(s.last[SNI_DUP_EXACT], "route one and route four"), "%s", s.last[SNI_DUP_EXACT]);
	cr_assert_eq(s.n[SNI_DUP_WILDCARD], 1);
	/* 0 and 3 each under 1 and 4 */
	cr_assert_eq(s.n[SNI_EXACT_UNDER_WILDCARD], 4);
	cr_assert(strstr(s.last[SNI_EXACT_UNDER_WILDCARD], "the exact name wins"), "%s",
		  s.last[SNI_EXACT_UNDER_WILDCARD]);
	/* *.b.example.com under *.example.com and *.EXAMPLE.COM */
	cr_assert_eq(s.n[SNI_WILDCARD_UNDER_WILDCARD], 2);
	cr_assert(strstr(s.last[SNI_WILDCARD_UNDER_WILDCARD],
			 "'*.b.example.com' (route three) is also matched by '*.EXAMPLE.COM' "
			 "(route five): the longer wildcard wins"),
		  "%s", s.last[SNI_WILDCARD_UNDER_WILDCARD]);
}
