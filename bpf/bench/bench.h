/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared by the macro benchmark's programs and Go (bpf2go -type). */
#ifndef XDPFW_BENCH_H
#define XDPFW_BENCH_H

#include <linux/types.h>

/* One CPU's count of packets a benchmark program handled. */
struct bench_counter {
	__u64 packets;
	__u64 bytes;
};

#endif
