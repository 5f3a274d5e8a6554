package compile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestOverlapsIsSound: whenever one packet matches two entries, Overlaps
// says they overlap (the copies of a deletion depend on it).
func TestOverlapsIsSound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	pairs, disjoint := 0, 0
	for set := 0; set < 200; set++ {
		rs := rules.RandomRuleSet(r, 40)
		tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
		if err != nil {
			t.Fatal(err)
		}
		for i := range tb.Entries {
			for j := range tb.Entries {
				if !Overlaps(&tb.Entries[i], &tb.Entries[j]) {
					disjoint++
				}
			}
		}
		for k := 0; k < 1500; k++ {
			p := randomRefPacket(r, rs, names)
			var hit []int
			for i := range tb.Entries {
				if tb.Entries[i].Matches(&p, testDev(&p), nil) {
					hit = append(hit, i)
				}
			}
			for _, i := range hit {
				for _, j := range hit {
					pairs++
					if !Overlaps(&tb.Entries[i], &tb.Entries[j]) {
						t.Fatalf("packet %+v matches both\n  %s\n  %s\nbut Overlaps says they are disjoint",
							p, rs.Rules[tb.Entries[i].RuleID-FirstRuleID], rs.Rules[tb.Entries[j].RuleID-FirstRuleID])
					}
				}
			}
		}
	}
	if disjoint == 0 {
		t.Fatal("Overlaps never told two entries apart: the test checks nothing")
	}
	t.Logf("%d matching pairs overlap; %d entry pairs found disjoint", pairs, disjoint)
}

// checkSim compares n random packets, decided by the Go twin of the data
// plane (main tables + delta), against the reference matcher on the
// edited rule set.
func checkSim(t *testing.T, r *rand.Rand, s *EditSim, n int, what string) {
	t.Helper()
	if err := s.CheckOrder(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	names := []string{"lo", "eth0", "eth1", "veth0"}
	for k := 0; k < n; k++ {
		p := randomRefPacket(r, s.RuleSet, names)
		want := Decide(s.RuleSet, p)
		wantID := PolicyID(uint8(p.Chain), p.Src.Is6())
		if want.Rule >= 0 {
			wantID = s.IDs[want.Rule]
		}
		wantAct := map[rules.Verdict]Action{rules.VerdictAccept: ActAccept, rules.VerdictDrop: ActDrop, rules.VerdictReject: ActReject}[want.Verdict]
		got := s.Tables.Outcome(s.Delta, &p, testDev(&p))
		if got.RuleID != wantID || got.Action != wantAct || got.Reject != want.Reject || got.Log != want.Log {
			t.Fatalf("%s: packet %+v\n  data plane (delta %+v): id %d %s log %v\n  reference: id %d %s log %v\nedited rule set:\n%s",
				what, p, s.Delta, got.RuleID, got.Action, got.Log, wantID, want.Verdict, want.Log, s.RuleSet)
		}
	}
}

// TestDeltaAgreesWithReference: random rule sets get random edits
// (insert, append, delete, replace) through the delta stage; the main
// tables plus the delta (walked in Go as the data plane does) decide as
// the reference matcher on the edited rule set, before and after folding;
// folding equals compiling the edited rule set.
func TestDeltaAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	var folds, edits, deltas, full int
	for set := 0; set < 150; set++ {
		n := 1 + r.IntN(40)
		if set%50 == 49 {
			n = 800
		}
		rs := rules.RandomRuleSet(r, n)
		if set%3 == 0 {
			// stateful sets: fast rules for the edits to move
			rs.Rules = append(statefulRules(t, r), rs.Rules...)
		}
		// Rule sets that log are compiled in full (ErrDeltaLogs): every
		// other set and its edits log nothing, so the delta stage is used.
		quiet := set%2 == 0
		if quiet {
			for i := range rs.Rules {
				rs.Rules[i].Target = quietTarget(rs.Rules[i].Target)
			}
		}
		s, err := NewEditSim(Input{RuleSet: rs, Ifaces: testIfaces})
		if err != nil {
			t.Fatal(err)
		}
		if quiet {
			s.NewRule = func(r *rand.Rand) rules.Rule {
				x := rules.RandomRule(r)
				x.Target = quietTarget(x.Target)
				x.Text = x.Spec()
				return x
			}
		}
		for k := 0; k < 12; k++ {
			logged := Logging(s.RuleSet)
			what, folded, err := s.Edit(r)
			if err != nil {
				t.Fatalf("set %d edit %d (%s): %v", set, k, what, err)
			}
			switch {
			case logged || Logging(s.RuleSet):
				full++
				if !folded || s.Delta != nil {
					t.Fatalf("set %d edit %d (%s): a rule set that logs went into the delta stage", set, k, what)
				}
			case folded:
				folds++
			default:
				deltas++
			}
			edits++
			checkSim(t, r, s, 300, fmt.Sprintf("set %d edit %d (%s)", set, k, what))
		}
		if err := s.Fold(); err != nil {
			t.Fatalf("set %d: %v\n%s", set, err, s.RuleSet)
		}
		checkSim(t, r, s, 300, fmt.Sprintf("set %d folded", set))
	}
	if deltas == 0 || full == 0 {
		t.Fatalf("%d edits through the delta stage, %d compiled in full: the test missed a path", deltas, full)
	}
	t.Logf("%d edits (%d through the delta stage, %d folded when the delta was full, %d compiled in full as a rule logs), %d packets agree with the reference",
		edits, deltas, folds, full, 150*13*300)
}

// quietTarget is t without logging: -j LOG becomes DROP, --log goes.
func quietTarget(t rules.Target) rules.Target {
	if t.Verdict == rules.VerdictLog {
		return rules.Target{Verdict: rules.VerdictDrop}
	}
	return rules.Target{Verdict: t.Verdict, RejectWith: t.RejectWith}
}

// newSim is NewEditSim of a rule text.
func newSim(t *testing.T, text string) *EditSim {
	t.Helper()
	s, err := NewEditSim(Input{RuleSet: parse(t, text), Ifaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDeleteCoveringRule is the trap of dominance pruning: a rule that
// covers a leaf's whole region cuts the leaf's list after it, so the rules
// behind it are in no leaf. Deleting it must let its packets fall to them.
func TestDeleteCoveringRule(t *testing.T) {
	rs := `-P INPUT ACCEPT
-A INPUT -s 10.0.0.0/8 -j DROP
-A INPUT -s 10.1.0.0/16 -p tcp -j REJECT
-A INPUT -s 10.1.2.0/24 -j ACCEPT
-A INPUT -p udp --dport 53 -j DROP
-A INPUT -s 192.168.0.0/16 -j DROP
`
	e := newSim(t, rs)
	p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Proto: 17, L4: true, DPort: 53}
	p.Src, p.Dst = mustAddr("10.1.2.3"), mustAddr("10.9.9.9")
	if out := e.Tables.Outcome(nil, &p, Dev{In: 2}); out.RuleID != FirstRuleID {
		t.Fatalf("before: decided by %d, want the first rule", out.RuleID)
	}
	if err := e.Delete(rules.ChainInput, 1); err != nil {
		t.Fatal(err)
	}
	d, err := e.Overlay.Delta()
	if err != nil {
		t.Fatal(err)
	}
	// the /16 REJECT is tcp only: the udp packet falls to the /24 ACCEPT
	if out := e.Tables.Outcome(d, &p, Dev{In: 2}); out.RuleID != FirstRuleID+2 || out.Action != ActAccept {
		t.Errorf("after deleting rule 1: decided by %d %s, want rule 3 (ACCEPT)", out.RuleID, out.Action)
	}
	if len(d.Dead) != 1 || len(d.Entries) != 3 {
		t.Errorf("delta: %d dead, %d copies; want 1 dead and the 3 rules overlapping 10/8: %+v", len(d.Dead), len(d.Entries), d.Pos)
	}
	p.Src = mustAddr("10.200.0.1")
	if out := e.Tables.Outcome(d, &p, Dev{In: 2}); out.RuleID != FirstRuleID+3 {
		t.Errorf("10.200.0.1 udp/53: decided by %d, want rule 4", out.RuleID)
	}
	p.Src, p.DPort = mustAddr("10.200.0.1"), 54
	if out := e.Tables.Outcome(d, &p, Dev{In: 2}); out.RuleID != PolicyID(0, false) {
		t.Errorf("10.200.0.1 udp/54: decided by %d, want the policy", out.RuleID)
	}
}

// TestDeltaPositions: an added rule beats the rules after it and loses to
// those before it, at every position, and against the policy; rules added
// at the same place keep their order.
func TestDeltaPositions(t *testing.T) {
	e := newSim(t, `-P INPUT DROP
-A INPUT -p udp --dport 1 -j ACCEPT
-A INPUT -p udp --dport 2 -j ACCEPT
-A INPUT -p udp --dport 3 -j ACCEPT
`)
	add := func(n int, text string) uint32 {
		t.Helper()
		if err := e.Insert(n, parse(t, text).Rules[0]); err != nil {
			t.Fatal(err)
		}
		var err error
		if e.Delta, err = e.Overlay.Delta(); err != nil {
			t.Fatal(err)
		}
		return e.IDs[n-1]
	}
	port := func(dport uint16) uint32 {
		p := RefPacket{Chain: rules.ChainInput, Proto: 17, L4: true, DPort: dport, Src: mustAddr("10.0.0.1"), Dst: mustAddr("10.0.0.2")}
		return e.Tables.Outcome(e.Delta, &p, Dev{In: 1}).RuleID
	}
	a := add(2, "-A INPUT -p udp --dport 1:2 -j DROP") // between rule 1 and 2
	if port(1) != FirstRuleID || port(2) != a {
		t.Errorf("inserted at 2: port 1 -> %d (want rule 1), port 2 -> %d (want the new rule %d)", port(1), port(2), a)
	}
	b := add(2, "-A INPUT -p udp --dport 2 -j REJECT") // before a
	if port(2) != b {
		t.Errorf("inserted at 2 again: port 2 -> %d, want %d", port(2), b)
	}
	c := add(6, "-A INPUT -p udp --dport 9 -j ACCEPT") // appended: beats only the policy
	if port(9) != c || port(3) != FirstRuleID+2 || port(10) != PolicyID(0, false) {
		t.Errorf("appended: port 9 -> %d (want %d), port 3 -> %d (want rule 3), port 10 -> %d (want the policy)",
			port(9), c, port(3), port(10))
	}
	if err := e.Overlay.Insert(8, Addition{Rule: parse(t, "-A INPUT -j ACCEPT").Rules[0]}); err == nil {
		t.Error("position 8 of a chain of 6 rules: want an error")
	}
	want := []uint32{FirstRuleID, b, a, FirstRuleID + 1, FirstRuleID + 2, c}
	if !slices.Equal(e.IDs, want) {
		t.Fatalf("edited ids %v, want %v", e.IDs, want)
	}
	if err := e.CheckOrder(); err != nil {
		t.Error(err)
	}
}

// TestDeltaFastRules: the conntrack fast rule follows the edits: an added
// rule ahead of it takes its packets, deleting it hands them on, and a
// first rule testing the state turns conntrack on.
func TestDeltaFastRules(t *testing.T) {
	e := newSim(t, `-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A INPUT -m conntrack --ctstate ESTABLISHED -j DROP
-A INPUT -p tcp --dport 22 -j ACCEPT
`)
	if root := e.Tables.Roots[0]; root.FastRuleID != FirstRuleID || root.FastStates != 1<<CTEstablished|1<<CTRelated {
		t.Fatalf("main fast rule %+v", root)
	}
	if err := e.Delete(rules.ChainInput, 1); err != nil {
		t.Fatal(err)
	}
	d, err := e.Overlay.Delta()
	if err != nil {
		t.Fatal(err)
	}
	if root := d.Roots[0]; root.FastRuleID != FirstRuleID+1 || root.FastStates != 1<<CTEstablished || root.FastAction != ActDrop {
		t.Errorf("after deleting the fast rule: %+v, want rule 2 for ESTABLISHED", root)
	}
	if err := e.Insert(1, parse(t, "-A INPUT -s 10.0.0.0/8 -j ACCEPT").Rules[0]); err != nil {
		t.Fatal(err)
	}
	if d, err = e.Overlay.Delta(); err != nil {
		t.Fatal(err)
	}
	if root := d.Roots[0]; root.FastStates != 0 {
		t.Errorf("a rule ahead of it that matches some established packets: fast rule %+v, want none", root)
	}

	plain := newSim(t, "-A INPUT -p tcp -j ACCEPT\n")
	if err := plain.Insert(1, parse(t, "-A INPUT -m conntrack --ctstate INVALID -j DROP").Rules[0]); err != nil {
		t.Fatal(err)
	}
	if d, err = plain.Overlay.Delta(); err != nil {
		t.Fatal(err)
	}
	if d.Roots[0].Flags&RootCT == 0 || d.Roots[0].FastRuleID != plain.IDs[0] || d.Roots[0].FastStates != 1<<CTInvalid {
		t.Errorf("first ctstate rule added: root %+v, want conntrack on and the rule fast for INVALID", d.Roots[0])
	}
}

// TestDeltaFull: the delta holds DeltaMax entries; one more is refused.
func TestDeltaFull(t *testing.T) {
	e := newSim(t, "-A INPUT -p tcp -j ACCEPT\n")
	for i := 0; i <= DeltaMax; i++ {
		if err := e.Insert(1, parse(t, fmt.Sprintf("-A INPUT -p udp --dport %d -j DROP", i+1)).Rules[0]); err != nil {
			t.Fatal(err)
		}
		_, err := e.Overlay.Delta()
		if i < DeltaMax && err != nil {
			t.Fatalf("%d entries: %v", i+1, err)
		}
		if i == DeltaMax && !errors.Is(err, ErrDeltaFull) {
			t.Fatalf("%d entries: err %v, want ErrDeltaFull", i+1, err)
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// statefulRules are a few rules testing nothing but the connection state,
// as stateful rule sets start, so that they have fast rules.
func statefulRules(t *testing.T, r *rand.Rand) []rules.Rule {
	lines := []string{
		"-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
		"-A INPUT -m conntrack --ctstate INVALID -j DROP",
		"-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT",
		"-A FORWARD -m conntrack --ctstate RELATED,UNTRACKED -j REJECT",
	}
	var out []rules.Rule
	for _, l := range lines {
		if r.IntN(3) > 0 {
			out = append(out, parse(t, l).Rules[0])
		}
	}
	return out
}

// TestDeltaReadsMSS: a -m tcpmss rule added through the delta stage to a
// generation that had none makes the data plane read TCP's MSS option
// (the delta's roots carry RootMSS), as a rebuild would.
func TestDeltaReadsMSS(t *testing.T) {
	e := newSim(t, "-A INPUT -p udp -j ACCEPT\n")
	for _, r := range e.Tables.Roots {
		if r.Flags&RootMSS != 0 {
			t.Fatal("a generation without -m tcpmss reads the MSS option")
		}
	}
	if err := e.Insert(1, parse(t, "-A INPUT -p tcp -m tcpmss --mss 1:500 -j DROP").Rules[0]); err != nil {
		t.Fatal(err)
	}
	d, err := e.Overlay.Delta()
	if err != nil {
		t.Fatal(err)
	}
	for r, root := range d.Roots {
		if root.Flags&RootMSS == 0 {
			t.Errorf("root %d of the delta: flags %#x, want RootMSS", r, root.Flags)
		}
	}
}
