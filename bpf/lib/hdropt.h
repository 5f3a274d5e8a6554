/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Header fields few rules test: TCP's MSS option (-m tcpmss) and the first
 * IPv6 routing header (-m rt). The parser does not read them (every packet
 * would pay, and the verifier would walk each step on every path); the
 * classifier's caller reads them only when the generation has a rule that
 * tests them (FW_ROOT_MSS, FW_ROOT_RT), and only for packets the
 * classifier decides. Global functions, one per hook: the verifier checks
 * each once, whatever calls it; the walks are bpf_loop callbacks, checked
 * one step at a time (a plain loop over the 40 option bytes cost 70k
 * processed instructions in each program). */
#ifndef XDPFW_HDROPT_H
#define XDPFW_HDROPT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"

#define FW_TCP_OPT_MAX 40 /* option bytes a TCP header holds at most */

/* The MSS walk's state: the option bytes, how many, where it is, what it
 * found (-1: none). */
struct fw_mss_walk {
	__u8 b[FW_TCP_OPT_MAX];
	__u32 len;
	__u32 i;
	int mss;
};

/* fw_mss_step is one step of the walk over w->b[0 .. len-1] as the
 * kernel's xt_tcpmss walks: the first MSS option (kind 2, length 4, whole)
 * gives the value; EOL and NOP take one byte (EOL does not end the walk),
 * another option its length (0 counts as 1). */
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

/* The routing header walk's state: where the next header is, which, what
 * was found (the routing header's bytes 1-3: length field, type, segments
 * left, FW_PKT_RT set above them; 0: none). */
struct fw_rt_walk {
	void *ctx; /* the struct xdp_md, or the struct __sk_buff */
	__u32 off;
	__u8 nh;
	__u8 _pad[3];
	__u32 found;
};

/* fw_load reads n bytes at off of ctx's frame into to. */
static __always_inline long fw_load(void *ctx, int xdp, __u32 off, void *to, __u32 n)
{
	return xdp ? bpf_xdp_load_bytes(ctx, off, to, n) : bpf_skb_load_bytes(ctx, off, to, n);
}

/* fw_rt_step is one extension header of the walk, as the parser walks
 * them (parse_ipv6) and as the kernel's ipv6_find_hdr looks for the first
 * routing header: hop-by-hop, routing, destination options, AH and first
 * fragments are stepped over; a non-first fragment or any other header
 * ends the walk. */
static __always_inline long fw_rt_step(struct fw_rt_walk *w, int xdp)
{
	__u8 h[4];
	__u32 len;

	switch (w->nh) {
	case IPPROTO_HOPOPTS:
	case IPPROTO_ROUTING:
	case IPPROTO_DSTOPTS:
	case IPPROTO_AH:
		if (fw_load(w->ctx, xdp, w->off, h, 4) < 0)
			return 1;
		if (w->nh == IPPROTO_ROUTING) {
			w->found = FW_PKT_RT << 24 | (__u32)h[1] << 16 | (__u32)h[2] << 8 | h[3];
			return 1;
		}
		len = w->nh == IPPROTO_AH ? ((__u32)h[1] + 2) * 4 : ((__u32)h[1] + 1) * 8;
		break;
	case IPPROTO_FRAGMENT:
		if (fw_load(w->ctx, xdp, w->off, h, 4) < 0 || (((__u32)h[2] << 8 | h[3]) & 0xfff8))
			return 1;
		len = 8;
		break;
	default:
		return 1;
	}
	w->nh = h[0];
	w->off += len;
	return 0;
}

/* The bpf_loop callbacks of fw_rt_step, one per hook (each calls its
 * hook's helper only). */
static long fw_rt_step_xdp(__u64 n, void *arg) { return fw_rt_step(arg, 1); }
static long fw_rt_step_skb(__u64 n, void *arg) { return fw_rt_step(arg, 0); }

/* fw_hdropt fills in p's MSS option and routing header, as the flags of
 * root ask (XDP: ctx is the struct xdp_md; tc: the struct __sk_buff). */
static __always_inline void fw_hdropt(void *ctx, int xdp, const struct fw_root *root, struct fw_pkt *p)
{
	__u8 doff;

	if ((root->flags & FW_ROOT_MSS) && p->proto == IPPROTO_TCP && (p->flags & FW_PKT_L4) &&
	    fw_load(ctx, xdp, p->l4_off + 12, &doff, 1) == 0) {
		/* the parser checked the data offset: the options are there */
		__u32 len = (doff >> 4) * 4 - 20;
		struct fw_mss_walk w = { .len = len, .mss = -1 };

		/* two tests, each on the register passed: clang would fold
		 * them into one on another, and the verifier not see that
		 * len is 1 .. 40 */
		if (len > FW_TCP_OPT_MAX)
			len = 0;
		asm volatile("" : "+r"(len));
		if (len != 0 && fw_load(ctx, xdp, p->l4_off + 20, w.b, len) == 0) {
			bpf_loop(FW_TCP_OPT_MAX, fw_mss_step, &w, 0); /* each step takes a byte at least */
			if (w.mss >= 0) {
				p->mss = w.mss;
				p->flags |= FW_PKT_MSS;
			}
		}
	}
	if ((root->flags & FW_ROOT_RT) && p->family == 6) {
		struct fw_rt_walk w = { .ctx = ctx, .off = p->l3_off + 40 };
		__u8 nh;

		if (fw_load(ctx, xdp, p->l3_off + 6, &nh, 1) == 0) {
			w.nh = nh;
			bpf_loop(FW_MAX_EXTHDR, xdp ? fw_rt_step_xdp : fw_rt_step_skb, &w, 0);
			if (w.found) {
				p->flags |= FW_PKT_RT;
				p->rt_hdrlen = w.found >> 16;
				p->rt_type = w.found >> 8;
				p->rt_segsleft = w.found;
			}
		}
	}
}

/* fw_xdp_hdropt is fw_hdropt at XDP. */
__noinline int fw_xdp_hdropt(struct xdp_md *ctx, const struct fw_root *root, struct fw_pkt *p)
{
	if (!ctx || !root || !p) /* the verifier requires the check on global-function pointers */
		return 0;
	fw_hdropt(ctx, 1, root, p);
	return 0;
}

/* fw_skb_hdropt is fw_hdropt at tc. */
__noinline int fw_skb_hdropt(struct __sk_buff *skb, const struct fw_root *root, struct fw_pkt *p)
{
	if (!skb || !root || !p)
		return 0;
	fw_hdropt(skb, 0, root, p);
	return 0;
}

/* fw_hdropt_wanted: does root's classifier read a field fw_hdropt fills? */
static __always_inline int fw_hdropt_wanted(const struct fw_root *root)
{
	return root->flags & (FW_ROOT_MSS | FW_ROOT_RT);
}

#endif
