package compile

import (
	"net/netip"

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
}

// Classify is the Go twin of the data plane's classifier: walk the trees
// of (chain, family), check the leaves' candidates in order with
// Entry.Matches; LOG entries are noted and passed.
func (t *Tables) Classify(p *RefPacket, ifindex uint32) Classified {
	r := int(p.Chain) * 2
	if p.Src.Is6() {
		r++
	}
	c := Classified{Entry: -1, Root: t.Roots[r]}
	k := KeyOf(p, ifindex)
	for _, i := range t.Lookup(r, k) {
		e := &t.Entries[i]
		// as fw_tree: an entry's key ranges where it has them
		if i < uint32(len(t.Ranges)) && t.Ranges[i].Exact {
			if !t.Ranges[i].Match(&k) {
				continue
			}
		} else if !e.Matches(p, ifindex, t.SetNames) {
			continue
		}
		if e.Action != ActLog {
			c.Entry = int(i)
			break
		}
		if n := len(c.Logs); n > 0 && c.Logs[n-1] == e.RuleID {
			continue // another entry of the same rule (entries of a rule are adjacent)
		}
		if len(c.Logs) == MaxLogPerPacket {
			c.LogOverflow = true
			continue
		}
		c.Logs = append(c.Logs, e.RuleID)
	}
	return c
}

// Matches mirrors fw_entry_match (bpf/lib/classify.h): every enabled test
// passes, negated ones fail; L4 tests need an L4 header.
func (e *Entry) Matches(p *RefPacket, ifindex uint32, setNames map[uint32]string) bool {
	m, inv := e.Match, e.Invert
	test := func(bit uint32, cond bool) bool { return m&bit == 0 || cond != (inv&bit != 0) }
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
		test(MIfindex, ifindex == e.Ifindex) &&
		test(MMACSrc, p.SrcMAC == e.SrcMAC) &&
		test(MMACDst, p.DstMAC == e.DstMAC) &&
		test(MTCPFlags, p.TCPFlags&e.TCPMask == e.TCPCmp) &&
		test(MICMPType, p.ICMPType == e.ICMPType && (m&MICMPCode == 0 || p.ICMPCode == e.ICMPCode)) &&
		test(MVLAN, p.Tagged && p.VLAN == e.VLAN) &&
		test(MFrag, p.Fragment) &&
		test(MCTState, e.CTState&(1<<p.CTState) != 0) &&
		test(MLen, p.Len >= uint32(e.LenLo) && p.Len <= uint32(e.LenHi)) &&
		test(MTTL, p.TTL >= e.TTLLo && p.TTL <= e.TTLHi) &&
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
		test(MDstSet, inRefSet(p, setNames[e.DstSet], p.Dst))
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
