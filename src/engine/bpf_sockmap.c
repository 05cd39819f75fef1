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
#include <stdlib.h>
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

/* One ring per worker: 16 KiB, 1024 events of a slot; a full ring only
 * delays an alarm (the program re-arms it for the next skb). Must match the
 * inner map's size in bpf/sockmap.bpf.c. */
#define SM_RING_BYTES 16384

static struct {
	struct bpf_object *obj;
	int socks, verd, pairs; /* map fds */
	int *rings;             /* per worker: alarm ring fds */
	unsigned nrings;
	volatile struct sm_ctr *ctr;
	size_t ctr_len;
	unsigned slots;
	int loaded;
	char last[200];         /* libbpf's last warning: the reason when a load fails */
} sm = { .socks = -1, .verd = -1, .pairs = -1 };

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

int sm_alarm_fd(unsigned worker)
{
	return worker < sm.nrings ? sm.rings[worker] : -1;
}

/* The per-worker rings, put in the program's `alarms` array. */
static int rings_make(int outer, unsigned workers)
{
	if (!(sm.rings = calloc(workers, sizeof(int))))
		return -ENOMEM;
	for (unsigned i = 0; i < workers; i++) {
		int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "sm_alarm", 0, 0, SM_RING_BYTES, NULL);
		if (fd < 0)
			return -errno;
		sm.rings[sm.nrings++] = fd;
		if (bpf_map_update_elem(outer, &i, &fd, BPF_ANY))
			return -errno;
	}
	return 0;
}

static void rings_close(void)
{
	for (unsigned i = 0; i < sm.nrings; i++)
		close(sm.rings[i]);
	free(sm.rings);
	sm.rings = NULL;
	sm.nrings = 0;
}

static int fail(struct bpf_object *obj, int r, char *err, size_t errlen, const char *what)
{
	if (r == -EPERM)
		snprintf(err, errlen, "%s: %s (needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, or root)", what,
			 strerror(-r));
	else if (sm.last[0])
		snprintf(err, errlen, "%s: %s (%s)", what, strerror(-r), sm.last);
	else
		snprintf(err, errlen, "%s: %s", what, strerror(-r));
	bpf_object__close(obj);
	return r;
}

int sm_open(unsigned slots, unsigned workers, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "splicer_sockmap");
	struct bpf_object *obj;
	struct bpf_map *socks, *verd, *pairs, *ctrs, *alarms;
	struct bpf_program *prog;
	size_t len, page = (size_t)sysconf(_SC_PAGESIZE);
	void *mem;
	int r;

	if (sm.loaded)
		return 0;
	if (slots < 2)
		slots = 2;
	if (workers < 1)
		workers = 1;
	sm.last[0] = '\0';
	libbpf_set_print(libbpf_log);
	obj = bpf_object__open_mem(sm_obj_start, (size_t)(sm_obj_end - sm_obj_start), &opts);
	if (!obj) {
		r = -errno;
		return fail(NULL, r, err, errlen, "opening the embedded BPF object");
	}
	socks = bpf_object__find_map_by_name(obj, "socks");
	verd = bpf_object__find_map_by_name(obj, "verd");
	pairs = bpf_object__find_map_by_name(obj, "pairs");
	ctrs = bpf_object__find_map_by_name(obj, "ctrs");
	alarms = bpf_object__find_map_by_name(obj, "alarms");
	prog = bpf_object__find_program_by_name(obj, "sm_verdict");
	if (!socks || !verd || !pairs || !ctrs || !alarms || !prog)
		return fail(obj, -ENOENT, err, errlen, "BPF object lacks a map or the program");
	if ((r = bpf_map__set_max_entries(socks, slots)) || (r = bpf_map__set_max_entries(verd, slots)) ||
	    (r = bpf_map__set_max_entries(pairs, slots)) || (r = bpf_map__set_max_entries(ctrs, slots)) ||
	    (r = bpf_map__set_max_entries(alarms, workers)))
		return fail(obj, r, err, errlen, "sizing the maps");
	if ((r = bpf_object__load(obj)))
		return fail(obj, r, err, errlen, "loading the BPF program");
	/* the verdict on `verd` only: `socks` keeps psocks and redirect targets */
	if ((r = bpf_prog_attach(bpf_program__fd(prog), bpf_map__fd(verd), BPF_SK_SKB_STREAM_VERDICT, 0)))
		return fail(obj, -errno, err, errlen, "attaching the stream verdict to the SOCKHASH");
	if ((r = rings_make(bpf_map__fd(alarms), workers))) {
		rings_close();
		return fail(obj, r, err, errlen, "making the alarm ring buffers");
	}
	len = ((size_t)slots * sizeof(struct sm_ctr) + page - 1) & ~(page - 1);
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(ctrs), 0);
	if (mem == MAP_FAILED) {
		r = -errno;
		rings_close();
		return fail(obj, r, err, errlen, "mapping the counters");
	}
	sm.obj = obj;
	sm.socks = bpf_map__fd(socks);
	sm.verd = bpf_map__fd(verd);
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

/* Starts the verdict on fd: into `verd`, then SO_RCVLOWAT 1, so bytes that
 * arrived before the verdict was attached (they sit in the receive queue
 * until the next segment would run it) go through it now, in order:
 * tcp_set_rcvlowat calls sk_data_ready under the socket lock. */
static int verdict_start(int fd, uint64_t cookie)
{
	uint64_t v = (uint64_t)fd;
	int one = 1;

	if (bpf_map_update_elem(sm.verd, &cookie, &v, BPF_NOEXIST))
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	return 0;
}

int sm_insert(int a, int b, unsigned slot_a, unsigned slot_b, uint64_t held_a, uint64_t held_b,
	      unsigned worker, uint64_t alarm, uint64_t *cookie_a, uint64_t *cookie_b)
{
	struct sm_pair pa = { .slot = slot_a, .worker = worker }, pb = { .slot = slot_b, .worker = worker };
	uint64_t ca, cb, fa = (uint64_t)a, fb = (uint64_t)b;
	int r, out = 0;

	if ((r = cookie_of(a, &ca)) || (r = cookie_of(b, &cb)))
		return r;
	pa.peer = cb;
	pb.peer = ca;
	/* Counters first: held bytes count as passed to user space, so the
	 * program leaves the next bytes to user space too until it has sent
	 * them (see bpf/sockmap.bpf.c). */
	for (int i = 0; i < 2; i++) {
		volatile struct sm_ctr *c = &sm.ctr[i ? slot_b : slot_a];

		c->redirected = c->user_sent = c->repeated = 0;
		c->passed = i ? held_b : held_a;
		c->alarm = alarm;
		c->seq_known = c->broken = 0; /* the program starts from copied_seq */
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (bpf_map_update_elem(sm.pairs, &ca, &pa, BPF_ANY) ||
	    bpf_map_update_elem(sm.pairs, &cb, &pb, BPF_ANY)) {
		r = -errno;
		goto undo;
	}
	/* Both into `socks` first: no program runs there, so nothing moves
	 * yet, and a failure can take a out again (its psock holds nothing:
	 * no verdict ran, nothing was redirected to it). */
	if (bpf_map_update_elem(sm.socks, &ca, &fa, BPF_NOEXIST)) {
		r = -errno;
		goto undo;
	}
	if (bpf_map_update_elem(sm.socks, &cb, &fb, BPF_NOEXIST)) {
		r = -errno;
		bpf_map_delete_elem(sm.socks, &ca);
		goto undo;
	}
	/* From here on each verdict redirects into a peer that is there. A
	 * refused verdict (a FIN came meanwhile) leaves that socket's bytes in
	 * its receive queue for user space. */
	if ((r = verdict_start(a, ca))) {
		log_debug("sockmap: starting the first socket's verdict: %s", strerror(-r));
		out |= SM_A_OUT;
	}
	if ((r = verdict_start(b, cb))) {
		log_debug("sockmap: starting the second socket's verdict: %s", strerror(-r));
		out |= SM_B_OUT;
	}
	*cookie_a = ca;
	*cookie_b = cb;
	return out;
undo:
	bpf_map_delete_elem(sm.pairs, &ca);
	bpf_map_delete_elem(sm.pairs, &cb);
	return r;
}

int sm_pause(int fd, uint64_t cookie)
{
	int rcvbuf = 0, lowat;
	socklen_t len = sizeof(rcvbuf);

	/* half the buffer: TCP caps a larger mark there and would grow the
	 * buffer for it (tcp_set_rcvlowat) */
	if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len))
		return -errno;
	lowat = rcvbuf / 2 > 1 ? rcvbuf / 2 : 1;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat)))
		return -errno;
	if (bpf_map_delete_elem(sm.verd, &cookie))
		return -errno;
	return 0;
}

int sm_resume(int fd, uint64_t cookie)
{
	return verdict_start(fd, cookie);
}

void sm_remove(uint64_t cookie_a, uint64_t cookie_b)
{
	bpf_map_delete_elem(sm.pairs, &cookie_a);
	bpf_map_delete_elem(sm.pairs, &cookie_b);
}
