/* SPDX-License-Identifier: MIT */
/* json_text: JSON string bodies for lines a program parses (the access
 * log's log_format = json, the admin socket's --json answers), from text
 * that may hold any byte: a client address (a PROXY v2 AF_UNIX path is 108
 * arbitrary bytes), an ALPN protocol name (RFC 7301: any bytes), a route's
 * name.
 *
 * The output is printable ASCII only, so a line survives any log pipeline
 * (syslog relays that mangle 8-bit bytes, terminals) and is one line:
 *   "  \  and the controls \b \f \n \r \t   as RFC 8259's short escapes
 *   other bytes below 0x20, and 0x7f        \u00XX
 *   a valid UTF-8 sequence                  \uXXXX (beyond the BMP: its
 *                                           UTF-16 surrogate pair)
 *   any other byte >= 0x80                  \ufffd, one per byte (what a
 *                                           decoder's "replace" gives): a
 *                                           JSON text must be valid UTF-8,
 *                                           and a raw 0xff would make the
 *                                           whole line unparsable
 * Valid UTF-8 is: no overlong form, no surrogate (U+D800..DFFF), nothing
 * above U+10FFFF (RFC 3629). */
#ifndef SPLICER_JSON_TEXT_H
#define SPLICER_JSON_TEXT_H
#include <stddef.h>

/* Writes the escaped form of in[0..n) into out (NUL-terminated, at most
 * outlen - 1 bytes, without the quotes). An escape, and a character's
 * escapes (a surrogate pair), are never cut: what does not fit is left out
 * whole. Returns the length written. */
size_t json_escape(const char *in, size_t n, char *out, size_t outlen);

#endif
