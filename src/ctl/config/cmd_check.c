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
 * "in use" (listener_probe).
 *
 * The admin socket (`admin = PATH`): its directory must exist and be
 * writable for the run-as user (privs_check_socket_dir), and the path be
 * free, a stale socket file, or the live socket of a running splicer (a
 * note, as for its listeners: a check before its reload); a live socket of
 * anything else, or a file that is not a socket, is a problem. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "activation.h"
#include "cmd.h"
#include "config.h"
#include "config_listen.h"
#include "config_table.h"
#include "dns.h"
#include "listener.h"
#include "privs.h"

/* "FILE:LINE: " when the file gave it, else "splicer: ". */
static void where(const struct config *c, unsigned line, char *buf, size_t len)
{
	config_where(c, line, buf, len); /* the included file's name, when it gave it */
}

/* One probe: 0 (free or a note), 1 (a problem); both printed with where.
 * A Unix path: first, may the run-as user make the socket there? */
static int probe(const struct config *c, const struct addr *a, unsigned line, const char *what)
{
	const struct sockaddr_un *sun = (const void *)&a->ss;
	char why[768], at[300];
	int r;

	if (listener_kept(a))
		return 0; /* systemd's socket, bound already: the proxy binds nothing there */
	if (a->ss.ss_family == AF_UNIX && sun->sun_path[0] &&
	    privs_check_unix_dir(what[0] ? "stats" : "listen", sun->sun_path, c->user, why,
				 sizeof(why))) {
		where(c, line, at, sizeof(at));
		fprintf(stderr, "%s%s\n", at, why);
		return 1;
	}
	r = listener_probe(a, why, sizeof(why));
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

/* The pid of the process listening on Unix address a when it is a
 * splicer (its command name), else 0. */
static pid_t splicer_listening(const struct addr *a)
{
	struct ucred cred = { 0 };
	socklen_t len = sizeof(cred);
	char path[64], comm[32] = "";
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	FILE *f;

	if (fd < 0)
		return 0;
	/* non-blocking: a full accept queue says EAGAIN instead of a wait */
	if (connect(fd, (const struct sockaddr *)&a->ss, a->len) ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.pid <= 0)
		cred.pid = 0;
	close(fd);
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)cred.pid);
	if (cred.pid && (f = fopen(path, "re"))) {
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
	}
	return !strcmp(comm, "splicer\n") ? cred.pid : 0;
}

/* The admin socket's directory and path. Returns the number of problems. */
static int probe_admin(const struct config *c)
{
	unsigned line = c->set_line[setting_find("admin") - settings];
	char why[768], at[300], text[SETTING_TEXT_MAX + 8];
	struct addr a;
	pid_t pid;
	int r;

	/* off, or its path already reported by config_finalize */
	if (!strcmp(c->admin, "off") || privs_check_admin_path(c->admin, why, sizeof(why)))
		return 0;
	where(c, line, at, sizeof(at));
	if (privs_check_socket_dir(c->admin, c->user, why, sizeof(why))) {
		fprintf(stderr, "%s%s\n", at, why);
		return 1;
	}
	snprintf(text, sizeof(text), "unix:%s", strncmp(c->admin, "unix:", 5) ? c->admin : c->admin + 5);
	if (addr_parse(text, ADDR_LISTEN, &a, why, sizeof(why)))
		return 0; /* privs_check_admin_path took it */
	r = listener_probe(&a, why, sizeof(why));
	if (r == -EADDRINUSE && (pid = splicer_listening(&a))) {
		fprintf(stderr, "%snote: admin %s: the admin socket of a running splicer (pid %d), "
			"which keeps it across reloads; a second proxy started on this file would be "
			"refused\n", at, a.text + 5, (int)pid);
		return 0;
	}
	if (r < 0)
		fprintf(stderr, "%sadmin: %s\n", at, why);
	return r < 0;
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
	/* run with systemd's sockets (LISTEN_FDS), `systemd:NAME` is looked up
	 * as the proxy would; without (ExecStartPre= gets none), it is a note */
	activation_check_only = 1;
	activation_init(0);
	config_defaults(&cfg);
	r = config_parse_args(&cfg, argc, argv, 2);
	if (r > 0) {
		config_free(&cfg);
		return 0;
	}
	bad = r < 0 || dns_fill(&cfg, DNS_CHECK) || config_finalize(&cfg) || activation_check(&cfg);
	/* a file read with problems is probed too, for every problem in one
	 * go; a command line or a file that could not be read is not */
	if (!syntax_only && (r == 0 || cfg.file_problems))
		bad |= probe_addresses(&cfg) + probe_admin(&cfg) > 0;
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
