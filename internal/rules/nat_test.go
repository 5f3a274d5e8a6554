package rules

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// natFile is an iptables-save nat table with every target and option form.
const natFile = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:PF - [0:0]
-A PREROUTING -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.0.0.1:8080
-A PREROUTING -p tcp -m tcp --dport 81 -j DNAT --to-destination 10.0.0.1-10.0.0.3:8080-8090 --random --persistent
-A PREROUTING -p tcp -j DNAT --to-destination :8080
-A PREROUTING -p icmp -j DNAT --to-destination 10.0.0.9
-A PREROUTING -p tcp -j REDIRECT --to-ports 3128 --random
-A PREROUTING -i lan0 -p udp -j REDIRECT
-A PREROUTING -j PF
-A PF -p udp -j DNAT --to 10.1.1.1:domain
-A PF -j RETURN
-A INPUT -p tcp -j SNAT --to-source 10.9.9.9
-A OUTPUT -p tcp -j DNAT --to-destination 10.0.0.1
-A POSTROUTING -o eth0 -j MASQUERADE
-A POSTROUTING -o eth0 -p tcp -j MASQUERADE --to-ports 1000-2000 --random --random-fully
-A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.1:1024-2000 --random-fully
-A POSTROUTING -m conntrack --ctstate DNAT -j ACCEPT
COMMIT
`

// natCanonical is natFile as xdpfw prints it (RuleSet.String).
const natCanonical = `-t nat -N PF
-t nat -A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.0.0.1:8080
-t nat -A PREROUTING -p tcp --dport 81 -j DNAT --to-destination 10.0.0.1-10.0.0.3:8080-8090 --random --persistent
-t nat -A PREROUTING -p tcp -j DNAT --to-destination :8080
-t nat -A PREROUTING -p icmp -j DNAT --to-destination 10.0.0.9
-t nat -A PREROUTING -p tcp -j REDIRECT --to-ports 3128 --random
-t nat -A PREROUTING -i lan0 -p udp -j REDIRECT
-t nat -A PREROUTING -j PF
-t nat -A PF -p udp -j DNAT --to-destination 10.1.1.1:53
-t nat -A PF -j RETURN
-t nat -A INPUT -p tcp -j SNAT --to-source 10.9.9.9
-t nat -A OUTPUT -p tcp -j DNAT --to-destination 10.0.0.1
-t nat -A POSTROUTING -o eth0 -j MASQUERADE
-t nat -A POSTROUTING -o eth0 -p tcp -j MASQUERADE --to-ports 1000-2000 --random --random-fully
-t nat -A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.1:1024-2000 --random-fully
-t nat -A POSTROUTING -m conntrack --ctstate DNAT -j ACCEPT
`

func TestNATParseAndPrint(t *testing.T) {
	rs, err := Parse("nat.rules", []byte(natFile), ParseOptions{NAT: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Rules) != 0 || rs.NAT == nil || len(rs.NAT.Rules) != 15 || len(rs.NAT.Policies) != 0 {
		t.Fatalf("want 15 nat rules and no filter rule, got %d filter, NAT %+v", len(rs.Rules), rs.NAT)
	}
	if got := rs.String(); got != natCanonical {
		t.Fatalf("printed:\n%s\nwant:\n%s", got, natCanonical)
	}
	back, err := Parse("back", []byte(rs.String()), ParseOptions{NAT: true})
	if err != nil {
		t.Fatalf("the printed rules do not parse back: %v", err)
	}
	if d := diffRuleSets(rs.NAT, back.NAT); d != "" {
		t.Fatal(d)
	}
	r := rs.NAT.Rules[1]
	if n := r.Target.NAT; !r.NAT || r.Target.Verdict != VerdictNAT || n.Kind != NATDNAT || n.AddrLo.String() != "10.0.0.1" ||
		n.AddrHi.String() != "10.0.0.3" || !n.Ports || n.PortLo != 8080 || n.PortHi != 8090 || !n.Random || !n.Persistent {
		t.Fatalf("rule 2: %+v %+v", r, r.Target.NAT)
	}
	if c := rs.NAT.Rules[11].Chain; c != ChainPostrouting {
		t.Fatalf("MASQUERADE rule in %s", c)
	}
}

// TestNATSectionsAndFilter: a later *nat section replaces the nat table
// (as iptables-restore flushes it), the filter table is untouched by it,
// and -t nat lines in a native file add to the nat table.
func TestNATSectionsAndFilter(t *testing.T) {
	src := "*filter\n:FORWARD DROP [0:0]\n-A FORWARD -j ACCEPT\nCOMMIT\n" +
		"*nat\n:X - [0:0]\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n" +
		"*nat\n-A POSTROUTING -p tcp -j MASQUERADE\nCOMMIT\n" +
		"-t nat -A PREROUTING -p tcp --dport 1 -j DNAT --to-destination 10.0.0.1\n-A INPUT -j DROP\n"
	rs, err := Parse("f", []byte(src), ParseOptions{NAT: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "-P FORWARD DROP\n-A FORWARD -j ACCEPT\n-A INPUT -j DROP\n" +
		"-t nat -A POSTROUTING -p tcp -j MASQUERADE\n-t nat -A PREROUTING -p tcp --dport 1 -j DNAT --to-destination 10.0.0.1\n"
	if got := rs.String(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestNATLeftToKernel: without ParseOptions.NAT the nat table is the
// kernel's, as before: an error, or with SkipUnsupported skipped lines and
// KernelNATNote.
func TestNATLeftToKernel(t *testing.T) {
	if _, err := Parse("f", []byte(natFile), ParseOptions{}); err == nil || !strings.Contains(err.Error(), "table nat is not supported") {
		t.Fatalf("want the nat table refused, got %v", err)
	}
	rs, err := Parse("f", []byte(natFile), ParseOptions{SkipUnsupported: true})
	if err != nil {
		t.Fatal(err)
	}
	if rs.NAT != nil || len(rs.Skipped) != 15 || KernelNATNote(rs.Skipped) == "" {
		t.Fatalf("NAT %v, %d skipped, note %q", rs.NAT, len(rs.Skipped), KernelNATNote(rs.Skipped))
	}
}

// TestNATParseErrors: what iptables refuses (checked with iptables v1.8.9 in
// a namespace, test/e2e TestNATSyntaxAgainstIptables) is an error at its
// token; IPv6 NAT is refused as not supported.
func TestNATParseErrors(t *testing.T) {
	for _, c := range []struct{ src, at, msg string }{
		{"-t nat -A PREROUTING -j DNAT --to-destination 10.0.0.1:8080", "b:1:25", "need -p tcp"},
		{"-t nat -A POSTROUTING -p tcp -j DNAT --to-destination 10.0.0.1", "b:1:33", "cannot be used in the nat table's POSTROUTING"},
		{"-t nat -A PREROUTING -p tcp -j SNAT --to-source 10.0.0.1", "b:1:32", "cannot be used in the nat table's PREROUTING"},
		{"-t nat -A PREROUTING -p tcp -j MASQUERADE", "b:1:32", "cannot be used in the nat table's PREROUTING"},
		{"-t nat -A POSTROUTING -p tcp -j REDIRECT", "b:1:33", "cannot be used in the nat table's POSTROUTING"},
		{"-t nat -A POSTROUTING -i eth0 -j MASQUERADE", "b:1:23", "-i cannot be used in the POSTROUTING chain"},
		{"-t nat -A PREROUTING -o eth0 -j DNAT --to-destination 1.2.3.4", "b:1:22", "-o cannot be used in the PREROUTING chain"},
		{"-t nat -A PREROUTING -j DROP", "b:1:25", "not for filtering"},
		{"-t nat -A PREROUTING -j REJECT", "b:1:25", "not for filtering"},
		{"-t nat -P PREROUTING DROP", "b:1:22", "DROP policy in the nat table"},
		{"*nat\n:POSTROUTING DROP [0:0]\nCOMMIT", "b:2:14", "DROP policy in the nat table"},
		{"-t nat -A PREROUTING -p udp -j DNAT --to-destination 10.0.0.1:80-70", "b:1:63", "port range ends before"},
		{"-t nat -A PREROUTING -p tcp -j REDIRECT --to-ports 5:6", "b:1:52", "written with a dash"},
		{"-t nat -A POSTROUTING -p tcp -j MASQUERADE --to-ports 5:6", "b:1:55", "written with a dash"},
		{"-t nat -A PREROUTING -j REDIRECT --to-ports 5", "b:1:25", "need -p tcp"},
		{"-t nat -A PREROUTING -p udplite -j DNAT --to-destination 1.2.3.4:80", "b:1:36", "need -p tcp"},
		{"-t nat -A FORWARD -j ACCEPT", "b:1:11", "FORWARD is not in the nat table"},
		{"-t nat -A POSTROUTING -j SNAT", "b:1:26", "needs --to-source"},
		{"-t nat -A PREROUTING -j DNAT", "b:1:25", "needs --to-destination"},
		{"-t nat -A POSTROUTING -j SNAT --to-source 1.1.1.1 --to-source 1.1.1.2", "b:1:51", "given twice"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4 --to-source 1.1.1.1", "b:1:62", "-j DNAT has no option --to-source"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:5 --random-fully", "b:1:64", "-j DNAT has no option --random-fully"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4/24", "b:1:54", "bad IPv4 address"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:70:80", "b:1:54", "IPv6"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:65536", "b:1:62", "port out of range"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination host.example", "b:1:54", "bad IPv4 address"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4-1.2.3.5:80-", "b:1:73", "missing port"},
		{"-A INPUT -j DNAT --to-destination 1.2.3.4", "b:1:13", "belongs to the nat table"},
		{"-A INPUT -p tcp --to-ports 5", "b:1:17", "option of -j MASQUERADE or -j REDIRECT"},
		{"-t nat -N X\n-t nat -A X -j MASQUERADE\n-t nat -A PREROUTING -j X", "b:2:8", "which PREROUTING jumps to"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination [fd00::1]:80", "b:1:54", "IPv6 NAT is not supported"},
		{"-t nat -A PREROUTING -6 -p tcp -j DNAT --to-destination :80", "b:1:35", "IPv6 NAT"},
		{"-t nat -A POSTROUTING -m mac --mac-source 02:00:00:00:00:01 -j MASQUERADE", "b:1:8", "-m mac in a nat rule POSTROUTING reaches"},
		{"-t nat -N X\n-t nat -A X -m mac --mac-source 02:00:00:00:00:01 -j ACCEPT\n-t nat -A OUTPUT -j X", "b:2:8", "-m mac in a nat rule OUTPUT reaches"},
		{"-t nat -N X\n-t nat -A X -i eth0 -j ACCEPT\n-t nat -A POSTROUTING -j X", "b:2:8", "-i in chain X, which POSTROUTING reaches, is not supported"},
		{"-t nat -N X\n-t nat -A X -o eth0 -j ACCEPT\n-t nat -A PREROUTING -j X", "b:2:8", "-o in chain X, which PREROUTING reaches, is not supported"},
		{"-t nat -A PREROUTING -j NOSUCH", "b:1:25", "no chain or target NOSUCH"},
	} {
		_, err := Parse("b", []byte(c.src), ParseOptions{NAT: true})
		if err == nil {
			t.Errorf("%q: no error, want %s %q", c.src, c.at, c.msg)
			continue
		}
		if got := err.Error(); !strings.HasPrefix(got, c.at+": ") || !strings.Contains(got, c.msg) {
			t.Errorf("%q:\n got %s\nwant %s: ...%s...", c.src, got, c.at, c.msg)
		}
	}
}

// TestRandomNATRoundTrip: random nat tables print as rules that parse back
// into the same table.
func TestRandomNATRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 3))
	for set := range 300 {
		nat := RandomNAT(r, 1+r.IntN(30), RandomKnobs{})
		rs := &RuleSet{NAT: nat}
		back, err := Parse("t", []byte(rs.String()), ParseOptions{NAT: true})
		if err != nil {
			t.Fatalf("set %d does not parse back: %v\n%s", set, err, rs)
		}
		if back.NAT == nil {
			t.Fatalf("set %d: no nat table read back\n%s", set, rs)
		}
		if d := diffRuleSets(nat, back.NAT); d != "" {
			t.Fatalf("set %d: %s\n%s", set, d, rs)
		}
	}
}

// FuzzParseNAT: any text read with ParseOptions.NAT either fails with
// positioned errors or gives a nat table whose rules keep their invariants
// (a translation exactly on VerdictNAT, IPv4 ranges in order) and that
// prints as text parsing back to the same table.
func FuzzParseNAT(f *testing.F) {
	f.Add([]byte(natFile))
	f.Add([]byte(natCanonical))
	f.Add([]byte("-t nat -A POSTROUTING -o eth0 -j MASQUERADE --to-ports 1000-2000 --random\n"))
	f.Add([]byte("*nat\n:X - [0:0]\n-A PREROUTING -p udp -j X\n-A X -j DNAT --to 10.0.0.1-10.0.0.9:53\nCOMMIT\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		rs, err := Parse("fuzz", src, ParseOptions{NAT: true})
		if err != nil {
			var list ErrorList
			if rs != nil || !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T %v with rule set %v", err, err, rs != nil)
			}
			for _, e := range list {
				if e.Pos.File != "fuzz" || e.Pos.Line < 1 || e.Pos.Col < 1 || e.Msg == "" {
					t.Fatalf("bad error position or message: %+v", e)
				}
			}
			return
		}
		if rs.NAT == nil {
			return
		}
		for i, r := range rs.NAT.Rules {
			n := r.Target.NAT
			if (n != nil) != (r.Target.Verdict == VerdictNAT) || !r.NAT {
				t.Fatalf("nat rule %d %q: target %v with verdict %v", i, r.Text, n, r.Target.Verdict)
			}
			if n != nil && (n.AddrLo.IsValid() && (!n.AddrLo.Is4() || n.AddrHi.Less(n.AddrLo)) || n.Ports && (n.PortLo == 0 || n.PortHi < n.PortLo)) {
				t.Fatalf("nat rule %d %q: bad translation %+v", i, r.Text, n)
			}
		}
		text := rs.String()
		again, err := Parse("again", []byte(text), ParseOptions{NAT: true})
		if err != nil {
			t.Fatalf("canonical form rejected: %v\n%s", err, text)
		}
		if again.NAT == nil && len(rs.NAT.Rules)+len(rs.NAT.Chains) > 0 {
			t.Fatalf("nat table lost:\n%s", text)
		}
		if again.NAT != nil {
			if d := diffRuleSets(rs.NAT, again.NAT); d != "" {
				t.Fatalf("round trip: %s\n%s", d, text)
			}
		}
		if got := again.String(); got != text {
			t.Fatalf("String not stable:\n%s\nvs\n%s", text, got)
		}
	})
}

// TestRouterExample: examples/router.rules (make demo-router) reads with
// its nat table skipped for the kernel with the note (--nat kernel), and
// with ParseOptions.NAT as the nat table xdpfw takes (the demo's).
func TestRouterExample(t *testing.T) {
	const path = "../../examples/router.rules"
	rs, err := ParseFile(path, ParseOptions{Family: FamilyIPv4, SkipUnsupported: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Skipped) != 2 || KernelNATNote(rs.Skipped) == "" || rs.NAT != nil || len(rs.Rules) != 5 {
		t.Fatalf("skipped %v, %d filter rules, nat %v", rs.Skipped, len(rs.Rules), rs.NAT)
	}
	rs, err = ParseFile(path, ParseOptions{Family: FamilyIPv4, NAT: true})
	if err != nil {
		t.Fatal(err)
	}
	if rs.NAT == nil || len(rs.NAT.Rules) != 2 || len(rs.Rules) != 5 {
		t.Fatalf("nat %v, %d filter rules", rs.NAT, len(rs.Rules))
	}
}
