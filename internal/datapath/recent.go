package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// -m recent (docs/limits.md): each rule's settings in fw_recent_rules (by
// rule id), every list's addresses in fw_recent (an LRU map).

// putRecentRules writes the settings of a generation's -m recent rules
// before the generation is in force; it returns the rule ids to remove
// once it is.
func (d *Datapath) putRecentRules(rs []compile.RecentRule) (stale []uint32, err error) {
	if d.recentRules == nil {
		if len(rs) > 0 {
			return nil, errors.New("this data plane has no -m recent maps")
		}
		return nil, nil
	}
	want := map[uint32]bool{}
	for _, r := range rs {
		want[r.RuleID] = true
		v := xdpfwFwRecentRule{List: r.List, Op: uint8(r.Op), Flags: r.Flags, Hitcount: r.HitCount, WindowNs: r.WindowNS}
		v.Mask[0] = ne.Uint64(r.Mask[0:8])
		v.Mask[1] = ne.Uint64(r.Mask[8:16])
		if err := d.recentRules.Put(r.RuleID, &v); err != nil {
			return nil, fmt.Errorf("writing the -m recent settings of rule id %d: %w", r.RuleID, err)
		}
	}
	var (
		id uint32
		v  xdpfwFwRecentRule
	)
	it := d.recentRules.Iterate()
	for it.Next(&id, &v) {
		if !want[id] {
			stale = append(stale, id)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading fw_recent_rules: %w", err)
	}
	return stale, nil
}

// dropRecent removes the settings of stale rule ids and the addresses of
// the lists no rule of the generation in force names (as the kernel
// destroys a list once no rule refers to it).
func (d *Datapath) dropRecent(stale []uint32, lists map[uint32]bool) error {
	if d.recentRules == nil {
		return nil
	}
	for _, id := range stale {
		if err := d.recentRules.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("removing the -m recent settings of rule id %d: %w", id, err)
		}
	}
	var (
		k    xdpfwFwRecentKey
		v    xdpfwFwRecentEntry
		gone []xdpfwFwRecentKey
	)
	it := d.recent.Iterate()
	for it.Next(&k, &v) {
		if !lists[k.List] {
			gone = append(gone, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading fw_recent: %w", err)
	}
	for _, k := range gone {
		if err := d.recent.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("removing an address of a -m recent list no rule names: %w", err)
		}
	}
	return nil
}
