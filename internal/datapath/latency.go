package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/latency"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// The generated struct fw_lat_hist has internal/latency's bucket layout.
var _ [latency.Buckets]uint64 = xdpfwFwLatHist{}.Bucket

// latSection is the data section that holds fw_lat_every (bpf/maps.h), one
// packet in how many the data plane times: a global variable, read with
// one load per packet, which a map lookup would not be. Its map is pinned
// as latPin (bpffs refuses names with a dot), so that any command can
// change it while packets flow; its one value is the variable.
const (
	latSection = ".data.latency"
	latPin     = "fw_lat_every"
)

// nameLatSection names latSection's map latPin in spec: the name it is
// pinned by, and the kernel's name of it. Every instance is made so (the
// live one, trace instances): the name decides how the map is created (a
// data section by its name is made mmapable), and a trace instance shares
// the live one's.
func nameLatSection(spec *ebpf.CollectionSpec) {
	spec.Maps[latSection].Name = latPin
}

// keepLatSample makes spec's fw_lat_every the value pinned in dir, if
// any: the loader writes a data section's contents into its map even when
// it reuses the pinned one, and a reload is to keep the sampling in force.
func keepLatSample(spec *ebpf.CollectionSpec, dir string) error {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, latPin), nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil // a first load, or one after a version without it
	}
	if err != nil {
		return fmt.Errorf("opening pinned map %s: %w", latPin, err)
	}
	defer m.Close()
	var n uint32
	if err := m.Lookup(uint32(0), &n); err != nil {
		return fmt.Errorf("reading %s: %w", latPin, err)
	}
	return spec.Variables["fw_lat_every"].Set(n)
}

// specMapName is the name a pinned map (Datapath.maps) has in the
// collection spec: its own, but for the data section pinned as latPin.
func specMapName(pin string) string {
	if pin == latPin {
		return latSection
	}
	return pin
}

// LatOutcome is enum fw_lat_out (bpf/types.h): the outcome a latency
// histogram is kept for.
type LatOutcome uint8

const (
	LatAccept LatOutcome = iota // FW_LAT_ACCEPT: accepted (ACCEPT, or a policy)
	LatDrop                     // FW_LAT_DROP: dropped (DROP, a policy, malformed, no rule set, conntrack full)
	LatReject                   // FW_LAT_REJECT: a REJECT (answered, or dropped over its budget)
	LatPass                     // FW_LAT_PASS: passed unjudged (not IP)
	NumLatOutcomes
)

var latOutcomeNames = [NumLatOutcomes]string{"accept", "drop", "reject", "pass"}

func (o LatOutcome) String() string {
	if o < NumLatOutcomes {
		return latOutcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// latChains are the chains with histograms, in enum fw_chain order.
var latChains = []rules.Chain{rules.ChainInput, rules.ChainForward, rules.ChainOutput}

// LatencyHist is one chain's and outcome's histogram, summed over CPUs.
type LatencyHist struct {
	Chain   rules.Chain
	Outcome LatOutcome
	latency.Hist
}

// ErrNoLatency means the program in force was built before latency
// sampling: the next `xdpfw load` brings it.
var ErrNoLatency = errors.New("the program in force has no latency histograms (loaded by an earlier xdpfw version; `xdpfw load` again)")

// LatencySample is one packet in how many the data plane times (0: none).
func (d *Datapath) LatencySample() (uint32, error) {
	if d.latSample == nil {
		return 0, ErrNoLatency
	}
	var n uint32
	if err := d.latSample.Lookup(uint32(0), &n); err != nil {
		return 0, fmt.Errorf("reading fw_lat_every: %w", err)
	}
	return n, nil
}

// SetLatencySample makes the data plane time one packet in n per CPU (0:
// none, at the cost of one branch). It takes effect with the next packet.
func (d *Datapath) SetLatencySample(n uint32) error {
	if d.latSample == nil {
		return ErrNoLatency
	}
	if err := d.latSample.Put(uint32(0), n); err != nil {
		return fmt.Errorf("writing fw_lat_every: %w", err)
	}
	return nil
}

// Latency reads every histogram (chain by chain, outcomes in enum order),
// each summed over the CPUs.
func (d *Datapath) Latency() ([]LatencyHist, error) {
	if d.latency == nil {
		return nil, ErrNoLatency
	}
	var out []LatencyHist
	for ci, c := range latChains {
		for o := LatOutcome(0); o < NumLatOutcomes; o++ {
			var per []xdpfwFwLatHist
			if err := d.latency.Lookup(uint32(ci)*uint32(NumLatOutcomes)+uint32(o), &per); err != nil {
				return nil, fmt.Errorf("reading fw_latency: %w", err)
			}
			h := LatencyHist{Chain: c, Outcome: o}
			for i := range per {
				h.Merge(&latency.Hist{Count: per[i].Count, Sum: per[i].Sum, Max: per[i].Max, Counts: per[i].Bucket})
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// ResetLatency zeroes every histogram. A packet counted during the reset
// may leave part of its count (its bucket, or its total) behind.
func (d *Datapath) ResetLatency() error {
	if d.latency == nil {
		return ErrNoLatency
	}
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	zero := make([]xdpfwFwLatHist, n)
	for i := uint32(0); i < d.latency.MaxEntries(); i++ {
		if err := d.latency.Put(i, zero); err != nil {
			return fmt.Errorf("resetting fw_latency: %w", err)
		}
	}
	return nil
}
