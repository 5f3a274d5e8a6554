package compile

import (
	"net/netip"
	"slices"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// Classified is what the classifier finds for one packet.
type Classified struct {
	Entry int  // the deciding entry, or -1: the root's policy
	Root  Root // the packet's root
	// Logs are the rule ids of the LOG rules that log the packet: those
	// matching it before the deciding entry, the first MaxLogPerPacket in
	// rule order. LogOverflow: more of them matched.
	Logs        []uint32
	LogOverflow bool
	// Counts are the rule ids of the counting entries (EntryCount) that
	// match before the deciding entry, each once, in walk order, the
	// first MaxCountPerPacket (CountOverflow: more matched).
	Counts        []uint32
	CountOverflow bool
}

// Classify is the Go twin of the data plane's classifier: walk the trees
// of (chain, family), check the leaves' candidates in order with
// Entry.Matches; LOG entries are noted and passed. Every -m limit bucket
// has a token (ClassifyWith).
func (t *Tables) Classify(p *RefPacket, dev Dev) Classified {
	return t.ClassifyWith(p, dev, nil, nil)
}

// ClassifyWith is Classify where a matching -m limit entry (Entry.Limit,
// not LOG) decides only when ready(its rule id) says its bucket has a
// token (nil: always), as fw_tree asks fw_limit; the caller takes the
// token of the deciding entry's rule. The matching -m recent entries
// before the deciding one (Entry.State) are settled in index order by
// recent(entry index), which does what the rule does to its list and
// says whether it matches (nil: none does), as fw_state_settle.
func (t *Tables) ClassifyWith(p *RefPacket, dev Dev, ready func(ruleID uint32) bool, recent func(entry int) bool) Classified {
	r := int(p.Chain) * 2
	if p.Src.Is6() {
		r++
	}
	c := Classified{Entry: -1, Root: t.Roots[r]}
	p = t.raw(&c.Root, p, dev)
	k := KeyOf(p, dev)
	var notes []int  // -m recent entries met, in index order
	var logIdx []int // the entry index of each of c.Logs
	overIdx := -1    // the first LOG entry left out (MaxLogPerPacket)
	for _, i := range t.Lookup(r, k) {
		e := &t.Entries[i]
		// as fw_tree: an entry's key ranges where it has them
		if i < uint32(len(t.Ranges)) && t.Ranges[i].Exact {
			if !t.Ranges[i].Match(&k) {
				continue
			}
		} else if !e.Matches(p, dev, t.SetNames) {
			continue
		}
		if e.State {
			if n := len(notes); n == 0 || t.Entries[notes[n-1]].RuleID != e.RuleID {
				notes = append(notes, int(i))
			}
			continue
		}
		if e.Action != ActLog {
			if e.Limit && ready != nil && !ready(e.RuleID) {
				continue
			}
			c.Entry = int(i)
			break
		}
		if e.Count {
			switch {
			case slices.Contains(c.Counts, e.RuleID):
			case len(c.Counts) == MaxCountPerPacket:
				c.CountOverflow = true
			default:
				c.Counts = append(c.Counts, e.RuleID)
			}
			continue
		}
		if n := len(c.Logs); n > 0 && c.Logs[n-1] == e.RuleID {
			continue // another entry of the same rule (entries of a rule are adjacent)
		}
		if len(c.Logs) == MaxLogPerPacket {
			if overIdx < 0 {
				overIdx = int(i)
			}
			continue
		}
		c.Logs = append(c.Logs, e.RuleID)
		logIdx = append(logIdx, int(i))
	}
	for _, n := range notes { // as fw_state_settle: the first that matches decides
		if recent != nil && recent(n) {
			c.Entry = n
			for len(logIdx) > 0 && logIdx[len(logIdx)-1] > n { // LOG rules after it log nothing
				logIdx, c.Logs = logIdx[:len(logIdx)-1], c.Logs[:len(c.Logs)-1]
			}
			break
		}
	}
	c.LogOverflow = overIdx >= 0 && (c.Entry < 0 || overIdx < c.Entry)
	return c
}

// Matches mirrors fw_entry_match (bpf/lib/classify.h): every enabled test
// passes, negated ones fail; L4 tests need an L4 header.
func (e *Entry) Matches(p *RefPacket, dev Dev, setNames map[uint32]string) bool {
	m, inv := e.Match, e.Invert
	test := func(bit uint64, cond bool) bool { return m&bit == 0 || cond != (inv&bit != 0) }
	fam := rules.FamilyIPv4
	if p.Src.Is6() {
		fam = rules.FamilyIPv6
	}
	if e.Chain != p.Chain || (m&ML4 != 0 && !p.L4) || (m&MFamily != 0 && e.Family != fam) || (m&MRTHdr != 0 && !p.RT) {
		return false
	}
	src, dst := addrBytes(p)
	masked := func(a, v, mask [16]byte) bool {
		for i := range a {
			if a[i]&mask[i] != v[i] {
				return false
			}
		}
		return true
	}
	return test(MProto, e.Proto == p.Proto) &&
		test(MSrc, masked(src, e.Src, e.SrcMask)) &&
		test(MDst, masked(dst, e.Dst, e.DstMask)) &&
		test(MSPort, p.SPort >= e.SPortLo && p.SPort <= e.SPortHi) &&
		test(MDPort, p.DPort >= e.DPortLo && p.DPort <= e.DPortHi) &&
		test(MIfindex, dev.In == e.Ifindex) &&
		test(MOif, dev.Out >= e.OIfLo && dev.Out <= e.OIfHi) &&
		test(MMACSrc, p.SrcMAC == e.SrcMAC) &&
		test(MMACDst, p.DstMAC == e.DstMAC) &&
		test(MTCPFlags, p.TCPFlags&e.TCPMask == e.TCPCmp) &&
		test(MICMPType, p.ICMPType == e.ICMPType && (m&MICMPCode == 0 || p.ICMPCode == e.ICMPCode)) &&
		test(MVLAN, p.Tagged && p.VLAN == e.VLAN) &&
		test(MFrag, p.Fragment) &&
		test(MCTState, e.CTState&(1<<p.CTState) != 0) &&
		test(MMark, p.Mark&e.MarkMask == e.Mark) &&
		test(MPktType, e.PktTypes&(1<<PktTypeOf(p)) != 0) &&
		test(MLen, p.Len >= uint32(e.LenLo) && p.Len <= uint32(e.LenHi)) &&
		test(MTTL, p.TTLSeen() >= e.TTLLo && p.TTLSeen() <= e.TTLHi) &&
		test(MTOS, p.TOS&e.TOSMask == e.TOSCmp) &&
		test(MECNIP, p.TOS&3 == e.ECNIP) &&
		test(MECNTCP, p.TCPFlags&e.ECNMask == e.ECNCmp) &&
		test(MCTDir, p.CTInfo&CTIReply != 0) &&
		test(MCTStatus, p.CTInfo&e.CTStatus != 0) &&
		test(MCTProto, p.CTProto == e.CTProto) &&
		test(MMSS, p.MSS >= uint32(e.MSSLo) && p.MSS <= uint32(e.MSSHi)) &&
		test(MRTType, p.RTType == e.RTType) &&
		test(MRTSegs, p.RTSegsLeft >= e.RTSegsLo && p.RTSegsLeft <= e.RTSegsHi) &&
		test(MRTLen, p.RTLen == e.RTLen) &&
		test(MSrcRange, e.SrcRange.Contains(p.Src)) &&
		test(MDstRange, e.DstRange.Contains(p.Dst)) &&
		test(MSrcSet, inRefSet(p, setNames[e.SrcSet], p.Src)) &&
		test(MDstSet, inRefSet(p, setNames[e.DstSet], p.Dst)) &&
		test(MSrcType, p.Addrs.TypeOK(p.Src, e.SrcTypes, onIfindex(e.TypeDev, dev))) &&
		test(MDstType, p.Addrs.TypeOK(p.Dst, e.DstTypes, onIfindex(e.TypeDev, dev)))
}

// onIfindex is the device test of -m addrtype's --limit-iface-in/-out as
// the data plane makes it (lib/addrtype.h fw_type_dev): nil when not
// limited, or when the packet has no such device (0).
func onIfindex(limit uint8, dev Dev) func(*AddrRoute) bool {
	i := map[uint8]uint32{rules.LimitIn: dev.In, rules.LimitOut: dev.Out}[limit]
	if i == 0 {
		return nil
	}
	return func(r *AddrRoute) bool { return r.Ifindex == i }
}

func addrBytes(p *RefPacket) (src, dst [16]byte) {
	if p.Src.Is4() {
		s, d := p.Src.As4(), p.Dst.As4()
		copy(src[:], s[:])
		copy(dst[:], d[:])
		return
	}
	return p.Src.As16(), p.Dst.As16()
}

func inRefSet(p *RefPacket, name string, a netip.Addr) bool {
	s, ok := p.Sets[name]
	return ok && s.Contains(a)
}
