/* SPDX-License-Identifier: MIT */
/* bpf_sockmap: loads bpf/sockmap.bpf.c (embedded in the binary) and keeps
 * its maps for the sockmap engine: two SOCKHASHes (every socket in the
 * kernel path; those whose verdict runs), one counter slot per direction and
 * one alarm ring buffer per worker, for the whole process. The program and
 * maps are loaded once, by the main thread, before root is dropped; workers
 * then insert, pause, resume and remove sockets (bpf() on the map fds,
 * thread-safe), read the counters from shared memory and their alarms from
 * their ring. */
#ifndef SPLICER_BPF_SOCKMAP_H
#define SPLICER_BPF_SOCKMAP_H
#include <stddef.h>
#include <stdint.h>

#include "../../bpf/sockmap_abi.h"

/* Bound on counter slots (two per session in the kernel at once): the maps
 * are preallocated, 131072 slots take about 20 MiB of kernel memory. */
#define SM_MAX_SLOTS (2u * 65536u)

/* Loads the program and sizes the maps for `slots` directions (two per
 * session) and `workers` alarm rings. Returns 0, or -errno with a one-line
 * reason in err. Idempotent once loaded. */
int sm_open(unsigned slots, unsigned workers, char *err, size_t errlen);

/* Worker `worker`'s alarm ring (a BPF ring buffer map: each record is the
 * __u32 slot whose alarm fired), or -1. */
int sm_alarm_fd(unsigned worker);

/* Loads the program and unloads it again: 0 if this process may use the
 * engine, else -errno and the reason (for `splicer bench`). */
int sm_probe_load(char *err, size_t errlen);

/* 1 when sm_open() succeeded. */
int sm_loaded(void);

/* Counter slots, shared among workers: worker `id` of `n` owns a range. */
unsigned sm_slots(void);

/* The counters of one direction (shared memory, written by the program). */
volatile struct sm_ctr *sm_ctr(unsigned slot);

/* sm_insert's result bits: that socket's verdict could not be started (it
 * is in socks only, so the other direction still redirects into it; its
 * own bytes stay in its receive queue for user space). */
#define SM_A_OUT 1
#define SM_B_OUT 2

/* Pairs sockets a and b of worker `worker`: a's bytes count in slot_a and
 * go to b, b's in slot_b and go to a; both alarms start at `alarm`.
 * held_a/held_b: bytes user space already read from a/b and has not yet
 * written to the peer (they go first). Fills the cookies. Returns 0, or
 * SM_A_OUT / SM_B_OUT bits (the kernel refused that verdict: a FIN came,
 * the socket is no longer ESTABLISHED), or -errno (nothing inserted: the
 * sockets are as before). */
int sm_insert(int a, int b, unsigned slot_a, unsigned slot_b, uint64_t held_a, uint64_t held_b,
	      unsigned worker, uint64_t alarm, uint64_t *cookie_a, uint64_t *cookie_b);

/* Stops the verdict on source fd (cookie): its bytes stay in its receive
 * queue, whose window closes. The kernel clears the program before it
 * restores sk_data_ready, without the socket lock, so a verdict run under
 * way on another CPU would drop the skb it is at (seen: 1 corruption in
 * 21,625 pauses of a fast stream). SO_RCVLOWAT at half the receive buffer
 * first waits out any run under way (it takes the socket lock) and keeps
 * TCP from starting one until that much is queued. The caller still
 * checks that nothing was lost (tcp_received.h). Returns 0 or -errno. */
int sm_pause(int fd, uint64_t cookie);

/* Starts the verdict on fd again and runs it over what queued meanwhile
 * (SO_RCVLOWAT 1 makes TCP call sk_data_ready). Returns 0, or -errno:
 * -EOPNOTSUPP once the socket is no longer ESTABLISHED (a FIN came). */
int sm_resume(int fd, uint64_t cookie);

/* Forgets a pair (the sockets leave the SOCKHASH when they are closed). */
void sm_remove(uint64_t cookie_a, uint64_t cookie_b);

#endif
