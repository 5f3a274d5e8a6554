package telemetry

import (
	"sort"
	"time"
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
		p := before[ruleKey{x.ID, x.Hash}]
		r.Rules = append(r.Rules, RuleRate{Rule: x,
			Rate: per(delta(p.Packets, x.Packets), delta(p.Bytes, x.Bytes), secs)})
	}
	sort.SliceStable(r.Rules, func(i, j int) bool { return r.Rules[i].PPS > r.Rules[j].PPS })

	for _, x := range b.Policies {
		var p Policy
		for _, y := range a.Policies {
			if y.Chain == x.Chain && y.Family == x.Family {
				p = y
			}
		}
		r.Policies = append(r.Policies, PolicyRate{Policy: x,
			Rate: per(delta(p.Packets, x.Packets), delta(p.Bytes, x.Bytes), secs)})
	}
	sort.SliceStable(r.Policies, func(i, j int) bool { return r.Policies[i].PPS > r.Policies[j].PPS })

	for _, x := range b.Reasons {
		var p Reason
		for _, y := range a.Reasons {
			if y.Reason == x.Reason {
				p = y
			}
		}
		rr := ReasonRate{Reason: x, Rate: per(delta(p.Packets, x.Packets), delta(p.Bytes, x.Bytes), secs)}
		drop := per(delta(p.Dropped, x.Dropped), delta(p.DroppedBytes, x.DroppedBytes), secs)
		rr.DropPPS = drop.PPS
		r.Total.PPS += rr.PPS
		r.Total.BPS += rr.BPS
		r.Dropped.PPS += drop.PPS
		r.Dropped.BPS += drop.BPS
		r.Reasons = append(r.Reasons, rr)
	}
	sort.SliceStable(r.Reasons, func(i, j int) bool { return r.Reasons[i].PPS > r.Reasons[j].PPS })

	for _, x := range b.Actions {
		var p Action
		for _, y := range a.Actions {
			if y.Hook == x.Hook && y.Action == x.Action {
				p = y
			}
		}
		r.Actions = append(r.Actions, ActionRate{Action: x,
			Rate: per(delta(p.Packets, x.Packets), delta(p.Bytes, x.Bytes), secs)})
	}
	sort.SliceStable(r.Actions, func(i, j int) bool { return r.Actions[i].PPS > r.Actions[j].PPS })
	return r
}
