/* SPDX-License-Identifier: MIT */
/* Seamless upgrade (SIGUSR2), lame duck (SIGTERM with stats on) and
 * listener closes that drop nothing queued (a reload removing an address).
 *
 * The new process of an upgrade is the old one's child, and outlives it:
 * this test process is made a child subreaper, so every generation comes
 * back to it to be reaped, and each one it saw is killed at the end. */
#define _GNU_SOURCE
#include "harness.h"
#include "upgrade_util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- process generations: upgrade_util.h ------------------------------------ */

/* Upgrades the process pid (the n-th upgrade of the test): SIGUSR2, the new
 * process's pid once it serves, the old one gone (its sessions over). With
 * watch, *at is what it said when the new process took over. */
static pid_t up_upgrade_watch(struct h_proxy *p, pid_t pid, int n, _Atomic uint64_t *watch,
			      uint64_t *at)
{
	H_CHECK(kill(pid, SIGUSR2) == 0, "SIGUSR2 to %d: %s", (int)pid, strerror(errno));
	pid_t np = uu_nth_takeover(p, n, 15000);
	H_CHECK(np > 0, "upgrade %d: no new process took over within 15 s; log %s", n, p->log);
	uu_track(np);
	if (watch)
		*at = *watch;
	if (pid == p->pid) /* the harness's own child: reaped through it */
		H_CHECK(h_proxy_wait(p, 15000) != -1, "upgrade %d: the old process %d did not exit",
			n, (int)pid);
	else
		H_CHECK(uu_wait_gone(NULL, pid, 15000) == 0, "upgrade %d: the old process %d did not exit",
			n, (int)pid);
	return np;
}

static pid_t up_upgrade(struct h_proxy *p, pid_t pid, int n)
{
	return up_upgrade_watch(p, pid, n, NULL, NULL);
}

/* The pid `ctl show process --json` names: the process that answers. */
static pid_t up_ctl_pid(const char *bin, const char *sock)
{
	char *out = NULL, *err = NULL;
	int rc = uu_ctl(bin, sock, &out, &err, (const char *const[]){ "show", "process", "--json",
								      NULL });
	const char *k = out ? strstr(out, "\"pid\":") : NULL;
	pid_t pid = k ? (pid_t)atoi(k + 6) : 0;

	H_CHECK(rc == 0 && pid > 0, "ctl show process: exit %d, stdout '%s', stderr '%s'", rc,
		out ? out : "", err ? err : "");
	free(out);
	free(err);
	return pid;
}

/* ---- clients -------------------------------------------------------------- */

/* Echo round trips, one after the other, until stop: each one connected and
 * echoed, refused (connect failed), or reset (failed after its connect
 * succeeded: the failure this test is about). */
struct up_clients {
	struct h_addr addr;
	_Atomic int stop;
	_Atomic long tried, ok, refused, reset;
	_Atomic long slow; /* connects that took a SYN retransmission (>= 900 ms) */
	char last_reset[256], last_refused[320];
	/* the tags a backend may answer ("T" when not set); forbid: a tag (low
	 * byte) that a session connected after the time above it (ms, h_now_ms)
	 * must not get: the backend of a process that handed over */
	const char *tags;
	_Atomic uint64_t forbid;
	_Atomic long late; /* sessions that got it */
	char last_late[128];
	pthread_t thr[4];
	int n;
};

/* One session through the proxy to a tag server (h_tag_start): the
 * backend's byte (one of tags), then EOF. Returns 0 or -errno with why,
 * which starts with "connect to" when the connect failed; *tag is the byte
 * and *t_conn when the connect completed. */
static int up_tag_session(const struct h_addr *a, const char *tags, char *why, size_t len,
			  int *slow, char *tag, int64_t *t_conn)
{
	/* 8 s: a SYN dropped by a listener on its way out (listener.h) is sent
	 * again after 1 s, and, unlucky again, after 2 s and 4 s more */
	int64_t t0 = h_now_ms(), deadline = t0 + 8000;
	int fd = h_connect(a, 8000), rc;
	char c = 0;

	*t_conn = h_now_ms();
	*slow = *t_conn - t0 >= 900;
	*tag = 0;

	if (fd < 0) {
		rc = -errno;
		snprintf(why, len, "connect to %s: %s", a->text, strerror(-rc));
		return rc;
	}
	rc = h_recv_exact(fd, &c, 1, deadline);
	*tag = c;
	if (rc == 0 && (!c || !strchr(tags, c)))
		rc = -EPROTO;
	if (rc == 0)
		rc = h_expect_eof(fd, deadline);
	close(fd);
	if (rc)
		snprintf(why, len, "after the connect: %s",
			 rc == -ENODATA ? "EOF before the backend's byte" : strerror(-rc));
	return rc;
}

static void *up_client_main(void *arg)
{
	struct up_clients *c = arg;
	char why[256];

	for (long i = 0; !c->stop && i < 200000; i++) {
		int64_t t_conn;
		char tag;
		int slow, rc = up_tag_session(&c->addr, c->tags ? c->tags : "T", why, sizeof why,
					      &slow, &tag, &t_conn);
		uint64_t forbid = c->forbid;
		c->tried++;
		c->slow += slow;
		if (rc == 0 && forbid && tag == (char)(forbid & 0xff) &&
		    (uint64_t)t_conn > forbid >> 8) {
			c->late++;
			snprintf(c->last_late, sizeof c->last_late, "tag %c, connected %lld ms after "
				 "the hand-over was seen", tag,
				 (long long)(t_conn - (int64_t)(forbid >> 8)));
		}
		if (rc == 0)
			c->ok++;
		else if (!strncmp(why, "connect to", 10)) {
			c->refused++;
			snprintf(c->last_refused, sizeof c->last_refused, "%s at %lld ms", why,
				 (long long)h_now_ms());
		}
		else {
			c->reset++;
			snprintf(c->last_reset, sizeof c->last_reset, "%s", why);
		}
	}
	return NULL;
}

static void up_clients_start(struct up_clients *c, const struct h_addr *a, int n,
			     const char *tags)
{
	memset(c, 0, sizeof *c);
	c->addr = *a;
	c->tags = tags;
	c->n = n;
	for (int i = 0; i < n; i++)
		H_CHECK(pthread_create(&c->thr[i], NULL, up_client_main, c) == 0, "client thread");
}

static void up_clients_stop(struct up_clients *c)
{
	c->stop = 1;
	for (int i = 0; i < c->n; i++)
		pthread_join(c->thr[i], NULL);
}

/* GET /health: the status code, or 0 when nothing answered. */
static int up_health(const struct h_addr *stats, char *body, size_t len)
{
	static const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	char buf[1024];
	int code = 0;
	int fd = h_connect(stats, 2000);

	if (body)
		body[0] = '\0';
	if (fd < 0)
		return 0;
	if (h_send_all(fd, req, sizeof req - 1, h_now_ms() + 2000) == 0) {
		h_recv_all(fd, buf, sizeof buf, h_now_ms() + 2000);
		if (sscanf(buf, "HTTP/1.1 %d", &code) != 1)
			code = 0;
		const char *b = strstr(buf, "\r\n\r\n");
		if (body && b)
			snprintf(body, len, "%s", b + 4);
	}
	close(fd);
	return code;
}

struct up_prober {
	struct h_addr addr;
	_Atomic int stop;
	_Atomic long tried, bad;
	pthread_t thr;
};

static void *up_prober_main(void *arg)
{
	struct up_prober *p = arg;

	for (long i = 0; !p->stop && i < 100000; i++) {
		p->tried++;
		if (up_health(&p->addr, NULL, 0) != 200)
			p->bad++;
		h_sleep_ms(10);
	}
	return NULL;
}

/* A config: route r (listen_port -> backend), and route x (xport -> xbackend)
 * unless xport is 0. */
static const char *up_config(char *buf, size_t len, int listen_port, int workers, int stats_port,
			     const char *log, const char *backend, int xport, const char *xbackend)
{
	int n = snprintf(buf, len,
			 "[global]\nworkers = %d\nstats = 127.0.0.1:%d\nlog = %s\n\n"
			 "[route r]\nlisten = 127.0.0.1:%d\nbackend = %s\n",
			 workers, stats_port, log, listen_port, backend);
	if (xport && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "\n[route x]\nlisten = 127.0.0.1:%d\nbackend = %s\n",
			 xport, xbackend);
	return buf;
}

/* ---- the upgrade loop ------------------------------------------------------ */

/* 20 upgrades under a continuous connect loop, changing workers, the stats
 * address and the access log along the way: no client refused or reset, a
 * transfer started before the first upgrade finishes byte-exact after it,
 * /health answers 200 throughout (on the address that does not change). */
Test(integ, upgrade_loop_refuses_and_resets_nobody, .init = uu_init, .fini = uu_fini,
     .timeout = 120)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	static struct up_clients cl;
	static struct up_prober pr;
	char conf[256], text[1024], log[256], why[256];
	/* generation g (0: the first start) has backend "ABC"[g % 3]: after
	 * the hand-over to g, no session connected later may get g - 1's tag */
	static struct h_tag_server tag[3];
	char tagb[3][32];
	int port = h_free_port(), xport = h_free_port(), s1 = h_free_port(), s2 = h_free_port();
	int rc = h_server_start(&srv, "127.0.0.1:0", 512, h_echo_conn, NULL);

	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	for (int i = 0; i < 3; i++) {
		h_tag_start(&tag[i], (char)('A' + i), 0, 0);
		snprintf(tagb[i], sizeof tagb[i], "127.0.0.1:%d", tag[i].port);
	}
	snprintf(conf, sizeof conf, "%s/up.conf", h_tmpdir());
	snprintf(log, sizeof log, "%s/access.log", h_tmpdir());
	uu_write(conf, up_config(text, sizeof text, port, 2, s1, "off", tagb[0], xport,
				 srv.addr.text));
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	pid_t pid = p.pid;

	struct h_addr stats;
	uu_local(&stats, s1);
	pr.addr = stats;
	H_CHECK(pthread_create(&pr.thr, NULL, up_prober_main, &pr) == 0, "prober");
	up_clients_start(&cl, &p.addr, 2, "ABC");

	/* a transfer through the proxy across the first upgrade: 8 MiB echoed,
	 * read at 64 KiB per 20 ms (about 2.6 s) */
	const uint64_t len = 8 * H_MIB;
	struct h_addr xaddr;
	uu_local(&xaddr, xport);
	int xfd = h_connect(&xaddr, 2000);
	H_CHECK(xfd >= 0, "transfer connect: %s", strerror(errno));
	static struct h_xfer tx, rx;
	h_xfer_init(&tx, xfd, 0x5EED, len, h_now_ms() + 30000);
	tx.shut_wr = 1;
	h_xfer_init(&rx, xfd, 0x5EED, 0, h_now_ms() + 30000);
	rx.verify = 1;
	rx.pace_bytes = 64 * 1024;
	rx.pace_ms = 20;
	H_CHECK(h_xfer_start_send(&tx) == 0 && h_xfer_start_recv(&rx) == 0, "transfer threads");
	h_sleep_ms(100);

	/* workers 2 -> 1 -> 3 -> 2 ..., log off <-> file, stats s1 -> s2 at 15 */
	uint64_t progress_at_first = 0;
	int64_t t0 = h_now_ms();
	for (int n = 1; n <= 20; n++) {
		int workers = 1 + n % 3;
		int sp = n < 15 ? s1 : s2;
		if (n == 15) {
			pr.stop = 1; /* it probes s1, which goes away now */
			pthread_join(pr.thr, NULL);
		}
		uu_write(conf, up_config(text, sizeof text, port, workers, sp, n % 2 ? log : "off",
					 tagb[n % 3], xport, srv.addr.text));
		pid = up_upgrade_watch(&p, pid, n, n == 1 ? &rx.progress : NULL, &progress_at_first);
		/* the takeover line is logged before the old process stops its
		 * stats endpoint and its workers: 100 ms for that */
		cl.forbid = (uint64_t)(h_now_ms() + 100) << 8 | (uint64_t)('A' + (n - 1) % 3);
		char wl[64];
		snprintf(wl, sizeof wl, "workers %d;", workers);
		H_CHECK(h_log_lines(&p, "splicer[", wl, NULL) > 0, "upgrade %d: no process started "
			"with %s", n, wl);
	}
	int64_t t_loop = h_now_ms() - t0;
	up_clients_stop(&cl);

	H_CHECK(h_xfer_join(&tx, 5000) == 0 && h_xfer_join(&rx, 5000) == 0, "transfer threads");
	h_check_stream("across an upgrade", &tx, &rx, len);
	H_CHECK(progress_at_first < len, "the transfer was over before the first upgrade (%llu "
		"bytes): the test proves nothing", (unsigned long long)progress_at_first);
	close(xfd);

	/* the stats address moved to s2; s1 is closed */
	struct h_addr st2 = stats;
	uu_local(&st2, s2);
	char body[256];
	H_CHECK(up_health(&st2, body, sizeof body) == 200, "GET /health on the new stats address");
	H_CHECK(up_health(&stats, NULL, 0) == 0, "the old stats address still answers");
	/* the access log: written by the generations that had it */
	FILE *f = fopen(log, "r");
	int lines = 0;
	while (f && fgets(text, sizeof text, f))
		lines++;
	if (f)
		fclose(f);
	H_CHECK(lines > 0, "no access-log line in %s from the generations with log = it", log);

	fprintf(stderr, "upgrade loop: 20 upgrades in %lld ms; connections tried %ld, ok %ld, "
		"refused %ld, reset %ld, connect >= 900 ms %ld, served by an old process after its "
		"hand-over %ld; /health probes %ld, not 200: %ld; "
		"transfer %llu bytes (%llu when the first upgrade was done)\n", (long long)t_loop,
		(long)cl.tried, (long)cl.ok, (long)cl.refused, (long)cl.reset, (long)cl.slow,
		(long)cl.late, (long)pr.tried, (long)pr.bad,
		(unsigned long long)rx.bytes, (unsigned long long)progress_at_first);
	H_CHECK(cl.refused == 0 && cl.reset == 0, "clients across 20 upgrades: %ld refused, %ld "
		"reset of %ld (last refused: %s; last reset: %s); log %s", (long)cl.refused,
		(long)cl.reset, (long)cl.tried, cl.last_refused, cl.last_reset, p.log);
	H_CHECK(cl.ok > 100, "only %ld round trips in the loop", (long)cl.ok);
	H_CHECK(cl.late == 0, "%ld sessions were served by an old process after its hand-over "
		"(last: %s)", (long)cl.late, cl.last_late);
	H_CHECK(pr.bad == 0, "/health did not answer 200 to %ld of %ld probes across upgrades",
		(long)pr.bad, (long)pr.tried);

	H_CHECK(kill(pid, SIGTERM) == 0, "SIGTERM");
	H_CHECK(uu_wait_gone(NULL, pid, 10000) == 0, "the last generation did not stop");
	const char *prob = h_proxy_log_problem(&p);
	H_CHECK(prob == NULL, "sanitizer report in %s: %s", p.log, prob);
	for (int i = 0; i < 3; i++)
		h_tag_stop(&tag[i]);
	h_server_stop(&srv);
}

/* Connections queued on a socket the new process keeps are the new
 * process's: the old one does not accept them at the hand-over (it would
 * serve them with the old config and cut them at its drain_timeout), and
 * none is lost. max_conns = 1 keeps them queued: the old process is full
 * (a held session on route x), so four clients of route r wait in the
 * kernel's queue; the new process (max_conns 1 too) takes one before it is
 * ready, and the other three must come to it one by one, as the test ends
 * each session: every client reads the new config's backend tag 'N', none
 * the old one's 'O'. */
Test(integ, upgrade_leaves_queued_connections_to_the_new_process, .init = uu_init,
     .fini = uu_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_tag_server old_b, new_b;
	char conf[256], text[1024], why[256], buf[100];
	int port = h_free_port(), xport = h_free_port();
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);

	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	h_tag_start(&old_b, 'O', 1, 0);
	h_tag_start(&new_b, 'N', 1, 0);
	snprintf(conf, sizeof conf, "%s/q.conf", h_tmpdir());
	/* the held session stays in the old process (upgrade_sessions = drain):
	 * handed over, it would fill the new one too */
	const char *fmt = "[global]\nworkers = 1\nmax_conns = 1\nupgrade_sessions = drain\n"
			  "[route r]\nlisten = 127.0.0.1:%d\n"
			  "backend = 127.0.0.1:%d\n[route x]\nlisten = 127.0.0.1:%d\nbackend = %s\n";
	snprintf(text, sizeof text, fmt, port, old_b.port, xport, srv.addr.text);
	uu_write(conf, text);
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);

	struct h_addr xa;
	uu_local(&xa, xport);
	int held = h_connect(&xa, 2000);
	memset(buf, 'q', sizeof buf);
	H_CHECK(held >= 0 && h_send_all(held, buf, sizeof buf, h_now_ms() + 2000) == 0 &&
		h_recv_exact(held, buf, sizeof buf, h_now_ms() + 2000) == 0,
		"the session that fills the old process");
	enum { NQ = 4 };
	int c[NQ];
	for (int i = 0; i < NQ; i++)
		H_CHECK((c[i] = h_connect(&p.addr, 2000)) >= 0, "client %d: %s", i, strerror(errno));
	h_sleep_ms(300);
	for (int i = 0; i < NQ; i++) /* the premise: they wait in the queue */
		H_CHECK(recv(c[i], buf, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN,
			"client %d was served by the full old process", i);

	snprintf(text, sizeof text, fmt, port, new_b.port, xport, srv.addr.text);
	uu_write(conf, text);
	H_CHECK(kill(p.pid, SIGUSR2) == 0, "SIGUSR2");
	pid_t np = uu_nth_takeover(&p, 1, 15000);
	H_CHECK(np > 0, "no new process took over; log %s", p.log);
	uu_track(np);

	/* one by one: the session that has its tag is ended, the next comes */
	int served = 0, open_n = NQ;
	int64_t end = h_now_ms() + 10000;
	while (open_n && h_now_ms() < end) {
		struct pollfd pf[NQ];
		int k = 0, map[NQ];
		for (int i = 0; i < NQ; i++)
			if (c[i] >= 0) {
				pf[k] = (struct pollfd){ .fd = c[i], .events = POLLIN };
				map[k++] = i;
			}
		if (poll(pf, (nfds_t)k, 200) <= 0)
			continue;
		for (int j = 0; j < k; j++) {
			int i = map[j];
			if (!pf[j].revents)
				continue;
			char t = 0;
			ssize_t n = recv(c[i], &t, 1, 0);
			H_CHECK(n == 1 && t == 'N', "client %d: %s '%c': %s after the hand-over", i,
				n == 1 ? "read" : "no byte", n == 1 ? t : '-',
				t == 'O' ? "the old process accepted it (old config)"
					 : "lost in the hand-over");
			close(c[i]);
			c[i] = -1;
			open_n--;
			served++;
		}
	}
	H_CHECK(served == NQ, "%d of %d queued clients served by the new process within 10 s",
		served, NQ);
	H_CHECK(old_b.accepted == 0 && new_b.accepted == NQ, "backend of the old config: %d "
		"sessions, of the new one: %d (want 0 and %d)", (int)old_b.accepted,
		(int)new_b.accepted, NQ);
	H_CHECK(h_proxy_alive(&p), "the old process exited with its session on route x running");
	close(held);
	int st = h_proxy_wait(&p, 10000);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the old process: status %d", st);
	kill(np, SIGTERM);
	H_CHECK(uu_wait_gone(NULL, np, 10000) == 0, "the new process did not stop");
	h_tag_stop(&old_b);
	h_tag_stop(&new_b);
	h_server_stop(&srv);
}

/* An invalid config: the new process says why and exits non-zero; the old
 * one serves on, its sockets untouched, and a later valid upgrade works. */
Test(integ, upgrade_with_invalid_config_keeps_the_old_process, .init = uu_init, .fini = uu_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	char conf[256], text[1024], why[256];
	int port = h_free_port(), s1 = h_free_port();
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);

	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	snprintf(conf, sizeof conf, "%s/bad.conf", h_tmpdir());
	uu_write(conf, up_config(text, sizeof text, port, 2, s1, "off", srv.addr.text, 0, NULL));
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	uu_write(conf, "[global]\nworkers = banana\n[route r]\nlisten = 127.0.0.1:1\n");
	H_CHECK(kill(p.pid, SIGUSR2) == 0, "SIGUSR2");
	int64_t end = h_now_ms() + 15000;
	while (h_log_lines(&p, "upgrade: the new process", "exited with status", NULL) == 0 &&
	       h_now_ms() < end)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(&p, "upgrade: the new process", "exited with status 2", NULL) == 1,
		"the old process did not report the new one's exit (status 2); log %s", p.log);
	H_CHECK(h_log_lines(&p, "bad.conf:2:", "workers", NULL) == 1,
		"the new process's message about line 2 is not in the log %s", p.log);
	H_CHECK(h_proxy_alive(&p), "the old process is gone");
	H_CHECK(h_echo_roundtrip(&p.addr, 100, 1, 3000, why, sizeof why) == 0,
		"the old process does not serve after the failed upgrade: %s", why);
	struct h_addr stats;
	uu_local(&stats, s1);
	H_CHECK(up_health(&stats, NULL, 0) == 200, "/health after the failed upgrade");

	uu_write(conf, up_config(text, sizeof text, port, 1, s1, "off", srv.addr.text, 0, NULL));
	pid_t np = up_upgrade(&p, p.pid, 1);
	H_CHECK(h_echo_roundtrip(&p.addr, 100, 2, 3000, why, sizeof why) == 0,
		"the new process does not serve: %s", why);
	kill(np, SIGTERM);
	H_CHECK(uu_wait_gone(NULL, np, 10000) == 0, "the new process did not stop");
	h_server_stop(&srv);
}

/* With admin = PATH the admin socket is handed over like a listener: the
 * new process takes it (it could not bind the path the old one serves),
 * ctl is answered by the new process at once (show process names the new
 * pid), the held session went over with it (show sessions lists it once;
 * it still echoes), the old process exits 0 without waiting for it, and the
 * path stays when it exits. */
Test(integ, upgrade_hands_over_the_admin_socket, .init = uu_init, .fini = uu_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	char conf[256], sock[256], text[1024], why[256], *out = NULL, *err = NULL;
	int port = h_free_port(), s1 = h_free_port();
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);

	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	snprintf(conf, sizeof conf, "%s/adm.conf", h_tmpdir());
	snprintf(sock, sizeof sock, "%s/admin.sock", h_tmpdir());
	snprintf(text, sizeof text, "[global]\nworkers = 2\nstats = 127.0.0.1:%d\nadmin = %s\n"
		 "[route r]\nlisten = 127.0.0.1:%d\nbackend = %s\n", s1, sock, port, srv.addr.text);
	uu_write(conf, text);
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	H_CHECK(up_ctl_pid(bin, sock) == p.pid, "ctl before the upgrade is not answered by %d",
		(int)p.pid);
	int held = h_connect(&p.addr, 2000);
	char buf[100];
	memset(buf, 'h', sizeof buf);
	H_CHECK(held >= 0 && h_send_all(held, buf, sizeof buf, h_now_ms() + 2000) == 0 &&
		h_recv_exact(held, buf, sizeof buf, h_now_ms() + 2000) == 0, "held session");

	H_CHECK(kill(p.pid, SIGUSR2) == 0, "SIGUSR2");
	pid_t np = uu_nth_takeover(&p, 1, 15000);
	H_CHECK(np > 0, "no new process took over within 15 s (admin socket not handed over?); "
		"log %s", p.log);
	uu_track(np);
	H_CHECK(up_ctl_pid(bin, sock) == np, "ctl after the hand-over is not answered by the new "
		"process %d", (int)np);
	/* the held session went with the sockets (session_handoff.h): the
	 * new process lists it, and the old one exits without waiting for it */
	int st = h_proxy_wait(&p, 10000);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the old process: status %d", st);
	rc = uu_ctl(bin, sock, &out, &err, (const char *const[]){ "show", "sessions", "--json",
								   NULL });
	H_CHECK(rc == 0 && out && strstr(out, "\"sessions\":[") && strstr(out, "\"id\":") &&
		strstr(out, "\"id\":") == strrchr(out, '{') + 1,
		"show sessions after the hand-over does not list the held session once: %s", out);
	free(out);
	free(err);
	H_CHECK(h_send_all(held, buf, sizeof buf, h_now_ms() + 2000) == 0 &&
		h_recv_exact(held, buf, sizeof buf, h_now_ms() + 2000) == 0,
		"the held session after the hand-over");
	close(held);
	H_CHECK(access(sock, F_OK) == 0, "the old process removed the admin path it handed over");
	H_CHECK(up_ctl_pid(bin, sock) == np, "ctl once the old process is gone");
	H_CHECK(h_log_lines(&p, "admin:", "Address already in use", NULL) == 0,
		"the new process tried to bind the admin path; log %s", p.log);
	kill(np, SIGTERM);
	H_CHECK(uu_wait_gone(NULL, np, 10000) == 0, "the new process did not stop");
	H_CHECK(access(sock, F_OK) != 0, "the last process left its admin path behind");
	h_server_stop(&srv);
}

/* A session auto moved to io_uring (request/response: auto_uring_turns)
 * goes back to copy when an upgrade comes, and is handed over like any
 * other: ctl shows it on uring by turns before, the old process says it
 * came back and went over, exits 0 without waiting for it, the new one
 * lists it, and its round trips go on, every byte in order. */
Test(integ, upgrade_hands_over_a_session_auto_moved_to_uring, .init = uu_init, .fini = uu_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	char conf[256], sock[256], text[1024], why[256], *out = NULL, *err = NULL;
	const char *const show[] = { "show", "sessions", "--json", NULL };
	int port = h_free_port();
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);

	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	snprintf(conf, sizeof conf, "%s/turns.conf", h_tmpdir());
	snprintf(sock, sizeof sock, "%s/admin.sock", h_tmpdir());
	snprintf(text, sizeof text, "[global]\nworkers = 2\nadmin = %s\n"
		 "[route r]\nlisten = 127.0.0.1:%d\nbackend = %s\n", sock, port, srv.addr.text);
	uu_write(conf, text);
	const char *args[] = { "-v", "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	int held = h_connect(&p.addr, 2000);
	H_CHECK(held >= 0, "connect: %s", strerror(errno));
	h_set_nodelay(held);
	h_echo_rounds(held, 0x7E, 0, 40, 3000);
	int uring = h_log_lines(&p, "request/response sessions stay on copy", NULL) == 0;
	rc = uu_ctl(bin, sock, &out, &err, show);
	H_CHECK(rc == 0 && out, "show sessions: %s", err ? err : "");
	if (uring)
		H_CHECK(strstr(out, "\"engine_up\":\"uring\",\"engine_down\":\"uring\","
				    "\"engine_reason_up\":\"turns\",\"engine_reason_down\":\"turns\""),
			"40 round trips did not move the session to io_uring by turns: %s", out);
	free(out);
	free(err);
	out = err = NULL;

	H_CHECK(kill(p.pid, SIGUSR2) == 0, "SIGUSR2");
	pid_t np = uu_nth_takeover(&p, 1, 15000);
	H_CHECK(np > 0, "no new process took over within 15 s; log %s", p.log);
	uu_track(np);
	int st = h_proxy_wait(&p, 10000);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"the old process: status %d (it waited for the session: not handed over?); log %s", st,
		p.log);
	H_CHECK(!uring || (h_log_lines(&p, "back on copy", NULL) == 1 &&
			   h_log_lines(&p, "handed over to process", NULL) == 1),
		"the old process does not say the session came back to copy and went over; log %s",
		p.log);
	h_echo_rounds(held, 0x7E, 40, 40, 3000);
	rc = uu_ctl(bin, sock, &out, &err, show);
	H_CHECK(rc == 0 && out && strstr(out, "\"id\":") && strstr(out, "\"id\":") == strrchr(out, '{') + 1,
		"show sessions after the hand-over does not list the held session once: %s", out);
	free(out);
	free(err);
	close(held);
	kill(np, SIGTERM);
	H_CHECK(uu_wait_gone(NULL, np, 10000) == 0, "the new process did not stop");
	h_server_stop(&srv);
}

/* ctl upgrade answers the outcome: with the config made invalid, exit 1,
 * why and the new process's own messages, and the old process serves on
 * (it still answers ctl); with a valid one, ok and the new pid, which is
 * the process that answers ctl from then on. */
Test(integ, upgrade_ctl_answers_the_outcome, .init = uu_init, .fini = uu_fini, .timeout = 90)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	char conf[256], sock[256], text[1024], why[256], *out = NULL, *err = NULL;
	const char *const upgrade[] = { "upgrade", NULL };
	int port = h_free_port();
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);

	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	snprintf(conf, sizeof conf, "%s/bad.conf", h_tmpdir());
	snprintf(sock, sizeof sock, "%s/admin.sock", h_tmpdir());
	snprintf(text, sizeof text, "[global]\nworkers = 2\nadmin = %s\n[route r]\n"
		 "listen = 127.0.0.1:%d\nbackend = %s\n", sock, port, srv.addr.text);
	uu_write(conf, text);
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);

	uu_write(conf, "[global]\nworkers = banana\n[route r]\nlisten = 127.0.0.1:1\n");
	int64_t t0 = h_now_ms();
	rc = uu_ctl(bin, sock, &out, &err, upgrade);
	int64_t t_bad = h_now_ms() - t0;
	H_CHECK(rc == 1 && err && strstr(err, "error: upgrade: the new process") &&
		strstr(err, "exited with status 2 before it was ready; serving on unchanged") &&
		strstr(err, "bad.conf:2:") && strstr(err, "workers"),
		"ctl upgrade with an invalid config: exit %d, stdout '%s', stderr '%s'", rc,
		out ? out : "", err ? err : "");
	free(out);
	free(err);
	H_CHECK(h_log_lines(&p, "bad.conf:2:", "workers", NULL) == 1,
		"the new process's message is not in the log once; log %s", p.log);
	H_CHECK(h_proxy_alive(&p), "the old process is gone");
	H_CHECK(up_ctl_pid(bin, sock) == p.pid, "after the failed upgrade ctl is not answered by "
		"the old process");
	H_CHECK(h_echo_roundtrip(&p.addr, 100, 1, 3000, why, sizeof why) == 0,
		"the old process does not serve after the failed upgrade: %s", why);

	uu_write(conf, text);
	t0 = h_now_ms();
	rc = uu_ctl(bin, sock, &out, &err, upgrade);
	int64_t t_ok = h_now_ms() - t0;
	pid_t np = uu_nth_takeover(&p, 1, 1000);
	char want[96];
	snprintf(want, sizeof want, "ok: upgraded: process %d serves now; 0 sessions handed over in ",
		 (int)np);
	H_CHECK(rc == 0 && np > 0 && out && strstr(out, want), "ctl upgrade: exit %d, stdout '%s', "
		"stderr '%s' (the log says process %d took over)", rc, out ? out : "",
		err ? err : "", (int)np);
	free(out);
	free(err);
	uu_track(np);
	fprintf(stderr, "ctl upgrade: answered the failure in %lld ms, the hand-over in %lld ms\n",
		(long long)t_bad, (long long)t_ok);
	H_CHECK(up_ctl_pid(bin, sock) == np, "ctl after the upgrade is not answered by %d",
		(int)np);
	H_CHECK(h_proxy_wait(&p, 10000) != -1, "the old process did not exit");
	H_CHECK(h_echo_roundtrip(&p.addr, 100, 2, 3000, why, sizeof why) == 0,
		"the new process does not serve: %s", why);
	kill(np, SIGTERM);
	H_CHECK(uu_wait_gone(NULL, np, 10000) == 0, "the new process did not stop");
	h_server_stop(&srv);
}

/* Runs ctl and asserts exit 0 and want in its answer. */
static void up_ctl_ok(const char *bin, const char *sock, const char *want,
		      const char *const *words)
{
	char *out = NULL, *err = NULL;
	int rc = uu_ctl(bin, sock, &out, &err, words);

	H_CHECK(rc == 0 && out && strstr(out, want), "ctl %s %s...: exit %d, stdout '%s', stderr "
		"'%s' (expected '%s')", words[0], words[1] ? words[1] : "", rc, out ? out : "",
		err ? err : "", want);
	free(out);
	free(err);
}
#define UP_CTL_OK(bin, sock, want, ...) \
	up_ctl_ok(bin, sock, want, (const char *const[]){ __VA_ARGS__, NULL })

/* The admin overrides survive an upgrade as they survive a reload: drain,
 * disable and a weight set before it are in force in the new process (show
 * backends, and where new sessions go). */
Test(integ, upgrade_keeps_the_admin_overrides, .init = uu_init, .fini = uu_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	static struct h_tag_server t[3];
	char conf[256], sock[256], text[1024], why[256], be[3][32], *out = NULL, *err = NULL;
	int port = h_free_port();

	for (int i = 0; i < 3; i++) {
		h_tag_start(&t[i], (char)('A' + i), 0, 0);
		snprintf(be[i], sizeof be[i], "127.0.0.1:%d", t[i].port);
	}
	snprintf(conf, sizeof conf, "%s/ov.conf", h_tmpdir());
	snprintf(sock, sizeof sock, "%s/admin.sock", h_tmpdir());
	snprintf(text, sizeof text, "[global]\nworkers = 2\nadmin = %s\n[route r]\n"
		 "listen = 127.0.0.1:%d\nbackend = %s %s %s\nbalance = roundrobin\n", sock, port,
		 be[0], be[1], be[2]);
	uu_write(conf, text);
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	UP_CTL_OK(bin, sock, "drains", "backend", "r", be[0], "drain");
	UP_CTL_OK(bin, sock, "weight 5 (file: 1)", "backend", "r", be[1], "weight", "5");
	UP_CTL_OK(bin, sock, "disabled", "backend", "r", be[2], "disable");
	UP_CTL_OK(bin, sock, "ok: upgraded", "upgrade");
	pid_t np = uu_nth_takeover(&p, 1, 1000);
	H_CHECK(np > 0, "no takeover in the log %s", p.log);
	uu_track(np);
	H_CHECK(up_ctl_pid(bin, sock) == np, "ctl is not answered by the new process");
	H_CHECK(uu_ctl(bin, sock, &out, &err, (const char *const[]){ "show", "backends", NULL }) ==
		0 && out, "show backends: %s", err ? err : "");
	char want[3][64];
	snprintf(want[0], sizeof want[0], "%s  drain ", be[0]);
	snprintf(want[2], sizeof want[2], "%s  disabled ", be[2]);
	const char *b1 = strstr(out, be[1]);
	H_CHECK(strstr(out, want[0]) && strstr(out, want[2]) && b1 && strstr(b1, "5 (file: 1)"),
		"the new process's backends:\n%s", out);
	free(out);
	free(err);
	int n[3] = { 0 };
	for (int i = 0; i < 12; i++) {
		char c = h_tag_of(&p.addr, NULL);
		if (c >= 'A' && c <= 'C')
			n[c - 'A']++;
	}
	H_CHECK(n[0] == 0 && n[1] == 12 && n[2] == 0, "12 sessions after the upgrade: A (drained) "
		"%d, B %d, C (disabled) %d", n[0], n[1], n[2]);
	H_CHECK(h_log_lines(&p, "admin overrides", "of 3 backends carried over", NULL) == 1,
		"the new process did not say what it carried over; log %s", p.log);
	H_CHECK(h_proxy_wait(&p, 10000) != -1, "the old process did not exit");
	kill(np, SIGTERM);
	H_CHECK(uu_wait_gone(NULL, np, 10000) == 0, "the new process did not stop");
	for (int i = 0; i < 3; i++)
		h_tag_stop(&t[i]);
}

/* What balancing and admission know goes over with the sessions
 * (session_handoff.h, upgrade.c's state): a backend its checks marked down
 * is down in the new process at once (without it, the new checker would
 * need fall failed checks, 0.9 s here, with sessions sent to it
 * meanwhile); a source at its source_max_conns stays there (its three held
 * sessions moved and count); a source that used its source_conn_rate in
 * the last second is still at it. */
static int up_refused(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, 0);

	return n < 0 && errno == ECONNRESET;
}

Test(integ, upgrade_keeps_health_source_counts_and_rates, .init = uu_init, .fini = uu_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	static struct h_tag_server a;
	char conf[256], sock[256], text[1024], why[256], *out = NULL, *err = NULL;
	int port = h_free_port(), dead = h_free_port(), held[3], c;

	h_tag_start(&a, 'A', 1, 0);
	snprintf(conf, sizeof conf, "%s/hs.conf", h_tmpdir());
	snprintf(sock, sizeof sock, "%s/admin.sock", h_tmpdir());
	snprintf(text, sizeof text, "[global]\nworkers = 2\nadmin = %s\n[route r]\n"
		 "listen = 127.0.0.1:%d\nbackend = 127.0.0.1:%d 127.0.0.1:%d\ncheck = tcp\n"
		 "check_interval = 300ms\nfall = 3\nrise = 2\nsource_max_conns = 3\n"
		 "source_conn_rate = 3\n", sock, port, a.port, dead);
	uu_write(conf, text);
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	char want[64];
	snprintf(want, sizeof want, "127.0.0.1:%d\",\"configured", dead);
	int64_t end = h_now_ms() + 10000;
	for (;;) { /* three failed checks */
		H_CHECK(uu_ctl(bin, sock, &out, &err, (const char *const[]){ "show", "backends",
			"--json", NULL }) == 0 && out, "show backends: %s", err ? err : "");
		const char *b = strstr(out, want);
		int down = b && strstr(b, "\"health\":\"down\"") &&
			   strstr(b, "\"health\":\"down\"") < strchr(b, '}');
		free(out);
		free(err);
		if (down)
			break;
		H_CHECK(h_now_ms() < end, "the dead backend was not marked down within 10 s");
		h_sleep_ms(50);
	}
	/* 127.0.0.1: three held sessions, its source_max_conns */
	for (int i = 0; i < 3; i++) {
		char t = 0;
		held[i] = h_connect_from(port, "127.0.0.1", 2000);
		H_CHECK(held[i] >= 0 && recv(held[i], &t, 1, 0) == 1 && t == 'A', "held session %d", i);
	}
	/* 127.0.0.2: three sessions just now, its source_conn_rate */
	int64_t t0 = h_now_ms();
	for (int i = 0; i < 3; i++) {
		char t = 0;
		c = h_connect_from(port, "127.0.0.2", 2000);
		H_CHECK(c >= 0 && recv(c, &t, 1, 0) == 1 && t == 'A', "rate session %d", i);
		close(c);
	}
	UP_CTL_OK(bin, sock, "3 sessions handed over", "upgrade");
	pid_t np = uu_nth_takeover(&p, 1, 1000);
	H_CHECK(np > 0, "no takeover in the log %s", p.log);
	uu_track(np);
	int64_t t_up = h_now_ms() - t0;

	H_CHECK(uu_ctl(bin, sock, &out, &err, (const char *const[]){ "show", "backends", "--json",
		NULL }) == 0 && out, "show backends: %s", err ? err : "");
	const char *b = strstr(out, want);
	H_CHECK(b && strstr(b, "\"health\":\"down\"") && strstr(b, "\"health\":\"down\"") <
		strchr(b, '}'), "the dead backend is not down in the new process: %s", out);
	free(out);
	free(err);
	c = h_connect_from(port, "127.0.0.1", 2000);
	H_CHECK(c >= 0 && up_refused(c), "a fourth session of 127.0.0.1 was let in: its three "
		"held sessions did not count in the new process");
	close(c);
	if (h_now_ms() - t0 < 900) {
		c = h_connect_from(port, "127.0.0.2", 2000);
		H_CHECK(c >= 0 && up_refused(c), "127.0.0.2 got a fourth session within a second "
			"(%lld ms after its three): its rate did not go over", (long long)(h_now_ms() - t0));
		close(c);
	} else {
		fprintf(stderr, "upgrade_keeps_health_source_counts_and_rates: the upgrade took %lld "
			"ms: the rate's second was over, not looked at\n", (long long)t_up);
	}
	/* one held session ends: a new one fits again (once the three
	 * arrivals' second has slid by: they count in its rate too) */
	close(held[0]);
	h_sleep_ms((int)(t0 + 2100 - h_now_ms() > 100 ? t0 + 2100 - h_now_ms() : 100));
	c = h_connect_from(port, "127.0.0.1", 2000);
	char t = 0;
	H_CHECK(c >= 0 && recv(c, &t, 1, 0) == 1 && t == 'A', "127.0.0.1 below its limit again");
	close(c);
	for (int i = 1; i < 3; i++)
		close(held[i]);
	H_CHECK(h_proxy_wait(&p, 10000) != -1, "the old process did not exit");
	kill(np, SIGTERM);
	H_CHECK(uu_wait_gone(NULL, np, 10000) == 0, "the new process did not stop");
	h_tag_stop(&a);
}

/* The notify socket hears MAINPID=<new pid> and READY=1 from the new
 * process (SCM_CREDENTIALS says who sent it), and nothing from the old one
 * but MAINPID=<new pid> (for NotifyAccess=main): no READY, no STOPPING. */
Test(integ, upgrade_tells_systemd_the_new_main_pid, .init = uu_init, .fini = uu_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int one = 1, fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	char why[256];

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s/notify.sock", h_tmpdir());
	H_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sun, sizeof sun) == 0 &&
		setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) == 0,
		"notify socket: %s", strerror(errno));
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	char port[32];
	snprintf(port, sizeof port, "127.0.0.1:%d", h_free_port());
	setenv("NOTIFY_SOCKET", sun.sun_path, 1);
	h_proxy_up(&p, bin, "auto", port, backends, NULL);
	unsetenv("NOTIFY_SOCKET");
	pid_t old = p.pid;
	pid_t np = up_upgrade(&p, old, 1);

	/* every datagram until the old process is gone, with its sender */
	int new_mainpid = 0, new_ready = 0, old_mainpid = 0, old_other = 0;
	char seen[2048] = "";
	for (int i = 0; i < 16; i++) {
		char buf[512], cbuf[CMSG_SPACE(sizeof(struct ucred))];
		struct iovec iov = { buf, sizeof buf - 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				     .msg_controllen = sizeof cbuf };
		h_set_timeouts(fd, 500);
		ssize_t n = recvmsg(fd, &mh, 0);
		if (n < 0)
			break;
		buf[n] = '\0';
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		pid_t from = 0;
		if (cm && cm->cmsg_type == SCM_CREDENTIALS)
			from = ((struct ucred *)CMSG_DATA(cm))->pid;
		char want[32];
		snprintf(want, sizeof want, "MAINPID=%d", (int)np);
		size_t k = strlen(seen);
		snprintf(seen + k, sizeof seen - k, "[%d: %s] ", (int)from, buf);
		if (from == np) {
			new_mainpid |= strstr(buf, want) != NULL;
			new_ready |= strstr(buf, "READY=1") != NULL;
		} else if (from == old) {
			if (strstr(buf, want))
				old_mainpid = 1;
			else if (strstr(buf, "READY=1") && !old_mainpid && !new_ready)
				; /* the first start's READY=1 */
			else
				old_other = 1;
		}
	}
	H_CHECK(new_mainpid && new_ready, "expected MAINPID=%d and READY=1 from the new process; "
		"datagrams: %s", (int)np, seen);
	H_CHECK(old_mainpid, "expected MAINPID=%d from the old process; datagrams: %s", (int)np,
		seen);
	H_CHECK(!old_other, "the old process said more after the hand-over; datagrams: %s", seen);
	H_CHECK(h_echo_roundtrip(&p.addr, 100, 3, 3000, why, sizeof why) == 0, "serving: %s", why);
	kill(np, SIGTERM);
	H_CHECK(uu_wait_gone(NULL, np, 10000) == 0, "the new process did not stop");
	close(fd);
	h_server_stop(&srv);
}

/* The pid of "upgrade: started ... as process PID" in the log, or 0. */
static pid_t up_started_pid(const struct h_proxy *p, int ms)
{
	return uu_log_pid(p->log, "upgrade: started ", " as process ", NULL, 1, ms);
}

/* The wait status of pid, a process that comes back to this subreaper
 * (-1: not within ms). */
static int up_wait_status(pid_t pid, int ms)
{
	int64_t end = h_now_ms() + ms;
	int st;

	while (h_now_ms() < end) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		h_sleep_ms(5);
	}
	return -1;
}

/* SIGTERM to the old process right after SIGUSR2, at several moments up
 * to the new process saying it serves. Whatever the moment, no client is
 * reset, the old process exits 0, and the end is the one the log names
 * (upgrade.h): "the new process is ready" -> it serves on; "abandoned" ->
 * it was sent SIGTERM (not SIGKILL, which would reset what its workers
 * accepted) and ends with status 0, or by that SIGTERM when it came before
 * the new process blocks signals (it has accepted nothing then), and the
 * port refuses: nothing serves. */
Test(integ, upgrade_stop_signal_during_the_upgrade_resets_nobody, .init = uu_init,
     .fini = uu_fini, .timeout = 120)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	static struct up_clients cl;
	static struct h_tag_server tag;
	static const int delay_ms[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 40, -1 }; /* -1: once it serves */
	char conf[256], text[1024], why[256], tagb[32];
	int took_over = 0, abandoned = 0, at_signal = 0, drained = 0;
	long tried = 0, reset = 0;

	h_tag_start(&tag, 'T', 0, 0);
	snprintf(tagb, sizeof tagb, "127.0.0.1:%d", tag.port);
	snprintf(conf, sizeof conf, "%s/st.conf", h_tmpdir());
	for (unsigned k = 0; k < sizeof delay_ms / sizeof delay_ms[0]; k++) {
		int port = h_free_port();
		snprintf(text, sizeof text, "[global]\nworkers = 2\n[route r]\nlisten = 127.0.0.1:%d\n"
			 "backend = %s\n", port, tagb);
		uu_write(conf, text);
		const char *args[] = { "-c", conf, NULL };
		H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
		up_clients_start(&cl, &p.addr, 2, NULL);
		h_sleep_ms(50);
		H_CHECK(kill(p.pid, SIGUSR2) == 0, "SIGUSR2");
		if (delay_ms[k] > 0)
			h_sleep_ms(delay_ms[k]);
		if (delay_ms[k] < 0) {
			int64_t end = h_now_ms() + 15000;
			while (!h_log_lines(&p, "upgrade: serving in place of the old process", NULL) &&
			       h_now_ms() < end)
				h_sleep_ms(1);
		}
		H_CHECK(kill(p.pid, SIGTERM) == 0, "SIGTERM");
		pid_t old = p.pid, np = up_started_pid(&p, 5000);
		H_CHECK(np > 0, "delay %d: no new process was started; log %s", delay_ms[k], p.log);
		uu_track(np);
		int st = h_proxy_wait(&p, 15000);
		H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
			"delay %d: the old process %d: status %d; log %s", delay_ms[k], (int)old, st,
			p.log);
		int polled = h_log_lines(&p, "SIGTERM during the upgrade: the new process is ready",
					 NULL);
		int ready = polled + h_log_lines(&p, "upgrade: process ", " serves now", NULL);
		at_signal += polled;
		int gave_up = h_log_lines(&p, "SIGTERM: the upgrade under way is abandoned", NULL);
		H_CHECK(ready + gave_up == 1 || (ready == 2 && !gave_up), "delay %d: the log names "
			"%d takeovers and %d abandons; log %s", delay_ms[k], ready, gave_up, p.log);
		if (ready) {
			/* the service runs on in the new process */
			H_CHECK(h_tag_of(&p.addr, NULL) == 'T', "delay %d: the new process %d does not "
				"serve after the old one stopped", delay_ms[k], (int)np);
			up_clients_stop(&cl);
			kill(np, SIGTERM);
			took_over++;
		} else {
			int nst = up_wait_status(np, 15000);
			H_CHECK(nst != -1 && ((WIFEXITED(nst) && WEXITSTATUS(nst) == 0) ||
					      (WIFSIGNALED(nst) && WTERMSIG(nst) == SIGTERM)),
				"delay %d: the abandoned new process %d: status %d (%s %d); log %s",
				delay_ms[k], (int)np, nst, nst != -1 && WIFSIGNALED(nst) ? "signal" : "exit",
				nst == -1 ? -1 : WIFSIGNALED(nst) ? WTERMSIG(nst) : WEXITSTATUS(nst), p.log);
			drained += WIFEXITED(nst);
			int fd = h_connect(&p.addr, 1000);
			H_CHECK(fd < 0 && errno == ECONNREFUSED, "delay %d: something still accepts "
				"after both stopped", delay_ms[k]);
			up_clients_stop(&cl);
			abandoned++;
		}
		H_CHECK(uu_wait_gone(NULL, np, 15000) == 0, "delay %d: the new process did not stop",
			delay_ms[k]);
		H_CHECK(cl.reset == 0, "delay %d: %ld clients of %ld reset (last: %s); log %s",
			delay_ms[k], (long)cl.reset, (long)cl.tried, cl.last_reset, p.log);
		tried += cl.tried;
		reset += cl.reset;
	}
	fprintf(stderr, "SIGTERM during an upgrade, %zu times: the new process took over %d times "
		"(%d of them found ready when the signal came), was sent SIGTERM %d times (%d of them "
		"drained and exited 0, the others ended before they blocked it); clients tried %ld, "
		"reset %ld\n", sizeof delay_ms / sizeof delay_ms[0], took_over, at_signal, abandoned,
		drained, tried, reset);
	H_CHECK(took_over >= 1 && abandoned >= 1, "the delays did not reach both ends (took over "
		"%d, abandoned %d)", took_over, abandoned);
	h_tag_stop(&tag);
}

/* ---- lame duck ------------------------------------------------------------- */

/* SIGTERM with stats on: /health answers 503 at once while connections are
 * still accepted and served for `lameduck`; then the port refuses; no
 * client is reset on the way. */
Test(integ, lameduck_health_503_while_still_accepting, .init = uu_init, .fini = uu_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	static struct up_clients cl;
	char conf[256], text[1024], why[256], body[256];
	int port = h_free_port(), s1 = h_free_port();
	static struct h_tag_server tag;
	char tagb[32];

	h_tag_start(&tag, 'T', 0, 0);
	snprintf(tagb, sizeof tagb, "127.0.0.1:%d", tag.port);
	snprintf(conf, sizeof conf, "%s/ld.conf", h_tmpdir());
	snprintf(text, sizeof text, "[global]\nworkers = 2\nstats = 127.0.0.1:%d\nlameduck = 1500ms\n"
		 "[route r]\nlisten = 127.0.0.1:%d\nbackend = %s\n", s1, port, tagb);
	uu_write(conf, text);
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	struct h_addr stats;
	uu_local(&stats, s1);
	H_CHECK(up_health(&stats, body, sizeof body) == 200, "/health before SIGTERM: %s", body);

	up_clients_start(&cl, &p.addr, 2, NULL);
	h_sleep_ms(100);
	int64_t t0 = h_now_ms();
	H_CHECK(kill(p.pid, SIGTERM) == 0, "SIGTERM");
	int code = 0;
	for (int i = 0; i < 100 && (code = up_health(&stats, body, sizeof body)) == 200; i++)
		h_sleep_ms(5);
	int64_t t_503 = h_now_ms() - t0;
	H_CHECK(code == 503 && strstr(body, "draining"), "/health after SIGTERM: %d '%s'", code,
		body);
	long ok_at_503 = cl.ok;
	/* accepted and served after /health turned 503 */
	int64_t end = h_now_ms() + 5000;
	while (cl.ok < ok_at_503 + 20 && h_now_ms() < end)
		h_sleep_ms(5);
	H_CHECK(cl.ok >= ok_at_503 + 20, "only %ld round trips after /health said 503 (the "
		"listeners closed at once?)", cl.ok - ok_at_503);
	H_CHECK(up_health(&stats, NULL, 0) == 503, "/health during the lame duck");
	/* then the port closes */
	int64_t t_closed = -1;
	end = h_now_ms() + 10000;
	while (h_now_ms() < end) {
		int fd = h_connect(&p.addr, 200);
		if (fd < 0 && errno == ECONNREFUSED) {
			t_closed = h_now_ms() - t0;
			break;
		}
		if (fd >= 0)
			close(fd);
		h_sleep_ms(20);
	}
	up_clients_stop(&cl);
	H_CHECK(t_closed > 0, "the port still accepts 10 s after SIGTERM");
	int st = h_proxy_wait(&p, 10000);
	fprintf(stderr, "lame duck 1500 ms: /health 503 after %lld ms, port refusing after %lld ms; "
		"clients: tried %ld, ok %ld, refused %ld, reset %ld\n", (long long)t_503,
		(long long)t_closed, (long)cl.tried, (long)cl.ok, (long)cl.refused, (long)cl.reset);
	H_CHECK(cl.reset == 0, "%ld clients reset during the stop (last: %s)", (long)cl.reset,
		cl.last_reset);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
	h_tag_stop(&tag);
}

/* ---- listener closes drop nothing queued ----------------------------------- */

/* Reloads that remove and add back a listen address while clients connect
 * to it as fast as they can: a connect either fails (the address is gone)
 * or is served; none is reset after the kernel accepted it. */
Test(integ, reload_removing_a_listener_resets_nobody, .init = uu_init, .fini = uu_fini,
     .timeout = 90)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	static struct up_clients cl;
	char conf[256], with[1024], without[1024], why[256];
	int a = h_free_port(), b = h_free_port();
	static struct h_tag_server tag;
	char tagb[32];

	h_tag_start(&tag, 'T', 0, 0);
	snprintf(tagb, sizeof tagb, "127.0.0.1:%d", tag.port);
	snprintf(conf, sizeof conf, "%s/rl.conf", h_tmpdir());
	snprintf(with, sizeof with, "[global]\nworkers = 2\n[route r]\nlisten = 127.0.0.1:%d\n"
		 "listen = 127.0.0.1:%d\nbackend = %s\n", a, b, tagb);
	snprintf(without, sizeof without, "[global]\nworkers = 2\n[route r]\n"
		 "listen = 127.0.0.1:%d\nbackend = %s\n", a, tagb);
	uu_write(conf, with);
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	struct h_addr to_b;
	uu_local(&to_b, b);
	up_clients_start(&cl, &to_b, 4, NULL);
	for (int n = 1; n <= 20; n++) {
		uu_write(conf, n % 2 ? without : with);
		H_CHECK(kill(p.pid, SIGHUP) == 0, "SIGHUP");
		int64_t end = h_now_ms() + 10000;
		while (h_log_lines(&p, "SIGHUP: reloaded", NULL) < n && h_now_ms() < end)
			h_sleep_ms(5);
		H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", NULL) == n, "reload %d not done", n);
		h_sleep_ms(150); /* clients connect meanwhile */
	}
	up_clients_stop(&cl);
	fprintf(stderr, "20 reloads removing/adding a listener: connections tried %ld, ok %ld, "
		"refused %ld, reset %ld\n", (long)cl.tried, (long)cl.ok, (long)cl.refused,
		(long)cl.reset);
	H_CHECK(cl.reset == 0, "%ld of %ld connections reset across reloads that removed their "
		"listener (last: %s)", (long)cl.reset, (long)cl.tried, cl.last_reset);
	H_CHECK(cl.ok > 50, "only %ld round trips", (long)cl.ok);
	h_proxy_down(&p);
	h_tag_stop(&tag);
}
