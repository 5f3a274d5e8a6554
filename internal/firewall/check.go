package firewall

import (
	"net"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// CheckCompiles compiles rs without touching the kernel, so a check also
// catches rule sets the data plane cannot hold. -i names are resolved
// against this host's interfaces, set names against the sets that exist and more
// (sets a configuration will create).
func CheckCompiles(p Paths, rs *rules.RuleSet, more map[string]compile.SetInfo) (int, error) {
	sets, err := KnownSets(p)
	if err != nil {
		return 0, err
	}
	if sets == nil {
		sets = map[string]compile.SetInfo{}
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
	ifaces := map[string]uint32{}
	if list, err := net.Interfaces(); err == nil {
		for _, i := range list {
			ifaces[i.Name] = uint32(i.Index)
		}
	}
	t, _, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: ifaces, Sets: sets})
	if err != nil {
		return 0, err
	}
	return len(t.Entries), nil
}
