package bench

import (
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestSpreadFramesHitTheirRules: every frame aimFrames aims at a rule is
// decided by that rule according to the reference matcher (not the Go
// twin aimFrames picks them with), the rules are distinct, and nearly
// every rule is reached.
func TestSpreadFramesHitTheirRules(t *testing.T) {
	const n = 1500
	for _, c := range []struct{ set, family string }{
		{RuleSetDisjoint, "ipv4"}, {RuleSetDisjoint, "ipv6"}, {RuleSetACL, "ipv4"}, {RuleSetFW, "ipv4"}, {RuleSetIPC, "ipv4"},
	} {
		brs, err := benchRules(c.set, n, c.family)
		if err != nil {
			t.Fatal(err)
		}
		comp, err := compileText(rulesText(brs), n, rules.ParseOptions{})
		if err != nil {
			t.Fatalf("%s %s: %v", c.set, c.family, err)
		}
		aims, unreachable := aimFrames(brs, comp, n, c.family)
		if len(aims)+unreachable != n || len(aims) < n*95/100 {
			t.Errorf("%s %s: %d frames, %d rules unreachable, of %d", c.set, c.family, len(aims), unreachable, n)
		}
		seen := map[int]bool{}
		for _, a := range aims {
			if seen[a.rule] {
				t.Fatalf("%s %s: rule %d aimed at twice", c.set, c.family, a.rule)
			}
			seen[a.rule] = true
			if len(a.frame) != benchFrameLen {
				t.Fatalf("%s %s: frame of %d bytes", c.set, c.family, len(a.frame))
			}
			p, err := packet.Decode(a.frame)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := compile.Evaluate(comp.rs, compile.RefPacketOf(&p, "")); got != a.rule {
				t.Fatalf("%s %s: frame aimed at rule %d is decided by rule %d\n%v", c.set, c.family, a.rule, got, p)
			}
		}
		// in random order, not rule order
		if len(aims) > 2 && aims[0].rule < aims[1].rule && aims[1].rule < aims[2].rule {
			t.Errorf("%s %s: frames in rule order %d %d %d", c.set, c.family, aims[0].rule, aims[1].rule, aims[2].rule)
		}
	}
}

// TestClassBenchRuleSets: the generated sets are deterministic, parse,
// and overlap as claimed: a share of their rules lies inside another
// rule's box (nesting), with several prefix lengths and port ranges.
func TestClassBenchRuleSets(t *testing.T) {
	const n = 2000
	for _, c := range []struct {
		set      string
		min, max float64 // share of rules nested in another
	}{{RuleSetACL, 0.25, 0.5}, {RuleSetFW, 0.7, 0.95}, {RuleSetIPC, 0.25, 0.5}} {
		set := c.set
		a, b := rulesText(classBenchRules(set, n)), rulesText(classBenchRules(set, n))
		if a != b {
			t.Fatalf("%s: two generations differ", set)
		}
		rs, err := rules.Parse(set, []byte(a), rules.ParseOptions{})
		if err != nil || len(rs.Rules) != n {
			t.Fatalf("%s: %v", set, err)
		}
		brs := classBenchRules(set, n)
		nested, ranges := 0, 0
		lens := map[int]bool{}
		for i := range brs {
			for j := range brs {
				if i != j && brs[j].contains(&brs[i]) && brs[i] != brs[j] {
					nested++
					break
				}
			}
			if r := brs[i].dport; r[0] != r[1] && r != anyPort {
				ranges++
			}
			if brs[i].dst.IsValid() {
				lens[brs[i].dst.Bits()] = true
			}
			if !brs[i].src.IsValid() && !brs[i].dst.IsValid() {
				t.Fatalf("%s: rule %d names neither source nor destination", set, i)
			}
		}
		frac := float64(nested) / n
		t.Logf("%s: %.0f%% of rules nested in another, %d port ranges, %d destination prefix lengths", set, 100*frac, ranges, len(lens))
		if frac < c.min || frac > c.max {
			t.Errorf("%s: %.2f of the rules nested in another, want %.2f to %.2f", set, frac, c.min, c.max)
		}
		if ranges < n/20 || len(lens) < 8 {
			t.Errorf("%s: %d port ranges, %d destination prefix lengths", set, ranges, len(lens))
		}
	}
	if rulesText(classBenchRules(RuleSetACL, n)) == rulesText(classBenchRules(RuleSetFW, n)) {
		t.Error("the ACL and FW sets are the same")
	}
}
