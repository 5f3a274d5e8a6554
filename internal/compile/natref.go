package compile

import "github.com/xdpfw/xdpfw/internal/rules"

// NATDecision is the nat table's answer for a connection's first packet at
// one of its hooks (docs/nat.md): the rule that decides (an index in the
// nat RuleSet's Rules; -1 when none does: the policy, ACCEPT) and, when
// that rule translates, its translation.
type NATDecision struct {
	Rule   int
	Target *rules.NATTarget // nil: no translation at this hook
}

// DecideNAT is the reference matcher of the nat table: iptables'
// first-match walk of hook's chain (ChainPrerouting, ChainInput,
// ChainOutput or ChainPostrouting) and the user chains it reaches, over nat
// (RuleSet.NAT, may be nil), for the first packet p of a connection. A
// translating rule or ACCEPT ends the walk; RETURN in the built-in chain,
// or its end, is the policy ACCEPT. The data plane's classification of nat
// rules must agree with it (the oracle of its differential tests).
func DecideNAT(nat *rules.RuleSet, hook rules.Chain, p RefPacket) NATDecision {
	if nat == nil {
		return NATDecision{Rule: -1}
	}
	p.Chain = hook
	d := DecideAt(nat, p, nil)
	if d.Verdict == rules.VerdictNAT {
		return NATDecision{Rule: d.Rule, Target: nat.Rules[d.Rule].Target.NAT}
	}
	return NATDecision{Rule: d.Rule}
}
