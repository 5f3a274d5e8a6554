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
 * nothing when it cannot: a truncated header, or a fragment (the first's
 * ports would change but not the later ones', which carry none: the
 * caller leaves fragmented datagrams to the kernel). Other protocols than
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
	if (ip->frag_off & bpf_htons(0x3fff)) /* MF or an offset */
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

#endif
