package bench

import (
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestConntrackBench runs a tiny conntrack benchmark: its probes get the
// verdicts claimed (checked inside), the table fills, every new flow
// offered to the full table is refused, and the known flow still passes.
// Times are not judged.
func TestConntrackBench(t *testing.T) {
	testutil.RequireRoot(t)
	res, err := Conntrack(CTOptions{Sizes: []int{3, 50}, Flows: 40, TableMax: 128})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		if r.Refused != 40 {
			t.Errorf("%d rules: %d of 40 new flows refused with the table full", r.Rules, r.Refused)
		}
		if r.Established <= 0 || r.NewAccepted <= 0 || r.NewDropped <= 0 || r.FullEstablished <= 0 || r.Floor <= 0 {
			t.Errorf("%d rules: a measurement is missing: %+v", r.Rules, r)
		}
	}
}
