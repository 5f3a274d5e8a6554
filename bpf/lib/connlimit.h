/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* -m connlimit (docs/limits.md): what the kernel's xt_connlimit does over
 * nf_conncount. Each rule keeps, per key (its masked source or destination
 * address), the connections whose packets reached it and passed its other
 * matches: a list of conntrack keys (struct fw_connlimit_conns, in
 * fw_connlimit). A packet that reaches the rule walks its key's list: a
 * connection whose fw_ct entry is gone (or expired), or a TCP one in
 * TIME_WAIT or CLOSE, is collected; the packet's own connection is added
 * when it is new (its first packet: not in fw_ct yet); the count is what
 * is left. --connlimit-above N matches when the count is above N,
 * --connlimit-upto N when it is at most N.
 *
 * Called by the settling step (lib/classify.h fw_state_settle), in rule
 * order, for the XDP classify stage only (the compiler refuses
 * -m connlimit in OUTPUT): the packet and its conntrack plan come from
 * the hand-over slot, as fw_notes_end reads them. */
#ifndef XDPFW_CONNLIMIT_H
#define XDPFW_CONNLIMIT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"
#include "ct.h"

/* fw_connlimit_same: are two conntrack keys one connection? (40 bytes,
 * their padding zero: fw_ct_key_of clears it) */
static __always_inline int fw_connlimit_same(const struct fw_ct_key *a, const struct fw_ct_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	_Static_assert(sizeof(struct fw_ct_key) == 40, "fw_ct_key is 5 words");
	return !((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3]) | (x[4] ^ y[4]));
}

/* fw_connlimit_apply does what -m connlimit rule rule_id does for the
 * packet in the hand-over slot. Its own connection: with a conntrack plan
 * (a tracked packet), the plan's key, added when the plan creates the
 * entry (a first packet), else already counted if the rule saw its first
 * packet (the kernel: a confirmed connection is not added, except to a key
 * that has no list yet); RELATED: not added; INVALID, UNTRACKED: counted
 * for this packet, not kept (the kernel adds the packet's tuple and
 * collects it at its next walk, there being no conntrack entry). Returns 1
 * when the rule matches, 0 when not (or without the rule's settings), -1
 * when the packet's new connection finds its key's FW_CONNLIMIT_SLOTS
 * taken (the kernel drops the packet when it cannot add the connection:
 * counted in FW_LOG_C_CONNLIMIT_FULL). A trace instance changes nothing.
 * A global function: verified once. */
__noinline int fw_connlimit_apply(__u32 rule_id, struct fw_state_scratch *s)
{
	if (!s)
		return 0;
	s->czero = 0;
	s->crule = rule_id;
	const struct fw_connlimit_rule *r = bpf_map_lookup_elem(&fw_connlimit_rules, &s->crule);
	const struct fw_xdp_handoff *h = bpf_map_lookup_elem(&fw_xdp_handoff, &s->czero);
	if (!r || !h)
		return 0;
	const struct fw_pkt *p = &h->pkt;
	const struct fw_ct_key *own = (const struct fw_ct_key *)h->ct;
	int tracked = h->ct[fw_ct_next_off] != FW_CTS_NONE;

	s->cadd = tracked && h->ct[__builtin_offsetof(struct fw_ct, create)];
	s->ccount = !tracked && p->ctstate != FW_CT_RELATED; /* INVALID, UNTRACKED: this packet's */
	s->cfree = 0;
	s->cfound = 0;
	s->cjif = (__u32)bpf_jiffies64();
	s->ccpu = bpf_get_smp_processor_id();
	s->cnow = bpf_ktime_get_coarse_ns();

	struct fw_connlimit_key *k = &s->ckey;
	const __u64 *a = (r->flags & FW_CL_F_DADDR) ? p->dst : p->src;
	__builtin_memset(k, 0, sizeof(*k));
	k->addr[0] = a[0] & r->mask[0];
	k->addr[1] = a[1] & r->mask[1];
	k->rule_id = rule_id;
	k->family = p->family;

	struct fw_connlimit_conns *c = bpf_map_lookup_elem(&fw_connlimit, k);
	if (!c) {
		if (tracked) { /* a new key: a list of the packet's connection */
			__builtin_memset(&s->cfresh, 0, sizeof(s->cfresh));
			s->cfresh.conn[0].ct = *own;
			s->cfresh.conn[0].jiffies = s->cjif;
			s->cfresh.conn[0].cpu = s->ccpu;
			if (fw_live_writes())
				bpf_map_update_elem(&fw_connlimit, k, &s->cfresh, BPF_ANY);
			s->ccount = 1;
		}
		return (s->ccount > r->limit) == !!(r->flags & FW_CL_F_ABOVE);
	}

	for (int i = 0; i < FW_CONNLIMIT_SLOTS; i++) {
		struct fw_connlimit_conn *x = &c->conn[i];
		if (!x->ct.family) {
			if (!s->cfree)
				s->cfree = i + 1;
			continue;
		}
		if (s->cadd && fw_connlimit_same(&x->ct, own)) { /* its first packet again (a SYN sent again) */
			s->cfound = 1;
			s->ccount++;
			continue;
		}
		const struct fw_ct_entry *e = bpf_map_lookup_elem(&fw_ct, &x->ct);
		if (e && e->expires > s->cnow) {
			if (e->state != FW_CTS_TIME_WAIT && e->state != FW_CTS_CLOSE) {
				s->ccount++;
				continue;
			}
		} else if (x->cpu != s->ccpu && s->cjif - x->jiffies < 2) {
			s->ccount++; /* another CPU's, maybe about to be created */
			continue;
		}
		if (fw_live_writes()) /* gone or closed: collected */
			x->ct.family = 0;
		if (!s->cfree)
			s->cfree = i + 1;
	}
	if (s->cadd && !s->cfound) {
		__u32 free = s->cfree;
		if (!free) {
			__u32 ctr = FW_LOG_C_CONNLIMIT_FULL;
			__u64 *n = bpf_map_lookup_elem(&fw_log_counters, &ctr);
			if (n && fw_live_writes())
				(*n)++;
			return -1;
		}
		if (fw_live_writes()) {
			struct fw_connlimit_conn *x = &c->conn[(free - 1) & (FW_CONNLIMIT_SLOTS - 1)];
			x->ct = *own;
			x->jiffies = s->cjif;
			x->cpu = s->ccpu;
		}
		s->ccount++;
	}
	return (s->ccount > r->limit) == !!(r->flags & FW_CL_F_ABOVE);
}

#endif
