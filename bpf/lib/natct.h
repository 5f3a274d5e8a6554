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
 * packet is dropped (FW_NAT_C_NO_CT), never forwarded untranslated.
 *
 * --ctstate SNAT and DNAT under `--nat xdpfw` (docs/nat.md): what xdpfw's
 * NAT changed of a connection, in its conntrack entry (FW_CTF_XSNAT,
 * FW_CTF_XDNAT), which fw_ct_info gives every later packet of it, both
 * directions, as FW_CTI_SRC_NAT and FW_CTI_DST_NAT: the bits the kernel's
 * conntrack has (IPS_SRC_NAT, IPS_DST_NAT) and lib/kct.h reads under
 * `--nat kernel`, so that one match (FW_M_CTNAT) serves both. As the
 * kernel's nf_nat_setup_info, only a translation that changes the tuple
 * counts (a DNAT to the address and port the packet has sets nothing).
 * A connection's first packet has its destination translated before the
 * filter (PREROUTING, nat OUTPUT): it carries FW_CTI_DST_NAT there
 * (fw_nat_first_ctinfo);
 * its source is translated after the filter (POSTROUTING): no
 * FW_CTI_SRC_NAT yet, as in the kernel. */
#ifndef XDPFW_NATCT_H
#define XDPFW_NATCT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../types.h"
#include "../maps.h"
#include "ct.h"

/* fw_nat_ct_key fills key with conntrack's key of p's connection (and
 * from_a, as fw_ct_key_of). icmp_id: an ICMP echo's id (network order),
 * which fw_ct_lookup keys on as both ports. */
static __always_inline void fw_nat_ct_key(struct fw_ct_key *key, const struct fw_pkt *p, __be16 icmp_id, __u8 *from_a)
{
	__u16 sport = 0, dport = 0;

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
	fw_ct_key_of(key, p->family, p->proto, p->src, p->dst, sport, dport, from_a);
}

/* fw_nat_ct_entry is the conntrack entry of p's connection (the filter's
 * tuple: the destination translated, the source not yet), committed
 * before the finish stage entered the nat stage; NULL when conntrack has
 * none. */
static __always_inline struct fw_ct_entry *fw_nat_ct_entry(const struct fw_pkt *p, __be16 icmp_id)
{
	struct fw_ct_key key;
	__u8 from_a;

	fw_nat_ct_key(&key, p, icmp_id, &from_a);
	return bpf_map_lookup_elem(&fw_ct, &key);
}

/* ---- One lookup for a source-translated connection's packets (docs/nat.md
 * "The translation kept in the conntrack entry"). A connection whose source
 * only xdpfw's NAT translates (SNAT, MASQUERADE: fw_nat_changes gives
 * FW_CTF_XSNAT alone) has its conntrack entry keyed by the tuple its
 * original direction arrives with, and its binding in that direction
 * changes the source only: the entry keeps that source (nat_saddr,
 * nat_sport, written with the mark below), and such a packet is
 * translated from its entry, which conntrack needs anyway, without the
 * binding lookup (fw_nat_ct_kept). The copy never outlives the binding:
 * the entry is written once by the nat stage that made the binding, a
 * replaced entry (a new connection of the tuple, an expired one) starts
 * without it, and GC and `conntrack flush` remove the entry before its
 * bindings (internal/datapath natUnbind). It never contradicts it: the
 * binding of that tuple is only replaced by the nat stage, which the
 * connection's original direction no longer reaches, or by a new
 * connection of the tuple, which has a new entry. The bindings' LRU may
 * evict the original direction's binding, no longer read for its
 * packets: the connection then goes on with its entry's copy (as the
 * kernel's NAT, whose translation is its conntrack entry), where before
 * the copy it was dropped (lost); its answers keep their own binding,
 * which also keeps its port from being claimed again. ---- */

/* fw_nat_ct_kept: is the IPv4 packet p (tuple k, as it arrived; not a
 * fragment, not an ICMP error) in the original direction of a live
 * connection whose entry keeps its source translation (1: *out is the
 * binding that translation is, k's destination and the kept source)?
 * Whatever it finds, ct holds the lookup for fw_ct_lookup to reuse
 * (ct->e, at ct->now: the entry of p's conntrack key), where p's key is
 * the one conntrack computes (TCP, UDP, an ICMP echo); else ct->now 0. */
static __always_inline int fw_nat_ct_kept(const struct fw_pkt *p, const struct fw_nat_tuple *k, struct fw_ct *ct,
					  struct fw_nat_rw *out)
{
	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP &&
	    (p->proto != IPPROTO_ICMP || (p->icmp_type != 8 && p->icmp_type != 0)))
		return 0;
	/* the key in ct's (fw_ct_lookup writes it again): no second one on the stack */
	fw_nat_ct_key(&ct->key, p, k->sport, &ct->from_a);
	struct fw_ct_entry *e = bpf_map_lookup_elem(&fw_ct, &ct->key);
	__u64 now = fw_ct_now();

	ct->e = e;
	ct->now = now;
	if (!e || e->expires <= now || !e->nat_saddr || ct->from_a != !!(e->flags & FW_CTF_ORIG_A))
		return 0;
	*out = (struct fw_nat_rw){.saddr = e->nat_saddr, .daddr = k->daddr, .sport = e->nat_sport, .dport = k->dport};
	return 1;
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

/* fw_nat_changes: FW_CTF_XDNAT where out changes k's destination (address
 * or port), FW_CTF_XSNAT where it changes its source. */
static __always_inline __u8 fw_nat_changes(const struct fw_nat_tuple *k, const struct fw_nat_rw *out)
{
	return (k->daddr != out->daddr || k->dport != out->dport ? FW_CTF_XDNAT : 0) |
	       (k->saddr != out->saddr || k->sport != out->sport ? FW_CTF_XSNAT : 0);
}

/* fw_nat_first_ctinfo: the first packet p of a connection whose
 * destination a nat stage translated before the filter (state
 * FW_NAT_S_PENDING; orig the tuple it came with, out the one it has now)
 * is DNAT to the filter, as the kernel's IPS_DST_NAT is set in
 * PREROUTING and nat OUTPUT, both before the filter. */
static __always_inline void fw_nat_first_ctinfo(__u32 state, struct fw_pkt *p, const struct fw_nat_tuple *orig,
						const struct fw_nat_rw *out)
{
	if (state == FW_NAT_S_PENDING && p->ctstate == FW_CT_NEW && (fw_nat_changes(orig, out) & FW_CTF_XDNAT))
		p->ctinfo |= FW_CTI_DST_NAT;
}

/* fw_nat_ctinfo: fw_nat_first_ctinfo for the packet in the slot h (the
 * nat stage's PREROUTING, lib/natdst.h). */
static __always_inline void fw_nat_ctinfo(struct fw_xdp_handoff *h)
{
	fw_nat_first_ctinfo(h->nat_state, &h->pkt, &h->nat_orig, &h->nat);
}

/* fw_nat_ct_mark records in the conntrack entry of p's connection (the
 * filter's tuple: the destination translated, the source not yet),
 * committed before the finish stage entered the nat stage, what the
 * binding the nat stage just made for it (k: the tuple it arrived with;
 * an echo's id, as the filter saw it, as both ports) changes
 * (fw_nat_changes; --ctstate SNAT/DNAT), and a source-only translation
 * itself (fw_nat_ct_kept). The DNAT mark also makes an answer that finds
 * no binding dropped (fw_nat_stage), never forwarded untranslated. A plain
 * write: the entry is this first packet's, just made (or, for a
 * connection re-bound at a later NEW packet, the binding just replaced). */
static __always_inline void fw_nat_ct_mark(const struct fw_pkt *p, const struct fw_nat_tuple *k)
{
	const struct fw_nat_rw *out = bpf_map_lookup_elem(&fw_nat_binds, k);
	__u8 flags = out ? fw_nat_changes(k, out) : 0;
	struct fw_ct_entry *e = flags ? fw_nat_ct_entry(p, k->sport) : NULL;

	if (!e)
		return;
	e->flags |= flags;
	/* the translation kept for fw_nat_ct_kept: a source-only one's */
	e->nat_saddr = flags == FW_CTF_XSNAT ? out->saddr : 0;
	e->nat_sport = flags == FW_CTF_XSNAT ? out->sport : 0;
}

#endif
