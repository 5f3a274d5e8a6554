package bench

import (
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestMicroRuns: a small micro benchmark runs, checks its probes, fills
// every field, and leaves nothing behind. Timing values are not judged.
func TestMicroRuns(t *testing.T) {
	testutil.RequireRoot(t)
	res, err := Micro(MicroOptions{Sizes: []int{1, 50}, Families: []string{"ipv4", "ipv6"}, Rounds: 3, Repeat: 1000, Delta: 3,
		LatencySamples: []uint32{1, 64}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results, want 4", len(res))
	}
	for _, r := range res {
		if len(r.LastNS) != 3 || len(r.MissNS) != 3 || len(r.FirstNS) != 3 || r.LastMed <= 0 || r.LastRatio <= 0 ||
			r.Entries != r.Rules || r.KernelKiB <= 0 {
			t.Errorf("incomplete result %+v", r)
		}
		if r.Rules == 1 && r.LastRatio != 1 {
			t.Errorf("base ratio %v", r.LastRatio)
		}
		if r.DeltaRules != 3 || len(r.DeltaLastNS) != 3 || len(r.DeltaMissNS) != 3 || r.DeltaLastX <= 0 || r.DeltaMissX <= 0 {
			t.Errorf("incomplete delta measurements %+v", r)
		}
		if len(r.Latency) != 2 || r.Latency[0].Sample != 1 || r.Latency[1].Sample != 64 {
			t.Errorf("latency sampling measurements %+v, want 1 in 1 and 1 in 64", r.Latency)
		}
		for _, l := range r.Latency {
			if len(l.LastNS) != 3 || l.Med <= 0 || l.VsOff <= 0 {
				t.Errorf("incomplete latency sampling measurement %+v", l)
			}
		}
	}
	var b strings.Builder
	WriteTable(&b, res)
	if strings.Count(b.String(), "\n") != 22 {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestRuleSetTextParses(t *testing.T) {
	for _, fam := range []string{"ipv4", "ipv6"} {
		rs, err := rules.Parse("bench", []byte(RuleSetText(1000, fam)), rules.ParseOptions{})
		if err != nil || len(rs.Rules) != 1000 {
			t.Fatalf("%s: %v", fam, err)
		}
	}
}

// TestMicroSpreadRuns: the spread measurement runs on the disjoint and a
// ClassBench-style set, checks its frames in the data plane, fills every
// field; on the ClassBench set, the cache-cold packets too (--cold): each
// timed once by xdpfw's histograms, none past the rule set's worst case.
// Timing values are not judged.
func TestMicroSpreadRuns(t *testing.T) {
	testutil.RequireRoot(t)
	for _, set := range []string{RuleSetDisjoint, RuleSetIPC} {
		cold := 0
		if set == RuleSetIPC {
			cold = 60
		}
		res, err := Micro(MicroOptions{Sizes: []int{200}, Families: []string{"ipv4"}, Rounds: 2, Repeat: 2000, RuleSet: set, Spread: 150, Cold: cold})
		if err != nil {
			t.Fatal(err)
		}
		r := res[0]
		sp := r.Spread
		if sp == nil || sp.K != 150 || len(sp.WarmP50) != 2 || len(sp.SpreadP5) != 2 || sp.DriverWarm.P50 <= 0 ||
			sp.DriverSpread.P50 <= 0 || sp.Spread.P99 < sp.Spread.P50 || r.MaxRules <= 0 || r.BytesPerRule <= 0 || r.RuleSet != set {
			t.Errorf("%s: incomplete result %+v %+v", set, r, sp)
		}
		var b strings.Builder
		WriteSpreadTable(&b, res)
		if !strings.Contains(b.String(), set) {
			t.Errorf("table:\n%s", b.String())
		}
		if cold == 0 {
			if r.Cold != nil {
				t.Errorf("%s: a cold result without --cold", set)
			}
			continue
		}
		c := r.Cold
		if c == nil || c.Packets != cold || c.InProgram.P50 <= 0 || c.InProgram.Max < c.InProgram.P999 || c.Interrupted > cold ||
			(c.Interrupted < cold) != (c.Clean.P50 > 0) || c.Kernel.P50 <= 0 || c.Empty.P50 <= 0 || c.Unsampled.P50 <= 0 ||
			c.Warm.P50 <= 0 || c.WorstN < 1 || c.Worst.P50 <= 0 || c.WorstSteps < 1 || c.WorstSteps > c.BoundSteps ||
			c.BoundSteps != r.Tree.Work.Steps() || c.EvictBytes <= 0 {
			t.Errorf("%s: incomplete cold result %+v", set, c)
		}
		b.Reset()
		WriteColdTable(&b, res)
		if !strings.Contains(b.String(), "cache-cold") {
			t.Errorf("cold table:\n%s", b.String())
		}
	}
}
