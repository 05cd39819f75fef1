/* SPDX-License-Identifier: MIT */
/* config_listen: builds a config's listen groups (struct listen_group in
 * config.h): one per distinct address, with the routes that share it and,
 * when some have sni, the table of their server names. */
#ifndef SPLICER_CONFIG_LISTEN_H
#define SPLICER_CONFIG_LISTEN_H
#include "config.h"

/* Fills c->lst from the routes' listen lists (after their settings are
 * resolved). Prints every problem (FILE:LINE: two routes without sni on one
 * address, the same server name in two routes of one address that alpn does
 * not tell apart, accept_proxy that differs) and a note for each name the
 * precedence rule decides. Returns 0 or -1. */
int config_listen_groups(struct config *c);

/* Frees the name tables (config_free). */
void config_listen_free(struct config *c);

#endif
