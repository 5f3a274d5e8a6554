package rules

import (
	"fmt"
	"sort"
)

// ComplementPorts returns the ports (0-65535) that rs does not hold, as
// sorted, disjoint ranges.
func ComplementPorts(rs []PortRange) []PortRange {
	s := append([]PortRange(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].Lo < s[j].Lo })
	var out []PortRange
	next := 0 // first port not yet covered
	for _, r := range s {
		if int(r.Lo) > next {
			out = append(out, PortRange{Lo: uint16(next), Hi: r.Lo - 1})
		}
		if int(r.Hi)+1 > next {
			next = int(r.Hi) + 1
		}
	}
	if next <= 65535 {
		out = append(out, PortRange{Lo: uint16(next), Hi: 65535})
	}
	return out
}

// portSet returns the ports m matches as sorted, disjoint ranges.
func portSet(m *PortMatch) []PortRange {
	if m.Invert {
		return ComplementPorts(m.Ranges)
	}
	return ComplementPorts(ComplementPorts(m.Ranges))
}

// multiportCount is what ranges cost in -m multiport (a range counts two).
func multiportCount(rs []PortRange) int {
	n := 0
	for _, r := range rs {
		n++
		if r.Lo != r.Hi {
			n++
		}
	}
	return n
}

// bothPorts is the match of --dport P and -m multiport --dports L on one
// rule (or --sport and --sports): iptables tests both, so a packet must
// pass each; the result is the ports they share, written the shorter way
// (the ports, or ! and the others). A rule whose two tests share no port
// becomes ! --dport 0:65535, which no packet with ports passes.
func bothPorts(a, b *PortMatch) (*PortMatch, *valueErr) {
	x, y := portSet(a), portSet(b)
	var both []PortRange
	for i, j := 0, 0; i < len(x) && j < len(y); {
		lo, hi := max(x[i].Lo, y[j].Lo), min(x[i].Hi, y[j].Hi)
		if lo <= hi {
			both = append(both, PortRange{lo, hi})
		}
		if x[i].Hi < y[j].Hi {
			i++
		} else {
			j++
		}
	}
	if len(both) == 0 {
		return &PortMatch{Ranges: []PortRange{{0, 65535}}, Invert: true}, nil
	}
	m := &PortMatch{Ranges: both}
	if others := ComplementPorts(both); multiportCount(others) < multiportCount(both) {
		m = &PortMatch{Ranges: others, Invert: true}
	}
	if len(m.Ranges) > 1 && multiportCount(m.Ranges) > maxMultiport {
		return nil, &valueErr{msg: fmt.Sprintf("the ports both port options allow need %d -m multiport entries (> %d)",
			multiportCount(m.Ranges), maxMultiport),
			hint: "iptables tests both options; write the ports they share in one option, or split the rule"}
	}
	return m, nil
}
