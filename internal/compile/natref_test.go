package compile

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestDecideNAT: the nat table's first match by hook, through user chains,
// RETURN and ACCEPT, as iptables walks it.
func TestDecideNAT(t *testing.T) {
	src := `*nat
:PF - [0:0]
-A PREROUTING -s 10.0.0.66 -j ACCEPT
-A PREROUTING -i wan0 -j PF
-A PREROUTING -p tcp --dport 8080 -j REDIRECT --to-ports 3128
-A PF -p udp -j RETURN
-A PF -p tcp --dport 80 -j DNAT --to-destination 192.168.1.10:8080
-A POSTROUTING -o wan0 -j MASQUERADE
COMMIT
`
	rs, err := rules.Parse("f", []byte(src), rules.ParseOptions{Family: rules.FamilyIPv4, NAT: true})
	if err != nil {
		t.Fatal(err)
	}
	pkt := func(in, out, s string, proto uint8, dport uint16) RefPacket {
		return RefPacket{InIface: in, OutIface: out, Src: netip.MustParseAddr(s), Dst: netip.MustParseAddr("10.0.0.1"),
			Proto: proto, L4: true, SPort: 40000, DPort: dport, CTState: CTNew}
	}
	for _, c := range []struct {
		hook rules.Chain
		p    RefPacket
		rule int
		kind rules.NATKind
	}{
		{rules.ChainPrerouting, pkt("wan0", "", "10.0.0.5", 6, 80), 4, rules.NATDNAT},
		{rules.ChainPrerouting, pkt("wan0", "", "10.0.0.66", 6, 80), 0, 0},  // ACCEPT: no translation
		{rules.ChainPrerouting, pkt("wan0", "", "10.0.0.5", 17, 80), -1, 0}, // PF returns, nothing else matches
		{rules.ChainPrerouting, pkt("lan0", "", "10.0.0.5", 6, 8080), 2, rules.NATRedirect},
		{rules.ChainPrerouting, pkt("lan0", "", "10.0.0.5", 6, 80), -1, 0},
		{rules.ChainPostrouting, pkt("", "wan0", "10.0.0.5", 17, 53), 5, rules.NATMasquerade},
		{rules.ChainPostrouting, pkt("", "lan0", "10.0.0.5", 17, 53), -1, 0},
		{rules.ChainInput, pkt("wan0", "", "10.0.0.5", 6, 80), -1, 0},
	} {
		d := DecideNAT(rs.NAT, c.hook, c.p)
		var kind rules.NATKind
		if d.Target != nil {
			kind = d.Target.Kind
		}
		if d.Rule != c.rule || kind != c.kind {
			t.Errorf("%s %+v: rule %d %v, want rule %d %v", c.hook, c.p, d.Rule, kind, c.rule, c.kind)
		}
	}
	if d := DecideNAT(nil, rules.ChainPrerouting, pkt("wan0", "", "10.0.0.5", 6, 80)); d.Rule != -1 || d.Target != nil {
		t.Errorf("no nat table: %+v", d)
	}
}

// randomNAT turns a random filter rule set with chains into a nat table:
// INPUT's rules into PREROUTING (DNAT, REDIRECT), FORWARD's into
// POSTROUTING (MASQUERADE, SNAT), ACCEPT kept sometimes; LOG rules left
// out; in user chains a translation of any kind (the classification does
// not depend on which).
func randomNAT(r *rand.Rand, rs *rules.RuleSet) *rules.RuleSet {
	nat := &rules.RuleSet{Chains: rs.Chains}
	to := &rules.NATTarget{Kind: rules.NATDNAT, AddrLo: netip.MustParseAddr("10.9.0.1"), AddrHi: netip.MustParseAddr("10.9.0.1")}
	for _, x := range rs.Rules {
		if x.Target.Verdict == rules.VerdictLog {
			continue
		}
		x.NAT = true
		x.Match.MACSrc, x.Match.MACDst = nil, nil // only in PREROUTING (and INPUT): the parser checks that
		switch x.Chain {
		case rules.ChainUser: // reached from either hook: no interface the other has not
			x.Match.InIface, x.Match.OutIface = nil, nil
		case rules.ChainInput:
			x.Chain = rules.ChainPrerouting
			x.Match.OutIface = nil
		case rules.ChainForward:
			x.Chain = rules.ChainPostrouting
			x.Match.InIface = nil
		}
		if x.Target.Verdict.Terminal() {
			x.Target = rules.Target{Verdict: rules.VerdictAccept}
			if r.IntN(4) > 0 {
				t := *to
				t.Kind = []rules.NATKind{rules.NATDNAT, rules.NATRedirect, rules.NATMasquerade, rules.NATSNAT}[r.IntN(4)]
				x.Target = rules.Target{Verdict: rules.VerdictNAT, NAT: &t}
			}
		}
		x.Text = x.Spec()
		nat.Rules = append(nat.Rules, x)
	}
	return nat
}

// TestNATClassifyAgreesWithReference: random nat tables with user chains,
// compiled into the classifier (CompileNAT), pick for every random first
// packet the rule DecideNAT's walk of the chains picks, at PREROUTING and
// POSTROUTING. The header matches (-m ttl...) are left out: a forwarded
// packet's POSTROUTING sees the TTL FORWARD does, which the caller of
// DecideNAT gives it.
func TestNATClassifyAgreesWithReference(t *testing.T) {
	defer func(h bool) { rules.RandomHeaderMatches = h }(rules.RandomHeaderMatches)
	rules.RandomHeaderMatches = false
	r := rand.New(rand.NewPCG(16, 3))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	sets, refused, checked, translated := 0, 0, 0, 0
	for set := 0; set < 200; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(40))
		if set%2 == 0 {
			rules.RandomChains(r, rs)
		}
		nat := randomNAT(r, rs)
		nt, _, err := CompileNAT(nat, Input{Ifaces: testIfaces})
		if errors.Is(err, ErrNoForm) || errors.Is(err, ErrTooBig) || errors.As(err, new(errTooBig)) {
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("set %d: %v\n%s", set, err, nat)
		}
		sets++
		for k := 0; k < 1000; k++ {
			p := randomRefPacket(r, nat, names)
			hook := rules.ChainPrerouting
			if p.Chain == rules.ChainForward {
				hook = rules.ChainPostrouting
				p.InIface = ""
			} else {
				p.OutIface = ""
			}
			want := DecideNAT(nat, hook, p)
			got := nt.Decide(hook, p, testDev(&p))
			if got.Rule != want.Rule || got.Target != want.Target {
				t.Fatalf("set %d packet %d at %s: classifier picks rule %d (%v), reference %d (%v)\npacket %+v\n%s",
					set, k, hook, got.Rule, got.Target, want.Rule, want.Target, p, nat)
			}
			if got.Target != nil {
				translated++
			}
			checked++
		}
	}
	if refused > sets {
		t.Errorf("%d of %d nat tables refused", refused, sets+refused)
	}
	t.Logf("%d nat tables, %d first packets agree (%d translated); %d tables refused (no single-entry form)", sets, checked, translated, refused)
}

// TestNATHookTranslates: a hook translates when a rule with a translation
// is in its chain or in a user chain it reaches (jump or goto, however
// deep); what only ACCEPTs or RETURNs, or a translation in a chain no
// rule of the hook reaches, does not (the data plane then skips the hook:
// fw_nat_no_hook).
func TestNATHookTranslates(t *testing.T) {
	for _, tc := range []struct {
		text       string
		pre, postr bool
	}{
		{"-t nat -A POSTROUTING -o eth0 -j MASQUERADE\n", false, true},
		{"", false, false},
		{"-t nat -A PREROUTING -p tcp --dport 80 -j ACCEPT\n-t nat -A POSTROUTING -j RETURN\n", false, false},
		{"-t nat -A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.0.0.1\n", true, false},
		{"-t nat -N a\n-t nat -N b\n-t nat -A PREROUTING -j a\n-t nat -A a -g b\n-t nat -A b -p udp -j REDIRECT\n", true, false},
		{"-t nat -N a\n-t nat -A a -p udp -j REDIRECT\n-t nat -A PREROUTING -j ACCEPT\n", false, false},
	} {
		rs, err := rules.Parse("nat", []byte(tc.text), rules.ParseOptions{NAT: true})
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		nat := rs.NAT
		if nat == nil {
			nat = &rules.RuleSet{}
		}
		if got := NATHookTranslates(nat, rules.ChainPrerouting); got != tc.pre {
			t.Errorf("%q: PREROUTING translates %v, want %v", tc.text, got, tc.pre)
		}
		if got := NATHookTranslates(nat, rules.ChainPostrouting); got != tc.postr {
			t.Errorf("%q: POSTROUTING translates %v, want %v", tc.text, got, tc.postr)
		}
	}
}
