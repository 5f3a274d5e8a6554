package rules

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Header matches: -m iprange, -m length, -m ttl / -m hl, -m dscp, -m tos
// and -m ecn, with the kernel's meaning (xt_iprange, xt_length, ipt_ttl,
// ip6t_hl, xt_dscp, xt_ecn) and iptables-save's spelling.

// IPRangeMatch is -m iprange --src-range / --dst-range FROM-TO: the address
// is in [From, To] (both of the rule's family). A reversed range (From >
// To) holds no address, as in the kernel.
type IPRangeMatch struct {
	From, To netip.Addr
	Invert   bool
}

// LengthMatch is -m length --length MIN[:MAX]: the IP length in [Min, Max]
// (IPv4: the total length; IPv6: the payload length + 40, the header).
type LengthMatch struct {
	Min, Max uint16
	Invert   bool
}

// TTLOp is the comparison of a TTLMatch.
type TTLOp uint8

// The comparisons of -m ttl (--ttl-eq, ! --ttl-eq, --ttl-lt, --ttl-gt)
// and -m hl (--hl-eq ...).
const (
	TTLEq TTLOp = iota
	TTLNe
	TTLLt
	TTLGt
)

// TTLMatch is -m ttl (IPv4: the TTL) or -m hl (IPv6: the hop limit): the
// field compared with Value by Op.
type TTLMatch struct {
	Op    TTLOp
	Value uint8
}

// Range is the TTL values m matches, as [lo, hi] and whether it is
// negated (TTLNe); ok is false when it matches none (--ttl-lt 0,
// --ttl-gt 255).
func (m TTLMatch) Range() (lo, hi uint8, negated, ok bool) {
	switch m.Op {
	case TTLLt:
		return 0, m.Value - 1, false, m.Value > 0
	case TTLGt:
		return m.Value + 1, 255, false, m.Value < 255
	}
	return m.Value, m.Value, m.Op == TTLNe, true
}

// DSCPMatch is -m dscp --dscp N (or --dscp-class NAME): the DSCP, the top
// six bits of the TOS / traffic class byte, is Value.
type DSCPMatch struct {
	Value  uint8 // 0..63
	Invert bool
}

// TOSMatch is -m tos --tos VALUE[/MASK] (or a name): the TOS / traffic
// class byte, masked, is Value.
type TOSMatch struct {
	Value, Mask uint8
	Invert      bool
}

// ECN bits of the TCP header's flags byte (-m ecn --ecn-tcp-ece/cwr).
const (
	TCPFlagECE uint8 = 0x40
	TCPFlagCWR uint8 = 0x80
)

// ECNMatch is -m ecn. TCPMask holds the TCP bits tested (TCPFlagECE,
// TCPFlagCWR), TCPComp the value each must have (a bit of TCPMask clear in
// TCPComp is a negated option). IPECT < 0: no --ecn-ip-ect; else the ECN
// field of the IP header (its low two bits of the TOS byte) is IPECT,
// negated with IPInvert.
type ECNMatch struct {
	TCPMask, TCPComp uint8
	IPECT            int8
	IPInvert         bool
}

// MSSMatch is -m tcpmss --mss MIN[:MAX]: the TCP header's MSS option is in
// [Min, Max]. A header without the option matches only negated, as in the
// kernel's xt_tcpmss.
type MSSMatch struct {
	Min, Max uint16
	Invert   bool
}

// RTMatch is -m rt: the packet has an IPv6 routing header (the first one
// is tested) and it passes each test given: --rt-type, --rt-segsleft (its
// segments left) and --rt-len (its length in bytes). The values are
// iptables' 32-bit ones; a value no header has is kept as written.
type RTMatch struct {
	Type *RTValue
	Segs *RTRange
	Len  *RTValue
}

// RTValue is an --rt-type or --rt-len test.
type RTValue struct {
	V      uint32
	Invert bool
}

// RTRange is an --rt-segsleft test: Lo..Hi (reversed: none).
type RTRange struct {
	Lo, Hi uint32
	Invert bool
}

// rt returns the rule's -m rt match.
func (p *ruleParser) rt() *RTMatch {
	if p.r.Match.RT == nil {
		p.r.Match.RT = &RTMatch{}
	}
	return p.r.Match.RT
}

// optRTType handles -m rt --rt-type and --rt-len.
func (p *ruleParser) optRTValue(o optUse) *Error {
	a := o.args[0]
	n, ok := parseNumber(a.text, 0xffffffff)
	if !ok {
		return p.errAt(a, a.text, "not a number (0-4294967295)", "")
	}
	v := &RTValue{V: uint32(n), Invert: o.invert}
	if o.opt.text == "--rt-type" {
		p.rt().Type = v
	} else {
		p.rt().Len = v
	}
	return nil
}

// optRTSegs handles -m rt --rt-segsleft N[:M].
func (p *ruleParser) optRTSegs(o optUse) *Error {
	a := o.args[0]
	lo, hi, colon := strings.Cut(a.text, ":")
	if !colon {
		hi = lo
	}
	bound := func(t string, def uint64) (uint32, bool) {
		if t == "" && colon {
			return uint32(def), true
		}
		n, ok := parseNumber(t, 0xffffffff)
		return uint32(n), ok
	}
	l, ok1 := bound(lo, 0)
	h, ok2 := bound(hi, 0xffffffff)
	if !ok1 || !ok2 {
		return p.errAt(a, a.text, "not a number or range (0-4294967295)", "write --rt-segsleft N or N:M")
	}
	if l == 0 && h == 0xffffffff && !o.invert {
		p.rt() // every value: iptables-save prints no option
		return nil
	}
	p.rt().Segs = &RTRange{Lo: l, Hi: h, Invert: o.invert}
	return nil
}

// optRT0 refuses the options of type 0 routing headers.
func (p *ruleParser) optRT0(o optUse) *Error {
	return p.errAt(o.opt, "", o.opt.text+" is not supported: xdpfw does not read type 0 routing headers' fields",
		"type 0 routing headers are deprecated (RFC 5095) and Linux does not process them; "+
			"to drop them all: -m rt --rt-type 0 -j DROP")
}

// optSrcRange handles -m iprange --src-range.
func (p *ruleParser) optSrcRange(o optUse) *Error { return p.ipRange(o, &p.r.Match.SrcRange) }

// optDstRange handles -m iprange --dst-range.
func (p *ruleParser) optDstRange(o optUse) *Error { return p.ipRange(o, &p.r.Match.DstRange) }

// ipRange handles --src-range and --dst-range FROM[-TO].
func (p *ruleParser) ipRange(o optUse, dst **IPRangeMatch) *Error {
	a := o.args[0]
	from, to, ve := parseIPRange(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	f := FamilyIPv4
	if from.Is6() {
		f = FamilyIPv6
	}
	if err := p.setFamily(f, a, a.text, famName(f)+" address range",
		fmt.Sprintf("%s %s (%s)", o.opt.text, a.text, famName(f))); err != nil {
		return err
	}
	*dst = &IPRangeMatch{From: from, To: to, Invert: o.invert}
	return nil
}

// parseIPRange parses FROM-TO (or one address, a range of one), both of
// one family, as libxt_iprange does.
func parseIPRange(s string) (from, to netip.Addr, ve *valueErr) {
	lo, hi, dash := strings.Cut(s, "-")
	if !dash {
		hi = lo
	}
	addr := func(t string, off int) (netip.Addr, *valueErr) {
		a, err := netip.ParseAddr(t)
		if err != nil || a.Zone() != "" {
			return a, &valueErr{off: off, tok: t, msg: "not an IP address",
				hint: "write FROM-TO, e.g. 10.0.0.1-10.0.0.99 or 2001:db8::1-2001:db8::ff"}
		}
		return a, nil // ::ffff:a.b.c.d is an IPv6 address, as ip6tables reads it
	}
	if from, ve = addr(lo, 0); ve != nil {
		return
	}
	if to, ve = addr(hi, len(lo)+1); ve != nil {
		return
	}
	if from.Is4() != to.Is4() {
		return from, to, &valueErr{tok: s, msg: "the range mixes IPv4 and IPv6", hint: "both ends are of one family"}
	}
	return from, to, nil
}

// formatIPRange prints a range as iptables-save does: FROM-TO, always.
func formatIPRange(m *IPRangeMatch) string { return m.From.String() + "-" + m.To.String() }

// parseNumber parses an unsigned number as iptables does (strtoul, base
// 0: decimal, 0x hexadecimal, a leading 0 octal), at most max.
func parseNumber(s string, max uint64) (uint64, bool) {
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	if l := strings.ToLower(s); strings.Contains(l, "_") || strings.HasPrefix(l, "0b") || strings.HasPrefix(l, "0o") {
		return 0, false // Go's base 0 reads more than strtoul's
	}
	n, err := strconv.ParseUint(s, 0, 64)
	return n, err == nil && n <= max
}

// parseRange16 parses N, N:M, :M (0:M) or N: (N:65535), as the length
// and tcpmss modules read them; what names the value in errors.
func parseRange16(s, what, hint string) (lo, hi uint16, ve *valueErr) {
	a, b, colon := strings.Cut(s, ":")
	if !colon {
		b = a
	}
	bound := func(t string, off int, def uint16) (uint16, *valueErr) {
		if t == "" && colon {
			return def, nil
		}
		n, ok := parseNumber(t, 65535)
		if !ok {
			return 0, &valueErr{off: off, tok: t, msg: "not " + what + " (0-65535)", hint: hint}
		}
		return uint16(n), nil
	}
	if lo, ve = bound(a, 0, 0); ve != nil {
		return
	}
	hi, ve = bound(b, len(a)+1, 65535)
	return
}

// formatRange16 prints a range as parseRange16 reads it: N, or N:M.
func formatRange16(lo, hi uint16) string {
	if lo == hi {
		return strconv.Itoa(int(lo))
	}
	return strconv.Itoa(int(lo)) + ":" + strconv.Itoa(int(hi))
}

// optLength handles -m length --length MIN[:MAX].
func (p *ruleParser) optLength(o optUse) *Error {
	a := o.args[0]
	min, max, ve := parseRange16(a.text, "a length", "write --length N or --length MIN:MAX (bytes of the IP packet)")
	if ve != nil {
		return p.valueErr(a, ve)
	}
	p.r.Match.Length = &LengthMatch{Min: min, Max: max, Invert: o.invert}
	return nil
}

// optMSS handles -m tcpmss --mss MIN[:MAX].
func (p *ruleParser) optMSS(o optUse) *Error {
	a := o.args[0]
	min, max, ve := parseRange16(a.text, "an MSS", "write --mss N or --mss MIN:MAX")
	if ve != nil {
		return p.valueErr(a, ve)
	}
	if min > max {
		return p.errAt(a, a.text, "invalid range: MIN is above MAX", "")
	}
	p.r.Match.MSS = &MSSMatch{Min: min, Max: max, Invert: o.invert}
	p.needProto(o.opt, is(protoTCP), "-m tcpmss needs -p tcp", "the MSS is a TCP option")
	return nil
}

// optTTL handles -m ttl --ttl-eq/--ttl-lt/--ttl-gt and -m hl --hl-eq/...
func (p *ruleParser) optTTL(o optUse) *Error {
	a := o.args[0]
	hl := strings.HasPrefix(o.opt.text, "--hl-")
	name := "TTL"
	if hl {
		name = "hop limit"
	}
	n, ok := parseNumber(a.text, 255)
	if !ok {
		return p.errAt(a, a.text, fmt.Sprintf("not a %s (0-255)", name), "")
	}
	if hl {
		if err := p.setFamily(FamilyIPv6, o.opt, "", "-m hl (IPv6 hop limit)", "-m hl (IPv6)"); err != nil {
			err.Hint = "IPv4's TTL is -m ttl --ttl-eq/--ttl-lt/--ttl-gt"
			return err
		}
	} else if err := p.setFamily(FamilyIPv4, o.opt, "", "-m ttl (IPv4 TTL)", "-m ttl (IPv4)"); err != nil {
		err.Hint = "IPv6's hop limit is -m hl --hl-eq/--hl-lt/--hl-gt"
		return err
	}
	m := TTLMatch{Value: uint8(n)}
	switch o.opt.text[len(o.opt.text)-2:] {
	case "eq":
		m.Op = TTLEq
		if o.invert {
			m.Op = TTLNe
		}
	case "lt":
		m.Op = TTLLt
	case "gt":
		m.Op = TTLGt
	}
	p.r.Match.TTL = &m
	return nil
}

// dscpClasses are the names --dscp-class takes (libxt_dscp's table).
var dscpClasses = map[string]uint8{
	"CS0": 0, "CS1": 8, "CS2": 16, "CS3": 24, "CS4": 32, "CS5": 40, "CS6": 48, "CS7": 56, "BE": 0,
	"AF11": 10, "AF12": 12, "AF13": 14, "AF21": 18, "AF22": 20, "AF23": 22,
	"AF31": 26, "AF32": 28, "AF33": 30, "AF41": 34, "AF42": 36, "AF43": 38, "EF": 46,
}

// optDSCP handles -m dscp --dscp N and --dscp-class NAME.
func (p *ruleParser) optDSCP(o optUse) *Error {
	a := o.args[0]
	var v uint8
	if o.opt.text == "--dscp-class" {
		c, ok := dscpClasses[strings.ToUpper(a.text)]
		if !ok {
			return p.errAt(a, a.text, "unknown DSCP class", "classes are BE, CS0-CS7, AF11-AF43 and EF")
		}
		v = c
	} else {
		n, ok := parseNumber(a.text, 63)
		if !ok {
			return p.errAt(a, a.text, "not a DSCP value (0-63)", "or name a class: --dscp-class EF")
		}
		v = uint8(n)
	}
	p.r.Match.DSCP = &DSCPMatch{Value: v, Invert: o.invert}
	return nil
}

// tosNames are the TOS names -m tos takes (RFC 1349), with mask 0x3f.
var tosNames = []struct {
	name  string
	value uint8
}{{"Minimize-Cost", 0x02}, {"Maximize-Reliability", 0x04}, {"Maximize-Throughput", 0x08},
	{"Minimize-Delay", 0x10}, {"Normal-Service", 0x00}}

// optTOS handles -m tos --tos VALUE[/MASK] or NAME.
func (p *ruleParser) optTOS(o optUse) *Error {
	a := o.args[0]
	m := TOSMatch{Mask: 0xff, Invert: o.invert}
	for _, t := range tosNames {
		if strings.EqualFold(a.text, t.name) {
			m.Value, m.Mask = t.value, 0x3f
			p.r.Match.TOS = &m
			return nil
		}
	}
	val, mask, slash := strings.Cut(a.text, "/")
	v, ok := parseNumber(val, 255)
	if !ok {
		return p.errAt(a, a.text, "not a TOS value (0-255, or VALUE/MASK, or a name)",
			"names: Minimize-Delay, Maximize-Throughput, Maximize-Reliability, Minimize-Cost, Normal-Service")
	}
	m.Value = uint8(v)
	if slash {
		k, ok := parseNumber(mask, 255)
		if !ok {
			return p.valueErr(a, &valueErr{off: len(val) + 1, tok: mask, msg: "not a TOS mask (0-255)"})
		}
		m.Mask = uint8(k)
	}
	p.r.Match.TOS = &m
	return nil
}

// ecn returns the rule's -m ecn match, made on first use.
func (p *ruleParser) ecn() *ECNMatch {
	if p.r.Match.ECN == nil {
		p.r.Match.ECN = &ECNMatch{IPECT: -1}
	}
	return p.r.Match.ECN
}

// optECNTCP handles -m ecn --ecn-tcp-ece and --ecn-tcp-cwr.
func (p *ruleParser) optECNTCP(o optUse) *Error {
	bit := TCPFlagECE
	if o.opt.text == "--ecn-tcp-cwr" {
		bit = TCPFlagCWR
	}
	m := p.ecn()
	m.TCPMask |= bit
	if !o.invert {
		m.TCPComp |= bit
	}
	p.needProto(o.opt, is(protoTCP), o.opt.text+" needs -p tcp", "the ECE and CWR bits are TCP header flags")
	return nil
}

// optECNIP handles -m ecn --ecn-ip-ect N.
func (p *ruleParser) optECNIP(o optUse) *Error {
	a := o.args[0]
	n, ok := parseNumber(a.text, 3)
	if !ok {
		return p.errAt(a, a.text, "not an ECN codepoint (0-3)",
			"0: not ECN-capable, 1: ECT(1), 2: ECT(0), 3: congestion experienced")
	}
	m := p.ecn()
	m.IPECT, m.IPInvert = int8(n), o.invert
	return nil
}

// header writes the header matches in iptables-save's spelling.
func (w *specWriter) header(m *Match) {
	if m.SrcRange != nil || m.DstRange != nil {
		w.add(false, "-m", "iprange")
		if r := m.SrcRange; r != nil {
			w.add(r.Invert, "--src-range", formatIPRange(r))
		}
		if r := m.DstRange; r != nil {
			w.add(r.Invert, "--dst-range", formatIPRange(r))
		}
	}
	if l := m.Length; l != nil {
		w.add(false, "-m", "length")
		w.add(l.Invert, "--length", formatRange16(l.Min, l.Max))
	}
	if rt := m.RT; rt != nil {
		w.add(false, "-m", "rt")
		if v := rt.Type; v != nil {
			w.add(v.Invert, "--rt-type", strconv.FormatUint(uint64(v.V), 10))
		}
		if s := rt.Segs; s != nil {
			v := strconv.FormatUint(uint64(s.Lo), 10)
			if s.Hi != s.Lo {
				v += ":" + strconv.FormatUint(uint64(s.Hi), 10)
			}
			w.add(s.Invert, "--rt-segsleft", v)
		}
		if v := rt.Len; v != nil {
			w.add(v.Invert, "--rt-len", strconv.FormatUint(uint64(v.V), 10))
		}
	}
	if s := m.MSS; s != nil {
		w.add(false, "-m", "tcpmss")
		w.add(s.Invert, "--mss", formatRange16(s.Min, s.Max))
	}
	if t := m.TTL; t != nil {
		mod := "ttl"
		if m.Family == FamilyIPv6 {
			mod = "hl"
		}
		op := [...]string{"eq", "eq", "lt", "gt"}[t.Op&3]
		w.add(false, "-m", mod)
		w.add(t.Op == TTLNe, "--"+mod+"-"+op, strconv.Itoa(int(t.Value)))
	}
	if d := m.DSCP; d != nil {
		w.add(false, "-m", "dscp")
		w.add(d.Invert, "--dscp", fmt.Sprintf("0x%02x", d.Value))
	}
	if t := m.TOS; t != nil {
		w.add(false, "-m", "tos")
		w.add(t.Invert, "--tos", fmt.Sprintf("0x%02x/0x%02x", t.Value, t.Mask))
	}
	if e := m.ECN; e != nil {
		w.add(false, "-m", "ecn")
		for _, bit := range []uint8{TCPFlagECE, TCPFlagCWR} {
			if e.TCPMask&bit != 0 {
				w.add(e.TCPComp&bit == 0, map[uint8]string{TCPFlagECE: "--ecn-tcp-ece", TCPFlagCWR: "--ecn-tcp-cwr"}[bit])
			}
		}
		if e.IPECT >= 0 {
			w.add(e.IPInvert, "--ecn-ip-ect", strconv.Itoa(int(e.IPECT)))
		}
	}
}
