/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The data plane object: both entry programs, sharing every map, and the
 * clock probe the control plane runs to read counter stamps. */
#include "xdp_fw.c"
#include "tc_fw.c"
#include "clock.c"

char LICENSE[] SEC("license") = "Dual BSD/GPL";
