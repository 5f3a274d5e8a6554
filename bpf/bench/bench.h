/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared by the benchmarks' programs and Go (bpf2go -type), and
 * their helpers. */
#ifndef XDPFW_BENCH_H
#define XDPFW_BENCH_H

#include <linux/types.h>
#include <linux/ip.h>

/* One CPU's count of packets a benchmark program handled. */
struct bench_counter {
	__u64 packets;
	__u64 bytes;
};

/* Ones' complement sum of a 20-byte IPv4 header (no options: the Go side
 * builds the templates), checksum field included: 0xffff for a header
 * whose checksum is right. */
static __always_inline __u16 ipv4_sum(const struct iphdr *ip)
{
	const __u16 *w = (const __u16 *)ip;
	__u32 s = 0;

#pragma unroll
	for (int i = 0; i < 10; i++)
		s += w[i];
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

/* The header checksum of ip, written into ip->check by the caller. */
static __always_inline __u16 ipv4_csum(struct iphdr *ip)
{
	ip->check = 0;
	return ~ipv4_sum(ip);
}

#endif
