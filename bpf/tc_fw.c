/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* xdpfw egress (tc, attached with tcx or clsact): the OUTPUT chain for
 * packets this host sends: parse, decide (conntrack + classify), log, act
 * (pass, drop, or turn a REJECT into its answer and send that into this
 * host's stack), translate (`--nat xdpfw`: the answers of connections
 * translated to this host, lib/nattc.h), count. Forwarded packets were
 * decided by the XDP program where they came in and pass. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "types.h"
#include "maps.h"
#include "lib/parse.h"
#include "lib/verdict.h"
#include "lib/reject.h"
#include "lib/stats.h"
#include "lib/trace.h"
#include "lib/log.h"
#include "lib/frag.h"
#include "lib/latency.h"
#include "lib/nattc.h"
#include "lib/natout.h"

/* Headers a locally built packet may keep outside the linear area are
 * pulled in: up to this many bytes. */
#define FW_TC_PULL 256

SEC("tc")
int xdpfw_egress(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct fw_tc_slot *slot = bpf_map_lookup_elem(&fw_tc_pkt, &zero);
	struct fw_decision d = {};
	__u64 bytes = skb->len;
	int rc;

	/* skb_iif is set where a packet entered the host: forwarded traffic
	 * already met the FORWARD chain at ingress. Local packets have 0. */
	if (skb->ingress_ifindex)
		return TC_ACT_OK;
	if (!slot) /* never: a per-CPU array's only slot */
		return TC_ACT_SHOT;
	struct fw_lat_clock *lat = &slot->lat;
	fw_lat_start(lat); /* forwarded packets, passed above, are not timed */
	struct fw_pkt *pkt = &slot->pkt;
	__builtin_memset(pkt, 0, sizeof(*pkt));
	__u32 linear = skb->data_end - skb->data;
	if (linear < FW_TC_PULL && skb->len > linear)
		bpf_skb_pull_data(skb, skb->len < FW_TC_PULL ? skb->len : FW_TC_PULL);

	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	pkt->chain = FW_CHAIN_OUTPUT;
	rc = fw_parse(data, data_end, skb->len, 0, pkt, 0);
	if (rc == FW_PARSE_NOT_IP) {
		fw_count_reason(FW_R_NOT_IP, FW_OUT_TC_OK, bytes, fw_now());
		fw_trace_skb(skb, 0, 0xff, FW_R_NOT_IP, pkt);
		fw_lat_end(lat, FW_CHAIN_OUTPUT, FW_LAT_PASS);
		return TC_ACT_OK;
	}
	if (rc < 0) {
		__u8 act = fw_malformed_action();
		int tc = act == FW_ACT_ACCEPT ? TC_ACT_OK : TC_ACT_SHOT;
		fw_count_reason(-rc, fw_tc_out(tc), bytes, fw_now());
		fw_trace_skb(skb, 0, act, -rc, pkt);
		fw_lat_end(lat, FW_CHAIN_OUTPUT, act);
		return tc;
	}
	pkt->ifindex = skb->ifindex;
	pkt->mark = skb->mark; /* -m mark: a socket's SO_MARK, or what the kernel's rules set */
	pkt->oifindex = skb->ifindex; /* -o: the device this egress program runs on */
	if (fw_nat_mode) { /* a connection nat OUTPUT translated: its destination, before the filter (lib/natout.h) */
		rc = fw_nat_out_pre(skb, slot);
		if (rc > 0) { /* judged before a re-route sent it here again */
			fw_lat_end(lat, FW_CHAIN_OUTPUT, FW_LAT_PASS);
			return TC_ACT_OK;
		}
		if (rc < 0) {
			fw_count_reason(FW_R_NAT_FAIL, FW_OUT_TC_SHOT, bytes, fw_now());
			fw_lat_end(lat, FW_CHAIN_OUTPUT, FW_LAT_DROP);
			return TC_ACT_SHOT;
		}
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
	}
	if (pkt->flags & FW_PKT_FRAG) { /* a later fragment: its datagram's verdict */
		if (fw_frag_later(pkt, &d) < 0) {
			fw_count_reason(FW_R_NO_RULESET, FW_OUT_TC_SHOT, bytes, fw_now());
			fw_trace_skb(skb, 0, FW_ACT_DROP, FW_R_NO_RULESET, pkt);
			fw_lat_end(lat, FW_CHAIN_OUTPUT, FW_LAT_DROP);
			return TC_ACT_SHOT;
		}
		rc = d.action == FW_ACT_ACCEPT ? TC_ACT_OK : TC_ACT_SHOT;
		/* its datagram's translation (lib/nattc.h) */
		if (fw_nat_mode && rc == TC_ACT_OK && fw_nat_tc_frag(skb, pkt) < 0) {
			rc = TC_ACT_SHOT;
			d.reason = FW_R_NAT_FAIL;
		}
		fw_frag_count(&d, fw_tc_out(rc), bytes);
		fw_trace_skb_reject(skb, d.rule_id, d.action, d.reason, pkt, d.reject);
		fw_lat_end(lat, FW_CHAIN_OUTPUT, d.action);
		return rc;
	}
	if (fw_decide(skb, data, data_end, pkt, bytes, &d, fw_trace_skb_ctstate(skb)) < 0) {
		fw_count_reason(FW_R_NO_RULESET, FW_OUT_TC_SHOT, bytes, fw_now());
		fw_trace_skb(skb, 0, FW_ACT_DROP, FW_R_NO_RULESET, pkt);
		fw_lat_end(lat, FW_CHAIN_OUTPUT, FW_LAT_DROP);
		return TC_ACT_SHOT;
	}
	if (fw_log_wanted(&d)) /* before REJECT rewrites the packet */
		fw_log_skb(skb, pkt, &d, bytes, fw_tracing());
	rc = d.action == FW_ACT_ACCEPT ? TC_ACT_OK : TC_ACT_SHOT;
	if (d.action == FW_ACT_REJECT)
		rc = fw_reject_tc(skb, pkt, &d); /* the answer, redirected into this host; or drop; sets d.reason */
	/* a translated connection's packet: its binding, after OUTPUT
	 * (lib/nattc.h); nat OUTPUT's binding and re-route (lib/natout.h) */
	if (fw_nat_mode && rc == TC_ACT_OK) {
		rc = fw_nat_out_post(skb, slot, bytes);
		if (rc < 0) {
			rc = TC_ACT_SHOT;
			d.reason = FW_R_NAT_FAIL;
		}
	}
	__u64 now = fw_now();
	fw_count_rule(d.rule_id, bytes, now);
	fw_count_reason(d.reason, fw_tc_out(rc), bytes, now);
	fw_trace_skb_reject(skb, d.rule_id, d.action, d.reason, pkt, d.reject);
	fw_trace_skb_log(skb, &d);
	fw_lat_end(lat, FW_CHAIN_OUTPUT, d.action);
	fw_frag_record(pkt, &d); /* last: the verifier splits on the flag, with nothing left to check twice */
	return rc;
}

/* The nat stage at tc egress (lib/natout.h): loaded only in the nat
 * instance (fw_trace_mode FW_TRACE_NAT), whose tables hold the nat table,
 * and put in fw_tc_stages[FW_TC_STAGE_NAT] with `--nat xdpfw`: nat OUTPUT
 * for a new connection's first packet, then the live xdpfw_egress again. */
SEC("tc")
int xdpfw_egress_nat(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct fw_tc_slot *slot = bpf_map_lookup_elem(&fw_tc_pkt, &zero);
	struct fw_decision d;

	if (!slot) /* never: a per-CPU array's only slot */
		return TC_ACT_SHOT;
	return fw_nat_output(skb, slot, &d);
}
