package firewall

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// CheckResult is what Check found.
type CheckResult struct {
	Entries  int      // classifier entries
	Warnings []string // what Load or Apply would warn about
}

// Check does what Apply does without changing anything: it validates rs and opt
// (Validate, the same function Apply calls) and compiles rs, so a check
// also catches rule sets the data plane cannot hold, and returns the
// warnings Apply would print. Set names are resolved against the sets that
// exist and more (sets a configuration will create).
//
// -i and -o names are judged only with onHost: then against the
// interfaces the firewall in force is attached to (what Apply resolves -i
// and OUTPUT's -o against; FORWARD's -o: this host's interfaces), or this
// host's interfaces when nothing is loaded. Without onHost, a check (made
// on another machine, say) takes every -i and -o name as an interface that
// exists.
func Check(p Paths, rs *rules.RuleSet, opt Options, more map[string]compile.SetInfo, onHost bool) (*CheckResult, error) {
	// with --nat xdpfw (the daemon's nat: xdpfw), the nat table as load
	// checks it; the filter compiled below
	rs, nat, err := splitNAT(rs, opt.NAT)
	if err != nil {
		return nil, err
	}
	if err := Validate(rs, opt); err != nil {
		return nil, err
	}
	st, err := loadState(p)
	if err != nil {
		return nil, err
	}
	if nat == nil { // apply --check: the nat table in force, as Apply checks against it
		if err := st.natCTAddrs(rs); err != nil {
			return nil, err
		}
	}
	sets := map[string]compile.SetInfo{}
	if st != nil {
		sets = st.compileSets()
	}
	for name, info := range more {
		if _, ok := sets[name]; !ok {
			sets[name] = info
		}
	}
	ids := make([]uint32, len(rs.Rules))
	for i := range ids {
		ids[i] = uint32(compile.FirstRuleID + i)
	}
	var names compile.Names
	switch {
	case !onHost:
		names.Attached = namedIfaces(rs)
	case st != nil && st.loaded():
		if names, err = st.ifaceNames(); err != nil {
			return nil, err
		}
	default:
		if names.Host, err = hostIfaces(); err != nil {
			return nil, err
		}
		names.Attached = maps.Clone(names.Host)
		delete(names.Attached, compile.Loopback) // a load attaches to lo only when named

	}
	t, warns, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: names.Attached, HostIfaces: names.Host, Sets: sets})
	if err != nil {
		return nil, err
	}
	res := &CheckResult{Entries: len(t.Entries), Warnings: append(ruleWarnings(rs, warns), natWarnings(nat)...)}
	if onHost && st != nil && st.loaded() { // what apply would say of the interfaces filtered
		res.Warnings = append(res.Warnings, ifaceWarnings(rs, slices.Sorted(maps.Keys(st.Interfaces)))...)
	}
	// the bulk CPUs as apply (or load) would put them in force: a
	// --priority-cpus given is resolved on this host, as Apply resolves
	// it (CPUs online), whatever onHost says: it names this host's CPUs
	inForce := ""
	if st != nil {
		inForce = st.PriorityCPUs
	}
	spec := orDefault(opt.PriorityCPUs, orDefault(inForce, "auto"))
	cpus, err := datapath.PriorityCPUs(spec)
	switch {
	case err != nil && opt.PriorityCPUs != "":
		return nil, err
	case err == nil:
		res.Warnings = append(res.Warnings, priorityWarnings(rs, spec, cpus)...)
	}
	return res, nil
}

// priorityWarnings says where the bulk CPUs cpus (what the --priority-cpus
// value spec resolved to) leave the xdpfw-priority table of rs without
// effect: load, apply and apply --check print them (status's priority
// state says the same of what is in force).
func priorityWarnings(rs *rules.RuleSet, spec string, cpus []int) []string {
	if !rs.PriorityOn() || len(cpus) > 0 {
		return nil
	}
	why := "--priority-cpus none"
	if spec == "auto" {
		why = "--priority-cpus auto on a machine with one CPU online (nowhere to hand the BULK class to)"
	}
	return []string{fmt.Sprintf("the xdpfw-priority table has no effect with %s: every packet is judged on the CPU that received it "+
		"(docs/realtime.md, Priority)", why)}
}

// namedIfaces makes up an interface for every -i and -o name of rs (a
// wildcard "eth+" gets "eth"), and one that no rule names, so that every
// -i and -o match matches some interface. The loopback interface is not
// made up: a load attaches to it only when named, and a rule for loopback
// alone has no effect (compile.LoopbackNote) wherever it is checked.
func namedIfaces(rs *rules.RuleSet) map[string]uint32 {
	out := map[string]uint32{"\x00other": 1}
	for _, r := range slices.Concat(rs.Rules, rs.Priority) {
		for _, m := range []*rules.IfaceMatch{r.Match.InIface, r.Match.OutIface} {
			if m == nil || m.Name == compile.Loopback {
				continue
			}
			if _, ok := out[m.Name]; !ok {
				out[m.Name] = uint32(len(out) + 1)
			}
		}
	}
	return out
}

// ruleWarnings words the compiler's warnings about the rules of rs. The
// rules for loopback traffic alone (compile.LoopbackNote) get one note
// together: a rule set has several (-A INPUT -i lo -j ACCEPT, -A OUTPUT
// -o lo -j ACCEPT), each as expected.
func ruleWarnings(rs *rules.RuleSet, warns []compile.Warning) []string {
	var out, loop []string
	for _, w := range warns {
		if w.Rule < 0 { // about a chain
			out = append(out, fmt.Sprintf("%s: %s", w.Pos, w.Msg))
			continue
		}
		r := rs.Rules[w.Rule]
		if w.Msg == compile.LoopbackNote {
			loop = append(loop, r.Pos.String())
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s: %s", r.Pos, r.String(), w.Msg))
	}
	if len(loop) > 0 {
		out = append(out, fmt.Sprintf("note: %d rule(s) concern only loopback traffic (-i lo, -o lo), which xdpfw never sees "+
			"(XDP and tc run on the attached devices, not on lo); they are kept and listed, and have no effect: %s",
			len(loop), strings.Join(loop, ", ")))
	}
	return out
}
