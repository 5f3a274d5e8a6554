package rules

import (
	"fmt"
	"strings"
)

// icmpName is a named ICMP type (code -1: any code) or type/code.
type icmpName struct {
	name string
	typ  uint8
	code int16
}

// icmpNames are the --icmp-type names of `iptables -p icmp -h`, plus the
// aliases iptables also reads (ping, pong, ttl-exceeded).
var icmpNames = [...]icmpName{
	{"echo-reply", 0, -1}, {"pong", 0, -1},
	{"destination-unreachable", 3, -1},
	{"network-unreachable", 3, 0}, {"host-unreachable", 3, 1},
	{"protocol-unreachable", 3, 2}, {"port-unreachable", 3, 3},
	{"fragmentation-needed", 3, 4}, {"source-route-failed", 3, 5},
	{"network-unknown", 3, 6}, {"host-unknown", 3, 7},
	{"network-prohibited", 3, 9}, {"host-prohibited", 3, 10},
	{"TOS-network-unreachable", 3, 11}, {"TOS-host-unreachable", 3, 12},
	{"communication-prohibited", 3, 13}, {"host-precedence-violation", 3, 14},
	{"precedence-cutoff", 3, 15},
	{"source-quench", 4, -1},
	{"redirect", 5, -1},
	{"network-redirect", 5, 0}, {"host-redirect", 5, 1},
	{"TOS-network-redirect", 5, 2}, {"TOS-host-redirect", 5, 3},
	{"echo-request", 8, -1}, {"ping", 8, -1},
	{"router-advertisement", 9, -1}, {"router-solicitation", 10, -1},
	{"time-exceeded", 11, -1}, {"ttl-exceeded", 11, -1},
	{"ttl-zero-during-transit", 11, 0}, {"ttl-zero-during-reassembly", 11, 1},
	{"parameter-problem", 12, -1},
	{"ip-header-bad", 12, 0}, {"required-option-missing", 12, 1},
	{"timestamp-request", 13, -1}, {"timestamp-reply", 14, -1},
	{"address-mask-request", 17, -1}, {"address-mask-reply", 18, -1},
}

// icmpv6Names are the --icmpv6-type names of `ip6tables -p ipv6-icmp -h`.
var icmpv6Names = [...]icmpName{
	{"destination-unreachable", 1, -1},
	{"no-route", 1, 0}, {"communication-prohibited", 1, 1}, {"beyond-scope", 1, 2},
	{"address-unreachable", 1, 3}, {"port-unreachable", 1, 4},
	{"failed-policy", 1, 5}, {"reject-route", 1, 6},
	{"packet-too-big", 2, -1},
	{"time-exceeded", 3, -1}, {"ttl-exceeded", 3, -1},
	{"ttl-zero-during-transit", 3, 0}, {"ttl-zero-during-reassembly", 3, 1},
	{"parameter-problem", 4, -1},
	{"bad-header", 4, 0}, {"unknown-header-type", 4, 1}, {"unknown-option", 4, 2},
	{"echo-request", 128, -1}, {"ping", 128, -1},
	{"echo-reply", 129, -1}, {"pong", 129, -1},
	{"router-solicitation", 133, -1}, {"router-advertisement", 134, -1},
	{"neighbour-solicitation", 135, -1}, {"neighbor-solicitation", 135, -1},
	{"neighbour-advertisement", 136, -1}, {"neighbor-advertisement", 136, -1},
	{"redirect", 137, -1},
}

// parseICMPType parses an --icmp-type (v6: --icmpv6-type) argument: "any", a
// name (any case), "TYPE" or "TYPE/CODE" with numbers 0-255.
func parseICMPType(s string, v6 bool) (ICMPMatch, *valueErr) {
	if strings.EqualFold(s, "any") {
		return ICMPMatch{Any: true, Code: -1}, nil
	}
	names := icmpNames[:]
	opt := "--icmp-type"
	if v6 {
		names, opt = icmpv6Names[:], "--icmpv6-type"
	}
	for _, n := range names {
		if strings.EqualFold(n.name, s) {
			return ICMPMatch{Type: n.typ, Code: n.code}, nil
		}
	}
	typText, codeText, hasCode := strings.Cut(s, "/")
	typ, ok := parseUint(typText, 255)
	if !ok {
		ve := &valueErr{tok: s, msg: "unknown ICMP type",
			hint: "use a name listed by `iptables -p icmp -h`, TYPE or TYPE/CODE (0-255), or any"}
		if v6 {
			ve.msg = "unknown ICMPv6 type"
			ve.hint = "use a name listed by `ip6tables -p ipv6-icmp -h`, TYPE or TYPE/CODE (0-255), or any"
		}
		if isDigits(typText) {
			ve.tok, ve.msg, ve.hint = typText, opt+" type out of range (0-255)", ""
		}
		return ICMPMatch{}, ve
	}
	m := ICMPMatch{Type: uint8(typ), Code: -1}
	if hasCode {
		code, ok := parseUint(codeText, 255)
		if !ok {
			ve := &valueErr{off: len(typText) + 1, tok: codeText, msg: "not an ICMP code (0-255)"}
			if isDigits(codeText) {
				ve.msg = opt + " code out of range (0-255)"
			}
			return ICMPMatch{}, ve
		}
		m.Code = int16(code)
	}
	return m, nil
}

// canonical returns m with IPv4 type 255 as "any": libxt_icmp and the
// kernel's icmp match (ip_tables.c, icmp_type_code_match) take type 0xFF as
// every type, whatever the code, and iptables-save prints it as any.
// ip6tables has no such type: --icmpv6-type 255 is type 255.
func (m ICMPMatch) canonical(v6 bool) ICMPMatch {
	if !v6 && m.Type == 255 {
		m.Type, m.Code, m.Any = 0, -1, true
	}
	return m
}

// formatICMPType prints an ICMP match's argument the way iptables-save does.
func formatICMPType(m ICMPMatch) string {
	switch {
	case m.Any:
		return "any"
	case m.Code < 0:
		return fmt.Sprint(m.Type)
	}
	return fmt.Sprintf("%d/%d", m.Type, m.Code)
}
