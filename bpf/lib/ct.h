/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Connection tracking: what a packet is to its connection (enum
 * fw_ct_state), decided before classification, and the entry an accepted
 * packet creates or advances.
 *
 * One hash entry per connection, keyed by its endpoints in a fixed order so
 * both directions find it with one lookup. TCP follows a window-independent
 * state machine (fw_tcp_next) that is strict about what cannot belong to a
 * connection: a first packet that is not a bare SYN, an ACK before the
 * SYN-ACK, flag combinations no stack sends. UDP and other protocols are
 * NEW until a reply, ICMP queries are tracked by their id, and ICMP errors
 * quoting a tracked connection are RELATED. An entry past its deadline is
 * treated as absent before any GC runs. docs/conntrack.md has the details. */
#ifndef XDPFW_CT_H
#define XDPFW_CT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../types.h"
#include "../maps.h"
#include "ctdying.h"

/* What the lookup found, and what an accepted packet writes. The entry
 * pointer and the clock come last: the rest (fw_ct_plan_size bytes) holds
 * no pointer, so the XDP program's classify stage receives it through a
 * map (fw_ct_relink finds the entry again and reads the clock). */
struct fw_ct {
	struct fw_ct_key key;
	__u8 from_a;           /* the packet goes from endpoint a to b */
	__u8 reply;            /* it goes against the connection's first packet */
	__u8 next;             /* enum fw_ct_conn after it; FW_CTS_NONE: write nothing */
	__u8 create;           /* 1: create (or replace) the entry */
	__u8 setflags;         /* FW_CTF_* to add to a live entry */
	__u8 _pad[3];
	struct fw_ct_entry *e; /* the live entry, or NULL */
	__u64 now;             /* fw_ct_now() of the lookup: the commit's clock too; set before the lookup: e is
				* the caller's lookup of the key at that time (fw_ct_lookup) */
};
#define fw_ct_plan_size __builtin_offsetof(struct fw_ct, e)
#define fw_ct_next_off __builtin_offsetof(struct fw_ct, next)

/* Default timeouts (seconds) per enum fw_ct_timeout, close to Linux
 * nf_conntrack's; internal/conntrack.DefaultTimeouts mirrors them. */
static const __u32 fw_ct_default_timeout[FW_CTT_NUM] = {
	120, 60, 432000, 120, 30, 120, 10, 30, 120, 30, 600,
};

static __always_inline __u64 fw_ct_timeout_ns(__u32 cls)
{
	__u32 zero = 0, secs = 0;
	const struct fw_config *cfg = bpf_map_lookup_elem(&fw_config_map, &zero);

	if (cls >= FW_CTT_NUM)
		return 0;
	if (cfg)
		secs = cfg->ct_timeout[cls];
	if (!secs)
		secs = fw_ct_default_timeout[cls];
	return (__u64)secs * 1000000000ULL;
}

/* fw_ct_tclass is the timeout class of a connection in state with flags
 * (FW_CTF_*). A connection picked up mid-stream that has not been answered
 * yet has tcp_syn_recv's: it may be nothing but a stray or forged ACK. */
static __always_inline __u32 fw_ct_tclass(__u8 proto, __u8 state, __u8 flags)
{
	if (state == FW_CTS_ESTABLISHED && (flags & (FW_CTF_PICKUP | FW_CTF_REPLIED)) == FW_CTF_PICKUP)
		return FW_CTT_TCP_SYN_RECV;
	switch (state) {
	case FW_CTS_SYN_SENT:
	case FW_CTS_SYN_SENT2:
		return FW_CTT_TCP_SYN_SENT;
	case FW_CTS_SYN_RECV:
		return FW_CTT_TCP_SYN_RECV;
	case FW_CTS_ESTABLISHED:
		return FW_CTT_TCP_ESTABLISHED;
	case FW_CTS_FIN_WAIT:
		return FW_CTT_TCP_FIN_WAIT;
	case FW_CTS_LAST_ACK:
		return FW_CTT_TCP_LAST_ACK;
	case FW_CTS_TIME_WAIT:
		return FW_CTT_TCP_TIME_WAIT;
	case FW_CTS_CLOSE:
		return FW_CTT_TCP_CLOSE;
	}
	if (proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE)
		return state == FW_CTS_REPLIED ? FW_CTT_UDP_STREAM : FW_CTT_UDP;
	if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6)
		return FW_CTT_ICMP;
	return FW_CTT_OTHER;
}

/* fw_ct_tcp_strict: is mid-stream pickup off (fw_config.ct_tcp_strict)? */
static __always_inline int fw_ct_tcp_strict(void)
{
	__u32 zero = 0;
	const struct fw_config *cfg = bpf_map_lookup_elem(&fw_config_map, &zero);

	return cfg && cfg->ct_tcp_strict;
}

static __always_inline void fw_ct_count(__u32 stat)
{
	if (!fw_live_writes())
		return;
	__u64 *c = bpf_map_lookup_elem(&fw_ct_stats, &stat);

	if (c)
		(*c)++;
}

/* fw_ct_now is conntrack's clock, bpf_ktime_get_coarse_ns(): the time of
 * the last tick, which moves it and jiffies together. It is read once a
 * tick on each CPU and kept (fw_ct_clock) for the tick's other packets:
 * the helper's call and its return (through this kernel's return thunk)
 * were ~4 % of an established forwarded packet's time in xdpfw (bench
 * forward's profile, docs/bench.md), bpf_jiffies64() is inlined. The
 * tick increments jiffies before it moves the clock: a reading between
 * the two gives the clock of the tick before, which the CPU then keeps
 * (the copy is refreshed no sooner than the next tick) only when it had
 * not read the clock in that tick before either: so conntrack's time is
 * the coarse clock's, or, rarely, one tick behind it. */
static __always_inline __u64 fw_ct_now(void)
{
	__u32 zero = 0;
	struct fw_ct_clock *c = bpf_map_lookup_elem(&fw_ct_clock, &zero);
	__u64 j = bpf_jiffies64();

	if (!c) /* a per-CPU array's slot 0 is always there */
		return bpf_ktime_get_coarse_ns();
	if (c->jiffies == j)
		return c->ns;
	__u64 ns = bpf_ktime_get_coarse_ns();
	if (ns != c->ns) { /* else read between jiffies' move and the clock's: asked again */
		c->jiffies = j;
		c->ns = ns;
	}
	return ns;
}

/* fw_ct_key_of fills k with the endpoints in a fixed order: the lower
 * (address, port) is a. *from_a tells whether src is a. */
static __always_inline void fw_ct_key_of(struct fw_ct_key *k, __u8 family, __u8 proto,
					 const __u64 *src, const __u64 *dst,
					 __u16 sport, __u16 dport, __u8 *from_a)
{
	int src_first;

	if (src[0] != dst[0])
		src_first = src[0] < dst[0];
	else if (src[1] != dst[1])
		src_first = src[1] < dst[1];
	else
		src_first = sport <= dport;

	__builtin_memset(k, 0, sizeof(*k));
	k->proto = proto;
	k->family = family;
	if (src_first) {
		k->a[0] = src[0], k->a[1] = src[1], k->pa = sport;
		k->b[0] = dst[0], k->b[1] = dst[1], k->pb = dport;
	} else {
		k->a[0] = dst[0], k->a[1] = dst[1], k->pa = dport;
		k->b[0] = src[0], k->b[1] = src[1], k->pb = sport;
	}
	*from_a = src_first;
}

/* fw_ct_live returns k's entry unless it is missing or expired. */
static __always_inline struct fw_ct_entry *fw_ct_live(const struct fw_ct_key *k, __u64 now)
{
	struct fw_ct_entry *e = bpf_map_lookup_elem(&fw_ct, k);

	return e && e->expires > now ? e : NULL;
}

#define FW_TCP_INVALID 0
#define FW_TCP_REOPEN  0x100 /* a SYN starting a new connection on a closed tuple */

/* fw_tcp_next is the TCP state machine: the state a connection in state
 * moves to when a segment with these flags goes one way (reply: against
 * the first SYN), or FW_TCP_INVALID. fins: the entry's FW_CTF_* flags (the
 * FINs seen so far).
 * A global function: the verifier checks it once. */
__noinline int fw_tcp_next(__u32 state, __u32 flags, __u32 reply, __u32 fins)
{
	__u32 syn = flags & FW_TCP_SYN, ack = flags & FW_TCP_ACK;
	__u32 rst = flags & FW_TCP_RST, fin = flags & FW_TCP_FIN;

	if (!(syn | ack | rst) || (syn && (rst || fin)))
		return FW_TCP_INVALID; /* NULL, bare FIN, SYN+RST, SYN+FIN... */
	if (rst)
		return state == FW_CTS_CLOSE ? FW_TCP_INVALID : FW_CTS_CLOSE;
	if (syn && !ack) {
		if (state == FW_CTS_TIME_WAIT || state == FW_CTS_CLOSE)
			return FW_TCP_REOPEN | FW_CTS_SYN_SENT;
		if (state == FW_CTS_SYN_SENT)
			return reply ? FW_CTS_SYN_SENT2 : FW_CTS_SYN_SENT;
		if (state == FW_CTS_SYN_SENT2)
			return FW_CTS_SYN_SENT2;
		return FW_TCP_INVALID;
	}
	if (syn) { /* SYN-ACK */
		if (reply && (state == FW_CTS_SYN_SENT || state == FW_CTS_SYN_SENT2 ||
			      state == FW_CTS_SYN_RECV))
			return FW_CTS_SYN_RECV;
		if (!reply && (state == FW_CTS_SYN_SENT2 || state == FW_CTS_SYN_RECV))
			return FW_CTS_SYN_RECV; /* simultaneous open */
		if (state == FW_CTS_ESTABLISHED)
			return FW_CTS_ESTABLISHED; /* retransmitted: the last ACK was lost */
		return FW_TCP_INVALID;
	}
	/* ACK, maybe with FIN */
	fins &= FW_CTF_FIN_ORIG | FW_CTF_FIN_REPL;
	if (fin)
		fins |= reply ? FW_CTF_FIN_REPL : FW_CTF_FIN_ORIG;
	__u32 both = fins == (FW_CTF_FIN_ORIG | FW_CTF_FIN_REPL);
	switch (state) {
	case FW_CTS_SYN_RECV:
	case FW_CTS_ESTABLISHED:
	case FW_CTS_FIN_WAIT:
		if (both)
			return FW_CTS_LAST_ACK;
		return fins ? FW_CTS_FIN_WAIT : FW_CTS_ESTABLISHED;
	case FW_CTS_LAST_ACK:
		return fin ? FW_CTS_LAST_ACK : FW_CTS_TIME_WAIT;
	case FW_CTS_TIME_WAIT:
		return FW_CTS_TIME_WAIT;
	}
	return FW_TCP_INVALID; /* ACK before the SYN-ACK, or after a RST */
}

#define FW_ICMP_QUERY 1
#define FW_ICMP_REPLY 2
#define FW_ICMP_ERROR 3
#define FW_ICMP_OTHER 4

static __always_inline int fw_icmp_kind(__u8 family, __u8 type)
{
	if (family == 4) {
		switch (type) {
		case 8: case 13: case 15: case 17: /* echo, timestamp, info, mask */
			return FW_ICMP_QUERY;
		case 0: case 14: case 16: case 18:
			return FW_ICMP_REPLY;
		case 3: case 4: case 5: case 11: case 12:
			return FW_ICMP_ERROR;
		}
		return FW_ICMP_OTHER;
	}
	switch (type) {
	case 128:
		return FW_ICMP_QUERY;
	case 129:
		return FW_ICMP_REPLY;
	case 1: case 2: case 3: case 4:
		return FW_ICMP_ERROR;
	}
	return FW_ICMP_OTHER; /* neighbour discovery, MLD...: not tracked */
}

/* The ICMP query id at bytes 4-5 of the ICMP header l4. */
static __always_inline int fw_icmp_id(__u8 *l4, void *data_end, __u16 *id)
{
	if ((void *)(l4 + 8) > data_end)
		return -1;
	*id = (__u16)l4[4] << 8 | l4[5];
	return 0;
}

/* fw_ct_info is the FW_CTI_* of a packet of connection e (flags: what this
 * packet adds to e's), going in the reply direction or not. */
static __always_inline __u8 fw_ct_info(const struct fw_ct_entry *e, __u8 flags, int reply)
{
	flags |= e->flags;
	return FW_CTI_CONFIRMED | (reply ? FW_CTI_REPLY : 0) | ((flags & FW_CTF_REPLIED) ? FW_CTI_SEEN_REPLY : 0) |
	       ((flags & FW_CTF_ASSURED) ? FW_CTI_ASSURED : 0) | ((flags & FW_CTF_XSNAT) ? FW_CTI_SRC_NAT : 0) |
	       ((flags & FW_CTF_XDNAT) ? FW_CTI_DST_NAT : 0);
}

/* fw_icmp_quoted reads the packet the ICMP error p quotes: its addresses,
 * protocol and ports (an ICMP query's id as both). Returns 0, or -1 when
 * it cannot belong to a connection (truncated, a later fragment, an error
 * about an error). */
static __always_inline int fw_icmp_quoted(void *data, void *data_end, const struct fw_pkt *p, __u64 *isrc,
					  __u64 *idst, __u16 *sport, __u16 *dport, __u8 *iproto)
{
	__u8 *il4;
	__u32 off = p->l4_off;

	if (off > 4096) /* bounds the offset for the verifier; frames are smaller */
		return -1;
	__u8 *in = data + off + 8; /* the quoted packet follows the 8-byte ICMP header */
	if (p->family == 4) {
		struct iphdr *ip = (void *)in;
		if ((void *)(ip + 1) > data_end || ip->version != 4 || ip->ihl < 5)
			return -1;
		if (bpf_ntohs(ip->frag_off) & 0x1fff)
			return -1;
		__builtin_memcpy(isrc, &ip->saddr, 4);
		__builtin_memcpy(idst, &ip->daddr, 4);
		*iproto = ip->protocol;
		il4 = in + ip->ihl * 4;
	} else {
		struct ipv6hdr *ip6 = (void *)in;
		if ((void *)(ip6 + 1) > data_end)
			return -1;
		__builtin_memcpy(isrc, &ip6->saddr, 16);
		__builtin_memcpy(idst, &ip6->daddr, 16);
		*iproto = ip6->nexthdr; /* quoted extension headers are not walked */
		il4 = (__u8 *)(ip6 + 1);
	}
	if ((void *)(il4 + 8) > data_end)
		return -1;
	*sport = *dport = 0;
	switch (*iproto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
	case IPPROTO_SCTP:
		*sport = (__u16)il4[0] << 8 | il4[1];
		*dport = (__u16)il4[2] << 8 | il4[3];
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (fw_icmp_kind(p->family, il4[0]) != FW_ICMP_QUERY)
			return -1; /* errors are never about errors */
		*sport = *dport = (__u16)il4[4] << 8 | il4[5];
		break;
	}
	return 0;
}

/* fw_ct_related: an ICMP error is RELATED when the packet it quotes belongs
 * to a live connection, else INVALID. A RELATED error gets that
 * connection's ctinfo and ctproto; it goes in the reply direction when the
 * packet it quotes went in the original one (as the kernel looks the
 * quoted tuple up reversed). This host's error about a packet whose
 * connection the kernel never confirmed is RELATED too (lib/ctdying.h). */
static __always_inline __u8 fw_ct_related(void *data, void *data_end, struct fw_pkt *p, __u64 now)
{
	__u64 isrc[2] = {}, idst[2] = {};
	struct fw_ct_key k;
	__u16 sport, dport;
	__u8 iproto, from_a;

	if (fw_icmp_quoted(data, data_end, p, isrc, idst, &sport, &dport, &iproto) < 0)
		return FW_CT_INVALID;
	fw_ct_key_of(&k, p->family, iproto, isrc, idst, sport, dport, &from_a);
	const struct fw_ct_entry *e = fw_ct_live(&k, now);
	if (!e && fw_ct_dying_take(&k, from_a, p)) { /* the kernel's time exceeded (lib/fwdexpired.h) */
		p->ctproto = iproto;
		return FW_CT_RELATED;
	}
	if (!e)
		return FW_CT_INVALID;
	p->ctproto = iproto;
	p->ctinfo = fw_ct_info(e, 0, from_a == !!(e->flags & FW_CTF_ORIG_A));
	return FW_CT_RELATED;
}

/* fw_ct_lookup sets p->ctstate and fills ct with what fw_ct_commit writes
 * should the packet be accepted. It writes nothing itself. hinted (a
 * constant: XDP) and ct->now not 0: the caller has looked the packet's
 * key up already at that time, and ct->e, when not NULL, is the entry it
 * found (lib/natct.h fw_nat_ct_kept), used instead of a second lookup. */
static __always_inline void fw_ct_lookup(void *data, void *data_end, struct fw_pkt *p, struct fw_ct *ct,
					 const int hinted)
{
	/* read once per packet: the commit's clock too */
	__u64 now = hinted ? ct->now : 0;

	if (!now) {
		now = fw_ct_now();
		ct->e = NULL;
	}
	ct->now = now;
	__u16 sport = p->sport, dport = p->dport;
	int icmp_reply = 0;

	ct->next = FW_CTS_NONE;
	ct->create = 0;
	ct->setflags = 0;
	if (p->flags & FW_PKT_FRAG) {
		p->ctstate = FW_CT_UNTRACKED; /* no ports: cannot be tied to a connection */
		return;
	}
	switch (p->proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
	case IPPROTO_SCTP:
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6: {
		int kind = fw_icmp_kind(p->family, p->icmp_type);
		if ((p->proto == IPPROTO_ICMP) != (p->family == 4))
			kind = FW_ICMP_OTHER; /* ICMP in IPv6 or ICMPv6 in IPv4 */
		if (kind == FW_ICMP_ERROR) {
			p->ctstate = fw_ct_related(data, data_end, p, now);
			if (p->ctstate == FW_CT_INVALID)
				fw_ct_count(FW_CT_STAT_INVALID);
			return;
		}
		__u32 off = p->l4_off;
		if (kind == FW_ICMP_OTHER || off > 4096 || fw_icmp_id(data + off, data_end, &sport) < 0) {
			p->ctstate = FW_CT_UNTRACKED;
			return;
		}
		dport = sport;
		icmp_reply = kind == FW_ICMP_REPLY;
		break;
	}
	default:
		sport = dport = 0;
	}

	fw_ct_key_of(&ct->key, p->family, p->proto, p->src, p->dst, sport, dport, &ct->from_a);
	struct fw_ct_entry *e = hinted ? ct->e : NULL;
	if (!e)
		e = bpf_map_lookup_elem(&fw_ct, &ct->key);
	if (e && e->expires <= now) {
		fw_ct_count(FW_CT_STAT_EXPIRED);
		e = NULL; /* replaced if this packet starts a connection */
	}
	if (!e) {
		if (hinted)
			ct->e = NULL; /* an expired entry the caller found */
		if (p->proto == IPPROTO_TCP) {
			__u8 f = p->tcp_flags & (FW_TCP_SYN | FW_TCP_ACK | FW_TCP_RST | FW_TCP_FIN);
			if (f == FW_TCP_SYN) {
				ct->next = FW_CTS_SYN_SENT;
			} else if (f == FW_TCP_ACK && !fw_ct_tcp_strict()) {
				/* Mid-stream pickup, as Linux with nf_conntrack_tcp_loose=1:
				 * a bare ACK of a connection the table does not know (it
				 * predates the rules, or the table was flushed) starts an
				 * ESTABLISHED entry, NEW to the rules like its first SYN
				 * would be. SYN-ACK, FIN, RST start nothing. */
				ct->next = FW_CTS_ESTABLISHED;
				ct->setflags = FW_CTF_PICKUP;
			} else {
				goto invalid; /* strict: only a bare SYN starts a TCP connection */
			}
		} else if (icmp_reply) {
			goto invalid; /* an answer to no question */
		} else {
			ct->next = FW_CTS_UNREPLIED;
		}
		ct->create = 1;
		p->ctstate = FW_CT_NEW;
		return;
	}

	ct->e = e;
	ct->reply = ct->from_a != !!(e->flags & FW_CTF_ORIG_A);
	if (p->proto == IPPROTO_TCP) {
		int n = fw_tcp_next(e->state, p->tcp_flags, ct->reply, e->flags);
		if (n == FW_TCP_INVALID)
			goto invalid;
		if (n & FW_TCP_REOPEN) { /* a new connection on the same tuple */
			ct->e = NULL;
			ct->next = FW_CTS_SYN_SENT;
			ct->create = 1;
			p->ctstate = FW_CT_NEW;
			return;
		}
		ct->next = n;
		if (p->tcp_flags & FW_TCP_FIN)
			ct->setflags = ct->reply ? FW_CTF_FIN_REPL : FW_CTF_FIN_ORIG;
		/* Assured once established with both sides heard: the handshake
		 * completed (SYN_RECV has seen the SYN-ACK), or a picked-up
		 * connection was answered. */
		if (n == FW_CTS_ESTABLISHED && (ct->reply || (e->flags & FW_CTF_REPLIED)))
			ct->setflags |= FW_CTF_ASSURED;
	} else {
		ct->next = ct->reply || e->state == FW_CTS_REPLIED ? FW_CTS_REPLIED : FW_CTS_UNREPLIED;
		/* Assured by a packet after the reply: a one-packet answer (to a
		 * spoofed query) does not make a connection worth keeping. */
		if (!ct->reply && (e->flags & FW_CTF_REPLIED))
			ct->setflags |= FW_CTF_ASSURED;
	}
	if (ct->reply)
		ct->setflags |= FW_CTF_REPLIED;
	p->ctstate = ct->reply || (e->flags & FW_CTF_REPLIED) ? FW_CT_ESTABLISHED : FW_CT_NEW;
	p->ctinfo = fw_ct_info(e, ct->setflags, ct->reply);
	return;
invalid:
	ct->next = FW_CTS_NONE;
	ct->create = 0;
	p->ctstate = FW_CT_INVALID;
	fw_ct_count(FW_CT_STAT_INVALID);
}

/* fw_ct_relink sets ct->e again after ct crossed a map without it (the
 * live entry a packet that creates nothing advances), and the clock. */
static __always_inline void fw_ct_relink(struct fw_ct *ct)
{
	ct->now = fw_ct_now();
	ct->e = NULL;
	if (ct->next != FW_CTS_NONE && !ct->create)
		ct->e = bpf_map_lookup_elem(&fw_ct, &ct->key);
}

/* ---- room in a full table ----
 * The table is a plain hash (maps.h fw_ct): nothing evicts by itself. When
 * a new connection finds it full, fw_ct_reclaim makes room, so that no
 * daemon is needed and a flood cannot lock real clients out:
 * 1. Early drop, as Linux's nf_conntrack does: the oldest entry that is not
 *    assured goes. Every entry is queued in fw_ct_evict when it is created
 *    (not assured yet), and an assured TCP connection again when it starts
 *    closing; a search pops keys, oldest first, and evicts the first whose
 *    entry is still evictable (or expired). Keys of entries gone, or
 *    assured since, are dropped from the queue on the way, at most
 *    FW_CT_EVICT_TRIES per search. Not assured: a connection that never
 *    completed its handshake (SYN_SENT, SYN_RECV: a SYN flood's), a
 *    picked-up one never answered, an unanswered or one-packet
 *    UDP/ICMP/other exchange; TCP already closing (FIN_WAIT, LAST_ACK,
 *    TIME_WAIT, CLOSE) may go too. A real client's fresh entry is the
 *    newest: it is at risk only once a whole table of newer ones came.
 * 2. Else expired entries, which the queue no longer names (assured ones):
 *    a walk of the table in its hash order (bpf_for_each_map_elem) removes
 *    those it meets, at most FW_CT_RECLAIM_WINDOW entries examined, at least
 *    FW_CT_RECLAIM_BATCH once it found one, from where the last fruitless
 *    walk stopped (fw_ct_gc.cursor). The walk restarts at the table's first
 *    bucket each time, so it costs more the further it goes; a fruitless
 *    one holds off the next for FW_CT_RECLAIM_QUIET_NS.
 * 3. Assured connections are never evicted: a full table of them refuses
 *    the new connection (FW_R_CT_FULL). */
#define FW_CT_EVICT_TRIES      16            /* queued keys one search pops at most */
#define FW_CT_RECLAIM_WINDOW   1024          /* entries one walk examines at most */
#define FW_CT_RECLAIM_BATCH    64            /* ... and at least, once it removed one */
#define FW_CT_RECLAIM_QUIET_NS 100000000ULL  /* after a fruitless walk: 100 ms */

/* fw_ct_evictable: may e give way to a new connection (when not expired)? */
static __always_inline int fw_ct_evictable(const struct fw_ct_key *k, const struct fw_ct_entry *e)
{
	if (!(e->flags & FW_CTF_ASSURED))
		return 1;
	return k->proto == IPPROTO_TCP && e->state >= FW_CTS_FIN_WAIT && e->state <= FW_CTS_CLOSE;
}

/* fw_ct_queue_evictable queues k as a candidate for early drop; a full
 * queue forgets its oldest key (BPF_EXIST). */
static __always_inline void fw_ct_queue_evictable(const struct fw_ct_key *k)
{
	bpf_map_push_elem(&fw_ct_evict, k, BPF_EXIST);
}

struct fw_ct_reclaim_ctx {
	__u64 now;
	__u32 skip;     /* entries to pass over (the cursor) */
	__u32 seen;     /* entries the walk came by */
	__u32 visited;  /* ... of which examined */
	__u32 expired;  /* expired entries removed */
};

static long fw_ct_reclaim_cb(void *map, struct fw_ct_key *k, struct fw_ct_entry *e,
			     struct fw_ct_reclaim_ctx *c)
{
	if (++c->seen <= c->skip)
		return 0;
	c->visited++;
	if (e->expires <= c->now && !bpf_map_delete_elem(&fw_ct, k))
		c->expired++;
	if (c->visited >= FW_CT_RECLAIM_WINDOW)
		return 1;
	return c->visited >= FW_CT_RECLAIM_BATCH && c->expired;
}

/* fw_ct_reclaim makes room in the full table (see above): returns the
 * entries it removed. A global function: the verifier checks it once. */
__noinline int fw_ct_reclaim(__u64 now)
{
	struct fw_ct_key k;

	for (int i = 0; i < FW_CT_EVICT_TRIES; i++) {
		if (bpf_map_pop_elem(&fw_ct_evict, &k))
			break; /* nothing queued */
		struct fw_ct_entry *e = bpf_map_lookup_elem(&fw_ct, &k);
		if (!e)
			continue; /* gone already */
		int expired = e->expires <= now;
		if (!expired && !fw_ct_evictable(&k, e))
			continue; /* assured since it was queued */
		if (bpf_map_delete_elem(&fw_ct, &k))
			continue; /* another CPU took it */
		fw_ct_count(expired ? FW_CT_STAT_EXPIRED : FW_CT_STAT_EARLY_DROP);
		return 1;
	}

	__u32 zero = 0;
	struct fw_ct_gc *g = bpf_map_lookup_elem(&fw_ct_gc, &zero);
	if (!g || g->quiet_until > now)
		return 0;
	struct fw_ct_reclaim_ctx c = { .now = now, .skip = g->cursor };
	long walked = bpf_for_each_map_elem(&fw_ct, fw_ct_reclaim_cb, &c, 0);

	for (__u32 i = 0; i < c.expired && i < FW_CT_RECLAIM_WINDOW; i++)
		fw_ct_count(FW_CT_STAT_EXPIRED);
	if (c.expired) {
		g->cursor = 0;
		return c.expired;
	}
	/* Fruitless: the next walk starts after this window (at the start
	 * again when this one reached the end), and not before a while. */
	g->cursor = walked > 0 && c.visited >= FW_CT_RECLAIM_WINDOW ? c.seen : 0;
	g->quiet_until = now + FW_CT_RECLAIM_QUIET_NS;
	return 0;
}

/* fw_ct_commit records an accepted packet: creates its connection or
 * advances it. Returns -1 when a new connection does not fit (table full
 * of assured connections). */
static __always_inline int fw_ct_commit(struct fw_ct *ct, const struct fw_pkt *p, __u64 bytes, __u32 rule_id)
{
	if (ct->next == FW_CTS_NONE)
		return 0; /* INVALID, RELATED, UNTRACKED: nothing to record */
	if (!fw_live_writes())
		return 0; /* a trace records nothing (nor knows whether a full table would refuse it) */
	__u64 now = ct->now; /* fw_ct_lookup's or fw_ct_relink's: next is set by those only */

	if (ct->create) {
		struct fw_ct_entry n = {};
		n.flags = (ct->from_a ? FW_CTF_ORIG_A : 0) | ct->setflags;
		n.expires = now + fw_ct_timeout_ns(fw_ct_tclass(p->proto, ct->next, n.flags));
		n.packets[0] = 1;
		n.bytes[0] = bytes;
		n.rule_id = rule_id;
		n.state = ct->next;
		n.chain = p->chain;
		/* BPF_ANY also replaces an expired or closed entry; a full map
		 * refuses a new key (the hash is preallocated, not an LRU):
		 * then room is made, and the insert tried once more. */
		if (bpf_map_update_elem(&fw_ct, &ct->key, &n, BPF_ANY) &&
		    (fw_ct_reclaim(now) <= 0 || bpf_map_update_elem(&fw_ct, &ct->key, &n, BPF_ANY))) {
			fw_ct_count(FW_CT_STAT_TABLE_FULL);
			return -1;
		}
		fw_ct_count(FW_CT_STAT_CREATED);
		fw_ct_queue_evictable(&ct->key);
		if (n.flags & FW_CTF_PICKUP)
			fw_ct_count(FW_CT_STAT_PICKUP);
		return 0;
	}
	struct fw_ct_entry *e = ct->e;
	if (!e)
		return 0;
	/* Plain stores, no lock: two CPUs racing on one connection both
	 * write a state it legitimately reaches; counters may lose a count. */
	__u8 flags = e->flags | ct->setflags;
	if ((flags & FW_CTF_ASSURED) && e->state < FW_CTS_FIN_WAIT && ct->next >= FW_CTS_FIN_WAIT &&
	    ct->next <= FW_CTS_CLOSE && p->proto == IPPROTO_TCP)
		fw_ct_queue_evictable(&ct->key); /* closing: a candidate again */
	e->state = ct->next;
	e->flags = flags;
	e->expires = now + fw_ct_timeout_ns(fw_ct_tclass(p->proto, ct->next, flags));
	if (ct->reply) {
		e->packets[1]++;
		e->bytes[1] += bytes;
	} else {
		e->packets[0]++;
		e->bytes[0] += bytes;
	}
	return 0;
}

#endif
