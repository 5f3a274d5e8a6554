/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The clock probe: the control plane runs it (BPF_PROG_TEST_RUN) to read,
 * at one instant, the clock counters are stamped with (jiffies, see
 * lib/stats.h fw_now) and CLOCK_MONOTONIC, which user space can read too.
 * With the tick length (clock_getres(CLOCK_MONOTONIC_COARSE)) that turns
 * any stamp into wall time. Never attached. */
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
