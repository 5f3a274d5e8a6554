package compile

import (
	"github.com/xdpfw/xdpfw/internal/rules"
)

// The xdpfw-priority table (rules/priority.go) compiles into entries of
// its own (Tables.Prio) and a root per family (Tables.PrioRoots), walked by
// the same classifier as the rules: a HIGH rule is an ActAccept entry, a
// BULK one ActDrop, and the root's action is the table's policy. The data
// plane reads the action as the class; nothing is counted.

// priorityEntries compiles the priority rules of pol, in order: -i
// against the interfaces of names, -m set against sets, as a filter
// rule's. Warnings are about a rule each (Warning.Rule -1, its position).
func priorityEntries(pol *rules.RuleSet, names Names, sets map[string]SetInfo) ([]Entry, []Warning, error) {
	var (
		out  []Entry
		warn []Warning
	)
	for i := range pol.Priority {
		r := pol.Priority[i]
		r.Target.Verdict = classVerdict(r.Target.Verdict)
		ents, w, err := RuleEntries(&r, 0, names, sets)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range w {
			warn = append(warn, Warning{Rule: -1, Pos: r.Pos, Msg: pol.Priority[i].String() + ": " + m})
		}
		out = append(out, ents...)
	}
	return out, warn, nil
}

// classVerdict is the verdict a class compiles to: ACCEPT for HIGH, DROP
// for BULK.
func classVerdict(v rules.Verdict) rules.Verdict {
	if v == rules.VerdictHigh {
		return rules.VerdictAccept
	}
	return rules.VerdictDrop
}

// prioRoot is a priority root with the table's policy (buildTrees adds
// the trees).
func prioRoot(pol *rules.RuleSet) Root {
	r := Root{Action: ActDrop, Flags: RootPrio}
	if pol.PriorityDefault() == rules.VerdictHigh {
		r.Action = ActAccept
	}
	return r
}

// entryAt is entry i of the generation: Entries, then Prio.
func (t *Tables) entryAt(i uint32) *Entry {
	if n := uint32(len(t.Entries)); i >= n {
		return &t.Prio[i-n]
	}
	return &t.Entries[i]
}

// Priority is the Go twin of the data plane's class of a packet arriving
// (lib/priority.h): VerdictHigh without a priority table; BULK for a
// fragment; else the first priority entry the trees of p's family lead to
// that matches, or the policy.
func (t *Tables) Priority(p *RefPacket, dev Dev) rules.Verdict {
	v6 := 0
	if p.Src.Is6() {
		v6 = 1
	}
	root := &t.PrioRoots[v6]
	switch {
	case root.Flags&RootPrio == 0:
		return rules.VerdictHigh
	case p.Fragment || p.FirstFragment:
		return rules.VerdictBulk
	}
	q := *p // the entries are the PRIORITY chain's, whatever chain p is for
	q.Chain = rules.ChainPriority
	p = &q
	k := KeyOf(p, dev)
	act := root.Action
	var cands []uint32
	for _, g := range root.Groups {
		if g != NoTree {
			leaf, _ := t.walk(g, &k)
			cands = append(cands, t.LeafEntries(leaf)...)
		}
	}
	best := ^uint32(0)
	for _, i := range cands {
		if i >= best {
			continue
		}
		e := t.entryAt(i)
		if i < uint32(len(t.Ranges)) && t.Ranges[i].Exact {
			if !t.Ranges[i].Match(&k) {
				continue
			}
		} else if !e.Matches(p, dev, t.SetNames) {
			continue
		}
		best, act = i, e.Action
	}
	if act == ActAccept {
		return rules.VerdictHigh
	}
	return rules.VerdictBulk
}
