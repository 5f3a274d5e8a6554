package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// Logging's maps (docs/log.md): the event ring buffer, each logged rule's
// budget and counters (by rule id), and the counters of enum
// fw_log_counter.

// LogCounter counts the events of one logged rule (struct fw_log_stat,
// summed over CPUs).
type LogCounter struct {
	Emitted    uint64 `json:"emitted"`    // put in the ring buffer
	Suppressed uint64 `json:"suppressed"` // over the rule's rate limit
	Lost       uint64 `json:"lost"`       // no room in the ring buffer (no reader, or a slow one)
}

func (c *LogCounter) add(o LogCounter) {
	c.Emitted += o.Emitted
	c.Suppressed += o.Suppressed
	c.Lost += o.Lost
}

// LogStats are logging's counters, as the metrics code reads them.
type LogStats struct {
	Rules map[uint32]LogCounter `json:"rules"` // by rule id, the rules logging now
	Total LogCounter            `json:"total"` // over Rules
	// Overflow counts packets that more LOG rules matched than log one
	// packet (compile.MaxLogPerPacket): the later ones did not log it.
	Overflow uint64 `json:"overflow"`
	// Unbudgeted counts events of rule ids without a budget: a rule being
	// replaced at the instant of the swap. They are not emitted.
	Unbudgeted uint64 `json:"unbudgeted"`
	// StateOverflow counts packets that met more -m recent rules than the
	// data plane settles (compile.MaxStateNotes), dropped: the compiler
	// refuses rule sets where that could happen, so it stays 0.
	StateOverflow uint64 `json:"state_overflow"`
	// CountOverflow counts packets that more counting rules (jump, goto,
	// RETURN, no -j) matched than count one packet
	// (compile.MaxCountPerPacket): the later ones did not count it.
	CountOverflow uint64 `json:"count_overflow"`
	// ConnLimitFull counts packets of new connections a -m connlimit rule
	// could not count (the address had compile.ConnLimitSlots connections
	// counted already), dropped as the kernel drops a packet whose
	// connection it cannot add.
	ConnLimitFull uint64 `json:"connlimit_full"`
}

// Slots of fw_log_counters (enum fw_log_counter).
const (
	logCtrOverflow = iota
	logCtrNoLimit
	logCtrStateOverflow
	logCtrCountOverflow
	logCtrConnLimitFull
	numLogCtrs
)

// LogRing is the pinned ring buffer of log events (one reader at a time:
// see telemetry.OpenReader).
func (d *Datapath) LogRing() *ebpf.Map { return d.logRing }

// OpenLogRing opens the pinned event ring buffer alone, for a reader that
// needs nothing else of the data plane.
func OpenLogRing(dir string) (*ebpf.Map, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "fw_log_ring"), nil)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no log ring buffer in %s: %w", dir, ErrNotLoaded)
		}
		return nil, fmt.Errorf("opening the log ring buffer (made by another xdpfw version? `xdpfw load` again upgrades): %w", err)
	}
	return m, nil
}

// LogStats reads logging's counters.
func (d *Datapath) LogStats() (LogStats, error) {
	s := LogStats{Rules: map[uint32]LogCounter{}}
	var (
		id  uint32
		per []xdpfwFwLogStat
	)
	it := d.logStat.Iterate()
	for it.Next(&id, &per) {
		var c LogCounter
		for _, v := range per {
			c.add(LogCounter{Emitted: v.Emitted, Suppressed: v.Suppressed, Lost: v.Lost})
		}
		s.Rules[id] = c
		s.Total.add(c)
	}
	if err := it.Err(); err != nil {
		return s, fmt.Errorf("reading fw_log_stats: %w", err)
	}
	for slot, dst := range map[uint32]*uint64{logCtrOverflow: &s.Overflow, logCtrNoLimit: &s.Unbudgeted,
		logCtrStateOverflow: &s.StateOverflow, logCtrCountOverflow: &s.CountOverflow, logCtrConnLimitFull: &s.ConnLimitFull} {
		var vals []uint64
		if err := d.logCtr.Lookup(slot, &vals); err != nil {
			return s, fmt.Errorf("reading fw_log_counters: %w", err)
		}
		for _, v := range vals {
			*dst += v
		}
	}
	return s, nil
}

// putLogLimits gives every logged rule of a generation about to be
// installed its budget and counters; a rule that had them keeps its
// counters and its bucket's state. It returns the ids to remove once the
// generation is in force; those are removed now already when the maps
// could not hold both.
func (d *Datapath) putLogLimits(lims []compile.LogLimit) (stale []uint32, err error) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	return putBuckets(d.logLim, lims, compile.MaxLogRules, "log budget", d.dropLogIDs, func(id uint32) error {
		var per []xdpfwFwLogStat
		if d.logStat.Lookup(id, &per) == nil {
			return nil
		}
		if err := d.logStat.Put(id, make([]xdpfwFwLogStat, ncpu)); err != nil {
			return fmt.Errorf("creating the log counters of rule id %d: %w", id, err)
		}
		return nil
	})
}

// dropLogIDs removes the budgets and counters of rule ids.
func (d *Datapath) dropLogIDs(ids []uint32) error {
	for _, id := range ids {
		for _, m := range []*ebpf.Map{d.logLim, d.logStat} {
			if err := m.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("removing the log state of rule id %d: %w", id, err)
			}
		}
	}
	return nil
}

// LogEventHeader is struct fw_log_event (bpf/types.h), generated by bpf2go:
// a ring-buffer record is this header, then CapLen bytes of the frame.
type LogEventHeader = xdpfwFwLogEvent
