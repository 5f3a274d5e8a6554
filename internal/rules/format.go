package rules

import (
	"fmt"
	"strconv"
	"strings"
)

// String returns the rule in canonical iptables form, e.g.
// "-A INPUT -s 10.0.0.0/8 -p tcp --dport 22 -j ACCEPT". Parse reads it back
// into the same rule.
func (r Rule) String() string {
	prefix := "-A "
	switch {
	case r.Target.Verdict == VerdictNotrack:
		prefix = "-t raw -A "
	case r.Target.Verdict == VerdictHigh || r.Target.Verdict == VerdictBulk:
		prefix = "-t " + PriorityTable + " -A "
	case r.NAT:
		prefix = "-t nat -A "
	}
	if spec := r.Spec(); spec != "" {
		return prefix + r.ChainName() + " " + spec
	}
	return prefix + r.ChainName()
}

// Spec returns the canonical text of the rule without the leading
// "-A CHAIN " (what the parser stores in Rule.Text). Options come in a fixed
// order: -4/-6 (only when the other selectors do not imply the family), -i,
// -o, -s, -d, -p, -f, -m mac, -m set, -m conntrack, -m vlan, -m pkttype, a
// bare -m tcp (udp, sctp, udplite), single ports (--sport, --dport), -m
// multiport, --tcp-flags, ICMP type, the header matches (-m iprange,
// length, ttl or hl, dscp, tos, ecn), -m recent, -m limit, -m comment, then
// -j and the target's options (--reject-with, --log, --log-prefix or
// NFLOG's and ULOG's options, --log-level, --log-rate, --log-burst).
func (r Rule) Spec() string {
	var w specWriter
	m := r.Match
	if m.Family != FamilyAny && m.ImpliedFamily() == FamilyAny {
		w.add(false, familyFlag(m.Family))
	}
	for _, x := range []struct {
		flag string
		m    *IfaceMatch
	}{{"-i", m.InIface}, {"-o", m.OutIface}} {
		if i := x.m; i != nil {
			w.add(i.Invert, x.flag, i.Text())
		}
	}
	if a := m.Src; a != nil {
		w.add(a.Invert, "-s", a.Prefix.String())
	}
	if a := m.Dst; a != nil {
		w.add(a.Invert, "-d", a.Prefix.String())
	}
	if p := m.Proto; p != nil {
		w.add(p.Invert, "-p", protoName(p.Proto))
	}
	if f := m.Fragment; f != nil {
		w.add(!*f, "-f")
	}
	if m.MACSrc != nil || m.MACDst != nil {
		w.add(false, "-m", "mac")
		if a := m.MACSrc; a != nil {
			w.add(a.Invert, "--mac-source", formatMAC(a.Addr))
		}
		if a := m.MACDst; a != nil {
			w.add(a.Invert, "--mac-destination", formatMAC(a.Addr))
		}
	}
	for _, s := range []struct {
		m   *SetMatch
		dir string
	}{{m.SrcSet, "src"}, {m.DstSet, "dst"}} {
		if s.m != nil {
			w.add(false, "-m", "set")
			w.add(s.m.Invert, "--match-set", s.m.Name, s.dir)
		}
	}
	if m.CTState != nil || m.CTProto != nil || m.CTStatus != nil || m.CTDir != nil || m.CTAddrs() {
		w.add(false, "-m", "conntrack")
		if c := m.CTState; c != nil {
			w.add(c.Invert, "--ctstate", ctStateNames.format(c.Mask))
		}
		if c := m.CTProto; c != nil {
			w.add(c.Invert, "--ctproto", strconv.Itoa(int(c.Proto)))
		}
		for _, a := range []struct {
			opt string
			m   *AddrMatch
		}{{"--ctorigsrc", m.CTOrigSrc}, {"--ctorigdst", m.CTOrigDst}, {"--ctreplsrc", m.CTReplSrc}, {"--ctrepldst", m.CTReplDst}} {
			if a.m != nil { // as iptables-save: one address without its length
				v := a.m.Prefix.String()
				if a.m.Prefix.IsSingleIP() {
					v = a.m.Prefix.Addr().String()
				}
				w.add(a.m.Invert, a.opt, v)
			}
		}
		if c := m.CTStatus; c != nil {
			w.add(c.Invert, "--ctstatus", ctStatusNames.format(c.Mask))
		}
		if c := m.CTDir; c != nil {
			w.add(false, "--ctdir", map[CTDir]string{CTDirOriginal: "ORIGINAL", CTDirReply: "REPLY"}[*c])
		}
	}
	if mk := m.Mark; mk != nil {
		w.add(false, "-m", "mark")
		w.add(mk.Invert, "--mark", formatMark(*mk))
	}
	if m.VLAN != nil || m.VLANPrio != nil {
		w.add(false, "-m", "vlan")
		if v := m.VLAN; v != nil {
			w.add(v.Invert, "--vlan-id", strconv.Itoa(int(v.ID)))
		}
		if v := m.VLANPrio; v != nil {
			w.add(v.Invert, "--vlan-prio", strconv.Itoa(int(v.Prio)))
		}
	}
	if a := m.AddrType; a != nil {
		w.add(false, "-m", "addrtype")
		if a.Src != 0 {
			w.add(a.SrcInvert, "--src-type", formatAddrTypes(a.Src))
		}
		if a.Dst != 0 {
			w.add(a.DstInvert, "--dst-type", formatAddrTypes(a.Dst))
		}
		switch a.Limit {
		case LimitIn:
			w.add(false, "--limit-iface-in")
		case LimitOut:
			w.add(false, "--limit-iface-out")
		}
	}
	if t := m.PktType; t != nil {
		w.add(false, "-m", "pkttype")
		w.add(t.Invert, "--pkt-type", formatPktType(t.Type))
	}
	if m.L4Header && m.Proto != nil {
		w.add(false, "-m", protoName(m.Proto.Proto))
	}
	// Single ports before any -m multiport: after it, iptables reads
	// --sport/--dport as multiport's (abbreviations of --sports/--dports).
	for _, multi := range []bool{false, true} {
		w.ports("--sport", "--sports", m.SPort, multi)
		w.ports("--dport", "--dports", m.DPort, multi)
		w.ports("", "--ports", m.Ports, multi)
	}
	if f := m.TCPFlags; f != nil {
		if f.Mask == synMask && f.Comp == synComp {
			w.add(f.Invert, "--syn")
		} else {
			w.add(f.Invert, "--tcp-flags", formatTCPFlags(f.Mask), formatTCPFlags(f.Comp))
		}
	}
	if c := m.ICMP; c != nil {
		opt := "--icmp-type"
		if m.Proto != nil && m.Proto.Proto == protoICMPv6 || m.Proto == nil && m.Family == FamilyIPv6 {
			opt = "--icmpv6-type"
		}
		w.add(c.Invert, opt, formatICMPType(*c))
	}
	w.header(&m)
	if rc := m.Recent; rc != nil {
		formatRecent(&w, rc, m.Family)
	}
	if h := m.HashLimit; h != nil {
		formatHashLimit(&w, h, m.Family)
	}
	if c := m.ConnLimit; c != nil {
		formatConnLimit(&w, c, m.Family)
	}
	if l := m.Limit; l != nil {
		w.add(false, "-m", "limit", "--limit", l.Rate.String())
		if l.Burst != DefaultLimitBurst {
			w.add(false, "--limit-burst", strconv.Itoa(int(l.Burst)))
		}
	}
	for _, c := range r.Comments {
		w.add(false, "-m", "comment", "--comment", saveString(c))
	}
	t := r.Target
	switch {
	case t.Group != nil:
		w.logGroup(t.Group, t.LogPrefix)
	case t.NAT != nil:
		w.formatNAT(t.NAT)
	case t.Verdict == VerdictNotrack && t.CT:
		w.add(false, "-j", "CT", "--notrack")
	case t.Verdict == VerdictJump:
		w.add(false, "-j", t.Chain)
	case t.Verdict == VerdictGoto:
		w.add(false, "-g", t.Chain)
	case t.Verdict == VerdictNone:
	default:
		w.add(false, "-j", t.Verdict.String())
	}
	if t.RejectWith != "" {
		w.add(false, "--reject-with", t.RejectWith)
	}
	if t.Log {
		w.add(false, "--log")
	}
	if t.LogPrefix != "" && t.Group == nil {
		w.add(false, "--log-prefix", saveString(t.LogPrefix))
	}
	if t.LogLevel != "" && t.LogLevel != DefaultLogLevel {
		// iptables-save prints the number, and nothing for the default.
		w.add(false, "--log-level", strconv.Itoa(SyslogPriority(t.LogLevel)))
	}
	for _, f := range logFlagNames {
		if t.LogFlags&f.flag != 0 {
			w.add(false, f.opt)
		}
	}
	if !t.LogRate.IsZero() {
		w.add(false, "--log-rate", t.LogRate.String())
	}
	if t.LogBurst != 0 {
		w.add(false, "--log-burst", strconv.Itoa(int(t.LogBurst)))
	}
	return w.String()
}

// logGroup writes -j NFLOG or -j ULOG with its options, as iptables-save
// does.
func (w *specWriter) logGroup(g *LogGroup, prefix string) {
	num := func(opt string, n uint32) {
		if n != 0 {
			w.add(false, opt, strconv.FormatUint(uint64(n), 10))
		}
	}
	w.add(false, "-j", g.Name())
	if g.ULOG {
		if prefix != "" {
			w.add(false, "--ulog-prefix", saveString(prefix))
		}
		if g.Group > 1 {
			num("--ulog-nlgroup", uint32(g.Group))
		}
		num("--ulog-cprange", g.Size)
		if g.Threshold > 1 {
			num("--ulog-qthreshold", g.Threshold)
		}
		return
	}
	if prefix != "" {
		w.add(false, "--nflog-prefix", saveString(prefix))
	}
	num("--nflog-group", uint32(g.Group))
	num("--nflog-range", g.Range)
	if g.Cut {
		w.add(false, "--nflog-size", strconv.FormatUint(uint64(g.Size), 10))
	}
	num("--nflog-threshold", g.Threshold)
}

// specWriter builds the text of a rule.
type specWriter struct{ strings.Builder }

// add writes words, preceded by "!" when invert is set.
func (w *specWriter) add(invert bool, words ...string) {
	if invert {
		words = append([]string{"!"}, words...)
	}
	for _, s := range words {
		if w.Len() > 0 {
			w.WriteByte(' ')
		}
		w.WriteString(s)
	}
}

// ports writes a port match: single (e.g. --dport 22 or --dport 1:1023) when
// there is one range and single is not empty, -m multiport multi otherwise;
// only the latter form when multiport is set, only the former otherwise.
func (w *specWriter) ports(single, multi string, m *PortMatch, multiport bool) {
	if m == nil {
		return
	}
	parts := make([]string, len(m.Ranges))
	for i, r := range m.Ranges {
		parts[i] = formatPortRange(r)
	}
	if len(m.Ranges) == 1 && single != "" {
		if !multiport {
			w.add(m.Invert, single, parts[0])
		}
		return
	}
	if !multiport {
		return
	}
	w.add(false, "-m", "multiport")
	w.add(m.Invert, multi, strings.Join(parts, ","))
}

// formatPortRange prints "P" or "LO:HI".
func formatPortRange(r PortRange) string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d:%d", r.Lo, r.Hi)
}

// formatMark prints a mark as iptables-save does: 0xVALUE, and /0xMASK
// unless every bit counts.
func formatMark(m MarkMatch) string {
	if m.Mask == 0xffffffff {
		return fmt.Sprintf("0x%x", m.Value)
	}
	return fmt.Sprintf("0x%x/0x%x", m.Value, m.Mask)
}

// formatMAC prints a MAC address as xx:xx:xx:xx:xx:xx.
func formatMAC(a [6]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3], a[4], a[5])
}

// String returns the policy as a -P line, e.g. "-P INPUT DROP", with -4 or
// -6 when it applies to one family only.
func (p Policy) String() string {
	s := "-P " + p.Chain.String() + " " + p.Verdict.String()
	if f := familyFlag(p.Family); f != "" {
		s += " " + f
	}
	return s
}

// String returns the rule set as a rule file that Parse (with FamilyAny)
// reads back into the same policies, chains and rules: the -P lines, the
// -N lines, the raw table's rules ("-t raw -A PREROUTING ... -j NOTRACK"),
// the xdpfw-priority table's ("-t xdpfw-priority -A PRIORITY ... -j HIGH"),
// then the -A lines, one per line (as iptables -S).
func (rs *RuleSet) String() string {
	if rs == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range rs.Policies {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	for _, c := range rs.Chains {
		b.WriteString("-N " + c.Name + "\n")
	}
	for _, r := range rs.Raw {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	b.WriteString(rs.priorityText())
	for _, r := range rs.Rules {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	if n := rs.NAT; n != nil {
		for _, c := range n.Chains {
			b.WriteString("-t nat -N " + c.Name + "\n")
		}
		for _, r := range n.Rules {
			b.WriteString(r.String())
			b.WriteByte('\n')
		}
	}
	return b.String()
}
