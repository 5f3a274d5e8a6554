package rules

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// diffRuleSets compares rules and policies, ignoring Pos and Text.
func diffRuleSets(a, b *RuleSet) string {
	if len(a.Rules) != len(b.Rules) {
		return fmt.Sprintf("%d rules vs %d", len(a.Rules), len(b.Rules))
	}
	for i := range a.Rules {
		if x, y := strip(a.Rules[i]), strip(b.Rules[i]); !reflect.DeepEqual(x, y) {
			return fmt.Sprintf("rule %d differs:\n  %s\n  %#v\nvs\n  %s\n  %#v", i, a.Rules[i], x, b.Rules[i], y)
		}
	}
	if len(a.Raw) != len(b.Raw) {
		return fmt.Sprintf("%d raw rules vs %d", len(a.Raw), len(b.Raw))
	}
	for i := range a.Raw {
		if x, y := strip(a.Raw[i]), strip(b.Raw[i]); !reflect.DeepEqual(x, y) {
			return fmt.Sprintf("raw rule %d differs:\n  %s\nvs\n  %s", i, a.Raw[i], b.Raw[i])
		}
	}
	if len(a.Policies) != len(b.Policies) {
		return fmt.Sprintf("%d policies vs %d", len(a.Policies), len(b.Policies))
	}
	if len(a.Chains) != len(b.Chains) {
		return fmt.Sprintf("%d chains vs %d", len(a.Chains), len(b.Chains))
	}
	for i := range a.Chains {
		if a.Chains[i].Name != b.Chains[i].Name {
			return fmt.Sprintf("chain %d: %s vs %s", i, a.Chains[i].Name, b.Chains[i].Name)
		}
	}
	for i := range a.Policies {
		x, y := a.Policies[i], b.Policies[i]
		x.Pos, y.Pos = Pos{}, Pos{}
		if x != y {
			return fmt.Sprintf("policy %d differs: %+v vs %+v", i, x, y)
		}
	}
	return ""
}

// assertRoundTrip checks that Parse(rs.String()) equals rs and that the
// canonical text is a fixed point.
func assertRoundTrip(t *testing.T, rs *RuleSet) {
	t.Helper()
	text := rs.String()
	again, err := Parse("roundtrip", []byte(text), ParseOptions{})
	if err != nil {
		t.Fatalf("re-parse failed: %v\n%s", err, text)
	}
	if d := diffRuleSets(rs, again); d != "" {
		t.Fatalf("round trip: %s\n%s", d, text)
	}
	if text2 := again.String(); text2 != text {
		t.Fatalf("String not stable:\n%s\nvs\n%s", text, text2)
	}
	for i, r := range again.Rules {
		if r.Text != r.Spec() {
			t.Fatalf("rule %d: Text %q != Spec %q", i, r.Text, r.Spec())
		}
	}
}

func TestRandomRuleSetRoundTrip(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		rs := RandomRuleSet(r, 1+r.IntN(60))
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			for i, rule := range rs.Rules {
				if rule.Text != rule.Spec() {
					t.Fatalf("rule %d: Text %q != Spec %q", i, rule.Text, rule.Spec())
				}
			}
			assertRoundTrip(t, rs)
		})
	}
}

// TestRandomChainsRoundTrip: rule sets with user chains, jumps, gotos,
// RETURNs and rules without -j print as -P, -N and -A lines that parse
// back into the same rule set.
func TestRandomChainsRoundTrip(t *testing.T) {
	kinds := map[Verdict]int{}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 0xc4a1))
		rs := RandomRuleSet(r, 1+r.IntN(40))
		RandomChains(r, rs)
		for _, rule := range rs.Rules {
			kinds[rule.Target.Verdict]++
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { assertRoundTrip(t, rs) })
	}
	for _, v := range []Verdict{VerdictJump, VerdictGoto, VerdictReturn, VerdictNone} {
		if kinds[v] == 0 {
			t.Errorf("no %s rule drawn", v)
		}
	}
}

// TestChainFileSyntax: iptables-save's declarations, -N/-X/-F lines, a
// chain named reject (OpenWrt) beside REJECT, and a second *filter section
// that drops the first one's chains.
func TestChainFileSyntax(t *testing.T) {
	src := `*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:reject - [0:0]
:f2b-sshd - [12:3456]
-A INPUT -p tcp -m multiport --dports 22 -j f2b-sshd
-A INPUT -j reject
-A f2b-sshd -s 192.0.2.1/32 -j REJECT --reject-with icmp-port-unreachable
-A f2b-sshd -j RETURN
-A reject -p tcp -j REJECT --reject-with tcp-reset
-A reject -j REJECT --reject-with icmp-port-unreachable
-A reject -g f2b-sshd
-A reject -p udp
COMMIT
`
	rs, err := Parse("openwrt", []byte(src), ParseOptions{Family: FamilyIPv4})
	if err != nil {
		t.Fatal(err)
	}
	want := `-P INPUT DROP -4
-P FORWARD ACCEPT -4
-P OUTPUT ACCEPT -4
-N reject
-N f2b-sshd
-A INPUT -4 -p tcp --dport 22 -j f2b-sshd
-A INPUT -4 -j reject
-A f2b-sshd -s 192.0.2.1/32 -j REJECT --reject-with icmp-port-unreachable
-A f2b-sshd -4 -j RETURN
-A reject -4 -p tcp -j REJECT --reject-with tcp-reset
-A reject -4 -j REJECT --reject-with icmp-port-unreachable
-A reject -4 -g f2b-sshd
-A reject -4 -p udp
`
	if got := rs.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	assertRoundTrip(t, rs)
	rs, err = Parse("x", []byte("-N a\n-N b\n-A a -j DROP\n-A INPUT -j a\n-F a\n-F INPUT\n-X a\n-A b -j RETURN\n-F\n"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rs.String(); got != "-N b\n" {
		t.Errorf("after -F/-X: %q", got)
	}
	rs, err = Parse("x", []byte("*filter\n:a - [0:0]\n-A INPUT -j a\nCOMMIT\n*filter\n:b - [0:0]\nCOMMIT\n"), ParseOptions{})
	if err != nil || rs.String() != "-N b\n" {
		t.Errorf("second *filter: %v %q", err, rs)
	}
}

func TestRandomRuleSetDeterministic(t *testing.T) {
	a := RandomRuleSet(rand.New(rand.NewPCG(1, 2)), 50)
	b := RandomRuleSet(rand.New(rand.NewPCG(1, 2)), 50)
	if a.String() != b.String() {
		t.Error("same seed, different rule sets")
	}
}

// TestRandomKnobs: a knob only removes what it names; the rules keep their
// order, chains and targets, and round-trip.
func TestRandomKnobs(t *testing.T) {
	for seed := range uint64(50) {
		all := RandomRuleSet(rand.New(rand.NewPCG(seed, 3)), 60)
		k := RandomKnobs{IptablesOnly: true, NoCTState: true}
		rs := RandomRuleSetWith(rand.New(rand.NewPCG(seed, 3)), 60, k)
		if len(rs.Rules) != len(all.Rules) || fmt.Sprint(rs.Policies) != fmt.Sprint(all.Policies) {
			t.Fatalf("seed %d: knobs changed the shape of the rule set", seed)
		}
		for i, r := range rs.Rules {
			m, tg := r.Match, r.Target
			if r.Chain != all.Rules[i].Chain || tg.Verdict != all.Rules[i].Target.Verdict {
				t.Fatalf("seed %d rule %d: %q is not %q less the knobs", seed, i, r.Text, all.Rules[i].Text)
			}
			udplitePorts := m.Proto != nil && m.Proto.Proto == protoUDPLite && (m.NeedsL4())
			if m.CTState != nil || m.VLAN != nil || m.MACDst != nil || (tg.Log && tg.Verdict != VerdictLog) ||
				tg.LogRate != (LogRate{}) || tg.LogBurst != 0 || udplitePorts || (m.ICMP != nil && m.ICMP.Any && m.Family == FamilyIPv6) {
				t.Fatalf("seed %d rule %d: %q has what the knobs leave out", seed, i, r.Text)
			}
			if r.Text != r.Spec() {
				t.Fatalf("seed %d rule %d: Text %q != Spec %q", seed, i, r.Text, r.Spec())
			}
		}
		assertRoundTrip(t, rs)
	}
}

// TestRandomRuleSetCoverage checks that the generator produces every feature
// the differential tests rely on.
func TestRandomRuleSetCoverage(t *testing.T) {
	rs := RandomRuleSet(rand.New(rand.NewPCG(42, 42)), 20000)
	seen := map[string]bool{}
	mark := func(ok bool, what string) {
		if ok {
			seen[what] = true
		}
	}
	v4len, v6len := map[int]bool{}, map[int]bool{}
	for _, r := range rs.Rules {
		m := r.Match
		mark(true, "chain "+r.Chain.String())
		mark(true, "family "+m.Family.String())
		mark(true, "verdict "+r.Target.Verdict.String())
		mark(r.Target.RejectWith != "", "reject-with")
		for _, a := range []*AddrMatch{m.Src, m.Dst} {
			if a == nil {
				continue
			}
			if a.Prefix.Addr().Is4() {
				v4len[a.Prefix.Bits()] = true
			} else {
				v6len[a.Prefix.Bits()] = true
			}
			mark(a.Invert, "! address")
		}
		if p := m.Proto; p != nil {
			mark(true, "proto "+protoName(p.Proto))
			mark(p.Invert, "! -p")
		}
		for _, pm := range []*PortMatch{m.SPort, m.DPort, m.Ports} {
			if pm == nil {
				continue
			}
			mark(len(pm.Ranges) == 1 && pm.Ranges[0].Lo == pm.Ranges[0].Hi, "single port")
			mark(len(pm.Ranges) == 1 && pm.Ranges[0].Lo != pm.Ranges[0].Hi, "port range")
			mark(len(pm.Ranges) > 1, "multiport")
			mark(pm.Invert, "! port")
		}
		mark(m.Ports != nil, "--ports")
		if f := m.TCPFlags; f != nil {
			mark(f.Mask == synMask && f.Comp == synComp, "--syn")
			mark(f.Mask != synMask, "--tcp-flags")
			mark(f.Invert, "! tcp flags")
		}
		if c := m.ICMP; c != nil {
			mark(c.Any, "icmp any")
			mark(c.Code >= 0, "icmp code")
			mark(!c.Any && c.Code < 0, "icmp type")
			mark(c.Invert, "! icmp")
			mark(m.Family == FamilyIPv6, "icmpv6")
		}
		if i := m.InIface; i != nil {
			mark(true, "iface "+i.Name)
			mark(i.Prefix, "iface prefix")
			mark(i.Invert, "! iface")
		}
		if o := m.OutIface; o != nil {
			mark(r.Chain == ChainForward, "-o")
			mark(o.Prefix, "-o prefix")
			mark(o.Invert, "! -o")
		}
		mark(m.MACSrc != nil, "mac src")
		mark(m.MACDst != nil, "mac dst")
		mark(m.MACSrc != nil && m.MACSrc.Invert, "! mac")
		mark(m.VLAN != nil, "vlan")
		if a := m.AddrType; a != nil {
			mark(a.Src != 0, "--src-type")
			mark(a.Dst != 0, "--dst-type")
			mark(a.SrcInvert || a.DstInvert, "! addrtype")
			mark(a.Limit == LimitIn, "--limit-iface-in")
			mark(a.Limit == LimitOut, "--limit-iface-out")
			mark((a.Src|a.Dst)&AddrIPv4Only != 0, "addrtype IPv4 only")
		}
		if t := m.PktType; t != nil {
			mark(true, "pkttype "+formatPktType(t.Type))
			mark(t.Invert, "! pkttype")
		}
		mark(m.VLAN != nil && m.VLAN.Invert, "! vlan")
		mark(m.VLANPrio != nil, "vlan prio")
		mark(m.VLANPrio != nil && m.VLANPrio.Invert, "! vlan prio")
		mark(m.VLANPrio != nil && m.VLAN != nil, "vlan id and prio")
		mark(m.Fragment != nil && *m.Fragment, "-f")
		mark(m.Fragment != nil && !*m.Fragment, "! -f")
		mark(m.L4Header, "bare -m tcp")
		mark(m.L4Header && m.Family != FamilyIPv4, "bare -m tcp on IPv6")
		mark(len(r.Comments) > 0, "comment")
		mark(len(r.Comments) > 1, "two comments")
		mark(m.CTState != nil, "ctstate")
		mark(m.CTState != nil && m.CTState.Invert, "! ctstate")
		mark(m.SrcRange != nil || m.DstRange != nil, "iprange")
		mark(m.SrcRange != nil && m.SrcRange.From.Is6(), "iprange v6")
		mark(m.DstRange != nil && m.DstRange.Invert, "! iprange")
		mark(m.Length != nil, "length")
		mark(m.Length != nil && m.Length.Invert, "! length")
		mark(m.TTL != nil && m.Family == FamilyIPv4, "ttl")
		mark(m.TTL != nil && m.Family == FamilyIPv6, "hl")
		mark(m.TTL != nil && m.TTL.Op == TTLNe, "ttl ne")
		mark(m.DSCP != nil, "dscp")
		mark(m.TOS != nil, "tos")
		mark(m.ECN != nil && m.ECN.IPECT >= 0, "ecn ip")
		mark(m.ECN != nil && m.ECN.TCPMask != 0, "ecn tcp")
		mark(m.RT != nil, "rt")
		mark(m.RT != nil && m.RT.Type != nil && m.RT.Segs != nil, "rt type segsleft")
		mark(m.RT != nil && m.RT.Len != nil, "rt len")
		mark(m.MSS != nil, "tcpmss")
		mark(m.MSS != nil && m.MSS.Invert, "! tcpmss")
		mark(m.CTProto != nil, "ctproto")
		mark(m.CTStatus != nil, "ctstatus")
		mark(m.CTStatus != nil && m.CTStatus.Mask == 0, "ctstatus NONE")
		mark(m.CTDir != nil, "ctdir")
		mark(m.CTAddrs(), "ctorigsrc etc.")
		mark(m.CTState != nil && m.CTState.Mask&(CTSNAT|CTDNAT) != 0, "ctstate NAT")
		tg := r.Target
		mark(tg.Log, "--log")
		mark(tg.LogPrefix != "", "--log-prefix")
		mark(tg.LogLevel != "", "--log-level")
		mark(!tg.LogRate.IsZero(), "--log-rate")
		mark(tg.LogBurst != 0, "--log-burst")
		mark(tg.Log && tg.Verdict == VerdictReject, "REJECT --log")
	}
	for _, want := range []string{
		"chain INPUT", "chain FORWARD", "family any", "family ipv4", "family ipv6",
		"verdict ACCEPT", "verdict DROP", "verdict REJECT", "reject-with", "! address",
		"proto tcp", "proto udp", "proto icmp", "proto ipv6-icmp", "proto sctp", "proto udplite", "! -p",
		"single port", "port range", "multiport", "! port", "--ports", "--syn", "--tcp-flags", "! tcp flags",
		"icmp any", "icmp code", "icmp type", "! icmp", "icmpv6",
		"iface veth0", "iface eth0", "iface eth", "iface prefix", "! iface", "-o", "-o prefix", "! -o",
		"mac src", "mac dst", "! mac", "vlan", "! vlan", "vlan prio", "! vlan prio", "vlan id and prio", "-f", "! -f", "bare -m tcp", "bare -m tcp on IPv6", "comment",
		"ctstate", "! ctstate", "pkttype unicast", "pkttype broadcast", "pkttype multicast", "pkttype otherhost", "! pkttype",
		"--src-type", "--dst-type", "! addrtype", "--limit-iface-in", "--limit-iface-out", "addrtype IPv4 only",
		"iprange", "iprange v6", "! iprange", "length", "! length", "ttl", "hl", "ttl ne",
		"dscp", "tos", "ecn ip", "ecn tcp", "tcpmss", "! tcpmss", "rt", "rt type segsleft", "rt len", "ctproto", "ctstatus", "ctstatus NONE", "ctdir", "ctstate NAT", "ctorigsrc etc.",
		"verdict LOG", "--log", "--log-prefix", "--log-level", "--log-rate", "--log-burst", "REJECT --log",
	} {
		if !seen[want] {
			t.Errorf("generator never produced %s", want)
		}
	}
	for bits := 0; bits <= 128; bits++ {
		if bits <= 32 && !v4len[bits] {
			t.Errorf("no IPv4 prefix of length %d", bits)
		}
		if !v6len[bits] {
			t.Errorf("no IPv6 prefix of length %d", bits)
		}
	}
}

// TestRandomStateMatchesRoundTrip: random rule sets with -m limit, -m
// recent, -m hashlimit and -m connlimit (RandomLimits, RandomRecent, RandomHashLimit,
// RandomConnLimit) print and read back the same.
func TestRandomStateMatchesRoundTrip(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 0x11))
		rs := RandomRuleSet(r, 1+r.IntN(40))
		RandomLimits(r, rs, 15)
		RandomRecent(r, rs, 20)
		RandomHashLimit(r, rs, 15)
		RandomConnLimit(r, rs, 15)
		if seed%2 == 1 { // and on jumps, gotos, RETURNs and rules without -j
			RandomChains(r, rs)
			RandomStateOnChains(r, rs, 40)
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { assertRoundTrip(t, rs) })
	}
}
