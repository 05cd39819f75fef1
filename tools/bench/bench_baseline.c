/* SPDX-License-Identifier: MIT */
/* bench_baseline: see bench_baseline.h. */
#define _GNU_SOURCE
#include "bench_baseline.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HELP_MAX (256 * 1024)

/* The stdout of `exe --help`, read for at most 5 s; NULL if it printed
 * nothing. The caller frees it. */
static char *read_help(const char *exe)
{
	int p[2];
	pid_t pid;
	char *buf = malloc(HELP_MAX);
	size_t n = 0;
	struct timespec t0, t;

	if (!buf || pipe2(p, O_CLOEXEC)) {
		free(buf);
		return NULL;
	}
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(null, STDIN_FILENO);
		dup2(p[1], STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		execl(exe, "splicer", "--help", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (pid > 0 && n < HELP_MAX - 1) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		ssize_t r;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 5 || poll(&pf, 1, 200) < 0)
			break;
		if (!pf.revents)
			continue;
		if ((r = read(p[0], buf + n, HELP_MAX - 1 - n)) <= 0)
			break;
		n += (size_t)r;
	}
	close(p[0]);
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	buf[n] = '\0';
	if (!n) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Whether help names option opt ("--sandbox") as a whole word. */
static int knows(const char *help, const char *opt)
{
	size_t len = strlen(opt);

	for (const char *p = help; (p = strstr(p, opt)); p += len) {
		char next = p[len];
		if (!(next >= 'a' && next <= 'z') && !(next >= '0' && next <= '9') && next != '-')
			return 1;
	}
	return 0;
}

int bench_baseline_knows(const struct bench_baseline *b, const char *word)
{
	return knows(b->help, word);
}

int bench_baseline_open(struct bench_baseline *b, const char *arg, char *err, size_t len)
{
	const char *eq = strchr(arg, '='), *path = eq ? eq + 1 : arg;
	char rpath[PATH_MAX + 16], *slash;
	struct stat st;
	FILE *f;

	memset(b, 0, sizeof(*b));
	b->fd = -1;
	snprintf(b->name, sizeof(b->name), "%.*s", eq ? (int)(eq - arg) : 8, eq ? arg : "baseline");
	if (!b->name[0] || (eq && (size_t)(eq - arg) >= sizeof(b->name)) ||
	    strspn(b->name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
		    strlen(b->name)) {
		snprintf(err, len, "option '--baseline': invalid name '%.*s' (expects 1..31 letters, "
			 "digits, '.', '_' or '-' before the '=')", eq ? (int)(eq - arg) : 0, arg);
		return -1;
	}
	snprintf(b->path, sizeof(b->path), "%s", path);
	/* the file as it is now: a rebuild that replaces it during the run
	 * (make perf-baseline installs by rename) does not change what runs */
	b->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (b->fd < 0 || fstat(b->fd, &st) || !S_ISREG(st.st_mode) || access(path, X_OK)) {
		snprintf(err, len, "option '--baseline': %s: %s (a splicer binary: make perf-baseline "
			 "REV=<revision> builds one into build/baseline/splicer)", path,
			 b->fd < 0 ? strerror(errno) : "not an executable file");
		if (b->fd >= 0)
			close(b->fd);
		return -1;
	}
	snprintf(b->exe, sizeof(b->exe), "/proc/%d/fd/%d", (int)getpid(), b->fd);
	b->help = read_help(b->exe);
	if (!b->help || !knows(b->help, "--engine") || !knows(b->help, "--workers")) {
		snprintf(err, len, "option '--baseline': %s does not look like splicer (its --help names "
			 "no --engine and --workers)", path);
		free(b->help);
		close(b->fd);
		return -1;
	}
	/* make perf-baseline leaves REVISION beside the binary */
	snprintf(rpath, sizeof(rpath), "%s", path);
	slash = strrchr(rpath, '/');
	snprintf(slash ? slash + 1 : rpath, sizeof(rpath) - (size_t)(slash ? slash + 1 - rpath : 0),
		 "REVISION");
	if ((f = fopen(rpath, "re"))) {
		if (fgets(b->rev, sizeof(b->rev), f))
			b->rev[strcspn(b->rev, "\n")] = '\0';
		fclose(f);
	}
	return 0;
}

const char *bench_baseline_twin(struct bench_twin *t, const struct bench_case *c,
				const struct bench_baseline *b, char *why, size_t len)
{
	t->c = *c;
	snprintf(t->name, sizeof(t->name), "%s@%s", c->name, b->name);
	snprintf(t->what, sizeof(t->what), "%s, as built by the baseline %s (%s%s%s)", c->what, b->name,
		 b->path, b->rev[0] ? ": " : "", b->rev);
	t->c.name = t->name;
	t->c.what = t->what;
	t->c.exe = b->exe;
	t->c.base = b->name;
	t->c.of = c;
	for (int i = 0; c->opts[i]; i++)
		if (!strncmp(c->opts[i], "--", 2) && !knows(b->help, c->opts[i])) {
			snprintf(why, len, "the baseline %s (%s) has no %s option", b->name, b->path,
				 c->opts[i]);
			return why;
		}
	return NULL;
}
