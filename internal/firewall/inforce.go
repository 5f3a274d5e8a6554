package firewall

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// ruleStore is the rule set in force: the base (the main generation's
// rules) with the single-rule edits since (the overlay), and the
// policies. Only what an operation needs is decoded; the whole rule set
// is parsed only when one asks for it (ruleSet).
type ruleStore struct {
	policies *rules.RuleSet // policies only
	base     *base
	ov       *compile.Overlay
	parsed   *rules.RuleSet // ruleSet's, once parsed
	ids      []uint32
}

// openStore opens the rules of st: its base file and edits, or the rules
// of a version 1 or 2 state.
func openStore(p Paths, st *state) (*ruleStore, error) {
	pol, err := rules.Parse(p.StateFile(), []byte(st.Policies), rules.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("state policies do not parse (corrupt state?): %w", err)
	}
	s := &ruleStore{policies: policiesOf(pol)}
	switch {
	case st.Rules != "" || len(st.IDs) > 0: // version 1 or 2
		rs, err := rules.Parse(p.StateFile(), []byte(st.Rules), rules.ParseOptions{})
		if err != nil {
			return nil, fmt.Errorf("state rules do not parse (corrupt state?): %w", err)
		}
		if len(rs.Rules) != len(st.IDs) {
			return nil, fmt.Errorf("%s: %d rules but %d ids", p.StateFile(), len(rs.Rules), len(st.IDs))
		}
		s.policies.Policies = rs.Policies
		s.base = rulesOnlyBase(rs, st.IDs)
		s.parsed, s.ids = rs, st.IDs
	case st.Base != "":
		if s.base, err = openBase(p, st.Base, st.Builds); err != nil {
			return nil, err
		}
	default:
		s.base = rulesOnlyBase(&rules.RuleSet{}, nil)
	}
	s.ov = s.base.overlay()
	if d := st.Delta; d != nil {
		if !s.base.compiled {
			s.close()
			return nil, fmt.Errorf("%s: edits on top of rules that were never compiled (corrupt state?)", p.StateFile())
		}
		for _, x := range d.Deleted {
			if x.Base < 0 || x.Base >= s.base.n {
				s.close()
				return nil, fmt.Errorf("%s: deleted rule %d of %d (corrupt state?)", p.StateFile(), x.Base, s.base.n)
			}
			s.ov.Deleted = append(s.ov.Deleted, compile.Deletion{Base: x.Base, Copies: x.Copies})
		}
		ifaces, err := st.ifaceNames()
		if err != nil {
			s.close()
			return nil, err
		}
		sets := st.compileSets()
		for _, x := range d.Added {
			r, err := parseRule(p.StateFile(), x.Rule, s.policies.Chains)
			if err == nil && x.Anchor >= s.base.n {
				err = fmt.Errorf("anchor %d of %d rules", x.Anchor, s.base.n)
			}
			var ents []compile.Entry
			if err == nil {
				ents, _, err = compile.RuleEntries(&r, x.ID, ifaces, sets)
			}
			if err != nil {
				s.close()
				return nil, fmt.Errorf("%s: added rule %q: %w (corrupt state?)", p.StateFile(), x.Rule, err)
			}
			s.ov.Added = append(s.ov.Added, compile.Addition{Anchor: x.Anchor, Rule: r, ID: x.ID, Entries: ents})
		}
	}
	return s, nil
}

// rulesOnlyBase is an in-memory base listing rs (with ids), not compiled.
func rulesOnlyBase(rs *rules.RuleSet, ids []uint32) *base {
	recs := make([]baseRule, len(rs.Rules))
	for i := range rs.Rules {
		recs[i] = baseRuleOf(&rs.Rules[i], ids[i], compile.Span{})
	}
	b, err := parseBase("", encodeBase(0, recs, nil))
	if err != nil {
		panic(err) // encodeBase's own layout
	}
	return b
}

// parseRule parses one rule in canonical form, of a rule set with the
// user chains chains.
func parseRule(file, text string, chains []rules.ChainDecl) (rules.Rule, error) {
	rs, err := rules.Parse(file, []byte(text), rules.ParseOptions{Chains: chains})
	if err != nil {
		return rules.Rule{}, err
	}
	if len(rs.Rules) != 1 || len(rs.Policies) != 0 {
		return rules.Rule{}, fmt.Errorf("%q is not one rule", text)
	}
	return rs.Rules[0], nil
}

// close unmaps the base.
func (s *ruleStore) close() {
	if s != nil {
		s.base.close()
	}
}

// deltaState is the edits to save with the state (nil: none).
func (s *ruleStore) deltaState() *deltaState {
	if !s.ov.Pending() {
		return nil
	}
	d := &deltaState{}
	for _, x := range s.ov.Deleted {
		d.Deleted = append(d.Deleted, deletedRule{Base: x.Base, Copies: x.Copies})
	}
	for _, a := range s.ov.Added {
		d.Added = append(d.Added, addedRule{Anchor: a.Anchor, ID: a.ID, Rule: a.Rule.String()})
	}
	return d
}

// with is s with the edits of ov instead (the policies and base shared).
func (s *ruleStore) with(ov *compile.Overlay) *ruleStore {
	return &ruleStore{policies: s.policies, base: s.base, ov: ov}
}

// ruleOf describes the rule r names: its canonical text, id and chain,
// its verdict and whether it tests the connection state.
func (s *ruleStore) ruleOf(r compile.Ref) baseRule {
	if r.IsAdded() {
		a := &s.ov.Added[r.Added]
		return baseRuleOf(&a.Rule, a.ID, compile.Span{})
	}
	return s.base.rule(r.Base)
}

// logs reports whether a rule in force, or one deleted since the base was
// built, logs (-j LOG, or --log) or has -m limit (rules.Rule.Budgeted).
// Such rule sets never use the delta
// stage (see Firewall.edit). Cheap: a flag of the base and the added rules.
func (s *ruleStore) logs() bool {
	if s.base.logs {
		return true
	}
	for i := range s.ov.Added {
		if s.ov.Added[i].Rule.Budgeted() {
			return true
		}
	}
	return false
}

// chains reports whether the rules in force, or the added ones, need
// flattening (user chains, jumps, RETURNs, rules without -j): such rule
// sets never use the delta stage, as a rule's entries are not one span.
func (s *ruleStore) chains() bool {
	if s.base.chains || len(s.policies.Chains) > 0 {
		return true
	}
	for i := range s.ov.Added {
		if r := &s.ov.Added[i].Rule; r.Chain == rules.ChainUser || r.Target.Verdict > rules.VerdictLog {
			return true
		}
	}
	return false
}

// logRules counts the rules in force that log.
func (s *ruleStore) logRules() int {
	n := 0
	for _, r := range s.refs() {
		if r.IsAdded() && s.ov.Added[r.Added].Rule.Target.Logs() || !r.IsAdded() && s.base.ruleLogs(r.Base) {
			n++
		}
	}
	return n
}

// textIs reports whether the rule r names has the canonical text want
// (without decoding the text of a base rule into a new string).
func (s *ruleStore) textIs(r compile.Ref, want string) bool {
	if r.IsAdded() {
		return s.ov.Added[r.Added].Rule.String() == want
	}
	return string(s.base.text(r.Base)) == want
}

// refs lists the rules in force in rule-set order.
func (s *ruleStore) refs() []compile.Ref { return s.ov.InForce() }

// count is the number of rules in force.
func (s *ruleStore) count() int { return len(s.ov.Base) - len(s.ov.Deleted) + len(s.ov.Added) }

// ruleSet parses the rule set in force (with each rule's id): the slow
// path, for the operations that recompile every rule or show them all.
func (s *ruleStore) ruleSet() (*rules.RuleSet, []uint32, error) {
	if s.parsed != nil {
		return s.parsed, s.ids, nil
	}
	refs := s.refs()
	var b strings.Builder
	for _, c := range s.policies.Chains { // declared before the rules that use them
		b.WriteString("-N " + c.Name + "\n")
	}
	ids := make([]uint32, len(refs))
	for i, r := range refs {
		x := s.ruleOf(r)
		b.WriteString(x.Text)
		b.WriteByte('\n')
		ids[i] = x.ID
	}
	rs, err := rules.Parse("rules in force", []byte(b.String()), rules.ParseOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("the rules in force do not parse (corrupt state?): %w", err)
	}
	rs.Policies, rs.Raw = s.policies.Policies, s.policies.Raw
	rs.Priority, rs.PriorityPolicy = s.policies.Priority, s.policies.PriorityPolicy
	s.parsed, s.ids = rs, ids
	return rs, ids, nil
}

// policyText is the policies as saved in the state.
func policyText(rs *rules.RuleSet) string {
	var b strings.Builder
	for _, p := range rs.Policies {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	// The user chains, empty ones included, so that list shows them after
	// a restart or an upgrade (older records have none).
	for _, c := range rs.Chains {
		b.WriteString("-N " + c.Name + "\n")
	}
	for _, r := range rs.Raw {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	b.WriteString((&rules.RuleSet{Priority: rs.Priority, PriorityPolicy: rs.PriorityPolicy}).String())
	return b.String()
}

// policiesOf is what of rs the state records beside the rules, as text
// (policyText): the policies, the raw table's rules and the priority table.
func policiesOf(rs *rules.RuleSet) *rules.RuleSet {
	return &rules.RuleSet{Policies: rs.Policies, Raw: rs.Raw, Chains: rs.Chains, Priority: rs.Priority, PriorityPolicy: rs.PriorityPolicy}
}

// ifaceNames is what -i and -o names resolve against: the attached
// interfaces (-i, OUTPUT's -o) and the ppp devices of the PPPoE sessions
// on them (-i: packets arrive by those too, docs/pppoe.md), and every
// interface of this host (FORWARD's -o), as they are now.
func (st *state) ifaceNames() (compile.Names, error) {
	host, err := hostIfaces()
	if err != nil {
		return compile.Names{}, err
	}
	att := st.ifaceIndexes()
	if ss, _, err := PPPoESessions(); err == nil {
		for _, s := range ss {
			if slices.Contains(slices.Collect(maps.Values(att)), uint32(s.Dev)) {
				att[s.PPPName] = uint32(s.PPP)
			}
		}
	}
	return compile.Names{Attached: att, Host: host}, nil
}

// outBinding is what FORWARD's -o names of rs resolve to among host's
// interfaces: each interface whose name one of them matches (negations
// aside: a negated name is resolved by the interfaces it names too).
// nil when no FORWARD rule has -o.
func outBinding(rs []rules.Rule, host map[string]uint32) map[string]uint32 {
	var out map[string]uint32
	for i := range rs {
		m := rs[i].Match.OutIface
		if m == nil || rs[i].Chain != rules.ChainForward {
			continue
		}
		if out == nil {
			out = map[string]uint32{}
		}
		for name, idx := range host {
			if name == m.Name || m.Prefix && strings.HasPrefix(name, m.Name) {
				out[name] = idx
			}
		}
	}
	return out
}

// hostIfaces maps the names of this host's interfaces to their ifindex.
func hostIfaces() (map[string]uint32, error) {
	list, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing the interfaces (for -o): %w", err)
	}
	out := make(map[string]uint32, len(list))
	for _, i := range list {
		out[i.Name] = uint32(i.Index)
	}
	return out, nil
}

// ifaceIndexes maps the attached interfaces' names to their ifindex (for
// -i matches).
func (st *state) ifaceIndexes() map[string]uint32 {
	out := make(map[string]uint32, len(st.Interfaces))
	for n, i := range st.Interfaces {
		out[n] = uint32(i.Index)
	}
	return out
}

// openRecord opens the record and the rules the kernel has in force
// (resolve, then openStore). Without the lock (readers that must not hold
// up changes), a base file a change removed meanwhile is read again. Any
// record that does not open is a RecordError.
func openRecord(p Paths, dp *datapath.Datapath, locked bool) (*state, *ruleStore, error) {
	for try := 0; ; try++ {
		st, err := resolve(p, dp, locked)
		if err != nil {
			return nil, nil, err
		}
		s, err := openStore(p, st)
		if err == nil {
			return st, s, nil
		}
		if !locked && errors.Is(err, os.ErrNotExist) && try < 3 {
			continue
		}
		var re *RecordError
		if !errors.As(err, &re) {
			err = &RecordError{Err: err}
		}
		return nil, nil, err
	}
}

// readStore opens the data plane and the rules it has in force without
// the lock, for readers that must not hold up changes (OpenReadOnly,
// ReadInForce). It fails with datapath.ErrNotLoaded when nothing is
// loaded.
func readStore(p Paths) (*datapath.Datapath, *state, *ruleStore, error) {
	dp, err := datapath.Open(p.PinDir)
	if err != nil {
		return nil, nil, nil, err
	}
	st, s, err := openRecord(p, dp, false)
	if err != nil {
		dp.Close()
		return nil, nil, nil, err
	}
	return dp, st, s, nil
}

// loadRules reads the record and parses the rule set in force with each
// rule's id, under the lock (nil, nil when nothing is loaded; a record
// lost or corrupt while the program is pinned is returned as a
// RecordError): for the callers that compare whole rule sets (Reconcile).
func loadRules(p Paths) (*state, *rules.RuleSet, []uint32, error) {
	dp, err := datapath.Open(p.PinDir)
	if errors.Is(err, datapath.ErrNotLoaded) {
		st, err := loadState(p)
		if st != nil && st.loaded() {
			st = st.setsOnly()
		}
		return st, nil, nil, err
	}
	if err != nil {
		return nil, nil, nil, err
	}
	defer dp.Close()
	st, s, err := openRecord(p, dp, true)
	if err != nil {
		return nil, nil, nil, err
	}
	defer s.close()
	rs, ids, err := s.ruleSet()
	if err != nil {
		return nil, nil, nil, err
	}
	return st, rs, ids, nil
}

// setsOnly is the record of st's named sets alone (nothing loaded).
func (st *state) setsOnly() *state {
	sets := newState()
	sets.Generation, sets.Sets, sets.NextSetID = st.Generation, st.Sets, st.NextSetID
	return sets
}
