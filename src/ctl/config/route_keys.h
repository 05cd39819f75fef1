/* SPDX-License-Identifier: MIT */
/* route_keys: the route keys whose values are lists of words rather than
 * settings of the table: sni (server names for TLS routing), alpn (ALPN
 * protocols), allow and deny (source ranges). Repeated lines add to the
 * list. */
#ifndef SPLICER_ROUTE_KEYS_H
#define SPLICER_ROUTE_KEYS_H
#include <stddef.h>

#include "config.h"

/* 1 if name is one of them ('-' or '_' alike). */
int route_text_key(const char *name);

/* Checks every word of value and adds them to r. Returns 0, or -1 with a
 * sentence in why naming the first bad word. note gets "" or a remark on
 * a word that is accepted but likely a typo (a range with host bits set). */
int route_text_set(struct route *r, const char *name, const char *value, unsigned line,
		   char *why, size_t len, char *note, size_t notelen);

/* What the keys of r say together, once the route is read: alpn without
 * sni (an error: nothing would check it), and allow ranges all inside deny
 * ranges (a note: the route lets nobody in). Prints FILE:LINE: lines;
 * returns the number of errors. */
int route_keys_check(const struct config *c, const struct route *r);

#endif
