/* SPDX-License-Identifier: MIT */
/* json_text: see json_text.h. */
#include "json_text.h"

#include <stdint.h>
#include <stdio.h>

/* The code point of the UTF-8 sequence at in[0..n), and its length in
 * *len; -1 when in[0] does not start a valid one (then one byte is taken). */
static int32_t utf8_next(const unsigned char *in, size_t n, size_t *len)
{
	unsigned char c = in[0];
	size_t k;
	int32_t cp, min;

	if (c >= 0xc2 && c <= 0xdf) {
		k = 2, cp = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		k = 3, cp = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		k = 4, cp = c & 0x07, min = 0x10000;
	} else {
		*len = 1;
		return -1; /* a continuation byte, 0xc0, 0xc1 or 0xf5..0xff */
	}
	*len = 1;
	if (n < k)
		return -1;
	for (size_t i = 1; i < k; i++) {
		if ((in[i] & 0xc0) != 0x80)
			return -1;
		cp = cp << 6 | (in[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	*len = k;
	return cp;
}

size_t json_escape(const char *in, size_t n, char *out, size_t outlen)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t o = 0, len;
	char esc[13];
	int m;

	if (!outlen)
		return 0;
	for (size_t i = 0; i < n; i += len) {
		unsigned char c = p[i];
		int32_t cp;

		len = 1;
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			if (o + 1 >= outlen)
				break;
			out[o++] = (char)c;
			continue;
		}
		switch (c) {
		case '"': m = snprintf(esc, sizeof(esc), "\\\""); break;
		case '\\': m = snprintf(esc, sizeof(esc), "\\\\"); break;
		case '\b': m = snprintf(esc, sizeof(esc), "\\b"); break;
		case '\f': m = snprintf(esc, sizeof(esc), "\\f"); break;
		case '\n': m = snprintf(esc, sizeof(esc), "\\n"); break;
		case '\r': m = snprintf(esc, sizeof(esc), "\\r"); break;
		case '\t': m = snprintf(esc, sizeof(esc), "\\t"); break;
		default:
			if (c < 0x80) {
				m = snprintf(esc, sizeof(esc), "\\u%04x", c);
				break;
			}
			cp = utf8_next(p + i, n - i, &len);
			if (cp < 0)
				m = snprintf(esc, sizeof(esc), "\\ufffd");
			else if (cp < 0x10000)
				m = snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)cp);
			else
				m = snprintf(esc, sizeof(esc), "\\u%04x\\u%04x",
					     (unsigned)(0xd800 + ((cp - 0x10000) >> 10)),
					     (unsigned)(0xdc00 + ((cp - 0x10000) & 0x3ff)));
		}
		if (o + (size_t)m >= outlen)
			break;
		for (int k = 0; k < m; k++)
			out[o++] = esc[k];
	}
	out[o] = '\0';
	return o;
}
