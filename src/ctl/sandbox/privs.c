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
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <stdint.h>
#include <unistd.h>

#include "addr.h"
#include "config_sockopt.h"
#include "log.h"

/* The capability sets of this thread, as capget(2) takes them. */
struct caps {
	struct __user_cap_header_struct h;
	struct __user_cap_data_struct d[2];
};

static int caps_get(struct caps *c)
{
	memset(c, 0, sizeof(*c));
	c->h.version = _LINUX_CAPABILITY_VERSION_3;
	return (int)syscall(SYS_capget, &c->h, c->d);
}

static unsigned long long caps_word(const struct caps *c, int permitted)
{
	return permitted ? (unsigned long long)c->d[1].permitted << 32 | c->d[0].permitted
			 : (unsigned long long)c->d[1].effective << 32 | c->d[0].effective;
}

/* Permitted and effective become keep (of what is permitted now; nothing
 * can be added), inheritable nothing; then the ambient set is emptied but
 * for what ambient names (a subset of keep). Only the calling thread's
 * sets change (capset(2)): call it before the threads that must not hold
 * more, or in the thread that goes on. Returns 0 or -errno. */
static int caps_limit(unsigned long long keep, unsigned long long ambient)
{
	struct caps c;
	unsigned long long have;

	if (caps_get(&c))
		return -errno;
	have = caps_word(&c, 1) & keep;
	c.h.pid = 0;
	c.d[0].permitted = c.d[0].effective = (uint32_t)have;
	c.d[1].permitted = c.d[1].effective = (uint32_t)(have >> 32);
	c.d[0].inheritable = (uint32_t)(have & ambient);
	c.d[1].inheritable = (uint32_t)((have & ambient) >> 32);
	if (syscall(SYS_capset, &c.h, c.d))
		return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return -errno;
	for (int cap = 0; cap < 64; cap++)
		if ((have & ambient) >> cap & 1 &&
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0))
			return -errno;
	return 0;
}

int privs_privileged(void)
{
	struct caps c;

	if (geteuid() == 0)
		return 1;
	return caps_get(&c) || caps_word(&c, 1) || caps_word(&c, 0);
}

int privs_have(int cap)
{
	struct caps c;

	return !caps_get(&c) && (caps_word(&c, 0) >> cap & 1);
}

unsigned long long privs_keep(const struct config *cfg)
{
	return PRIVS_KEEP | (config_net_admin_need(cfg) ? PRIVS_CAP(PRIVS_CAP_NET_ADMIN) : 0);
}

int privs_check_run(const struct config *cfg, char *err, size_t errlen)
{
	const char *need = config_net_admin_need(cfg);

	if (!need || privs_have(PRIVS_CAP_NET_ADMIN))
		return 0;
	snprintf(err, errlen, "%s needs CAP_NET_ADMIN, which this process does not have (start it "
		 "as root with user =, which keeps it for such a config, or grant it: systemd "
		 "AmbientCapabilities=CAP_NET_ADMIN; a reload cannot add it)", need);
	return -1;
}

/* The user to become: 1 with *pw for a user, 0 for "" and "off", -1 with
 * err for an unknown one. */
static int user_entry(const char *name, struct passwd **pw, char *err, size_t errlen)
{
	if (!name[0] || !strcmp(name, "off"))
		return 0;
	errno = 0;
	if (!(*pw = getpwnam(name))) {
		snprintf(err, errlen, "user %s: %s", name, errno ? strerror(errno) : "no such user");
		return -1;
	}
	return 1;
}

int privs_become_fs(const char *name, char *err, size_t errlen)
{
	struct passwd *pw;
	int r = user_entry(name, &pw, err, errlen);

	if (r <= 0 || geteuid() != 0)
		return r < 0 ? -1 : 0;
	if (pw->pw_uid == 0)
		return 0;
	/* setfsuid(2) reports no error: the identity read back is the check */
	if (initgroups(pw->pw_name, pw->pw_gid)) {
		snprintf(err, errlen, "user %s: groups: %s", name, strerror(errno));
		return -1;
	}
	setfsgid(pw->pw_gid);
	setfsuid(pw->pw_uid);
	if ((uid_t)setfsuid((uid_t)-1) != pw->pw_uid || (gid_t)setfsgid((gid_t)-1) != pw->pw_gid) {
		snprintf(err, errlen, "user %s: the file-system identity could not be set", name);
		return -1;
	}
	return 0;
}

/* Becomes pw (groups first: after setuid there is no right left to change
 * them) keeping the capabilities in keep; ambient as caps_limit says. */
static int become(const struct passwd *pw, unsigned long long keep, unsigned long long ambient,
		  char *err, size_t errlen)
{
	int r;

	/* nothing outside keep can come back, even through an exec of a
	 * set-uid or file-capability binary (no_new_privs closes that too) */
	for (int cap = 0; cap < 64; cap++)
		if (!(keep >> cap & 1) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL) {
			snprintf(err, errlen, "user %s: bounding set: %s", pw->pw_name, strerror(errno));
			return -1;
		}
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) || initgroups(pw->pw_name, pw->pw_gid) ||
	    setgid(pw->pw_gid) || setuid(pw->pw_uid)) {
		snprintf(err, errlen, "user %s: %s", pw->pw_name, strerror(errno));
		return -1;
	}
	prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
	if ((r = caps_limit(keep, ambient))) {
		snprintf(err, errlen, "user %s: capabilities: %s", pw->pw_name, strerror(-r));
		return -1;
	}
	if (setuid(0) == 0) {
		snprintf(err, errlen, "user %s: root could be regained after dropping it", pw->pw_name);
		return -1;
	}
	return 0;
}

int privs_drop(const char *name, unsigned long long keep, char *err, size_t errlen)
{
	struct passwd *pw;
	int r = user_entry(name, &pw, err, errlen);

	if (r <= 0)
		return r < 0 ? -1 : 0;
	if (geteuid() != 0) {
		if (geteuid() != pw->pw_uid) {
			snprintf(err, errlen, "user %s: only root can switch users (running as uid %u)",
				 name, (unsigned)geteuid());
			return -1;
		}
		if ((r = caps_limit(keep, 0))) {
			snprintf(err, errlen, "user %s: capabilities: %s", name, strerror(-r));
			return -1;
		}
		return 0;
	}
	if (become(pw, keep, 0, err, errlen))
		return -1;
	log_info("running as user %s (uid %u, gid %u)", name, (unsigned)pw->pw_uid, (unsigned)pw->pw_gid);
	return 0;
}

int privs_become_with_ambient(const char *name, unsigned long long keep, char *err, size_t errlen)
{
	struct passwd *pw;
	int r = user_entry(name, &pw, err, errlen);

	if (r <= 0 || geteuid() != 0 || pw->pw_uid == 0)
		return r < 0 ? -1 : 0;
	return become(pw, keep, keep, err, errlen);
}

int privs_exec_trusted(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		return -1;
	}
	if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(err, errlen, "%s is owned by uid %u, mode %04o: a privileged process runs "
			 "only a binary that root (or its own user) owns and nobody else may write",
			 path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		return -1;
	}
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

int privs_check_unix_dir(const char *what, const char *path, const char *name, char *err,
			 size_t errlen)
{
	char who[SETTING_TEXT_MAX + 32], dir[SETTING_TEXT_MAX];
	struct stat st;
	int e;

	snprintf(dir, sizeof(dir), "%s", path);
	dirname(dir);
	e = stat(dir, &st) ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
	if (e == ENOENT || e == ENOTDIR) {
		snprintf(err, errlen, "%s %s: directory %s does not exist (%s)", what, path, dir,
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
		snprintf(err, errlen, "%s %s: directory %s is not writable for %s: the proxy makes "
			 "the socket there as that user, and removes it at stop (install -d -o USER %s)",
			 what, path, dir, who, dir);
	else
		snprintf(err, errlen, "%s %s: directory %s: %s (as %s)", what, path, dir, strerror(e),
			 who);
	return -1;
}

int privs_check_socket_dir(const char *admin, const char *name, char *err, size_t errlen)
{
	return privs_check_unix_dir("admin", admin_file(admin), name, err, errlen);
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
