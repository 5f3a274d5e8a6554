/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Every map of the data plane, one comment each. All are pinned by name under
 * the pin root (default /sys/fs/bpf/xdpfw) so they outlive the CLI. */
#ifndef XDPFW_MAPS_H
#define XDPFW_MAPS_H

#include <bpf/bpf_helpers.h>
#include "types.h"

/* Default sizes; the control plane may resize before load. */
#define FW_MAX_ENTRIES   4096 /* classifier entries per generation: the verifier's bound on the linear walk */
#define FW_MAX_RULE_IDS  65536  /* per-rule counter slots */

/* Template of one rule-set generation: the classifier's entries. */
struct fw_entries {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP); /* generations may differ in size */
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_entry);
};

/* Slot 0 holds the active generation. Replacing it is the atomic swap: a
 * packet sees the whole old table or the whole new one (RCU). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct fw_entries);
} fw_ruleset SEC(".maps");

/* Packets and bytes per rule id (per CPU). Ids are stable across rebuilds. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_MAX_RULE_IDS);
	__type(key, __u32);
	__type(value, struct fw_counter);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_rule_stats SEC(".maps");

/* Packets and bytes per enum fw_reason (per CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_NUM_REASONS);
	__type(key, __u32);
	__type(value, struct fw_counter);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_reason_stats SEC(".maps");

/* Settings written by the control plane (slot 0). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_config_map SEC(".maps");

#endif
