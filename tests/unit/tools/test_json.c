/* SPDX-License-Identifier: MIT */
/* Unit tests for tools/bench/json.c: exact output (layout, escapes, numbers) written
 * into an open_memstream buffer, and json_finish's verdicts on unbalanced
 * nesting, misused keys, depth overflow and failed writes. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* An in-memory output file and a writer on it. */
struct mem {
	FILE *f;
	char *buf;
	size_t len;
	struct json j;
};

static void mem_open(struct mem *m)
{
	memset(m, 0, sizeof(*m));
	m->f = open_memstream(&m->buf, &m->len);
	cr_assert_not_null(m->f, "open_memstream: %s", strerror(errno));
	json_init(&m->j, m->f);
}

/* What has been written so far (buf is only current after a flush). */
static const char *mem_text(struct mem *m)
{
	cr_assert_eq(fflush(m->f), 0);
	return m->buf;
}

static void mem_close(struct mem *m)
{
	fclose(m->f);
	free(m->buf);
}

/* Finishes the document and expects success and exactly want. */
static void expect_doc(struct mem *m, const char *want)
{
	int r = json_finish(&m->j);

	cr_expect_eq(r, 0, "json_finish = %d (err %d), want 0", r, m->j.err);
	cr_expect_str_eq(mem_text(m), want);
}

/* Finishes the document and expects -1 with errno want_errno. */
static void expect_finish_fails(struct mem *m, int want_errno, const char *why)
{
	int r;

	errno = 0;
	r = json_finish(&m->j);
	cr_expect_eq(r, -1, "%s: json_finish = %d, want -1", why, r);
	cr_expect_eq(errno, want_errno, "%s: errno %d (%s), want %d", why, errno, strerror(errno),
		     want_errno);
}

/* ---- exact output ---- */

Test(unit_json, nested_document)
{
	struct mem m;
	struct json *j = &m.j;

	mem_open(&m);
	json_obj_begin(j, NULL);
	json_str(j, "name", "say \"hi\"");
	json_str(j, "path", "C:\\tmp");
	json_str(j, "text", "line1\nline2\x01 caf\xc3\xa9");
	json_arr_begin(j, "nums");
	json_num(j, NULL, 0);
	json_num(j, NULL, -3);
	json_num(j, NULL, 1e300);
	json_num(j, NULL, 0.1);
	json_num(j, NULL, NAN);
	json_num(j, NULL, 9007199254740992.0);
	json_num(j, NULL, 1.5);
	json_int(j, NULL, -42);
	json_arr_end(j);
	json_obj_begin(j, "flags");
	json_bool(j, "on", 1);
	json_bool(j, "off", 0);
	json_null(j, "none");
	json_obj_end(j);
	json_arr_begin(j, "empty");
	json_arr_end(j);
	json_obj_begin(j, "nothing");
	json_obj_end(j);
	json_arr_begin(j, "rows");
	json_obj_begin(j, NULL);
	json_int(j, "rep", 1);
	json_arr_begin(j, "x");
	json_num(j, NULL, 2.5);
	json_arr_end(j);
	json_obj_end(j);
	json_arr_begin(j, NULL);
	json_str(j, NULL, NULL);
	json_arr_end(j);
	json_arr_end(j);
	json_obj_end(j);
	expect_doc(&m,
		   "{\n"
		   "  \"name\": \"say \\\"hi\\\"\",\n"
		   "  \"path\": \"C:\\\\tmp\",\n"
		   "  \"text\": \"line1\\nline2\\u0001 caf\xc3\xa9\",\n"
		   "  \"nums\": [\n"
		   "    0,\n"
		   "    -3,\n"
		   "    1e+300,\n"
		   "    0.1,\n"
		   "    null,\n"
		   "    9007199254740992,\n"
		   "    1.5,\n"
		   "    -42\n"
		   "  ],\n"
		   "  \"flags\": {\n"
		   "    \"on\": true,\n"
		   "    \"off\": false,\n"
		   "    \"none\": null\n"
		   "  },\n"
		   "  \"empty\": [],\n"
		   "  \"nothing\": {},\n"
		   "  \"rows\": [\n"
		   "    {\n"
		   "      \"rep\": 1,\n"
		   "      \"x\": [\n"
		   "        2.5\n"
		   "      ]\n"
		   "    },\n"
		   "    [\n"
		   "      null\n"
		   "    ]\n"
		   "  ]\n"
		   "}\n");
	mem_close(&m);
}

/* Every byte below 0x20 in both forms, the short escapes, and what passes
 * through: space, DEL, '/', UTF-8 (2- and 4-byte sequences). Keys are
 * escaped the same way. */
Test(unit_json, string_escapes)
{
	struct mem m;
	char ctl[32], want[256], *w = want;

	for (int c = 1; c < 32; c++)
		ctl[c - 1] = (char)c;
	ctl[31] = '\0';
	w += sprintf(w, "[\n  \"");
	for (int c = 1; c < 32; c++) {
		switch (c) {
		case '\b': w += sprintf(w, "\\b"); break;
		case '\t': w += sprintf(w, "\\t"); break;
		case '\n': w += sprintf(w, "\\n"); break;
		case '\f': w += sprintf(w, "\\f"); break;
		case '\r': w += sprintf(w, "\\r"); break;
		default: w += sprintf(w, "\\u%04x", c); break;
		}
	}
	sprintf(w, "\",\n"
		"  \" \x7f/\\\"\\\\\xc3\xa9\xf0\x9f\x98\x80\",\n"
		"  {\n    \"k\\\"\\n\": \"\"\n  }\n]\n");

	mem_open(&m);
	json_arr_begin(&m.j, NULL);
	json_str(&m.j, NULL, ctl);
	json_str(&m.j, NULL, " \x7f/\"\\\xc3\xa9\xf0\x9f\x98\x80");
	json_obj_begin(&m.j, NULL);
	json_str(&m.j, "k\"\n", "");
	json_obj_end(&m.j);
	json_arr_end(&m.j);
	expect_doc(&m, want);
	mem_close(&m);
}

/* One top-level number per document. */
static void expect_num(double v, const char *want)
{
	struct mem m;
	char line[64];

	mem_open(&m);
	json_num(&m.j, NULL, v);
	snprintf(line, sizeof(line), "%s\n", want);
	cr_expect_eq(json_finish(&m.j), 0, "json_num(%.17g)", v);
	cr_expect_str_eq(mem_text(&m), line, "json_num(%.17g)", v);
	mem_close(&m);
}

Test(unit_json, numbers)
{
	expect_num(0, "0");
	expect_num(-0.0, "0");
	expect_num(-3, "-3");
	expect_num(1.5, "1.5");
	expect_num(0.1, "0.1");
	expect_num(1e300, "1e+300");
	expect_num(-1e-7, "-1e-07");
	expect_num(1.0 / 3, "0.3333333333333333");
	expect_num(0.1 + 0.2, "0.30000000000000004");
	expect_num(9007199254740992.0, "9007199254740992");	/* 2^53 */
	expect_num(-9007199254740992.0, "-9007199254740992");
	expect_num(9007199254740994.0, "9007199254740994");	/* past 2^53: %g form */
	expect_num(1e17, "1e+17");
	expect_num(NAN, "null");
	expect_num(INFINITY, "null");
	expect_num(-INFINITY, "null");
}

/* Whatever the %g precision chosen, the text must read back as the same
 * double. */
Test(unit_json, numbers_round_trip)
{
	const double vs[] = { 0.1, 2.0 / 3, 1e-300, 4.9e-324, 1.7976931348623157e308, 123456.789,
			      9007199254740993.0 * 3, -2.5e-5 };

	for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
		struct mem m;
		double back;
		char *end;

		mem_open(&m);
		json_num(&m.j, NULL, vs[i]);
		cr_assert_eq(json_finish(&m.j), 0);
		back = strtod(mem_text(&m), &end);
		cr_expect_eq(back, vs[i], "%.17g written as \"%s\"", vs[i], m.buf);
		cr_expect_str_eq(end, "\n", "trailing text after %.17g: \"%s\"", vs[i], end);
		cr_expect_null(strpbrk(m.buf, ",nN"), "not a JSON number: %s", m.buf);
		mem_close(&m);
	}
}

Test(unit_json, integers)
{
	struct mem m;

	mem_open(&m);
	json_arr_begin(&m.j, NULL);
	json_int(&m.j, NULL, 0);
	json_int(&m.j, NULL, LLONG_MAX);
	json_int(&m.j, NULL, LLONG_MIN);
	json_arr_end(&m.j);
	expect_doc(&m, "[\n  0,\n  9223372036854775807,\n  -9223372036854775808\n]\n");
	mem_close(&m);
}

Test(unit_json, empty_containers_at_top_level)
{
	struct mem m;

	mem_open(&m);
	json_arr_begin(&m.j, NULL);
	json_arr_end(&m.j);
	expect_doc(&m, "[]\n");
	mem_close(&m);

	mem_open(&m);
	json_obj_begin(&m.j, NULL);
	json_obj_end(&m.j);
	expect_doc(&m, "{}\n");
	mem_close(&m);
}

/* ---- json_finish's verdicts ---- */

Test(unit_json, unbalanced_nesting_fails)
{
	struct mem m;

	mem_open(&m);
	json_obj_begin(&m.j, NULL);
	json_arr_begin(&m.j, "a");
	json_arr_end(&m.j);
	expect_finish_fails(&m, EINVAL, "object left open");
	mem_close(&m);

	mem_open(&m);
	json_arr_begin(&m.j, NULL);
	json_arr_end(&m.j);
	json_arr_end(&m.j);
	expect_finish_fails(&m, EINVAL, "one close too many");
	cr_expect_str_eq(mem_text(&m), "[]", "the extra close (or finish) wrote something");
	mem_close(&m);

	mem_open(&m);
	json_obj_begin(&m.j, NULL);
	json_arr_end(&m.j);
	expect_finish_fails(&m, EINVAL, "object closed as an array");
	mem_close(&m);

	mem_open(&m);
	json_arr_begin(&m.j, NULL);
	json_obj_end(&m.j);
	expect_finish_fails(&m, EINVAL, "array closed as an object");
	mem_close(&m);

	mem_open(&m);
	expect_finish_fails(&m, EINVAL, "nothing written");
	mem_close(&m);
}

Test(unit_json, misused_keys_fail)
{
	struct mem m;

	mem_open(&m);
	json_obj_begin(&m.j, NULL);
	json_int(&m.j, NULL, 1);
	json_obj_end(&m.j);
	expect_finish_fails(&m, EINVAL, "no key inside an object");
	mem_close(&m);

	mem_open(&m);
	json_arr_begin(&m.j, NULL);
	json_int(&m.j, "k", 1);
	json_arr_end(&m.j);
	expect_finish_fails(&m, EINVAL, "key inside an array");
	mem_close(&m);

	mem_open(&m);
	json_obj_begin(&m.j, "k");
	json_obj_end(&m.j);
	expect_finish_fails(&m, EINVAL, "key at the top level");
	mem_close(&m);

	mem_open(&m);
	json_int(&m.j, NULL, 1);
	json_int(&m.j, NULL, 2);
	expect_finish_fails(&m, EINVAL, "two top-level values");
	mem_close(&m);
}

/* An error is sticky: nothing more is written after it, even valid calls. */
Test(unit_json, nothing_written_after_an_error)
{
	struct mem m;

	mem_open(&m);
	json_obj_begin(&m.j, NULL);
	json_int(&m.j, "a", 1);
	json_int(&m.j, NULL, 2);
	cr_expect_eq(m.j.err, EINVAL, "err = %d after a missing key", m.j.err);
	json_int(&m.j, "b", 3);
	json_obj_end(&m.j);
	expect_finish_fails(&m, EINVAL, "after a missing key");
	cr_expect_str_eq(mem_text(&m), "{\n  \"a\": 1");
	mem_close(&m);
}

/* 31 open containers is the limit; the 32nd sets err and writes nothing,
 * not even its key. */
Test(unit_json, depth_limit)
{
	struct mem m;
	char line[2 * JSON_MAX_DEPTH + 4];
	const char *text;
	size_t len;

	mem_open(&m);
	for (int d = 0; d < JSON_MAX_DEPTH; d++)
		json_arr_begin(&m.j, NULL);
	json_int(&m.j, NULL, 7);
	for (int d = 0; d < JSON_MAX_DEPTH; d++)
		json_arr_end(&m.j);
	cr_expect_eq(json_finish(&m.j), 0, "%d levels: err %d", JSON_MAX_DEPTH, m.j.err);
	snprintf(line, sizeof(line), "\n%*s7\n", 2 * JSON_MAX_DEPTH, "");
	cr_expect_not_null(strstr(mem_text(&m), line), "deepest value not indented %d spaces",
			   2 * JSON_MAX_DEPTH);
	mem_close(&m);

	mem_open(&m);
	for (int d = 0; d < JSON_MAX_DEPTH - 1; d++)
		json_arr_begin(&m.j, NULL);
	json_obj_begin(&m.j, NULL);
	len = strlen(mem_text(&m));
	json_obj_begin(&m.j, "too_deep");
	cr_expect_eq(m.j.err, EINVAL, "err = %d past depth %d", m.j.err, JSON_MAX_DEPTH);
	cr_expect_eq(m.j.depth, JSON_MAX_DEPTH);
	json_obj_end(&m.j);
	for (int d = 0; d < JSON_MAX_DEPTH; d++)
		json_arr_end(&m.j);
	expect_finish_fails(&m, EINVAL, "depth overflow");
	text = mem_text(&m);
	cr_expect_eq(strlen(text), len, "wrote \"%s\" after the overflow", text + len);
	mem_close(&m);
}

/* /dev/full fails every write with ENOSPC: at the latest, the flush in
 * json_finish must see it. */
Test(unit_json, write_failure_fails)
{
	struct json j;
	FILE *f = fopen("/dev/full", "w");

	if (!f)
		cr_skip_test("no /dev/full");
	json_init(&j, f);
	json_obj_begin(&j, NULL);
	json_str(&j, "k", "v");
	json_obj_end(&j);
	errno = 0;
	cr_expect_eq(json_finish(&j), -1);
	cr_expect_eq(errno, ENOSPC, "errno %d (%s)", errno, strerror(errno));
	cr_expect_eq(j.err, ENOSPC);
	fclose(f);
}
