package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// ne is the host's byte order (the data plane compares raw memory).
var ne = binary.NativeEndian

// Counter is a packets/bytes pair summed over CPUs, with the time of the
// last packet counted (the latest over the CPUs; zero: none yet). Last has
// the resolution of the kernel's tick (1-10 ms), see Clock.
type Counter struct {
	Packets uint64    `json:"packets"`
	Bytes   uint64    `json:"bytes"`
	Last    time.Time `json:"last_hit,omitzero"`
}

// Clock turns the data plane's counter stamps into wall-clock time. The
// data plane stamps counters with jiffies (lib/stats.h fw_now: the cheapest
// clock a BPF program has). A Clock holds one reading of the clock probe
// (bpf/clock.c: jiffies) with CLOCK_MONOTONIC when that jiffy began (from
// CLOCK_MONOTONIC_COARSE, which the tick moves with jiffies), the length of
// a tick (clock_getres(CLOCK_MONOTONIC_COARSE): TICK_NSEC, the monotonic
// time per jiffy) and a pairing of CLOCK_MONOTONIC with the wall clock, so
// every stamp read with it is converted with the same offset. A stamp
// places the packet within the tick it names: up to one tick (1-10 ms)
// early. A Clock whose probe failed converts every stamp to the zero time
// (unknown).
type Clock struct {
	ok      bool
	jiffies uint64 // the probe's jiffies ...
	probe   uint64 // ... and CLOCK_MONOTONIC (ns) when that jiffy began
	tick    uint64 // ns of CLOCK_MONOTONIC per jiffy
	mono    uint64 // CLOCK_MONOTONIC (ns) read just before ...
	wall    time.Time
}

// clock reads the clock probe, loading it first if this handle has not
// yet (a handle from Open has no program but the pinned ones).
func (d *Datapath) clock() Clock {
	c, err := d.readClock()
	if err != nil {
		return Clock{}
	}
	return c
}

func (d *Datapath) readClock() (Clock, error) {
	if d.clockProg == nil {
		spec, err := clockSpec()
		if err != nil {
			return Clock{}, err
		}
		if d.clockProg, err = ebpf.NewProgram(spec); err != nil {
			return Clock{}, fmt.Errorf("loading the clock probe: %w", err)
		}
	}
	var res unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &res); err != nil || res.Nano() <= 0 {
		return Clock{}, fmt.Errorf("the tick length (clock_getres): %v", err)
	}
	// The probe's jiffy began when the coarse clock last moved: the tick
	// updates both. A coarse reading that did not change around the probe
	// is that instant (a tick between them: read again).
	var out xdpfwFwClock
	var began uint64
	for try := 0; ; try++ {
		c0 := monotonic(unix.CLOCK_MONOTONIC_COARSE)
		if _, err := d.clockProg.Run(&ebpf.RunOptions{Context: xdpfwFwClock{}, ContextOut: &out}); err != nil {
			return Clock{}, fmt.Errorf("running the clock probe: %w", err)
		}
		if began = monotonic(unix.CLOCK_MONOTONIC_COARSE); began == c0 || try == 3 {
			break
		}
	}
	return Clock{ok: true, jiffies: out.Jiffies, probe: min(began, out.MonoNs), tick: uint64(res.Nano()),
		mono: monotonic(unix.CLOCK_MONOTONIC), wall: time.Now().Round(0)}, nil
}

func monotonic(clock int32) uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(clock, &ts)
	return uint64(ts.Nano())
}

// clockSpec is the clock probe's program, from the embedded object
// (parsed once per process).
var clockSpec = sync.OnceValues(func() (*ebpf.ProgramSpec, error) {
	spec, err := loadXdpfw()
	if err != nil {
		return nil, fmt.Errorf("loading embedded BPF objects: %w", err)
	}
	return spec.Programs["xdpfw_clock"], nil
})

// Wall is the wall-clock time of a data-plane stamp (zero for 0: never,
// or when the clock is unknown). A stamp taken after the probe counts as
// now.
func (c Clock) Wall(stamp uint64) time.Time {
	if stamp == 0 || !c.ok {
		return time.Time{}
	}
	age := int64(c.mono) - int64(c.probe) // the probe's jiffy began this long before the wall clock was read
	if stamp < c.jiffies {
		age += int64((c.jiffies - stamp) * c.tick)
	}
	return c.wall.Add(-time.Duration(max(age, 0)))
}

func (c Clock) sum(per []xdpfwFwCounter) Counter {
	var out Counter
	var last uint64
	for _, v := range per {
		out.Packets += v.Packets
		out.Bytes += v.Bytes
		last = max(last, v.Last)
	}
	out.Last = c.Wall(last)
	return out
}

// RuleCounter reads the counters of one rule id.
func (d *Datapath) RuleCounter(id uint32) (Counter, error) {
	var per []xdpfwFwCounter
	if err := d.ruleCtr.Lookup(id, &per); err != nil {
		return Counter{}, fmt.Errorf("reading counters of rule id %d: %w", id, err)
	}
	return d.clock().sum(per), nil
}

// RuleCounters reads the counters of many rule ids, in the order given,
// with few system calls: the slots up to the highest id are read in
// batches.
func (d *Datapath) RuleCounters(ids []uint32) ([]Counter, error) {
	var top uint32
	for _, id := range ids {
		top = max(top, id)
	}
	slots, err := readSlots(d.ruleCtr, top+1)
	if err != nil {
		return nil, fmt.Errorf("reading rule counters: %w", err)
	}
	clk := d.clock()
	out := make([]Counter, len(ids))
	for i, id := range ids {
		out[i] = clk.sum(slots[id])
	}
	return out, nil
}

// batchSlots is how many slots one batch lookup reads.
const batchSlots = 4096

// readSlots reads slots [0, n) of a per-CPU array of fw_counter: per slot,
// the value of each CPU. It uses batch lookups, one system call per
// batchSlots slots, and single lookups where the kernel has no batch
// operations for arrays (before 5.6).
func readSlots(m *ebpf.Map, n uint32) ([][]xdpfwFwCounter, error) {
	if n > m.MaxEntries() {
		return nil, fmt.Errorf("slot %d beyond the map's %d", n-1, m.MaxEntries())
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	out := make([][]xdpfwFwCounter, n)
	var cursor ebpf.MapBatchCursor
	for done := uint32(0); done < n; {
		count := min(n-done, batchSlots)
		keys := make([]uint32, count)
		vals := make([]xdpfwFwCounter, int(count)*ncpu)
		got, err := m.BatchLookup(&cursor, keys, vals, nil)
		if errors.Is(err, ebpf.ErrNotSupported) {
			return readSlotsOneByOne(m, n)
		}
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, err
		}
		for i := 0; i < got; i++ {
			if k := keys[i]; k < n {
				out[k] = vals[i*ncpu : (i+1)*ncpu]
			}
		}
		if got == 0 {
			break
		}
		done += uint32(got)
	}
	for i := range out {
		if out[i] == nil {
			return nil, fmt.Errorf("slot %d missing from the batch read", i)
		}
	}
	return out, nil
}

func readSlotsOneByOne(m *ebpf.Map, n uint32) ([][]xdpfwFwCounter, error) {
	out := make([][]xdpfwFwCounter, n)
	for i := range out {
		if err := m.Lookup(uint32(i), &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
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

// Outcome is enum fw_out (bpf/types.h): what the program returned for a
// packet, the XDP action of the ingress program or the tc action of the
// egress program. Keep both in order.
type Outcome uint8

const (
	OutXDPAborted Outcome = iota // never returned today
	OutXDPDrop
	OutXDPPass
	OutXDPTx       // a REJECT answered in place
	OutXDPRedirect // the forwarding fast path (fwd.go)
	OutTCOK
	OutTCShot
	OutTCRedirect // REJECT's answer in OUTPUT, sent back in (lib/reject.h)
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{"XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT",
	"TC_ACT_OK", "TC_ACT_SHOT", "TC_ACT_REDIRECT"}

// String is the kernel's name of the action.
func (o Outcome) String() string {
	if o < NumOutcomes {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome%d", uint8(o))
}

// Hook is "xdp" (ingress) or "tc" (egress).
func (o Outcome) Hook() string {
	if o >= OutTCOK {
		return "tc"
	}
	return "xdp"
}

// Dropped says whether the packet was dropped (XDP_DROP, XDP_ABORTED,
// TC_ACT_SHOT). XDP_TX is not a drop: a REJECT's answer left.
func (o Outcome) Dropped() bool {
	return o == OutXDPDrop || o == OutXDPAborted || o == OutTCShot
}

// OutcomeCounters are the counters by what the program returned and why:
// [outcome][reason].
type OutcomeCounters [NumOutcomes][compile.NumReasons]Counter

// Reasons sums the outcomes: the counters per reason.
func (oc *OutcomeCounters) Reasons() [compile.NumReasons]Counter {
	var out [compile.NumReasons]Counter
	for o := range oc {
		for r, c := range oc[o] {
			out[r] = addCounter(out[r], c)
		}
	}
	return out
}

// Outcomes sums the reasons: the counters per outcome.
func (oc *OutcomeCounters) Outcomes() [NumOutcomes]Counter {
	var out [NumOutcomes]Counter
	for o := range oc {
		for _, c := range oc[o] {
			out[o] = addCounter(out[o], c)
		}
	}
	return out
}

func addCounter(a, b Counter) Counter {
	a.Packets += b.Packets
	a.Bytes += b.Bytes
	if b.Last.After(a.Last) {
		a.Last = b.Last
	}
	return a
}

// ReadOutcomes reads the counters by outcome and reason.
func (d *Datapath) ReadOutcomes() (*OutcomeCounters, error) {
	slots, err := readSlots(d.reasons, uint32(NumOutcomes)*uint32(compile.NumReasons))
	if err != nil {
		return nil, fmt.Errorf("reading reason counters: %w", err)
	}
	clk := d.clock()
	var oc OutcomeCounters
	for o := range oc {
		for r := range oc[o] {
			oc[o][r] = clk.sum(slots[o*int(compile.NumReasons)+r])
		}
	}
	return &oc, nil
}

// ReasonCounters reads the per-reason counters (all outcomes together).
func (d *Datapath) ReasonCounters() ([compile.NumReasons]Counter, error) {
	oc, err := d.ReadOutcomes()
	if err != nil {
		return [compile.NumReasons]Counter{}, err
	}
	return oc.Reasons(), nil
}
