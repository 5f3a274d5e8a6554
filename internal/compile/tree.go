package compile

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// The classifier is a decision tree per (chain, family), built HyperSplit
// style: every interior node splits one packet dimension at a threshold
// (value <= Thresh goes left), every leaf lists the few entries that can
// still match, in priority order. The data plane walks at most MaxDepth
// nodes, then checks at most MaxLeaf entries exactly (fw_entry_match), so a
// packet's cost does not depend on the number of rules.
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
	DimICMP    // type << 8 | code
	DimFlags   // KeyFrag | KeyL4
	DimCTState // enum fw_ct_state
	NumDims
)

// Key flag bits (DimFlags) and the untagged VLAN value.
const (
	KeyFrag      = 1
	KeyL4        = 2
	VLANUntagged = 0x10000
)

// Limits of the walk in the data plane (FW_TREE_DEPTH, FW_LEAF_MAX).
const (
	MaxDepth = 32
	MaxLeaf  = 64
	// leafTarget is where the builder stops splitting; lists up to
	// leafSplitClean long are split further only without replication.
	leafTarget     = 1
	leafSplitClean = 4
)

// NumRoots is one tree per chain and family: root index = chain*2 + v6.
const NumRoots = int(rules.NumChains) * 2

// Key is a packet's classification key.
type Key [NumDims]uint32

// Node is one tree node (struct fw_node). A leaf lists Count entries at
// Leaves[First:First+Count].
type Node struct {
	Thresh      uint32
	Dim         uint8
	Leaf        bool
	Left, Right uint32 // children; for a leaf: First, Count
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
	b[DimFlags][1] = KeyL4 // KeyFrag|KeyL4 cannot happen
	b[DimCTState][1] = uint32(NumCTStates - 1)
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
	on := func(bit uint32) bool { return m&bit != 0 }
	neg := func(bit uint32) bool { return inv&bit != 0 }
	type part map[int][2]uint32 // dimension -> range
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
		one(DimIfindex, e.Ifindex, e.Ifindex, false)
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
	if on(MSrcSet) || on(MDstSet) {
		exact = false // set membership is no range: the leaf check decides
	}
	if on(MCTState) {
		var parts []part
		for s := uint32(0); s < uint32(NumCTStates); s++ {
			if e.CTState&(1<<s) == 0 {
				continue
			}
			if n := len(parts); n > 0 && parts[n-1][DimCTState][1] == s-1 {
				parts[n-1][DimCTState] = [2]uint32{parts[n-1][DimCTState][0], s}
				continue
			}
			parts = append(parts, part{DimCTState: {s, s}})
		}
		cross(parts)
	}
	if on(MICMPType) {
		t := uint32(e.ICMPType) << 8
		lo, hi := t, t|0xff
		if on(MICMPCode) {
			lo, hi = t|uint32(e.ICMPCode), t|uint32(e.ICMPCode)
		}
		one(DimICMP, lo, hi, neg(MICMPType))
	}
	// Flags: an L4 test needs KeyL4; -f is KeyFrag alone; ! -f is {0, KeyL4}.
	var flagParts []part
	for v := uint32(0); v <= KeyL4; v++ {
		if m&ML4 != 0 && v&KeyL4 == 0 || on(MFrag) && (v&KeyFrag != 0) == neg(MFrag) {
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
const ML4 = MSPort | MDPort | MTCPFlags | MICMPType | MICMPCode | ML4Hdr

func macWords(m [6]byte) (hi, lo uint32) {
	return uint32(m[0])<<8 | uint32(m[1]), binary.BigEndian.Uint32(m[2:])
}

// KeyOf computes the classification key of a packet as the data plane
// does (lib/classify.h fw_key).
func KeyOf(p *RefPacket, ifindex uint32) Key {
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
	k[DimIfindex] = ifindex
	k[DimVLAN] = VLANUntagged
	if p.Tagged {
		k[DimVLAN] = uint32(p.VLAN)
	}
	k[DimMACSrcHi], k[DimMACSrcLo] = macWords(p.SrcMAC)
	k[DimMACDstHi], k[DimMACDstLo] = macWords(p.DstMAC)
	if p.Fragment {
		k[DimFlags] |= KeyFrag
	}
	if p.L4 {
		k[DimFlags] |= KeyL4
		k[DimSPort], k[DimDPort] = uint32(p.SPort), uint32(p.DPort)
		k[DimTCPFlags] = uint32(p.TCPFlags)
		k[DimICMP] = uint32(p.ICMPType)<<8 | uint32(p.ICMPCode)
	}
	k[DimCTState] = uint32(p.CTState)
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
		n := t.Nodes[g]
		for !n.Leaf {
			if k[n.Dim] <= n.Thresh {
				n = t.Nodes[n.Left]
			} else {
				n = t.Nodes[n.Right]
			}
		}
		out = append(out, t.Leaves[n.Left:n.Left+n.Right]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// item is one box of one entry.
type item struct {
	entry   uint32
	exact   bool // the box holds only packets the entry matches
	decides bool // not a LOG entry: a packet it matches goes no further
	box     box
}

// treeBuilder builds the trees of one generation into shared node and
// leaf arrays.
type treeBuilder struct {
	t        *Tables
	items    []item
	rnd      *rand.Rand
	maxNodes int
	maxLeaf  int // the most candidates of a leaf
	depth    int // the deepest leaf
}

// errTooBig is returned when a generation exceeds its memory bound.
type errTooBig struct{ what string }

func (e errTooBig) Error() string { return e.what }

func (b *treeBuilder) node(n Node) (uint32, error) {
	if len(b.t.Nodes) >= b.maxNodes {
		return 0, errTooBig{fmt.Sprintf("the classifier trees need more than %d nodes "+
			"(rules overlapping in many fields multiply them; load with a larger --max-rules, or simplify)", b.maxNodes)}
	}
	b.t.Nodes = append(b.t.Nodes, n)
	return uint32(len(b.t.Nodes) - 1), nil
}

// build returns the node of a tree over list (item indices, in priority
// order) restricted to region.
func (b *treeBuilder) build(region box, list []int32, depth int) (uint32, error) {
	list = b.prune(region, list)
	ents := b.entries(list)
	if len(ents) > leafTarget && depth < MaxDepth-1 {
		if dim, thr, ok := b.split(region, list, len(ents)); ok {
			idx, err := b.node(Node{Dim: uint8(dim), Thresh: thr})
			if err != nil {
				return 0, err
			}
			lr, rr := region, region
			lr[dim][1], rr[dim][0] = thr, thr+1
			l, err := b.build(lr, list, depth+1)
			if err != nil {
				return 0, err
			}
			r, err := b.build(rr, list, depth+1)
			if err != nil {
				return 0, err
			}
			b.t.Nodes[idx].Left, b.t.Nodes[idx].Right = l, r
			return idx, nil
		}
	}
	if len(ents) > MaxLeaf {
		return 0, errTooBig{fmt.Sprintf("%d rules overlap so that no field separates them (a leaf holds at most %d): "+
			"they differ only in negated addresses or masked TCP flags", len(ents), MaxLeaf)}
	}
	idx, err := b.node(Node{Leaf: true, Left: uint32(len(b.t.Leaves)), Right: uint32(len(ents))})
	if err != nil {
		return 0, err
	}
	b.t.Leaves = append(b.t.Leaves, ents...)
	b.maxLeaf = max(b.maxLeaf, len(ents))
	b.depth = max(b.depth, depth)
	return idx, nil
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
			return out[:k+1]
		}
	}
	return out
}

// split picks the dimension and threshold that best balance the entries
// on both sides (HyperSplit's heuristic, on a sample for large lists). ok
// is false when no split shrinks the larger side to 90 % or less (a split
// that does not would replicate nearly everything for nothing), unless the
// list is too long for a leaf.
func (b *treeBuilder) split(region box, list []int32, n int) (dim int, thr uint32, ok bool) {
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
			if worst < best || (worst == best && sum < bestSum && ok) {
				best, bestSum, dim, thr, ok = worst, sum, d, t, true
			}
		}
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
// leaves the fewest bits free (IPv4 addresses count 32 bits).
func group(bx *box, v6 bool) int {
	width := func(r [2]uint32) float64 { return math.Log2(float64(r[1]-r[0]) + 1) }
	addr := func(d0 int) float64 {
		if !v6 {
			return 32 - width(bx[d0])
		}
		s := 0.0
		for w := 0; w < 4; w++ {
			s += 32 - width(bx[d0+w])
		}
		return s
	}
	other := 0.0
	for _, d := range []int{DimProto, DimIfindex, DimVLAN, DimMACSrcHi, DimMACSrcLo, DimMACDstHi, DimMACDstLo, DimICMP} {
		other += 32 - width(bx[d])
	}
	other -= 24 // proto alone is 8 bits of 32: do not let it win over a port
	spec := [MaxGroups]float64{addr(DimSrc0), addr(DimDst0), 16 - width(bx[DimDPort]) + 16, 16 - width(bx[DimSPort]) + 16, other}
	spec[groupDPort] -= 16
	spec[groupSPort] -= 16
	g, best := groupOther, 0.0
	for i, v := range spec {
		if v > best+1e-9 {
			g, best = i, v
		}
	}
	return g
}

// buildTrees fills t.Nodes, t.Leaves and t.Roots from t.Entries.
func buildTrees(t *Tables, rs *rules.RuleSet, maxNodes int) (TreeStats, error) {
	b := &treeBuilder{t: t, rnd: rand.New(rand.NewPCG(1, 2)), maxNodes: maxNodes}
	type ebox struct {
		boxes []box
		exact bool
	}
	eb := make([]ebox, len(t.Entries))
	t.Ranges = make([]Ranges, len(t.Entries))
	for i := range t.Entries {
		eb[i].boxes, eb[i].exact = entryBoxes(&t.Entries[i])
		t.Ranges[i] = boxRanges(eb[i].boxes, eb[i].exact)
	}
	groups := 0
	for c := rules.Chain(0); c < rules.NumChains; c++ {
		for v6 := 0; v6 < 2; v6++ {
			fam := rules.FamilyIPv4
			if v6 == 1 {
				fam = rules.FamilyIPv6
			}
			var lists [MaxGroups][]int32
			for i := range t.Entries {
				e := &t.Entries[i]
				if e.Chain != c || (e.Family != rules.FamilyAny && e.Family != fam) {
					continue
				}
				for _, bx := range eb[i].boxes {
					g := group(&bx, v6 == 1)
					b.items = append(b.items, item{entry: uint32(i), exact: eb[i].exact, decides: e.Action != ActLog, box: bx})
					lists[g] = append(lists[g], int32(len(b.items)-1))
				}
			}
			r := Root{RuleID: PolicyID(uint8(c), v6 == 1), Action: ActAccept, Reason: ReasonPolicyAccept}
			if rs.PolicyFor(c, fam) == rules.VerdictDrop {
				r.Action, r.Reason = ActDrop, ReasonPolicyDrop
			}
			for g := range r.Groups {
				r.Groups[g] = NoTree
				if len(lists[g]) == 0 {
					continue
				}
				node, err := b.build(fullBox, lists[g], 0)
				if err != nil {
					return TreeStats{}, err
				}
				r.Groups[g] = node
				groups++
			}
			t.Roots[int(c)*2+v6] = r
		}
	}
	return TreeStats{Nodes: len(t.Nodes), LeafSlots: len(t.Leaves), MaxLeaf: b.maxLeaf, MaxDepth: b.depth, Trees: groups}, nil
}

// TreeStats describes a built classifier.
type TreeStats struct {
	Nodes     int `json:"nodes"`
	LeafSlots int `json:"leaf_slots"`
	MaxLeaf   int `json:"max_leaf"`  // the most candidates one leaf holds
	MaxDepth  int `json:"max_depth"` // the most nodes one walk visits
	Trees     int `json:"trees"`     // non-empty groups over all roots
}
