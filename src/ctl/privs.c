/* privs: see privs.h. */
#define _GNU_SOURCE
#include "privs.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"

int privs_drop(const char *name, char *err, size_t errlen)
{
	struct passwd *pw;

	if (!name[0] || !strcmp(name, "off"))
		return 0;
	errno = 0;
	if (!(pw = getpwnam(name))) {
		snprintf(err, errlen, "user %s: %s", name, errno ? strerror(errno) : "no such user");
		return -1;
	}
	if (geteuid() != 0) {
		if (geteuid() == pw->pw_uid)
			return 0;
		snprintf(err, errlen, "user %s: only root can switch users (running as uid %u)", name,
			 (unsigned)geteuid());
		return -1;
	}
	/* groups first: after setuid there is no right left to change them */
	if (initgroups(pw->pw_name, pw->pw_gid) || setgid(pw->pw_gid) || setuid(pw->pw_uid)) {
		snprintf(err, errlen, "user %s: %s", name, strerror(errno));
		return -1;
	}
	if (setuid(0) == 0) {
		snprintf(err, errlen, "user %s: root could be regained after dropping it", name);
		return -1;
	}
	log_info("running as user %s (uid %u, gid %u)", name, (unsigned)pw->pw_uid, (unsigned)pw->pw_gid);
	return 0;
}

int privs_lookup(const char *name, uid_t *uid, gid_t *gid, char *err, size_t errlen)
{
	struct passwd *pw;

	if (!name[0] || !strcmp(name, "off"))
		return 1;
	errno = 0;
	if (!(pw = getpwnam(name))) {
		snprintf(err, errlen, "user %s: %s", name, errno ? strerror(errno) : "no such user");
		return -1;
	}
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return 0;
}

static long read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

void privs_warn_limits(const struct config *cfg)
{
	long soft = read_long("/proc/sys/fs/pipe-user-pages-soft");
	long page = sysconf(_SC_PAGESIZE);
	unsigned long long pages_each, want;

	if (!cfg->max_pipes || soft <= 0 || page <= 0)
		return;
	/* root (CAP_SYS_RESOURCE) is exempt; check the identity we run as now */
	if (geteuid() == 0)
		return;
	pages_each = (cfg->pipe_size ? cfg->pipe_size : 65536) / (unsigned long long)page;
	want = pages_each * cfg->max_pipes;
	if (want > (unsigned long long)soft)
		log_warn("max-pipes %llu of %llu pages each need %llu pages, but fs.pipe-user-pages-soft is "
			 "%ld for this user: pipes beyond %llu get one page (slow splices); raise the "
			 "sysctl (sysctl -w fs.pipe-user-pages-soft=%llu) or lower max-pipes or pipe-size",
			 (unsigned long long)cfg->max_pipes, pages_each, want, soft,
			 (unsigned long long)soft / (pages_each ? pages_each : 1), want);
}
