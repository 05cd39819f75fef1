/* SPDX-License-Identifier: MIT */
/* config_env: see config_env.h. The same forms as a POSIX shell's and
 * HAProxy's "${VAR}" and "${VAR:-default}" (nginx has none: its users run
 * envsubst over a template); unlike a shell's, an unset VAR without a
 * default is an error rather than "": a listen address that silently
 * became ":" or a backend list that became empty is worse than a refused
 * start. The environment is the process's at start: a reload (SIGHUP)
 * reads the file again with the same values, and an upgrade's new process
 * inherits them. */
#define _GNU_SOURCE
#include "config_env.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends n bytes of s to out at *len. Returns -1 when they do not fit. */
static int put(char *out, size_t outlen, size_t *len, const char *s, size_t n)
{
	if (*len + n >= outlen)
		return -1;
	memcpy(out + *len, s, n);
	*len += n;
	out[*len] = '\0';
	return 0;
}

/* A value from the environment that a config value may hold: no control
 * byte (a newline or NUL would make one line two, or cut it). */
static int printable(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v < 0x20 || *v == 0x7f)
			return 0;
	return 1;
}

int config_env_expand(const char *in, char *out, size_t outlen, char *why, size_t whylen)
{
	size_t len = 0;

	if (!outlen)
		return -1;
	out[0] = '\0';
	for (const char *p = in; *p;) {
		const char *dollar = strchr(p, '$'), *name, *end, *val, *dflt = NULL;
		size_t nlen;
		char var[128];

		if (!dollar)
			dollar = p + strlen(p);
		if (put(out, outlen, &len, p, (size_t)(dollar - p)))
			goto too_long;
		if (!*dollar)
			break;
		if (dollar[1] == '$') { /* $$: one '$' */
			if (put(out, outlen, &len, "$", 1))
				goto too_long;
			p = dollar + 2;
			continue;
		}
		if (dollar[1] != '{') { /* a lone '$' is itself */
			if (put(out, outlen, &len, "$", 1))
				goto too_long;
			p = dollar + 1;
			continue;
		}
		name = dollar + 2;
		if (!(end = strchr(name, '}'))) {
			snprintf(why, whylen, "'${' without its closing '}' (a literal '$' is written $$)");
			return -1;
		}
		nlen = strcspn(name, ":}");
		if (name[nlen] == ':') {
			if (name[nlen + 1] != '-') {
				snprintf(why, whylen, "'${%.*s': expects ${VAR} or ${VAR:-default}",
					 (int)(end - name), name);
				return -1;
			}
			dflt = name + nlen + 2;
		}
		if (!nlen || nlen >= sizeof(var) || !(isalpha((unsigned char)name[0]) || name[0] == '_') ||
		    (size_t)strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
					 "0123456789_") != nlen) {
			snprintf(why, whylen, "'${%.*s}': a variable name is letters, digits and '_', "
				 "not starting with a digit", (int)(end - name), name);
			return -1;
		}
		memcpy(var, name, nlen);
		var[nlen] = '\0';
		val = getenv(var);
		if (dflt && (!val || !*val))
			val = NULL;
		if (val && !printable(val)) {
			snprintf(why, whylen, "environment variable %s holds a control character "
				 "(a newline?)", var);
			return -1;
		}
		if (val) {
			if (put(out, outlen, &len, val, strlen(val)))
				goto too_long;
		} else if (dflt) {
			if (put(out, outlen, &len, dflt, (size_t)(end - dflt)))
				goto too_long;
		} else {
			snprintf(why, whylen, "environment variable %s is not set (give a default: "
				 "${%s:-VALUE})", var, var);
			return -1;
		}
		p = end + 1;
	}
	return 0;
too_long:
	snprintf(why, whylen, "longer than %zu characters once its ${...} are expanded", outlen - 1);
	return -1;
}
