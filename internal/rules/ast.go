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
	"regexp"
	"strings"
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
	// ChainPrerouting is the raw table's PREROUTING chain (RuleSet.Raw),
	// which every packet arriving meets before conntrack; the raw table's
	// OUTPUT is ChainOutput. It is no filter chain: NumChains leaves it out.
	ChainPrerouting Chain = 3
	// ChainPriority is the PRIORITY chain of xdpfw's own xdpfw-priority
	// table (RuleSet.Priority, priority.go): it sorts arriving packets
	// into the high-priority and the bulk class before anything else. It
	// is no filter chain: NumChains leaves it out.
	ChainPriority Chain = 4
	// ChainUser marks a rule of a user-defined chain (Rule.UserChain names
	// it). It is never a data-plane chain: compile flattens user chains
	// into the built-in chains that jump to them (docs/compat.md, Chains).
	ChainUser Chain = 255
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
	case ChainPrerouting:
		return "PREROUTING"
	case ChainPriority:
		return "PRIORITY"
	case ChainPostrouting:
		return "POSTROUTING"
	case ChainUser:
		return "user chain"
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
	// VerdictNotrack is -j NOTRACK (or -j CT --notrack) in the raw table
	// (RuleSet.Raw): the packet is not tracked, its state is UNTRACKED.
	VerdictNotrack
	// The verdicts of chains (README, "User-defined chains"): they decide
	// nothing themselves.
	VerdictJump   // -j CHAIN: the packet goes through the user chain Target.Chain, then on
	VerdictGoto   // -g CHAIN: the packet goes through Target.Chain and does not come back
	VerdictReturn // -j RETURN: back to the calling chain (in a built-in chain: its policy)
	VerdictNone   // no -j: the rule counts the packets it matches and goes on
	// The verdicts of the xdpfw-priority table (RuleSet.Priority): the
	// packet's class. Neither decides what the firewall does with it.
	VerdictHigh // -j HIGH: handled at once, on the CPU that received it
	VerdictBulk // -j BULK: handed to the bulk CPUs (docs/realtime.md, Priority)
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
	case VerdictNotrack:
		return "NOTRACK"
	case VerdictJump:
		return "jump"
	case VerdictGoto:
		return "goto"
	case VerdictReturn:
		return "RETURN"
	case VerdictNone:
		return "none"
	case VerdictHigh:
		return "HIGH"
	case VerdictBulk:
		return "BULK"
	case VerdictNAT:
		return "NAT"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Terminal reports whether the verdict decides the packet's fate (ACCEPT,
// DROP, REJECT): the first such matching rule wins.
func (v Verdict) Terminal() bool { return v <= VerdictReject }

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

// IfaceMatch is -i NAME or -o NAME; a trailing '+' in iptables means prefix match.
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

// VLANPrioMatch is -m vlan --vlan-prio N (extension, ebtables' name): the
// outermost tag's priority code point (802.1p PCP, the TCI's top 3 bits).
// Like --vlan-id it needs a tag: negated, it matches untagged packets too.
type VLANPrioMatch struct {
	Prio   uint8 // 0-7
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
	// CTSNAT and CTDNAT are --ctstate SNAT and DNAT: a packet of a
	// connection whose source (destination) NAT changed, whatever its
	// state above (the kernel's IPS_SRC_NAT, IPS_DST_NAT; docs/nat.md);
	// they are not in CTAll.
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

// MarkMatch is -m mark --mark VALUE[/MASK]: (the packet's mark & Mask) ==
// Value. Only in OUTPUT, whose tc program sees the kernel's packet (skb)
// and its mark. A Value with bits outside Mask never matches (iptables
// takes it; the compiler warns).
type MarkMatch struct {
	Value, Mask uint32
	Invert      bool
}

// Packet types (-m pkttype --pkt-type), Linux's skb->pkt_type values
// (PACKET_HOST, ...). PktHost, PktBroadcast and PktMulticast are enum
// fw_pkttype in bpf/types.h.
const (
	PktHost      uint8 = 0 // "unicast": to this host
	PktBroadcast uint8 = 1
	PktMulticast uint8 = 2
	PktOtherHost uint8 = 3 // to another host's MAC: the kernel drops such frames before iptables
)

// PktTypeMatch is -m pkttype --pkt-type TYPE.
type PktTypeMatch struct {
	Type   uint8 // PktHost, ...
	Invert bool
}

// Address types of -m addrtype, as bits of AddrTypeMatch.Src/Dst: bit t is
// Linux's route type t (RTN_UNSPEC = 0 ... RTN_XRESOLVE = 11), as in
// xt_addrtype and enum fw_rtn in bpf/types.h.
const (
	AddrUnspec uint16 = 1 << iota
	AddrUnicast
	AddrLocal
	AddrBroadcast
	AddrAnycast
	AddrMulticast
	AddrBlackhole
	AddrUnreachable
	AddrProhibit
	AddrThrow
	AddrNAT
	AddrXResolve
	NumAddrTypes = iota
)

// AddrIPv4Only are the types ip6tables refuses (the kernel has no IPv6
// broadcast, blackhole or prohibit, throw, nat, xresolve routes to tell).
const AddrIPv4Only = AddrBroadcast | AddrBlackhole | AddrProhibit | AddrThrow | AddrNAT | AddrXResolve

// The device --limit-iface-in / --limit-iface-out limit the types to.
const (
	LimitNone uint8 = iota
	LimitIn         // the input device
	LimitOut        // the output device
)

// AddrTypeMatch is -m addrtype: the source's and the destination's types
// (0: not tested), each negatable, limited to a device or not.
type AddrTypeMatch struct {
	Src, Dst             uint16
	SrcInvert, DstInvert bool
	Limit                uint8 // LimitNone, LimitIn, LimitOut
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
	// OutIface is -o: FORWARD's egress device (the one the kernel FIB
	// names), OUTPUT's device (the one tc egress runs on). Not in INPUT.
	OutIface *IfaceMatch

	MACSrc *MACMatch
	MACDst *MACMatch

	TCPFlags *TCPFlagsMatch
	ICMP     *ICMPMatch
	VLAN     *VLANMatch
	VLANPrio *VLANPrioMatch

	// SrcSet / DstSet: -m set --match-set NAME src / dst.
	SrcSet *SetMatch
	DstSet *SetMatch

	// CTState: -m conntrack --ctstate / -m state --state. A rule's several
	// -m conntrack and -m state matches are kept as their intersection, in
	// these fields (the parser's newCTMatch): the canonical text has one
	// -m conntrack.
	CTState *CTStateMatch
	// The other -m conntrack tests: --ctproto, --ctstatus, --ctdir. They
	// read a packet's connection; as in the kernel's xt_conntrack, a packet
	// without one (INVALID, UNTRACKED) is judged by CTState alone: it
	// matches when CTState is given and passes it, whatever these tests
	// (negated or not), and never matches without CTState. (The parser
	// keeps that meaning when it intersects several matches: ctConnless.)
	CTProto  *ProtoMatch
	CTStatus *CTStatusMatch
	CTDir    *CTDir
	// --ctorigsrc, --ctorigdst, --ctreplsrc, --ctrepldst: the
	// connection's addresses (without NAT, the packet's own, by direction).
	CTOrigSrc, CTOrigDst, CTReplSrc, CTReplDst *AddrMatch

	// Mark: -m mark --mark (OUTPUT only).
	Mark *MarkMatch
	// PktType: -m pkttype --pkt-type.
	PktType *PktTypeMatch

	// AddrType: -m addrtype.
	AddrType *AddrTypeMatch

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

	// Limit: -m limit, a token bucket of the rule's own, tested after
	// every other match (the parser refuses matches written after it).
	Limit *LimitMatch
	// Recent: -m recent, a named list of addresses shared by the rules
	// that name it; tested after every other match, as Limit.
	Recent *RecentMatch
	// HashLimit: -m hashlimit, token buckets by a key of the packet in a
	// named table shared by the rules that name it; tested after every
	// other match, as Limit.
	HashLimit *HashLimitMatch
	// ConnLimit: -m connlimit, a count per rule of the connections of the
	// packet's (masked) address; tested after every other match, as Limit.
	ConnLimit *ConnLimitMatch
}

// UsesConntrack reports whether m tests a packet's connection (any -m
// conntrack or -m state option): conntrack then runs.
func (m *Match) UsesConntrack() bool {
	return m.CTState != nil || m.CTProto != nil || m.CTStatus != nil || m.CTDir != nil || m.CTAddrs()
}

// NeedsConntrack reports whether m needs the data plane to track
// connections: it tests them (UsesConntrack), or counts them
// (-m connlimit).
func (m *Match) NeedsConntrack() bool { return m.UsesConntrack() || m.ConnLimit != nil }

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

	// Chain is the user chain of -j CHAIN (VerdictJump) and -g CHAIN
	// (VerdictGoto).
	Chain string

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
	// LogFlags are -j LOG's --log-tcp-sequence, --log-tcp-options,
	// --log-ip-options, --log-uid and --log-macdecode (LogTCPSeq...):
	// what the rule's log lines add, as the kernel's nf_log prints it
	// (docs/log.md).
	LogFlags LogFlags
	LogRate  LogRate
	LogBurst uint32

	// NAT is the translation of a nat rule (VerdictNAT): -j DNAT, SNAT,
	// MASQUERADE or REDIRECT with their options (docs/nat.md).
	NAT *NATTarget

	// CT: a NOTRACK rule written -j CT --notrack (the same meaning as
	// -j NOTRACK; the text keeps the spelling, as iptables-save does).
	CT bool

	// Group is set by -j NFLOG and -j ULOG: a LOG rule (Verdict is
	// VerdictLog) whose events name the netlink group iptables would send
	// them to, and whose prefix (LogPrefix) is --nflog-prefix or
	// --ulog-prefix. The events go to xdpfw's ring buffer as every LOG
	// rule's do (docs/log.md).
	Group *LogGroup
}

// LogFlags are the LOG target's flags (xt_LOG's XT_LOG_*, the same bits).
type LogFlags uint8

// The LOG flags, in the order iptables-save prints them.
const (
	LogTCPSeq    LogFlags = 0x01 // --log-tcp-sequence: SEQ= ACK=
	LogTCPOpt    LogFlags = 0x02 // --log-tcp-options: the TCP options, OPT (hex)
	LogIPOpt     LogFlags = 0x04 // --log-ip-options: the IPv4 options, OPT (hex)
	LogUID       LogFlags = 0x08 // --log-uid: the owner of a local socket (never printed: docs/log.md)
	LogMACDecode LogFlags = 0x20 // --log-macdecode: MACSRC= MACDST= MACPROTO= instead of MAC=
)

// logFlagNames are the LOG flags' options, in iptables-save's order.
var logFlagNames = []struct {
	flag LogFlags
	opt  string
}{{LogTCPSeq, "--log-tcp-sequence"}, {LogTCPOpt, "--log-tcp-options"}, {LogIPOpt, "--log-ip-options"},
	{LogUID, "--log-uid"}, {LogMACDecode, "--log-macdecode"}}

// LogGroup holds the options of -j NFLOG and -j ULOG.
type LogGroup struct {
	ULOG  bool   // -j ULOG (else -j NFLOG)
	Group uint16 // --nflog-group (0-65535, default 0), --ulog-nlgroup (1-32, default 1)
	// Size is --nflog-size or --ulog-cprange: how many bytes of the packet
	// an event keeps, when Cut (else all the snap length holds); xdpfw log
	// cuts the captured bytes to it. Cut: --nflog-size was given, 0 too (the
	// kernel's XT_NFLOG_F_COPY_LEN: 0 keeps no byte), or --ulog-cprange
	// other than 0 (ULOG's 0 is the whole packet).
	Size uint32
	Cut  bool
	// Range (--nflog-range) never worked in the kernel (iptables warns and
	// nft ignores it); Threshold (--nflog-threshold, --ulog-qthreshold)
	// batches netlink messages, which a ring buffer does not need. Both are
	// kept for the rule's text only.
	Range     uint32
	Threshold uint32
}

// Name is the target's name: "NFLOG" or "ULOG".
func (g *LogGroup) Name() string {
	if g.ULOG {
		return "ULOG"
	}
	return "NFLOG"
}

// Number is the group the events name (ULOG's default is 1).
func (g *LogGroup) Number() uint16 {
	if g.ULOG && g.Group == 0 {
		return 1
	}
	return g.Group
}

// Logs reports whether the rule emits log events: a LOG rule, or --log.
func (t Target) Logs() bool { return t.Verdict == VerdictLog || t.Log }

// Budgeted reports whether the rule has state in the data plane: a log
// budget (Target.Logs), a -m limit bucket, a -m recent list or -m
// hashlimit buckets. They come
// with full installs of a rule set, so edits of such rule sets are
// compiled in full.
func (r *Rule) Budgeted() bool {
	return r.Target.Logs() || r.Match.Limit != nil || r.Match.Recent != nil || r.Match.HashLimit != nil ||
		r.Match.ConnLimit != nil
}

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
	Chain Chain
	// UserChain names the user-defined chain of the rule when Chain is
	// ChainUser.
	UserChain string
	Match     Match
	Target    Target
	// Comments are the texts of the rule's -m comment --comment, in order
	// (iptables keeps each one; empty ones are left out).
	Comments []string
	// NAT: the rule is of the nat table (RuleSet.NAT; ParseOptions.NAT).
	NAT  bool
	Pos  Pos    // position of the start of the rule (the -A token)
	Text string // the rule in canonical form (Rule.Spec), without the leading "-A CHAIN "
}

// ChainName is the name of the rule's chain: "INPUT", or a user chain's.
func (r *Rule) ChainName() string {
	if r.Chain == ChainUser {
		return r.UserChain
	}
	return r.Chain.String()
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
	// Chains are the user-defined chains (-N, or :NAME - [0:0]), empty
	// ones included, in the order they were declared.
	Chains []ChainDecl
	// Tables is how many *filter sections (iptables-save) were read.
	Tables int
	// Raw are the rules of the raw table: -j NOTRACK (-j CT --notrack) in
	// PREROUTING (ChainPrerouting: packets arriving, INPUT and FORWARD)
	// and OUTPUT, in order. A packet one of them matches is not tracked:
	// its connection state is UNTRACKED, and conntrack records nothing.
	Raw []Rule
	// Priority are the rules of xdpfw's xdpfw-priority table, in order
	// (chain PRIORITY, -j HIGH or -j BULK; priority.go); PriorityPolicy is
	// its policy, VerdictHigh or VerdictBulk (zero: not set, BULK). The
	// first rule that matches an arriving packet gives its class.
	Priority       []Rule
	PriorityPolicy Verdict
	// Skipped are the lines xdpfw cannot run that ParseOptions.SkipUnsupported
	// left out, in file order. Every command that puts the rules in force
	// prints them: nothing is skipped silently.
	Skipped []Skipped
	// NAT is the nat table (ParseOptions.NAT; docs/nat.md): its rules
	// (Rule.NAT) and user chains, which are the nat table's own. nil when
	// no nat rule or chain was read. Its Policies are empty: the nat
	// table's are ACCEPT.
	NAT *RuleSet
}

// Skipped is one line of a rule file left out (ParseOptions.SkipUnsupported).
type Skipped struct {
	Pos   Pos    // the line (column 1), or the token that cannot be run
	Line  string // the line as written, white space trimmed (at most 64 bytes: Clip)
	Why   string // what cannot be run and why
	Table string // the line's table (iptables-save sections); "" in a native file
}

// KernelNATNote is what a user must know when skipped holds lines of the
// nat table that translate addresses: kept in the kernel, they act after
// xdpfw's verdict on a connection's first packet (DNAT, REDIRECT), and on
// packets xdpfw's own conntrack never sees translated (SNAT, MASQUERADE);
// xdpfw asks the kernel's conntrack about the packets that follow (TCP and
// UDP, load --ct-kernel-nat on: docs/conntrack.md "Kernel NAT"). "" when
// there are none.
func KernelNATNote(skipped []Skipped) string {
	var dst, src int
	for _, s := range skipped {
		if s.Table != "nat" {
			continue
		}
		switch m := natTarget.FindStringSubmatch(s.Line); {
		case m == nil:
		case m[3] == "DNAT" || m[3] == "REDIRECT":
			dst++
		default:
			src++
		}
	}
	var notes []string
	if dst > 0 {
		notes = append(notes, fmt.Sprintf("note: %d skipped nat rule(s) translate destinations (DNAT, REDIRECT). Where the "+
			"kernel runs them, it translates a connection's first packet after xdpfw's verdict: xdpfw judges that packet "+
			"as it arrives, in INPUT with the address and port it was sent to, so accept it there (e.g. by its original "+
			"port); FORWARD rules written for the translated traffic (published container ports, Docker's DOCKER-USER) "+
			"apply to the connection's later TCP and UDP packets, judged with the kernel's conntrack as iptables judges "+
			"them while 'xdpfw status' says kernel NAT is on (docs/conntrack.md, Kernel NAT)", dst))
	}
	if src > 0 {
		notes = append(notes, fmt.Sprintf("note: %d skipped nat rule(s) translate sources (SNAT, MASQUERADE). Where the "+
			"kernel runs them, answers to the translated connections arrive addressed to this host; while 'xdpfw status' "+
			"says kernel NAT is on, xdpfw judges TCP and UDP answers with the kernel's conntrack as iptables does "+
			"(in FORWARD, ESTABLISHED, addressed to the original source; ICMP errors about them RELATED), but ping answers "+
			"still as they arrive: in INPUT, INVALID to xdpfw's conntrack, which never saw the ping translated; "+
			"accept them in INPUT if they must pass (e.g. -p icmp --icmp-type echo-reply) (docs/conntrack.md, Kernel NAT)", src))
	}
	return strings.Join(notes, "\n")
}

// natTarget finds an address-translating target in a nat rule's text.
var natTarget = regexp.MustCompile(`(^|\s)(-j|--jump)\s+(DNAT|REDIRECT|SNAT|MASQUERADE)(\s|$)`)

// String returns "file:line: why: line".
func (s Skipped) String() string {
	pos := s.Pos
	pos.Col = 0
	return fmt.Sprintf("%s:%d: skipped: %s: %s", pos.File, pos.Line, s.Why, s.Line)
}

// Empty reports whether rs says nothing at all: no rule, no policy and no
// *filter section, as a file that is empty, blank or only comments (or
// truncated to nothing) reads. Putting such a set in force accepts
// everything, which iptables-restore and nft -f of an empty file never do,
// so load and apply refuse it unless asked (firewall.Options.AllowEmpty).
// A "*filter / COMMIT" file is not empty: it asks for an empty table.
func (rs *RuleSet) Empty() bool {
	return len(rs.Rules) == 0 && len(rs.Policies) == 0 && len(rs.Chains) == 0 && len(rs.Raw) == 0 && rs.Tables == 0 &&
		!rs.PriorityOn() && (rs.NAT == nil || rs.NAT.Empty())
}

// ChainDecl is a user-defined chain.
type ChainDecl struct {
	Name string
	Pos  Pos // of its declaration
}

// HasChain reports whether rs declares the user chain name.
func (rs *RuleSet) HasChain(name string) bool {
	for _, c := range rs.Chains {
		if c.Name == name {
			return true
		}
	}
	return false
}

// MaxChainName is the longest name of a user chain, as iptables allows
// (XT_EXTENSION_MAXNAMELEN less its terminating zero).
const MaxChainName = 28

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
