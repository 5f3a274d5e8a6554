package compile

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// agree checks that the flattened tables of rs decide packet p as the
// reference matcher's walk of the chains does: same rule id, action and
// LOG rules.
func agree(t *testing.T, tb *Tables, rs *rules.RuleSet, p RefPacket) bool {
	t.Helper()
	want := Decide(rs, p)
	c := tb.Classify(&p, testDev(&p))
	gotID, gotAct, gotRej := c.Root.RuleID, c.Root.Action, Reject(0)
	if c.Entry >= 0 {
		e := tb.Entries[c.Entry]
		gotID, gotAct, gotRej = e.RuleID, e.Action, e.Reject
	}
	wantID := PolicyID(uint8(p.Chain), p.Src.Is6())
	if want.Rule >= 0 {
		wantID = uint32(FirstRuleID + want.Rule)
	}
	var wantLogs []uint32
	for _, i := range want.Logs {
		wantLogs = append(wantLogs, uint32(FirstRuleID+i))
	}
	wantAct := map[rules.Verdict]Action{rules.VerdictAccept: ActAccept, rules.VerdictDrop: ActDrop, rules.VerdictReject: ActReject}[want.Verdict]
	if gotID != wantID || gotAct != wantAct || gotRej != want.Reject || !slices.Equal(c.Logs, wantLogs) {
		t.Errorf("flattened: id %d %s logs %v; reference (chains walked): id %d %s logs %v\npacket %+v\n%s",
			gotID, gotAct, c.Logs, wantID, want.Verdict, wantLogs, p, rs)
		return false
	}
	// counted rules: the same set (the walk's order differs from the
	// reference's), unless more than the data plane notes matched
	var wantCounts []uint32
	for _, i := range want.Counts {
		wantCounts = append(wantCounts, uint32(FirstRuleID+i))
	}
	got := slices.Sorted(slices.Values(c.Counts))
	slices.Sort(wantCounts)
	if len(wantCounts) <= MaxCountPerPacket && (!slices.Equal(got, wantCounts) || c.CountOverflow) {
		t.Errorf("flattened counts rules %v (overflow %v); reference %v\npacket %+v\n%s", got, c.CountOverflow, wantCounts, p, rs)
		return false
	}
	return true
}

// TestChainsAgreeWithReference: random rule sets with user chains (jumps,
// gotos, RETURNs with and without matches, rules without -j), compiled by
// flattening, decide every random packet as the reference matcher, which
// walks the chains with a stack as iptables does.
func TestChainsAgreeWithReference(t *testing.T) {
	// The header matches make most RETURNs too wide to negate into a
	// bounded guard: drawn in a fifth of the sets only, so that the
	// flattening is tested on sets it takes.
	defer func(h bool) { rules.RandomHeaderMatches = h }(rules.RandomHeaderMatches)
	r := rand.New(rand.NewPCG(15, 1))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	sets, refused, checked := 0, 0, 0
	for set := 0; set < 300; set++ {
		rules.RandomHeaderMatches = set%5 == 0
		rs := rules.RandomRuleSet(r, 1+r.IntN(40))
		rules.RandomChains(r, rs)
		tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
		if errors.Is(err, ErrNoForm) || errors.Is(err, ErrTooBig) || errors.As(err, new(errTooBig)) {
			refused++ // two negations of one field in a row, or past a bound: refused, never installed in part
			continue
		}
		if err != nil {
			t.Fatalf("set %d: %v\n%s", set, err, rs)
		}
		sets++
		for k := 0; k < 1500; k++ {
			p := randomRefPacket(r, rs, names)
			if !agree(t, tb, rs, p) {
				t.Fatalf("set %d packet %d", set, k)
			}
			checked++
		}
	}
	if refused > sets {
		t.Errorf("%d of %d rule sets refused for a negation without a single-entry form", refused, sets+refused)
	}
	t.Logf("%d rule sets with chains, %d packets agree; %d sets refused (no single-entry form)", sets, checked, refused)
}

func compileText(t *testing.T, src string) (*rules.RuleSet, *Tables, []Warning, error) {
	t.Helper()
	rs, err := rules.Parse("t.rules", []byte(src), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tb, w, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
	return rs, tb, w, err
}

// TestChainsHandWritten: nesting, RETURN at every level, goto, a chain
// jumped to from several chains, against the reference walk on every
// packet of a small grid.
func TestChainsHandWritten(t *testing.T) {
	src := `-P INPUT DROP
-N a
-N b
-N c
-N reject
-A INPUT -s 10.0.0.0/8 -j a
-A INPUT -p tcp -j b
-A INPUT -p udp -g c
-A INPUT -p udp --dport 53 -j ACCEPT
-A INPUT -j reject
-A a -s 10.0.0.1 -j RETURN
-A a -p tcp --dport 22 -j ACCEPT
-A a -p udp -j b
-A a -s 10.0.0.2 -j DROP
-A b -p tcp --dport 80 -j ACCEPT
-A b ! -s 10.0.0.0/30 -j RETURN
-A b -p udp --dport 1024:65535 -g c
-A b -p tcp -j REJECT
-A c -p udp --dport 123 -j ACCEPT
-A c -s 10.0.0.3 -j RETURN
-A c -j LOG
-A c -p udp --dport 53 -j DROP
-A reject -p tcp -j REJECT --reject-with tcp-reset
-A reject -j DROP
-A reject -j ACCEPT
`
	rs, tb, _, err := compileText(t, src)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, src := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.9", "192.0.2.1"} {
		for _, proto := range []uint8{6, 17, 1} {
			for _, port := range []uint16{22, 53, 80, 123, 2000} {
				for _, frag := range []bool{false, true} {
					p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Src: mustAddr(src), Dst: mustAddr("10.9.9.9"),
						Proto: proto, DPort: port, SPort: 40000, Fragment: frag, L4: !frag}
					if !agree(t, tb, rs, p) {
						t.FailNow()
					}
					n++
				}
			}
		}
	}
	// spot checks of what iptables does
	for _, c := range []struct {
		src   string
		proto uint8
		port  uint16
		want  rules.Verdict
		rule  string // the deciding rule, "" for the policy
	}{
		{"10.0.0.1", 6, 22, rules.VerdictReject, "-A b -p tcp -j REJECT"}, // RETURN from a; in 10.0.0.0/30, so no RETURN from b
		{"10.0.0.9", 6, 22, rules.VerdictAccept, "-A a -p tcp --dport 22 -j ACCEPT"},
		{"10.0.0.9", 6, 80, rules.VerdictAccept, "-A b -p tcp --dport 80 -j ACCEPT"},
		{"10.0.0.9", 6, 81, rules.VerdictReject, "-A reject -p tcp -j REJECT --reject-with tcp-reset"}, // RETURNs from b, then from a
		{"10.0.0.9", 17, 53, rules.VerdictDrop, "-A c -p udp --dport 53 -j DROP"},                      // b RETURNs to a, a ends, INPUT -g c
		{"192.0.2.1", 17, 123, rules.VerdictAccept, "-A c -p udp --dport 123 -j ACCEPT"},
		{"192.0.2.1", 17, 2000, rules.VerdictDrop, ""}, // -g c falls through: back to INPUT's caller, the policy
	} {
		p := RefPacket{Chain: rules.ChainInput, Src: mustAddr(c.src), Dst: mustAddr("10.9.9.9"), Proto: c.proto, DPort: c.port, L4: true}
		d := Decide(rs, p)
		got := ""
		if d.Rule >= 0 {
			got = rs.Rules[d.Rule].String()
		}
		if d.Verdict != c.want || got != c.rule {
			t.Errorf("%s proto %d port %d: %s by %q, want %s by %q", c.src, c.proto, c.port, d.Verdict, got, c.want, c.rule)
		}
	}
	t.Logf("%d packets agree", n)
}

// TestChainsDepth: chains nested MaxChainDepth deep, a RETURN at every
// level, compile and agree; one more level is refused with the numbers.
func TestChainsDepth(t *testing.T) {
	build := func(depth int) string {
		var b strings.Builder
		for i := range depth {
			b.WriteString("-N c" + itoa(i) + "\n")
		}
		b.WriteString("-A INPUT -j c0\n")
		for i := range depth {
			c := "c" + itoa(i)
			b.WriteString("-A " + c + " -p udp --dport " + itoa(1000+i) + " -j RETURN\n")
			if i+1 < depth {
				b.WriteString("-A " + c + " -j c" + itoa(i+1) + "\n")
			}
			b.WriteString("-A " + c + " -p udp --dport " + itoa(2000+i) + " -j DROP\n")
		}
		b.WriteString("-A INPUT -p udp -j REJECT\n")
		return b.String()
	}
	rs, tb, _, err := compileText(t, build(MaxChainDepth))
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxChainDepth + 1 {
		for _, port := range []uint16{uint16(1000 + i), uint16(2000 + i), 5} {
			p := RefPacket{Chain: rules.ChainInput, Src: mustAddr("10.0.0.1"), Dst: mustAddr("10.0.0.2"), Proto: 17, DPort: port, L4: true}
			if !agree(t, tb, rs, p) {
				t.FailNow()
			}
		}
	}
	_, _, _, err = compileText(t, build(MaxChainDepth+1))
	if err == nil || !strings.Contains(err.Error(), "jumps nest 33 deep") || !strings.Contains(err.Error(), "at most 32") {
		t.Errorf("depth %d: err = %v", MaxChainDepth+1, err)
	}
}

func TestChainsOutputInIface(t *testing.T) {
	_, _, _, err := compileText(t, "-N a\n-A OUTPUT -p tcp -j a\n-A a -i eth0 -j DROP\n")
	if err == nil || err.Error() != "t.rules:3:1: -A a -i eth0 -j DROP: -i cannot be used in a chain OUTPUT reaches (OUTPUT -> a): OUTPUT's packets have no input interface" {
		t.Errorf("err = %v", err)
	}
	if _, _, _, err := compileText(t, "-N a\n-A INPUT -p tcp -j a\n-A a -i eth0 -j DROP\n"); err != nil {
		t.Errorf("from INPUT: %v", err)
	}
}

func TestChainsLoopAndUnreachable(t *testing.T) {
	_, _, _, err := compileText(t, "-N a\n-N b\n-A INPUT -j a\n-A a -j b\n-A b -p tcp -j a\n")
	if err == nil || err.Error() != "t.rules:5:1: chain loop a -> b -> a: a chain may not jump to a chain it was reached from" {
		t.Errorf("loop: err = %v", err)
	}
	_, _, w, err := compileText(t, "-N used\n-N lonely\n-A INPUT -j used\n-A lonely -j DROP\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 1 || w[0].Rule != -1 || w[0].Pos.Line != 2 || !strings.Contains(w[0].Msg, "no built-in chain reaches chain lonely") {
		t.Errorf("warnings %+v", w)
	}
}

// TestChainsNoForm: two negated tests of one field that no entry can hold
// and no probe stands for (a negated jump into a chain that negates the
// field again) are refused, naming the rule and the chains, and nothing is
// built.
func TestChainsNoForm(t *testing.T) {
	_, _, _, err := compileText(t, "-N a\n-A INPUT -m mac ! --mac-source 02:00:00:00:00:01 -j a\n"+
		"-A a -m mac ! --mac-source 02:00:00:00:00:02 -j DROP\n")
	if !errors.Is(err, ErrNoForm) || !strings.Contains(err.Error(), "t.rules:3:1: -A a -m mac ! --mac-source 02:00:00:00:00:02 -j DROP, "+
		"reached through INPUT -> a, cannot be flattened: ! --mac-source twice with different values") {
		t.Errorf("err = %v", err)
	}
	// two negated interfaces: one entry per attached interface left
	rs, tb, _, err := compileText(t, "-N a\n-A INPUT ! -i eth0 -j a\n-A a ! -i eth1 -j DROP\n")
	if err != nil {
		t.Fatal(err)
	}
	for name := range testIfaces {
		p := RefPacket{Chain: rules.ChainInput, InIface: name, Src: mustAddr("10.0.0.1"), Dst: mustAddr("10.0.0.2"), Proto: 6}
		if !agree(t, tb, rs, p) {
			t.FailNow()
		}
	}
}

// TestChainsNegatedProtocols: two negated protocols (RETURNs for TCP and
// UDP, then rules for the rest, as real rule sets write it; a negated
// jump into a chain that negates another protocol; three RETURNs) become
// one entry per protocol number left, and every protocol number is
// decided as the reference's walk of the chains decides it. Past the
// flattening's bound it is refused as too big, with the chain named.
func TestChainsNegatedProtocols(t *testing.T) {
	for _, src := range []string{
		"-P INPUT ACCEPT\n-N a\n-A INPUT -j a\n-A INPUT -p tcp --dport 22 -j DROP\n-A a -p tcp -j RETURN\n-A a -p udp -j RETURN\n" +
			"-A a -p icmp -j LOG\n-A a -s 10.0.0.0/8 -j DROP\n-A a -p 47 -j ACCEPT\n-A a -j REJECT\n",
		"-P INPUT DROP\n-N a\n-A INPUT ! -p tcp -j a\n-A INPUT -j ACCEPT\n-A a ! -p udp -j DROP\n-A a -s 10.0.0.1 -j REJECT\n",
		"-P INPUT ACCEPT\n-N a\n-N b\n-A INPUT -j a\n-A a -p tcp -j RETURN\n-A a -p udp -j RETURN\n-A a -p icmp -j RETURN\n" +
			"-A a -j b\n-A a -j DROP\n-A b -p 50 -j ACCEPT\n-A b ! -p 51 -j RETURN\n-A b -j REJECT\n",
		"-P INPUT ACCEPT\n-N a\n-A INPUT -p tcp -g a\n-A INPUT ! -p icmp -j a\n-A INPUT -j DROP\n-A a -p tcp --dport 80 -j ACCEPT\n" +
			"-A a ! -p udp -j RETURN\n-A a -j REJECT\n",
	} {
		rs, tb, _, err := compileText(t, src)
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		for proto := range 256 {
			for _, src := range []string{"10.0.0.1", "192.0.2.1"} {
				p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Src: mustAddr(src), Dst: mustAddr("10.9.9.9"),
					Proto: uint8(proto), Addrs: testAddrs, MSS: NoMSS}
				if l4Proto(p.Proto) && p.Proto != 1 && p.Proto != 58 {
					p.L4, p.SPort, p.DPort = true, 1000, 80
				}
				if !agree(t, tb, rs, p) {
					t.Fatalf("protocol %d from %s", proto, src)
				}
			}
		}
	}
	// 254 entries per rule after the RETURNs: 70 rules exceed the default
	// bound, and the chain is flattened again with the two RETURNs as
	// probes; 70 rules one packet meets all of do not fit the data plane
	// either way: refused as too big, with the bound the probes meet
	for _, wide := range []bool{false, true} {
		var b strings.Builder
		b.WriteString("-P INPUT ACCEPT\n-N a\n-A INPUT -j a\n-A a -p tcp -j RETURN\n-A a -p udp -j RETURN\n")
		for i := range 70 {
			if wide {
				b.WriteString("-A a -s 10.0.0.0/8 -j LOG\n")
			} else {
				b.WriteString("-A a -s 10.0.0." + itoa(i) + " -j DROP\n")
			}
		}
		rs, tb, _, err := compileText(t, b.String())
		if wide {
			if !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), "chain a expands into more than the 16383 classifier entries left to it (of 16384 in all") ||
				!strings.Contains(err.Error(), "kept as probes, the rule set does not fit either") {
				t.Errorf("70 LOG rules after two negated protocols: %v, want refused as too big", err)
			}
			continue
		}
		if err != nil || !tb.HasProbes() {
			t.Fatalf("70 rules after two negated protocols: %v (probes: %v)", err, err == nil && tb.HasProbes())
		}
		for _, proto := range []uint8{6, 17, 47, 1} {
			for _, src := range []string{"10.0.0.5", "10.0.0.69", "10.0.0.70"} {
				p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Src: mustAddr(src), Dst: mustAddr("10.9.9.9"),
					Proto: proto, L4: proto != 47, SPort: 1000, DPort: 80, Addrs: testAddrs, MSS: NoMSS}
				if !agree(t, tb, rs, p) {
					t.Fatalf("protocol %d from %s", proto, src)
				}
			}
		}
	}
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i)) }

func fmtInt(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return fmtInt(i/10) + string(rune('0'+i%10))
}

// TestChainsAddrTypeTwice: ufw's ufw-not-local (RETURN for LOCAL, then
// MULTICAST, then BROADCAST destinations, then a rule for the rest) and
// the other ways two -m addrtype tests of one IPv4 address meet in a
// chain (positive in a jump, negated after a RETURN, on the source and
// the destination): each flattens into one test of the mask (intersected,
// joined or subtracted) and decides every destination type as the
// reference does. IPv6's tests are not "the type is in the mask": there a
// second, different test stays refused.
func TestChainsAddrTypeTwice(t *testing.T) {
	src := `-P INPUT ACCEPT
-N not-local
-N local-only
-A INPUT -4 -p udp --dport 1 -j not-local
-A INPUT -4 -p udp --dport 2 -m addrtype --dst-type LOCAL,BROADCAST -j local-only
-A INPUT -4 -p udp --dport 3 -m addrtype ! --dst-type LOCAL -g local-only
-A not-local -4 -m addrtype --dst-type LOCAL -j RETURN
-A not-local -4 -m addrtype --dst-type MULTICAST -j RETURN
-A not-local -4 -m addrtype --dst-type BROADCAST -j RETURN
-A not-local -4 -j DROP
-A local-only -4 -m addrtype ! --dst-type BROADCAST -j REJECT
-A local-only -4 -m addrtype --dst-type UNICAST,BROADCAST -j DROP
`
	rs, tb, _, err := compileText(t, src)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, dst := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.0", "10.9.9.9", "224.0.0.5", "255.255.255.255", "0.1.2.3"} {
		for port := range uint16(4) {
			p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Src: netip.MustParseAddr("10.9.0.1"), Dst: netip.MustParseAddr(dst),
				Proto: 17, L4: true, SPort: 9, DPort: port, Addrs: testAddrs, MSS: NoMSS}
			if !agree(t, tb, rs, p) {
				t.Fatalf("destination %s port %d", dst, port)
			}
			n++
		}
	}
	// IPv6's: the RETURN is a probe (TestChainsProbedReturns)
	_, _, _, err = compileText(t, `-N c
-A INPUT -6 -j c
-A c -6 -m addrtype --dst-type LOCAL -j RETURN
-A c -6 -m addrtype --dst-type ANYCAST -j DROP
`)
	if err != nil {
		t.Errorf("IPv6: %v", err)
	}
}

// TestChainsProbedReturns: RETURNs and gotos whose negations no entry can
// hold together (two MACs, two VLANs, ICMP types, a header test twice, a
// RETURN then a rule negating the same MAC) are kept as probes: their bit
// says the packet reached and matched them, and the rest of their chain is
// guarded by the bit clear. Every packet of a grid is decided and counted
// as the reference's walk of the chains does. Past the data plane's bound
// of rules settled per packet, refused with the original reason and the
// bound.
func TestChainsProbedReturns(t *testing.T) {
	macs := [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0, 3}}
	for _, src := range []string{
		"-P INPUT ACCEPT\n-N a\n-A INPUT -p tcp -j a\n-A INPUT -j DROP\n-A a -m mac --mac-source 02:00:00:00:00:01 -j RETURN\n" +
			"-A a -m mac --mac-source 02:00:00:00:00:02 -j RETURN\n-A a -p tcp --dport 22 -j ACCEPT\n-A a -j REJECT\n",
		"-P INPUT ACCEPT\n-N a\n-A INPUT -j a\n-A INPUT -p udp -j DROP\n-A a -m mac --mac-source 02:00:00:00:00:01 -j RETURN\n" +
			"-A a -m mac ! --mac-source 02:00:00:00:00:02 -j LOG\n-A a -m mac ! --mac-source 02:00:00:00:00:03 -j DROP\n",
		"-P INPUT DROP\n-N a\n-N b\n-A INPUT -j a\n-A INPUT -j ACCEPT\n-A a -m vlan --vlan-id 5 -j RETURN\n" +
			"-A a -m vlan --vlan-id 6 -g b\n-A a -p tcp -j DROP\n-A b -p tcp --dport 22 -j ACCEPT\n-A b -j REJECT\n",
		"-P INPUT ACCEPT\n-N a\n-A INPUT -p icmp -j a\n-A a -p icmp --icmp-type 8 -j RETURN\n-A a -p icmp --icmp-type 0 -j RETURN\n" +
			"-A a -j DROP\n",
		"-P INPUT ACCEPT\n-N a\n-A INPUT -j a\n-A a -m ttl --ttl-eq 64 -j RETURN\n-A a -m ttl --ttl-eq 128 -j RETURN\n-A a -p tcp -j DROP\n",
	} {
		rs, tb, _, err := compileText(t, src)
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		if !tb.HasProbes() {
			t.Errorf("no probe:\n%s", src)
		}
		for _, mac := range macs {
			for _, vlan := range []uint16{0, 5, 6, 7} {
				for _, l4 := range []struct {
					proto, typ uint8
					dport      uint16
				}{{6, 0, 22}, {6, 0, 80}, {17, 0, 53}, {1, 8, 0}, {1, 0, 0}, {1, 3, 0}} {
					for _, ttl := range []uint8{64, 128, 1} {
						p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Src: mustAddr("10.0.0.1"), Dst: mustAddr("10.9.9.9"),
							Proto: l4.proto, L4: true, DPort: l4.dport, SPort: 1000, ICMPType: l4.typ, SrcMAC: mac, TTL: ttl,
							Tagged: vlan != 0, VLAN: vlan, Addrs: testAddrs, MSS: NoMSS}
						if !agree(t, tb, rs, p) {
							t.Fatalf("packet %+v", p)
						}
					}
				}
			}
		}
	}
	// a routing header test, which has no negation: a probe
	rs, tb, _, err := compileText(t, "-P INPUT ACCEPT\n-N a\n-A INPUT -6 -j a\n-A a -6 -m rt --rt-type 0 -j RETURN\n-A a -6 -p tcp -j DROP\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []bool{false, true} {
		for _, typ := range []uint8{0, 2} {
			p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Src: mustAddr("2001:db8::1"), Dst: mustAddr("2001:db8::2"),
				Proto: 6, L4: true, SPort: 1000, DPort: 80, RT: rt, RTType: typ, Addrs: testAddrs, MSS: NoMSS}
			if !agree(t, tb, rs, p) {
				t.Fatalf("routing header %v type %d", rt, typ)
			}
		}
	}
	// ten LOG rules one packet meets behind the probe: more than the
	// data plane settles
	var b strings.Builder
	b.WriteString("-N a\n-A INPUT -j a\n-A a -m mac --mac-source 02:00:00:00:00:01 -j RETURN\n-A a -m mac --mac-source 02:00:00:00:00:02 -j RETURN\n")
	for i := range 10 {
		b.WriteString("-A a -p tcp --dport 1:" + itoa(100+i) + " -j LOG\n")
	}
	_, _, _, err = compileText(t, b.String())
	if !errors.Is(err, ErrNoForm) || !strings.Contains(err.Error(), "! --mac-source twice with different values") ||
		!strings.Contains(err.Error(), "kept as probes, the rule set does not fit either") || !strings.Contains(err.Error(), "settles at most 8 per packet") {
		t.Errorf("ten LOG rules behind two MAC RETURNs: %v", err)
	}
}
