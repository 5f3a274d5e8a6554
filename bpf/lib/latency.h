/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Per-packet processing time, sampled (docs/realtime.md): one packet in
 * fw_lat_every is timed from its program's entry to its verdict
 * (XDP: across the tail call into the classify stage) and counted in a
 * log-linear histogram per chain and outcome (fw_latency, per CPU).
 *
 * Sampling off (N = 0) costs a load of a global and one branch at entry,
 * and one branch on the clock's t0 at the end: no clock is read. Which packets
 * are timed is a per-CPU count, not a random draw: every Nth packet of
 * each CPU. */
#ifndef XDPFW_LATENCY_H
#define XDPFW_LATENCY_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"

_Static_assert(FW_LAT_ACCEPT == FW_ACT_ACCEPT && FW_LAT_DROP == FW_ACT_DROP && FW_LAT_REJECT == FW_ACT_REJECT,
	       "an outcome is its decision's action");

/* fw_lat_start starts c's clock if this packet is one to time. A trace
 * that reports (`xdpfw trace`) times nothing. */
static __always_inline void fw_lat_start(struct fw_lat_clock *c)
{
	__u32 every = fw_lat_every;

	if (!every || !fw_live_writes())
		return; /* t0 is 0: the last packet's end left it so (fw_lat_end) */
	if (++c->n < every) {
		c->t0 = 0;
		return;
	}
	c->n = 0;
	c->t0 = bpf_ktime_get_ns();
}

/* fw_lat_bucket is the histogram bucket of ns nanoseconds (struct
 * fw_lat_hist; internal/latency.Bucket is its twin). */
static __always_inline __u32 fw_lat_bucket(__u64 ns)
{
	if (ns < FW_LAT_SUB)
		return ns;
	if (ns >> FW_LAT_MAX_EXP)
		return FW_LAT_BUCKETS - 1;
	/* k = floor(log2(ns)), 4 <= k < 20: no count-leading-zeros for BPF */
	__u32 v = ns, k = 0;
	if (v >> 16) {
		v >>= 16;
		k += 16;
	}
	if (v >> 8) {
		v >>= 8;
		k += 8;
	}
	if (v >> 4) {
		v >>= 4;
		k += 4;
	}
	if (v >> 2) {
		v >>= 2;
		k += 2;
	}
	if (v >> 1)
		k += 1;
	return (k - FW_LAT_SUB_BITS + 1) * FW_LAT_SUB + ((ns >> (k - FW_LAT_SUB_BITS)) & (FW_LAT_SUB - 1));
}

/* fw_lat_record counts the time since t0 in fw_latency's slot. A global
 * function: verified once for all its callers, and its few words of stack
 * are not added to the callers' frames (tc egress has no room). */
__noinline int fw_lat_record(__u32 slot, __u64 t0)
{
	__u64 ns = bpf_ktime_get_ns() - t0;
	struct fw_lat_hist *h = bpf_map_lookup_elem(&fw_latency, &slot);

	if (!h)
		return 0;
	__u32 b = fw_lat_bucket(ns);
	if (b >= FW_LAT_BUCKETS) /* never: for the verifier */
		return 0;
	h->bucket[b]++;
	h->count++;
	h->sum += ns;
	if (ns > h->max)
		h->max = ns;
	return 0;
}

/* fw_lat_end counts a timed packet's time under chain and outcome (enum
 * fw_lat_out) and stops c's clock; an untimed packet costs the test. Every
 * exit of a program calls it. One that did not would leave its t0 behind:
 * the next packet's start overwrites it while sampling is on, and with
 * sampling off it is cleared here, never counted. */
static __always_inline void fw_lat_end(struct fw_lat_clock *c, __u32 chain, __u32 out)
{
	__u64 t0 = c->t0;

	if (!t0)
		return;
	c->t0 = 0;
	if (fw_lat_every)
		fw_lat_record(chain * FW_LAT_OUTS + out, t0);
}

#endif
