/* SPDX-License-Identifier: MIT */
/* scm_fds: see scm_fds.h. */
#include "scm_fds.h"

#include <string.h>
#include <unistd.h>

void scm_fds_put(struct msghdr *mh, char *cbuf, const int *fds, unsigned n)
{
	struct cmsghdr *c;

	if (!n)
		return;
	memset(cbuf, 0, SCM_FDS_SPACE(n));
	mh->msg_control = cbuf;
	mh->msg_controllen = SCM_FDS_SPACE(n);
	c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
}

unsigned scm_fds_take(struct msghdr *mh, int *fds, unsigned max)
{
	unsigned got = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (unsigned i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < max)
				fds[got++] = fd;
			else
				close(fd);
		}
	}
	return got;
}
