/* SPDX-License-Identifier: MIT */
/* cmd_demo: `splicer demo`, the README's first look at the proxy.
 * For each engine it starts the proxy as a child on 127.0.0.1 in front of a
 * built-in backend, pushes a random stream through it in both directions at
 * once, and prints what went through: bytes, Gbit/s, the proxy's CPU seconds
 * per GB, and whether the SHA-256 of what arrived equals what was sent.
 *   splicer demo [--size SIZE] [--engines copy,splice,auto] [--workers N]  */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "units.h"

#define CHUNK (64 * 1024)

struct stream {
	int fd;
	uint64_t size, seed, done;
	unsigned char sha[32];
	int err;
};

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Sends size pseudo-random bytes, hashing them, then shuts down writing. */
static void *stream_send(void *arg)
{
	struct stream *st = arg;
	uint64_t buf[CHUNK / 8], x = st->seed;
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	while (st->done < st->size) {
		size_t n = st->size - st->done < CHUNK ? (size_t)(st->size - st->done) : CHUNK;
		for (size_t i = 0; i < CHUNK / 8; i++)
			buf[i] = splitmix(&x);
		EVP_DigestUpdate(md, buf, n);
		for (size_t off = 0; off < n;) {
			ssize_t w = send(st->fd, (char *)buf + off, n - off, MSG_NOSIGNAL);
			if (w <= 0) {
				st->err = w < 0 ? errno : EPIPE;
				goto out;
			}
			off += (size_t)w;
		}
		st->done += n;
	}
	shutdown(st->fd, SHUT_WR);
out:
	EVP_DigestFinal_ex(md, st->sha, NULL);
	EVP_MD_CTX_free(md);
	return NULL;
}

/* Reads until EOF, hashing what arrives. */
static void *stream_recv(void *arg)
{
	struct stream *st = arg;
	static __thread char buf[CHUNK];
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	ssize_t n;

	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	while ((n = recv(st->fd, buf, sizeof(buf), 0)) > 0) {
		EVP_DigestUpdate(md, buf, (size_t)n);
		st->done += (uint64_t)n;
	}
	if (n < 0)
		st->err = errno;
	EVP_DigestFinal_ex(md, st->sha, NULL);
	EVP_MD_CTX_free(md);
	return NULL;
}

struct backend {
	int lfd;
	uint64_t size;
	struct stream rx, tx; /* backend's view: rx = client->backend */
};

static void *backend_main(void *arg)
{
	struct backend *b = arg;
	pthread_t t;
	int fd = accept(b->lfd, NULL, NULL);

	if (fd < 0) {
		b->rx.err = errno;
		return NULL;
	}
	b->rx.fd = b->tx.fd = fd;
	pthread_create(&t, NULL, stream_send, &b->tx);
	stream_recv(&b->rx);
	pthread_join(t, NULL);
	close(fd);
	return NULL;
}

static double cpu_seconds(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
	fclose(f);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Starts the proxy (this same binary) and waits for its ready line. */
static pid_t proxy_start(const char *engine, const char *backend, const char *workers,
			 char *listen, size_t listen_len, const char *logpath)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;

	if (n <= 0)
		return -1;
	self[n] = '\0';
	pid = fork();
	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		execl(self, self, "-l", "127.0.0.1:0", "-b", backend, "--engine", engine,
		      "--workers", workers, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && pid > 0; i++) { /* up to 5 s */
		char line[4096], *p;
		FILE *f = fopen(logpath, "r");
		while (f && fgets(line, sizeof(line), f))
			if ((p = strstr(line, "ready: listening on "))) {
				p += strlen("ready: listening on ");
				p[strcspn(p, ", \n")] = '\0';
				snprintf(listen, listen_len, "%s", p);
				fclose(f);
				return pid;
			}
		if (f)
			fclose(f);
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

static int connect_to(const char *hostport)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(hostport, ':');
	int fd;

	if (!colon || (size_t)(colon - hostport) >= sizeof(host))
		return -1;
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	inet_pton(AF_INET, host, &sin.sin_addr);
	sin.sin_port = htons((uint16_t)atoi(colon + 1));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The proxy did not start: its own words (the end of its log) say why. */
static void demo_log_tail(const char *engine, const char *logpath)
{
	char buf[2048];
	ssize_t n = 0;
	int fd = open(logpath, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		off_t end = lseek(fd, 0, SEEK_END);
		if (end > (off_t)sizeof(buf) - 1)
			lseek(fd, end - (off_t)sizeof(buf) + 1, SEEK_SET);
		else
			lseek(fd, 0, SEEK_SET);
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = 0;
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = 0;
	fprintf(stderr, "splicer demo: %s: the proxy did not start%s%s (its log: %s)\n", engine,
		n > 0 ? ": " : "", n > 0 ? buf : "", logpath);
}

/* One engine: returns 0 when both directions arrived intact. */
static int demo_engine(const char *engine, uint64_t size, const char *workers)
{
	struct backend b = { .size = size };
	struct stream up = { .size = size, .seed = 1 }, down = { .size = size };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	char backend_addr[64], paddr[128], logpath[512];
	const char *tmp = getenv("TMPDIR");
	pthread_t bt, ut;
	double t0, t1, c0, c1, gbit;
	int ok, status, lfd;
	pid_t pid;

	b.tx = (struct stream){ .size = size, .seed = 2 };
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) || listen(lfd, 16) ||
	    getsockname(lfd, (struct sockaddr *)&sin, &sl)) {
		perror("splicer demo: backend");
		return 1;
	}
	b.lfd = lfd;
	snprintf(backend_addr, sizeof(backend_addr), "127.0.0.1:%u", ntohs(sin.sin_port));
	snprintf(logpath, sizeof(logpath), "%s/splicer-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	close(mkstemp(logpath));
	pid = proxy_start(engine, backend_addr, workers, paddr, sizeof(paddr), logpath);
	if (pid < 0) {
		demo_log_tail(engine, logpath);
		close(lfd);
		return 1;
	}
	pthread_create(&bt, NULL, backend_main, &b);
	up.fd = down.fd = connect_to(paddr);
	if (up.fd < 0) {
		fprintf(stderr, "splicer demo: connect to %s: %s\n", paddr, strerror(errno));
		kill(pid, SIGKILL);
		return 1;
	}
	c0 = cpu_seconds(pid);
	t0 = now_s();
	pthread_create(&ut, NULL, stream_send, &up);
	stream_recv(&down);
	pthread_join(ut, NULL);
	t1 = now_s();
	c1 = cpu_seconds(pid);
	pthread_join(bt, NULL);
	close(up.fd);
	close(lfd);
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);

	ok = !up.err && !down.err && !b.rx.err && !b.tx.err && b.rx.done == size &&
	     down.done == size && !memcmp(up.sha, b.rx.sha, 32) && !memcmp(b.tx.sha, down.sha, 32);
	gbit = (double)(b.rx.done + down.done) * 8 / (t1 - t0) / 1e9;
	printf("  %-7s  %10.1f MiB  %10.1f MiB  %8.2f  %10.3f  %s\n", engine,
	       (double)b.rx.done / (1 << 20), (double)down.done / (1 << 20), gbit,
	       (c1 - c0) / ((double)(b.rx.done + down.done) / 1e9),
	       ok ? "yes" : "NO");
	if (!ok)
		fprintf(stderr, "splicer demo: %s: mismatch or error (up err %d, down err %d); proxy log: %s\n",
			engine, up.err ? up.err : b.rx.err, down.err ? down.err : b.tx.err, logpath);
	else
		unlink(logpath);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "splicer demo: %s: proxy exited badly (status %d)\n", engine, status);
		ok = 0;
	}
	return !ok;
}

int cmd_demo(int argc, char **argv)
{
	uint64_t size = 256ULL << 20;
	const char *engines = "copy,splice,auto", *workers = "1";
	char list[128], *save, *e;
	int bad = 0;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			if (parse_size(argv[++i], &size) || !size) {
				fprintf(stderr, "splicer demo: option '--size': invalid value '%s' "
					"(expects a size such as 64m)\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--engines") && i + 1 < argc) {
			engines = argv[++i];
		} else if (!strcmp(argv[i], "--workers") && i + 1 < argc) {
			workers = argv[++i];
		} else {
			fprintf(stderr, "splicer demo: unknown option '%s' (options: --size SIZE, "
				"--engines LIST, --workers N)\n", argv[i]);
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	printf("splicer demo: 127.0.0.1 client -> splicer -> built-in backend, %llu MiB each way at "
	       "once, per engine\n\n  %-7s  %14s  %14s  %8s  %10s  %s\n",
	       (unsigned long long)(size >> 20), "engine", "client->backend", "backend->client",
	       "Gbit/s", "cpu-s/GB", "SHA-256 match");
	snprintf(list, sizeof(list), "%s", engines);
	for (e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save))
		bad |= demo_engine(e, size, workers);
	printf("\n  Gbit/s counts both directions; cpu-s/GB is the proxy process's user+sys CPU\n"
	       "  per GB moved (the stable figure on a shared machine).\n");
	return bad;
}
