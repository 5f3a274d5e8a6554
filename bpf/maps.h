/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Every map of the data plane, one comment each. All are pinned by name under
 * the pin root (default /sys/fs/bpf/xdpfw) so they outlive the CLI. */
#ifndef XDPFW_MAPS_H
#define XDPFW_MAPS_H

#include <bpf/bpf_helpers.h>
#include "types.h"

/* Per-rule counter slots, at least (the control plane raises it for large
 * tables: `load --max-rules`). */
#define FW_MAX_RULE_IDS  65536

/* One generation's table sizes, set by the control plane before load
 * (`load --max-rules`). Every table holds two generations: the active one
 * and the one being written; generation g uses slots [g*size, (g+1)*size). */
volatile const __u32 fw_max_entries = 1;
volatile const __u32 fw_max_nodes = 1;
volatile const __u32 fw_max_leaves = 1;

/* Bytes of a logged packet an event carries (`load --log-snap`, 0 ..
 * FW_LOG_SNAP_MAX): a constant to the verifier, so events are fixed-size
 * ring-buffer records. */
volatile const __u32 fw_log_snap = FW_LOG_SNAP_DEFAULT;

/* Which instance of the object this is (lib/trace.h): FW_TRACE_OFF, the
 * live one attached to interfaces, which has every trace branch pruned by
 * the verifier (no metadata, no skb->cb is read); FW_TRACE_REPORT, the one
 * `xdpfw trace` runs with BPF_PROG_TEST_RUN, which reports its decision
 * and writes no live state (counters, conntrack, REJECT and LOG budgets,
 * log events); FW_TRACE_RECORD, the tests' (internal/datapath), which
 * reports and records as a live packet would. Set from Go before load. */
#define FW_TRACE_OFF    0
#define FW_TRACE_REPORT 1
#define FW_TRACE_RECORD 2
/* FW_TRACE_AUDIT: the audit instance (lib/audit.h, docs/audit.md), which
 * classifies live packets with a candidate rule set in tables, counters
 * and budgets of its own, and writes no state the live instance uses. */
#define FW_TRACE_AUDIT  3
/* FW_TRACE_NAT: the nat instance (lib/natfw.h, docs/nat.md), whose
 * classifier tables hold the nat table and whose program is the nat
 * stage; it writes bindings and nothing else the live instance uses. */
#define FW_TRACE_NAT    4
volatile const __u32 fw_trace_mode = FW_TRACE_OFF;

/* fw_tracing: is this a trace instance (report the decision)? */
static __always_inline int fw_tracing(void)
{
	return fw_trace_mode == FW_TRACE_REPORT || fw_trace_mode == FW_TRACE_RECORD;
}

/* fw_live_writes: may this instance change live state (conntrack, -m
 * recent lists, -m hashlimit buckets, REJECT budgets, shared counters)?
 * Every write to such a map checks it. */
static __always_inline int fw_live_writes(void)
{
	return fw_trace_mode == FW_TRACE_OFF || fw_trace_mode == FW_TRACE_RECORD;
}

/* fw_own_writes: may this instance change the state its rule set owns
 * (per-rule counters, -m limit buckets, log budgets)? The audit instance
 * has its own of these maps, so it may; a reporting trace may not. */
static __always_inline int fw_own_writes(void)
{
	return fw_trace_mode != FW_TRACE_REPORT;
}

/* Puts struct fw_log_event (used only through pointers) into the BTF that
 * bpf2go generates Go types from; never read. */
const struct fw_log_event *const fw_log_event_btf __attribute__((unused)) = 0;

/* Which generation (and delta half) packets use: FW_ACTIVE(gen, delta),
 * 0 = none installed (drop). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_active SEC(".maps");

/* Classifier entries (2 x fw_max_entries), priority order within a generation. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fw_entry);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_entries SEC(".maps");

/* Candidate records of the entries (struct fw_cand, 2 x fw_max_entries):
 * what a leaf's check reads. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fw_cand);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_cands SEC(".maps");

/* Tree nodes, 64-byte fat nodes (2 x fw_max_nodes). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fw_node);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_nodes SEC(".maps");

/* Leaf candidate lists: entry indices (2 x fw_max_leaves). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_leaves SEC(".maps");

/* The raw table's NOTRACK rules (2 x FW_MAX_RAW: a half per generation),
 * in rule order; the first slot whose action is not FW_ACT_NOTRACK ends a
 * half. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * FW_MAX_RAW);
	__type(key, __u32);
	__type(value, struct fw_entry);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_raw SEC(".maps");

/* Tree roots and policies (2 x FW_NUM_ROOTS). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * FW_NUM_ROOTS);
	__type(key, __u32);
	__type(value, struct fw_root);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_roots SEC(".maps");

/* The delta stage, two halves (the one in force and the one being written). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fw_delta);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_deltas SEC(".maps");

/* Delta entries (2 x FW_DELTA_MAX), half h at [h*FW_DELTA_MAX, ...). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * FW_DELTA_MAX);
	__type(key, __u32);
	__type(value, struct fw_entry);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_delta_entries SEC(".maps");

/* The rule-set generation number the tables of each generation hold.
 * Only the control plane reads it: a delta is built against one main
 * generation and checks that it is still the one in force. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_stamps SEC(".maps");

/* Named sets (xdpfw set ...): every set's prefixes, keyed by set id.
 * Value: the key's prefixlen, never 0; the data plane tests presence only,
 * the control plane uses it to tell an exact element from a covering one. */
#define FW_MAX_SET_ELEMS (1 << 21)
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FW_MAX_SET_ELEMS);
	__type(key, struct fw_set_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_sets SEC(".maps");

/* -m addrtype: this host's local routing table (table 255: its local,
 * broadcast and anycast addresses, as the kernel's xt_addrtype reads it),
 * kept by the control plane from netlink. Key: fw_set_key with set_id the
 * family (4 or 6, big-endian); value: the route's type and device. */
#define FW_MAX_ADDRTYPES 16384
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FW_MAX_ADDRTYPES);
	__type(key, struct fw_set_key);
	__type(value, struct fw_addrtype);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_addrtypes SEC(".maps");

/* fw_addrtypes' lookup key, per CPU, slot 0 for XDP, 1 for tc: the
 * classifier's call chain has no stack left for it (the verifier's 512
 * bytes; docs/classifier.md). Not pinned: it lives for one lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fw_set_key);
} fw_addrtype_key SEC(".maps");

/* Packets and bytes per rule id (per CPU). Ids are stable across rebuilds. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_MAX_RULE_IDS);
	__type(key, __u32);
	__type(value, struct fw_counter);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_rule_stats SEC(".maps");

/* Packets and bytes per enum fw_out and enum fw_reason (per CPU): slot
 * out * FW_NUM_REASONS + reason. One lookup counts both the reason and the
 * action the program returned. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_NUM_OUTS * FW_NUM_REASONS);
	__type(key, __u32);
	__type(value, struct fw_counter);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_reason_stats SEC(".maps");

/* Connection tracking table. A plain hash, not an LRU: a full LRU would
 * evict live connections to make room for a flood's; this one refuses the
 * new connection instead (FW_R_CT_FULL) and the control plane's GC removes
 * expired entries. max_entries is set by the control plane (`--ct-max`). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct fw_ct_key);
	__type(value, struct fw_ct_entry);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_ct SEC(".maps");

/* Early-drop candidates of the conntrack table, oldest first (lib/ct.h
 * fw_ct_reclaim): the key of every entry created, and of every assured TCP
 * connection that starts closing. Keys of entries gone or assured since
 * are skipped when popped. As big as fw_ct (`--ct-max`). */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 65536);
	__type(value, struct fw_ct_key);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_ct_evict SEC(".maps");

/* Where conntrack's search for room in a full table stands (lib/ct.h
 * fw_ct_reclaim), slot 0. Not pinned: a reload starts afresh. */
struct fw_ct_gc {
	__u64 quiet_until; /* no search before (bpf_ktime_get_coarse_ns) */
	__u32 cursor;      /* entries the next search passes over */
	__u32 _pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_ct_gc);
} fw_ct_gc SEC(".maps");

/* Conntrack's clock as this CPU last read it (lib/ct.h fw_ct_now), slot
 * 0. Not pinned: a cache. */
struct fw_ct_clock {
	__u64 jiffies; /* bpf_jiffies64() when ns was read */
	__u64 ns;      /* bpf_ktime_get_coarse_ns() then */
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_ct_clock);
} fw_ct_clock SEC(".maps");

/* Conntrack event counters per enum fw_ct_stat (per CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_CT_STAT_NUM);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_ct_stats SEC(".maps");

/* Fragmented datagrams in flight: the verdict of each one's first fragment,
 * which its later fragments take (lib/frag.h). An LRU: when more datagrams
 * are in flight than it holds, the least recently seen one goes (its later
 * fragments then count as unknown and are dropped). max_entries is set by
 * the control plane from `--ct-max` (datapath.FragsFor). Pinned, so that
 * traces and a reloaded program see the datagrams in flight. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct fw_frag_key);
	__type(value, struct fw_frag_entry);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_frag SEC(".maps");

/* Where lib/frag.h builds fw_frag's key and entry (slot 0, per CPU): off
 * the stack, which the egress program has no room left on. Not pinned: it
 * lives for one packet. */
struct fw_frag_scratch {
	struct fw_frag_key k;
	struct fw_frag_entry e;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_frag_scratch);
} fw_frag_scratch SEC(".maps");

/* The devices xdpfw is attached to that the forwarding fast path uses, in
 * and out (key and value: the ifindex; lib/fwd.h), written by the control
 * plane with the rules: veth devices only with `--forward xdp-veth`. The
 * kernel removes a device that goes away. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_fwd_ports SEC(".maps");

/* Packets and bytes FORWARD accepted, per CPU, by enum fw_fwd_reason: how
 * each was delivered. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_NUM_FWD);
	__type(key, __u32);
	__type(value, struct fw_counter);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_fwd_stats SEC(".maps");

/* PPPoE sessions the kernel has, as its pppoe_rcv finds them: the ppp
 * device (ifindex) whose packets a session frame carries (lib/pppoe.h).
 * Written by the control plane from /proc/net/pppoe (datapath.SetPPPoE). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct fw_pppoe_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_pppoe_rx SEC(".maps");

/* The same sessions by ppp device, as its pppoe_xmit sends them: what the
 * fast path needs to send a packet the FIB routes to that device. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct fw_pppoe_out);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_pppoe_tx SEC(".maps");

/* Settings written by the control plane (slot 0). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_config_map SEC(".maps");

/* REJECT's answer budget per source: the time its token bucket is next
 * full again (GCRA). Not pinned: a reload starts every source afresh. */
#define FW_REJECT_RL_SOURCES 16384
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FW_REJECT_RL_SOURCES);
	__type(key, struct fw_rl_key);
	__type(value, __u64);
} fw_reject_rl SEC(".maps");

/* REJECT's global answer budget (slot 0), over every source together:
 * the settings are written by the control plane (`--reject-global-rate`),
 * the data plane takes tokens. Pinned, so that commands reach it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_reject_global SEC(".maps");

/* Log events (struct fw_log_event + packet bytes), read by `xdpfw log` or
 * the daemon: one consumer at a time (docs/log.md). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, FW_LOG_RING_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_log_ring SEC(".maps");

/* Rate limit of each logged rule, by rule id: written by the control plane
 * for the rules of the generation it installs; the data plane only takes
 * tokens. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FW_MAX_LOG_RULES);
	__type(key, __u32);
	__type(value, struct fw_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_log_limits SEC(".maps");

/* The -m limit bucket of each rule that has one (but LOG rules), by rule
 * id: written by the control plane before the generation that uses it is
 * in force (an unchanged rule keeps its bucket's state); the data plane
 * only takes tokens (lib/classify.h fw_limit). docs/limits.md. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FW_MAX_LIMIT_RULES);
	__type(key, __u32);
	__type(value, struct fw_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_limits SEC(".maps");

/* The settings of each -m recent rule, by rule id: written by the control
 * plane before the generation that uses them is in force. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FW_MAX_RECENT_RULES);
	__type(key, __u32);
	__type(value, struct fw_recent_rule);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_recent_rules SEC(".maps");

/* The -m recent lists: every list's addresses in one LRU map (the least
 * recently used address goes when it is full). The control plane removes
 * a list's addresses when no rule names it any more. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FW_RECENT_MAX);
	__type(key, struct fw_recent_key);
	__type(value, struct fw_recent_entry);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_recent SEC(".maps");

/* The settings of each -m hashlimit rule, by rule id: written by the
 * control plane before the generation that uses them is in force. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FW_MAX_HASHLIMIT_RULES);
	__type(key, __u32);
	__type(value, struct fw_hashlimit_rule);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_hashlimit_rules SEC(".maps");

/* The -m hashlimit buckets of every table in one LRU map (the least
 * recently used bucket goes when it is full, and comes back full). The
 * control plane removes a table's buckets when no rule names it any more. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FW_HASHLIMIT_MAX);
	__type(key, struct fw_hashlimit_key);
	__type(value, struct fw_hashlimit_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_hashlimit SEC(".maps");

/* The settings of each -m connlimit rule, by rule id: written by the
 * control plane before the generation that uses them is in force. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FW_MAX_CONNLIMIT_RULES);
	__type(key, __u32);
	__type(value, struct fw_connlimit_rule);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_connlimit_rules SEC(".maps");

/* The -m connlimit counts: per (rule, masked address) the connections
 * counted (lib/connlimit.h), in one LRU map: when it is full, the least
 * recently used key goes, and its connections are no longer counted (a
 * key a packet reaches is used; the keys of connections that ended long
 * ago, which nothing removes otherwise, go first). The control plane
 * removes a rule's keys with the rule. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FW_CONNLIMIT_MAX);
	__type(key, struct fw_connlimit_key);
	__type(value, struct fw_connlimit_conns);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_connlimit SEC(".maps");

/* The walk's notes of -m recent matches (struct fw_state_scratch), per
 * CPU: slot 0 for XDP, 1 for tc. Not pinned: it lives for one packet. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fw_state_scratch);
} fw_state_scratch SEC(".maps");

/* Events emitted, suppressed and lost per logged rule id (per CPU); the
 * control plane creates and removes the entries with fw_log_limits'. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, FW_MAX_LOG_RULES);
	__type(key, __u32);
	__type(value, struct fw_log_stat);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_log_stats SEC(".maps");

/* The classifier's notes of LOG matches (struct fw_log_scratch), per CPU:
 * slot 0 for XDP, 1 for tc. Not pinned: it lives for one packet. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fw_log_scratch);
} fw_log_scratch SEC(".maps");

/* Logging's other counters, per enum fw_log_counter (per CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_LOG_C_NUM);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_log_counters SEC(".maps");

/* OUTPUT REJECT answers on their way into this host (lib/reject.h
 * fw_reject_own_answer): a hash of each answer's first bytes, so that the
 * XDP program, which meets them in generic mode, lets each through once.
 * Value: when it was sent. Not pinned. */
#define FW_REJECT_OWN_MAX 4096
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FW_REJECT_OWN_MAX);
	__type(key, __u64);
	__type(value, __u64);
} fw_reject_own SEC(".maps");

/* When an OUTPUT REJECT last sent an answer (bpf_ktime_get_coarse_ns):
 * the XDP program looks answers up only within FW_REJECT_OWN_NS of it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} fw_reject_own_last SEC(".maps");

/* Latency sampling (lib/latency.h): one packet in this many is timed,
 * per CPU; 0: none, and no clock is read. A global in a data section of
 * its own, which the control plane pins (as .data.latency) and writes
 * while packets flow (`load --latency-sample`, `stats --latency-sample`):
 * the data plane reads it with one load, no map lookup. */
volatile __u32 fw_lat_every SEC(".data.latency") = 0;

/* The sampled packets' processing time: struct fw_lat_hist per chain and
 * outcome (slot chain * FW_LAT_OUTS + enum fw_lat_out), per CPU. The
 * control plane reads and zeroes it (`stats --reset-latency`). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_LAT_SLOTS);
	__type(key, __u32);
	__type(value, struct fw_lat_hist);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_latency SEC(".maps");

/* A hook's latency clock, per CPU (in its per-packet slot): packets
 * since the last one timed, and the time the one in flight entered
 * (0: not timed). t0 is 0 between packets: the end of every packet puts
 * it back. */
struct fw_lat_clock {
	__u64 t0;
	__u32 n;
	__u32 _pad;
};

/* The XDP program's hand-over to its classify stage (xdp_fw.c), per CPU:
 * the parsed packet, what conntrack will record, the rule set in force.
 * The stage runs right after, on the same CPU, before anything else can
 * use the slot. Not pinned: it lives for one packet. */
/* What the FIB lookup that chose the chain (lib/chain.h fw_fib_chain)
 * found for a FORWARD packet, for the fast path (lib/fwd.h). */
struct fw_fwd_hop {
	__u8  dmac[6];  /* the next hop's MAC */
	__u8  smac[6];  /* the egress device's MAC */
	__u32 ifindex;  /* the egress device; 0: none */
	__u32 why;      /* enum fw_fwd_reason: FW_FWD_XDP, or why the FIB's answer cannot be used */
};

struct fw_xdp_handoff {
	struct fw_pkt pkt;
	struct fw_fwd_hop hop; /* with pkt.chain FW_CHAIN_FORWARD */
	__u8 ct[48];         /* struct fw_ct's first fw_ct_plan_size bytes (lib/ct.h) */
	struct fw_root root; /* a copy of the root in force for the packet */
	__u32 sel;           /* fw_active_sel's */
	/* The VLAN tag the NIC stripped from the frame, from xdpfw_rxvlan
	 * (FW_RX_VLAN_TAGGED | its TCI: VID and PCP), 0 when none: xdpfw_ingress reads it and
	 * clears it for the next packet. */
	__u32 rx_vlan;
	/* FW_PRIO_CLASSIFY: the classify stage decides the packet's class
	 * (lib/priority.h); FW_PRIO_DECIDED: xdpfw_ingress, entered again,
	 * judges it here. 0 otherwise. */
	__u32 prio;
	struct fw_decision d; /* the stage's decision */
	struct fw_lat_clock lat; /* the packet's latency clock: outlives the packet */
	/* With fw_nat_mode: FW_NAT_S_*, and with FW_NAT_S_BOUND the packet's
	 * binding (the tuple it leaves with; lib/natfw.h). */
	__u32 nat_state;
	struct fw_nat_rw nat;
	/* With fw_nat_mode: FW_NAT_P_*, set by the nat stage's PREROUTING
	 * for xdpfw_ingress, entered again, which clears it; with
	 * FW_NAT_S_PENDING, nat_orig is the tuple the connection's first
	 * packet arrived with (lib/natdst.h). */
	__u32 nat_pre;
	struct fw_nat_tuple nat_orig;
	/* With FW_NAT_S_BOUND or FW_NAT_S_ERROR: the binding's key (the tuple
	 * the packet arrived with; an ICMP error's: its quote's, reversed). */
	struct fw_nat_tuple nat_key;
	/* set by the nat stage as it enters xdpfw_egress again: nat_state is
	 * its (FW_NAT_S_PENDING, FW_NAT_S_AGAIN), not a stale one */
	__u32 nat_again;
	/* With fw_nat_mode: 1 from the finish stage's tail call into the nat
	 * stage (after its LOG events and counts) to the finish stage entered
	 * again, which clears it (lib/natfw.h fw_nat_finished). */
	__u32 nat_logged;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_xdp_handoff);
} fw_xdp_handoff SEC(".maps");

/* The tc egress program's parsed packet, per CPU: off its stack, which
 * the classifier's key and the calls below it need (the verifier allows
 * 512 bytes for a program and the functions it calls, together). tc
 * egress runs with bottom halves off, and finishes before the packet is
 * sent on, so no other run of it uses the slot meanwhile. Not pinned. */
struct fw_tc_slot {
	struct fw_pkt pkt;
	struct fw_lat_clock lat; /* the packet's latency clock: outlives the packet */
	/* With fw_nat_mode: FW_NAT_S_*, and with FW_NAT_S_BOUND the packet's
	 * binding (the tuple it leaves with; lib/natfw.h). */
	__u32 nat_state;
	struct fw_nat_rw nat;
	/* nat OUTPUT (lib/natout.h), FW_NAT_S_PENDING: the tuple the
	 * connection's first packet was sent with (nat: the one it leaves with) */
	struct fw_nat_tuple nat_key;
	/* set by the nat stage as it enters xdpfw_egress again: nat_state is
	 * its (FW_NAT_S_PENDING, FW_NAT_S_AGAIN), not a stale one */
	__u32 nat_again;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_tc_slot);
} fw_tc_pkt SEC(".maps");

/* tc egress's stages (FW_TC_STAGE_*, lib/natout.h), `--nat xdpfw` only:
 * the nat instance's xdpfw_egress_nat (nat OUTPUT) and the live
 * xdpfw_egress it enters again. Shared with the nat instance; filled and
 * pinned (tcstages_<program id>) by the control plane's StartNAT: the
 * kernel empties a program array nothing holds. Empty otherwise: a tail
 * call into it falls through (fail closed). */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, FW_TC_STAGE_EGRESS + 1);
	__type(key, __u32);
	__type(value, __u32);
} fw_tc_stages SEC(".maps");

/* The XDP program's stages, entered by a tail call: its classify stage,
 * and xdpfw_ingress itself for the device-bound xdpfw_rxvlan in front of
 * it. Filled at load. Not pinned by name: each loaded program has its own,
 * which the control plane pins as stages_<program id> (the kernel empties
 * a program array once no file descriptor or pin holds it). */
/* The priority table's roots (2 x 2: generation * 2 + is_v6); their trees
 * are in fw_nodes, fw_leaves and fw_entries with the rules'. A root without
 * FW_ROOT_PRIO: no priority table. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct fw_root);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_prio_roots SEC(".maps");

/* Where the bulk class goes (struct fw_prio_cfg). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_prio_cfg);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_prio SEC(".maps");

/* Per CPU: what the priority stage did (enum fw_prio_stat). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_PRIO_S_NUM);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_prio_stats SEC(".maps");

/* The bulk CPUs: key a CPU, value its queue length and xdpfw_cpumap
 * (struct bpf_cpumap_val), set by the control plane. */
struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, FW_PRIO_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_cpumap SEC(".maps");

/* FW_XDP_STAGE_AUDIT is empty but while a candidate rule set is audited
 * (the audit instance's xdpfw_audit, put there by the control plane);
 * FW_XDP_STAGE_FINISH acts on the decision in the hand-over slot, where
 * the audit stage returns to (docs/audit.md). */
#define FW_XDP_STAGE_CLASSIFY 0
#define FW_XDP_STAGE_INGRESS  1
#define FW_XDP_STAGE_AUDIT    2
#define FW_XDP_STAGE_FINISH   3
/* FW_XDP_STAGE_NAT: with fw_nat_mode, the nat instance's xdpfw_nat (put
 * there by the control plane before the program is attached): a
 * forwarded connection's first packet, accepted, is classified against
 * the nat table there and bound (lib/natfw.h). */
#define FW_XDP_STAGE_NAT      4
int xdpfw_ingress_classify(struct xdp_md *ctx);
int xdpfw_ingress(struct xdp_md *ctx);
int xdpfw_ingress_finish(struct xdp_md *ctx);
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__array(values, int(struct xdp_md *));
} fw_xdp_stages SEC(".maps") = {
	.values = { [FW_XDP_STAGE_CLASSIFY] = (void *)&xdpfw_ingress_classify,
		    [FW_XDP_STAGE_INGRESS] = (void *)&xdpfw_ingress,
		    [FW_XDP_STAGE_FINISH] = (void *)&xdpfw_ingress_finish },
};

/* xdpfw_cpumap's stages, at fw_xdp_stages' slots: its classify stage,
 * the audit stage (the audit instance's xdpfw_cpumap_audit while a
 * candidate is audited) and its finish stage, where that returns to. A
 * program may tail-call only programs of its own attach type, and
 * xdpfw_cpumap runs as a cpumap entry's. Pinned by the control plane as
 * fw_xdp_stages is. */
int xdpfw_cpumap_classify(struct xdp_md *ctx);
int xdpfw_cpumap_finish(struct xdp_md *ctx);
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, FW_XDP_STAGE_FINISH + 1);
	__type(key, __u32);
	__array(values, int(struct xdp_md *));
} fw_cpumap_stages SEC(".maps") = {
	.values = { [FW_XDP_STAGE_CLASSIFY] = (void *)&xdpfw_cpumap_classify,
		    [FW_XDP_STAGE_FINISH] = (void *)&xdpfw_cpumap_finish },
};

/* The audit instance's way back (slot 0): the live program's finish
 * stage, written by the control plane before the audit stage goes in
 * (internal/datapath/audit.go). Only the audit and nat instances have
 * it; the nat instance's slot FW_NAT_NEXT_INGRESS is the live
 * xdpfw_ingress, which its PREROUTING enters again (lib/natdst.h). */
#define FW_NAT_NEXT_INGRESS 1
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} fw_audit_next SEC(".maps");

/* The audit instance's way back from xdpfw_cpumap_audit (slot 0): the
 * live program's xdpfw_cpumap_finish (fw_audit_next holds an xdp
 * program, this one a cpumap program: a program array takes one kind). */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} fw_audit_cpumap_next SEC(".maps");

/* NAT in xdpfw (`--nat xdpfw`, docs/nat.md): set before load; 0 (kernel
 * NAT, the default) prunes every NAT branch of the live program. */
volatile const __u32 fw_nat_mode = 0;

/* With fw_nat_mode, by nat hook (FW_NAT_HOOK_*): 1 when no rule of the
 * hook's chain (or of a chain it reaches) translates
 * (compile.NATHookTranslates), set before load, as the nat table changes
 * only with a load: a new connection's first packet then skips the
 * hook's nat stage (PREROUTING: lib/natdst.h, OUTPUT: lib/natout.h), its
 * two tail calls and second parse. 0: the stage runs. */
volatile const __u32 fw_nat_no_hook[FW_NAT_HOOKS] = {};

/* The bindings of translated connections (lib/nat.h): two entries per
 * connection, each direction's arriving tuple to the tuple it leaves
 * with. Shared by the live instance (lookups) and the nat instance
 * (inserts). An LRU: bounded, the least recently used binding goes when
 * it is full (docs/nat.md, Expiry). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 17);
	__type(key, struct fw_nat_tuple);
	__type(value, struct fw_nat_rw);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_nat_binds SEC(".maps");

/* REDIRECT's address (lib/natdst.h): each interface's primary IPv4
 * address (the first, as the kernel's REDIRECT takes it), by ifindex,
 * written by the control plane with -m addrtype's table at load and on
 * address changes (the daemon). An interface without one: REDIRECT
 * drops, counted (FW_NAT_C_NO_LOCAL). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __be32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_nat_ifaddr SEC(".maps");

/* The VLAN devices (lib/vlandev.h): key a tag's VID << 32 | the ifindex of
 * the device it came in by (the VLAN device's lower device), value the
 * VLAN device's ifindex; written by the control plane with fw_nat_ifaddr.
 * A tag with no VLAN device: the kernel drops its frame. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_vlan_devs SEC(".maps");

/* The translation of each fragmented datagram of a bound connection in
 * flight (lib/natfrag.h): its first fragment's addresses as it leaves,
 * which its later fragments (no ports) get. Written by the live program
 * (a forwarded or redirected datagram) and tc egress (a sent one) at the
 * first fragment. An LRU: a later fragment whose entry is gone cannot be
 * translated and is dropped, counted (FW_NAT_C_FRAG). Not pinned: a
 * datagram lives for FW_FRAG_TIMEOUT_S at most; one entry without
 * --nat xdpfw (datapath.natBindsSize). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct fw_nat_frag_key);
	__type(value, struct fw_nat_rw);
} fw_nat_frags SEC(".maps");

/* The translation of each DNATed connection whose first packet the
 * kernel answers with an ICMP error instead of forwarding it (TTL, DF and
 * too big: lib/natdying.h), under the tuple the error's quote has
 * reversed, for tc egress to translate that quote (fw_nat_tc_error),
 * which takes the record. An LRU: bounded. Not pinned: the kernel answers
 * at once; one entry without --nat xdpfw (datapath.natBindsSize's
 * caller). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct fw_nat_tuple);
	__type(value, struct fw_nat_rw);
} fw_nat_dying SEC(".maps");

/* The connection of each forwarded packet whose TTL ran out here, which
 * the kernel never confirms (lib/fwdexpired.h): its key, the packet's
 * direction (fw_ct.from_a) as value, for tc egress to find the kernel's
 * time exceeded RELATED (fw_ct_dying_take), which takes the record. An
 * LRU: bounded. Not pinned: the kernel answers at once. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct fw_ct_key);
	__type(value, __u8);
} fw_ct_dying SEC(".maps");

/* The nat instance's translations, by rule id - FW_FIRST_RULE_ID. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_NAT_MAX_RULES);
	__type(key, __u32);
	__type(value, struct fw_nat_target);
} fw_nat_targets SEC(".maps");

/* The nat counters (enum fw_nat_counter), shared by both instances.
 * Both maps pinned: `xdpfw status` and `xdpfw conntrack` read them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_NAT_C_NUM);
	__type(key, __u32);
	__type(value, struct fw_counter);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fw_nat_counts SEC(".maps");

/* The audit stage's working slot, per CPU: a copy of the candidate's
 * root (one kind of pointer for the verifier, as fw_xdp_handoff.root)
 * and the candidate's decision. Not pinned: it lives for one packet. */
struct fw_audit_slot {
	struct fw_root root;
	struct fw_decision d;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_audit_slot);
} fw_audit_slot SEC(".maps");

/* The audit's event budget (slot 0): events for packets whose verdict
 * would differ, one bucket for all (`audit start --log-rate`). Pinned by
 * the audit instance only, with its tables (internal/datapath/audit.go);
 * so is the next one. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_bucket);
} fw_audit_budget SEC(".maps");

/* The audit's counters (enum fw_audit_counter), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_AUDIT_C_NUM);
	__type(key, __u32);
	__type(value, struct fw_counter);
} fw_audit_counts SEC(".maps");

#endif
