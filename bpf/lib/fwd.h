/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The forwarding fast path: a packet FORWARD accepted leaves from XDP by
 * the device the kernel's FIB names (lib/chain.h fw_fib_chain), as the
 * kernel's ip_forward / ip6_forward would send it: TTL (hop limit) less
 * one, the IPv4 checksum updated as ip_decrease_ttl does, the egress
 * device's MAC as source and the next hop's as destination, Ethernet
 * padding trimmed; bpf_redirect_map through fw_fwd_ports, the devices
 * xdpfw is attached to that the fast path may use (in and out: the
 * control plane leaves veth devices out unless asked, docs/forward.md). A packet it cannot send exactly so is handed to
 * the kernel unchanged (XDP_PASS), which forwards it, answers it or drops
 * it as always; fw_fwd_stats counts every packet by enum fw_fwd_reason.
 * A PPPoE session's packet (lib/pppoe.h) leaves without its session
 * header; one the FIB routes to a ppp device xdpfw knows leaves with one,
 * by the Ethernet device under it (docs/pppoe.md).
 * Only the delivery changes: the decision, its counters, conntrack and
 * LOG are the same either way. docs/forward.md. */
#ifndef XDPFW_FWD_H
#define XDPFW_FWD_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../types.h"
#include "../maps.h"
#include "chain.h"
#include "stats.h"
#include "verdict.h"
#include "kct.h"
#include "pppoe.h"

/* fw_fwd_count counts a packet FORWARD accepted under why; with
 * `--forward stack` every one is the kernel's (FW_FWD_STACK). */
static __always_inline void fw_fwd_count(__u32 why, __u64 bytes)
{
	const struct fw_config *cfg = fw_config();

	if (cfg && cfg->forward_stack)
		why = FW_FWD_STACK;
	struct fw_counter *c = bpf_map_lookup_elem(&fw_fwd_stats, &why);
	if (c)
		fw_count(c, bytes, fw_now());
}

/* fw_fwd_martian4: addresses ip_route_input refuses to forward: a zero
 * (0/8), loopback, multicast or limited-broadcast source, a zero or
 * loopback destination (127/8 also with route_localnet: the kernel
 * decides those). Host order. */
static __always_inline int fw_fwd_martian4(__u32 src, __u32 dst)
{
	return src >> 24 == 0 || src >> 24 == 127 || src >> 28 == 0xe || src == 0xffffffff || dst >> 24 == 0 ||
	       dst >> 24 == 127;
}

/* fw_fwd_martian6: addresses ip6_forward refuses (an unspecified,
 * loopback, multicast or link-local source) or never sends on (a
 * link-local or loopback destination). */
static __always_inline int fw_fwd_martian6(const __u64 *src, const __u64 *dst)
{
	const __u8 *s = (const __u8 *)src, *d = (const __u8 *)dst;
	__u64 one = bpf_cpu_to_be64(1);

	if (src[0] == 0 && (src[1] == 0 || src[1] == one))
		return 1;
	if (s[0] == 0xff || (s[0] == 0xfe && (s[1] & 0xc0) == 0x80))
		return 1;
	return (d[0] == 0xfe && (d[1] & 0xc0) == 0x80) || (dst[0] == 0 && dst[1] == one);
}

/* fw_fwd_redirect: is oif a device the fast path sends on (in
 * fw_fwd_ports)? If so, the packet is redirected to it once the program
 * returns XDP_REDIRECT (bpf_redirect_map's state; another return ignores
 * it). */
static __always_inline int fw_fwd_redirect(__u32 oif)
{
	return bpf_redirect_map(&fw_fwd_ports, oif, XDP_PASS) == XDP_REDIRECT;
}

/* fw_fwd_why is FW_FWD_XDP when the fast path can send the packet as the
 * kernel would, else the first reason it cannot, in this order; with
 * FW_FWD_XDP, *tx is the PPPoE session of the egress device when that is
 * a ppp device xdpfw knows (lib/pppoe.h), else left NULL, and the
 * redirect to the egress device is set up (fw_fwd_redirect). The IP header
 * is at p->l3_off: 14 past the VLAN test, or past a PPPoE session header
 * (and its tags). */
static __always_inline __u32 fw_fwd_why(struct xdp_md *ctx, const struct fw_pkt *p, const struct fw_fwd_hop *hop,
					const struct fw_pppoe_out **tx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 pppoe = p->flags & FW_PKT_PPPOE;
	__u8 mac[6];

	__u32 iif = ctx->ingress_ifindex;
	if (!bpf_map_lookup_elem(&fw_fwd_ports, &iif)) /* a veth left to the kernel */
		return FW_FWD_NOT_ATTACHED;
	if (p->flags & (FW_PKT_FRAG | FW_PKT_FRAG1))
		return FW_FWD_FRAG;
	if ((p->flags & FW_PKT_VLAN) && !pppoe) /* a PPPoE session's tags go with its header */
		return FW_FWD_VLAN;
	/* ip_forward drops what the device did not receive for itself
	 * (PACKET_OTHERHOST: promiscuous mode; broadcast, multicast); a
	 * PPPoE session frame reaches the ppp device whatever its MAC */
	if (!pppoe && (fw_ingress_mac(ctx, mac) < 0 || *(__u32 *)mac != *(const __u32 *)p->dst_mac ||
		       *(__u16 *)(mac + 4) != *(const __u16 *)(p->dst_mac + 4)))
		return FW_FWD_NOT_HOST;
	__u32 l3 = p->l3_off;
	if (l3 > ETH_HLEN + 4 * FW_MAX_VLAN + FW_PPPOE_HLEN) /* never: bounded for the verifier */
		return FW_FWD_TRIM;
	if (p->family == 4) {
		struct iphdr *ip = data + l3;

		if ((void *)(ip + 1) > data_end) /* parsed already: never */
			return FW_FWD_TRIM;
		if (fw_fwd_martian4(bpf_ntohl(ip->saddr), bpf_ntohl(ip->daddr)))
			return FW_FWD_MARTIAN;
		if (ip->ihl != 5)
			return FW_FWD_IP_OPTIONS;
		if (ip->ttl <= 1)
			return FW_FWD_TTL;
	} else {
		struct ipv6hdr *ip6 = data + l3;

		if ((void *)(ip6 + 1) > data_end)
			return FW_FWD_TRIM;
		if (fw_fwd_martian6(p->src, p->dst))
			return FW_FWD_MARTIAN;
		if (ip6->nexthdr == 0) /* hop-by-hop options */
			return FW_FWD_IP_OPTIONS;
		if (ip6->hop_limit <= 1)
			return FW_FWD_TTL;
	}
	__u32 why = hop->why;
	if (why != FW_FWD_XDP && why != FW_FWD_NO_NEIGH) /* what the FIB said: unrouted, MTU */
		return why;
	__u32 oif = p->oifindex;
	/* the devices as the kernel sees them: a ppp device, not its Ethernet's */
	__u32 hairpin = oif == p->ifindex;
	/* The redirect is set up here, where the egress device is tested,
	 * not after the rewrite: its lookup is the test (one devmap lookup a
	 * packet, not two). It writes nothing but the redirect's own state,
	 * which a packet handed to the kernel (XDP_PASS) leaves unused. */
	if (why == FW_FWD_XDP && !hairpin && fw_fwd_redirect(oif))
		return FW_FWD_XDP;
	if (why == FW_FWD_XDP && hairpin && bpf_map_lookup_elem(&fw_fwd_ports, &oif))
		return FW_FWD_HAIRPIN;
	/* Not a device the fast path sends on: a ppp device whose PPPoE
	 * session xdpfw knows? It has no neighbours (the session names the
	 * peer): NO_NEIGH does not matter there. Asked only here, so plain
	 * forwarding pays nothing for it. */
	const struct fw_pppoe_out *t = fw_pppoe_tx_of(oif);
	if (!t)
		return why != FW_FWD_XDP ? why : hairpin ? FW_FWD_HAIRPIN : FW_FWD_NOT_ATTACHED;
	if (hairpin)
		return FW_FWD_HAIRPIN;
	/* the FIB checked the ppp device's MTU; the frame must fit the
	 * Ethernet device's too. No device: a session over a VLAN. */
	if (!t->ifindex || p->l3_len > t->mtu)
		return FW_FWD_PPPOE;
	if (!fw_fwd_redirect(t->ifindex))
		return FW_FWD_NOT_ATTACHED;
	*tx = t;
	return FW_FWD_XDP;
}

/* fw_fwd_kernel: may the fast path send p without the kernel's NAT? The
 * kernel's nat table (MASQUERADE, SNAT, DNAT: a home router, Docker,
 * kube-proxy) translates a connection from its first packet on, which the
 * kernel must therefore see, and then every packet of it. A connection the
 * kernel translates never has an answer that matches xdpfw's conntrack
 * entry: the answer comes back to the translated address (lib/kct.h
 * judges it). So a connection takes the fast path once an answer has come
 * back with the addresses it left with (FW_CTI_SEEN_REPLY, xdpfw's own
 * conntrack); until then the kernel forwards its packets
 * (FW_FWD_KERNEL_CT), and it forwards for good those the kernel's
 * conntrack says it translates (FW_FWD_KERNEL_NAT). Where the kernel has
 * no conntrack (the kfunc does not resolve), nothing translates. A rule
 * set that tracks no state leaves every packet's ctinfo empty: its
 * packets take the fast path only on such a kernel. docs/forward.md. */
static __always_inline __u32 fw_fwd_kernel(const struct fw_pkt *p)
{
	/* judged with the kernel's conntrack (lib/kct.h); with --nat xdpfw the
	 * bits are xdpfw's own NAT's (FW_CTF_XSNAT, FW_CTF_XDNAT) */
	if (!fw_nat_mode && (p->ctinfo & FW_IPS_NAT))
		return FW_FWD_KERNEL_NAT;
	if ((p->ctinfo & FW_CTI_SEEN_REPLY) || !bpf_xdp_ct_lookup)
		return FW_FWD_XDP;
	return FW_FWD_KERNEL_CT;
}

/* fw_fwd_xdp delivers the packet p FORWARD accepted (frame in ctx, FIB
 * answer in hop): XDP_REDIRECT by the fast path, or XDP_PASS, unchanged,
 * for the kernel. Inline, not a global function: its return through the
 * return thunk cost ~6 % of the fast path's in-program time, and the
 * verifier's cost did not grow (its states meet in fw_xdp_finish). */
static __always_inline int fw_fwd_xdp(struct xdp_md *ctx, const struct fw_pkt *p, const struct fw_fwd_hop *hop)
{
	if (!ctx || !p || !hop) /* the verifier requires the check on global-function pointers */
		return XDP_PASS;

	const struct fw_config *cfg = fw_config();
	__u64 bytes = ctx->data_end - ctx->data;
	const struct fw_pppoe_out *tx = NULL;
	__u32 why = cfg && cfg->forward_stack ? FW_FWD_STACK : fw_fwd_why(ctx, p, hop, &tx);
	if (why == FW_FWD_XDP)
		why = fw_fwd_kernel(p);

	/* Ethernet padding past the IP packet: the kernel trims it */
	__u32 len = p->l3_off + p->l3_len;
	if (why == FW_FWD_XDP && bytes > len && bpf_xdp_adjust_tail(ctx, (int)len - (int)bytes))
		why = FW_FWD_TRIM;
	/* The link-layer header the packet leaves with: Ethernet, and a PPPoE
	 * session header when it leaves by a ppp device. What came before the
	 * IP header (Ethernet, and a PPPoE session's header and tags) goes. */
	__u32 l2 = tx ? ETH_HLEN + FW_PPPOE_HLEN : ETH_HLEN;
	if (why == FW_FWD_XDP && p->l3_off != l2 && bpf_xdp_adjust_head(ctx, (int)p->l3_off - (int)l2))
		why = FW_FWD_TRIM;
	if (why != FW_FWD_XDP) {
		fw_fwd_count(why, bytes);
		return XDP_PASS;
	}

	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end) /* never: the IP header follows */
		return XDP_DROP;
	/* the IP header follows the Ethernet header, or a PPPoE header */
	void *l3 = data + ETH_HLEN;
	if (tx) {
		struct fw_pppoe_hdr *ph = l3;

		if ((void *)(ph + 1) > data_end)
			return XDP_DROP; /* never: the frame grew at the head */
		fw_pppoe_put(ph, tx, p->l3_len, p->family);
		l3 = ph + 1;
	}
	if (p->family == 4) {
		struct iphdr *ip = l3;

		if ((void *)(ip + 1) > data_end) /* parsed: never */
			return XDP_DROP;
		/* ip_decrease_ttl's incremental update: the same checksum */
		__u32 check = ip->check;
		check += bpf_htons(0x0100);
		ip->check = (__u16)(check + (check >= 0xffff));
		ip->ttl--;
	} else {
		struct ipv6hdr *ip6 = l3;

		if ((void *)(ip6 + 1) > data_end) /* parsed: never */
			return XDP_DROP;
		ip6->hop_limit--;
	}
	if (tx) {
		__builtin_memcpy(eth->h_dest, tx->peer, ETH_ALEN);
		__builtin_memcpy(eth->h_source, tx->mac, ETH_ALEN);
		eth->h_proto = bpf_htons(ETH_P_PPP_SES);
	} else {
		__builtin_memcpy(eth->h_dest, hop->dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, hop->smac, ETH_ALEN);
		eth->h_proto = p->family == 4 ? bpf_htons(ETH_P_IP) : bpf_htons(ETH_P_IPV6);
	}
	/* the redirect fw_fwd_why set up: its device entry is held (RCU)
	 * until the frame is sent, even if a detach removes it meanwhile */
	fw_fwd_count(FW_FWD_XDP, bytes);
	return XDP_REDIRECT;
}

#endif
