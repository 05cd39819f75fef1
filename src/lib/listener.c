/* SPDX-License-Identifier: MIT */
/* listener: see listener.h. */
#define _GNU_SOURCE
#include "listener.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

enum unix_path_state { UNIX_STALE, UNIX_LIVE, UNIX_BUSY, UNIX_NOT_SOCKET, UNIX_UNKNOWN };

/* What holds a Unix path that bind() found taken. A socket file left by a
 * process that is gone refuses connections: only then is it safe to remove.
 * The probe never blocks: a live server whose accept queue is full would
 * hold a blocking connect() for as long as it stays full, and start-up or a
 * reload with it (a non-blocking connect says EAGAIN at once instead). */
static enum unix_path_state unix_path_state(const struct addr *a)
{
	const struct sockaddr_un *sun = (const void *)&a->ss;
	enum unix_path_state r = UNIX_UNKNOWN;
	struct stat st;
	int fd;

	if (!sun->sun_path[0]) /* abstract: no file, the name is taken by a live socket */
		return UNIX_LIVE;
	if (stat(sun->sun_path, &st))
		return UNIX_UNKNOWN;
	if (!S_ISSOCK(st.st_mode))
		return UNIX_NOT_SOCKET;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return UNIX_UNKNOWN;
	if (connect(fd, (const struct sockaddr *)&a->ss, a->len) == 0 || errno == EINPROGRESS)
		r = UNIX_LIVE;
	else if (errno == EAGAIN)
		r = UNIX_BUSY;
	else if (errno == ECONNREFUSED)
		r = UNIX_STALE;
	close(fd);
	return r;
}

/* Binds a Unix listener, replacing a stale socket file; a path held by
 * anything else is refused with what holds it. Returns 0 or -errno with err. */
static int unix_bind(int fd, const struct addr *a, char *err, unsigned errlen)
{
	const char *path = ((const struct sockaddr_un *)&a->ss)->sun_path;
	const char *why = NULL;
	char hint[160];
	int e;

	if (bind(fd, (const struct sockaddr *)&a->ss, a->len) == 0)
		return 0;
	if ((e = errno) != EADDRINUSE)
		goto fail;
	switch (unix_path_state(a)) {
	case UNIX_STALE:
		unlink(path);
		if (bind(fd, (const struct sockaddr *)&a->ss, a->len) == 0)
			return 0;
		e = errno;
		break;
	case UNIX_LIVE:
		why = " (another process listens there)";
		break;
	case UNIX_BUSY:
		why = " (another process listens there; its accept queue is full)";
		break;
	case UNIX_NOT_SOCKET:
		snprintf(err, errlen, "listen %s: the path exists and is not a socket; remove it or "
			 "choose another path", a->text);
		return -EEXIST;
	case UNIX_UNKNOWN:
		break;
	}
fail:
	if (e == EACCES && !why) {
		/* the file-system identity: the run-as user's from the first
		 * socket on (privs.h), not root's */
		snprintf(hint, sizeof(hint), " (uid %u may not make a file in that directory: with "
			 "`user =` the proxy makes its sockets as that user)", (unsigned)setfsuid(-1));
		why = hint;
	}
	snprintf(err, errlen, "listen %s: %s%s", a->text, strerror(e), why ? why : "");
	return -e;
}

/* SO_REUSEPORT lets any socket of the same user that also sets it bind
 * beside a live listener, and the kernel then splits the connections
 * between the two: a second splicer, or any such server, started on a busy
 * address would take half of the clients in silence. A probe without
 * SO_REUSEPORT binds only where nobody listens (SO_REUSEADDR still lets it
 * past TIME_WAIT leftovers, as the real sockets are). Port 0 is never busy. */
static int inet_in_use(const struct addr *a)
{
	int fd, one = 1, r;

	if (a->ss.ss_family == AF_INET ? !((const struct sockaddr_in *)&a->ss)->sin_port
				       : !((const struct sockaddr_in6 *)&a->ss)->sin6_port)
		return 0;
	fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0; /* the real socket() will say why */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (a->ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	r = bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0 && errno == EADDRINUSE;
	close(fd);
	return r;
}

static int open_one(struct addr *a, const struct listen_opts *o, char *err, unsigned errlen);

/* What an operator does about a bind() error. */
static const char *bind_hint(int e)
{
	switch (e) {
	case EADDRINUSE:
		return " (another process listens there)";
	case EADDRNOTAVAIL:
		return " (not an address of this host: see `ip addr`; *:PORT listens on every one)";
	case EACCES:
		return " (ports below 1024 need root or CAP_NET_BIND_SERVICE)";
	default:
		return "";
	}
}

/* listener_open with options (NULL: none). */
static int open_checked(struct addr *a, const struct listen_opts *o, char *err, unsigned errlen)
{
	if (a->ss.ss_family != AF_UNIX && inet_in_use(a)) {
		snprintf(err, errlen, "listen %s: %s (another process listens there)", a->text,
			 strerror(EADDRINUSE));
		return -EADDRINUSE;
	}
	return open_one(a, o, err, errlen);
}

int listener_open(struct addr *a, char *err, unsigned errlen)
{
	return open_checked(a, NULL, err, errlen);
}

static int open_one(struct addr *a, const struct listen_opts *o, char *err, unsigned errlen)
{
	int fd, one = 1, r;
	int family = a->ss.ss_family;
	int inet = family == AF_INET || family == AF_INET6;
	char why[160];

	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    inet && o ? sockopt_protocol(&o->so) : 0);
	if (fd < 0 && inet && o && o->so.mptcp) {
		r = -errno;
		snprintf(err, errlen, "listen %s: mptcp: %s (is net.mptcp.enabled 1?)", a->text,
			 strerror(errno));
		return r;
	}
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "listen %s: socket: %s", a->text, strerror(errno));
		return r;
	}
	if (family != AF_UNIX) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	}
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	/* the device before bind(): the port is then taken in it (a VRF) only */
	if (inet && o && (r = sockopt_apply_early(fd, &o->so, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "listen %s: %s", a->text, why);
		close(fd);
		return r;
	}
	if (family == AF_UNIX && (r = unix_bind(fd, a, err, errlen)) < 0) {
		close(fd);
		return r;
	}
	if (family != AF_UNIX && bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0) {
		r = -errno;
		snprintf(err, errlen, "listen %s: %s%s", a->text, strerror(errno), bind_hint(errno));
		close(fd);
		return r;
	}
	why[0] = '\0';
	if ((r = sockopt_apply_listen(fd, family, o, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "listen %s: %s%s", a->text, why[0] ? why : strerror(-r),
			 why[0] ? "" : bind_hint(-r));
		close(fd);
		return r;
	}
	if (family != AF_UNIX) {
		socklen_t len = sizeof(a->ss);
		if (getsockname(fd, (struct sockaddr *)&a->ss, &len) == 0) {
			a->len = len;
			addr_format((struct sockaddr *)&a->ss, len, a->text, sizeof(a->text));
		}
	}
	return fd;
}

int listener_open_n(struct addr *a, unsigned n, int *fds, int shared, const struct listen_opts *o,
		    char *err, unsigned errlen)
{
	for (unsigned i = 0; i < n; i++) {
		int fd;

		if (i && a->ss.ss_family == AF_UNIX) {
			fd = fcntl(fds[0], F_DUPFD_CLOEXEC, 0);
			if (fd < 0) {
				fd = -errno;
				snprintf(err, errlen, "listen %s: dup: %s", a->text, strerror(errno));
			}
		} else {
			/* the group's first socket checks that the port is free */
			fd = i || shared ? open_one(a, o, err, errlen) : open_checked(a, o, err, errlen);
		}
		if (fd < 0) {
			while (i--)
				close(fds[i]);
			return fd;
		}
		fds[i] = fd;
	}
	return 0;
}

/* Unlinking a Unix listener's path is off while its socket may belong to
 * another process too: an upgraded process's parent (which gave its sockets
 * away) and a new process before it is ready (whose failure must not take
 * the path from the process that still serves on it). */
static int unlink_on = 1; /* atomic */

/* listener_keep's addresses: written at start, before any thread */
static struct addr kept[LISTENER_KEPT_MAX];
static unsigned nkept;

void listener_keep(const struct addr *a)
{
	if (nkept < LISTENER_KEPT_MAX && !listener_kept(a))
		kept[nkept++] = *a;
}

int listener_kept(const struct addr *a)
{
	for (unsigned i = 0; i < nkept; i++)
		if (addr_equal(&kept[i], a))
			return 1;
	return 0;
}

void listener_unlink(const struct addr *a)
{
	const struct sockaddr_un *sun = (const void *)&a->ss;

	if (a->ss.ss_family == AF_UNIX && sun->sun_path[0] &&
	    __atomic_load_n(&unlink_on, __ATOMIC_RELAXED) && !listener_kept(a))
		unlink(sun->sun_path);
}

/* A TCP probe: bind() as the listeners do, then close. Returns 0 (free), 1
 * (held by sockets that share it) or -errno. */
static int inet_probe(const struct addr *a, int reuseport)
{
	int fd, one = 1, r = 0;

	fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (reuseport)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (a->ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* A Unix path: a live socket there is in use, anything but a socket is in
 * the way, and a free path is bound (so a missing directory or one this
 * user cannot write shows) and removed again. */
static int unix_probe(const struct addr *a, char *err, unsigned errlen)
{
	const char *path = ((const struct sockaddr_un *)&a->ss)->sun_path;
	struct stat st;
	int fd, r = 0;

	if (path[0] && stat(path, &st) == 0) {
		switch (unix_path_state(a)) {
		case UNIX_LIVE:
		case UNIX_BUSY:
			snprintf(err, errlen, "listen %s: %s (another process listens there)", a->text,
				 strerror(EADDRINUSE));
			return -EADDRINUSE;
		case UNIX_NOT_SOCKET:
			snprintf(err, errlen, "listen %s: the path exists and is not a socket; remove it "
				 "or choose another path", a->text);
			return -EEXIST;
		default:
			return 0; /* a stale socket file: the proxy replaces it */
		}
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return 0; /* the real socket() will say why */
	if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0) {
		r = -errno;
		snprintf(err, errlen, "listen %s: %s%s", a->text, strerror(errno),
			 errno == EADDRINUSE ? " (another process listens there)" : "");
	} else if (path[0]) {
		unlink(path);
	}
	close(fd);
	return r;
}

int listener_probe(const struct addr *a, char *err, unsigned errlen)
{
	int r;

	if (a->ss.ss_family == AF_UNIX)
		return unix_probe(a, err, errlen);
	if (!(a->ss.ss_family == AF_INET ? ((const struct sockaddr_in *)&a->ss)->sin_port
					 : ((const struct sockaddr_in6 *)&a->ss)->sin6_port))
		return 0; /* port 0: the kernel picks a free one */
	if ((r = inet_probe(a, 0)) == 0)
		return 0;
	if (r == -EADDRINUSE && inet_probe(a, 1) == 0) {
		snprintf(err, errlen, "listen %s: in use by listeners that share it (SO_REUSEPORT, "
			 "same user): a running splicer, whose reload keeps it; a second proxy "
			 "started on it would be refused", a->text);
		return 1;
	}
	snprintf(err, errlen, "listen %s: %s%s", a->text, strerror(-r), bind_hint(-r));
	return r;
}


void listener_unlink_enable(int on)
{
	__atomic_store_n(&unlink_on, on, __ATOMIC_RELAXED);
}

int listener_stop_syns(int fd)
{
	/* The filter sees a TCP segment from its header: byte 13 is the
	 * flags. A SYN (the first segment of a connection) is dropped; every
	 * other segment passes, so a handshake under way still completes into
	 * the accept queue and is accepted before the close. */
	static struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x02, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0),
		BPF_STMT(BPF_RET | BPF_K, 0xffffffff),
	};
	struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };

	return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) ? -errno : 0;
}

int listener_migrates(void)
{
	char c = '0';
	int fd = open("/proc/sys/net/ipv4/tcp_migrate_req", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0; /* before 5.14: no migration */
	if (read(fd, &c, 1) != 1)
		c = '0';
	close(fd);
	return c == '1';
}

int listener_quiesce(const struct addr *a, int fd)
{
	if (listener_kept(a))
		return 0; /* its queue stays with its keeper, for the next process */
	if (a->ss.ss_family == AF_UNIX) {
		listener_unlink(a); /* a connect() finds no path from now on */
		return 0;
	}
	int r = listener_stop_syns(fd);

	return r < 0 ? r : 1;
}
