/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* One rate limiter for every budget of the data plane: REJECT's answers
 * (per source and global, lib/reject.h), LOG events (per rule, lib/log.h),
 * -m limit (per rule, lib/classify.h) and conntrack's search for room in
 * a full table (lib/ct.h).
 *
 * GCRA, the token bucket written as one timestamp: tat is the theoretical
 * arrival time of the next event; one event costs `interval`; an event is
 * allowed while tat - now <= (burst - 1) * interval, so a quiet bucket
 * allows burst events at once, then one per interval. A bucket that was
 * never used (tat 0) is full. Two CPUs taking from one bucket at the same
 * instant may both take the last token (no compare-and-swap in BPF v1-v3
 * instructions): the bound is off by at most one event per CPU. A trace
 * instance (maps.h fw_trace_mode) looks, and takes nothing. */
#ifndef XDPFW_RATELIMIT_H
#define XDPFW_RATELIMIT_H

#include <linux/types.h>
#include "../types.h"
#include "../maps.h" /* fw_live_writes */

/* fw_rl_interval is the interval of rate events per second (rate >= 1). */
static __always_inline __u64 fw_rl_interval(__u64 rate)
{
	__u64 interval = 1000000000ULL / (rate ? rate : 1);

	return interval ? interval : 1;
}

/* fw_rl_ready tells whether the bucket tat holds a token at time now (ns).
 * burst 0 counts as 1. */
static __always_inline int fw_rl_ready(__u64 tat, __u64 now, __u64 interval, __u64 burst)
{
	__u64 t = tat > now ? tat : now;

	if (!burst)
		burst = 1;
	/* -m limit: burst <= 10^4, interval <= 86400 * 10^9: no overflow */
	return t - now <= (burst - 1) * interval;
}

/* fw_rl_take takes one token from the bucket *tat at time now (ns):
 * returns 1 and advances *tat, or 0 when the bucket is empty. */
static __always_inline int fw_rl_take(__u64 *tat, __u64 now, __u64 interval, __u64 burst)
{
	if (!fw_rl_ready(*tat, now, interval, burst))
		return 0;
	/* a trace tells whether a token is there, takes none; the audit
	 * instance takes from buckets of its own (maps.h) */
	if (fw_own_writes())
		*tat = (*tat > now ? *tat : now) + interval;
	return 1;
}

/* fw_rl_take_bucket is fw_rl_take on a bucket that holds its own settings
 * (struct fw_bucket), with defaults for settings left zero. */
static __always_inline int fw_rl_take_bucket(struct fw_bucket *b, __u64 now, __u64 dflt_interval, __u64 dflt_burst)
{
	__u64 interval = b->interval_ns ? b->interval_ns : dflt_interval;
	__u64 burst = b->burst ? b->burst : dflt_burst;

	return fw_rl_take(&b->tat, now, interval, burst);
}

#endif
