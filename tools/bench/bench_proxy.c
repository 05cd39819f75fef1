/* SPDX-License-Identifier: MIT */
/* bench_proxy: see bench_proxy.h. */
#define _GNU_SOURCE
#include "bench_proxy.h"
#include "bpf_sockmap.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int bench_on_path(const char *prog, char *out, size_t len)
{
	const char *dirs[] = { "/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/sbin", "/bin" };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
		snprintf(out, len, "%s/%s", dirs[i], prog);
		if (access(out, X_OK) == 0)
			return 1;
	}
	return 0;
}

/* bench/ beside the binary (build tree), or the installed copy. */
static int template_path(const char *name, char *out, size_t len)
{
	char self[3072], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	const char *env = getenv("SPLICER_BENCH_DIR");

	if (env) {
		snprintf(out, len, "%s/%s", env, name);
		if (access(out, R_OK) == 0)
			return 1;
	}
	snprintf(out, len, "bench/%s", name); /* run from a source tree */
	if (access(out, R_OK) == 0)
		return 1;
	if (n > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/')))
			*slash = '\0';
		snprintf(out, len, "%s/../bench/%s", self, name);
		if (access(out, R_OK) == 0)
			return 1;
		snprintf(out, len, "%s/../share/splicer/bench/%s", self, name);
		if (access(out, R_OK) == 0)
			return 1;
	}
	return 0;
}

/* The case's "conf:NAME" template, or NULL. */
static const char *case_conf(const struct bench_case *c)
{
	for (int i = 0; c->opts[i]; i++)
		if (!strncmp(c->opts[i], "conf:", 5))
			return c->opts[i] + 5;
	return NULL;
}

const char *bench_case_unavailable(const struct bench_case *c)
{
	const char *conf = case_conf(c);

	static char why[300];
	char path[4096];

	switch (c->kind) {
	case PX_HAPROXY:
		if (!bench_on_path("haproxy", path, sizeof(path)))
			return "haproxy not installed (make bench-deps)";
		if (!template_path(conf ? conf : "haproxy.cfg", path, sizeof(path))) {
			snprintf(why, sizeof(why), "bench/%s not found", conf ? conf : "haproxy.cfg");
			return why;
		}
		return NULL;
	case PX_NGINX:
		if (!bench_on_path("nginx", path, sizeof(path)))
			return "nginx not installed (make bench-deps)";
		if (access("/usr/lib/nginx/modules/ngx_stream_module.so", R_OK))
			return "nginx stream module missing (libnginx-mod-stream)";
		if (!template_path("nginx.conf", path, sizeof(path)))
			return "bench/nginx.conf not found";
		return NULL;
	case PX_SOCAT:
		return bench_on_path("socat", path, sizeof(path)) ? NULL : "socat not installed (make bench-deps)";
	case PX_SPLICER:
		if (conf && !template_path(conf, path, sizeof(path))) {
			snprintf(why, sizeof(why), "bench/%s not found", conf);
			return why;
		}
		for (int i = 0; c->opts[i]; i++)
			if (!strcmp(c->opts[i], "sockmap") && sm_probe_load(why, sizeof(why)))
				return why; /* else the row would measure splice under its name */
		return NULL;
	default:
		return NULL;
	}
}

/* A port below the kernel's ephemeral range (ip_local_port_range starts at
 * 32768 by default) and apart from the test harness's (20000-32000): a port
 * from bind(0) is ephemeral, and between this check and the proxy's (or the
 * TLS server's, rebound for each row) bind, an outgoing connection of
 * anything else on the machine may take it as its local port, or another
 * bench's proxy may draw it and share it through SO_REUSEPORT. Each process
 * draws its own pseudo-random sequence and skips what it handed out lately. */
#define BENCH_PORT_LO 12000
#define BENCH_PORT_HI 20000
#define BENCH_RECENT  64

static int port_bindable(const char *host, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0)
		return -1;
	ok = inet_pton(AF_INET, host, &sin.sin_addr) == 1 && !bind(fd, (struct sockaddr *)&sin, sizeof(sin));
	close(fd);
	return ok;
}

int bench_free_port(const char *host)
{
	static int recent[BENCH_RECENT];
	static unsigned next;
	static uint64_t state;
	struct timespec ts;

	if (!state) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		state = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ 0x9E3779B97F4A7C15ull;
	}
	for (int tries = 0; tries < 512; tries++) {
		int cand, seen = 0, ok;

		state = state * 6364136223846793005ull + 1442695040888963407ull;
		cand = BENCH_PORT_LO + (int)((state >> 33) % (BENCH_PORT_HI - BENCH_PORT_LO));
		for (unsigned i = 0; i < BENCH_RECENT && !seen; i++)
			seen = recent[i] == cand;
		if (seen)
			continue;
		if ((ok = port_bindable(host, cand)) < 0)
			return -1;
		if (ok) {
			recent[next++ % BENCH_RECENT] = cand;
			return cand;
		}
	}
	errno = EADDRINUSE;
	return -1;
}

/* Copies a template with @KEY@ fields replaced. */
static int fill_template(const char *tmpl, const char *out, const char *const *kv)
{
	char line[4096];
	FILE *in = fopen(tmpl, "re"), *o = fopen(out, "we");
	int r = in && o ? 0 : -1;

	while (!r && fgets(line, sizeof(line), in)) {
		char *p = line;
		for (;;) {
			char *at = strchr(p, '@');
			int done = 0;
			if (!at) {
				fputs(p, o);
				break;
			}
			fwrite(p, 1, (size_t)(at - p), o);
			for (int i = 0; kv[i]; i += 2) {
				size_t k = strlen(kv[i]);
				if (!strncmp(at + 1, kv[i], k) && at[1 + k] == '@') {
					fputs(kv[i + 1], o);
					p = at + k + 2;
					done = 1;
					break;
				}
			}
			if (!done) {
				fputc('@', o);
				p = at + 1;
			}
		}
	}
	if (in)
		fclose(in);
	if (o && fclose(o))
		r = -1;
	return r;
}

static pid_t spawn(const char *const *argv, const char *logpath)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		sigset_t all;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		signal(SIGPIPE, SIG_DFL);
		dup2(null, STDIN_FILENO);
		dup2(fd >= 0 ? fd : null, STDOUT_FILENO);
		dup2(fd >= 0 ? fd : null, STDERR_FILENO);
		setpgid(0, 0); /* its own group: stop reaches forked children too */
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Waits until something accepts on the address (the proxy is up). */
/* The line of a proxy's log that says why it failed: its first alert or
 * error, else its last line; the log itself goes with the temp dir. */
static void log_reason(const char *logpath, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen(logpath, "re");

	out[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (!line[0])
			continue;
		snprintf(out, len, "%s", line);
		if (strstr(line, "ALERT") || strstr(line, "[emerg]") || strstr(line, "rror"))
			break;
	}
	fclose(f);
}

static int wait_accepting(const struct sockaddr *sa, socklen_t len, pid_t pid, int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && connect(fd, sa, len) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			return 0;
		if (pid > 0 && waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		usleep(10000);
	}
	return -1;
}

int bench_proxy_start(struct bench_proxy *p, const struct bench_case *c, const char *backend,
		      const char *host, unsigned threads, char *err, unsigned errlen)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&p->ss;
	struct sockaddr_in *sin2 = (struct sockaddr_in *)&p->ss2;
	char exe[4096], listen[64], listen2[64], conf[160], logp[160], tmpl[4096], thr[16], opts[512] = "";
	const char *tname = case_conf(c);
	const char *argv[32];
	int n = 0, port, port2;

	memset(p, 0, sizeof(*p));
	if (c->kind == PX_DIRECT) {
		const char *colon = strrchr(backend, ':');
		char bhost[64];
		snprintf(bhost, sizeof(bhost), "%.*s", colon ? (int)(colon - backend) : 0, backend);
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)(colon ? atoi(colon + 1) : 0));
		p->len = sizeof(*sin);
		if (!colon || inet_pton(AF_INET, bhost, &sin->sin_addr) != 1) {
			snprintf(err, errlen, "direct: bad sink address %s", backend);
			return -1;
		}
		return 0;
	}
	snprintf(p->dir, sizeof(p->dir), "/tmp/splicer-bench-XXXXXX");
	/* port2: a template's second listener (bench_free_port never hands out
	 * the same port twice in a row) */
	if (!mkdtemp(p->dir) || (port = bench_free_port(host)) < 0 || (port2 = bench_free_port(host)) < 0) {
		snprintf(err, errlen, "temp dir or port: %s", strerror(errno));
		return -1;
	}
	snprintf(listen, sizeof(listen), "%s:%d", host, port);
	snprintf(listen2, sizeof(listen2), "%s:%d", host, port2);
	snprintf(logp, sizeof(logp), "%s/proxy.log", p->dir);
	snprintf(thr, sizeof(thr), "%u", threads);
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, host, &sin->sin_addr);
	p->len = sizeof(*sin);
	*sin2 = *sin;
	sin2->sin_port = htons((uint16_t)port2);
	p->len2 = tname ? sizeof(*sin2) : 0;

	switch (c->kind) {
	case PX_SPLICER: {
		/* this binary through a link to /proc/PID/exe (or a baseline's
		 * through /proc/PID/fd/N): the proxy is the
		 * bench's own build even when the file was rebuilt (replaced)
		 * during a run, and is still named splicer (ps, top, perf) */
		snprintf(exe, sizeof(exe), "%s/splicer", p->dir);
		snprintf(tmpl, sizeof(tmpl), "/proc/%d/exe", (int)getpid());
		if (c->exe) /* a baseline's binary, held open by the bench */
			snprintf(tmpl, sizeof(tmpl), "%s", c->exe);
		if (symlink(tmpl, exe)) {
			snprintf(err, errlen, "%s: symlink %s: %s", c->name, exe, strerror(errno));
			return -1;
		}
		argv[n++] = exe;
		if (tname) {
			const char *kv[] = { "LISTEN", listen, "LISTEN2", listen2, "BACKEND", backend,
					     "THREADS", thr, "DIR", p->dir, NULL };
			snprintf(conf, sizeof(conf), "%s/splicer.conf", p->dir);
			if (!template_path(tname, tmpl, sizeof(tmpl)) || fill_template(tmpl, conf, kv))
				goto tmpl_fail;
			argv[n++] = "-c";
			argv[n++] = conf;
		} else {
			argv[n++] = "-l";
			argv[n++] = listen;
			argv[n++] = "-b";
			argv[n++] = backend;
		}
		argv[n++] = "--workers";
		argv[n++] = thr;
		for (int i = 0; c->opts[i]; i++)
			if (strncmp(c->opts[i], "conf:", 5))
				argv[n++] = c->opts[i];
		break;
	}
	case PX_HAPROXY: {
		/* "global:LINE" goes into the global section, the rest into defaults */
		char glob[256] = "";
		for (int i = 0; c->opts[i]; i++) {
			int g = !strncmp(c->opts[i], "global:", 7);
			if (!strncmp(c->opts[i], "conf:", 5))
				continue;
			char *buf = g ? glob : opts;
			size_t size = g ? sizeof(glob) : sizeof(opts);
			snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? "\n    " : "",
				 c->opts[i] + (g ? 7 : 0));
		}
		const char *kv[] = { "LISTEN", listen, "LISTEN2", listen2, "BACKEND", backend,
				     "THREADS", thr, "DIR", p->dir, "OPTIONS", opts, "GLOBAL", glob, NULL };
		snprintf(conf, sizeof(conf), "%s/haproxy.cfg", p->dir);
		if (!template_path(tname ? tname : "haproxy.cfg", tmpl, sizeof(tmpl)) ||
		    fill_template(tmpl, conf, kv))
			goto tmpl_fail;
		bench_on_path("haproxy", exe, sizeof(exe));
		argv[n++] = exe;
		argv[n++] = "-f";
		argv[n++] = conf;
		argv[n++] = "-db";
		break;
	}
	case PX_NGINX: {
		/* a "conf:NAME" template (bench_pacing's nginx-rate.conf) takes
		 * the case's first other option as @OPT@ */
		const char *opt = "";
		for (int i = 0; c->opts[i] && !opt[0]; i++)
			if (strncmp(c->opts[i], "conf:", 5))
				opt = c->opts[i];
		const char *kv[] = { "LISTEN", listen, "BACKEND", backend, "THREADS", thr,
				     "DIR", p->dir, "OPT", opt, NULL };
		snprintf(conf, sizeof(conf), "%s/nginx.conf", p->dir);
		if (!template_path(tname ? tname : "nginx.conf", tmpl, sizeof(tmpl)) ||
		    fill_template(tmpl, conf, kv))
			goto tmpl_fail;
		bench_on_path("nginx", exe, sizeof(exe));
		argv[n++] = exe;
		argv[n++] = "-p";
		argv[n++] = p->dir;
		argv[n++] = "-e";
		argv[n++] = logp;
		argv[n++] = "-c";
		argv[n++] = conf;
		break;
	}
	case PX_SOCAT: {
		static char a1[96], a2[96];
		snprintf(a1, sizeof(a1), "TCP-LISTEN:%d,bind=%s,reuseaddr,fork,backlog=4096", port, host);
		snprintf(a2, sizeof(a2), "TCP:%s,nodelay", backend);
		bench_on_path("socat", exe, sizeof(exe));
		argv[n++] = exe;
		argv[n++] = a1;
		argv[n++] = a2;
		break;
	}
	default:
		break;
	}
	argv[n] = NULL;
	p->pid = spawn(argv, logp);
	if (p->pid < 0 || wait_accepting((struct sockaddr *)&p->ss, p->len, p->pid, 10000)) {
		char why[512];
		log_reason(logp, why, sizeof(why));
		snprintf(err, errlen, "%s did not start accepting: %s", c->name,
			 why[0] ? why : "(its log is empty)");
		bench_proxy_stop(p);
		return -1;
	}
	return 0;
tmpl_fail:
	snprintf(err, errlen, "%s: cannot write its config from the bench/ template", c->name);
	return -1;
}

void bench_proxy_stop(struct bench_proxy *p)
{
	char cmd[256];

	if (p->pid > 0) {
		kill(-p->pid, SIGTERM);
		kill(p->pid, SIGTERM);
		for (int i = 0; i < 300 && waitpid(p->pid, NULL, WNOHANG) != p->pid; i++)
			usleep(10000);
		if (kill(p->pid, 0) == 0) {
			kill(-p->pid, SIGKILL);
			waitpid(p->pid, NULL, 0);
		}
		kill(-p->pid, SIGKILL); /* forked children (socat) left in the group */
	}
	p->pid = 0;
	if (p->dir[0] && !getenv("SPLICER_BENCH_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p->dir);
		if (system(cmd)) {
			/* a temp dir left behind is harmless */
		}
	}
}

void bench_proxy_log_tail(const struct bench_proxy *p, const char *row)
{
	char path[96], buf[2048];
	FILE *f;
	long size;
	size_t n;

	if (!p->dir[0])
		return;
	snprintf(path, sizeof(path), "%s/proxy.log", p->dir);
	if (!(f = fopen(path, "re")))
		return;
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	fprintf(stderr, "splicer bench: %s failed; the end of its proxy's log (%s, %ld bytes):\n%s%s",
		row, path, size, buf, n && buf[n - 1] != '\n' ? "\n" : "");
}

/* ---- /proc readings ------------------------------------------------------- */

/* A process's CPU seconds, its reaped children's included: its own from
 * its CPU clock (nanoseconds, every thread, exited ones too), as the ticks
 * of /proc/PID/stat (10 ms) read 0 for a proxy that ran 5 ms in a short
 * row; the reaped children's only exist as ticks. */
static double proc_cpu_one(pid_t pid)
{
	char path[64], buf[2048], *p;
	unsigned long long ut = 0, st = 0, cut = 0, cst = 0;
	double own = -1;
	struct timespec ts;
	clockid_t cid;
	FILE *f;

	if (!clock_getcpuclockid(pid, &cid) && !clock_gettime(cid, &ts))
		own = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
		       &ut, &st, &cut, &cst);
	fclose(f);
	if (own < 0)
		own = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	return own + (double)(cut + cst) / (double)sysconf(_SC_CLK_TCK);
}

/* Calls fn for each live child of pid (all threads' children lists). */
static void for_children(pid_t pid, void (*fn)(pid_t, void *), void *arg)
{
	char path[64], buf[4096];
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return;
	while ((e = readdir(d))) {
		FILE *f;
		char cpath[300];
		if (e->d_name[0] == '.')
			continue;
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children", (int)pid, e->d_name);
		if (!(f = fopen(cpath, "re")))
			continue;
		if (fgets(buf, sizeof(buf), f)) {
			char *save, *tok;
			for (tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
				fn((pid_t)atoi(tok), arg);
		}
		fclose(f);
	}
	closedir(d);
}

static void add_cpu(pid_t pid, void *arg)
{
	*(double *)arg += proc_cpu_one(pid);
	for_children(pid, add_cpu, arg);
}

/* Sets the affinity of every thread of pid (not its children). */
static void set_threads_affinity(pid_t pid, void *arg)
{
	char path[64];
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			sched_setaffinity((pid_t)atoi(e->d_name), sizeof(cpu_set_t), arg);
	closedir(d);
	for_children(pid, set_threads_affinity, arg);
}

void bench_tree_avoid_cpu(pid_t pid, int cpu)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (pid <= 0)
		return;
	CPU_ZERO(&set);
	for (long i = 0; i < n && i < CPU_SETSIZE; i++)
		if (i != cpu)
			CPU_SET(i, &set);
	set_threads_affinity(pid, &set);
}

void bench_tree_on_cpu(pid_t pid, int cpu)
{
	cpu_set_t set;

	if (pid <= 0 || cpu < 0 || cpu >= CPU_SETSIZE)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	set_threads_affinity(pid, &set);
}

double bench_tree_cpu(pid_t pid)
{
	double sum = 0;

	if (pid <= 0)
		return 0;
	add_cpu(pid, &sum);
	return sum;
}

struct pid_list {
	char *buf;
	size_t len;
};

static void add_pid(pid_t pid, void *arg)
{
	struct pid_list *l = arg;
	size_t used = strlen(l->buf);

	snprintf(l->buf + used, l->len - used, "%s%d", used ? "," : "", (int)pid);
	for_children(pid, add_pid, arg);
}

void bench_tree_pids(pid_t pid, char *out, size_t len)
{
	struct pid_list l = { out, len };

	out[0] = '\0';
	if (pid > 0)
		add_pid(pid, &l);
}

struct rss_sum {
	const char *key; /* "VmHWM:" or "VmRSS:" */
	long kib;
};

static void add_rss(pid_t pid, void *arg)
{
	struct rss_sum *r = arg;
	size_t klen = strlen(r->key);
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "re"))) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, r->key, klen))
				r->kib += atol(line + klen);
		fclose(f);
	}
	for_children(pid, add_rss, arg);
}

long bench_tree_peak_rss_kib(pid_t pid)
{
	struct rss_sum r = { "VmHWM:", 0 };

	if (pid > 0)
		add_rss(pid, &r);
	return r.kib;
}

long bench_tree_rss_kib(pid_t pid)
{
	struct rss_sum r = { "VmRSS:", 0 };

	if (pid > 0)
		add_rss(pid, &r);
	return r.kib;
}

double bench_machine_busy(void)
{
	unsigned long long v[10] = { 0 };
	FILE *f = fopen("/proc/stat", "re");

	if (!f)
		return 0;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7]) < 8) {
		fclose(f);
		return 0;
	}
	fclose(f);
	/* user nice system idle iowait irq softirq steal: busy = all but idle,
	 * iowait and steal (the hypervisor's, not ours) */
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)sysconf(_SC_CLK_TCK);
}
