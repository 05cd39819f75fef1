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

/* Logs a warning for each limit that caps max_conns or max_pipes below the
 * configuration: RLIMIT_NOFILE and fs.pipe-user-pages-soft (which binds
 * pipes of users without CAP_SYS_RESOURCE). */
void privs_warn_limits(const struct config *cfg);

#endif
