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

/* fw_decide fills *d for the parsed packet p (p->chain set). assume_state
 * >= 0 replaces the conntrack lookup (traces). Returns 0, or -1 when no
 * rule set is installed. */
static __always_inline int fw_decide(void *data, void *data_end, struct fw_pkt *p, __u64 bytes,
				     struct fw_decision *d, int assume_state)
{
	/* Not zeroed (56 bytes of stores on every packet): fw_ct_lookup
	 * writes what fw_ct_commit reads, and without a lookup (no conntrack,
	 * a trace's assumed state) next = FW_CTS_NONE makes the commit a
	 * no-op. */
	struct fw_ct ct;
	ct.next = FW_CTS_NONE;
	/* One variable for the generation and the delta half: the stack of
	 * this frame, fw_log_xdp's and fw_log_finish's together stays within
	 * the verifier's 512 bytes. */
	__u32 sel = 0;
	const struct fw_root *root = fw_root_of(p, &sel);

	if (!root)
		return -1;
	__u8 tracked = root->flags & FW_ROOT_CT;
	p->ctstate = FW_CT_NEW;
	if (assume_state >= 0) /* a trace's "what if": no lookup, nothing recorded */
		p->ctstate = assume_state;
	else if (tracked)
		fw_ct_lookup(data, data_end, p, &ct);
	if (root->fast_states & (1u << p->ctstate)) {
		/* the first rule for this state matches every such packet */
		d->rule_id = root->fast_rule_id;
		d->action = root->fast_action;
		d->reason = root->fast_reason;
		d->reject = root->fast_reject;
		d->log = root->fast_flags & FW_EF_LOG;
	} else if (fw_classify(root, sel, p, d) < 0) {
		return -1;
	}
	if (tracked && d->action == FW_ACT_ACCEPT && fw_ct_commit(&ct, p, bytes, d->rule_id) < 0) {
		const struct fw_config *cfg = fw_config();
		if (!cfg || !cfg->ct_full_accept) {
			d->action = FW_ACT_DROP;
			d->reason = FW_R_CT_FULL;
		}
	}
	return 0;
}

#endif
