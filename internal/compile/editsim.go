package compile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// EditSim drives random single-rule edits through an Overlay for the
// differential tests (here, against the Go twin; in internal/datapath,
// against the data plane). It keeps the edited rule set independently,
// as the full path would (inserting into and removing from the rule
// list), so the tests can hold the delta stage to the reference matcher
// on exactly that rule set. Like the control plane, it compiles a rule
// set in full instead when a rule before or after the edit logs
// (ErrDeltaLogs).
type EditSim struct {
	RuleSet *rules.RuleSet // the edited rule set
	IDs     []uint32       // its counter ids
	Tables  *Tables        // the main generation
	Overlay *Overlay
	Delta   *Delta // the delta stage of the edits since Tables (nil: none)
	Ifaces  map[string]uint32
	// LogRate and LogBurst are Input's (the default log budget).
	LogRate  rules.LogRate
	LogBurst uint32
	// NewRule makes the rules Edit adds (nil: rules.RandomRule).
	NewRule func(*rand.Rand) rules.Rule
	nextID  uint32
}

// NewEditSim compiles in.RuleSet (ids from FirstRuleID; in.Ifaces, and
// in.LogRate and in.LogBurst for the log budgets) with no edits.
func NewEditSim(in Input) (*EditSim, error) {
	rs := in.RuleSet
	s := &EditSim{RuleSet: rs, Ifaces: in.Ifaces, IDs: make([]uint32, len(rs.Rules)), LogRate: in.LogRate, LogBurst: in.LogBurst}
	for i := range s.IDs {
		s.IDs[i] = uint32(FirstRuleID + i)
	}
	s.nextID = uint32(FirstRuleID + len(rs.Rules))
	if err := s.compileFull(); err != nil {
		return nil, err
	}
	return s, nil
}

// compileFull compiles the edited rule set into new main tables with no
// edits: the full path.
func (s *EditSim) compileFull() error {
	t, err := s.compile()
	if err != nil {
		return err
	}
	s.Tables, s.Overlay, s.Delta = t, NewOverlay(t, s.IDs, s.chains()), nil
	return nil
}

func (s *EditSim) compile() (*Tables, error) {
	t, _, err := Compile(Input{RuleSet: s.RuleSet, IDs: s.IDs, Ifaces: s.Ifaces, LogRate: s.LogRate, LogBurst: s.LogBurst})
	return t, err
}

func (s *EditSim) chains() []rules.Chain {
	out := make([]rules.Chain, len(s.RuleSet.Rules))
	for i := range out {
		out[i] = s.RuleSet.Rules[i].Chain
	}
	return out
}

// Fold rebuilds the main generation from the overlay, as the control
// plane does, and checks that it equals compiling the edited rule set. A
// rule set that logs is compiled in full, as the control plane does
// (Build makes no log budgets).
func (s *EditSim) Fold() error {
	if Logging(s.RuleSet) {
		return s.compileFull()
	}
	entries, refs, spans := s.Overlay.Fold()
	t, _, err := Build(entries, s.RuleSet, Names{Attached: s.Ifaces}, nil, Limits{})
	if err != nil {
		return err
	}
	t.Spans = spans
	full, err := s.compile()
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(t.Entries, full.Entries) || !reflect.DeepEqual(t.Spans, full.Spans) ||
		t.Roots != full.Roots || t.ChainEnd != full.ChainEnd || !reflect.DeepEqual(t.Logs, full.Logs) {
		return fmt.Errorf("folding the edits differs from compiling the edited rule set")
	}
	ids := make([]uint32, len(refs))
	for i, r := range refs {
		ids[i] = s.Overlay.ID(r)
	}
	if !slices.Equal(ids, s.IDs) {
		return fmt.Errorf("fold: ids in force %v, want %v", ids, s.IDs)
	}
	s.Tables, s.Overlay, s.Delta = t, NewOverlay(t, s.IDs, s.chains()), nil
	return nil
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

// Insert adds rule as number n of its chain.
func (s *EditSim) Insert(n int, rule rules.Rule) error {
	id := s.nextID
	s.nextID++
	ents, _, err := RuleEntries(&rule, id, Names{Attached: s.Ifaces}, nil)
	if err != nil {
		return err
	}
	if err := s.Overlay.Insert(n, Addition{Rule: rule, ID: id, Entries: ents}); err != nil {
		return err
	}
	i := chainIndex(s.RuleSet, rule.Chain, n)
	s.RuleSet.Rules = slices.Insert(s.RuleSet.Rules, i, rule)
	s.IDs = slices.Insert(s.IDs, i, id)
	return nil
}

// Delete removes rule n of chain c.
func (s *EditSim) Delete(c rules.Chain, n int) error {
	ref, ok := s.Overlay.Nth(c, n)
	if !ok {
		return fmt.Errorf("no rule %d of %s", n, c)
	}
	i := chainIndex(s.RuleSet, c, n)
	if s.Overlay.ID(ref) != s.IDs[i] {
		return fmt.Errorf("rule %d of %s: the overlay has id %d, the rule set %d", n, c, s.Overlay.ID(ref), s.IDs[i])
	}
	s.Overlay.Remove(ref)
	s.RuleSet.Rules = slices.Delete(s.RuleSet.Rules, i, i+1)
	s.IDs = slices.Delete(s.IDs, i, i+1)
	return nil
}

// Edit makes one random edit (insert, append, delete or replace, in
// INPUT or FORWARD) and compiles the delta stage. When the delta stage is
// full it folds the edits into new main tables instead, and when a rule
// before or after the edit logs it compiles the edited rule set in full
// (folded, both).
func (s *EditSim) Edit(r *rand.Rand) (what string, folded bool, err error) {
	c := rules.Chain(r.IntN(2))
	size := s.Overlay.ChainLen(c)
	kind := r.IntN(4)
	if size == 0 {
		kind = 0
	}
	logged := Logging(s.RuleSet)
	newRule := s.NewRule
	if newRule == nil {
		newRule = rules.RandomRule
	}
	rule := newRule(r)
	rule.Chain = c
	switch kind {
	case 0:
		n := 1 + r.IntN(size+1)
		what, err = fmt.Sprintf("insert %s %d: %s", c, n, rule.String()), s.Insert(n, rule)
	case 1:
		what, err = fmt.Sprintf("append %s", rule.String()), s.Insert(size+1, rule)
	case 2:
		n := 1 + r.IntN(size)
		what, err = fmt.Sprintf("delete %s %d", c, n), s.Delete(c, n)
	case 3:
		n := 1 + r.IntN(size)
		what = fmt.Sprintf("replace %s %d: %s", c, n, rule.String())
		if err = s.Delete(c, n); err == nil {
			err = s.Insert(n, rule)
		}
	}
	if err != nil {
		return what, false, err
	}
	if logged || Logging(s.RuleSet) {
		return what, true, s.compileFull()
	}
	d, err := s.Overlay.Delta()
	if errors.Is(err, ErrDeltaFull) {
		return what, true, s.Fold()
	}
	s.Delta = d
	return what, false, err
}

// CheckOrder checks that the overlay's rules in force are the edited
// rule set's, in order.
func (s *EditSim) CheckOrder() error {
	var got []uint32
	for _, r := range s.Overlay.InForce() {
		got = append(got, s.Overlay.ID(r))
	}
	if !slices.Equal(got, s.IDs) {
		return fmt.Errorf("ids in force %v, want %v", got, s.IDs)
	}
	return nil
}
