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
 * a system call (drain check, idle timeout, byte counts, alarms). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "sockmap_abi.h"

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

SEC("sk_skb/stream_verdict")
int sm_verdict(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	__u64 len = skb->len, peer, red;
	struct sm_pair *p;
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
