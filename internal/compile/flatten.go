package compile

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// User-defined chains are flattened here, at compile time, into the
// entries of the built-in chains that reach them: the data plane never
// jumps, so the per-packet cost stays that of one classifier walk
// whatever the chains (docs/compat.md, "Chains").
//
// A chain instance is the walk of one chain for the packets a guard
// admits (a disjunction of entries without action: the conjunction of the
// jumps that led there, and of what earlier RETURNs let through):
//
//   - a deciding or LOG rule R contributes guard ∧ R, in place;
//   - -j C contributes C's instance under guard ∧ R, in place;
//   - -j RETURN R cuts the rest of the instance for the packets R
//     matches: the guard becomes guard ∧ ¬R (¬(r1 ∧ … ∧ rk) is the
//     k alternatives ¬ri, each one field test); an unconditional RETURN
//     leaves an empty guard and ends the instance. In a built-in chain
//     the packets cut go on to its policy, which the tree's root holds;
//   - -g C is -j C followed by a RETURN with the same matches: what C
//     does not decide goes back to the caller's caller;
//   - a rule without -j decides nothing.
//
// A rule that decides nothing itself but has a stateful test (-m limit
// or -m recent on -j C, -g C, -j RETURN or no -j) cannot be a field test:
// whether the rules after it apply depends on its bucket or list when the
// packet gets there. It becomes a probe (Entry.Probe k, one of MaxProbes
// bits per built-in chain): guard ∧ R, noted by the walk and settled after
// it in rule order, where it takes the token or does the -m recent
// operation, as iptables does when the packet reaches the rule and its
// other matches pass, and sets the packet's probe bit k when its test
// matches. What lies behind it carries a guard on that bit
// (Entry.GuardMask/GuardVal): -j C's instance is guard ∧ R ∧ k=1; RETURN
// (and a goto's return) leaves guard ∧ k=0 (within the guard, k=1 is
// exactly "reached, R matched, the test passed"). The probe counts its
// rule when its test matches (no counting entries). Guarded entries are noted and settled in rule order
// too: one decides, logs or counts only if its guard holds
// (docs/limits.md, "Rate and state tests on rules that decide nothing").
//
// A jump, goto, RETURN or rule without -j also contributes, in place,
// counting entries (guard ∧ R, EntryCount): non-deciding, noted during the
// tree walk as LOG entries are (bpf/lib/classify.h fw_log_note), their
// rule counts the packets that match one before the decision. Every entry
// keeps the id of the rule it comes from, so a rule reached from several
// places counts the packets of all of them (once per packet).
//
// Two tests of one field are merged into one (intersected or
// subtracted, an address prefix split into the prefixes that remain),
// which an entry can always hold but for a few negations of negations
// that have no single-test form (two negated MACs, VLANs or sets, two
// different sets on one address, a negated ICMP type against a negated
// other type or a code of the same type, two different header tests). Two
// negated interfaces become one entry per attached interface left, two
// negated protocols one entry per protocol number left (254: within the
// bounds below). For the others, a built-in chain whose flattening meets
// one is flattened again with its RETURNs and gotos that test such a
// field kept as probes without a stateful test (probeCut): the probe's bit
// is set when the packet reaches and matches the rule, and what follows is
// guarded by the bit clear, which needs no negation. A chain past a bound
// of entries or alternatives is flattened again so too, its RETURNs and
// gotos that test a protocol included. What still has no form (a negated jump into a rule negating
// the same field), or probes past the data plane's bounds (MaxProbes,
// MaxStateNotes), is refused with the chains and rules involved, never
// installed in part.

// MaxChainDepth bounds how deep jumps nest (built-in chain, then up to
// MaxChainDepth user chains).
const MaxChainDepth = 32

// maxInstanceEntries bounds the entries one chain instance expands into
// (its RETURNs multiply the entries after them).
const maxInstanceEntries = 1 << 16

// maxGuard bounds the alternatives a chain instance's RETURNs leave open
// (the guard), before they are pruned: pruning compares every pair.
const maxGuard = 1 << 12

// ErrNoForm: two tests of one field whose conjunction has no entry form.
var ErrNoForm = errors.New("no single-entry form")

// ErrTooBig: a chain whose flattening exceeds its bound of entries.
var ErrTooBig = errors.New("too many classifier entries")

// flattener expands the chains of one rule set.
type flattener struct {
	rs     *rules.RuleSet
	ids    []uint32
	ifaces map[string]uint32
	host   map[string]uint32 // Input.HostIfaces (FORWARD's -o)
	sets   map[string]SetInfo
	byName map[string][]int // user chain -> its rules, in order
	ents   [][]Entry        // per rule: its compiled entries (nil: not yet)
	done   []bool
	warn   []Warning
	used   map[string]bool // user chains some built-in chain reaches
	ifx    []uint32        // ifindexes(), once
	probes int             // probe bits taken in the built-in chain being flattened
	notes  uint32          // Entry.Note keys given (noteKey)
	// probeCuts: the built-in chain being flattened met a negation
	// without a single-entry form (or grew past a bound); its RETURNs and
	// gotos with a test in probeCuts are probes (probeCut), flattened
	// again.
	probeCuts uint64
	max       int // the entries of the whole rule set (Input.MaxEntries)
}

// noDoubleNegation are the tests two of which, negated, have no entry
// form (conj), and the routing header's, which negate cannot negate: the
// tests a RETURN or goto leaves negated in its guard.
const noDoubleNegation = MMACSrc | MMACDst | MVLAN | MSrcSet | MDstSet | MICMPType | MMark | MSrcType | MDstType | hdrTests | MRTHdr

// noteKey marks the entries of one rule at one place with a key of their
// own (Entry.Note), the data plane's unit of a settled note; flattened
// keys have the top bit set, apart from the rule ids that key the entries
// of rule sets without chains (finish).
func (f *flattener) noteKey(ents []Entry) []Entry {
	f.notes++
	for i := range ents {
		ents[i].Note = 1<<31 | f.notes
	}
	return ents
}

// hasChains reports whether rs uses anything that needs flattening.
func hasChains(rs *rules.RuleSet) bool {
	if len(rs.Chains) > 0 {
		return true
	}
	for i := range rs.Rules {
		if !rs.Rules[i].Target.Verdict.Terminal() && rs.Rules[i].Target.Verdict != rules.VerdictLog {
			return true
		}
	}
	return false
}

// flatten compiles every built-in chain of rs, user chains expanded in
// place, into entries in priority order, chain by chain. kept is the
// first negation without a single-entry form that a chain flattened again
// with probes overcame (probeCuts), for the error of a rule set whose
// probes do not fit the data plane's bounds after all.
func flatten(in Input) (ents []Entry, warn []Warning, kept error, err error) {
	rs := in.RuleSet
	f := &flattener{rs: rs, ids: in.IDs, ifaces: in.Ifaces, host: in.HostIfaces, sets: in.Sets, byName: map[string][]int{},
		ents: make([][]Entry, len(rs.Rules)), done: make([]bool, len(rs.Rules)), used: map[string]bool{}}
	var builtin [rules.NumChains][]int
	for i := range rs.Rules {
		if r := &rs.Rules[i]; r.Chain == rules.ChainUser {
			f.byName[r.UserChain] = append(f.byName[r.UserChain], i)
		} else {
			builtin[r.Chain] = append(builtin[r.Chain], i)
		}
	}
	limit := in.MaxEntries
	if limit == 0 {
		limit = DefaultMaxEntries
	}
	f.max = limit
	var out []Entry
	for c := rules.Chain(0); c < rules.NumChains; c++ {
		f.probes, f.probeCuts = 0, 0
		ents, err := f.instance(c, builtin[c], []Entry{{Chain: c}}, []string{c.String()}, limit-len(out))
		if (errors.Is(err, ErrNoForm) || errors.Is(err, ErrTooBig)) && c != rules.ChainOutput {
			// again, the RETURNs and gotos that negate such tests kept
			// as probes: their negation is a probe bit, not a test; past
			// a bound, those that test a protocol too (two negated
			// protocols are 254 entries per rule behind them)
			f.probes, f.probeCuts = 0, noDoubleNegation
			if errors.Is(err, ErrTooBig) {
				f.probeCuts |= MProto
			}
			if again, err2 := f.instance(c, builtin[c], []Entry{{Chain: c}}, []string{c.String()}, limit-len(out)); err2 == nil {
				if kept == nil {
					kept = err
				}
				ents, err = again, nil
			}
		}
		if err != nil {
			return nil, nil, nil, err
		}
		out = append(out, ents...)
	}
	for _, ch := range rs.Chains {
		if !f.used[ch.Name] {
			f.warn = append(f.warn, Warning{Rule: -1, Pos: ch.Pos,
				Msg: fmt.Sprintf("no built-in chain reaches chain %s; its rules never match", ch.Name)})
		}
	}
	return out, f.warn, kept, nil
}

// entries compiles rule i once; for a rule that decides nothing but its
// path (jump, goto, RETURN, none) the entries are its matches only.
func (f *flattener) entries(i int) ([]Entry, error) {
	if f.done[i] {
		return f.ents[i], nil
	}
	ents, w, err := RuleEntries(&f.rs.Rules[i], f.ids[i], Names{Attached: f.ifaces, Host: f.host}, f.sets)
	if err != nil {
		return nil, err
	}
	for _, m := range w {
		f.warn = append(f.warn, Warning{Rule: i, Msg: m})
	}
	f.ents[i], f.done[i] = ents, true
	return ents, nil
}

// instance expands the rules idx of a chain (path: the chains that led
// here, this one last) for the packets guard admits, into at most limit
// entries of built-in chain c.
func (f *flattener) instance(c rules.Chain, idx []int, guard []Entry, path []string, limit int) ([]Entry, error) {
	var out []Entry
	for _, i := range idx {
		if len(guard) == 0 {
			break // every packet has returned
		}
		r := &f.rs.Rules[i]
		if c == rules.ChainOutput && r.Match.InIface != nil {
			// OUTPUT's packets have no input interface: iptables
			// never matches -i there (! -i always); xdpfw refuses -i
			// in OUTPUT, so in the chains OUTPUT reaches too
			return nil, fmt.Errorf("%s: %s: -i cannot be used in a chain OUTPUT reaches (%s): "+
				"OUTPUT's packets have no input interface", r.Pos, r.String(), strings.Join(path, " -> "))
		}
		if mod := stateModule(&r.Match); c == rules.ChainOutput && mod != "" {
			// as in OUTPUT itself (compile.go): tc egress does not
			// settle state rules
			return nil, fmt.Errorf("%s: %s: -m %s is not supported in a chain OUTPUT reaches (%s): "+
				"the tc egress program has no room for it yet", r.Pos, r.String(), mod, strings.Join(path, " -> "))
		}
		ents, err := f.entries(i)
		if err != nil {
			return nil, err
		}
		v := r.Target.Verdict
		bit := uint32(0) // the probe bit of a stateful rule that decides nothing
		if !v.Terminal() && v != rules.VerdictLog && (r.Match.Limit != nil || r.Match.Recent != nil) || f.probeCut(r, ents) {
			if bit, err = f.probe(c, r, path); err != nil {
				return nil, err
			}
			pr := make([]Entry, len(ents))
			for k, e := range ents {
				e.Probe, e.Reason, e.Count = uint8(bits.TrailingZeros32(bit))+1, 0, false
				pr[k] = e
			}
			add, err := f.and(guard, pr, r, path)
			if err != nil {
				return nil, err
			}
			out = append(out, f.noteKey(add)...)
			// behind it, R is the probe's bit: R ∧ k=1 (R kept: the
			// entries stay as narrow as the rule, fewer notes per leaf)
			behind := make([]Entry, len(ents))
			for k, e := range ents {
				e.GuardMask, e.GuardVal = bit, bit
				behind[k] = e
			}
			ents = behind
		}
		if !v.Terminal() && v != rules.VerdictLog && bit == 0 { // a probe counts its rule itself
			// counts the packets that reach and match it, decides nothing
			cnt, err := f.and(guard, counting(ents), r, path)
			if err != nil {
				return nil, err
			}
			out = append(out, f.noteKey(cnt)...)
		}
		switch {
		case v.Terminal() || v == rules.VerdictLog:
			add, err := f.and(guard, ents, r, path)
			if err != nil {
				return nil, err
			}
			out = append(out, f.noteKey(add)...)
		case v == rules.VerdictJump || v == rules.VerdictGoto:
			name := r.Target.Chain
			for k, p := range path {
				if p == name {
					return nil, fmt.Errorf("%s: chain loop %s -> %s: a chain may not jump to a chain it was reached from",
						r.Pos, strings.Join(path[k:], " -> "), name)
				}
			}
			if len(path) > MaxChainDepth {
				return nil, fmt.Errorf("%s: jumps nest %d deep (%s -> %s); at most %d", r.Pos, len(path),
					strings.Join(path, " -> "), name, MaxChainDepth)
			}
			f.used[name] = true
			sub, err := f.and(guard, match(ents), r, path)
			if err != nil {
				return nil, err
			}
			if len(sub) > 0 {
				inner, err := f.instance(c, f.byName[name], sub, append(path, name), limit-len(out))
				if err != nil {
					return nil, err
				}
				out = append(out, inner...)
			}
			if v == rules.VerdictGoto {
				if guard, err = f.cut(guard, ents, bit, r, path); err != nil {
					return nil, err
				}
			}
		case v == rules.VerdictReturn:
			if guard, err = f.cut(guard, ents, bit, r, path); err != nil {
				return nil, err
			}
		}
		if len(out) > limit || len(guard) > maxInstanceEntries {
			// limit is what the chains before left of the rule set's
			// bound: none, when they took it all
			return nil, fmt.Errorf("%s: chain %s expands into more than the %d classifier entries left to it (of %d in all, %d per chain; "+
				"%d so far, %d alternatives still open after its RETURNs): split the chain, or give its RETURN rules fewer tests (%w)",
				r.Pos, path[len(path)-1], max(min(limit, maxInstanceEntries), 0), f.max, maxInstanceEntries, len(out), len(guard), ErrTooBig)
		}
	}
	return out, nil
}

// counting is ents as counting entries (EntryCount): non-deciding, noted
// during the walk like LOG entries, counted for their rule when they come
// before the decision.
func counting(ents []Entry) []Entry {
	out := make([]Entry, len(ents))
	for i, e := range ents {
		e.Action, e.Reason, e.Reject, e.Log, e.Count, e.Limit, e.State, e.HashLimit, e.ConnLimit, e.Probe = ActLog, 0, 0, false, true, false, false, false, false, 0
		out[i] = e
	}
	return out
}

// match is ents without their action: what a jump or RETURN tests.
func match(ents []Entry) []Entry {
	out := make([]Entry, len(ents))
	for i, e := range ents {
		out[i] = Entry{}
		copyMatch(&out[i], &e)
	}
	return out
}

// and is every guard alternative conjoined with every entry of ents (of
// rule r, or their negation's alternatives), with the entries' action.
func (f *flattener) and(guard, ents []Entry, r *rules.Rule, path []string) ([]Entry, error) {
	var out []Entry
	for _, g := range guard {
		for _, e := range ents {
			xs, err := conj(g, e, f.ifindexes())
			if err != nil {
				return nil, f.noForm(r, path, err)
			}
			out = append(out, xs...)
		}
	}
	return out, nil
}

// cut is guard ∧ ¬(ents), the packets of guard that rule r (a RETURN, or
// a goto's return) lets through. With a probe bit (r has a stateful test:
// ents carry the bit's guard) it is guard ∧ bit=0: within guard, the bit
// is set exactly when r matched.
func (f *flattener) cut(guard, ents []Entry, bit uint32, r *rules.Rule, path []string) ([]Entry, error) {
	if bit != 0 {
		return f.and(guard, []Entry{{Chain: r.Chain, GuardMask: bit}}, r, path)
	}
	for _, e := range ents {
		neg, err := negate(e)
		if err != nil {
			return nil, f.noForm(r, path, err)
		}
		next, err := f.and(guard, neg, r, path)
		if err != nil {
			return nil, err
		}
		if len(next) > maxGuard { // prune is quadratic: refuse before it
			return nil, fmt.Errorf("%s: the RETURN rules of chain %s leave more than %d alternatives to test (%w)",
				r.Pos, path[len(path)-1], maxGuard, ErrTooBig)
		}
		guard = prune(next)
	}
	return guard, nil
}

// decidesNothing says what rule r, which decides nothing itself, does.
func decidesNothing(r *rules.Rule) string {
	switch r.Target.Verdict {
	case rules.VerdictJump:
		return "-j " + r.Target.Chain
	case rules.VerdictGoto:
		return "-g " + r.Target.Chain
	case rules.VerdictReturn:
		return "-j RETURN"
	}
	return "no -j"
}

// probeCut says whether RETURN or goto r (entries ents) is a probe without
// a stateful test: in a chain flattened again, one that negates a test of
// probeCuts. Its bit is set for the packets that
// reach it and match it; what comes after it in its chain is guarded by
// the bit clear, which holds whatever the tests negated before or after.
func (f *flattener) probeCut(r *rules.Rule, ents []Entry) bool {
	if v := r.Target.Verdict; f.probeCuts == 0 || v != rules.VerdictReturn && v != rules.VerdictGoto {
		return false
	}
	return slices.ContainsFunc(ents, func(e Entry) bool { return e.Match&f.probeCuts != 0 })
}

// probe takes the next probe bit of built-in chain c for rule r (reached
// through path), which has -m limit or -m recent and decides nothing
// itself.
func (f *flattener) probe(c rules.Chain, r *rules.Rule, path []string) (uint32, error) {
	mod := "limit"
	if r.Match.Limit == nil {
		mod = "recent"
	}
	if c == rules.ChainOutput {
		return 0, fmt.Errorf("%s: -m %s on a rule that decides nothing itself (%s) cannot be used in a chain OUTPUT reaches (%s): "+
			"the tc egress program settles no such tests; give the -m %s to the rule that decides, or move the rule to INPUT or FORWARD",
			r.Pos, mod, decidesNothing(r), strings.Join(path, " -> "), mod)
	}
	if f.probes >= MaxProbes {
		return 0, fmt.Errorf("%s: chain %s (%s): more than %d rules with -m limit or -m recent that decide nothing themselves "+
			"(a jump, goto, RETURN or rule without -j) on the way of %s's packets, counting each place a chain is reached from; "+
			"the data plane keeps %d such results per packet: give some of them to the rules that decide", r.Pos,
			path[len(path)-1], strings.Join(path, " -> "), MaxProbes, path[0], MaxProbes)
	}
	f.probes++
	return 1 << (f.probes - 1), nil
}

// prune drops the alternatives another one covers (so that RETURNs in a
// row do not multiply them: ¬udp ∧ ¬udp is ¬udp).
func prune(alts []Entry) []Entry {
	out := alts[:0:0]
	for i, x := range alts {
		dup := false
		for j, y := range alts {
			if i != j && covers(&y, &x) && (j < i || !covers(&x, &y)) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, x)
		}
	}
	return out
}

// covers reports (conservatively) whether every packet x matches, y
// matches: each test of y is a test of x, at least as narrow.
func covers(y, x *Entry) bool {
	if y.Match&^x.Match&^ML4Hdr != 0 || y.Match&ML4Hdr != 0 && x.Match&ML4 == 0 || y.Invert&x.Match != x.Invert&y.Match ||
		y.GuardMask&^x.GuardMask != 0 || x.GuardVal&y.GuardMask != y.GuardVal {
		return false
	}
	m, neg := y.Match, y.Invert
	on := func(bit uint64) bool { return m&bit != 0 }
	switch {
	case on(MFamily) && x.Family != y.Family,
		on(MProto) && x.Proto != y.Proto,
		on(MSPort) && (x.SPortLo < y.SPortLo || x.SPortHi > y.SPortHi),
		on(MDPort) && (x.DPortLo < y.DPortLo || x.DPortHi > y.DPortHi),
		on(MIfindex) && x.Ifindex != y.Ifindex,
		on(MMACSrc) && x.SrcMAC != y.SrcMAC,
		on(MMACDst) && x.DstMAC != y.DstMAC,
		on(MTCPFlags) && (x.TCPMask != y.TCPMask || x.TCPCmp != y.TCPCmp),
		on(MICMPType) && (x.ICMPType != y.ICMPType || x.Match&MICMPCode != y.Match&MICMPCode || x.ICMPCode != y.ICMPCode),
		on(MVLAN) && x.VLAN != y.VLAN,
		on(MVLANPrio) && x.VLANPrio != y.VLANPrio,
		on(MSrcSet) && x.SrcSet != y.SrcSet,
		on(MDstSet) && x.DstSet != y.DstSet,
		on(MCTState) && x.CTState&^y.CTState != 0:
		return false
	}
	for bit := uint64(1); bit != 0; bit <<= 1 { // header and connection tests: the same test
		if on(bit&(hdrTests|MRTHdr)) && !hdrFields(bit, x, y, false) {
			return false
		}
	}
	for _, a := range []struct {
		bit            uint64
		ya, ym, xa, xm [16]byte
	}{{MSrc, y.Src, y.SrcMask, x.Src, x.SrcMask}, {MDst, y.Dst, y.DstMask, x.Dst, x.DstMask}} {
		if !on(a.bit) {
			continue
		}
		py, px := prefix{a.ya, maskLen(a.ym)}, prefix{a.xa, maskLen(a.xm)}
		if neg&a.bit == 0 && !py.covers(px) || neg&a.bit != 0 && !px.covers(py) {
			return false
		}
	}
	return true
}

func (f *flattener) noForm(r *rules.Rule, path []string, err error) error {
	return fmt.Errorf("%s: %s, reached through %s, cannot be flattened: %w; write the tests of that field in one rule",
		r.Pos, r.String(), strings.Join(path, " -> "), err)
}

// copyMatch copies the match fields of e (not its action or rule) to d.
// What d's rule does with a match stays d's: its action, rule, logging,
// and its -m limit bucket, -m recent list, -m hashlimit bucket or
// -m connlimit count (Limit, State, HashLimit, ConnLimit: by rule id),
// probe bit and note key. The guard (probe bits) is a test: it is copied.
func copyMatch(d, e *Entry) {
	act, reason, rej, id, log, count, limit, state := d.Action, d.Reason, d.Reject, d.RuleID, d.Log, d.Count, d.Limit, d.State
	hash, conn, probe, note := d.HashLimit, d.ConnLimit, d.Probe, d.Note
	*d = *e
	d.Action, d.Reason, d.Reject, d.RuleID, d.Log, d.Count, d.Limit, d.State = act, reason, rej, id, log, count, limit, state
	d.HashLimit, d.ConnLimit, d.Probe, d.Note = hash, conn, probe, note
}

// flattenable are the tests conj and negate know how to combine. A test
// outside them (a match another change added without teaching them) makes
// the flattening refuse the rule set (ErrNoForm) rather than drop the test.
const flattenable = MFamily | MProto | MSrc | MDst | MSPort | MDPort | MIfindex | MMACSrc | MMACDst |
	MTCPFlags | MICMPType | MICMPCode | MVLAN | MFrag | ML4Hdr | MSrcSet | MDstSet | MCTState |
	MMark | MOif | MPktType | MSrcType | MDstType | hdrTests

// hdrTests are the header and connection tests that are each one test of
// fw_entry_match (FW_TEST: the invert bit negates exactly that test):
// negate flips the bit, conj takes a test one side has and keeps one both
// have only when it is the same test (else ErrNoForm). The routing header's
// tests are not among them (a packet without one fails them negated too),
// nor --ecn-tcp-* (never inverted); conj takes the routing header's
// (hdrFields knows them), negate refuses them.
const hdrTests = MLen | MTTL | MTOS | MECNIP | MSrcRange | MDstRange | MCTDir | MCTStatus | MCTProto | MMSS | MVLANPrio | MCTNat

// hdrFields copies the fields of header test bit from e to d, and says
// whether they are equal in d and e.
func hdrFields(bit uint64, d, e *Entry, copy bool) bool {
	type pair struct{ d, e any }
	var ps []pair
	switch bit {
	case MLen:
		ps = []pair{{&d.LenLo, &e.LenLo}, {&d.LenHi, &e.LenHi}}
	case MTTL:
		ps = []pair{{&d.TTLLo, &e.TTLLo}, {&d.TTLHi, &e.TTLHi}}
	case MTOS:
		ps = []pair{{&d.TOSMask, &e.TOSMask}, {&d.TOSCmp, &e.TOSCmp}}
	case MECNIP:
		ps = []pair{{&d.ECNIP, &e.ECNIP}}
	case MVLANPrio:
		ps = []pair{{&d.VLANPrio, &e.VLANPrio}}
	case MSrcRange:
		ps = []pair{{&d.SrcRange, &e.SrcRange}}
	case MDstRange:
		ps = []pair{{&d.DstRange, &e.DstRange}}
	case MCTStatus:
		ps = []pair{{&d.CTStatus, &e.CTStatus}}
	case MCTNat:
		ps = []pair{{&d.CTNat, &e.CTNat}}
	case MCTProto:
		ps = []pair{{&d.CTProto, &e.CTProto}}
	case MMSS:
		ps = []pair{{&d.MSSLo, &e.MSSLo}, {&d.MSSHi, &e.MSSHi}}
	case MRTType:
		ps = []pair{{&d.RTType, &e.RTType}}
	case MRTSegs:
		ps = []pair{{&d.RTSegsLo, &e.RTSegsLo}, {&d.RTSegsHi, &e.RTSegsHi}}
	case MRTLen:
		ps = []pair{{&d.RTLen, &e.RTLen}}
	}
	eq := true
	for _, p := range ps {
		switch dv := p.d.(type) {
		case *uint8:
			eq = eq && *dv == *p.e.(*uint8)
			if copy {
				*dv = *p.e.(*uint8)
			}
		case *uint16:
			eq = eq && *dv == *p.e.(*uint16)
			if copy {
				*dv = *p.e.(*uint16)
			}
		case *AddrRange:
			eq = eq && *dv == *p.e.(*AddrRange)
			if copy {
				*dv = *p.e.(*AddrRange)
			}
		}
	}
	return eq
}

// unknownTests refuses entries with a test outside known.
func unknownTests(known uint64, es ...Entry) error {
	for _, e := range es {
		if x := e.Match &^ known; x != 0 {
			return fmt.Errorf("a match (test bits %#x) that chains cannot carry yet: %w", x, ErrNoForm)
		}
	}
	return nil
}

// negate is ¬e as alternatives, each one field test (a port test two
// ranges). e's L4 tests fail on a packet without an L4 header too: a
// non-first fragment (-f), or a protocol whose header xdpfw does not read,
// which ¬proto already covers.
func negate(e Entry) ([]Entry, error) {
	if err := unknownTests(flattenable, e); err != nil {
		return nil, err
	}
	var out []Entry
	one := func(bit uint64, set func(*Entry)) {
		n := Entry{Chain: e.Chain, Match: bit, Invert: (e.Invert & bit) ^ bit}
		set(&n)
		out = append(out, n)
	}
	m := e.Match
	if m&ML4 != 0 {
		if m&MProto == 0 || e.Invert&MProto != 0 {
			return nil, fmt.Errorf("an L4 test without its protocol: %w", ErrNoForm)
		}
		if !l4Proto(e.Proto) {
			return []Entry{{Chain: e.Chain}}, nil // e matches nothing: ¬e everything
		}
		out = append(out, Entry{Chain: e.Chain, Match: MFrag})
	}
	if m&MFamily != 0 {
		fam := rules.FamilyIPv6
		if e.Family == rules.FamilyIPv6 {
			fam = rules.FamilyIPv4
		}
		out = append(out, Entry{Chain: e.Chain, Match: MFamily, Family: fam})
	}
	if m&MProto != 0 {
		one(MProto, func(n *Entry) { n.Proto = e.Proto })
	}
	if m&MSrc != 0 {
		one(MSrc, func(n *Entry) { n.Src, n.SrcMask = e.Src, e.SrcMask })
	}
	if m&MDst != 0 {
		one(MDst, func(n *Entry) { n.Dst, n.DstMask = e.Dst, e.DstMask })
	}
	for _, p := range []struct {
		bit    uint64
		lo, hi uint16
		src    bool
	}{{MSPort, e.SPortLo, e.SPortHi, true}, {MDPort, e.DPortLo, e.DPortHi, false}} {
		if m&p.bit == 0 {
			continue
		}
		for _, r := range rules.ComplementPorts([]rules.PortRange{{Lo: p.lo, Hi: p.hi}}) {
			n := Entry{Chain: e.Chain, Match: p.bit | ML4Hdr}
			if p.src {
				n.SPortLo, n.SPortHi = r.Lo, r.Hi
			} else {
				n.DPortLo, n.DPortHi = r.Lo, r.Hi
			}
			out = append(out, n)
		}
	}
	if m&MIfindex != 0 {
		one(MIfindex, func(n *Entry) { n.Ifindex = e.Ifindex })
	}
	if m&MMACSrc != 0 {
		one(MMACSrc, func(n *Entry) { n.SrcMAC = e.SrcMAC })
	}
	if m&MMACDst != 0 {
		one(MMACDst, func(n *Entry) { n.DstMAC = e.DstMAC })
	}
	if m&MTCPFlags != 0 {
		one(MTCPFlags, func(n *Entry) { n.TCPMask, n.TCPCmp = e.TCPMask, e.TCPCmp })
	}
	if m&MICMPType != 0 {
		bits := m & (MICMPType | MICMPCode)
		out = append(out, Entry{Chain: e.Chain, Match: bits, Invert: (e.Invert & bits) ^ bits,
			ICMPType: e.ICMPType, ICMPCode: e.ICMPCode})
	}
	if m&MVLAN != 0 {
		one(MVLAN, func(n *Entry) { n.VLAN = e.VLAN })
	}
	if m&MFrag != 0 {
		one(MFrag, func(*Entry) {})
	}
	if m&MSrcSet != 0 {
		one(MSrcSet, func(n *Entry) { n.SrcSet = e.SrcSet })
	}
	if m&MDstSet != 0 {
		one(MDstSet, func(n *Entry) { n.DstSet = e.DstSet })
	}
	if m&MCTState != 0 {
		if rest := ^e.CTState & rules.CTAll; rest != 0 {
			out = append(out, Entry{Chain: e.Chain, Match: MCTState, CTState: rest})
		}
	}
	if m&MOif != 0 { // never inverted: the complement is up to two ranges
		if e.OIfLo > 0 {
			out = append(out, Entry{Chain: e.Chain, Match: MOif, OIfLo: 0, OIfHi: e.OIfLo - 1})
		}
		if e.OIfHi < math.MaxUint32 {
			out = append(out, Entry{Chain: e.Chain, Match: MOif, OIfLo: e.OIfHi + 1, OIfHi: math.MaxUint32})
		}
	}
	if m&MPktType != 0 { // never inverted: the other types
		if rest := ^e.PktTypes & (1<<NumPktTypes - 1); rest != 0 {
			out = append(out, Entry{Chain: e.Chain, Match: MPktType, PktTypes: rest})
		}
	}
	if m&MMark != 0 {
		one(MMark, func(n *Entry) { n.Mark, n.MarkMask = e.Mark, e.MarkMask })
	}
	if m&MSrcType != 0 {
		one(MSrcType, func(n *Entry) { n.SrcTypes, n.TypeDev = e.SrcTypes, e.TypeDev })
	}
	if m&MDstType != 0 {
		one(MDstType, func(n *Entry) { n.DstTypes, n.TypeDev = e.DstTypes, e.TypeDev })
	}
	for bit := uint64(1); bit != 0; bit <<= 1 {
		if m&hdrTests&bit != 0 {
			one(bit, func(n *Entry) { hdrFields(bit, n, &e, true) })
		}
	}
	return out, nil
}

// l4Proto: the protocols whose header the data plane reads (KeyL4; bpf/lib/parse.h):
// TCP, UDP, UDP-Lite, SCTP, ICMP, ICMPv6.
func l4Proto(p uint8) bool { return p == 6 || p == 17 || p == 136 || p == 132 || p == 1 || p == 58 }

// ifindexes are the attached interfaces' indexes, in order: the packets'
// possible ifindex (an attach or detach recompiles the rules).
func (f *flattener) ifindexes() []uint32 {
	if f.ifx == nil {
		f.ifx = []uint32{}
		for _, n := range sortedNames(f.ifaces) {
			f.ifx = append(f.ifx, f.ifaces[n])
		}
	}
	return f.ifx
}

// conj is a ∧ b as entries (none: no packet matches both), with b's
// action and rule id. ifindexes are the packets' possible ifindex: two
// negated -i become one entry per other interface; two negated -p one
// entry per other protocol (otherProtos), which every later rule under
// the guard multiplies, within the flattening's bounds (ErrTooBig).
func conj(a, b Entry, ifindexes []uint32) ([]Entry, error) {
	if err := unknownTests(flattenable|MRTHdr, a, b); err != nil {
		return nil, err
	}
	out := b
	copyMatch(&out, &a) // a's tests, b's action
	out.Match |= b.Match & ML4Hdr
	if a.GuardMask&b.GuardMask&(a.GuardVal^b.GuardVal) != 0 {
		return nil, nil // one probe bit both set and clear
	}
	out.GuardMask, out.GuardVal = a.GuardMask|b.GuardMask, a.GuardVal|b.GuardVal
	both := a.Match & b.Match
	only := b.Match &^ a.Match
	// Fields b alone tests: take them as they are.
	take := func(bit uint64, set func()) {
		if only&bit != 0 {
			out.Match |= bit
			out.Invert = out.Invert&^bit | b.Invert&bit
			set()
		}
	}
	take(MFamily, func() { out.Family = b.Family })
	take(MProto, func() { out.Proto = b.Proto })
	take(MSrc, func() { out.Src, out.SrcMask = b.Src, b.SrcMask })
	take(MDst, func() { out.Dst, out.DstMask = b.Dst, b.DstMask })
	take(MSPort, func() { out.SPortLo, out.SPortHi = b.SPortLo, b.SPortHi })
	take(MDPort, func() { out.DPortLo, out.DPortHi = b.DPortLo, b.DPortHi })
	take(MIfindex, func() { out.Ifindex = b.Ifindex })
	take(MMACSrc, func() { out.SrcMAC = b.SrcMAC })
	take(MMACDst, func() { out.DstMAC = b.DstMAC })
	take(MTCPFlags, func() { out.TCPMask, out.TCPCmp = b.TCPMask, b.TCPCmp })
	if only&MICMPType != 0 {
		bits := b.Match & (MICMPType | MICMPCode)
		out.Match |= bits
		out.Invert = out.Invert&^bits | b.Invert&bits
		out.ICMPType, out.ICMPCode = b.ICMPType, b.ICMPCode
	}
	take(MVLAN, func() { out.VLAN = b.VLAN })
	take(MFrag, func() {})
	take(MSrcSet, func() { out.SrcSet = b.SrcSet })
	take(MDstSet, func() { out.DstSet = b.DstSet })
	take(MCTState, func() { out.CTState = b.CTState })
	take(MOif, func() { out.OIfLo, out.OIfHi = b.OIfLo, b.OIfHi })
	take(MPktType, func() { out.PktTypes = b.PktTypes })
	take(MMark, func() { out.Mark, out.MarkMask = b.Mark, b.MarkMask })
	// both -m addrtype tests share TypeDev: a guard and a rule that limit
	// them to different devices cannot be one entry
	if only&(MSrcType|MDstType) != 0 && a.Match&(MSrcType|MDstType) != 0 && a.TypeDev != b.TypeDev {
		return nil, fmt.Errorf("-m addrtype limited to different devices (--limit-iface-in/out): %w", ErrNoForm)
	}
	take(MSrcType, func() { out.SrcTypes, out.TypeDev = b.SrcTypes, b.TypeDev })
	take(MDstType, func() { out.DstTypes, out.TypeDev = b.DstTypes, b.TypeDev })
	for bit := uint64(1); bit != 0; bit <<= 1 {
		if bit&(hdrTests|MRTHdr) != 0 {
			take(bit, func() { hdrFields(bit, &out, &b, true) })
		}
	}

	// Fields both test: merge.
	inv := func(e *Entry, bit uint64) bool { return e.Invert&bit != 0 }
	if both&MFamily != 0 && a.Family != b.Family {
		return nil, nil
	}
	// enum: two negated tests of an equality field with a small domain,
	// expanded into one entry per value both allow.
	var enum []func(Entry) []Entry
	// eq merges an equality test (value equal or not, negated or not).
	eq := func(bit uint64, same bool, what string) (bool, error) {
		if both&bit == 0 {
			return true, nil
		}
		ia, ib := inv(&a, bit), inv(&b, bit)
		switch {
		case !ia && !ib:
			return same, nil
		case ia != ib:
			if same {
				return false, nil
			}
			if ia { // keep b's positive test
				out.Invert &^= bit
				return true, errSetFrom
			}
			return true, nil
		case same:
			return true, nil
		}
		switch bit {
		case MIfindex:
			enum = append(enum, func(o Entry) []Entry {
				var out []Entry
				for _, x := range ifindexes {
					if x != a.Ifindex && x != b.Ifindex {
						o.Ifindex, o.Invert = x, o.Invert&^MIfindex
						out = append(out, o)
					}
				}
				return out
			})
			return true, nil
		case MProto:
			enum = append(enum, func(o Entry) []Entry { return otherProtos(o, a.Proto, b.Proto) })
			return true, nil
		}
		return false, fmt.Errorf("! %s twice with different values: %w", what, ErrNoForm)
	}
	for _, t := range []struct {
		bit  uint64
		same bool
		what string
		from func()
	}{
		{MProto, a.Proto == b.Proto, "-p", func() { out.Proto = b.Proto }},
		{MIfindex, a.Ifindex == b.Ifindex, "-i", func() { out.Ifindex = b.Ifindex }},
		{MMACSrc, a.SrcMAC == b.SrcMAC, "--mac-source", func() { out.SrcMAC = b.SrcMAC }},
		{MMACDst, a.DstMAC == b.DstMAC, "--mac-destination", func() { out.DstMAC = b.DstMAC }},
		{MVLAN, a.VLAN == b.VLAN, "--vlan-id", func() { out.VLAN = b.VLAN }},
		{MFrag, true, "-f", func() {}},
		{MSrcSet, a.SrcSet == b.SrcSet, "--match-set src", func() { out.SrcSet = b.SrcSet }},
		{MDstSet, a.DstSet == b.DstSet, "--match-set dst", func() { out.DstSet = b.DstSet }},
	} {
		if t.bit == MFrag && both&MFrag != 0 {
			if inv(&a, MFrag) != inv(&b, MFrag) {
				return nil, nil
			}
			continue
		}
		if (t.bit == MSrcSet || t.bit == MDstSet) && both&t.bit != 0 && !t.same {
			return nil, fmt.Errorf("two different sets on one address: %w", ErrNoForm)
		}
		ok, err := eq(t.bit, t.same, t.what)
		if errors.Is(err, errSetFrom) {
			t.from()
			err = nil
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, nil
		}
	}
	if both&MCTState != 0 {
		if out.CTState = a.CTState & b.CTState; out.CTState == 0 {
			return nil, nil
		}
	}
	if both&MPktType != 0 { // never inverted
		if out.PktTypes = a.PktTypes & b.PktTypes; out.PktTypes == 0 {
			return nil, nil
		}
	}
	if both&MOif != 0 { // never inverted
		out.OIfLo, out.OIfHi = max(a.OIfLo, b.OIfLo), min(a.OIfHi, b.OIfHi)
		if out.OIfLo > out.OIfHi {
			return nil, nil
		}
	}
	// -m mark and -m addrtype twice: only the same test is one entry
	same := func(bit uint64, eq bool, what string) error {
		if both&bit != 0 && (!eq || inv(&a, bit) != inv(&b, bit)) {
			return fmt.Errorf("two different %s tests: %w", what, ErrNoForm)
		}
		return nil
	}
	for bit := uint64(1); bit != 0; bit <<= 1 {
		if bit&(hdrTests|MRTHdr) != 0 {
			if err := same(bit, hdrFields(bit, &a, &b, false), "header or connection"); err != nil {
				return nil, err
			}
		}
	}
	// -m addrtype twice on IPv4 packets: an IPv4 address has one type,
	// and each test is "its type is in the mask" (or not): two of them
	// are one such test, the masks intersected, joined or subtracted.
	// (IPv6's tests are not set tests: xt_addrtype's match_type6.)
	v4 := out.Match&MFamily != 0 && out.Family == rules.FamilyIPv4
	for _, t := range []struct {
		bit        uint64
		ma, mb, mo *uint16
	}{{MSrcType, &a.SrcTypes, &b.SrcTypes, &out.SrcTypes}, {MDstType, &a.DstTypes, &b.DstTypes, &out.DstTypes}} {
		if both&t.bit == 0 || !v4 || a.TypeDev != b.TypeDev || *t.ma == *t.mb && inv(&a, t.bit) == inv(&b, t.bit) {
			continue
		}
		ia, ib := inv(&a, t.bit), inv(&b, t.bit)
		m, neg := *t.ma&*t.mb, false
		switch {
		case ia && ib:
			m, neg = *t.ma|*t.mb, true
		case ia:
			m = *t.mb &^ *t.ma
		case ib:
			m = *t.ma &^ *t.mb
		}
		if m == 0 && !neg {
			return nil, nil
		}
		*t.mo, *t.ma, *t.mb = m, m, m // a and b now agree: same() below takes it
		out.Invert &^= t.bit
		if neg {
			out.Invert |= t.bit
		}
		a.Invert, b.Invert = a.Invert&^t.bit|out.Invert&t.bit, b.Invert&^t.bit|out.Invert&t.bit
	}
	if err := errors.Join(same(MMark, a.Mark == b.Mark && a.MarkMask == b.MarkMask, "-m mark"),
		same(MSrcType, a.SrcTypes == b.SrcTypes && a.TypeDev == b.TypeDev, "--src-type"),
		same(MDstType, a.DstTypes == b.DstTypes && a.TypeDev == b.TypeDev, "--dst-type")); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		bit          uint64
		alo, ahi     uint16
		blo, bhi     uint16
		outLo, outHi *uint16
	}{{MSPort, a.SPortLo, a.SPortHi, b.SPortLo, b.SPortHi, &out.SPortLo, &out.SPortHi},
		{MDPort, a.DPortLo, a.DPortHi, b.DPortLo, b.DPortHi, &out.DPortLo, &out.DPortHi}} {
		if both&p.bit == 0 {
			continue
		}
		r, ok := intersect(rules.PortRange{Lo: p.alo, Hi: p.ahi}, rules.PortRange{Lo: p.blo, Hi: p.bhi})
		if !ok {
			return nil, nil
		}
		*p.outLo, *p.outHi = r.Lo, r.Hi
	}
	if both&(MICMPType) != 0 {
		ok, err := conjICMP(&out, a, b)
		if err != nil || !ok {
			return nil, err
		}
	}
	if out.Match&MFrag != 0 && out.Invert&MFrag == 0 && out.Match&ML4 != 0 {
		return nil, nil // a non-first fragment has no L4 header
	}
	outs := []Entry{out}
	if both&MTCPFlags != 0 {
		outs = conjTCPFlags(out, a, b)
	}
	for _, ex := range enum {
		var next []Entry
		for _, o := range outs {
			next = append(next, ex(o)...)
		}
		outs = next
	}
	for _, f := range []struct {
		bit        uint64
		src        bool
		aAddr, aMk [16]byte
		bAddr, bMk [16]byte
	}{{MSrc, true, a.Src, a.SrcMask, b.Src, b.SrcMask}, {MDst, false, a.Dst, a.DstMask, b.Dst, b.DstMask}} {
		if both&f.bit == 0 {
			continue
		}
		pa := prefix{f.aAddr, maskLen(f.aMk)}
		pb := prefix{f.bAddr, maskLen(f.bMk)}
		ps, neg := conjPrefix(pa, inv(&a, f.bit), pb, inv(&b, f.bit))
		var next []Entry
		for _, o := range outs {
			for _, p := range ps {
				x := o
				addr, mask := p.bytes()
				if f.src {
					x.Src, x.SrcMask = addr, mask
				} else {
					x.Dst, x.DstMask = addr, mask
				}
				x.Invert &^= f.bit
				if neg {
					x.Invert |= f.bit
				}
				next = append(next, x)
			}
		}
		outs = next
	}
	return outs, nil
}

// otherProtos is o once per protocol number but x and y (¬x ∧ ¬y: an
// entry tests one protocol, equal or not, and the 8-bit field has no
// range), each a plain test: 254 entries, 255 when x is y. The tree
// holds them as disjoint points of its protocol dimension.
func otherProtos(o Entry, x, y uint8) []Entry {
	out := make([]Entry, 0, 254)
	o.Invert &^= MProto
	for v := range 256 {
		if p := uint8(v); p != x && p != y {
			o.Proto = p
			out = append(out, o)
		}
	}
	return out
}

// errSetFrom: eq kept b's test (internal to conj).
var errSetFrom = errors.New("take b")

// conjICMP merges two ICMP type[/code] tests into out.
func conjICMP(out *Entry, a, b Entry) (bool, error) {
	bits := MICMPType | MICMPCode
	ia, ib := a.Invert&MICMPType != 0, b.Invert&MICMPType != 0
	// contains: every packet of x's test is in y's.
	contains := func(y, x Entry) bool {
		return x.ICMPType == y.ICMPType && (y.Match&MICMPCode == 0 || x.Match&MICMPCode != 0 && x.ICMPCode == y.ICMPCode)
	}
	disjoint := !contains(a, b) && !contains(b, a)
	set := func(e Entry, neg bool) {
		out.Match = out.Match&^bits | e.Match&bits
		out.Invert &^= bits
		if neg {
			out.Invert |= e.Match & bits
		}
		out.ICMPType, out.ICMPCode = e.ICMPType, e.ICMPCode
	}
	switch {
	case !ia && !ib:
		switch {
		case contains(a, b):
			set(b, false)
		case contains(b, a):
			set(a, false)
		default:
			return false, nil
		}
	case ia && ib:
		switch {
		case contains(a, b):
			set(a, true)
		case contains(b, a):
			set(b, true)
		default:
			return false, fmt.Errorf("! --icmp-type twice with different types: %w", ErrNoForm)
		}
	default:
		pos, neg := a, b
		if ia {
			pos, neg = b, a
		}
		switch {
		case contains(neg, pos):
			return false, nil
		case disjoint:
			set(pos, false)
		default:
			return false, fmt.Errorf("an ICMP type without one of its codes: %w", ErrNoForm)
		}
	}
	return true, nil
}

// conjTCPFlags merges two --tcp-flags tests: every value of the flags
// they look at together (at most the six nameable ones, 64 values) that
// passes both, as one test, its negation, or one test per value.
func conjTCPFlags(out, a, b Entry) []Entry {
	mask := a.TCPMask | b.TCPMask
	pass := func(e Entry, v uint8) bool { return (v&e.TCPMask == e.TCPCmp) != (e.Invert&MTCPFlags != 0) }
	var good, bad []uint8
	for v := 0; v < 256; v++ {
		x := uint8(v)
		if x&^mask != 0 {
			continue
		}
		if pass(a, x) && pass(b, x) {
			good = append(good, x)
		} else {
			bad = append(bad, x)
		}
	}
	out.TCPMask = mask
	out.Invert &^= MTCPFlags
	switch {
	case len(good) == 0:
		return nil
	case len(bad) == 0: // no constraint left, but the header must be there
		out.Match = out.Match&^MTCPFlags | ML4Hdr
		return []Entry{out}
	case len(bad) == 1:
		out.TCPCmp = bad[0]
		out.Invert |= MTCPFlags
		return []Entry{out}
	}
	outs := make([]Entry, len(good))
	for i, v := range good {
		outs[i] = out
		outs[i].TCPCmp = v
	}
	return outs
}

// prefix is an address prefix: the first n bits of a (IPv4 in a's first
// four bytes).
type prefix struct {
	a [16]byte
	n int
}

func (p prefix) bit(i int) bool { return p.a[i/8]&(0x80>>(i%8)) != 0 }

// covers: every address of q is in p.
func (p prefix) covers(q prefix) bool {
	if q.n < p.n {
		return false
	}
	for i := range p.n {
		if p.bit(i) != q.bit(i) {
			return false
		}
	}
	return true
}

func (p prefix) bytes() (addr, mask [16]byte) {
	addr = p.a
	for i := range 16 * 8 {
		if i < p.n {
			mask[i/8] |= 0x80 >> (i % 8)
		} else {
			addr[i/8] &^= 0x80 >> (i % 8)
		}
	}
	return addr, mask
}

// minus is p less q (q inside p): the prefixes of p's addresses outside
// q, one per bit q adds.
func (p prefix) minus(q prefix) []prefix {
	var out []prefix
	for i := p.n; i < q.n; i++ {
		x := prefix{q.a, i + 1}
		x.a[i/8] ^= 0x80 >> (i % 8)
		out = append(out, x)
	}
	return out
}

func maskLen(m [16]byte) int {
	n := 0
	for _, b := range m {
		n += bits.OnesCount8(b)
	}
	return n
}

// conjPrefix is (±pa) ∧ (±pb) as prefixes, all negated (neg) or all not.
// The family is the entries' (both test an address of one family).
func conjPrefix(pa prefix, ia bool, pb prefix, ib bool) ([]prefix, bool) {
	switch {
	case !ia && !ib:
		switch {
		case pa.covers(pb):
			return []prefix{pb}, false
		case pb.covers(pa):
			return []prefix{pa}, false
		}
		return nil, false
	case ia && ib:
		switch {
		case pa.covers(pb):
			return []prefix{pa}, true
		case pb.covers(pa):
			return []prefix{pb}, true
		}
		// ¬a ∧ ¬b, disjoint: the complement of a, less b where b lies
		var out []prefix
		for _, x := range (prefix{n: 0}).minus(pa) {
			switch {
			case pb.covers(x):
			case x.covers(pb):
				out = append(out, x.minus(pb)...)
			default:
				out = append(out, x)
			}
		}
		return out, false
	}
	pos, neg := pa, pb
	if ia {
		pos, neg = pb, pa
	}
	switch {
	case neg.covers(pos):
		return nil, false
	case pos.covers(neg):
		return pos.minus(neg), false
	}
	return []prefix{pos}, false
}
