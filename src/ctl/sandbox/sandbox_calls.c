/* SPDX-License-Identifier: MIT */
/* sandbox_calls: the seccomp allow-list of the running proxy (sandbox.h).
 * Built with libseccomp, which resolves each name for the architecture and
 * skips the names an architecture lacks. Every thread gets it (TSYNC).
 *
 * The list is what the code calls after start-up, grouped by who calls it;
 * a call not listed fails with EPERM. clone3 says ENOSYS (its flags sit in
 * memory a filter cannot read), so glibc creates threads with clone, whose
 * flags are checked: CLONE_THREAD, or refused (no fork, no posix_spawn). */
#define _GNU_SOURCE
#include "sandbox_parts.h"

#include <errno.h>
#include <linux/bpf.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/sockios.h>

static const char *const plain[] = {
	/* descriptors, files (Landlock says which), pipes and splice */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "close", "close_range", "openat",
	"open", "newfstatat", "fstat", "stat", "lstat", "statx", "lseek", "fcntl", "dup", "dup2", "dup3",
	"pipe", "pipe2", "splice", "tee", "unlink", "unlinkat", "getdents64", "readlink", "readlinkat",
	"fsync", "fdatasync", "ftruncate", "memfd_create", "umask", "access", "faccessat", "faccessat2",
	/* sockets (socket() itself is below: by family) */
	"connect", "accept", "accept4", "bind", "listen", "shutdown", "getsockname", "getpeername",
	"getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
	"socketpair",
	/* the loops */
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll",
	"select", "pselect6", "eventfd2", "timerfd_create", "timerfd_settime", "timerfd_gettime",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	/* memory (mmap and mprotect are below: never executable) */
	"munmap", "mremap", "madvise", "brk",
	/* threads, time, signals */
	"futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq", "exit", "exit_group",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigtimedwait", "sigaltstack",
	"restart_syscall", "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
	"gettimeofday", "time", "sched_yield", "sched_getaffinity", "set_tid_address",
	/* who and where */
	"getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups",
	"getresuid", "getresgid", "sysinfo", "uname", "getrandom", "prlimit64", "getrlimit",
	"getcwd",
};

#if defined(__SANITIZE_ADDRESS__)
#define SANDBOX_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANDBOX_SANITIZED 1
#endif
#endif
#ifndef SANDBOX_SANITIZED
#define SANDBOX_SANITIZED 0
#else
/* what LeakSanitizer's stop-the-world needs on top (see below) */
static const char *const sanitizer[] = { "ptrace", "wait4", "prctl", "kill", "tgkill", "getdents",
					 "sched_getaffinity" };
#endif

/* One rule; a name this architecture lacks is skipped. */
static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
		const struct scmp_arg_cmp *cmp)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		return 0;
	return seccomp_rule_add_array(ctx, action, nr, n, cmp);
}

/* name allowed when argument arg is one of vals. */
static int allow_values(scmp_filter_ctx ctx, const char *name, unsigned arg, const uint64_t *vals,
			unsigned n)
{
	int r = 0;

	for (unsigned i = 0; i < n && !r; i++) {
		struct scmp_arg_cmp c = SCMP_CMP(arg, SCMP_CMP_EQ, vals[i]);
		r = rule(ctx, SCMP_ACT_ALLOW, name, 1, &c);
	}
	return r;
}

int sandbox_calls_enter(int exec_ok, char *why, size_t len)
{
	static const uint64_t families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
	/* SIOCINQ (FIONREAD) and SIOCOUTQ: what the kernel still holds;
	 * SIOCATMARK: urgent data; TCGETS: stdio's isatty; FIONBIO: c-ares */
	static const uint64_t ioctls[] = { SIOCINQ, SIOCOUTQ, SIOCATMARK, TCGETS, FIONBIO, FIOCLEX };
	/* sockmap's map operations; never a program load or attach */
	static const uint64_t bpf_cmds[] = { BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM,
					     BPF_MAP_DELETE_ELEM, BPF_MAP_GET_NEXT_KEY };
	/* thread names; PR_GET_DUMPABLE (glibc asks) */
	static const uint64_t prctls[] = { PR_SET_NAME, PR_GET_NAME, PR_GET_DUMPABLE };
	scmp_filter_ctx ctx;
	struct scmp_arg_cmp c;
	int r = 0, n = 0;

	/* level 2: the seccomp() call with TSYNC, which every thread needs;
	 * below that (a kernel without it, or valgrind, which does not know
	 * the call) the caller says so and goes on */
	if (seccomp_api_get() < 2) {
		snprintf(why, len, "seccomp: no seccomp() with TSYNC here (libseccomp API level %u)",
			 seccomp_api_get());
		return 0;
	}
	if (!(ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM)))) {
		snprintf(why, len, "seccomp: out of memory");
		return -1;
	}
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	for (unsigned i = 0; i < sizeof(plain) / sizeof(plain[0]) && !r; i++, n++)
		r = rule(ctx, SCMP_ACT_ALLOW, plain[i], 0, NULL);
	if (!r)
		r = allow_values(ctx, "socket", 0, families, sizeof(families) / sizeof(families[0]));
	if (!r)
		r = allow_values(ctx, "ioctl", 1, ioctls, sizeof(ioctls) / sizeof(ioctls[0]));
	if (!r)
		r = allow_values(ctx, "bpf", 0, bpf_cmds, sizeof(bpf_cmds) / sizeof(bpf_cmds[0]));
	if (!r)
		r = allow_values(ctx, "prctl", 0, prctls, sizeof(prctls) / sizeof(prctls[0]));
#if SANDBOX_SANITIZED
	/* LeakSanitizer's check at exit stops the threads from a tracer: a
	 * clone without CLONE_THREAD that ptraces them (test builds only) */
	if (!r)
		r = rule(ctx, SCMP_ACT_ALLOW, "clone", 0, NULL);
	for (unsigned i = 0; i < sizeof(sanitizer) / sizeof(sanitizer[0]) && !r; i++)
		r = rule(ctx, SCMP_ACT_ALLOW, sanitizer[i], 0, NULL);
#else
	/* threads only */
	c = (struct scmp_arg_cmp)SCMP_CMP(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD);
	if (!r)
		r = rule(ctx, SCMP_ACT_ALLOW, "clone", 1, &c);
#endif
	if (!r)
		r = rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
	/* no memory becomes executable: no code is loaded after start-up
	 * (under valgrind, whose translations share the process, it may) */
	c = (struct scmp_arg_cmp)SCMP_CMP(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
	if (!r)
		r = rule(ctx, SCMP_ACT_ALLOW, "mmap", !exec_ok, &c);
	if (!r)
		r = rule(ctx, SCMP_ACT_ALLOW, "mprotect", !exec_ok, &c);
	/* signals to this process only (ctl drain, thread wake-ups) */
	c = (struct scmp_arg_cmp)SCMP_CMP(0, SCMP_CMP_EQ, (uint64_t)getpid());
	if (!r)
		r = rule(ctx, SCMP_ACT_ALLOW, "kill", 1, &c);
	if (!r)
		r = rule(ctx, SCMP_ACT_ALLOW, "tgkill", 1, &c);
	if (!r)
		r = rule(ctx, SCMP_ACT_ALLOW, "rt_tgsigqueueinfo", 1, &c);
	n += 12;
	if (r) {
		seccomp_release(ctx);
		snprintf(why, len, "seccomp: building the filter: %s", strerror(-r));
		return -1;
	}
	r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r == -ENOSYS || r == -EINVAL) {
		/* a kernel without seccomp filters (or valgrind, which does
		 * not know the call): the caller says so and goes on */
		snprintf(why, len, "seccomp: not in this kernel (%s)", strerror(-r));
		return 0;
	}
	if (r) {
		snprintf(why, len, "seccomp: %s", strerror(-r));
		return -1;
	}
	return n;
}
