/* SPDX-License-Identifier: MIT */
/* Install and package: the checks are shell scripts in tests/package/ (they
 * drive make, dpkg-deb, systemd-analyze and tools/deps.sh, which is what
 * shell is for); each test here runs one from the source tree and fails with
 * its messages. A script exits 77 when what it needs is not on this host,
 * saying why on stdout: the test is skipped with that reason.
 *   install_tree    make install/uninstall DESTDIR=... (PREFIX=/usr, /usr/local)
 *   unit_systemd    systemd-analyze verify and security on the installed unit
 *   deb             the .deb of `make deb` (SPLICER_DEB): unpacked, its check run
 *   deps_policy     tools/deps.sh against a fake policy-rc.d and /etc
 *   containerfile   contrib/Containerfile's packages: Build-Depends, the
 *                   packages of the libraries build/splicer names
 *   deploy_files    contrib/'s fleet files agree (ports, probes, admin socket,
 *                   timeouts, user) and their configs pass splicer check;
 *                   the image make test built has the pod's user, SIGTERM
 *                   as its stop signal and the preStop's splicer; the BGP
 *                   speaker's bird.conf parses (bird -p), announces nothing
 *                   before the health hook says so, has BFD, and its unit
 *                   polls fleet.conf's stats port */
#define _GNU_SOURCE
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SKIPPED 77

static void run_script(const char *name, int timeout_ms)
{
	char path[128], *out = NULL, *err = NULL;
	const char *args[] = { path, NULL };
	int st;

	snprintf(path, sizeof(path), "tests/package/%s.sh", name);
	H_CHECK(access(path, R_OK) == 0, "%s not found: run the tests from the source tree", path);
	/* what a killed script leaves goes with the test's temp dir */
	setenv("TMPDIR", h_tmpdir(), 1);
	st = h_run_capture("/bin/sh", args, timeout_ms, &out, &err);
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == SKIPPED)
		cr_skip_test("%s", out ? out : name);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed (status %d):\n%s%s", path,
		st, out ? out : "", err ? err : "");
	cr_log_info("%s", out ? out : "");
	free(out);
	free(err);
}

Test(integ, install_tree, .init = h_init, .fini = h_fini, .timeout = 120)
{
	h_binary(0);
	run_script("install_tree", 100000);
}

Test(integ, install_unit_systemd, .init = h_init, .fini = h_fini, .timeout = 120)
{
	h_binary(0);
	run_script("unit_systemd", 100000);
}

Test(integ, package_deb, .init = h_init, .fini = h_fini, .timeout = 120)
{
	run_script("deb", 100000);
}

Test(integ, deps_policy_rc_and_services, .init = h_init, .fini = h_fini, .timeout = 60)
{
	run_script("deps_policy", 50000);
}

Test(integ, containerfile_installs_what_the_binary_needs, .init = h_init, .fini = h_fini, .timeout = 60)
{
	h_binary(0);
	run_script("containerfile", 30000);
}

Test(integ, deployment_files_agree, .init = h_init, .fini = h_fini, .timeout = 60)
{
	h_binary(0);
	run_script("deploy_files", 30000);
}
