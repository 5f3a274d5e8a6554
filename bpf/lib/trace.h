/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The trace hook (see struct fw_trace): when the XDP metadata in front of
 * the packet is exactly a struct fw_trace carrying FW_TRACE_MAGIC, write the
 * decision into it. Only BPF_PROG_TEST_RUN callers set such metadata, so for
 * live traffic this costs one pointer comparison. */
#ifndef XDPFW_TRACE_H
#define XDPFW_TRACE_H

#include <linux/bpf.h>
#include "../types.h"

/* fw_trace_meta returns the trace metadata, or NULL for live packets. */
static __always_inline struct fw_trace *fw_trace_meta(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	struct fw_trace *t = (void *)(long)ctx->data_meta;

	/* Two separate tests: the first gives the verifier the bound; clang
	 * would fold them into one != without the barrier. */
	if ((void *)(t + 1) > data)
		return NULL;
	asm volatile("" : "+r"(t));
	if ((void *)(t + 1) != data)
		return NULL;
	if (t->magic != FW_TRACE_MAGIC)
		return NULL;
	return t;
}

/* fw_trace_reject is fw_trace with what a REJECT decision answers with. */
static __always_inline void fw_trace_reject(struct xdp_md *ctx, __u32 rule_id, __u8 action,
					    __u8 reason, __u8 chain, __u8 reject)
{
	struct fw_trace *t = fw_trace_meta(ctx);

	if (!t)
		return;
	t->rule_id = rule_id;
	t->action = action;
	t->reason = reason;
	t->chain = chain;
	t->reject = reject;
}

static __always_inline void fw_trace(struct xdp_md *ctx, __u32 rule_id, __u8 action,
				     __u8 reason, __u8 chain)
{
	fw_trace_reject(ctx, rule_id, action, reason, chain, 0);
}

#endif
