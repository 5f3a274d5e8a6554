package compile

import (
	"net/netip"
	"strings"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// RefPacket is what the reference matcher knows of a packet: the fields the
// data plane's parser extracts, in plain Go types.
type RefPacket struct {
	Chain    rules.Chain
	InIface  string
	Src, Dst netip.Addr // both IPv4 or both IPv6
	Proto    uint8
	L4       bool // an L4 header is present (not a non-first fragment, known protocol)
	SPort    uint16
	DPort    uint16
	TCPFlags uint8
	ICMPType uint8
	ICMPCode uint8
	SrcMAC   [6]byte
	DstMAC   [6]byte
	Tagged   bool
	VLAN     uint16 // outermost VID when Tagged
	Fragment bool   // a non-first fragment
	CTState  uint8  // connection state (CTNew...); CTNew where no rule tests it
	// Sets are the named sets rules may use, by name.
	Sets map[string]RefSet
}

// RefSet is a named set as the reference matcher sees it.
type RefSet struct {
	Family   rules.Family
	Contains func(netip.Addr) bool
}

func (p *RefPacket) family() rules.Family {
	if p.Src.Is4() {
		return rules.FamilyIPv4
	}
	return rules.FamilyIPv6
}

// Evaluate is the reference matcher: iptables first-match semantics over
// the AST, written for clarity, not speed. It returns the index of the
// deciding rule (-1 for the chain policy) and the verdict. LOG rules do not
// decide (non-terminating).
func Evaluate(rs *rules.RuleSet, p RefPacket) (int, rules.Verdict) {
	for i := range rs.Rules {
		r := &rs.Rules[i]
		if r.Chain != p.Chain || !r.Target.Verdict.Terminal() {
			continue
		}
		if Matches(&r.Match, p) {
			return i, r.Target.Verdict
		}
	}
	return -1, rs.PolicyFor(p.Chain, p.family())
}

// Matches reports whether every selector of m matches p.
func Matches(m *rules.Match, p RefPacket) bool {
	if m.Family != rules.FamilyAny && m.Family != p.family() {
		return false
	}
	needsL4 := m.SPort != nil || m.DPort != nil || m.Ports != nil || m.TCPFlags != nil || m.ICMP != nil
	if needsL4 && !p.L4 {
		return false // iptables: a header that is not there matches nothing
	}
	if m.Proto != nil && (p.Proto == m.Proto.Proto) == m.Proto.Invert {
		return false
	}
	if m.Src != nil && m.Src.Prefix.Contains(p.Src) == m.Src.Invert {
		return false
	}
	if m.Dst != nil && m.Dst.Prefix.Contains(p.Dst) == m.Dst.Invert {
		return false
	}
	if m.SPort != nil && inPorts(m.SPort.Ranges, p.SPort) == m.SPort.Invert {
		return false
	}
	if m.DPort != nil && inPorts(m.DPort.Ranges, p.DPort) == m.DPort.Invert {
		return false
	}
	if m.Ports != nil {
		either := inPorts(m.Ports.Ranges, p.SPort) || inPorts(m.Ports.Ranges, p.DPort)
		if either == m.Ports.Invert {
			return false
		}
	}
	if m.InIface != nil {
		ok := p.InIface == m.InIface.Name
		if m.InIface.Prefix {
			ok = strings.HasPrefix(p.InIface, m.InIface.Name)
		}
		if ok == m.InIface.Invert {
			return false
		}
	}
	if m.MACSrc != nil && (p.SrcMAC == m.MACSrc.Addr) == m.MACSrc.Invert {
		return false
	}
	if m.MACDst != nil && (p.DstMAC == m.MACDst.Addr) == m.MACDst.Invert {
		return false
	}
	if m.TCPFlags != nil && (p.TCPFlags&m.TCPFlags.Mask == m.TCPFlags.Comp) == m.TCPFlags.Invert {
		return false
	}
	if m.ICMP != nil {
		ok := m.ICMP.Any || (p.ICMPType == m.ICMP.Type && (m.ICMP.Code < 0 || int16(p.ICMPCode) == m.ICMP.Code))
		if ok == m.ICMP.Invert {
			return false
		}
	}
	if m.VLAN != nil && (p.Tagged && p.VLAN == m.VLAN.ID) == m.VLAN.Invert {
		return false
	}
	if m.Fragment != nil && p.Fragment != *m.Fragment {
		return false
	}
	if c := m.CTState; c != nil && (c.Mask&(1<<p.CTState) != 0) == c.Invert {
		return false
	}
	for _, s := range []struct {
		sm *rules.SetMatch
		a  netip.Addr
	}{{m.SrcSet, p.Src}, {m.DstSet, p.Dst}} {
		if s.sm == nil {
			continue
		}
		set, ok := p.Sets[s.sm.Name]
		// a set holds one family: a rule using it never matches the other
		if !ok || set.Family != p.family() || set.Contains(s.a) == s.sm.Invert {
			return false
		}
	}
	return true
}

func inPorts(rs []rules.PortRange, port uint16) bool {
	for _, r := range rs {
		if port >= r.Lo && port <= r.Hi {
			return true
		}
	}
	return false
}
