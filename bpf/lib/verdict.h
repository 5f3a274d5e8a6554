/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The decision both hooks share: conntrack (when the rule set uses it),
 * then the root's fast rule or the classifier, then conntrack's record of
 * an accepted packet. */
#ifndef XDPFW_VERDICT_H
#define XDPFW_VERDICT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "ct.h"
#include "classify.h"
#include "hdropt.h"
#include "kct.h"
#include "natout.h"

static __always_inline const struct fw_config *fw_config(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&fw_config_map, &zero);
}

/* What malformed packets get: drop unless configured to pass. */
static __always_inline __u8 fw_malformed_action(void)
{
	const struct fw_config *cfg = fw_config();

	return cfg && cfg->malformed_pass ? FW_ACT_ACCEPT : FW_ACT_DROP;
}

/* What fw_decide_start leaves to do. */
enum fw_decide_next {
	FW_DECIDE_NO_RULESET = -1, /* no rule set installed: fail closed */
	FW_DECIDE_DONE = 0,        /* *d holds the root's fast rule */
	FW_DECIDE_CLASSIFY = 1,    /* the classifier decides (fw_classify_in) */
};

/* fw_raw_notrack tells whether a NOTRACK rule of the raw table of
 * generation gen matches p (its chain and family are p's: PREROUTING's
 * rules have an entry in INPUT and one in FORWARD). At most FW_MAX_RAW
 * entries, each tested by the classifier's own entry test (a global
 * function: verified once). */
static __always_inline int fw_raw_notrack(const struct fw_pkt *p, __u32 gen)
{
	for (__u32 i = 0; i < FW_MAX_RAW; i++) {
		__u32 slot = gen * FW_MAX_RAW + i;
		const struct fw_entry *e = bpf_map_lookup_elem(&fw_raw, &slot);

		if (!e || e->action != FW_ACT_NOTRACK)
			return 0;
		if (fw_entry_match(e, p))
			return 1;
	}
	return 0;
}

/* fw_decide_start looks up the packet's connection (when the rule set
 * uses conntrack; assume_state >= 0 replaces the lookup, for traces: the
 * state | ctinfo << 8 | ctproto << 16, ctproto 0 the packet's; a NOTRACK
 * rule of the raw table makes it UNTRACKED, before both; kctx, XDP's
 * context or NULL at tc, asks the kernel's conntrack about what xdpfw's
 * does not know: lib/kct.h; hinted, a constant: ct->now set means the
 * caller looked the packet's conntrack entry up already, fw_ct_lookup) and
 * applies the root's fast rule: *sel and *root are what the classifier
 * then needs, ct what fw_decide_end records. */
static __always_inline int fw_decide_start(void *data, void *data_end, struct fw_pkt *p, struct fw_decision *d,
					   struct fw_ct *ct, __u32 *sel, const struct fw_root **rootp,
					   int assume_state, struct xdp_md *kctx, const int hinted)
{
	/* ct is not zeroed (56 bytes of stores on every packet): fw_ct_lookup
	 * writes what fw_ct_commit reads, and without a lookup (no conntrack,
	 * a trace's assumed state) next = FW_CTS_NONE makes the commit a
	 * no-op. */
	ct->next = FW_CTS_NONE;
	int s = fw_active_sel();
	if (s < 0)
		return FW_DECIDE_NO_RULESET;
	const struct fw_root *root = fw_root_at(p, s);
	if (!root)
		return FW_DECIDE_NO_RULESET;
	*sel = s;
	*rootp = root;
	p->ctstate = FW_CT_NEW;
	p->ctinfo = 0;
	p->ctproto = p->proto;
	if ((root->flags & FW_ROOT_RAW) && fw_raw_notrack(p, s & 1)) {
		p->ctstate = FW_CT_UNTRACKED; /* the raw table's NOTRACK: no lookup, nothing recorded */
	} else if (assume_state >= 0) { /* a trace's "what if": no lookup, nothing recorded */
		p->ctstate = assume_state & 0xff;
		p->ctinfo = assume_state >> 8;
		if (assume_state >> 16)
			p->ctproto = assume_state >> 16;
	} else if (root->flags & FW_ROOT_CT) {
		fw_ct_lookup(data, data_end, p, ct, hinted);
		if (kctx && fw_kct_consult(kctx, p, ct) > 0) {
			/* the chain of the translated destination: its root */
			root = fw_root_at(p, s);
			if (!root)
				return FW_DECIDE_NO_RULESET;
			*rootp = root;
		}
	}
	if (!(root->fast_states & (1u << p->ctstate)))
		return FW_DECIDE_CLASSIFY;
	/* the first rule for this state matches every such packet */
	d->rule_id = root->fast_rule_id;
	d->action = root->fast_action;
	d->reason = root->fast_reason;
	d->reject = root->fast_reject;
	d->flags = root->fast_flags & FW_EF_LOG; /* a fast rule never has -m limit */
	return FW_DECIDE_DONE;
}

/* fw_decide_end records an accepted packet's connection (ct from
 * fw_decide_start); a full table drops the packet unless configured not
 * to. */
static __always_inline void fw_decide_end(struct fw_ct *ct, const struct fw_pkt *p, __u64 bytes,
					  struct fw_decision *d)
{
	if (d->action == FW_ACT_ACCEPT && fw_ct_commit(ct, p, bytes, d->rule_id) < 0) {
		const struct fw_config *cfg = fw_config();
		if (!cfg || !cfg->ct_full_accept) {
			d->action = FW_ACT_DROP;
			d->reason = FW_R_CT_FULL;
		}
	}
}

/* fw_decide fills *d for the parsed packet p (p->chain set) of skb (tc):
 * both stages in one program, the classifier a global function (verified
 * once, not once per path through conntrack). Returns 0, or -1 when no
 * rule set is installed. */
static __always_inline int fw_decide(struct __sk_buff *skb, void *data, void *data_end, struct fw_pkt *p,
				     __u64 bytes, struct fw_decision *d, int assume_state)
{
	struct fw_ct ct;
	const struct fw_root *root = NULL;
	__u32 sel = 0;
	int next = fw_decide_start(data, data_end, p, d, &ct, &sel, &root, assume_state, NULL, 0);

	if (next == FW_DECIDE_NO_RULESET)
		return -1;
	/* a new connection's first packet: nat OUTPUT (lib/natout.h) */
	if (fw_nat_mode && assume_state < 0 && fw_nat_to_output(skb, p) < 0)
		return -1;
	if (next == FW_DECIDE_CLASSIFY && fw_hdropt_wanted(root))
		fw_skb_hdropt(skb, root, p);
	if (next == FW_DECIDE_CLASSIFY && fw_classify(root, sel, p, d) < 0)
		return -1;
	fw_decide_end(&ct, p, bytes, d);
	return 0;
}

#endif
