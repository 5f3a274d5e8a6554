/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* NAT at tc egress (`--nat xdpfw`, docs/nat.md): a packet this host sends
 * that belongs to a connection xdpfw translated, after OUTPUT accepted it,
 * gets its binding's rewrite. That is the answer of a connection
 * PREROUTING sent to this host (REDIRECT, a DNAT to a local address,
 * lib/natdst.h): its source becomes the address and port the client sent
 * to, as the kernel's NAT rewrites it in POSTROUTING, after the filter.
 *
 * The skb's checksums are updated by the kernel's helpers, which know how
 * the stack left them (a locally built TCP or UDP packet usually has
 * CHECKSUM_PARTIAL: its checksum field holds the pseudo-header's sum,
 * which BPF_F_PSEUDO_HDR updates; the ports are then left to the device). */
#ifndef XDPFW_NATTC_H
#define XDPFW_NATTC_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "nat.h"
#include "natfrag.h"
#include "natfw.h"

/* fw_nat_tc_field replaces the 2- or 4-byte field at off (old value from,
 * new value to, network order) of the packet's L4 header and updates the
 * L4 checksum at csum (0: none) with l4flags (BPF_F_PSEUDO_HDR: a field
 * of the pseudo-header; BPF_F_MARK_MANGLED_0, UDP: a checksum of 0, none,
 * stays 0). -1 on a helper's failure. */
static __always_inline int fw_nat_tc_field(struct __sk_buff *skb, __u32 off, __u32 csum, __u32 from, __u32 to,
					   __u32 size, __u64 l4flags)
{
	if (from == to)
		return 0;
	if (csum && bpf_l4_csum_replace(skb, csum, from, to, l4flags | size))
		return -1;
	return bpf_skb_store_bytes(skb, off, &to, size, 0) ? -1 : 0;
}

/* fw_nat_tc_rw rewrites the IPv4 packet p of skb, whose tuple is kp, to
 * the tuple b. Returns 0, or -1 when the rewrite failed (the packet must
 * not leave half translated: the caller drops it). */
static __always_inline int fw_nat_tc_rw(struct __sk_buff *skb, const struct fw_pkt *p, const struct fw_nat_tuple *kp,
					const struct fw_nat_rw *b)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct fw_nat_tuple k = *kp;
	struct fw_nat_rw rw = *b;
	struct iphdr *ip = data + p->l3_off;
	if ((void *)(ip + 1) > end)
		return 0;
	__u32 l3 = p->l3_off, l4 = l3 + (ip->ihl & 0xf) * 4;
	__u32 csum = 0, sport = 0, dport = 0;
	__u64 flags = BPF_F_PSEUDO_HDR;

	if (k.proto == IPPROTO_TCP) {
		csum = l4 + 16, sport = l4, dport = l4 + 2;
	} else if (k.proto == IPPROTO_UDP) {
		csum = l4 + 6, sport = l4, dport = l4 + 2;
		flags |= BPF_F_MARK_MANGLED_0;
	} else if (k.proto == IPPROTO_ICMP && k.sport) {
		/* an echo: its id, a request's source "port", a reply's
		 * destination; the ICMP checksum covers no pseudo-header */
		struct fw_icmp_echo *ic = (void *)ip + (ip->ihl & 0xf) * 4;
		if ((void *)(ic + 1) > end)
			return 0;
		if (ic->type == 8)
			sport = l4 + 4;
		else
			dport = l4 + 4;
		if (fw_nat_tc_field(skb, sport ? sport : dport, l4 + 2, sport ? k.sport : k.dport,
				    sport ? rw.sport : rw.dport, 2, 0))
			return -1;
		sport = dport = 0;
	}
	__u32 l4csum = csum;
	if (fw_nat_tc_field(skb, l3 + 12, l4csum, k.saddr, rw.saddr, 4, flags) ||
	    fw_nat_tc_field(skb, l3 + 16, l4csum, k.daddr, rw.daddr, 4, flags))
		return -1;
	if (k.saddr != rw.saddr && bpf_l3_csum_replace(skb, l3 + 10, k.saddr, rw.saddr, 4))
		return -1;
	if (k.daddr != rw.daddr && bpf_l3_csum_replace(skb, l3 + 10, k.daddr, rw.daddr, 4))
		return -1;
	flags &= ~(__u64)BPF_F_PSEUDO_HDR;
	if (sport && fw_nat_tc_field(skb, sport, csum, k.sport, rw.sport, 2, flags))
		return -1;
	if (dport && fw_nat_tc_field(skb, dport, csum, k.dport, rw.dport, 2, flags))
		return -1;
	return 0;
}


/* fw_nat_tc_error: the ICMP error p this host sends (skb, its headers
 * pulled in: tc_fw.c) about a packet of a translated connection, as the
 * kernel sends one about a packet it was given translated (fw_nat_life_out:
 * TTL 1, DF and too big) whose quote holds an address the error's
 * receiver does not know (the client's, behind a MASQUERADE; the
 * server's, behind a DNAT), gets its quote translated as the kernel's NAT
 * translates it (nf_nat_icmp_reply_translation): the connection's tuple
 * the receiver sent or was sent. The binding: the quote's tuple reversed
 * (fw_nat_key4_quoted), that is the one of packets going where the error
 * goes; its leaving tuple reversed is the quote. The outer header (this
 * host to the receiver) stays. The error is built whole by the stack (no
 * CHECKSUM_PARTIAL): rewritten in place, checksums updated
 * incrementally. Counted (FW_NAT_C_ICMP_ERROR) when it changed. */
static __always_inline void fw_nat_tc_error(struct __sk_buff *skb, const struct fw_pkt *p)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct fw_nat_tuple k;

	if (p->l3_off > 64 || fw_nat_key4_quoted(data + p->l3_off, end, &k))
		return;
	const struct fw_nat_rw *v = bpf_map_lookup_elem(&fw_nat_binds, &k);
	int dying = 0;
	if (!v) { /* a DNATed first packet the kernel answers instead of forwarding (lib/natdying.h) */
		v = bpf_map_lookup_elem(&fw_nat_dying, &k);
		dying = 1;
	}
	if (!v || !v->daddr || (v->saddr == k.saddr && v->daddr == k.daddr && v->sport == k.sport && v->dport == k.dport))
		return; /* no translation (or nat OUTPUT's mark, lib/natout.h): the quote is what the receiver knows */
	struct iphdr *ip = data + p->l3_off;
	if ((void *)(ip + 1) > end)
		return;
	struct fw_nat_rw inner = {.saddr = v->daddr, .daddr = v->saddr, .sport = v->dport, .dport = v->sport};
	struct fw_nat_rw outer = {.saddr = ip->saddr, .daddr = ip->daddr};
	if (dying) /* taken: one error per packet */
		bpf_map_delete_elem(&fw_nat_dying, &k);
	if (!fw_nat_rewrite4_icmp_error(ip, end, &outer, &inner))
		fw_nat_count(FW_NAT_C_ICMP_ERROR, p->l3_len);
}

/* fw_nat_tc rewrites the IPv4 packet p of skb, accepted by OUTPUT, as its
 * binding b says when bound (found before the filter, lib/natout.h
 * fw_nat_out_pre: one lookup a packet), or leaves it (bound 0: it has
 * none; b is not read: a pointer the verifier knows, never a NULL chosen
 * at run time, which clang may turn into a scalar). An ICMP error has
 * its quote translated (fw_nat_tc_error: the quote's binding). Returns
 * 0, or -1 when the rewrite failed (the packet must not leave half
 * translated: the caller drops it). */
static __always_inline int fw_nat_tc(struct __sk_buff *skb, const struct fw_pkt *p, const struct fw_nat_rw *b,
				     int bound)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct fw_nat_tuple k;

	if (p->family == 4 && p->proto == IPPROTO_ICMP && fw_nat_icmp_error(p->icmp_type) && !(p->flags & FW_PKT_FRAG)) {
		fw_nat_tc_error(skb, p); /* an ICMP error the kernel sends about a translated packet */
		return 0;
	}
	if (p->family != 4 || p->l3_off > 64 || fw_nat_key4(data + p->l3_off, end, &k))
		return 0; /* a later fragment: fw_nat_tc_frag */
	if (p->flags & FW_PKT_FRAG1) /* for its later fragments, translated or not (lib/natfrag.h) */
		fw_nat_frag_first(data + p->l3_off, end, &k, bound ? b->saddr : k.saddr, bound ? b->daddr : k.daddr);
	if (!bound)
		return 0;
	return fw_nat_tc_rw(skb, p, &k, b);
}

/* fw_nat_tc_frag: the later IPv4 fragment p of skb, accepted by OUTPUT
 * as its datagram, gets the addresses recorded at its first fragment
 * (fw_nat_tc records every sent first fragment's, translated or not), its
 * IPv4 checksum updated. Returns 0, or -1 (the caller drops it): no
 * record (gone from the LRU: it might be a translated datagram's,
 * counted FW_NAT_C_FRAG), or a helper failed. */
static __always_inline int fw_nat_tc_frag(struct __sk_buff *skb, const struct fw_pkt *p)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;

	if (p->family != 4 || p->l3_off > 64)
		return 0;
	struct iphdr *ip = data + p->l3_off;
	const struct fw_nat_rw *rw = fw_nat_frag_of(ip, end);
	if (!rw || (void *)(ip + 1) > end) {
		fw_nat_count(FW_NAT_C_FRAG, p->l3_len);
		return -1;
	}
	__be32 s = ip->saddr, d = ip->daddr, ns = rw->saddr, nd = rw->daddr;
	__u32 l3 = p->l3_off;
	if (fw_nat_tc_field(skb, l3 + 12, 0, s, ns, 4, 0) || fw_nat_tc_field(skb, l3 + 16, 0, d, nd, 4, 0))
		return -1;
	if (s != ns && bpf_l3_csum_replace(skb, l3 + 10, s, ns, 4))
		return -1;
	if (d != nd && bpf_l3_csum_replace(skb, l3 + 10, d, nd, 4))
		return -1;
	fw_nat_count(FW_NAT_C_FRAG_NAT, p->l3_len);
	return 0;
}

#endif
