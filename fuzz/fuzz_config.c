/* SPDX-License-Identifier: MIT */
/* libFuzzer harness: the config file reader and checks (src/ctl/config/config_file.c,
 * src/ctl/config/config.c) on any file content, through a memfd. Problems go to
 * stderr, which `make fuzz` closes for the target (-close_fd_mask=2;
 * libFuzzer keeps its own copy for its reports). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "addr.h"
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config c;
	char path[64];
	int fd = memfd_create("fuzz.conf", MFD_CLOEXEC);

	addr_resolve_names = 0; /* backend names in the input must not reach DNS */
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	config_defaults(&c);
	snprintf(c.file, sizeof(c.file), "%s", path);
	config_host_checks = 0; /* no user lookup, no log file opened */
	config_read_includes = 0; /* an include pattern must not walk the host's files */
	if (config_load_file(&c, path) == 0)
		(void)config_finalize(&c);
	config_free(&c);
	close(fd);
	return 0;
}
