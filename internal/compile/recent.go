package compile

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// RecentRule is one -m recent rule's settings (struct fw_recent_rule).
type RecentRule struct {
	RuleID   uint32
	List     uint32 // ListID(name)
	Op       rules.RecentOp
	Flags    uint8 // RecentFlag*
	HitCount uint8
	WindowNS uint64   // --seconds in ns; 0: every time stamp
	Mask     [16]byte // on the address as the data plane holds it (IPv4 in the first 4 bytes)
}

// ListID is the id of a -m recent list: a hash of its name, the same in
// every generation, so that a list keeps its addresses across applies
// while a rule names it (as the kernel keeps a named table while a rule
// refers to it). Two names of one rule set with the same id are refused
// (recentRules).
func ListID(name string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return h.Sum32()
}

// recentMask is the mask a -m recent rule applies: --mask, or every bit.
func recentMask(m *rules.RecentMatch) [16]byte {
	var out [16]byte
	switch {
	case m.Mask.Is4():
		b := m.Mask.As4()
		copy(out[:], b[:])
	case m.Mask.IsValid():
		out = m.Mask.As16()
	default:
		for i := range out {
			out[i] = 0xff
		}
	}
	return out
}

// recentRules lists the settings of every -m recent rule.
func recentRules(in Input) ([]RecentRule, error) {
	var out []RecentRule
	names := map[uint32]string{}
	for i := range in.RuleSet.Rules {
		m := in.RuleSet.Rules[i].Match.Recent
		if m == nil {
			continue
		}
		id := ListID(m.Name)
		if other, ok := names[id]; ok && other != m.Name {
			return nil, fmt.Errorf("%s: -m recent lists %q and %q have the same id (%#x); rename one", in.RuleSet.Rules[i].Pos, other, m.Name, id)
		}
		names[id] = m.Name
		r := RecentRule{RuleID: in.IDs[i], List: id, Op: m.Op, HitCount: uint8(m.HitCount),
			WindowNS: uint64(m.Seconds) * 1e9, Mask: recentMask(m)}
		if m.Dest {
			r.Flags |= RecentFlagDest
		}
		if m.Invert {
			r.Flags |= RecentFlagInvert
		}
		if m.TTL {
			r.Flags |= RecentFlagTTL
		}
		out = append(out, r)
	}
	if len(out) > MaxRecentRules {
		return nil, fmt.Errorf("the rule set has %d rules with -m recent; the data plane holds at most %d", len(out), MaxRecentRules)
	}
	return out, nil
}

// ListIDs are the ids of the lists t's rules name (the data plane keeps
// the addresses of these and forgets the others').
func (t *Tables) ListIDs() map[uint32]bool {
	out := map[uint32]bool{}
	for _, r := range t.Recent {
		out[r.List] = true
	}
	return out
}

// stateModule names the module of m that makes its rule's entries state
// entries (Entry.State: settled after the walk, in rule order): "recent",
// "hashlimit", or "" for none.
func stateModule(m *rules.Match) string {
	switch {
	case m.Recent != nil:
		return "recent"
	case m.HashLimit != nil:
		return "hashlimit"
	case m.ConnLimit != nil:
		return "connlimit"
	}
	return ""
}

// HasProbes reports whether t has probes (Entry.Probe: -m limit or
// -m recent on a rule that decides nothing itself).
func (t *Tables) HasProbes() bool {
	return slices.ContainsFunc(t.Entries, func(e Entry) bool { return e.Probe != 0 })
}

// checkStateNotes refuses t when a packet could meet more noted entries
// (-m recent rules, probes and guarded entries: Entry.Noted, each rule at
// each place once) than the data plane settles (MaxStateNotes): for each
// chain and family, the bound is the sum over its trees of the most notes
// one leaf holds (a packet reaches one leaf per tree). The error names the
// rules of the worst leaves.
func checkStateNotes(in Input, t *Tables) error {
	memo := map[uint32][]Entry{}
	for r, root := range t.Roots {
		var worst []Entry
		for _, g := range root.Groups {
			if g != NoTree {
				worst = append(worst, t.maxNotes(g, memo)...)
			}
		}
		if len(worst) > MaxStateNotes {
			fam := "IPv4"
			if r%2 == 1 {
				fam = "IPv6"
			}
			var where []string
			seen := map[uint32]bool{}
			for _, e := range worst {
				for i, id := range in.IDs {
					if id == e.RuleID && !seen[id] {
						seen[id] = true
						where = append(where, in.RuleSet.Rules[i].Pos.String())
					}
				}
			}
			at := ""
			if len(where) > 0 {
				at = where[0] + ": "
			}
			return fmt.Errorf("%sa packet of %s (%s) could meet %d rules with -m recent or -m hashlimit, or behind a -m limit or -m recent "+
				"that decides nothing (rules at %s); the data plane settles at most %d per packet "+
				"(narrow them with -p, --dport or addresses, so that fewer of them can match one packet)",
				at, rules.Chain(r/2), fam, len(worst), strings.Join(where, ", "), MaxStateNotes)
		}
	}
	return nil
}

// maxNotes are the noted entries (one per note key) of the leaf under ref
// that holds the most (memo: by node, for nodes reached again).
func (t *Tables) maxNotes(ref uint32, memo map[uint32][]Entry) []Entry {
	if IsLeafRef(ref) {
		var out []Entry
		keys := map[uint32]bool{}
		for _, idx := range t.LeafEntries(ref) {
			if e := &t.Entries[idx]; e.Noted() && !keys[e.Note] {
				keys[e.Note] = true
				out = append(out, *e)
			}
		}
		return out
	}
	if v, ok := memo[ref]; ok {
		return v
	}
	var best []Entry
	for _, c := range t.Nodes[ref].Child {
		if n := t.maxNotes(c, memo); len(n) > len(best) {
			best = n
		}
	}
	memo[ref] = best
	return best
}
