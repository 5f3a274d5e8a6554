/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* NAT in the firewall's XDP programs (`--nat xdpfw`, docs/nat.md): the
 * bindings of lib/nat.h looked up for every IPv4 packet, and the nat
 * stage that binds a forwarded connection's first packet.
 *
 * With fw_nat_mode set at load:
 * - xdpfw_ingress, before it picks the chain: fw_nat_in looks the
 *   packet's tuple up in fw_nat_binds; found, the destination is
 *   rewritten (the answer to a source-translated connection goes back to
 *   its client) and the packet is judged as iptables' filter sees it;
 * - the finish (fw_xdp_finish), once FORWARD accepts: fw_nat_out rewrites
 *   a bound packet's source (SNAT, MASQUERADE), or sends the first packet
 *   of a connection without a binding to the nat stage;
 * - the nat stage (xdpfw_nat, the object loaded again as the nat
 *   instance, fw_trace_mode FW_TRACE_NAT, whose classifier tables hold the
 *   nat table: POSTROUTING in FORWARD's slot) classifies the packet,
 *   claims a port and binds the connection both ways, rewrites the
 *   source, and returns to the live program's finish stage.
 * The packet then takes the fast path (lib/fwd.h) or goes to the kernel,
 * translated. */
#ifndef XDPFW_NATFW_H
#define XDPFW_NATFW_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "nat.h"
#include "natct.h"
#include "natfrag.h"
#include "classify.h"
#include "stats.h"
#include "natct.h"
#include "natdying.h"

/* fw_nat_count counts a packet under enum fw_nat_counter c. */
static __always_inline void fw_nat_count(__u32 c, __u64 bytes)
{
	struct fw_counter *k = bpf_map_lookup_elem(&fw_nat_counts, &c);

	if (k)
		fw_count(k, bytes, fw_now());
}

/* fw_nat_fail drops the packet in h (its decision), counted under why:
 * its connection cannot be translated. */
static __always_inline void fw_nat_fail(struct fw_xdp_handoff *h, __u32 why, __u64 bytes)
{
	fw_nat_count(why, bytes);
	h->d.action = FW_ACT_DROP;
	h->d.reason = FW_R_NAT_FAIL;
	h->d.flags = 0;
}

/* ---- The life of a translated connection (docs/nat.md "ICMP errors
 * and stale bindings"): ICMP errors about it, found by their quote;
 * bindings whose connection conntrack no longer has; packets the kernel
 * answers with an ICMP error. ---- */

/* fw_nat_unbind removes the binding k -> v and, when it points back, its
 * other direction's (reverse(v) -> reverse(k)): a tuple claimed since by
 * another connection keeps its binding. */
static __always_inline void fw_nat_unbind(const struct fw_nat_tuple *k, const struct fw_nat_rw *v)
{
	struct fw_nat_tuple r = {.saddr = v->daddr, .daddr = v->saddr, .sport = v->dport, .dport = v->sport,
				 .proto = k->proto};
	const struct fw_nat_rw *back = bpf_map_lookup_elem(&fw_nat_binds, &r);

	if (back && back->saddr == k->daddr && back->daddr == k->saddr && back->sport == k->dport &&
	    back->dport == k->sport)
		bpf_map_delete_elem(&fw_nat_binds, &r);
	bpf_map_delete_elem(&fw_nat_binds, k);
}

/* fw_nat_in_error: the IPv4 packet in h is an ICMP error (1; else 0,
 * nothing done): the binding of the packet it answers, the tuple its
 * quote has reversed (fw_nat_key4_quoted: the direction the error goes,
 * one lookup). Found, the error is translated as the kernel does
 * (nf_nat_icmp_reply_translation), by halves as any packet of its
 * connection: where the binding changes the destination, now, before
 * the chain is picked (its quote gets the connection's other tuple, its
 * outer destination the binding's: a port unreachable from the server
 * goes back to the client, judged RELATED in FORWARD); where it changes
 * the source, after the filter (fw_nat_out_error). No binding: nothing
 * changes, and the nat stage judges the error if FORWARD accepts it (a
 * connection it would translate without a binding: dropped, lost). */
static __always_inline int fw_nat_in_error(void *data, void *end, struct fw_xdp_handoff *h)
{
	struct fw_pkt *p = &h->pkt;
	struct fw_nat_tuple k;

	if (p->proto != IPPROTO_ICMP || !fw_nat_icmp_error(p->icmp_type))
		return 0;
	if (p->l3_off > 64 || fw_nat_key4_quoted(data + p->l3_off, end, &k))
		return 1;
	const struct fw_nat_rw *v = bpf_map_lookup_elem(&fw_nat_binds, &k);
	if (!v || !v->daddr) /* none, or nat OUTPUT's mark (lib/natout.h): not a binding */
		return 1;
	struct iphdr *ip = data + p->l3_off;
	if ((void *)(ip + 1) > end)
		return 1;
	h->nat = *v;
	h->nat_key = k;
	int src = v->saddr != k.saddr || v->sport != k.sport;
	if (v->daddr == k.daddr && v->dport == k.dport) {
		h->nat_state = src ? FW_NAT_S_ERROR : FW_NAT_S_DONE;
		return 1;
	}
	struct fw_nat_rw inner = {.saddr = v->daddr, .daddr = v->saddr, .sport = v->dport, .dport = v->sport};
	struct fw_nat_rw outer = {.saddr = ip->saddr, .daddr = v->daddr};
	if (fw_nat_rewrite4_icmp_error(ip, end, &outer, &inner))
		return 1; /* a quote too short for its ports: as if unbound */
	__builtin_memcpy(&p->dst, &v->daddr, 4);
	h->nat_state = src ? FW_NAT_S_ERROR : FW_NAT_S_DONE;
	if (!src)
		fw_nat_count(FW_NAT_C_ICMP_ERROR, p->l3_len);
	return 1;
}

/* fw_nat_out_error: after FORWARD accepted the ICMP error p whose
 * binding changes the source (FW_NAT_S_ERROR): its outer source becomes
 * the binding's, its quote the connection's other tuple (a no-op where
 * fw_nat_in_error rewrote it). */
static __always_inline void fw_nat_out_error(void *data, void *end, struct fw_xdp_handoff *h, const struct fw_pkt *p)
{
	const struct fw_nat_rw *v = &h->nat;
	struct iphdr *ip = data + p->l3_off;

	h->nat_state = FW_NAT_S_DONE;
	if (p->l3_off > 64 || (void *)(ip + 1) > end)
		return;
	struct fw_nat_rw inner = {.saddr = v->daddr, .daddr = v->saddr, .sport = v->dport, .dport = v->sport};
	struct fw_nat_rw outer = {.saddr = v->saddr, .daddr = ip->daddr};
	if (!fw_nat_rewrite4_icmp_error(ip, end, &outer, &inner))
		fw_nat_count(FW_NAT_C_ICMP_ERROR, p->l3_len);
}

/* fw_nat_life_out: what fw_nat_out does first, after FORWARD accepted
 * IPv4 packet p. 1: the packet is done with (fw_nat_out returns 0),
 * -1: drop it, 0: fw_nat_out goes on.
 * - A packet the kernel will answer with an ICMP error rather than
 *   forward (TTL 1 or 0; DF and bigger than the route's MTU, as the FIB
 *   said): left untranslated, unbound, so that the kernel's error quotes
 *   what the client sent and goes to the client, as a kernel router's does
 *   (ip_forward answers before POSTROUTING). The kernel never forwards it.
 *   A connection's first packet whose destination PREROUTING translated
 *   already has its translation recorded for the error's quote
 *   (lib/natdying.h).
 * - An ICMP error whose binding changes its source: fw_nat_out_error.
 * - A bound packet that is its connection's first for conntrack (NEW, no
 *   entry before it): its binding is a dead connection's (expired, not
 *   yet collected, or evicted), never to decide a new one. Both entries
 *   go; where the binding changed nothing yet (the destination), the
 *   nat stage decides the connection afresh; else (an unsolicited packet
 *   to a translated tuple, which the kernel would take as this host's) it
 *   is dropped. Counted (stale).
 * A global function: verified once, not once for each path of the
 * classifier before it (the classify stage finishes too). */
__noinline int fw_nat_life_out(struct xdp_md *ctx, struct fw_xdp_handoff *h)
{
	if (!ctx || !h) /* the verifier requires the check on global-function pointers */
		return 0;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	const struct fw_pkt *p = &h->pkt;
	struct iphdr *ip = data + p->l3_off;

	if (p->family != 4 || p->l3_off > 64 || (void *)(ip + 1) > end)
		return 0;
	if (h->nat_state != FW_NAT_S_DONE &&
	    (p->ttl == 0 || (h->hop.why == FW_FWD_MTU && (ip->frag_off & bpf_htons(0x4000))))) {
		fw_nat_count(FW_NAT_C_KERNEL_ICMP, p->l3_len);
		if (h->nat_state == FW_NAT_S_PENDING)
			fw_nat_dying_record(&h->nat_orig, &h->nat);
		h->nat_state = FW_NAT_S_DONE;
		return 1;
	}
	if (h->nat_state == FW_NAT_S_ERROR) {
		fw_nat_out_error(data, end, h, p);
		return 1;
	}
	if (h->nat_state != FW_NAT_S_BOUND || p->ctstate != FW_CT_NEW || (p->ctinfo & FW_CTI_CONFIRMED))
		return 0;
	const struct fw_nat_tuple *k = &h->nat_key;
	fw_nat_count(FW_NAT_C_STALE, p->l3_len);
	fw_nat_unbind(k, &h->nat);
	if (k->daddr != h->nat.daddr || k->dport != h->nat.dport)
		return -1;
	h->nat_state = FW_NAT_S_NONE;
	return 0;
}

/* fw_nat_in: the binding of the packet in h (frame data..end), if any:
 * its destination rewritten, h->pkt as the filter sees it now, the
 * binding kept in h for fw_nat_out. A first fragment's translation is
 * recorded for its datagram's later fragments, which get it here
 * (lib/natfrag.h). Conntrack is asked first (lib/natct.h
 * fw_nat_ct_kept): a source-translated connection's original direction
 * has its binding in its entry, and the entry found is conntrack's for
 * the packet (ct) unless the binding changes the destination (an answer,
 * a DNAT), whose entry conntrack looks up under the translated tuple.
 * cpumap (a constant): a bulk CPU, which `--nat xdpfw` never uses (it
 * refuses a priority table): the binding only. */
static __always_inline void fw_nat_in(void *data, void *end, struct fw_xdp_handoff *h, struct fw_ct *ct,
				      const int cpumap)
{
	struct fw_pkt *p = &h->pkt;
	struct fw_nat_tuple k;

	h->nat_state = FW_NAT_S_NONE;
	if (p->family == 4 && (p->flags & FW_PKT_FRAG)) { /* a later fragment: its datagram's addresses */
		if (fw_nat_frag_in(data, end, h))
			fw_nat_count(FW_NAT_C_FRAG_NAT, p->l3_len);
		return;
	}
	if (p->family == 4 && fw_nat_in_error(data, end, h))
		return;
	if (p->family != 4 || fw_nat_key4(data + p->l3_off, end, &k))
		return;
	if (cpumap || !fw_nat_ct_kept(p, &k, ct, &h->nat)) { /* cpumap: never with NAT (its stack is full) */
		const struct fw_nat_rw *b = bpf_map_lookup_elem(&fw_nat_binds, &k);
		if (!b || !b->daddr) /* none, or nat OUTPUT's mark (lib/natout.h): a packet from outside with this host's own tuple */
			return;
		if (!cpumap && (b->daddr != k.daddr || b->dport != k.dport))
			ct->now = 0; /* conntrack's key is the translated tuple's */
		h->nat = *b;
	}
	const struct fw_nat_rw *out = &h->nat;
	h->nat_key = k;
	fw_nat_frag_bound(data, end, p, &k, out->saddr, out->daddr); /* for its later fragments (lib/natfrag.h) */
	if (fw_nat_pre(data + p->l3_off, end, &k, out))
		return;
	h->nat_state = FW_NAT_S_BOUND;
	__builtin_memcpy(&p->dst, &out->daddr, 4);
	if (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP)
		p->dport = bpf_ntohs(out->dport);
}

/* fw_nat_pending: after the filter accepted the packet in h (decision
 * d), a connection's first packet whose destination PREROUTING
 * translated (FW_NAT_S_PENDING, lib/natdst.h) goes to the nat stage,
 * which binds its connection (POSTROUTING first, in FORWARD) and comes
 * back to the finish stage (FW_NAT_S_DONE). 0: nothing to bind; -1: drop
 * (the nat stage missing, or cpumap: as fw_nat_out). */
static __always_inline int fw_nat_pending(struct xdp_md *ctx, struct fw_xdp_handoff *h, const struct fw_decision *d,
					  const int cpumap)
{
	if (h->nat_state != FW_NAT_S_PENDING)
		return 0;
	if (cpumap)
		return -1;
	if (&h->d != d)
		h->d = *d;
	h->nat_logged = 1; /* fw_nat_finished */
	bpf_tail_call(ctx, &fw_xdp_stages, FW_XDP_STAGE_NAT);
	h->nat_logged = 0;
	return -1;
}

/* fw_nat_out: after FORWARD accepted IPv4 packet p (d): a bound packet's
 * source rewritten; a packet without a binding goes to the nat stage (a
 * tail call: it does not return), which binds its connection (translated,
 * or as it is). 0: go on; -1: drop: a fragment (counted), the nat stage
 * missing (never while the control plane holds fw_xdp_stages), or cpumap
 * (a constant: on a bulk CPU, which cannot enter it; `--nat xdpfw`
 * refuses a priority table). */
static __always_inline int fw_nat_out(struct xdp_md *ctx, struct fw_xdp_handoff *h, const struct fw_pkt *p,
				      const struct fw_decision *d, const int cpumap)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	int life = fw_nat_life_out(ctx, h);

	if (life)
		return life > 0 ? 0 : -1;
	if (h->nat_state == FW_NAT_S_BOUND) {
		h->nat_state = FW_NAT_S_DONE;
		fw_nat_post(data + p->l3_off, end, &h->nat);
		return 0;
	}
	if (h->nat_state == FW_NAT_S_PENDING)
		return fw_nat_pending(ctx, h, d, cpumap);
	if (h->nat_state != FW_NAT_S_NONE || p->family != 4)
		return 0;
	if (p->flags & FW_PKT_FRAG) { /* never: a later fragment has its datagram's translation (fw_nat_frag_check) */
		fw_nat_count(FW_NAT_C_FRAG, p->l3_len);
		return -1;
	}
	/* INVALID and UNTRACKED packets are no connection's: the kernel's
	 * nat table never sees them, they go as they are, unbound (tested
	 * here: in the nat stage the split would have the verifier walk its
	 * classifier twice) */
	if (p->ctstate == FW_CT_INVALID || p->ctstate == FW_CT_UNTRACKED) {
		/* a first fragment's later ones go as they are too (lib/natfrag.h) */
		struct fw_nat_tuple k = {.saddr = (__u32)p->src[0], .daddr = (__u32)p->dst[0], .proto = p->proto};
		fw_nat_frag_bound(data, end, p, &k, k.saddr, k.daddr);
		return 0;
	}
	if (cpumap)
		return -1;
	h->nat_state = FW_NAT_S_DONE;
	if (&h->d != d)
		h->d = *d;
	h->nat_logged = 1; /* fw_nat_finished */
	bpf_tail_call(ctx, &fw_xdp_stages, FW_XDP_STAGE_NAT);
	h->nat_logged = 0;
	return -1;
}

/* fw_nat_fib4 fills fib for a route lookup of the IPv4 packet p (its
 * addresses, ports, protocol and TOS, the packet's own: the caller has
 * rewritten p where it asks for a translated destination) from device
 * ifindex. */
static __always_inline void fw_nat_fib4(struct bpf_fib_lookup *fib, const struct fw_pkt *p, __u32 ifindex)
{
	fib->family = 2; /* AF_INET */
	fib->l4_protocol = p->proto;
	fib->sport = bpf_htons(p->sport);
	fib->dport = bpf_htons(p->dport);
	fib->tos = p->tos;
	fib->ipv4_src = (__u32)p->src[0];
	fib->ipv4_dst = (__u32)p->dst[0];
	fib->ifindex = ifindex;
}

/* fw_nat_masq_addr: MASQUERADE's address for p, the egress device's for
 * the next hop as the kernel picks it (inet_select_addr), from the FIB
 * (docs/nat.md, MASQUERADE). 0: none. A global function: the 64-byte
 * request in a frame of its own. */
__noinline __be32 fw_nat_masq_addr(struct xdp_md *ctx, const struct fw_pkt *p)
{
	struct bpf_fib_lookup fib = {};

	if (!ctx || !p)
		return 0;
	fw_nat_fib4(&fib, p, p->ifindex);
	int rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), BPF_FIB_LOOKUP_SRC | BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return 0;
	/* the next hop (in ipv4_dst now) from the egress device: its
	 * connected route's source, not a route's preferred one */
	fib.ipv4_src = 0;
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), BPF_FIB_LOOKUP_SRC | BPF_FIB_LOOKUP_SKIP_NEIGH | BPF_FIB_LOOKUP_OUTPUT);
	return rc == BPF_FIB_LKUP_RET_SUCCESS ? fib.ipv4_src : 0;
}

/* fw_nat_bind_source binds the connection of p (first packet, tuple k
 * as it arrived) to the source translation t: the address, a port claimed
 * for it (the kernel's default ranges without --to-ports), both
 * directions' entries; and rewrites the frame's source. to, when not 0:
 * the destination PREROUTING gave it (lib/natdst.h), which the frame
 * carries already. Returns 0, or the fw_nat_counter that says why the
 * connection cannot be translated. */
static __noinline __u32 fw_nat_bind_source(struct xdp_md *ctx, const struct fw_pkt *p, struct fw_nat_tuple *k,
						const struct fw_nat_target *t, const struct fw_nat_rw *to)
{
	__be32 daddr = to ? to->daddr : k->daddr;
	__be16 dport = to ? to->dport : k->dport;
	__be32 addr = t->addr_lo;
	__u32 ports = k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP ||
		      (k->proto == IPPROTO_ICMP && p->icmp_type == 8);

	if (t->kind == FW_NAT_MASQUERADE) {
		addr = fw_nat_masq_addr(ctx, p);
		if (!addr)
			return FW_NAT_C_NO_ADDR;
	} else if (!addr) {
		addr = k->saddr; /* --to-source :PORT */
	} else if (t->addr_hi != t->addr_lo) {
		__u32 lo = bpf_ntohl(t->addr_lo), span = bpf_ntohl(t->addr_hi) - lo + 1;
		addr = bpf_htonl(lo + (bpf_ntohl(k->saddr) ^ bpf_ntohl(daddr)) % span);
	}
	struct fw_nat_rw out = {.saddr = addr, .daddr = daddr, .sport = k->sport, .dport = dport};
	struct fw_nat_rw back = {.saddr = k->daddr, .daddr = k->saddr, .sport = k->dport, .dport = k->sport};
	int claimed = 0;

	if (ports) {
		__u16 want = bpf_ntohs(k->sport), lo = t->port_lo, hi = t->port_hi;
		if (!lo) { /* the kernel's (nf_nat_l4proto_unique_tuple) */
			if (k->proto == IPPROTO_ICMP)
				lo = 1, hi = 65535; /* the kernel's is 0-65535: an id of 0 is moved here */
			else if (want < 512)
				lo = 1, hi = 511;
			else if (want < 1024)
				lo = 600, hi = 1023;
			else
				lo = 1024, hi = 65535;
		}
		struct fw_nat_tuple reply = {.saddr = daddr, .daddr = addr, .sport = dport, .proto = k->proto};
		__u16 port = fw_nat_claim(&fw_nat_binds, &reply, want, lo, hi, bpf_get_prandom_u32(), &back);
		if (!port) /* never a claimed one: ranges start at 1 */
			return FW_NAT_C_NO_PORT;
		out.sport = bpf_htons(port);
		claimed = 1;
	}
	if (fw_nat_bind4(&fw_nat_binds, k, &out, claimed))
		return claimed ? FW_NAT_C_FULL : FW_NAT_C_NO_PORT;
	void *data = (void *)(long)ctx->data;
	fw_nat_frag_bound(data, (void *)(long)ctx->data_end, p, k, out.saddr, out.daddr);
	fw_nat_post(data + p->l3_off, (void *)(long)ctx->data_end, &out);
	return 0;
}

/* fw_nat_bind_same binds the tuple of the packet p to itself (a
 * connection not translated). A global function: verified once. */
__noinline int fw_nat_bind_same(struct xdp_md *ctx, const struct fw_pkt *p)
{
	struct fw_nat_tuple k;

	if (!ctx || !p)
		return 0;
	void *data = (void *)(long)ctx->data;
	if (p->l3_off > 64 || fw_nat_key4(data + p->l3_off, (void *)(long)ctx->data_end, &k))
		return 0;
	struct fw_nat_rw same = {.saddr = k.saddr, .daddr = k.daddr, .sport = k.sport, .dport = k.dport};
	bpf_map_update_elem(&fw_nat_binds, &k, &same, BPF_ANY);
	fw_nat_frag_bound(data, (void *)(long)ctx->data_end, p, &k, k.saddr, k.daddr);
	return 0;
}

/* fw_nat_rule_of classifies p as its connection's first packet (NEW,
 * whatever its state: conntrack may have recorded it) against the nat
 * instance's tables, in the slot of p->chain (compile.CompileNAT:
 * PREROUTING in INPUT's, POSTROUTING in FORWARD's, OUTPUT in OUTPUT's),
 * the decision in d: the translation of the nat rule that decides it, or
 * 0 (ACCEPT, the policy, no table). Both hooks' nat stages: at XDP (copy,
 * a constant: where the root is copied for fw_classify_xdp, the walk the
 * XDP stages verify as a global function) or at tc egress (copy NULL:
 * fw_classify). */
static __always_inline const struct fw_nat_target *fw_nat_rule_of(struct fw_pkt *p, struct fw_decision *d,
								  struct fw_root *copy)
{
	__u8 state = p->ctstate;

	p->ctstate = FW_CT_NEW;
	*d = (struct fw_decision){};
	int s = fw_active_sel();
	const struct fw_root *root = s < 0 ? 0 : fw_root_at(p, s);
	if (root) {
		if (root->fast_states & (1u << FW_CT_NEW)) {
			d->rule_id = root->fast_rule_id;
			d->action = root->fast_action;
		} else if (copy) {
			*copy = *root;
			fw_classify_xdp(copy, s, p, d);
		} else if (fw_classify(root, s, p, d) < 0) {
			root = 0;
		}
	}
	p->ctstate = state;
	__u32 i = d->rule_id - FW_FIRST_RULE_ID;
	if (root && d->action == FW_ACT_ACCEPT && d->rule_id >= FW_FIRST_RULE_ID && i < FW_NAT_MAX_RULES)
		return bpf_map_lookup_elem(&fw_nat_targets, &i);
	return 0;
}

/* fw_nat_rule: fw_nat_rule_of for the packet in h (XDP's nat stage),
 * the decision in a. */
static __always_inline const struct fw_nat_target *fw_nat_rule(struct fw_xdp_handoff *h, struct fw_audit_slot *a)
{
	return fw_nat_rule_of(&h->pkt, &a->d, &a->root);
}

/* fw_nat_stage binds the connection of the packet in h, which has none:
 * the nat instance's classifier (POSTROUTING, in FORWARD's slot) picks
 * the rule, fw_nat_targets its translation; a connection it leaves alone,
 * and the answers of one, are bound to their own tuples. A packet that
 * cannot be translated is dropped (h->d), counted: no port, no room, no
 * address, or a translated connection past its first packet without its
 * binding (never forwarded untranslated). */
static __always_inline void fw_nat_stage(struct xdp_md *ctx, struct fw_xdp_handoff *h, struct fw_audit_slot *a,
					 __u64 bytes)
{
	const struct fw_pkt *p = &h->pkt;
	struct fw_nat_tuple k;

	/* As it is: the answers of a connection that is not translated (a
	 * translated one's have their binding, or arrive addressed to this
	 * host), and what the nat table leaves alone. Bound to its own tuple,
	 * so that its later packets find a binding and skip this stage. The
	 * tuple is read apart on each path: the classifier's walk is checked
	 * by the verifier once, not once per protocol. */
	if (p->ctinfo & FW_CTI_REPLY) {
		if (p->ctinfo & FW_CTI_XNAT) { /* translated, its binding gone: never forwarded untranslated */
			fw_nat_fail(h, FW_NAT_C_LOST, bytes);
			return;
		}
		fw_nat_bind_same(ctx, p);
		return;
	}
	__u8 state = h->pkt.ctstate;
	const struct fw_nat_target *t = fw_nat_rule(h, a);
	__u32 why;
	if (!t || (t->kind != FW_NAT_SNAT && t->kind != FW_NAT_MASQUERADE)) {
		fw_nat_count(FW_NAT_C_UNTRANSLATED, bytes);
		fw_nat_bind_same(ctx, p);
		return;
	}
	void *data = (void *)(long)ctx->data;
	if (fw_nat_key4(data + p->l3_off, (void *)(long)ctx->data_end, &k))
		why = FW_NAT_C_LOST; /* never: fw_nat_in read it */
	else if (state != FW_CT_NEW) /* translated from its first packet: its binding is gone (LRU), fail closed */
		why = FW_NAT_C_LOST;
	else if (fw_nat_unrecorded(p, k.sport)) /* conntrack could not record it (lib/natct.h) */
		why = FW_NAT_C_NO_CT;
	else
		why = fw_nat_bind_source(ctx, p, &k, t, 0);
	if (!why) {
		fw_nat_count(FW_NAT_C_BOUND, bytes);
		fw_nat_ct_mark(p, &k); /* --ctstate SNAT (lib/natct.h) */
		return;
	}
	fw_nat_count(why, bytes);
	h->d.action = FW_ACT_DROP;
	h->d.reason = FW_R_NAT_FAIL;
	h->d.flags = 0;
}

/* fw_nat_frag_check: a later IPv4 fragment that FORWARD accepts (d)
 * whose datagram's translation is not known (fw_nat_frag_in found none:
 * its first fragment was dropped, or its record is gone) is dropped,
 * counted (FW_NAT_C_FRAG): forwarded, it could carry the client's address
 * out. Every forwarded connection has a binding with `--nat xdpfw`. */
static __always_inline void fw_nat_frag_check(const struct fw_xdp_handoff *h, struct fw_decision *d)
{
	const struct fw_pkt *p = &h->pkt;

	if (p->family != 4 || p->chain != FW_CHAIN_FORWARD || d->action != FW_ACT_ACCEPT || h->nat_state == FW_NAT_S_DONE)
		return;
	fw_nat_count(FW_NAT_C_FRAG, p->l3_len);
	d->action = FW_ACT_DROP;
	d->reason = FW_R_NAT_FAIL;
}

/* fw_nat_finished: is the finish stage running for the packet in h a
 * second time, entered again by the nat stage (h->nat_logged, cleared
 * here)? fw_nat_out and fw_nat_pending tail-call the nat stage after the
 * LOG events and the counting rules' counts, made from the frame as the
 * filter saw it: those are done, a connection's first packet is logged
 * and counted once. */
static __always_inline int fw_nat_finished(struct fw_xdp_handoff *h)
{
	if (!fw_nat_mode || !h->nat_logged)
		return 0;
	h->nat_logged = 0;
	return 1;
}

#endif
