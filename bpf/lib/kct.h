/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The kernel's conntrack, consulted from XDP for connections the kernel
 * translates (its nat table: Docker, kube-proxy, a router's MASQUERADE).
 *
 * xdpfw judges a packet before the kernel's PREROUTING: the answer to a
 * masqueraded connection arrives addressed to this host (the translated
 * address), a tuple xdpfw's own conntrack never saw (it tracked the
 * connection before the kernel translated it), and would be judged NEW in
 * INPUT. iptables judges it after PREROUTING has put the original source
 * back as its destination: in FORWARD, ESTABLISHED. So when xdpfw's own
 * conntrack does not know a packet as ESTABLISHED or RELATED, the kernel's
 * conntrack is asked (bpf_xdp_ct_lookup, Linux 5.18+, TCP and UDP only;
 * an ICMP error xdpfw finds INVALID: about the TCP or UDP packet it
 * quotes, reversed, as the kernel looks it up);
 * a connection the kernel translates (IPS_SRC_NAT or IPS_DST_NAT) is
 * judged as iptables' filter table would see the packet:
 * - destination address and port as PREROUTING leaves them: the other
 *   direction's source in the kernel's tuples (an answer to a masqueraded
 *   connection: the original source; a later packet of a DNATed one: the
 *   new destination); the source stays (POSTROUTING translates it, after
 *   the filter table);
 * - the chain chosen again for that destination (FORWARD when it is not
 *   this host's);
 * - the state the kernel gives: the reply direction ESTABLISHED, the
 *   original direction ESTABLISHED once answered, else NEW, an ICMP
 *   error RELATED (ctproto the quoted packet's); ctinfo the
 *   kernel's status bits (FW_CTI_SRC_NAT / FW_CTI_DST_NAT among them) and
 *   direction.
 * Nothing is recorded in xdpfw's own table for such a packet; only the
 * kernel can translate it, so the packet must go to the kernel (ctinfo's
 * NAT bits say so). The first packet of a DNATed connection cannot be
 * known here: the kernel's PREROUTING decides its translation after XDP
 * (docs/conntrack.md "Kernel NAT").
 * Where the kfunc is missing (no nf_conntrack) or fw_config.kernel_ct_off
 * is set, nothing is asked. */
#ifndef XDPFW_KCT_H
#define XDPFW_KCT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../types.h"
#include "../maps.h"
#include "chain.h"
#include "ct.h"

/* The kernel's structures, reduced to the fields read; CO-RE relocates
 * each access to the running kernel's layout (constant array indices
 * only: a variable index would step by the local, smaller size). */
union nf_inet_addr {
	__be32 ip;
	__be32 ip6[4];
} __attribute__((preserve_access_index));
union nf_conntrack_man_proto {
	__be16 all;
} __attribute__((preserve_access_index));
struct nf_conntrack_man {
	union nf_inet_addr u3;
	union nf_conntrack_man_proto u;
} __attribute__((preserve_access_index));
struct nf_conntrack_tuple {
	struct nf_conntrack_man src;
} __attribute__((preserve_access_index));
struct nf_conntrack_tuple_hash {
	struct nf_conntrack_tuple tuple;
} __attribute__((preserve_access_index));
struct nf_conn {
	unsigned long status;
	struct nf_conntrack_tuple_hash tuplehash[2]; /* [IP_CT_DIR_ORIGINAL], [IP_CT_DIR_REPLY] */
} __attribute__((preserve_access_index));

/* The lookup's options (net/netfilter/nf_conntrack_bpf.c): its first
 * layout, 12 bytes, which every kernel with the kfunc accepts. */
struct bpf_ct_opts {
	__s32 netns_id; /* -1: the device's namespace */
	__s32 error;    /* out */
	__u8 l4proto;   /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 dir;       /* out: the direction of the connection the tuple matched */
	__u8 reserved[2];
};

extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *xdp_ctx, struct bpf_sock_tuple *bpf_tuple, __u32 tuple__sz,
					 struct bpf_ct_opts *opts, __u32 opts__sz) __ksym __weak;
extern void bpf_ct_release(struct nf_conn *nfct) __ksym __weak;

#define FW_IPS_NAT (FW_CTI_SRC_NAT | FW_CTI_DST_NAT)

/* fw_kct_judge asks the kernel's conntrack about p (TCP or UDP, not
 * tracked as ESTABLISHED by xdpfw) and, when the kernel translates its
 * connection, makes p what iptables' filter table sees (above): returns 1,
 * or 2 when that moved p to another chain; else 0 with p untouched. A global function: verified once; it picks the
 * chain again with fw_ingress_chain. */
__noinline int fw_kct_judge(struct xdp_md *ctx, struct fw_pkt *p)
{
	if (!ctx || !p) /* the verifier requires the check on global-function pointers */
		return 0;
	if (!bpf_xdp_ct_lookup || !bpf_ct_release) /* no nf_conntrack in this kernel */
		return 0;

	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 src[2] = {}, dst[2] = {};
	__u16 sport, dport;
	__u8 proto = p->proto;
	int related = proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6; /* an ICMP error (fw_kct_wanted) */

	if (related) { /* the kernel looks the quoted packet up reversed */
		if (fw_icmp_quoted(data, data_end, p, dst, src, &dport, &sport, &proto) < 0)
			return 0;
		if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
			return 0;
	} else {
		__builtin_memcpy(src, p->src, 16);
		__builtin_memcpy(dst, p->dst, 16);
		sport = p->sport;
		dport = p->dport;
	}

	struct bpf_sock_tuple t = {};
	struct bpf_ct_opts o = { .netns_id = -1, .l4proto = proto };
	__u32 tsz;

	if (p->family == 4) {
		t.ipv4.saddr = (__u32)src[0];
		t.ipv4.daddr = (__u32)dst[0];
		t.ipv4.sport = bpf_htons(sport);
		t.ipv4.dport = bpf_htons(dport);
		tsz = sizeof(t.ipv4);
	} else {
		__builtin_memcpy(t.ipv6.saddr, src, 16);
		__builtin_memcpy(t.ipv6.daddr, dst, 16);
		t.ipv6.sport = bpf_htons(sport);
		t.ipv6.dport = bpf_htons(dport);
		tsz = sizeof(t.ipv6);
	}
	struct nf_conn *c = bpf_xdp_ct_lookup(ctx, &t, tsz, &o, sizeof(o));
	if (!c)
		return 0; /* not the kernel's connection (or no conntrack in this namespace) */

	__u32 status = (__u32)c->status;
	__u8 reply = o.dir != 0;
	/* PREROUTING's destination: the other direction's source */
	struct nf_conntrack_tuple_hash *other = reply ? &c->tuplehash[0] : &c->tuplehash[1];
	__u32 to[4] = {};
	to[0] = other->tuple.src.u3.ip6[0];
	if (p->family == 6) {
		to[1] = other->tuple.src.u3.ip6[1];
		to[2] = other->tuple.src.u3.ip6[2];
		to[3] = other->tuple.src.u3.ip6[3];
	}
	__be16 toport = other->tuple.src.u.all;
	bpf_ct_release(c);
	if (!(status & FW_IPS_NAT))
		return 0; /* not translated: xdpfw's own conntrack judges it */

	__u8 *l3 = data + p->l3_off;
	if ((void *)(l3 + 9) > data_end) /* parse.h checked the header; the verifier needs it again */
		return 0;

	if (related)
		p->ctstate = FW_CT_RELATED;
	else
		p->ctstate = reply || (status & FW_CTI_SEEN_REPLY) ? FW_CT_ESTABLISHED : FW_CT_NEW;
	p->ctinfo = (status & (FW_CTI_EXPECTED | FW_CTI_SEEN_REPLY | FW_CTI_ASSURED | FW_CTI_CONFIRMED | FW_IPS_NAT)) |
		    (reply ? FW_CTI_REPLY : 0);
	p->ctproto = proto;
	__u64 d0 = (__u64)to[1] << 32 | to[0], d1 = (__u64)to[3] << 32 | to[2]; /* p->dst's layout: bytes as on the wire */
	/* an ICMP error's own "ports" are no ports: only its address moves */
	__u16 dp = related ? p->dport : bpf_ntohs(toport);
	if (d0 != p->dst[0] || d1 != p->dst[1] || dp != p->dport) {
		p->dst[0] = d0;
		p->dst[1] = d1;
		p->dport = dp;
		/* the chain for the translated destination, from the TTL as it
		 * arrived (xdp_fw.c decremented it for FORWARD) */
		p->ttl = p->family == 4 ? l3[8] : l3[7];
		p->oifindex = 0;
		__u8 chain = p->chain;
		/* the FIB's next hop for it is not kept: a packet the kernel
		 * translates never takes the forwarding fast path (lib/fwd.h) */
		struct fw_fwd_hop hop = {};
		p->chain = fw_ingress_chain(ctx, p, &hop);
		if (p->chain == FW_CHAIN_FORWARD && p->ttl)
			p->ttl--;
		if (p->chain != chain)
			return 2;
	}
	return 1;
}

/* fw_kct_wanted: is the kernel's conntrack to be asked about p, which
 * xdpfw's conntrack looked up? Not where xdpfw's own table knows it as
 * ESTABLISHED or RELATED (every packet of a connection xdpfw tracks in
 * full costs nothing more), nor for what the kfunc cannot look up. The
 * lookup costs about 110 ns (BenchmarkKernelCT): paid by the first packet
 * of each connection but a TCP SYN, and by every packet nothing accepts
 * that is not a SYN. */
static __always_inline int fw_kct_wanted(const struct fw_pkt *p)
{
	if (p->ctstate != FW_CT_NEW && p->ctstate != FW_CT_INVALID)
		return 0;
	if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6) {
		/* an ICMP error quoting nothing xdpfw tracks: it may quote a
		 * packet the kernel translated */
		if (p->ctstate != FW_CT_INVALID || (p->proto == IPPROTO_ICMP) != (p->family == 4) ||
		    fw_icmp_kind(p->family, p->icmp_type) != FW_ICMP_ERROR)
			return 0;
	} else if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP) {
		return 0;
	}
	/* A bare SYN starts a connection: what the kernel might know of it is
	 * a DNATed connection's first packet again, judged as that was (by
	 * its original destination). A SYN flood pays nothing here. */
	if (p->proto == IPPROTO_TCP && (p->tcp_flags & (FW_TCP_SYN | FW_TCP_ACK | FW_TCP_RST | FW_TCP_FIN)) == FW_TCP_SYN)
		return 0;
	__u32 zero = 0;
	const struct fw_config *cfg = bpf_map_lookup_elem(&fw_config_map, &zero);

	return !cfg || !cfg->kernel_ct_off;
}

/* fw_kct_consult: the kernel-NAT step of XDP's conntrack (above): a
 * packet the kernel's conntrack judges records nothing in xdpfw's.
 * Returns 1 when p moved to another chain, else 0. */
static __always_inline int fw_kct_consult(struct xdp_md *ctx, struct fw_pkt *p, struct fw_ct *ct)
{
	if (!fw_kct_wanted(p))
		return 0;
	int r = fw_kct_judge(ctx, p);
	if (!r)
		return 0;
	ct->next = FW_CTS_NONE;
	ct->create = 0;
	fw_ct_count(FW_CT_STAT_KERNEL_NAT);
	return r == 2;
}

#endif
