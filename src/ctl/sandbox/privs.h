/* SPDX-License-Identifier: MIT */
/* privs: root's part of a start with `user = NAME`, kept as short and as
 * narrow as doc/security.md says: every path is opened as the user (the
 * file-system identity is the user's from the first socket on), root binds
 * and loads BPF, then drops to the user, keeping CAP_NET_BIND_SERVICE alone;
 * the upgrade spawner runs as the user too, with only the capabilities an
 * upgrade needs. Also the start-up check that the kernel's limits can hold
 * what the config asks. */
#ifndef SPLICER_PRIVS_H
#define SPLICER_PRIVS_H
#include <stddef.h>
#include <sys/types.h>

#include "config.h"

/* Capabilities by bit (linux/capability.h numbers). */
#define PRIVS_CAP(n) (1ull << (n))
/* What the running proxy keeps: binding a port below 1024 for a listener a
 * reload adds (systemd's unit grants it alone, too). */
#define PRIVS_KEEP PRIVS_CAP(10) /* CAP_NET_BIND_SERVICE */
/* What an engine's privileged setup needs besides (sockmap: CAP_BPF and
 * CAP_NET_ADMIN, to load a networking BPF program, and CAP_PERFMON, for
 * the program to read the kernel's skb and socket: bpf/sockmap.bpf.c). */
#define PRIVS_KEEP_SETUP (PRIVS_CAP(39) | PRIVS_CAP(38) | PRIVS_CAP(12))
#define PRIVS_CAP_NET_ADMIN 12

/* What the running proxy keeps for cfg: PRIVS_KEEP, and CAP_NET_ADMIN when
 * a route needs it at run time (mark: SO_MARK; source = client:
 * IP_TRANSPARENT at each backend connect; config_net_admin_need). */
unsigned long long privs_keep(const struct config *cfg);

/* 1 when this thread's effective set holds capability cap. */
int privs_have(int cap);

/* After privs_drop, and before a reload puts cfg in force: a config that
 * needs CAP_NET_ADMIN (privs_keep) in a process without it is refused, with
 * the way to grant it in err; every session would fail otherwise. 0 or -1. */
int privs_check_run(const struct config *cfg, char *err, size_t errlen);

/* Root's files become the user's business: the calling thread (and every
 * thread it creates after) takes user `name`'s supplementary groups and its
 * uid and gid as its file-system identity (setfsuid), so each path opened,
 * created or removed from now on (the access log, Unix socket files) is so
 * as that user would, through its symlinks and its directories, and a file
 * made (a socket file, a TCP socket's inode) is the user's. Root keeps its
 * other powers (binding ports below 1024, BPF) until privs_drop. No-op
 * unless this process is root and name is a user. Returns 0 or -1 with err. */
int privs_become_fs(const char *name, char *err, size_t errlen);

/* Becomes user `name` (its uid, gid and supplementary groups) and keeps of
 * its capabilities only those in keep (PRIVS_CAP bits) that it has, in its
 * permitted and effective sets; the inheritable and ambient sets are
 * emptied. A process already that user (started by systemd or by an
 * upgrade's spawner, with ambient capabilities) only sheds capabilities.
 * Returns 0, or -1 with the reason in err. "" or "off": capabilities are
 * left as they are (a process run as root stays root). */
int privs_drop(const char *name, unsigned long long keep, char *err, size_t errlen);

/* For a child that execs: becomes user `name` keeping the capabilities in
 * keep that it has, raised in its ambient set so the program it execs
 * starts with them (and nothing else of root's). Returns 0 or -1 with err;
 * no-op (0) unless this process is root and name is a user. */
int privs_become_with_ambient(const char *name, unsigned long long keep, char *err, size_t errlen);

/* 1 when this process holds a capability in its effective or permitted set
 * or is root: what it execs must then be trusted (privs_exec_trusted). */
int privs_privileged(void);

/* May a privileged process exec the file open at fd (O_PATH)? It must be a
 * regular file owned by root or by this process's uid, and writable by
 * nobody else (no group or other write bit). Returns 0 or -1 with err
 * naming path. */
int privs_exec_trusted(int fd, const char *path, char *err, size_t errlen);

/* The uid and gid of user `name`. Returns 0, 1 when name is "" or "off"
 * (nobody to become), or -1 with the reason in err. */
int privs_lookup(const char *name, uid_t *uid, gid_t *gid, char *err, size_t errlen);

/* The preflight of `user =` (config_finalize, so `check`, start and reload
 * say the same): the user exists, and this process can become it (root, or
 * already that user). Returns 0 ("" or "off" too) or -1 with err. */
int privs_check_user(const char *name, char *err, size_t errlen);

/* The preflight of a log file: can user `name` (this process for "" and
 * "off"; an unknown user is privs_check_user's) open path for append? As
 * root, a forked child becomes the user and tries; a file it had to create
 * is removed again. Returns 0 or -1 with err naming the path and the reason
 * (a missing directory, no permission for that user, a FIFO without a
 * reader). */
int privs_check_append(const char *path, const char *name, char *err, size_t errlen);

/* The syntax of `admin = PATH` (config_finalize, so check, start and reload
 * agree): "off", or an absolute file path (a relative one would land in
 * whatever directory the proxy starts in; an abstract name has no file mode)
 * that fits a Unix socket address. Returns 0 or -1 with err. */
int privs_check_admin_path(const char *admin, char *err, size_t errlen);

/* The preflight of the admin socket's directory (`splicer check` only: a
 * running proxy holds its socket across reloads): it exists, and user
 * `name` (this process for "" and "off"; as root, a child that becomes the
 * user) may write it, to make the socket and to remove it at stop. Returns
 * 0 or -1 with err. */
int privs_check_socket_dir(const char *admin, const char *name, char *err, size_t errlen);

/* The same for any Unix socket the proxy makes at path (a listener, the
 * stats endpoint): what names it in the message ("listen", "stats"). With
 * `user =` the socket is made as that user (privs_become_fs), so its
 * directory must let that user in. Returns 0 or -1 with err. */
int privs_check_unix_dir(const char *what, const char *path, const char *name, char *err,
			 size_t errlen);

/* Logs a warning for each limit that caps max_conns or max_pipes below the
 * configuration: RLIMIT_NOFILE and fs.pipe-user-pages-soft (which binds
 * pipes of users without CAP_SYS_RESOURCE). */
void privs_warn_limits(const struct config *cfg);

#endif
