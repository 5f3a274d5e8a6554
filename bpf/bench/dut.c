/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Reference DUT programs of `xdpfw bench macro`, attached to the DUT's veth
 * in place of xdpfw:
 *   bench_drop  the floor: count, XDP_DROP (the least any XDP program costs)
 *   bench_pass  count, XDP_PASS: hands frames to the stack, so iptables
 *               sees them (a veth only receives redirected frames from its
 *               peer while an XDP program is attached to it)
 *   bench_fwd   count, then forward as bare as XDP can: the kernel's FIB
 *               lookup, the MACs it gives, bpf_redirect (no TTL update, no
 *               checks): the floor of `xdpfw bench latency` for XDP
 *               forwarding; what the FIB does not forward goes to the
 *               stack */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "bench.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Slots of dut_stats. Mirrored in internal/bench/dut.go. */
enum {
	DUT_SLOT_DROP = 0,
	DUT_SLOT_PASS = 1,
	DUT_SLOT_FWD = 2, /* forwarded by bench_fwd */
};

/* Packets each program saw, per CPU, one slot per program. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct bench_counter);
} dut_stats SEC(".maps");

static __always_inline void count(struct xdp_md *ctx, __u32 slot)
{
	struct bench_counter *c = bpf_map_lookup_elem(&dut_stats, &slot);

	if (c) {
		c->packets++;
		c->bytes += ctx->data_end - ctx->data;
	}
}

SEC("xdp")
int bench_drop(struct xdp_md *ctx)
{
	count(ctx, DUT_SLOT_DROP);
	return XDP_DROP;
}

SEC("xdp")
int bench_pass(struct xdp_md *ctx)
{
	count(ctx, DUT_SLOT_PASS);
	return XDP_PASS;
}

#ifndef AF_INET
#define AF_INET 2
#endif

SEC("xdp")
int bench_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct bpf_fib_lookup f = {};

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	f.family = AF_INET;
	f.tos = ip->tos;
	f.l4_protocol = ip->protocol;
	f.tot_len = bpf_ntohs(ip->tot_len);
	f.ipv4_src = ip->saddr;
	f.ipv4_dst = ip->daddr;
	f.ifindex = ctx->ingress_ifindex;
	if (bpf_fib_lookup(ctx, &f, sizeof(f), 0) != BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS;
	__builtin_memcpy(eth->h_dest, f.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, f.smac, ETH_ALEN);
	count(ctx, DUT_SLOT_FWD);
	return bpf_redirect(f.ifindex, 0);
}
