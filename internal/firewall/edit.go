package firewall

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// Single-rule edits (add, insert, delete, replace) go through the delta
// stage (docs/classifier.md, "Single edits"): the edit is compiled alone,
// put in force with one map write, and recorded; the rule set is rebuilt
// later (Rebuild) with the edits folded in and the delta stage cleared in
// the same switch. Until then every packet pays for checking the delta
// (at most compile.DeltaMax entries), so whoever makes edits should
// rebuild soon after: the CLI does right away, a daemon would after a
// quiet moment, so that a burst of edits costs one rebuild.
//
// An edit that does not fit the delta stage is folded into a rebuild at
// once. One that cannot use it at all recompiles the edited rule set in
// full: the rules were read from a version 1 or 2 state, the kernel holds
// another generation than the record says (a record of version 3, which
// the kernel does not confirm, after a crash), or a rule
// before or after the edit logs (-j LOG or --log). LOG rules are noted
// during the main tree walk and cut by the main table's answer, which the
// delta stage does not see: a LOG entry in the delta would decide, a
// deleted LOG rule would still log, and an added rule deciding before the
// main answer would not cut the notes behind it. --log budgets are
// written by full installs only. So rule sets that log take the full
// path, and the delta stage and the rebuild never see a rule that logs.

// Add inserts r as rule number pos of its chain (1-based, as iptables -I);
// pos 0 appends (iptables -A).
func (f *Firewall) Add(r rules.Rule, pos int) (*Result, error) {
	start := time.Now()
	if err := f.checkTarget(&r); err != nil {
		return nil, err
	}
	if r.Chain == rules.ChainUser {
		return f.editChain(r.UserChain, func(rs *rules.RuleSet, at []int) (*rules.RuleSet, error) {
			return insertAt(rs, at, pos, r)
		})
	}
	n := f.rs.ov.ChainLen(r.Chain)
	if pos < 0 || pos > n+1 {
		return nil, fmt.Errorf("position %d out of range: %s has %d rules (use 1..%d)", pos, r.Chain, n, n+1)
	}
	if pos == 0 {
		pos = n + 1
	}
	return f.edit(start, func(ov *compile.Overlay, e *editing) error { return e.insert(ov, pos, r) })
}

// Delete removes rule number n (1-based) of chain.
func (f *Firewall) Delete(chain rules.Chain, n int) (*Result, rules.Rule, error) {
	start := time.Now()
	ref, gone, err := f.nth(chain, n)
	if err != nil {
		return nil, rules.Rule{}, err
	}
	res, err := f.edit(start, func(ov *compile.Overlay, _ *editing) error { ov.Remove(ref); return nil })
	return res, gone, err
}

// DeleteSpec removes the first rule of its chain equal to r (iptables -D
// CHAIN rulespec), compared by canonical text.
func (f *Firewall) DeleteSpec(r rules.Rule) (*Result, error) {
	start := time.Now()
	want := r.String()
	if r.Chain == rules.ChainUser {
		return f.editChain(r.UserChain, func(rs *rules.RuleSet, at []int) (*rules.RuleSet, error) {
			for _, i := range at {
				if rs.Rules[i].String() == want {
					rs.Rules = slices.Delete(rs.Rules, i, i+1)
					return rs, nil
				}
			}
			return nil, fmt.Errorf("no such rule: %s", want)
		})
	}
	var (
		ref   compile.Ref
		found bool
	)
	f.rs.ov.Walk(r.Chain, func(x compile.Ref) bool {
		ref, found = x, f.rs.textIs(x, want)
		return !found
	})
	if !found {
		return nil, fmt.Errorf("no such rule: %s", want)
	}
	return f.edit(start, func(ov *compile.Overlay, _ *editing) error { ov.Remove(ref); return nil })
}

// Replace puts r in place of rule number n (1-based) of its chain
// (iptables -R), in one step, and returns the rule it replaced. r gets a
// new counter.
func (f *Firewall) Replace(n int, r rules.Rule) (*Result, rules.Rule, error) {
	start := time.Now()
	if err := f.checkTarget(&r); err != nil {
		return nil, rules.Rule{}, err
	}
	if r.Chain == rules.ChainUser {
		var gone rules.Rule
		res, err := f.editChain(r.UserChain, func(rs *rules.RuleSet, at []int) (*rules.RuleSet, error) {
			if n < 1 || n > len(at) {
				return nil, fmt.Errorf("%s has no rule %d (it has %d)", r.UserChain, n, len(at))
			}
			gone = rs.Rules[at[n-1]]
			rs.Rules[at[n-1]] = r
			return rs, nil
		})
		return res, gone, err
	}
	ref, gone, err := f.nth(r.Chain, n)
	if err != nil {
		return nil, rules.Rule{}, err
	}
	res, err := f.edit(start, func(ov *compile.Overlay, e *editing) error {
		ov.Remove(ref)
		return e.insert(ov, n, r)
	})
	return res, gone, err
}

// checkTarget checks that the chain r jumps or goes to exists, as
// iptables does ("Couldn't load target").
func (f *Firewall) checkTarget(r *rules.Rule) error {
	if v := r.Target.Verdict; (v == rules.VerdictJump || v == rules.VerdictGoto) && !f.rs.policies.HasChain(r.Target.Chain) {
		return fmt.Errorf("no chain or target %s: create the chain first (xdpfw chain new %s)", r.Target.Chain, r.Target.Chain)
	}
	return f.natCTAddrsInForce(&rules.RuleSet{Rules: []rules.Rule{*r}}) // what xdpfw's NAT cannot test
}

// editChain changes the rules of the user chain name: change gets a copy
// of the rule set in force and the indices of the chain's rules, in
// order. Rule sets with user chains are compiled whole (flattened), so
// the edit applies the changed set; unchanged rules keep their counters.
func (f *Firewall) editChain(name string, change func(rs *rules.RuleSet, at []int) (*rules.RuleSet, error)) (*Result, error) {
	rs, err := f.clone()
	if err != nil {
		return nil, err
	}
	if !rs.HasChain(name) {
		return nil, fmt.Errorf("no chain %s", name)
	}
	if rs, err = change(rs, chainRules(rs, name)); err != nil {
		return nil, err
	}
	return f.Apply(rs, Options{AllowEmpty: true})
}

// chainRules are the indices of the rules of user chain name, in order.
func chainRules(rs *rules.RuleSet, name string) []int {
	var at []int
	for i := range rs.Rules {
		if r := &rs.Rules[i]; r.Chain == rules.ChainUser && r.UserChain == name {
			at = append(at, i)
		}
	}
	return at
}

// insertAt makes r rule number pos (1-based; 0: the last) of the chain
// whose rules are at.
func insertAt(rs *rules.RuleSet, at []int, pos int, r rules.Rule) (*rules.RuleSet, error) {
	if pos < 0 || pos > len(at)+1 {
		return nil, fmt.Errorf("position %d out of range: %s has %d rules (use 1..%d)", pos, r.UserChain, len(at), len(at)+1)
	}
	i := len(rs.Rules)
	switch {
	case pos >= 1 && pos <= len(at):
		i = at[pos-1]
	case len(at) > 0:
		i = at[len(at)-1] + 1
	}
	rs.Rules = slices.Insert(rs.Rules, i, r)
	return rs, nil
}

// nth finds rule n of chain in force and parses it (a built-in chain:
// DeleteNth reaches a user chain's).
func (f *Firewall) nth(chain rules.Chain, n int) (compile.Ref, rules.Rule, error) {
	ref, ok := f.rs.ov.Nth(chain, n)
	if n < 1 || !ok {
		return compile.Ref{}, rules.Rule{}, fmt.Errorf("%s has no rule %d (it has %d)", chain, n, f.rs.ov.ChainLen(chain))
	}
	r, err := parseRule("rules in force", f.rs.ruleOf(ref).Text, f.rs.policies.Chains)
	return ref, r, err
}

// editing collects what an edit's rules need besides the overlay.
type editing struct {
	f        *Firewall
	freshIDs []uint32
	warnings []string
}

// insert compiles r with a new counter id and makes it rule n of its chain.
func (e *editing) insert(ov *compile.Overlay, n int, r rules.Rule) error {
	id, err := e.f.newID(ov)
	if err != nil {
		return err
	}
	names, err := e.f.st.ifaceNames()
	if err != nil {
		return err
	}
	if r.Match.AddrType != nil { // a full apply keeps the table; an edit that reads it checks
		if err := refreshAddrTypes(e.f.dp, []rules.Rule{r}); err != nil {
			return err
		}
	}
	ents, warns, err := compile.RuleEntries(&r, id, names, e.f.st.compileSets())
	if err != nil {
		return err
	}
	if err := ov.Insert(n, compile.Addition{Rule: r, ID: id, Entries: ents}); err != nil {
		return err
	}
	for _, w := range warns {
		e.warnings = append(e.warnings, fmt.Sprintf("%s: %s", r.String(), w))
	}
	e.freshIDs = append(e.freshIDs, id)
	return nil
}

// newID is a counter id no rule of ov has, nor any rule in force (a rule
// this edit removes is still counted by the generation in force until the
// switch: its id must not count for a new rule), deleted base rules
// included (their entries stay in the main generation until the
// rebuild): one past the highest, else the lowest free one.
func (f *Firewall) newID(ov *compile.Overlay) (uint32, error) {
	next := max(f.rs.base.maxID+1, compile.FirstRuleID)
	for _, o := range []*compile.Overlay{f.rs.ov, ov} {
		for _, a := range o.Added {
			next = max(next, a.ID+1)
		}
	}
	limit := f.dp.MaxRuleIDs()
	if next < limit {
		return next, nil
	}
	used := make(map[uint32]bool, len(ov.Base)+len(ov.Added)+len(f.rs.ov.Added))
	for _, b := range ov.Base {
		used[b.ID] = true
	}
	for _, o := range []*compile.Overlay{f.rs.ov, ov} {
		for _, a := range o.Added {
			used[a.ID] = true
		}
	}
	for id := uint32(compile.FirstRuleID); id < limit; id++ {
		if !used[id] {
			return id, nil
		}
	}
	return 0, fmt.Errorf("more than %d rules: out of counter slots, which --max-rules sizes (load with a larger --max-rules)", limit-compile.FirstRuleID)
}

// edit applies change to a copy of the overlay in force and puts the
// result in force: through the delta stage when it can, else by a
// rebuild or a full compile. Nothing changes when change fails.
func (f *Firewall) edit(start time.Time, change func(*compile.Overlay, *editing) error) (*Result, error) {
	if f.readOnly {
		return nil, errReadOnly
	}
	ov := f.rs.ov.Clone()
	e := &editing{f: f}
	if err := change(ov, e); err != nil {
		return nil, err
	}
	for _, id := range e.freshIDs {
		if err := f.dp.ResetRuleCounter(id); err != nil {
			return nil, err
		}
	}
	edited := f.rs.with(ov)
	res, err := f.nextGeneration(func() (*Result, error) {
		var res *Result
		var err error
		if f.rs.logs() || edited.logs() || f.rs.chains() || edited.chains() {
			err = errLogs
		} else {
			res, err = f.editDelta(edited, start)
		}
		switch {
		case errors.Is(err, compile.ErrDeltaFull):
			res, err = f.rebuild(edited, f.rs.policies, start)
		case errors.Is(err, errNoDelta), errors.Is(err, errLogs), errors.Is(err, compile.ErrDeltaLogs), errors.Is(err, datapath.ErrStaleBase):
			res, err = f.installStore(edited)
		}
		return res, err
	})
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, e.warnings...)
	return res, nil
}

// errNoDelta: the rules in force were never compiled by this xdpfw (read
// from a version 1 or 2 state), so edits cannot go into the delta stage.
var errNoDelta = errors.New("no compiled base")

// errLogs: a rule logs, so the edit cannot go into the delta stage (see
// the comment at the top).
var errLogs = errors.New("a rule logs")

// installStore compiles the rules of s in full and installs them (each
// rule keeps its id): the full path.
func (f *Firewall) installStore(s *ruleStore) (*Result, error) {
	rs, ids, err := s.ruleSet()
	if err != nil {
		return nil, err
	}
	return f.install(rs, ids, nil, Options{})
}

// editDelta puts the edited rules s in force through the delta stage.
func (f *Firewall) editDelta(s *ruleStore, start time.Time) (*Result, error) {
	if !s.base.compiled {
		return nil, errNoDelta
	}
	d, err := s.ov.Delta()
	if err != nil {
		return nil, err
	}
	prev := f.st.Delta
	f.st.Delta = s.deltaState()
	var live time.Time
	want := datapath.InForce{Installed: true, Stamp: s.base.stamp, Delta: datapath.DeltaTag(d)}
	committed, err := f.commit(want, func() (err error) {
		live, err = f.dp.InstallDelta(d, s.base.stamp)
		return err
	})
	if !committed {
		f.st.Delta = prev
		return nil, err
	}
	f.rs = s
	if err != nil {
		return nil, err
	}
	return &Result{Rules: s.count(), Entries: len(s.base.entries), Delta: true,
		DeltaEntries: len(d.Entries), DeltaDeleted: len(d.Dead), InForce: live.Sub(start)}, nil
}

// Pending reports whether edits wait in the delta stage for a rebuild.
func (f *Firewall) Pending() bool { return f.rs.ov.Pending() }

// Rebuild folds the edits waiting in the delta stage into a new main
// generation and clears the delta stage, with one switch: packets see the
// edits before and after. The rule set in force and its generation do not
// change, nor does any counter. It does nothing when no edit waits. The
// CLI calls it right after an edit (unless --no-rebuild); a daemon should
// call it a short while after the last edit, so that a burst of edits
// costs one rebuild.
func (f *Firewall) Rebuild() (*Result, error) {
	if f.readOnly {
		return nil, errReadOnly
	}
	start := time.Now()
	inForce, err := f.dp.DeltaInForce()
	if err != nil {
		return nil, err
	}
	if !f.rs.ov.Pending() && !inForce {
		return &Result{Generation: f.st.Generation, Rules: f.rs.count(), Entries: len(f.rs.base.entries)}, nil
	}
	res, err := f.rebuild(f.rs, f.rs.policies, start)
	if err != nil {
		return nil, err
	}
	res.Generation = f.st.Generation
	return res, nil
}

// rebuild installs a new main generation made from the compiled entries
// of the rules s has in force, with pol's policies: no rule is parsed or
// compiled again. Rules that were never compiled (a version 1 or 2
// state), and rule sets with a rule that logs, are compiled in full
// instead: compile.Build makes no log budgets (Tables.Logs), Compile does.
func (f *Firewall) rebuild(s *ruleStore, pol *rules.RuleSet, start time.Time) (*Result, error) {
	if !s.base.compiled || s.logs() || s.chains() {
		rs, ids, err := s.ruleSet()
		if err != nil {
			return nil, err
		}
		rs = &rules.RuleSet{Rules: rs.Rules, Policies: pol.Policies, Raw: pol.Raw, Chains: rs.Chains,
			Priority: pol.Priority, PriorityPolicy: pol.PriorityPolicy}
		return f.install(rs, ids, nil, Options{})
	}
	entries, refs, spans := s.ov.Fold()
	lim := f.dp.Limits()
	names, err := f.st.ifaceNames()
	if err != nil {
		return nil, err
	}
	// the priority table's warnings were given when it was loaded
	t, _, err := compile.Build(entries, pol, names, f.st.compileSets(),
		compile.Limits{Entries: lim.Entries, Nodes: lim.Nodes, LeafSlots: lim.LeafSlots})
	if err != nil {
		return nil, err
	}
	t.Spans = spans
	recs := make([]baseRule, len(refs))
	for i, r := range refs {
		recs[i] = s.ruleOf(r)
		recs[i].Span = spans[i]
	}
	if err := f.installTables(t, recs, pol); err != nil {
		return nil, err
	}
	return &Result{Rules: len(refs), Entries: len(entries), Tree: t.Stats, Rebuilt: true, InForce: time.Since(start)}, nil
}

// DeltaStatus says what waits in the delta stage.
type DeltaStatus struct {
	Pending  bool `json:"pending"` // edits wait for a rebuild
	Added    int  `json:"added"`   // rules added since the last rebuild
	Deleted  int  `json:"deleted"` // rules deleted since
	Entries  int  `json:"entries"` // delta entries in use (added rules' and copies)
	Capacity int  `json:"capacity"`
}

func (f *Firewall) deltaStatus() DeltaStatus {
	s := DeltaStatus{Pending: f.rs.ov.Pending(), Added: len(f.rs.ov.Added), Deleted: len(f.rs.ov.Deleted), Capacity: compile.DeltaMax}
	if d, err := f.rs.ov.Delta(); err == nil {
		s.Entries = len(d.Entries)
	}
	return s
}
