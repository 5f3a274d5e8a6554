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
// has a token, no -m recent rule matches (ClassifyWith).
func (t *Tables) Classify(p *RefPacket, dev Dev) Classified {
	return t.ClassifyWith(p, dev, nil)
}

// Stateful is what the rate and state tests see (ClassifyWith); a nil
// function (or a nil *Stateful): every bucket has a token, no -m recent
// rule matches.
type Stateful struct {
	// Ready: the rule's bucket has a token (the walk's test of a
	// deciding -m limit entry; the caller takes the token of the
	// deciding entry's rule, as fw_log_emit).
	Ready func(ruleID uint32) bool
	// Take takes a token of the rule's bucket if it has one, and says
	// whether it had (a settled -m limit note, fw_state_settle).
	Take func(ruleID uint32) bool
	// Recent does what entry's -m recent rule does to its list for the
	// packet and says whether it matches (fw_recent_apply).
	Recent func(entry int) bool
}

func (s *Stateful) ready(id uint32) bool { return s == nil || s.Ready == nil || s.Ready(id) }
func (s *Stateful) take(id uint32) bool  { return s == nil || s.Take == nil || s.Take(id) }
func (s *Stateful) recent(e int) bool    { return s != nil && s.Recent != nil && s.Recent(e) }

// ClassifyWith is Classify with the buckets and lists of st, as the data
// plane: a matching deciding -m limit entry decides only when Ready says
// its bucket has a token; the noted entries (Entry.Noted: -m recent,
// probes, guarded entries) met before the deciding one are settled in
// index order with the packet's probe bits, as fw_state_settle: an entry
// whose guard fails is passed; a -m recent entry applies its rule
// (Recent), a -m limit one takes a token (Take), and passes when that
// does not match; then a probe sets its bit and counts its rule, a LOG or counting entry
// logs or counts, and any other decides.
func (t *Tables) ClassifyWith(p *RefPacket, dev Dev, st *Stateful) Classified {
	r := int(p.Chain) * 2
	if p.Src.Is6() {
		r++
	}
	c := Classified{Entry: -1, Root: t.Roots[r]}
	p = t.raw(&c.Root, p, dev)
	k := KeyOf(p, dev)
	type note struct {
		idx int
		id  uint32
	}
	var notes []int // the noted entries met, in index order, one per Note key
	var logs, counts []note
	countOver := -1 // the first counting rule left out (MaxCountPerPacket)
	keys := map[uint32]bool{}
	// add notes rule id of entry i once, at its lowest index (fw_note)
	add := func(ns []note, i int, e *Entry) []note {
		for j := range ns {
			if ns[j].id == e.RuleID {
				ns[j].idx = min(ns[j].idx, i)
				return ns
			}
		}
		return append(ns, note{i, e.RuleID})
	}
	pass := func(i int, e *Entry) { // a LOG or counting entry that applies
		if !e.Count {
			logs = add(logs, i, e)
			return
		}
		if !slices.ContainsFunc(counts, func(n note) bool { return n.id == e.RuleID }) && len(counts) == MaxCountPerPacket {
			if countOver < 0 || i < countOver {
				countOver = i
			}
			return
		}
		counts = add(counts, i, e)
	}
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
		if e.Noted() {
			if !keys[e.Note] {
				keys[e.Note] = true
				notes = append(notes, int(i))
			}
			continue
		}
		if e.Action != ActLog {
			if e.Limit && !st.ready(e.RuleID) {
				continue
			}
			c.Entry = int(i)
			break
		}
		pass(int(i), e)
	}
	var bits uint32
	for _, n := range notes { // as fw_state_settle
		e := &t.Entries[n]
		if !e.Guarded(bits) {
			continue
		}
		switch {
		case e.State && !st.recent(n),
			e.Limit && e.Action != ActLog && !e.State && !st.take(e.RuleID):
			continue
		case e.Probe != 0: // sets its bit, counts its rule
			bits |= 1 << (e.Probe - 1)
			pass(n, &Entry{RuleID: e.RuleID, Action: ActLog, Count: true})
			continue
		case e.Action == ActLog:
			pass(n, e)
			continue
		}
		c.Entry = n
		break
	}
	before := func(idx int) bool { return c.Entry < 0 || idx < c.Entry }
	slices.SortFunc(logs, func(a, b note) int { return a.idx - b.idx })
	for _, l := range logs {
		if !before(l.idx) {
			break
		}
		if len(c.Logs) == MaxLogPerPacket {
			c.LogOverflow = true
			break
		}
		c.Logs = append(c.Logs, l.id)
	}
	for _, n := range counts {
		if before(n.idx) {
			c.Counts = append(c.Counts, n.id)
		}
	}
	c.CountOverflow = countOver >= 0 && before(countOver)
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
		test(MVLANPrio, p.Tagged && p.VLANPrio == e.VLANPrio) &&
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
		test(MCTNat, p.CTInfo&e.CTNat != 0) &&
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
