package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// The state rules (docs/limits.md): -m recent, each rule's settings in
// fw_recent_rules (by rule id), every list's addresses in fw_recent (an
// LRU map); -m hashlimit, each rule's settings in fw_hashlimit_rules,
// every table's buckets in fw_hashlimit (an LRU map); -m connlimit, each
// rule's settings in fw_connlimit_rules, the connections each rule counts
// per address in fw_connlimit (an LRU map).

// putRecentRules writes the settings of a generation's -m recent rules
// before the generation is in force; it returns the rule ids to remove
// once it is.
func (d *Datapath) putRecentRules(rs []compile.RecentRule) (stale []uint32, err error) {
	vals := make(map[uint32]any, len(rs))
	for _, r := range rs {
		v := xdpfwFwRecentRule{List: r.List, Op: uint8(r.Op), Flags: r.Flags, Hitcount: r.HitCount, WindowNs: r.WindowNS}
		v.Mask[0] = ne.Uint64(r.Mask[0:8])
		v.Mask[1] = ne.Uint64(r.Mask[8:16])
		vals[r.RuleID] = &v
	}
	return putSettings(d.recentRules, "-m recent", vals, new(xdpfwFwRecentRule))
}

// putHashLimitRules is putRecentRules for -m hashlimit.
func (d *Datapath) putHashLimitRules(rs []compile.HashLimitRule) (stale []uint32, err error) {
	vals := make(map[uint32]any, len(rs))
	for _, r := range rs {
		v := xdpfwFwHashlimitRule{IntervalNs: r.IntervalNS, ExpireNs: r.ExpireNS, Burst: r.Burst, Table: r.Table, Flags: r.Flags}
		v.Srcmask[0], v.Srcmask[1] = ne.Uint64(r.SrcMask[0:8]), ne.Uint64(r.SrcMask[8:16])
		v.Dstmask[0], v.Dstmask[1] = ne.Uint64(r.DstMask[0:8]), ne.Uint64(r.DstMask[8:16])
		vals[r.RuleID] = &v
	}
	return putSettings(d.hashRules, "-m hashlimit", vals, new(xdpfwFwHashlimitRule))
}

// putConnLimitRules is putRecentRules for -m connlimit.
func (d *Datapath) putConnLimitRules(rs []compile.ConnLimitRule) (stale []uint32, err error) {
	vals := make(map[uint32]any, len(rs))
	for _, r := range rs {
		v := xdpfwFwConnlimitRule{Limit: r.Limit, Flags: r.Flags}
		v.Mask[0], v.Mask[1] = ne.Uint64(r.Mask[0:8]), ne.Uint64(r.Mask[8:16])
		vals[r.RuleID] = &v
	}
	return putSettings(d.connRules, "-m connlimit", vals, new(xdpfwFwConnlimitRule))
}

// putSettings writes the settings of a state module's rules (vals, by rule
// id) into m and returns the ids m holds besides (scratch: a value to read
// them into). A data plane without m takes no rules of the module.
func putSettings(m *ebpf.Map, what string, vals map[uint32]any, scratch any) (stale []uint32, err error) {
	if m == nil {
		if len(vals) > 0 {
			return nil, fmt.Errorf("this data plane has no %s maps", what)
		}
		return nil, nil
	}
	for id, v := range vals {
		if err := m.Put(id, v); err != nil {
			return nil, fmt.Errorf("writing the %s settings of rule id %d: %w", what, id, err)
		}
	}
	var id uint32
	it := m.Iterate()
	for it.Next(&id, scratch) {
		if _, ok := vals[id]; !ok {
			stale = append(stale, id)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the %s settings: %w", what, err)
	}
	return stale, nil
}

// dropRecent removes the settings of stale rule ids and the addresses of
// the lists no rule of the generation in force names (as the kernel
// destroys a list once no rule refers to it).
func (d *Datapath) dropRecent(stale []uint32, lists map[uint32]bool) error {
	return dropState(d.recentRules, d.recent, "-m recent", stale, func(k *xdpfwFwRecentKey) bool { return lists[k.List] },
		new(xdpfwFwRecentEntry))
}

// dropHashLimit is dropRecent for -m hashlimit's tables.
func (d *Datapath) dropHashLimit(stale []uint32, tables map[uint32]bool) error {
	return dropState(d.hashRules, d.hashBkt, "-m hashlimit", stale, func(k *xdpfwFwHashlimitKey) bool { return tables[k.Table] },
		new(xdpfwFwHashlimitBucket))
}

// dropConnLimit is dropRecent for -m connlimit: the counts of the rules
// that are gone (a rule's connections are its own, as the kernel's
// nf_conncount data goes with the rule).
func (d *Datapath) dropConnLimit(stale []uint32, rs []compile.ConnLimitRule) error {
	ids := make(map[uint32]bool, len(rs))
	for _, r := range rs {
		ids[r.RuleID] = true
	}
	return dropState(d.connRules, d.connCnt, "-m connlimit", stale, func(k *xdpfwFwConnlimitKey) bool { return ids[k.RuleId] },
		new(xdpfwFwConnlimitConns))
}

// dropState removes the settings of stale rule ids from rules and the
// entries of state whose key keep refuses (scratch: a value to read them
// into).
func dropState[K any](rules, state *ebpf.Map, what string, stale []uint32, keep func(*K) bool, scratch any) error {
	if rules == nil {
		return nil
	}
	for _, id := range stale {
		if err := rules.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("removing the %s settings of rule id %d: %w", what, id, err)
		}
	}
	if state == nil { // the audit instance's: the lists are the live ones', which it never changes
		return nil
	}
	var (
		k    K
		gone []K
	)
	it := state.Iterate()
	for it.Next(&k, scratch) {
		if !keep(&k) {
			gone = append(gone, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the %s state: %w", what, err)
	}
	for _, k := range gone {
		if err := state.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("removing %s state no rule names: %w", what, err)
		}
	}
	return nil
}
