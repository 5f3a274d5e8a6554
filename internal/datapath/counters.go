package datapath

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// ne is the host's byte order (the data plane compares raw memory).
var ne = binary.NativeEndian

// Counter is a packets/bytes pair summed over CPUs.
type Counter struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

func sum(per []xdpfwFwCounter) Counter {
	var c Counter
	for _, v := range per {
		c.Packets += v.Packets
		c.Bytes += v.Bytes
	}
	return c
}

// RuleCounter reads the counters of one rule id.
func (d *Datapath) RuleCounter(id uint32) (Counter, error) {
	var per []xdpfwFwCounter
	if err := d.ruleCtr.Lookup(id, &per); err != nil {
		return Counter{}, fmt.Errorf("reading counters of rule id %d: %w", id, err)
	}
	return sum(per), nil
}

// ResetRuleCounter zeroes the counters of a rule id (before it is reused),
// its log counters and log budget included.
func (d *Datapath) ResetRuleCounter(id uint32) error {
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	zero := make([]xdpfwFwCounter, n)
	if err := d.ruleCtr.Put(id, zero); err != nil {
		return fmt.Errorf("resetting counters of rule id %d: %w", id, err)
	}
	return d.dropLogIDs([]uint32{id}) // Install creates them afresh
}

// MaxRuleIDs is the number of counter slots.
func (d *Datapath) MaxRuleIDs() uint32 { return d.ruleCtr.MaxEntries() }

// ReasonCounters reads the per-reason counters.
func (d *Datapath) ReasonCounters() ([compile.NumReasons]Counter, error) {
	var out [compile.NumReasons]Counter
	for r := range out {
		var per []xdpfwFwCounter
		if err := d.reasons.Lookup(uint32(r), &per); err != nil {
			return out, fmt.Errorf("reading reason counters: %w", err)
		}
		out[r] = sum(per)
	}
	return out, nil
}
