/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Destination NAT in the firewall's XDP programs (`--nat xdpfw`, nat
 * PREROUTING: DNAT, REDIRECT; docs/nat.md). As iptables, the filter
 * chains see the translated destination: the chain (INPUT or FORWARD) and
 * the FIB are chosen on it.
 *
 * - xdpfw_ingress, after conntrack: a NEW IPv4 packet without a binding
 *   (fw_nat_in found none) goes to the nat stage (FW_NAT_S_PRE), which
 *   classifies it against nat PREROUTING (in INPUT's slot of the nat
 *   instance's tables) and, for DNAT or REDIRECT, rewrites the frame's
 *   destination; then it enters xdpfw_ingress again (the nat instance's
 *   fw_audit_next[FW_NAT_NEXT_INGRESS]) with what it decided in
 *   fw_xdp_handoff.nat_pre (fw_nat_entry): the packet is parsed again, its chain, FIB
 *   answer and conntrack state those of the translated destination.
 *   A packet of a connection whose binding is there never gets here; one
 *   of a connection that is not translated gets here once (its first
 *   packet: later ones are ESTABLISHED).
 * - Once the filter accepts it (FW_NAT_S_PENDING: FORWARD in fw_nat_out,
 *   INPUT in fw_xdp_finish), the nat stage binds the connection: in
 *   FORWARD after POSTROUTING, so a connection both DNATed and SNATed
 *   (hairpin NAT) has one binding of both; nothing is bound for a packet
 *   the filter drops, as the kernel's unconfirmed conntrack entry goes.
 * - Later packets find their binding with fw_nat_in's one lookup; the
 *   answers get their source rewritten back after the filter (fw_nat_post:
 *   FORWARD at XDP; those this host sends, to a REDIRECTed or locally
 *   DNATed connection, at tc egress: lib/nattc.h). */
#ifndef XDPFW_NATDST_H
#define XDPFW_NATDST_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "natfw.h"
#include "natct.h"
#include "ct.h"
#include "vlandev.h"

/* fw_nat_entry starts the NAT state of the packet xdpfw_ingress has in
 * h: FW_NAT_S_NONE (fw_nat_in looks it up), or, entered again by the nat
 * stage's PREROUTING (h->nat_pre, cleared here for the next packet), what
 * it decided; the frame carries the translated destination already.
 * Values in the slot, none kept in a register: the verifier's paths join
 * again after it. */
static __always_inline void fw_nat_entry(struct fw_xdp_handoff *h)
{
	__u32 pre = h->nat_pre;

	h->nat_pre = 0;
	h->nat_state = pre == FW_NAT_P_DNAT ? FW_NAT_S_PENDING : pre == FW_NAT_P_NONE ? FW_NAT_S_AGAIN : FW_NAT_S_NONE;
}

/* fw_nat_to_prerouting sends the packet in h, its conntrack state known,
 * to the nat stage's PREROUTING when it is a new connection's first
 * packet without a binding, not yet there (FW_NAT_S_AGAIN), IPv4, not a
 * later fragment (a first fragment is: its later ones get its translation,
 * lib/natfrag.h), and the nat table has a PREROUTING rule
 * (fw_nat_no_hook). A tail call: it does not return then. 0: go on; -1: the
 * nat stage is missing (never while the control plane holds
 * fw_xdp_stages): fail closed. cpumap (a constant): never (`--nat xdpfw`
 * refuses a priority table). */
static __always_inline int fw_nat_to_prerouting(struct xdp_md *ctx, struct fw_xdp_handoff *h, const int cpumap)
{
	const struct fw_pkt *p = &h->pkt;

	if (h->nat_state == FW_NAT_S_AGAIN) { /* been there: on as without a binding (fw_nat_out) */
		h->nat_state = FW_NAT_S_NONE;
		return 0;
	}
	if (cpumap || fw_nat_no_hook[FW_NAT_HOOK_PRE] || h->nat_state != FW_NAT_S_NONE || p->family != 4 || p->ctstate != FW_CT_NEW ||
	    (p->flags & FW_PKT_FRAG))
		return 0;
	h->nat_state = FW_NAT_S_PRE;
	bpf_tail_call(ctx, &fw_xdp_stages, FW_XDP_STAGE_NAT);
	h->nat_state = FW_NAT_S_NONE;
	return -1;
}

/* fw_nat_dst_port sets out->dport, the destination port (host order
 * range lo..hi) of connection k (TCP, UDP) under DNAT or REDIRECT to
 * address out->daddr, as the kernel picks it (nf_nat_core.c
 * get_unique_tuple, nf_nat_l4proto_unique_tuple: a destination's search
 * starts at the range's first port, no random offset): the connection's
 * own port where the range holds it and no connection holds its reply
 * tuple (a range of one port: kept even so); else the first of lo, lo+1,
 * ... whose reply tuple is free, at most FW_NAT_PROBES of them (the
 * kernel's 128 and its rounds of fewer at random offsets are more than a
 * verified loop affords). Looked up, not claimed: fw_nat_bind4 claims the
 * reply tuple once the filter accepts (a race lost then: no_port).
 * Returns 0, or FW_NAT_C_NO_PORT: every port tried is held. */
static __always_inline __u32 fw_nat_dst_port(const struct fw_nat_tuple *k, struct fw_nat_rw *out, __u16 lo, __u16 hi)
{
	__u16 want = bpf_ntohs(k->dport);
	struct fw_nat_tuple reply = {.saddr = out->daddr, .daddr = k->saddr, .sport = k->dport, .dport = k->sport,
				     .proto = k->proto};
	__u32 span = (__u32)hi - lo + 1;

	if (want >= lo && want <= hi && (lo == hi || !bpf_map_lookup_elem(&fw_nat_binds, &reply)))
		return 0; /* out->dport is k's */
	out->dport = bpf_htons(lo);
	if (lo >= hi) /* one port: the kernel keeps it, its tuple taken or not (fw_nat_bind4 decides) */
		return 0;
	for (__u32 i = 0; i < FW_NAT_PROBES && i < span; i++) {
		reply.sport = bpf_htons(lo + i);
		if (!bpf_map_lookup_elem(&fw_nat_binds, &reply)) {
			out->dport = reply.sport;
			return 0;
		}
	}
	return FW_NAT_C_NO_PORT;
}

/* fw_nat_dst fills out with the tuple the first packet of connection k
 * (p) leaves PREROUTING with under DNAT or REDIRECT t. The address: the
 * range's, by a hash of the connection's addresses (deterministic per
 * connection); none given, the packet's own; REDIRECT: the primary
 * address of the device the kernel receives the packet on (fw_nat_ifaddr;
 * a tagged frame's VLAN device: fw_in_dev). The port
 * (TCP, UDP; other protocols, ICMP echo included, keep theirs): the
 * packet's own where the range holds it, else the range's first free one
 * (fw_nat_dst_port). Returns 0, or the fw_nat_counter that says why the
 * connection cannot be translated. */
static __always_inline __u32 fw_nat_dst(const struct fw_pkt *p, const struct fw_nat_tuple *k,
					const struct fw_nat_target *t, struct fw_nat_rw *out)
{
	__be32 addr = t->addr_lo;

	if (t->kind == FW_NAT_REDIRECT) {
		__u32 ifindex = fw_in_dev(p); /* a tagged frame's VLAN device (lib/vlandev.h) */
		const __be32 *local = bpf_map_lookup_elem(&fw_nat_ifaddr, &ifindex);

		if (!local || !*local)
			return FW_NAT_C_NO_LOCAL;
		addr = *local;
	} else if (!addr) {
		addr = k->daddr; /* --to-destination :PORT */
	} else if (t->addr_hi != t->addr_lo) {
		__u32 lo = bpf_ntohl(t->addr_lo), span = bpf_ntohl(t->addr_hi) - lo + 1;
		addr = bpf_htonl(lo + (bpf_ntohl(k->saddr) ^ bpf_ntohl(k->daddr)) % span);
	}
	*out = (struct fw_nat_rw){.saddr = k->saddr, .daddr = addr, .sport = k->sport, .dport = k->dport};
	if (t->port_lo && (k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP))
		return fw_nat_dst_port(k, out, t->port_lo, t->port_hi);
	return 0;
}

/* fw_nat_prerouting decides the destination of the packet in h, a new
 * connection's first (FW_NAT_S_PRE), by nat PREROUTING: for DNAT or
 * REDIRECT, the frame's destination rewritten, h->nat and h->nat_orig
 * set for the binding. h->nat_pre says what it decided, for xdpfw_ingress
 * entered again. Returns 0, or -1: drop (counted: REDIRECT without an
 * address). */
static __always_inline int fw_nat_prerouting(struct xdp_md *ctx, struct fw_xdp_handoff *h, struct fw_audit_slot *a,
					     __u64 bytes)
{
	struct fw_pkt *p = &h->pkt;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct fw_nat_tuple k;

	h->nat_pre = FW_NAT_P_NONE;
	/* PREROUTING is in INPUT's slot (compile.CompileNAT); the TTL as it
	 * arrived (xdpfw_ingress decremented it for FORWARD) */
	__u8 chain = p->chain, ttl = p->ttl;
	if (chain == FW_CHAIN_FORWARD && ttl < 255)
		p->ttl = ttl + 1;
	p->chain = FW_CHAIN_INPUT;
	const struct fw_nat_target *t = fw_nat_rule(h, a);
	p->chain = chain;
	p->ttl = ttl;
	if (!t || (t->kind != FW_NAT_DNAT && t->kind != FW_NAT_REDIRECT)) {
		fw_nat_count(FW_NAT_C_UNTRANSLATED, bytes);
		return 0;
	}
	if (p->l3_off > 64 || fw_nat_key4(data + p->l3_off, end, &k))
		return 0; /* never: fw_nat_in read it */
	struct fw_nat_rw out;
	__u32 why = fw_nat_dst(p, &k, t, &out);
	if (why) {
		fw_nat_count(why, bytes);
		return -1;
	}
	if (fw_nat_pre(data + p->l3_off, end, &k, &out))
		return 0; /* never: fw_nat_key4 read it */
	h->nat = out;
	h->nat_orig = k;
	h->nat_pre = FW_NAT_P_DNAT;
	return 0;
}

/* fw_nat_bind_dst binds the connection of the packet in h, whose
 * destination PREROUTING translated (FW_NAT_S_PENDING), once the filter
 * accepted it: in FORWARD, POSTROUTING may translate its source too (the
 * binding then holds both); else (INPUT: REDIRECT, a DNAT to this host)
 * the destination only. A connection that cannot be bound (its reply
 * tuple held by another, no port, no address) has its packet dropped
 * (h->d), counted. */
static __always_inline void fw_nat_bind_dst(struct xdp_md *ctx, struct fw_xdp_handoff *h, struct fw_audit_slot *a,
					    __u64 bytes)
{
	const struct fw_pkt *p = &h->pkt;
	const struct fw_nat_target *t = 0;
	__u32 why;

	h->nat_state = FW_NAT_S_DONE;
	if (fw_nat_unrecorded(p, h->nat.sport)) { /* conntrack could not record it (lib/natct.h) */
		fw_nat_fail(h, FW_NAT_C_NO_CT, bytes);
		return;
	}
	if (p->chain == FW_CHAIN_FORWARD)
		t = fw_nat_rule(h, a);
	if (t && (t->kind == FW_NAT_SNAT || t->kind == FW_NAT_MASQUERADE)) {
		why = fw_nat_bind_source(ctx, p, &h->nat_orig, t, &h->nat);
		if (!why)
			fw_nat_count(FW_NAT_C_BOUND, bytes);
	} else {
		why = fw_nat_bind4(&fw_nat_binds, &h->nat_orig, &h->nat, 0) ? FW_NAT_C_NO_PORT : 0;
		if (!why) /* for its later fragments (lib/natfrag.h) */
			fw_nat_frag_bound((void *)(long)ctx->data, (void *)(long)ctx->data_end, p, &h->nat_orig,
					  h->nat.saddr, h->nat.daddr);
	}
	if (why) {
		fw_nat_fail(h, why, bytes);
		return;
	}
	fw_nat_count(FW_NAT_C_DNAT, bytes);
	fw_nat_ct_mark(p, &h->nat_orig);
}

/* fw_nat_reject_orig puts back, in the frame and in h->pkt, the
 * destination the packet in h arrived with where NAT rewrote it before the
 * filter (FW_NAT_S_PENDING: PREROUTING, a connection's first packet;
 * FW_NAT_S_BOUND: its binding), for a REJECT to answer. The kernel
 * attaches the packet's connection to its REJECT's answer (nf_ct_attach),
 * whose NAT then translates the answer back: a RST comes from the address
 * and port the client sent to, an ICMP error from that address, quoting
 * what the client sent (nf_nat_icmp_reply_translation); never from the
 * server's own. Built from the frame as it arrived, xdpfw's answer is
 * that. Nothing is bound: the filter refused the packet. A global
 * function: verified once, not once for each path of the classifier before
 * the finish (inlined, it cost the classify stages some 80,000
 * instructions). */
__noinline int fw_nat_reject_orig(struct xdp_md *ctx, struct fw_xdp_handoff *h)
{
	if (!ctx || !h) /* the verifier requires the check on global-function pointers */
		return 0;
	const struct fw_nat_tuple *k = h->nat_state == FW_NAT_S_PENDING ? &h->nat_orig : &h->nat_key;
	const struct fw_nat_rw *out = &h->nat;
	struct fw_pkt *p = &h->pkt;

	if (h->nat_state != FW_NAT_S_PENDING && h->nat_state != FW_NAT_S_BOUND)
		return 0;
	if ((k->daddr == out->daddr && k->dport == out->dport) || p->l3_off > 64)
		return 0;
	struct fw_nat_tuple now = {.saddr = k->saddr, .daddr = out->daddr, .sport = k->sport, .dport = out->dport,
				   .proto = k->proto};
	struct fw_nat_rw back = {.saddr = k->saddr, .daddr = k->daddr, .sport = k->sport, .dport = k->dport};
	void *data = (void *)(long)ctx->data;
	if (fw_nat_pre(data + p->l3_off, (void *)(long)ctx->data_end, &now, &back))
		return 0;
	__builtin_memcpy(&p->dst, &k->daddr, 4);
	if (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP)
		p->dport = bpf_ntohs(k->dport);
	return 0;
}

#endif
