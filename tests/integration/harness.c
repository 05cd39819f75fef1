/* SPDX-License-Identifier: MIT */
/* Integration-test harness for splicer; see harness.h. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "h_gen assumes a little-endian host"
#endif

int h_slow = 1;

/* ---- time ---------------------------------------------------------------- */

int64_t h_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t h_now_ms(void)
{
	return h_now_us() / 1000;
}

void h_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- per-test state -------------------------------------------------------- */

#define H_MAX_PROXIES 16

static char h_dir[64];
static int h_failed;
static struct h_proxy *h_live[H_MAX_PROXIES]; /* running proxies */
static char h_logs[H_MAX_PROXIES][256];       /* every log of this test */
static pid_t h_log_pids[H_MAX_PROXIES];
static int h_nlogs;
static int h_file_seq;

const char *h_tmpdir(void)
{
	if (!h_dir[0]) {
		strcpy(h_dir, "/tmp/splicer-it.XXXXXX");
		if (!mkdtemp(h_dir)) {
			h_dir[0] = 0;
			return "/tmp";
		}
	}
	return h_dir;
}

static void h_register(struct h_proxy *p)
{
	for (int i = 0; i < H_MAX_PROXIES; i++)
		if (!h_live[i]) {
			h_live[i] = p;
			return;
		}
}

static void h_unregister(struct h_proxy *p)
{
	for (int i = 0; i < H_MAX_PROXIES; i++)
		if (h_live[i] == p)
			h_live[i] = NULL;
}

static int h_sockmap; /* the current test runs a sockmap case */

void h_init(void)
{
	signal(SIGPIPE, SIG_IGN);
	h_failed = 0;
	h_sockmap = 0;
	h_nlogs = 0;
	h_slow = 1;
	/* Make sanitizer reports as useful as possible; keep user overrides. */
	setenv("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1", 0);
	setenv("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0", 0);
}

static void h_rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char path[512];
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

void h_fini(void)
{
	for (int i = 0; i < H_MAX_PROXIES; i++) {
		struct h_proxy *p = h_live[i];
		if (!p)
			continue;
		if (p->pid > 0) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &p->status, 0);
			p->pid = 0;
		}
		h_live[i] = NULL;
	}
	if (h_dir[0]) {
		if (h_failed)
			fprintf(stderr, "[integ] kept temp dir %s (proxy logs)\n", h_dir);
		else
			h_rm_tree(h_dir);
	}
}

/* Whether line holds every needle of ap (a NULL-terminated list). */
static int holds_all(const char *line, va_list ap)
{
	const char *needle;
	va_list c;
	int all = 1;

	va_copy(c, ap);
	while (all && (needle = va_arg(c, const char *)))
		all = strstr(line, needle) != NULL;
	va_end(c);
	return all;
}

static int log_count(const struct h_proxy *p, va_list ap)
{
	FILE *f = fopen(p->log, "re");
	char line[4096];
	int n = 0;

	while (f && fgets(line, sizeof line, f))
		n += holds_all(line, ap);
	if (f)
		fclose(f);
	return n;
}

int h_log_lines(const struct h_proxy *p, ...)
{
	va_list ap;
	int n;

	va_start(ap, p);
	n = log_count(p, ap);
	va_end(ap);
	return n;
}

int h_log_lines_wait(const struct h_proxy *p, int wait_ms, ...)
{
	va_list ap;
	int n;

	va_start(ap, wait_ms);
	for (int64_t end = h_now_ms() + wait_ms; !(n = log_count(p, ap)) && h_now_ms() < end;)
		h_sleep_ms(20);
	va_end(ap);
	return n;
}

int h_file_line(const char *path, int wait_ms, char *out, size_t len, ...)
{
	va_list ap;
	int found = 0;

	out[0] = '\0';
	va_start(ap, len);
	for (int64_t end = h_now_ms() + wait_ms; !found; h_sleep_ms(20)) {
		char *text = h_read_file(path, NULL), *save, *line;
		for (line = text ? strtok_r(text, "\n", &save) : NULL; line && !found;
		     line = strtok_r(NULL, "\n", &save))
			if ((found = holds_all(line, ap)))
				snprintf(out, len, "%s", line);
		free(text);
		if (h_now_ms() >= end)
			break;
	}
	va_end(ap);
	return found;
}

void h_kv_value(const char *line, const char *key, char *out, size_t len)
{
	char needle[64];
	const char *at;

	snprintf(needle, sizeof needle, " %s=", key);
	out[0] = '\0';
	if ((at = strstr(line, needle))) {
		at += strlen(needle);
		size_t k = strcspn(at, " ");
		snprintf(out, len, "%.*s", (int)(k < len ? k : len - 1), at);
	}
}

void h_print_tail(const char *path, int lines)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "  (cannot open %s: %s)\n", path, strerror(errno));
		return;
	}
	static char buf[65536];
	off_t size = lseek(fd, 0, SEEK_END);
	off_t start = size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0;
	ssize_t n = pread(fd, buf, sizeof buf - 1, start);
	close(fd);
	if (n <= 0) {
		fprintf(stderr, "  (empty)\n");
		return;
	}
	buf[n] = 0;
	char *p = buf + n;
	if (p > buf && p[-1] == '\n')
		p--;
	int seen = 0;
	while (p > buf) {
		if (p[-1] == '\n' && ++seen >= lines)
			break;
		p--;
	}
	fprintf(stderr, "%s%s", p, buf[n - 1] == '\n' ? "" : "\n");
}

void h_fail_note(const char *file, int line)
{
	h_failed = 1;
	fprintf(stderr, "[integ] check failed at %s:%d\n", file, line);
	for (int i = 0; i < h_nlogs; i++) {
		fprintf(stderr, "[integ] proxy pid %d log %s, last lines:\n", (int)h_log_pids[i],
			h_logs[i]);
		h_print_tail(h_logs[i], 30);
	}
}

/* ---- binaries ------------------------------------------------------------ */

const char *h_binary(int asan)
{
	const char *var = asan ? "SPLICER_ASAN_BIN" : "SPLICER_BIN";
	const char *bin = getenv(var);
	if (!asan && (!bin || !*bin))
		bin = "build/splicer"; /* convenience when run by hand from the repo */
	if (!bin || !*bin || access(bin, X_OK) != 0) {
		if (asan)
			cr_skip_test("%s is %s%s: ASan proxy variant skipped", var,
				     bin && *bin ? bin : "unset",
				     bin && *bin ? " (not executable)" : "");
		H_CHECK(0, "%s is %s (not executable); cannot run integration tests", var,
			bin && *bin ? bin : "unset");
	}
	h_slow = asan ? 3 : 1;
	return bin;
}

/* ---- sockmap -------------------------------------------------------------- */

int h_bpf_capable(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capget, &hdr, data))
		return 0;
#define H_HAS(cap) ((data[(cap) / 32].effective >> ((cap) % 32)) & 1)
	int bpf = (H_HAS(39 /* CAP_BPF */) && H_HAS(38 /* CAP_PERFMON */)) || H_HAS(CAP_SYS_ADMIN);
	return bpf && H_HAS(CAP_NET_ADMIN);
#undef H_HAS
}

void h_sockmap_require(int mode)
{
	if (!h_bpf_capable())
		cr_skip_test("sockmap engine: BPF is not permitted here (this process lacks CAP_BPF with CAP_PERFMON, or "
			     "CAP_SYS_ADMIN, or CAP_NET_ADMIN): the proxy would fall back to splice");
	h_sockmap = mode;
}

/* The first line of p's log containing needle, into out (empty if none). */
static void h_log_find(const struct h_proxy *p, const char *needle, char *out, size_t len)
{
	FILE *f = fopen(p->log, "re");
	char line[4096];
	out[0] = '\0';
	while (f && fgets(line, sizeof line, f))
		if (strstr(line, needle)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(out, len, "%.*s", (int)len - 1, line);
			break;
		}
	if (f)
		fclose(f);
}

static void h_sockmap_check_up(const struct h_proxy *p)
{
	char line[1024];
	h_log_find(p, "sockmap engine unavailable", line, sizeof line);
	if (line[0])
		cr_skip_test("sockmap engine: the kernel refused BPF, the proxy said: %s", line);
	H_CHECK(h_log_lines(p, "sockmap engine (experimental): BPF program loaded", NULL) == 1,
		"the proxy did not log that the sockmap program was loaded (log %s)", p->log);
}

static void h_sockmap_check_down(const struct h_proxy *p)
{
	char line[2048];
	const char *at;
	h_log_find(p, "stopped: sessions", line, sizeof line);
	at = strstr(line, " sockmap ");
	if (h_sockmap == 2 && at && strtoull(at + 9, NULL, 10) == 0) {
		const char *fb = strstr(line, "sockmap sessions ");
		fb = fb ? strstr(fb, "fallbacks ") : NULL;
		H_CHECK(fb && strtoull(fb + 10, NULL, 10) > 0,
			"no byte moved through the sockmap and no fallback was counted (exit line: "
			"\"%s\"; log %s)", line, p->log);
		return;
	}
	H_CHECK(at && strtoull(at + 9, NULL, 10) > 0,
		"no byte moved through the sockmap (exit line: \"%s\"; log %s)", line, p->log);
}

/* ---- addresses ----------------------------------------------------------- */

void h_addr_from(struct h_addr *a, const struct sockaddr *sa, socklen_t len)
{
	memset(a, 0, sizeof *a);
	if (len > sizeof a->ss)
		len = sizeof a->ss;
	memcpy(&a->ss, sa, len);
	a->len = len;
	char host[INET6_ADDRSTRLEN];
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		snprintf(a->text, sizeof a->text, "%s:%d", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		snprintf(a->text, sizeof a->text, "[%s]:%d", host, ntohs(in6->sin6_port));
	} else if (sa->sa_family == AF_UNIX) {
		const struct sockaddr_un *un = (const void *)sa;
		size_t plen = len > offsetof(struct sockaddr_un, sun_path)
				      ? len - offsetof(struct sockaddr_un, sun_path)
				      : 0;
		if (plen > 0 && un->sun_path[0] == 0)
			snprintf(a->text, sizeof a->text, "unix:@%.*s", (int)plen - 1,
				 un->sun_path + 1);
		else
			snprintf(a->text, sizeof a->text, "unix:%.*s", (int)strnlen(un->sun_path, plen),
				 un->sun_path);
	} else {
		snprintf(a->text, sizeof a->text, "family-%d", sa->sa_family);
	}
}

int h_addr_parse(const char *s, struct h_addr *a)
{
	memset(a, 0, sizeof *a);
	if (!strncmp(s, "unix:", 5)) {
		struct sockaddr_un un = { .sun_family = AF_UNIX };
		const char *path = s + 5;
		size_t n = strlen(path);
		if (n == 0 || n >= sizeof un.sun_path)
			return -1;
		socklen_t len;
		if (path[0] == '@') {
			memcpy(un.sun_path + 1, path + 1, n - 1);
			len = offsetof(struct sockaddr_un, sun_path) + n;
		} else {
			memcpy(un.sun_path, path, n);
			len = offsetof(struct sockaddr_un, sun_path) + n + 1;
		}
		h_addr_from(a, (struct sockaddr *)&un, len);
		return 0;
	}
	char host[128];
	const char *colon;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':' || (size_t)(end - s - 1) >= sizeof host)
			return -1;
		memcpy(host, s + 1, end - s - 1);
		host[end - s - 1] = 0;
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || (size_t)(colon - s) >= sizeof host)
			return -1;
		memcpy(host, s, colon - s);
		host[colon - s] = 0;
		if (!host[0])
			strcpy(host, "127.0.0.1");
	}
	char *endp;
	long port = strtol(colon + 1, &endp, 10);
	if (*endp || endp == colon + 1 || port < 0 || port > 65535)
		return -1;
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &in.sin_addr) == 1) {
		h_addr_from(a, (struct sockaddr *)&in, sizeof in);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6.sin6_addr) == 1) {
		h_addr_from(a, (struct sockaddr *)&in6, sizeof in6);
		return 0;
	}
	if (!strcmp(host, "localhost") || !strcmp(host, "0.0.0.0")) {
		inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
		h_addr_from(a, (struct sockaddr *)&in, sizeof in);
		return 0;
	}
	if (!strcmp(host, "::")) {
		in6.sin6_addr = in6addr_loopback;
		h_addr_from(a, (struct sockaddr *)&in6, sizeof in6);
		return 0;
	}
	return -1;
}

int h_addr_port(const struct h_addr *a)
{
	if (a->ss.ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
	if (a->ss.ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
	return -1;
}

/* ---- child processes ----------------------------------------------------- */

/* Runs in the forked child: only async-signal-safe calls. */
/* h_activate's sockets for the next h_child_exec: moved to 3.., with
 * LISTEN_FDS, LISTEN_PID (the child's own, written in the child) and
 * LISTEN_FDNAMES added to the environment execve gets. */
#define H_ACT_MAX 8
#define H_ACT_HIGH 900 /* parked here while 3.. is cleared */
static int h_act_fds[H_ACT_MAX];
static unsigned h_act_n;
static char h_act_count[32], h_act_pid[32], h_act_names[512];
static char **h_act_env;

void h_activate(const int *fds, unsigned n, const char *names)
{
	extern char **environ;
	size_t k = 0, e = 0;

	h_act_n = n < H_ACT_MAX ? n : H_ACT_MAX;
	memcpy(h_act_fds, fds, h_act_n * sizeof(int));
	snprintf(h_act_count, sizeof h_act_count, "LISTEN_FDS=%u", h_act_n);
	snprintf(h_act_pid, sizeof h_act_pid, "LISTEN_PID=");
	snprintf(h_act_names, sizeof h_act_names, "LISTEN_FDNAMES=%s", names ? names : "");
	while (environ[e])
		e++;
	free(h_act_env);
	h_act_env = calloc(e + 4, sizeof(char *));
	cr_assert(h_act_env, "out of memory");
	for (size_t i = 0; i < e; i++)
		if (strncmp(environ[i], "LISTEN_", 7))
			h_act_env[k++] = environ[i];
	h_act_env[k++] = h_act_count;
	h_act_env[k++] = h_act_pid;
	if (names)
		h_act_env[k++] = h_act_names;
	h_act_env[k] = NULL;
}

/* In the child: the sockets to 3.., and the pid into LISTEN_PID (only
 * async-signal-safe calls). */
static void h_act_child(void)
{
	char digits[16];
	int n = 0;
	long pid = (long)getpid();

	for (unsigned i = 0; i < h_act_n; i++)
		if (dup2(h_act_fds[i], H_ACT_HIGH + (int)i) < 0)
			_exit(127);
	syscall(SYS_close_range, 3u, (unsigned)H_ACT_HIGH - 1, 0u);
	for (unsigned i = 0; i < h_act_n; i++)
		if (dup2(H_ACT_HIGH + (int)i, 3 + (int)i) < 0)
			_exit(127);
	syscall(SYS_close_range, 3u + h_act_n, ~0u, 0u);
	do
		digits[n++] = (char)('0' + pid % 10);
	while ((pid /= 10) && n < 15);
	size_t at = strlen(h_act_pid);
	while (n)
		h_act_pid[at++] = digits[--n];
	h_act_pid[at] = '\0';
}

void h_child_exec(pid_t parent, int in_fd, int out_fd, int err_fd, const char *bin,
			 char *const *argv)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
		_exit(127);
	if (h_act_n)
		h_act_child();
	else
		syscall(SYS_close_range, 3u, ~0u, 0u);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &sa, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (h_act_n)
		execve(bin, argv, h_act_env);
	else
		execv(bin, argv);
	_exit(127);
}

void h_activate_clear(void)
{
	h_act_n = 0;
}

#define H_MAX_ARGS 64

static int h_build_argv(char **argv, const char *bin, const char *const *args)
{
	int n = 0;
	argv[n++] = (char *)bin;
	for (int i = 0; args && args[i]; i++) {
		if (n >= H_MAX_ARGS - 1)
			return -1;
		argv[n++] = (char *)args[i];
	}
	argv[n] = NULL;
	return n;
}

char *h_read_file(const char *path, size_t *lenp)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	if (!buf) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (fd >= 0) {
		for (;;) {
			if (len + 1024 > cap) {
				char *nb = realloc(buf, cap * 2);
				if (!nb)
					break;
				buf = nb;
				cap *= 2;
			}
			ssize_t r = read(fd, buf + len, cap - len - 1);
			if (r <= 0)
				break;
			len += (size_t)r;
		}
		close(fd);
	}
	buf[len] = 0;
	if (lenp)
		*lenp = len;
	return buf;
}

/* Finds the ready line in log text; on success fills p->addr and returns 1. */
static int h_parse_ready(struct h_proxy *p, const char *text)
{
	static const char key[] = "ready: listening on ";
	const char *k = strstr(text, key);
	if (!k)
		return 0;
	const char *s = k + sizeof key - 1;
	while (*s == ' ')
		s++;
	const char *e = s;
	while (*e && *e != ' ' && *e != '\t' && *e != ',' && *e != '\n' && *e != '\r')
		e++;
	if (!*e)
		return 0; /* line not complete yet */
	char addr[160];
	size_t n = (size_t)(e - s);
	if (n == 0 || n >= sizeof addr)
		return -1;
	memcpy(addr, s, n);
	addr[n] = 0;
	const char *ls = k;
	while (ls > text && ls[-1] != '\n')
		ls--;
	const char *le = strchr(k, '\n');
	size_t ll = le ? (size_t)(le - ls) : strlen(ls);
	if (ll >= sizeof p->ready_line)
		ll = sizeof p->ready_line - 1;
	memcpy(p->ready_line, ls, ll);
	p->ready_line[ll] = 0;
	return h_addr_parse(addr, &p->addr) == 0 ? 1 : -1;
}

/* 1 when a proxy started with args says how long its lame duck is: on
 * the command line, or in the config file it is given. */
static int h_names_lameduck(const char *const *args)
{
	for (int i = 0; args && args[i]; i++) {
		if (strstr(args[i], "lameduck"))
			return 1;
		if ((!strcmp(args[i], "-c") || !strcmp(args[i], "--config")) && args[i + 1]) {
			char *text = h_read_file(args[i + 1], NULL);
			int named = text && strstr(text, "lameduck");
			free(text);
			if (named)
				return 1;
		}
	}
	return 0;
}

int h_proxy_start(struct h_proxy *p, const char *bin, const char *const *args, char *err,
		  size_t errlen)
{
	memset(p, 0, sizeof *p);
	/* A proxy with stats on waits its lame duck (3 s by default) after
	 * SIGTERM; h_proxy_down would pay it in every test. Only the tests
	 * of the lame duck itself name it, so the others run without one. */
	const char *with[H_MAX_ARGS];
	int n = 0;
	while (args && args[n])
		n++;
	if (n && n < H_MAX_ARGS - 3 && args[0][0] == '-' && !h_names_lameduck(args)) {
		memcpy(with, args, (size_t)n * sizeof *with);
		with[n++] = "--lameduck";
		with[n++] = "0";
		with[n] = NULL;
		args = with;
	}
	char *argv[H_MAX_ARGS];
	if (h_build_argv(argv, bin, args) < 0) {
		snprintf(err, errlen, "too many arguments");
		return -1;
	}
	snprintf(p->log, sizeof p->log, "%s/proxy-%d.log", h_tmpdir(), ++h_file_seq);
	int logfd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (logfd < 0 || nullfd < 0) {
		snprintf(err, errlen, "open log %s: %s", p->log, strerror(errno));
		if (logfd >= 0)
			close(logfd);
		if (nullfd >= 0)
			close(nullfd);
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0)
		h_child_exec(parent, nullfd, nullfd, logfd, bin, argv);
	close(logfd);
	close(nullfd);
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -1;
	}
	p->pid = pid;
	h_register(p);
	if (h_nlogs < H_MAX_PROXIES) {
		snprintf(h_logs[h_nlogs], sizeof h_logs[0], "%s", p->log);
		h_log_pids[h_nlogs++] = pid;
	}

	int64_t deadline = h_now_ms() + 5000 * (h_slow > 1 ? 2 : 1);
	for (;;) {
		char *text = h_read_file(p->log, NULL);
		int r = text ? h_parse_ready(p, text) : 0;
		free(text);
		if (r == 1)
			return 0;
		if (r < 0) {
			snprintf(err, errlen, "cannot parse the address of the ready line in %s",
				 p->log);
			h_proxy_stop(p, 1000);
			return -1;
		}
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			p->pid = 0;
			p->status = st;
			h_unregister(p);
			snprintf(err, errlen, "proxy exited (%s %d) before ready; log %s",
				 WIFEXITED(st) ? "status" : "signal",
				 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), p->log);
			return -1;
		}
		if (h_now_ms() > deadline) {
			snprintf(err, errlen, "no \"ready: listening on\" line within %d ms; log %s",
				 5000 * (h_slow > 1 ? 2 : 1), p->log);
			kill(pid, SIGKILL);
			waitpid(pid, &p->status, 0);
			p->pid = 0;
			h_unregister(p);
			return -1;
		}
		h_sleep_ms(5);
	}
}

int h_proxy_alive(struct h_proxy *p)
{
	if (p->pid <= 0)
		return 0;
	int st;
	if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
		p->status = st;
		p->pid = 0;
		h_unregister(p);
		return 0;
	}
	return 1;
}

int h_proxy_wait(struct h_proxy *p, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms;
	for (;;) {
		if (!h_proxy_alive(p))
			return p->status;
		if (h_now_ms() > deadline)
			return -1;
		h_sleep_ms(5);
	}
}

int h_proxy_stop(struct h_proxy *p, int timeout_ms)
{
	if (p->pid <= 0)
		return p->status;
	kill(p->pid, SIGTERM);
	int st = h_proxy_wait(p, timeout_ms);
	if (st != -1)
		return st;
	kill(p->pid, SIGKILL);
	waitpid(p->pid, &p->status, 0);
	p->pid = 0;
	h_unregister(p);
	return -1;
}

const char *h_proxy_log_problem(const struct h_proxy *p)
{
	static const char *const needles[] = {
		"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
		"AddressSanitizer:DEADLYSIGNAL", "WARNING: ThreadSanitizer",
	};
	char *text = h_read_file(p->log, NULL);
	const char *found = NULL;
	for (size_t i = 0; text && i < sizeof needles / sizeof needles[0]; i++)
		if (strstr(text, needles[i])) {
			found = needles[i];
			break;
		}
	free(text);
	return found;
}

void h_proxy_up(struct h_proxy *p, const char *bin, const char *engine, const char *listen,
		const char *const *backends, const char *const *extra)
{
	const char *args[H_MAX_ARGS];
	int n = 0;
	args[n++] = "-l";
	args[n++] = listen;
	for (int i = 0; backends && backends[i] && n < H_MAX_ARGS - 24; i++) {
		args[n++] = "-b";
		args[n++] = backends[i];
	}
	args[n++] = "--engine";
	args[n++] = engine;
	int has_workers = 0;
	for (int i = 0; extra && extra[i]; i++)
		if (!strcmp(extra[i], "--workers"))
			has_workers = 1;
	if (!has_workers) {
		args[n++] = "--workers";
		args[n++] = "2";
	}
	for (int i = 0; extra && extra[i] && n < H_MAX_ARGS - 1; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	char err[512];
	int rc = h_proxy_start(p, bin, args, err, sizeof err);
	H_CHECK(rc == 0, "proxy %s (engine %s) did not start: %s", bin, engine, err);
	if (h_sockmap && !strcmp(engine, "sockmap"))
		h_sockmap_check_up(p);
}

void h_proxy_down(struct h_proxy *p)
{
	/* Every session is over by now, so the drain has nothing to wait for. */
	pid_t pid = p->pid;
	int limit = h_slow > 1 ? 10000 : 5000;
	int st = h_proxy_stop(p, limit);
	H_CHECK(st != -1,
		"proxy pid %d did not exit within %d ms of SIGTERM with no session left (killed); "
		"log %s",
		(int)pid, limit, p->log);
	H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"proxy pid %d ended with %s %d after SIGTERM, expected exit status 0; log %s",
		(int)pid, WIFEXITED(st) ? "exit status" : "signal",
		WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), p->log);
	const char *prob = h_proxy_log_problem(p);
	H_CHECK(prob == NULL, "proxy log %s contains a sanitizer report (\"%s\")", p->log, prob);
	if (h_sockmap)
		h_sockmap_check_down(p);
}

long h_rss_kib(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char line[256];
	long kib = -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6)) {
			kib = strtol(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	return kib;
}

static int h_again(int e);

void h_proc_status(pid_t pid, const char *key, char *out, size_t len)
{
	char path[64], line[256];
	FILE *f;

	out[0] = '\0';
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, strlen(key))) {
			const char *v = line + strlen(key);
			v += strspn(v, " \t");
			snprintf(out, len, "%.*s", (int)strcspn(v, "\n"), v);
			break;
		}
	fclose(f);
}

int h_fd_count(pid_t pid)
{
	char path[64];
	int n = 0;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

double h_cpu_seconds(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long ut, st;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the command name, which may itself hold spaces and ')'. */
	char *r = strrchr(buf, ')');
	if (!r || sscanf(r + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int h_stats_addr(const struct h_proxy *p, struct h_addr *out)
{
	char a[160] = "";
	FILE *f = fopen(p->log, "re");

	for (char l[512]; f && fgets(l, sizeof l, f);)
		if (strstr(l, "stats: listening on "))
			sscanf(strstr(l, "stats: listening on ") + 20, "%159s", a);
	if (f)
		fclose(f);
	return a[0] ? h_addr_parse(a, out) : -1;
}

int h_metrics_get(const struct h_addr *stats, char *buf, size_t len, int timeout_ms)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	int64_t deadline = h_now_ms() + timeout_ms;
	int fd = h_connect(stats, timeout_ms < 2000 ? timeout_ms : 2000);

	buf[0] = '\0';
	if (fd < 0)
		return -1;
	if (h_send_all(fd, req, sizeof req - 1, deadline) == 0)
		h_recv_all(fd, buf, len, deadline);
	close(fd);
	return strncmp(buf, "HTTP/1.1 200 ", 13) ? -1 : 0;
}

long long h_metric(const struct h_addr *stats, const char *name)
{
	enum { BODY_MAX = 256 * 1024 };
	long long v = -1;
	char *body = malloc(BODY_MAX);

	if (!body || h_metrics_get(stats, body, BODY_MAX, 2000)) {
		free(body);
		return -1;
	}
	size_t nl = strlen(name);
	for (char *l = body; *l;) {
		if (!strncmp(l, name, nl) && l[nl] == ' ') {
			v = atoll(l + nl + 1);
			break;
		}
		char *nx = strchr(l, '\n');
		if (!nx)
			break;
		l = nx + 1;
	}
	free(body);
	return v;
}

int h_run_capture(const char *bin, const char *const *args, int timeout_ms, char **out,
		  char **errout)
{
	char *argv[H_MAX_ARGS];
	*out = *errout = NULL;
	if (h_build_argv(argv, bin, args) < 0)
		return -1;
	char opath[256], epath[256];
	int seq = ++h_file_seq;
	snprintf(opath, sizeof opath, "%s/cmd-%d.out", h_tmpdir(), seq);
	snprintf(epath, sizeof epath, "%s/cmd-%d.err", h_tmpdir(), seq);
	int ofd = open(opath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int efd = open(epath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (ofd < 0 || efd < 0 || nfd < 0)
		return -1;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0)
		h_child_exec(parent, nfd, ofd, efd, bin, argv);
	close(ofd);
	close(efd);
	close(nfd);
	if (pid < 0)
		return -1;
	int st = -1;
	int64_t deadline = h_now_ms() + timeout_ms;
	for (;;) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		if (h_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			st = -1;
			break;
		}
		h_sleep_ms(5);
	}
	*out = h_read_file(opath, NULL);
	*errout = h_read_file(epath, NULL);
	return st;
}

const char *h_which(const char *name)
{
	static char path[512];
	const char *env = getenv("PATH");
	char *dirs = strdup(env ? env : "/usr/bin:/bin"), *save = NULL;

	path[0] = '\0';
	for (char *d = dirs ? strtok_r(dirs, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
		snprintf(path, sizeof path, "%s/%s", d, name);
		if (access(path, X_OK) == 0)
			break;
		path[0] = '\0';
	}
	free(dirs);
	return path[0] ? path : NULL;
}

/* ---- sockets ------------------------------------------------------------- */

void h_set_timeouts(int fd, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void h_set_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int h_connect(const struct h_addr *a, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms;
	for (;;) {
		int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return -1;
		int rc = connect(fd, (const struct sockaddr *)&a->ss, a->len);
		if (rc < 0 && errno == EAGAIN && a->ss.ss_family == AF_UNIX) {
			/* unix backlog full: retry */
			close(fd);
			if (h_now_ms() > deadline) {
				errno = ETIMEDOUT;
				return -1;
			}
			h_sleep_ms(2);
			continue;
		}
		if (rc < 0 && errno == EINPROGRESS) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			int64_t left = deadline - h_now_ms();
			int pr = poll(&pfd, 1, left > 0 ? (int)left : 0);
			if (pr <= 0) {
				close(fd);
				errno = ETIMEDOUT;
				return -1;
			}
			int soerr = 0;
			socklen_t sl = sizeof soerr;
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
			rc = soerr ? -1 : 0;
			errno = soerr;
		}
		if (rc < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		int fl = fcntl(fd, F_GETFL);
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
		h_set_timeouts(fd, 1000);
		return fd;
	}
}

static int h_again(int e)
{
	return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

int h_send_all(int fd, const void *buf, size_t n, int64_t deadline_ms)
{
	const char *p = buf;
	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
		if (r > 0) {
			p += r;
			n -= (size_t)r;
		} else if (r < 0 && h_again(errno)) {
			if (h_now_ms() > deadline_ms)
				return -ETIMEDOUT;
		} else {
			return r < 0 ? -errno : -EIO;
		}
	}
	return 0;
}

int h_recv_exact(int fd, void *buf, size_t n, int64_t deadline_ms)
{
	char *p = buf;
	while (n) {
		ssize_t r = recv(fd, p, n, 0);
		if (r > 0) {
			p += r;
			n -= (size_t)r;
		} else if (r == 0) {
			return -ENODATA;
		} else if (h_again(errno)) {
			if (h_now_ms() > deadline_ms)
				return -ETIMEDOUT;
		} else {
			return -errno;
		}
	}
	return 0;
}

size_t h_recv_all(int fd, char *buf, size_t cap, int64_t deadline_ms)
{
	size_t got = 0;

	while (got < cap - 1 && h_now_ms() < deadline_ms) {
		ssize_t k = recv(fd, buf + got, cap - 1 - got, 0);
		if (k < 0 && h_again(errno))
			continue; /* the socket's 1 s timeout; the deadline is ours */
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	buf[got] = '\0';
	return got;
}

int h_expect_eof(int fd, int64_t deadline_ms)
{
	char buf[4096];
	for (;;) {
		ssize_t r = recv(fd, buf, sizeof buf, 0);
		if (r == 0)
			return 0;
		if (r > 0)
			return -EPROTO;
		if (!h_again(errno))
			return -errno;
		if (h_now_ms() > deadline_ms)
			return -ETIMEDOUT;
	}
}

int h_refused_open(struct h_refused *r)
{
	memset(r, 0, sizeof *r);
	r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (r->fd < 0)
		return -1;
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = 0 };
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof in;
	if (bind(r->fd, (struct sockaddr *)&in, sizeof in) < 0 ||
	    getsockname(r->fd, (struct sockaddr *)&in, &len) < 0) {
		close(r->fd);
		r->fd = -1;
		return -1;
	}
	r->port = ntohs(in.sin_port);
	snprintf(r->text, sizeof r->text, "127.0.0.1:%d", r->port);
	return 0;
}

void h_refused_close(struct h_refused *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

void h_epoll_arm(int ep, int fd, uint32_t id, uint32_t *cur, uint32_t want)
{
	if (*cur == want)
		return;
	struct epoll_event ev = { .events = want, .data.u32 = id };
	epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
	*cur = want;
}

/* The kernel may hand the same free port to two binds in a row: a test that
 * takes two ports before it listens on either (a route and the one a reload
 * adds) then gets one port twice. The last ports given are not given again. */
#define H_RECENT_PORTS 256

/* 1 when nothing is bound to port on any address right now (a bind to
 * 0.0.0.0 fails for a port some socket holds on any address). */
static int port_free(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	H_CHECK(fd >= 0, "socket: %s", strerror(errno));
	ok = bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0;
	close(fd);
	return ok;
}

/* Below the kernel's ephemeral range (ip_local_port_range, 32768 up by
 * default): a port handed out here is never taken meanwhile by some test's
 * outgoing connection, which the kernel binds to an ephemeral port (with
 * thousands of sessions running in the other shard, a port taken from that
 * range was in use again by the time a proxy or redis bound it: cc11). */
#define H_PORT_LO 20000
#define H_PORT_HI 32000

int h_free_port(void)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static int recent[H_RECENT_PORTS];
	static unsigned next;
	static uint64_t state;
	int port = 0;

	pthread_mutex_lock(&mu);
	if (!state) /* each test process its own sequence: two shards pick apart */
		state = ((uint64_t)getpid() << 32) ^ (uint64_t)h_now_us() ^ 0x9E3779B97F4A7C15ull;
	for (int tries = 0; tries < 256 && !port; tries++) {
		int cand, seen = 0;
		state = state * 6364136223846793005ull + 1442695040888963407ull;
		cand = H_PORT_LO + (int)((state >> 33) % (H_PORT_HI - H_PORT_LO));
		for (unsigned i = 0; i < H_RECENT_PORTS && !seen; i++)
			seen = recent[i] == cand;
		if (!seen && port_free(cand))
			port = cand;
	}
	H_CHECK(port, "no free port in %d-%d", H_PORT_LO, H_PORT_HI);
	recent[next++ % H_RECENT_PORTS] = port;
	pthread_mutex_unlock(&mu);
	return port;
}

int h_ipv6_available(void)
{
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };
	in6.sin6_addr = in6addr_loopback;
	int ok = bind(fd, (struct sockaddr *)&in6, sizeof in6) == 0;
	close(fd);
	return ok;
}

/* ---- data ---------------------------------------------------------------- */

static inline uint64_t h_word(uint64_t seed, uint64_t w)
{
	uint64_t z = seed + (w + 1) * 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void h_gen(uint64_t seed, uint64_t off, void *buf, size_t n)
{
	unsigned char *p = buf;
	while (n && (off & 7)) {
		*p++ = (unsigned char)(h_word(seed, off >> 3) >> (8 * (off & 7)));
		off++;
		n--;
	}
	while (n >= 8) {
		uint64_t w = h_word(seed, off >> 3);
		memcpy(p, &w, 8);
		p += 8;
		off += 8;
		n -= 8;
	}
	if (n) {
		uint64_t w = h_word(seed, off >> 3);
		memcpy(p, &w, n);
	}
}

size_t h_gen_check(uint64_t seed, uint64_t off, const void *buf, size_t n)
{
	unsigned char tmp[8192];
	const unsigned char *p = buf;
	size_t done = 0;
	while (done < n) {
		size_t k = n - done < sizeof tmp ? n - done : sizeof tmp;
		h_gen(seed, off + done, tmp, k);
		if (memcmp(tmp, p + done, k) != 0) {
			for (size_t i = 0; i < k; i++)
				if (tmp[i] != p[done + i])
					return done + i;
		}
		done += k;
	}
	return n;
}

void h_sha_init(struct h_sha *s)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (c)
		EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	s->ctx = c;
}

void h_sha_update(struct h_sha *s, const void *buf, size_t n)
{
	if (s->ctx && n)
		EVP_DigestUpdate(s->ctx, buf, n);
}

void h_sha_final(struct h_sha *s, unsigned char out[32])
{
	unsigned int len = 32;
	memset(out, 0, 32);
	if (s->ctx) {
		EVP_DigestFinal_ex(s->ctx, out, &len);
		EVP_MD_CTX_free(s->ctx);
	}
	s->ctx = NULL;
}

const char *h_hex32(const unsigned char d[32], char out[65])
{
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hx[d[i] >> 4];
		out[2 * i + 1] = hx[d[i] & 15];
	}
	out[64] = 0;
	return out;
}

/* ---- stream transfers ---------------------------------------------------- */

#define H_CHUNK (64 * 1024)

void h_xfer_init(struct h_xfer *x, int fd, uint64_t seed, uint64_t len, int64_t deadline_ms)
{
	memset(x, 0, sizeof *x);
	x->fd = fd;
	x->seed = seed;
	x->len = len;
	x->deadline_ms = deadline_ms;
	x->mismatch_at = -1;
}

void h_xfer_send(struct h_xfer *x)
{
	struct timeval tv = { 1, 0 };
	setsockopt(x->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	unsigned char *buf = malloc(H_CHUNK);
	struct h_sha sha;
	h_sha_init(&sha);
	x->err = buf ? 0 : ENOMEM;
	while (!x->err && x->bytes < x->len) {
		size_t chunk = x->len - x->bytes < H_CHUNK ? (size_t)(x->len - x->bytes) : H_CHUNK;
		h_gen(x->seed, x->bytes, buf, chunk);
		size_t off = 0;
		while (off < chunk) {
			ssize_t r = send(x->fd, buf + off, chunk - off, MSG_NOSIGNAL);
			if (r > 0) {
				h_sha_update(&sha, buf + off, (size_t)r);
				off += (size_t)r;
				x->bytes += (uint64_t)r;
				atomic_store(&x->progress, x->bytes);
			} else if (r < 0 && h_again(errno)) {
				if (h_now_ms() > x->deadline_ms) {
					x->err = ETIMEDOUT;
					break;
				}
			} else {
				x->err = r < 0 ? errno : EIO;
				break;
			}
		}
	}
	if (!x->err && x->shut_wr && shutdown(x->fd, SHUT_WR) < 0)
		x->err = errno;
	h_sha_final(&sha, x->sha);
	free(buf);
	x->t_end_us = h_now_us();
}

void h_xfer_recv(struct h_xfer *x)
{
	struct timeval tv = { 1, 0 };
	setsockopt(x->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	unsigned char *buf = malloc(H_CHUNK);
	struct h_sha sha;
	h_sha_init(&sha);
	size_t paced = 0;
	x->err = buf ? 0 : ENOMEM;
	while (!x->err) {
		size_t want = H_CHUNK;
		if (x->pace_bytes && x->pace_bytes - paced < want)
			want = x->pace_bytes - paced;
		ssize_t r = recv(x->fd, buf, want, 0);
		if (r > 0) {
			h_sha_update(&sha, buf, (size_t)r);
			size_t bad = (size_t)r;
			if (x->verify && x->mismatch_at < 0) {
				bad = h_gen_check(x->seed, x->bytes, buf, (size_t)r);
				if (bad < (size_t)r)
					x->mismatch_at = (int64_t)(x->bytes + bad);
			} else if (x->mismatch_at >= 0) {
				bad = 0;
			}
			while (bad < (size_t)r && x->nbad < sizeof x->bad)
				x->bad[x->nbad++] = buf[bad++];
			x->bytes += (uint64_t)r;
			atomic_store(&x->progress, x->bytes);
			if (x->pace_bytes) {
				paced += (size_t)r;
				if (paced >= x->pace_bytes) {
					paced = 0;
					h_sleep_ms(x->pace_ms);
				}
			}
		} else if (r == 0) {
			x->eof = 1;
			break;
		} else if (h_again(errno)) {
			if (h_now_ms() > x->deadline_ms)
				x->err = ETIMEDOUT;
		} else {
			x->err = errno;
		}
	}
	h_sha_final(&sha, x->sha);
	free(buf);
	x->t_end_us = h_now_us();
}

static void *h_send_main(void *arg)
{
	h_xfer_send(arg);
	return NULL;
}

static void *h_recv_main(void *arg)
{
	h_xfer_recv(arg);
	return NULL;
}

int h_xfer_start_send(struct h_xfer *x)
{
	x->started = pthread_create(&x->thr, NULL, h_send_main, x) == 0;
	return x->started ? 0 : -1;
}

int h_xfer_start_recv(struct h_xfer *x)
{
	x->started = pthread_create(&x->thr, NULL, h_recv_main, x) == 0;
	return x->started ? 0 : -1;
}

int h_xfer_join(struct h_xfer *x, int grace_ms)
{
	if (!x->started)
		return 0;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t wait_ms = x->deadline_ms - h_now_ms() + grace_ms;
	if (wait_ms < grace_ms)
		wait_ms = grace_ms;
	ts.tv_sec += wait_ms / 1000;
	ts.tv_nsec += (wait_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	if (pthread_timedjoin_np(x->thr, NULL, &ts) != 0)
		return -1;
	x->started = 0;
	return 0;
}

/* Where in the sent stream the bytes received at rx->mismatch_at came from,
 * searched within 64 MiB either side, so a failure tells a repeat from a
 * skip from garbage: each 8-byte word of the stream is a hash of its index,
 * so one aligned word found is a position. */
static void h_locate_mismatch(const struct h_xfer *rx, char *out, size_t len)
{
	const int64_t window = 64 * H_MIB;
	int64_t at = rx->mismatch_at;
	snprintf(out, len, "bytes found nowhere within 64 MiB of there");
	for (unsigned r = 0; r + 16 <= rx->nbad && r < 8; r++) {
		uint64_t w, w2;
		memcpy(&w, rx->bad + r, 8);
		memcpy(&w2, rx->bad + r + 8, 8);
		int64_t lo = (at + r - window) / 8, hi = (at + r + window) / 8;
		for (int64_t i = lo < 0 ? 0 : lo; i < hi; i++) {
			if (h_word(rx->seed, (uint64_t)i) != w || h_word(rx->seed, (uint64_t)i + 1) != w2)
				continue;
			int64_t src = i * 8 - r, d = src - at;
			snprintf(out, len, "they are the sent stream's bytes from offset %lld: %lld bytes %s",
				 (long long)src, (long long)(d < 0 ? -d : d),
				 d < 0 ? "repeated" : "skipped");
			return;
		}
	}
}

void h_check_stream(const char *what, const struct h_xfer *tx, const struct h_xfer *rx,
		    uint64_t len)
{
	char a[65], b[65], where[160] = "";
	if (rx->mismatch_at >= 0)
		h_locate_mismatch(rx, where, sizeof where);
	H_CHECK(tx->err == 0, "%s: sender failed after %llu of %llu bytes: %s", what,
		(unsigned long long)tx->bytes, (unsigned long long)len, strerror(tx->err));
	H_CHECK(tx->bytes == len, "%s: sender sent %llu bytes, expected %llu", what,
		(unsigned long long)tx->bytes, (unsigned long long)len);
	H_CHECK(rx->err == 0, "%s: receiver failed after %llu of %llu bytes: %s%s", what,
		(unsigned long long)rx->bytes, (unsigned long long)len, strerror(rx->err),
		rx->err == ETIMEDOUT ? " (deadline passed: stalled transfer)" : "");
	H_CHECK(rx->mismatch_at < 0,
		"%s: received data differs from the sent stream at offset %lld (%s)", what,
		(long long)rx->mismatch_at, where);
	H_CHECK(rx->bytes == len, "%s: receiver got %llu bytes, expected exactly %llu", what,
		(unsigned long long)rx->bytes, (unsigned long long)len);
	H_CHECK(rx->eof, "%s: receiver did not see EOF after the data", what);
	H_CHECK(memcmp(tx->sha, rx->sha, 32) == 0, "%s: SHA-256 differs: sent %s, received %s",
		what, h_hex32(tx->sha, a), h_hex32(rx->sha, b));
}

/* ---- helper backends ----------------------------------------------------- */

struct h_conn_start {
	struct h_server *s;
	int index;
	int fd;
};

static void *h_conn_main(void *arg)
{
	struct h_conn_start cs = *(struct h_conn_start *)arg;
	free(arg);
	cs.s->fn(cs.s, cs.fd, cs.index, cs.s->arg);
	pthread_mutex_lock(&cs.s->mu);
	close(cs.fd);
	cs.s->conn_fd[cs.index] = -1;
	pthread_mutex_unlock(&cs.s->mu);
	atomic_fetch_add(&cs.s->done, 1);
	return NULL;
}

static void *h_accept_main(void *arg)
{
	struct h_server *s = arg;
	for (;;) {
		struct pollfd pfd[2] = { { .fd = s->lfd, .events = POLLIN },
					 { .fd = s->stop_fd, .events = POLLIN } };
		int pr = poll(pfd, 2, 1000);
		if (pr < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (!(pfd[0].revents & POLLIN))
			continue;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		h_set_timeouts(fd, 1000);
		atomic_fetch_add(&s->accepted, 1);
		pthread_mutex_lock(&s->mu);
		if (s->nconn >= H_SERVER_MAX_CONNS) {
			pthread_mutex_unlock(&s->mu);
			atomic_fetch_add(&s->dropped, 1);
			close(fd);
			continue;
		}
		int idx = s->nconn;
		struct h_conn_start *cs = malloc(sizeof *cs);
		if (!cs) {
			pthread_mutex_unlock(&s->mu);
			close(fd);
			continue;
		}
		cs->s = s;
		cs->index = idx;
		cs->fd = fd;
		s->conn_fd[idx] = fd;
		if (pthread_create(&s->conn_thr[idx], NULL, h_conn_main, cs) != 0) {
			s->conn_fd[idx] = -1;
			pthread_mutex_unlock(&s->mu);
			free(cs);
			close(fd);
			atomic_fetch_add(&s->dropped, 1);
			continue;
		}
		s->nconn++;
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

int h_server_start(struct h_server *s, const char *where, int backlog, h_conn_fn fn, void *arg)
{
	memset(s, 0, sizeof *s);
	s->lfd = s->stop_fd = -1;
	struct h_addr a;
	if (h_addr_parse(where, &a) < 0)
		return -EINVAL;
	s->lfd = socket(a.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0)
		return -errno;
	if (a.ss.ss_family == AF_UNIX) {
		const struct sockaddr_un *un = (const void *)&a.ss;
		if (un->sun_path[0]) {
			snprintf(s->unix_path, sizeof s->unix_path, "%s", un->sun_path);
			unlink(s->unix_path);
		}
	} else {
		int one = 1;
		setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (bind(s->lfd, (struct sockaddr *)&a.ss, a.len) < 0 || listen(s->lfd, backlog) < 0 ||
	    getsockname(s->lfd, (struct sockaddr *)&ss, &sl) < 0) {
		int e = errno;
		close(s->lfd);
		s->lfd = -1;
		return -e;
	}
	if (a.ss.ss_family == AF_UNIX)
		s->addr = a; /* getsockname of a unix socket is the same path */
	else
		h_addr_from(&s->addr, (struct sockaddr *)&ss, sl);
	s->stop_fd = eventfd(0, EFD_CLOEXEC);
	pthread_mutex_init(&s->mu, NULL);
	for (int i = 0; i < H_SERVER_MAX_CONNS; i++)
		s->conn_fd[i] = -1;
	s->fn = fn;
	s->arg = arg;
	if (s->stop_fd < 0 || pthread_create(&s->acc, NULL, h_accept_main, s) != 0) {
		close(s->lfd);
		s->lfd = -1;
		return -ENOMEM;
	}
	s->running = 1;
	return 0;
}

void h_server_stop(struct h_server *s)
{
	if (!s->running)
		return;
	uint64_t one = 1;
	if (write(s->stop_fd, &one, sizeof one) < 0) {
		/* cannot happen with an eventfd; the poll timeout still ends the loop */
	}
	pthread_join(s->acc, NULL);
	close(s->lfd);
	s->lfd = -1;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < s->nconn; i++)
		if (s->conn_fd[i] >= 0)
			shutdown(s->conn_fd[i], SHUT_RDWR);
	int n = s->nconn;
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < n; i++)
		pthread_join(s->conn_thr[i], NULL);
	close(s->stop_fd);
	s->stop_fd = -1;
	if (s->unix_path[0])
		unlink(s->unix_path);
	pthread_mutex_destroy(&s->mu);
	s->running = 0;
}

int h_server_wait_done(struct h_server *s, int n, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms;
	while (atomic_load(&s->done) < n) {
		if (h_now_ms() > deadline)
			return -1;
		h_sleep_ms(2);
	}
	return 0;
}

void h_echo_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	(void)arg;
	unsigned char *buf = malloc(H_CHUNK);
	if (!buf)
		return;
	int64_t idle_deadline = h_now_ms() + 30000;
	for (;;) {
		ssize_t r = recv(fd, buf, H_CHUNK, 0);
		if (r > 0) {
			idle_deadline = h_now_ms() + 30000;
			if (h_send_all(fd, buf, (size_t)r, h_now_ms() + 30000) < 0)
				break;
		} else if (r == 0) {
			shutdown(fd, SHUT_WR);
			break;
		} else if (!h_again(errno) || h_now_ms() > idle_deadline) {
			break;
		}
	}
	free(buf);
}

void h_echo_rounds(int fd, uint64_t seed, int from, int n, int timeout_ms)
{
	char buf[64];

	for (int i = from; i < from + n; i++) {
		h_gen(seed, (uint64_t)i * 64, buf, 64);
		H_CHECK(h_send_all(fd, buf, 64, h_now_ms() + timeout_ms) == 0 &&
				h_recv_exact(fd, buf, 64, h_now_ms() + timeout_ms) == 0 &&
				h_gen_check(seed, (uint64_t)i * 64, buf, 64) == 64,
			"round trip %d", i);
	}
}

int h_echo_roundtrip(const struct h_addr *addr, size_t n, uint64_t seed, int timeout_ms,
		     char *why, size_t whylen)
{
	if (n > H_CHUNK)
		n = H_CHUNK;
	unsigned char *out = malloc(2 * H_CHUNK), *in = out + H_CHUNK;
	if (!out) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	int64_t deadline = h_now_ms() + timeout_ms;
	int fd = h_connect(addr, timeout_ms);
	if (fd < 0) {
		int e = errno;
		snprintf(why, whylen, "connect to %s: %s", addr->text, strerror(e));
		free(out);
		return -e;
	}
	h_set_nodelay(fd);
	h_gen(seed, 0, out, n);
	int rc = h_send_all(fd, out, n, deadline);
	if (rc < 0) {
		snprintf(why, whylen, "send %zu bytes: %s", n, strerror(-rc));
		goto out;
	}
	rc = h_recv_exact(fd, in, n, deadline);
	if (rc < 0) {
		snprintf(why, whylen, "receiving the %zu-byte echo: %s", n,
			 rc == -ENODATA ? "EOF before all bytes" : strerror(-rc));
		goto out;
	}
	if (memcmp(in, out, n) != 0) {
		snprintf(why, whylen, "echo differs from the request");
		rc = -EPROTO;
		goto out;
	}
	shutdown(fd, SHUT_WR);
	rc = h_expect_eof(fd, deadline);
	if (rc < 0)
		snprintf(why, whylen, "after shutdown(SHUT_WR), expected EOF: %s",
			 rc == -EPROTO ? "got extra data" : strerror(-rc));
out:
	close(fd);
	free(out);
	return rc;
}

/* ---- tag servers ---------------------------------------------------------- */

static void *h_tag_loop(void *arg)
{
	struct h_tag_server *t = arg;

	while (!atomic_load(&t->stop)) {
		struct pollfd pfd[65] = { { .fd = t->lfd, .events = POLLIN } };
		for (int i = 0; i < t->nheld; i++)
			pfd[i + 1] = (struct pollfd){ .fd = t->held[i], .events = POLLIN };
		if (poll(pfd, (nfds_t)t->nheld + 1, 50) <= 0)
			continue;
		/* a held session ends when its client side closes (EOF) */
		for (int i = t->nheld - 1; i >= 0; i--) {
			char c;
			if (pfd[i + 1].revents && read(t->held[i], &c, 1) <= 0) {
				close(t->held[i]);
				t->held[i] = t->held[--t->nheld];
			}
		}
		if (!pfd[0].revents)
			continue;
		int fd = accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		atomic_fetch_add(&t->accepted, 1);
		if (write(fd, &t->tag, 1) != 1) {
			/* the client left already; it counts as accepted */
		}
		if (t->hold && t->nheld < 64)
			t->held[t->nheld++] = fd;
		else
			close(fd);
	}
	for (int i = 0; i < t->nheld; i++)
		close(t->held[i]);
	return NULL;
}

void h_tag_start(struct h_tag_server *t, char tag, int hold, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				   .sin_port = htons((uint16_t)port) };
	socklen_t len = sizeof sin;
	int one = 1;

	memset(t, 0, sizeof *t);
	t->tag = tag;
	t->hold = hold;
	t->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(t->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	H_CHECK(t->lfd >= 0 && bind(t->lfd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
			listen(t->lfd, 1024) == 0 &&
			getsockname(t->lfd, (struct sockaddr *)&sin, &len) == 0,
		"tag server %c: %s", tag, strerror(errno));
	t->port = ntohs(sin.sin_port);
	H_CHECK(pthread_create(&t->thr, NULL, h_tag_loop, t) == 0, "tag server thread");
}

void h_tag_stop(struct h_tag_server *t)
{
	atomic_store(&t->stop, 1);
	pthread_join(t->thr, NULL);
	close(t->lfd);
}

char h_tag_of(const struct h_addr *a, int *keep)
{
	char c = 0;
	int fd = h_connect(a, 2000);

	if (keep)
		*keep = fd;
	if (fd < 0)
		return 0;
	if (h_recv_exact(fd, &c, 1, h_now_ms() + 2000))
		c = 0;
	if (!keep)
		close(fd);
	return c;
}

const char *h_conf_write(const char *name, const char *text)
{
	static char path[8][300];
	static int next;
	char *p = path[next++ % 8];
	FILE *f;

	snprintf(p, sizeof path[0], "%s/%s", h_tmpdir(), name);
	f = fopen(p, "we");
	H_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", p);
	return p;
}

int h_port_listening(int port)
{
	char want[48], line[256];
	FILE *f = fopen("/proc/net/tcp", "re");
	int found = 0;

	snprintf(want, sizeof want, ": 0100007F:%04X 00000000:0000 0A ", port);
	while (f && !found && fgets(line, sizeof line, f))
		found = strstr(line, want) != NULL;
	if (f)
		fclose(f);
	return found;
}

int h_admin_connect(const char *path)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	H_CHECK(strlen(path) < sizeof un.sun_path, "admin socket path too long: %s", path);
	memcpy(un.sun_path, path, strlen(path) + 1);
	H_CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&un, sizeof un) == 0, "admin socket %s: %s",
		path, strerror(errno));
	h_set_timeouts(fd, 1000);
	return fd;
}

const char *h_admin_cmd(int fd, const char *line, char *ans, size_t cap)
{
	h_admin_try(fd, line, ans, cap);
	H_CHECK(strncmp(ans, "error", 5), "admin: '%s': %s", line, ans);
	return ans;
}

const char *h_admin_try(int fd, const char *line, char *ans, size_t cap)
{
	int64_t deadline = h_now_ms() + 25000; /* a ctl backend add waits for a swap */
	size_t n = 0;

	H_CHECK(h_send_all(fd, line, strlen(line), deadline) == 0 &&
			h_send_all(fd, "\n", 1, deadline) == 0, "admin: send '%s'", line);
	while (n < 2 || ans[n - 1] != '\n' || ans[n - 2] != '\n') {
		ssize_t r = recv(fd, ans + n, cap - 1 - n, 0);
		H_CHECK(r > 0 || (r < 0 && h_again(errno) && h_now_ms() < deadline),
			"admin: '%s': no whole answer (%s after %zu bytes)", line,
			r < 0 ? strerror(errno) : "closed", n);
		if (r > 0)
			n += (size_t)r;
		H_CHECK(n < cap - 1, "admin: '%s': an answer over %zu bytes", line, cap);
	}
	ans[n] = '\0';
	return ans;
}

int h_connect_from(int port, const char *src, int timeout_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET };

	H_CHECK(fd >= 0 && inet_pton(AF_INET, src, &sin.sin_addr) == 1, "socket, or source %s", src);
	inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
	dst.sin_port = htons((uint16_t)port);
	H_CHECK(bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0, "bind %s: %s", src, strerror(errno));
	h_set_timeouts(fd, timeout_ms);
	H_CHECK(connect(fd, (struct sockaddr *)&dst, sizeof dst) == 0, "connect from %s: %s", src,
		strerror(errno));
	return fd;
}
