package compile

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// Entry is one classifier entry (struct fw_entry): a conjunction of field
// tests. Addresses are in network byte order, IPv4 in the first 4 bytes.
type Entry struct {
	Chain          rules.Chain
	Family         rules.Family
	Match, Invert  uint64
	Src, SrcMask   [16]byte
	Dst, DstMask   [16]byte
	SPortLo        uint16
	SPortHi        uint16
	DPortLo        uint16
	DPortHi        uint16
	Ifindex        uint32
	OIfLo, OIfHi   uint32 // output ifindex range, with MOif
	SrcMAC, DstMAC [6]byte
	VLAN           uint16
	VLANPrio       uint8 // with MVLANPrio: the outer tag's PCP
	Proto          uint8
	TCPMask        uint8
	TCPCmp         uint8
	ICMPType       uint8
	ICMPCode       uint8
	Action         Action
	Reason         Reason
	Reject         Reject // with ActReject: what answers
	RuleID         uint32
	SrcSet, DstSet uint32 // set ids, with MSrcSet / MDstSet
	CTState        uint8  // bit mask of connection states, with MCTState
	Mark, MarkMask uint32 // with MMark: (mark & MarkMask) == Mark
	PktTypes       uint8  // bit mask of packet types (PktTypeOf), with MPktType
	// SrcTypes, DstTypes: -m addrtype's masks (rules.Addr*), with MSrcType,
	// MDstType; TypeDev: the device they are limited to (rules.LimitIn...).
	SrcTypes, DstTypes uint16
	TypeDev            uint8
	// SrcRange, DstRange: -m iprange, with MSrcRange / MDstRange.
	SrcRange, DstRange AddrRange
	LenLo, LenHi       uint16 // with MLen
	TTLLo, TTLHi       uint8  // with MTTL
	TOSMask, TOSCmp    uint8  // with MTOS
	ECNIP              uint8  // with MECNIP: the ECN codepoint
	ECNMask, ECNCmp    uint8  // with MECNTCP: TCP's ECE and CWR bits
	CTStatus           uint8  // with MCTStatus: CTI* status bits, any of them
	CTNat              uint8  // with MCTNat: CTISrcNAT, CTIDstNAT, any of them
	CTProto            uint8  // with MCTProto
	MSSLo, MSSHi       uint16 // with MMSS
	RTType             uint8  // with MRTType
	RTSegsLo, RTSegsHi uint8  // with MRTSegs
	RTLen              uint16 // with MRTLen: the routing header's length in bytes
	// Log: the rule logs the packets this entry decides (--log). LOG
	// rules' entries (ActLog) log whatever they match and decide nothing.
	Log bool
	// Limit: the rule has -m limit. A deciding entry then decides only
	// while the rule's bucket (Tables.Limits) has a token, and never ends
	// a leaf; a LOG entry's limit is its log budget (Tables.Logs).
	Limit bool
	// State: the rule has -m recent, or with HashLimit -m hashlimit.
	// The entry decides nothing in the walk; the data plane settles it
	// after the walk, in rule order (Tables.Recent, Tables.HashLimits).
	State, HashLimit bool
	// ConnLimit: with State, the rule has -m connlimit (Tables.ConnLimits).
	ConnLimit bool
	// Count: with ActLog, the entry only counts the packets it matches
	// for its rule (a jump, goto, RETURN or rule without -j: flatten.go).
	Count bool
	// Probe (1..MaxProbes; 0: none): the entry is the stateful test of a
	// rule that decides nothing itself (-m limit or -m recent on a jump,
	// goto, RETURN or rule without -j): settled after the walk in rule
	// order, it takes the token or does the -m recent operation, and
	// when that matches sets the packet's probe bit Probe-1 and counts
	// the packet for its rule; it decides nothing. GuardMask/GuardVal: the entry applies only to packets whose
	// probe bits b have b&GuardMask == GuardVal (the entries behind such a
	// rule: flatten.go). A probe or guarded entry is noted by the walk and
	// settled after it (Noted), as -m recent entries.
	Probe               uint8
	GuardMask, GuardVal uint32
	// Note identifies the entries that are one rule at one place of the
	// flattened chains (a noted entry: Noted): the data plane settles
	// each once per packet, at its lowest matching index.
	Note uint32
}

// Noted reports whether the walk notes the entry and settles it after the
// walk in rule order (fw_state_settle): -m recent, probes, guarded entries.
func (e *Entry) Noted() bool { return e.State || e.Probe != 0 || e.GuardMask != 0 }

// Guarded reports whether probe bits b let the entry apply.
func (e *Entry) Guarded(b uint32) bool { return b&e.GuardMask == e.GuardVal }

// Flags is fw_entry.flags.
func (e *Entry) Flags() uint8 {
	var f uint8
	if e.Log {
		f |= EntryLog
	}
	if e.Count {
		f |= EntryCount
	}
	if e.Limit {
		f |= EntryLimit
	}
	if e.State {
		f |= EntryState
		if e.HashLimit {
			f |= EntryHashLimit
		}
		if e.ConnLimit {
			f |= EntryConnLimit
		}
	}
	if e.Probe != 0 || e.GuardMask != 0 {
		f |= EntryNote
	}
	return f
}

// Decides reports whether a packet the entry matches goes no further: not
// a LOG entry, nor one whose -m limit may refuse it.
func (e *Entry) Decides() bool { return e.Action != ActLog && !e.Limit && !e.Noted() }

// LogLimit is a token bucket's settings (struct fw_bucket): the log
// budget of a logged rule (Tables.Logs) or the -m limit of a rule
// (Tables.Limits). Burst tokens at once, then one every IntervalNS.
// Match (with a log budget): it is the LOG rule's -m limit, so a packet
// it refuses is no match of the rule (not counted).
type LogLimit struct {
	RuleID     uint32
	IntervalNS uint64
	Burst      uint32
	Match      bool
}

// Tables is what one generation installs in the data plane.
type Tables struct {
	Entries []Entry
	Nodes   []Node
	Leaves  []uint32 // entry indices, leaf by leaf
	Roots   [NumRoots]Root
	Stats   TreeStats
	// Spans[i] is where rule i of the compiled rule set sits in Entries.
	Spans []Span
	// ChainEnd[c] is one past the last entry of chain c: chain c's
	// entries are [ChainEnd[c-1], ChainEnd[c]) (from 0 for the first).
	ChainEnd [rules.NumChains]uint32
	// Raw are the entries of the raw table's NOTRACK rules, in rule order
	// (at most MaxRaw): the data plane tests them before conntrack, in
	// every root flagged RootRaw (rawEntries).
	Raw []Entry
	// Prio are the entries of the xdpfw-priority table's rules, in rule
	// order (ActAccept: HIGH, ActDrop: BULK). Their indices follow the
	// rules': entry i of the generation is Entries[i], or Prio[i -
	// len(Entries)]; the data plane holds them so in fw_entries.
	// PrioRoots are the table's roots by family (RootPrio set; zero
	// without a priority table).
	Prio      []Entry
	PrioRoots [2]Root
	// SetNames maps the set ids entries use to set names (for the Go twin).
	SetNames map[uint32]string
	// Logs are the rate limits of the logged rules (LOG rules and rules
	// with --log), in rule order.
	Logs []LogLimit
	// Limits are the -m limit buckets of the deciding rules, in rule order.
	Limits []LogLimit
	// Recent are the settings of the -m recent rules, in rule order.
	Recent []RecentRule
	// HashLimits are the settings of the -m hashlimit rules, in rule order.
	HashLimits []HashLimitRule
	// ConnLimits are the settings of the -m connlimit rules, in rule order.
	ConnLimits []ConnLimitRule
	// Ranges[i] is Entries[i] as ranges of the key, where it can be
	// (see Ranges); the trees' leaves test those.
	Ranges []Ranges
}

// Ranges is an entry's match as at most RangesMax ranges of the
// classification key (fw_entry's nranges, rdim, rlo, rhi): key[Dim[i]] in
// [Lo[i], Hi[i]] for every i < N. Only where Exact: its one box holds
// exactly the packets it matches, and no more than RangesMax dimensions
// are narrowed. The chain and family are the tree's, so none is tested:
// the delta stage, which mixes chains, never uses them.
type Ranges struct {
	Exact bool
	N     uint8
	Dim   [RangesMax]uint8
	Lo    [RangesMax]uint32
	Hi    [RangesMax]uint32
}

// Match tests key k as the data plane's fw_ranges_match does.
func (r *Ranges) Match(k *Key) bool {
	for i := range int(r.N) {
		if v := k[r.Dim[i]]; v < r.Lo[i] || v > r.Hi[i] {
			return false
		}
	}
	return true
}

// AddrRange is an inclusive range of addresses as 128-bit numbers, most
// significant half first (fw_entry's srange_lo/hi): an IPv4 address a is
// a << 32 in the first half.
type AddrRange struct {
	Lo, Hi [2]uint64
}

// NewAddrRange is the range [lo, hi] (both of one family).
func NewAddrRange(lo, hi netip.Addr) AddrRange {
	return AddrRange{Lo: addrNum(lo), Hi: addrNum(hi)}
}

func addrNum(a netip.Addr) [2]uint64 {
	if a.Is4() {
		b := a.As4()
		return [2]uint64{uint64(binary.BigEndian.Uint32(b[:])) << 32, 0}
	}
	b := a.As16()
	return [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// Contains reports whether a is in r, as fw_in_range does.
func (r AddrRange) Contains(a netip.Addr) bool {
	v := addrNum(a)
	return cmp128(v, r.Lo) >= 0 && cmp128(v, r.Hi) <= 0
}

func cmp128(a, b [2]uint64) int {
	if c := cmp.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return cmp.Compare(a[1], b[1])
}

// Words is r's bounds as n key words (the address dimensions): 1 for IPv4,
// 4 for IPv6.
func (r AddrRange) Words(n int) (lo, hi []uint32) {
	w := func(v [2]uint64) []uint32 {
		return []uint32{uint32(v[0] >> 32), uint32(v[0]), uint32(v[1] >> 32), uint32(v[1])}[:n]
	}
	return w(r.Lo), w(r.Hi)
}

func prefixBytes(p netip.Prefix) (addr, mask [16]byte) {
	a := p.Addr()
	if a.Is4() {
		b := a.As4()
		copy(addr[:], b[:])
	} else {
		addr = a.As16()
	}
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return addr, mask
}

func (e Entry) String() string {
	s := fmt.Sprintf("%s rule=%d match=%#x invert=%#x action=%s", e.Chain, e.RuleID, e.Match, e.Invert, e.Action)
	if e.Action == ActReject {
		s += " with=" + e.Reject.String()
	}
	if e.Log {
		s += " log"
	}
	if e.Limit {
		s += " limit"
	}
	if e.State && e.HashLimit {
		s += " hashlimit"
	} else if e.State && e.ConnLimit {
		s += " connlimit"
	} else if e.State {
		s += " recent"
	}
	if e.Count {
		s += " count"
	}
	if e.Probe != 0 {
		s += fmt.Sprintf(" probe=%d", e.Probe)
	}
	if e.GuardMask != 0 {
		s += fmt.Sprintf(" guard=%#x/%#x", e.GuardVal, e.GuardMask)
	}
	return s
}
