/* SPDX-License-Identifier: MIT */
/* cmd_check: `splicer check -c FILE [options]` is a preflight, as `haproxy
 * -c` and `nginx -t` are: it reads the config the way the proxy would (same
 * reader, same checks, options applied on top), resolves every name, looks
 * up `user`, opens the log for append as that user (config_finalize(), so
 * the proxy refuses to start on the same things), and binds each listen and
 * the stats address once and releases it (here only):
 * --syntax-only leaves this host alone (no user lookup, no log opened,
 * nothing bound; names are still resolved): a file meant for another host.
 *   exit 0  "FILE: ok: 2 routes, 3 listen addresses, 5 backends"
 *   exit 1  one "FILE:LINE: message" per problem
 *   exit 2  a bad command line
 *
 * An address held by a running splicer (a check before its reload) is a
 * note, not a problem: the probe binds without SO_REUSEPORT first, as the
 * proxy's in-use check does, and when that finds the address taken, once
 * more with SO_REUSEPORT; that one succeeds only beside listeners that share
 * the port and belong to the same user, which is what a running splicer's
 * are (and what the reload's own sockets join). Anything else holding it is
 * "in use" (listener_probe). */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "config.h"
#include "config_table.h"
#include "dns.h"
#include "listener.h"

/* "FILE:LINE: " when the file gave it, else "splicer: ". */
static void where(const struct config *c, unsigned line, char *buf, size_t len)
{
	if (c->file[0] && line)
		snprintf(buf, len, "%s:%u: ", c->file, line);
	else
		snprintf(buf, len, "splicer: ");
}

/* One probe: 0 (free or a note), 1 (a problem); both printed with where. */
static int probe(const struct config *c, const struct addr *a, unsigned line, const char *what)
{
	char why[512], at[300];
	int r = listener_probe(a, why, sizeof(why));

	if (!r)
		return 0;
	where(c, line, at, sizeof(at));
	fprintf(stderr, "%s%s%s%s\n", at, r > 0 ? "note: " : "", what, why);
	return r < 0;
}

/* The listen and stats addresses, bound once and released. Returns the
 * number of problems. */
static int probe_addresses(const struct config *c)
{
	int bad = 0;

	if (c->nlst) /* finalized: each socket once, however many routes share it */
		for (unsigned k = 0; k < c->nlst; k++)
			bad += probe(c, c->lst[k].addr, c->lst[k].line, "");
	else
		for (unsigned i = 0; i < c->nroutes; i++)
			for (unsigned l = 0; l < c->route[i]->nlisten; l++)
				bad += probe(c, &c->route[i]->listen[l], c->route[i]->listen_line[l], "");
	if (c->stats_addr.len)
		bad += probe(c, &c->stats_addr, c->set_line[setting_find("stats") - settings], "stats: ");
	return bad;
}

int cmd_check(int argc, char **argv)
{
	struct config cfg;
	unsigned listens = 0, backends = 0;
	int r, has_file = 0, syntax_only = 0, bad;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--syntax-only")) { /* ours: the options parser never sees it */
			syntax_only = 1;
			memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(*argv));
			argc--;
			i--;
			continue;
		}
		has_file |= !strcmp(argv[i], "-c") || !strcmp(argv[i], "--config") ||
			    !strncmp(argv[i], "--config=", 9);
	}
	if (!has_file) {
		fprintf(stderr, "usage: %s check [--syntax-only] -c FILE [options]\n", argv[0]);
		return 2;
	}
	config_host_checks = !syntax_only;
	config_defaults(&cfg);
	r = config_parse_args(&cfg, argc, argv, 2);
	if (r > 0) {
		config_free(&cfg);
		return 0;
	}
	bad = r < 0 || dns_fill(&cfg, DNS_CHECK) || config_finalize(&cfg);
	/* a file read with problems is probed too, for every problem in one
	 * go; a command line or a file that could not be read is not */
	if (!syntax_only && (r == 0 || cfg.file_problems))
		bad |= probe_addresses(&cfg) > 0;
	if (bad) {
		config_free(&cfg);
		return 1;
	}
	listens = cfg.nlst; /* sockets: routes may share an address (sni) */
	for (unsigned i = 0; i < cfg.nroutes; i++)
		backends += cfg.route[i]->nbackend;
	printf("%s: ok: %u route%s, %u listen address%s, %u backend%s\n", cfg.file, cfg.nroutes,
	       cfg.nroutes == 1 ? "" : "s", listens, listens == 1 ? "" : "es", backends,
	       backends == 1 ? "" : "s");
	config_free(&cfg);
	return 0;
}
