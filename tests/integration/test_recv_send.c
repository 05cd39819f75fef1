/* SPDX-License-Identifier: MIT */
/* Integration cases for `splicer recv` and `splicer send` (issue 6): every
 * method moves 256 MiB intact (SHA-256 at both ends, content against the
 * generated stream) into ext4 and tmpfs; send with every method from a
 * file and from a stdin pipe; recv into stdout (a pipe, an O_APPEND file);
 * ENOSPC on a 1 MiB tmpfs; peers that reset on either side; --count and
 * --keep; the command line.
 *
 * recv and send run as children of the test with their stdin/stdout chosen
 * here (the harness's h_proxy_start sends stdout to /dev/null and waits for
 * the proxy's ready line, not recv's "recv: listening on ADDR"). rs_fini()
 * kills them, unmounts the tmpfs mounts of a failed test and removes the big
 * data files, then runs h_fini(). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG (256 * H_MIB)

/* ---- children, mounts, files to clean up ------------------------------------ */

struct rs_proc {
	pid_t pid;        /* 0 once reaped */
	int status;
	char log[256];    /* its stderr */
	struct h_addr addr; /* recv: from the ready line */
};

#define RS_MAX 8
static struct rs_proc *rs_live[RS_MAX];
#define RS_PATH 320
static char rs_mounts[RS_MAX][RS_PATH];
static char rs_files[RS_MAX][RS_PATH];
static int rs_seq;

static void rs_track(char list[][RS_PATH], const char *path)
{
	for (int i = 0; i < RS_MAX; i++)
		if (!list[i][0]) {
			snprintf(list[i], RS_PATH, "%s", path);
			return;
		}
}

static void rs_reap(struct rs_proc *p)
{
	for (int i = 0; i < RS_MAX; i++)
		if (rs_live[i] == p)
			rs_live[i] = NULL;
}

static void rs_umount_all(void)
{
	for (int i = 0; i < RS_MAX; i++)
		if (rs_mounts[i][0]) {
			umount2(rs_mounts[i], MNT_DETACH);
			rmdir(rs_mounts[i]);
			rs_mounts[i][0] = 0;
		}
}

static void rs_fini(void)
{
	for (int i = 0; i < RS_MAX; i++) {
		struct rs_proc *p = rs_live[i];
		if (p && p->pid > 0) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &p->status, 0);
			p->pid = 0;
		}
		rs_live[i] = NULL;
	}
	for (int i = 0; i < RS_MAX; i++)
		if (rs_files[i][0]) {
			unlink(rs_files[i]);
			rs_files[i][0] = 0;
		}
	rs_umount_all();
	h_fini();
}

static char *rs_read(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	ssize_t r;

	if (!buf)
		return NULL;
	while (fd >= 0 && (r = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)r;
		if (len + 1 == cap) {
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	if (fd >= 0)
		close(fd);
	buf[len] = 0;
	return buf;
}

/* Prints the stderr of every child of this test; then fails like H_CHECK. */
#define RS_CHECK(cond, ...)                                                    \
	do {                                                                   \
		if (!(cond)) {                                                 \
			rs_note();                                             \
			H_CHECK(0, __VA_ARGS__);                               \
		}                                                              \
	} while (0)

static struct rs_proc *rs_all[RS_MAX];

static void rs_note(void)
{
	for (int i = 0; i < RS_MAX && rs_all[i]; i++) {
		fprintf(stderr, "[integ] %s pid %d stderr:\n", rs_all[i]->log, (int)rs_all[i]->pid);
		h_print_tail(rs_all[i]->log, 20);
	}
}

/* Starts `bin args...` with the given stdin/stdout (-1: /dev/null) and
 * stderr to a log; with ready != 0 waits (bounded) for "recv: listening on
 * ADDR" and parses ADDR. */
static void rs_start(struct rs_proc *p, const char *bin, const char *const *args, int in, int out,
		     int ready)
{
	char *argv[32];
	int n = 0, nul = open("/dev/null", O_RDWR | O_CLOEXEC), logfd;

	memset(p, 0, sizeof(*p));
	argv[n++] = (char *)bin;
	for (int i = 0; args[i] && n < 31; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	snprintf(p->log, sizeof(p->log), "%s/rs-%d.err", h_tmpdir(), ++rs_seq);
	logfd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	H_CHECK(nul >= 0 && logfd >= 0, "open /dev/null or %s: %s", p->log, strerror(errno));
	pid_t parent = getpid(), pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		if (dup2(in >= 0 ? in : nul, 0) < 0 || dup2(out >= 0 ? out : nul, 1) < 0 ||
		    dup2(logfd, 2) < 0)
			_exit(127);
		syscall(SYS_close_range, 3u, ~0u, 0u);
		signal(SIGPIPE, SIG_DFL); /* the test ignores it; exec keeps ignored signals */
		execv(bin, argv);
		_exit(127);
	}
	close(nul);
	close(logfd);
	H_CHECK(pid > 0, "fork: %s", strerror(errno));
	p->pid = pid;
	for (int i = 0; i < RS_MAX; i++)
		if (!rs_live[i]) {
			rs_live[i] = p;
			break;
		}
	for (int i = 0; i < RS_MAX; i++)
		if (!rs_all[i] || rs_all[i] == p) {
			rs_all[i] = p;
			break;
		}
	if (!ready)
		return;
	int64_t deadline = h_now_ms() + H_T(5000);
	for (;;) {
		char *text = rs_read(p->log), *k = text ? strstr(text, "recv: listening on ") : NULL;
		char *e = k ? strchr(k, '\n') : NULL;
		int st;
		if (e) {
			*e = 0;
			int bad = h_addr_parse(k + strlen("recv: listening on "), &p->addr);
			free(text);
			RS_CHECK(!bad, "cannot parse recv's ready line in %s", p->log);
			RS_CHECK(p->addr.ss.ss_family == AF_UNIX || h_addr_port(&p->addr) > 0,
				 "recv's ready line shows port 0 instead of the port chosen");
			return;
		}
		free(text);
		if (waitpid(pid, &st, WNOHANG) == pid) {
			p->pid = 0;
			p->status = st;
			rs_reap(p);
			RS_CHECK(0, "recv exited (status 0x%x) before its ready line", st);
		}
		RS_CHECK(h_now_ms() < deadline, "no \"recv: listening on\" line within %lld ms",
			 (long long)H_T(5000));
		h_sleep_ms(5);
	}
}

/* The first sanitizer report in text, or NULL. */
static const char *rs_sanitizer(const char *text)
{
	static const char *const needles[] = { "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
					       "runtime error:", "AddressSanitizer:DEADLYSIGNAL" };

	for (size_t i = 0; text && i < sizeof(needles) / sizeof(needles[0]); i++)
		if (strstr(text, needles[i]))
			return needles[i];
	return NULL;
}

/* Waits (bounded) for the child's exit; returns its exit status (fails the
 * test on a timeout or a signal). */
static int rs_wait(struct rs_proc *p, int timeout_ms, const char *what)
{
	int64_t deadline = h_now_ms() + timeout_ms;
	int st;

	while (p->pid > 0 && waitpid(p->pid, &st, WNOHANG) != p->pid) {
		if (h_now_ms() > deadline) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &p->status, 0);
			p->pid = 0;
			rs_reap(p);
			RS_CHECK(0, "%s did not exit within %d ms (killed)", what, timeout_ms);
		}
		h_sleep_ms(2);
	}
	if (p->pid > 0) {
		p->status = st;
		p->pid = 0;
		rs_reap(p);
	}
	RS_CHECK(WIFEXITED(p->status), "%s ended by signal %d", what, WTERMSIG(p->status));
	char *text = rs_read(p->log);
	const char *san = rs_sanitizer(text);
	free(text);
	RS_CHECK(!san, "%s: its stderr (%s) holds a sanitizer report (\"%s\")", what, p->log, san);
	return WEXITSTATUS(p->status);
}

/* ---- reports and files ------------------------------------------------------ */

struct rs_rep {
	int found;
	uint64_t bytes;
	char sha[65];
	char method[16];
	int incomplete;
	char line[512];
};

/* The n-th per-connection report line "CMD: NAME: BYTES bytes in ..." of
 * text, or with n < 0 the total line. */
static struct rs_rep rs_report(const char *text, const char *cmd, const char *name, int n)
{
	struct rs_rep r;
	char prefix[300];
	int seen = 0;

	memset(&r, 0, sizeof(r));
	snprintf(prefix, sizeof(prefix), "%s: %s: ", cmd, name);
	for (const char *l = text; l && *l;) {
		const char *e = strchr(l, '\n');
		size_t len = e ? (size_t)(e - l) : strlen(l);
		char line[512];
		snprintf(line, sizeof(line), "%.*s", (int)len, l);
		l = e ? e + 1 : NULL;
		if (strncmp(line, prefix, strlen(prefix)) || !strstr(line, " bytes in "))
			continue;
		if ((n < 0) != (strstr(line, ", total of ") != NULL) || (n >= 0 && seen++ != n))
			continue;
		const char *s = strstr(line, ", sha256 "), *m = strstr(line, ", method ");
		r.found = 1;
		r.bytes = strtoull(line + strlen(prefix), NULL, 10);
		if (s)
			snprintf(r.sha, sizeof(r.sha), "%.64s", s + 9);
		if (m)
			snprintf(r.method, sizeof(r.method), "%.*s", (int)strcspn(m + 9, ","), m + 9);
		r.incomplete = strstr(line, ", incomplete") != NULL;
		snprintf(r.line, sizeof(r.line), "%s", line);
		break;
	}
	return r;
}

/* A file checked against consecutive slices of generated streams. */
struct rs_seg {
	uint64_t seed, len;
};

struct rs_file {
	uint64_t size;
	char sha[65];
	int64_t mismatch; /* first offset that differs from the segments, or -1 */
};

static struct rs_file rs_check_file(const char *path, const struct rs_seg *seg, int nseg)
{
	static unsigned char buf[1 << 20];
	struct rs_file f = { .mismatch = -1 };
	struct h_sha sha;
	unsigned char d[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC), si = 0;
	uint64_t in_seg = 0;
	ssize_t r;

	h_sha_init(&sha);
	while (fd >= 0 && (r = read(fd, buf, sizeof(buf))) > 0) {
		h_sha_update(&sha, buf, (size_t)r);
		for (size_t done = 0; done < (size_t)r && f.mismatch < 0;) {
			if (si >= nseg) {
				f.mismatch = (int64_t)(f.size + done); /* longer than expected */
				break;
			}
			size_t k = (size_t)r - done;
			if (k > seg[si].len - in_seg)
				k = (size_t)(seg[si].len - in_seg);
			size_t bad = h_gen_check(seg[si].seed, in_seg, buf + done, k);
			if (bad < k)
				f.mismatch = (int64_t)(f.size + done + bad);
			done += k;
			in_seg += k;
			if (in_seg == seg[si].len) {
				si++;
				in_seg = 0;
			}
		}
		f.size += (uint64_t)r;
	}
	if (fd >= 0)
		close(fd);
	h_sha_final(&sha, d);
	h_hex32(d, f.sha);
	return f;
}

/* Writes len bytes of stream seed into path. */
static void rs_make_file(const char *path, uint64_t seed, uint64_t len)
{
	static unsigned char buf[1 << 20];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	H_CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
	rs_track(rs_files, path);
	for (uint64_t off = 0; off < len;) {
		size_t k = len - off < sizeof(buf) ? (size_t)(len - off) : sizeof(buf);
		h_gen(seed, off, buf, k);
		H_CHECK(write(fd, buf, k) == (ssize_t)k, "write %s: %s", path, strerror(errno));
		off += k;
	}
	close(fd);
}

static uint64_t rs_size(const char *path)
{
	struct stat st;
	return stat(path, &st) ? 0 : (uint64_t)st.st_size;
}

/* ---- filesystems ------------------------------------------------------------ */

/* The type of the mount holding path, from /proc/self/mountinfo (statfs's
 * magic is the same for ext2, ext3 and ext4). */
static int rs_fstype(const char *path, char *type, size_t n)
{
	struct stat st;
	char line[1024], dev[32];
	FILE *f;
	int found = 0;

	if (stat(path, &st) || !(f = fopen("/proc/self/mountinfo", "re")))
		return -1;
	snprintf(dev, sizeof(dev), " %u:%u ", major(st.st_dev), minor(st.st_dev));
	while (!found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		if (strstr(line, dev) && sep && strstr(line, dev) < sep) {
			snprintf(type, n, "%.*s", (int)strcspn(sep + 3, " "), sep + 3);
			found = 1;
		}
	}
	fclose(f);
	return found ? 0 : -1;
}

/* A directory on ext4: the test's temp dir when it is on ext4, else a temp
 * dir on the first writable ext4 mount; skips the test when there is none. */
static const char *rs_ext4_dir(void)
{
	static char dir[RS_PATH];
	char type[64] = "?", line[1024];
	FILE *f;

	if (!rs_fstype(h_tmpdir(), type, sizeof(type)) && !strcmp(type, "ext4"))
		return h_tmpdir();
	if ((f = fopen("/proc/self/mountinfo", "re"))) {
		while (fgets(line, sizeof(line), f)) {
			char mp[256], *sep = strstr(line, " - ");
			if (!sep || strncmp(sep + 3, "ext4 ", 5) ||
			    sscanf(line, "%*s %*s %*s %*s %255s", mp) != 1)
				continue;
			snprintf(dir, sizeof(dir), "%s/splicer-rs.XXXXXX", strcmp(mp, "/") ? mp : "");
			if (mkdtemp(dir)) {
				fclose(f);
				rs_track(rs_mounts, dir); /* rmdir'd by rs_fini (umount fails harmlessly) */
				return dir;
			}
		}
		fclose(f);
	}
	cr_skip_test("no writable ext4 filesystem: %s is on %s and no ext4 mount accepts a "
		     "directory", h_tmpdir(), type);
	return NULL;
}

/* A tmpfs of `size` mounted at TMPDIR/name (root only), unmounted at the end
 * of the test; returns its path, or NULL with the reason in why. */
static const char *rs_tmpfs(const char *name, const char *size, char *why, size_t n)
{
	static char dir[RS_MAX][256];
	static int k;
	char opts[64];
	char *d = dir[k++ % RS_MAX];

	snprintf(d, 256, "%s/%s", h_tmpdir(), name);
	snprintf(opts, sizeof(opts), "size=%s,mode=0755", size);
	if (mkdir(d, 0755) && errno != EEXIST) {
		snprintf(why, n, "mkdir %s: %s", d, strerror(errno));
		return NULL;
	}
	if (mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, opts)) {
		snprintf(why, n, "mount -t tmpfs -o %s at %s: %s (needs root / CAP_SYS_ADMIN)", opts, d,
			 strerror(errno));
		rmdir(d);
		return NULL;
	}
	rs_track(rs_mounts, d);
	return d;
}

/* A tmpfs directory for the 256 MiB runs: an own mount, else /dev/shm. */
static const char *rs_tmpfs_dir(void)
{
	static char shm[64];
	char why[300];
	const char *d = rs_tmpfs("tmpfs", "600m", why, sizeof(why));
	struct statfs sf;

	if (d)
		return d;
	if (!statfs("/dev/shm", &sf) && sf.f_type == 0x01021994 /* TMPFS_MAGIC */) {
		snprintf(shm, sizeof(shm), "/dev/shm/splicer-rs.XXXXXX");
		if (mkdtemp(shm)) {
			rs_track(rs_mounts, shm);
			return shm;
		}
	}
	cr_skip_test("no tmpfs: %s; /dev/shm is not a writable tmpfs", why);
	return NULL;
}

/* ---- recv: 256 MiB per method into ext4 and tmpfs -------------------------- */

/* The test sends len bytes of stream seed to recv's address and closes. */
static void rs_send_stream(const struct rs_proc *r, uint64_t seed, uint64_t len, struct h_xfer *tx)
{
	int fd = h_connect(&r->addr, 2000);

	RS_CHECK(fd >= 0, "connect to recv at %s: %s", r->addr.text, strerror(errno));
	h_xfer_init(tx, fd, seed, len, h_now_ms() + H_T(40000));
	tx->shut_wr = 1;
	h_xfer_send(tx);
	close(fd);
}

static void recv_big(const char *dir, const char *method)
{
	static struct rs_proc r;
	static struct h_xfer tx;
	char path[300], hex[65];
	const char *bin = h_binary(0);
	uint64_t seed = 0x2ECF000000000000ull ^ (uint64_t)method[0];

	snprintf(path, sizeof(path), "%s/recv-%s.bin", dir, method);
	rs_track(rs_files, path);
	const char *args[] = { "recv", "127.0.0.1:0", path, "--method", method, "--sha256", NULL };
	rs_start(&r, bin, args, -1, -1, 1);
	rs_send_stream(&r, seed, BIG, &tx);
	RS_CHECK(tx.err == 0 && tx.bytes == BIG, "sending to recv: %s after %llu bytes",
		 strerror(tx.err), (unsigned long long)tx.bytes);
	int st = rs_wait(&r, H_T(30000), "recv");
	char *err = rs_read(r.log);
	struct rs_rep rep = rs_report(err, "recv", path, 0);
	RS_CHECK(st == 0, "recv --method %s exited %d", method, st);
	RS_CHECK(rep.found, "no report line in recv's stderr");
	RS_CHECK(rep.bytes == BIG && !rep.incomplete, "report: %s (expected %llu bytes, complete)",
		 rep.line, (unsigned long long)BIG);
	RS_CHECK(!strcmp(rep.method, method), "report names method '%s', expected '%s'", rep.method,
		 method);
	h_hex32(tx.sha, hex);
	RS_CHECK(!strcmp(rep.sha, hex), "recv's sha256 %s differs from the sender's %s", rep.sha, hex);
	struct rs_seg seg = { seed, BIG };
	struct rs_file f = rs_check_file(path, &seg, 1);
	RS_CHECK(f.size == BIG, "%s holds %llu bytes, expected %llu", path,
		 (unsigned long long)f.size, (unsigned long long)BIG);
	RS_CHECK(f.mismatch < 0, "%s differs from the stream sent at offset %lld", path,
		 (long long)f.mismatch);
	RS_CHECK(!strcmp(f.sha, hex), "sha256 of %s is %s, sender's %s", path, f.sha, hex);
	free(err);
	unlink(path);
}

#define RECV_BIG(fs, m)                                                        \
	Test(integ, recv_##fs##_##m, .init = h_init, .fini = rs_fini, .timeout = 90) \
	{ recv_big(rs_##fs##_dir(), #m); }

RECV_BIG(ext4, splice)
RECV_BIG(ext4, vmsplice)
RECV_BIG(ext4, copy)
RECV_BIG(tmpfs, splice)
RECV_BIG(tmpfs, vmsplice)
RECV_BIG(tmpfs, copy)

/* ---- send: 256 MiB per method from a file; from a stdin pipe ----------------- */

struct sink_state {
	uint64_t seed;
	uint64_t reset_after; /* 0: read to EOF; else read this much, then reset */
	struct h_xfer rx;
	_Atomic int sessions;
};

/* The test's receiver: verifies the stream to EOF, or with reset_after reads
 * that much (h_xfer_recv has no limit) and resets. */
static void sink_conn(struct h_server *s, int fd, int index, void *arg)
{
	struct sink_state *st = arg;
	struct linger lg = { 1, 0 };
	unsigned char *buf;

	(void)s;
	(void)index;
	if (atomic_fetch_add(&st->sessions, 1) != 0)
		return;
	h_xfer_init(&st->rx, fd, st->seed, 0, h_now_ms() + H_T(40000));
	st->rx.verify = 1;
	if (!st->reset_after) {
		h_xfer_recv(&st->rx);
		return;
	}
	buf = malloc(st->reset_after);
	st->rx.err = buf ? -h_recv_exact(fd, buf, st->reset_after, st->rx.deadline_ms) : ENOMEM;
	if (!st->rx.err) {
		size_t bad = h_gen_check(st->seed, 0, buf, st->reset_after);
		st->rx.bytes = st->reset_after;
		st->rx.mismatch_at = bad < st->reset_after ? (int64_t)bad : -1;
	}
	free(buf);
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)); /* the harness's close resets */
}

static void send_file(const char *method)
{
	static struct h_server srv;
	static struct sink_state sk;
	const char *bin = h_binary(0);
	char path[300], hex[65];
	char *out = NULL, *err = NULL;

	memset(&sk, 0, sizeof(sk));
	sk.seed = 0x5E4D000000000000ull ^ (uint64_t)method[1];
	snprintf(path, sizeof(path), "%s/send-src.bin", rs_ext4_dir());
	rs_make_file(path, sk.seed, BIG);
	int rc = h_server_start(&srv, "127.0.0.1:0", 16, sink_conn, &sk);
	H_CHECK(rc == 0, "sink listen: %s", strerror(-rc));
	const char *args[] = { "send", "--sha256", "--method", method, path, srv.addr.text, NULL };
	int st = h_run_capture(bin, args, H_T(40000), &out, &err);
	H_CHECK(h_server_wait_done(&srv, 1, 10000) == 0, "sink session did not end");
	struct rs_rep rep = rs_report(err, "send", path, 0);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"send --method %s: status 0x%x; stderr:\n%s", method, st, err);
	H_CHECK(rep.found && rep.bytes == BIG && !rep.incomplete && !strcmp(rep.method, method),
		"report: '%s' (expected %llu bytes, method %s)", rep.line, (unsigned long long)BIG,
		method);
	H_CHECK(sk.rx.err == 0 && sk.rx.eof && sk.rx.bytes == BIG,
		"sink: %llu bytes, %s", (unsigned long long)sk.rx.bytes,
		sk.rx.err ? strerror(sk.rx.err) : sk.rx.eof ? "EOF" : "no EOF");
	H_CHECK(sk.rx.mismatch_at < 0, "sink: content differs at offset %lld",
		(long long)sk.rx.mismatch_at);
	h_hex32(sk.rx.sha, hex);
	H_CHECK(!strcmp(rep.sha, hex), "send's sha256 %s differs from the receiver's %s", rep.sha,
		hex);
	struct rs_seg seg = { sk.seed, BIG };
	struct rs_file f = rs_check_file(path, &seg, 1);
	H_CHECK(!strcmp(f.sha, hex), "sha256 of the file %s, receiver's %s", f.sha, hex);
	h_server_stop(&srv);
	free(out);
	free(err);
	unlink(path);
}

Test(integ, send_sendfile, .init = h_init, .fini = rs_fini, .timeout = 90) { send_file("sendfile"); }
Test(integ, send_splice, .init = h_init, .fini = rs_fini, .timeout = 90) { send_file("splice"); }
Test(integ, send_copy, .init = h_init, .fini = rs_fini, .timeout = 90) { send_file("copy"); }

/* Writes len bytes of stream seed into a non-blocking pipe, bounded. */
static int rs_feed(int fd, uint64_t seed, uint64_t len, int64_t deadline)
{
	static unsigned char buf[1 << 16];

	for (uint64_t off = 0; off < len;) {
		size_t k = len - off < sizeof(buf) ? (size_t)(len - off) : sizeof(buf);
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		h_gen(seed, off, buf, k);
		ssize_t w = write(fd, buf, k);
		if (w > 0)
			off += (uint64_t)w;
		else if (w < 0 && errno == EAGAIN && h_now_ms() < deadline)
			poll(&pfd, 1, 100);
		else
			return w < 0 ? -errno : -EIO;
	}
	return 0;
}

/* `send - ADDRESS` with stdin a pipe: spliced into the socket (reported as
 * "splice"), with and without --sha256 (the tee path). */
static void case_send_stdin_pipe(const char *bin)
{
	static struct h_server srv;
	static struct sink_state sk;
	static struct rs_proc s;
	const uint64_t len = 32 * H_MIB + 777;

	for (int sha = 0; sha < 2; sha++) {
		int p[2];
		char hex[65];
		memset(&sk, 0, sizeof(sk));
		sk.seed = 0x5D1Aull + (uint64_t)sha;
		int rc = h_server_start(&srv, "127.0.0.1:0", 16, sink_conn, &sk);
		H_CHECK(rc == 0, "sink listen: %s", strerror(-rc));
		H_CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
		const char *args[] = { "send", "-", srv.addr.text, sha ? "--sha256" : NULL, NULL };
		rs_start(&s, bin, args, p[0], -1, 0);
		close(p[0]);
		fcntl(p[1], F_SETFL, O_NONBLOCK);
		rc = rs_feed(p[1], sk.seed, len, h_now_ms() + H_T(20000));
		close(p[1]);
		RS_CHECK(rc == 0, "feeding send's stdin: %s", strerror(-rc));
		int st = rs_wait(&s, H_T(20000), "send");
		char *err = rs_read(s.log);
		struct rs_rep rep = rs_report(err, "send", "-", 0);
		RS_CHECK(st == 0, "send - (stdin pipe%s) exited %d", sha ? ", --sha256" : "", st);
		RS_CHECK(h_server_wait_done(&srv, 1, 10000) == 0, "sink session did not end");
		RS_CHECK(rep.found && rep.bytes == len && !strcmp(rep.method, "splice"),
			 "report: '%s' (expected %llu bytes, method splice)", rep.line,
			 (unsigned long long)len);
		RS_CHECK(sk.rx.err == 0 && sk.rx.eof && sk.rx.bytes == len && sk.rx.mismatch_at < 0,
			 "sink: %llu bytes, mismatch at %lld, %s", (unsigned long long)sk.rx.bytes,
			 (long long)sk.rx.mismatch_at, sk.rx.err ? strerror(sk.rx.err) : "no error");
		h_hex32(sk.rx.sha, hex);
		RS_CHECK(!sha || !strcmp(rep.sha, hex), "send's sha256 %s, receiver's %s", rep.sha, hex);
		free(err);
		h_server_stop(&srv);
	}
}

Test(integ, send_stdin_pipe, .init = h_init, .fini = rs_fini, .timeout = 60)
{ case_send_stdin_pipe(h_binary(0)); }
Test(integ, send_stdin_pipe_asan, .init = h_init, .fini = rs_fini, .timeout = 120)
{ case_send_stdin_pipe(h_binary(1)); }

/* ---- recv into stdout: a pipe, an O_APPEND file ------------------------------ */

/* Reads a pipe to EOF (bounded), checking the stream. */
static int rs_drain_pipe(int fd, uint64_t seed, uint64_t *bytes, int64_t *mismatch, int64_t deadline)
{
	static unsigned char buf[1 << 16];

	*bytes = 0;
	*mismatch = -1;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r > 0) {
			size_t bad = h_gen_check(seed, *bytes, buf, (size_t)r);
			if (bad < (size_t)r && *mismatch < 0)
				*mismatch = (int64_t)(*bytes + bad);
			*bytes += (uint64_t)r;
		} else if (r == 0) {
			return 0;
		} else if (errno == EAGAIN && h_now_ms() < deadline) {
			poll(&pfd, 1, 100);
		} else {
			return -errno;
		}
	}
}

static void case_recv_stdout(const char *bin)
{
	static struct rs_proc r;
	static struct h_xfer tx;
	const uint64_t len = 16 * H_MIB + 4321;
	const char *methods[] = { "splice", "vmsplice", "copy" };

	for (int i = 0; i < 3; i++) {
		/* stdout a pipe: splice moves pipe pages; vmsplice must copy instead */
		int p[2], fd, rc;
		uint64_t got;
		int64_t bad;
		uint64_t seed = 0x57D0ull + (uint64_t)i;
		const char *args[] = { "recv", "127.0.0.1:0", "-", "--method", methods[i], NULL };
		H_CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
		rs_start(&r, bin, args, -1, p[1], 1);
		close(p[1]);
		fd = h_connect(&r.addr, 2000);
		RS_CHECK(fd >= 0, "connect to recv: %s", strerror(errno));
		h_xfer_init(&tx, fd, seed, len, h_now_ms() + H_T(20000));
		tx.shut_wr = 1;
		RS_CHECK(h_xfer_start_send(&tx) == 0, "cannot start the sender thread");
		fcntl(p[0], F_SETFL, O_NONBLOCK);
		rc = rs_drain_pipe(p[0], seed, &got, &bad, h_now_ms() + H_T(20000));
		close(p[0]);
		RS_CHECK(h_xfer_join(&tx, 5000) == 0 && tx.err == 0, "sender: %s",
			 strerror(tx.err));
		close(fd);
		int st = rs_wait(&r, H_T(10000), "recv");
		char *err = rs_read(r.log);
		struct rs_rep rep = rs_report(err, "recv", "-", 0);
		RS_CHECK(rc == 0 && got == len && bad < 0,
			 "stdout pipe (--method %s): %llu bytes of %llu, mismatch at %lld, %s",
			 methods[i], (unsigned long long)got, (unsigned long long)len, (long long)bad,
			 strerror(-rc));
		RS_CHECK(st == 0 && rep.found && rep.bytes == len, "recv exited %d; report '%s'", st,
			 rep.line);
		RS_CHECK(i != 1 || (!strcmp(rep.method, "copy") && strstr(err, "copying instead")),
			 "vmsplice into a pipe must fall back to copy with a note; report '%s'",
			 rep.line);
		free(err);
	}
	for (int i = 0; i < 3; i++) {
		/* stdout an O_APPEND file (">>"): splice may refuse it (EINVAL) */
		char path[300];
		uint64_t seed = 0xA99Dull + (uint64_t)i;
		snprintf(path, sizeof(path), "%s/append-%d.bin", h_tmpdir(), i);
		int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		H_CHECK(fd >= 0 && write(fd, "head", 4) == 4, "create %s: %s", path, strerror(errno));
		const char *args[] = { "recv", "127.0.0.1:0", "-", "--method", methods[i], "--sha256",
				       NULL };
		rs_start(&r, bin, args, -1, fd, 1);
		close(fd);
		rs_send_stream(&r, seed, len, &tx);
		int st = rs_wait(&r, H_T(10000), "recv");
		char *err = rs_read(r.log);
		struct rs_rep rep = rs_report(err, "recv", "-", 0);
		char hex[65];
		h_hex32(tx.sha, hex);
		RS_CHECK(st == 0 && rep.found && rep.bytes == len && !strcmp(rep.sha, hex),
			 "recv >> file (--method %s) exited %d; report '%s'", methods[i], st, rep.line);
		RS_CHECK(rs_size(path) == len + 4, "%s has %llu bytes, expected 4 + %llu", path,
			 (unsigned long long)rs_size(path), (unsigned long long)len);
		free(err);
	}
}

Test(integ, recv_stdout, .init = h_init, .fini = rs_fini, .timeout = 60)
{ case_recv_stdout(h_binary(0)); }
Test(integ, recv_stdout_asan, .init = h_init, .fini = rs_fini, .timeout = 120)
{ case_recv_stdout(h_binary(1)); }

/* ---- ENOSPC: recv into a 1 MiB tmpfs ----------------------------------------- */

static void case_recv_enospc(const char *bin)
{
	static struct rs_proc r;
	static struct h_xfer tx;
	const char *methods[] = { "splice", "vmsplice", "copy" };
	char why[300];
	const char *dir = rs_tmpfs("tiny", "1m", why, sizeof(why));

	if (!dir)
		cr_skip_test("ENOSPC case needs a 1 MiB tmpfs: %s", why);
	for (int i = 0; i < 3; i++) {
		char path[300], needle[400];
		uint64_t seed = 0xE05Cull + (uint64_t)i;
		snprintf(path, sizeof(path), "%s/out-%s", dir, methods[i]);
		const char *args[] = { "recv", "127.0.0.1:0", path, "--method", methods[i], "--sha256",
				       NULL };
		rs_start(&r, bin, args, -1, -1, 1);
		rs_send_stream(&r, seed, 8 * H_MIB, &tx); /* fails once recv is gone: expected */
		int st = rs_wait(&r, H_T(10000), "recv");
		char *err = rs_read(r.log);
		uint64_t size = rs_size(path);
		struct rs_rep rep = rs_report(err, "recv", path, 0);
		snprintf(needle, sizeof(needle), "recv: %s: No space left on device after %llu bytes",
			 path, (unsigned long long)size);
		RS_CHECK(st == 1, "recv (--method %s) into a full tmpfs exited %d, expected 1",
			 methods[i], st);
		RS_CHECK(strstr(err, needle), "no line \"%s\" in recv's stderr", needle);
		RS_CHECK(size > 0 && size <= H_MIB, "partial file has %llu bytes",
			 (unsigned long long)size);
		RS_CHECK(rep.found && rep.bytes == size && rep.incomplete,
			 "report '%s' should give the %llu bytes written and 'incomplete'", rep.line,
			 (unsigned long long)size);
		struct rs_seg seg = { seed, size };
		struct rs_file f = rs_check_file(path, &seg, 1);
		RS_CHECK(f.mismatch < 0 && !strcmp(f.sha, rep.sha),
			 "partial file: mismatch at %lld; sha256 %s, reported %s", (long long)f.mismatch,
			 f.sha, rep.sha);
		unlink(path);
		free(err);
	}
}

Test(integ, recv_enospc, .init = h_init, .fini = rs_fini, .timeout = 60)
{ case_recv_enospc(h_binary(0)); }
Test(integ, recv_enospc_asan, .init = h_init, .fini = rs_fini, .timeout = 120)
{ case_recv_enospc(h_binary(1)); }

/* ---- peers that reset ----------------------------------------------------------- */

/* recv --count 2: the first peer sends n bytes and resets once recv wrote
 * them all; recv reports it and still serves the second, then exits 1. */
static void case_recv_peer_reset(const char *bin)
{
	static struct rs_proc r;
	static struct h_xfer tx;
	const char *methods[] = { "splice", "vmsplice", "copy" };
	const uint64_t n = H_MIB + 123, n2 = 3 * H_MIB;

	for (int i = 0; i < 3; i++) {
		char path[300], needle[300];
		struct h_addr me;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		uint64_t seed = 0x4E5Eull + (uint64_t)i;
		snprintf(path, sizeof(path), "%s/reset-%s.bin", h_tmpdir(), methods[i]);
		const char *args[] = { "recv", "127.0.0.1:0", path, "--method", methods[i],
				       "--count", "2", NULL };
		rs_start(&r, bin, args, -1, -1, 1);
		int fd = h_connect(&r.addr, 2000);
		RS_CHECK(fd >= 0, "connect to recv: %s", strerror(errno));
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		h_addr_from(&me, (struct sockaddr *)&ss, sl);
		h_xfer_init(&tx, fd, seed, n, h_now_ms() + H_T(10000));
		h_xfer_send(&tx);
		RS_CHECK(tx.err == 0, "send: %s", strerror(tx.err));
		int64_t dl = h_now_ms() + H_T(10000);
		while (rs_size(path) < n && h_now_ms() < dl)
			h_sleep_ms(2);
		RS_CHECK(rs_size(path) == n, "recv wrote %llu of %llu bytes within 10 s",
			 (unsigned long long)rs_size(path), (unsigned long long)n);
		struct linger lg = { 1, 0 };
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(fd); /* RST */
		rs_send_stream(&r, seed + 100, n2, &tx);
		RS_CHECK(tx.err == 0, "second connection: %s", strerror(tx.err));
		int st = rs_wait(&r, H_T(10000), "recv");
		char *err = rs_read(r.log);
		struct rs_rep rep = rs_report(err, "recv", path, 0), rep2 = rs_report(err, "recv", path, 1),
			      tot = rs_report(err, "recv", path, -1);
		snprintf(needle, sizeof(needle), "recv: %s: Connection reset by peer after %llu bytes",
			 me.text, (unsigned long long)n);
		RS_CHECK(st == 1, "recv (--method %s) after a reset exited %d, expected 1", methods[i],
			 st);
		RS_CHECK(strstr(err, needle), "no line \"%s\" in recv's stderr", needle);
		RS_CHECK(rep.found && rep.bytes == n && rep.incomplete, "first report '%s'", rep.line);
		RS_CHECK(rep2.found && rep2.bytes == n2 && !rep2.incomplete, "second report '%s'",
			 rep2.line);
		RS_CHECK(tot.found && tot.bytes == n + n2, "total line '%s'", tot.line);
		struct rs_seg seg[2] = { { seed, n }, { seed + 100, n2 } };
		struct rs_file f = rs_check_file(path, seg, 2);
		RS_CHECK(f.size == n + n2 && f.mismatch < 0, "%s: %llu bytes, mismatch at %lld", path,
			 (unsigned long long)f.size, (long long)f.mismatch);
		free(err);
	}
}

Test(integ, recv_peer_reset, .init = h_init, .fini = rs_fini, .timeout = 60)
{ case_recv_peer_reset(h_binary(0)); }
Test(integ, recv_peer_reset_asan, .init = h_init, .fini = rs_fini, .timeout = 120)
{ case_recv_peer_reset(h_binary(1)); }

/* send to a receiver that reads 256 KiB and resets. */
static void case_send_peer_reset(const char *bin)
{
	static struct h_server srv;
	static struct sink_state sk;
	const char *methods[] = { "sendfile", "splice", "copy" };
	const uint64_t len = 64 * H_MIB;
	char path[300];

	snprintf(path, sizeof(path), "%s/reset-src.bin", h_tmpdir());
	rs_make_file(path, 0x5E5E, len);
	for (int i = 0; i < 3; i++) {
		char *out = NULL, *err = NULL;
		memset(&sk, 0, sizeof(sk));
		sk.seed = 0x5E5E;
		sk.reset_after = 256 * H_KIB;
		int rc = h_server_start(&srv, "127.0.0.1:0", 16, sink_conn, &sk);
		H_CHECK(rc == 0, "sink listen: %s", strerror(-rc));
		const char *args[] = { "send", "--method", methods[i], path, srv.addr.text, NULL };
		int st = h_run_capture(bin, args, H_T(20000), &out, &err);
		struct rs_rep rep = rs_report(err, "send", path, 0);
		char *line = err ? strstr(err, "send: 127.0.0.1:") : NULL;
		unsigned long long after = 0;
		H_CHECK(!rs_sanitizer(err), "send's stderr holds a sanitizer report:\n%s", err);
		H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1,
			"send --method %s to a resetting peer: status 0x%x, expected exit 1; stderr:\n%s",
			methods[i], st, err);
		H_CHECK(line && (strstr(line, "Connection reset by peer after ") ||
				 strstr(line, "Broken pipe after ")),
			"no reset/broken-pipe error line in send's stderr:\n%s", err);
		sscanf(strstr(line, " after ") + 7, "%llu", &after);
		H_CHECK(h_server_wait_done(&srv, 1, 10000) == 0, "sink session did not end");
		H_CHECK(sk.rx.err == 0 && sk.rx.bytes == 256 * H_KIB && sk.rx.mismatch_at < 0,
			"receiver read %llu bytes (mismatch at %lld, %s)", (unsigned long long)sk.rx.bytes,
			(long long)sk.rx.mismatch_at, strerror(sk.rx.err));
		H_CHECK(rep.found && rep.incomplete && rep.bytes == after && after >= 256 * H_KIB &&
				after < len,
			"report '%s' should give the bytes sent before the reset (error line: %llu)",
			rep.line, after);
		h_server_stop(&srv);
		free(out);
		free(err);
	}
}

Test(integ, send_peer_reset, .init = h_init, .fini = rs_fini, .timeout = 60)
{ case_send_peer_reset(h_binary(0)); }
Test(integ, send_peer_reset_asan, .init = h_init, .fini = rs_fini, .timeout = 120)
{ case_send_peer_reset(h_binary(1)); }

/* ---- --count, --keep, SIGTERM --------------------------------------------------- */

static void case_recv_count_keep(const char *bin)
{
	static struct rs_proc r;
	static struct h_xfer tx;
	char path[300], sock[200];
	const uint64_t lens[3] = { 5 * H_MIB + 1, 1, 7 * H_MIB + 13 };
	struct rs_seg seg[3];

	/* --count 3 over a Unix socket, each with --sha256 */
	snprintf(path, sizeof(path), "%s/count.bin", h_tmpdir());
	snprintf(sock, sizeof(sock), "unix:%s/recv.sock", h_tmpdir());
	const char *args[] = { "recv", "--count", "3", "--sha256", "--fsync", sock, path, NULL };
	rs_start(&r, bin, args, -1, -1, 1);
	for (int i = 0; i < 3; i++) {
		seg[i] = (struct rs_seg){ 0xC0C0ull + (uint64_t)i, lens[i] };
		rs_send_stream(&r, seg[i].seed, lens[i], &tx);
		RS_CHECK(tx.err == 0, "connection %d: %s", i, strerror(tx.err));
	}
	int st = rs_wait(&r, H_T(10000), "recv");
	char *err = rs_read(r.log);
	struct rs_file f = rs_check_file(path, seg, 3);
	struct rs_rep tot = rs_report(err, "recv", path, -1);
	RS_CHECK(st == 0, "recv --count 3 exited %d", st);
	for (int i = 0; i < 3; i++) {
		struct rs_rep rep = rs_report(err, "recv", path, i);
		RS_CHECK(rep.found && rep.bytes == lens[i] && !rep.incomplete, "report %d: '%s'", i,
			 rep.line);
	}
	RS_CHECK(f.size == lens[0] + lens[1] + lens[2] && f.mismatch < 0,
		 "%s: %llu bytes, mismatch at %lld: connections must follow each other in order",
		 path, (unsigned long long)f.size, (long long)f.mismatch);
	RS_CHECK(tot.found && tot.bytes == f.size && !strcmp(tot.sha, f.sha),
		 "total line '%s' should give the file's size and sha256 %s", tot.line, f.sha);
	RS_CHECK(access(sock + 5, F_OK) != 0, "recv left its socket file %s", sock + 5);
	free(err);

	/* --keep: two connections, SIGTERM while idle: exit 0 */
	const char *kargs[] = { "recv", "--keep", "--fsync", "127.0.0.1:0", "/dev/null", NULL };
	rs_start(&r, bin, kargs, -1, -1, 1);
	for (int i = 0; i < 2; i++) {
		rs_send_stream(&r, 1, H_MIB, &tx);
		RS_CHECK(tx.err == 0, "--keep connection %d: %s", i, strerror(tx.err));
	}
	int64_t dl = h_now_ms() + H_T(5000);
	for (;;) { /* both reported: recv is idle in accept */
		char *t = rs_read(r.log);
		int done = rs_report(t, "recv", "/dev/null", 1).found;
		free(t);
		if (done)
			break;
		RS_CHECK(h_now_ms() < dl, "recv --keep did not report two connections within 5 s");
		h_sleep_ms(5);
	}
	kill(r.pid, SIGTERM);
	st = rs_wait(&r, H_T(5000), "recv --keep after SIGTERM");
	err = rs_read(r.log);
	tot = rs_report(err, "recv", "/dev/null", -1);
	RS_CHECK(st == 0, "recv --keep stopped by SIGTERM while idle exited %d, expected 0", st);
	RS_CHECK(tot.found && tot.bytes == 2 * H_MIB && strstr(tot.line, "total of 2 connections"),
		 "total line '%s'", tot.line);
	RS_CHECK(strstr(err, "recv: /dev/null: not a regular file: --fsync does nothing"),
		 "no note that --fsync does nothing for /dev/null:\n%s", err);
	free(err);

	/* SIGTERM in the middle of a connection: reported, exit 1 */
	snprintf(path, sizeof(path), "%s/interrupted.bin", h_tmpdir());
	const char *iargs[] = { "recv", "127.0.0.1:0", path, NULL };
	rs_start(&r, bin, iargs, -1, -1, 1);
	int fd = h_connect(&r.addr, 2000);
	RS_CHECK(fd >= 0, "connect: %s", strerror(errno));
	char chunk[1000];
	h_gen(2, 0, chunk, sizeof(chunk));
	RS_CHECK(h_send_all(fd, chunk, sizeof(chunk), h_now_ms() + 2000) == 0, "send 1000 bytes");
	dl = h_now_ms() + H_T(5000);
	while (rs_size(path) < sizeof(chunk) && h_now_ms() < dl)
		h_sleep_ms(2);
	RS_CHECK(rs_size(path) == sizeof(chunk), "recv wrote %llu of 1000 bytes within 5 s",
		 (unsigned long long)rs_size(path));
	kill(r.pid, SIGTERM);
	st = rs_wait(&r, H_T(5000), "recv after SIGTERM mid-connection");
	err = rs_read(r.log);
	struct rs_rep rep = rs_report(err, "recv", path, 0);
	RS_CHECK(st == 1, "recv stopped mid-connection exited %d, expected 1", st);
	RS_CHECK(strstr(err, "interrupted by SIGTERM after 1000 bytes") && rep.found &&
			 rep.bytes == 1000 && rep.incomplete,
		 "expected 'interrupted by SIGTERM after 1000 bytes' and an incomplete report:\n%s", err);
	close(fd);
	free(err);
}

Test(integ, recv_count_keep, .init = h_init, .fini = rs_fini, .timeout = 60)
{ case_recv_count_keep(h_binary(0)); }
Test(integ, recv_count_keep_asan, .init = h_init, .fini = rs_fini, .timeout = 120)
{ case_recv_count_keep(h_binary(1)); }

/* ---- send waits for the receiver's close, unless --no-wait ------------------ */

struct hold_state {
	_Atomic int release;
	_Atomic uint64_t got;
};

/* Reads to EOF, then keeps the connection open until released (20 s at most). */
static void hold_conn(struct h_server *s, int fd, int index, void *arg)
{
	struct hold_state *h = arg;
	int64_t dl = h_now_ms() + 20000;
	char buf[65536];

	(void)s;
	(void)index;
	h_set_timeouts(fd, 100);
	while (h_now_ms() < dl) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r > 0)
			atomic_fetch_add(&h->got, (uint64_t)r);
		else if (r == 0 || (errno != EAGAIN && errno != EINTR))
			break;
	}
	while (!atomic_load(&h->release) && h_now_ms() < dl)
		h_sleep_ms(10);
}

Test(integ, send_no_wait, .init = h_init, .fini = rs_fini, .timeout = 60)
{
	static struct h_server srv;
	static struct hold_state hs;
	static struct rs_proc s;
	const char *bin = h_binary(0);
	char path[300];

	snprintf(path, sizeof(path), "%s/nowait.bin", h_tmpdir());
	rs_make_file(path, 7, 3 * H_MIB);
	int rc = h_server_start(&srv, "127.0.0.1:0", 16, hold_conn, &hs);
	H_CHECK(rc == 0, "listen: %s", strerror(-rc));
	/* without --no-wait: still running while the receiver holds the connection */
	const char *args[] = { "send", path, srv.addr.text, NULL };
	rs_start(&s, bin, args, -1, -1, 0);
	int64_t dl = h_now_ms() + H_T(10000);
	while (atomic_load(&hs.got) < 3 * H_MIB && h_now_ms() < dl)
		h_sleep_ms(5);
	h_sleep_ms(300);
	RS_CHECK(atomic_load(&hs.got) == 3 * H_MIB && s.pid > 0 && waitpid(s.pid, NULL, WNOHANG) == 0,
		 "send must wait for the receiver's close (receiver got %llu bytes)",
		 (unsigned long long)atomic_load(&hs.got));
	atomic_store(&hs.release, 1);
	RS_CHECK(rs_wait(&s, H_T(10000), "send") == 0, "send exited non-zero after the close");
	h_server_stop(&srv);

	/* with --no-wait: exits while the receiver still holds it */
	memset(&hs, 0, sizeof(hs));
	rc = h_server_start(&srv, "127.0.0.1:0", 16, hold_conn, &hs);
	H_CHECK(rc == 0, "listen: %s", strerror(-rc));
	const char *nargs[] = { "send", "--no-wait", path, srv.addr.text, NULL };
	rs_start(&s, bin, nargs, -1, -1, 0);
	int st = rs_wait(&s, H_T(10000), "send --no-wait");
	char *err = rs_read(s.log);
	struct rs_rep rep = rs_report(err, "send", path, 0);
	RS_CHECK(st == 0 && rep.found && rep.bytes == 3 * H_MIB,
		 "send --no-wait exited %d; report '%s'", st, rep.line);
	free(err);
	atomic_store(&hs.release, 1);
	h_server_stop(&srv);
}

/* ---- command line ---------------------------------------------------------------- */

static int rs_run(const char *bin, const char *const *args, char **err)
{
	char *out = NULL;
	int st = h_run_capture(bin, args, 10000, &out, err);

	free(out);
	H_CHECK(st != -1 && WIFEXITED(st), "%s %s did not exit within 10 s", args[0], args[1]);
	return WEXITSTATUS(st);
}

Test(integ, recv_send_cli, .init = h_init, .fini = rs_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static const struct {
		int status;
		const char *needle;
		const char *args[8];
	} cases[] = {
		{ 2, "missing LISTEN and FILE", { "recv", NULL } },
		{ 2, "missing ADDRESS", { "send", "x", NULL } },
		{ 2, "unknown method 'sendfile'", { "recv", ":0", "x", "--method", "sendfile", NULL } },
		{ 2, "unknown method 'vmsplice'", { "send", "x", ":1", "--method", "vmsplice", NULL } },
		{ 2, "unknown option '--keep'", { "send", "--keep", "x", ":1", NULL } },
		{ 2, "--keep and --count exclude", { "recv", "--keep", "--count", "2", ":0", "x", NULL } },
		{ 2, "option '--pipe-size'", { "recv", "--pipe-size", "1", ":0", "x", NULL } },
		{ 2, "option '--count'", { "recv", "--count", "0", ":0", "x", NULL } },
		{ 2, "unexpected argument 'z'", { "recv", ":0", "x", "z", NULL } },
		{ 2, "missing ':port'", { "send", "x", "127.0.0.1", NULL } },
		{ 2, "missing ':port'", { "recv", "127.0.0.1", "x", NULL } },
		{ 1, "send: /nonexistent/x: No such file or directory",
		  { "send", "/nonexistent/x", "127.0.0.1:1", NULL } },
		{ 1, "recv: /nonexistent/x: No such file or directory",
		  { "recv", "127.0.0.1:0", "/nonexistent/x", NULL } },
	};
	char *err = NULL;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int st = rs_run(bin, cases[i].args, &err);
		H_CHECK(st == cases[i].status && err && strstr(err, cases[i].needle),
			"splicer %s ... (case %zu): exit %d, expected %d with \"%s\"; stderr:\n%s",
			cases[i].args[0], i, st, cases[i].status, cases[i].needle, err);
		free(err);
	}
	for (int i = 0; i < 2; i++) {
		const char *args[] = { i ? "send" : "recv", "--help", NULL };
		char *out = NULL;
		int st = h_run_capture(bin, args, 10000, &out, &err);
		H_CHECK(st == 0 && out && strstr(out, i ? "usage: splicer send" : "usage: splicer recv") &&
				strstr(out, "--method") && strstr(out, "--sha256"),
			"splicer %s --help: status 0x%x; stdout:\n%s", args[0], st, out);
		free(out);
		free(err);
	}
	/* a refused connection is an error of the run, not of the command line */
	struct h_refused ref;
	char path[300];
	H_CHECK(h_refused_open(&ref) == 0, "no refused port");
	snprintf(path, sizeof(path), "%s/small", h_tmpdir());
	rs_make_file(path, 1, 100);
	const char *args[] = { "send", path, ref.text, NULL };
	int st = rs_run(bin, args, &err);
	H_CHECK(st == 1 && strstr(err, "connect: Connection refused"),
		"send to a refused port: exit %d; stderr:\n%s", st, err);
	free(err);
	h_refused_close(&ref);
}
