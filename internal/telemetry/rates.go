package telemetry

import (
	"sort"
	"time"

	"github.com/xdpfw/xdpfw/internal/datapath"
)

// Rates are per-second rates between two snapshots (what `xdpfw top`
// shows). Every list holds every item of the later snapshot, busiest
// first; ties keep the snapshot's order.
type Rates struct {
	From       time.Time   `json:"from"`
	To         time.Time   `json:"to"`
	Seconds    float64     `json:"seconds"`
	Generation uint64      `json:"generation"`
	Interfaces []Interface `json:"interfaces"`
	// Total is every packet the programs saw; Dropped those they dropped.
	Total    Rate         `json:"total"`
	Dropped  Rate         `json:"dropped"`
	Rules    []RuleRate   `json:"rules"`
	Policies []PolicyRate `json:"policies"`
	Reasons  []ReasonRate `json:"reasons"`
	Actions  []ActionRate `json:"actions"`
	// Latency: the chains and outcomes that timed packets in the
	// interval (sampling on), with their processing time.
	Latency []LatencyRate `json:"latency,omitempty"`
}

// Rate is packets and bytes per second.
type Rate struct {
	PPS float64 `json:"pps"`
	BPS float64 `json:"bytes_per_second"`
}

// RuleRate is a rule of the later snapshot with its rate.
type RuleRate struct {
	Rule
	Rate
}

// PolicyRate is a policy of the later snapshot with its rate.
type PolicyRate struct {
	Policy
	Rate
}

// ReasonRate is a reason's rate and the rate of its drops.
type ReasonRate struct {
	Reason
	Rate
	DropPPS float64 `json:"dropped_pps"`
}

// ActionRate is a program outcome's rate.
type ActionRate struct {
	Action
	Rate
}

// delta is how much a counter grew from a to b. A counter that went
// down was reset in between (a rule id reused, the data plane reloaded):
// it grew by b since then.
func delta(a, b uint64) uint64 {
	if b >= a {
		return b - a
	}
	return b
}

// per turns a packets and a bytes delta into a rate over secs seconds.
func per(pkts, bytes uint64, secs float64) Rate {
	if secs <= 0 {
		return Rate{}
	}
	return Rate{PPS: float64(pkts) / secs, BPS: float64(bytes) / secs}
}

// rate is how fast a counter grew from a to b over secs seconds.
func rate(a, b datapath.Counter, secs float64) Rate {
	return per(delta(a.Packets, b.Packets), delta(a.Bytes, b.Bytes), secs)
}

// earlier is the item of xs that same picks (the zero value if none): an
// item of the later snapshot's match in the earlier one.
func earlier[T any](xs []T, same func(T) bool) T {
	for _, y := range xs {
		if same(y) {
			return y
		}
	}
	var zero T
	return zero
}

// busiestFirst sorts by packets per second, keeping the order of ties.
func busiestFirst[T any](xs []T, pps func(T) float64) {
	sort.SliceStable(xs, func(i, j int) bool { return pps(xs[i]) > pps(xs[j]) })
}

// Diff computes the rates from a to b (b taken later). Rules are matched
// by counter id and text hash: a rule that is new in b, or whose id was
// given to another rule, counts from zero.
func Diff(a, b *Snapshot) *Rates {
	secs := b.Time.Sub(a.Time).Seconds()
	r := &Rates{From: a.Time, To: b.Time, Seconds: secs, Generation: b.Generation, Interfaces: b.Interfaces,
		Rules: make([]RuleRate, 0, len(b.Rules))}

	type ruleKey struct {
		id   uint32
		hash string
	}
	before := make(map[ruleKey]Rule, len(a.Rules))
	for _, x := range a.Rules {
		before[ruleKey{x.ID, x.Hash}] = x
	}
	for _, x := range b.Rules {
		r.Rules = append(r.Rules, RuleRate{Rule: x, Rate: rate(before[ruleKey{x.ID, x.Hash}].Counter, x.Counter, secs)})
	}
	busiestFirst(r.Rules, func(x RuleRate) float64 { return x.PPS })

	for _, x := range b.Policies {
		p := earlier(a.Policies, func(y Policy) bool { return y.Chain == x.Chain && y.Family == x.Family })
		r.Policies = append(r.Policies, PolicyRate{Policy: x, Rate: rate(p.Counter, x.Counter, secs)})
	}
	busiestFirst(r.Policies, func(x PolicyRate) float64 { return x.PPS })

	for _, x := range b.Reasons {
		p := earlier(a.Reasons, func(y Reason) bool { return y.Reason == x.Reason })
		rr := ReasonRate{Reason: x, Rate: rate(p.Counter, x.Counter, secs)}
		drop := per(delta(p.Dropped, x.Dropped), delta(p.DroppedBytes, x.DroppedBytes), secs)
		rr.DropPPS = drop.PPS
		r.Total.PPS += rr.PPS
		r.Total.BPS += rr.BPS
		r.Dropped.PPS += drop.PPS
		r.Dropped.BPS += drop.BPS
		r.Reasons = append(r.Reasons, rr)
	}
	busiestFirst(r.Reasons, func(x ReasonRate) float64 { return x.PPS })

	for _, x := range b.Actions {
		p := earlier(a.Actions, func(y Action) bool { return y.Hook == x.Hook && y.Action == x.Action })
		r.Actions = append(r.Actions, ActionRate{Action: x, Rate: rate(p.Counter, x.Counter, secs)})
	}
	busiestFirst(r.Actions, func(x ActionRate) float64 { return x.PPS })
	r.Latency = latencyRates(a.Latency, b.Latency, secs)
	return r
}
