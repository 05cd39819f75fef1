/* SPDX-License-Identifier: MIT */
/* config_listen: builds a config's listen groups (struct listen_group in
 * config.h): one per distinct address, with the routes that share it and,
 * when some have sni, the table of their server names. */
#ifndef SPLICER_CONFIG_LISTEN_H
#define SPLICER_CONFIG_LISTEN_H
#include <stddef.h>

#include "config.h"

/* Fills c->lst from the routes' listen lists (after their settings are
 * resolved). Prints every problem (FILE:LINE: two routes without sni on one
 * address, the same server name in two routes of one address that alpn does
 * not tell apart, accept_proxy that differs) and a note for each name the
 * precedence rule decides. Returns 0 or -1. */
int config_listen_groups(struct config *c);

/* "FILE:LINE: " for a problem at location line (CONF_LOC: c's file or one
 * it includes), or "splicer: " (no file, or 0: the command line). */
void config_where(const struct config *c, unsigned line, char *buf, size_t len);

/* How a message names another location: "line 12" in the main file,
 * "conf.d/web.conf:12" in an included one. Returns buf. */
const char *config_line_ref(const struct config *c, unsigned loc, char *buf, size_t len);

/* Frees the name tables (config_free). */
void config_listen_free(struct config *c);

#endif
