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
	"time"

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
	// CTTCPPickup is whether conntrack picks up TCP connections it does
	// not know mid-stream: "loose" (default: a bare ACK starts an entry,
	// NEW to the rules, as Linux's nf_conntrack_tcp_loose=1) or "strict"
	// (only a SYN starts one; such ACKs are INVALID). "": keep what is in
	// force.
	CTTCPPickup string
	// RejectGlobalRate bounds REJECT's answers from all sources together,
	// per second and at once (0: keep what is in force, else
	// compile.DefaultRejectGlobalRate).
	RejectGlobalRate uint32
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
	Entries    int // classifier entries of the main generation (with Delta: the one in force)
	Warnings   []string
	Attached   map[string]datapath.Mode
	Tree       compile.TreeStats
	// Delta: the change went into the delta stage: in force, and pending
	// until a rebuild folds it into the main generation (Rebuild).
	Delta bool
	// DeltaEntries and DeltaDeleted are how full the delta stage is
	// (compile.DeltaMax entries, compile.DeltaDeadMax deleted rules).
	DeltaEntries int
	DeltaDeleted int
	// Rebuilt: a new main generation was built (it folded the delta
	// stage, if any).
	Rebuilt bool
	// InForce is how long the change took to reach packets, from the
	// start of the call that made it.
	InForce time.Duration
}

// Firewall is an open, locked handle on the firewall in force.
type Firewall struct {
	paths  Paths
	dp     *datapath.Datapath
	st     *state
	rs     *ruleStore // the rules in force
	unlock func()
	// readOnly: opened without the lock (OpenReadOnly); changes refused.
	readOnly bool
	// Load: what to restore if it fails midway.
	prev       *ruleStore
	prevBase   string
	prevIfaces map[string]Iface
	prevCT     conntrack.Timeouts
	prevCTFull string
	prevPickup string
}

// Open locks the state and opens the pinned data plane. It fails with
// datapath.ErrNotLoaded when nothing is loaded. It reads no more of the
// rule set than the base file's header: single edits stay cheap however
// many rules are in force.
func Open(p Paths) (*Firewall, error) {
	unlock, err := lock(p)
	if err != nil {
		return nil, err
	}
	st, err := loadState(p)
	if err != nil {
		unlock()
		return nil, err
	}
	if st == nil || !st.loaded() {
		unlock()
		return nil, datapath.ErrNotLoaded
	}
	rs, err := openStore(p, st)
	if err != nil {
		unlock()
		return nil, err
	}
	dp, err := datapath.Open(p.PinDir)
	if err != nil {
		rs.close()
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
	st, rs, err := readStore(p)
	if err != nil {
		return nil, err
	}
	dp, err := datapath.Open(p.PinDir)
	if err != nil {
		rs.close()
		return nil, err
	}
	return &Firewall{paths: p, dp: dp, st: st, rs: rs, unlock: func() {}, readOnly: true}, nil
}

// errReadOnly refuses a change through OpenReadOnly's handle.
var errReadOnly = errors.New("the firewall was opened read-only")

// Close releases the lock, the rules' file and the file descriptors.
// Closing again does nothing.
func (f *Firewall) Close() {
	if f.dp != nil {
		f.dp.Close()
		f.dp = nil
	}
	if f.unlock != nil {
		f.unlock()
		f.unlock = nil
	}
	f.rs.close()
	if f.prev != f.rs {
		f.prev.close()
	}
}

// save records the state, with the rules in force.
func (f *Firewall) save() error { return saveState(f.paths, f.st, f.rs) }

// saveState writes st, first writing the rules of rs to their base file
// when they are only in memory (a version 1 or 2 state read).
func saveState(p Paths, st *state, rs *ruleStore) error {
	if rs != nil && st.loaded() {
		if err := rs.base.write(p); err != nil {
			return err
		}
		st.Base, st.Rules, st.IDs = rs.base.name, "", nil
		st.Policies, st.Delta = policyText(rs.policies), rs.deltaState()
	}
	return st.save(p)
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
	st, err := loadState(p)
	if err != nil {
		return nil, err
	}
	// fresh: no program loaded before (there may be named sets).
	fresh := st == nil || !st.loaded()
	if st == nil {
		st = newState()
	}
	inForce, err := openStore(p, st)
	if err != nil {
		return nil, err
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
		inForce.close()
		if fresh {
			removeFresh(p, st)
		}
		return nil, err
	}
	// With the rule set in force known, unchanged rules keep their ids and counters.
	f := &Firewall{paths: p, dp: dp, st: st, rs: inForce, prev: inForce, prevBase: st.Base,
		prevCT: st.CTTimeouts, prevCTFull: st.CTFull, prevPickup: st.CTTCPPickup, unlock: func() {}}
	defer f.Close()

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
	if err := f.save(); err != nil {
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
		// The new rules were installed before the failure: put the old
		// back, every rule with its old id (and counter).
		f.st.Interfaces = f.prevIfaces
		f.rs.close()
		f.rs, f.st.Base = f.prev, f.prevBase
		prev, ids, rerr := f.prev.ruleSet()
		if rerr == nil {
			_, rerr = f.install(prev, ids, nil, Options{CTTimeouts: f.prevCT, CTTimeoutsSet: true, CTFull: f.prevCTFull,
				CTTCPPickup: orDefault(f.prevPickup, "loose")})
		}
		if rerr != nil {
			return fmt.Errorf("%w; restoring the previous rules also failed: %v", err, rerr)
		}
	}
	if fresh {
		f.dp.Close()
		f.dp = nil
		removeFresh(f.paths, f.st)
	}
	return err
}

// removeFresh removes what a failed first load pinned: everything, but
// for the named sets made before it (whose state file it did not touch).
func removeFresh(p Paths, st *state) {
	if len(st.Sets) > 0 {
		_ = datapath.UnpinKeepSets(p.PinDir)
		_ = removeBases(p, "")
		return
	}
	_ = datapath.Unpin(p.PinDir)
	_ = os.Remove(p.StateFile())
	_ = removeBases(p, "")
}

// Apply replaces the whole rule set atomically (and folds the delta
// stage away).
func (f *Firewall) Apply(rs *rules.RuleSet, opt Options) (*Result, error) {
	if f.readOnly {
		return nil, errReadOnly
	}
	res, err := f.apply(rs, opt, false)
	if err != nil {
		return nil, err
	}
	return res, f.save()
}

// apply assigns stable ids and installs rs.
func (f *Firewall) apply(rs *rules.RuleSet, opt Options, fresh bool) (*Result, error) {
	ids, freshIDs, err := f.assignIDs(rs, fresh)
	if err != nil {
		return nil, err
	}
	res, err := f.install(rs, ids, freshIDs, opt)
	if err != nil {
		return nil, err
	}
	f.st.Generation++
	res.Generation = f.st.Generation
	return res, nil
}

// install compiles rs (rule i with counter id ids[i]; the counters of
// freshIDs are zeroed first), installs it as a new main generation, writes
// its base file, and updates f.st (but for the generation) and f.rs in
// memory. Nothing in the kernel changes unless compilation succeeds.
func (f *Firewall) install(rs *rules.RuleSet, ids, freshIDs []uint32, opt Options) (*Result, error) {
	start := time.Now()
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
	pickup := orDefault(opt.CTTCPPickup, orDefault(f.st.CTTCPPickup, "loose"))
	if pickup != "loose" && pickup != "strict" {
		return nil, fmt.Errorf("--ct-tcp-pickup %q: want loose or strict", pickup)
	}
	timeouts := f.st.CTTimeouts
	if opt.CTTimeoutsSet {
		timeouts = opt.CTTimeouts
	}
	logRate := opt.LogRate
	if logRate.IsZero() && f.st.LogRate != "" {
		var err error
		if logRate, err = rules.ParseLogRate(f.st.LogRate); err != nil {
			return nil, fmt.Errorf("the log rate in force (%s): %w", f.paths.StateFile(), err)
		}
	}
	logBurst := pick(opt.LogBurst, f.st.LogBurst)
	lim := f.dp.Limits()
	tables, warns, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: f.st.ifaceIndexes(), Sets: f.st.compileSets(),
		LogRate: logRate, LogBurst: logBurst,
		MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
	if err != nil {
		return nil, err
	}
	for _, id := range freshIDs {
		if err := f.dp.ResetRuleCounter(id); err != nil {
			return nil, err
		}
	}
	recs := make([]baseRule, len(rs.Rules))
	for i := range rs.Rules {
		recs[i] = baseRuleOf(&rs.Rules[i], ids[i], tables.Spans[i])
	}
	if err := f.installTables(tables, recs, rs); err != nil {
		return nil, err
	}
	f.rs.parsed, f.rs.ids = rs, ids
	act := compile.ActDrop
	if malformed == "accept" {
		act = compile.ActAccept
	}
	rate, burst := pick(opt.RejectRate, f.st.RejectRate, compile.DefaultRejectRate),
		pick(opt.RejectBurst, f.st.RejectBurst, compile.DefaultRejectBurst)
	global := pick(opt.RejectGlobalRate, f.st.RejectGlobalRate, compile.DefaultRejectGlobalRate)
	if err := f.dp.SetConfig(datapath.Config{MalformedAction: act, CTFullAccept: ctFull == "accept", CTTimeouts: timeouts,
		RejectRate: rate, RejectBurst: burst, RejectGlobalRate: global, CTTCPStrict: pickup == "strict"}); err != nil {
		return nil, err
	}
	f.st.CTFull, f.st.CTTimeouts, f.st.CTTCPPickup = ctFull, timeouts, pickup
	f.st.RejectRate, f.st.RejectBurst, f.st.RejectGlobalRate = rate, burst, global
	f.st.LogRate, f.st.LogBurst = "", logBurst
	if !logRate.IsZero() {
		f.st.LogRate = logRate.String()
	}
	f.st.Malformed = malformed
	res := &Result{Rules: len(rs.Rules), Entries: len(tables.Entries), Tree: tables.Stats, Rebuilt: true, InForce: time.Since(start)}
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

// installTables installs t as a new main generation (clearing the delta
// stage with the same switch), compiled from the rules recs describe, and
// makes those the rules in force, with pol's policies and no edits: it
// writes their base file and updates f.st (but for the generation) and
// f.rs in memory.
func (f *Firewall) installTables(t *compile.Tables, recs []baseRule, pol *rules.RuleSet) error {
	stamp := f.st.Builds + 1
	b, err := parseBase("", encodeBase(stamp, recs, t))
	if err != nil {
		return err
	}
	if err := b.write(f.paths); err != nil {
		return err
	}
	if err := f.dp.InstallStamped(t, stamp); err != nil {
		return err
	}
	if f.rs != f.prev {
		f.rs.close()
	}
	f.rs = &ruleStore{policies: &rules.RuleSet{Policies: pol.Policies}, base: b, ov: b.overlay()}
	f.st.Builds, f.st.Base, f.st.Delta = stamp, b.name, nil
	return nil
}

// assignIDs keeps the id of every rule whose canonical text is unchanged
// (so its counters carry over) and gives new rules unused ids, returned in
// fresh so their counters can be zeroed first.
func (f *Firewall) assignIDs(rs *rules.RuleSet, freshLoad bool) (ids, fresh []uint32, err error) {
	old := map[string][]uint32{}
	used := map[uint32]bool{}
	if !freshLoad && f.rs != nil {
		for _, ref := range f.rs.refs() {
			r := f.rs.ruleOf(ref)
			old[r.Text] = append(old[r.Text], r.ID)
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

// RuleSet parses the rule set in force (slow for large rule sets: single
// edits never need it).
func (f *Firewall) RuleSet() (*rules.RuleSet, error) {
	rs, _, err := f.rs.ruleSet()
	return rs, err
}

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
