/* SPDX-License-Identifier: MIT */
/* upgrade: see upgrade.h. */
#define _GNU_SOURCE
#include "upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "activation.h"
#include "backend.h"
#include "handoff.h"
#include "listener.h"
#include "sockopt.h"
#include "source_table.h"
#include "log.h"
#include "notify.h"
#include "privs.h"
#include "scm_fds.h"
#include "worker.h"

#define ENV_INHERIT "SPLICER_INHERIT"
#define ENV_ANSWER  "SPLICER_UPGRADE_FD"
#define ENV_LOG     "SPLICER_UPGRADE_LOG"
#define ENV_STATE   "SPLICER_UPGRADE_STATE"
#define ENV_SESSIONS "SPLICER_UPGRADE_SESSIONS"
#define STATE_MAX   (4 << 20) /* bytes of overrides read: far above MAX_BACKENDS' lines */

extern char **environ;

static char exe[PATH_MAX]; /* the binary to start: upgrade.h says which path */
static char **args;

/* ---- the new process: what it inherited ---------------------------------- */

struct inherited {
	int fd;
	unsigned idx; /* its place in SPLICER_INHERIT: the old process's list */
	int taken;
	socklen_t len;
	struct sockaddr_storage ss; /* getsockname() */
};

static struct inherited *inh;
static unsigned ninh;
static int answer_fd = -1; /* the pipe to the old process, until "ready" */
static int real_err = -1;  /* stderr as started, while fd 2 goes to the old process */
static char *state;        /* the admin overrides handed over, until applied */
static int sessions_fd = -1; /* the hand-over's socket (handoff.h), until ready */

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
static void inherit_fd(int fd, unsigned idx)
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
	h->idx = idx;
	h->taken = 0;
	ninh++;
}

/* Until it answers, this process's stderr (start-up lines, a config's
 * problems, a sanitizer's report) is a pipe to the old process, which
 * writes it to the log and keeps the last lines for `ctl upgrade`. */
static void stderr_to_old(const char *var)
{
	int fd = var ? atoi(var) : -1;

	if (fd <= 2 || fcntl(fd, F_GETFD) < 0)
		return;
	if ((real_err = fcntl(2, F_DUPFD_CLOEXEC, 3)) >= 0 && dup2(fd, 2) < 0) {
		close(real_err);
		real_err = -1;
	}
	close(fd);
}

/* stderr is the log's own again: the old process sees the pipe's EOF. */
static void stderr_back(void)
{
	if (real_err < 0)
		return;
	dup2(real_err, 2);
	close(real_err);
	real_err = -1;
}

/* The admin overrides of the old process: lines "ROUTE\tADDR\tSTATE\tWEIGHT"
 * (state_write), read now, put in force once the config is. */
static void state_read(const char *var)
{
	int fd = var ? atoi(var) : -1;
	size_t n = 0;
	ssize_t r;

	if (fd <= 2 || fcntl(fd, F_GETFD) < 0)
		return;
	if ((state = malloc(STATE_MAX + 1)))
		while (n < STATE_MAX && (r = read(fd, state + n, STATE_MAX - n)) > 0)
			n += (size_t)r;
	if (state)
		state[n] = '\0';
	close(fd);
}

/* "ROUTE KEY CUR LAST START" of the old process's state: that source's
 * rate history joins route ROUTE's table (source_table.h). */
static void rate_take(struct config *cfg, char *l)
{
	char route[ROUTE_NAME_MAX], key[SOURCE_KEY_TEXT];
	unsigned cur, prev;
	unsigned long long start;

	if (sscanf(l, "%63[^\t]\t%39[^\t]\t%u\t%u\t%llu", route, key, &cur, &prev, &start) != 5)
		return;
	for (unsigned i = 0; i < cfg->nroutes; i++)
		if (!strcmp(cfg->route[i]->name, route) && cfg->route[i]->sources)
			source_table_import(cfg->route[i]->sources, key, cur, prev, start,
					    now_monotonic_ms());
}

void upgrade_apply_state(struct config *cfg)
{
	unsigned n = 0;

	for (char *save = NULL, *l = state ? strtok_r(state, "\n", &save) : NULL; l;
	     l = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(l, "@source\t", 8)) {
			rate_take(cfg, l + 8);
			continue;
		}
		char *f[5], *fs = NULL;
		unsigned k = 0;
		for (char *t = strtok_r(l, "\t", &fs); t && k < 5; t = strtok_r(NULL, "\t", &fs))
			f[k++] = t;
		if (k < 4) /* a 5th field (down) since the hand-over of sessions */
			continue;
		int admin = atoi(f[2]), weight = atoi(f[3]), down = k == 5 && atoi(f[4]) == 1;
		for (unsigned i = 0; i < cfg->nroutes; i++) {
			struct route *rt = cfg->route[i];
			for (unsigned b = 0; b < rt->nbackend && !strcmp(rt->name, f[0]); b++) {
				if (strcmp(rt->backend[b].addr.text, f[1]))
					continue;
				if (admin >= BACKEND_READY && admin <= BACKEND_DISABLED)
					backend_set_admin(rt, b, admin);
				if (weight >= 1 && weight <= MAX_WEIGHT)
					backend_set_weight(rt, b, (unsigned)weight);
				if (down && rt->o.check) {
					backend_set_down(rt, b, 1, "down in the old process");
					/* its checker starts its good streak from nothing */
					__atomic_store_n(&rt->health[b]->passive_down, 1, __ATOMIC_RELAXED);
				}
				n++;
			}
		}
	}
	if (n)
		log_info("upgrade: the admin overrides (drain, disable, weight) and health of %u "
			 "backend%s carried over from the old process", n, n == 1 ? "" : "s");
	free(state);
	state = NULL;
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
		for (unsigned idx = 0; inh && *list; idx++) {
			char *end;
			long fd = strtol(list, &end, 10);
			if (end == list)
				break;
			if (fd < INT_MAX)
				inherit_fd((int)fd, idx);
			list = end + (*end == ',');
		}
	}
	if (answer_fd >= 0) {
		const char *sv = getenv(ENV_SESSIONS);
		stderr_to_old(getenv(ENV_LOG));
		state_read(getenv(ENV_STATE));
		if (sv && (sessions_fd = atoi(sv)) > 2 && fcntl(sessions_fd, F_SETFD, FD_CLOEXEC) < 0)
			sessions_fd = -1;
		else if (sessions_fd <= 2)
			sessions_fd = -1;
	}
	unsetenv(ENV_INHERIT);
	unsetenv(ENV_ANSWER);
	unsetenv(ENV_LOG);
	unsetenv(ENV_STATE);
	unsetenv(ENV_SESSIONS);
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

/* An inherited listener of a's address that is the socket o asks for
 * (MPTCP or not, its device: sockopt_listen_same_kind), or -1. One that
 * differs stays untaken: upgrade_ready stops its SYNs, and the old process
 * accepts its queue empty before it closes it. */
static int take_same_kind(const struct addr *a, const struct listen_opts *o)
{
	for (unsigned i = 0; i < ninh; i++)
		if (!inh[i].taken && same_sockaddr(&a->ss, a->len, &inh[i].ss, inh[i].len) &&
		    sockopt_listen_same_kind(inh[i].fd, o)) {
			inh[i].taken = 1;
			return inh[i].fd;
		}
	return -1;
}

int upgrade_listener_open_n(struct addr *a, unsigned n, int *fds, const struct listen_opts *o,
			    char *err, unsigned errlen)
{
	unsigned got = 0;
	int fd, r;

	while (got < n && (fd = take_same_kind(a, o)) >= 0) {
		/* the new config's backlog, fastopen, mark... on the old socket */
		if ((r = sockopt_apply_listen(fd, a->ss.ss_family, o, err, errlen)) < 0)
			log_warn("upgrade: listen %s: %s (the inherited socket keeps its former "
				 "value)", a->text, err);
		fds[got++] = fd;
	}
	if (got == n)
		return 0;
	if (!got || a->ss.ss_family != AF_UNIX) {
		int shared = got || (a->ss.ss_family != AF_UNIX && inherited_port(a));
		if ((r = listener_open_n(a, n - got, fds + got, shared, o, err, errlen)) == 0)
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
 * nobody keeps is removed. Returns 1 when a grace is due; *stays is 1 when
 * the queue stays with a socket this process keeps (the same Unix socket,
 * or a migration), so the old process must only close it. */
static int give_back(const struct inherited *h, int *stays)
{
	int sibling = 0;

	*stays = 0;
	if (activation_kept_sockaddr(&h->ss, h->len))
		return 0; /* systemd's: no filter, no unlink (activation.h) */
	for (unsigned i = 0; i < ninh; i++)
		sibling |= inh[i].taken && same_sockaddr(&h->ss, h->len, &inh[i].ss, inh[i].len);
	if (h->ss.ss_family == AF_UNIX) {
		const struct sockaddr_un *sun = (const void *)&h->ss;
		if (!sibling && sun->sun_path[0])
			unlink(sun->sun_path);
		*stays = sibling; /* a dup of a socket taken */
		return 0;
	}
	if (sibling && listener_migrates()) {
		*stays = 1;
		return 0;
	}

	if (listener_stop_syns(h->fd) < 0) {
		log_warn("upgrade: inherited socket %d: SYNs not stopped (%s); a connection may be "
			 "reset when the old process closes it", h->fd, strerror(errno));
		return 0;
	}
	return 1;
}

/* "ready", then "keep I,J,...": the inherited sockets (by their place in
 * SPLICER_INHERIT) whose queues are this process's, which the old process
 * closes without accepting from. An old process that reads only "ready"
 * (an older binary) accepts every queue empty, as it always did. */
static void answer(const char *stays, unsigned sessions)
{
	size_t cap = (size_t)ninh * 11 + 40, n = 6;
	char *msg = stays ? malloc(cap) : NULL; /* none: plain "ready", nothing is lost */

	if (msg) {
		n = (size_t)snprintf(msg, cap, "ready\nkeep ");
		for (unsigned i = 0, first = 1; i < ninh; i++)
			if (inh[i].taken || stays[i]) {
				n += (size_t)snprintf(msg + n, cap - n, "%s%u", first ? "" : ",", inh[i].idx);
				first = 0;
			}
		msg[n++] = '\n';
		if (sessions) /* the hand-over format it reads (handoff.h) */
			n += (size_t)snprintf(msg + n, cap - n, "sessions %u\n", sessions);
	}
	if (write(answer_fd, msg ? msg : "ready\n", n) != (ssize_t)n) /* it gave up on us */
		log_warn("upgrade: the old process did not take the answer (%s)", strerror(errno));
	free(msg);
}

int upgrade_ready(const struct config *cfg, struct worker *ws, unsigned nw)
{
	char msg[96], *stays;
	unsigned taken = 0, back = 0, sessions = 0;
	int grace = 0, hr;

	if (answer_fd < 0)
		return 0;
	if (sessions_fd >= 0) { /* its workers run: the old process's sessions may come */
		const char *tv = getenv("SPLICER_TEST_HANDOFF_VERSION");
		if ((hr = handoff_adopt_start(sessions_fd, cfg, ws, nw)) < 0)
			log_warn("upgrade: sessions cannot be taken over (%s): the old process drains "
				 "them", strerror(-hr));
		else /* the tests' way to be a binary of another format; nothing without it */
			sessions = tv && atoi(tv) > 0 ? (unsigned)atoi(tv) : HANDOFF_VERSION;
		sessions_fd = -1;
	}
	stderr_back(); /* what follows is logged as it happens */
	snprintf(msg, sizeof(msg), "MAINPID=%d\nREADY=1\nSTATUS=forwarding", (int)getpid());
	if (notify_send(msg) < 0)
		log_warn("NOTIFY_SOCKET is set but MAINPID and READY=1 could not be sent to it");
	stays = calloc(ninh + 1, 1);
	for (unsigned i = 0; i < ninh; i++) {
		int st = 0;
		if (!inh[i].taken)
			grace |= give_back(&inh[i], &st);
		if (stays)
			stays[i] = (char)st;
	}
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
	answer(stays, sessions);
	close(answer_fd);
	answer_fd = -1;
	free(stays);
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
enum { SP_FDS = 'F', SP_GO = 'G', SP_WAIT = 'W', SP_KILL = 'K', SP_TERM = 'T' };
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
	ssize_t n;

	/* A signal handled meanwhile (the next SIGUSR2, a child's SIGCHLD)
	 * fails a receive with a timeout (SO_RCVTIMEO) with EINTR even under
	 * SA_RESTART: the spawner had forked, and the new process found
	 * nobody to answer it (upgrade_loop_refuses_and_resets_nobody failed
	 * so once, upgrade 8 of 20). */
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (nfds)
		*nfds = 0;
	if (n <= 0)
		return n == 0 ? 0 : -1;
	{
		int batch[SP_BATCH];
		unsigned k = scm_fds_take(&mh, batch, nfds ? max : 0);
		memcpy(fds ? fds : batch, batch, k * sizeof(int));
		if (nfds)
			*nfds = k;
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
	ssize_t n;

	scm_fds_put(&mh, cbuf, fds, nfds);
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(data) ? 0 : -1;
}

/* The descriptors SP_GO carries besides the sockets, in order, and the
 * variable that names each to the new process. */
static const char *const go_env[] = { ENV_ANSWER, ENV_LOG, ENV_STATE, ENV_SESSIONS };
#define NGO (sizeof(go_env) / sizeof(go_env[0]))

/* 1 when the entry sets one of the hand-over's variables. */
static int handover_var(const char *entry)
{
	size_t len = strcspn(entry, "=");

	if (len == sizeof(ENV_INHERIT) - 1 && !strncmp(entry, ENV_INHERIT, len))
		return 1;
	for (unsigned i = 0; i < NGO; i++)
		if (len == strlen(go_env[i]) && !strncmp(entry, go_env[i], len))
			return 1;
	return 0;
}

/* The environment with the hand-over's variables vars[0..n-1] (replacing
 * any). */
static char **child_env(char *const *vars, unsigned nvars)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	if (!(env = calloc(n + nvars + 1, sizeof(*env))))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!handover_var(environ[i]))
			env[k++] = environ[i];
	for (unsigned i = 0; i < nvars; i++)
		env[k++] = vars[i];
	return env;
}

/* Executes the binary, in the spawner's child. A privileged spawner (root,
 * or the user with capabilities an upgrade needs) runs only a file nobody
 * but root or its own user can write (privs.h), and runs the very file it
 * checked (execveat of the descriptor): otherwise whoever could replace the
 * binary would start with those privileges at the next SIGUSR2. Returns
 * only on failure, said on errfd (the old process logs it, and `ctl
 * upgrade` answers it). */
static void exec_checked(char **env, int errfd)
{
	char why[PATH_MAX + 256];
	int fd = open(exe, O_PATH | O_CLOEXEC);

	if (fd < 0) {
		dprintf(errfd, "splicer: upgrade: cannot execute %s: %s\n", exe, strerror(errno));
		return;
	}
	if (privs_privileged() && privs_exec_trusted(fd, exe, why, sizeof(why))) {
		dprintf(errfd, "splicer: upgrade refused: %s\n", why);
		return;
	}
	syscall(SYS_execveat, fd, "", args, env, AT_EMPTY_PATH);
	dprintf(errfd, "splicer: upgrade: cannot execute %s: %s\n", exe, strerror(errno));
}

/* The spawner's fork: the new process, with fds[] and go[] (go_env). */
static pid_t sp_spawn(const int *fds, unsigned n, const int *go)
{
	size_t cap = (size_t)n * 12 + sizeof(ENV_INHERIT) + 2, k;
	char *vars[1 + NGO], named[NGO][48], **env;
	pid_t pid = -1;

	if (!(vars[0] = malloc(cap)))
		return -1;
	k = (size_t)snprintf(vars[0], cap, ENV_INHERIT "=");
	for (unsigned i = 0; i < n && k < cap; i++)
		k += (size_t)snprintf(vars[0] + k, cap - k, "%s%d", i ? "," : "", fds[i]);
	for (unsigned i = 0; i < NGO; i++) {
		snprintf(named[i], sizeof(named[i]), "%s=%d", go_env[i], go[i]);
		vars[1 + i] = named[i];
	}
	if ((env = child_env(vars, 1 + NGO)) && (pid = fork()) == 0) {
		static const int sigs[] = { SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE };
		sigset_t held;
		/* Held until the new process waits for them (run_proxy): their
		 * default action would end it, and with it what its workers
		 * accepted already, if one came before (a SIGUSR2 storm, a
		 * SIGTERM of upgrade_abandon). The mask survives the exec;
		 * blocked first, so none lands between SIG_DFL and the mask */
		sigemptyset(&held);
		for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			sigaddset(&held, sigs[i]);
		sigdelset(&held, SIGPIPE);
		sigaddset(&held, SIGTERM);
		sigprocmask(SIG_BLOCK, &held, NULL);
		for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], SIG_DFL); /* ignored here; an ignored signal stays so */
		for (unsigned i = 0; i < n; i++)
			fcntl(fds[i], F_SETFD, 0);
		for (unsigned i = 0; i < NGO; i++)
			fcntl(go[i], F_SETFD, 0);
		exec_checked(env, go[1]);
		_exit(127);
	}
	free(env);
	free(vars[0]);
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
			pid = got == NGO ? sp_spawn(list, n, batch) : -1;
			for (unsigned i = 0; i < n; i++)
				close(list[i]);
			for (unsigned i = 0; i < got; i++)
				close(batch[i]);
			n = 0;
			sp_send(fd, SP_GO, (int)pid, NULL, 0);
		} else if (t == SP_TERM) {
			/* it drains and exits on its own, after this process maybe:
			 * not waited for (reaped by whoever inherits it) */
			if (pid > 0)
				kill(pid, SIGTERM);
			pid = 0;
			sp_send(fd, SP_WAIT, -1, NULL, 0);
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

int upgrade_spawner_start(const char *user, unsigned long long keep)
{
	char why[512];

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
		/* a new process forks its spawner before it answers: the next
		 * generation's stderr is the log's, not a pipe to the old process */
		if (real_err >= 0)
			dup2(real_err, 2);
		/* nothing but 0-2 and the socket: what an upgrade handed over
		 * belongs to the proxy */
		if (sv[1] > 3)
			syscall(SYS_close_range, 3u, (unsigned)sv[1] - 1, 0u);
		syscall(SYS_close_range, (unsigned)sv[1] + 1, ~0u, 0u);
		/* root only binds, loads BPF and drops (privs.h): the spawner
		 * that a SIGUSR2 of the user sets going is the user too, with
		 * the capabilities an upgrade needs, ambient so the new process
		 * starts with them and sheds them once set up. What it is asked
		 * to do is then nothing the user could not do but those */
		if (privs_become_with_ambient(user, keep, why, sizeof(why))) {
			dprintf(2, "splicer: upgrade spawner: %s; upgrades will be refused\n", why);
			_exit(1);
		}
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

/* ---- the old process: the outcome, for `ctl upgrade` -------------------- */

static pthread_mutex_t outcome_lock = PTHREAD_MUTEX_INITIALIZER;
static struct upgrade_outcome last; /* under outcome_lock */

void upgrade_outcome(struct upgrade_outcome *o)
{
	pthread_mutex_lock(&outcome_lock);
	*o = last;
	pthread_mutex_unlock(&outcome_lock);
}

static void outcome_set(int ok, int pid, const char *msgs, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void outcome_set(int ok, int pid, const char *msgs, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&outcome_lock);
	last.seq++;
	last.ok = ok;
	last.pid = pid;
	va_start(ap, fmt);
	vsnprintf(last.why, sizeof(last.why), fmt, ap);
	va_end(ap);
	snprintf(last.msgs, sizeof(last.msgs), "%s", msgs ? msgs : "");
	pthread_mutex_unlock(&outcome_lock);
}

void upgrade_refuse(const char *why)
{
	log_warn("%s", why);
	outcome_set(0, 0, NULL, "%s", why);
}

/* ---- the old process: the new one's stderr ------------------------------- */

/* Until it answers, the new process's stderr comes here: each line goes to
 * this process's log (it carries the new process's pid), and the last ones
 * are kept for the outcome. */
static struct {
	int fd; /* the pipe's read end, -1: none */
	size_t n;
	char line[LOG_LINE_MAX]; /* a line not ended yet */
	size_t kept;
	char tail[UPGRADE_MSGS_MAX]; /* the last whole lines */
} relay = { .fd = -1 };

static void relay_keep(const char *line, size_t len)
{
	if (len > sizeof(relay.tail) / 2) /* a very long line: its start */
		len = sizeof(relay.tail) / 2;
	while (relay.kept + len >= sizeof(relay.tail)) { /* the oldest line gives way */
		char *nl = memchr(relay.tail, '\n', relay.kept);
		size_t cut = nl ? (size_t)(nl - relay.tail) + 1 : relay.kept;
		memmove(relay.tail, relay.tail + cut, relay.kept - cut);
		relay.kept -= cut;
	}
	memcpy(relay.tail + relay.kept, line, len);
	relay.kept += len;
	relay.tail[relay.kept] = '\0';
}

static void relay_line(void)
{
	relay.line[relay.n++] = '\n';
	log_sink_put(&log_err_sink, relay.line, relay.n);
	relay_keep(relay.line, relay.n);
	relay.n = 0;
}

static void relay_close(void)
{
	if (relay.fd < 0)
		return;
	if (relay.n)
		relay_line();
	close(relay.fd);
	relay.fd = -1;
}

/* What the new process wrote so far (bounded per call: it cannot hold the
 * main thread); at EOF (it answered, or it is gone) the pipe is closed. */
static void relay_pump(void)
{
	char buf[4096];

	for (unsigned turns = 0; relay.fd >= 0 && turns < 64; turns++) {
		ssize_t r = read(relay.fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			relay_close();
			return;
		}
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] == '\n') {
				relay_line();
				continue;
			}
			relay.line[relay.n++] = buf[i];
			if (relay.n == sizeof(relay.line) - 1)
				relay_line();
		}
	}
}

static void relay_start(int fd)
{
	relay_close(); /* a new process given up on may still have been talking */
	fcntl(fd, F_SETFL, O_NONBLOCK);
	relay.fd = fd;
	relay.n = relay.kept = 0;
	relay.tail[0] = '\0';
}

/* ---- the old process: starting the new one ------------------------------- */

static struct {
	pid_t pid;        /* the new process, 0: none starting */
	int rfd;          /* its answer */
	uint64_t deadline_ms;
	uint64_t ready_ms; /* "ready" read at (0: not yet); the rest follows */
	char *ans;        /* the answer so far */
	size_t n, cap;
	int *fds;         /* what it was given, in order: the answer's indices */
	unsigned nfds;
	int hfd;          /* the hand-over's socket (handoff.h); -1: none */
	int drain;        /* upgrade_sessions = drain */
} up = { .rfd = -1, .hfd = -1 };

/* After "ready": the hand-over to come (stop_begin takes it). */
static struct {
	int fd;           /* -1: none (drain as before) */
	int pid;
	unsigned version; /* the answer's "sessions" line; 0: none */
	uint64_t ready_ms;
	int drain;
} hand = { .fd = -1 };

/* After the hand-over: the sockets the new process keeps (upgrade_kept). */
static int *kept;
static unsigned nkept;

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

struct rate_out {
	FILE *f;
	const char *route;
};

/* A line "@source ROUTE KEY CUR LAST START" ('@' is in no route name). */
static void rate_put(void *arg, const char *key, uint32_t cur, uint32_t prev, uint64_t start_ms)
{
	struct rate_out *ro = arg;

	fprintf(ro->f, "@source\t%s\t%s\t%u\t%u\t%llu\n", ro->route, key, cur, prev,
		(unsigned long long)start_ms);
}

/* The admin overrides (drain, disable, a weight not the file's) of cfg's
 * backends, for the new process (state_read): a memfd, or /dev/null
 * (logged) when none can be made. Returns the descriptor, or -1. */
static int state_write(const struct config *cfg)
{
	int fd = memfd_create("splicer-upgrade-state", MFD_CLOEXEC);
	FILE *f;

	if (fd < 0 || !(f = fdopen(dup(fd), "w"))) {
		log_warn("upgrade: the admin overrides cannot be handed over (%s): the new process "
			 "starts with the file's", strerror(errno));
		if (fd >= 0)
			close(fd);
		return open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	for (unsigned i = 0; i < cfg->nroutes; i++) {
		const struct route *r = cfg->route[i];
		for (unsigned k = 0; k < r->nbackend; k++) {
			unsigned w = backend_weight(r, k);
			int admin = backend_admin(r, k);
			/* down by its checks: the new process's checker brings it
			 * back after `rise` good ones, not at once */
			int down = r->o.check && !backend_is_up(r, k);
			if (admin != BACKEND_READY || w != r->backend[k].weight || down)
				fprintf(f, "%s\t%s\t%d\t%u\t%d\n", r->name, r->backend[k].addr.text,
					admin, w != r->backend[k].weight ? w : 0, down);
		}
	}
	/* the per-source rate of the last two seconds, so a client at its
	 * source_conn_rate does not get a fresh allowance from the upgrade */
	for (unsigned i = 0; i < cfg->nroutes; i++) {
		struct rate_out ro = { f, cfg->route[i]->name };
		if (cfg->route[i]->sources)
			source_table_export(cfg->route[i]->sources, now_monotonic_ms(), rate_put, &ro);
	}
	fclose(f);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* A start that did not happen: logged, and the outcome. */
static int start_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int start_failed(const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_err("upgrade: %s; serving on", why);
	outcome_set(0, 0, NULL, "%s; serving on", why);
	return -1;
}

int upgrade_start(const struct config *cfg, int (*fds)[MAX_LISTENERS], unsigned nw, int stats_fd,
		  int admin_fd)
{
	unsigned n;
	int *list, ans[2] = { -1, -1 }, err[2] = { -1, -1 }, ses[2] = { -1, -1 }, sfd = -1, pid = -1;
	int rc = -1, hr;

	if (up.pid) {
		/* `ctl upgrade` answers the outcome of that one */
		log_warn("upgrade: process %d is starting already; request ignored", (int)up.pid);
		return -1;
	}
	if (sp_fd < 0)
		return start_failed("no spawner process (it could not start)");
	if (!(list = calloc((size_t)cfg->nlst * nw + 2, sizeof(*list))))
		return start_failed("out of memory");
	n = collect_fds(cfg, fds, nw, stats_fd, admin_fd, list);
	if (pipe2(ans, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || (sfd = state_write(cfg)) < 0) {
		start_failed("pipe: %s", strerror(errno));
		goto out;
	}
	if ((hr = handoff_pair(&ses[0], &ses[1])) < 0) {
		start_failed("socketpair: %s", strerror(-hr));
		goto out;
	}
	for (unsigned i = 0; i < n; i += SP_BATCH)
		if (sp_send(sp_fd, SP_FDS, 0, list + i, n - i < SP_BATCH ? n - i : SP_BATCH) < 0) {
			start_failed("the spawner does not answer (%s)", strerror(errno));
			goto out;
		}
	{
		struct timeval tv = { 5, 0 };
		setsockopt(sp_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	int go[NGO] = { ans[1], err[1], sfd, ses[1] };
	if (sp_send(sp_fd, SP_GO, 0, go, NGO) < 0 || sp_recv(sp_fd, &pid, NULL, 0, NULL) <= 0) {
		start_failed("the spawner does not answer (%s)", strerror(errno));
		goto out;
	}
	if (pid <= 0) {
		start_failed("the spawner could not fork");
		goto out;
	}
	fcntl(ans[0], F_SETFL, O_NONBLOCK);
	memset(&up, 0, sizeof(up));
	up.hfd = -1;
	up.pid = pid;
	up.rfd = ans[0];
	ans[0] = -1;
	up.fds = list;
	up.nfds = n;
	list = NULL;
	up.hfd = ses[0];
	ses[0] = -1;
	up.drain = cfg->upgrade_sessions != 0; /* upgrade_sessions = drain: every session stays */
	up.cap = (size_t)n * 11 + 64; /* "ready\nkeep " and every index */
	up.ans = malloc(up.cap); /* none: answer_read says nonsense, and it is killed */
	relay_start(err[0]);
	err[0] = -1;
	up.deadline_ms = now_monotonic_ms() + UPGRADE_TIMEOUT_MS;
	log_info("upgrade: started %s as process %d with %u listening socket%s; serving on until "
		 "it is ready", exe, pid, n, n == 1 ? "" : "s");
	rc = 0;
out:
	if (sfd >= 0)
		close(sfd);
	for (unsigned i = 0; i < 2; i++) {
		if (ans[i] >= 0)
			close(ans[i]);
		if (err[i] >= 0)
			close(err[i]);
		if (ses[i] >= 0)
			close(ses[i]);
	}
	free(list);
	return rc;
}

static void reaped(void)
{
	if (up.hfd >= 0)
		close(up.hfd);
	close(up.rfd);
	free(up.ans);
	free(up.fds);
	memset(&up, 0, sizeof(up));
	up.rfd = -1;
	up.hfd = -1;
}

/* The answer's "keep" line, once whole: the descriptors of this process
 * whose sockets the new one keeps. Without it (an older binary, or a line
 * cut short) the list is empty, and every queue is accepted here. */
static void take_kept(const char *ready)
{
	const char *p = ready + 6, *end = strchr(p, '\n'), *ses = strstr(p, "\nsessions ");

	free(kept);
	nkept = 0;
	hand.version = ses ? (unsigned)strtoul(ses + 10, NULL, 10) : 0;
	if (strncmp(p, "keep ", 5) || !end || !(kept = calloc(up.nfds + 1, sizeof(*kept))))
		return;
	for (p += 5; p < end;) {
		char *next;
		unsigned long i = strtoul(p, &next, 10);
		if (next == p || i >= up.nfds)
			break;
		kept[nkept++] = up.fds[i];
		p = next + (*next == ',');
	}
}

unsigned upgrade_kept(const int **fds)
{
	*fds = kept;
	return nkept;
}

/* Reads what the new process answered. Returns 1 when it said "ready" and
 * the rest of its answer is in (or will not come), -1 when it ended or
 * said nonsense (*eof: which), 0 while it says nothing more. */
static int answer_read(uint64_t now_ms, int *eof)
{
	const char *ready;
	ssize_t r = -1;

	*eof = 0;
	while (up.ans && up.n < up.cap - 1 &&
	       (r = read(up.rfd, up.ans + up.n, up.cap - 1 - up.n)) > 0)
		up.n += (size_t)r;
	if (!up.ans)
		return -1;
	up.ans[up.n] = '\0';
	*eof = r == 0;
	if ((ready = strstr(up.ans, "ready\n"))) {
		if (!up.ready_ms)
			up.ready_ms = now_ms;
		/* whole: at EOF, or once the keep line ends; an answer that stops
		 * half-way is taken as it is after a second */
		if (r == 0 || up.n == up.cap - 1 || strchr(ready + 6, '\n') ||
		    now_ms >= up.ready_ms + 1000) {
			take_kept(ready);
			return 1;
		}
		return 0;
	}
	return r == 0 || up.n == up.cap - 1 ? -1 : 0;
}

/* The new process is gone before it said "ready" (st: its wait status,
 * -1 unknown): its last words are read, then the verdict is logged. */
static void failed(int st, const char *how)
{
	char why[160];

	relay_pump(); /* up to EOF: nobody writes any more */
	relay_close();
	if (how)
		snprintf(why, sizeof(why), "%s", how);
	else if (st != -1 && WIFEXITED(st))
		snprintf(why, sizeof(why), "exited with status %d before it was ready",
			 WEXITSTATUS(st));
	else if (st != -1)
		snprintf(why, sizeof(why), "ended by signal %d before it was ready", WTERMSIG(st));
	else
		snprintf(why, sizeof(why), "ended before it was ready");
	log_warn("upgrade: the new process %d %s (its messages are above); serving on unchanged",
		 (int)up.pid, why);
	outcome_set(0, up.pid, relay.tail, "the new process %d %s; serving on unchanged",
		    (int)up.pid, why);
	reaped();
}

int upgrade_poll(uint64_t now_ms)
{
	int st = -1, eof, r;

	relay_pump();
	if (!up.pid)
		return 0;
	if ((r = answer_read(now_ms, &eof)) > 0) {
		char msg[32];
		relay_pump(); /* it gave its stderr back before it answered */
		/* heard when the unit's NotifyAccess is main: this is still it */
		snprintf(msg, sizeof(msg), "MAINPID=%d", (int)up.pid);
		notify_send(msg);
		log_info("upgrade: process %d serves now; this one (%d) stops accepting and %s "
			 "its sessions (%u of the %u sockets handed over are kept by it, with what "
			 "they queued)", (int)up.pid, (int)getpid(),
			 up.hfd >= 0 && hand.version && !up.drain ? "hands over" : "drains", nkept,
			 up.nfds);
		hand.fd = up.hfd; /* the outcome follows the hand-over's counts */
		up.hfd = -1;
		hand.pid = up.pid;
		hand.ready_ms = now_ms;
		hand.drain = up.drain;
		if (hand.fd < 0)
			outcome_set(1, up.pid, NULL, "process %d serves now; this one (%d) drains its "
				    "sessions", (int)up.pid, (int)getpid());
		reaped(); /* not waited for: it outlives this process */
		return 1;
	}
	if (r < 0) { /* it ended, or said nonsense */
		if (sp_ask(eof ? SP_WAIT : SP_KILL, &st))
			st = -1;
		failed(st, NULL);
		return 0;
	}
	if (now_ms >= up.deadline_ms) {
		log_err("upgrade: the new process %d was not ready within %d s; killed",
			(int)up.pid, UPGRADE_TIMEOUT_MS / 1000);
		sp_ask(SP_KILL, &st);
		failed(st, "was not ready in time: killed");
	}
	return 0;
}

void upgrade_abandon(const char *why)
{
	int st;

	if (!up.pid)
		return;
	/* SIGKILL would reset what its workers accepted already (they start
	 * before it answers); SIGTERM lets it drain that. Its stderr is still
	 * written to the log here until it gives it back (relay_pump). */
	log_warn("%s: the upgrade under way is abandoned: the new process %d, not ready, is sent "
		 "SIGTERM (it drains what it accepted and exits)", why, (int)up.pid);
	sp_ask(SP_TERM, &st);
	outcome_set(0, up.pid, relay.tail, "%s: the new process %d was not ready yet: it is sent "
		    "SIGTERM and this one stops too", why, (int)up.pid);
	reaped();
}

struct handoff_target *upgrade_handoff_begin(void)
{
	struct handoff_target *t;

	if (hand.fd < 0)
		return NULL;
	t = handoff_begin(hand.fd, hand.pid, hand.version, hand.drain); /* takes the socket */
	hand.fd = -1;
	if (!t)
		outcome_set(1, hand.pid, NULL, "process %d serves now; this one (%d) drains its "
			    "sessions", hand.pid, (int)getpid());
	return t;
}

void upgrade_handoff_finish(struct handoff_target *t, unsigned nw)
{
	char why[256];

	handoff_finish(t, nw, hand.ready_ms, why, sizeof(why));
	outcome_set(1, hand.pid, NULL, "%s", why);
}
