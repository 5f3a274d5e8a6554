package compile

import (
	"math/rand/v2"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// The Go twin of the data plane's class (the priority roots' trees) agrees
// with the reference (first matching priority rule) on random priority
// tables and packets, and the filter rules' trees are the same with and
// without a priority table.
func TestPriorityTwin(t *testing.T) {
	names := []string{"lo", "eth0", "eth1", "veth0"}
	checked, high, bulk := 0, 0, 0
	for set := range 200 {
		r := rand.New(rand.NewPCG(uint64(set), 0x51))
		rs := rules.RandomRuleSet(r, 1+r.IntN(30))
		rs.Priority = nil
		for range 1 + r.IntN(12) {
			rs.Priority = append(rs.Priority, rules.RandomPriorityRule(r))
		}
		if r.IntN(3) == 0 {
			rs.PriorityPolicy = rules.VerdictHigh
		}
		back, err := rules.Parse("priority", []byte(rs.String()), rules.ParseOptions{})
		if err != nil {
			t.Fatalf("set %d does not parse back: %v\n%s", set, err, rs)
		}
		tb := compileTest(t, back)
		near := &rules.RuleSet{Rules: back.Priority}
		for range 300 {
			p := randomRefPacket(r, near, names)
			p.FirstFragment = r.IntN(40) == 0
			want := PriorityOf(back, p)
			if got := tb.Priority(&p, testDev(&p)); got != want {
				k := KeyOf(&p, testDev(&p))
				for _, g := range tb.PrioRoots[0].Groups {
					if g != NoTree {
						leaf, _ := tb.walk(g, &k)
						t.Logf("tree %x: candidates %v", g, tb.LeafEntries(leaf))
					}
				}
				for j := range tb.Prio {
					e := &tb.Prio[j]
					t.Logf("entry %d: action %v matches %v exact %v", len(tb.Entries)+j, e.Action, e.Matches(&p, testDev(&p), nil), tb.Ranges[len(tb.Entries)+j].Exact)
				}
				t.Fatalf("set %d: the twin says %v, the reference %v\npacket %+v\n%s", set, got, want, p, back)
			}
			checked++
			if want == rules.VerdictHigh {
				high++
			} else {
				bulk++
			}
		}
		// the rules' own classification is untouched
		plain := *back
		plain.Priority, plain.PriorityPolicy = nil, 0
		tp := compileTest(t, &plain)
		if len(tp.Entries) != len(tb.Entries) || tp.Roots != tb.Roots && len(tb.Prio) == 0 {
			t.Fatalf("set %d: the priority table changed the rules' entries", set)
		}
		if tp.PrioRoots[0].Flags|tp.PrioRoots[1].Flags != 0 || tb.PrioRoots[0].Flags&RootPrio == 0 {
			t.Fatalf("set %d: priority roots flags %x/%x", set, tp.PrioRoots[0].Flags, tb.PrioRoots[0].Flags)
		}
		p := randomRefPacket(r, back, names)
		if got := tp.Priority(&p, testDev(&p)); got != rules.VerdictHigh {
			t.Fatalf("no priority table: class %v, want HIGH (everything judged where it arrives)", got)
		}
	}
	if high < checked/10 || bulk < checked/10 {
		t.Fatalf("%d packets, %d HIGH, %d BULK: the test checks too little of one class", checked, high, bulk)
	}
	t.Logf("%d packets: %d HIGH, %d BULK", checked, high, bulk)
}
