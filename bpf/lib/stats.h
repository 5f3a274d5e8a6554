/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Counters: per rule id, and per (outcome, reason), per CPU, summed in user
 * space. Each counter also keeps the time of its last packet. */
#ifndef XDPFW_STATS_H
#define XDPFW_STATS_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"

/* fw_now is the counters' clock (the one conntrack uses): CLOCK_MONOTONIC
 * at tick resolution, a few ns cheaper than bpf_ktime_get_ns(). Read once
 * per packet; the control plane turns it into wall time. */
static __always_inline __u64 fw_now(void)
{
	return bpf_ktime_get_coarse_ns();
}

static __always_inline void fw_count(struct fw_counter *c, __u64 bytes, __u64 now)
{
	c->packets++;
	c->bytes += bytes;
	c->last = now;
}

/* fw_count_reason counts a packet under reason and what the program
 * returns for it (enum fw_out). */
static __always_inline void fw_count_reason(__u32 reason, __u32 out, __u64 bytes, __u64 now)
{
	__u32 slot = out * FW_NUM_REASONS + reason;
	struct fw_counter *c = bpf_map_lookup_elem(&fw_reason_stats, &slot);

	if (c)
		fw_count(c, bytes, now);
}

static __always_inline void fw_count_rule(__u32 rule_id, __u64 bytes, __u64 now)
{
	struct fw_counter *c = bpf_map_lookup_elem(&fw_rule_stats, &rule_id);

	if (c)
		fw_count(c, bytes, now);
}

/* fw_tc_out is the enum fw_out of a tc action. */
static __always_inline __u32 fw_tc_out(int act)
{
	switch (act) {
	case TC_ACT_OK:
		return FW_OUT_TC_OK;
	case TC_ACT_REDIRECT:
		return FW_OUT_TC_REDIRECT;
	}
	return FW_OUT_TC_SHOT;
}

#endif
