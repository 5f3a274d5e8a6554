/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Priority (docs/realtime.md "Priority"): the xdpfw-priority table sorts
 * the packets arriving into two classes before they are judged. HIGH is
 * judged at once, on the CPU that received it; BULK is handed to a bulk
 * CPU through fw_cpumap and judged there by xdpfw_cpumap, the same
 * program body (xdp_fw.c), so that bulk overload queues on the bulk CPUs
 * and the receiving CPU's work per bulk packet is only this sorting.
 *
 * The class is decided by the classifier itself: xdpfw_ingress hands the
 * parsed packet and the priority root to its classify stage
 * (FW_PRIO_CLASSIFY), which walks the root's trees as it walks a chain's
 * and acts on the class (fw_prio_act): a HIGH packet, or a BULK one that
 * cannot be handed over, enters xdpfw_ingress again (FW_PRIO_DECIDED),
 * which then judges it as if there were no priority table. The class
 * never changes the verdict: both sides run every stage of the judgment. */
#ifndef XDPFW_PRIORITY_H
#define XDPFW_PRIORITY_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"

/* fw_xdp_handoff.prio */
#define FW_PRIO_CLASSIFY 1
#define FW_PRIO_DECIDED  2

static __always_inline void fw_prio_count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&fw_prio_stats, &what);

	if (c)
		*c += 1;
}

/* fw_prio_root returns the priority root p is classed by in the generation
 * in force, whose fw_active_sel it leaves in *selp, or NULL when p is
 * judged where it arrived: no bulk CPUs are set, no rule set is installed,
 * the generation has no priority table, or this is a trace instance
 * (BPF_PROG_TEST_RUN judges, it hands nothing over). The bulk CPUs are
 * asked first: without them a packet costs one lookup here. */
static __always_inline const struct fw_root *fw_prio_root(const struct fw_pkt *p, int *selp)
{
	__u32 zero = 0;

	if (fw_tracing())
		return NULL;
	const struct fw_prio_cfg *cfg = bpf_map_lookup_elem(&fw_prio, &zero);
	if (!cfg || !cfg->ncpus)
		return NULL;
	int sel = fw_active_sel();
	if (sel < 0)
		return NULL;
	*selp = sel;
	__u32 r = (sel & 1) * 2 + (p->family == 6);
	const struct fw_root *root = bpf_map_lookup_elem(&fw_prio_roots, &r);
	if (!root || !(root->flags & FW_ROOT_PRIO))
		return NULL;
	return root;
}

/* fw_prio_steer hands the packet to a bulk CPU, chosen by a hash of its
 * addresses and protocol that is the same both ways (a connection's
 * packets, and a datagram's fragments, stay in one queue, in order).
 * rx_vlan, the tag the NIC stripped (fw_xdp_handoff.rx_vlan), travels as
 * XDP metadata (fw_prio_meta). Returns XDP_REDIRECT, or anything else
 * when the packet cannot be handed over. */
static __always_inline int fw_prio_steer(struct xdp_md *ctx, const struct fw_pkt *p, __u32 rx_vlan)
{
	__u32 zero = 0;
	const struct fw_prio_cfg *cfg = bpf_map_lookup_elem(&fw_prio, &zero);

	if (!cfg)
		return XDP_ABORTED;
	__u32 n = cfg->ncpus;
	if (!n || n > FW_PRIO_MAX_CPUS)
		return XDP_ABORTED;
	__u64 a = p->src[0] ^ p->src[1] ^ p->dst[0] ^ p->dst[1];
	__u32 h = ((__u32)a ^ (__u32)(a >> 32) ^ p->proto) * 0x9e3779b1u;
	__u32 idx = ((__u64)h * n) >> 32; /* < n */
	if (idx >= FW_PRIO_MAX_CPUS)      /* bounds the index for the verifier */
		return XDP_ABORTED;
	__u32 cpu = cfg->cpus[idx];
	if (rx_vlan) {
		if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u32)))
			return XDP_ABORTED;
		__u32 *m = (void *)(long)ctx->data_meta;
		if ((void *)(m + 1) > (void *)(long)ctx->data)
			return XDP_ABORTED;
		*m = rx_vlan;
	}
	/* flags 0: a CPU without an entry gives XDP_ABORTED */
	return bpf_redirect_map(&fw_cpumap, cpu, 0);
}

/* fw_prio_meta returns the tag fw_prio_steer put in front of the packet,
 * 0 when none (on the bulk CPU, in xdpfw_cpumap). */
static __always_inline __u32 fw_prio_meta(struct xdp_md *ctx)
{
	__u32 *m = (void *)(long)ctx->data_meta;
	void *data = (void *)(long)ctx->data;

	/* two tests, as fw_trace_meta: the first bounds it for the verifier */
	if ((void *)(m + 1) > data)
		return 0;
	asm volatile("" : "+r"(m));
	if ((void *)(m + 1) != data)
		return 0;
	return *m;
}

/* fw_prio_act acts on the class the classify stage found for the packet
 * in h (high: its first matching priority entry, or the root's policy,
 * says HIGH): hands a BULK packet to a bulk CPU, and sends the others back
 * into xdpfw_ingress to be judged here. */
static __always_inline int fw_prio_act(struct xdp_md *ctx, struct fw_xdp_handoff *h, int high)
{
	if (!high) {
		int rc = fw_prio_steer(ctx, &h->pkt, h->rx_vlan);
		if (rc == XDP_REDIRECT) {
			h->prio = 0;
			h->rx_vlan = 0;
			fw_prio_count(FW_PRIO_S_BULK);
			return rc;
		}
		fw_prio_count(FW_PRIO_S_FALLBACK);
	} else {
		fw_prio_count(FW_PRIO_S_HIGH);
	}
	h->prio = FW_PRIO_DECIDED;
	bpf_tail_call(ctx, &fw_xdp_stages, FW_XDP_STAGE_INGRESS);
	h->prio = 0; /* never while the control plane holds fw_xdp_stages: fail closed */
	h->rx_vlan = 0;
	return XDP_DROP;
}

#endif
