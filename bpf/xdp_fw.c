/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* xdpfw ingress (XDP): parse, pick the chain (INPUT or FORWARD), decide
 * (conntrack + classify), log, act (pass, drop, or answer a REJECT in
 * place), count. The answers this host's OUTPUT REJECTs send into its own
 * stack pass unfiltered (generic mode is the only one where they come by). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"
#include "maps.h"
#include "lib/parse.h"
#include "lib/chain.h"
#include "lib/verdict.h"
#include "lib/reject.h"
#include "lib/stats.h"
#include "lib/trace.h"
#include "lib/log.h"

/* XDP action of ACCEPT and DROP (REJECT: fw_reject_xdp, which may drop too). */
static __always_inline int fw_xdp_action(__u8 action)
{
	return action == FW_ACT_ACCEPT ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int xdpfw_ingress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 bytes = data_end - data;
	struct fw_pkt pkt = {};
	struct fw_decision d = {};
	int rc;

	rc = fw_parse(data, data_end, bytes, &pkt);
	if (rc == FW_PARSE_NOT_IP) {
		fw_count_reason(FW_R_NOT_IP, XDP_PASS, bytes, fw_now());
		fw_trace(ctx, 0, 0xff, FW_R_NOT_IP, &pkt);
		return XDP_PASS;
	}
	if (rc < 0) {
		__u8 act = fw_malformed_action();
		fw_count_reason(-rc, fw_xdp_action(act), bytes, fw_now());
		fw_trace(ctx, 0, act, -rc, &pkt);
		return fw_xdp_action(act);
	}

	if (fw_reject_own_answer(data, data_end, &pkt)) {
		/* this host's OUTPUT REJECT answering one of its own sockets
		 * (generic mode): passed as natively, counted where it was sent */
		pkt.chain = FW_CHAIN_OUTPUT;
		fw_trace(ctx, 0, 0xff, FW_R_RULE_REJECT, &pkt);
		return XDP_PASS;
	}

	pkt.ifindex = ctx->ingress_ifindex;
	pkt.chain = fw_ingress_chain(ctx, &pkt);

	if (fw_decide(data, data_end, &pkt, bytes, &d, fw_trace_ctstate(fw_trace_meta(ctx))) < 0) {
		/* no rule set: fail closed */
		fw_count_reason(FW_R_NO_RULESET, XDP_DROP, bytes, fw_now());
		fw_trace(ctx, 0, FW_ACT_DROP, FW_R_NO_RULESET, &pkt);
		return XDP_DROP;
	}
	rc = fw_xdp_action(d.action);
	if (fw_log_wanted(&d)) /* before REJECT rewrites the frame */
		fw_log_xdp(ctx, &pkt, &d, bytes, fw_trace_meta(ctx) != NULL);
	if (d.action == FW_ACT_REJECT)
		rc = fw_reject_xdp(ctx, &pkt, &d); /* answer in place (XDP_TX), or drop; sets d.reason */
	__u64 now = fw_now();
	fw_count_rule(d.rule_id, bytes, now);
	fw_count_reason(d.reason, rc, bytes, now);
	fw_trace_decision(ctx, &d, &pkt);
	return rc;
}
