/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Logging: after the decision, before the act stage, a packet that LOG
 * rules or its deciding rule's --log want logged becomes events in
 * fw_log_ring (struct fw_log_event + the frame's first fw_log_snap bytes),
 * one per logged rule, each within that rule's rate limit. A packet no
 * logged rule wants costs one test of the decision (fw_log_wanted).
 * docs/log.md. */
#ifndef XDPFW_LOG_H
#define XDPFW_LOG_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "classify.h"
#include "stats.h"
#include "ratelimit.h"

/* fw_log_wanted: is there work after the decision, fw_log_emit's? LOG
 * rules noted, the deciding rule's --log, or its -m limit token, or
 * counting entries noted (jumps, RETURNs, rules without -j). */
static __always_inline int fw_log_wanted(const struct fw_decision *d)
{
	return d->nlog | d->flags | d->ncount;
}

static __always_inline void fw_log_count(__u32 which)
{
	if (!fw_live_writes())
		return;
	__u64 *c = bpf_map_lookup_elem(&fw_log_counters, &which);

	if (c)
		(*c)++;
}

/* fw_log_take takes a token from rule_id's bucket (lib/ratelimit.h) and
 * counts the outcome; returns the rule's counters when the event may go
 * out, NULL when it is suppressed. *refused is set when the bucket is the
 * rule's -m limit (FW_BUCKET_MATCH) and had no token: then the rule did
 * not match the packet. */
static __always_inline struct fw_log_stat *fw_log_take(__u32 rule_id, int *refused)
{
	struct fw_bucket *l = bpf_map_lookup_elem(&fw_log_limits, &rule_id);
	struct fw_log_stat *st = bpf_map_lookup_elem(&fw_log_stats, &rule_id);

	if (!l || !st) {
		fw_log_count(FW_LOG_C_NO_LIMIT);
		return NULL;
	}
	if (!fw_rl_take(&l->tat, bpf_ktime_get_ns(), l->interval_ns, l->burst)) {
		st->suppressed++;
		*refused = l->flags & FW_BUCKET_MATCH;
		return NULL;
	}
	return st;
}

/* fw_log_head fills an event's header. */
static __always_inline void fw_log_head(struct fw_log_event *ev, __u32 rule_id, __u8 flags, __u8 hook,
					const struct fw_pkt *p, const struct fw_decision *d, __u64 bytes,
					__u64 cap)
{
	ev->ts_ns = bpf_ktime_get_ns();
	ev->rule_id = rule_id;
	ev->verdict_id = d->rule_id;
	ev->ifindex = p->ifindex;
	ev->pkt_len = bytes;
	ev->cap_len = cap;
	ev->hook = hook;
	ev->chain = p->chain;
	ev->action = d->action;
	ev->reason = d->reason;
	ev->ctstate = p->ctstate;
	ev->flags = flags;
}

/* fw_log_rule returns the i-th logged rule of d and its event flags, or 0
 * past the end: LOG rules in rule order, then the deciding rule (--log). */
static __always_inline __u32 fw_log_rule(const struct fw_decision *d, const struct fw_log_scratch *s,
					 __u32 i, __u8 *flags)
{
	__u32 n = d->nlog;

	if (n > FW_LOG_MAX)
		n = FW_LOG_MAX;
	if (i < n && s) {
		*flags = FW_LOG_F_TARGET;
		return s->ids[i & (FW_LOG_MAX - 1)]; /* the mask bounds the index for the verifier */
	}
	if (i == n && (d->flags & FW_EF_LOG)) {
		*flags = 0;
		return d->rule_id;
	}
	return 0;
}

/* fw_count_notes counts the packet for the rules of the counting entries
 * noted before the decision (fw_count: not in a trace). A global
 * function: verified once. */
__noinline int fw_count_notes(const struct fw_decision *d, __u32 chain, __u64 bytes)
{
	if (!d)
		return 0;
	const struct fw_log_scratch *s = fw_log_scratch_of(chain);
	if (!s)
		return 0;
	__u64 now = fw_now();
	for (__u32 i = 0; i < FW_COUNT_MAX; i++) {
		if (i >= d->ncount)
			break;
		if (s->cidx[i] < s->best)
			fw_count_rule(s->cids[i], bytes, now);
	}
	return 0;
}

/* fw_log_emit puts the events of one packet in the ring buffer (and
 * first takes the token of a deciding rule's -m limit, the one other
 * thing to do after the decision: one test of it for packets that need
 * neither): first it settles which LOG rules log it (d->nlog,
 * fw_log_finish), then each logged rule within its budget gets an event with the frame's first
 * bytes. hook is a constant in each caller: the other hook's copy helper
 * (which its program type may not call) is compiled out. `traced` sets
 * FW_LOG_F_TRACE (a recording trace instance's events, maps.h). */
static __always_inline int fw_log_emit(void *ctx, const __u8 hook, const struct fw_pkt *p,
				       struct fw_decision *d, __u64 bytes, int traced)
{
	__u64 cap = bytes < fw_log_snap ? bytes : fw_log_snap;
	const struct fw_log_scratch *s = NULL;

	if (d->flags & FW_EF_LIMIT) /* the deciding rule's -m limit (lib/classify.h fw_limit) */
		fw_limit(d->rule_id, 1);

	if (d->nlog | d->ncount) {
		fw_log_finish(d, p->chain);
		s = fw_log_scratch_of(p->chain);
	}
	if (d->ncount)
		fw_count_notes(d, p->chain, bytes);
	if (!fw_own_writes()) /* a trace: which rules log it is settled (d->nlog), nothing is sent */
		return 0;
	for (__u32 i = 0; i <= FW_LOG_MAX; i++) {
		__u8 flags = 0;
		__u32 id = fw_log_rule(d, s, i, &flags);
		if (!id)
			break;
		int refused = 0;
		struct fw_log_stat *st = fw_log_take(id, &refused);
		/* a LOG rule counts the packets it matches (and logs), as
		 * iptables': with -m limit, those its limit lets through */
		if ((flags & FW_LOG_F_TARGET) && !refused)
			fw_count_rule(id, bytes, fw_now());
		/* the audit instance counts and takes its budgets (its own),
		 * and sends nothing: its events are lib/audit.h's */
		if (!st || fw_trace_mode == FW_TRACE_AUDIT)
			continue;
		struct fw_log_event *ev = bpf_ringbuf_reserve(&fw_log_ring, sizeof(*ev) + fw_log_snap, 0);
		if (!ev) {
			st->lost++;
			continue;
		}
		if (traced)
			flags |= FW_LOG_F_TRACE;
		__u64 got = cap; /* 64 bits: the bound checked is the register passed */
		if (got > 0 && got <= fw_log_snap) {
			long rc = hook == FW_HOOK_XDP ? bpf_xdp_load_bytes(ctx, 0, ev->data, got)
						      : bpf_skb_load_bytes(ctx, 0, ev->data, got);
			if (rc < 0)
				got = 0;
		}
		fw_log_head(ev, id, flags, hook, p, d, bytes, got);
		bpf_ringbuf_submit(ev, 0);
		st->emitted++;
	}
	return 0;
}

/* The hooks' entries to fw_log_emit. Global functions: verified once, not
 * once per path through the decision code before them. */
__noinline int fw_log_xdp(struct xdp_md *ctx, const struct fw_pkt *p, struct fw_decision *d,
			  __u64 bytes, int traced)
{
	if (!ctx || !p || !d) /* the verifier requires the check on global-function pointers */
		return 0;
	return fw_log_emit(ctx, FW_HOOK_XDP, p, d, bytes, traced);
}

__noinline int fw_log_skb(struct __sk_buff *skb, const struct fw_pkt *p, struct fw_decision *d,
			  __u64 bytes, int traced)
{
	if (!skb || !p || !d)
		return 0;
	return fw_log_emit(skb, FW_HOOK_TC, p, d, bytes, traced);
}

#endif
