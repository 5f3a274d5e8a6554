package rules

import (
	"math/rand/v2"
	"net/netip"
)

// randomNATChains are the user chains of RandomNAT, as Docker and
// kube-proxy name theirs.
var randomNATChains = [...]string{"DOCKER", "KUBE-SERVICES", "KUBE-POSTROUTING", "portfw"}

// RandomNAT returns a random, valid nat table (RuleSet.NAT, as
// ParseOptions.NAT reads it) of about n rules, IPv4, for differential and
// round-trip tests: every target (DNAT, SNAT, MASQUERADE, REDIRECT) with
// address ranges, port ranges and flags, ACCEPT and RETURN, user chains
// jumped to (-j, -g) from the one hook each belongs to, and the filter
// table's matches (RandomRule) where the hook has them; with
// knobs.IptablesOnly only what iptables-restore loads. Parse(String())
// yields the same table.
func RandomNAT(r *rand.Rand, n int, knobs RandomKnobs) *RuleSet {
	nat := &RuleSet{}
	hooks := []Chain{ChainPrerouting, ChainPrerouting, ChainPostrouting, ChainPostrouting, ChainOutput, ChainInput}
	type uchain struct {
		name string
		hook Chain
	}
	var chains []uchain
	for i := range r.IntN(len(randomNATChains) + 1) {
		c := uchain{randomNATChains[i], pick(r, hooks)}
		chains = append(chains, c)
		nat.Chains = append(nat.Chains, ChainDecl{Name: c.name})
	}
	for range n {
		rule := randomNATRule(r, pick(r, hooks), knobs)
		if len(chains) > 0 && chance(r, 40) {
			c := pick(r, chains)
			rule = randomNATRule(r, c.hook, knobs)
			rule.Chain, rule.UserChain = ChainUser, c.name
			if chance(r, 15) {
				rule.Target = Target{Verdict: VerdictReturn}
			}
		}
		rule.Text = rule.Spec()
		nat.Rules = append(nat.Rules, rule)
	}
	for _, c := range chains { // a jump to each chain from its hook, at a random place
		if !chance(r, 85) {
			continue
		}
		x := randomNATRule(r, c.hook, knobs)
		x.Target = Target{Verdict: pick(r, []Verdict{VerdictJump, VerdictJump, VerdictGoto}), Chain: c.name}
		x.Text = x.Spec()
		at := r.IntN(len(nat.Rules) + 1)
		nat.Rules = append(nat.Rules[:at], append([]Rule{x}, nat.Rules[at:]...)...)
	}
	return nat
}

// randomNATRule returns a random nat rule of hook: the matches of a random
// filter rule that the hook has, and a target it may have.
func randomNATRule(r *rand.Rand, hook Chain, knobs RandomKnobs) Rule {
	rule := RandomRule(r)
	for rule.Match.Family == FamilyIPv6 {
		rule = RandomRule(r) // an IPv6 rule: another (xdpfw's nat is IPv4)
	}
	m := &rule.Match
	m.Family = FamilyIPv4
	rule.Chain, rule.NAT = hook, true
	rule.Comments = nil
	if hook == ChainOutput || hook == ChainPostrouting {
		m.InIface, m.MACSrc, m.MACDst = nil, nil, nil
	}
	if hook == ChainPrerouting || hook == ChainInput {
		m.OutIface = nil
	}
	m.AddrType = nil // --limit-iface-in/out depend on the hook: not drawn here
	knobs.keep(&rule)
	rule.Target = Target{Verdict: VerdictAccept}
	if chance(r, 80) {
		kinds := map[Chain][]NATKind{ChainPrerouting: {NATDNAT, NATDNAT, NATRedirect}, ChainOutput: {NATDNAT, NATRedirect},
			ChainPostrouting: {NATMasquerade, NATMasquerade, NATSNAT}, ChainInput: {NATSNAT}}[hook]
		t := &NATTarget{Kind: pick(r, kinds)}
		ports := m.Proto != nil && !m.Proto.Invert && (m.Proto.Proto == protoTCP || m.Proto.Proto == protoUDP)
		if t.Kind == NATDNAT || t.Kind == NATSNAT {
			if !ports || chance(r, 80) {
				t.AddrLo = netip.AddrFrom4([4]byte{10, 200, byte(r.IntN(4)), byte(1 + r.IntN(250))})
				t.AddrHi = t.AddrLo
				if chance(r, 25) {
					b := t.AddrLo.As4()
					b[3] += byte(r.IntN(256 - int(b[3])))
					t.AddrHi = netip.AddrFrom4(b)
				}
			}
		}
		if ports && (chance(r, 50) || !t.AddrLo.IsValid() && (t.Kind == NATDNAT || t.Kind == NATSNAT)) {
			t.Ports = true
			t.PortLo = uint16(1 + r.IntN(65535))
			t.PortHi = t.PortLo
			if chance(r, 30) {
				t.PortHi += uint16(r.IntN(65536 - int(t.PortLo)))
			}
		}
		t.Random = chance(r, 15)
		t.RandomFully = (t.Kind == NATSNAT || t.Kind == NATMasquerade) && chance(r, 15)
		t.Persistent = (t.Kind == NATSNAT || t.Kind == NATDNAT) && chance(r, 10)
		rule.Target = Target{Verdict: VerdictNAT, NAT: t}
	}
	return rule
}
