/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Reference DUT programs of `xdpfw bench macro`, attached to the DUT's veth
 * in place of xdpfw:
 *   bench_drop  the floor: count, XDP_DROP (the least any XDP program costs)
 *   bench_pass  count, XDP_PASS: hands frames to the stack, so iptables
 *               sees them (a veth only receives redirected frames from its
 *               peer while an XDP program is attached to it) */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "bench.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Slots of dut_stats. Mirrored in internal/bench/dut.go. */
enum {
	DUT_SLOT_DROP = 0,
	DUT_SLOT_PASS = 1,
};

/* Packets each program saw, per CPU, one slot per program. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
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
