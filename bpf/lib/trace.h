/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The trace hook (see struct fw_trace), in trace instances only (maps.h
 * fw_trace_mode): when the XDP metadata in front of the packet is exactly
 * a struct fw_trace carrying FW_TRACE_MAGIC, write the decision into it;
 * at tc, the same in skb->cb. The live instance, attached to interfaces,
 * has fw_trace_mode FW_TRACE_OFF: every function here is a constant no-op
 * the verifier prunes, so nothing a packet carries (metadata another XDP
 * program wrote, skb->cb that any tc program may set) can steer it. */
#ifndef XDPFW_TRACE_H
#define XDPFW_TRACE_H

#include <linux/bpf.h>
#include "../types.h"
#include "../maps.h"
#include "classify.h"

/* fw_trace_meta returns the trace struct in front of the packet, or NULL. */
static __always_inline struct fw_trace *fw_trace_meta(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	struct fw_trace *t = (void *)(long)ctx->data_meta;

	if (!fw_tracing())
		return NULL;
	/* Two separate tests: the first gives the verifier the bound; clang
	 * would fold them into one != without the barrier. */
	if ((void *)(t + 1) > data)
		return NULL;
	asm volatile("" : "+r"(t));
	if ((void *)(t + 1) != data)
		return NULL;
	return t->magic == FW_TRACE_MAGIC ? t : NULL;
}

/* fw_trace_ctstate: the connection trace t (NULL: none) asks to assume,
 * or -1: state | ctinfo << 8 | ctproto << 16 (fw_decide_start). */
static __always_inline int fw_trace_ctstate(const struct fw_trace *t)
{
	if (!t || !(t->in_flags & FW_TRACE_CTSTATE) || t->in_ctstate >= FW_CT_NUM_STATES)
		return -1;
	return t->in_ctstate | (__u32)t->in_ctinfo << 8 | (__u32)t->in_ctproto << 16;
}

static __always_inline void fw_trace_fill(struct fw_trace *t, __u32 rule_id, __u8 action,
					  __u8 reason, const struct fw_pkt *p, __u8 reject)
{
	t->rule_id = rule_id;
	t->action = action;
	t->reason = reason;
	t->chain = p->chain;
	t->ctstate = p->ctstate;
	t->reject = reject;
}

/* fw_trace_reject is fw_trace with what a REJECT decision answers with. */
static __always_inline void fw_trace_reject(struct xdp_md *ctx, __u32 rule_id, __u8 action,
					    __u8 reason, const struct fw_pkt *p, __u8 reject)
{
	struct fw_trace *t = fw_trace_meta(ctx);

	if (t)
		fw_trace_fill(t, rule_id, action, reason, p, reject);
}

/* fw_trace_decision reports a classifier decision, with what logs it. */
static __always_inline void fw_trace_decision(struct xdp_md *ctx, const struct fw_decision *d,
					      const struct fw_pkt *p)
{
	struct fw_trace *t = fw_trace_meta(ctx);

	if (!t)
		return;
	fw_trace_fill(t, d->rule_id, d->action, d->reason, p, d->reject);
	t->log_n = d->nlog;
	t->log_self = (d->flags & FW_EF_LOG) ? 1 : 0;
}

static __always_inline void fw_trace(struct xdp_md *ctx, __u32 rule_id, __u8 action,
				     __u8 reason, const struct fw_pkt *p)
{
	fw_trace_reject(ctx, rule_id, action, reason, p, 0);
}

/* The tc hook's trace: BPF_PROG_TEST_RUN callers put FW_TRACE_CB_MAGIC in
 * skb->cb[0] (and FW_TRACE_CTSTATE << 8 | state | ctinfo << 16 | ctproto
 * << 24 in cb[3] to assume a connection); the program answers in cb[1] (rule id), cb[2]
 * (action, reason, chain, ctstate: one byte each, low first) and cb[4]
 * (LOG rules that logged it, 1 << 8 when its deciding rule did too, and
 * enum fw_reject of a REJECT decision << 16). */
#define FW_TRACE_CB_MAGIC 0x78647066 /* "xdpf" */
static __always_inline int fw_trace_skb_ctstate(struct __sk_buff *skb)
{
	if (!fw_tracing())
		return -1;
	__u32 in = skb->cb[3];

	if (skb->cb[0] != FW_TRACE_CB_MAGIC || !((in >> 8) & FW_TRACE_CTSTATE) || (in & 0xff) >= FW_CT_NUM_STATES)
		return -1;
	return (in & 0xff) | (in >> 8 & 0xffff00);
}

static __always_inline void fw_trace_skb_reject(struct __sk_buff *skb, __u32 rule_id, __u8 action,
						__u8 reason, const struct fw_pkt *p, __u8 reject)
{
	if (!fw_tracing() || skb->cb[0] != FW_TRACE_CB_MAGIC)
		return;
	skb->cb[1] = rule_id;
	skb->cb[2] = action | (__u32)reason << 8 | (__u32)p->chain << 16 | (__u32)p->ctstate << 24;
	skb->cb[4] = (__u32)reject << 16;
}

static __always_inline void fw_trace_skb(struct __sk_buff *skb, __u32 rule_id, __u8 action,
					 __u8 reason, const struct fw_pkt *p)
{
	fw_trace_skb_reject(skb, rule_id, action, reason, p, 0);
}

/* fw_trace_skb_log adds to cb[4] (after fw_trace_skb_reject): LOG rules
 * that logged the packet, and 1 << 8 when its deciding rule did too. */
static __always_inline void fw_trace_skb_log(struct __sk_buff *skb, const struct fw_decision *d)
{
	if (!fw_tracing() || skb->cb[0] != FW_TRACE_CB_MAGIC)
		return;
	skb->cb[4] |= d->nlog | ((d->flags & FW_EF_LOG) ? 1u << 8 : 0);
}

#endif
