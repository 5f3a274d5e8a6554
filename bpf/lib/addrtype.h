/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* -m addrtype: what the kernel's xt_addrtype decides of an address, from
 * this host's local routing table (fw_addrtypes, kept by the control plane
 * from netlink; docs/compat.md "Interfaces and address types").
 *
 * IPv4 (inet_dev_addr_type): 0.0.0.0/8 and 255.255.255.255 are BROADCAST,
 * 224.0.0.0/4 MULTICAST; else the type of the local table's longest
 * matching route when there is one (and, limited to a device, when that
 * route's device is that device), else UNICAST. The rule matches when
 * that type is in its mask.
 *
 * IPv6 (match_type6): every type in the mask is a condition. MULTICAST:
 * ff00::/8; UNICAST: neither multicast, nor ::, nor IPv4-mapped; UNSPEC:
 * ::. Then LOCAL or ANYCAST, when the mask names one: the local table's
 * route for the address is a local (limited to a device: one on that
 * device) or an anycast route. UNREACHABLE needs a route lookup the
 * classifier does not make: the compiler refuses it in IPv6 rules. */
#ifndef XDPFW_ADDRTYPE_H
#define XDPFW_ADDRTYPE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../types.h"
#include "../maps.h"

/* fw_local_route: the local table's longest route for addr (of packet
 * p's family), or NULL. The key is built in fw_addrtype_key, not on the
 * stack (see there). */
static __always_inline const struct fw_addrtype *fw_local_route(const struct fw_pkt *p, const __u64 *addr)
{
	__u32 slot = p->chain == FW_CHAIN_OUTPUT;
	struct fw_set_key *k = bpf_map_lookup_elem(&fw_addrtype_key, &slot);

	if (!k)
		return NULL;
	k->prefixlen = 32 + (p->family == 4 ? 32 : 128);
	k->set_id = bpf_htonl(p->family);
	__builtin_memcpy(k->addr, addr, 16);
	return bpf_map_lookup_elem(&fw_addrtypes, k);
}

/* fw_type_dev: the device entry e limits its types to, for packet p. */
static __always_inline __u32 fw_type_dev(const struct fw_entry *e, const struct fw_pkt *p)
{
	return e->type_dev == FW_TD_IN ? p->ifindex : e->type_dev == FW_TD_OUT ? p->oifindex : 0;
}

/* fw_addrtype_ok: does the source (dst 0) or destination address of p
 * have a type of entry e's mask for it, limited to e's device? Few values
 * live across the map lookup (e, p, dst; the rest is read again from e):
 * the classifier's call chain has no stack left for spills (the
 * verifier's 512 bytes; docs/classifier.md). */
static __always_inline int fw_addrtype_ok(const struct fw_entry *e, const struct fw_pkt *p, int dst)
{
	const __u64 *addr = dst ? p->dst : p->src;
	const struct fw_addrtype *r;

	if (p->family == 4) {
		__u32 a = bpf_ntohl((__u32)addr[0]), t = FW_RTN_UNICAST;

		if ((a >> 24) == 0 || a == 0xffffffff) {
			t = FW_RTN_BROADCAST;
		} else if ((a >> 28) == 0xe) {
			t = FW_RTN_MULTICAST;
		} else if ((r = fw_local_route(p, addr))) {
			__u32 dev = fw_type_dev(e, p);
			if (!dev || r->ifindex == dev)
				t = r->type;
		}
		return ((dst ? e->dst_types : e->src_types) >> (t & 15)) & 1;
	}
	/* each condition read from memory: no value stays live between them */
	const __u32 *w = (const __u32 *)addr;
	__u32 mask = dst ? e->dst_types : e->src_types;

	if ((mask & (1u << FW_RTN_MULTICAST)) && (w[0] & bpf_htonl(0xff000000)) != bpf_htonl(0xff000000))
		return 0;
	if (mask & (1u << FW_RTN_UNICAST)) {
		if ((w[0] & bpf_htonl(0xff000000)) == bpf_htonl(0xff000000) || (addr[0] | addr[1]) == 0 ||
		    (addr[0] == 0 && w[2] == bpf_htonl(0xffff)))
			return 0;
	}
	if ((mask & (1u << FW_RTN_UNSPEC)) && (addr[0] | addr[1]) != 0)
		return 0;
	if (!(mask & ((1u << FW_RTN_LOCAL) | (1u << FW_RTN_ANYCAST))))
		return 1;
	__u32 ret = 0;
	if ((r = fw_local_route(p, addr))) {
		__u32 dev = fw_type_dev(e, p);
		if (r->type == FW_RTN_LOCAL && (!dev || r->ifindex == dev))
			ret = 1u << FW_RTN_LOCAL;
		else if (r->type == FW_RTN_ANYCAST)
			ret = 1u << FW_RTN_ANYCAST;
	}
	return ((dst ? e->dst_types : e->src_types) & ret) != 0;
}

#endif
