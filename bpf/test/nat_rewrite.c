/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A test harness for lib/nat.h, not a part of the firewall: it rewrites an
 * Ethernet + IPv4 frame as nat_rw_spec[0] says and sends it back
 * (XDP_TX), or XDP_PASS when fw_nat_rewrite4 refuses it. internal/nat
 * runs it with BPF_PROG_TEST_RUN against its Go twin. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "types.h"
#include "lib/nat.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The rewrite to apply. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fw_nat_rw);
} nat_rw_spec SEC(".maps"); /* [0]: the packet's (an ICMP error's outer header); [1]: an ICMP error's quoted packet */

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

/* nat_rewrite_error_test rewrites an ICMP error as nat_rw_spec says:
 * [0] its outer header, [1] the packet it quotes. */
SEC("xdp")
int nat_rewrite_error_test(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 zero = 0, one = 1;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	const struct fw_nat_rw *outer = bpf_map_lookup_elem(&nat_rw_spec, &zero);
	const struct fw_nat_rw *inner = bpf_map_lookup_elem(&nat_rw_spec, &one);
	if (!outer || !inner)
		return XDP_ABORTED;
	return fw_nat_rewrite4_icmp_error(eth + 1, end, outer, inner) ? XDP_PASS : XDP_TX;
}

/* The reply tuples nat_claim_test has claimed. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct fw_nat_tuple);
	__type(value, struct fw_nat_rw);
} nat_claimed SEC(".maps");

/* nat_claim_test source-translates the UDP datagram it is given (the
 * address and port range of nat_rw_spec[0]: saddr the new source,
 * sport-dport the range) as SNAT would: it claims a port for
 * the reply tuple and records it in nat_claim_port[0] (0: none free). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} nat_claim_port SEC(".maps");

SEC("xdp")
int nat_claim_test(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *uh = (void *)(ip + 1);
	__u32 zero = 0;

	if ((void *)(uh + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_ABORTED;
	const struct fw_nat_rw *spec = bpf_map_lookup_elem(&nat_rw_spec, &zero);
	if (!spec)
		return XDP_ABORTED;
	/* the answer's tuple: from the destination to the new source */
	struct fw_nat_tuple reply = {.saddr = ip->daddr, .daddr = spec->saddr, .sport = uh->dest, .proto = IPPROTO_UDP};
	/* what the answer is rewritten to: back to the client */
	struct fw_nat_rw back = {.saddr = ip->daddr, .daddr = ip->saddr, .sport = uh->dest, .dport = uh->source};
	__u32 hash = bpf_get_prandom_u32();
	__u32 port = fw_nat_claim(&nat_claimed, &reply, bpf_ntohs(uh->source), bpf_ntohs(spec->sport),
				     bpf_ntohs(spec->dport), hash, &back);
	bpf_map_update_elem(&nat_claim_port, &zero, &port, BPF_ANY);
	return XDP_PASS;
}

/* nat_bind_test translates the first packet of a connection: the frame
 * is to leave with the tuple nat_rw_spec[0]; both directions' bindings go
 * into nat_claimed, then the frame is rewritten, destination then source.
 * XDP_PASS: refused (the reply tuple is taken, or the packet cannot be
 * translated). */
SEC("xdp")
int nat_bind_test(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct fw_nat_tuple k;
	__u32 zero = 0;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || fw_nat_key4(eth + 1, end, &k))
		return XDP_PASS;
	const struct fw_nat_rw *out = bpf_map_lookup_elem(&nat_rw_spec, &zero);
	if (!out)
		return XDP_ABORTED;
	if (fw_nat_bind4(&nat_claimed, &k, out, 0))
		return XDP_PASS;
	if (fw_nat_pre(eth + 1, end, &k, out) || fw_nat_post(eth + 1, end, out))
		return XDP_ABORTED; /* fw_nat_key4 took it: never */
	return XDP_TX;
}

/* nat_apply_test translates a later packet of a connection, in either
 * direction: one lookup of the tuple it arrives with in nat_claimed, then
 * its destination and its source rewritten. XDP_PASS: no binding. */
SEC("xdp")
int nat_apply_test(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct fw_nat_tuple k;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || fw_nat_key4(eth + 1, end, &k))
		return XDP_PASS;
	const struct fw_nat_rw *out = bpf_map_lookup_elem(&nat_claimed, &k);
	if (!out)
		return XDP_PASS;
	struct fw_nat_rw o = *out;
	if (fw_nat_pre(eth + 1, end, &k, &o) || fw_nat_post(eth + 1, end, &o))
		return XDP_ABORTED;
	return XDP_TX;
}

/* What nat_fib_src_test found: bpf_fib_lookup's return code, the egress
 * device and the source address it derived (BPF_FIB_LOOKUP_SRC). */
struct nat_fib_src_res {
	__u32  rc;
	__u32  ifindex;
	__be32 src;
	__u32  masq_rc;
	__be32 masq; /* MASQUERADE's address: see below */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nat_fib_src_res);
} nat_fib_src SEC(".maps");

/* nat_fib_src_test asks the FIB how the kernel would forward the IPv4
 * frame it is given (arriving on the test run's ingress device) and which
 * source address it would pick for that next hop: what MASQUERADE needs,
 * following the egress device's addresses as they change. */
SEC("xdp")
int nat_fib_src_test(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct bpf_fib_lookup fib = {};
	__u32 zero = 0;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_ABORTED;
	fib.family = 2; /* AF_INET */
	fib.l4_protocol = ip->protocol;
	fib.tot_len = bpf_ntohs(ip->tot_len);
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = ip->daddr;
	fib.ifindex = ctx->ingress_ifindex;
	struct nat_fib_src_res res = {};
	res.rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), BPF_FIB_LOOKUP_SRC | BPF_FIB_LOOKUP_SKIP_NEIGH);
	res.ifindex = fib.ifindex;
	res.src = fib.ipv4_src;
	/* The kernel's MASQUERADE takes the egress device's address for the
	 * next hop (inet_select_addr), not a route's preferred source, which
	 * the lookup above gives when the route has one. A second lookup, of
	 * the next hop itself (ipv4_dst now holds it) from the egress
	 * device, finds the device's connected route, whose source is that
	 * address. */
	fib.ipv4_src = 0;
	res.masq_rc = bpf_fib_lookup(ctx, &fib, sizeof(fib),
				     BPF_FIB_LOOKUP_SRC | BPF_FIB_LOOKUP_SKIP_NEIGH | BPF_FIB_LOOKUP_OUTPUT);
	res.masq = fib.ipv4_src;
	bpf_map_update_elem(&nat_fib_src, &zero, &res, BPF_ANY);
	return XDP_PASS;
}
