/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The connections conntrack never confirms: a forwarded packet whose TTL
 * runs out here (lib/fwdexpired.h) creates none, its tuple is recorded in
 * fw_ct_dying instead, and the time exceeded the kernel sends about it
 * is RELATED to it, as the kernel's error is to its unconfirmed
 * connection. */
#ifndef XDPFW_CTDYING_H
#define XDPFW_CTDYING_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"

/* fw_ct_dying_take: is k (from_a: the quoted packet's direction) the
 * connection of a packet whose TTL ran out here, quoted by the error p
 * this host sends (OUTPUT)? Then p is RELATED to it, in its reply
 * direction, unconfirmed; the record is taken (a trace leaves it). */
static __always_inline int fw_ct_dying_take(const struct fw_ct_key *k, __u8 from_a, struct fw_pkt *p)
{
	if (p->chain != FW_CHAIN_OUTPUT)
		return 0;
	const __u8 *a = bpf_map_lookup_elem(&fw_ct_dying, k);
	if (!a)
		return 0;
	p->ctinfo = *a == from_a ? FW_CTI_REPLY : 0;
	if (fw_live_writes())
		bpf_map_delete_elem(&fw_ct_dying, k);
	return 1;
}

/* fw_ct_dying_record records the connection a packet whose TTL runs out
 * would create (k, from_a), instead of creating it. */
static __always_inline void fw_ct_dying_record(const struct fw_ct_key *k, __u8 from_a)
{
	if (fw_live_writes())
		bpf_map_update_elem(&fw_ct_dying, k, &from_a, BPF_ANY);
}

#endif
