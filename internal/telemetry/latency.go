package telemetry

import (
	"errors"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/latency"
)

// Latency is the data plane's sampled per-packet processing time
// (docs/realtime.md): one histogram per chain and outcome, summed over
// the CPUs.
type Latency struct {
	// Sample: one packet in Sample is timed, per CPU; 0: sampling is off.
	Sample uint32 `json:"sample"`
	// Hists holds every chain and outcome, INPUT, FORWARD, OUTPUT, each
	// with accept, drop, reject, pass.
	Hists []LatencyHist `json:"histograms"`
}

// LatencyHist is one chain's and outcome's histogram and its summary.
type LatencyHist struct {
	Chain   string `json:"chain"`
	Outcome string `json:"outcome"`
	latency.Summary
	Hist latency.Hist `json:"-"`
}

// TakeLatency reads the histograms (`xdpfw status --latency`; Take reads
// them with the rest); nil when the program in force has
// none (an earlier version's, until the next load).
func TakeLatency(dp *datapath.Datapath) (*Latency, error) {
	n, err := dp.LatencySample()
	if errors.Is(err, datapath.ErrNoLatency) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	hs, err := dp.Latency()
	if err != nil {
		return nil, err
	}
	l := &Latency{Sample: n}
	for _, h := range hs {
		l.Hists = append(l.Hists, LatencyHist{Chain: h.Chain.String(), Outcome: h.Outcome.String(),
			Summary: h.Summarize(), Hist: h.Hist})
	}
	return l, nil
}

// LatencyRate is a chain's and outcome's processing time over the
// interval between two snapshots: its packets timed a second, and the
// summary of their histogram (Max: the interval's, to within a bucket
// when an earlier packet was slower).
type LatencyRate struct {
	Chain   string  `json:"chain"`
	Outcome string  `json:"outcome"`
	PPS     float64 `json:"timed_pps"`
	latency.Summary
}

// latencyRates are the histograms of b's packets timed since a, for the
// chains and outcomes that timed any, in b's order.
func latencyRates(a, b *Latency, secs float64) []LatencyRate {
	if b == nil {
		return nil
	}
	var out []LatencyRate
	for _, x := range b.Hists {
		var prev latency.Hist
		if a != nil {
			prev = earlier(a.Hists, func(y LatencyHist) bool { return y.Chain == x.Chain && y.Outcome == x.Outcome }).Hist
		}
		d := x.Hist.Since(&prev)
		if d.Count == 0 {
			continue
		}
		lr := LatencyRate{Chain: x.Chain, Outcome: x.Outcome, Summary: d.Summarize()}
		if secs > 0 {
			lr.PPS = float64(d.Count) / secs
		}
		out = append(out, lr)
	}
	return out
}
