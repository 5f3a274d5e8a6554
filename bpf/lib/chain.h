/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* INPUT or FORWARD: is the packet for this host? Asked of the kernel, so
 * the answer follows every address, route and sysctl change with no
 * daemon.
 *
 * A host that does not forward on the ingress device (the forwarding
 * sysctl of its IPv4 or IPv6 configuration is 0, as on every host that is
 * not a router) takes everything in INPUT. That is the first thing
 * bpf_fib_lookup checks too (BPF_FIB_LKUP_RET_FWD_DISABLED), but the
 * helper call, its device lookup by index and the 64-byte request it needs
 * cost about a quarter of the program's time per packet; the flag is read
 * here directly from the ingress device (bpf_cast_to_kern_ctx, Linux 6.3+,
 * and CO-RE: the fields are found by name in the running kernel's BTF).
 * On a forwarding device the kernel FIB decides: local (RTN_LOCAL),
 * broadcast and multicast destinations come back NOT_FWDED, the rest is
 * routed. Where the kfunc or a field is missing, the FIB decides alone. */
#ifndef XDPFW_CHAIN_H
#define XDPFW_CHAIN_H

#include <linux/bpf.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "../types.h"
#include "../maps.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* The kernel structures read, reduced to the fields used; CO-RE
 * relocates each access to the running kernel's layout. */
struct ipv4_devconf {
	int data[IPV4_DEVCONF_FORWARDING]; /* data[IPV4_DEVCONF_X - 1]: uapi linux/ip.h */
} __attribute__((preserve_access_index));
struct in_device {
	struct ipv4_devconf cnf;
} __attribute__((preserve_access_index));
struct ipv6_devconf {
	__s32 forwarding;
} __attribute__((preserve_access_index));
struct inet6_dev {
	struct ipv6_devconf cnf;
} __attribute__((preserve_access_index));
struct net_device {
	const unsigned char *dev_addr;
	struct in_device *ip_ptr;
	struct inet6_dev *ip6_ptr;
} __attribute__((preserve_access_index));
struct xdp_rxq_info {
	struct net_device *dev;
} __attribute__((preserve_access_index));
struct xdp_buff {
	struct xdp_rxq_info *rxq;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

/* fw_forwards tells whether the ingress device forwards the family's
 * packets: 1 yes, 0 no, -1 unknown here (no kfunc or field: ask the FIB).
 * Reads of kernel memory through these pointers are checked loads: a NULL
 * device configuration reads as 0, as the kernel's own check treats it. */
static __always_inline int fw_forwards(struct xdp_md *ctx, __u8 family)
{
	if (!bpf_cast_to_kern_ctx || !bpf_core_field_exists(struct net_device, ip_ptr) ||
	    !bpf_core_field_exists(struct net_device, ip6_ptr) ||
	    !bpf_core_field_exists(struct ipv6_devconf, forwarding))
		return -1;
	struct xdp_buff *x = bpf_cast_to_kern_ctx(ctx);
	struct net_device *dev = x->rxq->dev;

	if (family == 4) {
		struct in_device *in = dev->ip_ptr;
		return in && in->cnf.data[IPV4_DEVCONF_FORWARDING - 1] != 0;
	}
	struct inet6_dev *in6 = dev->ip6_ptr;
	return in6 && in6->cnf.forwarding != 0;
}

/* fw_ingress_mac copies the ingress device's MAC address into mac:
 * returns 0, or -1 where it cannot be read here (no kfunc or field).
 * Read through the device's pointer as the forwarding flag above is:
 * loads the verifier checks (a fault reads zeros, which match no
 * frame's destination), not bpf_probe_read_kernel, whose helper call was
 * a third of the fast path's own time (fw_fwd_xdp) in a profile of
 * `bench forward`. */
static __always_inline int fw_ingress_mac(struct xdp_md *ctx, __u8 *mac)
{
	if (!bpf_cast_to_kern_ctx || !bpf_core_field_exists(struct net_device, dev_addr))
		return -1;
	struct xdp_buff *x = bpf_cast_to_kern_ctx(ctx);
	const unsigned char *a = x->rxq->dev->dev_addr;

	for (int i = 0; i < 6; i++)
		mac[i] = a[i];
	return 0;
}

/* fw_fib_chain asks the kernel FIB, and notes the egress device it finds
 * in p->oifindex (what FORWARD's -o tests): the device the kernel forwards
 * by when the route is found (SUCCESS), also while its next hop's
 * neighbour is unresolved (NO_NEIGH: the kernel queues the packet and
 * forwards it; the helper names the device since Linux 6.3) or the packet
 * is bigger than the route's MTU (FRAG_NEEDED: asked again without the
 * length, whose check stops the helper before it names the device). Every
 * other outcome leaves 0, no device: a blackhole, unreachable or prohibit
 * route (the kernel drops the packet, iptables' FORWARD never sees it), a
 * route with a lightweight-tunnel encapsulation (UNSUPP_LWT: the helper
 * stops before the device), and the destinations this host takes (INPUT).
 * docs/compat.md "Interfaces and address types".
 *
 * For the forwarding fast path (lib/fwd.h) it notes in *hop the next hop's
 * MACs and the egress device, or why they cannot be used (hop->why). The
 * lookup is the kernel's own for a forwarded packet: the ingress device,
 * the TOS (policy rules on it), the L4 ports (multipath hashing), the IP
 * length against the route's MTU; not the firewall mark (xdpfw sets none)
 * nor the reverse-path filter (docs/forward.md). Inline: as a global
 * function its call's return (through this kernel's return thunk) was
 * ~6 % of an established forwarded packet's time in xdpfw (bench
 * forward's profile, docs/bench.md), and the entry programs that use it
 * hand the classifier over by a tail call, so its 64-byte request does
 * not add to the classifier's frames (the verifier checks the 512-byte
 * stack: ingress 268,283 -> 223,093 processed instructions with both this
 * and fw_fwd_xdp inline). */
static __always_inline int fw_fib_chain(struct xdp_md *ctx, struct fw_pkt *p, struct fw_fwd_hop *hop)
{
	if (!ctx || !p || !hop) /* the verifier requires the check on global-function pointers */
		return FW_CHAIN_FORWARD;

	struct bpf_fib_lookup fib = {};

	fib.ifindex = p->ifindex; /* the ingress device: a PPPoE session's ppp device (lib/pppoe.h) */
	fib.l4_protocol = p->proto;
	fib.sport = bpf_htons(p->sport);
	fib.dport = bpf_htons(p->dport);
	fib.tot_len = p->l3_len;
	if (p->family == 4) {
		fib.family = AF_INET;
		fib.tos = p->tos;
		fib.ipv4_src = (__u32)p->src[0];
		fib.ipv4_dst = (__u32)p->dst[0];
	} else {
		fib.family = AF_INET6;
		__builtin_memcpy(fib.ipv6_src, p->src, 16);
		__builtin_memcpy(fib.ipv6_dst, p->dst, 16);
	}

	hop->ifindex = 0;
	hop->why = FW_FWD_XDP;
	int rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED) {
		/* too big for the fast path; the device for -o: */
		hop->why = FW_FWD_MTU;
		fib.tot_len = 0; /* shares its bytes with mtu_result */
		rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	}
	switch (rc) {
	case BPF_FIB_LKUP_RET_NOT_FWDED:    /* local, broadcast, multicast */
	case BPF_FIB_LKUP_RET_FWD_DISABLED: /* this host does not route */
		return FW_CHAIN_INPUT;
	case BPF_FIB_LKUP_RET_SUCCESS:
		__builtin_memcpy(hop->dmac, fib.dmac, 6);
		__builtin_memcpy(hop->smac, fib.smac, 6);
		hop->ifindex = fib.ifindex;
		p->oifindex = fib.ifindex;
		return FW_CHAIN_FORWARD;
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		if (hop->why == FW_FWD_XDP)
			hop->why = FW_FWD_NO_NEIGH;
		p->oifindex = fib.ifindex;
		return FW_CHAIN_FORWARD;
	default:                            /* unroutable here: no device */
		hop->why = FW_FWD_UNROUTED;
		return FW_CHAIN_FORWARD;
	}
}

static __always_inline __u8 fw_ingress_chain(struct xdp_md *ctx, struct fw_pkt *p, struct fw_fwd_hop *hop)
{
	/* a PPPoE session's packet comes in by its ppp device, whose
	 * forwarding sysctl the FIB reads (the flag read here is the
	 * Ethernet device's) */
	if (!(p->flags & FW_PKT_PPPOE) && fw_forwards(ctx, p->family) == 0)
		return FW_CHAIN_INPUT;
	return fw_fib_chain(ctx, p, hop);
}

#endif
