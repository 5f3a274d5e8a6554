package compile

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// ctAddrBases expands base (the rule's entry so far, -s and -d included)
// by -m conntrack's address tests (--ctorigsrc, --ctorigdst, --ctreplsrc,
// --ctrepldst) into one entry per direction the packet can go in its
// connection. Without NAT a connection's original source is the packet's
// source in the original direction and its destination in the reply
// direction; its reply source is its original destination, its reply
// destination its original source. So each direction turns the tests into
// tests of the packet's own addresses, beside -s and -d. A RELATED ICMP
// error's connection is the quoted packet's, whose addresses the data plane
// does not keep: a rule whose states allow RELATED is refused. never is a
// warning when no packet can match.
func ctAddrBases(m *rules.Match, base Entry) (out []Entry, never string, err error) {
	if m.CTOrigSrc == nil && m.CTOrigDst == nil && m.CTReplSrc == nil && m.CTReplDst == nil {
		return []Entry{base}, "", nil
	}
	if base.CTState&rules.CTRelated != 0 {
		return nil, "", errors.New("--ctorigsrc, --ctorigdst, --ctreplsrc and --ctrepldst need --ctstate without RELATED: " +
			"xdpfw does not keep the addresses of the connection a RELATED ICMP error quotes (add --ctstate NEW,ESTABLISHED)")
	}
	dirs := []bool{false, true} // reply direction?
	if base.Match&MCTDir != 0 {
		dirs = []bool{base.Invert&MCTDir == 0}
	}
	for _, reply := range dirs {
		// the tests of the packet's source and destination in this direction
		src := []*rules.AddrMatch{m.Src, m.CTOrigSrc, m.CTReplDst}
		dst := []*rules.AddrMatch{m.Dst, m.CTOrigDst, m.CTReplSrc}
		if reply {
			src = []*rules.AddrMatch{m.Src, m.CTOrigDst, m.CTReplSrc}
			dst = []*rules.AddrMatch{m.Dst, m.CTOrigSrc, m.CTReplDst}
		}
		e := base
		e.Match |= MCTDir
		e.Invert &^= MCTDir
		if !reply {
			e.Invert |= MCTDir
		}
		empty := false
		for _, f := range []struct {
			tests      []*rules.AddrMatch
			bit        uint64
			addr, mask *[16]byte
		}{{src, MSrc, &e.Src, &e.SrcMask}, {dst, MDst, &e.Dst, &e.DstMask}} {
			t, none, err := conjAddr(f.tests)
			if err != nil {
				return nil, "", err
			}
			empty = empty || none
			e.Match &^= f.bit
			e.Invert &^= f.bit
			if t != nil {
				e.Match |= f.bit
				if t.Invert {
					e.Invert |= f.bit
				}
				*f.addr, *f.mask = prefixBytes(t.Prefix)
			}
		}
		if !empty {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, "its address tests (-s, -d, --ctorig*, --ctrepl*) leave no address; the rule never matches", nil
	}
	return out, "", nil
}

// conjAddr is the conjunction of prefix tests of one address as one test
// (nil: any address), or none when no address passes them all. Tests whose
// conjunction is no prefix (an address in one prefix but outside a smaller
// one inside it) are refused: the classifier tests one prefix per address.
func conjAddr(tests []*rules.AddrMatch) (t *rules.AddrMatch, none bool, err error) {
	var pos *netip.Prefix
	var negs []netip.Prefix
	for _, m := range tests {
		switch {
		case m == nil:
		case m.Invert:
			negs = append(negs, m.Prefix)
		case pos == nil:
			p := m.Prefix
			pos = &p
		case !pos.Overlaps(m.Prefix):
			return nil, true, nil
		case m.Prefix.Bits() > pos.Bits():
			p := m.Prefix
			pos = &p
		}
	}
	var kept []netip.Prefix
	for _, n := range negs {
		if pos != nil && !n.Overlaps(*pos) {
			continue // outside n already
		}
		if pos != nil && n.Bits() <= pos.Bits() {
			return nil, true, nil // pos lies inside n
		}
		kept = append(kept, n)
	}
	if pos != nil && len(kept) > 0 {
		return nil, false, fmt.Errorf("an address in %s but not in %s is no prefix: not supported; split the rule", *pos, kept[0])
	}
	// negations alone: the widest of nested ones is all of them
	for len(kept) > 1 {
		a, b := kept[0], kept[1]
		if !a.Overlaps(b) {
			return nil, false, fmt.Errorf("an address outside both %s and %s is no prefix: not supported; split the rule", a, b)
		}
		if b.Bits() < a.Bits() {
			a = b
		}
		kept = append([]netip.Prefix{a}, kept[2:]...)
	}
	switch {
	case pos != nil:
		return &rules.AddrMatch{Prefix: *pos}, false, nil
	case len(kept) == 1:
		return &rules.AddrMatch{Prefix: kept[0], Invert: true}, false, nil
	}
	return nil, false, nil
}

// ctConnlessEntry is the entry of a rule whose --ctstate lets packets
// without a connection through (states: INVALID, UNTRACKED) beside tests
// that read a connection (--ctproto, --ctstatus, --ctdir, the addresses):
// the kernel's xt_conntrack judges such a packet by its state test alone,
// so this entry is base (the rule's other tests, -s and -d included) with
// those states and none of those tests. Its states are apart from the
// rule's other entries': a packet matches one at most.
func ctConnlessEntry(base Entry, states uint8) Entry {
	const conn = MCTProto | MCTStatus | MCTDir
	e := base
	e.Match &^= conn
	e.Invert &^= conn
	e.CTProto, e.CTStatus, e.CTState = 0, 0, states
	return e
}
