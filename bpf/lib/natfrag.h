/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Fragments of translated connections (`--nat xdpfw`, docs/nat.md
 * "Fragments"). The kernel's NAT reassembles a datagram in conntrack,
 * translates it whole and fragments it again. Here each fragment is
 * translated where it passes, as the filter judges it (lib/frag.h):
 * - the first fragment carries the ports: it finds its connection's
 *   binding as any packet does and is rewritten whole (the L4 checksum,
 *   which covers the whole datagram, updated incrementally: only the
 *   addresses of its pseudo-header and the ports change); its translated
 *   addresses are recorded in fw_nat_frags under the datagram's identity
 *   as it arrived;
 * - a later fragment (no L4 header) gets the recorded addresses, its IPv4
 *   checksum updated, before the chain is picked (so its chain, FIB
 *   answer and datagram verdict are its first fragment's).
 * A later fragment whose datagram has no record where one must be (a
 * forwarded one: every forwarded connection has a binding with `--nat
 * xdpfw`, and a first fragment without one is dropped; a sent one: tc
 * egress records every first fragment) is dropped, counted: never sent
 * with an untranslated address. */
#ifndef XDPFW_NATFRAG_H
#define XDPFW_NATFRAG_H

#include <linux/bpf.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "nat.h"

/* fw_nat_frag_first records, for the later fragments of the datagram
 * whose first fragment is at l3 (frame ends at end) and arrived with
 * tuple k (its addresses before any rewrite), the addresses it leaves
 * with (saddr, daddr). */
static __always_inline void fw_nat_frag_first(void *l3, void *end, const struct fw_nat_tuple *k, __be32 saddr,
					      __be32 daddr)
{
	struct iphdr *ip = l3;

	if ((void *)(ip + 1) > end) /* only the live and nat instances translate (fw_nat_mode) */
		return;
	struct fw_nat_frag_key fk = {.saddr = k->saddr, .daddr = k->daddr, .id = ip->id, .proto = k->proto};
	struct fw_nat_rw v = {.saddr = saddr, .daddr = daddr};

	bpf_map_update_elem(&fw_nat_frags, &fk, &v, BPF_ANY);
}

/* fw_nat_frag_bound: the packet p (frame data..end), of a connection
 * bound (found bound, or just bound by the nat stage) with arriving tuple
 * k and leaving addresses saddr, daddr: a first fragment records them for
 * its datagram's later fragments. */
static __always_inline void fw_nat_frag_bound(void *data, void *end, const struct fw_pkt *p, const struct fw_nat_tuple *k,
					      __be32 saddr, __be32 daddr)
{
	if ((p->flags & FW_PKT_FRAG1) && p->l3_off <= 64)
		fw_nat_frag_first(data + p->l3_off, end, k, saddr, daddr);
}

/* fw_nat_frag_of: the recorded translation of the datagram of the later
 * fragment ip (frame ends at end), or NULL. */
static __always_inline const struct fw_nat_rw *fw_nat_frag_of(const struct iphdr *ip, void *end)
{
	if ((void *)(ip + 1) > end)
		return 0;
	struct fw_nat_frag_key fk = {.saddr = ip->saddr, .daddr = ip->daddr, .id = ip->id, .proto = ip->protocol};

	return bpf_map_lookup_elem(&fw_nat_frags, &fk);
}

/* fw_nat_frag_in: the later IPv4 fragment in h (FW_PKT_FRAG) gets its
 * datagram's recorded addresses, before the chain is picked: 1, h->pkt
 * as the filter sees it now, FW_NAT_S_DONE (nothing more to do for it);
 * 0: none recorded, nothing done (a forwarded one is dropped after its
 * verdict: fw_nat_frag_check). */
static __always_inline int fw_nat_frag_in(void *data, void *end, struct fw_xdp_handoff *h)
{
	struct fw_pkt *p = &h->pkt;
	struct iphdr *ip = data + p->l3_off;

	if (p->l3_off > 64)
		return 0;
	const struct fw_nat_rw *rw = fw_nat_frag_of(ip, end);
	if (!rw || (void *)(ip + 1) > end)
		return 0;
	__be32 saddr = rw->saddr, daddr = rw->daddr;
	ip->check = fw_csum_apply(ip->check, fw_csum_delta32(fw_csum_delta32(0, ip->saddr, saddr), ip->daddr, daddr));
	ip->saddr = saddr;
	ip->daddr = daddr;
	__builtin_memcpy(&p->dst, &daddr, 4);
	h->nat_state = FW_NAT_S_DONE;
	return 1;
}

#endif
