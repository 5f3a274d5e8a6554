package firewall

import (
	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// autoMaxRules is the --max-rules of a first load of rs given none: the
// default (compile.DefaultMaxEntries) when rs's tables fit it, else the
// smallest power of two that holds them with a quarter to spare (entries,
// fat nodes, and leaf slots over 16: LimitsFor's proportions), since a
// change of size needs detach --all. The compile that measures them is
// bounded by the largest size Load's memory check would let this machine
// create (datapath.LargestFitting: half the memory available), so it
// cannot take more memory than such tables; a rule set that does not fit
// that, or does not compile, gets the default, and the compile of the
// load says why.
func autoMaxRules(p Paths, rs *rules.RuleSet, ct int) int {
	var sets map[string]compile.SetInfo
	if st, err := loadState(p); err == nil && st != nil {
		sets = st.compileSets()
	}
	ids := make([]uint32, len(rs.Rules))
	for i := range ids {
		ids[i] = uint32(compile.FirstRuleID + i)
	}
	compileAt := func(m int) (*compile.Tables, error) {
		lim := datapath.LimitsFor(m)
		t, _, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: namedIfaces(rs), Sets: sets,
			MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
		return t, err
	}
	if _, err := compileAt(compile.DefaultMaxEntries); err == nil {
		return compile.DefaultMaxEntries
	}
	top, err := datapath.LargestFitting(ct)
	if err != nil || top <= compile.DefaultMaxEntries {
		return compile.DefaultMaxEntries
	}
	t, err := compileAt(top)
	if err != nil {
		return compile.DefaultMaxEntries
	}
	return SizeFor(len(t.Entries), t.Stats.Nodes, t.Stats.LeafSlots)
}

// SizeFor is the --max-rules autoMaxRules takes for tables of entries
// entries, nodes fat nodes and leafSlots leaf slots.
func SizeFor(entries, nodes, leafSlots int) int {
	need := max(entries, nodes, (leafSlots+15)/16)
	need += need / 4
	m := compile.DefaultMaxEntries
	for m < need && m < datapath.MaxEntries {
		m *= 2
	}
	return m
}
