/* SPDX-License-Identifier: MIT */
/* json: a tiny streaming JSON writer for benchmark results, indented for
 * people (newline + 2 spaces per level, empty containers as {} and []).
 *
 *   struct json j;
 *   json_init(&j, f);
 *   json_obj_begin(&j, NULL);
 *   json_num(&j, "gbps", 9.76);
 *   json_arr_begin(&j, "samples"); json_int(&j, NULL, 3); json_arr_end(&j);
 *   json_obj_end(&j);
 *   if (json_finish(&j)) ... the file is not valid JSON ...
 *
 * Every value call takes a key: the member name inside an object, NULL inside
 * an array and for the single top-level value. Errors are sticky: a misuse or
 * a failed write sets err, nothing more is written, and json_finish reports
 * it, so callers check once at the end. */
#ifndef SPLICER_JSON_H
#define SPLICER_JSON_H
#include <stdio.h>

#define JSON_MAX_DEPTH 31	/* containers open at once; need_comma[0] is the top level */

struct json {
	FILE *f;		/* output, not owned: never closed here */
	int depth;		/* containers open now, 0..JSON_MAX_DEPTH */
	int need_comma[32];	/* per level: bit 0 a value was written there (the next
				 * one needs a comma), bit 1 the level is an array */
	int err;		/* sticky: 0, or the errno of the first failure (EINVAL for
				 * a misuse); once set nothing more is written */
};

void json_init(struct json *j, FILE *f);

/* Open / close an object or array. Opening beyond JSON_MAX_DEPTH, or closing
 * with nothing open or with the other kind open, sets err. */
void json_obj_begin(struct json *j, const char *key);
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j, const char *key);
void json_arr_end(struct json *j);

/* v escaped per RFC 8259: quote, backslash and bytes < 0x20 (\n \t \r \b \f
 * or \u00XX); bytes >= 0x80 pass through unchanged (UTF-8 in, UTF-8 out).
 * v == NULL writes null. */
void json_str(struct json *j, const char *key, const char *v);

/* NaN and +-inf write null (JSON has no such numbers); integers up to 2^53
 * in magnitude write without a decimal point ("3", not "3.0"); anything else
 * in %g form with 15, 16 or 17 significant digits, the fewest that read back
 * as the same double ("0.1", "1e+300"). Assumes the "C" LC_NUMERIC locale
 * (a decimal point, not a comma). */
void json_num(struct json *j, const char *key, double v);
void json_int(struct json *j, const char *key, long long v);
void json_bool(struct json *j, const char *key, int v);	/* nonzero: true */
void json_null(struct json *j, const char *key);

/* Ends the document with a newline and flushes j->f (does not close it);
 * call it once. Returns 0, or -1 with errno set when the output is not one
 * complete JSON value: EINVAL for nothing written, nesting left open, depth
 * overflowed, a key misused (missing inside an object, present elsewhere, a
 * second top-level value); the write's own errno (ENOSPC, EIO, ...) when a
 * write or the flush failed. */
int json_finish(struct json *j);

#endif
