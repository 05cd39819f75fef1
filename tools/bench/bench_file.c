/* SPDX-License-Identifier: MIT */
/* bench_file: see bench_file.h. */
#define _GNU_SOURCE
#include "bench_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_traffic.h"
#include "stats.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)
#define TMPFS_MAGIC_ 0x01021994
#define EXT4_MAGIC_ 0xEF53

static char self[PATH_MAX];

/* "ext4" (the ext2/3/4 magic), "tmpfs", "xfs", "btrfs", or the magic. */
static const char *fs_name(const char *dir, char *buf, size_t len)
{
	struct statfs sf;

	if (statfs(dir, &sf))
		return "?";
	switch ((unsigned long)sf.f_type) {
	case EXT4_MAGIC_: return "ext4";
	case TMPFS_MAGIC_: return "tmpfs";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x794C7630: return "overlayfs";
	}
	snprintf(buf, len, "fs-%lx", (unsigned long)sf.f_type);
	return buf;
}

static void add_recv(struct file_bench *fb, const char *method, const char *tag,
		     const char *target, const char *where)
{
	struct file_row *r = &fb->row[fb->nrows++];

	snprintf(r->name, sizeof(r->name), "recv-%s-%s", method, tag);
	snprintf(r->what, sizeof(r->what), "splicer recv --method %s into %s", method, where);
	r->method = method;
	snprintf(r->target, sizeof(r->target), "%s", target);
}

int bench_file_setup(struct file_bench *fb, uint64_t bytes)
{
	static const char *const recv_m[] = { "splice", "vmsplice", "copy" };
	static const char *const send_m[] = { "sendfile", "splice", "copy" };
	const char *disk = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	char fsbuf[32], tag[40], where[200], path[300];
	ssize_t n;

	memset(fb, 0, sizeof(*fb));
	fb->bytes = bytes;
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0) {
		snprintf(fb->skip, sizeof(fb->skip), "cannot find the splicer binary: %s", strerror(errno));
		return -1;
	}
	self[n] = '\0';
	if (access("/dev/shm", W_OK)) {
		snprintf(fb->skip, sizeof(fb->skip), "/dev/shm (tmpfs) is not writable");
		return -1;
	}
	const char *dfs = fs_name(disk, fsbuf, sizeof(fsbuf));
	for (int m = 0; m < 3; m++) {
		add_recv(fb, recv_m[m], "null", "/dev/null", "/dev/null");
		snprintf(path, sizeof(path), "/dev/shm/splicer-bench-%d.out", (int)getpid());
		add_recv(fb, recv_m[m], "tmpfs", path, "a file on tmpfs (/dev/shm)");
		snprintf(path, sizeof(path), "%s/splicer-bench-%d.out", disk, (int)getpid());
		snprintf(tag, sizeof(tag), "%s", dfs);
		snprintf(where, sizeof(where), "a file on %s (%s, page cache; removed unsynced)", dfs,
			 disk);
		add_recv(fb, recv_m[m], tag, path, where);
	}
	for (int m = 0; m < 3; m++) {
		struct file_row *r = &fb->row[fb->nrows++];
		snprintf(r->name, sizeof(r->name), "send-%s", send_m[m]);
		snprintf(r->what, sizeof(r->what),
			 "splicer send --method %s from tmpfs, to recv splice into /dev/null", send_m[m]);
		r->send = 1;
		r->method = send_m[m];
	}

	/* The source: a pattern no compressor or dedup could shortcut. */
	snprintf(fb->src, sizeof(fb->src), "/dev/shm/splicer-bench-%d.src", (int)getpid());
	int fd = open(fb->src, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(fb->skip, sizeof(fb->skip), "%s: %s", fb->src, strerror(errno));
		return -1;
	}
	static uint64_t buf[1 << 15];
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (uint64_t done = 0; done < bytes;) {
		for (size_t i = 0; i < sizeof(buf) / 8; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			buf[i] = x;
		}
		size_t k = bytes - done < sizeof(buf) ? (size_t)(bytes - done) : sizeof(buf);
		if (write(fd, buf, k) != (ssize_t)k) {
			snprintf(fb->skip, sizeof(fb->skip), "%s: %s", fb->src, strerror(errno ? errno : ENOSPC));
			close(fd);
			unlink(fb->src);
			return -1;
		}
		done += k;
	}
	close(fd);
	return 0;
}

/* Starts self with args, stderr into a pipe (*errfd) when errfd, else to
 * /dev/null, stdout to /dev/null. Through /proc/self/exe: the bench's own
 * build even when the file was replaced during a run (self names it). */
static pid_t spawn(const char *const *args, int *errfd)
{
	int p[2] = { -1, -1 };

	if (errfd && pipe2(p, O_CLOEXEC))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(errfd ? p[1] : null, 2);
		execv("/proc/self/exe", (char *const *)args);
		_exit(127);
	}
	if (errfd) {
		close(p[1]);
		*errfd = pid > 0 ? p[0] : -1;
		if (pid < 0)
			close(p[0]);
	}
	return pid;
}

/* Reads recv's stderr until its ready line; fills addr. 0 or -1. */
static int ready_addr(int fd, char *addr, size_t len)
{
	char buf[1024];
	size_t n = 0;
	double end = bench_now() + 5;

	while (bench_now() < end && n < sizeof(buf) - 1) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 200) <= 0)
			continue;
		ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (k <= 0)
			return -1;
		n += (size_t)k;
		buf[n] = '\0';
		char *l = strstr(buf, "recv: listening on ");
		if (l && strchr(l, '\n')) {
			sscanf(l + 19, "%199s", addr);
			return addr[0] && len > strlen(addr) ? 0 : -1;
		}
	}
	return -1;
}

static double cpu_of(const struct rusage *ru)
{
	return (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 + (double)ru->ru_stime.tv_sec +
	       ru->ru_stime.tv_usec / 1e6;
}

/* One run of a row: recv (method, target) <- send (method, src). */
static int run_row(struct file_bench *fb, struct file_row *r, int rep)
{
	const char *recv_method = r->send ? "splice" : r->method;
	const char *recv_target = r->send ? "/dev/null" : r->target;
	const char *send_method = r->send ? r->method : "sendfile";
	const char *rargs[] = { self, "recv", "--method", recv_method, "127.0.0.1:0", recv_target, NULL };
	char addr[200] = "";
	int errfd = -1, st_r = 0, st_s = 0;
	struct rusage ru_r, ru_s;

	pid_t rp = spawn(rargs, &errfd);
	if (rp < 0 || ready_addr(errfd, addr, sizeof(addr))) {
		snprintf(r->fail, sizeof(r->fail), "splicer recv did not get ready");
		if (rp > 0) {
			kill(rp, SIGKILL);
			waitpid(rp, NULL, 0);
		}
		if (errfd >= 0)
			close(errfd);
		return -1;
	}
	const char *sargs[] = { self, "send", "--method", send_method, fb->src, addr, NULL };
	double t0 = bench_now();
	pid_t sp = spawn(sargs, NULL);
	double t_recv = 0, t_send = 0;
	int left = 2;
	/* Both exit on their own (send waits for recv's close); bounded anyway. */
	while (left && bench_now() < t0 + 120) {
		pid_t w;
		if (rp > 0 && (w = wait4(rp, &st_r, WNOHANG, &ru_r)) == rp) {
			t_recv = bench_now();
			rp = 0;
			left--;
		}
		if (sp > 0 && (w = wait4(sp, &st_s, WNOHANG, &ru_s)) == sp) {
			t_send = bench_now();
			sp = 0;
			left--;
		}
		if (left)
			usleep(500);
	}
	close(errfd);
	if (left) {
		if (rp > 0)
			kill(rp, SIGKILL), waitpid(rp, NULL, 0);
		if (sp > 0)
			kill(sp, SIGKILL), waitpid(sp, NULL, 0);
		snprintf(r->fail, sizeof(r->fail), "did not finish within 120 s");
		return -1;
	}
	if (!WIFEXITED(st_r) || WEXITSTATUS(st_r) || !WIFEXITED(st_s) || WEXITSTATUS(st_s)) {
		snprintf(r->fail, sizeof(r->fail), "recv exit %d, send exit %d",
			 WIFEXITED(st_r) ? WEXITSTATUS(st_r) : -WTERMSIG(st_r),
			 WIFEXITED(st_s) ? WEXITSTATUS(st_s) : -WTERMSIG(st_s));
		return -1;
	}
	struct stat sb;
	if (strcmp(recv_target, "/dev/null")) {
		int bad = stat(recv_target, &sb) || (uint64_t)sb.st_size != fb->bytes;
		unlink(recv_target);
		if (bad) {
			snprintf(r->fail, sizeof(r->fail), "%s holds %lld bytes, %llu were sent",
				 recv_target, (long long)sb.st_size, (unsigned long long)fb->bytes);
			return -1;
		}
	}
	double secs = (r->send ? t_send : t_recv) - t0;
	r->mibs[rep] = secs > 0 ? fb->bytes / MIB / secs : NAN;
	r->cpu[rep] = cpu_of(r->send ? &ru_s : &ru_r) / (fb->bytes / GIB);
	r->nrep = rep + 1;
	return 0;
}

int bench_file_rep(struct file_bench *fb, int rep)
{
	int failed = 0, tty = isatty(STDERR_FILENO);

	if (fb->skip[0] || rep >= FILE_MAX_REPS)
		return -1;
	/* on a terminal one line redrawn in place, else a plain line per rep */
	if (!tty)
		fprintf(stderr, "splicer bench: rep %d, file rows\n", rep + 1);
	for (int i = 0; i < fb->nrows; i++) {
		struct file_row *r = &fb->row[i];
		if (tty)
			fprintf(stderr, "\r\033[Kbench: rep %d, file row %s", rep + 1, r->name);
		if (!r->fail[0] && run_row(fb, r, rep)) {
			fprintf(stderr, "%ssplicer bench: %s, rep %d: %s\n", tty ? "\n" : "", r->name,
				rep + 1, r->fail);
			failed = 1;
		}
	}
	if (tty)
		fprintf(stderr, "\r\033[K");
	return failed ? -1 : 0;
}

void bench_file_finish(struct file_bench *fb)
{
	for (int i = 0; i < fb->nrows; i++) {
		struct file_row *r = &fb->row[i];
		if (!r->nrep)
			continue;
		r->med_mibs = stats_median(r->mibs, (size_t)r->nrep);
		r->lo_mibs = stats_min(r->mibs, (size_t)r->nrep);
		r->hi_mibs = stats_max(r->mibs, (size_t)r->nrep);
		r->med_cpu = stats_median(r->cpu, (size_t)r->nrep);
		r->lo_cpu = stats_min(r->cpu, (size_t)r->nrep);
		r->hi_cpu = stats_max(r->cpu, (size_t)r->nrep);
	}
	if (fb->src[0])
		unlink(fb->src);
}

void bench_file_print(const struct file_bench *fb)
{
	if (fb->skip[0]) {
		printf("\n== files skipped: %s\n", fb->skip);
		return;
	}
	printf("\n== files: splicer recv / send over loopback, %.0f MiB per run "
	       "(the seeds' socket->file and file->socket)\n", fb->bytes / MIB);
	printf("%-22s %22s %26s\n", "row", "MiB/s", "CPU-s/GiB (recv or send)");
	for (int i = 0; i < fb->nrows; i++) {
		const struct file_row *r = &fb->row[i];
		if (r->fail[0] && !r->nrep) {
			printf("%-22s failed: %s\n", r->name, r->fail);
			continue;
		}
		char a[40], b[40];
		snprintf(a, sizeof(a), "%.0f [%.0f-%.0f]", r->med_mibs, r->lo_mibs, r->hi_mibs);
		snprintf(b, sizeof(b), "%.3f [%.3f-%.3f]", r->med_cpu, r->lo_cpu, r->hi_cpu);
		printf("%-22s %22s %26s\n", r->name, a, b);
	}
	for (int i = 0; i < fb->nrows; i++)
		printf("  %-20s %s\n", fb->row[i].name, fb->row[i].what);
}

void bench_file_json(struct json *j, const struct file_bench *fb)
{
	json_obj_begin(j, "files");
	json_int(j, "bytes_per_run", (long long)fb->bytes);
	if (fb->skip[0])
		json_str(j, "skipped", fb->skip);
	json_arr_begin(j, "rows");
	for (int i = 0; i < fb->nrows; i++) {
		const struct file_row *r = &fb->row[i];
		json_obj_begin(j, NULL);
		json_str(j, "name", r->name);
		json_str(j, "what", r->what);
		if (r->fail[0])
			json_str(j, "failed", r->fail);
		json_arr_begin(j, "mib_s");
		for (int k = 0; k < r->nrep; k++)
			json_num(j, NULL, r->mibs[k]);
		json_arr_end(j);
		json_arr_begin(j, "cpu_s_per_gib");
		for (int k = 0; k < r->nrep; k++)
			json_num(j, NULL, r->cpu[k]);
		json_arr_end(j);
		json_num(j, "median_mib_s", r->med_mibs);
		json_num(j, "median_cpu_s_per_gib", r->med_cpu);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}
