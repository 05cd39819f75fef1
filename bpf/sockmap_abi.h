/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/* sockmap_abi.h: the layout shared by bpf/sockmap.bpf.c and src/bpf_sockmap.c
 * (map values). Change both sides together. */
#ifndef SPLICER_SOCKMAP_ABI_H
#define SPLICER_SOCKMAP_ABI_H
#include <linux/types.h>

/* pairs[cookie of a socket]: where its bytes go and which counters count them. */
struct sm_pair {
	__u64 peer;   /* the peer socket's cookie, its key in socks */
	__u32 slot;   /* index into ctrs */
	__u32 worker; /* index into alarms: the worker that owns the session */
};

/* ctrs[slot]: one direction (source socket -> its peer). */
struct sm_ctr {
	__u64 passed;     /* BPF: bytes left to user space (+ what it held at insertion) */
	__u64 redirected; /* BPF: bytes put on the peer's redirect queue */
	__u64 user_sent;  /* user space: bytes it has written to the peer itself */
	__u64 alarm;      /* user space sets it; BPF wakes the worker (alarms) once redirected
			     reaches it, and sets it to SM_ALARM_OFF */
	__u64 repeated;   /* BPF: bytes the kernel handed the verdict a second time (cut) */
	__u32 next_seq;   /* BPF: the TCP sequence number of the source's next new byte */
	__u32 seq_known;  /* BPF: next_seq is set (user space clears it at insertion) */
	__u32 broken;     /* BPF: a repeat it could not cut: the direction must end (reset) */
	__u32 pad;
};

#define SM_ALARM_OFF (~0ULL)

#endif
