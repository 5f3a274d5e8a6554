/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The device the kernel receives a packet on: for a VLAN-tagged frame
 * (not a PPPoE session's, whose ppp device p->ifindex is already), the
 * VLAN device of its outermost tag over the device it came in by, which
 * vlan_do_receive makes skb->dev before IP sees the packet; what the
 * kernel's nat PREROUTING reads there (REDIRECT's address:
 * nf_nat_redirect_ipv4 takes the in-device's first primary address).
 * fw_vlan_devs maps (device, VID) to it. A QinQ frame's is the device of
 * its outer tag here (the kernel's is the inner tag's, over that one);
 * docs/nat.md. */
#ifndef XDPFW_VLANDEV_H
#define XDPFW_VLANDEV_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"

/* fw_in_dev is the ifindex of the device the kernel receives p on, or 0
 * for a tag no VLAN device takes (the kernel drops the frame). */
static __always_inline __u32 fw_in_dev(const struct fw_pkt *p)
{
	if ((p->flags & (FW_PKT_VLAN | FW_PKT_PPPOE)) != FW_PKT_VLAN)
		return p->ifindex;
	__u64 k = (__u64)p->vlan_id << 32 | p->ifindex;
	const __u32 *dev = bpf_map_lookup_elem(&fw_vlan_devs, &k);
	return dev ? *dev : 0;
}

#endif
