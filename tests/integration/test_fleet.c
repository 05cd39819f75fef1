/* SPDX-License-Identifier: MIT */
/* A fleet behind ECMP (issue 18): the short run of tests/fleet/fleet.sh,
 * three instances behind a Linux router's multipath route (resilient
 * nexthop group, L4 hashing) and five backends, each in its own network
 * namespace in 10.200.0.0/16, and the container image of contrib/.
 *
 *   fleet_short   every scenario's row and the summary line: no scenario
 *                 failed or skipped, agreement 100 %, the proper leave
 *                 (lame duck) and the upgrade break and refuse nothing,
 *                 the instance that joins moves no established flow, a
 *                 removed backend's clients and no others move
 *   fleet_image   builds contrib/Containerfile where a container tool
 *                 answers here, runs `splicer --version` in it
 *
 * The script exits 77 when this host cannot run it (not root, no
 * namespaces, no resilient nexthop groups), saying why: the test is
 * skipped with that reason. Shell and Python drive the namespaces, as
 * tests/package drives dpkg: what they are for. */
#define _GNU_SOURCE
#include "harness.h"

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

Test(integ, fleet_short, .init = h_init, .fini = h_fini, .timeout = 180)
{
	const char *script = getenv("SPLICER_FLEET") ? getenv("SPLICER_FLEET") : "tests/fleet/fleet.sh";
	const char *bin = h_binary(0);
	const char *args[] = { script, "--short", bin, NULL };
	char *out = NULL, *err = NULL;
	const char *sum;
	int st, n, ok, failed, skipped;

	H_CHECK(access(script, R_OK) == 0, "%s not found: run the tests from the source tree", script);
	/* the script bounds itself (90 s) and deletes its namespaces on exit */
	st = h_run_capture("/bin/sh", args, 150000, &out, &err);
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
	expect_row(out, "b leave kill", "info");
	cr_log_info("%s", out);
	free(out);
	free(err);
}

/* The first container tool whose daemon or runtime answers here, or NULL
 * with the reason in why. */
static const char *container_tool(char *why, size_t len)
{
	static const char *const tools[] = { "docker", "podman", "buildah", NULL };
	size_t n = 0;

	why[0] = '\0';
	for (int i = 0; tools[i]; i++) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tools[i]);
		if (system(cmd) != 0) {
			n += (size_t)snprintf(why + n, len - n, "%s%s: not installed", n ? "; " : "",
					      tools[i]);
			continue;
		}
		snprintf(cmd, sizeof(cmd), "timeout 20 %s info >/dev/null 2>&1", tools[i]);
		if (system(cmd) == 0)
			return tools[i];
		n += (size_t)snprintf(why + n, len - n, "%s%s: installed, `%s info` fails (no daemon or runtime)",
				      n ? "; " : "", tools[i], tools[i]);
		if (n >= len)
			break;
	}
	return NULL;
}

Test(integ, fleet_image, .init = h_init, .fini = h_fini, .timeout = 900)
{
	char why[512], cmd[512], *out = NULL, *err = NULL;
	const char *tool = container_tool(why, sizeof(why));
	const char *sh_args[] = { "-c", cmd, NULL };
	int st;

	if (!tool)
		cr_skip_test("container image not built: %s", why);
	H_CHECK(access("contrib/Containerfile", R_OK) == 0, "contrib/Containerfile not found");
	/* buildah builds but does not run containers: the build is the test */
	if (!strcmp(tool, "buildah"))
		snprintf(cmd, sizeof(cmd),
			 "buildah bud -t splicer-test:fleet -f contrib/Containerfile . && echo splicer built");
	else
		snprintf(cmd, sizeof(cmd),
			 "%s build -t splicer-test:fleet -f contrib/Containerfile . && "
			 "%s run --rm splicer-test:fleet --version && "
			 "%s run --rm --entrypoint id splicer-test:fleet -u",
			 tool, tool, tool);
	st = h_run_capture("/bin/sh", sh_args, 840000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "`%s` failed (status %d):\n%s%s", cmd,
		st, out ? out : "", err ? err : "");
	H_CHECK(strstr(out, "splicer"), "no version line from the image:\n%s", out);
	/* the last line is the user id the image runs as: not root */
	H_CHECK(!strstr(out, "\n0\n"), "the image runs as root:\n%s", out);
	free(out);
	free(err);
}
