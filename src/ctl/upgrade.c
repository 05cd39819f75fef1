/* SPDX-License-Identifier: MIT */
/* upgrade: see upgrade.h. */
#define _GNU_SOURCE
#include "upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "listener.h"
#include "log.h"
#include "notify.h"
#include "worker.h"

#define ENV_INHERIT "SPLICER_INHERIT"
#define ENV_ANSWER  "SPLICER_UPGRADE_FD"

extern char **environ;

static char exe[PATH_MAX]; /* the binary to start: upgrade.h says which path */
static char **args;

/* ---- the new process: what it inherited ---------------------------------- */

struct inherited {
	int fd;
	int taken;
	socklen_t len;
	struct sockaddr_storage ss; /* getsockname() */
};

static struct inherited *inh;
static unsigned ninh;
static int answer_fd = -1; /* the pipe to the old process, until "ready" */

/* The path as started, made absolute now (the working directory could
 * change; a relative path would then name another file). */
static void find_exe(const char *argv0)
{
	char cwd[PATH_MAX], cand[PATH_MAX];
	const char *path = getenv("PATH");
	ssize_t n;

	exe[0] = '\0';
	if (argv0 && strchr(argv0, '/')) {
		if (argv0[0] == '/')
			snprintf(exe, sizeof(exe), "%s", argv0);
		else if (getcwd(cwd, sizeof(cwd)) &&
			 snprintf(cand, sizeof(cand), "%s/%s", cwd, argv0) < (int)sizeof(cand))
			memcpy(exe, cand, sizeof(exe));
	} else if (argv0 && path) {
		/* a shell found it in PATH: the first executable entry, as it did */
		for (const char *p = path; *p && !exe[0];) {
			size_t len = strcspn(p, ":");
			if (len && len < sizeof(cand) - 2 &&
			    snprintf(cand, sizeof(cand), "%.*s/%s", (int)len, p, argv0) < (int)sizeof(cand) &&
			    cand[0] == '/' && access(cand, X_OK) == 0)
				memcpy(exe, cand, sizeof(exe));
			p += len + (p[len] == ':');
		}
	}
	if (!exe[0] && (n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) > 0) {
		exe[n] = '\0';
		char *del = strstr(exe, " (deleted)");
		if (del)
			*del = '\0';
	}
}

/* One descriptor of SPLICER_INHERIT: a listening socket, or it is ignored. */
static void inherit_fd(int fd)
{
	struct inherited *h = &inh[ninh];
	int listening = 0;
	socklen_t ol = sizeof(listening);

	if (fd < 3 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) < 0 || !listening) {
		log_warn("upgrade: inherited descriptor %d is not a listening socket; ignored", fd);
		return;
	}
	h->len = sizeof(h->ss);
	if (getsockname(fd, (struct sockaddr *)&h->ss, &h->len) < 0) {
		log_warn("upgrade: inherited socket %d: getsockname: %s; closed", fd, strerror(errno));
		close(fd);
		return;
	}
	h->fd = fd;
	h->taken = 0;
	ninh++;
}

void upgrade_init(int argc, char **argv)
{
	const char *list = getenv(ENV_INHERIT), *ans = getenv(ENV_ANSWER);

	(void)argc;
	args = argv;
	find_exe(argv[0]);
	if (ans && (answer_fd = atoi(ans)) > 2 && fcntl(answer_fd, F_SETFD, FD_CLOEXEC) == 0)
		listener_unlink_enable(0); /* until ready: listener.h */
	else
		answer_fd = -1;
	if (list && answer_fd >= 0) {
		size_t most = 1;
		for (const char *p = list; *p; p++)
			most += *p == ',';
		inh = calloc(most, sizeof(*inh));
		for (const char *p = list; inh && *p;) {
			char *end;
			long fd = strtol(p, &end, 10);
			if (end == p)
				break;
			if (fd < INT_MAX)
				inherit_fd((int)fd);
			p = end + (*end == ',');
		}
	}
	unsetenv(ENV_INHERIT);
	unsetenv(ENV_ANSWER);
}

int upgrade_inherited(void)
{
	return answer_fd >= 0;
}

/* Equal addresses: a Unix path by its bytes (getsockname's length may count
 * the NUL where the config's does not), the rest whole. */
static int same_sockaddr(const struct sockaddr_storage *a, socklen_t alen,
			 const struct sockaddr_storage *b, socklen_t blen)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_UNIX) {
		const struct sockaddr_un *x = (const void *)a, *y = (const void *)b;
		size_t off = offsetof(struct sockaddr_un, sun_path);
		size_t lx = alen > off ? alen - off : 0, ly = blen > off ? blen - off : 0;
		if (lx && x->sun_path[0]) /* a file: up to its NUL */
			lx = strnlen(x->sun_path, lx);
		if (ly && y->sun_path[0])
			ly = strnlen(y->sun_path, ly);
		return lx == ly && !memcmp(x->sun_path, y->sun_path, lx);
	}
	return alen == blen && !memcmp(a, b, alen);
}

static in_port_t port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_port;
	if (ss->ss_family == AF_INET6)
		return ((const struct sockaddr_in6 *)ss)->sin6_port;
	return 0;
}

int upgrade_take_one(const struct addr *a)
{
	for (unsigned i = 0; i < ninh; i++)
		if (!inh[i].taken && same_sockaddr(&a->ss, a->len, &inh[i].ss, inh[i].len)) {
			inh[i].taken = 1;
			return inh[i].fd;
		}
	return -1;
}

/* The old process holds a's TCP port (another address of it, or this one):
 * new sockets join its SO_REUSEPORT group instead of taking it for another
 * process (listener_open_n's shared). */
static int inherited_port(const struct addr *a)
{
	for (unsigned i = 0; i < ninh; i++)
		if (inh[i].ss.ss_family == a->ss.ss_family && port_of(&inh[i].ss) == port_of(&a->ss))
			return 1;
	return 0;
}

int upgrade_listener_open_n(struct addr *a, unsigned n, int *fds, char *err, unsigned errlen)
{
	unsigned got = 0;
	int fd, r;

	while (got < n && (fd = upgrade_take_one(a)) >= 0)
		fds[got++] = fd;
	if (got == n)
		return 0;
	if (!got || a->ss.ss_family != AF_UNIX) {
		int shared = got || (a->ss.ss_family != AF_UNIX && inherited_port(a));
		if ((r = listener_open_n(a, n - got, fds + got, shared, err, errlen)) == 0)
			return 0;
		if (!got)
			return r;
		/* `user =`: root made the group, this user cannot join it */
		log_warn("upgrade: %s; the %u workers beyond the %u inherited sockets share them",
			 err, n - got, got);
	}
	/* a Unix listener is one socket that every worker holds a dup of */
	for (unsigned i = got; i < n; i++)
		if ((fds[i] = fcntl(fds[i % got], F_DUPFD_CLOEXEC, 0)) < 0) {
			r = -errno;
			snprintf(err, errlen, "listen %s: dup: %s", a->text, strerror(errno));
			return r;
		}
	return 0;
}

/* An inherited socket not taken: the old process holds it too and closes it
 * once it has accepted what it queued. From now on new connections must not
 * arrive there: SYNs stop (unless another socket of its SO_REUSEPORT group
 * stays and the kernel migrates the queue, tcp_migrate_req), a Unix path
 * nobody keeps is removed. Returns 1 when a grace is due. */
static int give_back(const struct inherited *h)
{
	int sibling = 0;

	for (unsigned i = 0; i < ninh; i++)
		sibling |= inh[i].taken && same_sockaddr(&h->ss, h->len, &inh[i].ss, inh[i].len);
	if (h->ss.ss_family == AF_UNIX) {
		const struct sockaddr_un *sun = (const void *)&h->ss;
		if (!sibling && sun->sun_path[0])
			unlink(sun->sun_path);
		return 0;
	}
	if (sibling && listener_migrates())
		return 0;
	if (listener_stop_syns(h->fd) < 0) {
		log_warn("upgrade: inherited socket %d: SYNs not stopped (%s); a connection may be "
			 "reset when the old process closes it", h->fd, strerror(errno));
		return 0;
	}
	return 1;
}

int upgrade_ready(void)
{
	char msg[96];
	unsigned taken = 0, back = 0;
	int grace = 0;

	if (answer_fd < 0)
		return 0;
	snprintf(msg, sizeof(msg), "MAINPID=%d\nREADY=1\nSTATUS=forwarding", (int)getpid());
	if (notify_send(msg) < 0)
		log_warn("NOTIFY_SOCKET is set but MAINPID and READY=1 could not be sent to it");
	for (unsigned i = 0; i < ninh; i++)
		if (!inh[i].taken)
			grace |= give_back(&inh[i]);
	if (grace) /* the old process accepts meanwhile: handshakes under way complete */
		usleep(LISTENER_CLOSE_GRACE_MS * 1000);
	for (unsigned i = 0; i < ninh; i++) {
		taken += inh[i].taken;
		if (!inh[i].taken) {
			close(inh[i].fd);
			back++;
		}
	}
	log_info("upgrade: serving in place of the old process: %u inherited socket%s taken, %u "
		 "left to it to close", taken, taken == 1 ? "" : "s", back);
	if (write(answer_fd, "ready\n", 6) != 6)
		log_warn("upgrade: the old process did not take the answer (%s); it stops after %d s",
			 strerror(errno), UPGRADE_TIMEOUT_MS / 1000);
	close(answer_fd);
	answer_fd = -1;
	free(inh);
	inh = NULL;
	ninh = 0;
	listener_unlink_enable(1); /* the paths are this process's now */
	return 1;
}

/* ---- the spawner: forks the new process ---------------------------------- */

/* The new process is not forked by the proxy itself: a fork copies every
 * descriptor, sessions' included, and until the child's exec closes them
 * the kernel keeps their epoll registrations alive after a worker closed
 * them, so a worker could be handed an event of a session it freed. The
 * spawner is forked at start, before any thread, session or listener:
 * single-threaded, it holds nothing but its socket. An upgrade sends it the
 * listening sockets (SCM_RIGHTS); it forks and execs the new process with
 * them and answers its pid; it reaps it or kills it when asked; it ends
 * when the proxy does (EOF). It keeps the privileges the proxy started
 * with, so with `user =` the new process starts as root too: it binds new
 * ports below 1024 and joins the SO_REUSEPORT groups root made, then drops
 * to the user as any start does. */
enum { SP_FDS = 'F', SP_GO = 'G', SP_WAIT = 'W', SP_KILL = 'K' };
#define SP_BATCH 200 /* descriptors per message (the kernel takes 253) */

static int sp_fd = -1; /* the proxy's end */

/* One message of a byte and an int, with up to max descriptors. Returns the
 * byte, 0 at EOF, -1 on error. */
static int sp_recv(int fd, int *val, int *fds, unsigned max, unsigned *nfds)
{
	char data[1 + sizeof(int)], cbuf[CMSG_SPACE(SP_BATCH * sizeof(int))];
	struct iovec iov = { data, sizeof(data) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

	if (nfds)
		*nfds = 0;
	if (n <= 0)
		return n == 0 ? 0 : -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (unsigned i = 0; i < k; i++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (nfds && *nfds < max)
				fds[(*nfds)++] = got;
			else
				close(got);
		}
	}
	if (val && n == (ssize_t)sizeof(data))
		memcpy(val, data + 1, sizeof(int));
	return (unsigned char)data[0];
}

static int sp_send(int fd, int type, int val, const int *fds, unsigned nfds)
{
	char data[1 + sizeof(int)], cbuf[CMSG_SPACE(SP_BATCH * sizeof(int))];
	struct iovec iov = { data, sizeof(data) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	data[0] = (char)type;
	memcpy(data + 1, &val, sizeof(int));
	if (nfds) {
		struct cmsghdr *c;
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	return sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(data) ? 0 : -1;
}

/* The environment with the hand-over's two variables (replacing any). */
static char **child_env(const char *inherit, const char *answer)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	if (!(env = calloc(n + 3, sizeof(*env))))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], ENV_INHERIT "=", sizeof(ENV_INHERIT)) &&
		    strncmp(environ[i], ENV_ANSWER "=", sizeof(ENV_ANSWER)))
			env[k++] = environ[i];
	env[k++] = (char *)inherit;
	env[k++] = (char *)answer;
	return env;
}

/* The spawner's fork: the new process, with fds[] and the answer pipe. */
static pid_t sp_spawn(const int *fds, unsigned n, int answer)
{
	size_t cap = (size_t)n * 12 + sizeof(ENV_INHERIT) + 2, k;
	char *inherit = malloc(cap), ans[48], **env;
	pid_t pid = -1;

	if (!inherit)
		return -1;
	k = (size_t)snprintf(inherit, cap, ENV_INHERIT "=");
	for (unsigned i = 0; i < n && k < cap; i++)
		k += (size_t)snprintf(inherit + k, cap - k, "%s%d", i ? "," : "", fds[i]);
	snprintf(ans, sizeof(ans), ENV_ANSWER "=%d", answer);
	if ((env = child_env(inherit, ans)) && (pid = fork()) == 0) {
		static const int sigs[] = { SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE };
		for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], SIG_DFL); /* ignored here; an ignored signal stays so */
		for (unsigned i = 0; i < n; i++)
			fcntl(fds[i], F_SETFD, 0);
		fcntl(answer, F_SETFD, 0);
		execve(exe, args, env);
		fprintf(stderr, "splicer: upgrade: cannot execute %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	free(env);
	free(inherit);
	return pid;
}

static void sp_main(int fd) __attribute__((noreturn));
static void sp_main(int fd)
{
	static const int sigs[] = { SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE };
	int *list = NULL, val, st;
	unsigned n = 0, cap = 0, got;
	pid_t pid = 0;

	/* Ctrl-C reaches the whole process group: the proxy decides */
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_IGN);
	for (;;) {
		int batch[SP_BATCH];
		int t = sp_recv(fd, &val, batch, SP_BATCH, &got);

		if (t <= 0)
			_exit(0); /* the proxy is gone */
		if (t == SP_FDS && n + got > cap) {
			int *l = realloc(list, (n + got + 64) * sizeof(*l));
			if (!l)
				_exit(1);
			list = l;
			cap = n + got + 64;
		}
		if (t == SP_FDS) {
			memcpy(list + n, batch, got * sizeof(int));
			n += got;
		} else if (t == SP_GO) {
			pid = got == 1 ? sp_spawn(list, n, batch[0]) : -1;
			for (unsigned i = 0; i < n; i++)
				close(list[i]);
			if (got == 1)
				close(batch[0]);
			n = 0;
			sp_send(fd, SP_GO, (int)pid, NULL, 0);
		} else if (t == SP_WAIT || t == SP_KILL) {
			if (t == SP_KILL && pid > 0)
				kill(pid, SIGKILL);
			st = -1;
			if (pid > 0 && waitpid(pid, &st, 0) != pid)
				st = -1;
			pid = 0;
			sp_send(fd, SP_WAIT, st, NULL, 0);
		}
	}
}

int upgrade_spawner_start(void)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	if ((pid = fork()) < 0) {
		close(sv[0]);
		close(sv[1]);
		return -errno;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sv[0]);
		/* nothing but 0-2 and the socket: what an upgrade handed over
		 * belongs to the proxy */
		if (sv[1] > 3)
			syscall(SYS_close_range, 3u, (unsigned)sv[1] - 1, 0u);
		syscall(SYS_close_range, (unsigned)sv[1] + 1, ~0u, 0u);
		sp_main(sv[1]);
	}
	close(sv[1]);
	sp_fd = sv[0];
	return 0;
}

/* A request and its answer; -1 when the spawner is gone. */
static int sp_ask(int type, int *val)
{
	struct timeval tv = { 5, 0 };
	int t;

	setsockopt(sp_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (sp_send(sp_fd, type, 0, NULL, 0) < 0)
		return -1;
	t = sp_recv(sp_fd, val, NULL, 0, NULL);
	return t > 0 ? 0 : -1;
}

/* ---- the old process: starting the new one ------------------------------- */

static struct {
	pid_t pid;        /* the new process, 0: none starting */
	int rfd;          /* its answer */
	uint64_t deadline_ms;
	char buf[16];
	size_t n;
} up = { .rfd = -1 };

int upgrade_pending(void)
{
	return up.pid != 0;
}

/* Every distinct listening descriptor (Unix listeners: each worker's dup),
 * then the stats and admin sockets. */
static unsigned collect_fds(const struct config *cfg, int (*fds)[MAX_LISTENERS], unsigned nw,
			    int stats_fd, int admin_fd, int *out)
{
	unsigned n = 0;

	for (unsigned l = 0; l < cfg->nlst; l++)
		for (unsigned w = 0; w < nw; w++)
			if (fds[w][l] >= 0)
				out[n++] = fds[w][l];
	if (stats_fd >= 0)
		out[n++] = stats_fd;
	if (admin_fd >= 0)
		out[n++] = admin_fd;
	return n;
}

int upgrade_start(const struct config *cfg, int (*fds)[MAX_LISTENERS], unsigned nw, int stats_fd,
		  int admin_fd)
{
	unsigned n;
	int *list, p[2] = { -1, -1 }, pid = -1, rc = -1;

	if (up.pid) {
		log_warn("upgrade: process %d is starting already; request ignored", (int)up.pid);
		return -1;
	}
	if (sp_fd < 0) {
		log_err("upgrade: no spawner process (it could not start); serving on");
		return -1;
	}
	if (!(list = calloc((size_t)cfg->nlst * nw + 2, sizeof(*list)))) {
		log_err("upgrade: out of memory; serving on");
		return -1;
	}
	n = collect_fds(cfg, fds, nw, stats_fd, admin_fd, list);
	if (pipe2(p, O_CLOEXEC)) {
		log_err("upgrade: pipe: %s; serving on", strerror(errno));
		free(list);
		return -1;
	}
	for (unsigned i = 0; i < n; i += SP_BATCH)
		if (sp_send(sp_fd, SP_FDS, 0, list + i, n - i < SP_BATCH ? n - i : SP_BATCH) < 0)
			goto out;
	{
		struct timeval tv = { 5, 0 };
		setsockopt(sp_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	if (sp_send(sp_fd, SP_GO, 0, &p[1], 1) < 0 || sp_recv(sp_fd, &pid, NULL, 0, NULL) <= 0)
		goto out;
	if (pid <= 0) {
		log_err("upgrade: the spawner could not fork; serving on");
		goto out;
	}
	close(p[1]);
	p[1] = -1;
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	memset(&up, 0, sizeof(up));
	up.pid = pid;
	up.rfd = p[0];
	up.deadline_ms = now_monotonic_ms() + UPGRADE_TIMEOUT_MS;
	log_info("upgrade: started %s as process %d with %u listening socket%s; serving on until "
		 "it is ready", exe, pid, n, n == 1 ? "" : "s");
	rc = 0;
out:
	if (rc) {
		if (pid < 0)
			log_err("upgrade: the spawner does not answer (%s); serving on", strerror(errno));
		close(p[0]);
	}
	if (p[1] >= 0)
		close(p[1]);
	free(list);
	return rc;
}

static void reaped(void)
{
	close(up.rfd);
	up.rfd = -1;
	up.pid = 0;
	up.n = 0;
}

int upgrade_poll(uint64_t now_ms)
{
	ssize_t r = -1;
	int st = -1;

	if (!up.pid)
		return 0;
	while (up.n < sizeof(up.buf) - 1 &&
	       (r = read(up.rfd, up.buf + up.n, sizeof(up.buf) - 1 - up.n)) > 0)
		up.n += (size_t)r;
	up.buf[up.n] = '\0';
	if (strstr(up.buf, "ready\n")) {
		char msg[32];
		/* heard when the unit's NotifyAccess is main: this is still it */
		snprintf(msg, sizeof(msg), "MAINPID=%d", (int)up.pid);
		notify_send(msg);
		log_info("upgrade: process %d serves now; this one (%d) stops accepting and drains "
			 "its sessions", (int)up.pid, (int)getpid());
		reaped(); /* not waited for: it outlives this process */
		return 1;
	}
	if (r == 0 || up.n == sizeof(up.buf) - 1) { /* it ended, or said nonsense */
		if (sp_ask(r == 0 ? SP_WAIT : SP_KILL, &st) == 0 && st != -1)
			log_warn("upgrade: the new process %d %s %d before it was ready (its messages are "
				 "above); serving on unchanged", (int)up.pid,
				 WIFEXITED(st) ? "exited with status" : "ended by signal",
				 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		else
			log_warn("upgrade: the new process %d ended before it was ready; serving on "
				 "unchanged", (int)up.pid);
		reaped();
		return 0;
	}
	if (now_ms >= up.deadline_ms) {
		log_err("upgrade: the new process %d was not ready within %d s; killed, serving on "
			"unchanged", (int)up.pid, UPGRADE_TIMEOUT_MS / 1000);
		upgrade_abort();
	}
	return 0;
}

void upgrade_abort(void)
{
	int st;

	if (!up.pid)
		return;
	sp_ask(SP_KILL, &st);
	reaped();
}
