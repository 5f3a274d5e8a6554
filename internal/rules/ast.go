// Package rules is the xdpfw rule language: iptables syntax (one rule per line,
// or iptables-save / ip6tables-save files), parsed into an AST with positions so
// every error can name file:line:column.
//
// The AST is the single source of truth for what a rule means. Two consumers
// read it: internal/compile (AST -> data-plane tables) and the reference matcher
// (internal/compile/reference.go), which evaluates the AST directly and is the
// oracle of the differential tests.
package rules

import (
	"fmt"
	"net/netip"
)

// Chain is a built-in iptables chain. The numeric values are shared with the
// data plane (bpf/types.h: enum fw_chain); keep them in sync.
type Chain uint8

// The built-in chains; NumChains is their count.
const (
	ChainInput   Chain = 0
	ChainForward Chain = 1
	ChainOutput  Chain = 2
	NumChains          = 3
)

// String returns the iptables name of the chain ("INPUT").
func (c Chain) String() string {
	switch c {
	case ChainInput:
		return "INPUT"
	case ChainForward:
		return "FORWARD"
	case ChainOutput:
		return "OUTPUT"
	}
	return fmt.Sprintf("chain(%d)", uint8(c))
}

// ParseChain maps an iptables chain name to a Chain.
func ParseChain(s string) (Chain, bool) {
	switch s {
	case "INPUT":
		return ChainInput, true
	case "FORWARD":
		return ChainForward, true
	case "OUTPUT":
		return ChainOutput, true
	}
	return 0, false
}

// Family restricts a rule (or a policy) to IPv4, IPv6, or both.
type Family uint8

// The families; FamilyAny means both IPv4 and IPv6.
const (
	FamilyAny  Family = 0
	FamilyIPv4 Family = 4
	FamilyIPv6 Family = 6
)

// String returns "ipv4", "ipv6" or "any".
func (f Family) String() string {
	switch f {
	case FamilyIPv4:
		return "ipv4"
	case FamilyIPv6:
		return "ipv6"
	}
	return "any"
}

// Verdict is what a rule or a policy does with a packet.
type Verdict uint8

// The verdicts of the -j targets ACCEPT, DROP, REJECT and LOG.
const (
	VerdictAccept Verdict = iota
	VerdictDrop
	VerdictReject // answers with a TCP RST or an ICMP unreachable (docs/reject.md)
	VerdictLog    // non-terminating: logs the packet and goes on to the next rule (docs/log.md)
)

// String returns the iptables name of the verdict ("ACCEPT").
func (v Verdict) String() string {
	switch v {
	case VerdictAccept:
		return "ACCEPT"
	case VerdictDrop:
		return "DROP"
	case VerdictReject:
		return "REJECT"
	case VerdictLog:
		return "LOG"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Terminal reports whether the verdict ends evaluation (first match wins).
func (v Verdict) Terminal() bool { return v != VerdictLog }

// Pos is a position in a rule file. Col is 1-based and counts bytes.
type Pos struct {
	File string
	Line int
	Col  int
}

// String returns "file:line:col", or "line:col" without a file.
func (p Pos) String() string {
	if p.Line == 0 && p.File != "" { // the whole file
		return p.File
	}
	if p.File == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// PortRange is an inclusive range of ports, Lo <= Hi. A single port has Lo == Hi.
type PortRange struct{ Lo, Hi uint16 }

// PortMatch is a set of port ranges (from --sport/--dport, or multiport).
type PortMatch struct {
	Ranges []PortRange
	Invert bool
}

// AddrMatch is -s / -d: one prefix (a plain address is a /32 or /128).
type AddrMatch struct {
	Prefix netip.Prefix // always masked (Prefix.Masked() == Prefix)
	Invert bool
}

// MACMatch is --mac-source / --mac-destination.
type MACMatch struct {
	Addr   [6]byte
	Invert bool
}

// TCPFlags bits, as in the TCP header's flags byte.
const (
	TCPFlagFIN uint8 = 0x01
	TCPFlagSYN uint8 = 0x02
	TCPFlagRST uint8 = 0x04
	TCPFlagPSH uint8 = 0x08
	TCPFlagACK uint8 = 0x10
	TCPFlagURG uint8 = 0x20
	// ECE (0x40) and CWR (0x80) are not nameable in iptables' --tcp-flags;
	// ALL means the six flags above (0x3f), as in iptables.
	TCPFlagALL uint8 = 0x3f
)

// TCPFlagsMatch is --tcp-flags MASK COMP (and --syn): (flags & Mask) == Comp.
type TCPFlagsMatch struct {
	Mask, Comp uint8
	Invert     bool
}

// ICMPMatch is --icmp-type (IPv4) or --icmpv6-type (IPv6).
// Any: "any" (matches every ICMP packet). Code < 0 means any code.
type ICMPMatch struct {
	Type   uint8
	Code   int16 // -1: any code
	Any    bool
	Invert bool
}

// IfaceMatch is -i NAME; a trailing '+' in iptables means prefix match.
type IfaceMatch struct {
	Name   string // without the trailing '+'
	Prefix bool
	Invert bool
}

// VLANMatch is -m vlan --vlan-id N (extension): the outermost tag's VID.
type VLANMatch struct {
	ID     uint16
	Invert bool
}

// SetMatch is -m set --match-set NAME src|dst: the address is in the named
// set (ipset-style; the set's contents live in the data plane).
type SetMatch struct {
	Name   string
	Invert bool
	Pos    Pos // of the name, for errors about the set (not part of the rule's text)
}

// Connection-tracking states (-m conntrack --ctstate, -m state --state), as
// bits of CTStateMatch.Mask. The bit numbers are enum fw_ct_state in
// bpf/types.h: bit i is state i.
const (
	CTNew         uint8 = 1 << 0 // first packet(s) of a connection, no reply yet
	CTEstablished uint8 = 1 << 1 // a connection that has seen a reply (and its replies)
	CTRelated     uint8 = 1 << 2 // ICMP errors about a tracked connection
	CTInvalid     uint8 = 1 << 3 // fits no connection (e.g. a TCP ACK for none)
	CTUntracked   uint8 = 1 << 4 // never tracked: non-first fragments, IPv6 ND/MLD
	CTAll         uint8 = 1<<5 - 1
	// CTSNAT and CTDNAT are --ctstate SNAT and DNAT: a connection whose
	// source (destination) the kernel rewrote. xdpfw does no NAT, so no
	// packet is in either (docs/compat.md); they are not in CTAll.
	CTSNAT uint8 = 1 << 5
	CTDNAT uint8 = 1 << 6
)

// Connection status bits (-m conntrack --ctstatus), the kernel's IPS_*
// bits (and fw_pkt.ctinfo's, bpf/types.h FW_CTI_*).
const (
	CTStatusExpected  uint8 = 1 << 0 // expected by a helper: never here (xdpfw has none)
	CTStatusSeenReply uint8 = 1 << 1 // a packet went the other way
	CTStatusAssured   uint8 = 1 << 2 // a real two-way connection (docs/conntrack.md)
	CTStatusConfirmed uint8 = 1 << 3 // recorded before this packet
)

// CTStatusMatch is -m conntrack --ctstatus LIST: the connection has one of
// the status bits of Mask (NONE is no bit: such a test matches nothing).
type CTStatusMatch struct {
	Mask   uint8
	Invert bool
}

// CTDir is -m conntrack --ctdir: the direction of the packet in its
// connection.
type CTDir uint8

// The directions of --ctdir.
const (
	CTDirOriginal CTDir = iota
	CTDirReply
)

// CTStateMatch is -m conntrack --ctstate LIST (or -m state --state LIST):
// the packet's connection state is one of Mask.
type CTStateMatch struct {
	Mask   uint8
	Invert bool
}

// ProtoMatch is -p. Proto 0 with Invert=false is never stored: -p all means "no match".
type ProtoMatch struct {
	Proto  uint8
	Invert bool
}

// Match holds every selector of one rule. A nil pointer / empty value means
// "not specified" (matches everything). All present selectors must match.
type Match struct {
	Family Family // from -4/-6, from the addresses / ICMP flavour, or from the file's family

	Proto *ProtoMatch
	Src   *AddrMatch
	Dst   *AddrMatch

	// SPort/DPort: --sport/--dport or -m multiport --sports/--dports.
	SPort *PortMatch
	DPort *PortMatch
	// Ports: -m multiport --ports: matches if the source OR the destination
	// port is in the set (Invert: neither is).
	Ports *PortMatch

	InIface *IfaceMatch

	MACSrc *MACMatch
	MACDst *MACMatch

	TCPFlags *TCPFlagsMatch
	ICMP     *ICMPMatch
	VLAN     *VLANMatch

	// SrcSet / DstSet: -m set --match-set NAME src / dst.
	SrcSet *SetMatch
	DstSet *SetMatch

	// CTState: -m conntrack --ctstate / -m state --state.
	CTState *CTStateMatch
	// The other -m conntrack tests: --ctproto, --ctstatus, --ctdir. Like
	// the kernel's, they match only packets of a connection (the states
	// NEW, ESTABLISHED and RELATED), negated or not.
	CTProto  *ProtoMatch
	CTStatus *CTStatusMatch
	CTDir    *CTDir
	// --ctorigsrc, --ctorigdst, --ctreplsrc, --ctrepldst: the
	// connection's addresses (without NAT, the packet's own, by direction).
	CTOrigSrc, CTOrigDst, CTReplSrc, CTReplDst *AddrMatch

	// Fragment: -f matches second and later fragments only (FragmentInvert: ! -f,
	// unfragmented packets and first fragments). nil: not specified.
	Fragment *bool

	// Header matches (header.go): -m iprange, -m length, -m ttl / -m hl,
	// -m dscp, -m tos, -m ecn.
	SrcRange, DstRange *IPRangeMatch
	Length             *LengthMatch
	TTL                *TTLMatch
	DSCP               *DSCPMatch
	TOS                *TOSMatch
	ECN                *ECNMatch
	MSS                *MSSMatch // -m tcpmss
	RT                 *RTMatch  // -m rt (IPv6)

	// L4Header: -m tcp, -m udp, -m sctp or -m udplite without an option of its
	// own (iptables-save writes `-p tcp -m tcp` for --dport 0:65535 or
	// --tcp-flags NONE NONE). The module still reads the L4 header, so, as in
	// the kernel, the rule matches no non-first fragment, where -p tcp alone
	// does. Set only with -p of that protocol and without a port or TCP flag
	// test, which need the header already (Match.NeedsL4).
	L4Header bool
}

// UsesConntrack reports whether m tests a packet's connection (any -m
// conntrack or -m state option): conntrack then runs.
func (m *Match) UsesConntrack() bool {
	return m.CTState != nil || m.CTProto != nil || m.CTStatus != nil || m.CTDir != nil || m.CTAddrs()
}

// CTAddrs reports whether m tests a connection's addresses (--ctorigsrc,
// --ctorigdst, --ctreplsrc, --ctrepldst).
func (m *Match) CTAddrs() bool {
	return m.CTOrigSrc != nil || m.CTOrigDst != nil || m.CTReplSrc != nil || m.CTReplDst != nil
}

// NeedsL4 reports whether m tests the L4 header: a port, TCP flag or ICMP
// type test, -m ecn's TCP bits, -m tcpmss, or a bare -m tcp (L4Header). Such a rule matches only packets
// that have the header, never a non-first fragment (iptables: xt_tcpudp,
// xt_multiport, xt_sctp and the icmp matches return false when fragoff != 0).
func (m *Match) NeedsL4() bool {
	return m.SPort != nil || m.DPort != nil || m.Ports != nil || m.TCPFlags != nil || m.ICMP != nil || m.L4Header ||
		m.ECN != nil && m.ECN.TCPMask != 0 || m.MSS != nil
}

// Target holds the -j target and its options.
type Target struct {
	Verdict Verdict

	// REJECT --reject-with (iptables spelling, e.g. "icmp-port-unreachable",
	// "tcp-reset", "icmp6-adm-prohibited"). Empty: the iptables default for the family.
	RejectWith string

	// Log is --log on ACCEPT, DROP or REJECT: the rule logs the packets it
	// decides, as a LOG rule just before it would (docs/log.md).
	Log bool

	// Options of -j LOG, and of a rule with --log: the prefix of its log
	// lines, the syslog level they are forwarded with, and its rate limit
	// (zero: the firewall's default, `load --log-rate / --log-burst`).
	LogPrefix string
	LogLevel  string
	LogRate   LogRate
	LogBurst  uint32
}

// Logs reports whether the rule emits log events: a LOG rule, or --log.
func (t Target) Logs() bool { return t.Verdict == VerdictLog || t.Log }

// LogRate is a rate of log events: N per Unit (--log-rate N/UNIT). The zero
// value means "the default".
type LogRate struct {
	N    uint32
	Unit RateUnit
}

// RateUnit is the unit of a LogRate.
type RateUnit uint8

// The units of --log-rate, as iptables' -m limit --limit has them.
const (
	PerSecond RateUnit = iota
	PerMinute
	PerHour
	PerDay
)

var rateUnits = [...]struct {
	name    string // canonical, as iptables-save writes --limit
	seconds int64
}{{"sec", 1}, {"min", 60}, {"hour", 3600}, {"day", 86400}}

// IsZero reports whether r is unset.
func (r LogRate) IsZero() bool { return r.N == 0 }

// String returns "N/sec", "N/min", "N/hour" or "N/day".
func (r LogRate) String() string {
	return fmt.Sprintf("%d/%s", r.N, rateUnits[r.Unit%4].name)
}

// IntervalNS is the time between two events at this rate, in nanoseconds.
func (r LogRate) IntervalNS() uint64 {
	if r.N == 0 {
		return 0
	}
	return uint64(rateUnits[r.Unit%4].seconds) * 1e9 / uint64(r.N)
}

// Rule is one `-A CHAIN ... -j TARGET` line.
type Rule struct {
	Chain  Chain
	Match  Match
	Target Target
	// Comments are the texts of the rule's -m comment --comment, in order
	// (iptables keeps each one; empty ones are left out).
	Comments []string
	Pos      Pos    // position of the start of the rule (the -A token)
	Text     string // the rule in canonical form (Rule.Spec), without the leading "-A CHAIN "
}

// Policy is the default verdict of a chain for one family (ACCEPT or DROP).
type Policy struct {
	Chain   Chain
	Family  Family // FamilyAny: both families
	Verdict Verdict
	Pos     Pos
}

// RuleSet is a parsed rule file: rules in file order and the chain policies.
type RuleSet struct {
	Rules    []Rule
	Policies []Policy // in file order; later entries override earlier ones
	// Tables is how many *filter sections (iptables-save) were read.
	Tables int
}

// Empty reports whether rs says nothing at all: no rule, no policy and no
// *filter section, as a file that is empty, blank or only comments (or
// truncated to nothing) reads. Putting such a set in force accepts
// everything, which iptables-restore and nft -f of an empty file never do,
// so load and apply refuse it unless asked (firewall.Options.AllowEmpty).
// A "*filter / COMMIT" file is not empty: it asks for an empty table.
func (rs *RuleSet) Empty() bool {
	return len(rs.Rules) == 0 && len(rs.Policies) == 0 && rs.Tables == 0
}

// PolicyFor returns the effective policy of a chain for a family (ACCEPT unless set).
func (rs *RuleSet) PolicyFor(c Chain, f Family) Verdict {
	v := VerdictAccept
	for _, p := range rs.Policies {
		if p.Chain == c && (p.Family == FamilyAny || p.Family == f) {
			v = p.Verdict
		}
	}
	return v
}
