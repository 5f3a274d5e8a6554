/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* TCP options: the MSS option's value, for -m tcpmss. Read only when the
 * generation has a rule that tests it (FW_ROOT_MSS), and only by packets
 * the classifier decides, so nothing else pays for the walk. Global
 * functions: the verifier checks each once, whatever calls it. */
#ifndef XDPFW_TCPOPT_H
#define XDPFW_TCPOPT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"

#define FW_TCP_OPT_MAX 40 /* option bytes a TCP header holds at most */

/* The walk's state: the option bytes, how many, where it is, what it found. */
struct fw_mss_walk {
	__u8  b[FW_TCP_OPT_MAX];
	__u32 len;
	__u32 i;
	__u32 mss;
};

/* fw_mss_step is one step of the walk over w->b[0 .. len-1], as the
 * kernel's xt_tcpmss walks: the first MSS option (kind 2, length 4, whole)
 * gives the value; EOL and NOP take one byte (EOL does not end the walk),
 * another option its length (0 counts as 1). A bpf_loop callback: the
 * verifier checks one step, not every path through 40 (a plain loop cost
 * 70k processed instructions in each program). */
static long fw_mss_step(__u64 n, void *arg)
{
	struct fw_mss_walk *w = arg;
	__u32 i = w->i;

	if (i >= w->len || i >= FW_TCP_OPT_MAX - 1)
		return 1;
	__u8 kind = w->b[i], olen = w->b[i + 1];
	if (kind == 2 && olen == 4 && w->len - i >= 4 && i < FW_TCP_OPT_MAX - 3) {
		w->mss = (__u32)w->b[i + 2] << 8 | w->b[i + 3];
		return 1;
	}
	w->i = i + (kind < 2 || !olen ? 1 : olen);
	return 0;
}

/* fw_xdp_mss is the MSS option of the TCP header at off in ctx's frame,
 * whose options are len bytes long, or FW_MSS_NONE. */
__noinline int fw_xdp_mss(struct xdp_md *ctx, __u32 off, __u32 len)
{
	struct fw_mss_walk w = { .len = len, .mss = FW_MSS_NONE };

	if (!ctx || len == 0 || len > FW_TCP_OPT_MAX || off > 0xffff)
		return FW_MSS_NONE;
	if (bpf_xdp_load_bytes(ctx, off + 20, w.b, len) < 0)
		return FW_MSS_NONE;
	bpf_loop(FW_TCP_OPT_MAX, fw_mss_step, &w, 0); /* each step takes a byte at least */
	return w.mss;
}

/* fw_skb_mss is fw_xdp_mss for an skb (tc). */
__noinline int fw_skb_mss(struct __sk_buff *skb, __u32 off, __u32 len)
{
	struct fw_mss_walk w = { .len = len, .mss = FW_MSS_NONE };

	if (!skb || len == 0 || len > FW_TCP_OPT_MAX || off > 0xffff)
		return FW_MSS_NONE;
	if (bpf_skb_load_bytes(skb, off + 20, w.b, len) < 0)
		return FW_MSS_NONE;
	bpf_loop(FW_TCP_OPT_MAX, fw_mss_step, &w, 0);
	return w.mss;
}

/* fw_mss_wanted: must the classifier know p's MSS option? */
static __always_inline int fw_mss_wanted(const struct fw_root *root, const struct fw_pkt *p)
{
	return (root->flags & FW_ROOT_MSS) && p->proto == IPPROTO_TCP && (p->flags & FW_PKT_L4);
}

#endif
