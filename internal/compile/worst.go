package compile

import "github.com/xdpfw/xdpfw/internal/rules"

// The most work one packet can cause in a generation's classifier,
// computed from its compiled trees (docs/realtime.md, Worst-case work per
// packet). The data plane's loops have constant bounds (StructuralWork);
// what a rule set's trees allow is usually far below them, and this is
// that number: the one issue 17's time limit would have to beat.

// Work bounds the classifier's work for one packet: over the trees one
// packet walks (a root's groups), the deepest walk of each tree and its
// largest leaf, summed. Each is an upper bound reached by some packet of
// each tree; a packet reaches the sum only where the worst paths of all
// the root's trees meet. The delta stage's work comes on top (DeltaMax
// entries, each the whole entry test, while edits wait for a rebuild).
type Work struct {
	Trees int `json:"trees"` // trees one packet walks, at most
	// Levels is the most node steps (one map lookup and a search of a
	// node's thresholds each).
	Levels int `json:"levels"`
	// Candidates is the most leaf candidates checked (one record each);
	// FullTests, of them, those whose record holds no key ranges, which
	// need the entry and its whole test (fw_entry_match): LOG, noted and
	// inexact entries. The scan of a later tree's leaf stops at the best
	// index found so far, so fewer are checked where an earlier tree
	// matched.
	Candidates int `json:"candidates"`
	FullTests  int `json:"full_tests"`
	// Where is the chain and family (or "priority" and family) whose
	// root needs the most steps and candidates together.
	Where string `json:"where,omitempty"`
}

// Steps is w's node steps and candidate checks together.
func (w Work) Steps() int { return w.Levels + w.Candidates }

// StructuralWork is the bound the data plane's loops enforce whatever the
// rule set (FW_MAX_GROUPS, FW_TREE_DEPTH, FW_LEAF_MAX): a walk longer
// than MaxDepth nodes or a leaf over MaxLeaf is never built (the builder
// stops splitting at the depth bound and refuses a larger leaf).
func StructuralWork() Work {
	return Work{Trees: MaxGroups, Levels: MaxGroups * MaxDepth, Candidates: MaxGroups * MaxLeaf, FullTests: MaxGroups * MaxLeaf}
}

// treeWork is one tree's deepest walk and largest leaf.
type treeWork struct{ levels, cands, full int }

// Work computes the most classifier work one packet can cause in t, over
// every root (the chains' and, with a priority table, the priority
// roots, which a packet walks before its chain's).
func (t *Tables) Work() Work {
	memo := map[uint32]treeWork{}
	var worst Work
	consider := func(r *Root, where string) {
		var w Work
		for _, g := range r.Groups {
			if g == NoTree {
				continue
			}
			tw := t.treeWork(g, memo)
			w.Trees++
			w.Levels += tw.levels
			w.Candidates += tw.cands
			w.FullTests += tw.full
		}
		if w.Trees == 0 {
			return
		}
		w.Where = where
		if w.Steps() > worst.Steps() || w.Steps() == worst.Steps() && w.FullTests > worst.FullTests {
			worst.Where = w.Where
		}
		worst.Trees = max(worst.Trees, w.Trees)
		worst.Levels = max(worst.Levels, w.Levels)
		worst.Candidates = max(worst.Candidates, w.Candidates)
		worst.FullTests = max(worst.FullTests, w.FullTests)
	}
	fam := [2]string{"IPv4", "IPv6"}
	for i := range t.Roots {
		consider(&t.Roots[i], rules.Chain(i/2).String()+" "+fam[i%2])
	}
	for i := range t.PrioRoots {
		if t.PrioRoots[i].Flags&RootPrio == 0 { // no priority table: a zero root
			continue
		}
		consider(&t.PrioRoots[i], "priority "+fam[i])
	}
	return worst
}

// treeWork is the deepest walk and the largest leaf under reference ref
// (memo: by node), following the nodes' children as the walk does.
func (t *Tables) treeWork(ref uint32, memo map[uint32]treeWork) treeWork {
	if IsLeafRef(ref) {
		var w treeWork
		for _, idx := range t.LeafEntries(ref) {
			w.cands++
			if !t.checksRanges(idx) {
				w.full++
			}
		}
		return w
	}
	if w, ok := memo[ref]; ok {
		return w
	}
	n := &t.Nodes[ref]
	var w treeWork
	for _, c := range n.Child { // the children no key reaches are the empty leaf: no work
		cw := t.treeWork(c, memo)
		w.levels = max(w.levels, cw.levels)
		w.cands = max(w.cands, cw.cands)
		w.full = max(w.full, cw.full)
	}
	w.levels++
	memo[ref] = w
	return w
}

// checksRanges tells whether the walk tests entry idx by its record's
// key ranges alone (FW_EF_RANGES without a note: datapath's candOf and
// fw_tree), not with the whole entry test.
func (t *Tables) checksRanges(idx uint32) bool {
	if int(idx) >= len(t.Ranges) || !t.Ranges[idx].Exact {
		return false
	}
	return t.entryAt(idx).Decides()
}

// WalkWork is the work the walk of packet p takes in t: the trees of its
// root, the nodes it visits, and the candidates of the leaves it reaches
// (counted whole: a leaf's scan can stop earlier, at the best index found
// in an earlier tree). It never exceeds t.Work().
func (t *Tables) WalkWork(p *RefPacket, dev Dev) Work {
	k := KeyOf(p, dev)
	r := int(p.Chain) * 2
	if p.Src.Is6() {
		r++
	}
	c, full := t.walkOf(r, &k, true)
	return Work{Trees: c.Trees, Levels: c.Nodes, Candidates: c.Cands, FullTests: full}
}
