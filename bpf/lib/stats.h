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

/* fw_now is the counters' clock: jiffies, the kernel's tick count (1-10
 * ms resolution). Read once per packet. Measured side by side with
 * BPF_PROG_TEST_RUN on this project's VM, bpf_jiffies64() costs next to
 * nothing, while bpf_ktime_get_coarse_ns() added ~17-20 % (25-30 ns) per
 * packet and bpf_ktime_get_ns() ~30 % (docs/observability.md). The control
 * plane turns stamps into wall time with the clock probe (clock.c). */
static __always_inline __u64 fw_now(void)
{
	return bpf_jiffies64();
}

/* fw_count_n counts packets (0 or 1) of bytes. */
static __always_inline void fw_count_n(struct fw_counter *c, __u64 packets, __u64 bytes, __u64 now)
{
	/* the audit instance counts in counters of its own (maps.h) */
	if (!fw_own_writes())
		return;
	c->packets += packets;
	c->bytes += bytes;
	c->last = now;
}

static __always_inline void fw_count(struct fw_counter *c, __u64 bytes, __u64 now)
{
	fw_count_n(c, 1, bytes, now);
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

/* fw_count_rule_n counts packets (0 or 1) of bytes on rule_id. */
static __always_inline void fw_count_rule_n(__u32 rule_id, __u64 packets, __u64 bytes, __u64 now)
{
	struct fw_counter *c = bpf_map_lookup_elem(&fw_rule_stats, &rule_id);

	if (c)
		fw_count_n(c, packets, bytes, now);
}

static __always_inline void fw_count_rule(__u32 rule_id, __u64 bytes, __u64 now)
{
	fw_count_rule_n(rule_id, 1, bytes, now);
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
