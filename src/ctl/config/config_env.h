/* SPDX-License-Identifier: MIT */
/* config_env: environment variables in config values.
 *   ${VAR}            VAR's value; an unset VAR is an error naming it
 *   ${VAR:-default}   VAR's value, or default when VAR is unset or empty
 *   $$                a '$' (so "$${X}" is the text ${X})
 * A '$' before anything else is itself. The result is not expanded again
 * (a value holding "${Y}" stays that text), and the default is taken as
 * written. */
#ifndef SPLICER_CONFIG_ENV_H
#define SPLICER_CONFIG_ENV_H
#include <stddef.h>

/* What an expanded value may hold, in bytes (a config line's length). */
#define CONFIG_ENV_MAX 4096

/* Expands in into out (outlen bytes). Returns 0, or -1 with a sentence in
 * why: an unset variable, a "${" without its '}', a name that is not
 * [A-Za-z_][A-Za-z0-9_]*, a control character in a value, a result longer
 * than outlen - 1. */
int config_env_expand(const char *in, char *out, size_t outlen, char *why, size_t whylen);

#endif
