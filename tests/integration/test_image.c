/* SPDX-License-Identifier: MIT */
/* The container image of contrib/Containerfile, run (issue 26). `make test`
 * builds it before the suite (tools/image-build.sh --state): the file
 * SPLICER_IMAGE_STATE names says "ok ID", "skip REASON" (no container
 * runtime could be installed or run here) or "fail REASON". Each case runs
 * the image the way contrib/kubernetes/splicer.yaml's Deployment does
 * (tests/package/pod_spec.py turns its pod into podman's arguments: read-only
 * root, every capability dropped, no_new_privs, podman's default seccomp
 * profile, the ConfigMap mounted read-only, the admin socket's emptyDir as a
 * tmpfs), with podman as tools/podman.sh runs it on hosts like this one, and
 * without --user: the image's own USER must be the pod's runAsUser.
 *   package_image_pod    the ConfigMap's config with its addresses moved to
 *                        127.0.0.1 ports, host networking: the process runs
 *                        as the pod's user, unprivileged, inside its own
 *                        sandbox (seccomp and, where the kernel has it,
 *                        Landlock: its selftest is refused); GET /health on
 *                        the stats port is 200; streams go through byte for
 *                        byte; the preStop hook turns /health 503 while the
 *                        listener accepts; `podman stop` then (the image's
 *                        STOPSIGNAL, SIGKILL after the pod's grace period)
 *                        closes the listener, a running session finishes,
 *                        and the process exits 0 of itself
 *   package_image_check  `splicer check` in the image accepts the ConfigMap's
 *                        config as it is, in a network namespace of its own
 *                        (a pod's): its ports and admin socket are probed there
 * A container a killed run left behind (splicer-test-PID-*, PID gone) is
 * removed first; every container a case starts is removed by its .fini. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PODMAN "tools/podman.sh"
#define MAXW 32
#define NARGS 60 /* h_run_capture takes 63 */

/* The pod of the manifest (pod_spec.py's lines); words point into text. */
struct pod {
	char *text;
	const char *podman[MAXW]; /* `podman run` arguments */
	int npodman;
	const char *args[MAXW];   /* the container's args */
	int nargs;
	const char *prestop[MAXW];
	int nprestop;
	unsigned uid, gid;
	const char *readiness; /* the probe's path */
	unsigned grace; /* terminationGracePeriodSeconds */
};

static char ctr_name[64]; /* the container of this case, removed by image_fini */

/* Runs tools/podman.sh with args (NULL-terminated); the wait status, or -1
 * on timeout. out and err are the caller's to free. */
static int podman(const char *const *args, int timeout_ms, char **out, char **err)
{
	const char *argv[NARGS];
	int n = 0;

	argv[n++] = PODMAN;
	for (int i = 0; args[i] && n < NARGS - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return h_run_capture("/bin/sh", argv, timeout_ms, out, err);
}

/* Removes a container, whatever its state; quietly. */
static void ctr_remove(const char *name)
{
	const char *args[] = { "rm", "-f", "-t", "0", name, NULL };
	char *out = NULL, *err = NULL;

	podman(args, 60000, &out, &err);
	free(out);
	free(err);
}

static void image_fini(void)
{
	if (ctr_name[0])
		ctr_remove(ctr_name);
	ctr_name[0] = '\0';
	h_fini();
}

/* Containers of test processes that are gone (a run killed at its timeout
 * skips .fini): splicer-test-PID-... with no such PID. */
static void remove_orphans(void)
{
	const char *args[] = { "ps", "-a", "--filter", "name=^splicer-test-", "--format", "{{.Names}}",
			       NULL };
	char *out = NULL, *err = NULL;

	if (podman(args, 60000, &out, &err) == 0 && out)
		for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
			int pid = atoi(l + strlen("splicer-test-"));
			if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
				cr_log_info("removing %s, left by a run that is gone", l);
				ctr_remove(l);
			}
		}
	free(out);
	free(err);
}

/* The image make test built (its ID), or the case is skipped/failed with
 * the reason the build gave. */
static const char *image_id(char *buf, size_t len)
{
	const char *path = getenv("SPLICER_IMAGE_STATE");
	const char *cat_args[] = { path, NULL };
	char *out = NULL, *err = NULL;

	H_CHECK(path && *path, "SPLICER_IMAGE_STATE is not set: `make test` builds the image and sets it "
		"(or run tools/image-build.sh --state FILE splicer:test and name FILE)");
	h_run_capture("/bin/cat", cat_args, 10000, &out, &err);
	H_CHECK(out && *out, "%s is empty or missing: the image build did not record its outcome", path);
	out[strcspn(out, "\n")] = '\0';
	if (!strncmp(out, "skip ", 5))
		cr_skip_test("%s", out + 5);
	H_CHECK(!strncmp(out, "ok ", 3), "the image was not built: %s", out);
	snprintf(buf, len, "%s", out + 3);
	free(out);
	free(err);
	remove_orphans();
	snprintf(ctr_name, sizeof ctr_name, "splicer-test-%d-%s", (int)getpid(),
		 criterion_current_test->name);
	ctr_remove(ctr_name);
	return buf;
}

/* Runs pod_spec.py DIR VARIANT [...] into p (asserts); DIR is the temp
 * dir's "pod" (the temp dir itself is the test's alone, mode 0700). */
static void pod_load(struct pod *p, const char *const *extra)
{
	static char dir[300];
	const char *args[12] = { "tests/package/pod_spec.py", dir };
	char *err = NULL;
	int n = 2;

	snprintf(dir, sizeof dir, "%s/pod", h_tmpdir());

	for (int i = 0; extra[i] && n < 11; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	memset(p, 0, sizeof *p);
	int st = h_run_capture("/usr/bin/python3", args, 30000, &p->text, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pod_spec.py failed (%d): %s%s", st,
		p->text ? p->text : "", err ? err : "");
	free(err);
	for (char *l = strtok(p->text, "\n"); l; l = strtok(NULL, "\n")) {
		char *v = strchr(l, ' ');
		H_CHECK(v, "pod_spec.py: a line without a value: %s", l);
		*v++ = '\0';
		if (!strcmp(l, "podman") && p->npodman < MAXW)
			p->podman[p->npodman++] = v;
		else if (!strcmp(l, "arg") && p->nargs < MAXW)
			p->args[p->nargs++] = v;
		else if (!strcmp(l, "prestop") && p->nprestop < MAXW)
			p->prestop[p->nprestop++] = v;
		else if (!strcmp(l, "user"))
			H_CHECK(sscanf(v, "%u:%u", &p->uid, &p->gid) == 2, "pod_spec.py: user %s", v);
		else if (!strcmp(l, "readiness"))
			p->readiness = v;
		else if (!strcmp(l, "grace"))
			p->grace = (unsigned)atoi(v);
		else
			H_CHECK(0, "pod_spec.py: an unknown line: %s %s", l, v);
	}
	H_CHECK(p->uid != 0 && p->nargs > 0 && p->grace > 0 && p->readiness,
		"pod_spec.py: uid %u, %d args, grace %u s, readiness %s", p->uid, p->nargs, p->grace,
		p->readiness ? p->readiness : "(none)");
}

/* Starts tools/podman.sh with args in the background, its output to
 * logname in the temp dir; the PID (asserts). */
static pid_t spawn_podman(const char *const *args, const char *logname)
{
	const char *argv[NARGS] = { "/bin/sh", PODMAN };
	char path[300];
	int n = 2;

	for (int i = 0; args[i] && n < NARGS - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	snprintf(path, sizeof path, "%s/%s", h_tmpdir(), logname);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	H_CHECK(fd >= 0 && nfd >= 0, "open %s", path);
	pid_t parent = getpid(), pid = fork();
	if (pid == 0)
		h_child_exec(parent, nfd, fd, fd, "/bin/sh", (char *const *)argv);
	close(fd);
	close(nfd);
	H_CHECK(pid > 0, "fork: %s", strerror(errno));
	return pid;
}

/* Waits up to timeout_ms for a spawned command: its exit code, or -1 (it
 * is killed then, or died of a signal). */
static int reap(pid_t pid, int timeout_ms)
{
	int st;

	for (int64_t end = h_now_ms() + timeout_ms; h_now_ms() < end; h_sleep_ms(50))
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* `podman logs` of the container: its stderr and stdout, malloc'd. */
static char *ctr_logs(void)
{
	const char *args[] = { "logs", ctr_name, NULL };
	char *out = NULL, *err = NULL;
	size_t lo, le;

	podman(args, 30000, &out, &err);
	lo = out ? strlen(out) : 0;
	le = err ? strlen(err) : 0;
	char *all = malloc(lo + le + 1);
	H_CHECK(all, "malloc");
	memcpy(all, out ? out : "", lo);
	memcpy(all + lo, err ? err : "", le + 1);
	free(out);
	free(err);
	return all;
}

/* Waits (bounded) for a line of the container's log holding needle; the
 * log, malloc'd, or NULL past the deadline (or once the container ended:
 * running says so). */
static char *wait_log(const char *needle, int timeout_ms)
{
	const char *args[] = { "inspect", "-f", "{{.State.Running}}", ctr_name, NULL };
	int64_t end = h_now_ms() + timeout_ms;

	for (;;) {
		char *log = ctr_logs(), *out = NULL, *err = NULL;
		if (strstr(log, needle))
			return log;
		free(log);
		podman(args, 30000, &out, &err);
		int gone = !out || strncmp(out, "true", 4);
		free(out);
		free(err);
		if (gone || h_now_ms() > end)
			return NULL;
		h_sleep_ms(250);
	}
}

/* GET path on 127.0.0.1:port: the status code, or -1. */
static int http_status(int port, const char *path)
{
	struct h_addr a;
	char addr[64], req[256], buf[1024];
	int code = -1;

	snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
	if (h_addr_parse(addr, &a) < 0)
		return -1;
	int fd = h_connect(&a, 2000);
	if (fd < 0)
		return -1;
	snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n", path);
	if (h_send_all(fd, req, strlen(req), h_now_ms() + 2000) == 0) {
		h_recv_all(fd, buf, sizeof buf, h_now_ms() + 2000);
		if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1)
			code = -1;
	}
	close(fd);
	return code;
}

/* Polls GET path until it answers want (bounded); the last status. */
static int wait_status(int port, const char *path, int want, int timeout_ms)
{
	int64_t end = h_now_ms() + timeout_ms;
	int code;

	while ((code = http_status(port, path)) != want && h_now_ms() < end)
		h_sleep_ms(100);
	return code;
}

/* One echo round trip of n bytes on an open session, checked byte for byte. */
static int session_echo(int fd, size_t n, uint64_t seed, char *why, size_t len)
{
	static char tx[64 * 1024], rx[64 * 1024];
	int r;

	h_gen(seed, 0, tx, n);
	if ((r = h_send_all(fd, tx, n, h_now_ms() + 5000)) < 0 ||
	    (r = h_recv_exact(fd, rx, n, h_now_ms() + 5000)) < 0) {
		snprintf(why, len, "%s", strerror(-r));
		return -1;
	}
	if (memcmp(tx, rx, n)) {
		snprintf(why, len, "the echo differs at byte %zu", h_gen_check(seed, 0, rx, n));
		return -1;
	}
	return 0;
}

/* 1 where the kernel has Landlock (then the process in the image must be
 * confined by it too: a runtime's seccomp profile must not take it away). */
static int kernel_has_landlock(void)
{
#ifdef SYS_landlock_create_ruleset
	return syscall(SYS_landlock_create_ruleset, NULL, 0, 1u /* _VERSION */) > 0;
#else
	return 0;
#endif
}

Test(integ, package_image_pod, .init = h_init, .fini = image_fini, .timeout = 300)
{
	static struct h_server be;
	static struct pod pod;
	static struct h_xfer tx, rx;
	char id[128], ports[3][16], want[128], v[128], why[256], *out = NULL, *err = NULL, *log;
	const char *run[NARGS];
	int n = 0, st;

	image_id(id, sizeof id);
	H_CHECK(h_server_start(&be, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	int listen_port = h_free_port(), stats_port = h_free_port();
	snprintf(ports[0], sizeof ports[0], "%d", listen_port);
	snprintf(ports[1], sizeof ports[1], "%d", stats_port);
	const char *variant[] = { "loopback", ports[0], ports[1], be.addr.text, NULL };
	pod_load(&pod, variant);

	/* the pod, on the host's network; the selftest's file is outside
	 * every Landlock rule (not /etc, /usr, /lib, /proc, the config's) */
	const char *head[] = { "run", "-d", "--name", ctr_name, "--network", "host",
			       "--env=SPLICER_SANDBOX_SELFTEST=/var/lib/dpkg/status", NULL };
	for (int i = 0; head[i]; i++)
		run[n++] = head[i];
	for (int i = 0; i < pod.npodman; i++)
		run[n++] = pod.podman[i];
	run[n++] = id;
	for (int i = 0; i < pod.nargs; i++)
		run[n++] = pod.args[i];
	run[n] = NULL;
	st = podman(run, 120000, &out, &err);
	H_CHECK(st == 0, "podman run failed (%d):\n%s%s", st, out ? out : "", err ? err : "");
	free(out);
	free(err);
	snprintf(want, sizeof want, "ready: listening on 127.0.0.1:%d", listen_port);
	log = wait_log(want, 60000);
	H_CHECK(log, "no \"%s\" within 60 s:\n%s", want, ctr_logs());
	free(log);

	/* who runs: the pod's user (the image's USER: no --user was given),
	 * nothing privileged, its own sandbox on top of the runtime's */
	const char *pid_args[] = { "inspect", "-f", "{{.State.Pid}}", ctr_name, NULL };
	st = podman(pid_args, 30000, &out, &err);
	pid_t pid = out ? (pid_t)atoi(out) : 0;
	H_CHECK(st == 0 && pid > 0, "no PID for the container: %s%s", out ? out : "", err ? err : "");
	free(out);
	free(err);
	h_proc_status(pid, "Uid:", v, sizeof v);
	snprintf(want, sizeof want, "%u\t%u\t%u\t%u", pod.uid, pod.uid, pod.uid, pod.uid);
	H_CHECK(!strcmp(v, want), "the process runs as Uid %s, the pod's runAsUser is %u", v, pod.uid);
	h_proc_status(pid, "Gid:", v, sizeof v);
	snprintf(want, sizeof want, "%u\t%u\t%u\t%u", pod.gid, pod.gid, pod.gid, pod.gid);
	H_CHECK(!strcmp(v, want), "the process runs as Gid %s, the pod's runAsGroup is %u", v, pod.gid);
	h_proc_status(pid, "CapEff:", v, sizeof v);
	H_CHECK(!strcmp(v, "0000000000000000"), "CapEff %s: the pod drops every capability", v);
	h_proc_status(pid, "NoNewPrivs:", v, sizeof v);
	H_CHECK(!strcmp(v, "1"), "NoNewPrivs %s", v);
	log = wait_log("sandbox selftest: execve", 10000);
	H_CHECK(log, "no sandbox selftest in the log:\n%s", ctr_logs());
	H_CHECK(strstr(log, "sandbox: no_new_privs, seccomp allow-list") &&
			!strstr(log, "system calls are not restricted"),
		"the proxy's seccomp filter is not in force in the image:\n%s", log);
	H_CHECK(strstr(log, "sandbox selftest: execve /bin/true: refused") &&
			strstr(log, "sandbox selftest: fork: refused"),
		"the sandbox let the proxy execve or fork in the image:\n%s", log);
	if (kernel_has_landlock())
		H_CHECK(strstr(log, "Landlock ABI") &&
				strstr(log, "sandbox selftest: /var/lib/dpkg/status: refused (Permission denied)"),
			"this kernel has Landlock, the proxy in the image is not confined by it:\n%s", log);
	else
		cr_log_warn("this kernel has no Landlock: the file rules are not tested in the image");
	free(log);

	/* the readiness probe, and streams byte for byte through the image */
	H_CHECK(http_status(stats_port, pod.readiness) == 200, "GET %s on the stats port %d: %d, not 200",
		pod.readiness, stats_port, http_status(stats_port, pod.readiness));
	struct h_addr front;
	snprintf(want, sizeof want, "127.0.0.1:%d", listen_port);
	H_CHECK(h_addr_parse(want, &front) == 0, "address %s", want);
	static const size_t sizes[] = { 1, 100, 1460, 4096, 30000, 65536 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		H_CHECK(h_echo_roundtrip(&front, sizes[i], (uint64_t)i, 5000, why, sizeof why) == 0,
			"an echo of %zu bytes through the image: %s", sizes[i], why);
	uint64_t len = 16 * H_MIB;
	int fd = h_connect(&front, 5000);
	H_CHECK(fd >= 0, "connect %s: %s", front.text, strerror(errno));
	h_xfer_init(&tx, fd, 0x1a6e, len, h_now_ms() + 60000);
	tx.shut_wr = 1;
	h_xfer_init(&rx, fd, 0x1a6e, 0, h_now_ms() + 60000);
	rx.verify = 1;
	H_CHECK(h_xfer_start_send(&tx) == 0, "sender thread");
	h_xfer_recv(&rx);
	H_CHECK(h_xfer_join(&tx, 5000) == 0, "the sender did not finish");
	close(fd);
	h_check_stream("16 MiB echoed through the image", &tx, &rx, len);

	/* Kubernetes takes the pod out: preStop, as the pod's user, in the
	 * container; meanwhile /health turns 503 and the listener accepts */
	int held = h_connect(&front, 5000);
	H_CHECK(held >= 0, "connect %s: %s", front.text, strerror(errno));
	H_CHECK(session_echo(held, 1024, 100, why, sizeof why) == 0, "the held session: %s", why);
	const char *hook[NARGS] = { "exec", ctr_name };
	n = 2;
	for (int i = 0; i < pod.nprestop; i++)
		hook[n++] = pod.prestop[i];
	hook[n] = NULL;
	pid_t hpid = spawn_podman(hook, "prestop.log");
	int code = wait_status(stats_port, pod.readiness, 503, 15000);
	H_CHECK(code == 503, "GET %s during preStop: %d, not 503 (the lame duck)", pod.readiness, code);
	H_CHECK(h_echo_roundtrip(&front, 4096, 7, 5000, why, sizeof why) == 0,
		"a new session during the lame duck: %s", why);
	st = reap(hpid, 60000);
	H_CHECK(st == 0, "the preStop hook failed (status %d); see %s/prestop.log", st, h_tmpdir());

	/* then the image's stop signal, as Kubernetes sends it (podman stop,
	 * SIGKILL after the grace period): straight to the drain, the lame
	 * duck was preStop's; the listener closes, the held session runs to
	 * its end, then the process exits 0 of itself */
	char grace[16];
	snprintf(grace, sizeof grace, "%u", pod.grace);
	const char *stop[] = { "stop", "-t", grace, ctr_name, NULL };
	int64_t t0 = h_now_ms();
	pid_t spid = spawn_podman(stop, "stop.log");
	int refused = 0;
	for (int64_t end = h_now_ms() + 10000; !refused && h_now_ms() < end; h_sleep_ms(100)) {
		int c = h_connect(&front, 1000);
		refused = c < 0 && errno == ECONNREFUSED;
		if (c >= 0)
			close(c);
	}
	H_CHECK(refused, "the listener still accepts 10 s after podman stop");
	H_CHECK(session_echo(held, 65536, 101, why, sizeof why) == 0,
		"the session held across the stop signal (the drain): %s", why);
	shutdown(held, SHUT_WR);
	H_CHECK(h_expect_eof(held, h_now_ms() + 5000) == 0, "no EOF on the drained session");
	close(held);
	int64_t t1 = h_now_ms();
	st = reap(spid, (int)pod.grace * 1000 + 30000);
	H_CHECK(st == 0, "podman stop failed (status %d); see %s/stop.log", st, h_tmpdir());
	const char *exit_args[] = { "inspect", "-f", "{{.State.ExitCode}}", ctr_name, NULL };
	st = podman(exit_args, 30000, &out, &err);
	H_CHECK(st == 0 && out && out[0] == '0' && atoi(out) == 0,
		"the container's exit code after the drain is %s%s, not 0 (137: killed at the grace period)",
		out ? out : "", err ? err : "");
	free(out);
	free(err);
	H_CHECK(h_now_ms() - t0 < (int64_t)pod.grace * 1000, "the stop took the whole grace period (%u s)",
		pod.grace);
	cr_log_info("exited 0 %lld ms after its last session ended", (long long)(h_now_ms() - t1));
	log = ctr_logs();
	H_CHECK(strstr(log, "ctl lameduck: /health answers 503") &&
			strstr(log, "SIGTERM after ctl lameduck: stopping: no new connections"),
		"the log does not show preStop's lame duck, then SIGTERM's drain:\n%s", log);
	free(log);
	free(pod.text);
	h_server_stop(&be);
}

Test(integ, package_image_check, .init = h_init, .fini = image_fini, .timeout = 180)
{
	static struct pod pod;
	char id[128], *out = NULL, *err = NULL;
	const char *run[NARGS];
	int n = 0;

	image_id(id, sizeof id);
	const char *variant[] = { "configmap", NULL };
	pod_load(&pod, variant);
	const char *head[] = { "run", "--name", ctr_name, "--network", "none", NULL };
	for (int i = 0; head[i]; i++)
		run[n++] = head[i];
	for (int i = 0; i < pod.npodman; i++)
		run[n++] = pod.podman[i];
	run[n++] = id;
	run[n++] = "check";
	for (int i = 0; i < pod.nargs; i++)
		run[n++] = pod.args[i];
	run[n] = NULL;
	int st = podman(run, 120000, &out, &err);
	H_CHECK(st == 0 && out && strstr(out, ": ok: "),
		"splicer check in the image refuses the ConfigMap's config (status %d):\n%s%s", st,
		out ? out : "", err ? err : "");
	cr_log_info("%s", out);
	free(out);
	free(err);
	free(pod.text);
}
