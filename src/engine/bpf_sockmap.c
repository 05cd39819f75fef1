/* SPDX-License-Identifier: MIT */
/* bpf_sockmap: see bpf_sockmap.h. The BPF object is built by the Makefile
 * (clang -target bpf) into $(B)/bpf/sockmap.bpf.o and embedded here with
 * .incbin, so the binary needs no file at run time; libbpf opens it from
 * memory. */
#define _GNU_SOURCE
#include "bpf_sockmap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"

#ifndef SM_BPF_OBJ
#define SM_BPF_OBJ "build/bpf/sockmap.bpf.o"
#endif

__asm__(".section .rodata\n"
	".balign 8\n"
	".global sm_obj_start\n"
	"sm_obj_start:\n"
	".incbin \"" SM_BPF_OBJ "\"\n"
	".global sm_obj_end\n"
	"sm_obj_end:\n"
	".previous\n");
extern const char sm_obj_start[], sm_obj_end[];

static struct {
	struct bpf_object *obj;
	int socks, pairs;       /* map fds */
	volatile struct sm_ctr *ctr;
	size_t ctr_len;
	unsigned slots;
	int loaded;
	char last[200];         /* libbpf's last warning: the reason when a load fails */
} sm = { .socks = -1, .pairs = -1 };

static int libbpf_log(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	if (lvl == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	snprintf(sm.last, sizeof(sm.last), "%.199s", line);
	log_debug("libbpf: %s", line);
	return 0;
}

int sm_loaded(void)
{
	return sm.loaded;
}

unsigned sm_slots(void)
{
	return sm.slots;
}

volatile struct sm_ctr *sm_ctr(unsigned slot)
{
	return &sm.ctr[slot];
}

static int fail(struct bpf_object *obj, int r, char *err, size_t errlen, const char *what)
{
	if (r == -EPERM)
		snprintf(err, errlen, "%s: %s (needs CAP_BPF and CAP_NET_ADMIN, or root)", what,
			 strerror(-r));
	else if (sm.last[0])
		snprintf(err, errlen, "%s: %s (%s)", what, strerror(-r), sm.last);
	else
		snprintf(err, errlen, "%s: %s", what, strerror(-r));
	bpf_object__close(obj);
	return r;
}

int sm_open(unsigned slots, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "splicer_sockmap");
	struct bpf_object *obj;
	struct bpf_map *socks, *pairs, *ctrs;
	struct bpf_program *prog;
	size_t len, page = (size_t)sysconf(_SC_PAGESIZE);
	void *mem;
	int r;

	if (sm.loaded)
		return 0;
	if (slots < 2)
		slots = 2;
	sm.last[0] = '\0';
	libbpf_set_print(libbpf_log);
	obj = bpf_object__open_mem(sm_obj_start, (size_t)(sm_obj_end - sm_obj_start), &opts);
	if (!obj) {
		r = -errno;
		return fail(NULL, r, err, errlen, "opening the embedded BPF object");
	}
	socks = bpf_object__find_map_by_name(obj, "socks");
	pairs = bpf_object__find_map_by_name(obj, "pairs");
	ctrs = bpf_object__find_map_by_name(obj, "ctrs");
	prog = bpf_object__find_program_by_name(obj, "sm_verdict");
	if (!socks || !pairs || !ctrs || !prog)
		return fail(obj, -ENOENT, err, errlen, "BPF object lacks a map or the program");
	if ((r = bpf_map__set_max_entries(socks, slots)) || (r = bpf_map__set_max_entries(pairs, slots)) ||
	    (r = bpf_map__set_max_entries(ctrs, slots)))
		return fail(obj, r, err, errlen, "sizing the maps");
	if ((r = bpf_object__load(obj)))
		return fail(obj, r, err, errlen, "loading the BPF program");
	if ((r = bpf_prog_attach(bpf_program__fd(prog), bpf_map__fd(socks), BPF_SK_SKB_STREAM_VERDICT, 0)))
		return fail(obj, -errno, err, errlen, "attaching the stream verdict to the SOCKHASH");
	len = ((size_t)slots * sizeof(struct sm_ctr) + page - 1) & ~(page - 1);
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(ctrs), 0);
	if (mem == MAP_FAILED)
		return fail(obj, -errno, err, errlen, "mapping the counters");
	sm.obj = obj;
	sm.socks = bpf_map__fd(socks);
	sm.pairs = bpf_map__fd(pairs);
	sm.ctr = mem;
	sm.ctr_len = len;
	sm.slots = slots;
	sm.loaded = 1;
	return 0;
}

int sm_probe_load(char *err, size_t errlen)
{
	struct bpf_object *obj;
	int r;

	if (sm.loaded)
		return 0;
	sm.last[0] = '\0';
	libbpf_set_print(libbpf_log);
	obj = bpf_object__open_mem(sm_obj_start, (size_t)(sm_obj_end - sm_obj_start), NULL);
	if (!obj)
		return fail(NULL, -errno, err, errlen, "opening the embedded BPF object");
	if ((r = bpf_object__load(obj)))
		return fail(obj, r, err, errlen, "loading the BPF program");
	bpf_object__close(obj);
	return 0;
}

static int cookie_of(int fd, uint64_t *c)
{
	socklen_t len = sizeof(*c);

	return getsockopt(fd, SOL_SOCKET, SO_COOKIE, c, &len) ? -errno : 0;
}

int sm_insert(int a, int b, unsigned slot_a, unsigned slot_b, uint64_t held_a, uint64_t held_b,
	      uint64_t *cookie_a, uint64_t *cookie_b)
{
	struct sm_pair pa = { .slot = slot_a }, pb = { .slot = slot_b };
	uint64_t ca, cb, fa = (uint64_t)a, fb = (uint64_t)b;
	int r, one = 1, degraded;

	if ((r = cookie_of(a, &ca)) || (r = cookie_of(b, &cb)))
		return r;
	pa.peer = cb;
	pb.peer = ca;
	/* Counters first: held bytes count as passed to user space, so the
	 * program leaves the next bytes to user space too until it has sent
	 * them (see bpf/sockmap.bpf.c). */
	sm.ctr[slot_a].redirected = sm.ctr[slot_a].user_sent = 0;
	sm.ctr[slot_a].passed = held_a;
	sm.ctr[slot_b].redirected = sm.ctr[slot_b].user_sent = 0;
	sm.ctr[slot_b].passed = held_b;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (bpf_map_update_elem(sm.pairs, &ca, &pa, BPF_ANY) ||
	    bpf_map_update_elem(sm.pairs, &cb, &pb, BPF_ANY)) {
		r = -errno;
		goto undo;
	}
	if (bpf_map_update_elem(sm.socks, &ca, &fa, BPF_NOEXIST)) {
		r = -errno;
		goto undo;
	}
	/* From here on the program sees a's skbs; until b is in too, the
	 * redirect fails and they are passed to user space. Taking a out
	 * again would drop its psock and with it any bytes passed meanwhile,
	 * so a failure on b leaves a in: everything then goes through user
	 * space (degraded, but nothing lost or reordered). */
	degraded = bpf_map_update_elem(sm.socks, &cb, &fb, BPF_NOEXIST) != 0;
	if (degraded)
		log_debug("sockmap: inserting the second socket: %s", strerror(errno));
	/* Bytes that arrived before the verdict was attached sit in the
	 * receive queue until the next segment runs it. Setting SO_RCVLOWAT
	 * makes TCP call sk_data_ready now (tcp_set_rcvlowat), which runs
	 * the verdict over the queue, in order. */
	setsockopt(a, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	setsockopt(b, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	*cookie_a = ca;
	*cookie_b = cb;
	return degraded;
undo:
	bpf_map_delete_elem(sm.pairs, &ca);
	bpf_map_delete_elem(sm.pairs, &cb);
	return r;
}

void sm_remove(uint64_t cookie_a, uint64_t cookie_b)
{
	bpf_map_delete_elem(sm.pairs, &cookie_a);
	bpf_map_delete_elem(sm.pairs, &cookie_b);
}
