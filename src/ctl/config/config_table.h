/* SPDX-License-Identifier: MIT */
/* config_table: the settings table, shared by the command-line parser
 * (config.c) and the config file reader (config_file.c). Internal. */
#ifndef SPLICER_CONFIG_TABLE_H
#define SPLICER_CONFIG_TABLE_H
#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum set_type { SET_UINT, SET_SIZE, SET_DURATION, SET_ENUM, SET_TEXT, SET_CUSTOM };
enum set_scope { SCOPE_GLOBAL, SCOPE_ROUTE };
#define SET_AUTO_OK 1 /* "auto" (stored as SETTING_AUTO) is accepted */
#define SET_ZERO_OK 2 /* 0 ("off" or "the kernel's") is accepted below min */
#define SET_PERCENT 4 /* SET_UINT: a trailing '%' is accepted ("10%") */

/* A value of its own syntax (a keepalive triple, a rate): SET_CUSTOM parses
 * it into the row's uint64_t; a SET_TEXT row with a kind has its text
 * checked by parse (out NULL) before it is stored. setting_kind() says
 * which rows have one (config_sockopt.c). */
struct setting_kind {
	const char *meta;            /* --help's placeholder: "IDLE,INTERVAL,COUNT" */
	const char *type;            /* the reference's type: "keepalive", "rate" */
	const char *accepts;         /* the reference's "accepts" and --help's range */
	int (*parse)(const char *val, uint64_t *out, char *why, size_t len); /* 0, or -1 + why */
};

struct setting {
	const char *name;            /* long option, and the config key ('-' or '_') */
	char short_opt;              /* 0 when none */
	enum set_type type;
	uint64_t min, max;           /* accepted range (after units) */
	const char *def;             /* default, as the user would write it */
	int flags;                   /* SET_AUTO_OK, SET_ZERO_OK */
	const char *const *choices;  /* SET_ENUM */
	enum set_scope scope;        /* SCOPE_ROUTE: off is into struct route_opts */
	size_t off;                  /* field in struct config or struct route_opts */
	const char *help;
};

extern const struct setting settings[];
extern const unsigned nsettings;

/* The kind of a SET_CUSTOM row, or of a SET_TEXT row that checks its
 * text; NULL for the others. */
const struct setting_kind *setting_kind(const struct setting *s);

/* The setting called name (a long option name, '_' read as '-'), or NULL. */
const struct setting *setting_find(const char *name);

/* Where s is stored: in c, or in o for route-scope settings; a uint64_t,
 * or for SET_TEXT a char[SETTING_TEXT_MAX]. */
void *setting_field(struct config *c, struct route_opts *o, const struct setting *s);

/* Parses val for s into *out. Returns 0, or -1 with why = "invalid value
 * 'X' (expects RANGE)". */
int setting_parse(const struct setting *s, const char *val, void *out, char *why, size_t len);

/* Adds what `text` stands for to r's listen addresses (backend 0) or its
 * backends (backend 1), given at `line` (0: command line): every address a
 * name resolves to, "*:port"'s two; each backend with weight 1 (the caller
 * applies a weight= to all of them). Marks the key as given. Returns how
 * many were added, or -1 with why (the address's problem, or no room). */
int route_add_addrs(struct route *r, int backend, const char *text, unsigned line, char *why,
		    size_t len);

/* The name in names[0..n) that word is most likely a typo of (edit
 * distance, '-' and '_' alike; the longer the word, the more it may
 * differ), or NULL when none is close. */
const char *name_nearest(const char *word, const char *const *names, unsigned n);

#endif
