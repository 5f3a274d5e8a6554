/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The nat OUTPUT chain at tc egress (`--nat xdpfw`, docs/nat.md "Locally
 * generated traffic"): DNAT of the connections this host opens, as the
 * kernel's nat OUTPUT hook (nf_nat_ipv4_local_fn) does it: on a
 * connection's first packet, before filter OUTPUT, which judges the
 * translated destination; the packet re-routed when its destination
 * changed (ip_route_me_harder); the answers translated back at XDP after
 * filter INPUT (the kernel's LOCAL_IN source manipulation runs after the
 * filter: lib/natfw.h fw_nat_local_in).
 *
 * - xdpfw_egress, before the filter: fw_nat_out_pre looks the packet's
 *   tuple up in fw_nat_binds. A connection nat OUTPUT translated has its
 *   destination rewritten now (FW_NAT_S_OUT).
 * - In fw_decide, once conntrack says the packet is a new connection's
 *   first (NEW, no entry before it) and it has no binding:
 *   fw_nat_to_output tail-calls the nat instance's xdpfw_egress_nat
 *   (fw_tc_stages[FW_TC_STAGE_NAT]), which classifies it against nat
 *   OUTPUT (the nat instance's tables, OUTPUT's slot), rewrites the
 *   destination for DNAT and enters the live xdpfw_egress again
 *   (fw_tc_stages[FW_TC_STAGE_EGRESS]) with FW_NAT_S_PENDING (or
 *   FW_NAT_S_AGAIN: left as it is): parsed again, conntrack and filter
 *   OUTPUT on the translated tuple.
 * - Filter OUTPUT accepted (fw_nat_out_post): a pending connection is
 *   bound (its tuple to the translated one, the answers' back, and the
 *   translated tuple to a mark, {0}, that says "judged": a packet the
 *   re-route sends through an egress program of xdpfw again passes as it
 *   is); then the packet is re-routed: the FIB's answer for the new
 *   destination, MACs rewritten on the same device, else bpf_redirect_neigh
 *   to the FIB's device. No route (a local destination, unreachable, a
 *   device without forwarding, which bpf_fib_lookup needs): dropped,
 *   counted (no_route), never sent to the untranslated destination. */
#ifndef XDPFW_NATOUT_H
#define XDPFW_NATOUT_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "nat.h"
#include "nattc.h"
#include "natfw.h"
#include "natdst.h"

/* fw_nat_out_dst sets the destination of the parsed packet p to to's. */
static __always_inline void fw_nat_out_dst(struct fw_pkt *p, const struct fw_nat_rw *to)
{
	__builtin_memcpy(&p->dst, &to->daddr, 4);
	if (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP)
		p->dport = bpf_ntohs(to->dport);
}

/* fw_nat_out_pre: tc egress, before the filter, the IPv4 packet in slot s
 * (parsed from skb). Entered again by the nat stage (FW_NAT_S_PENDING,
 * FW_NAT_S_AGAIN): its state kept. Else its binding (the one lookup of a
 * locally sent packet, kept in s for fw_nat_out_post): nat OUTPUT's mark
 * (1: already judged, passed as it is); one that changes its destination
 * (nat OUTPUT): the destination rewritten now, FW_NAT_S_OUT, s->nat the
 * tuple it leaves with, s->nat_key the one it was sent with; any other:
 * FW_NAT_S_BOUND, s->nat the binding (fw_nat_tc after the filter); none,
 * or an ICMP error (its quote's binding counts: fw_nat_tc): FW_NAT_S_NONE. 0: go
 * on (skb's data pointers may have changed), -1: drop (the rewrite
 * failed). A global function: its frame is not stacked
 * on the classifier's (the verifier's 512 bytes). */
__noinline int fw_nat_out_pre(struct __sk_buff *skb, struct fw_tc_slot *s)
{
	if (!skb || !s) /* the verifier requires the check on global-function pointers */
		return -1;
	struct fw_pkt *p = &s->pkt;
	__u32 st = s->nat_state;
	struct fw_nat_tuple k;

	if (s->nat_again && (st == FW_NAT_S_PENDING || st == FW_NAT_S_AGAIN)) {
		s->nat_again = 0;
		return 0;
	}
	s->nat_again = 0;
	s->nat_state = FW_NAT_S_NONE;
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	if (p->family != 4 || p->l3_off > 64 || (p->flags & FW_PKT_FRAG) ||
	    (p->proto == IPPROTO_ICMP && fw_nat_icmp_error(p->icmp_type)) || fw_nat_key4(data + p->l3_off, end, &k))
		return 0;
	const struct fw_nat_rw *b = bpf_map_lookup_elem(&fw_nat_binds, &k);
	if (!b)
		return 0;
	if (!b->daddr)
		return 1;
	s->nat_state = FW_NAT_S_BOUND;
	if (b->daddr == k.daddr && b->dport == k.dport) {
		s->nat = *b;
		return 0;
	}
	struct fw_nat_rw to = {.saddr = k.saddr, .daddr = b->daddr, .sport = k.sport, .dport = b->dport};
	s->nat = to;
	s->nat_key = k;
	s->nat_state = FW_NAT_S_OUT;
	if (fw_nat_tc_rw(skb, p, &k, &to))
		return -1;
	fw_nat_out_dst(p, &to);
	return 0;
}

/* fw_nat_local_in: XDP, INPUT accepted the IPv4 packet in h (frame of
 * ctx): a bound packet whose binding changes its source has it rewritten
 * now (the answers of a connection nat OUTPUT translated: the kernel's
 * LOCAL_IN source manipulation runs after filter INPUT), an ICMP error
 * about a connection translated so likewise (fw_nat_out_error). An
 * answer of a translated connection without its binding (the LRU took it:
 * only nat OUTPUT's answers are delivered here so) returns -1, counted
 * lost: dropped, never delivered untranslated. A global function:
 * verified once, not once for each path of the classifier before it (the
 * classify stage finishes too). */
__noinline int fw_nat_local_in(struct xdp_md *ctx, struct fw_xdp_handoff *h)
{
	if (!ctx || !h) /* the verifier requires the check on global-function pointers */
		return 0;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	const struct fw_pkt *p = &h->pkt;

	if (p->family != 4 || p->l3_off > 64)
		return 0;
	if (h->nat_state == FW_NAT_S_NONE && (p->ctinfo & FW_CTI_XNAT) && (p->ctinfo & FW_CTI_REPLY)) {
		fw_nat_count(FW_NAT_C_LOST, p->l3_len);
		return -1;
	}
	if (h->nat_state == FW_NAT_S_ERROR) {
		fw_nat_out_error(data, end, h, p);
	} else if (h->nat_state == FW_NAT_S_BOUND) {
		h->nat_state = FW_NAT_S_DONE;
		if (h->nat.saddr != h->nat_key.saddr || h->nat.sport != h->nat_key.sport)
			fw_nat_post(data + p->l3_off, end, &h->nat);
	}
	return 0;
}

/* fw_nat_to_output: in fw_decide, conntrack known: a new connection's
 * first packet (NEW, no entry before it) without a binding, IPv4, not a
 * later fragment, not yet through nat OUTPUT, goes to the nat stage (a
 * tail call: it does not return), unless no nat OUTPUT rule translates
 * (fw_nat_no_hook). Back from it with its destination
 * translated, the packet is DNAT to filter OUTPUT (fw_nat_first_ctinfo).
 * 0: go on; -1: the nat stage is missing (never while the control plane
 * holds fw_tc_stages): fail closed. */
static __always_inline int fw_nat_to_output(struct __sk_buff *skb, struct fw_pkt *p)
{
	__u32 zero = 0;
	struct fw_tc_slot *s = bpf_map_lookup_elem(&fw_tc_pkt, &zero);

	if (!s)
		return -1;
	fw_nat_first_ctinfo(s->nat_state, p, &s->nat_key, &s->nat);
	if (s->nat_state == FW_NAT_S_AGAIN) { /* been there: left as it is */
		s->nat_state = FW_NAT_S_NONE;
		return 0;
	}
	if (fw_nat_no_hook[FW_NAT_HOOK_OUTPUT] || s->nat_state != FW_NAT_S_NONE || p->family != 4 ||
	    p->ctstate != FW_CT_NEW || (p->ctinfo & FW_CTI_CONFIRMED) || (p->flags & FW_PKT_FRAG))
		return 0;
	bpf_tail_call(skb, &fw_tc_stages, FW_TC_STAGE_NAT);
	return -1;
}

/* fw_nat_out_route re-routes the packet p of skb, whose destination nat
 * OUTPUT changed (ip_route_me_harder): the FIB's route for it, looked up
 * as the kernel looks up an output route, from the loopback device (its
 * flowi4_iif: policy rules on `iif lo` are followed, those on the
 * socket's device or mark are not). bpf_fib_lookup answers only for a
 * device that forwards: the loopback's (net.ipv4.conf.lo.forwarding,
 * which does not make the host forward what its other devices receive)
 * is what it needs; `load`
 * turns it on when nat OUTPUT translates, so that a host that forwards
 * nothing (net.ipv4.ip_forward=0) can use nat OUTPUT, as the kernel's
 * (internal/firewall startNAT). The same
 * device: its MACs rewritten, TC_ACT_OK; another, or no neighbour yet:
 * bpf_redirect_neigh to it (the kernel resolves the neighbour), whose
 * egress program, if xdpfw's, finds the mark and passes it. -1: no route
 * (counted no_route): dropped; so is a packet bigger than the new
 * device's MTU (the kernel would fragment it or answer it locally), and
 * one the FIB refuses since the loopback does not forward. */
static __always_inline int fw_nat_out_route(struct __sk_buff *skb, const struct fw_pkt *p)
{
	struct bpf_fib_lookup fib = {};

	/* tot_len 0: the helper holds the skb to the device's MTU itself, GSO
	 * aware (is_skb_forwardable): a TSO send is not "too big" */
	fw_nat_fib4(&fib, p, 1); /* LOOPBACK_IFINDEX */
	int rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS && fib.ifindex == skb->ifindex) {
		if (bpf_skb_store_bytes(skb, 0, fib.dmac, 6, 0) || bpf_skb_store_bytes(skb, 6, fib.smac, 6, 0))
			return -1;
		return TC_ACT_OK;
	}
	if (rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return bpf_redirect_neigh(fib.ifindex, 0, 0, 0);
	fw_nat_count(FW_NAT_C_NO_ROUTE, p->l3_len);
	return -1;
}

/* fw_nat_out_post: tc egress, filter OUTPUT accepted the packet in slot
 * s (tc action rc so far: TC_ACT_OK). A connection nat OUTPUT translated
 * (FW_NAT_S_PENDING) is bound: its first tuple to the translated one, the
 * answers' back, the translated one to the mark; its conntrack entry
 * marked (FW_CTF_XDNAT: an answer without a binding is dropped, never
 * taken untranslated). A packet whose destination changed (that one, or
 * FW_NAT_S_OUT) is re-routed. Any other packet: fw_nat_tc, with the
 * binding fw_nat_out_pre found (FW_NAT_S_BOUND) or none. Returns the tc
 * action, or -1: drop (the binding refused: counted no_port; no route).
 * A global function, as fw_nat_out_pre. */
__noinline int fw_nat_out_post(struct __sk_buff *skb, struct fw_tc_slot *s, __u64 bytes)
{
	if (!skb || !s)
		return -1;
	const struct fw_pkt *p = &s->pkt;
	__u32 st = s->nat_state;

	s->nat_state = FW_NAT_S_NONE;
	if (st == FW_NAT_S_PENDING) {
		struct fw_nat_tuple mark = {.saddr = s->nat.saddr, .daddr = s->nat.daddr, .sport = s->nat.sport,
					    .dport = s->nat.dport, .proto = s->nat_key.proto};
		struct fw_nat_rw judged = {};

		if (fw_nat_bind4(&fw_nat_binds, &s->nat_key, &s->nat, 0)) {
			fw_nat_count(FW_NAT_C_NO_PORT, bytes);
			return -1;
		}
		bpf_map_update_elem(&fw_nat_binds, &mark, &judged, BPF_ANY);
		fw_nat_count(FW_NAT_C_OUTPUT, bytes);
		fw_nat_ct_mark(p, &s->nat_key); /* what it changes (--ctstate DNAT; an answer without its binding: lost) */
	}
	/* the kernel re-routes when the address changed (a port alone: not) */
	if (st == FW_NAT_S_PENDING || st == FW_NAT_S_OUT)
		return s->nat.daddr == s->nat_key.daddr ? TC_ACT_OK : fw_nat_out_route(skb, p);
	/* a binding's rewrite after the filter: the one fw_nat_out_pre found
	 * (a packet the nat stage left alone had none: fw_nat_to_output) */
	return fw_nat_tc(skb, p, &s->nat, st == FW_NAT_S_BOUND) < 0 ? -1 : TC_ACT_OK;
}

/* fw_nat_output is the nat stage at tc egress (xdpfw_egress_nat, the nat
 * instance): nat OUTPUT for the first packet in slot s, then the live
 * xdpfw_egress again. DNAT: the destination (fw_nat_dst) rewritten,
 * FW_NAT_S_PENDING with the tuples in s; else FW_NAT_S_AGAIN. Returns only
 * to drop: the way back missing, a rewrite failed, a first fragment of a
 * connection nat OUTPUT translates (its later fragments carry no ports;
 * counted fragment), a REDIRECT (refused at load: its address is the
 * loopback's). */
static __always_inline int fw_nat_output(struct __sk_buff *skb, struct fw_tc_slot *s, struct fw_decision *d)
{
	struct fw_pkt *p = &s->pkt;
	struct fw_nat_tuple k;
	struct fw_nat_rw out;
	__u64 bytes = skb->len;

	s->nat_state = FW_NAT_S_AGAIN;
	const struct fw_nat_target *t = fw_nat_rule_of(p, d, NULL); /* nat OUTPUT, in OUTPUT's slot */
	if (t && t->kind == FW_NAT_DNAT) {
		void *data = (void *)(long)skb->data;
		void *end = (void *)(long)skb->data_end;
		if (p->l3_off > 64 || fw_nat_key4(data + p->l3_off, end, &k) || fw_nat_dst(p, &k, t, &out))
			goto drop;
		if (p->flags & FW_PKT_FRAG1) {
			fw_nat_count(FW_NAT_C_FRAG, bytes);
			goto drop;
		}
		if (fw_nat_tc_rw(skb, p, &k, &out))
			goto drop;
		s->nat_key = k;
		s->nat = out;
		s->nat_state = FW_NAT_S_PENDING;
	} else if (t && t->kind != FW_NAT_NONE) {
		goto drop;
	} else {
		fw_nat_count(FW_NAT_C_UNTRANSLATED, bytes);
	}
	s->nat_again = 1;
	bpf_tail_call(skb, &fw_tc_stages, FW_TC_STAGE_EGRESS);
drop:
	s->nat_again = 0;
	s->nat_state = FW_NAT_S_NONE;
	fw_count_reason(FW_R_NAT_FAIL, FW_OUT_TC_SHOT, bytes, fw_now());
	return TC_ACT_SHOT;
}

#endif
