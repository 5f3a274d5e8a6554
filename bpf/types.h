/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Structs and enums shared between the data plane and Go.
 * bpf2go turns the types named in internal/datapath/gen.go into Go types of
 * the same layout; internal/compile/abi_test.go checks the enums and constants
 * mirrored in Go where named (see the comment on each). */
#ifndef XDPFW_TYPES_H
#define XDPFW_TYPES_H

#include <linux/types.h>

/* Chains. Mirrored by internal/rules.Chain. */
enum fw_chain {
	FW_CHAIN_INPUT   = 0,
	FW_CHAIN_FORWARD = 1,
	FW_CHAIN_OUTPUT  = 2,
	FW_NUM_CHAINS    = 3,
};

/* What a classifier entry decides. Mirrored by internal/datapath.Action. */
enum fw_action {
	FW_ACT_ACCEPT = 0,
	FW_ACT_DROP   = 1,
	FW_ACT_REJECT = 2, /* answered (lib/reject.h), or dropped */
	FW_ACT_LOG    = 3, /* a LOG rule's entry: logs and does not decide (lib/log.h) */
	FW_ACT_NOTRACK = 4, /* a raw-table entry (fw_raw): the packet is not tracked */
};

/* What a REJECT answers with (fw_entry.reject): iptables' --reject-with.
 * The ICMP kinds name a message of one family; the parser accepts each
 * only in rules of that family. Mirrored by internal/compile (abi.go). */
enum fw_reject {
	FW_REJ_PORT_UNREACH = 0, /* default: icmp-port-unreachable (3/3), icmp6-port-unreachable (1/4) */
	FW_REJ_TCP_RESET,        /* tcp-reset: a TCP RST (rules with -p tcp only) */
	FW_REJ_NET_UNREACH,      /* icmp-net-unreachable     ICMP 3/0 */
	FW_REJ_HOST_UNREACH,     /* icmp-host-unreachable    ICMP 3/1 */
	FW_REJ_PROTO_UNREACH,    /* icmp-proto-unreachable   ICMP 3/2 */
	FW_REJ_NET_PROHIB,       /* icmp-net-prohibited      ICMP 3/9 */
	FW_REJ_HOST_PROHIB,      /* icmp-host-prohibited     ICMP 3/10 */
	FW_REJ_ADMIN_PROHIB,     /* icmp-admin-prohibited    ICMP 3/13 */
	FW_REJ6_NO_ROUTE,        /* icmp6-no-route           ICMPv6 1/0 */
	FW_REJ6_ADM_PROHIB,      /* icmp6-adm-prohibited     ICMPv6 1/1 */
	FW_REJ6_ADDR_UNREACH,    /* icmp6-addr-unreachable   ICMPv6 1/3 */
	FW_NUM_REJECTS,
};

/* Counter slots of fw_reason_stats: why a packet got its verdict.
 * Mirrored by internal/compile.Reason (abi.go); keep both in order. */
enum fw_reason {
	FW_R_RULE_ACCEPT = 0,   /* accepted by a rule */
	FW_R_RULE_DROP,         /* dropped by a rule */
	FW_R_RULE_REJECT,       /* REJECT rule, answered (XDP_TX; in OUTPUT: redirected into this host's stack) */
	FW_R_POLICY_ACCEPT,     /* no rule matched, chain policy ACCEPT */
	FW_R_POLICY_DROP,       /* no rule matched, chain policy DROP */
	FW_R_NOT_IP,            /* not IPv4/IPv6 (ARP, LLDP...): passed, like iptables */
	FW_R_NO_RULESET,        /* no rule set installed: dropped (fail closed) */
	FW_R_BAD_ETH,           /* truncated Ethernet header */
	FW_R_BAD_VLAN,          /* truncated 802.1Q/802.1ad tag */
	FW_R_VLAN_DEPTH,        /* more VLAN tags than FW_MAX_VLAN */
	FW_R_BAD_IPV4,          /* truncated IPv4 header, bad version/IHL/length */
	FW_R_BAD_IPV6,          /* truncated IPv6 header, bad version/length */
	FW_R_BAD_EXTHDR,        /* truncated IPv6 extension header */
	FW_R_EXTHDR_DEPTH,      /* more IPv6 extension headers than FW_MAX_EXTHDR */
	FW_R_BAD_L4,            /* truncated TCP/UDP/ICMP header, bad TCP data offset */
	FW_R_CT_FULL,           /* accepted NEW connection dropped: conntrack table full */
	FW_R_REJECT_RATE,       /* REJECT over its source's or the global answer budget: dropped */
	FW_R_REJECT_ERROR,      /* REJECT of an ICMP error (or of a RST, with tcp-reset): never answered, dropped */
	FW_R_REJECT_FRAG,       /* REJECT of a non-first fragment: not answered, dropped */
	FW_R_REJECT_BCAST,      /* REJECT of a broadcast/multicast packet or a non-host source: not answered, dropped */
	FW_R_REJECT_FAIL,       /* REJECT answer could not be built (no headroom, resize refused): dropped */
	FW_R_FRAG_UNKNOWN,      /* a later fragment of a datagram whose first fragment was not seen (or expired): dropped */
	FW_R_FRAG_OVERLAP,      /* a later fragment overlapping its datagram's first fragment (and the rest of that datagram): dropped */
	FW_R_BAD_PPPOE,         /* PPPoE session frame: truncated header, or its length past the frame (pppoe_rcv drops it) */
	FW_R_PPPOE_SESSION,     /* PPPoE session frame carrying IP of a session xdpfw does not know (lib/pppoe.h): dropped */
	FW_R_NAT_FAIL,          /* FORWARD-accepted packet xdpfw's NAT cannot translate, dropped (fw_nat_counter says why) */
	FW_R_FWD_EXPIRED,       /* forwarded packet whose TTL / hop limit runs out here: the kernel's, unjudged (lib/fwdexpired.h) */
	FW_R_FWD_NOT_UNICAST,   /* routed packet in a broadcast/multicast frame: the kernel's, unjudged; it drops it before FORWARD (lib/fwdexpired.h) */
	FW_NUM_REASONS,
};

/* Limits of the parser. */
#define FW_MAX_VLAN    2 /* 802.1Q, or QinQ (802.1ad + 802.1Q) */
#define FW_MAX_EXTHDR  8 /* IPv6 extension headers walked before giving up */

/* Dimensions of the classification key (struct fw_key), host-order u32
 * each. Mirrored by internal/compile (tree.go Dim*). */
enum fw_dim {
	FW_D_SRC0 = 0,    /* address words, most significant first; IPv4: word 0 */
	FW_D_SRC1,
	FW_D_SRC2,
	FW_D_SRC3,
	FW_D_DST0,
	FW_D_DST1,
	FW_D_DST2,
	FW_D_DST3,
	FW_D_SPORT,
	FW_D_DPORT,
	FW_D_PROTO,
	FW_D_IFINDEX,
	FW_D_VLAN,        /* outer VID, or FW_VLAN_UNTAGGED */
	FW_D_MACSRC_HI,   /* top 16 bits */
	FW_D_MACSRC_LO,   /* low 32 bits */
	FW_D_MACDST_HI,
	FW_D_MACDST_LO,
	FW_D_TCPFLAGS,
	FW_D_ICMP,        /* type << 8 | code */
	FW_D_FLAGS,       /* (FW_KEY_FRAG | FW_KEY_L4) << FW_KEY_FLAGS_SHIFT | enum fw_pkttype */
	FW_D_CTSTATE,     /* enum fw_ct_state */
	FW_D_OIFINDEX,    /* output device: FORWARD the FIB's egress device, OUTPUT tc's; 0 none (fw_pkt.oifindex) */
	FW_D_LEN,         /* IPv4 total length; IPv6 payload length + 40 (-m length) */
	FW_D_TTL,         /* IPv4 TTL, IPv6 hop limit */
	FW_D_TOS,         /* IPv4 TOS, IPv6 traffic class: DSCP << 2 | ECN */
	FW_NUM_DIMS,
};
#define FW_KEY_FRAG      1
#define FW_KEY_L4        2
/* The packet type (-m pkttype, lib/classify.h fw_pkttype) shares the flags
 * word, below them (so that the flag tests stay one range each): one key
 * word fewer on the stack, which the tc program's call chain has no room
 * for (docs/classifier.md). */
#define FW_KEY_FLAGS_SHIFT 2
#define FW_VLAN_UNTAGGED 0x10000

/* What -m pkttype tests: Linux's skb->pkt_type values (PACKET_HOST,
 * PACKET_BROADCAST, PACKET_MULTICAST) as iptables' xt_pkttype sees them.
 * Mirrored by internal/rules (PktHost, ...). */
enum fw_pkttype {
	FW_PT_HOST      = 0, /* "unicast" */
	FW_PT_BROADCAST = 1,
	FW_PT_MULTICAST = 2,
	FW_NUM_PKTTYPES,
};

/* Bounds of the tree walk: nodes visited, candidates checked at a leaf. */
#define FW_TREE_DEPTH 32
#define FW_LEAF_MAX   64

/* fw_pkt.flags. FRAG and L4 are FW_KEY_FRAG and FW_KEY_L4: fw_key masks. */
#define FW_PKT_FRAG     0x01 /* a non-first fragment (IPv4 offset != 0, IPv6 fragment offset != 0) */
#define FW_PKT_FRAG1    0x10 /* the first fragment of a fragmented datagram (offset 0, more fragments);
			      * an IPv6 atomic fragment (offset 0, M clear) is neither: a whole packet */
#define FW_PKT_L4       0x02 /* an L4 header was parsed: ports / flags / ICMP type valid */
#define FW_PKT_VLAN     0x04 /* at least one VLAN tag: vlan_id valid */
#define FW_PKT_ANSWER   0x08 /* a TCP RST, or an IPv4 ICMP / IPv6 ICMPv6 destination unreachable:
			      * maybe this host's own REJECT answer (fw_reject_own_answer) */
#define FW_PKT_RT       0x40 /* rt_type, rt_segsleft, rt_hdrlen hold the first IPv6 routing header's (lib/exthdr.h) */
#define FW_PKT_MSS      0x80 /* mss holds TCP's MSS option (lib/exthdr.h) */
#define FW_PKT_PPPOE    0x20 /* a PPPoE session frame carrying IP: l3_off is past the PPPoE header, ifindex
			      * the session's ppp device (lib/pppoe.h) */

/* TCP header flag bits (fw_pkt.tcp_flags). */
#define FW_TCP_FIN 0x01
#define FW_TCP_SYN 0x02
#define FW_TCP_RST 0x04
#define FW_TCP_ACK 0x10

/* What the parser extracts: the classifier's only input.
 * Addresses are in network byte order, IPv4 in the first 4 bytes, rest zero.
 * Ports are in host byte order. */
struct fw_pkt {
	__u64 src[2];
	__u64 dst[2];
	__u16 sport;
	__u8  src_mac[6];  /* at 2 mod 4: bytes 2-5 are one aligned word (fw_key) */
	__u16 dport;
	__u8  dst_mac[6];
	__u32 ifindex;
	__u16 vlan_id;     /* outermost tag's VID */
	__u8  family;      /* 4 or 6 */
	__u8  proto;       /* L4 protocol (after IPv6 extension headers) */
	__u8  icmp_code;   /* code, then type: one 16-bit word type << 8 | code (fw_key) */
	__u8  icmp_type;
	__u8  tcp_flags;
	__u8  flags;       /* FW_PKT_* */
	__u8  chain;       /* enum fw_chain */
	__u8  ctstate;     /* enum fw_ct_state (FW_CT_NEW while conntrack is off) */
	__u16 l4_off;      /* offset of the L4 header from the frame start, with FW_PKT_L4 */
	__u32 l3_len;      /* bytes from the IP header to the end of the frame */
	__u8  l3_off;      /* offset of the IP header from the frame start */
	__u8  ttl;         /* IPv4 TTL, IPv6 hop limit */
	__u8  tos;         /* IPv4 TOS, IPv6 traffic class */
	__u8  ctinfo;      /* FW_CTI_*: the packet's connection (ctstate NEW, ESTABLISHED, RELATED; else 0) */
	__u8  ctproto;     /* the connection's protocol (a RELATED ICMP error: the quoted packet's) */
	/* Read only for the classifier of generations whose rules test them
	 * (FW_ROOT_RT, FW_ROOT_MSS; lib/hdropt.h): */
	__u8  rt_type;     /* with FW_PKT_RT: the first routing header's type, */
	__u8  rt_segsleft; /* its segments left, */
	__u8  rt_hdrlen;   /* with FW_PKT_RT: the routing header's length field (bytes: (rt_hdrlen + 1) * 8) */
	__u16 mss;         /* with FW_PKT_MSS: TCP's MSS option */
	/* With FW_PKT_FRAG: where the fragment starts in its datagram's
	 * fragmentable part, in bytes; with FW_PKT_FRAG1: the bytes of it that
	 * the first fragment carries (lib/frag.h). */
	__u16 frag;
	__u32 frag_id;     /* with FW_PKT_FRAG or FW_PKT_FRAG1: the identification (IPv4: 16 bits), as sent */
	__u32 mark;        /* tc egress: skb->mark (a socket's SO_MARK, the kernel's rules); XDP: 0 */
	/* The device the packet leaves by (-o): in FORWARD the egress device
	 * of the FIB lookup that chose the chain (lib/chain.h), 0 when the FIB
	 * names none; in OUTPUT the device tc egress runs on; 0 in INPUT. */
	__u32 oifindex;
	__u8  vlan_pcp;    /* with FW_PKT_VLAN: the outermost tag's priority code point (802.1p) */
	__u8  _pad2[3];
};

/* fw_pkt.ctinfo: the packet's connection as -m conntrack's --ctdir and
 * --ctstatus see it. The status bits are the kernel's IPS_* bits. */
#define FW_CTI_EXPECTED   0x01 /* never set: xdpfw has no helpers that expect connections */
#define FW_CTI_SEEN_REPLY 0x02 /* a packet went the other way (this one, or before) */
#define FW_CTI_ASSURED    0x04 /* FW_CTF_ASSURED, this packet included */
#define FW_CTI_CONFIRMED  0x08 /* recorded before this packet (not a connection's first packet) */
#define FW_CTI_SRC_NAT    0x10 /* NAT changed the connection's source (IPS_SRC_NAT, --ctstate SNAT): with --nat kernel the
			      * kernel's conntrack says so (lib/kct.h: the packet must go to the kernel, which translates it);
			      * with --nat xdpfw xdpfw's (FW_CTF_XSNAT), the kernel translating nothing then */
#define FW_CTI_DST_NAT    0x20 /* ... its destination (IPS_DST_NAT, --ctstate DNAT; FW_CTF_XDNAT; a first packet: fw_nat_ctinfo) */
/* 0x40: free (was FW_CTI_XNAT, now these two bits) */
#define FW_CTI_XNAT       (FW_CTI_SRC_NAT | FW_CTI_DST_NAT) /* with --nat xdpfw: xdpfw's NAT translates the connection */
#define FW_CTI_REPLY      0x80 /* the packet goes in the reply direction */

/* What decides a packet: the classifier's (or a fast rule's) answer. */
struct fw_decision {
	__u32 rule_id;
	__u8  action; /* enum fw_action */
	__u8  reason; /* enum fw_reason */
	__u8  reject; /* enum fw_reject, with FW_ACT_REJECT */
	/* FW_EF_LOG: the deciding rule logs the packet (--log); FW_EF_LIMIT:
	 * it has -m limit and takes its token (fw_log_emit) */
	__u8  flags;
	/* LOG rules that log the packet: fw_log_scratch's ids[0 .. nlog-1] once
	 * fw_log_finish has run (in rule order); before, the matches noted. */
	__u8  nlog;
	__u8  nstate; /* -m recent entries the walk noted (fw_state_scratch) */
	/* Counting entries (FW_EF_COUNT) the packet matched: fw_log_scratch's
	 * cids[0 .. ncount-1]; those before the decision (cidx < best) count. */
	__u8  ncount;
};

/* parse_eth writes the MACs as 16-bit words; fw_key reads the first two
 * bytes as one and the last four as a 32-bit word. */
_Static_assert(__builtin_offsetof(struct fw_pkt, icmp_code) % 2 == 0 &&
	       __builtin_offsetof(struct fw_pkt, icmp_type) == __builtin_offsetof(struct fw_pkt, icmp_code) + 1,
	       "fw_pkt's ICMP code and type must be one aligned 16-bit word");
_Static_assert(__builtin_offsetof(struct fw_pkt, src_mac) % 4 == 2 &&
	       __builtin_offsetof(struct fw_pkt, dst_mac) % 4 == 2, "fw_pkt MACs must sit at 2 mod 4");

/* fw_entry.match / fw_entry.invert bits: which fields an entry tests, and
 * which of those tests are negated. Mirrored by internal/compile (entry.go). */
#define FW_M_FAMILY   (1u << 0)
#define FW_M_PROTO    (1u << 1)
#define FW_M_SRC      (1u << 2)
#define FW_M_DST      (1u << 3)
#define FW_M_SPORT    (1u << 4)  /* never inverted: the compiler complements ranges */
#define FW_M_DPORT    (1u << 5)  /* never inverted */
#define FW_M_IFINDEX  (1u << 6)  /* never inverted: the compiler expands names */
#define FW_M_MACSRC   (1u << 7)
#define FW_M_MACDST   (1u << 8)
#define FW_M_TCPFLAGS (1u << 9)
#define FW_M_ICMPTYPE (1u << 10)
#define FW_M_ICMPCODE (1u << 11) /* inverted together with ICMPTYPE */
#define FW_M_VLAN     (1u << 12)
#define FW_M_FRAG     (1u << 13) /* -f: non-first fragment; inverted: ! -f */
#define FW_M_L4HDR    (1u << 14) /* only "has an L4 header" (--icmp-type any) */
#define FW_M_SRCSET   (1u << 15) /* source address in set src_set */
#define FW_M_DSTSET   (1u << 16) /* destination address in set dst_set */
#define FW_M_CTSTATE  (1u << 17) /* connection state in ctstate (never inverted: the compiler complements) */
#define FW_M_MARK     (1ull << 18) /* (skb mark & mark_mask) == mark: OUTPUT only (tc egress) */
#define FW_M_OIF      (1ull << 19) /* output device in [oif_lo, oif_hi] (never inverted: the compiler complements) */
#define FW_M_PKTTYPE  (1ull << 20) /* fw_pkttype in pkttypes (never inverted: the compiler complements) */
#define FW_M_SRCTYPE  (1ull << 21) /* -m addrtype --src-type: src_types, type_dev (lib/addrtype.h) */
#define FW_M_DSTTYPE  (1ull << 22) /* -m addrtype --dst-type: dst_types, type_dev */
#define FW_M_LEN      (1ull << 23) /* l3_len in [len_lo, len_hi] (-m length) */
#define FW_M_TTL      (1ull << 24) /* ttl in [ttl_lo, ttl_hi] (-m ttl, -m hl) */
#define FW_M_TOS      (1ull << 25) /* (tos & tos_mask) == tos_cmp (-m dscp, -m tos) */
#define FW_M_ECNIP    (1ull << 26) /* (tos & 3) == ecn_ip (-m ecn --ecn-ip-ect) */
#define FW_M_ECNTCP   (1ull << 27) /* (tcp_flags & ecn_mask) == ecn_cmp (never inverted; -m ecn --ecn-tcp-ece/cwr) */
#define FW_M_SRCRANGE (1ull << 28) /* source address in [srange_lo, srange_hi] (-m iprange) */
#define FW_M_DSTRANGE (1ull << 29) /* destination address in [drange_lo, drange_hi] */
#define FW_M_CTDIR    (1ull << 30) /* ctinfo has FW_CTI_REPLY (--ctdir REPLY; inverted: ORIGINAL) */
#define FW_M_CTSTATUS (1ull << 31) /* ctinfo & ctstatus (--ctstatus: any of them) */
#define FW_M_CTPROTO  (1ull << 32) /* ctproto == e->ctproto (--ctproto) */
#define FW_M_MSS      (1ull << 33) /* TCP's MSS option in [mss_lo, mss_hi] (-m tcpmss; none: not in) */
#define FW_M_RTTYPE   (1ull << 34) /* rt_type == e->rt_type (-m rt --rt-type) */
#define FW_M_RTSEGS   (1ull << 35) /* rt_segsleft in [rt_segs_lo, rt_segs_hi] (--rt-segsleft; -m rt alone: 0:255) */
#define FW_M_RTLEN    (1ull << 36) /* rt_len == e->rt_len (--rt-len) */
#define FW_M_VLANPCP  (1ull << 37) /* a tag whose PCP is vlan_pcp (--vlan-prio): no key dimension */
#define FW_M_CTNAT    (1ull << 38) /* ctinfo & ctnat: FW_CTI_SRC_NAT, FW_CTI_DST_NAT (--ctstate SNAT, DNAT: any of them) */
/* Tests of the routing header: an entry using one never matches a packet
 * without one (FW_PKT_RT), whatever its inversions (ip6t_rt). */
#define FW_M_RTHDR    (FW_M_RTTYPE | FW_M_RTSEGS | FW_M_RTLEN)
/* The -m conntrack tests other than --ctstate need a connection: the
 * compiler narrows an entry using one to the states NEW, ESTABLISHED and
 * RELATED (FW_M_CTSTATE), as the kernel's xt_conntrack. */
/* Tests that need the L4 header: an entry using one never matches a packet
 * without FW_PKT_L4, whatever its inversions (iptables does the same). */
#define FW_M_L4       (FW_M_SPORT | FW_M_DPORT | FW_M_TCPFLAGS | FW_M_ICMPTYPE | FW_M_ICMPCODE | FW_M_L4HDR | \
		       FW_M_ECNTCP | FW_M_MSS)

/* Key ranges an entry's compact form holds at most (fw_entry.rdim). */
#define FW_RANGES_MAX 6

/* One classifier entry: a conjunction of field tests. A rule compiles to one
 * or more entries (disjunctions such as multiport are expanded), all carrying
 * the rule's id. The last entry of each chain and family is the policy. */
struct fw_entry {
	__u64 src[2];
	__u64 src_mask[2];
	__u64 dst[2];
	__u64 dst_mask[2];
	__u64 match;       /* FW_M_* (64 bits: more than 32 tests) */
	__u64 invert;      /* FW_M_* */
	__u32 ifindex;
	__u32 rule_id;     /* index into fw_rule_stats */
	__u32 src_set;     /* set ids (fw_sets), with FW_M_SRCSET / FW_M_DSTSET */
	__u32 dst_set;
	__u32 mark, mark_mask; /* with FW_M_MARK */
	__u32 oif_lo, oif_hi; /* output ifindex range, with FW_M_OIF */
	__u16 src_types, dst_types; /* bit masks of enum fw_rtn, with FW_M_SRCTYPE / FW_M_DSTTYPE */
	/* Address ranges (-m iprange), with FW_M_SRCRANGE / FW_M_DSTRANGE: the
	 * address as a 128-bit host-order number, most significant half first
	 * (IPv4: the address << 32 in [0], [1] zero), lo and hi inclusive. */
	__u64 srange_lo[2], srange_hi[2];
	__u64 drange_lo[2], drange_hi[2];
	__u16 len_lo, len_hi; /* with FW_M_LEN */
	__u8  ttl_lo, ttl_hi; /* with FW_M_TTL */
	__u8  tos_mask, tos_cmp; /* with FW_M_TOS */
	__u8  ecn_ip;         /* with FW_M_ECNIP */
	__u8  ecn_mask, ecn_cmp; /* with FW_M_ECNTCP: TCP's ECE (0x40) and CWR (0x80) bits */
	__u8  ctstatus;       /* FW_CTI_* status bits, with FW_M_CTSTATUS */
	__u8  ctproto;        /* with FW_M_CTPROTO */
	__u8  vlan_pcp;       /* with FW_M_VLANPCP */
	__u16 mss_lo, mss_hi; /* with FW_M_MSS */
	__u16 rt_len;         /* with FW_M_RTLEN */
	__u8  rt_type;        /* with FW_M_RTTYPE */
	__u8  rt_segs_lo, rt_segs_hi; /* with FW_M_RTSEGS */
	__u8  ctnat;          /* FW_CTI_SRC_NAT, FW_CTI_DST_NAT, with FW_M_CTNAT */
	__u16 sport_lo, sport_hi;
	__u16 dport_lo, dport_hi;
	__u8  src_mac[6];
	__u8  dst_mac[6];
	__u16 vlan_id;
	__u8  chain;
	__u8  family;
	__u8  proto;
	__u8  tcp_mask, tcp_cmp;
	__u8  icmp_type, icmp_code;
	__u8  action;      /* enum fw_action */
	__u8  reason;      /* enum fw_reason counted when this entry decides */
	__u8  ctstate;     /* bit mask of enum fw_ct_state, with FW_M_CTSTATE */
	__u8  pkttypes;    /* bit mask of enum fw_pkttype, with FW_M_PKTTYPE */
	__u8  type_dev;    /* FW_TD_*: the device -m addrtype's types are limited to */
	__u8  reject;      /* enum fw_reject, with FW_ACT_REJECT */
	__u8  flags;       /* FW_EF_* */
	/* With FW_EF_NOTE (compile.Entry.Probe, GuardMask, GuardVal, Note;
	 * placed in what was padding, the size grows by 8 bytes): probe
	 * (1..FW_PROBE_MAX, 0 none) is the bit a probe sets when its stateful
	 * test matches; the entry applies only to packets whose probe bits b
	 * have (b & guard_mask) == guard_val; note is the key of the notes
	 * this entry shares (one rule at one place of the flattened chains:
	 * settled once per packet; -m recent entries have it too). */
	__u8  probe;
	__u32 note;
	__u32 guard_mask, guard_val;
};

/* A tree entry's candidate record (fw_cands, the same index as fw_entries):
 * what the leaf check needs, one 64-byte record, so that a packet's walk
 * reads the 64 bytes of each candidate it checks and not the whole entry
 * (fw_entry), which only candidates without FW_EF_RANGES (fw_entry_match)
 * and noted ones (fw_walk_pass: the note key) read. With FW_EF_RANGES:
 * the whole match as ranges of the classification key
 * (compile.EntryRanges): key[rdim[i]] in [rlo[i], rhi[i]] for every
 * i < nranges, given the chain and family of the tree the entry sits in.
 * rule_id, action, reason, reject and flags are the entry's (flags with
 * FW_EF_RANGES added). */
struct fw_cand {
	__u32 rule_id;
	__u8  action;
	__u8  reason;
	__u8  reject;
	__u8  flags;
	__u8  nranges;
	__u8  rdim[FW_RANGES_MAX];
	__u8  _pad;
	__u32 rlo[FW_RANGES_MAX];
	__u32 rhi[FW_RANGES_MAX];
}; /* sizeof: 64 */

/* fw_entry.flags (and fw_root.fast_flags) */
#define FW_EF_LOG 0x01 /* the rule logs the packets it decides (--log) */
#define FW_EF_RANGES 0x02 /* nranges/rdim/rlo/rhi hold the whole match (trees only) */
#define FW_EF_LIMIT 0x04 /* -m limit: decides only while the rule's fw_limits bucket has a token */
#define FW_EF_STATE 0x08 /* -m recent (or, with FW_EF_HASHLIMIT, -m hashlimit): noted in the walk,
			   * settled in rule order after it (fw_state_settle) */
#define FW_EF_COUNT 0x10  /* with FW_ACT_LOG: counts the packets it matches for its rule
			   * (a jump, goto, RETURN or rule without -j), logs nothing */
#define FW_EF_NOTE 0x20  /* a probe or guarded entry (note, probe, guard_*): noted in the
			   * walk, settled in rule order after it (fw_state_settle) */
#define FW_EF_HASHLIMIT 0x40 /* with FW_EF_STATE: the state is a -m hashlimit bucket
			      * (fw_hashlimit_rules), not a -m recent list */
#define FW_EF_CONNLIMIT 0x80 /* with FW_EF_STATE: the state is a -m connlimit count
			      * (fw_connlimit_rules, lib/connlimit.h) */

/* A node of a classifier tree: a multiway ("fat") node, one cache line:
 * a complete binary tree of depth 3. Its 7 thresholds are in order
 * (thresh[3] at the top, thresh[1] and thresh[5] below, then 0, 2, 4, 6);
 * threshold p tests key[dim], or key[dim2] where bit p of mask is set. A
 * key goes right at p when its value is above thresh[p], and ends at
 * child[c], c in 0..7 left to right. Unused thresholds are FW_NO_THRESH,
 * which no key is above, so the walk takes all three steps and never
 * reaches the children right of one (the empty leaf). Most nodes test one
 * dimension (mask 0, dim2 == dim): their thresholds ascend, and c is the
 * number of them below key[dim]; a node of two holds the top 3 levels of
 * the builder's binary tree where dimensions alternate.
 * Children (and fw_root.groups) are tree references: FW_REF_LEAF set, a
 * leaf inline, whose candidates are fw_leaves[first .. first+count-1]
 * (entry indices in priority order; FW_REF_FIRST, FW_REF_COUNT), except
 * that a leaf of one candidate holds its entry index as first (no slot:
 * one load fewer); clear, the index of a node. Indices are relative to
 * the generation. The builder never makes a leaf of more than
 * FW_LEAF_MAX (64) candidates, so
 * FW_NO_TREE (which would read as 127 candidates) is never a reference.
 * internal/compile (Node, LeafRef) mirrors this. */
#define FW_NODE_THRESH   7
#define FW_NODE_CHILDREN 8
#define FW_NO_THRESH     0xffffffff
#define FW_REF_LEAF      (1u << 31)
#define FW_REF_FIRST(ref) ((ref) & 0x00ffffff)
#define FW_REF_COUNT(ref) (((ref) >> 24) & 0x7f)

struct fw_node {
	__u8  dim;   /* enum fw_dim */
	__u8  n;     /* thresholds in use (1 .. FW_NODE_THRESH) */
	__u8  dim2;  /* enum fw_dim: the dimension of the thresholds in mask */
	__u8  mask;  /* bit p: thresh[p] tests dim2 */
	__u32 thresh[FW_NODE_THRESH];
	__u32 child[FW_NODE_CHILDREN];
}; /* sizeof: 64 */

/* Trees per root: rules are grouped by their most selective field (source,
 * destination, destination port, source port, other); a packet walks each
 * group's tree and the lowest matching entry index wins. */
#define FW_MAX_GROUPS 5
#define FW_NO_TREE    0xffffffff
#define FW_NUM_ROOTS  (FW_NUM_CHAINS * 2) /* chain * 2 + is_v6 */

/* fw_root.flags */
#define FW_ROOT_CT  0x01 /* the generation uses connection tracking */
#define FW_ROOT_RAW 0x02 /* fw_raw holds NOTRACK entries of this root's chain and family */

/* The raw table: at most this many entries (fw_raw) per generation. */
#define FW_MAX_RAW 32
#define FW_ROOT_MSS 0x04 /* an entry tests TCP's MSS option: the classifier reads it (lib/hdropt.h) */
#define FW_ROOT_RT  0x08 /* an entry tests the IPv6 routing header: the classifier reads it (lib/hdropt.h) */
#define FW_ROOT_PRIO 0x40 /* a root of fw_prio_roots: the generation has a priority table (lib/priority.h) */
/* fw_pkt.chain and fw_entry.chain of the priority table's entries while a
 * packet's class is decided (lib/priority.h); rules.ChainPriority. */
#define FW_CHAIN_PRIORITY 4

/* Where classification starts for one chain and family, and its policy.
 * The fast rule: when the first rule that can match a packet in one of the
 * states fast_states matches every such packet (the classic
 * "--ctstate ESTABLISHED,RELATED -j ACCEPT"), those packets are decided by
 * it after the conntrack lookup, without walking the trees. */
struct fw_root {
	__u32 groups[FW_MAX_GROUPS]; /* tree reference (see fw_node), or FW_NO_TREE */
	__u32 rule_id;               /* the policy's counter id */
	__u32 fast_rule_id;
	__u8  action;                /* the policy */
	__u8  reason;
	__u8  fast_action;
	__u8  fast_reason;
	__u8  fast_states;           /* bit mask of enum fw_ct_state */
	__u8  flags;                 /* FW_ROOT_* */
	__u8  fast_reject;           /* enum fw_reject, when fast_action is FW_ACT_REJECT */
	__u8  fast_flags;            /* FW_EF_* of the fast rule */
};

/* Connection tracking (lib/ct.h, docs/conntrack.md). */

/* What a packet is to conntrack: bit i of fw_entry.ctstate is state i.
 * Mirrored by internal/rules (CTNew, ...). */
enum fw_ct_state {
	FW_CT_NEW         = 0, /* starts a connection (no reply seen yet) */
	FW_CT_ESTABLISHED = 1, /* part of a connection that has seen a reply */
	FW_CT_RELATED     = 2, /* an ICMP error about a tracked connection */
	FW_CT_INVALID     = 3, /* fits no connection, or breaks its state machine */
	FW_CT_UNTRACKED   = 4, /* not tracked: non-first fragments, ND/MLD, other ICMP */
	FW_CT_NUM_STATES,
};

/* The state of a tracked connection (fw_ct_entry.state). Mirrored by
 * internal/conntrack.State. */
enum fw_ct_conn {
	FW_CTS_NONE = 0,
	FW_CTS_SYN_SENT,    /* TCP: SYN seen */
	FW_CTS_SYN_SENT2,   /* TCP: SYN seen both ways (simultaneous open) */
	FW_CTS_SYN_RECV,    /* TCP: SYN-ACK seen */
	FW_CTS_ESTABLISHED, /* TCP: handshake completed */
	FW_CTS_FIN_WAIT,    /* TCP: a FIN seen one way */
	FW_CTS_LAST_ACK,    /* TCP: FINs seen both ways, last ACK awaited */
	FW_CTS_TIME_WAIT,   /* TCP: closed; a new SYN may reuse the tuple */
	FW_CTS_CLOSE,       /* TCP: reset */
	FW_CTS_UNREPLIED,   /* UDP, ICMP, other: seen one way */
	FW_CTS_REPLIED,     /* UDP, ICMP, other: seen both ways */
	FW_CTS_NUM,
};

/* Timeout classes, seconds in fw_config.ct_timeout; 0 = the default
 * (lib/ct.h fw_ct_default_timeout, close to Linux nf_conntrack's).
 * Mirrored by internal/conntrack.Timeouts. */
enum fw_ct_timeout {
	FW_CTT_TCP_SYN_SENT = 0, /* 120 */
	FW_CTT_TCP_SYN_RECV,     /* 60 */
	FW_CTT_TCP_ESTABLISHED,  /* 432000 (5 days) */
	FW_CTT_TCP_FIN_WAIT,     /* 120 */
	FW_CTT_TCP_LAST_ACK,     /* 30 */
	FW_CTT_TCP_TIME_WAIT,    /* 120 */
	FW_CTT_TCP_CLOSE,        /* 10 */
	FW_CTT_UDP,              /* 30: unreplied */
	FW_CTT_UDP_STREAM,       /* 120: replied */
	FW_CTT_ICMP,             /* 30 */
	FW_CTT_OTHER,            /* 600 */
	FW_CTT_NUM,
};

/* A connection's key: its two endpoints in a fixed order (the lower
 * (address, port) first), so both directions find the same entry. */
struct fw_ct_key {
	__u64 a[2];   /* endpoint a's address, network order (IPv4: first 4 bytes) */
	__u64 b[2];
	__u16 pa, pb; /* ports, host order; ICMP queries: the id on both; else 0 */
	__u8  proto;
	__u8  family; /* 4 or 6 */
	__u8  _pad[2];
};

/* fw_ct_entry.flags */
#define FW_CTF_ORIG_A   0x01 /* the first packet came from endpoint a */
#define FW_CTF_REPLIED  0x02 /* a packet went the other way */
#define FW_CTF_FIN_ORIG 0x04 /* TCP: FIN seen from the originator */
#define FW_CTF_FIN_REPL 0x08 /* TCP: FIN seen from the responder */
#define FW_CTF_ASSURED  0x10 /* a real two-way connection (TCP: handshake completed, or a picked-up connection
			      * answered; else: a packet after the reply): never evicted from a full table */
#define FW_CTF_PICKUP   0x20 /* TCP: picked up mid-stream (no handshake seen) */
#define FW_CTF_XDNAT    0x40 /* xdpfw's NAT translates its destination (`--nat xdpfw`: set by the nat stage, lib/natdst.h) */
#define FW_CTF_XSNAT    0x80 /* ... its source */

struct fw_ct_entry {
	__u64 expires;    /* bpf_ktime_get_coarse_ns() deadline */
	__u64 packets[2]; /* original direction, reply direction */
	__u64 bytes[2];
	__u32 rule_id;    /* the rule that accepted the first packet */
	__u8  state;      /* enum fw_ct_conn */
	__u8  flags;      /* FW_CTF_* */
	__u8  chain;      /* the chain of the first packet */
	__u8  _pad;
	/* `--nat xdpfw`, a connection whose source only xdpfw's NAT
	 * translates: the source its original direction leaves with (its
	 * binding's, lib/natct.h fw_nat_ct_kept), so that its packets need
	 * no binding lookup; 0: none kept, the binding decides */
	__be32 nat_saddr;
	__be16 nat_sport; /* network order; an ICMP echo's id */
	__u8  _pad_nat[2];
};

/* Conntrack event counters (fw_ct_stats, per CPU). Mirrored by
 * internal/conntrack.Stats. */
enum fw_ct_stat {
	FW_CT_STAT_CREATED = 0, /* entries created */
	FW_CT_STAT_TABLE_FULL,  /* NEW connections refused: table full */
	FW_CT_STAT_INVALID,     /* packets found INVALID */
	FW_CT_STAT_EXPIRED,     /* expired entries the data plane replaced or removed */
	FW_CT_STAT_EARLY_DROP,  /* not-assured entries evicted to make room in a full table */
	FW_CT_STAT_PICKUP,      /* TCP connections picked up mid-stream */
	FW_CT_STAT_FRAG_TRACKED, /* fragmented datagrams whose first fragment's verdict was recorded (lib/frag.h) */
	FW_CT_STAT_FRAG_UNKNOWN, /* later fragments of no recorded datagram (first fragment not seen, evicted or expired): dropped */
	FW_CT_STAT_FRAG_EXPIRED, /* ... of which the datagram's entry was there, past its 30 s */
	FW_CT_STAT_FRAG_OVERLAP, /* later fragments overlapping their datagram's first fragment: dropped, and the datagram with them */
	FW_CT_STAT_KERNEL_NAT,   /* packets judged with the kernel's conntrack: its connection is NATed by the kernel (lib/kct.h) */
	FW_CT_STAT_NUM,
};

/* Fragments (lib/frag.h, docs/fragments.md). A datagram's identity: the
 * kernel's reassembly key (RFC 791: source, destination, protocol,
 * identification; RFC 8200: source, destination, identification, the
 * protocol being the first fragment's), and the chain that decides it. */
struct fw_frag_key {
	__u64 src[2];   /* network order (IPv4: first 4 bytes) */
	__u64 dst[2];
	__u32 id;       /* fw_pkt.frag_id */
	__u8  family;   /* 4 or 6 */
	__u8  proto;    /* IPv4: the protocol; IPv6: 0 */
	__u8  chain;    /* enum fw_chain */
	__u8  _pad;
};

/* The verdict of a datagram's first fragment, which its later fragments take. */
struct fw_frag_entry {
	__u64 expires;  /* bpf_ktime_get_coarse_ns() deadline: the first fragment's time + FW_FRAG_TIMEOUT_S */
	__u32 rule_id;  /* the rule (or policy) that decided the first fragment; 0 once an overlap dropped the datagram */
	__u16 end;      /* bytes of the fragmentable part the first fragment carried: a fragment starting before overlaps */
	__u8  action;   /* enum fw_action of the first fragment */
	__u8  reason;   /* enum fw_reason of the first fragment (FW_R_FRAG_OVERLAP once dropped for an overlap) */
	__u8  reject;   /* enum fw_reject, with FW_ACT_REJECT */
	__u8  _pad[7];
};

/* How long a datagram's verdict waits for its later fragments: the
 * kernel's ipfrag_time (net.ipv4.ipfrag_time, net.ipv6.ip6frag_time). */
#define FW_FRAG_TIMEOUT_S 30

/* Key of fw_sets, the LPM trie holding every named set's prefixes:
 * prefixlen counts the 32 set-id bits plus the address bits. IPv4 sets
 * keep the address in the first 4 bytes. */
struct fw_set_key {
	__u32 prefixlen;
	__u32 set_id;  /* big-endian, so it is the leading 32 bits */
	__u8  addr[16];
};

/* -m addrtype's types: Linux's route types (RTN_UNSPEC ... RTN_XRESOLVE);
 * fw_entry.src_types / dst_types hold bit t for type t, as xt_addrtype.
 * Mirrored by internal/rules (AddrUnspec, ...). */
enum fw_rtn {
	FW_RTN_UNSPEC = 0,
	FW_RTN_UNICAST,
	FW_RTN_LOCAL,
	FW_RTN_BROADCAST,
	FW_RTN_ANYCAST,
	FW_RTN_MULTICAST,
	FW_RTN_BLACKHOLE,
	FW_RTN_UNREACHABLE,
	FW_RTN_PROHIBIT,
	FW_RTN_THROW,
	FW_RTN_NAT,
	FW_RTN_XRESOLVE,
	FW_NUM_RTN,
};

/* fw_entry.type_dev: the device --limit-iface-in/-out names. */
#define FW_TD_NONE 0
#define FW_TD_IN   1 /* the input device (fw_pkt.ifindex) */
#define FW_TD_OUT  2 /* the output device (fw_pkt.oifindex) */

/* A route of the local table (fw_addrtypes' value). */
struct fw_addrtype {
	__u32 ifindex; /* the route's (first next hop's) device */
	__u8  type;    /* enum fw_rtn */
	__u8  _pad[3];
};

/* Per-rule and per-reason counters (per-CPU, summed in Go; last: the
 * latest over the CPUs). */
struct fw_counter {
	__u64 packets;
	__u64 bytes;
	__u64 last; /* bpf_jiffies64() of the last packet counted (0: none); see lib/stats.h fw_now */
};

/* What the clock probe (xdpfw_clock, clock.c) reads, at one instant: the
 * counters' clock and CLOCK_MONOTONIC. The control plane turns counter
 * stamps into wall time with it. */
struct fw_clock {
	__u64 jiffies;
	__u64 mono_ns;
};

/* What the program returned for a packet: the second index of
 * fw_reason_stats (slot = out * FW_NUM_REASONS + reason). XDP outcomes are
 * the XDP action values; tc's follow. Mirrored by
 * internal/datapath.Outcome (counters.go). */
enum fw_out {
	FW_OUT_XDP_ABORTED  = 0, /* XDP_ABORTED (never returned today) */
	FW_OUT_XDP_DROP     = 1, /* XDP_DROP */
	FW_OUT_XDP_PASS     = 2, /* XDP_PASS */
	FW_OUT_XDP_TX       = 3, /* XDP_TX: a REJECT answered in place */
	FW_OUT_XDP_REDIRECT = 4, /* XDP_REDIRECT: forwarded by the fast path (lib/fwd.h) */
	FW_OUT_TC_OK        = 5, /* tc egress: TC_ACT_OK */
	FW_OUT_TC_SHOT      = 6, /* tc egress: TC_ACT_SHOT */
	FW_OUT_TC_REDIRECT  = 7, /* tc egress: TC_ACT_REDIRECT (REJECT's answer, lib/reject.h) */
	FW_NUM_OUTS,
};

/* Counter slots of fw_fwd_stats: how a packet FORWARD accepted was
 * delivered (lib/fwd.h): by the fast path, or handed to the kernel
 * unchanged (XDP_PASS) and why. Mirrored by internal/datapath.FwdReason
 * (fwd.go); new values at the end. */
enum fw_fwd_reason {
	FW_FWD_XDP = 0,       /* forwarded in XDP: TTL/hop limit decremented, MACs rewritten, redirected */
	FW_FWD_STACK,         /* `load --forward stack`: the kernel forwards */
	FW_FWD_NO_NEIGH,      /* the next hop's neighbour entry is not resolved (the kernel resolves it) */
	FW_FWD_TTL,           /* TTL / hop limit <= 1 (the kernel answers ICMP time exceeded) */
	FW_FWD_MTU,           /* bigger than the route's MTU (the kernel fragments or answers frag-needed / packet-too-big) */
	FW_FWD_IP_OPTIONS,    /* IPv4 options or an IPv6 hop-by-hop header (the kernel processes them) */
	FW_FWD_NOT_ATTACHED,  /* the ingress or egress device is not in fw_fwd_ports: no xdpfw there, a native veth, generic beside native */
	FW_FWD_VLAN,          /* the frame came tagged (the kernel's VLAN device routes it) */
	FW_FWD_UNROUTED,      /* the FIB gives no plain route: blackhole, unreachable, prohibit, tunnel encapsulation */
	FW_FWD_FRAG,          /* a fragment (the kernel forwards, or reassembles, fragments) */
	FW_FWD_NOT_HOST,      /* the frame is not addressed to the ingress device's MAC (the kernel drops it) */
	FW_FWD_MARTIAN,       /* an address the kernel does not forward (loopback, multicast or zero source, ...) */
	FW_FWD_HAIRPIN,       /* leaves by the device it came in by (the kernel sends a redirect) */
	FW_FWD_TRIM,          /* the frame's padding beyond the IP packet could not be trimmed */
	FW_FWD_KERNEL_NAT,    /* the kernel's conntrack translates the connection (its nat table): only the kernel can send it */
	FW_FWD_KERNEL_CT,     /* no answer of the connection has come back untranslated yet: the kernel, which may
			       * translate it (its nat table), forwards it (lib/fwd.h fw_fwd_kernel) */
	FW_FWD_PPPOE,         /* the egress is a ppp device whose PPPoE session XDP cannot send on: not learnt, over
			       * a VLAN, or the frame is bigger than the Ethernet device under it takes (lib/pppoe.h) */
	FW_NUM_FWD,
};

/* Key of fw_pppoe_rx: a PPPoE session as the kernel's pppoe_rcv finds
 * it (the device, the session id, the peer's MAC), with the VLAN tags in
 * front of the PPPoE header when the session runs on a VLAN device.
 * Written by the control plane from /proc/net/pppoe (docs/pppoe.md). */
struct fw_pppoe_key {
	__u32  ifindex;  /* the device xdpfw runs on (a VLAN device's lower device) */
	__u16  vlan[2];  /* VIDs of the tags, outermost first; 0: no tag */
	__u8   peer[6];  /* the access concentrator's MAC: the frame's source */
	__be16 sid;      /* the session id, as on the wire */
};

/* Value of fw_pppoe_tx, keyed by a ppp device's ifindex: how the kernel's
 * pppoe_xmit sends that device's packets. */
struct fw_pppoe_out {
	__u8   peer[6];  /* destination: the access concentrator's MAC */
	__u8   mac[6];   /* source: the Ethernet device's own MAC */
	__u32  ifindex;  /* the Ethernet device the frames leave by (untagged) */
	__be16 sid;      /* the session id, as on the wire */
	__u16  mtu;      /* the most IP bytes one frame there carries: the device's MTU less the 8 of PPPoE and PPP */
};

/* Data-plane settings, one array slot, written by the control plane. The
 * zero value is the safe one: an unwritten slot drops malformed packets. */
struct fw_config {
	__u32 malformed_pass;            /* 1: pass malformed packets; 0: drop them */
	__u32 ct_full_accept;            /* 1: accept NEW connections the full table cannot hold, untracked; 0: drop them */
	__u32 ct_timeout[FW_CTT_NUM];    /* seconds per enum fw_ct_timeout; 0: the default */
	__u32 ct_tcp_strict;             /* 1: a TCP packet other than a SYN starts nothing (INVALID); 0: an ACK picks up the connection mid-stream */
	__u32 reject_rate;               /* REJECT answers per second per source; 0: FW_REJECT_RATE_DEFAULT */
	__u32 reject_burst;              /* ... of which this many at once; 0: FW_REJECT_BURST_DEFAULT */
	__u32 forward_stack;             /* 1: FORWARD-accepted packets go to the kernel (XDP_PASS); 0: the XDP fast path (lib/fwd.h) */
	__u32 kernel_ct_off;             /* 1: never ask the kernel's conntrack about kernel-NATed connections (lib/kct.h) */
};

/* REJECT's per-source answer budget (token bucket) when fw_config leaves it
 * zero. A source is an IPv4 address or an IPv6 /64 (in OUTPUT: the
 * destination the host tried to reach). docs/reject.md. */
#define FW_REJECT_RATE_DEFAULT  100
#define FW_REJECT_BURST_DEFAULT 200
/* REJECT's global budget (all sources together, fw_reject_global) when the
 * control plane left it zero: as many answers a second, as many at once. */
#define FW_REJECT_GLOBAL_RATE_DEFAULT 1000

/* Key of fw_reject_rl: the bucket a REJECT answer is charged to. */
struct fw_rl_key {
	__u64 addr;   /* IPv4: the address, first 4 bytes; IPv6: the /64 prefix */
	__u32 family; /* 4 or 6 */
	__u32 output; /* 0: INPUT/FORWARD, addr is the packet's source; 1: OUTPUT, its destination */
};

/* The trace hook: `xdpfw trace` (and the tests) run packets through a trace
 * instance of the program (maps.h fw_trace_mode) with BPF_PROG_TEST_RUN and
 * this struct as XDP metadata; the program fills in its decision. The live
 * instance has no trace code: a packet carrying this struct is no trace. */
#define FW_TRACE_MAGIC 0x78647066775f7472ULL /* "xdpfw_tr" */
#define FW_TRACE_CTSTATE 0x01 /* in_flags: use in_ctstate, skip conntrack (records nothing) */
struct fw_trace {
	__u64 magic;
	__u32 rule_id;    /* out: the deciding rule id */
	__u8  action;     /* out: enum fw_action, or 0xff when passed unfiltered (not IP) */
	__u8  reason;     /* out: enum fw_reason */
	__u8  chain;      /* out */
	__u8  ctstate;    /* out: enum fw_ct_state */
	__u8  in_flags;   /* in: FW_TRACE_* */
	__u8  in_ctstate; /* in: with FW_TRACE_CTSTATE */
	__u8  reject;     /* out: enum fw_reject of a REJECT decision */
	__u8  log_n;      /* out: LOG rules that logged the packet (before rate limits) */
	__u8  log_self;   /* out: 1 when the deciding rule logged it too (--log) */
	__u8  in_ctinfo;  /* in: with FW_TRACE_CTSTATE, the connection's FW_CTI_* */
	__u8  in_ctproto; /* in: ... and its protocol (0: the packet's) */
	__u8  _pad;       /* sizeof: 24 (XDP metadata holds at most 32 bytes) */
};

/* Logging (lib/log.h, docs/log.md). A packet is logged by the LOG rules
 * that match it before the rule that decides it (at most FW_LOG_MAX, the
 * first in rule order; more count FW_LOG_C_OVERFLOW) and by the deciding
 * rule when it has --log. Each logged rule has a token bucket
 * (fw_log_limits); an event that finds it empty is suppressed and counted. */
#define FW_LOG_MAX        4       /* LOG rules that log one packet */
#define FW_COUNT_MAX      16      /* rules without a verdict (jump, RETURN, no -j) counted for one packet */
#define FW_MAX_LOG_RULES  4096    /* logged rules (LOG, or --log) in a rule set */
#define FW_LOG_SNAP_MAX   1024    /* bytes of a packet an event may carry */
#define FW_LOG_SNAP_DEFAULT 128
#define FW_LOG_RING_SIZE  (1 << 20) /* bytes of the event ring buffer */

/* Where an event was taken. Mirrored by internal/telemetry (Hook). */
enum fw_hook {
	FW_HOOK_XDP = 0, /* ingress: INPUT and FORWARD */
	FW_HOOK_TC  = 1, /* tc egress: OUTPUT */
};

/* fw_log_event.flags */
#define FW_LOG_F_TARGET 0x01 /* logged by a LOG rule (else: the deciding rule's --log) */
#define FW_LOG_F_TRACE  0x02 /* the packet was a trace (BPF_PROG_TEST_RUN), not traffic */
/* An audit event (lib/audit.h): the candidate rule set would decide the
 * packet otherwise than the enforced one; rule_id, action and reason are
 * the candidate's, verdict_id the enforced rule's. */
#define FW_LOG_F_AUDIT  0x04

/* One event in fw_log_ring: this header, then cap_len bytes of the frame
 * (the record is sizeof header + fw_log_snap bytes long). The rule's log
 * prefix and level stay in user space, found by rule_id. */
struct fw_log_event {
	__u64 ts_ns;      /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u32 rule_id;    /* the rule that logs: a LOG rule, or the deciding rule (--log) */
	__u32 verdict_id; /* the rule (or policy id) that decided the packet */
	__u32 ifindex;    /* arrived on (XDP) or leaves by (tc) */
	__u32 pkt_len;    /* frame length */
	__u16 cap_len;    /* bytes of the frame that follow */
	__u8  hook;       /* enum fw_hook */
	__u8  chain;      /* enum fw_chain */
	__u8  action;     /* the decision: enum fw_action */
	__u8  reason;     /* enum fw_reason of the decision (REJECT: before its answer) */
	__u8  ctstate;    /* enum fw_ct_state */
	__u8  flags;      /* FW_LOG_F_* */
	__u8  data[];     /* sizeof: 32 */
};

/* A token bucket that holds its own settings (lib/ratelimit.h, GCRA):
 * burst events at once, then one per interval_ns. A logged rule's budget
 * (fw_log_limits, by rule id), a rule's -m limit (fw_limits, by rule id)
 * and REJECT's global budget (fw_reject_global) are one each. */
struct fw_bucket {
	__u64 tat;         /* when the bucket is next full (bpf_ktime_get_ns); 0: full */
	__u64 interval_ns; /* one event per interval; 0: the user's default */
	__u32 burst;       /* events at once; 0: the user's default */
	__u32 flags;       /* FW_BUCKET_* */
};

/* fw_bucket.flags. Mirrored by internal/compile (abi.go). */
#define FW_BUCKET_MATCH 0x01 /* a LOG rule's budget that is its -m limit: a packet it refuses is no match */

/* Rules with -m limit whose bucket is in fw_limits (LOG rules' limits are
 * their log budgets, fw_log_limits). Mirrored by compile.MaxLimitRules. */
#define FW_MAX_LIMIT_RULES 4096

/* A logged rule's event counters (fw_log_stats, by rule id, per CPU). */
struct fw_log_stat {
	__u64 emitted;    /* events put in the ring buffer */
	__u64 suppressed; /* events the rate limit suppressed */
	__u64 lost;       /* events the full ring buffer had no room for */
};

/* What the classifier notes of LOG matches while it walks (fw_log_scratch,
 * per CPU): the walk visits several trees, so the LOG rules before the
 * deciding entry are known only at its end. */
struct fw_log_scratch {
	__u32 idx[FW_LOG_MAX]; /* entry indices of the LOG rules noted */
	__u32 ids[FW_LOG_MAX]; /* their rule ids */
	__u32 over;            /* 1 + the lowest LOG entry index left out; 0: none */
	__u32 best;            /* the deciding entry (FW_NO_TREE: the policy) */
	/* The same notes of counting entries (FW_EF_COUNT), apart: they do not
	 * take the places of LOG rules. */
	__u32 cidx[FW_COUNT_MAX];
	__u32 cids[FW_COUNT_MAX];
	__u32 cover;
};

/* -m recent (lib/classify.h fw_state_settle, docs/limits.md). The walk
 * notes the entries of -m recent rules that match (they decide nothing
 * there); after it, those before the deciding entry are applied in rule
 * order, each seeing what the earlier ones did to the lists, and the
 * first that matches with a deciding target decides. The compiler refuses
 * a rule set in which one packet could meet more than FW_STATE_MAX of
 * them. Mirrored by internal/compile (abi.go). */
#define FW_STATE_MAX        8
/* Probe bits of one packet: -m limit or -m recent on rules that decide
 * nothing themselves (a jump, goto, RETURN or rule without -j), per
 * built-in chain (compile.MaxProbes; fw_state_settle). */
#define FW_PROBE_MAX        32
#define FW_RECENT_STAMPS    32    /* time stamps kept per address (a ring) */
#define FW_MAX_RECENT_RULES 4096  /* -m recent rules in a rule set */
#define FW_RECENT_MAX       4096  /* addresses in all lists together (LRU) */

enum fw_recent_op {
	FW_RECENT_SET    = 1,
	FW_RECENT_CHECK  = 2,
	FW_RECENT_UPDATE = 3,
	FW_RECENT_REMOVE = 4,
};

/* fw_recent_rule.flags */
#define FW_RECENT_F_DEST   0x01 /* --rdest: the destination address */
#define FW_RECENT_F_INVERT 0x02 /* ! --rcheck ... */
#define FW_RECENT_F_TTL    0x04 /* --rttl: the entry's TTL must be the packet's (or either 0) */

/* A -m recent rule's settings (fw_recent_rules, by rule id). */
struct fw_recent_rule {
	__u64 mask[2];   /* --mask, on the address as fw_pkt holds it */
	__u64 window_ns; /* --seconds in ns; 0: every time stamp counts */
	__u32 list;      /* the list (--name) */
	__u8  op;        /* enum fw_recent_op */
	__u8  flags;     /* FW_RECENT_F_* */
	__u8  hitcount;  /* --hitcount; 0: one time stamp */
	__u8  _pad;
};

/* An address in a list (fw_recent): the key, and its time stamps. */
struct fw_recent_key {
	__u64 addr[2]; /* masked */
	__u32 list;
	__u8  family;
	__u8  _pad[3];
};

struct fw_recent_entry {
	__u64 stamps[FW_RECENT_STAMPS]; /* bpf_ktime_get_ns() of the packets recorded, a ring */
	__u8  index;                     /* 1 + the ring slot written last */
	__u8  nstamps;                   /* slots in use */
	__u8  ttl;                       /* the TTL (hop limit) of the packet that set or updated it last (--rttl) */
	__u8  _pad[5];
};

/* -m hashlimit (lib/classify.h fw_hashlimit_apply, docs/limits.md): a
 * state rule as -m recent (FW_EF_STATE: noted in the walk, settled in rule
 * order after it), whose state is a token bucket (lib/ratelimit.h) per
 * key built from the packet, in a named table. Mirrored by
 * internal/compile (abi.go). */
#define FW_MAX_HASHLIMIT_RULES 4096  /* -m hashlimit rules in a rule set */
#define FW_HASHLIMIT_MAX       16384 /* buckets in all tables together (LRU) */

/* fw_hashlimit_rule.flags: the fields of the key (--hashlimit-mode, as
 * rules.HashMode), and --hashlimit-above */
#define FW_HL_F_SRCIP   0x01
#define FW_HL_F_SRCPORT 0x02
#define FW_HL_F_DSTIP   0x04
#define FW_HL_F_DSTPORT 0x08
#define FW_HL_F_ABOVE   0x10 /* matches when the bucket has no token (and takes one when it has) */

/* A -m hashlimit rule's settings (fw_hashlimit_rules, by rule id). */
struct fw_hashlimit_rule {
	__u64 srcmask[2];  /* --hashlimit-srcmask, on the address as fw_pkt holds it */
	__u64 dstmask[2];
	__u64 interval_ns; /* one token per interval */
	__u64 expire_ns;   /* --hashlimit-htable-expire: an idle bucket is full again after it */
	__u32 burst;
	__u32 table;       /* the table (--hashlimit-name) */
	__u32 flags;       /* FW_HL_F_* */
	__u32 _pad;
};

/* A bucket of a table (fw_hashlimit): the fields of the rule's mode,
 * masked; the others zero. */
struct fw_hashlimit_key {
	__u64 src[2];
	__u64 dst[2];
	__u32 table;
	__u16 sport;
	__u16 dport;
	__u8  family;
	__u8  _pad[7];
};

struct fw_hashlimit_bucket {
	__u64 tat;  /* GCRA (lib/ratelimit.h) */
	__u64 seen; /* bpf_ktime_get_ns() of its last packet */
};

/* -m connlimit (lib/connlimit.h, docs/limits.md): a state rule as -m
 * hashlimit (FW_EF_STATE with FW_EF_CONNLIMIT), whose state is, per
 * (rule, masked address), the connections that reached the rule, as the
 * kernel's nf_conncount keeps them: a bounded list of conntrack keys,
 * collected when their fw_ct entry is gone or closed. Mirrored by
 * internal/compile (abi.go). */
#define FW_MAX_CONNLIMIT_RULES 4096 /* -m connlimit rules in a rule set */
#define FW_CONNLIMIT_MAX       8192 /* keys (rule, address) of all rules together (LRU) */
#define FW_CONNLIMIT_SLOTS     16   /* connections one key holds: a limit is at most FW_CONNLIMIT_SLOTS - 1 */

/* fw_connlimit_rule.flags */
#define FW_CL_F_ABOVE 0x01 /* --connlimit-above: matches when more than limit are counted (else: at most) */
#define FW_CL_F_DADDR 0x02 /* --connlimit-daddr: the key is the destination address (else the source) */

/* A -m connlimit rule's settings (fw_connlimit_rules, by rule id). */
struct fw_connlimit_rule {
	__u64 mask[2]; /* --connlimit-mask, on the address as fw_pkt holds it */
	__u32 limit;
	__u32 flags;   /* FW_CL_F_* */
};

/* A key of fw_connlimit: a rule's masked address. */
struct fw_connlimit_key {
	__u64 addr[2];
	__u32 rule_id;
	__u8  family;
	__u8  _pad[3];
};

/* A connection a key counts: its conntrack key (family 0: a free slot),
 * and when and where it was added (an entry not yet in fw_ct is kept for
 * 2 jiffies when another CPU added it: that CPU may be about to create
 * it, as nf_conncount's find_or_evict). */
struct fw_connlimit_conn {
	struct fw_ct_key ct;
	__u32 jiffies; /* bpf_jiffies64() when added, low 32 bits */
	__u32 cpu;
};

struct fw_connlimit_conns {
	struct fw_connlimit_conn conn[FW_CONNLIMIT_SLOTS];
};

/* What the walk notes of -m recent and -m hashlimit matches, probes and guarded entries
 * (fw_state_scratch, per CPU). */
struct fw_state_scratch {
	__u32 idx[FW_STATE_MAX]; /* entry indices */
	__u32 ids[FW_STATE_MAX]; /* their note keys (fw_entry.note) */
	__u32 best;              /* the walk's deciding entry (FW_NO_TREE: the policy) */
	__u32 gen;               /* the generation the walk read */
	/* the address looked up and a new address's entry are built here,
	 * not on the stack (the frames of egress, fw_classify and
	 * fw_notes_end add up to the verifier's 512 bytes) */
	struct fw_recent_key key;
	struct fw_recent_entry fresh;
	struct fw_hashlimit_key hkey; /* -m hashlimit's, the same way */
	struct fw_hashlimit_bucket hfresh;
	struct fw_connlimit_key ckey; /* -m connlimit's */
	struct fw_connlimit_conns cfresh;
	/* its walk's inputs and tally, kept here and not in registers: the
	 * verifier would follow every combination of the slots' outcomes,
	 * and spills would pass the 512 bytes of stack the frames share */
	__u64 cnow;   /* bpf_ktime_get_coarse_ns() (fw_ct_entry.expires' clock) */
	__u32 cjif;   /* bpf_jiffies64(), low 32 bits */
	__u32 ccpu;   /* this CPU */
	__u32 cadd;   /* the packet's connection is to be added (its first packet) */
	__u32 ccount; /* connections counted */
	__u32 cfree;  /* 1 + the first free slot; 0: none */
	__u32 cfound; /* the packet's own connection is in a slot */
	__u32 czero;  /* 0: the key of fw_xdp_handoff's slot */
	__u32 crule;  /* the rule id: the key of fw_connlimit_rules */
};

/* Counters of fw_log_counters (per CPU). Mirrored by datapath.LogStats. */
enum fw_log_counter {
	FW_LOG_C_OVERFLOW = 0, /* packets more than FW_LOG_MAX LOG rules matched */
	FW_LOG_C_NO_LIMIT,     /* events of a rule id without fw_log_limits entry (not emitted) */
	FW_LOG_C_STATE_OVERFLOW, /* packets that met more -m recent rules than FW_STATE_MAX: dropped (the compiler prevents it) */
	FW_LOG_C_COUNT_OVERFLOW, /* packets more than FW_COUNT_MAX counting entries matched */
	FW_LOG_C_CONNLIMIT_FULL, /* packets of a new connection a -m connlimit rule could not count (its key's FW_CONNLIMIT_SLOTS in use): dropped */
	FW_LOG_C_NUM,
};

/* The delta stage: edits in force on top of the main generation until the
 * control plane rebuilds it (docs/classifier.md, "Single edits"). A packet
 * first finds the main tables' first match b; when b belongs to a deleted
 * rule (dead), b no longer counts. Then the first delta entry (in array
 * order, sorted by pos) that matches and has pos <= b (any pos when b is
 * dead or none) decides; else b; else the policy. Entries are added rules
 * (placed before main entry pos) and copies of the main entries after a
 * deleted rule that overlap it (pos = their own index), which take over
 * the packets the deleted rule matched. */
#define FW_DELTA_MAX  32 /* delta entries checked at most */
#define FW_DELTA_DEAD 32 /* deleted rules at most */

struct fw_delta {
	__u32 count;                        /* entries in use */
	__u32 dead_count;                   /* dead ids in use */
	__u32 dead[FW_DELTA_DEAD];          /* rule ids of the deleted main rules */
	__u32 pos[FW_DELTA_MAX];            /* entry i sits before main entry pos[i] */
	struct fw_root roots[FW_NUM_ROOTS]; /* used instead of the main roots (fast rules, flags) */
};

/* fw_active's value: 0 = no rule set installed; else
 * FW_ACTIVE(main generation 0|1, delta 0 = none | 1 + the fw_deltas half in
 * force). It stays below 256, so a write changes one byte and is never
 * seen torn. */
#define FW_ACTIVE(gen, delta) (1 + (gen) + 2 * (delta))

/* Reserved rule ids: 0 = none, policies at FW_POLICY_ID(chain, is_v6),
 * rules from FW_FIRST_RULE_ID. */
#define FW_POLICY_ID(chain, v6) (1 + (chain) * 2 + (v6))
#define FW_FIRST_RULE_ID 16

/* Per-packet processing time (lib/latency.h, docs/realtime.md): a
 * log-linear histogram per (chain, outcome), per CPU, of sampled packets'
 * nanoseconds from program entry to verdict. Values below FW_LAT_SUB
 * have a bucket each; each power-of-two range [2^k, 2^(k+1)) above is
 * split in FW_LAT_SUB equal buckets, up to 2^FW_LAT_MAX_EXP ns (1.05 ms);
 * the last bucket holds everything longer. Mirrored by internal/latency
 * (bucket bounds) and internal/datapath (latency.go). */
#define FW_LAT_SUB_BITS 4
#define FW_LAT_SUB      (1 << FW_LAT_SUB_BITS)
#define FW_LAT_MAX_EXP  20
#define FW_LAT_BUCKETS  ((FW_LAT_MAX_EXP - FW_LAT_SUB_BITS + 1) * FW_LAT_SUB + 1)

/* The outcome a latency histogram is kept for: the decision's action
 * (the same values as enum fw_action's first three), or PASS for a packet
 * no rule set judges (not IP). Slot of fw_latency: chain * FW_LAT_OUTS +
 * outcome. Mirrored by internal/datapath (latency.go). */
enum fw_lat_out {
	FW_LAT_ACCEPT = 0,
	FW_LAT_DROP   = 1,
	FW_LAT_REJECT = 2,
	FW_LAT_PASS   = 3,
	FW_LAT_OUTS   = 4,
};
#define FW_LAT_SLOTS (FW_NUM_CHAINS * FW_LAT_OUTS)

struct fw_lat_hist {
	__u64 count; /* packets measured */
	__u64 sum;   /* their nanoseconds, summed */
	__u64 max;   /* the longest, ns */
	__u64 bucket[FW_LAT_BUCKETS];
};

/* Priority (lib/priority.h, docs/realtime.md "Priority"): where the bulk
 * class goes. Mirrored by internal/datapath (PriorityConfig). */
#define FW_PRIO_MAX_CPUS 64
struct fw_prio_cfg {
	__u32 ncpus;                  /* bulk CPUs in cpus[]; 0: priority off, every packet judged where it arrives */
	__u32 cpus[FW_PRIO_MAX_CPUS]; /* the bulk CPUs (fw_cpumap keys) */
};

/* fw_prio_stats, per CPU: what the priority stage did. */
enum fw_prio_stat {
	FW_PRIO_S_HIGH = 0,  /* judged at once, on the CPU that received it */
	FW_PRIO_S_BULK,      /* handed to a bulk CPU (fw_cpumap) */
	FW_PRIO_S_FALLBACK,  /* bulk, but the hand-over failed: judged where it arrived */
	FW_PRIO_S_CPUMAP,    /* judged by xdpfw_cpumap, on this (bulk) CPU */
	FW_PRIO_S_NUM,
};

/* The audit's counters (fw_audit_counts, lib/audit.h). Mirrored by
 * internal/datapath (audit.go). */
enum fw_audit_counter {
	FW_AUDIT_C_SEEN = 0,    /* packets the candidate classified */
	FW_AUDIT_C_WOULD_DROP,  /* the enforced set accepted, the candidate would not */
	FW_AUDIT_C_WOULD_ACCEPT, /* the enforced set did not accept, the candidate would */
	FW_AUDIT_C_SUPPRESSED,  /* events over the budget */
	FW_AUDIT_C_LOST,        /* events the full ring buffer had no room for */
	FW_AUDIT_C_NUM,
};

/* A NAT rewrite of an IPv4 packet (lib/nat.h fw_nat_rewrite4): the
 * addresses and ports (ICMP echo: the id, as a source port in a request,
 * a destination port in a reply) the packet is to carry, network order;
 * a field equal to the packet's is left as it is. docs/nat.md. Mirrored
 * by internal/nat (bpf2go). */
struct fw_nat_rw {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
};

/* An IPv4 connection's tuple in one direction, as its packets carry it
 * (network order; ICMP echo: the id as both ports): the key of a NAT
 * binding, which lib/nat.h fw_nat_claim makes unique. Mirrored by
 * internal/nat (bpf2go). */
struct fw_nat_tuple {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8   proto;
	__u8   _pad[3];
};

/* A fragmented IPv4 datagram as it arrives (forwarded) or is sent (tc
 * egress): the kernel's reassembly key (source, destination, protocol,
 * identification, network order). The key of fw_nat_frags (lib/natfrag.h). */
struct fw_nat_frag_key {
	__be32 saddr;
	__be32 daddr;
	__be16 id;
	__u8   proto;
	__u8   _pad;
};

/* A nat rule's translation, as the nat stage applies it (lib/natfw.h):
 * kind (enum fw_nat_kind), an address range (network order; 0: the
 * packet's own), a port range (host order; port_lo 0: none given).
 * fw_nat_targets[rule id - FW_FIRST_RULE_ID] in the nat instance.
 * Mirrored by internal/datapath (bpf2go). */
enum fw_nat_kind {
	FW_NAT_NONE = 0,   /* the rule is ACCEPT: no translation */
	FW_NAT_DNAT,
	FW_NAT_SNAT,
	FW_NAT_MASQUERADE,
	FW_NAT_REDIRECT,
};
struct fw_nat_target {
	__u32  kind;
	__be32 addr_lo;
	__be32 addr_hi;
	__u16  port_lo;
	__u16  port_hi;
};
#define FW_NAT_MAX_RULES 4096

/* fw_xdp_handoff.nat_state: what the packet's NAT is (lib/natfw.h). */
#define FW_NAT_S_NONE  0 /* no binding found: a connection's first packet goes to the nat stage */
#define FW_NAT_S_BOUND 1 /* its binding (nat) rewrote the destination; the source after the filter */
#define FW_NAT_S_DONE  2 /* the nat stage has decided (and rewritten): the finish stage does no more */
#define FW_NAT_S_PRE   3 /* a new connection's first packet, without a binding, sent to the nat stage's PREROUTING (lib/natdst.h) */
#define FW_NAT_S_PENDING 4 /* PREROUTING translated its destination (nat, from nat_orig): bound once the filter accepts */
#define FW_NAT_S_AGAIN 5 /* PREROUTING left it as it is: xdpfw_ingress entered again goes on as with FW_NAT_S_NONE */

/* fw_xdp_handoff.nat_pre: what the nat stage's PREROUTING decided, for
 * xdpfw_ingress entered again with the packet (lib/natdst.h); 0 otherwise. */
#define FW_NAT_P_NONE 1 /* the nat table leaves the destination as it is */
#define FW_NAT_P_DNAT 2 /* the destination is translated (DNAT, REDIRECT): the frame carries it */
#define FW_NAT_S_ERROR 6 /* an ICMP error about a bound connection (nat, nat_key its quote's binding): its outer
			  * source and its quote rewritten after the filter (lib/natfw.h fw_nat_out_error) */
/* fw_tc_slot.nat_state at tc egress (nat OUTPUT, lib/natout.h), beside FW_NAT_S_NONE, _BOUND, _PENDING, _AGAIN */
#define FW_NAT_S_OUT   7 /* its binding, from nat OUTPUT, rewrote the destination: re-routed after the filter */

/* fw_tc_stages: tc egress's stages (lib/natout.h) */
#define FW_TC_STAGE_NAT    0 /* the nat instance's xdpfw_egress_nat: nat OUTPUT for a new connection's first packet */
#define FW_TC_STAGE_EGRESS 1 /* the live xdpfw_egress, entered again by the nat stage */

/* fw_nat_no_hook[]: the nat hooks whose stage a new connection's first
 * packet skips when no rule of theirs translates (datapath.NATHook) */
#define FW_NAT_HOOK_PRE    0 /* nat PREROUTING: the nat stage of XDP (lib/natdst.h) */
#define FW_NAT_HOOK_OUTPUT 1 /* nat OUTPUT: the nat stage of tc egress (lib/natout.h) */
#define FW_NAT_HOOKS       2

/* The nat counters (fw_nat_counts, enum fw_nat_counter). */
enum fw_nat_counter {
	FW_NAT_C_BOUND = 0,   /* connections bound (source translated) */
	FW_NAT_C_NO_PORT,     /* connections dropped: no free port among those tried */
	FW_NAT_C_FULL,        /* connections dropped: the binding map refused the entry */
	FW_NAT_C_NO_ADDR,     /* MASQUERADE connections dropped: the FIB gave no source address */
	FW_NAT_C_UNTRANSLATED,/* first packets of connections the nat table leaves as they are */
	FW_NAT_C_LOST,        /* packets dropped: a connection the nat table translates, past its first packet, without its binding */
	FW_NAT_C_FRAG,        /* packets dropped: IPv4 fragments whose translation is not known (a new connection's fragmented
			       * first packet in FORWARD; a later fragment, forwarded or sent, whose datagram's was not recorded) */
	FW_NAT_C_DNAT,        /* connections bound whose destination PREROUTING translated (DNAT, REDIRECT; with a source NAT too) */
	FW_NAT_C_NO_LOCAL,    /* REDIRECT first packets dropped: the device they came in by has no IPv4 address */
	FW_NAT_C_ICMP_ERROR,  /* ICMP errors about translated connections, translated (outer header and quote) */
	FW_NAT_C_STALE,       /* bindings found stale (their connection gone from conntrack) and removed; the packet dropped when it was already rewritten */
	FW_NAT_C_KERNEL_ICMP, /* packets passed untranslated: the kernel answers them with an ICMP error (TTL, DF and too big) */
	FW_NAT_C_NO_CT,       /* first packets dropped: a connection the nat table translates that conntrack could not record (table full, --ct-full accept; lib/natct.h) */
	FW_NAT_C_OUTPUT,      /* connections bound whose destination nat OUTPUT translated (DNAT of locally generated traffic) */
	FW_NAT_C_NO_ROUTE,    /* locally generated packets dropped: nat OUTPUT's destination has no route the FIB gives (local, unreachable) */
	FW_NAT_C_FRAG_NAT,    /* later fragments translated as their datagram's first fragment was (lib/natfrag.h) */
	FW_NAT_C_NUM,
};

#endif
