// Package firewall is the control-plane API: load, apply, add, delete,
// flush, detach, list, status and trace. The CLI commands and the
// daemon call it; it never sits on the packet path.
package firewall

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
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
	// Forward is how packets FORWARD accepts are delivered: "xdp", by
	// the fast path in XDP (bpf/lib/fwd.h), or "stack", by the kernel;
	// "": keep what is in force, else "xdp".
	Forward string
	// PriorityCPUs are the bulk CPUs the xdpfw-priority table's BULK
	// class is handed to: a CPU list ("1", "2-3"), "auto" (every online
	// CPU where there are two or more) or "none" (priority off: every
	// packet judged where it arrives). "": keep what is in force, else
	// "auto" (datapath.PriorityCPUs). Apply changes them with the rules,
	// all or nothing (applyPriorityCPUs).
	PriorityCPUs string
	// CTKernelNAT is whether XDP asks the kernel's conntrack about packets
	// of connections the kernel's nat table translates: "on" (default) or
	// "off" (docs/conntrack.md "Kernel NAT"). "": keep what is in force.
	CTKernelNAT string
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
	// LatencySample (Load only), when set: the data plane times one
	// packet in N per CPU, 0 none (datapath.SetLatencySample); nil keeps
	// the value in force.
	LatencySample *uint32
	// AllowEmpty lets an empty rule set (rules.RuleSet.Empty) be put in
	// force; without it Validate refuses one.
	AllowEmpty bool
	// NAT (Load only): who translates, NATKernel ("" too: the kernel's
	// nat table, as before) or NATXdpfw (the rule set's nat table, in
	// xdpfw's data plane: docs/nat.md).
	NAT string
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
	// Upgraded: the pinned maps a load of another version made anew
	// (another layout or size), one line each with what it carried
	// over (datapath.Upgrades); entries lost are also in Warnings.
	Upgraded []string
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
	prevState  *state
	prevIfaces map[string]Iface
	// reserved: ids the rules in force count on, read from the kernel
	// when the record of them is lost (assignIDs gives them to no rule).
	reserved map[uint32]bool
}

// Open locks the state and opens the pinned data plane with the record
// of what it has in force (record.go). It fails with datapath.ErrNotLoaded
// when nothing is loaded, and with a RecordError when the program is
// pinned but its record is lost or corrupt. It reads no more of the rule
// set than the base file's header: single edits stay cheap however many
// rules are in force.
func Open(p Paths) (*Firewall, error) {
	unlock, err := lock(p)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(p.interruptedFile()); err == nil {
		unlock()
		return nil, errInterrupted
	}
	dp, err := datapath.Open(p.PinDir)
	if err != nil {
		unlock()
		return nil, err
	}
	st, rs, err := openRecord(p, dp, true)
	if err != nil {
		dp.Close()
		unlock()
		return nil, err
	}
	return &Firewall{paths: p, dp: dp, st: st, rs: rs, unlock: unlock}, nil
}

// OpenReadOnly opens the firewall in force for reading only (counters,
// lists, status) without the lock that changes hold, so a monitor never
// waits behind a long apply or set restore. It reads the record the
// kernel confirms (record.go), so what it shows is what packets see at
// the moment it read the kernel. Changes through a read-only handle are
// refused.
func OpenReadOnly(p Paths) (*Firewall, error) {
	dp, st, rs, err := readStore(p)
	if err != nil {
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

// save rewrites the record in force (for what no classifier switch
// commits: interface modes, the program version).
func (f *Firewall) save() error { return saveState(f.paths, f.st, f.rs) }

// saveState writes st as the record in force, first writing the rules of
// rs to their base file when they are only in memory (a version 1 or 2
// state read).
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
	rs, nat, err := splitNAT(rs, opt.NAT)
	if err != nil {
		return nil, err
	}
	if err := Validate(rs, opt); err != nil {
		return nil, err
	}
	if err := datapath.CheckKernel(); err != nil {
		return nil, err
	}
	ifaces := make([]string, len(modes))
	modeOf := map[string]datapath.Mode{}
	for i, m := range modes {
		ifaces[i] = m.Name
		modeOf[m.Name] = m.Mode
	}
	if len(ifaces) == 0 {
		return nil, errors.New("no interface given (-i IFACE)")
	}
	// Interfaces that will be attached, for -i resolution; a mistyped one
	// fails here, before anything is touched.
	newIfaces := map[string]Iface{}
	for _, name := range ifaces {
		nl, err := net.InterfaceByName(name)
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", name, err)
		}
		newIfaces[name] = Iface{Index: nl.Index}
	}
	unlock, err := lock(p)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// fresh: no program pinned before (there may be named sets).
	// recovering: one is, attached and filtering, but its record is lost
	// or corrupt: the rules are replaced in place, with one switch.
	cur, err := datapath.Open(p.PinDir)
	fresh := errors.Is(err, datapath.ErrNotLoaded)
	lim := datapath.LimitsFor(opt.MaxRules)
	if err == nil {
		if opt.MaxRules == 0 {
			lim = cur.Limits() // keep the loaded size
		}
		cur.Close()
	} else if !fresh && opt.MaxRules == 0 {
		// an upgrade over pins laid out otherwise (Open refuses to read
		// them) or lacking maps: Load carries or reuses them, at the
		// size loaded
		if pl, perr := datapath.PinnedLimits(p.PinDir); perr == nil {
			lim = pl
		}
	}
	if fresh && opt.MaxRules == 0 {
		lim = datapath.LimitsFor(autoMaxRules(p, rs, opt.CTMax))
	}
	if opt.CTMax > 0 {
		lim.Conntrack = opt.CTMax
	}
	lim.NAT = nat != nil
	if nat != nil {
		lim.NATNoHooks = datapath.NATNoHooksOf(nat)
	}
	var (
		st         *state
		inForce    *ruleStore
		recovering bool
		reserved   map[uint32]bool // ids the rules in force count on, when not recorded
	)
	if fresh {
		if st, err = loadState(p); err != nil {
			return nil, err
		}
		if st == nil {
			st = newState()
		} else if st.loaded() { // a record left behind by pins removed by hand
			st = st.setsOnly()
		}
		if inForce, err = openStore(p, st); err != nil {
			return nil, err
		}
	}
	peek, _ := loadState(p) // the snap length in force, when recorded
	if !fresh && opt.NAT == "" && peek != nil && peek.NAT == NATXdpfw {
		// a caller with no NAT setting (the daemon's configuration has
		// none yet) would turn xdpfw's NAT off under its connections
		return nil, errors.New("the firewall in force translates (load --nat xdpfw); this load names no NAT mode: " +
			"load with --nat xdpfw, or --nat kernel to hand the nat table back to the kernel")
	}
	lim.LogSnap = compile.DefaultLogSnap
	if peek != nil && peek.LogSnap != nil {
		lim.LogSnap = *peek.LogSnap
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
	if !fresh {
		// The record the kernel confirms, read through the maps just
		// loaded: they are the pinned ones.
		var re *RecordError
		st, inForce, err = openRecord(p, dp, true)
		if errors.As(err, &re) {
			recovering = true
			if st, err = recoveredState(p, dp); err == nil {
				inForce, err = openStore(p, st)
			}
			if err == nil {
				reserved, err = dp.RuleIDsInForce()
			}
		}
		if err != nil {
			dp.Close()
			return nil, err
		}
	}
	// With the rule set in force known, unchanged rules keep their ids and counters.
	f := &Firewall{paths: p, dp: dp, st: st, rs: inForce, prev: inForce, prevState: st.clone(), reserved: reserved, unlock: func() {}}
	defer f.Close()
	// undo: what to restore on failure (nothing when the rules in force
	// are unknown: the new ones stay, recorded).
	// switched: the interfaces filtered before that this load put on its
	// program (undo puts them back).
	var switched []string
	undo := func(attached []string, err error) error {
		return f.undo(fresh, recovering, attached, switched, err)
	}

	f.prevIfaces = map[string]Iface{}
	for n, i := range st.Interfaces {
		f.prevIfaces[n] = i
	}
	for n, i := range newIfaces {
		st.Interfaces[n] = i
	}
	// An interface attached before and re-created since has another
	// index: -i matches resolve against the one it has now.
	for n, i := range st.Interfaces {
		if nl, err := net.InterfaceByName(n); err == nil && nl.Index != i.Index {
			i.Index = nl.Index
			st.Interfaces[n] = i
		}
	}
	// The bulk CPUs named must be online: refused before anything changes.
	cpuSpec := orDefault(opt.PriorityCPUs, orDefault(st.PriorityCPUs, "auto"))
	cpus, err := datapath.PriorityCPUs(cpuSpec)
	if err != nil {
		return nil, undo(nil, err)
	}
	res, err := f.apply(rs, opt, fresh || recovering)
	if err != nil {
		return nil, undo(nil, err)
	}
	// the nat stage before any interface runs the program (docs/nat.md)
	if nat != nil {
		if err := f.startNAT(nat); err != nil {
			return nil, undo(nil, fmt.Errorf("the nat table: %w", err))
		}
	}
	// Maps made anew are pinned only once every interface runs the new
	// program: marked until then (interruptedName).
	if lines, _ := dp.Upgrades(); len(lines) > 0 && !fresh {
		if err := writeFileAtomic(p.interruptedFile(), []byte(strings.Join(lines, "\n")+"\n")); err != nil {
			return nil, undo(nil, fmt.Errorf("marking the load under way: %w", err))
		}
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
			return nil, undo(attached, err)
		}
		attached = append(attached, name)
		res.Attached[name] = m
		st.Interfaces[name] = Iface{Index: newIfaces[name].Index, Mode: string(m)}
	}
	for name := range f.prevIfaces {
		want := datapath.ModeAuto // not named: keep its mode
		if _, named := newIfaces[name]; named {
			want = modeOf[name]
		}
		switched = append(switched, name)
		m, err := dp.Attach(name, want) // updates the link; refuses a mode change
		if err != nil {
			return nil, undo(attached, fmt.Errorf("updating %s to the new program: %w", name, err))
		}
		if _, named := newIfaces[name]; named {
			res.Attached[name] = m
		}
		st.Interfaces[name] = Iface{Index: st.Interfaces[name].Index, Mode: string(m)}
	}
	// the fast path's devices, now that their attach modes are known
	if err := dp.SetForwardPorts(f.forwardPorts(datapath.ForwardMode(st.Forward))); err != nil {
		return nil, undo(attached, err)
	}
	// the bulk CPUs, each running the new program's xdpfw_cpumap
	if err := dp.SetPriority(cpus); err != nil {
		return nil, undo(attached, err)
	}
	st.PriorityCPUs = cpuSpec
	res.Warnings = append(res.Warnings, priorityWarnings(rs, cpuSpec, cpus)...)
	res.Warnings = append(res.Warnings, natWarnings(nat)...)
	st.NAT = orDefault(opt.NAT, NATKernel)
	st.NATRules = natText(nat)
	crashAt("load-switched")
	if err := dp.PinProgram(); err != nil {
		return nil, undo(attached, err)
	}
	if err := os.Remove(p.interruptedFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, undo(attached, err)
	}
	var lost int
	if res.Upgraded, lost = dp.Upgrades(); lost > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the upgrade's new maps could not hold %d entries of the pinned ones "+
			"(smaller tables): %s", lost, strings.Join(res.Upgraded, "; ")))
	}
	// The new program's path has no audit stage: the audit ends.
	if rec, _ := readAudit(f.paths); rec != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the audit of %s stopped: load replaces the program (xdpfw audit start again)", rec.File))
	}
	if err := stopAudit(f.paths, dp); err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("stopping the audit: %v", err))
	}
	res.Warnings = append(res.Warnings, ifaceWarnings(rs, ifaces)...)
	st.Program = datapath.ProgramVersion()
	snap := lim.LogSnap
	st.LogSnap = &snap
	if err := f.save(); err != nil {
		return nil, undo(attached, err)
	}
	if opt.LatencySample != nil {
		if err := dp.SetLatencySample(*opt.LatencySample); err != nil {
			return nil, fmt.Errorf("the rules are in force, but: %w", err)
		}
	}
	return res, nil
}

// undo removes what a failed Load set up: the interfaces it newly
// attached, the rules it installed, and everything when nothing was loaded
// before. When the rules in force before were not known (recovering: the
// record was lost), the new rules stay in force, recorded as such: the
// firewall never opens for want of the old ones.
func (f *Firewall) undo(fresh, recovering bool, attached, switched []string, err error) error {
	for _, name := range attached {
		_ = f.dp.Detach(name)
	}
	// The interfaces filtered before that the load switched to its
	// program go back to the program pinned, the one in force before:
	// left on the new program, they would use its maps, which are not the
	// pinned ones where the load made maps anew (another layout or size),
	// so list, status and the next apply would read and write maps these
	// packets never see.
	if !fresh {
		restored := true
		for _, name := range switched {
			if rerr := f.dp.RestorePinned(name); rerr != nil {
				restored = false
				err = fmt.Errorf("%w; putting %s back on the program in force also failed: %v", err, name, rerr)
			}
		}
		if restored { // else an interface still runs the new program: the mark stays
			_ = os.Remove(f.paths.interruptedFile())
		}
	}
	switch {
	case fresh:
		f.dp.Close()
		f.dp = nil
		removeFresh(f.paths, f.prevState)
	case recovering:
		for name := range f.st.Interfaces {
			if slices.Contains(attached, name) {
				delete(f.st.Interfaces, name)
			}
		}
		if f.st.Commit != nil {
			if serr := f.save(); serr != nil {
				return fmt.Errorf("%w; recording the rules in force also failed: %v", err, serr)
			}
		}
	case f.prev != nil && f.rs != f.prev:
		// The new rules were installed before the failure: put the old
		// back, every rule with its old id (and counter), and the old
		// record with them.
		prev := f.prevState.clone()
		prev.Builds, prev.Commit = f.st.Builds, f.st.Commit
		f.st = prev
		f.rs.close()
		f.rs = f.prev
		rs, ids, rerr := f.prev.ruleSet()
		if rerr == nil {
			_, rerr = f.install(rs, ids, nil, Options{CTTimeouts: prev.CTTimeouts, CTTimeoutsSet: true, CTFull: prev.CTFull,
				Malformed: prev.Malformed, RejectRate: prev.RejectRate, RejectBurst: prev.RejectBurst,
				RejectGlobalRate: prev.RejectGlobalRate, CTTCPPickup: orDefault(prev.CTTCPPickup, "loose"),
				Forward: orDefault(prev.Forward, string(datapath.ForwardXDP)), CTKernelNAT: orDefault(prev.CTKernelNAT, "on")})
		}
		if rerr != nil {
			return fmt.Errorf("%w; restoring the previous rules also failed: %v", err, rerr)
		}
	}
	return err
}

// removeFresh removes what a failed first load pinned: everything, but
// for the named sets made before it (recorded in st), whose record it puts
// back.
func removeFresh(p Paths, st *state) {
	if st != nil && len(st.Sets) > 0 {
		_ = datapath.UnpinKeepSets(p.PinDir)
		_ = st.setsOnly().save(p)
		return
	}
	_ = datapath.Unpin(p.PinDir)
	_ = os.Remove(p.StateFile())
	_ = cleanup(p, nil)
}

// recoveredState is the record of a data plane whose record is lost: its
// interfaces, as the kernel's pinned links name them, the named sets made
// since (setsRecord), and nothing else known (the rules, their ids and
// the sets are lost with it; the ids in use are read from the kernel).
func recoveredState(p Paths, dp *datapath.Datapath) (*state, error) {
	st, err := setsRecord(p, dp)
	if err != nil {
		return nil, err
	}
	for _, name := range datapath.AttachedInterfaces(p.PinDir) {
		nl, err := net.InterfaceByName(name)
		if err != nil {
			continue // its link is severed: load -i NAME attaches it again
		}
		st.Interfaces[name] = Iface{Index: nl.Index, Mode: string(datapath.CurrentMode(name))}
	}
	k, err := dp.InForce()
	if err != nil {
		return nil, err
	}
	st.Builds = k.Stamp
	c, err := dp.ConfigInForce()
	if err != nil {
		return nil, err
	}
	st.setConfig(c)
	return st, nil
}

// clone is a deep copy of st.
func (st *state) clone() *state {
	c := *st
	c.Interfaces = maps.Clone(st.Interfaces)
	c.Sets = map[string]*setState{}
	for n, m := range st.Sets {
		x := *m
		c.Sets[n] = &x
	}
	if st.Commit != nil {
		k := *st.Commit
		c.Commit = &k
	}
	return &c
}

// Apply replaces the whole rule set atomically (and folds the delta
// stage away).
func (f *Firewall) Apply(rs *rules.RuleSet, opt Options) (*Result, error) {
	if f.readOnly {
		return nil, errReadOnly
	}
	if err := Validate(rs, opt); err != nil {
		return nil, err
	}
	if err := f.natCTAddrsInForce(rs); err != nil {
		return nil, err
	}
	undo, err := f.applyPriorityCPUs(opt.PriorityCPUs)
	if err != nil {
		return nil, err
	}
	res, err := f.apply(rs, opt, false)
	if err != nil {
		return nil, undo(err)
	}
	// What the new rules run into on the interfaces filtered (a
	// --vlan-id rule where XDP cannot see tags), as load says.
	res.Warnings = append(res.Warnings, ifaceWarnings(rs, slices.Sorted(maps.Keys(f.st.Interfaces)))...)
	if cpus, err := f.dp.PriorityInForce(); err == nil {
		res.Warnings = append(res.Warnings, priorityWarnings(rs, orDefault(f.st.PriorityCPUs, "auto"), cpus)...)
	}
	return res, nil
}

// applyPriorityCPUs makes spec (a --priority-cpus value; "": keep) the
// bulk CPUs in force, ahead of Apply's rules, and records it in f.st,
// which the rules' switch writes: the record says what the kernel has.
// It changes nothing when spec is what is in force, or when it fails
// (a CPU not online; the cpumap refused). undo puts the CPUs in force
// before back, for a change of the rules that failed after it: Apply is
// all or nothing, the CPUs included. Once the rules' switch happened (a
// later step failed: "the rules are in force, but"), the record holds the
// new CPUs, and they stay.
func (f *Firewall) applyPriorityCPUs(spec string) (undo func(error) error, err error) {
	keep := func(err error) error { return err }
	if spec == "" || spec == orDefault(f.st.PriorityCPUs, "auto") {
		return keep, nil
	}
	cpus, err := datapath.PriorityCPUs(spec)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing changed", err)
	}
	old, err := f.dp.PriorityInForce()
	if err != nil {
		return nil, err
	}
	prevSpec, builds := f.st.PriorityCPUs, f.st.Builds
	back := func(err error) error {
		if f.st.Builds != builds { // switched, and recorded with the rules
			return err
		}
		f.st.PriorityCPUs = prevSpec
		if rerr := f.dp.SetPriority(old); rerr != nil {
			return fmt.Errorf("%w; and putting the bulk CPUs in force before (%s) back failed: %v", err,
				datapath.FormatCPUList(old), rerr)
		}
		return err
	}
	if err := f.dp.SetPriority(cpus); err != nil {
		return nil, back(fmt.Errorf("--priority-cpus %s: %w; nothing changed", spec, err))
	}
	f.st.PriorityCPUs = spec
	return back, nil
}

// apply assigns stable ids and installs rs as the next generation.
func (f *Firewall) apply(rs *rules.RuleSet, opt Options, fresh bool) (*Result, error) {
	ids, freshIDs, err := f.assignIDs(rs, fresh)
	if err != nil {
		return nil, err
	}
	return f.nextGeneration(func() (*Result, error) { return f.install(rs, ids, freshIDs, opt) })
}

// nextGeneration runs change, which puts a change of the rule set in
// force, recorded as the next generation.
func (f *Firewall) nextGeneration(change func() (*Result, error)) (*Result, error) {
	f.st.Generation++
	res, err := change()
	if err != nil {
		f.st.Generation--
		return nil, err
	}
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
	forward, err := datapath.ParseForwardMode(orDefault(opt.Forward, orDefault(f.st.Forward, string(datapath.ForwardXDP))))
	if err != nil {
		return nil, err
	}
	kernelNAT := orDefault(opt.CTKernelNAT, orDefault(f.st.CTKernelNAT, "on"))
	if kernelNAT != "on" && kernelNAT != "off" {
		return nil, fmt.Errorf("--ct-kernel-nat %q: want on or off", kernelNAT)
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
	names, err := f.st.ifaceNames()
	if err != nil {
		return nil, err
	}
	tables, warns, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: names.Attached, HostIfaces: names.Host, Sets: f.st.compileSets(),
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
	act := compile.ActDrop
	if malformed == "accept" {
		act = compile.ActAccept
	}
	rate, burst := pick(opt.RejectRate, f.st.RejectRate, compile.DefaultRejectRate),
		pick(opt.RejectBurst, f.st.RejectBurst, compile.DefaultRejectBurst)
	global := pick(opt.RejectGlobalRate, f.st.RejectGlobalRate, compile.DefaultRejectGlobalRate)
	// The settings go into the record with the rules (readers take the
	// data plane's from the kernel: they switch just after the rules).
	prev := *f.st
	f.st.CTFull, f.st.CTTimeouts, f.st.CTTCPPickup, f.st.CTKernelNAT = ctFull, timeouts, pickup, kernelNAT
	f.st.Forward = string(forward)
	f.st.RejectRate, f.st.RejectBurst, f.st.RejectGlobalRate = rate, burst, global
	f.st.LogRate, f.st.LogBurst = "", logBurst
	if !logRate.IsZero() {
		f.st.LogRate = logRate.String()
	}
	f.st.Malformed = malformed
	f.st.OutIfaces = outBinding(rs.Rules, names.Host)
	// -m addrtype's table before the rules that read it
	if err := refreshAddrTypes(f.dp, rs.Rules); err != nil {
		*f.st = prev
		return nil, err
	}
	// the kernel's PPPoE sessions, whose frames the parser opens
	if err := refreshPPPoE(f.dp); err != nil {
		*f.st = prev
		return nil, err
	}
	if err := f.installTables(tables, recs, rs); err != nil {
		f.st.CTFull, f.st.CTTimeouts, f.st.RejectRate, f.st.RejectBurst = prev.CTFull, prev.CTTimeouts, prev.RejectRate, prev.RejectBurst
		f.st.CTTCPPickup, f.st.RejectGlobalRate, f.st.CTKernelNAT = prev.CTTCPPickup, prev.RejectGlobalRate, prev.CTKernelNAT
		f.st.LogRate, f.st.LogBurst, f.st.Malformed = prev.LogRate, prev.LogBurst, prev.Malformed
		f.st.OutIfaces, f.st.Forward = prev.OutIfaces, prev.Forward
		return nil, err
	}
	f.rs.parsed, f.rs.ids = rs, ids
	if err := f.dp.SetConfig(datapath.Config{MalformedAction: act, CTFullAccept: ctFull == "accept", CTTimeouts: timeouts,
		RejectRate: rate, RejectBurst: burst, RejectGlobalRate: global, CTTCPStrict: pickup == "strict",
		Forward: forward, KernelNATOff: kernelNAT == "off"}); err != nil {
		return nil, fmt.Errorf("the rules are in force, but: %w", err)
	}
	if err := f.dp.SetForwardPorts(f.forwardPorts(forward)); err != nil {
		return nil, fmt.Errorf("the rules are in force, but: %w", err)
	}
	res := &Result{Rules: len(rs.Rules), Entries: len(tables.Entries), Tree: tables.Stats, Rebuilt: true, InForce: time.Since(start)}
	res.Warnings = ruleWarnings(rs, warns)
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
// writes their base file, and the record of f.st with them before the
// switch commits both (commit), and updates f.rs.
func (f *Firewall) installTables(t *compile.Tables, recs []baseRule, pol *rules.RuleSet) error {
	k, err := f.dp.InForce()
	if err != nil {
		return err
	}
	stamp := max(f.st.Builds, k.Stamp) + 1 // a stamp the kernel never had in force
	b, err := parseBase("", encodeBase(stamp, recs, t))
	if err != nil {
		return err
	}
	if err := b.write(f.paths); err != nil {
		return err
	}
	prev := *f.st
	f.st.Builds, f.st.Base, f.st.Delta = stamp, b.name, nil
	f.st.Policies, f.st.Rules, f.st.IDs = policyText(pol), "", nil
	f.st.Work = &t.Stats.Work
	committed, err := f.commit(datapath.InForce{Installed: true, Stamp: stamp}, func() error { return f.dp.InstallStamped(t, stamp) })
	if !committed {
		f.st.Builds, f.st.Base, f.st.Delta = prev.Builds, prev.Base, prev.Delta
		f.st.Policies, f.st.Rules, f.st.IDs = prev.Policies, prev.Rules, prev.IDs
		f.st.Work = prev.Work
		b.close()
		return err
	}
	if f.rs != f.prev {
		f.rs.close()
	}
	f.rs = &ruleStore{policies: policiesOf(pol), base: b, ov: b.overlay()}
	return err
}

// assignIDs keeps the id of every rule whose canonical text is unchanged
// (so its counters carry over) and gives new rules unused ids, returned in
// fresh so their counters can be zeroed first. An id in force is never
// given to a new rule, even when its rule goes: the generation in force
// counts it until the switch, which would show in the new rule's counter.
func (f *Firewall) assignIDs(rs *rules.RuleSet, freshLoad bool) (ids, fresh []uint32, err error) {
	old := map[string][]uint32{}
	used := map[uint32]bool{}
	if !freshLoad && f.rs != nil {
		for _, ref := range f.rs.refs() {
			r := f.rs.ruleOf(ref)
			old[r.Text] = append(old[r.Text], r.ID)
		}
		for _, b := range f.rs.ov.Base { // deleted ones too: the delta stage hides them
			used[b.ID] = true
		}
		for _, a := range f.rs.ov.Added {
			used[a.ID] = true
		}
	}
	for id := range f.reserved {
		used[id] = true
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
			return nil, nil, fmt.Errorf("more than %d rules: out of counter slots, which --max-rules sizes (load with a larger --max-rules)", max-compile.FirstRuleID)
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

// forwardPorts are the interfaces the forwarding fast path uses in mode m
// (datapath.FastPathDevices), by index.
func (f *Firewall) forwardPorts(m datapath.ForwardMode) []int {
	devs := map[int]datapath.Mode{}
	for _, i := range f.st.Interfaces {
		devs[i.Index] = datapath.Mode(i.Mode)
	}
	return datapath.FastPathDevices(m, devs)
}
