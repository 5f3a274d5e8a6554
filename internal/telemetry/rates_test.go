package telemetry

import (
	"math"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/datapath"
)

func ctr(pkts, bytes uint64) datapath.Counter { return datapath.Counter{Packets: pkts, Bytes: bytes} }

func TestRuleHash(t *testing.T) {
	// sha256("-A INPUT -j ACCEPT"), first 8 bytes.
	if got := RuleHash("-A INPUT -j ACCEPT"); got != "3d3d7403cfba0d12" {
		t.Errorf("RuleHash = %s", got)
	}
	if RuleHash("-A INPUT -j DROP") == RuleHash("-A INPUT -j ACCEPT") || len(RuleHash("")) != 16 {
		t.Error("hashes of different texts collide, or are not 16 hex digits")
	}
}

func TestDelta(t *testing.T) {
	for _, c := range []struct{ a, b, want uint64 }{{0, 0, 0}, {5, 9, 4}, {9, 9, 0}, {1000, 10, 10}, {0, 7, 7}} {
		if got := delta(c.a, c.b); got != c.want {
			t.Errorf("delta(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestDiff: rates are growth over the interval; a rule new in the later
// snapshot, a reused id (another text) and a reset counter count from
// zero; lists come busiest first.
func TestDiff(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	a := &Snapshot{Time: t0, Generation: 1,
		Rules: []Rule{
			{Chain: "INPUT", Num: 1, ID: 16, Hash: "aaaa", Counter: ctr(100, 10000)},
			{Chain: "INPUT", Num: 2, ID: 18, Hash: "cccc", Counter: ctr(500, 500)},
			{Chain: "INPUT", Num: 3, ID: 19, Hash: "dddd", Counter: ctr(1000, 1000)},
			{Chain: "INPUT", Num: 4, ID: 20, Hash: "eeee", Counter: ctr(7, 7)},
		},
		Policies: []Policy{{Chain: "INPUT", Family: "ipv4", Verdict: "DROP", Counter: ctr(10, 600)}},
		Reasons: []Reason{
			{Reason: "rule-drop", Counter: ctr(100, 10000), Dropped: 100, DroppedBytes: 10000},
			{Reason: "rule-accept", Counter: ctr(20, 2000)},
		},
		Actions: []Action{{Hook: "xdp", Action: "XDP_DROP", Counter: ctr(100, 10000)},
			{Hook: "xdp", Action: "XDP_PASS", Counter: ctr(20, 2000)}},
	}
	b := &Snapshot{Time: t0.Add(2 * time.Second), Generation: 2,
		Rules: []Rule{
			{Chain: "INPUT", Num: 1, ID: 16, Hash: "aaaa", Counter: ctr(300, 30000)}, // +200 -> 100/s
			{Chain: "INPUT", Num: 2, ID: 17, Hash: "bbbb", Counter: ctr(50, 50)},     // new -> 25/s
			{Chain: "INPUT", Num: 3, ID: 18, Hash: "ffff", Counter: ctr(40, 40)},     // id reused -> 20/s
			{Chain: "INPUT", Num: 4, ID: 19, Hash: "dddd", Counter: ctr(10, 10)},     // reset -> 5/s
			{Chain: "INPUT", Num: 5, ID: 20, Hash: "eeee", Counter: ctr(7, 7)},       // idle -> 0/s
		},
		Policies: []Policy{{Chain: "INPUT", Family: "ipv4", Verdict: "DROP", Counter: ctr(16, 960)}},
		Reasons: []Reason{
			{Reason: "rule-drop", Counter: ctr(300, 30000), Dropped: 300, DroppedBytes: 30000},
			{Reason: "rule-accept", Counter: ctr(80, 8000)},
		},
		Actions: []Action{{Hook: "xdp", Action: "XDP_DROP", Counter: ctr(300, 30000)},
			{Hook: "xdp", Action: "XDP_PASS", Counter: ctr(80, 8000)}},
	}
	r := Diff(a, b)
	if r.Seconds != 2 || r.Generation != 2 {
		t.Fatalf("seconds %v generation %d", r.Seconds, r.Generation)
	}
	wantRules := []struct {
		id  uint32
		pps float64
		bps float64
	}{{16, 100, 10000}, {17, 25, 25}, {18, 20, 20}, {19, 5, 5}, {20, 0, 0}}
	if len(r.Rules) != len(wantRules) {
		t.Fatalf("%d rules", len(r.Rules))
	}
	for i, w := range wantRules {
		if got := r.Rules[i]; got.ID != w.id || !near(got.PPS, w.pps) || !near(got.BPS, w.bps) {
			t.Errorf("rule %d: id %d %v pkt/s %v B/s, want id %d %v and %v", i, got.ID, got.PPS, got.BPS, w.id, w.pps, w.bps)
		}
	}
	if p := r.Policies[0]; !near(p.PPS, 3) || !near(p.BPS, 180) || p.Packets != 16 {
		t.Errorf("policy: %+v", p)
	}
	if x := r.Reasons[0]; x.Reason.Reason != "rule-drop" || !near(x.PPS, 100) || !near(x.DropPPS, 100) {
		t.Errorf("busiest reason: %+v", x)
	}
	if x := r.Reasons[1]; x.Reason.Reason != "rule-accept" || !near(x.PPS, 30) || x.DropPPS != 0 {
		t.Errorf("second reason: %+v", x)
	}
	if !near(r.Total.PPS, 130) || !near(r.Dropped.PPS, 100) || !near(r.Dropped.BPS, 10000) {
		t.Errorf("total %+v dropped %+v", r.Total, r.Dropped)
	}
	if x := r.Actions[0]; x.Action.Action != "XDP_DROP" || !near(x.PPS, 100) {
		t.Errorf("busiest action: %+v", x)
	}

	// The same snapshot twice, or no time between: all zero, no division by zero.
	z := Diff(b, b)
	for _, x := range z.Rules {
		if x.PPS != 0 || x.BPS != 0 {
			t.Errorf("no time passed, rule %d at %v pkt/s", x.ID, x.PPS)
		}
	}
}

// TestEnableProgramStats: while this process holds BPF_ENABLE_STATS the
// snapshot says the kernel collects run time; after Close it says what
// the sysctl says. (Held for a moment only: it slows every BPF program on
// the host while held.)
func TestEnableProgramStats(t *testing.T) {
	sysctl, _ := programStats(nil)
	h, err := EnableProgramStats()
	if err != nil {
		t.Fatal(err)
	}
	on, _ := programStats(nil)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	_ = h.Close() // twice is harmless
	off, _ := programStats(nil)
	if !on || off != sysctl {
		t.Errorf("held: %v, released: %v (sysctl: %v)", on, off, sysctl)
	}
}

// Diff gives the processing time of the packets timed between two
// snapshots, for the chains and outcomes that timed any.
func TestDiffLatency(t *testing.T) {
	a, b := latencySnapshot(), latencySnapshot()
	for i := range b.Hists {
		if b.Hists[i].Chain == "OUTPUT" && b.Hists[i].Outcome == "drop" {
			b.Hists[i].Hist.Add(300)
			b.Hists[i].Hist.Add(300)
		}
	}
	r := Diff(&Snapshot{Time: time.Unix(100, 0), Latency: a}, &Snapshot{Time: time.Unix(102, 0), Latency: b})
	if len(r.Latency) != 1 {
		t.Fatalf("latency rates %+v, want OUTPUT/drop alone (INPUT/accept timed nothing new)", r.Latency)
	}
	l := r.Latency[0]
	if l.Chain != "OUTPUT" || l.Outcome != "drop" || l.Count != 2 || l.PPS != 1 || l.Max != 300 || l.P50 < 288 || l.P50 >= 304 {
		t.Errorf("OUTPUT/drop over 2 s: %+v, want 2 packets, 1/s, p50 in 300's bucket, max 300", l)
	}
}
