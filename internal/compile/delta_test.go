package compile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
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
				if tb.Entries[i].Matches(&p, testIfaces[p.InIface], nil) {
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

// editRun applies random edits to a random rule set through an Overlay,
// keeps the edited rule set independently (as the firewall's full path
// would: insert into, remove from the rule list), and after every edit
// requires the Go twin of the data plane (main tables + delta) to decide
// exactly as the reference matcher on the edited rule set. When the delta
// is full, or now and then, it folds the edits into a new main generation
// and requires that to equal a full compilation of the edited rule set.
type editRun struct {
	t       *testing.T
	r       *rand.Rand
	rs      *rules.RuleSet // edited independently
	ids     []uint32
	nextID  uint32
	tables  *Tables
	o       *Overlay
	d       *Delta
	checked int
	folds   int
	edits   int
}

func newEditRun(t *testing.T, r *rand.Rand, rs *rules.RuleSet) *editRun {
	e := &editRun{t: t, r: r, rs: rs, ids: ids(len(rs.Rules)), nextID: uint32(FirstRuleID + len(rs.Rules))}
	e.build()
	return e
}

// build compiles the edited rule set in full and starts a fresh overlay.
func (e *editRun) build() {
	tb, _, err := Compile(Input{RuleSet: e.rs, IDs: e.ids, Ifaces: testIfaces})
	if err != nil {
		e.t.Fatalf("compile: %v\n%s", err, e.rs)
	}
	chains := make([]rules.Chain, len(e.rs.Rules))
	for i := range chains {
		chains[i] = e.rs.Rules[i].Chain
	}
	e.tables, e.o, e.d = tb, NewOverlay(tb, e.ids, chains), nil
}

// fold rebuilds main from the overlay, as the control plane does, and
// checks the result against a full compilation.
func (e *editRun) fold() {
	e.t.Helper()
	entries, refs, spans := e.o.Fold()
	tb, err := Build(entries, e.rs, Limits{})
	if err != nil {
		e.t.Fatal(err)
	}
	tb.Spans = spans
	full, _, err := Compile(Input{RuleSet: e.rs, IDs: e.ids, Ifaces: testIfaces})
	if err != nil {
		e.t.Fatal(err)
	}
	if !reflect.DeepEqual(tb.Entries, full.Entries) || !reflect.DeepEqual(tb.Spans, full.Spans) ||
		tb.Roots != full.Roots || tb.ChainEnd != full.ChainEnd {
		e.t.Fatalf("folding the edits differs from compiling the edited rule set\n%s", e.rs)
	}
	ids, chains := make([]uint32, len(refs)), make([]rules.Chain, len(refs))
	for i, r := range refs {
		ids[i], chains[i] = e.o.ID(r), e.o.Chain(r)
	}
	if !slices.Equal(ids, e.ids) {
		e.t.Fatalf("fold: ids in force %v, want %v", ids, e.ids)
	}
	e.tables, e.o, e.d = tb, NewOverlay(tb, ids, chains), nil
	e.folds++
}

// chainIndex is the rule-set index of rule n (1-based) of chain c, or
// len(rs.Rules) past its end.
func chainIndex(rs *rules.RuleSet, c rules.Chain, n int) int {
	k := 0
	for i, r := range rs.Rules {
		if r.Chain == c {
			if k++; k == n {
				return i
			}
		}
	}
	return len(rs.Rules)
}

// edit makes one random edit: insert, append, delete or replace.
func (e *editRun) edit() {
	e.t.Helper()
	c := rules.Chain(e.r.IntN(2))
	size := e.o.ChainLen(c)
	kind := e.r.IntN(4)
	if size == 0 {
		kind = 0
	}
	add := func(n int) {
		rule := rules.RandomRule(e.r)
		rule.Chain = c
		id := e.nextID
		e.nextID++
		ents, _, err := RuleEntries(&rule, id, testIfaces, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := e.o.Insert(n, Addition{Rule: rule, ID: id, Entries: ents}); err != nil {
			e.t.Fatal(err)
		}
		i := chainIndex(e.rs, c, n)
		e.rs.Rules = slices.Insert(e.rs.Rules, i, rule)
		e.ids = slices.Insert(e.ids, i, id)
	}
	del := func(n int) {
		ref, ok := e.o.Nth(c, n)
		if !ok {
			e.t.Fatalf("no rule %d of %s (it has %d)", n, c, size)
		}
		i := chainIndex(e.rs, c, n)
		if e.o.ID(ref) != e.ids[i] {
			e.t.Fatalf("rule %d of %s: overlay has id %d, the rule set %d", n, c, e.o.ID(ref), e.ids[i])
		}
		e.o.Remove(ref)
		e.rs.Rules = slices.Delete(e.rs.Rules, i, i+1)
		e.ids = slices.Delete(e.ids, i, i+1)
	}
	switch kind {
	case 0: // insert anywhere
		add(1 + e.r.IntN(size+1))
	case 1: // append
		add(size + 1)
	case 2:
		del(1 + e.r.IntN(size))
	case 3: // replace
		n := 1 + e.r.IntN(size)
		del(n)
		add(n)
	}
	e.edits++
	d, err := e.o.Delta()
	if errors.Is(err, ErrDeltaFull) {
		e.fold()
		return
	}
	if err != nil {
		e.t.Fatal(err)
	}
	e.d = d
}

// check compares n random packets against the reference matcher.
func (e *editRun) check(n int, what string) {
	e.t.Helper()
	var got []uint32
	for _, r := range e.o.InForce() {
		got = append(got, e.o.ID(r))
	}
	if !slices.Equal(got, e.ids) {
		e.t.Fatalf("%s: ids in force %v, want %v", what, got, e.ids)
	}
	names := []string{"lo", "eth0", "eth1", "veth0"}
	for k := 0; k < n; k++ {
		p := randomRefPacket(e.r, e.rs, names)
		want := Decide(e.rs, p)
		wantID := PolicyID(uint8(p.Chain), p.Src.Is6())
		if want.Rule >= 0 {
			wantID = e.ids[want.Rule]
		}
		wantAct := map[rules.Verdict]Action{rules.VerdictAccept: ActAccept, rules.VerdictDrop: ActDrop, rules.VerdictReject: ActReject}[want.Verdict]
		got := e.tables.Outcome(e.d, &p, testIfaces[p.InIface])
		if got.RuleID != wantID || got.Action != wantAct || got.Reject != want.Reject {
			e.t.Fatalf("%s: packet %+v\n  data plane (delta %d entries, %d dead): id %d %s\n  reference: id %d %s\nedited rule set:\n%s",
				what, p, len(e.d.Entries), len(e.d.Dead), got.RuleID, got.Action, wantID, want.Verdict, e.rs)
		}
		e.checked++
	}
}

// TestDeltaAgreesWithReference: random rule sets get random edits through
// the delta stage; the main tables plus the delta (walked in Go as the
// data plane does) decide as the reference matcher on the edited rule
// set, before and after folding; folding equals compiling.
func TestDeltaAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	var checked, folds, edits int
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
		e := newEditRun(t, r, rs)
		for k := 0; k < 12; k++ {
			e.edit()
			e.check(300, fmt.Sprintf("set %d edit %d", set, k))
		}
		e.fold()
		e.check(300, fmt.Sprintf("set %d folded", set))
		checked, folds, edits = checked+e.checked, folds+e.folds, edits+e.edits
	}
	t.Logf("%d edits (%d folds), %d packets agree with the reference", edits, folds, checked)
}

// TestDeleteCoveringRule is the trap of dominance pruning: a rule that
// covers a leaf's whole region cuts the leaf's list after it, so the rules
// behind it are in no leaf. Deleting it must let its packets fall to them.
func TestDeleteCoveringRule(t *testing.T) {
	rs := parse(t, `-P INPUT ACCEPT
-A INPUT -s 10.0.0.0/8 -j DROP
-A INPUT -s 10.1.0.0/16 -p tcp -j REJECT
-A INPUT -s 10.1.2.0/24 -j ACCEPT
-A INPUT -p udp --dport 53 -j DROP
-A INPUT -s 192.168.0.0/16 -j DROP
`)
	e := newEditRun(t, rand.New(rand.NewPCG(1, 1)), rs)
	p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Proto: 17, L4: true, DPort: 53}
	p.Src, p.Dst = mustAddr("10.1.2.3"), mustAddr("10.9.9.9")
	if out := e.tables.Outcome(nil, &p, 2); out.RuleID != FirstRuleID {
		t.Fatalf("before: decided by %d, want the first rule", out.RuleID)
	}
	ref, _ := e.o.Nth(rules.ChainInput, 1)
	e.o.Remove(ref)
	d, err := e.o.Delta()
	if err != nil {
		t.Fatal(err)
	}
	// the /16 REJECT is tcp only: the udp packet falls to the /24 ACCEPT
	if out := e.tables.Outcome(d, &p, 2); out.RuleID != FirstRuleID+2 || out.Action != ActAccept {
		t.Errorf("after deleting rule 1: decided by %d %s, want rule 3 (ACCEPT)", out.RuleID, out.Action)
	}
	if len(d.Dead) != 1 || len(d.Entries) != 3 {
		t.Errorf("delta: %d dead, %d copies; want 1 dead and the 3 rules overlapping 10/8: %+v", len(d.Dead), len(d.Entries), d.Pos)
	}
	p.Src = mustAddr("10.200.0.1")
	if out := e.tables.Outcome(d, &p, 2); out.RuleID != FirstRuleID+3 {
		t.Errorf("10.200.0.1 udp/53: decided by %d, want rule 4", out.RuleID)
	}
	p.Src, p.DPort = mustAddr("10.200.0.1"), 54
	if out := e.tables.Outcome(d, &p, 2); out.RuleID != PolicyID(0, false) {
		t.Errorf("10.200.0.1 udp/54: decided by %d, want the policy", out.RuleID)
	}
}

// TestDeltaPositions: an added rule beats the rules after it and loses to
// those before it, at every position, and against the policy; rules added
// at the same place keep their order.
func TestDeltaPositions(t *testing.T) {
	rs := parse(t, `-P INPUT DROP
-A INPUT -p udp --dport 1 -j ACCEPT
-A INPUT -p udp --dport 2 -j ACCEPT
-A INPUT -p udp --dport 3 -j ACCEPT
`)
	e := newEditRun(t, rand.New(rand.NewPCG(1, 1)), rs)
	add := func(n int, text string) uint32 {
		t.Helper()
		rule := parse(t, text).Rules[0]
		id := e.nextID
		e.nextID++
		ents, _, err := RuleEntries(&rule, id, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.o.Insert(n, Addition{Rule: rule, ID: id, Entries: ents}); err != nil {
			t.Fatal(err)
		}
		if e.d, err = e.o.Delta(); err != nil {
			t.Fatal(err)
		}
		return id
	}
	port := func(dport uint16) uint32 {
		p := RefPacket{Chain: rules.ChainInput, Proto: 17, L4: true, DPort: dport, Src: mustAddr("10.0.0.1"), Dst: mustAddr("10.0.0.2")}
		return e.tables.Outcome(e.d, &p, 1).RuleID
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
	if port(9) != c || port(3) != FirstRuleID+2 {
		t.Errorf("appended: port 9 -> %d (want %d), port 3 -> %d (want rule 3)", port(9), c, port(3))
	}
	if err := e.o.Insert(8, Addition{Rule: parse(t, "-A INPUT -j ACCEPT").Rules[0]}); err == nil {
		t.Error("position 8 of a chain of 6 rules: want an error")
	}
	var got []uint32
	for _, r := range e.o.InForce() {
		got = append(got, e.o.ID(r))
	}
	want := []uint32{FirstRuleID, b, a, FirstRuleID + 1, FirstRuleID + 2, c}
	if !slices.Equal(got, want) {
		t.Errorf("rules in force %v, want %v", got, want)
	}
}

// TestDeltaFastRules: the conntrack fast rule follows the edits: an added
// rule ahead of it takes its packets, deleting it hands them on, and a
// first rule testing the state turns conntrack on.
func TestDeltaFastRules(t *testing.T) {
	rs := parse(t, `-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A INPUT -m conntrack --ctstate ESTABLISHED -j DROP
-A INPUT -p tcp --dport 22 -j ACCEPT
`)
	e := newEditRun(t, rand.New(rand.NewPCG(1, 1)), rs)
	if root := e.tables.Roots[0]; root.FastRuleID != FirstRuleID || root.FastStates != 1<<CTEstablished|1<<CTRelated {
		t.Fatalf("main fast rule %+v", root)
	}
	ref, _ := e.o.Nth(rules.ChainInput, 1)
	e.o.Remove(ref)
	d, err := e.o.Delta()
	if err != nil {
		t.Fatal(err)
	}
	if root := d.Roots[0]; root.FastRuleID != FirstRuleID+1 || root.FastStates != 1<<CTEstablished || root.FastAction != ActDrop {
		t.Errorf("after deleting the fast rule: %+v, want rule 2 for ESTABLISHED", root)
	}
	rule := parse(t, "-A INPUT -s 10.0.0.0/8 -j ACCEPT").Rules[0]
	ents, _, _ := RuleEntries(&rule, 99, nil, nil)
	if err := e.o.Insert(1, Addition{Rule: rule, ID: 99, Entries: ents}); err != nil {
		t.Fatal(err)
	}
	if d, err = e.o.Delta(); err != nil {
		t.Fatal(err)
	}
	if root := d.Roots[0]; root.FastStates != 0 {
		t.Errorf("a rule ahead of it that matches some established packets: fast rule %+v, want none", root)
	}

	plain := newEditRun(t, rand.New(rand.NewPCG(1, 1)), parse(t, "-A INPUT -p tcp -j ACCEPT\n"))
	rule = parse(t, "-A INPUT -m conntrack --ctstate INVALID -j DROP").Rules[0]
	ents, _, _ = RuleEntries(&rule, 99, nil, nil)
	if err := plain.o.Insert(1, Addition{Rule: rule, ID: 99, Entries: ents}); err != nil {
		t.Fatal(err)
	}
	if d, err = plain.o.Delta(); err != nil {
		t.Fatal(err)
	}
	if d.Roots[0].Flags&RootCT == 0 || d.Roots[0].FastRuleID != 99 || d.Roots[0].FastStates != 1<<CTInvalid {
		t.Errorf("first ctstate rule added: root %+v, want conntrack on and the rule fast for INVALID", d.Roots[0])
	}
}

// TestDeltaFull: the delta holds DeltaMax entries; one more is refused.
func TestDeltaFull(t *testing.T) {
	e := newEditRun(t, rand.New(rand.NewPCG(1, 1)), parse(t, "-A INPUT -p tcp -j ACCEPT\n"))
	for i := 0; i <= DeltaMax; i++ {
		rule := parse(t, fmt.Sprintf("-A INPUT -p udp --dport %d -j DROP", i+1)).Rules[0]
		ents, _, _ := RuleEntries(&rule, uint32(100+i), nil, nil)
		if err := e.o.Insert(1, Addition{Rule: rule, ID: uint32(100 + i), Entries: ents}); err != nil {
			t.Fatal(err)
		}
		_, err := e.o.Delta()
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
