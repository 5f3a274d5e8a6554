/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Classification: the first matching entry of the active generation.
 *
 * This is the simple classifier of the core issue: a walk over the entries
 * the control plane compiled (internal/compile), in iptables order, one
 * chain after another; the last entries of each chain are its policies, so
 * every IP packet matches something. Cost is linear in the entry count; the
 * rule-count-independent classifier replaces fw_classify() and
 * internal/compile and nothing else. */
#ifndef XDPFW_CLASSIFY_H
#define XDPFW_CLASSIFY_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"

struct fw_decision {
	__u32 rule_id;
	__u8  action; /* enum fw_action */
	__u8  reason; /* enum fw_reason */
};

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	__u8 diff = 0;

#pragma unroll
	for (int i = 0; i < 6; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

#define FW_TEST(bit, cond)                                             \
	if ((m & (bit)) && (!!(cond)) == !!(inv & (bit)))              \
		return 0

/* One entry against one packet. A global (non-inlined) function: the
 * verifier checks it once instead of once per loop iteration, which is what
 * lets fw_classify() walk thousands of entries. */
__noinline int fw_entry_match(const struct fw_entry *e, const struct fw_pkt *p)
{
	if (!e || !p) /* the verifier requires the check on global-function pointers */
		return 0;

	__u32 m = e->match, inv = e->invert;

	if (e->chain != p->chain)
		return 0;
	if ((m & FW_M_L4) && !(p->flags & FW_PKT_L4))
		return 0;
	if ((m & FW_M_FAMILY) && e->family != p->family)
		return 0;
	FW_TEST(FW_M_PROTO, e->proto == p->proto);
	FW_TEST(FW_M_SRC, (p->src[0] & e->src_mask[0]) == e->src[0] &&
			  (p->src[1] & e->src_mask[1]) == e->src[1]);
	FW_TEST(FW_M_DST, (p->dst[0] & e->dst_mask[0]) == e->dst[0] &&
			  (p->dst[1] & e->dst_mask[1]) == e->dst[1]);
	FW_TEST(FW_M_SPORT, p->sport >= e->sport_lo && p->sport <= e->sport_hi);
	FW_TEST(FW_M_DPORT, p->dport >= e->dport_lo && p->dport <= e->dport_hi);
	FW_TEST(FW_M_IFINDEX, p->ifindex == e->ifindex);
	FW_TEST(FW_M_MACSRC, mac_eq(p->src_mac, e->src_mac));
	FW_TEST(FW_M_MACDST, mac_eq(p->dst_mac, e->dst_mac));
	FW_TEST(FW_M_TCPFLAGS, (p->tcp_flags & e->tcp_mask) == e->tcp_cmp);
	FW_TEST(FW_M_ICMPTYPE, p->icmp_type == e->icmp_type &&
			       (!(m & FW_M_ICMPCODE) || p->icmp_code == e->icmp_code));
	FW_TEST(FW_M_VLAN, (p->flags & FW_PKT_VLAN) && p->vlan_id == e->vlan_id);
	FW_TEST(FW_M_FRAG, p->flags & FW_PKT_FRAG);
	return 1;
}

/* fw_classify returns 0 and fills *d, or -1 when no rule set is installed. */
static __always_inline int fw_classify(const struct fw_pkt *p, struct fw_decision *d)
{
	__u32 zero = 0;
	void *entries = bpf_map_lookup_elem(&fw_ruleset, &zero);

	if (!entries)
		return -1;
	for (__u32 i = 0; i < FW_MAX_ENTRIES; i++) {
		__u32 key = i;
		const struct fw_entry *e = bpf_map_lookup_elem(entries, &key);
		if (!e) /* past the end of this generation */
			break;
		if (fw_entry_match(e, p)) {
			d->rule_id = e->rule_id;
			d->action = e->action;
			d->reason = e->reason;
			return 0;
		}
	}
	return -1; /* a generation always ends in policies; never reached */
}

#endif
