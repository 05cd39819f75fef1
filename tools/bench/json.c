/* SPDX-License-Identifier: MIT */
/* json: streaming JSON writer. Nothing is buffered here beyond stdio: each
 * call writes its piece at once, so a result file grows as a benchmark runs
 * and memory does not grow with the number of samples.
 *
 * Layout: a value inside a container starts on its own line, indented two
 * spaces per level; the closing bracket goes back to its opener's level; an
 * empty container stays on one line ({} or []). */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JSON_LVL_VALUE 0x1	/* a value was written at this level: the next needs a comma */
#define JSON_LVL_ARRAY 0x2	/* this level is an array (else an object, or the top level) */

/* Largest magnitude below which every integer is a double: 2^53. */
#define JSON_EXACT_INT 9007199254740992.0

_Static_assert(sizeof(((struct json *)0)->need_comma) / sizeof(int) == JSON_MAX_DEPTH + 1,
	       "need_comma holds the top level and every open container");

/* Keeps the first failure only: it is the one that explains the others. */
static void json_fail(struct json *j, int e)
{
	if (!j->err)
		j->err = e ? e : EIO;
}

static void json_put(struct json *j, const char *s, size_t len)
{
	if (j->err || !len)
		return;
	errno = 0;	/* a short write need not set it: json_fail then says EIO */
	if (fwrite(s, 1, len, j->f) != len)
		json_fail(j, errno);
}

static void json_puts(struct json *j, const char *s)
{
	json_put(j, s, strlen(s));
}

/* A newline and 2 spaces per level; depth <= JSON_MAX_DEPTH fits the pad. */
static void json_newline(struct json *j, int depth)
{
	static const char pad[] = "\n                                                              ";

	_Static_assert(sizeof(pad) - 1 >= 1 + 2 * JSON_MAX_DEPTH, "pad too short");
	json_put(j, pad, 1 + 2 * (size_t)depth);
}

/* Writes s as a JSON string: runs of plain bytes go out in one fwrite,
 * bytes >= 0x80 among them (UTF-8 is valid JSON as is). */
static void json_put_string(struct json *j, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *run = p;

	json_put(j, "\"", 1);
	for (; *p; p++) {
		char esc[7] = "\\u00";
		const char *e = esc;
		size_t elen = 2;

		if (*p >= 0x20 && *p != '"' && *p != '\\')
			continue;
		switch (*p) {
		case '"': e = "\\\""; break;
		case '\\': e = "\\\\"; break;
		case '\b': e = "\\b"; break;
		case '\f': e = "\\f"; break;
		case '\n': e = "\\n"; break;
		case '\r': e = "\\r"; break;
		case '\t': e = "\\t"; break;
		default:
			esc[4] = hex[*p >> 4];
			esc[5] = hex[*p & 0xf];
			elen = 6;
		}
		json_put(j, (const char *)run, (size_t)(p - run));
		json_put(j, e, elen);
		run = p + 1;
	}
	json_put(j, (const char *)run, (size_t)(p - run));
	json_put(j, "\"", 1);
}

/* Starts a value at the current level: checks the key against the level
 * (required in an object, forbidden in an array and at the top level, where
 * only one value may go), then writes the comma, the indentation and the
 * key. Returns 0 when the caller may write the value, -1 after an error. */
static int json_value_begin(struct json *j, const char *key)
{
	int *lvl;
	int in_obj;

	if (j->err)
		return -1;
	lvl = &j->need_comma[j->depth];
	in_obj = j->depth > 0 && !(*lvl & JSON_LVL_ARRAY);
	if (in_obj != (key != NULL) || (j->depth == 0 && (*lvl & JSON_LVL_VALUE))) {
		json_fail(j, EINVAL);
		return -1;
	}
	if (j->depth > 0) {
		if (*lvl & JSON_LVL_VALUE)
			json_put(j, ",", 1);
		json_newline(j, j->depth);
	}
	*lvl |= JSON_LVL_VALUE;
	if (key) {
		json_put_string(j, key);
		json_put(j, ": ", 2);
	}
	return j->err ? -1 : 0;
}

static void json_open(struct json *j, const char *key, int lvl_flags, const char *bracket)
{
	if (j->err)
		return;
	/* Checked before anything is written, key included: the output stops
	 * at the last complete value. */
	if (j->depth >= JSON_MAX_DEPTH) {
		json_fail(j, EINVAL);
		return;
	}
	if (json_value_begin(j, key))
		return;
	json_put(j, bracket, 1);
	j->need_comma[++j->depth] = lvl_flags;
}

static void json_close(struct json *j, int lvl_flags, const char *bracket)
{
	int lvl;

	if (j->err)
		return;
	lvl = j->need_comma[j->depth];
	if (j->depth == 0 || (lvl & JSON_LVL_ARRAY) != lvl_flags) {
		json_fail(j, EINVAL);
		return;
	}
	j->depth--;
	if (lvl & JSON_LVL_VALUE)
		json_newline(j, j->depth);
	json_put(j, bracket, 1);
}

void json_init(struct json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
}

void json_obj_begin(struct json *j, const char *key)
{
	json_open(j, key, 0, "{");
}

void json_obj_end(struct json *j)
{
	json_close(j, 0, "}");
}

void json_arr_begin(struct json *j, const char *key)
{
	json_open(j, key, JSON_LVL_ARRAY, "[");
}

void json_arr_end(struct json *j)
{
	json_close(j, JSON_LVL_ARRAY, "]");
}

void json_str(struct json *j, const char *key, const char *v)
{
	if (json_value_begin(j, key))
		return;
	if (v)
		json_put_string(j, v);
	else
		json_puts(j, "null");
}

void json_num(struct json *j, const char *key, double v)
{
	char buf[32];

	if (json_value_begin(j, key))
		return;
	if (isnan(v) || isinf(v)) {
		json_puts(j, "null");
		return;
	}
	/* The range check comes first: converting a double beyond long long
	 * is undefined behaviour. -0.0 prints as 0. */
	if (v >= -JSON_EXACT_INT && v <= JSON_EXACT_INT && v == (double)(long long)v) {
		snprintf(buf, sizeof(buf), "%lld", (long long)v);
	} else {
		/* 17 significant digits always round-trip; fewer usually do
		 * and read better (0.1, not 0.10000000000000001). */
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(buf, sizeof(buf), "%.*g", prec, v);
			if (strtod(buf, NULL) == v)
				break;
		}
	}
	json_puts(j, buf);
}

void json_int(struct json *j, const char *key, long long v)
{
	char buf[24];

	if (json_value_begin(j, key))
		return;
	snprintf(buf, sizeof(buf), "%lld", v);
	json_puts(j, buf);
}

void json_bool(struct json *j, const char *key, int v)
{
	if (json_value_begin(j, key))
		return;
	json_puts(j, v ? "true" : "false");
}

void json_null(struct json *j, const char *key)
{
	if (json_value_begin(j, key))
		return;
	json_puts(j, "null");
}

int json_finish(struct json *j)
{
	if (!j->err && (j->depth || !(j->need_comma[0] & JSON_LVL_VALUE)))
		json_fail(j, EINVAL);
	json_put(j, "\n", 1);
	if (!j->err && fflush(j->f))
		json_fail(j, errno);
	if (j->err) {
		errno = j->err;
		return -1;
	}
	return 0;
}
