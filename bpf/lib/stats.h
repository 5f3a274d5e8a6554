/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Counters: per rule id and per reason, per CPU, summed in user space. */
#ifndef XDPFW_STATS_H
#define XDPFW_STATS_H

#include <bpf/bpf_helpers.h>
#include "../types.h"
#include "../maps.h"

static __always_inline void fw_count_reason(__u32 reason, __u64 bytes)
{
	struct fw_counter *c = bpf_map_lookup_elem(&fw_reason_stats, &reason);

	if (c) {
		c->packets++;
		c->bytes += bytes;
	}
}

static __always_inline void fw_count_rule(__u32 rule_id, __u64 bytes)
{
	struct fw_counter *c = bpf_map_lookup_elem(&fw_rule_stats, &rule_id);

	if (c) {
		c->packets++;
		c->bytes += bytes;
	}
}

#endif
