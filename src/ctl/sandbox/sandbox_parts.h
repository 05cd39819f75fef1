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

/* seccomp (sandbox_calls.c): the allow-list, for every thread (TSYNC);
 * exec_ok: executable mappings stay allowed (under valgrind). Returns the
 * number of rules (> 0), 0 with why when the kernel has no seccomp filters,
 * or -1 with why. */
int sandbox_calls_enter(int exec_ok, char *why, size_t len);

#endif
