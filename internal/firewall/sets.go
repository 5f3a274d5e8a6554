package firewall

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// Named sets (ipset-style). A set's metadata (id, type, family, size,
// element count) is in the state; its elements are in the data plane's
// fw_sets trie under its id. Set commands work whether or not the firewall
// is loaded: the first set pins fw_sets, and a later load reuses it, so
// sets are made and filled first and rules naming them loaded after.
// Changing elements is only map updates: rules are not recompiled and
// traffic is not disturbed.

// DefaultSetSize is the size of a set created without one.
const DefaultSetSize = 65536

// SetSpec is how a set is created.
type SetSpec struct {
	Kind rules.SetKind
	Size int // the most elements it may hold; 0: DefaultSetSize
}

// SetInfo describes a set.
type SetInfo struct {
	Name   string    `json:"name"`
	ID     uint32    `json:"id"`
	Type   string    `json:"type"`
	Family string    `json:"family"`
	Size   int       `json:"size"`
	Count  int       `json:"count"`
	UsedBy []SetUser `json:"used_by"`
}

// SetContents is a set with its elements.
type SetContents struct {
	SetInfo
	Elements []string `json:"elements"`
}

// SetUser is a rule in force that uses a set.
type SetUser struct {
	Chain string `json:"chain"`
	Num   int    `json:"num"` // 1-based within the chain
	Rule  string `json:"rule"`
}

func (u SetUser) String() string { return fmt.Sprintf("%s rule %d: %s", u.Chain, u.Num, u.Rule) }

// SetChange is what an add or a del did to a set.
type SetChange struct {
	Changed int // elements added / removed
	Skipped int // elements already in the set (add) / not in it (del)
	Count   int // elements now
	Size    int
}

// Sets is an open, locked handle on the named sets.
type Sets struct {
	paths Paths
	st    *state
	store *ruleStore
	rs    *rules.RuleSet // rules in force (empty when not loaded)
	// pinned: the program is pinned (attached and filtering), whether
	// its record is known or lost.
	pinned bool
	unlock func()
	dp     *datapath.Sets // opened on first use
}

// OpenSets locks the state and opens the named sets, loaded or not.
func OpenSets(p Paths) (*Sets, error) {
	unlock, err := lock(p)
	if err != nil {
		return nil, err
	}
	var (
		st     *state
		store  *ruleStore
		pinned bool
	)
	dp, err := datapath.Open(p.PinDir)
	switch {
	case errors.Is(err, datapath.ErrNotLoaded):
		st, err = loadState(p)
		if err == nil && st == nil {
			st = newState()
		}
		if err == nil {
			store, err = openStore(p, st)
		}
	case err == nil:
		pinned = true
		st, store, err = openRecord(p, dp, true)
		if re := (*RecordError)(nil); errors.As(err, &re) {
			// Attached, but the record is lost: the sets are kept as
			// if nothing were loaded, until a load replaces the record
			// (and keeps them).
			st, err = setsRecord(p, dp)
			if err == nil {
				store, err = openStore(p, st)
			}
		}
		dp.Close()
	}
	var rs *rules.RuleSet
	if err == nil {
		if rs, _, err = store.ruleSet(); err != nil {
			store.close()
		}
	}
	if err != nil {
		unlock()
		return nil, err
	}
	return &Sets{paths: p, st: st, store: store, rs: rs, pinned: pinned, unlock: unlock}, nil
}

// Close releases the lock, the rules and the set map.
func (s *Sets) Close() {
	if s.dp != nil {
		s.dp.Close()
	}
	s.store.close()
	s.unlock()
}

// KnownSets are the named sets as the compiler needs them, read from the
// state without locking (for checks that change nothing).
func KnownSets(p Paths) (map[string]compile.SetInfo, error) {
	st, err := loadState(p)
	if err != nil || st == nil {
		return nil, err
	}
	return st.compileSets(), nil
}

func (st *state) compileSets() map[string]compile.SetInfo {
	out := make(map[string]compile.SetInfo, len(st.Sets))
	for name, m := range st.Sets {
		out[name] = compile.SetInfo{ID: m.ID, Family: m.kind().Family}
	}
	return out
}

func (m *setState) kind() rules.SetKind {
	f, _ := rules.ParseSetFamily(m.Family)
	return rules.SetKind{Type: m.Type, Family: f}
}

// setElems is the number of elements of all sets together.
func (st *state) setElems() int {
	n := 0
	for _, m := range st.Sets {
		n += m.Count
	}
	return n
}

// maps opens the set map, creating it when create is set.
func (s *Sets) maps(create bool) (*datapath.Sets, error) {
	if s.dp == nil {
		dp, err := datapath.OpenSets(s.paths.PinDir, create)
		if err != nil {
			return nil, err
		}
		s.dp = dp
	}
	return s.dp, nil
}

// save records the state. With no set left and nothing loaded, it removes
// the state and the set map instead: no trace is left.
func (s *Sets) save() error {
	if len(s.st.Sets) > 0 || s.st.loaded() || s.pinned {
		return saveState(s.paths, s.st, s.store)
	}
	if s.dp != nil {
		s.dp.Close()
		s.dp = nil
	}
	if err := datapath.Unpin(s.paths.PinDir); err != nil {
		return err
	}
	if err := os.Remove(s.paths.StateFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// get returns the set called name.
func (s *Sets) get(name string) (*setState, error) {
	m, ok := s.st.Sets[name]
	if !ok {
		return nil, fmt.Errorf("set %q does not exist (xdpfw set list shows the sets; xdpfw set create makes one)", name)
	}
	return m, nil
}

// Kind is the kind of the set called name, which decides the elements it
// takes.
func (s *Sets) Kind(name string) (rules.SetKind, error) {
	m, err := s.get(name)
	if err != nil {
		return rules.SetKind{}, err
	}
	return m.kind(), nil
}

// Create makes an empty set. With exist, a set of that name, type and
// family that exists already is kept, and given a size, resized to it.
// created reports whether a set was made.
func (s *Sets) Create(name string, spec SetSpec, exist bool) (created bool, err error) {
	if !rules.ValidSetName(name) {
		return false, fmt.Errorf("%q: not a set name: %s", name, rules.SetNameHint)
	}
	size := spec.Size
	if size == 0 {
		size = DefaultSetSize
	}
	if size < 1 || size > datapath.MaxSetElems {
		return false, fmt.Errorf("set size %d: want 1 to %d (all sets together hold at most %d elements)",
			size, datapath.MaxSetElems, datapath.MaxSetElems)
	}
	fam := rules.SetFamilyName(spec.Kind.Family)
	if m, ok := s.st.Sets[name]; ok {
		if !exist {
			return false, fmt.Errorf("set %q exists already (%s %s, %d elements); --exist keeps it", name, m.Type, m.Family, m.Count)
		}
		if m.Type != spec.Kind.Type || m.Family != fam {
			return false, fmt.Errorf("set %q exists already as %s %s, not %s", name, m.Type, m.Family, spec.Kind)
		}
		if spec.Size == 0 || spec.Size == m.Size {
			return false, nil
		}
		if spec.Size < m.Count {
			return false, fmt.Errorf("set %q holds %d elements: it cannot be resized to %d", name, m.Count, spec.Size)
		}
		m.Size = spec.Size
		return false, s.save()
	}
	if _, err := s.maps(true); err != nil {
		return false, err
	}
	id := max(s.st.NextSetID, 1)
	s.st.NextSetID = id + 1
	s.st.Sets[name] = &setState{ID: id, Type: spec.Kind.Type, Family: fam, Size: size}
	return true, s.save()
}

// checkElems makes sure every element fits a set of kind k (the parsers
// check this with positions; this guards the API).
// editable is what Add and Del start from: the set, after checking that
// every element fits its kind, and the set maps.
func (s *Sets) editable(name string, ps []netip.Prefix) (*setState, *datapath.Sets, error) {
	m, err := s.get(name)
	if err != nil {
		return nil, nil, err
	}
	if err := checkElems(name, m.kind(), ps); err != nil {
		return nil, nil, err
	}
	dp, err := s.maps(false)
	if err != nil {
		return nil, nil, err
	}
	return m, dp, nil
}

func checkElems(name string, k rules.SetKind, ps []netip.Prefix) error {
	for _, p := range ps {
		if !k.Accepts(p) {
			return fmt.Errorf("%s does not fit set %q (%s)", p, name, k)
		}
	}
	return nil
}

// Add puts elements into a set; those it holds already are skipped. If the
// set would hold more than its size, or all sets more than the set map
// holds, nothing is added.
func (s *Sets) Add(name string, ps []netip.Prefix) (*SetChange, error) {
	m, dp, err := s.editable(name, ps)
	if err != nil {
		return nil, err
	}
	p, err := s.plan(name, m, ps, 0)
	if err != nil {
		return nil, err
	}
	if err := dp.Insert(p.add); err != nil {
		return nil, err
	}
	m.Count += p.add.Len()
	ch := &SetChange{Changed: p.add.Len(), Skipped: p.held.Len(), Count: m.Count, Size: m.Size}
	return ch, s.save()
}

// addPlan is what adding elements to a set would do.
type addPlan struct {
	add  *datapath.Elems // elements not in the set yet
	held *datapath.Elems // elements it holds already
}

// plan works out which of ps are new to set m and checks that they fit.
// extra is the elements other plans of the same change add to the map.
func (s *Sets) plan(name string, m *setState, ps []netip.Prefix, extra int) (*addPlan, error) {
	e := datapath.NewElems(m.ID, ps)
	p := &addPlan{add: e, held: datapath.NewElems(m.ID, nil)}
	if m.Count > 0 { // an empty set holds none of them: no need to look
		var err error
		if p.held, p.add, err = s.dp.Split(e, s.st.setElems()); err != nil {
			return nil, err
		}
	}
	n := p.add.Len()
	if m.Count+n > m.Size {
		return nil, fmt.Errorf("set %q would hold %d elements (%d now, %d new), more than its size %d; nothing was added "+
			"(resize it: xdpfw set create %s %s --family %s --size N --exist)", name, m.Count+n, m.Count, n, m.Size, name, m.Type, m.Family)
	}
	if total := s.st.setElems() + extra + n; total > datapath.MaxSetElems {
		return nil, fmt.Errorf("all sets together would hold %d elements, more than the %d the data plane holds; nothing was added",
			total, datapath.MaxSetElems)
	}
	return p, nil
}

// Del removes elements from a set. Unless missingOK, every element must be
// in the set, or nothing is removed.
func (s *Sets) Del(name string, ps []netip.Prefix, missingOK bool) (*SetChange, error) {
	m, dp, err := s.editable(name, ps)
	if err != nil {
		return nil, err
	}
	in, out, err := dp.Split(datapath.NewElems(m.ID, ps), s.st.setElems())
	if err != nil {
		return nil, err
	}
	if out.Len() > 0 && !missingOK {
		missing := out.Prefixes(m.Family == "inet6")
		list := make([]string, 0, 5)
		for _, p := range missing[:min(5, len(missing))] {
			list = append(list, p.String())
		}
		more := ""
		if len(missing) > 5 {
			more = fmt.Sprintf(" and %d more", len(missing)-5)
		}
		return nil, fmt.Errorf("not in set %q: %s%s; nothing was removed (--missing-ok removes the others)",
			name, strings.Join(list, ", "), more)
	}
	if err := dp.Remove(in); err != nil {
		return nil, err
	}
	m.Count = max(m.Count-in.Len(), 0)
	ch := &SetChange{Changed: in.Len(), Skipped: out.Len(), Count: m.Count, Size: m.Size}
	return ch, s.save()
}

// Flush removes every element of a set (rules using it stay) and returns
// how many there were.
func (s *Sets) Flush(name string) (int, error) {
	m, err := s.get(name)
	if err != nil {
		return 0, err
	}
	dp, err := s.maps(false)
	if err != nil {
		return 0, err
	}
	n, err := dp.Flush(m.ID)
	if err != nil {
		return 0, err
	}
	m.Count = 0
	return n, s.save()
}

// Destroy removes a set and its elements. It is refused while a rule in
// force uses the set.
func (s *Sets) Destroy(name string) error {
	m, err := s.get(name)
	if err != nil {
		return err
	}
	if users := s.users(name); len(users) > 0 {
		lines := make([]string, len(users))
		for i, u := range users {
			lines[i] = "\n\t" + u.String()
		}
		return fmt.Errorf("set %q is in use by %d rule(s); delete them first (xdpfw delete CHAIN NUM):%s",
			name, len(users), strings.Join(lines, ""))
	}
	dp, err := s.maps(false)
	if err != nil {
		return err
	}
	if _, err := dp.Flush(m.ID); err != nil {
		return err
	}
	delete(s.st.Sets, name)
	return s.save()
}

// users lists the rules in force that use set name.
func (s *Sets) users(name string) []SetUser {
	var out []SetUser
	for c := rules.Chain(0); c < rules.NumChains; c++ {
		n := 0
		for _, r := range s.rs.Rules {
			if r.Chain != c {
				continue
			}
			n++
			if usesSet(r, name) {
				out = append(out, SetUser{Chain: c.String(), Num: n, Rule: r.String()})
			}
		}
	}
	for i, r := range s.rs.Priority {
		if usesSet(r, name) {
			out = append(out, SetUser{Chain: rules.PriorityChain, Num: i + 1, Rule: r.String()})
		}
	}
	return out
}

// usesSet says whether r tests set name.
func usesSet(r rules.Rule, name string) bool {
	m := r.Match
	return m.SrcSet != nil && m.SrcSet.Name == name || m.DstSet != nil && m.DstSet.Name == name
}

func (s *Sets) info(name string) SetInfo {
	m := s.st.Sets[name]
	users := s.users(name)
	if users == nil {
		users = []SetUser{}
	}
	return SetInfo{Name: name, ID: m.ID, Type: string(m.Type), Family: m.Family, Size: m.Size, Count: m.Count, UsedBy: users}
}

// List describes every set, by name (the counts are the recorded ones).
func (s *Sets) List() []SetInfo {
	names := make([]string, 0, len(s.st.Sets))
	for n := range s.st.Sets {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]SetInfo, len(names))
	for i, n := range names {
		out[i] = s.info(n)
	}
	return out
}

// Get describes a set with its elements, read from the data plane (the
// recorded count is corrected should it differ, as after an interrupted
// add).
func (s *Sets) Get(name string) (*SetContents, error) {
	m, err := s.get(name)
	if err != nil {
		return nil, err
	}
	dp, err := s.maps(false)
	if err != nil {
		return nil, err
	}
	ps, err := dp.List(m.ID, m.Family == "inet6")
	if err != nil {
		return nil, err
	}
	if len(ps) != m.Count {
		m.Count = len(ps)
		if err := s.save(); err != nil {
			return nil, err
		}
	}
	out := &SetContents{SetInfo: s.info(name), Elements: make([]string, len(ps))}
	for i, p := range ps {
		if p.Bits() == p.Addr().BitLen() {
			out.Elements[i] = p.Addr().String()
		} else {
			out.Elements[i] = p.String()
		}
	}
	return out, nil
}

// RestoreResult is what Restore did.
type RestoreResult struct {
	Created []string // sets made, in file order
	Added   int      // elements added
	Skipped int      // elements the sets held already
}

// Restore applies `ipset save` output (parsed with rules.ParseIpsetSave,
// whose existing-set lookup is Kind): it creates the sets that do not
// exist, keeps those that do with the same type, family and size, and adds
// the elements. Everything is checked before anything changes; if the
// kernel refuses an element, what was added is removed again.
func (s *Sets) Restore(r *rules.SetRestore) (res *RestoreResult, err error) {
	defer func() {
		if err != nil && len(s.st.Sets) == 0 && !s.st.loaded() {
			_ = s.save() // remove a set map made for nothing
		}
	}()
	res = &RestoreResult{}
	var errs rules.ErrorList
	made := map[string]*setState{} // the sets to create, as they will be
	nextID := max(s.st.NextSetID, 1)
	for _, c := range r.Creates {
		fam := rules.SetFamilyName(c.Kind.Family)
		size := c.Size
		if size == 0 {
			size = DefaultSetSize
		}
		if m, ok := s.st.Sets[c.Name]; ok {
			if m.Type != c.Kind.Type || m.Family != fam || (c.Size != 0 && c.Size != m.Size) {
				errs = append(errs, &rules.Error{Pos: c.Pos, Token: c.Name,
					Msg:  fmt.Sprintf("set exists already as %s %s with size %d", m.Type, m.Family, m.Size),
					Hint: "an existing set is kept only when the create line matches it; or destroy it first"})
			}
			continue
		}
		if size > datapath.MaxSetElems {
			errs = append(errs, &rules.Error{Pos: c.Pos, Token: c.Name,
				Msg: fmt.Sprintf("maxelem %d: a set holds at most %d elements", size, datapath.MaxSetElems)})
			continue
		}
		made[c.Name] = &setState{ID: nextID, Type: c.Kind.Type, Family: fam, Size: size}
		res.Created = append(res.Created, c.Name)
		nextID++
	}
	if len(errs) > 0 {
		return nil, errs
	}
	dp, err := s.maps(len(made) > 0)
	if err != nil {
		return nil, err
	}
	// Plan every add before changing anything.
	plans := make([]*addPlan, len(r.Adds))
	newElems := 0
	for i, a := range r.Adds {
		m, ok := made[a.Name]
		if !ok {
			if m, err = s.get(a.Name); err != nil {
				return nil, fmt.Errorf("%s: %w", a.Pos, err)
			}
		}
		p, err := s.plan(a.Name, m, a.Elems, newElems)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.Pos, err)
		}
		plans[i] = p
		newElems += p.add.Len()
	}
	for i, p := range plans {
		if err := dp.Insert(p.add); err != nil {
			for _, done := range plans[:i] {
				_ = dp.Remove(done.add)
			}
			return nil, fmt.Errorf("%s: %w", r.Adds[i].Pos, err)
		}
	}
	s.st.NextSetID = max(s.st.NextSetID, nextID)
	for name, m := range made {
		s.st.Sets[name] = m
	}
	for i, p := range plans {
		s.st.Sets[r.Adds[i].Name].Count += p.add.Len()
		res.Added += p.add.Len()
		res.Skipped += p.held.Len()
	}
	return res, s.save()
}

// SyncResult is what Sync did.
type SyncResult struct {
	RestoreResult
	Removed int // elements the sets held that the file does not list
}

// Sync makes the sets an `ipset save` file names hold exactly its
// elements: Restore creates the missing sets and adds what is new, then
// the elements the file no longer lists are removed (adds before removals,
// so an element moved to a covering prefix is never unmatched in between).
// Sets the file does not name are left alone. The daemon keeps its sets
// files in force with it.
func (s *Sets) Sync(r *rules.SetRestore) (*SyncResult, error) {
	res, err := s.Restore(r)
	if err != nil {
		return nil, err
	}
	out := &SyncResult{RestoreResult: *res}
	want := map[string]map[netip.Prefix]bool{}
	for _, c := range r.Creates {
		want[c.Name] = map[netip.Prefix]bool{}
	}
	for _, a := range r.Adds {
		if want[a.Name] == nil {
			want[a.Name] = map[netip.Prefix]bool{}
		}
		for _, p := range a.Elems {
			want[a.Name][p.Masked()] = true
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m, err := s.get(name)
		if err != nil {
			return out, err
		}
		have, err := s.dp.List(m.ID, m.Family == "inet6")
		if err != nil {
			return out, err
		}
		var extra []netip.Prefix
		for _, p := range have {
			if !want[name][p.Masked()] {
				extra = append(extra, p)
			}
		}
		if len(extra) == 0 {
			continue
		}
		ch, err := s.Del(name, extra, true)
		if err != nil {
			return out, fmt.Errorf("set %q: removing what the file no longer lists: %w", name, err)
		}
		out.Removed += ch.Changed
	}
	return out, nil
}

// setsRecord is the record of the named sets of a data plane whose record
// is lost: a record of named sets only, if there is one (made since the
// record was lost), else none. New sets never take the id of elements
// left in the set map by the sets lost with the record.
func setsRecord(p Paths, dp *datapath.Datapath) (*state, error) {
	st, err := loadState(p)
	if err != nil || st == nil || st.loaded() {
		st = newState()
	}
	hi, err := dp.Sets().HighestID()
	if err != nil {
		return nil, err
	}
	st.NextSetID = max(st.NextSetID, hi+1)
	return st, nil
}
