package firewall

import (
	"fmt"
	"net"

	"github.com/xdpfw/xdpfw/internal/compile"
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
// -i names are judged only with onHost: then against the interfaces the
// firewall in force is attached to (what Apply resolves them against), or
// this host's interfaces when nothing is loaded. Without onHost, a check
// (made on another machine, say) takes every -i name as an interface that
// exists.
func Check(p Paths, rs *rules.RuleSet, opt Options, more map[string]compile.SetInfo, onHost bool) (*CheckResult, error) {
	if err := Validate(rs, opt); err != nil {
		return nil, err
	}
	st, err := loadState(p)
	if err != nil {
		return nil, err
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
	var ifaces map[string]uint32
	switch {
	case !onHost:
		ifaces = namedIfaces(rs)
	case st != nil && st.loaded():
		ifaces = st.ifaceIndexes()
	default:
		ifaces = map[string]uint32{}
		if list, err := net.Interfaces(); err == nil {
			for _, i := range list {
				ifaces[i.Name] = uint32(i.Index)
			}
		}
	}
	t, warns, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: ifaces, Sets: sets})
	if err != nil {
		return nil, err
	}
	return &CheckResult{Entries: len(t.Entries), Warnings: ruleWarnings(rs, warns)}, nil
}

// namedIfaces makes up an interface for every -i name of rs (a wildcard
// "eth+" gets "eth"), and one that no rule names, so that every -i match
// matches some interface.
func namedIfaces(rs *rules.RuleSet) map[string]uint32 {
	out := map[string]uint32{"\x00other": 1}
	for _, r := range rs.Rules {
		if m := r.Match.InIface; m != nil {
			if _, ok := out[m.Name]; !ok {
				out[m.Name] = uint32(len(out) + 1)
			}
		}
	}
	return out
}

// ruleWarnings words the compiler's warnings about the rules of rs.
func ruleWarnings(rs *rules.RuleSet, warns []compile.Warning) []string {
	var out []string
	for _, w := range warns {
		if w.Rule < 0 { // about a chain
			out = append(out, fmt.Sprintf("%s: %s", w.Pos, w.Msg))
			continue
		}
		r := rs.Rules[w.Rule]
		out = append(out, fmt.Sprintf("%s: %s: %s", r.Pos, r.String(), w.Msg))
	}
	return out
}
