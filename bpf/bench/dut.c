/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Reference DUT programs of `xdpfw bench macro`, attached to the DUT's veth
 * in place of xdpfw:
 *   bench_drop  the floor: count, XDP_DROP (the least any XDP program costs)
 *   bench_pass  count, XDP_PASS: hands frames to the stack, so iptables
 *               sees them (a veth only receives redirected frames from its
 *               peer while an XDP program is attached to it)
 * and of `xdpfw bench forward` and `xdpfw bench latency`:
 *   bench_fwd   their XDP floor: a bare XDP FIB forwarder, as a real router
 *               forwards (IPv4: parse, FIB lookup, TTL one less with the
 *               header checksum updated, MACs, redirect through
 *               fwd_ports); what it does not forward goes to the stack
 * and of `xdpfw bench forward`:
 *   bench_sink  the sink: counts each forwarded frame as it should be (the
 *               router's MACs, TTL one less, a valid IPv4 checksum, no
 *               padding, to the sink from the generator's addresses or,
 *               translated, from the router's) or not, and drops it; in
 *               check mode (sink_ctl) it also verifies the UDP checksum
 *               and that each flow (the generator's tag) arrives with one
 *               tuple (sink_flows)
 *   bench_reply the generator's veth: counts and drops what comes back
 *               (the replies that make the flows established) */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "bench.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Slots of dut_stats. Mirrored in internal/bench/dut.go. */
enum {
	DUT_SLOT_DROP = 0,
	DUT_SLOT_PASS = 1,
	DUT_SLOT_FWD = 2,      /* bench_fwd: redirected */
	DUT_SLOT_SINK_OK = 3,  /* bench_sink: as forwarded frames must be */
	DUT_SLOT_SINK_BAD = 4, /* bench_sink: anything else */
	DUT_SLOT_SINK_NAT = 5, /* bench_sink: as forwarded frames must be, source translated to sink_nat_saddr */
	DUT_SLOT_REPLY = 6,    /* bench_reply */
	DUT_NUM_SLOTS,
};

/* Packets each program saw, per CPU, one slot per program. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DUT_NUM_SLOTS);
	__type(key, __u32);
	__type(value, struct bench_counter);
} dut_stats SEC(".maps");

/* Where bench_fwd may redirect (the router's egress veth). */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} fwd_ports SEC(".maps");

/* bench_sink's mode: slot 0 is 1 while `bench forward` checks (the
 * check mode above), 0 while it measures. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sink_ctl SEC(".maps");

/* The tuple one flow arrived with at the sink (check mode), by the
 * generator's tag: the first frame's, and how many frames matched it. */
struct sink_flow {
	__u32 saddr;
	__u16 sport;
	__u16 dport;
	__u32 packets; /* frames with this tuple */
	__u32 changed; /* frames of the flow with another tuple */
};

/* One per flow of the many-flows traffic (fwdManyFlows, internal/bench). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct sink_flow);
} sink_flows SEC(".maps");

/* Longest UDP datagram the sink verifies: a 1,500-byte IPv4 packet's. */
#define SINK_MAX_UDP 1480

/* The check mode's part of bench_sink: a valid UDP checksum over the
 * whole datagram, and one tuple per flow. */
static __always_inline int sink_check_l4(struct iphdr *ip, void *data_end)
{
	struct udphdr *udp = (void *)(ip + 1);
	struct sink_flow *f;
	__u32 *tag, s, ulen;
	__u16 *w;

	if (ip->protocol != IPPROTO_UDP || (void *)(udp + 1) > data_end || udp->check == 0)
		return 0;
	ulen = bpf_ntohs(udp->len);
	if (ulen < sizeof(*udp) + sizeof(*tag) || ulen > SINK_MAX_UDP || (void *)udp + ulen != data_end)
		return 0;
	s = (ip->saddr & 0xffff) + (ip->saddr >> 16) + (ip->daddr & 0xffff) + (ip->daddr >> 16) + bpf_htons(IPPROTO_UDP) +
	    udp->len;
	w = (void *)udp;
	for (int i = 0; i < SINK_MAX_UDP / 2; i++) {
		if ((void *)(w + 1) > data_end)
			break;
		s += *w++;
	}
	if ((void *)w < data_end && (void *)w + 1 <= data_end)
		s += *(__u8 *)w; /* an odd last byte, the low byte of a word padded with zero */
	if (csum_fold32(s) != 0xffff)
		return 0;
	tag = (void *)(udp + 1);
	if ((void *)(tag + 1) > data_end)
		return 0;
	f = bpf_map_lookup_elem(&sink_flows, tag);
	if (!f)
		return 0;
	if (f->packets == 0) {
		f->saddr = ip->saddr;
		f->sport = udp->source;
		f->dport = udp->dest;
	} else if (f->saddr != ip->saddr || f->sport != udp->source || f->dport != udp->dest) {
		f->changed++;
		return 0;
	}
	f->packets++;
	return 1;
}

/* What bench_sink expects (set before load): destination and source MAC
 * (the sink's, the router egress veth's), TTL, destination address, and
 * source addresses: in sink_src_net/sink_src_mask (the generator's), or
 * sink_nat_saddr (the router's, masqueraded). Addresses in network order. */
volatile const __u8 sink_dmac[6] = {};
volatile const __u8 sink_smac[6] = {};
volatile const __u8 sink_ttl = 0;
volatile const __u32 sink_daddr = 0;
volatile const __u32 sink_src_net = 0;
volatile const __u32 sink_src_mask = 0;
volatile const __u32 sink_nat_saddr = 0;

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
	struct bpf_fib_lookup fib = {};

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->ttl <= 1)
		return XDP_PASS;
	fib.family = AF_INET;
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.tot_len = bpf_ntohs(ip->tot_len);
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = ip->daddr;
	fib.ifindex = ctx->ingress_ifindex;
	if (bpf_fib_lookup(ctx, &fib, sizeof(fib), 0) != BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS;
	__u32 check = ip->check;
	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xffff));
	ip->ttl--;
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	count(ctx, DUT_SLOT_FWD);
	return bpf_redirect_map(&fwd_ports, fib.ifindex, 0);
}

SEC("xdp")
int bench_sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u32 slot = DUT_SLOT_SINK_BAD;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		goto out;
	for (int i = 0; i < 6; i++)
		if (eth->h_dest[i] != sink_dmac[i] || eth->h_source[i] != sink_smac[i])
			goto out;
	if (ip->ttl != sink_ttl || ip->ihl != 5 || data_end - data != ETH_HLEN + bpf_ntohs(ip->tot_len) ||
	    ip->daddr != sink_daddr)
		goto out;
	if (ipv4_sum(ip) != 0xffff)
		goto out;
	__u32 zero = 0, *mode = bpf_map_lookup_elem(&sink_ctl, &zero);

	if (mode && *mode && !sink_check_l4(ip, data_end))
		goto out;
	if ((ip->saddr & sink_src_mask) == sink_src_net)
		slot = DUT_SLOT_SINK_OK;
	else if (ip->saddr == sink_nat_saddr)
		slot = DUT_SLOT_SINK_NAT;
out:
	count(ctx, slot);
	return XDP_DROP;
}

SEC("xdp")
int bench_reply(struct xdp_md *ctx)
{
	count(ctx, DUT_SLOT_REPLY);
	return XDP_DROP;
}
