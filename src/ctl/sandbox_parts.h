/* SPDX-License-Identifier: MIT */
/* sandbox_parts: the pieces sandbox.c puts together (internal). */
#ifndef SPLICER_SANDBOX_PARTS_H
#define SPLICER_SANDBOX_PARTS_H
#include <stddef.h>

#include "config.h"

/* Landlock (sandbox_fs.c): restricts the calling thread, and the threads
 * it creates from now on, to the paths sandbox.h lists for cfg. Returns the
 * ABI version in force (> 0), 0 when the kernel has no Landlock (why says
 * so), or -1 with why (a rule could not be added, or the restriction
 * failed). */
int sandbox_fs_enter(const struct config *cfg, char *why, size_t len);

/* seccomp (sandbox_calls.c): the allow-list, for every thread (TSYNC).
 * Returns the number of calls allowed (> 0), or -1 with why. */
int sandbox_calls_enter(char *why, size_t len);

#endif
