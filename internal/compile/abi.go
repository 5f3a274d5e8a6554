// Package compile turns a parsed rule set (internal/rules) into the tables the
// data plane classifies with, and holds the reference matcher: a plain
// first-match evaluator of the same AST that the differential tests use as
// the oracle. It is pure Go and needs no kernel.
package compile

// This file mirrors the data-plane ABI in bpf/types.h; keep both in order.

import (
	"fmt"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// Action is enum fw_action.
type Action uint8

const (
	ActAccept Action = 0
	ActDrop   Action = 1
	ActReject Action = 2 // answered in place (TCP RST / ICMP unreachable), or dropped
	ActLog    Action = 3 // a LOG rule's entry: logs, never decides
	// ActNotrack is a raw-table entry (Tables.Raw): the packet is not tracked.
	ActNotrack Action = 4
	// ActPassUnfiltered is not in the enum: the trace hook reports it for
	// non-IP frames, which pass unfiltered (0xff).
	ActPassUnfiltered Action = 0xff
)

func (a Action) String() string {
	switch a {
	case ActAccept:
		return "ACCEPT"
	case ActDrop:
		return "DROP"
	case ActReject:
		return "REJECT"
	case ActLog:
		return "LOG"
	case ActNotrack:
		return "NOTRACK"
	case ActPassUnfiltered:
		return "PASS (not IP, unfiltered)"
	}
	return "action?"
}

// Reason is enum fw_reason: why a packet got its verdict (counter slot).
type Reason uint8

const (
	ReasonRuleAccept Reason = iota
	ReasonRuleDrop
	ReasonRuleReject
	ReasonPolicyAccept
	ReasonPolicyDrop
	ReasonNotIP
	ReasonNoRuleset
	ReasonBadEth
	ReasonBadVLAN
	ReasonVLANDepth
	ReasonBadIPv4
	ReasonBadIPv6
	ReasonBadExtHdr
	ReasonExtHdrDepth
	ReasonBadL4
	ReasonCTFull
	ReasonRejectRate    // REJECT over its source's or the global answer budget: dropped
	ReasonRejectError   // REJECT of an ICMP error (or of a RST, with tcp-reset): dropped
	ReasonRejectFrag    // REJECT of a non-first fragment: dropped
	ReasonRejectBcast   // REJECT of a broadcast/multicast packet or a non-host source: dropped
	ReasonRejectFail    // REJECT answer could not be built: dropped
	ReasonFragUnknown   // a later fragment of a datagram whose first fragment was not seen (or expired): dropped
	ReasonFragOverlap   // a later fragment overlapping its datagram's first fragment (and the rest of it): dropped
	ReasonBadPPPoE      // PPPoE session frame: truncated header, or its length past the frame
	ReasonPPPoESession  // PPPoE session frame carrying IP of a session xdpfw does not know: dropped (docs/pppoe.md)
	ReasonNATFail       // FORWARD-accepted packet xdpfw's NAT cannot translate, dropped (the nat counters say why; docs/nat.md)
	ReasonFwdExpired    // forwarded packet whose TTL / hop limit runs out here: passed to the kernel unjudged, as FORWARD never sees it (docs/forward.md)
	ReasonFwdNotUnicast // routed packet in a broadcast or multicast frame: passed to the kernel unjudged; it drops it before FORWARD (docs/forward.md)
	NumReasons
)

var reasonNames = [NumReasons]string{
	"rule-accept", "rule-drop", "rule-reject", "policy-accept", "policy-drop",
	"not-ip", "no-ruleset", "malformed-eth", "malformed-vlan", "vlan-depth",
	"malformed-ipv4", "malformed-ipv6", "malformed-exthdr", "exthdr-depth", "malformed-l4",
	"conntrack-full",
	"reject-rate-limited", "reject-unanswered-error", "reject-unanswered-fragment",
	"reject-unanswered-broadcast", "reject-failed",
	"fragment-unknown", "fragment-overlap",
	"malformed-pppoe", "pppoe-session-unknown",
	"nat-failed",
	"ttl-expired", "not-unicast",
}

func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "reason?"
}

// Reject is enum fw_reject: what a REJECT answers with (--reject-with).
type Reject uint8

const (
	RejectPortUnreach  Reject = iota // default: ICMP 3/3, ICMPv6 1/4
	RejectTCPReset                   // a TCP RST
	RejectNetUnreach                 // ICMP 3/0
	RejectHostUnreach                // ICMP 3/1
	RejectProtoUnreach               // ICMP 3/2
	RejectNetProhib                  // ICMP 3/9
	RejectHostProhib                 // ICMP 3/10
	RejectAdminProhib                // ICMP 3/13
	Reject6NoRoute                   // ICMPv6 1/0
	Reject6AdmProhib                 // ICMPv6 1/1
	Reject6AddrUnreach               // ICMPv6 1/3
	NumRejects
)

// rejectNames are the --reject-with spellings (canonical) of each kind; the
// default answers port unreachable in the packet's family.
var rejectNames = [NumRejects]string{
	"port-unreachable", "tcp-reset", "icmp-net-unreachable", "icmp-host-unreachable",
	"icmp-proto-unreachable", "icmp-net-prohibited", "icmp-host-prohibited", "icmp-admin-prohibited",
	"icmp6-no-route", "icmp6-adm-prohibited", "icmp6-addr-unreachable",
}

func (r Reject) String() string {
	if r < NumRejects {
		return rejectNames[r]
	}
	return "reject?"
}

// RejectOf is the kind a rule's --reject-with names (canonical spelling,
// as the parser stores it; "" is the default, port unreachable).
func RejectOf(rejectWith string) (Reject, error) {
	switch rejectWith {
	case "", "icmp-port-unreachable", "icmp6-port-unreachable":
		return RejectPortUnreach, nil
	}
	for k, n := range rejectNames {
		if n == rejectWith {
			return Reject(k), nil
		}
	}
	return 0, fmt.Errorf("unknown --reject-with %q", rejectWith)
}

// REJECT's per-source answer budget when the configuration leaves it zero
// (FW_REJECT_RATE_DEFAULT, FW_REJECT_BURST_DEFAULT): answers per second,
// and at once.
const (
	DefaultRejectRate  = 100
	DefaultRejectBurst = 200
	// DefaultRejectGlobalRate is REJECT's global budget, all sources
	// together, when the configuration leaves it zero
	// (FW_REJECT_GLOBAL_RATE_DEFAULT): answers per second, as many at once.
	DefaultRejectGlobalRate = 1000
)

// Logging (docs/log.md; FW_LOG_* in bpf/types.h).
const (
	// MaxLogPerPacket is how many LOG rules log one packet (FW_LOG_MAX):
	// the first in rule order; a packet more of them match is counted.
	MaxLogPerPacket = 4
	// MaxLogRules bounds the logged rules (LOG, or --log) of a rule set
	// (FW_MAX_LOG_RULES).
	MaxLogRules = 4096
	// DefaultLogSnap and MaxLogSnap: bytes of a logged packet an event
	// carries (FW_LOG_SNAP_DEFAULT, FW_LOG_SNAP_MAX).
	DefaultLogSnap = 128
	MaxLogSnap     = 1024
	// DefaultLogBurst events at once, then DefaultLogRate: each logged
	// rule's budget unless it or the load sets another (docs/log.md).
	DefaultLogBurst = 20
)

// DefaultLogRate is a logged rule's default rate: 10 events a second.
var DefaultLogRate = rules.LogRate{N: 10, Unit: rules.PerSecond}

// EntryLog is FW_EF_LOG (fw_entry.flags, fw_root.fast_flags): the rule
// logs the packets it decides.
const EntryLog uint8 = 0x01

// EntryLimit is FW_EF_LIMIT (fw_entry.flags): the rule has -m limit; it
// decides only while its bucket (fw_limits) has a token (docs/limits.md).
const EntryLimit uint8 = 0x04

// MaxLimitRules bounds the -m limit rules (other than LOG rules, whose
// limit is their log budget) of a rule set (FW_MAX_LIMIT_RULES).
const MaxLimitRules = 4096

// -m recent (FW_EF_STATE, FW_STATE_MAX, FW_RECENT_* in bpf/types.h).
const (
	// EntryState is FW_EF_STATE (fw_entry.flags): a -m recent (or
	// -m hashlimit) rule's entry, noted by the walk and settled in rule
	// order after it; EntryHashLimit (FW_EF_HASHLIMIT), with it: the
	// rule's state is a -m hashlimit bucket, not a -m recent list.
	EntryState     uint8 = 0x08
	EntryHashLimit uint8 = 0x40
	// MaxStateNotes is how many -m recent rules one packet may meet
	// (FW_STATE_MAX); the compiler refuses rule sets that could exceed it.
	MaxStateNotes = 8
	// MaxRecentRules bounds the -m recent rules of a rule set
	// (FW_MAX_RECENT_RULES); RecentStamps is FW_RECENT_STAMPS and
	// RecentMax FW_RECENT_MAX (addresses in all lists together).
	MaxRecentRules = 4096
	RecentStamps   = 32
	RecentMax      = 4096
	// MaxHashLimitRules bounds the -m hashlimit rules of a rule set
	// (FW_MAX_HASHLIMIT_RULES), HashLimitMax their buckets in all tables
	// together (FW_HASHLIMIT_MAX); HashLimitFlagAbove is FW_HL_F_ABOVE
	// (the mode's bits below it are rules.HashMode's, FW_HL_F_SRCIP...).
	MaxHashLimitRules         = 4096
	HashLimitMax              = 16384
	HashLimitFlagAbove uint32 = 0x10
	// EntryConnLimit is FW_EF_CONNLIMIT (with EntryState: the rule's
	// state is a -m connlimit count); MaxConnLimitRules bounds the
	// -m connlimit rules of a rule set (FW_MAX_CONNLIMIT_RULES),
	// ConnLimitMax the keys of all of them (FW_CONNLIMIT_MAX),
	// ConnLimitSlots the connections one key counts (FW_CONNLIMIT_SLOTS);
	// ConnLimitFlag* are FW_CL_F_*.
	EntryConnLimit     uint8  = 0x80
	MaxConnLimitRules         = 4096
	ConnLimitMax              = 8192
	ConnLimitSlots            = 16
	ConnLimitFlagAbove uint32 = 0x01
	ConnLimitFlagDaddr uint32 = 0x02
	// RecentFlagDest, RecentFlagInvert and RecentFlagTTL (--rttl) are
	// FW_RECENT_F_*.
	RecentFlagDest   uint8 = 0x01
	RecentFlagInvert uint8 = 0x02
	RecentFlagTTL    uint8 = 0x04
)

// EntryNote is FW_EF_NOTE (fw_entry.flags): a probe or guarded entry
// (Entry.Probe, Entry.GuardMask), noted by the walk and settled in rule
// order after it; MaxProbes is FW_PROBE_MAX, the probe bits of one
// packet (docs/limits.md, "Rate and state tests on rules that decide
// nothing").
const (
	EntryNote uint8 = 0x20
	MaxProbes       = 32
)

// BucketMatch is FW_BUCKET_MATCH (fw_bucket.flags): a LOG rule's budget
// that is its -m limit, so a packet it refuses is no match of the rule.
const BucketMatch uint32 = 0x01

// EntryCount is FW_EF_COUNT (fw_entry.flags): with ActLog, the entry
// counts the packets it matches for its rule (a jump, goto, RETURN or rule
// without -j) and logs nothing; MaxCountPerPacket is FW_COUNT_MAX, how
// many such rules count one packet.
const (
	EntryCount        uint8 = 0x10
	MaxCountPerPacket       = 16
)

// EntryHasRanges is FW_EF_RANGES (fw_cand.flags): the entry's Ranges hold
// its whole match; RangesMax is FW_RANGES_MAX.
const (
	EntryHasRanges uint8 = 0x02
	RangesMax            = 6
)

// Match bits (FW_M_* in bpf/types.h).
const (
	MFamily   uint64 = 1 << 0
	MProto    uint64 = 1 << 1
	MSrc      uint64 = 1 << 2
	MDst      uint64 = 1 << 3
	MSPort    uint64 = 1 << 4
	MDPort    uint64 = 1 << 5
	MIfindex  uint64 = 1 << 6
	MMACSrc   uint64 = 1 << 7
	MMACDst   uint64 = 1 << 8
	MTCPFlags uint64 = 1 << 9
	MICMPType uint64 = 1 << 10
	MICMPCode uint64 = 1 << 11
	MVLAN     uint64 = 1 << 12
	MFrag     uint64 = 1 << 13
	ML4Hdr    uint64 = 1 << 14
	MSrcSet   uint64 = 1 << 15
	MDstSet   uint64 = 1 << 16
	MCTState  uint64 = 1 << 17
	MMark     uint64 = 1 << 18 // -m mark: OUTPUT only
	MOif      uint64 = 1 << 19 // output device in [OIfLo, OIfHi]; never inverted
	MPktType  uint64 = 1 << 20 // PktTypeOf in PktTypes; never inverted
	MSrcType  uint64 = 1 << 21 // -m addrtype --src-type: SrcTypes, TypeDev
	MDstType  uint64 = 1 << 22 // -m addrtype --dst-type: DstTypes, TypeDev
	MLen      uint64 = 1 << 23
	MTTL      uint64 = 1 << 24
	MTOS      uint64 = 1 << 25
	MECNIP    uint64 = 1 << 26
	MECNTCP   uint64 = 1 << 27
	MSrcRange uint64 = 1 << 28
	MDstRange uint64 = 1 << 29
	MCTDir    uint64 = 1 << 30
	MCTStatus uint64 = 1 << 31
	MCTProto  uint64 = 1 << 32
	MMSS      uint64 = 1 << 33
	MRTType   uint64 = 1 << 34
	MRTSegs   uint64 = 1 << 35
	MRTLen    uint64 = 1 << 36
	MVLANPrio uint64 = 1 << 37 // the outer tag's PCP (--vlan-prio); no key dimension
	MCTNat    uint64 = 1 << 38 // CTInfo & CTNat (--ctstate SNAT, DNAT: any of them); no key dimension
	// MRTHdr is FW_M_RTHDR: the tests of the IPv6 routing header, which
	// never match a packet without one.
	MRTHdr = MRTType | MRTSegs | MRTLen
)

// NoMSS is RefPacket.MSS of a TCP header without an MSS option (above
// every MSS).
const NoMSS = 0x10000

// Connection info bits (FW_CTI_*, fw_pkt.ctinfo): the status bits are
// the kernel's IPS_* (-m conntrack --ctstatus), CTIReply the direction.
const (
	CTIExpected  uint8 = 0x01
	CTISeenReply uint8 = 0x02
	CTIAssured   uint8 = 0x04
	CTIConfirmed uint8 = 0x08
	CTISrcNAT    uint8 = 0x10 // NAT changed the connection's source (IPS_SRC_NAT: --ctstate SNAT)
	CTIDstNAT    uint8 = 0x20 // ... its destination (IPS_DST_NAT: --ctstate DNAT)
	CTIReply     uint8 = 0x80
)

// Root flags (FW_ROOT_*).
const (
	RootCT  uint8 = 0x01 // the generation uses connection tracking
	RootRaw uint8 = 0x02 // Tables.Raw has entries of this root's chain and family
	RootMSS uint8 = 0x04 // an entry tests TCP's MSS option (the classifier reads it)
	RootRT  uint8 = 0x08 // an entry tests the IPv6 routing header (the classifier reads it)
	// RootPrio marks a root of Tables.PrioRoots: the generation has a
	// priority table, and packets arriving are sorted into classes.
	RootPrio uint8 = 0x40
)

// MaxRaw is how many entries the raw table holds (FW_MAX_RAW): the NOTRACK
// rules, a PREROUTING rule taking two (INPUT and FORWARD).
const MaxRaw = 32

// Connection states (enum fw_ct_state); bit i of a state mask is state i,
// as in rules.CTNew...
const (
	CTNew uint8 = iota
	CTEstablished
	CTRelated
	CTInvalid
	CTUntracked
	NumCTStates
)

// NumPktTypes is FW_NUM_PKTTYPES: the packet types a packet can have here
// (rules.PktHost, rules.PktBroadcast, rules.PktMulticast).
const NumPktTypes = 3

var ctStateNames = [NumCTStates]string{"NEW", "ESTABLISHED", "RELATED", "INVALID", "UNTRACKED"}

// CTStateName names a connection state.
func CTStateName(s uint8) string {
	if s < NumCTStates {
		return ctStateNames[s]
	}
	return "state?"
}

// Reserved rule ids (FW_POLICY_ID, FW_FIRST_RULE_ID).
const (
	FirstRuleID = 16
)

// PolicyID is the counter slot of a chain's policy for one family.
func PolicyID(chain uint8, v6 bool) uint32 {
	id := 1 + uint32(chain)*2
	if v6 {
		id++
	}
	return id
}

// Default table sizes of one generation (the data plane holds two: the
// active one and the one being written). `load --max-rules` scales them.
const (
	DefaultMaxEntries   = 16384
	DefaultMaxNodes     = DefaultMaxEntries // fat nodes (64 B); a node holds up to 7 splits
	DefaultMaxLeafSlots = 16 * DefaultMaxEntries
)
