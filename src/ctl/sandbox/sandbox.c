/* SPDX-License-Identifier: MIT */
/* sandbox: see sandbox.h. */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "sandbox_parts.h"

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

static char said[1536]; /* what is in force, for sandbox_log */

int sandbox_enter(const struct config *cfg, char *err, size_t errlen)
{
	const char *preload = getenv("LD_PRELOAD");
	int valgrind = preload && strstr(preload, "/vgpreload_");
	char fs_why[512] = "", calls_why[256] = "", mdwe[64] = "";
	int abi, calls;

	if (!cfg->sandbox)
		return 0;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		snprintf(err, errlen, "sandbox: no_new_privs: %s", strerror(errno));
		return -1;
	}
	/* Linux 6.3: mprotect cannot make memory executable that was not.
	 * valgrind (the suite's memcheck run) translates code into the
	 * process's own memory as it goes: executable mappings stay allowed */
	if (valgrind)
		snprintf(mdwe, sizeof(mdwe), "; under valgrind: executable mappings allowed");
	else if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0))
		snprintf(mdwe, sizeof(mdwe), "; no PR_SET_MDWE (%s)", strerror(errno));
	if ((abi = sandbox_fs_enter(cfg, fs_why, sizeof(fs_why))) < 0) {
		snprintf(err, errlen, "sandbox: %s", fs_why);
		return -1;
	}
	if ((calls = sandbox_calls_enter(valgrind, calls_why, sizeof(calls_why))) < 0) {
		snprintf(err, errlen, "sandbox: %s", calls_why);
		return -1;
	}
	if (calls)
		snprintf(calls_why, sizeof(calls_why), "seccomp allow-list (%d rules)", calls);
	else /* the one line each fallback is worth */
		snprintf(calls_why + strlen(calls_why), sizeof(calls_why) - strlen(calls_why),
			 ": system calls are not restricted");
	if (abi)
		snprintf(said, sizeof(said), "sandbox: no_new_privs, %s, Landlock ABI %d%s", calls_why,
			 abi, mdwe);
	else
		snprintf(said, sizeof(said), "sandbox: no_new_privs, %s; %s: file access is not "
			 "restricted%s", calls_why, fs_why, mdwe);
	return 0;
}

void sandbox_log(void)
{
	if (!said[0])
		return;
	if (strstr(said, "not restricted") || strstr(said, "valgrind"))
		log_warn("%s", said);
	else
		log_info("%s", said);
}

/* ---- the selftest ---------------------------------------------------------- */

static void say(const char *what, int r, int e)
{
	if (r < 0)
		log_info("sandbox selftest: %s: refused (%s)", what, strerror(e));
	else
		log_warn("sandbox selftest: %s: ALLOWED", what);
}

/* The harmless order: the open, then a fork whose child exits at once;
 * then execve, in that child when the fork was allowed (the sandbox off: a
 * control run), else here, where success would end the proxy (and the
 * test that watches it). */
static void *selftest_main(void *arg)
{
	const char *path = arg;
	char *const argv[] = { "true", NULL };
	int fd, st = 0;
	pid_t pid;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	say(path, fd, errno);
	if (fd >= 0)
		close(fd);
	pid = fork();
	if (pid == 0) {
		execve("/bin/true", argv, NULL);
		_exit(127);
	}
	say("fork", pid < 0 ? -1 : 0, errno);
	if (pid > 0) {
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		say("execve /bin/true", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1, EPERM);
		return NULL;
	}
	execve("/bin/true", argv, NULL);
	say("execve /bin/true", -1, errno); /* it returned: refused */
	return NULL;
}

void sandbox_selftest(void)
{
	const char *path = getenv("SPLICER_SANDBOX_SELFTEST");
	pthread_t t;

	if (!path || !path[0])
		return;
	if (pthread_create(&t, NULL, selftest_main, (void *)path) == 0)
		pthread_join(t, NULL);
}
