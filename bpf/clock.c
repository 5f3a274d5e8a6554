/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The clock probe: the control plane runs it (BPF_PROG_TEST_RUN) to read
 * the clock counters are stamped with (jiffies, see lib/stats.h fw_now),
 * between two readings of CLOCK_MONOTONIC_COARSE that the tick, which
 * moves both, did not change: then the jiffy began at that reading, and
 * with the tick length (clock_getres(CLOCK_MONOTONIC_COARSE)) any stamp
 * becomes the start of the tick it names (internal/datapath Clock).
 * mono_ns, the fine clock, bounds it. Never attached. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"

SEC("syscall")
int xdpfw_clock(struct fw_clock *c)
{
	c->jiffies = bpf_jiffies64();
	c->mono_ns = bpf_ktime_get_ns();
	return 0;
}
