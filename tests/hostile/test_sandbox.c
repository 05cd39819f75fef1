/* SPDX-License-Identifier: MIT */
/* The sandbox of the running proxy (doc/security.md): its own attempts to
 * run a program, fork, or read a file outside its Landlock rules are
 * refused while it forwards; with `sandbox = no` the same attempts succeed
 * (the control: the test can tell). SPLICER_SANDBOX_SELFTEST names the file
 * the proxy tries to read, from a thread made after the sandbox. */
#define _GNU_SOURCE
#include "harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Starts the proxy with the selftest on a readable file of the temp dir
 * (outside every directory the rules allow: the routes come from the
 * command line, so no config directory is readable), sandbox yes or no. */
static void sb_run(struct h_proxy *p, struct h_server *be, const char *sandbox)
{
	char file[300], err[512];
	const char *bin = h_binary(0);

	snprintf(file, sizeof file, "%s/outside.txt", h_tmpdir());
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	H_CHECK(fd >= 0 && write(fd, "x\n", 2) == 2, "write %s", file);
	close(fd);
	H_CHECK(h_server_start(be, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "backend");
	setenv("SPLICER_SANDBOX_SELFTEST", file, 1);
	const char *args[] = { "-l", "127.0.0.1:0", "-b", be->addr.text, "--workers", "2",
			       "--sandbox", sandbox, NULL };
	int r = h_proxy_start(p, bin, args, err, sizeof err);
	unsetenv("SPLICER_SANDBOX_SELFTEST");
	H_CHECK(r == 0, "start: %s", err);
	/* the selftest runs right after the ready line */
	for (int64_t end = h_now_ms() + 3000;
	     h_log_lines(p, "sandbox selftest: execve", NULL) == 0 && h_now_ms() < end;)
		h_sleep_ms(10);
}

Test(hostile, sandbox_refuses_exec_fork_and_files_outside_its_rules, .init = h_init,
     .fini = h_fini, .timeout = 60)
{
	static struct h_server be;
	static struct h_proxy p;
	char v[64], err[256];

	sb_run(&p, &be, "yes");
	H_CHECK(h_log_lines(&p, "sandbox: no_new_privs, seccomp allow-list", "Landlock ABI", NULL) == 1,
		"no sandbox line with Landlock at start");
	H_CHECK(h_log_lines(&p, "sandbox selftest: execve /bin/true: refused", NULL) == 1,
		"execve was not refused");
	H_CHECK(h_log_lines(&p, "sandbox selftest: fork: refused", NULL) == 1, "fork was not refused");
	H_CHECK(h_log_lines(&p, "sandbox selftest: ", "outside.txt: refused (Permission denied)", NULL) == 1,
		"a file outside the rules could be opened");
	h_proc_status(p.pid, "NoNewPrivs:", v, sizeof v);
	H_CHECK(!strcmp(v, "1"), "NoNewPrivs: %s", v);
	h_proc_status(p.pid, "Seccomp:", v, sizeof v);
	H_CHECK(!strcmp(v, "2"), "Seccomp: %s (2: a filter)", v);
	for (int i = 0; i < 10; i++)
		H_CHECK(h_echo_roundtrip(&p.addr, 4096, (uint64_t)i, 3000, err, sizeof err) == 0,
			"session %d inside the sandbox: %s", i, err);
	h_proxy_down(&p);
	h_server_stop(&be);
}

Test(hostile, sandbox_off_is_the_control, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static struct h_server be;
	static struct h_proxy p;
	char v[64];

	sb_run(&p, &be, "no");
	H_CHECK(h_log_lines(&p, "sandbox selftest: execve /bin/true: ALLOWED", NULL) == 1 &&
			h_log_lines(&p, "sandbox selftest: fork: ALLOWED", NULL) == 1 &&
			h_log_lines(&p, "sandbox selftest: ", "outside.txt: ALLOWED", NULL) == 1,
		"with sandbox = no the selftest should succeed at everything (log %s)", p.log);
	h_proc_status(p.pid, "Seccomp:", v, sizeof v);
	H_CHECK(!strcmp(v, "0"), "Seccomp: %s with the sandbox off", v);
	h_proxy_down(&p);
	h_server_stop(&be);
}
