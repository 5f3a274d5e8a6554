package firewall

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// Desired is the whole firewall as a configuration file describes it (the
// daemon's): every setting is given, none means "keep what is in force".
type Desired struct {
	Interfaces []IfaceMode
	Rules      *rules.RuleSet
	// Options with every field set: Malformed and CTFull "drop" or
	// "accept", CTTimeouts with CTTimeoutsSet, RejectRate and RejectBurst
	// non-zero. MaxRules and CTMax size the tables at the first load (0:
	// the defaults); changing them later needs `xdpfw detach --all`.
	Options Options
}

// Change is what Reconcile did.
type Change struct {
	Loaded   bool     // the program was (re)loaded and the interfaces attached
	Applied  bool     // the rules or settings were replaced
	Detached []string // interfaces no longer wanted
	Result   *Result  // of the Load or Apply, nil when nothing changed
	Why      []string // what differed
}

// Changed reports whether anything in force changed.
func (c *Change) Changed() bool { return c.Loaded || c.Applied || len(c.Detached) > 0 }

// Reconcile makes the firewall in force what d describes, through the
// calls the CLI makes (LoadModes, Apply, Detach), and changes nothing when
// it is so already: reloading an unchanged configuration, or starting
// again after a crash, leaves the generation, the program and every
// counter as they are. The program is loaded again when this binary embeds
// another one than the pinned (an upgrade) or an interface is to be added.
// Like every change, it is all or nothing for the rules: if it fails, the
// rules in force stay in force.
func Reconcile(p Paths, d Desired) (*Change, error) {
	if len(d.Interfaces) == 0 {
		return nil, fmt.Errorf("no interface to attach to")
	}
	if d.Rules == nil {
		d.Rules = &rules.RuleSet{}
	}
	st, inForce, err := readState(p)
	var lost *RecordError
	if errors.As(err, &lost) {
		st, inForce, err = nil, nil, nil // attached, holding what no record says: a load replaces it in place
	}
	if err != nil {
		return nil, err
	}
	ch := &Change{}
	why := append(loadNeeded(p, st, d), natLoadNeeded(st, d)...)
	why = append(why, sizeLoadNeeded(p, st, d.Options)...)
	if lost != nil {
		why = []string{"the record of the rules in force is lost or corrupt (" + lost.Err.Error() + ")"}
	}
	if len(why) > 0 {
		ch.Why = why
		res, err := LoadModes(p, d.Interfaces, d.Rules, d.Options)
		if err != nil {
			return nil, err
		}
		ch.Loaded, ch.Result = true, res
	} else {
		fw, err := Open(p)
		if err != nil {
			return nil, err
		}
		defer fw.Close()
		// the nat table is the one in force (natLoadNeeded): apply
		// replaces the filter's
		filter := *d.Rules
		filter.NAT = nil
		d.Rules = &filter
		if ch.Why = applyNeeded(st, inForce, d); len(ch.Why) > 0 {
			if ch.Result, err = fw.Apply(d.Rules, d.Options); err != nil {
				return nil, err
			}
			ch.Applied = true
		}
		fw.Close() // the lock, for the detaches below
	}
	// Interfaces the configuration no longer names. The wanted ones are
	// attached by now, so none of these is the last.
	var extra []string
	if st != nil {
		for name := range st.Interfaces {
			if !slices.ContainsFunc(d.Interfaces, func(m IfaceMode) bool { return m.Name == name }) {
				extra = append(extra, name)
			}
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		fw, err := Open(p)
		if err != nil {
			return ch, err
		}
		defer fw.Close()
		for _, name := range extra {
			if _, err := fw.Detach(name); err != nil {
				return ch, err
			}
			ch.Detached = append(ch.Detached, name)
		}
	}
	return ch, nil
}

// readState reads the state under the lock.
func readState(p Paths) (*state, *rules.RuleSet, error) {
	unlock, err := lock(p)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	st, rs, _, err := loadRules(p)
	return st, rs, err
}

// loadNeeded says why d needs a load: nothing is loaded, the pinned
// program is not this binary's, or an interface is new, asks for another
// mode than it has, or is not filtered (deleted and re-created: its link
// severed). None: an Apply (or nothing) will do.
func loadNeeded(p Paths, st *state, d Desired) []string {
	if st == nil || !st.loaded() {
		// Links the kernel still runs though nothing is pinned (a lost
		// bpffs): the load takes them over; say so.
		var why []string
		for _, m := range d.Interfaces {
			if s := datapath.InterfaceState(p.PinDir, m.Name); s.Problem != "" {
				why = append(why, fmt.Sprintf("interface %s: %s", m.Name, s.Problem))
			}
		}
		if len(why) == 0 {
			why = []string{"nothing loaded"}
		}
		return why
	}
	var why []string
	if _, err := os.Stat(p.interruptedFile()); err == nil {
		why = append(why, "a load interrupted after it switched interfaces to its program")
	}
	if st.Program != datapath.ProgramVersion() {
		why = append(why, "program upgrade")
	}
	for _, m := range d.Interfaces {
		have, ok := st.Interfaces[m.Name]
		switch {
		case !ok:
			why = append(why, "new interface "+m.Name)
		case m.Mode != datapath.ModeAuto && string(m.Mode) != have.Mode:
			// Load refuses to change a mode in place; say so.
			why = append(why, fmt.Sprintf("interface %s in %s mode, configured %s", m.Name, have.Mode, m.Mode))
		default:
			// One that is gone cannot be attached: status shows it, and it
			// is attached again when it is back (the daemon's link events).
			if s := datapath.InterfaceState(p.PinDir, m.Name); s.Index != 0 && (!s.Filtering || s.Problem != "") {
				why = append(why, fmt.Sprintf("interface %s not filtered: %s", m.Name, s.Problem))
			}
		}
	}
	return why
}

// applyNeeded says what differs between the rules and settings in force
// and d's.
func applyNeeded(st *state, inForce *rules.RuleSet, d Desired) []string {
	var why []string
	if inForce == nil || inForce.String() != d.Rules.String() {
		why = append(why, "rules")
	} else if want := outBinding(d.Rules.Rules, nil); want != nil {
		// The same rules, compiled against other interfaces?
		if host, err := hostIfaces(); err == nil && !maps.Equal(outBinding(d.Rules.Rules, host), st.OutIfaces) {
			why = append(why, "interfaces named by -o")
		}
	}
	o := d.Options
	if orDefault(st.Malformed, "drop") != o.Malformed {
		why = append(why, "malformed")
	}
	if orDefault(st.CTFull, "drop") != o.CTFull {
		why = append(why, "conntrack full policy")
	}
	if st.CTTimeouts.Effective() != o.CTTimeouts.Effective() {
		why = append(why, "conntrack timeouts")
	}
	if pick(st.RejectRate, compile.DefaultRejectRate) != o.RejectRate || pick(st.RejectBurst, compile.DefaultRejectBurst) != o.RejectBurst {
		why = append(why, "reject rate")
	}
	// Settings a configuration may leave out ("" / 0: keep what is in force).
	if o.CTTCPPickup != "" && orDefault(st.CTTCPPickup, "loose") != o.CTTCPPickup {
		why = append(why, "conntrack TCP pickup")
	}
	if o.Forward != "" && orDefault(st.Forward, string(datapath.ForwardXDP)) != o.Forward {
		why = append(why, "forwarding")
	}
	if o.CTKernelNAT != "" && orDefault(st.CTKernelNAT, "on") != o.CTKernelNAT {
		why = append(why, "conntrack kernel NAT")
	}
	if o.RejectGlobalRate != 0 && pick(st.RejectGlobalRate, compile.DefaultRejectGlobalRate) != o.RejectGlobalRate {
		why = append(why, "reject global rate")
	}
	if o.PriorityCPUs != "" && orDefault(st.PriorityCPUs, "auto") != o.PriorityCPUs {
		why = append(why, "priority CPUs")
	}
	return why
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// sizeLoadNeeded says why Reconcile must load to put o's table sizes in
// force: other ones than the loaded (the load makes the tables anew
// beside the pinned ones and carries their contents over: datapath's
// upgrade).
func sizeLoadNeeded(p Paths, st *state, o Options) []string {
	if st == nil || !st.loaded() || o.MaxRules == 0 && o.CTMax == 0 {
		return nil
	}
	lim, err := datapath.PinnedLimits(p.PinDir)
	if err != nil {
		return nil // nothing pinned to compare: loadNeeded says why
	}
	var why []string
	if o.MaxRules != 0 && o.MaxRules != lim.Entries {
		why = append(why, fmt.Sprintf("max rules %d (loaded: %d)", o.MaxRules, lim.Entries))
	}
	if o.CTMax != 0 && o.CTMax != lim.Conntrack {
		why = append(why, fmt.Sprintf("conntrack max %d (loaded: %d)", o.CTMax, lim.Conntrack))
	}
	return why
}
