/* SPDX-License-Identifier: MIT */
/* sock_probe: see sock_probe.h. */
#define _GNU_SOURCE
#include "sock_probe.h"
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static int port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return -1;
}

int sp_find(pid_t pid, int lport, int pport)
{
	char dir[64];
	struct dirent *e;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), found = -1;
	DIR *d;

	if (pidfd < 0)
		return -1;
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
	if (!(d = opendir(dir))) {
		close(pidfd);
		return -1;
	}
	while (found < 0 && (e = readdir(d))) {
		struct sockaddr_storage a, b;
		socklen_t al = sizeof a, bl = sizeof b;
		int fd, listening;

		if (e->d_name[0] == '.')
			continue;
		fd = (int)syscall(SYS_pidfd_getfd, pidfd, atoi(e->d_name), 0);
		if (fd < 0)
			continue;
		if (getsockname(fd, (struct sockaddr *)&a, &al) || port_of(&a) != lport) {
			close(fd);
			continue;
		}
		listening = sp_int(fd, SOL_SOCKET, SO_ACCEPTCONN);
		if (pport ? !listening && !getpeername(fd, (struct sockaddr *)&b, &bl) &&
				    port_of(&b) == pport
			  : listening)
			found = fd;
		else
			close(fd);
	}
	closedir(d);
	close(pidfd);
	return found;
}

int sp_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof v;

	H_CHECK(getsockopt(fd, level, name, &v, &l) == 0, "getsockopt(%d, %d): %s", level, name,
		strerror(errno));
	return v;
}

void sp_dev(int fd, char *out, size_t len)
{
	socklen_t l = (socklen_t)len;

	if (getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, out, &l))
		l = 0;
	out[l < len ? l : len - 1] = '\0';
}

unsigned long sp_pacing(int fd)
{
	unsigned long v = 0;
	socklen_t l = sizeof v;

	H_CHECK(getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v, &l) == 0,
		"getsockopt(SO_MAX_PACING_RATE): %s", strerror(errno));
	return v;
}

int sp_backlog(int port)
{
	char cmd[128], line[256];
	int q = -1, rq, sq;
	FILE *f;

	snprintf(cmd, sizeof cmd, "ss -Hltn 'sport = :%d' 2>/dev/null", port);
	if (!(f = popen(cmd, "r")))
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "LISTEN %d %d", &rq, &sq) == 2)
			q = sq;
	pclose(f);
	return q;
}

int sp_local_port(int fd)
{
	struct sockaddr_storage a;
	socklen_t l = sizeof a;

	return getsockname(fd, (struct sockaddr *)&a, &l) ? -1 : port_of(&a);
}

int sp_mptcp(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}
