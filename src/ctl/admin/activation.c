/* SPDX-License-Identifier: MIT */
/* activation: see activation.h. The protocol is sd_listen_fds(3)'s, read
 * here without libsystemd (one more library for three variables). */
#define _GNU_SOURCE
#include "activation.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listener.h"
#include "log.h"

#define ENV_SOCKETS "SPLICER_SYSTEMD_SOCKETS"
#define SD_FIRST_FD 3  /* SD_LISTEN_FDS_START */
#define NAME_MAX_SD 255 /* systemd's FileDescriptorName= limit */

struct activated {
	int fd;                   /* -1: named only (an upgrade's new process); else kept for
				     the process's life, so a reload that dropped the socket's
				     route and brings it back takes it again */
	char name[NAME_MAX_SD + 1];
	struct addr addr;         /* its getsockname(), as `listen =` would write it */
};

static struct activated act[LISTENER_KEPT_MAX];
static unsigned nact;
static int active;
int activation_check_only;

/* The address of a passed socket as a config's listen would parse it (so
 * addr_equal matches `listen = ADDR`): formatted, then parsed back. */
static int addr_of(int fd, struct addr *a, char *why, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char text[ADDR_TEXT_MAX], err[160];

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		snprintf(why, len, "getsockname: %s", strerror(errno));
		return -1;
	}
	addr_format((struct sockaddr *)&ss, sl, text, sizeof(text));
	if (addr_parse(text, ADDR_LISTEN, a, err, sizeof(err))) {
		snprintf(why, len, "address %s: %s", text, err);
		return -1;
	}
	return 0;
}

int activation_kept_sockaddr(const struct sockaddr_storage *ss, socklen_t len)
{
	char text[ADDR_TEXT_MAX], err[160];
	struct addr a;

	if (!nact)
		return 0;
	addr_format((const struct sockaddr *)ss, len, text, sizeof(text));
	return !addr_parse(text, ADDR_LISTEN, &a, err, sizeof(err)) && listener_kept(&a);
}

/* One passed descriptor: a listening stream socket, or it is left alone. */
static void take_fd(int fd, const char *name)
{
	struct activated *s = &act[nact];
	int type = 0, listening = 0;
	socklen_t tl = sizeof(type), ll = sizeof(listening);
	char why[320];

	int fl = fcntl(fd, F_GETFL);

	/* non-blocking as splicer's own listeners: a worker's accept() must
	 * never wait (the flag is the socket's: systemd's copy has it too) */
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) < 0 ||
	    type != SOCK_STREAM || !listening) {
		log_err("systemd socket %d (%s): not a listening stream socket (ListenStream= is the "
			"one splicer takes); left alone", fd, name);
		return;
	}
	if (addr_of(fd, &s->addr, why, sizeof(why))) {
		log_err("systemd socket %d (%s): %s; left alone", fd, name, why);
		return;
	}
	s->fd = fd;
	snprintf(s->name, sizeof(s->name), "%s", name);
	listener_keep(&s->addr);
	nact++;
}

/* The names and addresses an old process had (ENV_SOCKETS: "NAME ADDR"
 * lines): the sockets themselves come by address (upgrade.h). */
static void names_inherited(const char *list)
{
	char *copy = strdup(list), *save = NULL, err[256];

	for (char *l = copy ? strtok_r(copy, "\n", &save) : NULL; l && nact < LISTENER_KEPT_MAX;
	     l = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(l, ' ');
		struct activated *s = &act[nact];
		if (!sp || (size_t)(sp - l) > NAME_MAX_SD)
			continue;
		*sp = '\0';
		if (addr_parse(sp + 1, ADDR_LISTEN, &s->addr, err, sizeof(err)))
			continue;
		s->fd = -1;
		snprintf(s->name, sizeof(s->name), "%s", l);
		listener_keep(&s->addr);
		nact++;
	}
	free(copy);
	active = nact > 0;
}

/* ENV_SOCKETS for the processes an upgrade starts. */
static void names_export(void)
{
	size_t cap = nact * (NAME_MAX_SD + ADDR_TEXT_MAX + 2) + 1, n = 0;
	char *v = malloc(cap);

	if (!v)
		return;
	v[0] = '\0';
	for (unsigned i = 0; i < nact; i++)
		n += (size_t)snprintf(v + n, cap - n, "%s %s\n", act[i].name, act[i].addr.text);
	setenv(ENV_SOCKETS, v, 1);
	free(v);
}

void activation_init(int upgraded)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES"), *inherited = getenv(ENV_SOCKETS);
	char *end;
	long n = fds ? strtol(fds, &end, 10) : 0;

	if (pid && fds && strtol(pid, NULL, 10) == (long)getpid() && !*end && n > 0) {
		const char *p = names;
		if (n > LISTENER_KEPT_MAX) {
			log_err("systemd passed %ld sockets; splicer takes the first %d", n,
				LISTENER_KEPT_MAX);
			n = LISTENER_KEPT_MAX;
		}
		for (long i = 0; i < n; i++) {
			/* LISTEN_FDNAMES: one name a descriptor, ':' between; systemd
			 * says "unknown" for one it has no name for */
			char name[NAME_MAX_SD + 1] = "unknown";
			if (p && *p) {
				size_t len = strcspn(p, ":");
				snprintf(name, sizeof(name), "%.*s", (int)(len < NAME_MAX_SD ? len : NAME_MAX_SD), p);
				p += len + (p[len] == ':');
			}
			take_fd(SD_FIRST_FD + (int)i, name);
		}
		active = 1;
		names_export();
	} else if (inherited && upgraded) {
		names_inherited(inherited);
	} else {
		unsetenv(ENV_SOCKETS); /* not ours: a stray from a shell */
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
}

int activation_active(void)
{
	return active;
}

int activation_lookup(const char *name, struct addr *a, unsigned max, char *why, size_t len)
{
	unsigned got = 0, k = 0;
	size_t n = 0;
	char known[512] = "";

	if (!active) {
		snprintf(why, len, "listen systemd:%s: %s", name, activation_check_only
			 ? "a socket systemd passes at start (no LISTEN_FDS here: not checked)"
			 : "systemd passed no sockets (LISTEN_FDS is not set for this process): "
			   "start it through its .socket unit, or listen on an address");
		return activation_check_only ? -1 : 0;
	}
	for (unsigned i = 0; i < nact; i++) {
		if (!strcmp(act[i].name, name)) {
			if (got < max)
				a[got] = act[i].addr;
			got++;
			continue;
		}
		if (n < sizeof(known) - 1)
			n += (size_t)snprintf(known + n, sizeof(known) - n, "%s%s (%s)", k++ ? ", " : "",
					      act[i].name, act[i].addr.text);
	}
	if (!got)
		snprintf(why, len, "listen systemd:%s: systemd passed no socket named '%s' "
			 "(FileDescriptorName= in the .socket unit); it passed %s", name, name,
			 k ? known : "none");
	return (int)(got < max ? got : max);
}

int activation_listener_open_n(struct addr *a, unsigned n, int *fds, const struct listen_opts *o,
			       char *err, unsigned errlen)
{
	struct activated *s = NULL;
	int reuse = 0, r;
	socklen_t rl = sizeof(reuse);

	for (unsigned i = 0; i < nact && !s; i++)
		if (act[i].fd >= 0 && addr_equal(&act[i].addr, a))
			s = &act[i];
	if (!s || !n)
		return 0;
	if ((fds[0] = fcntl(s->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		r = -errno;
		snprintf(err, errlen, "listen %s (systemd:%s): dup: %s", a->text, s->name,
			 strerror(errno));
		return r;
	}
	/* a filter a process before this one left (listener.h) */
	setsockopt(fds[0], SOL_SOCKET, SO_DETACH_FILTER, &reuse, sizeof(reuse));
	if ((r = sockopt_apply_listen(fds[0], a->ss.ss_family, o, err, errlen)) < 0)
		log_warn("listen %s (systemd:%s): %s (the socket keeps systemd's value)", a->text,
			 s->name, err);
	log_info("listen %s: the socket systemd passed as '%s'", a->text, s->name);
	/* ReusePort=yes: every worker a socket of the group, as splicer's own
	 * listeners; it takes the same user as the socket's (systemd's is
	 * root's), else the workers share the one socket */
	if (n > 1 && a->ss.ss_family != AF_UNIX &&
	    !getsockopt(fds[0], SOL_SOCKET, SO_REUSEPORT, &reuse, &rl) && reuse &&
	    listener_open_n(a, n - 1, fds + 1, 1, o, err, errlen) == 0)
		return 1;
	for (unsigned i = 1; i < n; i++)
		if ((fds[i] = fcntl(fds[0], F_DUPFD_CLOEXEC, 0)) < 0) {
			r = -errno;
			snprintf(err, errlen, "listen %s: dup: %s", a->text, strerror(errno));
			while (i-- > 0)
				close(fds[i]); /* fds[0] too: a dup (act[] keeps systemd's) */
			return r;
		}
	return 1;
}

int activation_check(const struct config *c)
{
	int bad = 0;

	for (unsigned i = 0; i < nact; i++) {
		int used = 0;
		if (act[i].fd < 0)
			continue; /* an old process's: only its name came */
		for (unsigned k = 0; k < c->nlst && !used; k++)
			used = addr_equal(c->lst[k].addr, &act[i].addr);
		if (used)
			continue;
		fprintf(stderr, "splicer: systemd passed the socket '%s' (%s), which no route listens "
			"on: give a route listen = systemd:%s or listen = %s, or remove it from the "
			".socket unit\n", act[i].name, act[i].addr.text, act[i].name, act[i].addr.text);
		bad++;
	}
	return bad;
}
