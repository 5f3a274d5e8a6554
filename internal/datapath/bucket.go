package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// Token buckets by rule id (struct fw_bucket, lib/ratelimit.h): the log
// budgets (fw_log_limits) and the -m limit buckets (fw_limits).

// bucketIDs lists the rule ids that have a bucket in m now.
func bucketIDs(m *ebpf.Map) ([]uint32, error) {
	var (
		ids []uint32
		id  uint32
		v   xdpfwFwBucket
	)
	it := m.Iterate()
	for it.Next(&id, &v) {
		ids = append(ids, id)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", m, err)
	}
	return ids, nil
}

// putBuckets gives every rule of lims its bucket in m (at most max), for
// a generation about to be installed: a rule that had one keeps its
// state (its tokens), with the settings lims gives. before runs for each
// rule before its bucket is written. It returns the ids to remove once
// the generation is in force (drop removes them); those are removed now
// already when m could not hold old and new side by side (the old rules'
// buckets then go a moment early). what names a bucket in errors.
func putBuckets(m *ebpf.Map, lims []compile.LogLimit, max int, what string,
	drop func([]uint32) error, before func(id uint32) error) (stale []uint32, err error) {
	have, err := bucketIDs(m)
	if err != nil {
		return nil, err
	}
	want := map[uint32]bool{}
	for _, l := range lims {
		want[l.RuleID] = true
	}
	had := map[uint32]bool{}
	for _, id := range have {
		had[id] = true
		if !want[id] {
			stale = append(stale, id)
		}
	}
	added := 0
	for id := range want {
		if !had[id] {
			added++
		}
	}
	if len(have)+added > max {
		if err := drop(stale); err != nil {
			return nil, err
		}
		stale = nil
	}
	for _, l := range lims {
		if before != nil {
			if err := before(l.RuleID); err != nil {
				return nil, err
			}
		}
		var flags uint32
		if l.Match {
			flags = compile.BucketMatch
		}
		var cur xdpfwFwBucket
		exists := m.Lookup(l.RuleID, &cur) == nil
		if exists && cur.IntervalNs == l.IntervalNS && cur.Burst == l.Burst && cur.Flags == flags {
			continue
		}
		v := xdpfwFwBucket{Tat: cur.Tat, IntervalNs: l.IntervalNS, Burst: l.Burst, Flags: flags}
		if err := m.Put(l.RuleID, &v); err != nil {
			return nil, fmt.Errorf("writing the %s of rule id %d: %w", what, l.RuleID, err)
		}
	}
	return stale, nil
}

// putLimits gives every -m limit rule of a generation about to be
// installed its bucket (fw_limits); see putBuckets.
func (d *Datapath) putLimits(lims []compile.LogLimit) (stale []uint32, err error) {
	if d.limBkt == nil { // another build's object (a benchmark's): it has no -m limit
		if len(lims) > 0 {
			return nil, errors.New("this data plane has no -m limit buckets")
		}
		return nil, nil
	}
	return putBuckets(d.limBkt, lims, compile.MaxLimitRules, "-m limit bucket", d.dropLimitIDs, nil)
}

// dropLimitIDs removes the -m limit buckets of rule ids.
func (d *Datapath) dropLimitIDs(ids []uint32) error {
	for _, id := range ids {
		if err := d.limBkt.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("removing the -m limit bucket of rule id %d: %w", id, err)
		}
	}
	return nil
}
