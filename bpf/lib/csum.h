/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Incremental checksum updates (RFC 1624): when 16-bit words m of the data
 * a checksum HC covers become m', the new checksum is
 *	HC' = ~(~HC + ~m + m')			(RFC 1624, eqn. 3)
 * in one's complement arithmetic, which never yields the -0 that eqn. 2
 * can. XDP has no bpf_l3_csum_replace / bpf_l4_csum_replace (those are
 * tc's); these are their equivalent over the packet's bytes. Values are
 * loaded in network order as native words: a one's complement sum does
 * not depend on byte order (RFC 1071, 2.B), so no swap is needed. A
 * delta is accumulated with fw_csum_delta16/32 and applied once with
 * fw_csum_apply. (The full sums, RFC 1071, are in lib/reject.h.) */
#ifndef XDPFW_CSUM_H
#define XDPFW_CSUM_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

/* fw_csum_delta16 adds the change of one 16-bit word, old to new, to d. */
static __always_inline __u32 fw_csum_delta16(__u32 d, __u16 old, __u16 new)
{
	return d + (__u16)~old + new;
}

/* fw_csum_delta32 adds the change of one 32-bit field (an IPv4 address,
 * two words), old to new, to d. */
static __always_inline __u32 fw_csum_delta32(__u32 d, __u32 old, __u32 new)
{
	return d + (__u16)~old + (__u16)~(old >> 16) + (new & 0xffff) + (new >> 16);
}

/* fw_csum_apply returns checksum check updated by the accumulated delta d
 * (at most a few dozen words: two folds bring it to 16 bits). */
static __always_inline __u16 fw_csum_apply(__u16 check, __u32 d)
{
	__u32 s = (__u16)~check + d;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~s;
}

#endif
