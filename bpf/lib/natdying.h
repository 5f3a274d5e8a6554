/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The first packet of a DNATed connection that dies here (`--nat xdpfw`,
 * docs/nat.md "The kernel's errors about translated packets"): its TTL
 * runs out at this router, or it has DF and is bigger than the route's
 * MTU. The kernel answers it with an ICMP error quoting it as it was
 * given, translated by nat PREROUTING (the LAN server's address), and
 * its own NAT translates that quote back (nf_nat_icmp_reply_translation,
 * by the connection the packet carried, never confirmed): the client gets
 * an error quoting the address it sent to. Such a packet is never bound
 * (fw_nat_life_out: the kernel never forwards it, and POSTROUTING never
 * runs for it), so fw_nat_tc_error finds no binding for the error: the
 * translation is recorded here instead, as the binding of the reply
 * direction would hold it (fw_nat_bind4), and taken once by tc egress.
 * A record the kernel never asks for (its error rate-limited) stays until
 * the LRU evicts it; it only ever translates an error that quotes this
 * exact translated tuple and has no binding. */
#ifndef XDPFW_NATDYING_H
#define XDPFW_NATDYING_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"

/* fw_nat_dying_record records the translation of connection orig, whose
 * first packet PREROUTING translated to out and the kernel will answer
 * with an ICMP error: under the tuple the error's quote has reversed
 * (out's reply direction), the tuple to quote back (orig reversed). */
static __always_inline void fw_nat_dying_record(const struct fw_nat_tuple *orig, const struct fw_nat_rw *out)
{
	struct fw_nat_tuple reply = {.saddr = out->daddr, .daddr = out->saddr, .sport = out->dport, .dport = out->sport,
				     .proto = orig->proto};
	struct fw_nat_rw back = {.saddr = orig->daddr, .daddr = orig->saddr, .sport = orig->dport, .dport = orig->sport};

	if (reply.saddr != back.saddr || reply.sport != back.sport) /* a DNAT that changed nothing: nothing to quote back */
		bpf_map_update_elem(&fw_nat_dying, &reply, &back, BPF_ANY);
}

#endif
