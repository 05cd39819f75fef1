/* SPDX-License-Identifier: MIT */
/* sandbox_fs: the Landlock part of the sandbox (sandbox.h). Debian 12's
 * headers stop at ABI 2; the rights and the ruleset fields of later ABIs
 * (TRUNCATE 3, IOCTL_DEV 5, signal scoping 6) are spelled out here, and
 * the ruleset asks for exactly what the running kernel knows. */
#define _GNU_SOURCE
#include "sandbox_parts.h"
#include "access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* The file-system rights by ABI: 1 knows 13 of them, 2 adds REFER, 3
 * TRUNCATE, 5 IOCTL_DEV (4 adds network rights, 6 scoping, 7 logging). */
#define FS_READ_FILE  (1ull << 2)
#define FS_READ_DIR   (1ull << 3)
#define FS_WRITE_FILE (1ull << 1)
#define FS_REMOVE_FILE (1ull << 5)
#define FS_MAKE_REG   (1ull << 8)
#define FS_MAKE_SOCK  (1ull << 9)
#define FS_TRUNCATE   (1ull << 14)
#define SCOPE_SIGNAL  (1ull << 1)

/* struct landlock_ruleset_attr as ABI 6 has it; older kernels take a
 * prefix of it (the size passed says how much). */
struct ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

static uint64_t fs_rights(int abi)
{
	if (abi >= 5)
		return (1ull << 16) - 1;
	if (abi >= 3)
		return (1ull << 15) - 1;
	if (abi == 2)
		return (1ull << 14) - 1;
	return (1ull << 13) - 1;
}

/* One rule: access (masked by what the ruleset handles) beneath path. A
 * path that does not exist (no /lib64 here) adds nothing. Returns 0 or
 * -1 with why. */
static int allow(int rs, const char *path, uint64_t access, uint64_t handled, char *why,
		 size_t len)
{
	struct landlock_path_beneath_attr pb = { .allowed_access = access & handled };
	int r;

	if ((pb.parent_fd = open(path, O_PATH | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : (snprintf(why, len, "Landlock: %s: %s", path,
						       strerror(errno)), -1);
	r = (int)syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	if (r && errno == EINVAL) {
		/* a file, not a directory: only the rights a file can have */
		pb.allowed_access &= FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE;
		r = (int)syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	}
	if (r)
		snprintf(why, len, "Landlock: rule for %s: %s", path, strerror(errno));
	close(pb.parent_fd);
	return r ? -1 : 0;
}

/* The directory of path, in buf. */
static const char *dir_of(const char *path, char *buf, size_t len)
{
	snprintf(buf, len, "%s", path);
	return dirname(buf);
}

/* A Unix socket address's file, or NULL (abstract, or not Unix). */
static const char *unix_file(const struct addr *a)
{
	const struct sockaddr_un *sun = (const void *)&a->ss;

	return a->ss.ss_family == AF_UNIX && sun->sun_path[0] ? sun->sun_path : NULL;
}

int sandbox_fs_enter(const struct config *cfg, char *why, size_t len)
{
	static const char *const readable[] = { "/etc", "/usr", "/lib", "/lib64", "/lib32", "/proc",
						"/dev/null", "/dev/urandom" };
	int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	const uint64_t rd = FS_READ_FILE | FS_READ_DIR, sock = FS_MAKE_SOCK | FS_REMOVE_FILE;
	struct ruleset_attr ra = { 0 };
	char dir[SETTING_TEXT_MAX + 256];
	const char *f;
	int rs, bad = 0;

	if (abi <= 0) {
		snprintf(why, len, "Landlock: %s", errno == EOPNOTSUPP ? "disabled in this kernel (boot "
			 "with lsm=...,landlock)" : errno == ENOSYS ? "not in this kernel" : strerror(errno));
		return 0;
	}
	ra.handled_access_fs = fs_rights(abi);
	ra.scoped = abi >= 6 ? SCOPE_SIGNAL : 0;
	rs = (int)syscall(SYS_landlock_create_ruleset, &ra,
			  abi >= 6 ? sizeof(ra) : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t), 0);
	if (rs < 0) {
		snprintf(why, len, "Landlock: ruleset: %s", strerror(errno));
		return -1;
	}
	for (unsigned i = 0; i < sizeof(readable) / sizeof(readable[0]) && !bad; i++)
		bad = allow(rs, readable[i], rd, ra.handled_access_fs, why, len);
	/* a reload reads the file again (and what it includes beside it) */
	if (!bad && cfg->file[0])
		bad = allow(rs, dir_of(cfg->file, dir, sizeof(dir)), rd, ra.handled_access_fs, why, len);
	/* and the directories its include patterns look in, wherever they are
	 * (a file added to conf.d/ is read by the next reload); a directory
	 * that a reload's new include names is not among them: a restart */
	for (unsigned i = 0; i < cfg->nincl_dir && !bad; i++)
		bad = allow(rs, cfg->incl_dir[i], rd, ra.handled_access_fs, why, len);
	/* SIGUSR1 after a rotation opens, or creates, the file anew */
	if (!bad && access_log_is_file(cfg->access_log))
		bad = allow(rs, dir_of(cfg->access_log, dir, sizeof(dir)),
			    FS_WRITE_FILE | FS_MAKE_REG | FS_TRUNCATE, ra.handled_access_fs, why, len);
	/* socket files: made at start or by a reload, removed at stop */
	for (unsigned l = 0; l < cfg->nlst && !bad; l++)
		if ((f = unix_file(cfg->lst[l].addr)))
			bad = allow(rs, dir_of(f, dir, sizeof(dir)), sock, ra.handled_access_fs, why, len);
	if (!bad && (f = unix_file(&cfg->stats_addr)))
		bad = allow(rs, dir_of(f, dir, sizeof(dir)), sock, ra.handled_access_fs, why, len);
	if (!bad && strcmp(cfg->admin, "off"))
		bad = allow(rs, dir_of(strncmp(cfg->admin, "unix:", 5) ? cfg->admin : cfg->admin + 5,
				       dir, sizeof(dir)), sock, ra.handled_access_fs, why, len);
	if (!bad && syscall(SYS_landlock_restrict_self, rs, 0)) {
		snprintf(why, len, "Landlock: restrict: %s", strerror(errno));
		bad = 1;
	}
	close(rs);
	return bad ? -1 : abi;
}
