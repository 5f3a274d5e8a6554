package firewall

import (
	"slices"
	"strings"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// deviceWarnings are the caveats c of iface (datapath.CheckDevice) that
// rs runs into: REJECT in an XDP chain (INPUT, FORWARD) needs XDP_TX,
// --vlan-id needs the tags in the frame. Load returns them as warnings;
// status shows them with the interface.
func deviceWarnings(rs *rules.RuleSet, iface string, c datapath.DeviceCaveats) []string {
	if c == (datapath.DeviceCaveats{}) || rs == nil {
		return nil
	}
	var out []string
	if c.Reject != "" && slices.ContainsFunc(rs.Rules, func(r rules.Rule) bool {
		return r.Chain != rules.ChainOutput && r.Target.Verdict == rules.VerdictReject && arrivesOn(r, iface)
	}) {
		out = append(out, c.Reject)
	}
	if c.VLAN != "" && slices.ContainsFunc(rs.Rules, func(r rules.Rule) bool {
		return r.Chain != rules.ChainOutput && r.Match.VLAN != nil && arrivesOn(r, iface)
	}) {
		out = append(out, c.VLAN)
	}
	return out
}

// arrivesOn says whether r's -i lets it see packets arriving on iface.
func arrivesOn(r rules.Rule, iface string) bool {
	m := r.Match.InIface
	if m == nil {
		return true
	}
	match := iface == m.Name || m.Prefix && strings.HasPrefix(iface, m.Name)
	return match != m.Invert
}
