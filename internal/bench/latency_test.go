package bench

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

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
