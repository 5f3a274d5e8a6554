package firewall

import (
	"maps"
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
	if slices.ContainsFunc(slices.Concat(rs.Rules, rs.Priority), func(r rules.Rule) bool { return vlanBlind(r, iface, c) }) {
		out = append(out, c.VLAN)
	}
	return out
}

// ifaceWarnings are the deviceWarnings of rs on each of names, in the
// mode in effect there: what load, apply and apply --check --on-host say.
func ifaceWarnings(rs *rules.RuleSet, names []string) []string {
	var out []string
	for _, name := range names {
		out = append(out, deviceWarnings(rs, name, datapath.CheckDevice(name, datapath.CurrentMode(name)))...)
	}
	return out
}

// vlanBlind says whether r's --vlan-id or --vlan-prio cannot see the tags
// of packets arriving on iface, whose caveats are c.
func vlanBlind(r rules.Rule, iface string, c datapath.DeviceCaveats) bool {
	return c.VLAN != "" && r.Chain != rules.ChainOutput && (r.Match.VLAN != nil || r.Match.VLANPrio != nil) && arrivesOn(r, iface)
}

// AddVLANBlind fills in the VLANBlind of l's rules (vlanBlindRules). Not
// part of List, which metrics scrapes call: it asks the kernel about every
// interface, and reads the whole rule set when one has the caveat.
func (f *Firewall) AddVLANBlind(l *Listing) error {
	blind, err := f.vlanBlindRules()
	if err != nil {
		return err
	}
	for i := range l.Rules {
		l.Rules[i].VLANBlind = blind[l.Rules[i].ID]
	}
	return nil
}

// vlanBlindRules maps the ids of the rules in force whose --vlan-id cannot
// see the tags of packets arriving on an interface xdpfw filters (its
// DeviceCaveats.VLAN, in the mode in effect there) to those interfaces,
// sorted. It parses the rule set only when an interface has the caveat.
func (f *Firewall) vlanBlindRules() (map[uint32][]string, error) {
	out := map[uint32][]string{}
	var rs *rules.RuleSet
	var ids []uint32
	for _, name := range slices.Sorted(maps.Keys(f.st.Interfaces)) {
		c := datapath.CheckDevice(name, datapath.CurrentMode(name))
		if c.VLAN == "" {
			continue
		}
		if rs == nil {
			var err error
			if rs, ids, err = f.rs.ruleSet(); err != nil {
				return nil, err
			}
		}
		for i, r := range rs.Rules {
			if vlanBlind(r, name, c) {
				out[ids[i]] = append(out[ids[i]], name)
			}
		}
	}
	return out, nil
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
