/* SPDX-License-Identifier: MIT */
/* splicer ctl: the admin socket's client (admin.h says the protocol).
 *   splicer ctl -s /run/splicer/admin.sock show backends
 *   splicer ctl -c /etc/splicer/splicer.conf backend web 10.0.0.2:80 drain */
#define _GNU_SOURCE
#include "admin.h"
#include "upgrade.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* above the longest answer's wait (an upgrade's: UPGRADE_TIMEOUT_MS and more) */
#define CTL_TIMEOUT_MS (UPGRADE_TIMEOUT_MS + 10000)

static int usage(void)
{
	fprintf(stderr,
		"usage: splicer ctl [-s ADMIN_SOCKET | -c FILE] COMMAND [--json]\n"
		"  show routes|backends|sessions|process [--json]\n"
		"  backend ROUTE ADDR drain|disable [--kill]|enable|weight N\n"
		"  session kill ID\n"
		"  reload | upgrade | lameduck | drain | help\n"
		"    lameduck: /health answers 503 while the listeners accept on; the SIGTERM\n"
		"    that follows drains at once (a Kubernetes preStop: ctl ... lameduck && sleep N)\n"
		"-c FILE reads the socket's path from the file's `admin = PATH` ([global]).\n");
	return 2;
}

/* The admin path of a config file; 0, or 1 after saying why not. */
static int path_from_file(const char *file, char *path, size_t len)
{
	struct config *c = calloc(1, sizeof(*c));
	int r = 1;

	if (!c) {
		fprintf(stderr, "splicer ctl: out of memory\n");
		return 1;
	}
	config_defaults(c);
	if (config_load_file(c, file) < 0)
		fprintf(stderr, "splicer ctl: %s: cannot be read (above); give the socket with -s PATH\n",
			file);
	else if (!strcmp(c->admin, "off"))
		fprintf(stderr, "splicer ctl: %s sets no admin socket (admin = PATH in [global])\n", file);
	else
		r = snprintf(path, len, "%s", !strncmp(c->admin, "unix:", 5) ? c->admin + 5 : c->admin) >=
		    (int)len;
	config_free(c);
	free(c);
	return r;
}

static int ctl_connect(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "splicer ctl: %s: longer than a Unix socket path may be\n", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
		return fd;
	fprintf(stderr, "splicer ctl: %s: %s%s\n", path, strerror(errno),
		errno == ENOENT || errno == ECONNREFUSED ? " (is splicer running with admin = this path?)"
		: errno == EACCES ? " (the socket is the run-as user's, mode 0600: run ctl as that user or root)"
				  : "");
	close(fd);
	return -1;
}

/* Sends the line, reads the answer up to its empty line. Returns the answer
 * (malloc'd, without the empty line) or NULL after saying why. */
static char *exchange(int fd, const char *line)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t n = 0, cap = 65536;
	char *buf = malloc(cap);
	struct timespec t0, t;

	if (!buf || send(fd, line, strlen(line), MSG_NOSIGNAL) != (ssize_t)strlen(line)) {
		fprintf(stderr, "splicer ctl: send: %s\n", buf ? strerror(errno) : "out of memory");
		free(buf);
		return NULL;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		ssize_t k;
		long ms;

		if (n >= 2 && buf[n - 1] == '\n' && buf[n - 2] == '\n') {
			buf[n - 1] = '\0';
			return buf;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		ms = CTL_TIMEOUT_MS - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (ms <= 0 || poll(&p, 1, (int)ms) == 0) {
			fprintf(stderr, "splicer ctl: no whole answer within %d ms\n", CTL_TIMEOUT_MS);
			break;
		}
		if (n + 1 >= cap) {
			char *q = realloc(buf, cap *= 2);
			if (!q)
				break;
			buf = q;
		}
		k = recv(fd, buf + n, cap - n - 1, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			fprintf(stderr, "splicer ctl: the proxy closed the connection before the answer "
				"ended%s%s\n", k < 0 ? ": " : "", k < 0 ? strerror(errno) : "");
			break;
		}
		n += (size_t)k;
	}
	free(buf);
	return NULL;
}

int cmd_ctl(int argc, char **argv)
{
	char path[256] = "", line[4096] = "", *ans;
	const char *sock = NULL, *file = NULL;
	size_t n = 0;
	int i = 2, fd, rc;

	for (; i + 1 < argc && (!strcmp(argv[i], "-s") || !strcmp(argv[i], "-c")); i += 2)
		*(argv[i][1] == 's' ? &sock : &file) = argv[i + 1];
	if (i >= argc || !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
		return usage();
	if (argv[i][0] == '-' && strcmp(argv[i], "--json")) {
		fprintf(stderr, "splicer ctl: unknown option %s\n", argv[i]);
		return usage();
	}
	if (sock && file) {
		fprintf(stderr, "splicer ctl: -s and -c both say where the socket is: give one\n");
		return 2;
	}
	if (!sock && !file) {
		fprintf(stderr, "splicer ctl: where is the admin socket? -s PATH, or -c FILE with "
			"admin = PATH in its [global]\n");
		return 2;
	}
	if (file && path_from_file(file, path, sizeof(path)))
		return 1;
	for (; i < argc; i++) {
		if (strchr(argv[i], '\n') || n + strlen(argv[i]) + 2 >= sizeof(line)) {
			fprintf(stderr, "splicer ctl: a command is one line of at most %zu bytes\n",
				sizeof(line) - 2);
			return 2;
		}
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s", n ? " " : "", argv[i]);
	}
	line[n++] = '\n';
	line[n] = '\0';
	if ((fd = ctl_connect(sock ? sock : path)) < 0)
		return 1;
	ans = exchange(fd, line);
	close(fd);
	if (!ans)
		return 1;
	rc = !strncmp(ans, "error: ", 7);
	fputs(ans, rc ? stderr : stdout);
	free(ans);
	return rc;
}
