package rules

// ImpliedFamily returns the family that the selectors of m imply: that of
// the -s / -d addresses, IPv4 for -p icmp and -f (or ! -f), IPv6 for
// -p ipv6-icmp; FamilyAny when none does. The parser rejects rules whose
// selectors imply different families, or another family than m.Family.
func (m Match) ImpliedFamily() Family {
	for _, a := range []*AddrMatch{m.Src, m.Dst, m.CTOrigSrc, m.CTOrigDst, m.CTReplSrc, m.CTReplDst} {
		if a != nil {
			if a.Prefix.Addr().Is6() {
				return FamilyIPv6
			}
			return FamilyIPv4
		}
	}
	if m.Proto != nil && !m.Proto.Invert {
		switch m.Proto.Proto {
		case protoICMP:
			return FamilyIPv4
		case protoICMPv6:
			return FamilyIPv6
		}
	}
	for _, r := range []*IPRangeMatch{m.SrcRange, m.DstRange} {
		if r != nil {
			if r.From.Is6() {
				return FamilyIPv6
			}
			return FamilyIPv4
		}
	}
	if m.Fragment != nil {
		return FamilyIPv4
	}
	if r := m.Recent; r != nil && r.Mask.IsValid() {
		if r.Mask.Is6() {
			return FamilyIPv6
		}
		return FamilyIPv4
	}
	if h := m.HashLimit; h != nil && (h.SrcMask > 32 || h.DstMask > 32) {
		return FamilyIPv6
	}
	if c := m.ConnLimit; c != nil && c.Mask > 32 {
		return FamilyIPv6
	}
	if a := m.AddrType; a != nil && (a.Src|a.Dst)&AddrIPv4Only != 0 {
		return FamilyIPv4
	}
	if m.TTL != nil {
		return m.Family // -m ttl or -m hl: the family names the module
	}
	if m.RT != nil {
		return FamilyIPv6
	}
	return FamilyAny
}

// familyFlag returns the option that restricts a rule to f ("-4" or "-6").
func familyFlag(f Family) string {
	switch f {
	case FamilyIPv4:
		return "-4"
	case FamilyIPv6:
		return "-6"
	}
	return ""
}

// parseFamilyFlag reads -4, --ipv4, -6 or --ipv6.
func parseFamilyFlag(s string) (Family, bool) {
	switch s {
	case "-4", "--ipv4":
		return FamilyIPv4, true
	case "-6", "--ipv6":
		return FamilyIPv6, true
	}
	return FamilyAny, false
}
