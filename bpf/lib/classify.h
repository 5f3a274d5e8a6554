/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Classification: the first matching entry of the active generation,
 * found in time independent of the number of rules.
 *
 * The control plane (internal/compile/tree.go) compiles each chain and
 * family into at most FW_MAX_GROUPS decision trees over the packet's key
 * (enum fw_dim). A packet walks each tree (at most FW_TREE_DEPTH nodes) to
 * a leaf and checks its candidates (at most FW_LEAF_MAX, in priority order)
 * exactly with fw_entry_match; the lowest matching entry index wins, else
 * the root's policy. Cost: groups x (depth + leaf), whatever the rule count.
 * While edits wait for a rebuild, a small delta stage (fw_delta_step, at
 * most FW_DELTA_MAX more candidates) is applied to that answer.
 * docs/classifier.md describes the algorithm and its bounds. */
#ifndef XDPFW_CLASSIFY_H
#define XDPFW_CLASSIFY_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../types.h"
#include "../maps.h"
#include "ratelimit.h"
#include "connlimit.h"

/* fw_limit tests (take 0) or takes (take 1) a token of rule_id's -m limit
 * bucket (fw_limits, lib/ratelimit.h): the walk tests it where the rule's
 * entry matches, and the entry decides only when a token is there; the
 * decision takes it (FW_EF_LIMIT in fw_decision.flags: fw_log_emit). A
 * rule is reached, and its token
 * taken, only when no earlier rule decided, as in iptables; the bucket is
 * the rule's alone, so nothing between the test and the take changes it
 * but another CPU (off by one token per CPU at most, as every bucket
 * here). No bucket (never, in a generation the control plane installed):
 * no token. A global function: verified once. docs/limits.md. */
__noinline int fw_limit(__u32 rule_id, int take)
{
	struct fw_bucket *b = bpf_map_lookup_elem(&fw_limits, &rule_id);

	if (!b)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (take)
		return fw_rl_take(&b->tat, now, b->interval_ns, b->burst);
	return fw_rl_ready(b->tat, now, b->interval_ns, b->burst);
}
#include "addrtype.h"

/* fw_log_scratch_of is the scratch slot of the hook deciding p: XDP and tc
 * may run on one CPU (a softirq's XDP never interrupts tc egress, which
 * runs with bottom halves off, but they keep apart anyway). */
static __always_inline struct fw_log_scratch *fw_log_scratch_of(__u8 chain)
{
	__u32 slot = chain == FW_CHAIN_OUTPUT;

	return bpf_map_lookup_elem(&fw_log_scratch, &slot);
}

/* fw_note adds entry idx of rule rule_id to one set of notes (idx, ids:
 * cap places, n of them taken, over: 1 + the lowest index left out):
 * each rule once, at its lowest index. When full, with evict the highest
 * index goes (LOG: the first FW_LOG_MAX in rule order log); without, the
 * new one does (counting: cheaper for the verifier over FW_COUNT_MAX
 * places, and the notes after the decision are the ones dropped anyway
 * but for packets that match more than FW_COUNT_MAX). Returns the places
 * taken. */
static __always_inline __u32 fw_note(__u32 *idxs, __u32 *ids, __u32 *over, __u32 n, const __u32 cap,
				     const int evict, __u32 idx, __u32 rule_id)
{
	__u32 worst = 0, at = 0;

	if (n == 0) /* the packet's first note: the slot is stale */
		*over = 0;
	if (n > cap)
		n = cap;
	for (__u32 i = 0; i < cap; i++) {
		if (i >= n)
			break;
		if (ids[i] == rule_id) {
			if (idx < idxs[i])
				idxs[i] = idx;
			return n;
		}
		if (evict && idxs[i] >= worst) {
			worst = idxs[i];
			at = i;
		}
	}
	if (n < cap) {
		idxs[n] = idx;
		ids[n] = rule_id;
		return n + 1;
	}
	if (evict && idx < worst && at < cap) { /* evict the highest */
		idxs[at] = idx;
		ids[at] = rule_id;
		idx = worst;
	}
	if (!*over || idx < *over - 1)
		*over = idx + 1;
	return n;
}

/* fw_log_note records that the LOG entry e (at index idx) matches the
 * packet being classified in chain: the scratch keeps the FW_LOG_MAX
 * lowest-index LOG rules, each once (a rule's entries may match in
 * several trees), and in over the lowest index it had to leave out. A
 * counting entry (flags FW_EF_COUNT) goes to the counting notes instead
 * (FW_COUNT_MAX places). Inlined in fw_walk_pass, a global function:
 * verified once, not once per leaf candidate. */
static __always_inline int fw_log_note(struct fw_decision *d, __u32 idx, __u32 rule_id, __u32 flags, __u32 chain)
{
	struct fw_log_scratch *s = fw_log_scratch_of(chain);
	if (!s)
		return 0;
	if (flags & FW_EF_COUNT)
		d->ncount = fw_note(s->cidx, s->cids, &s->cover, d->ncount, FW_COUNT_MAX, 0, idx, rule_id);
	else
		d->nlog = fw_note(s->idx, s->ids, &s->over, d->nlog, FW_LOG_MAX, 1, idx, rule_id);
	return 0;
}

/* fw_log_finish keeps the noted LOG rules that come before the deciding
 * entry (s->best; FW_NO_TREE: the policy), in rule order, and counts a
 * packet that had more of them than FW_LOG_MAX (FW_LOG_C_OVERFLOW). */
__noinline int fw_log_finish(struct fw_decision *d, __u32 chain)
{
	if (!d)
		return 0;
	struct fw_log_scratch *s = fw_log_scratch_of(chain);
	if (!s) {
		d->nlog = 0;
		d->ncount = 0;
		return 0;
	}
	/* counting notes: fw_count_notes counts those before the decision */
	if (s->cover && s->cover - 1 < s->best && fw_live_writes()) {
		__u32 k = FW_LOG_C_COUNT_OVERFLOW;
		__u64 *c = bpf_map_lookup_elem(&fw_log_counters, &k);
		if (c)
			(*c)++;
	}
	if (!d->nlog)
		return 0;
	__u32 n = 0, total = d->nlog, best = s->best;

	if (total > FW_LOG_MAX)
		total = FW_LOG_MAX;
	/* insertion sort by entry index, dropping those at or after best */
	for (__u32 i = 0; i < FW_LOG_MAX; i++) {
		if (i >= total)
			break;
		__u32 idx = s->idx[i], id = s->ids[i];
		if (idx >= best)
			continue;
		__u32 j = n;
		for (__u32 k = 0; k < FW_LOG_MAX; k++) {
			if (j == 0 || j >= FW_LOG_MAX || s->idx[j - 1] <= idx)
				break;
			s->idx[j] = s->idx[j - 1];
			s->ids[j] = s->ids[j - 1];
			j--;
		}
		if (j < FW_LOG_MAX) {
			s->idx[j] = idx;
			s->ids[j] = id;
		}
		n++;
	}
	d->nlog = n;
	if (s->over && s->over - 1 < best && fw_live_writes()) {
		__u32 k = FW_LOG_C_OVERFLOW;
		__u64 *c = bpf_map_lookup_elem(&fw_log_counters, &k);
		if (c)
			(*c)++;
	}
	return 0;
}

/* fw_state_of is the -m recent notes' slot of the hook deciding p (as
 * fw_log_scratch_of). */
static __always_inline struct fw_state_scratch *fw_state_of(__u32 chain)
{
	__u32 slot = chain == FW_CHAIN_OUTPUT;

	return bpf_map_lookup_elem(&fw_state_scratch, &slot);
}

/* fw_state_note records that the noted entry idx (FW_EF_STATE: -m recent;
 * FW_EF_NOTE: a probe or guarded entry) matches: each note key (one rule
 * at one place of the flattened chains: fw_entry.note) once, at its lowest
 * index, the notes kept in index order (fw_state_settle takes them in
 * turn). More than FW_STATE_MAX (which the compiler's bound rules out) set
 * nstate past it: fw_state_settle then drops the packet. */
static __always_inline void fw_state_note(struct fw_decision *d, __u32 idx, __u32 key, __u32 chain)
{
	struct fw_state_scratch *s = fw_state_of(chain);
	__u32 n = d->nstate;

	if (!s || n > FW_STATE_MAX)
		return;
	/* a key noted already (another of its entries, in another tree):
	 * keep the lower index; the key's entries are adjacent in index, so
	 * no other note lies between the two and the order holds */
	for (__u32 i = 0; i < FW_STATE_MAX; i++) {
		if (i >= n)
			break;
		if (s->ids[i] == key) {
			if (idx < s->idx[i])
				s->idx[i] = idx;
			return;
		}
	}
	if (n >= FW_STATE_MAX) {
		d->nstate = n + 1;
		return;
	}
	/* insertion: move the notes after idx up one */
	__u32 j = n;
	for (__u32 k = 0; k < FW_STATE_MAX; k++) {
		if (j == 0 || j >= FW_STATE_MAX || s->idx[j - 1] <= idx)
			break;
		s->idx[j] = s->idx[j - 1];
		s->ids[j] = s->ids[j - 1];
		j--;
	}
	if (j < FW_STATE_MAX) {
		s->idx[j] = idx;
		s->ids[j] = key;
	}
	d->nstate = n + 1;
}

/* fw_walk_pass: a matching entry that may not decide; kind is its action
 * | its flags << 8 | the chain << 16, note its fw_entry.note. A -m recent,
 * probe or guarded entry is noted (settled after the walk) and passed (0);
 * a LOG entry too, and a counting entry (a LOG entry with FW_EF_COUNT: a
 * jump, RETURN or rule without -j); a -m limit entry decides (1) only
 * while its bucket has a token. A global function: verified once. */
__noinline int fw_walk_pass(struct fw_decision *d, __u32 idx, __u32 rule_id, __u32 kind, __u32 note)
{
	__u32 flags = (kind >> 8) & 0xff, chain = kind >> 16;

	if (!d) /* the verifier requires the check on global-function pointers */
		return 0;
	if (flags & (FW_EF_STATE | FW_EF_NOTE)) {
		fw_state_note(d, idx, note, chain);
		return 0;
	}
	if ((kind & 0xff) == FW_ACT_LOG) {
		fw_log_note(d, idx, rule_id, flags, chain);
		return 0;
	}
	return fw_limit(rule_id, 0); /* -m limit: without a token the rule does not match */
}

/* fw_recent_apply does what -m recent rule rule_id does to its list for
 * p, as the kernel's xt_recent (recent_mt): looks the (masked) address up;
 * --set adds it or a time stamp to it; --rcheck/--update count its time
 * stamps within the window; a match of --update adds one; --remove
 * removes it. The entry keeps the TTL of the packet that set or updated
 * it last; --rttl finds it only for a packet of that TTL (or either 0). Returns whether the match is true (after any !); false
 * without the rule's settings. A trace instance (fw_live_writes 0)
 * changes no list. A global function: its loop over the time stamps is
 * verified once, not once per note. */
__noinline int fw_recent_apply(__u32 rule_id, const struct fw_pkt *p, struct fw_state_scratch *s)
{
	const struct fw_recent_rule *r = bpf_map_lookup_elem(&fw_recent_rules, &rule_id);

	if (!r || !p || !s)
		return 0;
	struct fw_recent_key *k = &s->key;
	const __u64 *a = (r->flags & FW_RECENT_F_DEST) ? p->dst : p->src;
	int ret = !!(r->flags & FW_RECENT_F_INVERT);
	int live = fw_live_writes();
	__u64 now = bpf_ktime_get_ns();

	k->addr[0] = a[0] & r->mask[0];
	k->addr[1] = a[1] & r->mask[1];
	k->list = r->list;
	k->family = p->family;
	k->_pad[0] = k->_pad[1] = k->_pad[2] = 0;
	/* the kernel's TTL: as the packet arrived (recent_mt adds back the
	 * one FORWARD's fw_pkt.ttl lost) */
	__u8 ttl = p->ttl + (p->chain == FW_CHAIN_FORWARD);
	struct fw_recent_entry *e = bpf_map_lookup_elem(&fw_recent, k);
	/* --rttl: an entry of another TTL is not found (recent_entry_lookup) */
	if (e && (r->flags & FW_RECENT_F_TTL) && ttl != e->ttl && ttl && e->ttl)
		e = NULL;
	if (!e) {
		if (r->op != FW_RECENT_SET)
			return ret;
		if (live) { /* one time stamp: the rest of the ring is never read */
			s->fresh.stamps[0] = now;
			s->fresh.index = 1;
			s->fresh.nstamps = 1;
			s->fresh.ttl = ttl;
			bpf_map_update_elem(&fw_recent, k, &s->fresh, BPF_ANY);
		}
		return !ret;
	}
	if (r->op == FW_RECENT_SET) {
		ret = !ret;
	} else if (r->op == FW_RECENT_REMOVE) {
		if (live)
			bpf_map_delete_elem(&fw_recent, k);
		return !ret;
	} else {
		__u32 hits = 0, n = e->nstamps;
		for (__u32 i = 0; i < FW_RECENT_STAMPS; i++) {
			if (i >= n)
				break;
			/* the kernel: time_after(now - seconds, stamp) skips it */
			if (r->window_ns && now - e->stamps[i] > r->window_ns)
				continue;
			if (!r->hitcount || ++hits >= r->hitcount) {
				ret = !ret;
				break;
			}
		}
	}
	if (live && (r->op == FW_RECENT_SET || (r->op == FW_RECENT_UPDATE && ret))) {
		__u32 at = e->index & (FW_RECENT_STAMPS - 1);
		e->stamps[at] = now;
		e->index = at + 1;
		if (e->index > e->nstamps)
			e->nstamps = e->index;
		e->ttl = ttl; /* as the kernel: the last --set or --update's */
	}
	return ret;
}

/* fw_hashlimit_apply does what -m hashlimit rule rule_id does for p, as
 * the kernel's xt_hashlimit: builds the key of its mode (masked
 * addresses, the ports of TCP, UDP, UDP-Lite and SCTP), looks its bucket
 * up (one idle expire_ns or longer is forgotten: full), takes a token
 * when there is one and marks the bucket seen. Returns whether the match
 * is true (--hashlimit-upto: a token was taken; --hashlimit-above: none
 * was there); false without the rule's settings. A trace instance
 * changes no bucket. A global function: verified once. */
__noinline int fw_hashlimit_apply(__u32 rule_id, const struct fw_pkt *p, struct fw_state_scratch *s)
{
	const struct fw_hashlimit_rule *r = bpf_map_lookup_elem(&fw_hashlimit_rules, &rule_id);

	if (!r || !p || !s)
		return 0;
	struct fw_hashlimit_key *k = &s->hkey;
	__u32 f = r->flags;
	int ports = (p->flags & FW_PKT_L4) && (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP ||
					       p->proto == IPPROTO_UDPLITE || p->proto == IPPROTO_SCTP);

	__builtin_memset(k, 0, sizeof(*k));
	if (f & FW_HL_F_SRCIP) {
		k->src[0] = p->src[0] & r->srcmask[0];
		k->src[1] = p->src[1] & r->srcmask[1];
	}
	if (f & FW_HL_F_DSTIP) {
		k->dst[0] = p->dst[0] & r->dstmask[0];
		k->dst[1] = p->dst[1] & r->dstmask[1];
	}
	if (ports && (f & FW_HL_F_SRCPORT))
		k->sport = p->sport;
	if (ports && (f & FW_HL_F_DSTPORT))
		k->dport = p->dport;
	k->table = r->table;
	k->family = p->family;

	__u64 now = bpf_ktime_get_ns(), tat = 0;
	struct fw_hashlimit_bucket *b = bpf_map_lookup_elem(&fw_hashlimit, k);
	if (b && now - b->seen < r->expire_ns)
		tat = b->tat;
	int token = fw_rl_ready(tat, now, r->interval_ns, r->burst);
	if (token)
		tat = (tat > now ? tat : now) + r->interval_ns;
	if (fw_live_writes()) {
		if (b) {
			b->tat = tat;
			b->seen = now;
		} else {
			s->hfresh.tat = tat;
			s->hfresh.seen = now;
			bpf_map_update_elem(&fw_hashlimit, k, &s->hfresh, BPF_ANY);
		}
	}
	return token != !!(f & FW_HL_F_ABOVE);
}

/* fw_state_settle takes the entries the walk noted (fw_state_note) that
 * come before best (the walk's deciding entry; FW_NO_TREE: the policy),
 * in rule order, with the packet's probe bits (none set at first), as
 * iptables meets their rules: an entry whose guard the bits fail is
 * passed (the packet does not reach it); a -m recent entry does what its
 * rule does to its list (fw_recent_apply), a -m hashlimit one
 * (FW_EF_HASHLIMIT) to its bucket (fw_hashlimit_apply), a -m connlimit one
 * (FW_EF_CONNLIMIT) counts the packet's connection (fw_connlimit_apply:
 * one it cannot count drops the packet), a -m limit one that is no LOG
 * rule takes a token (fw_limit), and is passed when that does not match;
 * then a probe sets its bit and counts its rule, a LOG or counting entry is noted for logging
 * or counting (fw_walk_pass; a LOG rule's -m recent or -m hashlimit entry once its test
 * matched), and any other decides: it fills d, sets
 * *at_idx to its entry index and returns 1 (LOG rules after it then log
 * nothing: fw_log_finish cuts at the scratch's best). Returns 0 when none
 * decides. docs/limits.md. */
static __always_inline int fw_state_settle(struct fw_decision *d, const struct fw_pkt *p, __u32 best, __u32 gen,
					   __u32 *at_idx)
{
	struct fw_state_scratch *s = fw_state_of(p->chain);
	__u32 n = d->nstate, bits = 0;

	d->nstate = 0;
	if (!s)
		return 0;
	if (n > FW_STATE_MAX) { /* more than the compiler allows: fail closed */
		__u32 c = FW_LOG_C_STATE_OVERFLOW;
		__u64 *cnt = bpf_map_lookup_elem(&fw_log_counters, &c);
		if (cnt && fw_live_writes())
			(*cnt)++;
		*at_idx = 0; /* no LOG rule logs it */
		d->rule_id = 0;
		d->action = FW_ACT_DROP;
		d->reason = FW_R_NO_RULESET;
		d->flags = 0;
		return 1;
	}
	for (__u32 i = 0; i < FW_STATE_MAX; i++) { /* the notes are in index order */
		if (i >= n)
			break;
		__u32 idx = s->idx[i];
		if (idx >= best)
			break;
		__u32 slot = gen * fw_max_entries + idx;
		const struct fw_entry *e = bpf_map_lookup_elem(&fw_entries, &slot);
		if (!e)
			continue;
		if ((bits & e->guard_mask) != e->guard_val)
			continue;
		__u8 flags = e->flags, action = e->action, probe = e->probe;
		__u32 rule_id = e->rule_id;
		if (flags & FW_EF_STATE) {
			int m = (flags & FW_EF_CONNLIMIT)  ? fw_connlimit_apply(rule_id, s)
				: (flags & FW_EF_HASHLIMIT) ? fw_hashlimit_apply(rule_id, p, s)
							    : fw_recent_apply(rule_id, p, s);
			if (m < 0) { /* a connection -m connlimit cannot count: dropped, as the kernel's hotdrop */
				*at_idx = 0; /* no LOG rule logs it */
				d->rule_id = 0;
				d->action = FW_ACT_DROP;
				d->reason = FW_R_CT_FULL;
				d->flags = 0;
				return 1;
			}
			if (!m)
				continue;
		}
		if ((flags & (FW_EF_LIMIT | FW_EF_STATE)) == FW_EF_LIMIT && action != FW_ACT_LOG && !fw_limit(rule_id, 1))
			continue;
		if (probe) /* its bit, and its rule counts the packet (as a counting entry) */
			bits |= 1u << ((probe - 1) & (FW_PROBE_MAX - 1));
		if (probe || action == FW_ACT_LOG) { /* a LOG rule's -m recent or -m hashlimit (FW_EF_STATE) matched: it logs */
			fw_walk_pass(d, idx, rule_id,
				     probe ? FW_ACT_LOG | FW_EF_COUNT << 8 | p->chain << 16
					   : action | (__u32)(flags & ~(FW_EF_NOTE | FW_EF_STATE)) << 8 | p->chain << 16,
				     0);
			continue;
		}
		/* e again: the calls above may have spilled it */
		e = bpf_map_lookup_elem(&fw_entries, &slot);
		if (!e)
			continue;
		d->rule_id = e->rule_id;
		d->action = e->action;
		d->reason = e->reason;
		d->reject = e->reject;
		d->flags = e->flags & FW_EF_LOG; /* a -m limit's token is taken already */
		*at_idx = idx;
		return 1;
	}
	return 0;
}

/* fw_notes_end finishes what the walk noted, once the decision is in d:
 * LOG notes learn the deciding entry (best: those after it log nothing,
 * fw_log_finish), and -m recent notes are settled (fw_state_settle, on
 * generation gen): when one decides, it replaces the walk's decision in
 * d, and LOG rules after it log nothing. Called by the XDP classify stage
 * only where the walk noted something: a global function, verified once,
 * not code checked on every state the walk leaves. */
__noinline int fw_notes_end(struct fw_decision *d, __u32 best, __u32 gen)
{
	__u32 zero = 0;
	/* the packet from the hand-over slot, not a pointer argument (which
	 * made the verifier check the rest of the stage once more) */
	const struct fw_xdp_handoff *h = bpf_map_lookup_elem(&fw_xdp_handoff, &zero);

	if (!d || !h)
		return 0;
	const struct fw_pkt *p = &h->pkt;
	__u32 idx = best;

	if (d->nstate)
		fw_state_settle(d, p, best, gen, &idx);
	if (d->nlog | d->ncount) {
		struct fw_log_scratch *s = fw_log_scratch_of(p->chain);
		if (s)
			s->best = idx;
	}
	return 0;
}

/* fw_notes_best is fw_notes_end for tc egress, where -m recent rules are
 * refused (the compiler): fw_classify's frame and fw_notes_end's would add
 * up past the verifier's 512 bytes. A -m recent note there all the same
 * (a rule set installed by another version) drops the packet: fail
 * closed. */
__noinline int fw_notes_best(struct fw_decision *d, __u32 chain, __u32 best)
{
	if (!d)
		return 0;
	if (d->nlog | d->ncount) {
		struct fw_log_scratch *s = fw_log_scratch_of(chain);
		if (s)
			s->best = best;
	}
	if (d->nstate) {
		d->rule_id = 0;
		d->action = FW_ACT_DROP;
		d->reason = FW_R_NO_RULESET;
		d->flags = 0;
		d->nstate = 0;
	}
	return 0;
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	__u8 diff = 0;

#pragma unroll
	for (int i = 0; i < 6; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

/* fw_in_set: is addr (16 bytes, IPv4 in the first 4) in set id? */
static __always_inline int fw_in_set(__u32 id, const __u64 *addr)
{
	struct fw_set_key k = { .prefixlen = 32 + 128, .set_id = bpf_htonl(id) };

	__builtin_memcpy(k.addr, addr, 16);
	return bpf_map_lookup_elem(&fw_sets, &k) != NULL;
}

/* fw_pkttype is the packet's type as iptables' -m pkttype (xt_pkttype)
 * sees it: skb->pkt_type, which eth_type_trans sets from the destination
 * MAC (broadcast: ff:ff:ff:ff:ff:ff; multicast: the group bit; else to this
 * host: a frame for another host's MAC never reaches iptables, the kernel
 * drops it first). A locally sent packet is PACKET_HOST in OUTPUT whatever
 * its destination (Linux marks its broadcast and multicast copies later).
 * A PPPoE session's packet reaches iptables by the ppp device as
 * PACKET_HOST whatever the frame's MAC (ppp_receive_frame scrubs it). */
static __always_inline __u32 fw_pkttype(const struct fw_pkt *p)
{
	if (p->chain == FW_CHAIN_OUTPUT || !(p->dst_mac[0] & 1) || (p->flags & FW_PKT_PPPOE))
		return FW_PT_HOST;
	const __u16 *w = (const __u16 *)p->dst_mac;
	return (w[0] & w[1] & w[2]) == 0xffff ? FW_PT_BROADCAST : FW_PT_MULTICAST;
}

/* fw_in_range: is addr (16 bytes, network order, IPv4 in the first 4) in
 * [lo, hi] (fw_entry's srange/drange: 128-bit host-order numbers)? */
static __always_inline int fw_in_range(const __u64 *addr, const __u64 *lo, const __u64 *hi)
{
	__u64 a0 = bpf_be64_to_cpu(addr[0]), a1 = bpf_be64_to_cpu(addr[1]);

	return (a0 > lo[0] || (a0 == lo[0] && a1 >= lo[1])) && (a0 < hi[0] || (a0 == hi[0] && a1 <= hi[1]));
}

#define FW_TEST(bit, cond)                                             \
	if ((m & (bit)) && (!!(cond)) == !!(inv & (bit)))              \
		return 0

/* One entry against one packet. A global (non-inlined) function: the
 * verifier checks it once, not once per candidate of every leaf. */
__noinline int fw_entry_match(const struct fw_entry *e, const struct fw_pkt *p)
{
	if (!e || !p) /* the verifier requires the check on global-function pointers */
		return 0;

	__u64 m = e->match, inv = e->invert;

	if (e->chain != p->chain)
		return 0;
	if ((m & FW_M_L4) && !(p->flags & FW_PKT_L4))
		return 0;
	if ((m & FW_M_FAMILY) && e->family != p->family)
		return 0;
	FW_TEST(FW_M_PROTO, e->proto == p->proto);
	FW_TEST(FW_M_SRC, (p->src[0] & e->src_mask[0]) == e->src[0] &&
			  (p->src[1] & e->src_mask[1]) == e->src[1]);
	FW_TEST(FW_M_DST, (p->dst[0] & e->dst_mask[0]) == e->dst[0] &&
			  (p->dst[1] & e->dst_mask[1]) == e->dst[1]);
	FW_TEST(FW_M_SPORT, p->sport >= e->sport_lo && p->sport <= e->sport_hi);
	FW_TEST(FW_M_DPORT, p->dport >= e->dport_lo && p->dport <= e->dport_hi);
	FW_TEST(FW_M_IFINDEX, p->ifindex == e->ifindex);
	FW_TEST(FW_M_OIF, p->oifindex >= e->oif_lo && p->oifindex <= e->oif_hi);
	FW_TEST(FW_M_MACSRC, mac_eq(p->src_mac, e->src_mac));
	FW_TEST(FW_M_MACDST, mac_eq(p->dst_mac, e->dst_mac));
	FW_TEST(FW_M_TCPFLAGS, (p->tcp_flags & e->tcp_mask) == e->tcp_cmp);
	FW_TEST(FW_M_ICMPTYPE, p->icmp_type == e->icmp_type &&
			       (!(m & FW_M_ICMPCODE) || p->icmp_code == e->icmp_code));
	FW_TEST(FW_M_VLAN, (p->flags & FW_PKT_VLAN) && p->vlan_id == e->vlan_id);
	FW_TEST(FW_M_VLANPCP, (p->flags & FW_PKT_VLAN) && p->vlan_pcp == e->vlan_pcp);
	FW_TEST(FW_M_FRAG, p->flags & FW_PKT_FRAG);
	if ((m & FW_M_CTSTATE) && !(e->ctstate & (1u << p->ctstate)))
		return 0;
	FW_TEST(FW_M_LEN, p->l3_len >= e->len_lo && p->l3_len <= e->len_hi);
	FW_TEST(FW_M_TTL, p->ttl >= e->ttl_lo && p->ttl <= e->ttl_hi);
	FW_TEST(FW_M_TOS, (p->tos & e->tos_mask) == e->tos_cmp);
	FW_TEST(FW_M_ECNIP, (p->tos & 3) == e->ecn_ip);
	if ((m & FW_M_ECNTCP) && (p->tcp_flags & e->ecn_mask) != e->ecn_cmp)
		return 0;
	FW_TEST(FW_M_CTDIR, p->ctinfo & FW_CTI_REPLY);
	FW_TEST(FW_M_CTSTATUS, p->ctinfo & e->ctstatus);
	FW_TEST(FW_M_CTNAT, p->ctinfo & e->ctnat);
	FW_TEST(FW_M_CTPROTO, p->ctproto == e->ctproto);
	FW_TEST(FW_M_MSS, (p->flags & FW_PKT_MSS) && p->mss >= e->mss_lo && p->mss <= e->mss_hi);
	if ((m & FW_M_RTHDR) && !(p->flags & FW_PKT_RT))
		return 0;
	FW_TEST(FW_M_RTTYPE, p->rt_type == e->rt_type);
	FW_TEST(FW_M_RTSEGS, p->rt_segsleft >= e->rt_segs_lo && p->rt_segsleft <= e->rt_segs_hi);
	FW_TEST(FW_M_RTLEN, ((__u32)p->rt_hdrlen + 1) * 8 == e->rt_len);
	FW_TEST(FW_M_SRCRANGE, fw_in_range(p->src, e->srange_lo, e->srange_hi));
	FW_TEST(FW_M_DSTRANGE, fw_in_range(p->dst, e->drange_lo, e->drange_hi));
	FW_TEST(FW_M_MARK, (p->mark & e->mark_mask) == e->mark);
	if ((m & FW_M_PKTTYPE) && !(e->pkttypes & (1u << fw_pkttype(p))))
		return 0;
	/* map lookups last: the cheap tests above usually decide first */
	FW_TEST(FW_M_SRCSET, fw_in_set(e->src_set, p->src));
	FW_TEST(FW_M_DSTSET, fw_in_set(e->dst_set, p->dst));
	FW_TEST(FW_M_SRCTYPE, fw_addrtype_ok(e, p, 0));
	FW_TEST(FW_M_DSTTYPE, fw_addrtype_ok(e, p, 1));
	return 1;
}

/* fw_key fills the classification key (compile.KeyOf is its Go twin). */
static __always_inline void fw_key(const struct fw_pkt *p, __u32 *k)
{
	const __u32 *s = (const __u32 *)p->src, *d = (const __u32 *)p->dst;

	if (p->family == 4) { /* the parser leaves the other words zero */
		k[FW_D_SRC0] = bpf_ntohl(s[0]);
		k[FW_D_DST0] = bpf_ntohl(d[0]);
#pragma unroll
		for (int w = 1; w < 4; w++) {
			k[FW_D_SRC0 + w] = 0;
			k[FW_D_DST0 + w] = 0;
		}
	} else {
#pragma unroll
		for (int w = 0; w < 4; w++) {
			k[FW_D_SRC0 + w] = bpf_ntohl(s[w]);
			k[FW_D_DST0 + w] = bpf_ntohl(d[w]);
		}
	}
	k[FW_D_SPORT] = p->sport;
	k[FW_D_DPORT] = p->dport;
	k[FW_D_PROTO] = p->proto;
	k[FW_D_IFINDEX] = p->ifindex;
	k[FW_D_VLAN] = (p->flags & FW_PKT_VLAN) ? p->vlan_id : FW_VLAN_UNTAGGED;
	k[FW_D_MACSRC_HI] = bpf_ntohs(*(const __u16 *)p->src_mac);
	k[FW_D_MACSRC_LO] = bpf_ntohl(*(const __u32 *)(p->src_mac + 2));
	k[FW_D_MACDST_HI] = bpf_ntohs(*(const __u16 *)p->dst_mac);
	k[FW_D_MACDST_LO] = bpf_ntohl(*(const __u32 *)(p->dst_mac + 2));
	k[FW_D_TCPFLAGS] = p->tcp_flags;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	k[FW_D_ICMP] = *(const __u16 *)&p->icmp_code; /* type << 8 | code: one load */
#else
	k[FW_D_ICMP] = (__u32)p->icmp_type << 8 | p->icmp_code;
#endif
	_Static_assert(FW_PKT_FRAG == FW_KEY_FRAG && FW_PKT_L4 == FW_KEY_L4, "fw_key masks the flags");
	k[FW_D_FLAGS] = (p->flags & (FW_PKT_FRAG | FW_PKT_L4)) << FW_KEY_FLAGS_SHIFT | fw_pkttype(p);
	k[FW_D_CTSTATE] = p->ctstate;
	k[FW_D_OIFINDEX] = p->oifindex;
	k[FW_D_LEN] = p->l3_len;
	k[FW_D_TTL] = p->ttl;
	k[FW_D_TOS] = p->tos;
}

/* fw_range_ok: key[rdim[i]] in [rlo[i], rhi[i]]. */
static __always_inline int fw_range_ok(const struct fw_cand *e, const __u32 *key, const int i)
{
	__u32 dim = e->rdim[i];

	if (dim >= FW_NUM_DIMS) /* bounds the stack read for the verifier */
		return 0;
	__u32 v = key[dim];
	return v >= e->rlo[i] && v <= e->rhi[i];
}

/* fw_ranges_match tests a candidate with FW_EF_RANGES against the packet's
 * key: each of its ranges is a load and two compares, where
 * fw_entry_match tests every field the entry could use. */
static __always_inline int fw_ranges_match(const struct fw_cand *e, const __u32 *key)
{
	__u32 n = e->nranges;

	/* Written out (clang does not unroll it inside the leaf loop): no
	 * loop counter, constant offsets into the entry. */
	_Static_assert(FW_RANGES_MAX == 6, "fw_ranges_match tests FW_RANGES_MAX ranges");
	if (n == 0)
		return 1;
	if (!fw_range_ok(e, key, 0))
		return 0;
	if (n == 1)
		return 1;
	if (!fw_range_ok(e, key, 1))
		return 0;
	if (n == 2)
		return 1;
	if (!fw_range_ok(e, key, 2))
		return 0;
	if (n == 3)
		return 1;
	if (!fw_range_ok(e, key, 3))
		return 0;
	if (n == 4)
		return 1;
	if (!fw_range_ok(e, key, 4))
		return 0;
	if (n == 5)
		return 1;
	return fw_range_ok(e, key, 5);
}

/* fw_tree returns the lowest index of a deciding entry matching p among
 * the candidates of the leaf that tree reference root reaches, below best
 * (else best; *best_c is then that entry's candidate record). Matching LOG
 * entries on the way are noted in d; a -m limit entry matches only while
 * its bucket has a token (taken once it decides: fw_classify_in). */
static __always_inline __u32 fw_tree(__u32 root, const __u32 *key, const struct fw_pkt *p,
				     __u32 gen, __u32 best,
				     const struct fw_cand **best_c, struct fw_decision *d)
{
	/* 64-bit, and hidden from clang after each load (the empty asm): the
	 * leaf test is then one compare, without a sign extension */
	__u64 ref = root;
	__u32 base = gen * fw_max_nodes;

	/* Fat nodes (struct fw_node); the binary tree's depth bound bounds
	 * their levels too. */
	for (__u64 depth = 0; depth < FW_TREE_DEPTH; depth++) {
		if (ref >= FW_REF_LEAF)
			break;
		__u32 slot = base + ref;
		const struct fw_node *node = bpf_map_lookup_elem(&fw_nodes, &slot);
		if (!node)
			return best;
		__u32 dim = node->dim;
		if (dim >= FW_NUM_DIMS) /* bounds the stack read for the verifier */
			return best;
		/* The child is child[c]: three steps down the node's binary
		 * tree, threshold p comparing key[dim], or key[dim2] where bit
		 * p of mask is set. With branches: a packet's path is
		 * predicted, so the CPU runs ahead to the next node while the
		 * compares resolve. Measured against a branchless search (each
		 * level then waits for its compares: slower than the binary
		 * tree) and a branchless sum over the 7, this is the fewest
		 * instructions and the fastest (docs/classifier.md). */
		__u32 v = key[dim], m = node->mask;
		const __u32 *t = node->thresh;
		__u32 c;
		if (!m) {
			/* one dimension (most nodes): the binary search for the
			 * number of thresholds below v (unused ones are
			 * FW_NO_THRESH, above every key) */
			if (v > t[3]) {
				if (v > t[5])
					c = v > t[6] ? 7 : 6;
				else
					c = v > t[4] ? 5 : 4;
			} else {
				if (v > t[1])
					c = v > t[2] ? 3 : 2;
				else
					c = v > t[0] ? 1 : 0;
			}
			ref = node->child[c];
			asm volatile("" : "+r"(ref));
			continue;
		}
		/* two dimensions: the one threshold p tests is selected
		 * without a branch, v ^ (x masked by bit p) */
		__u32 dim2 = node->dim2;
		if (dim2 >= FW_NUM_DIMS)
			return best;
		__u32 x = v ^ key[dim2];
#define FW_V(p) (v ^ (x & (0u - ((m >> (p)) & 1))))
		if (FW_V(3) > t[3]) {
			if (FW_V(5) > t[5])
				c = FW_V(6) > t[6] ? 7 : 6;
			else
				c = FW_V(4) > t[4] ? 5 : 4;
		} else {
			if (FW_V(1) > t[1])
				c = FW_V(2) > t[2] ? 3 : 2;
			else
				c = FW_V(0) > t[0] ? 1 : 0;
		}
#undef FW_V
		ref = node->child[c];
		asm volatile("" : "+r"(ref));
	}
	if (ref < FW_REF_LEAF) /* deeper than any tree the builder makes */
		return best;
	__u32 first = FW_REF_FIRST(ref), count = FW_REF_COUNT(ref);
	for (__u32 j = 0; j < FW_LEAF_MAX; j++) {
		if (j >= count)
			break;
		__u32 idx = first; /* a leaf of one candidate holds its entry index */
		if (count > 1) {
			__u32 slot = gen * fw_max_leaves + first + j;
			const __u32 *ip = bpf_map_lookup_elem(&fw_leaves, &slot);
			if (!ip)
				break;
			idx = *ip;
		}
		if (idx >= best) /* candidates are in priority order */
			break;
		__u32 eslot = gen * fw_max_entries + idx;
		/* the candidate record (64 bytes); the entry itself only where
		 * the record's ranges are not the whole match */
		const struct fw_cand *c = bpf_map_lookup_elem(&fw_cands, &eslot);
		if (!c)
			continue;
		__u32 flags = c->flags;
		if ((flags & (FW_EF_RANGES | FW_EF_LIMIT | FW_EF_STATE | FW_EF_NOTE)) == FW_EF_RANGES) {
			/* the common case: the record's ranges are the whole
			 * match, and a match decides (a LOG entry's record has
			 * no FW_EF_RANGES: install.go, candOf) */
			if (!fw_ranges_match(c, key))
				continue;
		} else {
			const struct fw_entry *e = bpf_map_lookup_elem(&fw_entries, &eslot);
			if (!e || !fw_entry_match(e, p))
				continue;
			/* one call site: each branch here is explored once per
			 * candidate of each of the unrolled trees */
			if ((e->action == FW_ACT_LOG || (flags & (FW_EF_LIMIT | FW_EF_STATE | FW_EF_NOTE))) &&
			    !fw_walk_pass(d, idx, e->rule_id, e->action | flags << 8 | (__u32)p->chain << 16, e->note))
				continue;
		}
		*best_c = c;
		return idx;
	}
	return best;
}

/* fw_active_sel returns what is in force: FW_ACTIVE's value - 1 (the main
 * generation in bit 0, the delta (0 none, 1 + its half) in bits 1-2), or
 * -1 when no rule set is installed. */
static __always_inline int fw_active_sel(void)
{
	__u32 zero = 0;
	const __u32 *active = bpf_map_lookup_elem(&fw_active, &zero);

	if (!active || *active == 0)
		return -1;
	return (*active - 1) & 7;
}

/* fw_root_at returns the root for p's chain and family of sel (from
 * fw_active_sel): the delta stage's root while a delta is in force (its
 * fast rules and flags account for the edits; its trees are the main
 * generation's), else the main generation's. */
static __always_inline const struct fw_root *fw_root_at(const struct fw_pkt *p, __u32 sel)
{
	__u32 gen = sel & 1, delta = (sel >> 1) & 3;
	__u32 r = p->chain * 2 + (p->family == 6);

	if (r >= FW_NUM_ROOTS) /* bounds the index for the verifier */
		return NULL;
	if (delta) {
		__u32 half = (delta - 1) & 1;
		const struct fw_delta *dl = bpf_map_lookup_elem(&fw_deltas, &half);
		return dl ? &dl->roots[r] : NULL;
	}
	r += gen * FW_NUM_ROOTS;
	return bpf_map_lookup_elem(&fw_roots, &r);
}

/* fw_delta_step applies the delta stage in half to the main tables' answer:
 * best, the first matching main entry index (FW_NO_TREE: none), and *c,
 * that entry's candidate record. It returns the deciding delta entry, or
 * NULL when the main answer stands: *c, or the policy when *c is NULL.
 * When best belongs to a deleted rule it no longer counts (*c becomes
 * NULL), and the delta's copies of the main entries that overlap the
 * deleted rule take its place; else only added entries placed at or
 * before best can beat it. Proof and bounds: docs/classifier.md. */
static __always_inline const struct fw_entry *fw_delta_step(__u32 half, __u32 best, const struct fw_cand **c,
							    const struct fw_pkt *p)
{
	const struct fw_delta *dl = bpf_map_lookup_elem(&fw_deltas, &half);

	if (!dl)
		return NULL;
	__u32 bound = best;
	if (*c) {
		__u32 id = (*c)->rule_id;
		for (__u32 i = 0; i < FW_DELTA_DEAD; i++) {
			if (i >= dl->dead_count)
				break;
			if (dl->dead[i] == id) {
				bound = FW_NO_TREE;
				*c = NULL;
				break;
			}
		}
	}
	for (__u32 i = 0; i < FW_DELTA_MAX; i++) {
		if (i >= dl->count || dl->pos[i] > bound) /* sorted by pos */
			break;
		__u32 slot = half * FW_DELTA_MAX + i;
		const struct fw_entry *de = bpf_map_lookup_elem(&fw_delta_entries, &slot);
		/* The control plane puts no LOG entry here (rule sets that log
		 * are compiled in full); should one come, it decides nothing. */
		if (de && de->action != FW_ACT_LOG && fw_entry_match(de, p))
			return de;
	}
	return NULL;
}

/* fw_classify_in finds the first entry of root matching p and fills *d
 * (the policy when none does). sel is fw_active_sel's: the main
 * generation and the delta in force. Inline only where nothing precedes
 * it in the program (the XDP classify stage, xdp_fw.c): the verifier
 * checks it once per distinct state it is reached in. xdp (a constant)
 * selects how the walk's notes are finished: fw_notes_end (XDP: settles
 * -m recent rules) or fw_notes_best (tc). */
static __always_inline int fw_classify_in(const struct fw_root *root, __u32 sel, const struct fw_pkt *p,
					  struct fw_decision *d, const int xdp)
{
	__u32 key[FW_NUM_DIMS] __attribute__((aligned(8))); /* fw_key's zero pairs: one store each */

	__u32 gen = sel & 1, delta = (sel >> 1) & 3;
	/* the candidate record at best: fw_tree hands it over, no second lookup */
	const struct fw_cand *c = NULL;
	const struct fw_entry *de = NULL; /* a deciding delta entry */

	fw_key(p, key);
	__u32 best = FW_NO_TREE;
#pragma unroll
	for (int g = 0; g < FW_MAX_GROUPS; g++) {
		if (root->groups[g] != FW_NO_TREE)
			best = fw_tree(root->groups[g], key, p, gen, best, &c, d);
	}
	if (delta) /* nothing to do while no edit waits for a rebuild */
		de = fw_delta_step((delta - 1) & 1, best, &c, p);
	if (de) {
		d->rule_id = de->rule_id;
		d->action = de->action;
		d->reason = de->reason;
		d->reject = de->reject;
		d->flags = de->flags & (FW_EF_LOG | FW_EF_LIMIT);
	} else if (c) {
		d->rule_id = c->rule_id;
		d->action = c->action;
		d->reason = c->reason;
		d->reject = c->reject;
		/* FW_EF_LIMIT: the walk saw a token, the rule decides and takes
		 * it after the decision (fw_log_emit): a store here, not a
		 * branch, which every state the walk leaves would be checked on */
		d->flags = c->flags & (FW_EF_LOG | FW_EF_LIMIT);
	} else {
		d->rule_id = root->rule_id;
		d->action = root->action;
		d->reason = root->reason;
	}
	if (d->nlog | d->ncount | d->nstate) { /* what the walk noted needs its decision */
		if (xdp)
			fw_notes_end(d, best, gen);
		else
			fw_notes_best(d, p->chain, best);
	}
	return 0;
}

/* fw_classify is fw_classify_in as a global function (tc egress): verified
 * once, not once per path through the conntrack code that precedes it
 * (which would exceed the verifier's budget). Returns 0, or -1 on a NULL
 * argument. */
__noinline int fw_classify(const struct fw_root *root, __u32 sel, const struct fw_pkt *p, struct fw_decision *d)
{
	if (!root || !p || !d) /* the verifier requires the check on global-function pointers */
		return -1;
	return fw_classify_in(root, sel, p, d, 0);
}

/* fw_classify_xdp is fw_classify_in at the XDP hook as a global function:
 * the audit and nat stages' (lib/audit.h, lib/natfw.h), whose walk inlined after the
 * paths that precede it exceeds the verifier's budget. Returns 0, or -1 on
 * a NULL argument. */
__noinline int fw_classify_xdp(const struct fw_root *root, __u32 sel, const struct fw_pkt *p, struct fw_decision *d)
{
	if (!root || !p || !d)
		return -1;
	return fw_classify_in(root, sel, p, d, 1);
}

#endif
