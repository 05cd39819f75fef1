/* SPDX-License-Identifier: MIT */
/* bpf_sockmap: loads bpf/sockmap.bpf.c (embedded in the binary) and keeps
 * its maps for the sockmap engine: one SOCKHASH of sockets and one counter
 * slot per direction, for the whole process. The program and maps are
 * loaded once, by the main thread, before root is dropped; workers then
 * insert and remove sockets (bpf() on the map fds, thread-safe) and read
 * the counters from shared memory. */
#ifndef SPLICER_BPF_SOCKMAP_H
#define SPLICER_BPF_SOCKMAP_H
#include <stddef.h>
#include <stdint.h>

#include "../../bpf/sockmap_abi.h"

/* Bound on counter slots (two per session in the kernel at once): the maps
 * are preallocated, 131072 slots take about 20 MiB of kernel memory. */
#define SM_MAX_SLOTS (2u * 65536u)

/* Loads the program and sizes the maps for `slots` directions (two per
 * session). Returns 0, or -errno with a one-line reason in err. Idempotent
 * once loaded. */
int sm_open(unsigned slots, char *err, size_t errlen);

/* Loads the program and unloads it again: 0 if this process may use the
 * engine, else -errno and the reason (for `splicer bench`). */
int sm_probe_load(char *err, size_t errlen);

/* 1 when sm_open() succeeded. */
int sm_loaded(void);

/* Counter slots, shared among workers: worker `id` of `n` owns a range. */
unsigned sm_slots(void);

/* The counters of one direction (shared memory, written by the program). */
volatile struct sm_ctr *sm_ctr(unsigned slot);

/* Pairs sockets a and b: a's bytes count in slot_a and go to b, b's in
 * slot_b and go to a. held_a/held_b: bytes user space already read from
 * a/b and has not yet written to the peer (they go first). Fills the
 * cookies. Returns 0; 1 when only a could be inserted (user space then
 * copies every byte, through a's psock); or -errno (nothing inserted). */
int sm_insert(int a, int b, unsigned slot_a, unsigned slot_b, uint64_t held_a, uint64_t held_b,
	      uint64_t *cookie_a, uint64_t *cookie_b);

/* Forgets a pair (the sockets leave the SOCKHASH when they are closed). */
void sm_remove(uint64_t cookie_a, uint64_t cookie_b);

#endif
