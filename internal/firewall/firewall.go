// Package firewall is the control-plane API: load, apply, add, delete,
// flush, detach, list, status and trace. The CLI commands (and later the
// daemon) call it; it never sits on the packet path.
package firewall

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// Options are settings of a load or apply.
type Options struct {
	Malformed string // "drop" (default) or "accept": verdict for malformed packets
	// MaxRules sizes the classifier tables at load (classifier entries per
	// generation; 0: keep what is loaded, else the default).
	MaxRules int
	// CTMax sizes the conntrack table at load (0: keep what is loaded, else
	// the default).
	CTMax int
	// CTTimeouts, when CTTimeoutsSet, replace the conntrack timeouts in force
	// (0 entries: the defaults).
	CTTimeouts    conntrack.Timeouts
	CTTimeoutsSet bool
	// CTFull is what NEW connections get when the conntrack table is full:
	// "drop" (default) or "accept" (untracked). "": keep what is in force.
	CTFull string
	// RejectRate and RejectBurst bound REJECT's answers per source: per
	// second, and at once (0: keep what is in force, else
	// compile.DefaultRejectRate / DefaultRejectBurst).
	RejectRate  uint32
	RejectBurst uint32
	// LogRate and LogBurst are the rate limit of logged rules that set
	// none (zero: keep what is in force, else compile.DefaultLogRate /
	// DefaultLogBurst). LogSnap (Load only) is how many bytes of a logged
	// packet an event carries (nil: keep what is in force, else
	// compile.DefaultLogSnap).
	LogRate  rules.LogRate
	LogBurst uint32
	LogSnap  *int
}

// Result reports what a change did.
type Result struct {
	Generation uint64
	Rules      int
	Entries    int
	Warnings   []string
	Attached   map[string]datapath.Mode
	Tree       compile.TreeStats
}

// Firewall is an open, locked handle on the firewall in force.
type Firewall struct {
	paths  Paths
	dp     *datapath.Datapath
	st     *state
	rs     *rules.RuleSet
	unlock func()
	// readOnly: opened without the lock (OpenReadOnly); changes refused.
	readOnly bool
	// Load: what to restore if it fails midway.
	prev       *rules.RuleSet
	prevIDs    []uint32
	prevIfaces map[string]Iface
	prevCT     conntrack.Timeouts
	prevCTFull string
}

// Open locks the state and opens the pinned data plane. It fails with
// datapath.ErrNotLoaded when nothing is loaded.
func Open(p Paths) (*Firewall, error) {
	unlock, err := lock(p)
	if err != nil {
		return nil, err
	}
	st, rs, err := loadState(p)
	if err != nil {
		unlock()
		return nil, err
	}
	if st == nil || !st.loaded() {
		unlock()
		return nil, datapath.ErrNotLoaded
	}
	dp, err := datapath.Open(p.PinDir)
	if err != nil {
		unlock()
		return nil, err
	}
	return &Firewall{paths: p, dp: dp, st: st, rs: rs, unlock: unlock}, nil
}

// OpenReadOnly opens the firewall in force for reading only (counters,
// lists, status) without the lock that changes hold, so a monitor never
// waits behind a long apply or set restore. The state file is replaced by
// rename, so it is always read whole; what it records may trail the data
// plane by the change in progress: read while a change is being made, a
// rule that change removes can still be listed, and a counter id the
// change reuses reads as the new rule's (near zero) for that moment.
// Changes through a read-only handle are refused.
func OpenReadOnly(p Paths) (*Firewall, error) {
	st, rs, err := loadState(p)
	if err != nil {
		return nil, err
	}
	if st == nil || !st.loaded() {
		return nil, datapath.ErrNotLoaded
	}
	dp, err := datapath.Open(p.PinDir)
	if err != nil {
		return nil, err
	}
	return &Firewall{paths: p, dp: dp, st: st, rs: rs, unlock: func() {}, readOnly: true}, nil
}

// errReadOnly refuses a change through OpenReadOnly's handle.
var errReadOnly = errors.New("the firewall was opened read-only")

// Close releases the lock and file descriptors. Closing again does nothing.
func (f *Firewall) Close() {
	if f.dp != nil {
		f.dp.Close()
		f.dp = nil
	}
	if f.unlock != nil {
		f.unlock()
		f.unlock = nil
	}
}

// Load attaches the firewall to ifaces with rs in force. It loads (or
// upgrades) the program, installs the rule set, attaches, and records the
// state. If anything fails, what this call set up is undone.
func Load(p Paths, ifaces []string, mode datapath.Mode, rs *rules.RuleSet, opt Options) (*Result, error) {
	modes := make([]IfaceMode, len(ifaces))
	for i, name := range ifaces {
		modes[i] = IfaceMode{Name: name, Mode: mode}
	}
	return LoadModes(p, modes, rs, opt)
}

// IfaceMode is an interface and the attach mode it asks for.
type IfaceMode struct {
	Name string        `json:"name"`
	Mode datapath.Mode `json:"mode"`
}

// LoadModes is Load with an attach mode per interface.
func LoadModes(p Paths, modes []IfaceMode, rs *rules.RuleSet, opt Options) (*Result, error) {
	ifaces := make([]string, len(modes))
	modeOf := map[string]datapath.Mode{}
	for i, m := range modes {
		ifaces[i] = m.Name
		modeOf[m.Name] = m.Mode
	}
	if len(ifaces) == 0 {
		return nil, errors.New("no interface given (-i IFACE)")
	}
	unlock, err := lock(p)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, inForce, err := loadState(p)
	if err != nil {
		return nil, err
	}
	// fresh: no program loaded before (there may be named sets).
	fresh := st == nil || !st.loaded()
	if st == nil {
		st = newState()
	}
	lim := datapath.LimitsFor(opt.MaxRules)
	if opt.MaxRules == 0 && !fresh {
		if cur, err := datapath.Open(p.PinDir); err == nil {
			lim = cur.Limits() // keep the loaded size
			cur.Close()
		}
	}
	if opt.CTMax > 0 {
		lim.Conntrack = opt.CTMax
	}
	lim.LogSnap = compile.DefaultLogSnap
	if st.LogSnap != nil {
		lim.LogSnap = *st.LogSnap
	}
	if opt.LogSnap != nil {
		lim.LogSnap = *opt.LogSnap
	}
	dp, err := datapath.Load(p.PinDir, lim)
	if err != nil {
		if fresh {
			removeFresh(p, st)
		}
		return nil, err
	}
	if inForce == nil {
		inForce = &rules.RuleSet{}
	}
	// With the rule set in force known, unchanged rules keep their ids and counters.
	f := &Firewall{paths: p, dp: dp, st: st, rs: inForce, prev: inForce, prevIDs: st.IDs,
		prevCT: st.CTTimeouts, prevCTFull: st.CTFull}
	defer dp.Close()

	f.prevIfaces = map[string]Iface{}
	for n, i := range st.Interfaces {
		f.prevIfaces[n] = i
	}
	// Interfaces that will be attached, for -i resolution.
	newIfaces := map[string]Iface{}
	for _, name := range ifaces {
		nl, err := net.InterfaceByName(name)
		if err != nil {
			return nil, f.undo(fresh, nil, fmt.Errorf("interface %s: %w", name, err))
		}
		newIfaces[name] = Iface{Index: nl.Index}
	}
	for n, i := range newIfaces {
		st.Interfaces[n] = i
	}
	res, err := f.apply(rs, opt, fresh)
	if err != nil {
		st.Interfaces = f.prevIfaces
		return nil, f.undo(fresh, nil, err)
	}
	res.Attached = map[string]datapath.Mode{}
	// New interfaces first; interfaces attached before switch to the new
	// program last, so a failure before that leaves them as they were.
	var attached []string
	for _, name := range ifaces {
		if _, before := f.prevIfaces[name]; before {
			continue
		}
		m, err := dp.Attach(name, modeOf[name])
		if err != nil {
			return nil, f.undo(fresh, attached, err)
		}
		attached = append(attached, name)
		res.Attached[name] = m
		st.Interfaces[name] = Iface{Index: newIfaces[name].Index, Mode: string(m)}
	}
	for name, prev := range f.prevIfaces {
		want := datapath.ModeAuto // not named: keep its mode
		if _, named := newIfaces[name]; named {
			want = modeOf[name]
		}
		m, err := dp.Attach(name, want) // updates the link; refuses a mode change
		if err != nil {
			return nil, f.undo(fresh, attached, fmt.Errorf("updating %s to the new program: %w", name, err))
		}
		if _, named := newIfaces[name]; named {
			res.Attached[name] = m
		}
		st.Interfaces[name] = Iface{Index: prev.Index, Mode: string(m)}
	}
	if err := dp.PinProgram(); err != nil {
		return nil, f.undo(fresh, attached, err)
	}
	st.Program = datapath.ProgramVersion()
	snap := lim.LogSnap
	st.LogSnap = &snap
	if err := st.save(p); err != nil {
		return nil, f.undo(fresh, attached, err)
	}
	return res, nil
}

// undo removes what a failed Load set up: the interfaces it newly
// attached, the rules it installed, and everything when nothing was loaded
// before.
func (f *Firewall) undo(fresh bool, attached []string, err error) error {
	for _, name := range attached {
		_ = f.dp.Detach(name)
	}
	if !fresh && f.prev != nil && f.rs != f.prev {
		// The new rules were installed before the failure: put the old back.
		// Restore what assignIDs compares against, so every rule gets its
		// old id (and counter) back.
		f.st.Interfaces = f.prevIfaces
		f.rs, f.st.IDs = f.prev, f.prevIDs
		if _, rerr := f.apply(f.prev, Options{CTTimeouts: f.prevCT, CTTimeoutsSet: true, CTFull: f.prevCTFull}, false); rerr != nil {
			return fmt.Errorf("%w; restoring the previous rules also failed: %v", err, rerr)
		}
	}
	if fresh {
		f.dp.Close()
		removeFresh(f.paths, f.st)
	}
	return err
}

// removeFresh removes what a failed first load pinned: everything, but
// for the named sets made before it (whose state file it did not touch).
func removeFresh(p Paths, st *state) {
	if len(st.Sets) > 0 {
		_ = datapath.UnpinKeepSets(p.PinDir)
		return
	}
	_ = datapath.Unpin(p.PinDir)
	_ = os.Remove(p.StateFile())
}

// Apply replaces the whole rule set atomically.
func (f *Firewall) Apply(rs *rules.RuleSet, opt Options) (*Result, error) {
	if f.readOnly {
		return nil, errReadOnly
	}
	res, err := f.apply(rs, opt, false)
	if err != nil {
		return nil, err
	}
	return res, f.st.save(f.paths)
}

// apply assigns stable ids, compiles, installs and updates f.st in memory.
// Nothing in the kernel changes unless compilation succeeds.
func (f *Firewall) apply(rs *rules.RuleSet, opt Options, fresh bool) (*Result, error) {
	malformed := opt.Malformed
	if malformed == "" {
		malformed = f.st.Malformed
	}
	if malformed == "" {
		malformed = "drop"
	}
	if malformed != "drop" && malformed != "accept" {
		return nil, fmt.Errorf("--malformed %q: want drop or accept", malformed)
	}
	ctFull := opt.CTFull
	if ctFull == "" {
		ctFull = f.st.CTFull
	}
	if ctFull == "" {
		ctFull = "drop"
	}
	if ctFull != "drop" && ctFull != "accept" {
		return nil, fmt.Errorf("--ct-full %q: want drop or accept", ctFull)
	}
	timeouts := f.st.CTTimeouts
	if opt.CTTimeoutsSet {
		timeouts = opt.CTTimeouts
	}
	ids, fresh_ids, err := f.assignIDs(rs, fresh)
	if err != nil {
		return nil, err
	}
	ifaces := map[string]uint32{}
	for n, i := range f.st.Interfaces {
		ifaces[n] = uint32(i.Index)
	}
	logRate := opt.LogRate
	if logRate.IsZero() && f.st.LogRate != "" {
		if logRate, err = rules.ParseLogRate(f.st.LogRate); err != nil {
			return nil, fmt.Errorf("the log rate in force (%s): %w", f.paths.StateFile(), err)
		}
	}
	logBurst := pick(opt.LogBurst, f.st.LogBurst)
	lim := f.dp.Limits()
	tables, warns, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: ifaces, Sets: f.st.compileSets(),
		LogRate: logRate, LogBurst: logBurst,
		MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
	if err != nil {
		return nil, err
	}
	for _, id := range fresh_ids {
		if err := f.dp.ResetRuleCounter(id); err != nil {
			return nil, err
		}
	}
	if err := f.dp.Install(tables); err != nil {
		return nil, err
	}
	act := compile.ActDrop
	if malformed == "accept" {
		act = compile.ActAccept
	}
	rate, burst := pick(opt.RejectRate, f.st.RejectRate, compile.DefaultRejectRate),
		pick(opt.RejectBurst, f.st.RejectBurst, compile.DefaultRejectBurst)
	if err := f.dp.SetConfig(datapath.Config{MalformedAction: act, CTFullAccept: ctFull == "accept", CTTimeouts: timeouts,
		RejectRate: rate, RejectBurst: burst}); err != nil {
		return nil, err
	}
	f.st.CTFull, f.st.CTTimeouts = ctFull, timeouts
	f.st.RejectRate, f.st.RejectBurst = rate, burst
	f.st.LogRate, f.st.LogBurst = "", logBurst
	if !logRate.IsZero() {
		f.st.LogRate = logRate.String()
	}
	f.st.Generation++
	f.st.Rules = rs.String()
	f.st.IDs = ids
	f.st.Malformed = malformed
	f.rs = rs
	res := &Result{Generation: f.st.Generation, Rules: len(rs.Rules), Entries: len(tables.Entries), Tree: tables.Stats}
	for _, w := range warns {
		r := rs.Rules[w.Rule]
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %s: %s", r.Pos, r.String(), w.Msg))
	}
	return res, nil
}

// pick is the first non-zero value.
func pick(vals ...uint32) uint32 {
	for _, v := range vals {
		if v != 0 {
			return v
		}
	}
	return 0
}

// assignIDs keeps the id of every rule whose canonical text is unchanged
// (so its counters carry over) and gives new rules unused ids, returned in
// fresh so their counters can be zeroed first.
func (f *Firewall) assignIDs(rs *rules.RuleSet, freshLoad bool) (ids, fresh []uint32, err error) {
	old := map[string][]uint32{}
	used := map[uint32]bool{}
	if !freshLoad && f.rs != nil {
		for i, r := range f.rs.Rules {
			old[r.String()] = append(old[r.String()], f.st.IDs[i])
		}
	}
	ids = make([]uint32, len(rs.Rules))
	for i, r := range rs.Rules {
		if q := old[r.String()]; len(q) > 0 {
			ids[i] = q[0]
			old[r.String()] = q[1:]
			used[q[0]] = true
		}
	}
	next := uint32(compile.FirstRuleID)
	max := f.dp.MaxRuleIDs()
	for i := range rs.Rules {
		if ids[i] != 0 {
			continue
		}
		for used[next] {
			next++
		}
		if next >= max {
			return nil, nil, fmt.Errorf("more than %d rules: out of counter slots", max-compile.FirstRuleID)
		}
		ids[i] = next
		used[next] = true
		fresh = append(fresh, next)
	}
	return ids, fresh, nil
}

// RuleSet is the rule set in force.
func (f *Firewall) RuleSet() *rules.RuleSet { return f.rs }

// Interfaces lists the attached interfaces, sorted.
func (f *Firewall) Interfaces() []string {
	var out []string
	for n := range f.st.Interfaces {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Datapath is the open data plane.
func (f *Firewall) Datapath() *datapath.Datapath { return f.dp }
