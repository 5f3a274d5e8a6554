/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A test harness for lib/nat.h, not a part of the firewall: it rewrites an
 * Ethernet + IPv4 frame as nat_rw_spec[0] says and sends it back
 * (XDP_TX), or XDP_PASS when fw_nat_rewrite4 refuses it. internal/nat
 * runs it with BPF_PROG_TEST_RUN against its Go twin. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "types.h"
#include "lib/nat.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The rewrite to apply. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_nat_rw);
} nat_rw_spec SEC(".maps");

SEC("xdp")
int nat_rewrite_test(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 zero = 0;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	const struct fw_nat_rw *rw = bpf_map_lookup_elem(&nat_rw_spec, &zero);
	if (!rw)
		return XDP_ABORTED;
	return fw_nat_rewrite4(eth + 1, end, rw) ? XDP_PASS : XDP_TX;
}
