/* SPDX-License-Identifier: MIT */
/* privs: see privs.h. */
#define _GNU_SOURCE
#include "privs.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "addr.h"
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

int privs_check_user(const char *name, char *err, size_t errlen)
{
	uid_t uid;
	gid_t gid;
	int r = privs_lookup(name, &uid, &gid, err, errlen);

	if (r)
		return r < 0 ? -1 : 0;
	if (geteuid() != 0 && geteuid() != uid) {
		snprintf(err, errlen, "user %s: only root can switch users (running as uid %u)", name,
			 (unsigned)geteuid());
		return -1;
	}
	return 0;
}

/* Opens path for append as this process is now; a file that was not there
 * is created and removed again. Returns 0 or an errno. Async-signal-safe
 * (it runs in a child forked from a process that may have threads). */
static int try_append(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NONBLOCK, 0640);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* access() for a directory a socket is made in and removed from. */
static int try_dir_write(const char *dir)
{
	return access(dir, W_OK | X_OK) ? errno : 0;
}

/* fn(path) as uid:gid with groups: in a child, so this process keeps its
 * identity (setfsuid() would keep root's supplementary groups). */
static int run_as(int (*fn)(const char *), const char *path, uid_t uid, gid_t gid,
		  const gid_t *groups, int ngroups)
{
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return errno;
	if (pid == 0) {
		if (setgroups((size_t)ngroups, groups) || setgid(gid) || setuid(uid))
			_exit(errno & 0xff);
		_exit(fn(path));
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : EIO;
}

/* fn(path) as user `name` will do it: as root, in a child that becomes the
 * user; else (and for "" or "off") as this process. who says which identity
 * that was. Returns fn's errno (0: it can), or -1 for an unknown user
 * (privs_check_user() reports it). */
static int test_as(const char *name, int (*fn)(const char *), const char *path, char *who,
		   size_t wholen)
{
	gid_t groups[64];
	int ngroups = 64;
	struct passwd *pw = NULL;

	if (name[0] && strcmp(name, "off") && !(pw = getpwnam(name)))
		return -1;
	if (pw && geteuid() == 0 && pw->pw_uid != 0) {
		if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &ngroups) < 0)
			ngroups = 0; /* more than 64: the primary group decides */
		snprintf(who, wholen, "user %s (uid %u)", name, (unsigned)pw->pw_uid);
		return run_as(fn, path, pw->pw_uid, pw->pw_gid, groups, ngroups);
	}
	snprintf(who, wholen, "uid %u", (unsigned)geteuid());
	return fn(path);
}

int privs_check_append(const char *path, const char *name, char *err, size_t errlen)
{
	char who[SETTING_TEXT_MAX + 32], dir[SETTING_TEXT_MAX];
	int e = test_as(name, try_append, path, who, sizeof(who));

	if (e <= 0)
		return 0; /* fine, or an unknown user: privs_check_user() says so */
	snprintf(dir, sizeof(dir), "%s", path);
	if (e == ENOENT || e == ENOTDIR)
		snprintf(err, errlen, "log %s: directory %s does not exist (%s)", path, dirname(dir),
			 strerror(e));
	else if (e == EACCES || e == EPERM)
		snprintf(err, errlen, "log %s: %s for %s: the file must be writable for that user, "
			 "or its directory to create it (install -d -o USER %s)", path, strerror(e), who,
			 dirname(dir));
	else if (e == ENXIO)
		snprintf(err, errlen, "log %s: a FIFO with no reader (start the reader first)", path);
	else
		snprintf(err, errlen, "log %s: %s (as %s)", path, strerror(e), who);
	return -1;
}

/* The path of `admin = [unix:]PATH`. */
static const char *admin_file(const char *admin)
{
	return strncmp(admin, "unix:", 5) ? admin : admin + 5;
}

int privs_check_admin_path(const char *admin, char *err, size_t errlen)
{
	const char *path = admin_file(admin);
	char text[SETTING_TEXT_MAX + 8], why[256];
	struct addr a;

	if (!strcmp(admin, "off"))
		return 0;
	if (path[0] == '@' || !path[0]) {
		snprintf(err, errlen, "admin %s: needs a file path (an abstract socket has no file "
			 "mode to keep other users out)", admin);
		return -1;
	}
	if (path[0] != '/') {
		snprintf(err, errlen, "admin %s: not an absolute path (the socket would be made in "
			 "whatever directory the proxy starts in): write it from /, e.g. "
			 "/run/splicer/admin.sock", admin);
		return -1;
	}
	snprintf(text, sizeof(text), "unix:%s", path);
	if (addr_parse(text, ADDR_LISTEN, &a, why, sizeof(why))) {
		snprintf(err, errlen, "admin: %s", why);
		return -1;
	}
	return 0;
}

int privs_check_socket_dir(const char *admin, const char *name, char *err, size_t errlen)
{
	char who[SETTING_TEXT_MAX + 32], dir[SETTING_TEXT_MAX];
	struct stat st;
	int e;

	snprintf(dir, sizeof(dir), "%s", admin_file(admin));
	dirname(dir);
	e = stat(dir, &st) ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
	if (e == ENOENT || e == ENOTDIR) {
		snprintf(err, errlen, "admin %s: directory %s does not exist (%s)", admin, dir,
			 strerror(e));
		return -1;
	}
	if (!e)
		e = test_as(name, try_dir_write, dir, who, sizeof(who));
	else
		snprintf(who, sizeof(who), "uid %u", (unsigned)geteuid());
	if (e <= 0)
		return 0;
	if (e == EACCES || e == EPERM)
		snprintf(err, errlen, "admin %s: directory %s is not writable for %s: the proxy makes "
			 "the socket there, and removes it at stop (install -d -o USER %s)", admin, dir,
			 who, dir);
	else
		snprintf(err, errlen, "admin %s: directory %s: %s (as %s)", admin, dir, strerror(e), who);
	return -1;
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
