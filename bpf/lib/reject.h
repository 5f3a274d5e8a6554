/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* REJECT: answer the packet instead of passing it, in both hooks:
 * - XDP (INPUT, FORWARD): the answer is built in the frame and sent back out
 *   of the port the packet came in on (XDP_TX);
 * - tc egress (OUTPUT): the sender is this host. The answer is built in the
 *   skb and handed to the stack as if the peer had sent it, on the same
 *   interface (bpf_redirect with BPF_F_INGRESS): the local socket learns of
 *   the refusal at once, as with iptables' REJECT in OUTPUT.
 * The answer is a TCP RST for --reject-with tcp-reset, else an ICMP or
 * ICMPv6 destination unreachable that quotes the packet.
 *
 * The answer swaps the MAC addresses and keeps the VLAN tags; its IP
 * source is the packet's destination, its TTL / hop limit FW_REJECT_TTL.
 * What is never answered (RFC 1122 3.2.2, RFC 4443 2.4(e), RFC 9293):
 * non-first fragments, ICMP errors, a RST (with tcp-reset), broadcast and
 * multicast destinations (link layer or IP), sources that are not one host.
 * Each source (IPv4 address, IPv6 /64) gets at most reject_rate answers a
 * second, reject_burst at once (struct fw_config), and all sources together
 * at most the global budget (fw_reject_global), so REJECT cannot be turned
 * into an amplifier, not even by spoofed sources; in OUTPUT the bucket is
 * the destination the host tried to reach. Packets over a budget are
 * dropped, counted as FW_R_REJECT_RATE.
 *
 * One builder serves both hooks: the headers of the answer are built on the
 * stack from struct fw_pkt, then written into the frame; only resizing and
 * writing the frame differ per hook (fw_hook_*). docs/reject.md has the
 * details and the RFC references. */
#ifndef XDPFW_REJECT_H
#define XDPFW_REJECT_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../types.h"
#include "../maps.h"
#include "classify.h" /* struct fw_decision */
#include "ratelimit.h"

#define FW_REJECT_TTL 64
/* Quoted bytes of the offending IP packet: as much as keeps the answer
 * within 576 bytes (RFC 1812 4.3.2.3) and, for IPv6, within the minimum
 * MTU of 1280 bytes (RFC 4443 2.4(c)). */
#define FW_ICMP4_QUOTE_MAX (576 - 20 - 8)
#define FW_ICMP6_QUOTE_MAX (1280 - 40 - 8)
/* Most bytes in front of the IP header: Ethernet + FW_MAX_VLAN tags. */
#define FW_L2_MAX (ETH_HLEN + 4 * FW_MAX_VLAN)
/* Bound on the L4 offset for the verifier: a packet pointer plus a
 * variable offset must stay below 64 KiB to be range-checked. The
 * program's frames are one page, so nothing real is cut off. */
#define FW_L4_OFF_MAX 0x7fff

/* fw_opaque hides how a packet pointer was computed (data + variable
 * offset), so clang cannot recompute it from a spilled offset after the
 * bounds check: the verifier knows the range of the checked register
 * only, a recomputed pointer would have none. */
#define fw_opaque(ptr) asm volatile("" : "+r"(ptr))

/* ---- checksums (RFC 1071), over native-order 16-bit loads: the folded
 * sum can be stored as is; a lone last byte counts as the high byte of
 * a word in network order, which is its low byte in a native load. ---- */

static __always_inline __u16 fw_csum_fold(__u64 s)
{
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~s;
}

/* fw_csum_words sums n 16-bit words at p (n a constant: unrolled). */
static __always_inline __u64 fw_csum_words(const void *p, const int n, __u64 s)
{
	const __u16 *w = p;

#pragma unroll
	for (int i = 0; i < n; i++)
		s += w[i];
	return s;
}

/* fw_csum_tail sums the bytes from pos to the end of the frame, which the
 * caller trimmed to at most 2 * max_words bytes. A bounded loop with a
 * bounds check per word. The verifier walks every iteration; the lone last
 * byte is summed inside the loop so that nothing but the sum is live where
 * the loop ends, and the exits of all iterations prune to one state. */
static __always_inline __u64 fw_csum_tail(void *pos, void *end, const int max_words, __u64 s)
{
#pragma clang loop unroll(disable)
	for (int i = 0; i < max_words; i++) {
		if (pos + 2 > end) {
			if (pos + 1 <= end)
				s += *(__u8 *)pos;
			break;
		}
		s += *(__u16 *)pos;
		pos += 2;
	}
	return s;
}

/* Pseudo-header sums: the addresses are summed from the new IP header. */
static __always_inline __u64 fw_pseudo4(const struct iphdr *ip, __u8 proto, __u32 len)
{
	return fw_csum_words(&ip->saddr, 4, bpf_htons(proto) + bpf_htons(len));
}

static __always_inline __u64 fw_pseudo6(const struct ipv6hdr *ip6, __u8 proto, __u32 len)
{
	return fw_csum_words(&ip6->saddr, 16, bpf_htons(proto) + bpf_htons(len));
}

/* ---- what is never answered ---- */

/* fw_one_host: is a one host's unicast address (not 0/8, 127/8, 224/4
 * multicast, 240/4 incl. 255.255.255.255; not ::, ::1, ff00::/8)?
 * compile.RejectReason is the Go twin. */
static __always_inline int fw_one_host(const __u64 *a, __u8 family)
{
	const __u8 *b = (const __u8 *)a;

	if (family == 4)
		return b[0] != 0 && b[0] != 127 && b[0] < 224;
	if (b[0] == 0xff)
		return 0;
	if (a[0] != 0)
		return 1;
	return a[1] != 0 && a[1] != bpf_cpu_to_be64(1);
}

/* fw_icmp_is_error: ICMPv4 errors, and types unknown to RFC 792/950 (as
 * Linux treats them): 3, 4, 5, 11, 12, > 18. ICMPv6: types below 128. */
static __always_inline int fw_icmp_is_error(const struct fw_pkt *p)
{
	if (p->family == 4 && p->proto == IPPROTO_ICMP)
		return p->icmp_type == 3 || p->icmp_type == 4 || p->icmp_type == 5 ||
		       p->icmp_type == 11 || p->icmp_type == 12 || p->icmp_type > 18;
	if (p->family == 6 && p->proto == IPPROTO_ICMPV6)
		return p->icmp_type < 128;
	return 0;
}

/* fw_reject_unanswerable returns the reason a packet must not be answered,
 * or 0. Checked before the rate limit, so they cost no tokens. */
static __always_inline __u8 fw_reject_unanswerable(const struct fw_pkt *p, __u8 kind)
{
	if (p->flags & FW_PKT_FRAG)
		return FW_R_REJECT_FRAG;
	if ((p->dst_mac[0] & 1) || (p->src_mac[0] & 1) ||
	    !fw_one_host(p->src, p->family) || !fw_one_host(p->dst, p->family))
		return FW_R_REJECT_BCAST;
	if (fw_icmp_is_error(p))
		return FW_R_REJECT_ERROR;
	if (kind == FW_REJ_TCP_RESET && p->proto == IPPROTO_TCP && (p->tcp_flags & FW_TCP_RST))
		return FW_R_REJECT_ERROR;
	return 0;
}

/* ---- the rate limits (lib/ratelimit.h) ---- */

/* fw_reject_allow takes a token from the source's bucket the answer is
 * charged to, then one from the global bucket (fw_reject_global), so that
 * many sources together (spoofed ones: 100,000 addresses reflect 100,000
 * times the per-source rate) get no more than the global rate. A source
 * over its own budget costs the others nothing.
 * The source's bucket: in INPUT and FORWARD the packet's source, whom the
 * answer goes to; in OUTPUT (the answer goes to this host) the destination
 * the host tried to reach, whose address the answer comes from, in buckets
 * of their own (fw_rl_key.output), so that a remote host cannot spend the
 * answers local applications get about it. */
static __always_inline int fw_reject_allow(const struct fw_pkt *p)
{
	__u32 zero = 0;
	const struct fw_config *cfg = bpf_map_lookup_elem(&fw_config_map, &zero);
	__u64 rate = FW_REJECT_RATE_DEFAULT, burst = FW_REJECT_BURST_DEFAULT;

	if (cfg && cfg->reject_rate)
		rate = cfg->reject_rate;
	if (cfg && cfg->reject_burst)
		burst = cfg->reject_burst;
	__u64 interval = fw_rl_interval(rate);

	struct fw_rl_key k = { .addr = p->src[0], .family = p->family };
	if (p->chain == FW_CHAIN_OUTPUT) {
		k.addr = p->dst[0];
		k.output = 1;
	}
	__u64 now = bpf_ktime_get_ns();
	__u64 *tat = bpf_map_lookup_elem(&fw_reject_rl, &k);
	if (!tat) {
		__u64 first = 0;
		fw_rl_take(&first, now, interval, burst);
		if (fw_live_writes())
			bpf_map_update_elem(&fw_reject_rl, &k, &first, BPF_ANY);
	} else if (!fw_rl_take(tat, now, interval, burst)) {
		return 0;
	}
	struct fw_bucket *g = bpf_map_lookup_elem(&fw_reject_global, &zero);
	return g && fw_rl_take_bucket(g, now, fw_rl_interval(FW_REJECT_GLOBAL_RATE_DEFAULT),
				      FW_REJECT_GLOBAL_RATE_DEFAULT);
}

/* fw_reject_check returns why the packet gets no answer (a FW_R_REJECT_*
 * reason), or 0: the rules of what is never answered first, so such
 * packets cost no tokens, then the rate limit. */
static __always_inline __u8 fw_reject_check(const struct fw_pkt *p, __u8 kind)
{
	__u8 why = fw_reject_unanswerable(p, kind);

	if (why)
		return why;
	return fw_reject_allow(p) ? 0 : FW_R_REJECT_RATE;
}

/* ---- the hooks: what differs between XDP and tc ----
 * Every function takes the hook as a constant; once inlined, only that
 * hook's branch is left. */

#define FW_HOOK_XDP 0
#define FW_HOOK_TC  1

static __always_inline void *fw_hook_data(void *ctx, const int hook)
{
	if (hook == FW_HOOK_XDP)
		return (void *)(long)((struct xdp_md *)ctx)->data;
	return (void *)(long)((struct __sk_buff *)ctx)->data;
}

static __always_inline void *fw_hook_end(void *ctx, const int hook)
{
	if (hook == FW_HOOK_XDP)
		return (void *)(long)((struct xdp_md *)ctx)->data_end;
	return (void *)(long)((struct __sk_buff *)ctx)->data_end;
}

/* fw_hook_trim cuts the frame to len bytes (no more than it has). On tc,
 * bpf_skb_change_tail also makes the skb linear and private (uncloned: a
 * TCP segment shares its data with the retransmit queue) and resets GSO,
 * so the whole answer is then in [data, data_end). */
static __always_inline int fw_hook_trim(void *ctx, const int hook, __u32 len)
{
	if (hook == FW_HOOK_XDP) {
		void *data = fw_hook_data(ctx, hook), *end = fw_hook_end(ctx, hook);
		int delta = (int)len - (int)(end - data);
		return delta > 0 ? -1 : bpf_xdp_adjust_tail(ctx, delta);
	}
	return bpf_skb_change_tail(ctx, len, 0);
}

/* fw_hook_grow puts n bytes in front of the frame. */
static __always_inline int fw_hook_grow(void *ctx, const int hook, __u32 n)
{
	if (hook == FW_HOOK_XDP)
		return bpf_xdp_adjust_head(ctx, -(int)n);
	return bpf_skb_change_head(ctx, n, 0);
}

/* fw_hook_store writes len bytes (a constant) from buf at offset off <=
 * FW_L2_MAX of the frame. XDP writes the frame directly. tc writes with a
 * helper: one direct packet write anywhere in a tc program makes the
 * verifier prepend an "unclone" prologue that runs on every packet
 * (bpf_skb_pull_data on each cloned skb, which every TCP segment is), and
 * the OUTPUT chain's ACCEPT path must not pay for REJECT. The helper also
 * drops the skb's flow hash, which was the original's. */
static __always_inline int fw_hook_store(void *ctx, const int hook, __u32 off, const void *buf,
					 const __u32 len)
{
	if (off > FW_L2_MAX)
		return -1;
	if (hook == FW_HOOK_TC)
		return bpf_skb_store_bytes(ctx, off, buf, len, BPF_F_INVALIDATE_HASH);
	void *dst = fw_hook_data(ctx, hook) + off;
	fw_opaque(dst);
	if (dst + len > fw_hook_end(ctx, hook))
		return -1;
	__builtin_memcpy(dst, buf, len);
	return 0;
}

/* ---- building the answer ---- */

/* The answer's headers, built on the stack and written into the frame in
 * two pieces: l2 at offset 0 (the MACs; for an ICMP answer also the
 * EtherType and tags, moved to the new front of the frame) and hdr at the
 * IP header's offset (IP header + TCP header, or IP header + ICMP header). */
struct fw_answer {
	__u8 l2[FW_L2_MAX];
	__u8 _pad[2];
	__u8 hdr[sizeof(struct ipv6hdr) + 20]; /* at 24: every field aligned (the verifier requires it on the stack) */
} __attribute__((aligned(8)));

/* fw_put_eth writes the answer's Ethernet addresses: back to the sender. */
static __always_inline void fw_put_eth(__u8 *eth, const struct fw_pkt *p)
{
	__builtin_memcpy(eth, p->src_mac, ETH_ALEN);
	__builtin_memcpy(eth + ETH_ALEN, p->dst_mac, ETH_ALEN);
}

static __always_inline void fw_put_ip4(struct iphdr *ip, const struct fw_pkt *p, __u8 tos,
				       __u16 tot_len, __u16 frag_off, __u8 proto)
{
	*(__u8 *)ip = 0x45; /* version 4, IHL 5: no options */
	ip->tos = tos;
	ip->tot_len = bpf_htons(tot_len);
	ip->id = 0;
	ip->frag_off = bpf_htons(frag_off);
	ip->ttl = FW_REJECT_TTL;
	ip->protocol = proto;
	ip->check = 0;
	__builtin_memcpy(&ip->saddr, p->dst, 4);
	__builtin_memcpy(&ip->daddr, p->src, 4);
	ip->check = fw_csum_fold(fw_csum_words(ip, 10, 0));
}

static __always_inline void fw_put_ip6(struct ipv6hdr *ip6, const struct fw_pkt *p,
				       __u16 payload_len, __u8 nexthdr)
{
	*(__be32 *)ip6 = bpf_htonl(0x60000000); /* version 6, traffic class 0, flow 0 */
	ip6->payload_len = bpf_htons(payload_len);
	ip6->nexthdr = nexthdr;
	ip6->hop_limit = FW_REJECT_TTL;
	__builtin_memcpy(&ip6->saddr, p->dst, 16);
	__builtin_memcpy(&ip6->daddr, p->src, 16);
}

/* fw_put_rst writes the RST's 20 bytes at t; sum is its pseudo-header sum. */
static __always_inline void fw_put_rst(__u8 *t, const struct fw_pkt *p, __u32 seq, __u32 ack,
				       __u8 flags, __u64 sum)
{
	*(__be16 *)(t + 0) = bpf_htons(p->dport);
	*(__be16 *)(t + 2) = bpf_htons(p->sport);
	*(__be32 *)(t + 4) = bpf_htonl(seq);
	*(__be32 *)(t + 8) = bpf_htonl(ack);
	t[12] = 5 << 4; /* data offset 5: no options */
	t[13] = flags;
	*(__be16 *)(t + 14) = 0; /* window */
	*(__be16 *)(t + 16) = 0; /* checksum */
	*(__be16 *)(t + 18) = 0; /* urgent pointer */
	*(__u16 *)(t + 16) = fw_csum_fold(fw_csum_words(t, 10, sum));
}

/* fw_tcp_rst answers a TCP segment with a RST the sender accepts (RFC 9293
 * 3.10.7.1): to a segment with ACK, <SEQ=SEG.ACK><CTL=RST>; else
 * <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>, SEG.LEN counting SYN and FIN.
 * The frame shrinks to Ethernet (+tags) + IP without options or extension
 * headers + 20 bytes of TCP. Returns 0, or -1 if it cannot be built. */
static __always_inline int fw_tcp_rst(void *ctx, const int hook, const struct fw_pkt *p)
{
	void *data = fw_hook_data(ctx, hook);
	void *end = fw_hook_end(ctx, hook);
	__u32 l3 = p->l3_off, l4 = p->l4_off;
	__u32 iplen = p->family == 4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr);

	if (l3 > FW_L2_MAX || l4 > FW_L4_OFF_MAX || l4 < l3 + iplen)
		return -1;
	__u8 *th = data + l4;
	fw_opaque(th);
	if ((void *)(th + 20) > end)
		return -1;
	/* What the answer needs, read before the frame changes. */
	__u32 seq = bpf_ntohl(*(__be32 *)(th + 4));
	__u32 ack = bpf_ntohl(*(__be32 *)(th + 8));
	__u32 doff = (th[12] >> 4) * 4;
	__u32 seglen = p->l3_len - (l4 - l3); /* TCP header + data; >= doff (parse.h) */
	__u8 flags = p->tcp_flags;

	__u32 rseq = 0, rack = 0;
	__u8 rflags = FW_TCP_RST;
	if (flags & FW_TCP_ACK) {
		rseq = ack;
	} else {
		rack = seq + (seglen - doff) + !!(flags & FW_TCP_SYN) + !!(flags & FW_TCP_FIN);
		rflags |= FW_TCP_ACK;
	}

	/* tc: the kernel refuses to cut an skb short of its transport header
	 * (and of the checksum an offloading device is to fill in), so IPv4
	 * options or IPv6 extension headers go first, which leaves the TCP
	 * header where it was. XDP simply writes over them. */
	if (hook == FW_HOOK_TC && l4 != l3 + iplen &&
	    bpf_skb_adjust_room(ctx, -(int)(l4 - l3 - iplen), BPF_ADJ_ROOM_NET, 0))
		return -1;
	if (fw_hook_trim(ctx, hook, l3 + iplen + 20))
		return -1;

	struct fw_answer a;
	fw_put_eth(a.l2, p);
	if (fw_hook_store(ctx, hook, 0, a.l2, 2 * ETH_ALEN))
		return -1;
	if (p->family == 4) {
		struct iphdr *ip = (void *)a.hdr;
		fw_put_ip4(ip, p, 0, sizeof(*ip) + 20, 0x4000 /* DF */, IPPROTO_TCP);
		fw_put_rst((__u8 *)(ip + 1), p, rseq, rack, rflags, fw_pseudo4(ip, IPPROTO_TCP, 20));
		return fw_hook_store(ctx, hook, l3, a.hdr, sizeof(*ip) + 20);
	}
	struct ipv6hdr *ip6 = (void *)a.hdr;
	fw_put_ip6(ip6, p, 20, IPPROTO_TCP);
	fw_put_rst((__u8 *)(ip6 + 1), p, rseq, rack, rflags, fw_pseudo6(ip6, IPPROTO_TCP, 20));
	return fw_hook_store(ctx, hook, l3, a.hdr, sizeof(*ip6) + 20);
}

/* fw_icmp_code maps a reject kind to the ICMP (family 4) or ICMPv6 code; a
 * kind of the other family, or tcp-reset for a packet that is not TCP
 * (neither passes the parser), answers port unreachable. */
static __always_inline __u8 fw_icmp_code(__u8 kind, __u8 family)
{
	if (family == 4) {
		switch (kind) {
		case FW_REJ_NET_UNREACH:   return 0;
		case FW_REJ_HOST_UNREACH:  return 1;
		case FW_REJ_PROTO_UNREACH: return 2;
		case FW_REJ_NET_PROHIB:    return 9;
		case FW_REJ_HOST_PROHIB:   return 10;
		case FW_REJ_ADMIN_PROHIB:  return 13;
		default:                   return 3; /* port unreachable */
		}
	}
	switch (kind) {
	case FW_REJ6_NO_ROUTE:     return 0;
	case FW_REJ6_ADM_PROHIB:   return 1;
	case FW_REJ6_ADDR_UNREACH: return 3;
	default:                   return 4; /* port unreachable */
	}
}

/* fw_icmp_unreach answers with a destination unreachable quoting the packet
 * from its IP header on, as much as FW_ICMP{4,6}_QUOTE_MAX allows. The
 * frame is cut to the quote (dropping Ethernet padding too), room for the
 * new IP and ICMP headers is made in front, Ethernet and the tags move to
 * the new front, and the headers go between them and the quote. Returns 0,
 * or -1. */
static __always_inline int fw_icmp_unreach(void *ctx, const int hook, const struct fw_pkt *p,
					   __u8 kind)
{
	__u32 l3 = p->l3_off;
	int v4 = p->family == 4;
	__u32 grow = v4 ? sizeof(struct iphdr) + 8 : sizeof(struct ipv6hdr) + 8;
	__u32 quote = p->l3_len;
	__u32 qmax = v4 ? FW_ICMP4_QUOTE_MAX : FW_ICMP6_QUOTE_MAX;

	if (quote > qmax)
		quote = qmax;
	if (l3 > FW_L2_MAX)
		return -1;
	if (fw_hook_trim(ctx, hook, l3 + quote) || fw_hook_grow(ctx, hook, grow))
		return -1;

	void *data = fw_hook_data(ctx, hook);
	void *end = fw_hook_end(ctx, hook);
	struct fw_answer a;
	/* The answer's L2 header: new MACs, then the EtherType and up to
	 * FW_MAX_VLAN tags from the old front (data + grow), copied as 10
	 * bytes whatever the tag count. Bytes past l3 are copied for nothing
	 * (the IP header written next covers them), but no branch on l3
	 * splits the verifier's state: every path below is walked once per
	 * family. */
	fw_put_eth(a.l2, p);
	if (v4) {
		if (data + 28 + FW_L2_MAX > end)
			return -1;
		__builtin_memcpy(a.l2 + 12, data + 28 + 12, FW_L2_MAX - 12);
	} else {
		if (data + 48 + FW_L2_MAX > end)
			return -1;
		__builtin_memcpy(a.l2 + 12, data + 48 + 12, FW_L2_MAX - 12);
	}

	__u8 *icmp;
	__u64 sum = 0;
	if (v4) {
		struct iphdr *ip = (void *)a.hdr;
		/* TOS: precedence internetwork control (RFC 1812 4.3.2.5), as Linux */
		fw_put_ip4(ip, p, 0xc0, sizeof(*ip) + 8 + quote, 0, IPPROTO_ICMP);
		icmp = (__u8 *)(ip + 1);
		icmp[0] = 3; /* destination unreachable */
	} else {
		struct ipv6hdr *ip6 = (void *)a.hdr;
		fw_put_ip6(ip6, p, 8 + quote, IPPROTO_ICMPV6);
		icmp = (__u8 *)(ip6 + 1);
		icmp[0] = 1; /* destination unreachable */
		sum = fw_pseudo6(ip6, IPPROTO_ICMPV6, 8 + quote);
	}
	icmp[1] = fw_icmp_code(kind, p->family);
	*(__u16 *)(icmp + 2) = 0;
	*(__u32 *)(icmp + 4) = 0; /* unused */
	sum = fw_csum_words(icmp, 4, sum);
	/* the quote: the old frame from its IP header on, now at l3 + grow */
	__u8 *q = data + l3 + grow;
	sum = fw_csum_tail(q, end, (FW_ICMP6_QUOTE_MAX + 1) / 2, sum);
	*(__u16 *)(icmp + 2) = fw_csum_fold(sum);

	if (fw_hook_store(ctx, hook, 0, a.l2, FW_L2_MAX))
		return -1;
	if (v4)
		return fw_hook_store(ctx, hook, l3, a.hdr, sizeof(struct iphdr) + 8);
	return fw_hook_store(ctx, hook, l3, a.hdr, sizeof(struct ipv6hdr) + 8);
}

/* fw_reject_answer checks whether the packet may be answered and builds
 * the answer in its frame. Returns 0 (answered), or the FW_R_REJECT_*
 * reason it was not; the frame may be changed either way. */
static __always_inline __u8 fw_reject_answer(void *ctx, const int hook, const struct fw_pkt *p,
					     __u8 kind)
{
	__u8 why = fw_reject_check(p, kind);
	int rc;

	if (why)
		return why;
	if (kind == FW_REJ_TCP_RESET && p->proto == IPPROTO_TCP)
		rc = fw_tcp_rst(ctx, hook, p);
	else
		rc = fw_icmp_unreach(ctx, hook, p, kind);
	return rc ? FW_R_REJECT_FAIL : 0;
}

/* ---- OUTPUT answers meeting the XDP program ----
 * The XDP program meets the answers of OUTPUT REJECTs in generic mode only:
 * there it runs on every skb that arrives, redirected ones included
 * (natively it runs in the driver, which they never pass). It lets them
 * through as native mode does: they are no traffic from the peer, were
 * counted where they were sent, and a stateful INPUT policy would drop
 * them (they belong to no connection: INVALID). fw_reject_tc records a hash
 * of each answer; the XDP program passes a packet that may be one (a RST,
 * an ICMP or ICMPv6 destination unreachable) if its hash is recorded,
 * consuming it, and only within FW_REJECT_OWN_NS of the last answer sent,
 * so that other traffic pays one comparison and an array lookup. */

#define FW_REJECT_OWN_NS 1000000000ULL

/* fw_answer_hash: FNV-1a over the 32-bit words of the first 64 bytes from
 * the IP header (fewer if the frame is shorter; answers have 40 at least).
 * Among them are the addresses, the ports or ICMP type, code and checksum,
 * and for a RST its sequence numbers. */
static __always_inline __u64 fw_answer_hash(void *data, void *end, __u32 l3)
{
	__u64 h = 0xcbf29ce484222325ULL;

	if (l3 > FW_L2_MAX)
		return h;
	__u8 *pos = data + l3;
	fw_opaque(pos);
#pragma unroll
	for (int i = 0; i < 16; i++) {
		if ((void *)(pos + 4) > end)
			break;
		h = (h ^ *(__u32 *)pos) * 0x100000001b3ULL;
		pos += 4;
	}
	return h;
}

/* fw_reject_own_note records the answer now in the frame (tc). */
static __always_inline void fw_reject_own_note(struct __sk_buff *skb, const struct fw_pkt *p)
{
	if (!fw_live_writes())
		return;
	__u64 h = fw_answer_hash((void *)(long)skb->data, (void *)(long)skb->data_end, p->l3_off);
	__u64 now = bpf_ktime_get_coarse_ns();
	__u32 zero = 0;
	__u64 *last = bpf_map_lookup_elem(&fw_reject_own_last, &zero);

	bpf_map_update_elem(&fw_reject_own, &h, &now, BPF_ANY);
	if (last)
		*last = now;
}

/* fw_reject_own_answer: is the packet (XDP) an OUTPUT REJECT answer sent
 * by fw_reject_tc? Each answer is recognized once. */
static __always_inline int fw_reject_own_answer(void *data, void *end, const struct fw_pkt *p)
{
	__u32 zero = 0;

	/* The parser flags what could be one (FW_PKT_ANSWER): a TCP RST, an
	 * ICMP or ICMPv6 destination unreachable. Everything else goes on at
	 * one test. */
	if (!(p->flags & FW_PKT_ANSWER))
		return 0;
	__u64 *last = bpf_map_lookup_elem(&fw_reject_own_last, &zero);
	if (!last || !*last || bpf_ktime_get_coarse_ns() - *last > FW_REJECT_OWN_NS)
		return 0;
	__u64 h = fw_answer_hash(data, end, p->l3_off);
	if (!fw_live_writes()) /* a trace consumes nothing */
		return bpf_map_lookup_elem(&fw_reject_own, &h) != NULL;
	return bpf_map_delete_elem(&fw_reject_own, &h) == 0; /* one CPU alone deletes it */
}

/* fw_reject_xdp acts on a REJECT decision at XDP: returns XDP_TX with the
 * answer built in the frame, or XDP_DROP, and sets d->reason to what
 * happened. fw_reject_tc is its twin for the tc egress hook.
 * Global (non-inlined) functions: the verifier checks each once (about 30k
 * instructions), not once for every state the classifier leaves the caller
 * in. The caller must not use packet pointers taken before the call: the
 * frame may have moved (the kernel tracks this for global functions since
 * 6.13; the entry programs take none). */
__noinline int fw_reject_xdp(struct xdp_md *ctx, const struct fw_pkt *p, struct fw_decision *d)
{
	if (!ctx || !p || !d) /* the verifier requires the check on global-function pointers */
		return XDP_DROP;

	/* A packet a PPPoE session carried: its answer would go back in a
	 * session frame (through the ppp device), which this builder does not
	 * make. Dropped, counted as an answer that could not be built. */
	__u8 why = p->flags & FW_PKT_PPPOE ? FW_R_REJECT_FAIL : fw_reject_answer(ctx, FW_HOOK_XDP, p, d->reject);

	d->reason = why ? why : FW_R_RULE_REJECT;
	return why ? XDP_DROP : XDP_TX;
}

/* fw_reject_tc acts on a REJECT decision in OUTPUT (tc egress): the packet
 * becomes the answer, which is sent into this host's stack on the same
 * interface as if the peer had sent it (TC_ACT_REDIRECT); or TC_ACT_SHOT.
 * Sets d->reason.
 * The answer's dst is the skb's own: the original's is dropped on the way
 * in (skb_scrub_packet), the route is looked up anew. What the kernel
 * keeps is the skb's checksum state: a TCP or UDP packet of a socket is
 * CHECKSUM_PARTIAL (its L4 checksum left for the device to fill in), no
 * helper can change that, and the receiving stack then takes the answer's
 * L4 checksum as verified; the answer carries full, correct checksums
 * anyway. docs/reject.md "REJECT in OUTPUT". */
__noinline int fw_reject_tc(struct __sk_buff *skb, const struct fw_pkt *p, struct fw_decision *d)
{
	if (!skb || !p || !d)
		return TC_ACT_SHOT;

	__u8 why = fw_reject_answer(skb, FW_HOOK_TC, p, d->reject);

	d->reason = why ? why : FW_R_RULE_REJECT;
	if (why)
		return TC_ACT_SHOT;
	fw_reject_own_note(skb, p);
	return bpf_redirect(skb->ifindex, BPF_F_INGRESS);
}

#endif
