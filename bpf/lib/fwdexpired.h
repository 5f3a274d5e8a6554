/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A forwarded packet whose TTL (hop limit) runs out at this router. The
 * kernel's ip_forward / ip6_forward drop it, answering ICMP time
 * exceeded, before the FORWARD hook: iptables' FORWARD never sees it (no
 * rule counts it, no policy drops it: a router whose FORWARD drops
 * everything still answers traceroute), and the connection conntrack made
 * for it in PREROUTING is never confirmed (only a packet leaving
 * POSTROUTING confirms one): the next packet is NEW again, `conntrack -L`
 * lists nothing. The time exceeded is RELATED to that unconfirmed
 * connection all the same (icmp_send attaches it), in OUTPUT.
 *
 * So xdpfw hands such a packet to the kernel unjudged (XDP_PASS, reason
 * ttl-expired; fw_fwd_stats' ttl), creates no connection for it, and
 * records its tuple in fw_ct_dying, where the conntrack of the tc egress
 * program finds the quote of the kernel's error (fw_ct_dying_take):
 * RELATED, once. A packet of a known connection advances it, as the
 * kernel's conntrack does in PREROUTING. Passing it opens nothing: the
 * kernel forwards no packet with a TTL <= 1 (hop limit <= 1).
 * Not with --nat xdpfw, whose nat stage handles such packets (lib/natdying.h),
 * nor for a fragment (the kernel reassembles the datagram first; a later
 * fragment takes its datagram's verdict, lib/frag.h).
 *
 * The same holds for a routed packet in a broadcast or multicast frame
 * (skb->pkt_type not PACKET_HOST: ip_forward and ip6_forward drop it
 * before the FORWARD hook, silently): passed unjudged (reason
 * not-unicast), no connection created, nothing recorded (no error is sent),
 * never forwarded by xdpfw's fast path. docs/forward.md. */
#ifndef XDPFW_FWDEXPIRED_H
#define XDPFW_FWDEXPIRED_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "ct.h"
#include "fwd.h"
#include "stats.h"
#include "trace.h"
#include "latency.h"
#include "classify.h"

/* fw_fwd_expires: does the kernel drop p, which the FIB forwards, before
 * FORWARD: for its TTL (hop limit), or as a frame not addressed to this
 * host's MAC alone? p->ttl is FORWARD's, less one already
 * (fw_xdp_ingress): 0 for what arrived with 1 or 0. */
static __always_inline int fw_fwd_expires(const struct fw_pkt *p)
{
	return !fw_nat_mode && p->chain == FW_CHAIN_FORWARD && (p->ttl == 0 || fw_pkttype(p) != FW_PT_HOST) &&
	       !(p->flags & (FW_PKT_FRAG | FW_PKT_FRAG1));
}

/* fw_fwd_expired hands p (h's packet, fw_fwd_expires), whose connection
 * fw_ct_lookup planned in ct, to the kernel: XDP_PASS. */
static __always_inline int fw_fwd_expired(struct xdp_md *ctx, struct fw_xdp_handoff *h, struct fw_ct *ct, __u64 bytes)
{
	const struct fw_pkt *p = &h->pkt;
	int ttl = p->ttl == 0 && fw_pkttype(p) == FW_PT_HOST; /* else the frame's type: no error sent */
	__u32 reason = ttl ? FW_R_FWD_EXPIRED : FW_R_FWD_NOT_UNICAST;

	if (ct->next != FW_CTS_NONE && ct->create) { /* next: the rest is written only by a lookup */
		if (ttl)
			fw_ct_dying_record(&ct->key, ct->from_a);
	} else /* a known connection: advanced (nothing to create, so nothing refused) */
		fw_ct_commit(ct, p, bytes, 0);
	if (ttl)
		fw_fwd_count(FW_FWD_TTL, bytes);
	fw_count_reason(reason, XDP_PASS, bytes, fw_now());
	fw_trace(ctx, 0, 0xff, reason, p);
	fw_lat_end(&h->lat, p->chain, FW_LAT_PASS);
	return XDP_PASS;
}

#endif
