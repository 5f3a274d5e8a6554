package compile

// Single-rule edits between rebuilds: the delta stage. See
// docs/classifier.md ("Single edits") for the algorithm and the proof
// that a packet decides as the edited rule set would.
//
// An Overlay is the rule set in force: the rules compiled into the main
// generation (Base), minus the deleted ones, plus the added ones, each
// added rule anchored before a base rule (or at its chain's end). Its
// Delta is what the data plane applies after walking the main trees:
//
//   - added entries, placed before main entry Pos (the first entry of the
//     anchor), so that an added rule beats every rule after it and loses
//     to every rule before it;
//   - the ids of the deleted rules (dead): a main answer carrying one no
//     longer counts;
//   - copies of the main entries that follow a deleted rule in its chain
//     and overlap it (Pos = their own index). Leaves may list no entry
//     behind a deleted rule that covered their whole region (dominance
//     pruning), so the packets it matched find their next rule among
//     these copies instead.
//
// Fold merges the overlay into the entries of a new main generation.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// Bounds of the delta stage (FW_DELTA_MAX, FW_DELTA_DEAD in bpf/types.h).
const (
	DeltaMax     = 32 // entries: added rules' and copies
	DeltaDeadMax = 32 // deleted rules
)

// ErrDeltaFull means the edits in force do not fit the delta stage: the
// rule set has to be rebuilt instead.
var ErrDeltaFull = errors.New("the edits do not fit the delta stage")

// ErrDeltaLogs means an edit involves a rule that logs (-j LOG, --log)
// or has -m limit (rules.Rule.Budgeted),
// which the delta stage cannot represent: LOG entries are noted during the
// main tree walk and cut by the main table's answer, which the delta does
// not see, and log budgets come with full installs (Tables.Logs). The
// edited rule set has to be compiled in full (Compile) instead.
var ErrDeltaLogs = errors.New("rules that log do not go into the delta stage")

// Logging reports whether a rule of rs logs (-j LOG, or --log) or has a
// -m limit (rules.Rule.Budgeted): edits of such rule sets (before or after the edit) are compiled in full, never
// put in the delta stage (ErrDeltaLogs).
func Logging(rs *rules.RuleSet) bool {
	for i := range rs.Rules {
		if rs.Rules[i].Budgeted() {
			return true
		}
	}
	return false
}

// Span is where one rule's entries sit in a generation's entry table.
type Span struct{ Start, Count uint32 }

// Delta is the contents of the delta stage (struct fw_delta and its
// entries). The zero Delta (no entries, no dead rules) changes nothing.
type Delta struct {
	// Entries in priority order: by Pos; at equal Pos added entries come
	// first (in rule order), then the copy of main entry Pos.
	Entries []Entry
	Pos     []uint32 // Entries[i] sits just before main entry Pos[i]
	Dead    []uint32 // rule ids of the deleted main rules
	// Roots replace the main roots while the delta is in force: the same
	// trees and policies, the fast rules and flags of the edited rules.
	Roots [NumRoots]Root
}

// Empty reports whether the delta changes nothing.
func (d *Delta) Empty() bool { return d == nil || len(d.Entries) == 0 && len(d.Dead) == 0 }

// BaseRule is a rule compiled into the main generation.
type BaseRule struct {
	ID    uint32
	Chain rules.Chain
	Span  Span
}

// Deletion is a deleted base rule.
type Deletion struct {
	Base int // index in Overlay.Base
	// Copies are the main entries after the rule in its chain that
	// overlap it (see Overlaps), found when it was deleted.
	Copies []uint32
}

// Addition is a rule added since the main generation was built.
type Addition struct {
	// Anchor is the base rule it is placed before (even a deleted one),
	// or AnchorEnd(chain) when it follows every base rule of its chain.
	// Additions with the same anchor are in rule order in Overlay.Added.
	Anchor  int
	Rule    rules.Rule
	ID      uint32
	Entries []Entry
}

// AnchorEnd is the anchor of rules appended after every base rule of c.
func AnchorEnd(c rules.Chain) int { return -1 - int(c) }

// Overlay is the rule set in force as the main generation plus the edits
// since it was built.
type Overlay struct {
	Main     []Entry        // the main generation's entries (Tables.Entries, or FromRaw a saved copy): read only
	Roots    [NumRoots]Root // and roots
	ChainEnd [rules.NumChains]uint32
	Base     []BaseRule // its rules, in rule-set order: read only
	Deleted  []Deletion // in the order deleted
	Added    []Addition
}

// NewOverlay is the overlay of t, compiled from rules with ids and chains
// as given, with no edits.
func NewOverlay(t *Tables, ids []uint32, chains []rules.Chain) *Overlay {
	o := &Overlay{Main: t.Entries, Roots: t.Roots, ChainEnd: t.ChainEnd, Base: make([]BaseRule, len(ids))}
	for i := range ids {
		o.Base[i] = BaseRule{ID: ids[i], Chain: chains[i], Span: t.Spans[i]}
	}
	return o
}

// Clone is a copy of o whose edits can change without changing o's (the
// main generation and base rules are shared: they never change).
func (o *Overlay) Clone() *Overlay {
	c := *o
	c.Deleted, c.Added = slices.Clone(o.Deleted), slices.Clone(o.Added)
	return &c
}

// Pending reports whether edits wait to be folded into a rebuild.
func (o *Overlay) Pending() bool { return len(o.Deleted) > 0 || len(o.Added) > 0 }

// Ref names a rule in force: base rule Base (Added -1) or Added[Added]
// (Base -1).
type Ref struct{ Base, Added int }

// IsAdded reports whether r names an added rule.
func (r Ref) IsAdded() bool { return r.Added >= 0 }

// ID is the counter id of the rule r names.
func (o *Overlay) ID(r Ref) uint32 {
	if r.IsAdded() {
		return o.Added[r.Added].ID
	}
	return o.Base[r.Base].ID
}

// Chain is the chain of the rule r names.
func (o *Overlay) Chain(r Ref) rules.Chain {
	if r.IsAdded() {
		return o.Added[r.Added].Rule.Chain
	}
	return o.Base[r.Base].Chain
}

// walk calls f for the rules in force in rule-set order (of chain c only
// when c >= 0) until it returns false: each base rule not deleted,
// preceded by the rules added before it; then the rules appended at their
// chain's end, in the order added.
func (o *Overlay) walk(c int, f func(Ref) bool) {
	deleted := o.deletedSet()
	before := map[int][]int{} // anchor -> additions, in order
	var ends []int
	for i, a := range o.Added {
		switch {
		case c >= 0 && int(a.Rule.Chain) != c:
		case a.Anchor < 0:
			ends = append(ends, i)
		default:
			before[a.Anchor] = append(before[a.Anchor], i)
		}
	}
	for k := range o.Base {
		if c >= 0 && int(o.Base[k].Chain) != c {
			continue
		}
		for _, i := range before[k] {
			if !f(Ref{Base: -1, Added: i}) {
				return
			}
		}
		if !deleted[k] && !f(Ref{Base: k, Added: -1}) {
			return
		}
	}
	for _, i := range ends {
		if !f(Ref{Base: -1, Added: i}) {
			return
		}
	}
}

func (o *Overlay) deletedSet() map[int]bool {
	m := make(map[int]bool, len(o.Deleted))
	for _, d := range o.Deleted {
		m[d.Base] = true
	}
	return m
}

// Walk calls f for the rules in force of chain c, in order, until f
// returns false.
func (o *Overlay) Walk(c rules.Chain, f func(Ref) bool) { o.walk(int(c), f) }

// InForce lists the rules in force, in rule-set order.
func (o *Overlay) InForce() []Ref {
	out := make([]Ref, 0, len(o.Base)+len(o.Added)-len(o.Deleted))
	o.walk(-1, func(r Ref) bool { out = append(out, r); return true })
	return out
}

// ChainLen is the number of rules in force in chain c.
func (o *Overlay) ChainLen(c rules.Chain) int {
	n := 0
	for _, b := range o.Base {
		if b.Chain == c {
			n++
		}
	}
	for _, d := range o.Deleted {
		if o.Base[d.Base].Chain == c {
			n--
		}
	}
	for _, a := range o.Added {
		if a.Rule.Chain == c {
			n++
		}
	}
	return n
}

// Nth is rule number n (1-based) of chain c in force.
func (o *Overlay) Nth(c rules.Chain, n int) (Ref, bool) {
	var out Ref
	found := false
	k := 0
	o.walk(int(c), func(r Ref) bool {
		if k++; k == n {
			out, found = r, true
			return false
		}
		return true
	})
	return out, found
}

// Insert makes a rule number n (1-based) of its chain; n = ChainLen+1
// appends it. Its Anchor is set here.
func (o *Overlay) Insert(n int, a Addition) error {
	c := a.Rule.Chain
	size := o.ChainLen(c)
	if n < 1 || n > size+1 {
		return fmt.Errorf("position %d out of range: %s has %d rules (use 1..%d)", n, c, size, size+1)
	}
	if n == size+1 {
		a.Anchor = AnchorEnd(c)
		o.Added = append(o.Added, a)
		return nil
	}
	at, _ := o.Nth(c, n)
	if !at.IsAdded() {
		// just before base rule at.Base: the last of those added before it
		a.Anchor = at.Base
		o.Added = append(o.Added, a)
		return nil
	}
	a.Anchor = o.Added[at.Added].Anchor // just before that added rule
	o.Added = slices.Insert(o.Added, at.Added, a)
	return nil
}

// Remove takes the rule r names out of force. A base rule's copies are
// found here: a delete costs one pass over the rest of its chain's main
// entries.
func (o *Overlay) Remove(r Ref) {
	if r.IsAdded() {
		o.Added = slices.Delete(o.Added, r.Added, r.Added+1)
		return
	}
	o.Deleted = append(o.Deleted, Deletion{Base: r.Base, Copies: o.overlapping(r.Base)})
}

// chainStart is the first main entry of chain c.
func (o *Overlay) chainStart(c rules.Chain) uint32 {
	if c == 0 {
		return 0
	}
	return o.ChainEnd[c-1]
}

// overlapping lists the main entries after base rule k in its chain, not
// of a deleted rule, that may match a packet k matches.
func (o *Overlay) overlapping(k int) []uint32 {
	b := o.Base[k]
	if b.Span.Count == 0 {
		return nil
	}
	del := o.Main[b.Span.Start : b.Span.Start+b.Span.Count]
	dead := o.deadSpans()
	var out []uint32
	for j := b.Span.Start + b.Span.Count; j < o.ChainEnd[b.Chain]; j++ {
		for len(dead) > 0 && dead[0].Start+dead[0].Count <= j {
			dead = dead[1:]
		}
		if len(dead) > 0 && dead[0].Start <= j {
			j = dead[0].Start + dead[0].Count - 1 // skip the deleted rule
			continue
		}
		e := &o.Main[j]
		for i := range del {
			if Overlaps(&del[i], e) {
				out = append(out, j)
				break
			}
		}
	}
	return out
}

// deadSpans are the entry spans of deleted rules, in order.
func (o *Overlay) deadSpans() []Span {
	var out []Span
	for _, d := range o.Deleted {
		if s := o.Base[d.Base].Span; s.Count > 0 {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Span) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// deadEntries are the main entries of deleted rules.
func (o *Overlay) deadEntries() map[uint32]bool {
	m := map[uint32]bool{}
	for _, d := range o.Deleted {
		s := o.Base[d.Base].Span
		for j := s.Start; j < s.Start+s.Count; j++ {
			m[j] = true
		}
	}
	return m
}

// anchorPos is the main entry an addition sits before.
func (o *Overlay) anchorPos(a *Addition) uint32 {
	if a.Anchor < 0 {
		return o.ChainEnd[a.Rule.Chain]
	}
	return o.Base[a.Anchor].Span.Start
}

// deltaItem is one delta entry with its sort key.
type deltaItem struct {
	pos  uint32
	copy bool // a copy sorts after the additions at its pos
	rank int  // additions: the anchor's place in rule order
	seq  int  // additions: index in Added
	sub  int  // additions: index among the rule's entries
	e    Entry
}

// Delta compiles the edits into the delta stage. It fails with
// ErrDeltaFull when they do not fit (DeltaMax entries, DeltaDeadMax
// deleted rules), and with ErrDeltaLogs when an added rule or a copy
// logs. It cannot see whether a deleted rule logged, nor a logging rule
// left in the main tables: its callers must not use the delta stage for
// rule sets that log (Logging).
func (o *Overlay) Delta() (*Delta, error) {
	dead := o.deadEntries()
	var items []deltaItem
	for i := range o.Added {
		a := &o.Added[i]
		rank := a.Anchor // base rules in rule order, then the chain ends
		if a.Anchor < 0 {
			rank = len(o.Base) - a.Anchor
		}
		for k, e := range a.Entries {
			items = append(items, deltaItem{pos: o.anchorPos(a), rank: rank, seq: i, sub: k, e: e})
		}
	}
	copies := map[uint32]bool{}
	d := &Delta{Roots: o.Roots}
	for _, del := range o.Deleted {
		for _, j := range del.Copies {
			if !dead[j] && !copies[j] {
				copies[j] = true
				items = append(items, deltaItem{pos: j, copy: true, e: o.Main[j]})
			}
		}
		if b := o.Base[del.Base]; b.Span.Count > 0 {
			d.Dead = append(d.Dead, b.ID)
		}
	}
	for _, it := range items { // the callers check the rules; this is the safety net
		if it.e.Action == ActLog || it.e.Log || it.e.Limit {
			return nil, ErrDeltaLogs
		}
	}
	if len(items) > DeltaMax || len(d.Dead) > DeltaDeadMax {
		return nil, fmt.Errorf("%w (%d entries, %d deleted rules; it holds %d and %d)", ErrDeltaFull,
			len(items), len(d.Dead), DeltaMax, DeltaDeadMax)
	}
	slices.SortFunc(items, func(x, y deltaItem) int {
		if c := cmp.Compare(x.pos, y.pos); c != 0 {
			return c
		}
		if x.copy != y.copy {
			if x.copy {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(x.rank, y.rank), cmp.Compare(x.seq, y.seq), cmp.Compare(x.sub, y.sub))
	})
	added := make([]bool, len(items))
	for i, it := range items {
		d.Entries = append(d.Entries, it.e)
		d.Pos = append(d.Pos, it.pos)
		added[i] = !it.copy
	}
	o.deltaRoots(d, added, dead)
	return d, nil
}

// deltaRoots sets the fast rules and flags of the rules in force: the
// main generation's, unless an added rule tests the connection state
// (conntrack then runs from now on, as after a rebuild) or the main
// generation already uses conntrack (its fast rules may have changed).
func (o *Overlay) deltaRoots(d *Delta, added []bool, dead map[uint32]bool) {
	ct := o.Roots[0].Flags&RootCT != 0
	for _, e := range d.Entries {
		ct = ct || e.Match&MCTState != 0 || e.ConnLimit
		for r := range d.Roots { // the classifier reads these fields from now on
			d.Roots[r].Flags |= hdroptFlags(&e)
		}
	}
	if !ct {
		return
	}
	for r := range d.Roots {
		root := &d.Roots[r]
		root.Flags |= RootCT
		chain := rules.Chain(r / 2)
		fastRule(root, r, func(yield func(Entry) bool) {
			k := 0 // next delta entry
			emitAdded := func(upto uint32) bool {
				for ; k < len(d.Entries) && d.Pos[k] <= upto; k++ {
					// copies are main entries: the main walk yields them
					if added[k] && d.Entries[k].Chain == chain && !yield(d.Entries[k]) {
						return false
					}
				}
				return true
			}
			for j := o.chainStart(chain); j < o.ChainEnd[chain]; j++ {
				if !emitAdded(j) {
					return
				}
				if !dead[j] && !yield(o.Main[j]) {
					return
				}
			}
			emitAdded(^uint32(0))
		})
	}
}

// Fold merges the edits into the entries of a new main generation: the
// entries in force chain by chain in priority order (Build's input), the
// rules in force in rule-set order, and where each one's entries sit.
func (o *Overlay) Fold() (entries []Entry, refs []Ref, spans []Span) {
	refs = o.InForce()
	spans = make([]Span, len(refs))
	for c := rules.Chain(0); c < rules.NumChains; c++ {
		for i, r := range refs {
			if o.Chain(r) != c {
				continue
			}
			spans[i].Start = uint32(len(entries))
			if r.IsAdded() {
				entries = append(entries, o.Added[r.Added].Entries...)
			} else {
				s := o.Base[r.Base].Span
				entries = append(entries, o.Main[s.Start:s.Start+s.Count]...)
			}
			spans[i].Count = uint32(len(entries)) - spans[i].Start
		}
	}
	return entries, refs, spans
}

// Outcome is what the data plane decides for a packet: the deciding rule
// id (a policy id when no rule matches) and what it does.
type Outcome struct {
	RuleID uint32
	Action Action
	Reason Reason
	Reject Reject
	Log    bool // the deciding rule logs the packet (--log)
}

// Outcome is the Go twin of the data plane's decision (lib/verdict.h
// fw_decide, lib/classify.h fw_classify and fw_delta_step) with the delta
// stage d in force (nil: none), for a packet whose connection state is
// p.CTState: the root's fast rule, else the trees, then the delta.
func (t *Tables) Outcome(d *Delta, p *RefPacket, dev Dev) Outcome {
	r := int(p.Chain) * 2
	if p.Src.Is6() {
		r++
	}
	root := t.Roots[r]
	if d != nil {
		root = d.Roots[r]
	}
	p = t.raw(&root, p, dev)
	if root.FastStates&(1<<p.CTState) != 0 {
		return Outcome{RuleID: root.FastRuleID, Action: root.FastAction, Reason: root.FastReason, Reject: root.FastReject,
			Log: root.FastLog}
	}
	var e *Entry
	best := NoTree
	for _, i := range t.Lookup(r, KeyOf(p, dev)) {
		// LOG entries decide nothing: the data plane notes them and walks on
		if t.Entries[i].Action != ActLog && t.Entries[i].Matches(p, dev, t.SetNames) {
			e, best = &t.Entries[i], i
			break
		}
	}
	if d != nil {
		e = d.step(best, e, func(x *Entry) bool { return x.Matches(p, dev, t.SetNames) })
	}
	if e == nil {
		return Outcome{RuleID: root.RuleID, Action: root.Action, Reason: root.Reason}
	}
	return Outcome{RuleID: e.RuleID, Action: e.Action, Reason: e.Reason, Reject: e.Reject, Log: e.Log}
}

// step is fw_delta_step: the deciding entry given the main answer (best,
// e; NoTree and nil for none), nil for the policy.
func (d *Delta) step(best uint32, e *Entry, match func(*Entry) bool) *Entry {
	bound := best
	if e != nil && slices.Contains(d.Dead, e.RuleID) {
		bound, e = NoTree, nil
	}
	for i := range d.Entries {
		if d.Pos[i] > bound {
			break
		}
		if d.Entries[i].Action != ActLog && match(&d.Entries[i]) {
			return &d.Entries[i]
		}
	}
	return e
}

// Overlaps reports whether some packet may match both a and b. It may say
// yes when none does (tests it does not reason about, such as sets and
// most negations, count as overlapping), never no when one does: the
// copies of a deletion must include every entry that can take over its
// packets.
func Overlaps(a, b *Entry) bool {
	if a.Chain != b.Chain {
		return false
	}
	both := a.Match & b.Match
	inv := a.Invert | b.Invert
	pos := both &^ inv // tested, and negated by neither
	if both&MFamily != 0 && a.Family != b.Family {
		return false
	}
	// an L4 test needs a header that a non-first fragment (-f) lacks
	frag := func(e *Entry) bool { return e.Match&MFrag != 0 && e.Invert&MFrag == 0 }
	if a.Match&ML4 != 0 && frag(b) || b.Match&ML4 != 0 && frag(a) {
		return false
	}
	if both&MFrag != 0 && a.Invert&MFrag != b.Invert&MFrag {
		return false
	}
	if both&MProto != 0 {
		switch {
		case pos&MProto != 0 && a.Proto != b.Proto:
			return false
		case inv&MProto != 0 && a.Invert&MProto != b.Invert&MProto && a.Proto == b.Proto:
			return false // p and !p
		}
	}
	if pos&MSrc != 0 && !prefixesMeet(&a.Src, &a.SrcMask, &b.Src, &b.SrcMask) ||
		pos&MDst != 0 && !prefixesMeet(&a.Dst, &a.DstMask, &b.Dst, &b.DstMask) {
		return false
	}
	if both&MSPort != 0 && (a.SPortHi < b.SPortLo || b.SPortHi < a.SPortLo) ||
		both&MDPort != 0 && (a.DPortHi < b.DPortLo || b.DPortHi < a.DPortLo) {
		return false
	}
	if both&MIfindex != 0 && a.Ifindex != b.Ifindex {
		return false
	}
	if pos&MMACSrc != 0 && a.SrcMAC != b.SrcMAC || pos&MMACDst != 0 && a.DstMAC != b.DstMAC ||
		pos&MVLAN != 0 && a.VLAN != b.VLAN || pos&MVLANPrio != 0 && a.VLANPrio != b.VLANPrio {
		return false
	}
	if pos&MTCPFlags != 0 && (a.TCPCmp^b.TCPCmp)&a.TCPMask&b.TCPMask != 0 {
		return false
	}
	if pos&MICMPType != 0 && (a.ICMPType != b.ICMPType ||
		a.Match&b.Match&MICMPCode != 0 && a.ICMPCode != b.ICMPCode) {
		return false
	}
	if both&MCTState != 0 && a.CTState&b.CTState == 0 {
		return false
	}
	return true
}

// prefixesMeet reports whether two address prefixes (address, mask) share
// an address: they agree on the bits both fix.
func prefixesMeet(a, am, b, bm *[16]byte) bool {
	w := binary.NativeEndian.Uint64
	for i := 0; i < 16; i += 8 {
		if (w(a[i:])^w(b[i:]))&w(am[i:])&w(bm[i:]) != 0 {
			return false
		}
	}
	return true
}
