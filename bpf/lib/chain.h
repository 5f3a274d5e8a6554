/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* INPUT or FORWARD: is the packet for this host? Asked of the kernel FIB, so
 * the answer follows every address and route change with no daemon:
 * local (RTN_LOCAL), broadcast and multicast destinations come back
 * NOT_FWDED, and a host with forwarding disabled forwards nothing. */
#ifndef XDPFW_CHAIN_H
#define XDPFW_CHAIN_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

static __always_inline __u8 fw_ingress_chain(struct xdp_md *ctx, const struct fw_pkt *p)
{
	struct bpf_fib_lookup fib = {};

	fib.ifindex = ctx->ingress_ifindex;
	fib.l4_protocol = p->proto;
	fib.sport = bpf_htons(p->sport);
	fib.dport = bpf_htons(p->dport);
	if (p->family == 4) {
		fib.family = AF_INET;
		fib.ipv4_src = (__u32)p->src[0];
		fib.ipv4_dst = (__u32)p->dst[0];
	} else {
		fib.family = AF_INET6;
		__builtin_memcpy(fib.ipv6_src, p->src, 16);
		__builtin_memcpy(fib.ipv6_dst, p->dst, 16);
	}

	switch (bpf_fib_lookup(ctx, &fib, sizeof(fib), 0)) {
	case BPF_FIB_LKUP_RET_NOT_FWDED:    /* local, broadcast, multicast */
	case BPF_FIB_LKUP_RET_FWD_DISABLED: /* this host does not route */
		return FW_CHAIN_INPUT;
	default:                            /* routed (or unroutable) elsewhere */
		return FW_CHAIN_FORWARD;
	}
}

#endif
