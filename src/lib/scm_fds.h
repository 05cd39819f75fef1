/* SPDX-License-Identifier: MIT */
/* scm_fds: descriptors passed over a Unix socket (SCM_RIGHTS), for the
 * upgrade's spawner and its hand-over of sessions. */
#ifndef SPLICER_SCM_FDS_H
#define SPLICER_SCM_FDS_H
#include <stddef.h>
#include <sys/socket.h>

/* Room in a control buffer for n descriptors. */
#define SCM_FDS_SPACE(n) CMSG_SPACE((n) * sizeof(int))

/* Puts fds[0..n) in mh's control data (cbuf: SCM_FDS_SPACE(n) bytes at
 * least); n = 0 leaves mh without one. */
void scm_fds_put(struct msghdr *mh, char *cbuf, const int *fds, unsigned n);

/* The descriptors a received mh carries: up to max into fds (in order),
 * the rest closed (a peer that sends more than asked leaks nothing).
 * Returns how many were stored. */
unsigned scm_fds_take(struct msghdr *mh, int *fds, unsigned max);

#endif
