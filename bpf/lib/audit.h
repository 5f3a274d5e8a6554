/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Audit: a candidate rule set classifies live packets beside the enforced
 * one and decides nothing (docs/audit.md).
 *
 * The audit stage (xdpfw_audit, xdp_fw.c) is the same object loaded a
 * second time with fw_trace_mode FW_TRACE_AUDIT: its classifier tables,
 * per-rule counters, -m limit buckets and log budgets are maps of its own
 * (the candidate's); it shares the live instance's hand-over slot (the
 * parsed packet and the enforced decision), sets, -m recent lists and
 * -m hashlimit buckets (read, never written: fw_live_writes is 0), and
 * the event ring. The live program enters it by a tail call once its
 * decision is made, and it returns by a tail call to the live program's
 * finish stage, which acts on the enforced decision as it would have; on a
 * bulk CPU the same through the cpumap kind of each (xdpfw_cpumap_audit,
 * xdpfw_cpumap_finish). */
#ifndef XDPFW_AUDIT_H
#define XDPFW_AUDIT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "classify.h"
#include "log.h"
#include "hdropt.h"
#include "stats.h"
#include "ratelimit.h"

/* fw_audit_count counts a packet under enum fw_audit_counter c. */
static __always_inline void fw_audit_count(__u32 c, __u64 bytes, __u64 now)
{
	struct fw_counter *k = bpf_map_lookup_elem(&fw_audit_counts, &c);

	if (k)
		fw_count(k, bytes, now);
}

/* fw_audit_event reports a packet whose verdict would differ: an event in
 * the log ring (FW_LOG_F_AUDIT: rule_id, action and reason the
 * candidate's, verdict_id the enforced rule), within the audit's budget.
 * A global function: verified once. */
__noinline int fw_audit_event(struct xdp_md *ctx, const struct fw_pkt *p, const struct fw_decision *cd,
			      __u32 enforced_id, __u64 bytes)
{
	__u32 zero = 0;

	if (!ctx || !p || !cd)
		return 0;
	struct fw_bucket *b = bpf_map_lookup_elem(&fw_audit_budget, &zero);
	__u64 now = fw_now();
	if (!b || !fw_rl_take(&b->tat, bpf_ktime_get_ns(), b->interval_ns, b->burst)) {
		fw_audit_count(FW_AUDIT_C_SUPPRESSED, bytes, now);
		return 0;
	}
	struct fw_log_event *ev = bpf_ringbuf_reserve(&fw_log_ring, sizeof(*ev) + fw_log_snap, 0);
	if (!ev) {
		fw_audit_count(FW_AUDIT_C_LOST, bytes, now);
		return 0;
	}
	__u64 cap = bytes < fw_log_snap ? bytes : fw_log_snap;
	if (cap > 0 && cap <= fw_log_snap && bpf_xdp_load_bytes(ctx, 0, ev->data, cap) < 0)
		cap = 0;
	fw_log_head(ev, cd->rule_id, FW_LOG_F_AUDIT, FW_HOOK_XDP, p, cd, bytes, cap);
	ev->verdict_id = enforced_id;
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* fw_audit_decide fills a->d with the candidate's decision on the packet
 * in h: its fast rule for the connection state the enforced set's
 * conntrack found, else its classifier (with its own -m limit tokens,
 * counting rules and LOG rules' counters: fw_log_xdp, which sends nothing
 * here). Returns 0, or -1 when no candidate is installed. */
static __always_inline int fw_audit_decide(struct xdp_md *ctx, struct fw_xdp_handoff *h, struct fw_audit_slot *a,
					   __u64 bytes)
{
	struct fw_decision *cd = &a->d;
	struct fw_pkt *p = &h->pkt;

	*cd = (struct fw_decision){};
	int s = fw_active_sel();
	if (s < 0)
		return -1;
	const struct fw_root *root = fw_root_at(p, s);
	if (!root)
		return -1;
	if (root->fast_states & (1u << (p->ctstate & 7))) {
		cd->rule_id = root->fast_rule_id;
		cd->action = root->fast_action;
		cd->reason = root->fast_reason;
		cd->reject = root->fast_reject;
		cd->flags = root->fast_flags & FW_EF_LOG;
	} else {
		a->root = *root;
		if (fw_hdropt_wanted(&a->root))
			fw_xdp_hdropt(ctx, &a->root, p);
		fw_classify_xdp(&a->root, s, p, cd);
	}
	if (fw_log_wanted(cd))
		fw_log_xdp(ctx, p, cd, bytes, 0);
	fw_count_rule(cd->rule_id, bytes, fw_now());
	return 0;
}

#endif
