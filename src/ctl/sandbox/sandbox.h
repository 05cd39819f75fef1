/* SPDX-License-Identifier: MIT */
/* sandbox: what the running proxy gives up once it is set up (`sandbox =
 * yes`, the default; doc/security.md has the list and the reasons):
 *   - no_new_privs, and memory that was writable never becomes executable
 *     (PR_SET_MDWE where the kernel has it);
 *   - a seccomp allow-list, for every thread (TSYNC): what a worker, a
 *     reload, the stats and admin endpoints, health checks, DNS and an
 *     upgrade's hand-over call, and nothing else: no execve, no fork (clone
 *     only with CLONE_THREAD), no ptrace, mount, set*id, module or key
 *     calls; socket() for AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK only;
 *     ioctl() for the few requests the proxy makes; bpf() for sockmap's map
 *     operations, never a program load; no new executable mapping. A call
 *     outside it fails with EPERM (the proxy survives a path it did not
 *     foresee and says so, rather than dying);
 *   - Landlock, where the kernel has it: reading under /etc, /usr, /lib*,
 *     /proc and the config file's directory; writing the access log's
 *     directory (a rotation's new file); making and removing socket files
 *     in the directories of the Unix sockets the config names at start;
 *     signals only within the process (ABI 6). Nothing else: a symlink or
 *     a reload pointing elsewhere finds EACCES.
 * The upgrade's spawner (upgrade.c) is forked before and stays outside: a
 * filter is inherited through execve, and the new process must set itself
 * up (bind, read its config, load BPF) before it installs its own. */
#ifndef SPLICER_SANDBOX_H
#define SPLICER_SANDBOX_H
#include <stddef.h>

#include "config.h"

/* Installs the sandbox for cfg in the calling thread and (seccomp) every
 * thread of the process. Call once root is dropped, from the thread that
 * creates the others that must be confined by Landlock (it binds the
 * calling thread and the ones it creates afterwards). What is in force,
 * and what the kernel lacks, is sandbox_log's to say. Returns
 * 0, or -1 with err when a part the kernel has could not be installed (the
 * caller stops: a half-applied sandbox is not what the config asked for).
 * `sandbox = no`: nothing, 0. */
int sandbox_enter(const struct config *cfg, char *err, size_t errlen);

/* Logs what sandbox_enter put in force (with the start-up lines, once the
 * process serves; a start that fails after the sandbox says only why). */
void sandbox_log(void);

/* SPLICER_SANDBOX_SELFTEST set in the environment: from a new thread, tries
 * what the sandbox forbids (execve of /bin/true, a fork, opening the file
 * the variable names for reading) and logs "sandbox selftest: CALL: refused
 * (ERROR)" or "sandbox selftest: CALL: ALLOWED" for each: the tests' proof
 * that the sandbox of the running proxy, not of a test program, holds. */
void sandbox_selftest(void);

#endif
