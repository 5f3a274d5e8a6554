/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Fragments as iptables sees them. The kernel reassembles a datagram before
 * the filter table (IPv4 local delivery always; otherwise conntrack's
 * defrag), so a rule sees it once, ports included. Here the first fragment
 * is decided as a whole packet (its L4 header is there) and its verdict is
 * recorded in fw_frag under the datagram's identity; every later fragment
 * takes that verdict. A later fragment of no recorded datagram (its first
 * fragment lost, late, evicted or expired) is dropped: nothing can say what
 * its datagram's ports are. One that starts inside what the first fragment
 * carried (an overlap: RFC 1858's offset-1 TCP fragment, RFC 5722) is
 * dropped, and so is the rest of its datagram, as the kernel's reassembly
 * discards it. docs/fragments.md. */
#ifndef XDPFW_FRAG_H
#define XDPFW_FRAG_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "ct.h"
#include "stats.h"
#include "classify.h"

/* fw_frag_key_of fills the per-CPU scratch's key with p's datagram and
 * returns the scratch (NULL never happens: slot 0 of a per-CPU array). */
static __always_inline struct fw_frag_scratch *fw_frag_key_of(const struct fw_pkt *p)
{
	__u32 zero = 0;
	struct fw_frag_scratch *s = bpf_map_lookup_elem(&fw_frag_scratch, &zero);

	if (!s)
		return NULL;
	s->k.src[0] = p->src[0];
	s->k.src[1] = p->src[1];
	s->k.dst[0] = p->dst[0];
	s->k.dst[1] = p->dst[1];
	s->k.id = p->frag_id;
	s->k.family = p->family;
	/* IPv6: a later fragment's next header is the first header of the
	 * fragmentable part (maybe an extension header), not the protocol */
	s->k.proto = p->family == 4 ? p->proto : 0;
	s->k.chain = p->chain;
	s->k._pad = 0;
	return s;
}

/* fw_frag_later decides a later fragment (FW_PKT_FRAG): the verdict of
 * its datagram's first fragment (a REJECT's unanswered: the hooks drop
 * what they do not accept), or a drop. Returns -1 when no rule set
 * is installed (fail closed), else 0. */
static __always_inline int fw_frag_later(struct fw_pkt *p, struct fw_decision *d)
{
	if (fw_active_sel() < 0)
		return -1;
	p->ctstate = FW_CT_UNTRACKED; /* conntrack saw the datagram in its first fragment */
	struct fw_frag_scratch *s = fw_frag_key_of(p);
	struct fw_frag_entry *e = s ? bpf_map_lookup_elem(&fw_frag, &s->k) : NULL;

	d->rule_id = 0;
	d->action = FW_ACT_DROP;
	if (!e || e->expires <= bpf_ktime_get_coarse_ns()) {
		if (e)
			fw_ct_count(FW_CT_STAT_FRAG_EXPIRED);
		fw_ct_count(FW_CT_STAT_FRAG_UNKNOWN);
		d->reason = FW_R_FRAG_UNKNOWN;
		return 0;
	}
	if (p->frag < e->end) {
		/* it would rewrite what the first fragment's verdict was made
		 * on: the datagram is dropped from here on */
		if (e->reason != FW_R_FRAG_OVERLAP && fw_live_writes()) {
			e->rule_id = 0;
			e->action = FW_ACT_DROP;
			e->reason = FW_R_FRAG_OVERLAP;
		}
		fw_ct_count(FW_CT_STAT_FRAG_OVERLAP);
		d->reason = FW_R_FRAG_OVERLAP;
		return 0;
	}
	d->rule_id = e->rule_id;
	d->action = e->action;
	d->reason = e->reason;
	d->reject = e->reject;
	if (e->action == FW_ACT_REJECT)
		d->reason = FW_R_REJECT_FRAG; /* the first fragment was answered; the rest are dropped */
	return 0;
}

/* fw_frag_count counts a later fragment: its bytes on the deciding rule,
 * not a packet (iptables counts the reassembled datagram once, on its
 * first fragment here); the frame under its reason and outcome (enum
 * fw_out). */
static __always_inline void fw_frag_count(const struct fw_decision *d, __u32 out, __u64 bytes)
{
	__u64 now = fw_now();

	fw_count_rule_n(d->rule_id, 0, bytes, now);
	fw_count_reason(d->reason, out, bytes, now);
}

/* fw_frag_record records a first fragment's final verdict (d) for the
 * rest of its datagram. */
static __always_inline void fw_frag_record(const struct fw_pkt *p, const struct fw_decision *d)
{
	if (!(p->flags & FW_PKT_FRAG1) || !fw_live_writes())
		return;
	struct fw_frag_scratch *s = fw_frag_key_of(p);
	if (!s)
		return;
	s->e.expires = bpf_ktime_get_coarse_ns() + FW_FRAG_TIMEOUT_S * 1000000000ULL;
	s->e.rule_id = d->rule_id;
	s->e.end = p->frag;
	s->e.action = d->action;
	s->e.reason = d->reason;
	s->e.reject = d->reject;
	bpf_map_update_elem(&fw_frag, &s->k, &s->e, BPF_ANY);
	fw_ct_count(FW_CT_STAT_FRAG_TRACKED);
}

#endif
