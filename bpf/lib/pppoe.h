/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* PPPoE (RFC 2516) session frames: the IP packets a ppp device sends and
 * receives over an Ethernet device (a DSL or fibre WAN; OpenWrt's
 * `pppoe-wan`). The kernel's pppoe_rcv takes a session frame (EtherType
 * 0x8864) for the session its device, session id and source MAC name, cuts
 * it to the PPPoE length, and ppp_input hands its payload to the ppp
 * device: iptables sees the IP packet there, `-i ppp0`, not the Ethernet
 * device. xdpfw parses such a frame (XDP only) into that IP packet, with
 * the ppp device as the packet's ingress device (fw_pppoe_rx, which the
 * control plane writes from /proc/net/pppoe), and the forwarding fast path
 * (lib/fwd.h) takes PPPoE off (decapsulation) and puts it on
 * (fw_pppoe_tx: a packet the FIB routes to a ppp device) as pppoe_xmit
 * does. Discovery frames (0x8863) and PPP's own protocols (LCP, IPCP,
 * authentication, compressed data) are no IP: the kernel's, untouched.
 * docs/pppoe.md. */
#ifndef XDPFW_PPPOE_H
#define XDPFW_PPPOE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../types.h"
#include "../maps.h"

#define FW_PPP_IP   0x0021 /* PPP protocol: IPv4 */
#define FW_PPP_IPV6 0x0057 /* PPP protocol: IPv6 */

/* The session header and the PPP protocol field after it. */
struct fw_pppoe_hdr {
	__u8   ver_type; /* 0x11 */
	__u8   code;     /* 0 in session frames */
	__be16 sid;
	__be16 len;      /* bytes after this header: the PPP frame, protocol included */
	__be16 proto;    /* PPP protocol */
};

#define FW_PPPOE_HLEN ((__u32)sizeof(struct fw_pppoe_hdr)) /* 8 */

/* parse_pppoe parses a session frame's header at the cursor (after the
 * Ethernet header and vid0, vid1: the VIDs of its tags, outermost first,
 * 0 for none). An IPv4 or IPv6 payload of a known session: the cursor
 * past the header, c->len the end of the PPPoE payload (the IP packet may
 * not reach past it; what follows is padding), *proto its EtherType,
 * p->ifindex the session's ppp device. Else FW_PARSE_NOT_IP (another PPP
 * protocol: the kernel's), -FW_R_BAD_PPPOE (pppoe_rcv drops a frame
 * shorter than its length) or -FW_R_PPPOE_SESSION (no session: pppoe_rcv
 * drops it too, if xdpfw's copy of the sessions is current). pppoe_rcv
 * checks neither version, type nor code, and neither does this. */
static __always_inline int parse_pppoe(struct cursor *c, struct fw_pkt *p, __u16 vid0, __u16 vid1, __be16 *proto)
{
	struct fw_pppoe_hdr *h = c->pos;

	if ((void *)(h + 1) > c->end)
		return -FW_R_BAD_PPPOE;
	__u32 len = bpf_ntohs(h->len);
	__u32 end = (__u32)((void *)&h->proto - c->start) + len;
	if (len < 2 || end > c->len)
		return -FW_R_BAD_PPPOE;
	if (h->proto == bpf_htons(FW_PPP_IP))
		*proto = bpf_htons(ETH_P_IP);
	else if (h->proto == bpf_htons(FW_PPP_IPV6))
		*proto = bpf_htons(ETH_P_IPV6);
	else
		return FW_PARSE_NOT_IP;

	struct fw_pppoe_key k = { .ifindex = p->ifindex, .vlan = { vid0, vid1 }, .sid = h->sid };
	__builtin_memcpy(k.peer, p->src_mac, 6);
	__u32 *ppp = bpf_map_lookup_elem(&fw_pppoe_rx, &k);
	if (!ppp)
		return -FW_R_PPPOE_SESSION;
	p->ifindex = *ppp;
	p->flags |= FW_PKT_PPPOE;
	c->len = end;
	c->pos = h + 1;
	return FW_PARSE_OK;
}

/* fw_pppoe_tx_of: how to send on the ppp device oif, when it is one whose
 * PPPoE session xdpfw knows; NULL otherwise. */
static __always_inline const struct fw_pppoe_out *fw_pppoe_tx_of(__u32 oif)
{
	return oif ? bpf_map_lookup_elem(&fw_pppoe_tx, &oif) : NULL;
}

/* fw_pppoe_put writes the session header of a packet of l3_len IP bytes
 * (family 4 or 6) at h, as pppoe_xmit and ppp_start_xmit do. */
static __always_inline void fw_pppoe_put(struct fw_pppoe_hdr *h, const struct fw_pppoe_out *tx, __u32 l3_len,
					 __u8 family)
{
	h->ver_type = 0x11;
	h->code = 0;
	h->sid = tx->sid;
	h->len = bpf_htons(l3_len + 2);
	h->proto = family == 4 ? bpf_htons(FW_PPP_IP) : bpf_htons(FW_PPP_IPV6);
}

#endif
