/* SPDX-License-Identifier: MIT */
/* privs: dropping root after the sockets are bound (`user = NAME`), and the
 * start-up check that the kernel's limits can hold what the config asks. */
#ifndef SPLICER_PRIVS_H
#define SPLICER_PRIVS_H
#include <stddef.h>
#include <sys/types.h>

#include "config.h"

/* Becomes user `name` (its uid, gid and supplementary groups). Returns 0, or
 * -1 with the reason in err. "" or "off" does nothing. */
int privs_drop(const char *name, char *err, size_t errlen);

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

/* Logs a warning for each limit that caps max_conns or max_pipes below the
 * configuration: RLIMIT_NOFILE and fs.pipe-user-pages-soft (which binds
 * pipes of users without CAP_SYS_RESOURCE). */
void privs_warn_limits(const struct config *cfg);

#endif
