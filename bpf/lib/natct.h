/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A connection xdpfw's NAT translates and its conntrack entry (docs/nat.md,
 * "Expiry" and "A full conntrack table"). A binding lives as long as its
 * connection's entry: GC removes it with the entry, and a bound packet
 * that is its connection's first for conntrack (NEW, no entry before it)
 * shows a dead connection's binding (fw_nat_life_out, stale). So a
 * connection conntrack could not record (its table full of assured
 * connections, `--ct-full accept` passing the packet untracked) is not
 * translated: its binding would look stale at its next packet and go,
 * the answers dropped, the connection re-bound on every packet. Its first
 * packet is dropped (FW_NAT_C_NO_CT), never forwarded untranslated. */
#ifndef XDPFW_NATCT_H
#define XDPFW_NATCT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "ct.h"

/* fw_nat_ct_entry is the conntrack entry of p's connection (the filter's
 * tuple: the destination translated, the source not yet), committed
 * before the finish stage entered the nat stage; NULL when conntrack has
 * none. icmp_id: an ICMP echo's id (network order), which fw_ct_lookup
 * keys on as both ports. */
static __always_inline struct fw_ct_entry *fw_nat_ct_entry(const struct fw_pkt *p, __be16 icmp_id)
{
	struct fw_ct_key key;
	__u16 sport = 0, dport = 0;
	__u8 from_a;

	switch (p->proto) { /* the ports fw_ct_lookup keys on */
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
	case IPPROTO_SCTP:
		sport = p->sport, dport = p->dport;
		break;
	case IPPROTO_ICMP:
		sport = dport = bpf_ntohs(icmp_id);
		break;
	}
	fw_ct_key_of(&key, p->family, p->proto, p->src, p->dst, sport, dport, &from_a);
	return bpf_map_lookup_elem(&fw_ct, &key);
}

/* fw_nat_unrecorded: does conntrack lack the entry of p's connection (1)?
 * 0 when it has it, and for an ICMP query other than an echo, whose id
 * (the key's ports) p does not hold. */
static __always_inline int fw_nat_unrecorded(const struct fw_pkt *p, __be16 icmp_id)
{
	if (p->proto == IPPROTO_ICMP && p->icmp_type != 8 && p->icmp_type != 0)
		return 0;
	return !fw_nat_ct_entry(p, icmp_id);
}

#endif
