package compile

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// ConnLimitRule is one -m connlimit rule's settings (struct
// fw_connlimit_rule): the mask of the key's address (on the address as
// the data plane holds it: IPv4 in the first 4 bytes), the limit and the
// flags (ConnLimitFlagAbove, ConnLimitFlagDaddr).
type ConnLimitRule struct {
	RuleID uint32
	Limit  uint32
	Flags  uint32
	Mask   [16]byte
}

// connLimitRules lists the settings of every -m connlimit rule. A rule
// whose limit the data plane cannot count to (a key holds ConnLimitSlots
// connections, so --connlimit-above N and --connlimit-upto N need N+1 of
// them) is refused at its position.
func connLimitRules(in Input) ([]ConnLimitRule, error) {
	var out []ConnLimitRule
	for i := range in.RuleSet.Rules {
		r := &in.RuleSet.Rules[i]
		c := r.Match.ConnLimit
		if c == nil {
			continue
		}
		if c.Limit >= ConnLimitSlots {
			return nil, fmt.Errorf("%s: -m connlimit with a limit of %d: xdpfw counts at most %d connections per address and rule, so the limit is at most %d; "+
				"keep this rule in the kernel's iptables, or limit the rate of new connections instead (-m hashlimit --hashlimit-mode srcip)",
				r.Pos, c.Limit, ConnLimitSlots, ConnLimitSlots-1)
		}
		mask := c.Mask
		if mask < 0 {
			mask = 128 // every bit of either family (an IPv4 address has zeros after its 4 bytes)
		}
		var flags uint32
		if c.Above {
			flags |= ConnLimitFlagAbove
		}
		if c.Dst {
			flags |= ConnLimitFlagDaddr
		}
		out = append(out, ConnLimitRule{RuleID: in.IDs[i], Limit: c.Limit, Flags: flags, Mask: hashMask(mask)})
	}
	if len(out) > MaxConnLimitRules {
		return nil, fmt.Errorf("the rule set has %d rules with -m connlimit; the data plane holds at most %d", len(out), MaxConnLimitRules)
	}
	return out, nil
}

// ConnID is a connection as conntrack keys it (struct fw_ct_key): its
// protocol and its two endpoints, the lower first. Ports are those of
// TCP, UDP, UDP-Lite and SCTP, else 0.
type ConnID struct {
	Proto uint8
	A, B  netip.AddrPort
}

// ConnOf is p's connection.
func ConnOf(p *RefPacket) ConnID {
	var sp, dp uint16
	if hashPorts(p) {
		sp, dp = p.SPort, p.DPort
	}
	a, b := netip.AddrPortFrom(p.Src, sp), netip.AddrPortFrom(p.Dst, dp)
	if b.Compare(a) < 0 {
		a, b = b, a
	}
	return ConnID{Proto: p.Proto, A: a, B: b}
}

// ConnKey is a -m connlimit key (struct fw_connlimit_key): a rule (its
// index) and its masked address.
type ConnKey struct {
	Rule int
	Addr netip.Addr
}

// Conntrack is what -m connlimit reads of the connections the data plane
// tracks: Tracked holds the live ones (not expired), true for a TCP
// connection in TIME_WAIT or CLOSE. The caller keeps it as the data plane
// would (a first packet accepted creates its connection).
type Conntrack struct {
	Tracked map[ConnID]bool
	// Counted are the connections each key counts (fw_connlimit), in the
	// order added.
	Counted map[ConnKey][]ConnID
}

// connlimit does what -m connlimit rule i (c) does for p
// (fw_connlimit_apply): collects the key's connections that are gone or
// closed, adds p's own when p is its first packet (NEW, not tracked yet)
// or when the key has no list yet (a tracked packet), and compares the
// count (with an INVALID or UNTRACKED packet's own) with the limit. full:
// the new connection finds the key's ConnLimitSlots taken (the packet is
// dropped). A nil state is a fresh one each time.
func (s *State) connlimit(i int, c *rules.ConnLimitMatch, p *RefPacket) (match, full bool) {
	a := p.Src
	if c.Dst {
		a = p.Dst
	}
	pr, _ := a.Prefix(c.MaskBits(a.Is6()))
	k := ConnKey{Rule: i, Addr: pr.Addr()}
	own := ConnOf(p)
	var ct *Conntrack
	if s != nil {
		ct = s.Conns
	}
	if ct == nil {
		ct = &Conntrack{}
	}
	closedOwn, known := ct.Tracked[own]
	tracked := p.CTState == CTNew || p.CTState == CTEstablished
	add := p.CTState == CTNew && (!known || closedOwn) // its first packet (a SYN reopening a closed tuple too)
	count := 0
	if !tracked && p.CTState != CTRelated {
		count = 1 // INVALID, UNTRACKED: this packet's, not kept
	}
	list, ok := ct.Counted[k]
	if !ok {
		if tracked {
			ct.put(k, []ConnID{own})
			count = 1
		}
		return (count > int(c.Limit)) == c.Above, false
	}
	found := false
	kept := list[:0:0]
	for _, x := range list {
		closed, live := ct.Tracked[x]
		switch {
		case add && x == own:
			found = true
		case !live || closed:
			continue // collected
		}
		kept = append(kept, x)
	}
	count += len(kept)
	if add && !found {
		if len(kept) >= ConnLimitSlots {
			ct.put(k, kept)
			return false, true
		}
		kept = append(kept, own)
		count++
	}
	ct.put(k, kept)
	return (count > int(c.Limit)) == c.Above, false
}

func (ct *Conntrack) put(k ConnKey, l []ConnID) {
	if ct.Counted == nil {
		ct.Counted = map[ConnKey][]ConnID{}
	}
	ct.Counted[k] = slices.Clip(l)
}
