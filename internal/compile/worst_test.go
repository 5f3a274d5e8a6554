package compile

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestWorkBoundsEveryWalk: for random rule sets, no packet's walk (the
// trees of its root, as the data plane walks them) takes more node steps,
// leaf candidates or whole entry tests than Tables.Work says, and Work is
// within the data plane's structural bound.
func TestWorkBoundsEveryWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 5))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	reached := Work{}
	for set := 0; set < 120; set++ {
		n := 1 + r.IntN(80)
		if set%40 == 39 {
			n = 2000
		}
		rs := rules.RandomRuleSet(r, n)
		tb := compileTest(t, rs)
		w := tb.Stats.Work
		if s := StructuralWork(); w.Trees > s.Trees || w.Levels > s.Levels || w.Candidates > s.Candidates || w.FullTests > w.Candidates {
			t.Fatalf("set %d: work %+v beyond the structural bound %+v", set, w, s)
		}
		if w != tb.Work() {
			t.Fatalf("set %d: Stats.Work %+v, Work() %+v", set, w, tb.Work())
		}
		for k := 0; k < 500; k++ {
			p := randomRefPacket(r, rs, names)
			got := tb.WalkWork(&p, testDev(&p))
			if got.Trees > w.Trees || got.Levels > w.Levels || got.Candidates > w.Candidates || got.FullTests > w.FullTests {
				t.Fatalf("set %d packet %+v: walk took %+v, beyond the computed bound %+v\n%s", set, p, got, w, rs)
			}
			reached.Levels = max(reached.Levels, got.Levels)
			reached.Candidates = max(reached.Candidates, got.Candidates)
		}
	}
	if reached.Levels < 2 || reached.Candidates < 2 {
		t.Fatalf("the random walks reached at most %+v: the test checks nothing of depth or leaves", reached)
	}
}

// TestWorkIsTheBuilderShape: where a root has one tree, Work's levels and
// candidates are the deepest walk and the largest leaf the builder counted
// (TreeStats, from the collapse: an independent count); a LOG rule in the
// leaves counts as a whole entry test, and groups add up.
func TestWorkIsTheBuilderShape(t *testing.T) {
	var disjoint, corner strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&disjoint, "-A INPUT -s 10.%d.%d.0/24 -p udp --dport %d -j DROP\n", i/256, i%256, 1000+i)
	}
	for i := 0; i < MaxLeaf+16; i++ { // no field separates them (TestCornerOverlap)
		fmt.Fprintf(&corner, "-A INPUT -p udp --sport 0:%d --dport 0:%d -j %s\n", 1000+7*i, 9000-5*i, []string{"ACCEPT", "DROP"}[i%2])
	}
	for _, c := range []struct {
		name, text string
		full       bool // the largest leaf holds a LOG entry
	}{
		{"disjoint", disjoint.String(), false},
		{"corner", corner.String(), false},
		{"corner+log", "-A INPUT -p udp -j LOG\n" + corner.String(), true},
	} {
		tb := compileTest(t, parse(t, c.text))
		w := tb.Stats.Work
		if w.Trees != 1 { // one per root (the corner sets have IPv6's too)
			t.Fatalf("%s: %+v: the test needs one tree per root", c.name, w)
		}
		if w.Levels != tb.Stats.MaxDepth || w.Candidates != tb.Stats.MaxLeaf {
			t.Errorf("%s: work %+v, builder: depth %d, leaf %d", c.name, w, tb.Stats.MaxDepth, tb.Stats.MaxLeaf)
		}
		if (w.FullTests > 0) != c.full || w.Where != "INPUT IPv4" {
			t.Errorf("%s: work %+v: whole entry tests > 0 should be %v, at INPUT IPv4", c.name, w, c.full)
		}
	}

	var cross strings.Builder // sources against ports: a tree per group (TestOneTreeOrGroups)
	for i := 0; i < 250; i++ {
		fmt.Fprintf(&cross, "-A INPUT -s 10.1.%d.7 -j DROP\n-A INPUT -p tcp --dport %d -j ACCEPT\n", i, 1000+i)
	}
	tb := compileTest(t, parse(t, cross.String()))
	memo := map[uint32]treeWork{}
	var want Work
	for _, g := range tb.Roots[int(rules.ChainInput)*2].Groups {
		if g != NoTree {
			tw := tb.treeWork(g, memo)
			want.Trees, want.Levels, want.Candidates = want.Trees+1, want.Levels+tw.levels, want.Candidates+tw.cands
		}
	}
	if w := tb.Stats.Work; want.Trees != 2 || w.Trees != 2 || w.Levels != want.Levels || w.Candidates != want.Candidates {
		t.Errorf("cross: work %+v, want the two IPv4 trees' sum %+v", w, want)
	}
}
