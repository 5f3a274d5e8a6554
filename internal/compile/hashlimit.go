package compile

import (
	"fmt"
	"net/netip"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// HashLimitRule is one -m hashlimit rule's settings (struct
// fw_hashlimit_rule): the fields of its key (Flags: HashLimitFlag*, the
// mode's bits as rules.HashMode has them), the masks of its addresses (on
// the address as the data plane holds it: IPv4 in the first 4 bytes), its
// bucket (one token every IntervalNS, Burst at once) and how long an idle
// bucket is kept (ExpireNS: after that it is full again).
type HashLimitRule struct {
	RuleID           uint32
	Table            uint32 // ListID(--hashlimit-name)
	Flags            uint32
	Burst            uint32
	IntervalNS       uint64
	ExpireNS         uint64
	SrcMask, DstMask [16]byte
}

// hashMask is the mask of a prefix length (-1: every bit).
func hashMask(n int) [16]byte {
	var out [16]byte
	if n < 0 {
		n = 128
	}
	for i := 0; i < n; i++ {
		out[i/8] |= 0x80 >> (i % 8)
	}
	return out
}

// hashTableSettings are what the rules that share a table must agree on:
// the kernel keys and fills the table's buckets by the settings of the
// rule that created it, whichever that was.
type hashTableSettings struct {
	mode             rules.HashMode
	srcMask, dstMask int
	period           uint64
	burst, expire    uint32
}

// hashLimitRules lists the settings of every -m hashlimit rule. Rules of
// overlapping families that name one table must agree on its settings
// (all but upto/above): iptables would use one rule's for both.
func hashLimitRules(in Input) ([]HashLimitRule, error) {
	var out []HashLimitRule
	type first struct {
		i   int
		set hashTableSettings
	}
	byName := map[string][]first{}
	names := map[uint32]string{}
	for i := range in.RuleSet.Rules {
		r := &in.RuleSet.Rules[i]
		h := r.Match.HashLimit
		if h == nil {
			continue
		}
		id := ListID(h.Name)
		if other, ok := names[id]; ok && other != h.Name {
			return nil, fmt.Errorf("%s: -m hashlimit tables %q and %q have the same id (%#x); rename one", r.Pos, other, h.Name, id)
		}
		names[id] = h.Name
		set := hashTableSettings{h.Mode, h.SrcMask, h.DstMask, h.PeriodUS, h.Burst, h.ExpireMS}
		for _, f := range byName[h.Name] {
			o := &in.RuleSet.Rules[f.i]
			if f.set != set && (o.Match.Family == rules.FamilyAny || r.Match.Family == rules.FamilyAny || o.Match.Family == r.Match.Family) {
				return nil, fmt.Errorf("%s: -m hashlimit table %q is named with other settings by the rule at %s; "+
					"the kernel would key and fill its buckets by one rule's settings for both: give both rules the same rate, burst, mode, masks and expiry, or two names",
					r.Pos, h.Name, o.Pos)
			}
		}
		byName[h.Name] = append(byName[h.Name], first{i, set})
		flags := uint32(h.Mode)
		if h.Above {
			flags |= HashLimitFlagAbove
		}
		out = append(out, HashLimitRule{RuleID: in.IDs[i], Table: id, Flags: flags, Burst: h.Burst, IntervalNS: h.IntervalNS(),
			ExpireNS: uint64(h.ExpireMS) * 1e6, SrcMask: hashMask(h.SrcMask), DstMask: hashMask(h.DstMask)})
	}
	if len(out) > MaxHashLimitRules {
		return nil, fmt.Errorf("the rule set has %d rules with -m hashlimit; the data plane holds at most %d", len(out), MaxHashLimitRules)
	}
	return out, nil
}

// HashTableIDs are the ids of the tables t's rules name (the data plane
// keeps the buckets of these and forgets the others').
func (t *Tables) HashTableIDs() map[uint32]bool {
	out := map[uint32]bool{}
	for _, r := range t.HashLimits {
		out[r.Table] = true
	}
	return out
}

// HashKey is a bucket of a -m hashlimit table (struct fw_hashlimit_key):
// the fields of the rule's mode, masked; the others zero.
type HashKey struct {
	Table        string
	V6           bool
	Src, Dst     netip.Addr
	SPort, DPort uint16
}

// HashBucket is a bucket's state (struct fw_hashlimit_bucket).
type HashBucket struct{ Tat, Seen uint64 }

// hashPorts reports whether the protocol has the ports a hashlimit key
// takes (the ones the data plane parses: TCP, UDP, UDP-Lite, SCTP).
func hashPorts(p *RefPacket) bool {
	switch p.Proto {
	case 6, 17, 136, 132:
		return p.L4
	}
	return false
}

// hashlimit does what -m hashlimit h does for p (fw_hashlimit_apply):
// looks the packet's bucket up (forgotten when idle ExpireMS or longer:
// full), takes a token when there is one, and returns whether the rule
// matches: --hashlimit-upto when it took one, --hashlimit-above when it
// found none. A nil state is a fresh one each time.
func (s *State) hashlimit(h *rules.HashLimitMatch, p *RefPacket) bool {
	k := HashKey{Table: h.Name, V6: p.Src.Is6()}
	mask := func(a netip.Addr, n int) netip.Addr {
		if n < 0 {
			return a
		}
		pr, _ := a.Prefix(n)
		return pr.Addr()
	}
	if h.Mode&rules.HashSrcIP != 0 {
		k.Src = mask(p.Src, h.SrcMask)
	}
	if h.Mode&rules.HashDstIP != 0 {
		k.Dst = mask(p.Dst, h.DstMask)
	}
	if hashPorts(p) {
		if h.Mode&rules.HashSrcPort != 0 {
			k.SPort = p.SPort
		}
		if h.Mode&rules.HashDstPort != 0 {
			k.DPort = p.DPort
		}
	}
	if s == nil {
		return !h.Above // a full bucket: a token
	}
	var tat uint64
	if b := s.Buckets[k]; b != nil && s.Now-b.Seen < uint64(h.ExpireMS)*1e6 {
		tat = b.Tat
	}
	token := bucketReady(tat, s.Now, h.IntervalNS(), h.Burst)
	if token {
		tat = max(tat, s.Now) + h.IntervalNS()
	}
	if s.Buckets == nil {
		s.Buckets = map[HashKey]*HashBucket{}
	}
	s.Buckets[k] = &HashBucket{Tat: tat, Seen: s.Now}
	return token != h.Above
}
