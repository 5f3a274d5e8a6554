package rules

import "errors"

// LookupICMP resolves an ICMP (v6: ICMPv6) type argument as --icmp-type
// spells it — a name, TYPE or TYPE/CODE — to a type and code (code 0 when
// the argument names none). "any" is not a single type and is refused.
// The CLI's trace command uses it to build packets.
func LookupICMP(v6 bool, s string) (typ, code uint8, err error) {
	m, ve := parseICMPType(s, v6)
	if ve != nil {
		msg := ve.msg + ": " + quote(ve.tok)
		if ve.hint != "" {
			msg += " (" + ve.hint + ")"
		}
		return 0, 0, errors.New(msg)
	}
	if m.Any {
		return 0, 0, errors.New(`"any" is not one ICMP type`)
	}
	if m.Code >= 0 {
		code = uint8(m.Code)
	}
	return m.Type, code, nil
}
