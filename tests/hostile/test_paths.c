/* SPDX-License-Identifier: MIT */
/* Symlinks under every path the proxy makes or removes (doc/security.md):
 * the admin socket, the stats socket and a Unix listener, in a directory
 * the run-as user owns. Planted before the start, each is refused with a
 * clear reason; swapped in while the proxy runs, the stop removes the link
 * at most: the root-owned file it names keeps its owner, mode and bytes. */
#define _GNU_SOURCE
#include "harness.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char secret_text[] = "root's own\n";

/* root:root 0600 secret_text at path */
static void pt_secret(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	H_CHECK(fd >= 0 && write(fd, secret_text, sizeof secret_text - 1) ==
				   (ssize_t)(sizeof secret_text - 1) && fchown(fd, 0, 0) == 0,
		"write %s", path);
	close(fd);
}

static int pt_secret_intact(const char *path)
{
	char buf[64];
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n < 0 || lstat(path, &sb))
		return 0;
	buf[n] = '\0';
	return S_ISREG(sb.st_mode) && sb.st_uid == 0 && (sb.st_mode & 07777) == 0600 &&
	       !strcmp(buf, secret_text);
}

struct pt_paths {
	char run[300], admin[320], stats[320], lsn[320], secret[320], conf[400];
};

/* The directory the user owns, the three socket paths in it, root's secret
 * beside it, and the config naming them. */
static void pt_setup(struct pt_paths *t, const struct passwd *pw, const char *backend)
{
	char text[2048];

	H_CHECK(chmod(h_tmpdir(), 0711) == 0, "chmod");
	snprintf(t->run, sizeof t->run, "%s/run", h_tmpdir());
	H_CHECK(mkdir(t->run, 0755) == 0 && chown(t->run, pw->pw_uid, pw->pw_gid) == 0, "mkdir");
	snprintf(t->admin, sizeof t->admin, "%s/admin.sock", t->run);
	snprintf(t->stats, sizeof t->stats, "%s/stats.sock", t->run);
	snprintf(t->lsn, sizeof t->lsn, "%s/listen.sock", t->run);
	snprintf(t->secret, sizeof t->secret, "%s/secret", h_tmpdir());
	pt_secret(t->secret);
	snprintf(text, sizeof text, "[global]\nuser = nobody\nadmin = %s\nstats = unix:%s\n"
		 "workers = 1\nlameduck = 0\n[route r]\nlisten = unix:%s\nbackend = %s\n",
		 t->admin, t->stats, t->lsn, backend);
	snprintf(t->conf, sizeof t->conf, "%s", h_conf_write("paths.conf", text));
}

Test(hostile, symlinks_planted_at_socket_paths_are_refused, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	struct passwd *pw = getpwnam("nobody");
	const char *bin = h_binary(0);
	static struct h_server be;
	struct pt_paths t;

	if (geteuid() != 0 || !pw)
		cr_skip_test("needs root and a user nobody");
	H_CHECK(h_server_start(&be, "127.0.0.1:0", 8, h_echo_conn, NULL) == 0, "backend");
	pt_setup(&t, pw, be.addr.text);
	const char *paths[] = { t.lsn, t.stats, t.admin };
	for (int i = 0; i < 3; i++) {
		/* one link at a time: the others are free */
		for (int k = 0; k < 3; k++)
			unlink(paths[k]);
		H_CHECK(symlink(t.secret, paths[i]) == 0, "symlink %s", paths[i]);
		const char *args[] = { "-c", t.conf, NULL };
		char *out = NULL, *err = NULL;
		int st = h_run_capture(bin, args, 10000, &out, &err);
		H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0 && err &&
				strstr(err, "the path exists and is not a socket"),
			"a symlink to a file at %s: exit %d, stderr %s", paths[i],
			st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, err ? err : "");
		free(out);
		free(err);
		H_CHECK(pt_secret_intact(t.secret), "the file %s names changed", paths[i]);
	}
	h_server_stop(&be);
}

Test(hostile, symlinks_swapped_in_while_running_leave_root_files_alone, .init = h_init,
     .fini = h_fini, .timeout = 60)
{
	struct passwd *pw = getpwnam("nobody");
	const char *bin = h_binary(0);
	static struct h_server be;
	static struct h_proxy p;
	struct pt_paths t;
	char err[512];

	if (geteuid() != 0 || !pw)
		cr_skip_test("needs root and a user nobody");
	H_CHECK(h_server_start(&be, "127.0.0.1:0", 8, h_echo_conn, NULL) == 0, "backend");
	pt_setup(&t, pw, be.addr.text);
	const char *args[] = { "-c", t.conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "start: %s", err);
	H_CHECK(h_echo_roundtrip(&p.addr, 64, 1, 3000, err, sizeof err) == 0, "session: %s", err);
	/* the user swaps each socket file for a link to root's secret */
	const char *paths[] = { t.lsn, t.stats, t.admin };
	for (int i = 0; i < 3; i++)
		H_CHECK(unlink(paths[i]) == 0 && symlink(t.secret, paths[i]) == 0, "swap %s", paths[i]);
	/* a reload and a log reopen walk the same paths' neighbourhood */
	kill(p.pid, SIGHUP);
	kill(p.pid, SIGUSR1);
	h_sleep_ms(300);
	H_CHECK(h_proxy_alive(&p), "the proxy died");
	h_proxy_down(&p);
	H_CHECK(pt_secret_intact(t.secret), "stopping changed the file the links name");
	for (int i = 0; i < 3; i++) {
		struct stat sb;
		H_CHECK(lstat(paths[i], &sb) != 0 || S_ISLNK(sb.st_mode),
			"%s is something else than the link left there", paths[i]);
	}
	h_server_stop(&be);
}
