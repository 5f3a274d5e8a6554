/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Packet parsing: Ethernet, 802.1Q/802.1ad, IPv4 (+options, fragments),
 * IPv6 (+extension headers), TCP, UDP, SCTP, UDP-Lite, ICMP, ICMPv6.
 *
 * Every parser has one shape: a cursor, a bounds check against data_end,
 * then the next protocol or a negative enum fw_reason for malformed input. */
#ifndef XDPFW_PARSE_H
#define XDPFW_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include "../types.h"

#define FW_PARSE_OK     0
#define FW_PARSE_NOT_IP 1

struct cursor {
	void *start;
	void *pos;
	void *end;      /* end of the bytes we can read (an skb's linear part) */
	__u32 len;      /* the whole frame's length (an skb's may exceed end) */
	__u32 l4len; /* bytes the IP header says follow the network headers */
};

#include "pppoe.h"

struct fw_vlan_hdr {
	__be16 tci;
	__be16 encap_proto;
};

static __always_inline int proto_is_vlan(__u16 h_proto)
{
	return h_proto == bpf_htons(ETH_P_8021Q) || h_proto == bpf_htons(ETH_P_8021AD);
}

/* Ethernet and up to FW_MAX_VLAN tags. Returns the EtherType (network order)
 * in *eth_proto, and in *vids the frame's tags' VIDs (the first in bits
 * 0-11, the second in 16-27; 0: none). */
static __always_inline int parse_eth(struct cursor *c, struct fw_pkt *p, __be16 *eth_proto, __u32 *vids)
{
	struct ethhdr *eth = c->pos;

	if ((void *)(eth + 1) > c->end)
		return -FW_R_BAD_ETH;
	/* 16-bit words, not bytes (struct ethhdr is packed: memcpy would
	 * copy byte by byte); fw_pkt keeps the MACs 2-byte aligned. */
	const __u16 *w = c->pos;
	__u16 *dm = (__u16 *)p->dst_mac, *sm = (__u16 *)p->src_mac;
	dm[0] = w[0];
	dm[1] = w[1];
	dm[2] = w[2];
	sm[0] = w[3];
	sm[1] = w[4];
	sm[2] = w[5];
	c->pos = eth + 1;

	__be16 proto = eth->h_proto;
#pragma unroll
	for (int i = 0; i < FW_MAX_VLAN; i++) {
		if (!proto_is_vlan(proto))
			break;
		struct fw_vlan_hdr *vh = c->pos;
		if ((void *)(vh + 1) > c->end)
			return -FW_R_BAD_VLAN;
		if (i == 0) {
			p->vlan_id = bpf_ntohs(vh->tci) & 0x0fff;
			p->vlan_pcp = bpf_ntohs(vh->tci) >> 13;
			p->flags |= FW_PKT_VLAN;
		}
		*vids |= (__u32)(bpf_ntohs(vh->tci) & 0x0fff) << (16 * i);
		proto = vh->encap_proto;
		c->pos = vh + 1;
	}
	if (proto_is_vlan(proto))
		return -FW_R_VLAN_DEPTH;
	*eth_proto = proto;
	return FW_PARSE_OK;
}

#define FW_RX_VLAN_TAGGED 0x10000 /* fw_xdp_handoff.rx_vlan holds a tag */

/* fw_pkt_set_vlan makes the tag the NIC stripped (rx_vlan: FW_RX_VLAN_TAGGED
 * | its TCI from xdpfw_rxvlan, 0 for none) the packet's outermost: any tag
 * parse_eth found in the frame is an inner one. Branch-free, and right
 * after parse_eth: a branch after the parser's many exits doubled the
 * paths the verifier walks through everything after (384k to 863k
 * instructions; 431k branch-free there), here they cost nothing measurable. */
static __always_inline void fw_pkt_set_vlan(struct fw_pkt *p, __u32 rx_vlan)
{
	__u32 tagged = rx_vlan >> 16; /* 1 with FW_RX_VLAN_TAGGED, 0 without */
	__u16 keep = tagged - 1;      /* 0xffff without a tag */

	_Static_assert(FW_RX_VLAN_TAGGED == 0x10000 && FW_PKT_VLAN == 0x04, "fw_pkt_set_vlan's shifts");
	p->vlan_id = (p->vlan_id & keep) | (rx_vlan & 0x0fff & ~keep);
	p->vlan_pcp = (p->vlan_pcp & keep) | ((rx_vlan >> 13) & 7 & ~keep);
	p->flags |= tagged << 2;
}

/* IPv4: any IHL; non-first fragments carry no L4 header. */
static __always_inline int parse_ipv4(struct cursor *c, struct fw_pkt *p, __u8 *l4proto)
{
	struct iphdr *ip = c->pos;

	if ((void *)(ip + 1) > c->end)
		return -FW_R_BAD_IPV4;
	if (ip->version != 4 || ip->ihl < 5)
		return -FW_R_BAD_IPV4;
	__u32 hlen = ip->ihl * 4;          /* 20..60: bounded for the verifier */
	__u32 tot = bpf_ntohs(ip->tot_len);
	if (tot < hlen)
		return -FW_R_BAD_IPV4;
	/* The frame may be longer (Ethernet padding) but never shorter. */
	if ((__u32)(c->pos - c->start) + tot > c->len)
		return -FW_R_BAD_IPV4;

	p->family = 4;
	__builtin_memcpy(&p->src, &ip->saddr, 4);
	__builtin_memcpy(&p->dst, &ip->daddr, 4);
	p->proto = ip->protocol;
	p->ttl = ip->ttl;
	p->tos = ip->tos;
	p->l3_len = tot;
	__u32 fo = bpf_ntohs(ip->frag_off);
	if (fo & 0x1fff) { /* a later fragment: where it starts */
		p->flags |= FW_PKT_FRAG;
		p->frag = (fo & 0x1fff) * 8;
	} else {
		/* MF (0x2000): the first fragment, and what it carries.
		 * Without a branch: the verifier then has one path on, not a
		 * path per flag value through everything after. */
		_Static_assert(0x2000 >> 9 == FW_PKT_FRAG1, "MF shifts onto FW_PKT_FRAG1");
		p->flags |= (fo >> 9) & FW_PKT_FRAG1;
		p->frag = tot - hlen;
	}
	p->frag_id = ip->id;
	c->pos += hlen;
	c->l4len = tot - hlen;
	*l4proto = ip->protocol;
	return FW_PARSE_OK;
}

struct fw_ipv6_opt {
	__u8 nexthdr;
	__u8 hdrlen;
};

struct fw_ipv6_frag {
	__u8   nexthdr;
	__u8   reserved;
	__be16 frag_off; /* offset << 3 | flags */
	__be32 id;
};

/* IPv6 and its extension-header chain (at most FW_MAX_EXTHDR headers).
 * The protocol is the first header that is not an extension header, as
 * ip6tables' -p sees it. */
static __always_inline int parse_ipv6(struct cursor *c, struct fw_pkt *p, __u8 *l4proto)
{
	struct ipv6hdr *ip6 = c->pos;

	if ((void *)(ip6 + 1) > c->end)
		return -FW_R_BAD_IPV6;
	if (ip6->version != 6)
		return -FW_R_BAD_IPV6;
	__u32 plen = bpf_ntohs(ip6->payload_len);
	if ((__u32)((void *)(ip6 + 1) - c->start) + plen > c->len)
		return -FW_R_BAD_IPV6;

	p->family = 6;
	__builtin_memcpy(&p->src, &ip6->saddr, 16);
	__builtin_memcpy(&p->dst, &ip6->daddr, 16);
	p->l3_len = sizeof(*ip6) + plen; /* as -m length reads it (xt_length) */
	p->ttl = ip6->hop_limit;
	p->tos = ip6->priority << 4 | ip6->flow_lbl[0] >> 4; /* the traffic class */
	c->pos = ip6 + 1;
	c->l4len = plen;

	__u8 nh = ip6->nexthdr;
#pragma unroll
	for (int i = 0; i < FW_MAX_EXTHDR; i++) {
		switch (nh) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS:
		case IPPROTO_AH: {
			struct fw_ipv6_opt *opt = c->pos;
			if ((void *)(opt + 1) > c->end)
				return -FW_R_BAD_EXTHDR;
			/* hdrlen is a u8, so len <= 2048: a bounded pointer step */
			__u32 len = nh == IPPROTO_AH ? (opt->hdrlen + 2) * 4 : (opt->hdrlen + 1) * 8;
			if (c->pos + len > c->end || len > c->l4len)
				return -FW_R_BAD_EXTHDR;

			c->l4len -= len;
			nh = opt->nexthdr;
			c->pos += len;
			continue;
		}
		case IPPROTO_FRAGMENT: {
			struct fw_ipv6_frag *fh = c->pos;
			if ((void *)(fh + 1) > c->end || sizeof(*fh) > c->l4len)
				return -FW_R_BAD_EXTHDR;
			c->l4len -= sizeof(*fh);
			nh = fh->nexthdr;
			c->pos = fh + 1;
			__u16 fo = bpf_ntohs(fh->frag_off);
			p->frag_id = fh->id;
			if (fo & 0xfff8) {
				/* a later fragment: its header names the first header of
				 * the fragmentable part, which may be another extension
				 * header; lib/frag.h gives it its datagram's verdict */
				p->flags |= FW_PKT_FRAG;
				p->frag = fo & 0xfff8; /* offset << 3: bytes */
				goto done;
			}
			/* M: the first fragment, and what it carries; without it
			 * an atomic fragment (RFC 6946), a whole packet. Without a
			 * branch, as for IPv4. */
			_Static_assert(1 << 4 == FW_PKT_FRAG1, "M shifts onto FW_PKT_FRAG1");
			p->flags |= (fo & 1) << 4;
			p->frag = c->l4len;
			continue;
		}
		default:
			goto done;
		}
	}
	if (nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS ||
	    nh == IPPROTO_AH || nh == IPPROTO_FRAGMENT)
		return -FW_R_EXTHDR_DEPTH;
done:
	p->proto = nh;
	*l4proto = nh;
	return FW_PARSE_OK;
}

/* L4 headers the classifier reads. Other protocols have no L4 fields. */
/* need: header bytes that must be present both in the frame and within the
 * IP length (Ethernet padding is not a header). */
static __always_inline int l4_short(struct cursor *c, __u8 *l4, __u32 need)
{
	return (void *)(l4 + need) > c->end || need > c->l4len;
}

static __always_inline int parse_l4(struct cursor *c, struct fw_pkt *p, __u8 proto)
{
	__u8 *l4 = c->pos;

	if (p->flags & FW_PKT_FRAG)
		return FW_PARSE_OK;

	switch (proto) {
	case IPPROTO_TCP: {
		if (l4_short(c, l4, 20))
			return -FW_R_BAD_L4;
		__u32 doff = (l4[12] >> 4) * 4; /* <= 60: bounded */
		if (doff < 20 || l4_short(c, l4, doff))
			return -FW_R_BAD_L4;
		p->tcp_flags = l4[13];
		if (l4[13] & FW_TCP_RST)
			p->flags |= FW_PKT_ANSWER;
		break;
	}
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
		if (l4_short(c, l4, 8))
			return -FW_R_BAD_L4;
		break;
	case IPPROTO_SCTP:
		if (l4_short(c, l4, 12))
			return -FW_R_BAD_L4;
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (l4_short(c, l4, 8))
			return -FW_R_BAD_L4;
		p->icmp_type = l4[0];
		p->icmp_code = l4[1];
		p->flags |= FW_PKT_L4;
		/* destination unreachable in the family's own ICMP: type 3
		 * (ICMP over IPv4), 1 (ICMPv6 over IPv6) */
		if (p->family == 4 ? proto == IPPROTO_ICMP && l4[0] == 3 : proto == IPPROTO_ICMPV6 && l4[0] == 1)
			p->flags |= FW_PKT_ANSWER;
		return FW_PARSE_OK;
	default:
		return FW_PARSE_OK;
	}
	/* 16-bit loads: the L4 header is at an even offset (Ethernet 14, VLAN
	 * tags 4, IPv4 header a multiple of 4, IPv6's of 8). */
	p->sport = bpf_ntohs(*(__be16 *)l4);
	p->dport = bpf_ntohs(*(__be16 *)(l4 + 2));
	p->flags |= FW_PKT_L4;
	return FW_PARSE_OK;
}

/* fw_parse fills *p from the frame: headers are read from [data,
 * data_end), lengths checked against len, the frame's full length (XDP:
 * data_end - data; tc: skb->len, which includes paged data). Returns
 * FW_PARSE_OK, FW_PARSE_NOT_IP, or a negative enum fw_reason for a
 * malformed frame. rx_vlan is the tag the NIC stripped (fw_pkt_set_vlan;
 * 0: none). With pppoe (a constant: XDP only), a PPPoE session frame is
 * parsed into the IP packet it carries (lib/pppoe.h), p->ifindex (the
 * device the frame came by, set by the caller) becoming its ppp device. */
static __always_inline int fw_parse(void *data, void *data_end, __u32 len, __u32 rx_vlan, struct fw_pkt *p,
				    const int pppoe)
{
	struct cursor c = { .start = data, .pos = data, .end = data_end, .len = len, .l4len = 0 };
	__be16 eth_proto;
	__u8 l4proto = 0;
	__u32 vids = 0;
	int rc;

	rc = parse_eth(&c, p, &eth_proto, &vids);
	fw_pkt_set_vlan(p, rx_vlan); /* here, where the paths are still few */
	if (rc)
		return rc;
	if (pppoe && eth_proto == bpf_htons(ETH_P_PPP_SES)) {
		/* the session's tags, outermost first: the one the NIC
		 * stripped (rx_vlan) and then the frame's */
		__u16 inner = rx_vlan ? vids & 0x0fff : vids >> 16;
		rc = parse_pppoe(&c, p, p->vlan_id, inner, &eth_proto);
		if (rc)
			return rc;
	}
	p->l3_off = c.pos - data; /* <= 14 + 4 * FW_MAX_VLAN + FW_PPPOE_HLEN */
	/* Every link-layer shape (0 to 2 tags, PPPoE or not) on one path
	 * from here: the IP header's offset read back from *p (XDP: a map
	 * value) is a number the verifier does not know, where each shape's
	 * constant offset would have it check the IP parsers once per shape. */
	c.pos = data + *(volatile __u8 *)&p->l3_off;
	if (eth_proto == bpf_htons(ETH_P_IP))
		rc = parse_ipv4(&c, p, &l4proto);
	else if (eth_proto == bpf_htons(ETH_P_IPV6))
		rc = parse_ipv6(&c, p, &l4proto);
	else
		return FW_PARSE_NOT_IP;
	if (rc)
		return rc;
	/* The L4 offset from the lengths, not from c.pos - data: the pointer's
	 * exact offset differs on every path through the IPv6 extension headers,
	 * and a stored copy of it keeps the verifier from merging those paths
	 * (it doubled the program's verification cost). */
	p->l4_off = p->l3_off + (p->l3_len - c.l4len);
	return parse_l4(&c, p, l4proto);
}

#endif
