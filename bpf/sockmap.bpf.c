/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/* sockmap.bpf.c: the sockmap engine's SK_SKB stream-verdict program.
 *
 * Two SOCKHASHes keyed by socket cookie. Every socket of a session in the
 * kernel path sits in `socks`, which has no program: it keeps the socket's
 * psock (and so its redirect queue) alive and is where redirects look up
 * their target. `verd` has this program attached and holds the sockets
 * whose direction may redirect now: user space takes a source out of it to
 * stop the verdict (its bytes then wait in its own receive queue and its
 * window closes: back-pressure) and puts it back when the peer has taken
 * what was redirected (src/engine/engine_sockmap.c says when and how).
 *
 * For each skb the kernel reads from a socket in `verd`, this program looks
 * up the socket's entry in `pairs` (the peer's cookie, a counter slot, the
 * owning worker) and either
 *   - redirects the skb to the peer's send path (in-kernel, the fast path),
 *     counting the bytes in `redirected`, or
 *   - passes it to the socket's own receive queue for user space to copy
 *     (SK_PASS), counting them in `passed`, when user space still owes the
 *     peer earlier bytes (passed != user_sent) or the peer is not in the map
 *     (yet, or any more). Redirecting then would overtake those bytes.
 * The kernel puts no bound on a redirect queue (nothing is charged to a
 * socket while it waits there), so user space bounds it: when `redirected`
 * reaches the slot's `alarm`, the program wakes the owning worker through
 * its ring buffer (alarms) and disarms the alarm; the worker measures what
 * is still queued and takes the source out of `verd` if it is too much.
 * Empty skbs (a bare FIN) are dropped: the kernel does not forward a FIN, and
 * a zero-length skb on the peer's backlog would fail with EPIPE there; user
 * space sees the FIN as end of file and forwards it with shutdown().
 * The counters live in an mmap-able array so user space reads them without
 * a system call (drain check, idle timeout, byte counts, alarms).
 *
 * Repeats. The kernel hands the verdict whole skbs (tcp_read_skb) and, unlike
 * recv(), ignores how much of one was already consumed: a segment the peer
 * retransmitted that partly overlaps bytes already received is queued as it
 * came (tcp_data_queue keeps a partial overlap, the out-of-order queue keeps
 * them too), so without a check its first bytes would go out twice. That
 * happened under load (a stream repeated 85 to 130 KB) and also pushes the
 * socket's copied_seq past rcv_nxt by the overlap. So the program tracks the
 * sequence number of the source's next new byte and cuts what comes before
 * it from each skb (sk_skb's bpf_skb_adjust_room, 4095 bytes a call), or
 * drops an skb that is all repeat, emptied first so the kernel does not count
 * it consumed twice. A repeat it cannot cut marks the direction broken: from
 * then on it drops, and user space ends the direction with a reset. */
#include <linux/bpf.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "sockmap_abi.h"

/* The kernel's own structures, only the fields read here; CO-RE puts in
 * the running kernel's offsets (its BTF). */
struct sk_buff {
	char cb[48]; /* struct tcp_skb_cb: seq is its first word */
	struct sock *sk;
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 copied_seq;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

#define SM_CUT_STEP  4095u /* the most sk_skb's bpf_skb_adjust_room cuts at once */
#define SM_CUT_STEPS 512   /* so at most 2 MiB of repeat is cut from one skb */

/* Sizes are set by the loader from max-conns and the number of workers. */

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 2);
	__type(key, __u64);
	__type(value, __u64);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 2);
	__type(key, __u64);
	__type(value, __u64);
} verd SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2);
	__type(key, __u64);
	__type(value, struct sm_pair);
} pairs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct sm_ctr);
} ctrs SEC(".maps");

/* One ring buffer per worker (made by the loader); events are slots. */
struct sm_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16384);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct sm_ring);
} alarms SEC(".maps");

/* Cuts n bytes from the head of skb; 0, or -1 when the kernel refused. */
static __always_inline int cut_head(struct __sk_buff *skb, __u32 n)
{
	for (int i = 0; i < SM_CUT_STEPS && n; i++) {
		__u32 step = n < SM_CUT_STEP ? n : SM_CUT_STEP;

		if (bpf_skb_adjust_room(skb, -(__s32)step, 0, 0))
			return -1;
		n -= step;
	}
	return n ? -1 : 0;
}

/* Removes from skb the bytes the source already gave the verdict (see the
 * top). Returns the bytes left in it (0: all were a repeat), or -1 when the
 * direction is broken. */
static __always_inline __s64 cut_repeat(struct __sk_buff *skb, struct sm_ctr *c, __u32 len)
{
	struct sk_buff *k = bpf_cast_to_kern_ctx(skb);
	__u32 seq = *(__u32 *)&k->cb[0], over;

	if (c->broken)
		return -1;
	if (!c->seq_known) {
		/* the first skb since insertion: new bytes start where the
		 * readers before the program (user space) stopped */
		struct tcp_sock *tp = (struct tcp_sock *)k->sk;
		__u32 copied;

		if (!tp || bpf_core_read(&copied, sizeof(copied), &tp->copied_seq))
			copied = seq;
		c->next_seq = copied;
		c->seq_known = 1;
	}
	over = c->next_seq - seq;
	if ((__s32)over <= 0) {
		c->next_seq = seq + len;
		return len;
	}
	if (over > len)
		over = len; /* all of it came before: next_seq stays */
	if (cut_head(skb, over)) {
		c->broken = 1;
		return -1;
	}
	__sync_fetch_and_add(&c->repeated, over);
	if (over < len)
		c->next_seq = seq + len;
	return len - over;
}

SEC("sk_skb/stream_verdict")
int sm_verdict(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	__u64 len = skb->len, peer, red;
	struct sm_pair *p;
	__s64 cut;
	struct sm_ctr *c;
	__u32 slot, worker;
	void *ring;

	if (!len)
		return SK_DROP;
	p = bpf_map_lookup_elem(&pairs, &cookie);
	if (!p)
		return SK_PASS;
	slot = p->slot;
	peer = p->peer;
	worker = p->worker;
	c = bpf_map_lookup_elem(&ctrs, &slot);
	if (!c)
		return SK_PASS;
	cut = cut_repeat(skb, c, (__u32)len);
	if (cut <= 0)
		return SK_DROP; /* all a repeat (emptied), or the direction is broken */
	len = (__u64)cut;
	if (*(volatile __u64 *)&c->passed != *(volatile __u64 *)&c->user_sent)
		goto pass;
	if (bpf_sk_redirect_hash(skb, &socks, &peer, 0) != SK_PASS)
		goto pass;
	__sync_fetch_and_add(&c->redirected, len);
	/* The verdict runs for one socket at a time (under its lock), and
	 * only this socket counts into this slot: the read is exact. */
	red = *(volatile __u64 *)&c->redirected;
	if (red >= *(volatile __u64 *)&c->alarm) {
		/* disarmed before the event, so the worker's re-arming (after
		 * the event) is never overwritten; re-armed at once when the
		 * ring is full, so the next skb tries again */
		*(volatile __u64 *)&c->alarm = SM_ALARM_OFF;
		ring = bpf_map_lookup_elem(&alarms, &worker);
		if (!ring || bpf_ringbuf_output(ring, &slot, sizeof(slot), 0))
			*(volatile __u64 *)&c->alarm = red;
	}
	return SK_PASS;
pass:
	__sync_fetch_and_add(&c->passed, len);
	return SK_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
