/* SPDX-License-Identifier: MIT */
/* Unit tests for src/lib/json_text.c: JSON string escaping of any bytes
 * (json_text.h): exact escapes, UTF-8 as \u escapes (surrogate pairs past
 * the BMP), every kind of invalid UTF-8 replaced byte by byte, and an
 * output that is cut only between whole escapes. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <string.h>

#include "json_text.h"

static const char *esc(const char *in, size_t n)
{
	static char out[512];

	json_escape(in, n, out, sizeof(out));
	return out;
}

#define ESC(lit) esc(lit, sizeof(lit) - 1)

Test(unit_json_text, ascii_and_controls)
{
	cr_expect_str_eq(ESC("plain 127.0.0.1:80 /path"), "plain 127.0.0.1:80 /path");
	cr_expect_str_eq(ESC("a\"b\\c"), "a\\\"b\\\\c");
	cr_expect_str_eq(ESC("\b\f\n\r\t"), "\\b\\f\\n\\r\\t");
	cr_expect_str_eq(ESC("\x01\x1f\x7f"), "\\u0001\\u001f\\u007f");
	/* a NUL inside the bytes (a PROXY v2 Unix path) is a character too */
	cr_expect_str_eq(esc("a\0b", 3), "a\\u0000b");
}

Test(unit_json_text, utf8_becomes_u_escapes)
{
	cr_expect_str_eq(ESC("caf\xc3\xa9"), "caf\\u00e9");
	cr_expect_str_eq(ESC("\xe2\x82\xac"), "\\u20ac");
	cr_expect_str_eq(ESC("\xef\xbf\xbf"), "\\uffff");
	cr_expect_str_eq(ESC("\xf0\x9f\x98\x80"), "\\ud83d\\ude00");   /* U+1F600 */
	cr_expect_str_eq(ESC("\xf4\x8f\xbf\xbf"), "\\udbff\\udfff");   /* U+10FFFF */
}

Test(unit_json_text, invalid_utf8_is_replaced_byte_by_byte)
{
	cr_expect_str_eq(ESC("\xff"), "\\ufffd");
	cr_expect_str_eq(ESC("a\xc3"), "a\\ufffd");                     /* cut short */
	cr_expect_str_eq(ESC("\xc3(x"), "\\ufffd(x");                   /* bad continuation */
	cr_expect_str_eq(ESC("\xc0\xaf"), "\\ufffd\\ufffd");            /* overlong '/' */
	cr_expect_str_eq(ESC("\xe0\x80\xaf"), "\\ufffd\\ufffd\\ufffd"); /* overlong */
	cr_expect_str_eq(ESC("\xed\xa0\x80"), "\\ufffd\\ufffd\\ufffd"); /* a surrogate */
	cr_expect_str_eq(ESC("\xf4\x90\x80\x80"), "\\ufffd\\ufffd\\ufffd\\ufffd"); /* > U+10FFFF */
	cr_expect_str_eq(ESC("\x80\xbf"), "\\ufffd\\ufffd");            /* lone continuations */
	/* a valid character right after an invalid byte is kept */
	cr_expect_str_eq(ESC("\xe2\xc3\xa9"), "\\ufffd\\u00e9");
}

Test(unit_json_text, every_byte_gives_printable_ascii)
{
	char in[256], out[256 * 6 + 1];
	size_t n;

	for (int i = 0; i < 256; i++)
		in[i] = (char)i;
	n = json_escape(in, sizeof(in), out, sizeof(out));
	cr_assert_eq(n, strlen(out));
	for (size_t i = 0; i < n; i++)
		cr_expect(out[i] >= 0x20 && out[i] < 0x7f, "byte %zu is 0x%02x", i,
			  (unsigned char)out[i]);
}

Test(unit_json_text, cut_only_between_escapes)
{
	char out[16];

	/* "ab" + a surrogate pair (12): the pair does not fit in 15 whole */
	cr_expect_eq(json_escape("ab\xf0\x9f\x98\x80", 6, out, 14), 2);
	cr_expect_str_eq(out, "ab");
	cr_expect_eq(json_escape("ab\xf0\x9f\x98\x80", 6, out, 15), 14);
	cr_expect_eq(json_escape("a\n", 2, out, 3), 1);
	cr_expect_str_eq(out, "a");
	cr_expect_eq(json_escape("abc", 3, out, 1), 0);
	cr_expect_str_eq(out, "");
}
