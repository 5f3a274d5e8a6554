/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Traffic generator of `xdpfw bench macro`, run with BPF_PROG_RUN in
 * live-frames mode (BPF_F_TEST_XDP_LIVE_FRAMES): the kernel runs it on a
 * page-pool copy of one IPv4/UDP template frame, Repeat times; every run
 * makes the frame a new flow (UDP source port, then source address, from a
 * per-CPU sequence number) and redirects it to gen_ifindex, the generator's
 * veth, which hands it to its peer in the DUT namespace.
 *
 * Page-pool pages keep what the previous run wrote, and what anyone else
 * wrote into them: the kernel copies the template into a page once, when
 * the pool first hands it out, and a frame that a router forwarded (its
 * stack building an skb on the page, or an XDP program redirecting it)
 * comes back with that router's rewrites (the next hop's MACs, TTL one
 * less, a translated address or port). So each run writes every field it
 * varies and every field a router rewrites (both MACs, TTL, both addresses,
 * both ports) and recomputes the IPv4 header checksum. The UDP checksum of
 * the template is 0 ("none", allowed for IPv4), so changing ports and
 * addresses keeps the frame valid.
 *
 * Spread mode (`bench macro --spread`): with gen_aim_n[0] = K > 0, packet
 * number seq takes its source address and destination port from
 * gen_aims[seq % K], one pair per rule of the rule set in random order, so
 * the traffic walks the whole rule set; the source port still counts.
 *
 * Tagged mode (gen_tag, `bench forward`): the aim's index (the flow) is
 * written into the first 4 bytes of the UDP payload, and the UDP checksum
 * is computed (the template's payload is zeros past the tag), so the sink
 * can tell each frame's flow after a router translated its addresses and
 * ports, and check the L4 checksum the router updated. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "bench.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Interface to redirect to: the generator's veth (set before load). */
volatile const __u32 gen_ifindex = 0;
/* First source address of the flows, host order. */
volatile const __u32 gen_src_base = 0;
/* Source addresses cycled through, a power of two (mask + 1). */
volatile const __u32 gen_src_mask = 0;
/* Source ports cycled through from gen_port_base, a power of two (mask +
 * 1): 0 with a zero gen_src_mask makes every packet the same flow. */
volatile const __u32 gen_port_mask = 0xffff;
volatile const __u16 gen_port_base = 0;
/* The template's destination and source MAC, TTL, destination address
 * (network order) and destination port (host order), rewritten in every
 * frame (see above). */
volatile const __u8 gen_dmac[6] = {};
volatile const __u8 gen_smac[6] = {};
volatile const __u8 gen_ttl = 64;
volatile const __u32 gen_daddr = 0;
volatile const __u16 gen_dport = 0;
/* Tagged mode (above): 1 on. */
volatile const __u8 gen_tag = 0;

/* Packets generated, per CPU; the packet count is also the flow sequence. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bench_counter);
} gen_stats SEC(".maps");

/* Source address and destination port (network order) of one rule. */
struct gen_aim {
	__u32 saddr;
	__u16 dport;
	__u16 pad;
};

/* Sized by the loader (max_entries: the largest rule count). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_aim);
} gen_aims SEC(".maps");

/* The number of gen_aims in use (0: spread mode off). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} gen_aim_n SEC(".maps");

SEC("xdp")
int trafficgen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	struct bench_counter *c;
	struct gen_aim *a;
	__u32 zero = 0, *k;
	__u64 seq;

	if ((void *)(udp + 1) > data_end)
		return XDP_ABORTED;
	c = bpf_map_lookup_elem(&gen_stats, &zero);
	if (!c)
		return XDP_ABORTED;
	seq = c->packets++;
	c->bytes += data_end - data;

	/* What a router may have rewritten (byte by byte: each read of a
	 * volatile const is a load, never a value the compiler assumed). */
	for (int i = 0; i < ETH_ALEN; i++) {
		eth->h_dest[i] = gen_dmac[i];
		eth->h_source[i] = gen_smac[i];
	}
	ip->ttl = gen_ttl;
	ip->daddr = gen_daddr;
	udp->dest = bpf_htons(gen_dport);
	/* 65,536 source ports per address, then the next address: a new
	 * 5-tuple for (gen_src_mask + 1) x 65,536 packets per CPU. */
	udp->source = bpf_htons((__u16)(gen_port_base + (seq & gen_port_mask)));
	k = bpf_map_lookup_elem(&gen_aim_n, &zero);
	if (k && *k) {
		__u32 i = (__u32)(seq % *k);

		a = bpf_map_lookup_elem(&gen_aims, &i);
		if (!a)
			return XDP_ABORTED;
		ip->saddr = a->saddr;
		udp->dest = a->dport;
		if (gen_tag) {
			__u32 *tag = (void *)(udp + 1);

			if ((void *)(tag + 1) > data_end)
				return XDP_ABORTED;
			*tag = i;
			udp->check = 0;
			udp->check = udp_csum_zero_tail(ip, udp, i);
		}
	} else {
		ip->saddr = bpf_htonl(gen_src_base + ((__u32)(seq >> 16) & gen_src_mask));
	}
	ip->check = ipv4_csum(ip);
	return bpf_redirect(gen_ifindex, 0);
}
