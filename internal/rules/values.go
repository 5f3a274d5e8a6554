package rules

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// valueErr is a problem in the argument of an option. off is the byte offset
// of the offending part (tok) within the argument, so the error can point at it.
type valueErr struct {
	off  int
	tok  string
	msg  string
	hint string
}

// parseUint parses a decimal number made of digits only, at most max.
func parseUint(s string, max int) (int, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n <= max
}

// isDigits reports whether s is a non-empty string of decimal digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parsePort parses one port: a number or a name from /etc/services (see
// lookupService; proto "" takes a name of any protocol); off is the offset
// of s in the argument.
func parsePort(s string, off int, proto string) (uint16, *valueErr) {
	if s == "" {
		return 0, &valueErr{off: off, msg: "missing port number"}
	}
	n, ok := parseUint(s, 65535)
	if ok {
		return uint16(n), nil
	}
	if isDigits(s) {
		return 0, &valueErr{off: off, tok: s, msg: "port out of range (0-65535)"}
	}
	if p, ok := lookupService(s, proto); ok {
		return p, nil
	}
	hint := "use a number or a name of /etc/services (e.g. 22 or ssh)"
	if proto != "" {
		hint = "use a number or a name /etc/services lists for " + proto + " (-m multiport takes only those)"
	}
	return 0, &valueErr{off: off, tok: s, msg: "unknown port name", hint: hint}
}

// parsePortRange parses "p", "a:b", ":b" (0:b), "a:" (a:65535) or ":";
// names are looked up for proto (see parsePort).
func parsePortRange(s string, off int, proto string) (PortRange, *valueErr) {
	lo, hi, isRange := strings.Cut(s, ":")
	if !isRange {
		p, err := parsePort(s, off, proto)
		return PortRange{p, p}, err
	}
	r := PortRange{0, 65535}
	var err *valueErr
	if lo != "" {
		if r.Lo, err = parsePort(lo, off, proto); err != nil {
			return r, err
		}
	}
	if hi != "" {
		if r.Hi, err = parsePort(hi, off+len(lo)+1, proto); err != nil {
			return r, err
		}
	}
	if r.Lo > r.Hi {
		return r, &valueErr{off: off, tok: s,
			msg:  fmt.Sprintf("port range reversed (%d > %d)", r.Lo, r.Hi),
			hint: fmt.Sprintf("write %d:%d", r.Hi, r.Lo)}
	}
	return r, nil
}

// maxMultiport is the number of ports -m multiport takes (a range counts as two).
const maxMultiport = 15

// parsePortList parses a multiport list "a,b,c:d"; names are those
// /etc/services lists for proto.
func parsePortList(s, proto string) ([]PortRange, *valueErr) {
	var out []PortRange
	count, off := 0, 0
	for item := range strings.SplitSeq(s, ",") {
		r, err := parsePortRange(item, off, proto)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if r.Lo == r.Hi && !strings.Contains(item, ":") {
			count++
		} else {
			count += 2
		}
		off += len(item) + 1
	}
	if count > maxMultiport {
		return nil, &valueErr{tok: s,
			msg:  fmt.Sprintf("too many ports (%d > %d; a range counts as two)", count, maxMultiport),
			hint: "split the ports over several rules"}
	}
	return out, nil
}

// parsePrefix parses an address or CIDR: "10.1.2.3", "10.0.0.0/8",
// "10.0.0.0/255.0.0.0", "2001:db8::/32". Host bits are cleared.
func parsePrefix(s string) (netip.Prefix, *valueErr) {
	if i := strings.IndexByte(s, ','); i >= 0 {
		return netip.Prefix{}, &valueErr{off: i, tok: s, msg: "only one address per option",
			hint: "write one rule per address (iptables expands lists into several rules)"}
	}
	addrText, maskText, hasMask := strings.Cut(s, "/")
	fam := "IPv4"
	if strings.Contains(addrText, ":") {
		fam = "IPv6"
	}
	addr, err := netip.ParseAddr(addrText)
	if err != nil || addr.Zone() != "" || (fam == "IPv6") != addr.Is6() {
		ve := &valueErr{tok: addrText, msg: "not an " + fam + " address"}
		if fam == "IPv4" && strings.ContainsFunc(addrText, isLetter) {
			ve.hint = "host names are not resolved; write an IP address"
		}
		if addr.Zone() != "" {
			ve.hint = "zones (%eth0) are not supported"
		}
		return netip.Prefix{}, ve
	}
	bits := addr.BitLen()
	if hasMask {
		off := len(addrText) + 1
		switch n, ok := parseUint(maskText, addr.BitLen()); {
		case ok:
			bits = n
		case strings.ContainsAny(maskText, ".:"):
			// ADDRESS/NETMASK, as iptables reads it (255.255.0.0,
			// ffff:ffff::).
			mask, err := netip.ParseAddr(maskText)
			if err != nil || mask.Is4() != addr.Is4() || mask.Zone() != "" {
				return netip.Prefix{}, &valueErr{off: off, tok: maskText, msg: "not an " + fam + " netmask"}
			}
			if bits = maskBits(mask.AsSlice()); bits < 0 {
				return netip.Prefix{}, &valueErr{off: off, tok: maskText, msg: "netmask is not contiguous",
					hint: "xdpfw matches an address against a prefix (its classifier splits address ranges); " +
						"a mask with holes such as 255.0.255.0 matches no single prefix: write one rule per prefix it covers"}
			}
		case isDigits(maskText):
			return netip.Prefix{}, &valueErr{off: off, tok: maskText,
				msg: fmt.Sprintf("prefix length out of range (0-%d)", addr.BitLen())}
		default:
			return netip.Prefix{}, &valueErr{off: off, tok: maskText, msg: "not a prefix length",
				hint: fmt.Sprintf("write ADDRESS/LENGTH with LENGTH 0-%d", addr.BitLen())}
		}
	}
	return netip.PrefixFrom(addr, bits).Masked(), nil
}

// isLetter reports whether r is an ASCII letter.
func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// maskBits returns the prefix length of a contiguous netmask (leading ones,
// then zeros), or -1.
func maskBits(m []byte) int {
	bits := 0
	for bits < 8*len(m) && m[bits/8]&(0x80>>(bits%8)) != 0 {
		bits++
	}
	for i := bits; i < 8*len(m); i++ {
		if m[i/8]&(0x80>>(i%8)) != 0 {
			return -1
		}
	}
	return bits
}

// parseMAC parses XX:XX:XX:XX:XX:XX (one or two hex digits per byte).
func parseMAC(s string) ([6]byte, *valueErr) {
	var mac [6]byte
	bad := &valueErr{tok: s, msg: "not a MAC address", hint: "write it as XX:XX:XX:XX:XX:XX"}
	parts := strings.Split(s, ":")
	if len(parts) != len(mac) {
		return mac, bad
	}
	for i, p := range parts {
		if len(p) < 1 || len(p) > 2 {
			return mac, bad
		}
		for j := 0; j < len(p); j++ {
			d, ok := hexDigit(p[j])
			if !ok {
				return mac, bad
			}
			mac[i] = mac[i]<<4 | d
		}
	}
	return mac, nil
}

// hexDigit returns the value of a hexadecimal digit.
func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// maxIfaceLen is the longest interface name (IFNAMSIZ - 1).
const maxIfaceLen = 15

// parseIface parses an interface name; a trailing '+' makes it a prefix match.
// A '+' elsewhere is part of the name, as in iptables (Linux allows it).
func parseIface(s string) (IfaceMatch, *valueErr) {
	if len(s) > maxIfaceLen {
		return IfaceMatch{}, &valueErr{tok: s,
			msg: fmt.Sprintf("interface name too long (%d > %d characters)", len(s), maxIfaceLen)}
	}
	m := IfaceMatch{Name: s}
	if strings.HasSuffix(s, "+") {
		m.Name, m.Prefix = s[:len(s)-1], true
	}
	if m.Name == "" && !m.Prefix || m.Name == "." || m.Name == ".." || strings.HasPrefix(m.Name, "-") {
		return m, &valueErr{tok: s, msg: "not an interface name"}
	}
	for i := 0; i < len(m.Name); i++ {
		if c := m.Name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`/:"'\#!`, c) >= 0 {
			return m, &valueErr{off: i, tok: s, msg: fmt.Sprintf("invalid character %q in interface name", c),
				hint: "a trailing + matches every interface with that prefix (eth+)"}
		}
	}
	return m, nil
}

// Text is the name as written: with the trailing '+' of a prefix.
func (m IfaceMatch) Text() string {
	if m.Prefix {
		return m.Name + "+"
	}
	return m.Name
}

// tcpFlagNames lists the nameable TCP flags in the order iptables prints them.
var tcpFlagNames = [...]struct {
	name string
	bit  uint8
}{
	{"FIN", TCPFlagFIN}, {"SYN", TCPFlagSYN}, {"RST", TCPFlagRST},
	{"PSH", TCPFlagPSH}, {"ACK", TCPFlagACK}, {"URG", TCPFlagURG},
}

// synMask and synComp are what --syn means: --tcp-flags FIN,SYN,RST,ACK SYN.
const (
	synMask = TCPFlagFIN | TCPFlagSYN | TCPFlagRST | TCPFlagACK
	synComp = TCPFlagSYN
)

// parseTCPFlags parses a comma list of SYN,ACK,FIN,RST,URG,PSH,ALL,NONE.
func parseTCPFlags(s string) (uint8, *valueErr) {
	var flags uint8
	off := 0
	for name := range strings.SplitSeq(s, ",") {
		switch up := strings.ToUpper(name); up {
		case "ALL":
			flags |= TCPFlagALL
		case "NONE":
		default:
			found := false
			for _, f := range tcpFlagNames {
				if f.name == up {
					flags |= f.bit
					found = true
				}
			}
			if !found {
				return 0, &valueErr{off: off, tok: name, msg: "unknown TCP flag",
					hint: "flags are SYN, ACK, FIN, RST, URG, PSH, ALL and NONE, separated by commas"}
			}
		}
		off += len(name) + 1
	}
	return flags, nil
}

// formatTCPFlags prints a flag set the way parseTCPFlags reads it.
func formatTCPFlags(flags uint8) string {
	switch flags & TCPFlagALL {
	case 0:
		return "NONE"
	case TCPFlagALL:
		return "ALL"
	}
	var names []string
	for _, f := range tcpFlagNames {
		if flags&f.bit != 0 {
			names = append(names, f.name)
		}
	}
	return strings.Join(names, ",")
}

// Protocol numbers that the parser treats specially.
const (
	protoICMP    = 1
	protoTCP     = 6
	protoUDP     = 17
	protoDCCP    = 33
	protoICMPv6  = 58
	protoSCTP    = 132
	protoMH      = 135 // IPv6 mobility header
	protoUDPLite = 136
)

// parseProto parses a -p argument as iptables does: a number 0-255, or a
// name (any case) from /etc/protocols (see lookupProto), "all", or one of
// iptables' own names icmpv6, mh and ipv6-mh.
func parseProto(s string) (uint8, *valueErr) {
	if n, ok := parseUint(s, 255); ok {
		return uint8(n), nil
	}
	low := strings.ToLower(s)
	switch low {
	case "all":
		return 0, nil
	case "icmpv6":
		return protoICMPv6, nil
	case "mh", "ipv6-mh":
		return protoMH, nil
	}
	if n, ok := lookupProto(low); ok {
		return n, nil
	}
	return 0, &valueErr{tok: s, msg: "unknown protocol",
		hint: "use a name of /etc/protocols (tcp, udp, icmp, ipv6-icmp, sctp, gre, esp, igmp ...), all or a number 0-255"}
}

// isPortProto reports whether a protocol has ports (--sport/--dport).
func isPortProto(p uint8) bool {
	return p == protoTCP || p == protoUDP || p == protoSCTP || p == protoUDPLite
}

// maxVLANID is the largest 802.1Q VLAN identifier.
const maxVLANID = 4095

// maxVLANPrio is the largest 802.1Q priority code point (3 bits).
const maxVLANPrio = 7

// parseVLAN parses a --vlan-id argument.
func parseVLAN(s string) (uint16, *valueErr) {
	n, ok := parseUint(s, maxVLANID)
	if !ok {
		return 0, &valueErr{tok: s, msg: fmt.Sprintf("not a VLAN id (0-%d)", maxVLANID)}
	}
	return uint16(n), nil
}

// logLevels are the syslog level names --log-level accepts, by number.
var logLevels = [...]string{"emerg", "alert", "crit", "error", "warning", "notice", "info", "debug"}

// parseLogLevel parses a --log-level argument (a number 0-7, a name, or
// iptables' alias panic for emerg) and returns the level's name; warning,
// the default, is "" (the kernel's rule holds the number only, so
// iptables-save cannot tell a given 4 from none: it prints neither).
func parseLogLevel(s string) (string, *valueErr) {
	level := ""
	if n, ok := parseUint(s, len(logLevels)-1); ok {
		level = logLevels[n]
	}
	switch low := strings.ToLower(s); {
	case level != "":
	case low == "panic":
		level = logLevels[0]
	case slices.Contains(logLevels[:], low):
		level = low
	default:
		return "", &valueErr{tok: s, msg: "unknown log level",
			hint: "use 0-7 or emerg (panic), alert, crit, error, warning, notice, info, debug"}
	}
	if level == DefaultLogLevel {
		return "", nil
	}
	return level, nil
}

// DefaultLogLevel is the level of a LOG rule that names none, as iptables'.
const DefaultLogLevel = "warning"

// Bounds of --log-rate N/UNIT and --log-burst N: a million a second is no
// limit at all; a burst as large is a flood.
const (
	MaxLogRate  = 1000000
	MaxLogBurst = 1000000
)

// ParseLogRate reads a log rate: "N/UNIT" with UNIT s, sec, second, m,
// min, minute, h, hour, d or day (as iptables' --limit), or a bare N (per
// second); N from 1 to MaxLogRate.
func ParseLogRate(s string) (LogRate, error) {
	r, ve := parseLogRate(s)
	if ve != nil {
		if ve.hint != "" {
			return r, fmt.Errorf("%q: %s (%s)", Clip(s), ve.msg, ve.hint)
		}
		return r, fmt.Errorf("%q: %s", Clip(s), ve.msg)
	}
	return r, nil
}

func parseLogRate(s string) (LogRate, *valueErr) {
	num, unit, slash := strings.Cut(s, "/")
	n, ok := parseUint(num, MaxLogRate)
	if !ok || n < 1 {
		return LogRate{}, &valueErr{tok: num, msg: "bad log rate",
			hint: fmt.Sprintf("N/sec, N/min, N/hour or N/day with N from 1 to %d", MaxLogRate)}
	}
	r := LogRate{N: uint32(n)}
	switch strings.ToLower(unit) {
	case "s", "sec", "second":
		r.Unit = PerSecond
	case "m", "min", "minute":
		r.Unit = PerMinute
	case "h", "hour":
		r.Unit = PerHour
	case "d", "day":
		r.Unit = PerDay
	default:
		if !slash {
			return r, nil // a bare number: per second
		}
		return LogRate{}, &valueErr{off: len(num) + 1, tok: unit, msg: "unknown rate unit",
			hint: "use sec, min, hour or day (e.g. 10/sec)"}
	}
	return r, nil
}

// maxLogPrefix and maxComment are the lengths iptables accepts.
const (
	maxLogPrefix = 29
	maxComment   = 255
)

// checkText validates free text (--comment, --log-prefix): at most max bytes,
// no control characters.
func checkText(s, what string, max int) *valueErr {
	if len(s) > max {
		return &valueErr{tok: s, msg: fmt.Sprintf("%s too long (%d > %d characters)", what, len(s), max)}
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return &valueErr{tok: s, msg: fmt.Sprintf("control character %q in %s", s[i], what)}
		}
	}
	return nil
}

// rejectTypes are the --reject-with values: every spelling iptables and
// ip6tables accept (libipt_REJECT, libip6t_REJECT), the canonical (stored)
// spelling iptables-save prints, and the family it is valid for
// (FamilyAny: both). port-unreach means port unreachable in the rule's
// family: its canonical spelling is chosen once the family is known.
var rejectTypes = [...]struct {
	name, canon string
	family      Family
}{
	{"icmp-net-unreachable", "icmp-net-unreachable", FamilyIPv4},
	{"net-unreach", "icmp-net-unreachable", FamilyIPv4},
	{"icmp-host-unreachable", "icmp-host-unreachable", FamilyIPv4},
	{"host-unreach", "icmp-host-unreachable", FamilyIPv4},
	{"icmp-port-unreachable", "icmp-port-unreachable", FamilyIPv4},
	{"icmp-proto-unreachable", "icmp-proto-unreachable", FamilyIPv4},
	{"proto-unreach", "icmp-proto-unreachable", FamilyIPv4},
	{"icmp-net-prohibited", "icmp-net-prohibited", FamilyIPv4},
	{"net-prohib", "icmp-net-prohibited", FamilyIPv4},
	{"icmp-host-prohibited", "icmp-host-prohibited", FamilyIPv4},
	{"host-prohib", "icmp-host-prohibited", FamilyIPv4},
	{"icmp-admin-prohibited", "icmp-admin-prohibited", FamilyIPv4},
	{"admin-prohib", "icmp-admin-prohibited", FamilyIPv4},
	{"tcp-reset", "tcp-reset", FamilyAny},
	{"tcp-rst", "tcp-reset", FamilyAny}, // iptables only; ip6tables refuses it
	{"port-unreach", portUnreach, FamilyAny},
	{"icmp6-no-route", "icmp6-no-route", FamilyIPv6},
	{"no-route", "icmp6-no-route", FamilyIPv6},
	{"icmp6-adm-prohibited", "icmp6-adm-prohibited", FamilyIPv6},
	{"adm-prohibited", "icmp6-adm-prohibited", FamilyIPv6},
	{"icmp6-addr-unreachable", "icmp6-addr-unreachable", FamilyIPv6},
	{"addr-unreach", "icmp6-addr-unreachable", FamilyIPv6},
	{"icmp6-port-unreachable", "icmp6-port-unreachable", FamilyIPv6},
}

// portUnreach is the canonical spelling of port-unreach until the rule's
// family decides it (see portUnreachFor).
const portUnreach = "port-unreach"

// portUnreachFor is what port-unreach means in a rule of family f:
// iptables reads it as icmp-port-unreachable, ip6tables as
// icmp6-port-unreachable; in a rule for both families it is the default
// answer (port unreachable in the packet's family), so nothing is stored.
func portUnreachFor(f Family) string {
	switch f {
	case FamilyIPv4:
		return "icmp-port-unreachable"
	case FamilyIPv6:
		return "icmp6-port-unreachable"
	}
	return ""
}

// parseRejectWith returns the canonical spelling of a --reject-with value and
// the family it belongs to.
func parseRejectWith(s string) (string, Family, *valueErr) {
	for _, t := range rejectTypes {
		if t.name == s {
			return t.canon, t.family, nil
		}
	}
	switch s {
	case "icmp6-policy-fail", "policy-fail", "icmp6-reject-route", "reject-route":
		return "", 0, &valueErr{tok: s, msg: "--reject-with " + s + " is not supported",
			hint: "xdpfw answers ICMPv6 destination unreachable with codes 0 (no-route), 1 (adm-prohibited), " +
				"3 (addr-unreach) and 4 (port-unreach) only; use one of those"}
	}
	return "", 0, &valueErr{tok: s, msg: "unknown --reject-with type",
		hint: "IPv4: icmp-net-unreachable, icmp-host-unreachable, icmp-port-unreachable, " +
			"icmp-proto-unreachable, icmp-net-prohibited, icmp-host-prohibited, icmp-admin-prohibited; " +
			"IPv6: icmp6-no-route, icmp6-adm-prohibited, icmp6-addr-unreachable, icmp6-port-unreachable; " +
			"both: tcp-reset, port-unreach (and iptables' short forms such as net-unreach, host-prohib)"}
}

// SyslogPriority is the syslog priority (0 emerg .. 7 debug) of a
// --log-level value; "" (none given) is warning, as iptables' LOG.
func SyslogPriority(level string) int {
	if level == "" {
		level = DefaultLogLevel
	}
	for i, l := range logLevels {
		if l == level {
			return i
		}
	}
	return 4
}
