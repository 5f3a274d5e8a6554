/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* REJECT: answer the packet, in place, out of the port it came in on
 * (XDP_TX): a TCP RST for --reject-with tcp-reset, else an ICMP or ICMPv6
 * destination unreachable that quotes the packet.
 *
 * The answer swaps the MAC addresses and keeps the VLAN tags; its IP
 * source is the packet's destination, its TTL / hop limit FW_REJECT_TTL.
 * What is never answered (RFC 1122 3.2.2, RFC 4443 2.4(e), RFC 9293):
 * non-first fragments, ICMP errors, a RST (with tcp-reset), broadcast and
 * multicast destinations (link layer or IP), sources that are not one host.
 * Each source (IPv4 address, IPv6 /64) gets at most reject_rate answers a
 * second, reject_burst at once (struct fw_config), so REJECT cannot be
 * turned into an amplifier. Such packets are dropped, counted by reason.
 * docs/reject.md has the details and the RFC references. */
#ifndef XDPFW_REJECT_H
#define XDPFW_REJECT_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../types.h"
#include "../maps.h"

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

#define FW_TCP_FIN 0x01
#define FW_TCP_SYN 0x02
#define FW_TCP_RST 0x04
#define FW_TCP_ACK 0x10

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

/* ---- the per-source rate limit ---- */

/* fw_reject_allow takes a token from the source's bucket. GCRA: the map
 * holds the theoretical arrival time (tat) of the next answer; one answer
 * costs `interval`; an answer is allowed while tat - now <= (burst - 1) *
 * interval, so a quiet source has burst answers at once, then rate per
 * second. Two CPUs answering one source at the same instant may both take
 * the last token (no atomic compare-and-swap in BPF v1 instructions): the
 * bound is off by at most one answer per CPU, enough against amplification. */
static __always_inline int fw_reject_allow(const struct fw_pkt *p)
{
	__u32 zero = 0;
	const struct fw_config *cfg = bpf_map_lookup_elem(&fw_config_map, &zero);
	__u64 rate = FW_REJECT_RATE_DEFAULT, burst = FW_REJECT_BURST_DEFAULT;

	if (cfg && cfg->reject_rate)
		rate = cfg->reject_rate;
	if (cfg && cfg->reject_burst)
		burst = cfg->reject_burst;
	__u64 interval = 1000000000ULL / rate; /* rate >= 1 */
	if (!interval)
		interval = 1;
	__u64 tau = (burst - 1) * interval;    /* < 2^32 * 10^9: no overflow */

	struct fw_rl_key k = { .addr = p->src[0], .family = p->family };
	__u64 now = bpf_ktime_get_ns();
	__u64 *tat = bpf_map_lookup_elem(&fw_reject_rl, &k);
	if (!tat) {
		__u64 next = now + interval;
		bpf_map_update_elem(&fw_reject_rl, &k, &next, BPF_ANY);
		return 1;
	}
	__u64 t = *tat > now ? *tat : now;
	if (t - now > tau)
		return 0;
	*tat = t + interval;
	return 1;
}

/* ---- building the answer ---- */

/* fw_put_eth writes the answer's Ethernet addresses: back to the sender. */
static __always_inline void fw_put_eth(struct ethhdr *eth, const struct fw_pkt *p)
{
	__builtin_memcpy(eth->h_dest, p->src_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, p->dst_mac, ETH_ALEN);
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

/* fw_tcp_rst answers a TCP segment with a RST the sender accepts (RFC 9293
 * 3.10.7.1): to a segment with ACK, <SEQ=SEG.ACK><CTL=RST>; else
 * <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>, SEG.LEN counting SYN and FIN.
 * The frame shrinks to Ethernet (+tags) + IP without options or extension
 * headers + 20 bytes of TCP. Returns 0, or -1 if it cannot be built. */
static __always_inline int fw_tcp_rst(struct xdp_md *ctx, const struct fw_pkt *p)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 l3 = p->l3_off, l4 = p->l4_off;

	if (l3 > FW_L2_MAX || l4 > FW_L4_OFF_MAX || l4 < l3)
		return -1;
	__u8 *th = data + l4;
	fw_opaque(th);
	if ((void *)(th + 20) > end)
		return -1;
	/* What the answer needs, read before the headers are overwritten. */
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

	__u32 iplen = p->family == 4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr);
	int delta = (int)(l3 + iplen + 20) - (int)(end - data); /* <= 0 */
	if (delta > 0 || bpf_xdp_adjust_tail(ctx, delta))
		return -1;
	/* adjust_tail invalidates every packet pointer: load and check again. */
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + ETH_HLEN > end)
		return -1;
	fw_put_eth(data, p);

	__u64 sum;
	__u8 *t;
	if (p->family == 4) {
		struct iphdr *ip = data + l3;
		fw_opaque(ip);
		if ((void *)(ip + 1) + 20 > end)
			return -1;
		fw_put_ip4(ip, p, 0, sizeof(*ip) + 20, 0x4000 /* DF */, IPPROTO_TCP);
		t = (__u8 *)(ip + 1);
		sum = fw_pseudo4(ip, IPPROTO_TCP, 20);
	} else {
		struct ipv6hdr *ip6 = data + l3;
		fw_opaque(ip6);
		if ((void *)(ip6 + 1) + 20 > end)
			return -1;
		fw_put_ip6(ip6, p, 20, IPPROTO_TCP);
		t = (__u8 *)(ip6 + 1);
		sum = fw_pseudo6(ip6, IPPROTO_TCP, 20);
	}
	*(__be16 *)(t + 0) = bpf_htons(p->dport);
	*(__be16 *)(t + 2) = bpf_htons(p->sport);
	*(__be32 *)(t + 4) = bpf_htonl(rseq);
	*(__be32 *)(t + 8) = bpf_htonl(rack);
	t[12] = 5 << 4; /* data offset 5: no options */
	t[13] = rflags;
	*(__be16 *)(t + 14) = 0; /* window */
	*(__be16 *)(t + 16) = 0; /* checksum */
	*(__be16 *)(t + 18) = 0; /* urgent pointer */
	*(__u16 *)(t + 16) = fw_csum_fold(fw_csum_words(t, 10, sum));
	return 0;
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
 * from its IP header on, as much as FW_ICMP{4,6}_QUOTE_MAX allows. The new
 * IP and ICMP headers go in front of the old IP header (adjust_head), the
 * Ethernet header and tags move to the new front, and the tail is cut to
 * the quote (dropping Ethernet padding too). Returns 0, or -1. */
static __always_inline int fw_icmp_unreach(struct xdp_md *ctx, const struct fw_pkt *p, __u8 kind)
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
	if (bpf_xdp_adjust_head(ctx, -(int)grow))
		return -1;

	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	/* Move Ethernet and the tags from data + grow to data: the MACs are
	 * written anew, the EtherType and up to FW_MAX_VLAN tags copied as 10
	 * bytes whatever the tag count. Bytes past l3 are copied for nothing
	 * (the new IP header overwrites them), but no branch on l3 splits the
	 * verifier's state: every path below is walked once per family. */
	if (v4) {
		if (data + 28 + FW_L2_MAX > end)
			return -1;
		fw_put_eth(data, p);
		__builtin_memcpy(data + 12, data + 28 + 12, FW_L2_MAX - 12);
	} else {
		if (data + 48 + FW_L2_MAX > end)
			return -1;
		fw_put_eth(data, p);
		__builtin_memcpy(data + 12, data + 48 + 12, FW_L2_MAX - 12);
	}

	int delta = (int)(l3 + grow + quote) - (int)(end - data); /* <= 0 */
	if (delta > 0 || bpf_xdp_adjust_tail(ctx, delta))
		return -1;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;

	__u8 *icmp;
	__u64 sum;
	if (v4) {
		struct iphdr *ip = data + l3;
		fw_opaque(ip);
		if ((void *)(ip + 1) + 8 > end)
			return -1;
		/* TOS: precedence internetwork control (RFC 1812 4.3.2.5), as Linux */
		fw_put_ip4(ip, p, 0xc0, sizeof(*ip) + 8 + quote, 0, IPPROTO_ICMP);
		icmp = (__u8 *)(ip + 1);
		icmp[0] = 3; /* destination unreachable */
		sum = 0;
	} else {
		struct ipv6hdr *ip6 = data + l3;
		fw_opaque(ip6);
		if ((void *)(ip6 + 1) + 8 > end)
			return -1;
		fw_put_ip6(ip6, p, 8 + quote, IPPROTO_ICMPV6);
		icmp = (__u8 *)(ip6 + 1);
		icmp[0] = 1; /* destination unreachable */
		sum = fw_pseudo6(ip6, IPPROTO_ICMPV6, 8 + quote);
	}
	icmp[1] = fw_icmp_code(kind, p->family);
	*(__u16 *)(icmp + 2) = 0;
	*(__u32 *)(icmp + 4) = 0; /* unused */
	sum = fw_csum_tail(icmp, end, (8 + FW_ICMP6_QUOTE_MAX + 1) / 2, sum);
	*(__u16 *)(icmp + 2) = fw_csum_fold(sum);
	return 0;
}

/* fw_reject acts on a REJECT decision: returns XDP_TX with the answer
 * built in the frame, or XDP_DROP, and sets d->reason to what happened.
 * A global (non-inlined) function: the verifier checks it once (about 30k
 * instructions), not once for every state the classifier leaves the caller
 * in. The caller must not use packet pointers taken before the call: the
 * frame may have moved (the kernel tracks this for global functions since
 * 6.13; xdp_fw.c takes none). */
__noinline int fw_reject(struct xdp_md *ctx, const struct fw_pkt *p, struct fw_decision *d)
{
	if (!ctx || !p || !d) /* the verifier requires the check on global-function pointers */
		return XDP_DROP;

	__u8 why = fw_reject_unanswerable(p, d->reject);
	int rc;

	if (why) {
		d->reason = why;
		return XDP_DROP;
	}
	if (!fw_reject_allow(p)) {
		d->reason = FW_R_REJECT_RATE;
		return XDP_DROP;
	}
	if (d->reject == FW_REJ_TCP_RESET && p->proto == IPPROTO_TCP)
		rc = fw_tcp_rst(ctx, p);
	else
		rc = fw_icmp_unreach(ctx, p, d->reject);
	if (rc) {
		d->reason = FW_R_REJECT_FAIL;
		return XDP_DROP;
	}
	d->reason = FW_R_RULE_REJECT;
	return XDP_TX;
}

#endif
