package compile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// The classifier is a decision tree per (chain, family), built HyperSplit
// style: every interior node splits one packet dimension at a threshold
// (value <= threshold goes left), every leaf lists the few entries that can
// still match, in priority order. The binary tree is then collapsed into
// multiway ("fat") nodes (collapse): runs of nodes that split the same
// dimension become one node of up to NodeThresh thresholds, so a walk takes
// fewer, wider steps through the same decisions. The data plane walks at
// most MaxDepth nodes, then checks at most MaxLeaf entries exactly
// (fw_entry_match), so a packet's cost does not depend on the number of
// rules.
//
// The tree only has to be a sound filter: each entry is reduced to a box
// (one inclusive range per dimension) containing every packet it can match
// — negated tests, for instance, widen to the full range — and the exact
// check at the leaf does the rest. See docs/classifier.md.

// Dimensions of the classification key (enum fw_dim in bpf/types.h). The
// key is computed from the parsed packet; all values are host-order u32.
const (
	DimSrc0 = iota // address words, most significant first (IPv4: word 0 only)
	DimSrc1
	DimSrc2
	DimSrc3
	DimDst0
	DimDst1
	DimDst2
	DimDst3
	DimSPort
	DimDPort
	DimProto
	DimIfindex
	DimVLAN     // outer VID, or VLANUntagged
	DimMACSrcHi // top 16 bits of the MAC
	DimMACSrcLo // low 32 bits
	DimMACDstHi
	DimMACDstLo
	DimTCPFlags
	DimICMP     // type << 8 | code
	DimFlags    // (KeyFrag | KeyL4) << KeyFlagsShift | PktTypeOf
	DimCTState  // enum fw_ct_state
	DimOIfindex // output device (FORWARD: the FIB's egress device; OUTPUT: tc's), 0 none
	DimLen      // IPv4 total length, IPv6 payload length + 40
	DimTTL      // IPv4 TTL, IPv6 hop limit
	DimTOS      // IPv4 TOS, IPv6 traffic class: DSCP << 2 | ECN
	NumDims
)

// Key flag bits (DimFlags) and the untagged VLAN value.
const (
	KeyFrag = 1
	KeyL4   = 2
	// KeyFlagsShift places KeyFrag and KeyL4 in DimFlags, above the
	// packet type (PktTypeOf).
	KeyFlagsShift = 2
	VLANUntagged  = 0x10000
)

// Limits of the walk in the data plane (FW_TREE_DEPTH, FW_LEAF_MAX).
const (
	MaxDepth = 32
	MaxLeaf  = 64
	// leafTarget is where the builder stops splitting; lists up to
	// leafSplitClean long are split further only without replication.
	leafTarget     = 1
	leafSplitClean = 4
	// A split of the parent's dimension is taken when it is nearly as
	// good as the best split: its larger side at most 1/sameDimSlack
	// larger, and no more replication (its two sides no larger in total).
	// Runs of splits of one dimension collapse into one fat node, which
	// the walk takes in one step. Measured on the micro benchmark's rule
	// sets, it takes the fat depth at 10,000 rules from 9 to 5
	// (docs/classifier.md).
	sameDimSlack = 4
)

// NumRoots is one tree per chain and family: root index = chain*2 + v6.
const NumRoots = int(rules.NumChains) * 2

// Key is a packet's classification key.
type Key [NumDims]uint32

// Fat nodes (struct fw_node): FW_NODE_THRESH, FW_NODE_CHILDREN, FW_NO_THRESH.
const (
	NodeThresh   = 7
	NodeChildren = NodeThresh + 1
	// NoThresh fills a node's unused thresholds: no key is above it, so
	// the walk counts thresholds without knowing how many are in use. No
	// real threshold is NoThresh (a split of [lo, hi] is below hi).
	NoThresh = ^uint32(0)
)

// ChildOf and fw_tree search exactly 7 thresholds in 3 steps.
var (
	_ [NodeThresh - 7]struct{}
	_ [7 - NodeThresh]struct{}
)

// Node is one fat tree node (struct fw_node): a complete binary tree of
// depth 3 in one cache line. Its 7 thresholds are in order (Thresh[3] at
// the top, Thresh[1] and Thresh[5] below it, then 0, 2, 4, 6), and
// threshold p tests dimension Dim, or Dim2 where bit p of Mask is set: a
// key k goes right at p when k[dim of p] > Thresh[p], and ends at child
// c in 0..7, left to right (ChildOf). Unused thresholds are NoThresh: no
// key goes right there, so the walk needs no count of them, and the
// children right of one are never taken (the empty leaf). A node whose
// thresholds all test one dimension (Mask 0: most of them) holds them
// ascending in Thresh[:N], and the search is the binary search for the
// number of thresholds below the key; one that tests two (Mask != 0)
// holds the top 3 levels of the binary tree, each at its place, N of
// them used. Children are references (see LeafRef).
type Node struct {
	Dim    uint8
	N      uint8
	Dim2   uint8
	Mask   uint8
	Thresh [NodeThresh]uint32   // in order; the unused ones NoThresh
	Child  [NodeChildren]uint32 // the unused ones the empty leaf
}

// DimAt is the dimension threshold p of n tests.
func (n *Node) DimAt(p int) uint8 {
	if n.Mask>>p&1 != 0 {
		return n.Dim2
	}
	return n.Dim
}

// Tree references (FW_REF_*): a node's children and a root's groups.
// Bit 31 set: a leaf, inline, with its candidate count in bits 24..30 and
// the index of its first candidate in Leaves in bits 0..23 — except that
// a leaf of one candidate holds that entry's index there itself (no slot
// in Leaves: the walk saves a load, and most leaves have one candidate).
// Bit 31 clear: the index of a node. NoTree (0xffffffff) would read as a
// leaf of 127 candidates; the builder never makes a leaf over MaxLeaf
// (64), so it cannot be one.
const (
	RefLeaf       = 1 << 31
	refCountShift = 24
	// MaxLeafSlots is how many leaf slots a generation can address, and
	// how many entries (a one-candidate leaf holds an entry index).
	MaxLeafSlots = 1 << refCountShift
)

// LeafRef is the reference of a leaf of count candidates at
// Leaves[first:first+count] (count <= MaxLeaf, first < MaxLeafSlots), or
// with count 1, of the leaf whose one candidate is entry first.
func LeafRef(first, count uint32) uint32 {
	return RefLeaf | count<<refCountShift | first
}

// IsLeafRef tells whether ref is a leaf.
func IsLeafRef(ref uint32) bool { return ref&RefLeaf != 0 }

// LeafOf returns the fields of a leaf reference (see LeafRef; LeafEntries
// reads its candidates).
func LeafOf(ref uint32) (first, count uint32) {
	return ref & (MaxLeafSlots - 1), ref >> refCountShift & 0x7f
}

// LeafEntries returns the candidates of leaf reference ref, in priority
// order.
func (t *Tables) LeafEntries(ref uint32) []uint32 {
	first, count := LeafOf(ref)
	if count == 1 {
		return []uint32{first}
	}
	return t.Leaves[first : first+count]
}

// ChildOf is the index in n.Child that key k takes: three steps down
// the node's binary tree, each comparing k in the dimension of its
// threshold (DimAt), as the data plane does (fw_tree). In a node of one
// dimension (ascending thresholds, the unused ones NoThresh, above every
// key) it is the number of thresholds below k[Dim].
func (n *Node) ChildOf(k *Key) int {
	c := 0
	if k[n.DimAt(3)] > n.Thresh[3] {
		c = 4
	}
	if k[n.DimAt(c+1)] > n.Thresh[c+1] {
		c += 2
	}
	if k[n.DimAt(c)] > n.Thresh[c] {
		c++
	}
	return c
}

// Root is where one chain's classification of one family starts: a tree
// per group (NoTree when empty), and the policy applied when no candidate
// matches.
type Root struct {
	Groups [MaxGroups]uint32
	Action Action
	Reason Reason
	RuleID uint32
	Flags  uint8 // Root*
	// The fast rule (see setFastRules): packets whose connection state is
	// in FastStates get its verdict without the trees.
	FastStates uint8
	FastRuleID uint32
	FastAction Action
	FastReason Reason
	FastReject Reject // with FastAction ActReject
	FastLog    bool   // the fast rule logs (--log)
}

// FastFlags is fw_root.fast_flags.
func (r *Root) FastFlags() uint8 {
	if r.FastLog {
		return EntryLog
	}
	return 0
}

type box [NumDims][2]uint32

// fullBox is every dimension's domain: a region that extends past what a
// packet can carry would keep entries from ever covering it.
var fullBox = func() (b box) {
	for d := range b {
		b[d] = [2]uint32{0, ^uint32(0)}
	}
	b[DimSPort][1], b[DimDPort][1] = 0xffff, 0xffff
	b[DimProto][1] = 0xff
	b[DimVLAN][1] = VLANUntagged
	b[DimMACSrcHi][1], b[DimMACDstHi][1] = 0xffff, 0xffff
	b[DimTCPFlags][1] = 0xff
	b[DimICMP][1] = 0xffff
	b[DimFlags][1] = KeyL4<<KeyFlagsShift | (NumPktTypes - 1) // KeyFrag|KeyL4 cannot happen
	b[DimCTState][1] = uint32(NumCTStates - 1)
	b[DimLen][1] = 0xffff + 40 // IPv6: the payload length and the header
	b[DimTTL][1], b[DimTOS][1] = 0xff, 0xff
	return
}()

// entryBoxes returns boxes whose union holds exactly the packets e can
// match, or, where that would take too many boxes, a superset (exact is
// then false). An entry that can match nothing has no boxes.
//
// Each test contributes a set of partial boxes (a union); the entry is the
// intersection of its tests, so the partial boxes are crossed. A negated
// multi-word value (address, MAC) w is the union over its words i of
// "words before i equal, word i outside" — at most two ranges per word.
func entryBoxes(e *Entry) (bs []box, exact bool) {
	const maxBoxes = 64
	bs, exact = []box{fullBox}, true
	m, inv := e.Match, e.Invert
	on := func(bit uint64) bool { return m&bit != 0 }
	neg := func(bit uint64) bool { return inv&bit != 0 }
	type part = map[int][2]uint32 // dimension -> range
	cross := func(parts []part) {
		var next []box
		for _, x := range bs {
			for _, p := range parts {
				y, empty := x, false
				for d, r := range p {
					y[d] = [2]uint32{max(r[0], x[d][0]), min(r[1], x[d][1])}
					if y[d][0] > y[d][1] {
						empty = true
					}
				}
				if !empty {
					next = append(next, y)
				}
			}
		}
		if len(next) > maxBoxes {
			exact = false // keep the superset we have
			return
		}
		bs = next
	}
	// words tests a value spread over dims d0.. (lo/hi per word).
	words := func(d0 int, lo, hi []uint32, negated bool) {
		if !negated {
			p := part{}
			for w := range lo {
				p[d0+w] = [2]uint32{lo[w], hi[w]}
			}
			cross([]part{p})
			return
		}
		var parts []part
		for w := range lo {
			for _, r := range complementRanges(lo[w], hi[w], fullBox[d0+w][1]) {
				p := part{d0 + w: r}
				for v := 0; v < w; v++ {
					p[d0+v] = [2]uint32{lo[v], hi[v]}
				}
				parts = append(parts, p)
			}
		}
		cross(parts)
	}
	one := func(d int, lo, hi uint32, negated bool) { words(d, []uint32{lo}, []uint32{hi}, negated) }

	if on(MSrc) {
		lo, hi := addrWords(e.Src, e.SrcMask)
		words(DimSrc0, lo, hi, neg(MSrc))
	}
	if on(MDst) {
		lo, hi := addrWords(e.Dst, e.DstMask)
		words(DimDst0, lo, hi, neg(MDst))
	}
	if on(MMACSrc) {
		h, l := macWords(e.SrcMAC)
		words(DimMACSrcHi, []uint32{h, l}, []uint32{h, l}, neg(MMACSrc))
	}
	if on(MMACDst) {
		h, l := macWords(e.DstMAC)
		words(DimMACDstHi, []uint32{h, l}, []uint32{h, l}, neg(MMACDst))
	}
	if on(MSPort) {
		one(DimSPort, uint32(e.SPortLo), uint32(e.SPortHi), false)
	}
	if on(MDPort) {
		one(DimDPort, uint32(e.DPortLo), uint32(e.DPortHi), false)
	}
	if on(MProto) {
		one(DimProto, uint32(e.Proto), uint32(e.Proto), neg(MProto))
	}
	if on(MIfindex) {
		one(DimIfindex, e.Ifindex, e.Ifindex, neg(MIfindex)) // negated only by flattened chains
	}
	if on(MOif) {
		one(DimOIfindex, e.OIfLo, e.OIfHi, false)
	}
	if on(MVLAN) {
		one(DimVLAN, uint32(e.VLAN), uint32(e.VLAN), neg(MVLAN))
	}
	if on(MTCPFlags) {
		var parts []part
		for _, r := range maskRanges(e.TCPMask, e.TCPCmp, neg(MTCPFlags)) {
			parts = append(parts, part{DimTCPFlags: r})
		}
		if len(parts) <= 16 { // --syn is 16 ranges
			cross(parts)
		} else {
			exact = false // many narrow ranges: leave the dimension wide
		}
	}
	if on(MSrcSet) || on(MDstSet) || on(MMark) || on(MSrcType) || on(MDstType) {
		exact = false // set membership, a masked mark, address types: no range; the leaf check decides
	}
	// maskParts: the values of dimension d whose bit is set in mask, as ranges.
	maskParts := func(d int, mask uint8, n uint32) []part {
		var parts []part
		for s := uint32(0); s < n; s++ {
			if mask&(1<<s) == 0 {
				continue
			}
			if k := len(parts); k > 0 && parts[k-1][d][1] == s-1 {
				parts[k-1][d] = [2]uint32{parts[k-1][d][0], s}
				continue
			}
			parts = append(parts, part{d: {s, s}})
		}
		return parts
	}
	if on(MCTDir) || on(MCTStatus) || on(MCTNat) || on(MCTProto) || on(MMSS) || m&MRTHdr != 0 {
		exact = false // no key dimension (rare tests): the leaf check decides
	}
	if on(MVLANPrio) {
		// No key dimension either (the leaf check decides): the PCP
		// would split every VID into 8 values, or --vlan-id into 8
		// ranges. Without negation it still needs a tag: a VID.
		exact = false
		if !neg(MVLANPrio) {
			one(DimVLAN, 0, 0x0fff, false) // every VID, not VLANUntagged
		}
	}
	if on(MCTState) {
		cross(maskParts(DimCTState, e.CTState, uint32(NumCTStates)))
	}
	if on(MSrcRange) {
		cross(rangeParts(DimSrc0, e.SrcRange, e.Family, neg(MSrcRange)))
	}
	if on(MDstRange) {
		cross(rangeParts(DimDst0, e.DstRange, e.Family, neg(MDstRange)))
	}
	if on(MLen) {
		one(DimLen, uint32(e.LenLo), uint32(e.LenHi), neg(MLen))
	}
	if on(MTTL) {
		one(DimTTL, uint32(e.TTLLo), uint32(e.TTLHi), neg(MTTL))
	}
	// byte masks: a DSCP value is one range of the TOS byte, an ECN
	// codepoint 64 (the leaf's exact check decides those)
	for _, t := range []struct {
		bit       uint64
		d         int
		mask, cmp uint8
	}{{MTOS, DimTOS, e.TOSMask, e.TOSCmp}, {MECNIP, DimTOS, 3, e.ECNIP}, {MECNTCP, DimTCPFlags, e.ECNMask, e.ECNCmp}} {
		if !on(t.bit) {
			continue
		}
		var parts []part
		for _, r := range maskRanges(t.mask, t.cmp, neg(t.bit)) {
			parts = append(parts, part{t.d: r})
		}
		if len(parts) <= 16 {
			cross(parts)
		} else {
			exact = false
		}
	}
	if on(MICMPType) {
		t := uint32(e.ICMPType) << 8
		lo, hi := t, t|0xff
		if on(MICMPCode) {
			lo, hi = t|uint32(e.ICMPCode), t|uint32(e.ICMPCode)
		}
		one(DimICMP, lo, hi, neg(MICMPType))
	}
	// Flags: an L4 test needs KeyL4; -f is KeyFrag alone; ! -f is {0, KeyL4};
	// the packet type (below the flags) must be one of PktTypes. Values no
	// packet has (type 3, KeyFrag|KeyL4) stay in: the ranges stay few.
	var flagParts []part
	for v := uint32(0); v <= fullBox[DimFlags][1]; v++ {
		fl, pt := v>>KeyFlagsShift, v&(1<<KeyFlagsShift-1)
		if m&ML4 != 0 && fl&KeyL4 == 0 || on(MFrag) && (fl&KeyFrag != 0) == neg(MFrag) ||
			on(MPktType) && pt < NumPktTypes && e.PktTypes&(1<<pt) == 0 {
			continue
		}
		if n := len(flagParts); n > 0 && flagParts[n-1][DimFlags][1] == v-1 {
			flagParts[n-1][DimFlags] = [2]uint32{flagParts[n-1][DimFlags][0], v}
			continue
		}
		flagParts = append(flagParts, part{DimFlags: {v, v}})
	}
	cross(flagParts)
	return bs, exact
}

// EntryRanges is e as ranges of the key (see Ranges).
func EntryRanges(e *Entry) Ranges {
	return boxRanges(entryBoxes(e))
}

// boxRanges is the Ranges of an entry with boxes bs: its dimensions
// narrower than the domain, when it has one exact box and few enough.
func boxRanges(bs []box, exact bool) Ranges {
	var r Ranges
	if !exact || len(bs) != 1 {
		return r
	}
	for d := range NumDims {
		if bs[0][d] == fullBox[d] {
			continue
		}
		if int(r.N) == RangesMax {
			return Ranges{}
		}
		r.Dim[r.N], r.Lo[r.N], r.Hi[r.N] = uint8(d), bs[0][d][0], bs[0][d][1]
		r.N++
	}
	r.Exact = true
	return r
}

// rangeParts is an address range (-m iprange) as boxes over the address
// words from d0 (one word for IPv4, four for IPv6), or the addresses
// outside it when negated. Over the words a range is lexicographic: the
// words before the first that differs are fixed, that word is at the lower
// bound, strictly between or at the upper bound, and the rest is a
// half-open range in turn, so a range takes at most 2n-1 boxes, a range of
// whole prefixes one. A reversed range (lo > hi) holds no address.
func rangeParts(d0 int, r AddrRange, fam rules.Family, negated bool) []map[int][2]uint32 {
	type part = map[int][2]uint32
	n := 4
	if fam == rules.FamilyIPv4 {
		n = 1
	}
	lo, hi := r.Words(n)
	top := ^uint32(0)
	fixed := func(w int, v uint32, ps []part) []part {
		for _, p := range ps {
			p[d0+w] = [2]uint32{v, v}
		}
		return ps
	}
	// bound: the words from w of the numbers >= v (up) or <= v (!up)
	var bound func(w int, v []uint32, up bool) []part
	bound = func(w int, v []uint32, up bool) []part {
		free := true // the words after w leave the bound open
		for _, x := range v[w+1:] {
			free = free && (up && x == 0 || !up && x == top)
		}
		if free {
			if up {
				return []part{{d0 + w: {v[w], top}}}
			}
			return []part{{d0 + w: {0, v[w]}}}
		}
		out := fixed(w, v[w], bound(w+1, v, up))
		if up && v[w] < top {
			out = append(out, part{d0 + w: {v[w] + 1, top}})
		}
		if !up && v[w] > 0 {
			out = append(out, part{d0 + w: {0, v[w] - 1}})
		}
		return out
	}
	var between func(w int) []part
	between = func(w int) []part {
		switch {
		case w == n-1:
			return []part{{d0 + w: {lo[w], hi[w]}}}
		case lo[w] == hi[w]:
			return fixed(w, lo[w], between(w+1))
		}
		out := fixed(w, lo[w], bound(w+1, lo, true))
		if hi[w]-lo[w] >= 2 {
			out = append(out, part{d0 + w: {lo[w] + 1, hi[w] - 1}})
		}
		return append(out, fixed(w, hi[w], bound(w+1, hi, false))...)
	}
	inOrder := slices.Compare(lo, hi) <= 0
	switch {
	case !negated && !inOrder:
		return nil
	case !negated:
		return between(0)
	case !inOrder:
		return []part{{}}
	}
	var out []part // below lo, or above hi
	if below, ok := stepWords(lo, -1); ok {
		out = append(out, bound(0, below, false)...)
	}
	if above, ok := stepWords(hi, 1); ok {
		out = append(out, bound(0, above, true)...)
	}
	return out
}

// stepWords is the number v (words, most significant first) plus one
// (by 1) or minus one (by -1); false when that wraps around.
func stepWords(v []uint32, by int) ([]uint32, bool) {
	out := slices.Clone(v)
	for w := len(out) - 1; w >= 0; w-- {
		old := out[w]
		out[w] += uint32(by)
		if by > 0 && old != ^uint32(0) || by < 0 && old != 0 {
			return out, true
		}
	}
	return nil, false
}

// complementRanges is [0, top] minus [lo, hi]: at most two ranges.
func complementRanges(lo, hi, top uint32) [][2]uint32 {
	var out [][2]uint32
	if lo > 0 {
		out = append(out, [2]uint32{0, lo - 1})
	}
	if hi < top {
		out = append(out, [2]uint32{hi + 1, top})
	}
	return out
}

// maskRanges lists the byte values v with (v&mask == cmp) != negated as
// ranges, stopping early once there are more than 16.
func maskRanges(mask, cmp uint8, negated bool) [][2]uint32 {
	var out [][2]uint32
	for v := 0; v < 256; v++ {
		if (uint8(v)&mask == cmp) == negated {
			continue
		}
		if n := len(out); n > 0 && out[n-1][1] == uint32(v)-1 {
			out[n-1][1] = uint32(v)
			continue
		}
		if len(out) > 16 {
			break
		}
		out = append(out, [2]uint32{uint32(v), uint32(v)})
	}
	return out
}

func addrWords(addr, mask [16]byte) (lo, hi []uint32) {
	for w := 0; w < 4; w++ {
		a := binary.BigEndian.Uint32(addr[4*w:])
		mk := binary.BigEndian.Uint32(mask[4*w:])
		lo, hi = append(lo, a&mk), append(hi, a&mk|^mk)
	}
	return lo, hi
}

// ML4 is FW_M_L4: the tests that need an L4 header.
const ML4 = MSPort | MDPort | MTCPFlags | MICMPType | MICMPCode | ML4Hdr | MECNTCP | MMSS

func macWords(m [6]byte) (hi, lo uint32) {
	return uint32(m[0])<<8 | uint32(m[1]), binary.BigEndian.Uint32(m[2:])
}

// Dev is what the data plane knows of a packet's devices, as ifindexes:
// the one it arrived on (In) and the one it leaves by (Out; 0: none, as in
// INPUT, or a FORWARD packet the FIB names no egress device for).
type Dev struct{ In, Out uint32 }

// KeyOf computes the classification key of a packet as the data plane
// does (lib/classify.h fw_key).
func KeyOf(p *RefPacket, dev Dev) Key {
	var k Key
	addrWords := func(d0 int, a [16]byte, v4 bool) {
		n := 4
		if v4 {
			n = 1
		}
		for w := 0; w < n; w++ {
			k[d0+w] = binary.BigEndian.Uint32(a[4*w:])
		}
	}
	var src, dst [16]byte
	v4 := p.Src.Is4()
	if v4 {
		s, d := p.Src.As4(), p.Dst.As4()
		copy(src[:], s[:])
		copy(dst[:], d[:])
	} else {
		src, dst = p.Src.As16(), p.Dst.As16()
	}
	addrWords(DimSrc0, src, v4)
	addrWords(DimDst0, dst, v4)
	k[DimProto] = uint32(p.Proto)
	k[DimIfindex] = dev.In
	k[DimOIfindex] = dev.Out
	k[DimFlags] = uint32(PktTypeOf(p))
	k[DimVLAN] = VLANUntagged
	if p.Tagged {
		k[DimVLAN] = uint32(p.VLAN)
	}
	k[DimMACSrcHi], k[DimMACSrcLo] = macWords(p.SrcMAC)
	k[DimMACDstHi], k[DimMACDstLo] = macWords(p.DstMAC)
	if p.Fragment {
		k[DimFlags] |= KeyFrag << KeyFlagsShift
	}
	if p.L4 {
		k[DimFlags] |= KeyL4 << KeyFlagsShift
		k[DimSPort], k[DimDPort] = uint32(p.SPort), uint32(p.DPort)
		k[DimTCPFlags] = uint32(p.TCPFlags)
		k[DimICMP] = uint32(p.ICMPType)<<8 | uint32(p.ICMPCode)
	}
	k[DimCTState] = uint32(p.CTState)
	k[DimLen], k[DimTTL], k[DimTOS] = uint32(p.Len), uint32(p.TTLSeen()), uint32(p.TOS)
	return k
}

// Lookup walks the trees of root r for key k as the data plane does and
// returns the candidate entries of the leaves reached, in priority order.
func (t *Tables) Lookup(r int, k Key) []uint32 {
	var out []uint32
	for _, g := range t.Roots[r].Groups {
		if g == NoTree {
			continue
		}
		leaf, _ := t.walk(g, &k)
		out = append(out, t.LeafEntries(leaf)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// walk returns the leaf reference key k reaches from tree reference ref,
// and the nodes it visits (fw_tree's walk).
func (t *Tables) walk(ref uint32, k *Key) (leaf uint32, steps int) {
	for !IsLeafRef(ref) {
		n := &t.Nodes[ref]
		ref = n.Child[n.ChildOf(k)]
		steps++
	}
	return ref, steps
}

// item is one box of one entry.
type item struct {
	entry   uint32
	exact   bool // the box holds only packets the entry matches
	decides bool // Entry.Decides: a packet it matches goes no further
	box     box
}

// treeBuilder builds the trees of one generation into shared node and
// leaf arrays.
type treeBuilder struct {
	t     *Tables
	items []item
	rnd   *rand.Rand
	treeOpts
	maxLeaf int       // the most candidates of a leaf
	depth   int       // the most fat nodes on a walk
	bin     []binNode // the binary tree being built
	cost    []binCost // pathCost of each binary node ({-1, 0}: not yet known)
	shape   []int8    // the fat node's shape pathCost chose for each binary node
	splits  int       // its interior nodes
}

// treeOpts bound a generation's trees.
type treeOpts struct {
	maxNodes     int // fat nodes
	maxLeafSlots int // leaf slots a reference can address (MaxLeafSlots)
	// onTree, when set (tests), sees each binary tree and the fat tree
	// collapse made of it, once the fat nodes are in Tables.Nodes. bin
	// is reused for the next tree.
	onTree func(bin []binNode, binRoot, fatRoot uint32)
}

// binNode is a node of the binary tree that collapse turns into fat
// nodes: key[dim] <= thresh goes to left, else right (indices in
// treeBuilder.bin). A leaf holds its reference (LeafRef) in left.
type binNode struct {
	thresh      uint32
	dim         uint8
	leaf        bool
	left, right uint32
}

// binCost is pathCost's answer for one binary node.
type binCost struct{ cost, leaves int64 }

// errTooBig is returned when a generation exceeds its memory bound.
type errTooBig struct{ what string }

func (e errTooBig) Error() string { return e.what }

func (b *treeBuilder) tooManyNodes() error {
	return errTooBig{fmt.Sprintf("the classifier trees need more than %d nodes "+
		"(rules overlapping in many fields multiply them; load with a larger --max-rules, or simplify)", b.maxNodes)}
}

// build returns the binary node of a tree over list (item indices, in
// priority order) restricted to region.
func (b *treeBuilder) build(region box, list []int32, depth, parent int) (uint32, error) {
	list = b.prune(region, list)
	ents := b.entries(list)
	if len(ents) > leafTarget && depth < MaxDepth-1 {
		if dim, thr, ok := b.split(region, list, len(ents), parent); ok {
			// A fat node absorbs at most NodeThresh splits: past this
			// many, the fat tree cannot fit in what is left.
			if b.splits++; b.splits > NodeThresh*(b.maxNodes-len(b.t.Nodes)) {
				return 0, b.tooManyNodes()
			}
			idx := uint32(len(b.bin))
			b.bin = append(b.bin, binNode{dim: uint8(dim), thresh: thr})
			lr, rr := region, region
			lr[dim][1], rr[dim][0] = thr, thr+1
			l, err := b.build(lr, list, depth+1, dim)
			if err != nil {
				return 0, err
			}
			r, err := b.build(rr, list, depth+1, dim)
			if err != nil {
				return 0, err
			}
			b.bin[idx].left, b.bin[idx].right = l, r
			return idx, nil
		}
	}
	if len(ents) > MaxLeaf {
		return 0, errTooBig{fmt.Sprintf("%d rules overlap so that no field separates them (a leaf holds at most %d): "+
			"they differ only in negated addresses or masked TCP flags", len(ents), MaxLeaf)}
	}
	ref := LeafRef(0, 0) // an empty leaf points nowhere
	switch {
	case len(ents) == 1:
		ref = LeafRef(ents[0], 1) // the entry itself, no slot
	case len(ents) > 1:
		if len(b.t.Leaves)+len(ents) > b.maxLeafSlots {
			return 0, errTooBig{fmt.Sprintf("the classifier trees need more than %d leaf slots, "+
				"the most a generation can address (rules overlapping in many fields multiply them; simplify)", b.maxLeafSlots)}
		}
		ref = LeafRef(uint32(len(b.t.Leaves)), uint32(len(ents)))
		b.t.Leaves = append(b.t.Leaves, ents...)
	}
	b.bin = append(b.bin, binNode{leaf: true, left: ref})
	b.maxLeaf = max(b.maxLeaf, len(ents))
	return uint32(len(b.bin) - 1), nil
}

// tree builds the tree of one group and returns its root reference.
func (b *treeBuilder) tree(list []int32) (uint32, error) {
	b.bin, b.splits = b.bin[:0], 0
	root, err := b.build(fullBox, list, 0, -1)
	if err != nil {
		return 0, err
	}
	b.cost, b.shape = slices.Grow(b.cost[:0], len(b.bin))[:len(b.bin)], slices.Grow(b.shape[:0], len(b.bin))[:len(b.bin)]
	for k := range b.cost {
		b.cost[k] = binCost{-1, 0}
	}
	ref, levels, err := b.collapse(root)
	if err != nil {
		return 0, err
	}
	b.depth = max(b.depth, levels)
	if b.onTree != nil {
		b.onTree(b.bin, root, ref)
	}
	return ref, nil
}

// oneTree builds one tree over list (all groups of a root) if it takes at
// most oneTreeNodes fat nodes and oneTreeSlots leaf slots per item: rules
// that do not replicate (disjoint ones, and ACL-like sets whose exceptions
// nest inside broader rules) then cost a packet one walk. ok is false, and
// nothing is kept, when it takes more: rules narrow in different fields
// multiply one tree's nodes, and the groups' trees bound that. The budget
// also bounds the work of a try that fails (the builder stops at it).
func (b *treeBuilder) oneTree(list []int32) (ref uint32, ok bool, err error) {
	if len(list) == 0 {
		return 0, false, nil
	}
	nodes, slots, maxLeaf, depth := len(b.t.Nodes), len(b.t.Leaves), b.maxLeaf, b.depth
	maxNodes, maxSlots := b.maxNodes, b.maxLeafSlots
	b.maxNodes = min(maxNodes, nodes+oneTreeNodes*len(list)/oneTreePer+oneTreeFloorNodes)
	b.maxLeafSlots = min(maxSlots, slots+oneTreeSlots*len(list)+oneTreeFloorSlots)
	ref, err = b.tree(list)
	b.maxNodes, b.maxLeafSlots = maxNodes, maxSlots
	if err == nil {
		return ref, true, nil
	}
	if !errors.As(err, new(errTooBig)) {
		return 0, false, err
	}
	b.t.Nodes, b.t.Leaves, b.maxLeaf, b.depth = b.t.Nodes[:nodes], b.t.Leaves[:slots], maxLeaf, depth
	return 0, false, nil
}

// oneTreeNodes/oneTreePer fat nodes and oneTreeSlots leaf slots per item
// bound one tree over all of a root's rules (oneTree): 32 bytes of nodes
// and 16 of leaf slots per item, plus 16 KiB of nodes and 32 KiB of slots,
// so that small rule sets, whose replication costs little, keep one tree.
// Disjoint rules take ~0.3 nodes per rule and no slot; ClassBench-style
// ACL sets 0.3 nodes and 0.6 slots; FW and IPC sets 7–10 nodes and 50–110
// slots, and go to groups.
const (
	oneTreeNodes      = 1
	oneTreePer        = 2
	oneTreeSlots      = 2
	oneTreeFloorNodes = 256
	oneTreeFloorSlots = 4096
)

// collapse turns the binary subtree at bin[i] into fat nodes and returns
// its reference and the most fat nodes a walk through it visits. A fat
// node starts at a binary node and takes in the best of two shapes (the
// one that holds more binary splits; sameDim on a tie):
//
//   - sameDim: the descendants that split the top's dimension d too,
//     nearest first (so the result stays balanced), up to NodeThresh of
//     them. Every threshold of a node over [lo, hi] has lo <= t < hi, so
//     the absorbed thresholds in order are strictly ascending, and the
//     subtrees left below them, left to right, are the children: a key
//     goes to child c, the number of thresholds below key[d], which is
//     where the binary nodes would send it.
//   - twoDims: the top 3 levels of the binary tree as they are, where
//     they split d or one other dimension (the one that lets it hold the
//     most): each split at its place (Node), a subtree that splits a
//     third dimension, or a leaf, a child of its own.
//
// The decisions stay the same; a walk takes fewer steps. Where
// dimensions alternate (a port under each address) the second shape
// keeps 3 levels in one node where the first kept 1.
func (b *treeBuilder) collapse(i uint32) (ref uint32, levels int, err error) {
	top := b.bin[i]
	if top.leaf {
		return top.left, 0, nil
	}
	if len(b.t.Nodes) >= b.maxNodes {
		return 0, 0, b.tooManyNodes()
	}
	idx := uint32(len(b.t.Nodes))
	b.t.Nodes = append(b.t.Nodes, Node{}) // children follow their parent
	node, subs := b.bestNode(i)
	for k, at := range subs {
		if at < 0 {
			continue
		}
		c, lv, err := b.collapse(uint32(at))
		if err != nil {
			return 0, 0, err
		}
		node.Child[k] = c
		levels = max(levels, lv)
	}
	b.t.Nodes[idx] = node
	return idx, levels + 1, nil
}

// bestNode is the node collapse makes at bin[i]: of sameDim and twoDims
// with each other dimension, the shape whose subtree costs the least
// (pathCost), and the binary subtree under each of its children.
func (b *treeBuilder) bestNode(i uint32) (Node, [NodeChildren]int32) {
	b.pathCost(i)
	if d2 := b.shape[i]; d2 >= 0 {
		return b.twoDims(i, uint8(d2))
	}
	return b.sameDim(i)
}

// pathCost is the least total of the fat nodes the walks to the
// non-empty leaves under bin[i] visit (each leaf's walk counted once:
// spread traffic hits every rule), over the shapes collapse can give the
// node at i and, recursively, those below; b.shape[i] records the
// shape: -1 sameDim, else the other dimension of twoDims.
func (b *treeBuilder) pathCost(i uint32) (cost, leaves int64) {
	n := &b.bin[i]
	if n.leaf {
		if _, count := LeafOf(n.left); count > 0 {
			return 0, 1
		}
		return 0, 0
	}
	if c := b.cost[i]; c.cost >= 0 {
		return c.cost, c.leaves
	}
	sum := func(subs [NodeChildren]int32) (cost, leaves int64) {
		for _, at := range subs {
			if at >= 0 {
				c, l := b.pathCost(uint32(at))
				cost, leaves = cost+c, leaves+l
			}
		}
		return cost + leaves, leaves
	}
	_, subs := b.sameDim(i)
	best, leaves := sum(subs)
	shape := int8(-1)
	for _, d2 := range b.otherDims(i) {
		_, s2 := b.twoDims(i, d2)
		if c, _ := sum(s2); c < best {
			best, shape = c, int8(d2)
		}
	}
	b.cost[i], b.shape[i] = binCost{best, leaves}, shape
	return best, leaves
}

// emptyNode is a node with no threshold in use: every key goes to child
// 0, and the other children are the empty leaf. subs (for collapse: the
// binary subtree under each child, -1 none) are all -1.
func emptyNode(dim uint8) (n Node, subs [NodeChildren]int32) {
	n.Dim, n.Dim2 = dim, dim
	for k := range n.Thresh {
		n.Thresh[k] = NoThresh
	}
	for k := range n.Child {
		n.Child[k] = LeafRef(0, 0) // never taken: no key is above NoThresh
		subs[k] = -1
	}
	return n, subs
}

// sameDim is collapse's node of one dimension over bin[i], and the
// binary subtree under each of its children.
func (b *treeBuilder) sameDim(i uint32) (Node, [NodeChildren]int32) {
	top := b.bin[i]
	type sub struct {
		at    uint32 // in bin
		depth int    // below top
	}
	front := []sub{{top.left, 1}, {top.right, 1}}
	ths := []uint32{top.thresh}
	for len(ths) < NodeThresh {
		next := -1 // the shallowest subtree whose root splits top.dim, leftmost first
		for k, f := range front {
			if n := &b.bin[f.at]; !n.leaf && n.dim == top.dim && (next < 0 || f.depth < front[next].depth) {
				next = k
			}
		}
		if next < 0 {
			break
		}
		n, d := b.bin[front[next].at], front[next].depth+1
		ths = slices.Insert(ths, next, n.thresh)
		front = slices.Replace(front, next, next+1, sub{n.left, d}, sub{n.right, d})
	}
	node, subs := emptyNode(top.dim)
	node.N = uint8(len(ths))
	copy(node.Thresh[:], ths)
	for k, f := range front {
		subs[k] = int32(f.at)
	}
	return node, subs
}

// otherDims lists the dimensions other than its own that the binary
// nodes in the top 3 levels under bin[i] split.
func (b *treeBuilder) otherDims(i uint32) []uint8 {
	var ds []uint8
	top := b.bin[i]
	for _, c := range [2]uint32{top.left, top.right} {
		if n := b.bin[c]; !n.leaf {
			for _, at := range [3]uint32{c, n.left, n.right} {
				if m := b.bin[at]; !m.leaf && m.dim != top.dim && !slices.Contains(ds, m.dim) {
					ds = append(ds, m.dim)
				}
			}
		}
	}
	return ds
}

// twoDims is collapse's node of the top 3 levels under bin[i] that split
// its dimension or d2, and the binary subtree under each child.
func (b *treeBuilder) twoDims(i uint32, d2 uint8) (Node, [NodeChildren]int32) {
	dim := b.bin[i].dim
	node, subs := emptyNode(dim)
	node.Dim2 = d2
	// place puts bin[at] at threshold p, over children p-s+1 .. p+s.
	var place func(at uint32, p, s int)
	place = func(at uint32, p, s int) {
		n := b.bin[at]
		if n.leaf || (n.dim != dim && n.dim != d2) {
			subs[p-s+1] = int32(at)
			return
		}
		node.Thresh[p] = n.thresh
		if n.dim != dim {
			node.Mask |= 1 << p
		}
		node.N++
		if s == 1 {
			subs[p], subs[p+1] = int32(n.left), int32(n.right)
			return
		}
		place(n.left, p-s/2, s/2)
		place(n.right, p+s/2, s/2)
	}
	place(i, 3, 4)
	return node, subs
}

// entries lists the distinct entries of items, in priority order.
func (b *treeBuilder) entries(list []int32) []uint32 {
	out := make([]uint32, 0, len(list))
	for _, i := range list {
		e := b.items[i].entry
		if len(out) == 0 || out[len(out)-1] != e {
			out = append(out, e)
		}
	}
	return out
}

// prune keeps the items whose box meets region, in order, and stops after
// the first exact, deciding one that covers what of the region any kept
// item reaches (region ∩ their bounding box): a packet there matches it, so
// nothing after it can decide or log; a packet outside matches none of
// them. A LOG entry never ends the list: the walk goes on past it.
func (b *treeBuilder) prune(region box, list []int32) []int32 {
	out := make([]int32, 0, len(list))
	var bbox box
	for _, i := range list {
		bx := &b.items[i].box
		meets := true
		for d := 0; d < NumDims; d++ {
			if bx[d][0] > region[d][1] || bx[d][1] < region[d][0] {
				meets = false
				break
			}
		}
		if !meets {
			continue
		}
		if len(out) == 0 {
			bbox = *bx
		}
		for d := 0; d < NumDims; d++ {
			bbox[d] = [2]uint32{min(bbox[d][0], bx[d][0]), max(bbox[d][1], bx[d][1])}
		}
		out = append(out, i)
	}
	for d := 0; d < NumDims; d++ {
		bbox[d] = [2]uint32{max(bbox[d][0], region[d][0]), min(bbox[d][1], region[d][1])}
	}
	for k, i := range out {
		if !b.items[i].exact || !b.items[i].decides {
			continue
		}
		bx, covers := &b.items[i].box, true
		for d := 0; d < NumDims; d++ {
			if bx[d][0] > bbox[d][0] || bx[d][1] < bbox[d][1] {
				covers = false
				break
			}
		}
		if covers {
			return b.unshadowed(region, out[:k+1])
		}
	}
	return b.unshadowed(region, out)
}

// shadowMax is the longest list unshadowed prunes: it compares each item
// with the exact, deciding ones before it (quadratic), and the lists
// that become leaves are at most MaxLeaf long.
const shadowMax = 2 * MaxLeaf

// unshadowed drops, from a list of at most shadowMax items, those whose
// box within region lies inside the box of an earlier exact, deciding
// item: a packet there matches that one first. Rule sets that repeat a
// rule's box with other verdicts further down (ClassBench-style sets do:
// fifteen `-d 45.0.0.0/8 -p icmp` in one leaf of 26) keep the first.
func (b *treeBuilder) unshadowed(region box, list []int32) []int32 {
	if len(list) > shadowMax {
		return list
	}
	var covers []*box
	out := list[:0]
	for _, i := range list {
		it := &b.items[i]
		if slices.ContainsFunc(covers, func(c *box) bool { return holds(c, &it.box, &region) }) {
			continue
		}
		out = append(out, i)
		if it.exact && it.decides {
			covers = append(covers, &it.box)
		}
	}
	return out
}

// holds tells whether box c holds what of box x lies in region.
func holds(c, x, region *box) bool {
	for d := 0; d < NumDims; d++ {
		if c[d][0] > max(x[d][0], region[d][0]) || c[d][1] < min(x[d][1], region[d][1]) {
			return false
		}
	}
	return true
}

// split picks the dimension and threshold that best balance the entries
// on both sides (HyperSplit's heuristic, on a sample for large lists). ok
// is false when no split shrinks the larger side to 90 % or less (a split
// that does not would replicate nearly everything for nothing), unless the
// list is too long for a leaf. A split of dimension prefer (the parent's)
// nearly as good as the best is taken instead (see sameDimSlack).
func (b *treeBuilder) split(region box, list []int32, n, prefer int) (dim int, thr uint32, ok bool) {
	sample := list
	if len(list) > 512 {
		sample = make([]int32, 512)
		for i := range sample {
			sample[i] = list[b.rnd.IntN(len(list))]
		}
	}
	best := len(list) // a split must shrink the larger side...
	clean := false
	switch {
	case n <= leafSplitClean:
		// ...for a short list only by a clean partition (no entry on both
		// sides): 1-candidate leaves when rules are disjoint, at no cost
		// in memory when they overlap.
		clean = true
	case n <= MaxLeaf:
		// ...to 90 % when a leaf could hold the list: a split that does
		// not replicates nearly everything for little.
		best = len(list) * 9 / 10
	}
	bestSum := 2 * len(list)
	limit := best
	var ( // the best split of dimension prefer (the parent's)
		pBest, pSum int
		pThr        uint32
		pOK         bool
	)
	var pts []uint32
	for d := 0; d < NumDims; d++ {
		pts = pts[:0]
		for _, i := range sample {
			bx := b.items[i].box[d]
			if bx[0] > region[d][0] && bx[0] <= region[d][1] {
				pts = append(pts, bx[0]-1)
			}
			if bx[1] < region[d][1] && bx[1] >= region[d][0] {
				pts = append(pts, bx[1])
			}
		}
		if len(pts) == 0 {
			continue
		}
		slices.Sort(pts)
		pts = slices.Compact(pts)
		for _, q := range []int{len(pts) / 2, len(pts) / 4, 3 * len(pts) / 4} {
			t := pts[q]
			nl, nr := 0, 0
			for _, i := range list {
				bx := b.items[i].box[d]
				if bx[0] <= t {
					nl++
				}
				if bx[1] > t {
					nr++
				}
			}
			worst, sum := max(nl, nr), nl+nr
			if clean && sum > len(list) {
				continue
			}
			if d == prefer && worst < limit && (!pOK || worst < pBest || worst == pBest && sum < pSum) {
				pBest, pSum, pThr, pOK = worst, sum, t, true
			}
			if worst < best || (worst == best && ok && sum < bestSum) {
				best, bestSum, dim, thr, ok = worst, sum, d, t, true
			}
		}
	}
	if !ok && n > MaxLeaf {
		// No split shrinks the list (every box reaches past each tried
		// edge on one side, e.g. all hold one corner of the region): cut
		// along the first deciding exact box instead: inside it, pruning
		// keeps what comes before it; outside, it is gone.
		for _, i := range list {
			it := &b.items[i]
			if !it.exact || !it.decides {
				continue
			}
			for d := 0; d < NumDims; d++ {
				if bx := it.box[d]; bx[0] > region[d][0] {
					return d, bx[0] - 1, true
				} else if bx[1] < region[d][1] {
					return d, bx[1], true
				}
			}
			break // it covers the region: prune kept nothing after it
		}
	}
	if pOK && pBest <= best+best/sameDimSlack && pSum <= bestSum {
		return prefer, pThr, true
	}
	return dim, thr, ok
}

// Groups: the rules of a root are split by the field that selects them
// most (CutSplit/EffiCuts' remedy for replication: rules that are narrow in
// different fields, in one tree, multiply each other's nodes). A packet
// walks every group's tree and takes the best match.
const (
	groupSrc = iota
	groupDst
	groupDPort
	groupSPort
	groupOther
	MaxGroups // FW_MAX_GROUPS
)

// NoTree marks an empty group (FW_NO_TREE).
const NoTree = ^uint32(0)

// group classifies a box by its most selective field: the one whose range
// fixes the most bits of its dimension's domain (fullBox: an IPv4 address
// word 32, a port 16, the protocol 8). A wildcard fixes none, whatever
// the width of its domain.
func group(bx *box, v6 bool) int {
	width := func(r [2]uint32) float64 { return math.Log2(float64(r[1]-r[0]) + 1) }
	fixed := func(d int) float64 { return width(fullBox[d]) - width(bx[d]) }
	addr := func(d0 int) float64 {
		if !v6 {
			return fixed(d0)
		}
		s := 0.0
		for w := 0; w < 4; w++ {
			s += fixed(d0 + w)
		}
		return s
	}
	other := 0.0
	for _, d := range []int{DimProto, DimIfindex, DimVLAN, DimMACSrcHi, DimMACSrcLo, DimMACDstHi, DimMACDstLo, DimICMP} {
		other += fixed(d)
	}
	spec := [MaxGroups]float64{addr(DimSrc0), addr(DimDst0), fixed(DimDPort), fixed(DimSPort), other}
	g, best := groupOther, 0.0
	for i, v := range spec {
		if v > best+1e-9 {
			g, best = i, v
		}
	}
	return g
}

// buildTrees fills t.Nodes, t.Leaves and t.Roots from t.Entries.
func buildTrees(t *Tables, pol *rules.RuleSet, opts treeOpts) (TreeStats, error) {
	b := &treeBuilder{t: t, rnd: rand.New(rand.NewPCG(1, 2)), treeOpts: opts}
	type ebox struct {
		boxes []box
		exact bool
	}
	// The priority table's entries follow the rules' (Tables.Prio).
	n := len(t.Entries) + len(t.Prio)
	eb := make([]ebox, n)
	t.Ranges = make([]Ranges, n)
	for i := range n {
		eb[i].boxes, eb[i].exact = entryBoxes(t.entryAt(uint32(i)))
		t.Ranges[i] = boxRanges(eb[i].boxes, eb[i].exact)
	}
	groups := 0
	// trees builds r's trees over the generation's entries i of family v6
	// that in takes: one tree while it stays within oneTreeBudget (a
	// packet then walks one tree, not one per group), else one per group
	// of entries by their most selective field.
	trees := func(r *Root, v6 bool, in func(i int) bool) error {
		fam := rules.FamilyIPv4
		if v6 {
			fam = rules.FamilyIPv6
		}
		var lists [MaxGroups][]int32
		var all []int32
		for i := range n {
			e := t.entryAt(uint32(i))
			if !in(i) || (e.Family != rules.FamilyAny && e.Family != fam) {
				continue
			}
			for _, bx := range eb[i].boxes {
				g := group(&bx, v6)
				b.items = append(b.items, item{entry: uint32(i), exact: eb[i].exact, decides: e.Decides(), box: bx})
				lists[g] = append(lists[g], int32(len(b.items)-1))
				all = append(all, int32(len(b.items)-1))
			}
		}
		for g := range r.Groups {
			r.Groups[g] = NoTree
		}
		if ref, ok, err := b.oneTree(all); err != nil {
			return err
		} else if ok {
			r.Groups[0] = ref
			groups++
			lists = [MaxGroups][]int32{}
		}
		for g := range r.Groups {
			if len(lists[g]) == 0 {
				continue
			}
			ref, err := b.tree(lists[g])
			if err != nil {
				return err
			}
			r.Groups[g] = ref
			groups++
		}
		return nil
	}
	for c := rules.Chain(0); c < rules.NumChains; c++ {
		for v6 := 0; v6 < 2; v6++ {
			fam := rules.FamilyIPv4
			if v6 == 1 {
				fam = rules.FamilyIPv6
			}
			r := Root{RuleID: PolicyID(uint8(c), v6 == 1), Action: ActAccept, Reason: ReasonPolicyAccept}
			if pol.PolicyFor(c, fam) == rules.VerdictDrop {
				r.Action, r.Reason = ActDrop, ReasonPolicyDrop
			}
			if err := trees(&r, v6 == 1, func(i int) bool { return i < len(t.Entries) && t.Entries[i].Chain == c }); err != nil {
				return TreeStats{}, err
			}
			t.Roots[int(c)*2+v6] = r
		}
	}
	for v6 := 0; v6 < 2 && pol.PriorityOn(); v6++ { // the priority table's roots (priority.go)
		r := prioRoot(pol)
		if err := trees(&r, v6 == 1, func(i int) bool { return i >= len(t.Entries) }); err != nil {
			return TreeStats{}, err
		}
		t.PrioRoots[v6] = r
	}
	return TreeStats{Nodes: len(t.Nodes), LeafSlots: len(t.Leaves), MaxLeaf: b.maxLeaf, MaxDepth: b.depth, Trees: groups, Work: t.Work()}, nil
}

// TreeStats describes a built classifier.
type TreeStats struct {
	Nodes     int `json:"nodes"`
	LeafSlots int `json:"leaf_slots"`
	MaxLeaf   int `json:"max_leaf"`  // the most candidates one leaf holds
	MaxDepth  int `json:"max_depth"` // the most (fat) nodes one walk visits
	Trees     int `json:"trees"`     // non-empty groups over all roots
	// Work is the most classifier work one packet can cause
	// (Tables.Work).
	Work Work `json:"work"`
}

// WalkCost is what one packet's walk reads (Tables.WalkCostOf): the
// lines behind the classifier's cold cost (docs/classifier.md).
type WalkCost struct {
	Trees int // trees walked
	Nodes int // fat nodes visited (64 B each)
	Cands int // candidate records read (64 B each)
	Slots int // distinct 64-byte blocks of leaf slots read (8 B a slot in the kernel)
}

// Steps is c's node steps and candidate checks together (as Work.Steps).
func (c WalkCost) Steps() int { return c.Nodes + c.Cands }

// WalkCostOf follows fw_tree for key k from root r: each tree down to its
// leaf, then the leaf's candidates in order until the first deciding one
// that matches by its ranges (an entry without exact ranges counts as a
// match: the benchmarks' rule sets have none; LOG and noted entries are
// passed) or one no better than the best so far.
func (t *Tables) WalkCostOf(r int, k Key) WalkCost {
	c, _ := t.walkOf(r, &k, false)
	return c
}

// walkOf is one walk of key k from root r, counted: what it reads, and
// full, the candidates among them that need the whole entry test
// (checksRanges). whole: every candidate of each leaf reached (the walk's
// bound: WalkWork); else the scan stops where the data plane's does
// (WalkCostOf).
func (t *Tables) walkOf(r int, k *Key, whole bool) (c WalkCost, full int) {
	best := NoTree
	for _, g := range t.Roots[r].Groups {
		if g == NoTree {
			continue
		}
		leaf, steps := t.walk(g, k)
		c.Trees++
		c.Nodes += steps
		first, count := LeafOf(leaf)
		lastLine := -1
		for j := range count {
			idx := first
			if count > 1 {
				if line := int(first+j) / 8; line != lastLine {
					c.Slots, lastLine = c.Slots+1, line
				}
				idx = t.Leaves[first+j]
			}
			if !whole && idx >= best {
				break
			}
			c.Cands++
			if !t.checksRanges(idx) {
				full++
			}
			if whole {
				continue
			}
			match := int(idx) >= len(t.Ranges) || !t.Ranges[idx].Exact || t.Ranges[idx].Match(k)
			if match && (int(idx) >= len(t.Entries) || t.Entries[idx].Decides()) {
				best = idx
				break
			}
		}
	}
	return c, full
}
