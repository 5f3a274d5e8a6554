/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared by the benchmarks' programs and Go (bpf2go -type), and
 * their helpers. */
#ifndef XDPFW_BENCH_H
#define XDPFW_BENCH_H

#include <linux/types.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>

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

/* Folds a 32-bit ones' complement sum to 16 bits. */
static __always_inline __u16 csum_fold32(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

/* The ones' complement sum of an IPv4 UDP pseudo-header and UDP header
 * (the checksum field included). */
static __always_inline __u32 udp_head_sum(const struct iphdr *ip, const struct udphdr *udp)
{
	return (ip->saddr & 0xffff) + (ip->saddr >> 16) + (ip->daddr & 0xffff) + (ip->daddr >> 16) +
	       bpf_htons(IPPROTO_UDP) + udp->len + udp->source + udp->dest + udp->len + udp->check;
}

/* The UDP checksum of a datagram whose payload is a 4-byte tag, then
 * zeros (udp->check 0 while it is computed); 0 is sent as 0xffff. */
static __always_inline __u16 udp_csum_zero_tail(const struct iphdr *ip, const struct udphdr *udp, __u32 tag)
{
	__u16 c = ~csum_fold32(udp_head_sum(ip, udp) + (tag & 0xffff) + (tag >> 16));

	return c ? c : 0xffff;
}

#endif
