package compile

import (
	"fmt"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// The nat table compiles into the same classifier as the filter table
// (docs/nat.md): its chains are flattened (user chains included) and
// their entries put into the classifier's chain slots, so the first packet
// of a connection finds its translation at a hook with one tree walk,
// whatever the number of nat rules; later packets take the translation
// their conntrack entry holds and never reach it.
//
// The classifier has three chain slots (INPUT, FORWARD, OUTPUT: their
// roots, -i and -o resolution). The nat hooks are put where their
// packets and interfaces fit:
//
//	Tables: PREROUTING in INPUT's slot (packets arriving: -i),
//	        POSTROUTING in FORWARD's (packets leaving by the FIB's or tc's
//	        egress device: -o, against every host interface),
//	        OUTPUT in OUTPUT's (locally generated: tc egress)
//	Input:  the nat INPUT chain (SNAT of packets delivered here) in
//	        INPUT's slot
//
// A deciding entry is ACCEPT; its RuleID says which nat rule decided:
// FirstRuleID + the rule's index in the nat RuleSet. That rule's
// Target.NAT is the translation (nil: ACCEPT, no translation); no
// deciding entry is the policy, ACCEPT.
type NATTables struct {
	Tables *Tables
	Input  *Tables // nil: the nat INPUT chain has no rules
	rules  []rules.Rule
}

// natSlots maps each nat hook to the table (0: Tables, 1: Input) and the
// chain slot it is compiled into.
var natSlots = map[rules.Chain]struct {
	table int
	slot  rules.Chain
}{
	rules.ChainPrerouting:  {0, rules.ChainInput},
	rules.ChainPostrouting: {0, rules.ChainForward},
	rules.ChainOutput:      {0, rules.ChainOutput},
	rules.ChainInput:       {1, rules.ChainInput},
}

// CompileNAT compiles the nat table nat (rules.RuleSet.NAT) with the
// interfaces, sets and bounds of in (its RuleSet and IDs are not read).
func CompileNAT(nat *rules.RuleSet, in Input) (*NATTables, []Warning, error) {
	out := &NATTables{rules: nat.Rules}
	var warn []Warning
	for table := range 2 {
		rs := &rules.RuleSet{Chains: nat.Chains}
		var idx []int // nat rule index of each rule of rs
		for i, r := range nat.Rules {
			if r.Chain != rules.ChainUser {
				s, ok := natSlots[r.Chain]
				if !ok {
					return nil, nil, fmt.Errorf("%s: nat rule in chain %s", r.Pos, r.Chain)
				}
				if s.table != table {
					continue
				}
				r.Chain = s.slot
			}
			r.NAT = false
			if r.Target.Verdict == rules.VerdictNAT {
				r.Target = rules.Target{Verdict: rules.VerdictAccept} // decides; RuleID names the translation
			}
			rs.Rules = append(rs.Rules, r)
			idx = append(idx, i)
		}
		if table == 1 && !hasBuiltin(rs) {
			break
		}
		c := in
		c.RuleSet = rs
		c.IDs = make([]uint32, len(rs.Rules))
		for k, i := range idx {
			c.IDs[k] = uint32(FirstRuleID + i)
		}
		t, w, err := Compile(c)
		if err != nil {
			return nil, nil, fmt.Errorf("the nat table: %w", err)
		}
		for _, x := range w {
			if x.Rule >= 0 {
				x.Rule = idx[x.Rule]
			}
			warn = append(warn, x)
		}
		if table == 0 {
			out.Tables = t
		} else {
			out.Input = t
		}
	}
	return out, warn, nil
}

// hasBuiltin reports whether rs has a rule in a built-in chain.
func hasBuiltin(rs *rules.RuleSet) bool {
	for i := range rs.Rules {
		if rs.Rules[i].Chain != rules.ChainUser {
			return true
		}
	}
	return false
}

// Decide is the Go twin of the data plane's nat classification: the
// classifier's walk of hook's slot for the first packet p of a connection
// (as the hook sees it), on the interfaces dev. It must agree with
// DecideNAT.
func (n *NATTables) Decide(hook rules.Chain, p RefPacket, dev Dev) NATDecision {
	s, ok := natSlots[hook]
	t := n.Tables
	if s.table == 1 {
		t = n.Input
	}
	if !ok || t == nil {
		return NATDecision{Rule: -1}
	}
	p.Chain = s.slot
	c := t.Classify(&p, dev)
	if c.Entry < 0 {
		return NATDecision{Rule: -1}
	}
	i := int(t.Entries[c.Entry].RuleID - FirstRuleID)
	return NATDecision{Rule: i, Target: n.rules[i].Target.NAT}
}

// NATHookTranslates reports whether a connection's first packet can be
// translated at hook by the nat table nat: a rule with a translation (DNAT,
// REDIRECT, SNAT, MASQUERADE) in hook's chain or a user chain it jumps or
// goes to, however deep. None: the data plane skips the hook's stage
// (fw_nat_no_hook), whose classification could only leave the
// connection as it is.
func NATHookTranslates(nat *rules.RuleSet, hook rules.Chain) bool {
	seen := map[string]bool{}
	var reach func(chain rules.Chain, user string) bool
	reach = func(chain rules.Chain, user string) bool {
		for i := range nat.Rules {
			r := &nat.Rules[i]
			if r.Chain != chain || chain == rules.ChainUser && r.UserChain != user {
				continue
			}
			switch r.Target.Verdict {
			case rules.VerdictNAT:
				return true
			case rules.VerdictJump, rules.VerdictGoto:
				if !seen[r.Target.Chain] {
					seen[r.Target.Chain] = true
					if reach(rules.ChainUser, r.Target.Chain) {
						return true
					}
				}
			}
		}
		return false
	}
	return reach(hook, "")
}
