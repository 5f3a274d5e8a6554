package compile

import (
	"fmt"
	"hash/fnv"

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
	}
	return ""
}

// checkStateNotes refuses t when a packet could meet more -m recent or -m
// hashlimit rules
// than the data plane notes (MaxStateNotes): for each chain and family,
// the bound is the sum over its trees of the most -m recent rules one
// leaf holds (a packet reaches one leaf per tree).
func checkStateNotes(t *Tables) error {
	if len(t.Recent) == 0 && len(t.HashLimits) == 0 {
		return nil
	}
	memo := map[uint32]int{}
	for r, root := range t.Roots {
		total := 0
		for _, g := range root.Groups {
			if g != NoTree {
				total += t.maxStateRules(g, memo)
			}
		}
		if total > MaxStateNotes {
			fam := "IPv4"
			if r%2 == 1 {
				fam = "IPv6"
			}
			return fmt.Errorf("a packet of %s (%s) could meet %d rules with -m recent or -m hashlimit; the data plane settles at most %d per packet "+
				"(narrow them with -p, --dport or addresses, so that fewer of them can match one packet)", rules.Chain(r/2), fam, total, MaxStateNotes)
		}
	}
	return nil
}

// maxStateRules is the most -m recent rules one leaf under ref holds
// (memo: by node, for nodes reached again).
func (t *Tables) maxStateRules(ref uint32, memo map[uint32]int) int {
	if IsLeafRef(ref) {
		ids := map[uint32]bool{}
		for _, idx := range t.LeafEntries(ref) {
			if e := &t.Entries[idx]; e.State {
				ids[e.RuleID] = true
			}
		}
		return len(ids)
	}
	if v, ok := memo[ref]; ok {
		return v
	}
	best := 0
	for _, c := range t.Nodes[ref].Child {
		best = max(best, t.maxStateRules(c, memo))
	}
	memo[ref] = best
	return best
}
