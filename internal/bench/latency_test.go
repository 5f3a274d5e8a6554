package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestLatencyQuick runs the latency benchmark at light loads on every DUT
// installed here and checks what it claims, not its timing: every
// configuration forwarded every packet to the sink (nothing lost at a
// light load), the DUT's own count of forwarded packets is what was sent,
// xdpfw forwarded every packet in its fast path after the warm-up and
// timed each, each point has its statistics in order, and nothing is left
// behind.
func TestLatencyQuick(t *testing.T) {
	testutil.RequireRoot(t)
	duts := []string{DUTXDPFwd, DUTKernelFwd, DUTXdpfw}
	for _, d := range []string{DUTIptablesNFT, DUTNftSet} {
		if slices.Contains(AvailableLatencyDUTs(), d) {
			duts = append(duts, d)
		}
	}
	var progress bytes.Buffer
	res, err := Latency(context.Background(), LatencyOptions{Rates: []float64{2000}, LoadRules: 100, Rules: []int{1, 1000},
		LightRate: 5000, Flows: 300, Packets: 1500, Size: 64, DUTs: duts, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if l := leftovers(t); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
	if !slices.Equal(res.DUTs, duts) {
		t.Fatalf("DUTs %v, want %v", res.DUTs, duts)
	}
	// Floors: the load point and the rule sweep's one; the others: the
	// load point at 100 rules and the rule sweep at 1 and 1,000.
	want := 0
	for _, d := range duts {
		want += 3
		if d == DUTXDPFwd || d == DUTKernelFwd {
			want--
		}
	}
	if len(res.Points) != want {
		t.Fatalf("%d points, want %d", len(res.Points), want)
	}
	for _, p := range res.Points {
		switch {
		case p.Sent < 1500 || p.Received != p.Sent || p.Accepted != p.Sent:
			t.Errorf("%s %d rules %.0f pps: sent %d, forwarded %d, received %d: want all", p.DUT, p.Rules, p.Rate, p.Sent, p.Accepted, p.Received)
		case p.Loss != 0:
			t.Errorf("%s: loss %v", p.DUT, p.Loss)
		case !(0 < p.Min && p.Min <= p.P50 && p.P50 <= p.P99 && p.P99 <= p.P999 && p.P999 <= p.Max && p.Jitter >= 0):
			t.Errorf("%s: statistics out of order: %+v", p.DUT, p)
		case p.OfferedPPS <= 0:
			t.Errorf("%s: no offered rate: %+v", p.DUT, p)
		}
		switch p.DUT {
		case DUTXdpfw:
			if p.FastPath != p.Sent {
				t.Errorf("xdpfw %d rules: %d of %d packets in the fast path", p.Rules, p.FastPath, p.Sent)
			}
			if p.Proc == nil || p.Proc.Count != p.Sent || p.Proc.P50 <= 0 {
				t.Errorf("xdpfw %d rules: processing time %+v, want every packet's", p.Rules, p.Proc)
			}
		case DUTXDPFwd:
			if p.FastPath != p.Sent {
				t.Errorf("xdp-fwd: %d of %d packets forwarded in XDP", p.FastPath, p.Sent)
			}
		}
	}
	var table strings.Builder
	WriteLatencyTable(&table, res)
	t.Logf("\n%s", table.String())
	for _, d := range duts {
		if !strings.Contains(table.String(), " "+d+" ") {
			t.Errorf("table lacks %s:\n%s", d, table.String())
		}
	}
	dir := t.TempDir()
	if err := WriteLatencyReport(dir, res); err != nil {
		t.Fatal(err)
	}
}

// TestLatencyInterrupted: an ended context stops the run and everything
// is removed.
func TestLatencyInterrupted(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := Latency(ctx, LatencyOptions{Rates: []float64{1000}, LoadRules: 10, Flows: 10, Packets: 100000,
		Size: 64, DUTs: []string{DUTXdpfw, DUTXDPFwd}})
	if err == nil {
		t.Fatal("no error from an interrupted run")
	}
	if l := leftovers(t); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestLatStats: percentiles are the nearest-rank values of the sorted
// latencies, jitter the mean absolute deviation from the mean.
func TestLatStats(t *testing.T) {
	var v []float64
	for i := 1000; i >= 1; i-- { // 1..1000 us, unsorted
		v = append(v, float64(i))
	}
	var p LatPoint
	fillLatStats(&p, v)
	if p.Min != 1 || p.P50 != 500 || p.P99 != 990 || p.P999 != 999 || p.Max != 1000 || p.Mean != 500.5 || p.Jitter != 250 {
		t.Errorf("1..1000: %+v", p)
	}
	p = LatPoint{}
	fillLatStats(&p, []float64{10, 10, 10, 30}) // mean 15: deviations 5, 5, 5, 15
	if p.Mean != 15 || p.Jitter != 7.5 || p.P50 != 10 || p.P999 != 30 {
		t.Errorf("10,10,10,30: %+v", p)
	}
	p = LatPoint{}
	fillLatStats(&p, nil)
	if p != (LatPoint{}) {
		t.Errorf("no samples: %+v", p)
	}
}

// TestLatAims: the flows aim at distinct rules spread over the whole rule
// set, each decided by its rule (the reference matcher), each with its
// own source port.
func TestLatAims(t *testing.T) {
	shape := ruleShape{chain: "FORWARD", target: "ACCEPT", policy: "DROP", answersIf: "xbr1"}
	for _, c := range []struct{ n, flows int }{{1, 100}, {100, 100}, {5000, 300}} {
		rs, err := rules.Parse("bench", []byte(shape.iptables(c.n)), rules.ParseOptions{Family: rules.FamilyIPv4})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.Rules) != c.n+1 {
			t.Fatalf("%d rules: the rule set has %d, want them and the answers' rule", c.n, len(rs.Rules))
		}
		aims := latAims(c.n, c.flows)
		if want := min(c.n, c.flows); len(aims) != want {
			t.Fatalf("%d rules, %d flows: %d aims, want %d", c.n, c.flows, len(aims), want)
		}
		hit, sports := map[int]bool{}, map[uint16]bool{}
		for _, a := range aims {
			var src [4]byte
			binary.NativeEndian.PutUint32(src[:], a.Saddr)
			pk := compile.RefPacket{Src: netip.AddrFrom4(src), Dst: sinkAddr.Addr(), Proto: 17, L4: true,
				SPort: bits.ReverseBytes16(a.Sport), DPort: bits.ReverseBytes16(a.Dport), Chain: rules.ChainForward, InIface: "xbd1"}
			i, verdict := compile.Evaluate(rs, pk)
			if i < 1 || verdict != rules.VerdictAccept {
				t.Fatalf("%d rules: flow %+v decided by rule %d (%v), want one of the N", c.n, a, i, verdict)
			}
			if hit[i] || sports[a.Sport] {
				t.Fatalf("%d rules: two flows on rule %d or source port %d", c.n, i, bits.ReverseBytes16(a.Sport))
			}
			hit[i], sports[a.Sport] = true, true
		}
		if c.n == 5000 { // spread: from the first tenth of the rules to the last
			lo, hi := c.n, 0
			for i := range hit {
				lo, hi = min(lo, i), max(hi, i)
			}
			if lo > c.n/10 || hi < c.n*9/10 {
				t.Errorf("5000 rules: flows hit rules %d..%d only", lo, hi)
			}
		}
	}
}

// TestLatPlan: the floors measure each load once and the rule sweep once;
// a point both sweeps share is measured once.
func TestLatPlan(t *testing.T) {
	b := &latBench{opt: LatencyOptions{Rates: []float64{1e3, 1e4}, LoadRules: 100, Rules: []int{1, 100}, LightRate: 1e4}}
	count := func(steps []latStep) (n int) {
		for _, s := range steps {
			n += len(s.points)
		}
		return n
	}
	if s := b.plan(DUTXdpfw); len(s) != 2 || count(s) != 3 || s[0].rules != 100 || s[1].rules != 1 {
		t.Errorf("xdpfw: %+v", s)
	}
	if s := b.plan(DUTXDPFwd); len(s) != 1 || count(s) != 2 || s[0].rules != 0 {
		t.Errorf("xdp-fwd: %+v", s)
	}
	for rate, want := range map[float64]uint32{1: 1, 1e5: 1, 1.5e5: 2, 1e6: 10, 1e9: 64} {
		if got := latBurst(rate); got != want {
			t.Errorf("latBurst(%v) = %d, want %d", rate, got, want)
		}
	}
}
