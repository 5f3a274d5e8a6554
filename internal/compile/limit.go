package compile

import (
	"net/netip"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// The Go model of the data plane's state for -m limit (its token buckets,
// lib/ratelimit.h, GCRA) and -m recent (its lists, lib/classify.h
// fw_recent_apply), given a clock: the reference matcher and the Go twin
// of the classifier test and change them as the data plane does, so
// tests that drive the clock (or run within one interval) agree packet
// by packet. docs/limits.md.

// bucketReady is fw_rl_ready: does the bucket whose theoretical arrival
// time is tat hold a token at now (ns)? A bucket never used (tat 0) is full.
func bucketReady(tat, now, interval uint64, burst uint32) bool {
	t := max(tat, now)
	b := uint64(max(burst, 1))
	return t-now <= (b-1)*interval
}

// State is the state of every -m limit bucket of a rule set (by rule
// index) and of every -m recent list (by name), at the clock Now (ns, the
// data plane's bpf_ktime_get_ns). The zero value's buckets are full and
// its lists empty.
type State struct {
	Now   uint64
	Tat   map[int]uint64
	Lists map[RecentKey]*RecentEntry
	// Buckets are the -m hashlimit buckets (hashlimit.go).
	Buckets map[HashKey]*HashBucket
	// Conns are the connections -m connlimit reads and counts
	// (connlimit.go); nil: none tracked, nothing kept.
	Conns *Conntrack
}

// RecentKey is an address in a -m recent list (masked, as the rule
// masks it).
type RecentKey struct {
	List string
	Addr netip.Addr
}

// RecentEntry is an address's time stamps (struct fw_recent_entry): a
// ring of RecentStamps; Index is 1 + the slot written last.
type RecentEntry struct {
	Stamps  [RecentStamps]uint64
	Index   int
	NStamps int
	TTL     uint8 // of the packet that set or updated it last (--rttl)
}

// recent does what -m recent m does for p (fw_recent_apply): returns
// whether it matches. A nil state is a fresh one each time (nothing is
// recorded).
func (s *State) recent(m *rules.RecentMatch, p *RefPacket) bool {
	a := p.Src
	if m.Dest {
		a = p.Dst
	}
	if m.Mask.IsValid() {
		b, mask := a.AsSlice(), m.Mask.AsSlice()
		for i := range b {
			b[i] &= mask[i]
		}
		a, _ = netip.AddrFromSlice(b)
	}
	k := RecentKey{List: m.Name, Addr: a}
	var now uint64
	var e *RecentEntry
	if s != nil {
		now, e = s.Now, s.Lists[k]
	}
	// the kernel's TTL: as the packet arrived (xt_recent adds back the one
	// FORWARD lost); an entry of another TTL is not found by --rttl
	ttl := p.TTLSeen()
	if p.Chain == rules.ChainForward {
		ttl++
	}
	if e != nil && m.TTL && ttl != e.TTL && ttl != 0 && e.TTL != 0 {
		e = nil
	}
	ret := m.Invert
	if e == nil {
		if m.Op != rules.RecentSet {
			return ret
		}
		if s != nil {
			if s.Lists == nil {
				s.Lists = map[RecentKey]*RecentEntry{}
			}
			n := &RecentEntry{Index: 1, NStamps: 1, TTL: ttl}
			n.Stamps[0] = now
			s.Lists[k] = n
		}
		return !ret
	}
	switch m.Op {
	case rules.RecentSet:
		ret = !ret
	case rules.RecentRemove:
		delete(s.Lists, k)
		return !ret
	default:
		hits := uint32(0)
		for i := 0; i < e.NStamps; i++ {
			if m.Seconds != 0 && now-e.Stamps[i] > uint64(m.Seconds)*1e9 {
				continue
			}
			if hits++; m.HitCount == 0 || hits >= m.HitCount {
				ret = !ret
				break
			}
		}
	}
	if m.Op == rules.RecentSet || m.Op == rules.RecentUpdate && ret {
		at := e.Index & (RecentStamps - 1)
		e.Stamps[at] = now
		e.Index = at + 1
		e.NStamps = max(e.NStamps, e.Index)
		e.TTL = ttl
	}
	return ret
}

// ready tells whether rule i's bucket (limit l) holds a token now.
func (s *State) ready(i int, interval uint64, burst uint32) bool {
	if s == nil {
		return true // a nil state is a fresh one: every bucket is full
	}
	return bucketReady(s.Tat[i], s.Now, interval, burst)
}

// take takes a token from rule i's bucket, if there is one (fw_rl_take).
func (s *State) take(i int, interval uint64, burst uint32) bool {
	if !s.ready(i, interval, burst) {
		return false
	}
	if s != nil {
		if s.Tat == nil {
			s.Tat = map[int]uint64{}
		}
		s.Tat[i] = max(s.Tat[i], s.Now) + interval
	}
	return true
}
