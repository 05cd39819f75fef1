/* SPDX-License-Identifier: MIT */
/* sock_probe: looks at the proxy's own sockets from the test, the way an
 * operator would with `ss -tie`: a copy of the proxy's descriptor
 * (pidfd_getfd, Linux 5.6; needs ptrace rights over the proxy: root, or the
 * same user) on which getsockopt reads what the proxy set. */
#ifndef SPLICER_SOCK_PROBE_H
#define SPLICER_SOCK_PROBE_H
#include <stddef.h>
#include <sys/types.h>

/* A copy of the proxy's TCP socket whose local port is lport and whose
 * peer's port is pport (0: a listening socket), or -1 (none, or no
 * pidfd_getfd here: errno says). The caller closes it. */
int sp_find(pid_t pid, int lport, int pport);

/* getsockopt of an int option; asserts it works. */
int sp_int(int fd, int level, int name);

/* SO_BINDTODEVICE's device ("" when none). */
void sp_dev(int fd, char *out, size_t len);

/* SO_MAX_PACING_RATE in bytes per second (~0UL: none). */
unsigned long sp_pacing(int fd);

/* The listen backlog of the TCP listener on port in the test's current
 * network namespace, as `ss -ltn` shows it (Send-Q); -1 if not found. */
int sp_backlog(int port);

/* The local and peer ports of a connected socket of the test. */
int sp_local_port(int fd);

/* 1 when MPTCP sockets can be made here. */
int sp_mptcp(void);

#endif
