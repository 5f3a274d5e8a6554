/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* xdpfw ingress (XDP): parse, pick the chain (INPUT or FORWARD), decide
 * (conntrack + classify), log, act (pass, drop, or answer a REJECT in
 * place), count. The answers this host's OUTPUT REJECTs send into its own
 * stack pass unfiltered (generic mode is the only one where they come by).
 *
 * Two programs: xdpfw_ingress decides what conntrack and the fast rules
 * can; a packet the classifier must decide continues in
 * xdpfw_ingress_classify, entered by a tail call with the packet in a
 * per-CPU hand-over slot (fw_xdp_handoff). A tail call is a jump: the
 * classifier runs inline, without the BPF-to-BPF call whose return through
 * the kernel's return thunk costs more than the jump and the hand-over
 * (docs/classifier.md "The XDP classify stage"). The tc
 * program (tc_fw.c) calls the classifier as a global function.
 *
 * On a device whose driver hands XDP the VLAN tag it stripped (rx VLAN
 * offload), the control plane attaches xdpfw_rxvlan instead: a small
 * device-bound program, loaded for that interface, that reads the tag
 * through the XDP RX metadata kfunc and tail-calls xdpfw_ingress
 * (docs/vlan.md). */
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
#include "lib/frag.h"
#include "lib/latency.h"
#include "lib/fwd.h"
#include "lib/priority.h"
#include "lib/audit.h"
#include "lib/natfw.h"
#include "lib/natdst.h"
#include "lib/natout.h"
#include "lib/fwdexpired.h"

/* XDP action of ACCEPT and DROP (REJECT: fw_reject_xdp, which may drop too). */
static __always_inline int fw_xdp_action(__u8 action)
{
	return action == FW_ACT_ACCEPT ? XDP_PASS : XDP_DROP;
}

/* fw_xdp_finish acts on decision d: logs, answers a REJECT, forwards
 * what FORWARD accepts (by the fast path, or the kernel), counts, traces,
 * stops the latency clock lat. Returns the XDP action. cpumap (a
 * constant): the packet is a bulk one, on a bulk CPU (xdpfw_cpumap), where
 * XDP_TX does not exist: a REJECT's answer leaves by a redirect to the
 * device the packet came in by, which sends it as XDP_TX would. */
static __always_inline int fw_xdp_finish(struct xdp_md *ctx, struct fw_xdp_handoff *h, const struct fw_pkt *p,
					 struct fw_decision *d, __u64 bytes, const int cpumap)
{
	const struct fw_fwd_hop *hop = &h->hop;
	struct fw_lat_clock *lat = &h->lat;
	int rc = fw_xdp_action(d->action);
	int again = fw_nat_finished(h); /* after the nat stage: logged and counted already */

	if (fw_log_wanted(d) && !again) /* before REJECT rewrites the frame */
		fw_log_xdp(ctx, p, d, bytes, fw_tracing());
	if (d->action == FW_ACT_REJECT) {
		if (fw_nat_mode) /* the answer from where the client sent to (lib/natdst.h) */
			fw_nat_reject_orig(ctx, h);
		rc = fw_reject_xdp(ctx, p, d); /* answer in place (XDP_TX), or drop; sets d->reason */
		if (cpumap && rc == XDP_TX)
			rc = bpf_redirect(ctx->ingress_ifindex, 0);
	}
	else if (d->action == FW_ACT_ACCEPT && p->chain == FW_CHAIN_FORWARD) {
		/* the source NAT after the filter (lib/natfw.h): a first packet
		 * goes to the nat stage, which comes back to the finish stage */
		if (fw_nat_mode && fw_nat_out(ctx, h, p, d, cpumap) < 0) {
			d->action = FW_ACT_DROP;
			d->reason = FW_R_NAT_FAIL;
			rc = XDP_DROP;
		} else {
			rc = fw_fwd_xdp(ctx, p, hop); /* after LOG: it rewrites the frame */
		}
	} else if (fw_nat_mode && d->action == FW_ACT_ACCEPT && fw_nat_pending(ctx, h, d, cpumap) < 0) {
		/* INPUT: a connection PREROUTING translated (REDIRECT, a DNAT
		 * to this host) bound in the nat stage (lib/natdst.h) */
		d->action = FW_ACT_DROP;
		d->reason = FW_R_NAT_FAIL;
		rc = XDP_DROP;
	} else if (fw_nat_mode && d->action == FW_ACT_ACCEPT && fw_nat_local_in(ctx, h) < 0) {
		/* INPUT: a bound answer's source (lib/natout.h); one without its binding dropped */
		d->action = FW_ACT_DROP;
		d->reason = FW_R_NAT_FAIL;
		rc = XDP_DROP;
	}
	__u64 now = fw_now();
	fw_count_rule(d->rule_id, bytes, now);
	fw_count_reason(d->reason, rc, bytes, now);
	fw_trace_decision(ctx, d, p);
	fw_lat_end(lat, p->chain, d->action);
	fw_frag_record(p, d); /* last: the verifier splits on the flag, with nothing left to check twice */
	return rc;
}

/* fw_xdp_stage tail-calls stage (FW_XDP_STAGE_*) of the program's own
 * kind: fw_xdp_stages', or on a bulk CPU (cpumap, a constant)
 * fw_cpumap_stages'. Returns only when the slot is empty. */
static __always_inline void fw_xdp_stage(struct xdp_md *ctx, __u32 stage, const int cpumap)
{
	bpf_tail_call(ctx, cpumap ? (void *)&fw_cpumap_stages : (void *)&fw_xdp_stages, stage);
}

/* fw_xdp_fail_closed drops a packet nothing can decide: no rule set is
 * installed, or (never while datapath holds fw_xdp_stages) the classify
 * stage is missing. Both count as FW_R_NO_RULESET. */
static __always_inline int fw_xdp_fail_closed(struct xdp_md *ctx, const struct fw_pkt *p, __u64 bytes,
					      struct fw_lat_clock *lat)
{
	fw_count_reason(FW_R_NO_RULESET, XDP_DROP, bytes, fw_now());
	fw_trace(ctx, 0, FW_ACT_DROP, FW_R_NO_RULESET, p);
	fw_lat_end(lat, p->chain, FW_LAT_DROP);
	return XDP_DROP;
}

/* bpf_xdp_metadata_rx_vlan_tag (Linux 6.8+, net/core/xdp.c) gives the
 * VLAN tag the driver stripped from the frame; callable only from a
 * device-bound program (BPF_F_XDP_DEV_BOUND_ONLY), where the verifier
 * swaps in the driver's implementation. */
extern int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md *ctx, __be16 *vlan_proto, __u16 *vlan_tci) __ksym;

/* xdpfw_rxvlan: the entry on a device that strips VLAN tags into the
 * packet's metadata. Loaded once per such interface, bound to it (the
 * kfunc above); it hands the tag to xdpfw_ingress in the per-CPU slot
 * and jumps there (Linux 6.16+ lets a device-bound program tail-call
 * one that is not). Only fw_xdp_handoff and fw_xdp_stages: the control
 * plane gives it the loaded program's. */
SEC("xdp")
int xdpfw_rxvlan(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct fw_xdp_handoff *h = bpf_map_lookup_elem(&fw_xdp_handoff, &zero);
	__be16 proto;
	__u16 tci;

	if (!h) /* a per-CPU array's slot 0 is always there */
		return XDP_DROP;
	/* -ENODATA: no tag; -EOPNOTSUPP: the driver offers none */
	h->rx_vlan = bpf_xdp_metadata_rx_vlan_tag(ctx, &proto, &tci) ? 0 : FW_RX_VLAN_TAGGED | tci; /* VID and PCP */
	bpf_tail_call(ctx, &fw_xdp_stages, FW_XDP_STAGE_INGRESS);
	/* never while the control plane holds fw_xdp_stages: fail closed */
	h->rx_vlan = 0;
	return XDP_DROP;
}

/* fw_xdp_ingress is xdpfw_ingress (cpumap 0) and xdpfw_cpumap (cpumap 1,
 * on a bulk CPU: the packet's class is decided, and the tag the NIC
 * stripped comes as metadata, lib/priority.h). */
static __always_inline int fw_xdp_ingress(struct xdp_md *ctx, const int cpumap)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 bytes = data_end - data;
	struct fw_decision d = {};
	struct fw_ct ct;
	const struct fw_root *root = NULL;
	__u32 sel = 0, zero = 0;
	int rc;
	/* The packet is parsed into the hand-over slot, which the classify
	 * stage reads: no copy on the way. */
	struct fw_xdp_handoff *h = bpf_map_lookup_elem(&fw_xdp_handoff, &zero);

	if (!h) /* a per-CPU array's slot 0 is always there */
		return XDP_DROP;
	struct fw_lat_clock *lat = &h->lat;
	if (fw_nat_mode) /* entered again by the nat stage's PREROUTING? (lib/natdst.h) */
		fw_nat_entry(h);
	/* entered again after the priority stage (FW_PRIO_DECIDED): the
	 * packet's clock runs since it first came in */
	int classed = cpumap || h->prio == FW_PRIO_DECIDED;
	h->prio = 0;
	if (cpumap) {
		fw_prio_count(FW_PRIO_S_CPUMAP);
		fw_lat_start(lat);
	} else if (!classed) {
		fw_lat_start(lat);
	}
	struct fw_pkt *pp = &h->pkt;
	*pp = (struct fw_pkt){};
	__u32 rx_vlan = cpumap ? fw_prio_meta(ctx) : h->rx_vlan;
	h->rx_vlan = 0;

	pp->ifindex = ctx->ingress_ifindex; /* a PPPoE session's: its ppp device (lib/pppoe.h) */
	rc = fw_parse(data, data_end, bytes, rx_vlan, pp, 1);
	if (rc == FW_PARSE_NOT_IP) {
		fw_count_reason(FW_R_NOT_IP, XDP_PASS, bytes, fw_now());
		fw_trace(ctx, 0, 0xff, FW_R_NOT_IP, pp);
		fw_lat_end(lat, FW_CHAIN_INPUT, FW_LAT_PASS);
		return XDP_PASS;
	}
	if (rc < 0) {
		__u8 act = fw_malformed_action();
		fw_count_reason(-rc, fw_xdp_action(act), bytes, fw_now());
		fw_trace(ctx, 0, act, -rc, pp);
		fw_lat_end(lat, FW_CHAIN_INPUT, act);
		return fw_xdp_action(act);
	}

	if (fw_reject_own_answer(data, data_end, pp)) {
		/* this host's OUTPUT REJECT answering one of its own sockets
		 * (generic mode): passed as natively, counted where it was sent */
		pp->chain = FW_CHAIN_OUTPUT;
		fw_trace(ctx, 0, 0xff, FW_R_RULE_REJECT, pp);
		fw_lat_end(lat, FW_CHAIN_INPUT, FW_LAT_PASS);
		return XDP_PASS;
	}

	if (!classed) { /* the priority table: this packet's class first */
		int s = 0;
		const struct fw_root *proot = fw_prio_root(pp, &s);
		if (proot) {
			h->rx_vlan = rx_vlan; /* for fw_prio_steer, or this program entered again */
			if (pp->flags & (FW_PKT_FRAG | FW_PKT_FRAG1)) /* BULK: a datagram's fragments stay in order */
				return fw_prio_act(ctx, h, 0);
			h->root = *proot;
			h->sel = s & 1; /* the main generation's trees: no delta stage */
			pp->chain = FW_CHAIN_PRIORITY; /* the chain of the entries (fw_entry_match) */
			h->prio = FW_PRIO_CLASSIFY;
			bpf_tail_call(ctx, &fw_xdp_stages, FW_XDP_STAGE_CLASSIFY);
			h->prio = 0; /* no classify stage: judged here */
			h->rx_vlan = 0;
		}
	}
	/* a translated connection's destination, before the chain is
	 * picked: as iptables' filter sees the packet (lib/natfw.h); its
	 * conntrack lookup, when it made conntrack's (ct.now set) */
	if (!cpumap)
		ct.now = 0;
	if (fw_nat_mode && h->nat_state == FW_NAT_S_NONE)
		fw_nat_in(data, data_end, h, &ct, cpumap);
	pp->chain = fw_ingress_chain(ctx, pp, &h->hop);
	/* iptables' FORWARD sees the TTL (hop limit) ip_forward /
	 * ip6_forward has already decremented: -m ttl / -m hl test that */
	if (pp->chain == FW_CHAIN_FORWARD && pp->ttl)
		pp->ttl--;

	if (pp->flags & FW_PKT_FRAG) { /* a later fragment: its datagram's verdict */
		if (fw_frag_later(pp, &d) < 0)
			return fw_xdp_fail_closed(ctx, pp, bytes, lat);
		if (fw_nat_mode) /* its translation, if forwarded (lib/natfrag.h) */
			fw_nat_frag_check(h, &d);
		rc = fw_xdp_action(d.action);
		if (rc == XDP_PASS && pp->chain == FW_CHAIN_FORWARD)
			fw_fwd_count(FW_FWD_FRAG, bytes); /* the kernel forwards fragments */
		fw_frag_count(&d, rc, bytes);
		fw_trace_reject(ctx, d.rule_id, d.action, d.reason, pp, d.reject);
		fw_lat_end(lat, pp->chain, d.action);
		return rc;
	}

	rc = fw_decide_start(data, data_end, pp, &d, &ct, &sel, &root, fw_trace_ctstate(fw_trace_meta(ctx)), ctx,
			     fw_nat_mode && !cpumap);
	if (fw_nat_mode) /* its destination translated: --ctstate DNAT (lib/natct.h) */
		fw_nat_ctinfo(h);
	/* a new connection's first packet: nat PREROUTING (lib/natdst.h) */
	if (fw_nat_mode && rc != FW_DECIDE_NO_RULESET && fw_nat_to_prerouting(ctx, h, cpumap) < 0)
		return fw_xdp_fail_closed(ctx, pp, bytes, lat);
	/* a forwarded packet whose TTL runs out here: the kernel's, unjudged
	 * (lib/fwdexpired.h) */
	if (rc != FW_DECIDE_NO_RULESET && fw_fwd_expires(pp))
		return fw_fwd_expired(ctx, h, &ct, bytes);
	if (rc == FW_DECIDE_CLASSIFY) {
		_Static_assert(sizeof(h->ct) == fw_ct_plan_size, "fw_xdp_handoff.ct holds struct fw_ct but its pointer");
		if (ct.next != FW_CTS_NONE)
			__builtin_memcpy(h->ct, &ct, fw_ct_plan_size);
		else /* conntrack off: the rest of ct was never written */
			h->ct[fw_ct_next_off] = FW_CTS_NONE;
		h->sel = sel;
		/* A copy of the root: the stage's classifier then reads one
		 * kind of pointer, not a fw_roots or a fw_deltas value (the
		 * verifier would check it once for each). */
		h->root = *root;
		fw_xdp_stage(ctx, FW_XDP_STAGE_CLASSIFY, cpumap);
		rc = FW_DECIDE_NO_RULESET; /* no classify stage: fail closed */
	}
	if (rc == FW_DECIDE_NO_RULESET)
		return fw_xdp_fail_closed(ctx, pp, bytes, lat);
	fw_decide_end(&ct, pp, bytes, &d);
	/* while a candidate rule set is audited: its stage (on a bulk CPU
	 * its cpumap kind), which finishes (xdpfw_ingress_finish,
	 * xdpfw_cpumap_finish) on the decision in the slot; else nothing */
	h->d = d;
	fw_xdp_stage(ctx, FW_XDP_STAGE_AUDIT, cpumap);
	return fw_xdp_finish(ctx, h, pp, &d, bytes, cpumap);
}

SEC("xdp")
int xdpfw_ingress(struct xdp_md *ctx)
{
	return fw_xdp_ingress(ctx, 0);
}

/* xdpfw_cpumap: the bulk class, on a bulk CPU (fw_cpumap's entries run
 * it): the same judgment as xdpfw_ingress. */
SEC("xdp/cpumap")
int xdpfw_cpumap(struct xdp_md *ctx)
{
	return fw_xdp_ingress(ctx, 1);
}

/* The classify stage (fw_xdp_stages[0]): the classifier inline, for what
 * xdpfw_ingress handed over; then conntrack's record and the same finish.
 * The decision lives in the slot too: the verifier tracks a stack copy's
 * every byte, and the classifier's many paths would each be checked on. */
static __always_inline int fw_xdp_classify(struct xdp_md *ctx, const int cpumap)
{
	__u64 bytes = (void *)(long)ctx->data_end - (void *)(long)ctx->data;
	struct fw_ct ct;
	__u32 zero = 0;
	struct fw_xdp_handoff *h = bpf_map_lookup_elem(&fw_xdp_handoff, &zero);

	if (!h) /* a per-CPU array's slot 0 is always there */
		return XDP_DROP;
	struct fw_decision *d = &h->d;
	*d = (struct fw_decision){};
	const struct fw_pkt *p = &h->pkt;
	__u32 sel = h->sel;
	if (fw_hdropt_wanted(&h->root))
		fw_xdp_hdropt(ctx, &h->root, &h->pkt);
	fw_classify_in(&h->root, sel, p, d, 1);
	if (!cpumap && h->prio == FW_PRIO_CLASSIFY) /* the class: the priority root's ACCEPT is HIGH */
		return fw_prio_act(ctx, h, d->action == FW_ACT_ACCEPT);
	/* With nothing to record (conntrack off, or no state to write:
	 * fw_ct_commit's first test), the record is not copied out of the
	 * slot nor looked up again. */
	if (d->action == FW_ACT_ACCEPT && h->ct[fw_ct_next_off] != FW_CTS_NONE) {
		__builtin_memcpy(&ct, h->ct, fw_ct_plan_size);
		fw_ct_relink(&ct);
		fw_decide_end(&ct, p, bytes, d);
	}
	fw_xdp_stage(ctx, FW_XDP_STAGE_AUDIT, cpumap); /* as in fw_xdp_ingress */
	return fw_xdp_finish(ctx, h, p, d, bytes, cpumap);
}

SEC("xdp")
int xdpfw_ingress_classify(struct xdp_md *ctx)
{
	return fw_xdp_classify(ctx, 0);
}

/* xdpfw_cpumap's classify stage (fw_cpumap_stages). */
SEC("xdp/cpumap")
int xdpfw_cpumap_classify(struct xdp_md *ctx)
{
	return fw_xdp_classify(ctx, 1);
}

/* The finish stage (fw_xdp_stages[FW_XDP_STAGE_FINISH], on a bulk CPU
 * fw_cpumap_stages'): acts on the decision in the hand-over slot, where
 * the audit stage returns to. */
static __always_inline int fw_xdp_finish_stage(struct xdp_md *ctx, const int cpumap)
{
	__u64 bytes = (void *)(long)ctx->data_end - (void *)(long)ctx->data;
	__u32 zero = 0;
	struct fw_xdp_handoff *h = bpf_map_lookup_elem(&fw_xdp_handoff, &zero);

	if (!h) /* a per-CPU array's slot 0 is always there */
		return XDP_DROP;
	return fw_xdp_finish(ctx, h, &h->pkt, &h->d, bytes, cpumap);
}

SEC("xdp")
int xdpfw_ingress_finish(struct xdp_md *ctx)
{
	return fw_xdp_finish_stage(ctx, 0);
}

SEC("xdp/cpumap")
int xdpfw_cpumap_finish(struct xdp_md *ctx)
{
	return fw_xdp_finish_stage(ctx, 1);
}

/* The audit stage (lib/audit.h): loaded only in the audit instance
 * (fw_trace_mode FW_TRACE_AUDIT), whose tables hold the candidate rule
 * set, and put in fw_xdp_stages[FW_XDP_STAGE_AUDIT] (xdpfw_audit) and
 * fw_cpumap_stages' (xdpfw_cpumap_audit) while it is audited. It
 * classifies the packet in the slot with the candidate, counts, reports a
 * verdict that would differ, and goes on to the live program's finish
 * stage through next (fw_audit_next, fw_audit_cpumap_next): it changes no
 * verdict. */
static __always_inline int fw_xdp_audit(struct xdp_md *ctx, void *next)
{
	__u64 bytes = (void *)(long)ctx->data_end - (void *)(long)ctx->data;
	__u32 zero = 0;
	struct fw_xdp_handoff *h = bpf_map_lookup_elem(&fw_xdp_handoff, &zero);
	struct fw_audit_slot *a = bpf_map_lookup_elem(&fw_audit_slot, &zero);

	if (!h) /* a per-CPU array's slot 0 is always there */
		return XDP_DROP;
	if (a && fw_audit_decide(ctx, h, a, bytes) == 0) {
		__u64 now = fw_now();
		int enforced = h->d.action == FW_ACT_ACCEPT, cand = a->d.action == FW_ACT_ACCEPT;

		fw_audit_count(FW_AUDIT_C_SEEN, bytes, now);
		if (enforced != cand) {
			fw_audit_count(enforced ? FW_AUDIT_C_WOULD_DROP : FW_AUDIT_C_WOULD_ACCEPT, bytes, now);
			fw_audit_event(ctx, &h->pkt, &a->d, h->d.rule_id, bytes);
		}
	}
	bpf_tail_call(ctx, next, 0);
	/* never while the control plane holds next: the enforced verdict,
	 * without what the finish stage adds (counters, REJECT's answer, the
	 * fast path) */
	return h->d.action == FW_ACT_ACCEPT ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int xdpfw_audit(struct xdp_md *ctx)
{
	return fw_xdp_audit(ctx, &fw_audit_next);
}

SEC("xdp/cpumap")
int xdpfw_cpumap_audit(struct xdp_md *ctx)
{
	return fw_xdp_audit(ctx, &fw_audit_cpumap_next);
}

/* The nat stage (lib/natfw.h, lib/natdst.h): loaded only in the nat
 * instance (fw_trace_mode FW_TRACE_NAT), whose tables hold the nat table,
 * and put in fw_xdp_stages[FW_XDP_STAGE_NAT] with `--nat xdpfw`. A new
 * connection's first packet comes here twice: before the filter (nat
 * PREROUTING, then xdpfw_ingress again), and once the filter accepted it
 * (its binding; then the live program's finish stage, its
 * fw_audit_next). */
SEC("xdp")
int xdpfw_nat(struct xdp_md *ctx)
{
	__u64 bytes = (void *)(long)ctx->data_end - (void *)(long)ctx->data;
	__u32 zero = 0;
	struct fw_xdp_handoff *h = bpf_map_lookup_elem(&fw_xdp_handoff, &zero);
	struct fw_audit_slot *a = bpf_map_lookup_elem(&fw_audit_slot, &zero);

	if (!h) /* a per-CPU array's slot 0 is always there */
		return XDP_DROP;
	if (!a)
		return XDP_DROP;
	if (h->nat_state == FW_NAT_S_PRE) { /* nat PREROUTING, then xdpfw_ingress again (lib/natdst.h) */
		if (fw_nat_prerouting(ctx, h, a, bytes) == 0)
			bpf_tail_call(ctx, &fw_audit_next, FW_NAT_NEXT_INGRESS);
		h->nat_pre = 0;
		fw_count_reason(FW_R_NAT_FAIL, XDP_DROP, bytes, fw_now());
		return XDP_DROP;
	}
	if (h->nat_state == FW_NAT_S_PENDING)
		fw_nat_bind_dst(ctx, h, a, bytes);
	else
		fw_nat_stage(ctx, h, a, bytes);
	bpf_tail_call(ctx, &fw_audit_next, 0);
	return XDP_DROP; /* never while the control plane holds fw_audit_next */
}
