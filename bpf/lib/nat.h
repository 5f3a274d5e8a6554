/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Address translation of one IPv4 packet in place (docs/nat.md): the
 * addresses, and the TCP/UDP ports or the ICMP echo id, with incremental
 * updates of the IPv4 header checksum and of the L4 checksum (TCP and UDP
 * cover the addresses through their pseudo-header; ICMP does not). A UDP
 * checksum of 0 (none, IPv4 allows it) stays 0; a computed one of 0 is
 * sent as 0xffff (RFC 768). */
#ifndef XDPFW_NAT_H
#define XDPFW_NAT_H

#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../types.h"
#include "csum.h"

/* The ICMP echo header (linux/icmp.h pulls in the C library's headers). */
struct fw_icmp_echo {
	__u8   type;
	__u8   code;
	__u16  checksum;
	__be16 id;
	__be16 seq;
};

/* fw_nat_rewrite4 rewrites the IPv4 packet at l3 (the frame ends at end)
 * to carry rw's addresses and ports. Returns 0, or -1 and changes
 * nothing when it cannot: a truncated header, or a later fragment (no
 * ports: lib/natfrag.h gives it its datagram's addresses). A first
 * fragment is rewritten as a whole packet: its L4 checksum covers the
 * whole datagram, of which only the pseudo-header's addresses and the
 * ports change. Other protocols than
 * TCP, UDP and ICMP, and ICMP messages other than echo, have their
 * addresses translated only. */
static __always_inline int fw_nat_rewrite4(void *l3, void *end, const struct fw_nat_rw *rw)
{
	struct iphdr *ip = l3;
	__u16 *check = 0, *sp = 0, *dp = 0;
	__u32 l4d = 0;
	int udp = 0;

	if ((void *)(ip + 1) > end || ip->ihl < 5)
		return -1;
	if (ip->frag_off & bpf_htons(0x1fff)) /* an offset: a later fragment */
		return -1;
	void *l4 = l3 + (ip->ihl & 0xf) * 4; /* ihl: 5 to 15 words */
	__u32 l3d = fw_csum_delta32(0, ip->saddr, rw->saddr);
	l3d = fw_csum_delta32(l3d, ip->daddr, rw->daddr);

	switch (ip->protocol) {
	case IPPROTO_TCP: {
		struct tcphdr *tcp = l4;

		if ((void *)(tcp + 1) > end)
			return -1;
		check = &tcp->check;
		sp = &tcp->source;
		dp = &tcp->dest;
		l4d = l3d;
		break;
	}
	case IPPROTO_UDP: {
		struct udphdr *uh = l4;

		if ((void *)(uh + 1) > end)
			return -1;
		sp = &uh->source;
		dp = &uh->dest;
		if (uh->check) { /* 0: no checksum, nothing to update */
			check = &uh->check;
			l4d = l3d;
			udp = 1;
		}
		break;
	}
	case IPPROTO_ICMP: {
		struct fw_icmp_echo *ic = l4;

		if ((void *)(ic + 1) > end)
			return -1;
		check = &ic->checksum;
		if (ic->type == 8) /* echo request: the id is its source "port" */
			sp = &ic->id;
		else if (ic->type == 0) /* echo reply: its destination "port" */
			dp = &ic->id;
		break;
	}
	}
	if (sp) {
		l4d = fw_csum_delta16(l4d, *sp, rw->sport);
		*sp = rw->sport;
	}
	if (dp) {
		l4d = fw_csum_delta16(l4d, *dp, rw->dport);
		*dp = rw->dport;
	}
	if (check) {
		__u16 c = fw_csum_apply(*check, l4d);

		if (udp && !c)
			c = 0xffff;
		*check = c;
	}
	ip->check = fw_csum_apply(ip->check, l3d);
	ip->saddr = rw->saddr;
	ip->daddr = rw->daddr;
	return 0;
}

/* fw_nat_icmp_error reports whether ICMP type t quotes a packet (an
 * error: destination unreachable, source quench, redirect, time exceeded,
 * parameter problem), whose headers a translation rewrites too. */
static __always_inline int fw_nat_icmp_error(__u8 t)
{
	return t == 3 || t == 4 || t == 5 || t == 11 || t == 12;
}

/* fw_nat_rewrite4_icmp_error rewrites an ICMP error about a translated
 * connection as the kernel's NAT does (nf_nat_icmp_reply_translation):
 * the quoted packet to carry inner's addresses and ports (its source and
 * destination; a quoted echo request's id is its source "port"), with its
 * IPv4 checksum and, where the quote holds them, its TCP or UDP (not 0)
 * or ICMP checksum updated; the ICMP message's checksum updated for all
 * of that; the outer header to carry outer's addresses. Returns 0, or -1
 * and changes nothing: not an ICMP error, a fragment, a quote too short
 * for the quoted packet's ports or id. */
static __always_inline int fw_nat_rewrite4_icmp_error(void *l3, void *end, const struct fw_nat_rw *outer,
						      const struct fw_nat_rw *inner)
{
	struct iphdr *ip = l3;

	if ((void *)(ip + 1) > end || ip->ihl < 5 || ip->protocol != IPPROTO_ICMP)
		return -1;
	if (ip->frag_off & bpf_htons(0x3fff))
		return -1;
	struct fw_icmp_echo *ic = l3 + (ip->ihl & 0xf) * 4;
	struct iphdr *in = (void *)(ic + 1);
	if ((void *)(in + 1) > end || !fw_nat_icmp_error(ic->type) || in->ihl < 5)
		return -1;
	void *l4 = (void *)in + (in->ihl & 0xf) * 4;
	__u16 *sp = 0, *dp = 0, *check = 0;
	int udp = 0;

	if (l4 + 8 > end) /* the ports (id) at least, as conntrack needs them */
		return -1;
	switch (in->protocol) {
	case IPPROTO_TCP:
		sp = l4;
		dp = l4 + 2;
		if (l4 + sizeof(struct tcphdr) <= end) /* else the quote ends before the checksum */
			check = &((struct tcphdr *)l4)->check;
		break;
	case IPPROTO_UDP:
		sp = l4;
		dp = l4 + 2;
		if (((struct udphdr *)l4)->check) {
			check = &((struct udphdr *)l4)->check;
			udp = 1;
		}
		break;
	case IPPROTO_ICMP:
		if (((struct fw_icmp_echo *)l4)->type != 8) /* only an echo request has an id to translate */
			break;
		sp = &((struct fw_icmp_echo *)l4)->id;
		check = &((struct fw_icmp_echo *)l4)->checksum;
		break;
	}

	/* The quoted addresses: in the quoted IPv4 checksum, its TCP/UDP
	 * pseudo-header, and the ICMP checksum (they are ICMP data). */
	__u32 ad = fw_csum_delta32(0, in->saddr, inner->saddr);
	ad = fw_csum_delta32(ad, in->daddr, inner->daddr);
	__u32 icd = ad, l4d = in->protocol == IPPROTO_ICMP ? 0 : ad;
	__u16 old;

	if (sp) {
		l4d = fw_csum_delta16(l4d, *sp, inner->sport);
		icd = fw_csum_delta16(icd, *sp, inner->sport);
		*sp = inner->sport;
	}
	if (dp) {
		l4d = fw_csum_delta16(l4d, *dp, inner->dport);
		icd = fw_csum_delta16(icd, *dp, inner->dport);
		*dp = inner->dport;
	}
	if (check) {
		old = *check;
		__u16 c = fw_csum_apply(old, l4d);
		if (udp && !c)
			c = 0xffff;
		*check = c;
		icd = fw_csum_delta16(icd, old, c);
	}
	old = in->check;
	in->check = fw_csum_apply(old, ad);
	icd = fw_csum_delta16(icd, old, in->check);
	in->saddr = inner->saddr;
	in->daddr = inner->daddr;
	ic->checksum = fw_csum_apply(ic->checksum, icd);

	ip->check = fw_csum_apply(ip->check, fw_csum_delta32(fw_csum_delta32(0, ip->saddr, outer->saddr), ip->daddr, outer->daddr));
	ip->saddr = outer->saddr;
	ip->daddr = outer->daddr;
	return 0;
}

/* FW_NAT_PROBES bounds the ports fw_nat_claim tries for one connection
 * (after its own): a source NAT that finds none of them free drops the
 * connection's first packet, counted, as the kernel drops what it cannot
 * translate. */
#define FW_NAT_PROBES 32

/* fw_nat_claim picks the source port (echo id) of a connection translated
 * by SNAT or MASQUERADE, whose reply tuple is *reply with its destination
 * port still to choose, among lo..hi (host order), and claims it: it
 * inserts the reply tuple into map (a hash of struct fw_nat_tuple), with
 * value val, only if no connection holds it (BPF_NOEXIST: two CPUs cannot
 * claim one port). As the kernel's NAT, the connection keeps its own
 * port, want, when it is in the range and free; else the ports tried are
 * lo + (hash + i) mod the range's size for i < FW_NAT_PROBES, hash
 * spreading the connections of one destination. Returns the port claimed
 * (host order, reply->dport set to it, and reply->sport too for an ICMP
 * echo, whose id is both), or 0 when none of them was free. */
static __always_inline __u16 fw_nat_claim(void *map, struct fw_nat_tuple *reply, __u16 want, __u16 lo, __u16 hi,
					  __u32 hash, const void *val)
{
	__u32 span = (__u32)hi - lo + 1;

	if (hi < lo)
		return 0;
	/* an ICMP echo's id is both ports of its tuple (fw_nat_key4) */
	int echo = reply->proto == IPPROTO_ICMP;

	if (want >= lo && want <= hi) {
		reply->dport = bpf_htons(want);
		if (echo)
			reply->sport = reply->dport;
		if (!bpf_map_update_elem(map, reply, val, BPF_NOEXIST))
			return want;
	}
	for (__u32 i = 0; i < FW_NAT_PROBES && i < span; i++) {
		__u16 port = lo + (hash + i) % span;

		if (port == want)
			continue;
		reply->dport = bpf_htons(port);
		if (echo)
			reply->sport = reply->dport;
		if (!bpf_map_update_elem(map, reply, val, BPF_NOEXIST))
			return port;
	}
	return 0;
}

/* ---- bindings: a translated connection is two entries of a hash map of
 * struct fw_nat_tuple -> struct fw_nat_rw, one per direction, each keyed
 * by the tuple its packets arrive with and holding the tuple they leave
 * with; so one lookup finds either direction's. The filter chains see a
 * packet between the two halves of its rewrite, as iptables does: the
 * destination is rewritten before them (DNAT, and the answer to a source
 * NAT going back to its client), the source after them (SNAT,
 * MASQUERADE, and the answer to a DNAT coming from the address the client
 * sent to). ---- */

/* fw_nat_key4 fills k with the tuple of the IPv4 packet at l3: TCP and UDP
 * ports, an ICMP echo's id as both ports, none for other protocols.
 * -1: truncated, or a later fragment (a first fragment has its ports). */
static __always_inline int fw_nat_key4(void *l3, void *end, struct fw_nat_tuple *k)
{
	struct iphdr *ip = l3;

	if ((void *)(ip + 1) > end || ip->ihl < 5 || (ip->frag_off & bpf_htons(0x1fff)))
		return -1;
	void *l4 = l3 + (ip->ihl & 0xf) * 4;
	*k = (struct fw_nat_tuple){.saddr = ip->saddr, .daddr = ip->daddr, .proto = ip->protocol};
	switch (ip->protocol) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
		if (l4 + 4 > end)
			return -1;
		k->sport = ((__be16 *)l4)[0];
		k->dport = ((__be16 *)l4)[1];
		break;
	case IPPROTO_ICMP: {
		struct fw_icmp_echo *ic = l4;

		if ((void *)(ic + 1) > end)
			return -1;
		if (ic->type == 8 || ic->type == 0)
			k->sport = k->dport = ic->id;
		break;
	}
	}
	return 0;
}

/* fw_nat_key4_quoted fills k with the tuple of a packet answering the one
 * the ICMP error at l3 quotes (the quote's tuple reversed: the way the
 * error goes), whose binding is the connection's in the error's
 * direction. -1: not an ICMP error, a fragment (outer or quoted), a quote
 * too short for its ports, an error about an error. */
static __always_inline int fw_nat_key4_quoted(void *l3, void *end, struct fw_nat_tuple *k)
{
	struct iphdr *ip = l3;

	if ((void *)(ip + 1) > end || ip->ihl < 5 || ip->protocol != IPPROTO_ICMP || (ip->frag_off & bpf_htons(0x3fff)))
		return -1;
	struct fw_icmp_echo *ic = l3 + (ip->ihl & 0xf) * 4;
	struct iphdr *in = (void *)(ic + 1);
	if ((void *)(in + 1) > end || !fw_nat_icmp_error(ic->type) || in->ihl < 5 || (in->frag_off & bpf_htons(0x1fff)))
		return -1;
	void *l4 = (void *)in + (in->ihl & 0xf) * 4;
	if (l4 + 8 > end)
		return -1;
	*k = (struct fw_nat_tuple){.saddr = in->daddr, .daddr = in->saddr, .proto = in->protocol};
	switch (in->protocol) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
		k->sport = ((__be16 *)l4)[1];
		k->dport = ((__be16 *)l4)[0];
		break;
	case IPPROTO_ICMP: {
		struct fw_icmp_echo *q = l4;

		if (q->type != 8 && q->type != 0)
			return -1;
		k->sport = k->dport = q->id;
		break;
	}
	}
	return 0;
}

/* fw_nat_pre rewrites the destination of the packet at l3 (tuple k) as
 * its binding out says: before the filter chains. */
static __always_inline int fw_nat_pre(void *l3, void *end, const struct fw_nat_tuple *k, const struct fw_nat_rw *out)
{
	struct fw_nat_rw rw = {.saddr = k->saddr, .daddr = out->daddr, .sport = k->sport, .dport = out->dport};

	return fw_nat_rewrite4(l3, end, &rw);
}

/* fw_nat_post rewrites the source of the packet at l3 as its binding out
 * says (its destination being out's already): after the filter chains. */
static __always_inline int fw_nat_post(void *l3, void *end, const struct fw_nat_rw *out)
{
	return fw_nat_rewrite4(l3, end, out);
}

/* fw_nat_bind4 records the translation of a connection whose first packet
 * arrived with tuple orig and leaves with out: the reply direction's
 * entry first, inserted only if no connection holds its tuple (unless
 * claimed already: fw_nat_claim inserts it), then the original
 * direction's. -1 when the reply tuple is taken. */
static __always_inline int fw_nat_bind4(void *map, const struct fw_nat_tuple *orig, const struct fw_nat_rw *out, int claimed)
{
	struct fw_nat_tuple reply = {.saddr = out->daddr, .daddr = out->saddr, .sport = out->dport, .dport = out->sport,
				     .proto = orig->proto};
	struct fw_nat_rw back = {.saddr = orig->daddr, .daddr = orig->saddr, .sport = orig->dport, .dport = orig->sport};

	if (!claimed && bpf_map_update_elem(map, &reply, &back, BPF_NOEXIST))
		return -1;
	if (bpf_map_update_elem(map, orig, out, BPF_ANY)) {
		bpf_map_delete_elem(map, &reply);
		return -1;
	}
	return 0;
}

#endif
