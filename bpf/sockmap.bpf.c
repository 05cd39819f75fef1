/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/* sockmap.bpf.c: the sockmap engine's SK_SKB stream-verdict program.
 *
 * Every socket of a spliced session sits in `socks` (SOCKHASH keyed by the
 * socket cookie). For each skb the kernel reads from such a socket, this
 * program looks up the socket's entry in `pairs` (the peer's cookie and a
 * counter slot) and either
 *   - redirects the skb to the peer's send path (in-kernel, the fast path),
 *     counting the bytes in `redirected`, or
 *   - passes it to the socket's own receive queue for user space to copy
 *     (SK_PASS), counting them in `passed`, when user space still owes the
 *     peer earlier bytes (passed != user_sent) or the peer is not in the map
 *     (yet, or any more). Redirecting then would overtake those bytes.
 * There is no back-pressure here: a version that passed skbs to user space
 * once the peer's redirect queue held 2 MiB (reading the peer's write_seq
 * through bpf_skc_to_tcp_sock) bounded the queue, but with most bytes on
 * that pass path the stream came out with whole skbs duplicated (2 runs of 8
 * on 6.18.44; never with redirects only). See README, The sockmap engine.
 * Empty skbs (a bare FIN) are dropped: the kernel does not forward a FIN, and
 * a zero-length skb on the peer's backlog would fail with EPIPE there; user
 * space sees the FIN as end of file and forwards it with shutdown().
 * The counters live in an mmap-able array so user space reads them without
 * a system call (drain check, idle timeout, byte counts). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "sockmap_abi.h"

/* Sizes are set by the loader from max-conns. */

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 2);
	__type(key, __u64);
	__type(value, __u64);
} socks SEC(".maps");

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

SEC("sk_skb/stream_verdict")
int sm_verdict(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	__u64 len = skb->len, peer;
	struct sm_pair *p;
	struct sm_ctr *c;
	__u32 slot;

	if (!len)
		return SK_DROP;
	p = bpf_map_lookup_elem(&pairs, &cookie);
	if (!p)
		return SK_PASS;
	slot = p->slot;
	peer = p->peer;
	c = bpf_map_lookup_elem(&ctrs, &slot);
	if (!c)
		return SK_PASS;
	if (*(volatile __u64 *)&c->passed != *(volatile __u64 *)&c->user_sent)
		goto pass;
	if (bpf_sk_redirect_hash(skb, &socks, &peer, 0) != SK_PASS)
		goto pass;
	__sync_fetch_and_add(&c->redirected, len);
	return SK_PASS;
pass:
	__sync_fetch_and_add(&c->passed, len);
	return SK_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
