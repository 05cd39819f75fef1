/* SPDX-License-Identifier: MIT */
/* A fleet behind ECMP (issues 18, 26): the short run of tests/fleet/fleet.sh,
 * three instances behind a Linux router's multipath route (resilient
 * nexthop group, L4 hashing) and five backends, each in its own network
 * namespace in 10.200.0.0/16, the route to the VIP BGP's alone (BIRD 2 with
 * contrib/bgp on each instance, FRR with BFD on the router). (The container
 * image of contrib/ has its own cases: tests/integration/test_image.c.)
 *
 *   fleet_short   every scenario's row and the summary line: no scenario
 *                 failed or skipped, agreement 100 %, the proper leave
 *                 (lame duck) and the upgrade break and refuse nothing,
 *                 the instance that joins moves no established flow, a
 *                 removed backend's clients and no others move, a dead
 *                 instance is dropped by BFD and breaks no flow of the
 *                 others, a crash and unreachable backends withdraw the
 *                 instance, a rolling upgrade breaks no established flow,
 *                 a speaker stopped withdraws with a BGP Cease
 *   fleet_cleanup SIGHUP to a running fleet.sh: it stops its driver at once
 *                 (not after the run), and no namespace of its own is left,
 *                 nor one a dead run left behind (fl<dead PID>-*)
 *
 * The script exits 77 when this host cannot run it (not root, no
 * namespaces, no resilient nexthop groups, no FRR or BIRD 2), saying why: the test is
 * skipped with that reason. Shell and Python drive the namespaces, as
 * tests/package drives dpkg: what they are for. */
#define _GNU_SOURCE
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SKIPPED 77

/* The line of the table for a scenario (its name at the start of a line),
 * NUL-terminated into buf; 0, or -1 when absent. */
static int table_row(const char *out, const char *name, char *buf, size_t len)
{
	for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, name, strlen(name)))
			continue;
		size_t n = strcspn(p, "\n");
		snprintf(buf, len, "%.*s", (int)n, p);
		return 0;
	}
	return -1;
}

static void expect_row(const char *out, const char *name, const char *want)
{
	char row[512];

	H_CHECK(table_row(out, name, row, sizeof(row)) == 0, "no row \"%s\" in:\n%s", name, out);
	H_CHECK(strstr(row, want), "row \"%s\" lacks \"%s\": %s", name, want, row);
}

Test(integ, fleet_short, .init = h_init, .fini = h_fini, .timeout = 240)
{
	const char *script = getenv("SPLICER_FLEET") ? getenv("SPLICER_FLEET") : "tests/fleet/fleet.sh";
	const char *bin = h_binary(0);
	const char *args[] = { script, "--short", bin, NULL };
	char *out = NULL, *err = NULL;
	const char *sum;
	int st, n, ok, failed, skipped;

	H_CHECK(access(script, R_OK) == 0, "%s not found: run the tests from the source tree", script);
	/* the script bounds itself (150 s) and deletes its namespaces on exit */
	st = h_run_capture("/bin/sh", args, 200000, &out, &err);
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == SKIPPED)
		cr_skip_test("%s", out ? out : "fleet: skipped");
	H_CHECK(out && (sum = strstr(out, "\nfleet: ")), "no summary line (status %d):\n%s%s", st,
		out ? out : "", err ? err : "");
	H_CHECK(sscanf(sum, "\nfleet: %d scenarios, %d ok, %d failed, %d skipped", &n, &ok, &failed,
		       &skipped) == 4, "summary line unreadable: %s", sum + 1);
	H_CHECK(failed == 0 && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"fleet failed (status %d):\n%s%s", st, out, err ? err : "");
	expect_row(out, "a agreement", "100.0%");
	expect_row(out, "a agreement", " ok ");
	expect_row(out, "c join", " ok ");
	expect_row(out, "d backend removed", "others moved: 0");
	expect_row(out, "d backend removed", " ok ");
	/* lame duck and upgrade are in the binary: their rows run and pass */
	H_CHECK(skipped == 0, "%d scenarios skipped:\n%s", skipped, out);
	expect_row(out, "b leave lameduck", " ok ");
	expect_row(out, "e upgrade", " ok ");
	expect_row(out, "b leave kill", " ok ");
	expect_row(out, "b leave kill", "BFD Down");
	expect_row(out, "f crash", " ok ");
	expect_row(out, "g rolling upgrade", " ok ");
	expect_row(out, "g rolling upgrade", ", 0 broken;");
	expect_row(out, "h backends unreachable", " ok ");
	expect_row(out, "i speaker stopped", " ok ");
	cr_log_info("%s", out);
	free(out);
	free(err);
}

/* How many network namespaces named PREFIX* exist (ip netns keeps one
 * file per name in /run/netns). */
static int netns_count(const char *prefix)
{
	DIR *d = opendir("/run/netns");
	int n = 0;

	if (!d)
		return 0;
	for (struct dirent *e; (e = readdir(d));)
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

/* `ip netns VERB NAME` (ip from PATH): its output (caller frees) in *out
 * unless out is NULL; 0 when it succeeded, else -1. */
static int ip_netns(const char *verb, const char *name, char **out)
{
	const char *args[] = { "-c", "exec ip netns \"$@\"", "ip", verb, name, NULL };
	char *o = NULL, *err = NULL;
	int st = h_run_capture("/bin/sh", args, 10000, &o, &err);

	free(err);
	if (out)
		*out = o;
	else
		free(o);
	return st == 0 ? 0 : -1;
}

/* A PID no process has: a child's, reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	H_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

/* The PIDs of the processes in the namespace (`ip netns pids`), at most
 * max; how many. */
static int netns_pids(const char *name, pid_t *pids, int max)
{
	char *out = NULL, *p, *end;
	int n = 0;

	if (ip_netns("pids", name, &out) == 0 && out)
		for (p = out; n < max; p = end) {
			long v = strtol(p, &end, 10);
			if (end == p)
				break;
			pids[n++] = (pid_t)v;
		}
	free(out);
	return n;
}

/* Whether one of the n processes is a splicer (its /proc comm). */
static int has_proxy(const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		char path[64], comm[32] = "";
		FILE *f;
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pids[i]);
		if ((f = fopen(path, "r"))) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = '\0';
			fclose(f);
		}
		if (!strcmp(comm, "splicer\n"))
			return 1;
	}
	return 0;
}

/* Gone: no such process, or a zombie (dead, its parent not yet told). */
static int pid_gone(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' && paren[2] == 'Z';
}

/* A stopped run keeps its logs, as a failed one does, and says where:
 * this one was stopped on purpose. */
static void remove_kept_logs(const char *out)
{
	const char *p = strstr(out, "fleet: logs kept in /tmp/splicer-fleet-");
	char dir[256], *o = NULL, *e = NULL;

	if (!p)
		return;
	p += strlen("fleet: logs kept in ");
	snprintf(dir, sizeof(dir), "%.*s", (int)strcspn(p, "\n"), p);
	const char *args[] = { "-rf", "--", dir, NULL };
	h_run_capture("/bin/rm", args, 10000, &o, &e);
	free(o);
	free(e);
}

Test(integ, fleet_cleanup, .init = h_init, .fini = h_fini, .timeout = 120)
{
	const char *script = getenv("SPLICER_FLEET") ? getenv("SPLICER_FLEET") : "tests/fleet/fleet.sh";
	char *argv[] = { "/bin/sh", (char *)script, "--short", (char *)h_binary(0), NULL };
	char stale[64], mine[64], inst[64], opath[256];
	pid_t pid, pids[16];
	int64_t t0;
	int st = -1, ofd, nfd, n = 0;

	H_CHECK(access(script, R_OK) == 0, "%s not found: run the tests from the source tree", script);
	if (geteuid() != 0)
		cr_skip_test("fleet.sh needs root (network namespaces)");
	snprintf(stale, sizeof(stale), "fl%d-stale", (int)dead_pid());
	if (ip_netns("add", stale, NULL))
		cr_skip_test("cannot create a network namespace (ip netns add %s)", stale);
	snprintf(opath, sizeof(opath), "%s/fleet-cleanup.out", h_tmpdir());
	ofd = open(opath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	H_CHECK(ofd >= 0 && nfd >= 0, "%s: %s", opath, strerror(errno));
	pid_t parent = getpid();
	pid = fork();
	if (pid == 0)
		h_child_exec(parent, nfd, ofd, ofd, "/bin/sh", argv);
	close(ofd);
	close(nfd);
	H_CHECK(pid > 0, "fork: %s", strerror(errno));
	snprintf(mine, sizeof(mine), "fl%d-", (int)pid);
	snprintf(inst, sizeof(inst), "fl%d-i1", (int)pid);
	/* until its first instance runs (the build's own `ip netns exec`
	 * commands are in that namespace for a moment too) */
	for (t0 = h_now_ms(); h_now_ms() - t0 < 30000; h_sleep_ms(100))
		if (has_proxy(pids, n = netns_pids(inst, pids, 16)) || waitpid(pid, &st, WNOHANG) == pid)
			break;
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == SKIPPED) {
		ip_netns("del", stale, NULL);
		cr_skip_test("fleet.sh skipped: see %s", opath);
	}
	H_CHECK(st == -1, "fleet.sh ended (status %d) before its instances ran: see %s", st, opath);
	H_CHECK(has_proxy(pids, n), "no splicer in %s within 30 s: see %s", inst, opath);
	H_CHECK(netns_count(stale) == 0, "%s (a dead PID's) was not deleted", stale);

	/* the run takes 20 s and more: gone within 10 s is at once (the
	 * driver stops in about 2 s; timeout's -k would kill it at 10) */
	kill(pid, SIGHUP);
	t0 = h_now_ms();
	while (waitpid(pid, &st, WNOHANG) != pid && h_now_ms() - t0 < 10000)
		h_sleep_ms(20);
	int64_t took = h_now_ms() - t0;
	if (took >= 10000) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	H_CHECK(took < 10000, "fleet.sh still running 10 s after SIGHUP");
	cr_log_info("fleet.sh gone %lld ms after SIGHUP", (long long)took);
	H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 129, "fleet.sh after SIGHUP: status %d, expected "
		"exit 129", st);
	H_CHECK(netns_count(mine) == 0, "%d namespaces %s* left after SIGHUP", netns_count(mine), mine);
	for (int i = 0; i < n; i++) {
		for (t0 = h_now_ms(); !pid_gone(pids[i]) && h_now_ms() - t0 < 5000;)
			h_sleep_ms(20);
		H_CHECK(pid_gone(pids[i]), "process %d of %s still runs after SIGHUP", (int)pids[i], inst);
	}
	const char *cat_args[] = { opath, NULL };
	char *out = NULL, *err = NULL;
	h_run_capture("/bin/cat", cat_args, 10000, &out, &err); /* the harness's file reader */
	free(err);
	/* the driver's row for it, and the table's end: an orderly stop */
	H_CHECK(out && strstr(out, "driver error") && strstr(out, "stopped by SIGTERM") &&
			strstr(out, "\nfleet: ") && !strstr(out, "Traceback"),
		"the driver did not stop in order on the signal passed on:\n%s", out ? out : "");
	remove_kept_logs(out);
	free(out);
}
