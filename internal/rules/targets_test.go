package rules

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// groupSpellings are -j NFLOG and -j ULOG rules as written, and what
// iptables-save v1.8.9 printed for them (ULOG: the text its save function
// prints; Linux removed ULOG in 3.17, so iptables cannot load it now).
var groupSpellings = []struct {
	args, saved string
	live        bool // iptables can load it here (TestGroupSpellingsLive)
}{
	{"-j NFLOG", "-j NFLOG", true},
	{"-j NFLOG --nflog-group 0", "-j NFLOG", true},
	{`-j NFLOG --nflog-group 5 --nflog-prefix "hi there" --nflog-threshold 3`, `-j NFLOG --nflog-prefix "hi there" --nflog-group 5 --nflog-threshold 3`, true},
	{"-j NFLOG --nflog-size 64", "-j NFLOG --nflog-size 64", true},
	{"-j NFLOG --nflog-size 0", "-j NFLOG --nflog-size 0", true}, // the kernel keeps no byte
	{"-p tcp --dport 22 -j NFLOG --nflog-prefix ssh --nflog-group 2", "-p tcp -m tcp --dport 22 -j NFLOG --nflog-prefix ssh --nflog-group 2", true},
	{"-j NFLOG --nflog-range 100", "-j NFLOG --nflog-range 100", false},                             // legacy prints it, nft drops it
	{"-j ULOG --ulog-nlgroup 2 --ulog-prefix y", `-j ULOG --ulog-prefix y --ulog-nlgroup 2`, false}, // xtables_save_string: bare
	{"-j ULOG --ulog-prefix 'y z'", `-j ULOG --ulog-prefix "y z"`, false},
	{"-j ULOG --ulog-nlgroup 1 --ulog-cprange 100 --ulog-qthreshold 10", "-j ULOG --ulog-cprange 100 --ulog-qthreshold 10", false},
}

// TestGroupSpellings: each spelling parses into a LOG rule with its group,
// and iptables-save's text parses into the same rule.
func TestGroupSpellings(t *testing.T) {
	for _, tt := range groupSpellings {
		a, err := Parse("a", []byte("-A INPUT -4 "+tt.args), ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tt.args, err)
		}
		b, err := Parse("b", []byte("-A INPUT -4 "+tt.saved), ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tt.saved, err)
		}
		if d := diffRuleSets(a, b); d != "" {
			t.Errorf("%s vs iptables-save's %s: %s", tt.args, tt.saved, d)
		}
		r := a.Rules[0]
		// xdpfw's text leaves out the -m tcp that -p tcp implies
		if got, want := strings.TrimPrefix(r.Text, "-4 "), strings.Replace(tt.saved, "-p tcp -m tcp ", "-p tcp ", 1); got != want {
			t.Errorf("%s: canonical text %q, iptables-save's %q", tt.args, got, want)
		}
		if r.Target.Verdict != VerdictLog || r.Target.Group == nil || !r.Target.Logs() {
			t.Errorf("%s: target %+v, want a LOG rule with a group", tt.args, r.Target)
		}
		assertRoundTrip(t, a)
	}
	rs, err := Parse("g", []byte(`-A INPUT -j NFLOG --nflog-group 7 --nflog-prefix "p: " --nflog-size 40
-A INPUT -j ULOG --ulog-prefix u
-A INPUT -j NFLOG --log-rate 1/min --log-burst 2`), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g0, g1, g2 := rs.Rules[0].Target, rs.Rules[1].Target, rs.Rules[2].Target
	if g0.Group.Number() != 7 || g0.LogPrefix != "p: " || g0.Group.Size != 40 || g0.Group.Name() != "NFLOG" {
		t.Errorf("NFLOG: %+v %+v", g0, *g0.Group)
	}
	if g1.Group.Number() != 1 || g1.LogPrefix != "u" || g1.Group.Name() != "ULOG" {
		t.Errorf("ULOG's default group is 1: %+v %+v", g1, *g1.Group)
	}
	if g2.LogRate != (LogRate{N: 1, Unit: PerMinute}) || g2.LogBurst != 2 {
		t.Errorf("NFLOG takes xdpfw's --log-rate/--log-burst as LOG does: %+v", g2)
	}
}

// TestGroupSpellingsLive: iptables-save in a throwaway namespace prints
// what groupSpellings records, and xdpfw's canonical text is that text.
func TestGroupSpellingsLive(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iptables-nft"); err != nil {
		t.Skip("iptables-nft not installed")
	}
	ns := testutil.NewNetNS(t)
	for _, backend := range []string{"iptables-legacy", "iptables-nft"} {
		for _, tt := range groupSpellings {
			if !tt.live {
				continue
			}
			got := iptablesSaved(t, ns, backend, tt.args)
			if got != tt.saved {
				t.Errorf("%s -A INPUT %s: iptables-save printed %q, the record says %q", backend, tt.args, got, tt.saved)
			}
			theirs, perr := Parse("saved", []byte("-A INPUT -4 "+got), ParseOptions{})
			if perr != nil {
				t.Fatalf("%q: %v", got, perr)
			}
			ours, perr := Parse("args", []byte("-A INPUT -4 "+tt.args), ParseOptions{})
			if perr != nil {
				t.Fatalf("%q: %v", tt.args, perr)
			}
			if d := diffRuleSets(theirs, ours); d != "" {
				t.Errorf("%s: iptables-save's %q is another rule: %s", tt.args, got, d)
			}
		}
	}
}

// iptablesSaved is what backend-save prints for `-A INPUT args` alone in
// the namespace's filter table (without "-A INPUT ").
func iptablesSaved(t *testing.T, ns *testutil.NetNS, backend, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := ns.Exec(ctx, backend, "-F", "INPUT"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := ns.Exec(ctx, backend, append([]string{"-A", "INPUT"}, splitArgs(t, args)...)...); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	out, err := ns.Exec(ctx, backend+"-save", "-t", "filter")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "-A INPUT ") {
			got = strings.TrimPrefix(l, "-A INPUT ")
		}
	}
	return got
}

// splitArgs splits a rule's arguments as a shell would.
func splitArgs(t *testing.T, s string) []string {
	toks, err := lexLine(s, Pos{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tk := range toks {
		out = append(out, tk.text)
	}
	return out
}

// dockerHost is a Docker host's iptables-save (our own, in the shape
// Docker 24 writes it): nat and filter, and an empty mangle and raw.
const dockerHost = `# Generated by iptables-save v1.8.9 on Fri Nov 27 08:00:00 2026
*mangle
:PREROUTING ACCEPT [1000:100000]
:INPUT ACCEPT [900:90000]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [800:80000]
:POSTROUTING ACCEPT [800:80000]
COMMIT
*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
COMMIT
*security
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
-A DOCKER -i docker0 -j RETURN
COMMIT
*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -m limit --limit 1/sec -j NFLOG --nflog-prefix "drop: " --nflog-group 2
-A FORWARD -p tcp -j TCPMSS --clamp-mss-to-pmtu
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
`

// TestSkipUnsupported: a Docker host's file is refused with one error per
// table section xdpfw cannot run (empty sections are no reason) and one per
// line whose target it cannot run; with SkipUnsupported it loads, and each
// line left out is listed with its reason.
func TestSkipUnsupported(t *testing.T) {
	// -m limit is another change's (issue 15 point 3): without it, this
	// test reads the file less that match.
	src := dockerHost
	if _, err := Parse("l", []byte("-A INPUT -m limit --limit 1/sec -j NFLOG"), ParseOptions{}); err != nil {
		src = strings.Replace(src, "-m limit --limit 1/sec ", "", 1)
	}
	_, err := Parse("docker.rules", []byte(src), ParseOptions{Family: FamilyIPv4})
	var el ErrorList
	if !asList(err, &el) || len(el) != 2 {
		t.Fatalf("want 2 errors (the nat section, the TCPMSS rule), got %v", err)
	}
	if e := el[0]; e.Pos.Line != 18 || !strings.Contains(e.Msg, "table nat is not supported") ||
		!strings.Contains(e.Msg, "4 lines, from line 24") || !strings.Contains(e.Hint, "--skip-unsupported") || !e.Unsupported {
		t.Errorf("nat: %v", e)
	}
	if e := el[1]; e.Pos.Line != 37 || e.Token != "TCPMSS" || !strings.Contains(e.Hint, "--skip-unsupported") {
		t.Errorf("TCPMSS: %v", e)
	}

	rs, err := Parse("docker.rules", []byte(src), ParseOptions{Family: FamilyIPv4, SkipUnsupported: true})
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for _, s := range rs.Skipped {
		skipped = append(skipped, s.String())
	}
	want := []string{
		"docker.rules:24: skipped: table nat is not supported: the nat table is the kernel's unless xdpfw loads it (load --nat xdpfw: docs/nat.md): -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
		"docker.rules:25: skipped: table nat is not supported: the nat table is the kernel's unless xdpfw loads it (load --nat xdpfw: docs/nat.md): -A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER",
		"docker.rules:26: skipped: table nat is not supported: the nat table is the kernel's unless xdpfw loads it (load --nat xdpfw: docs/nat.md): -A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE",
		"docker.rules:27: skipped: table nat is not supported: the nat table is the kernel's unless xdpfw loads it (load --nat xdpfw: docs/nat.md): -A DOCKER -i docker0 -j RETURN",
		"docker.rules:37: skipped: target TCPMSS is not supported: it rewrites the MSS option of TCP SYNs; xdpfw decides and never changes a packet: -A FORWARD -p tcp -j TCPMSS --clamp-mss-to-pmtu",
	}
	if strings.Join(skipped, "\n") != strings.Join(want, "\n") {
		t.Errorf("skipped:\n%s\nwant\n%s", strings.Join(skipped, "\n"), strings.Join(want, "\n"))
	}
	if len(rs.Rules) != 5 || rs.Tables != 1 || rs.PolicyFor(ChainInput, FamilyIPv4) != VerdictDrop {
		t.Errorf("rules %q, %d tables", rulesText(rs), rs.Tables)
	}

	// A terminating target is never skipped: its packets would go on.
	_, err = Parse("q", []byte("-A INPUT -j NFQUEUE --queue-num 1\n"), ParseOptions{SkipUnsupported: true})
	if err == nil || !strings.Contains(err.Error(), "target NFQUEUE is not supported") {
		t.Errorf("NFQUEUE with SkipUnsupported: %v", err)
	}
	// A policy other than ACCEPT in a skipped table is a line that matters.
	rs, err = Parse("m", []byte("*mangle\n:PREROUTING DROP [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"), ParseOptions{SkipUnsupported: true})
	if err != nil || len(rs.Skipped) != 1 || rs.Skipped[0].Pos.Line != 2 {
		t.Errorf("mangle DROP policy: %v, %+v", err, rs)
	}
	// A file of skipped tables only is empty: load refuses it unless asked.
	rs, err = Parse("n", []byte("*nat\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n"), ParseOptions{SkipUnsupported: true})
	if err != nil || !rs.Empty() {
		t.Errorf("nat only: %v, empty %v", err, rs.Empty())
	}
}

// TestRawTable: the raw table's NOTRACK rules, as iptables-save prints them
// (checked in a throwaway namespace, both back ends: -j NOTRACK and -j CT
// --notrack keep their spelling), and what else the raw table may hold.
func TestRawTable(t *testing.T) {
	src := `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -p udp -m udp --dport 53 -j NOTRACK
-A OUTPUT -p udp -m udp --sport 53 -j CT --notrack
-A PREROUTING -s 10.0.0.0/8 ! -d 10.0.0.1/32 -p tcp -j CT --notrack
-A PREROUTING -i lo -j CT --notrack
-A PREROUTING -j CT --helper ftp
-A PREROUTING -j TRACE
-I PREROUTING 1 -p icmp -j NOTRACK
-A MYCHAIN -j NOTRACK
COMMIT
`
	want := []string{
		"-t raw -A PREROUTING -4 -p udp --dport 53 -j NOTRACK",
		"-t raw -A OUTPUT -4 -p udp --sport 53 -j CT --notrack",
		"-t raw -A PREROUTING -s 10.0.0.0/8 ! -d 10.0.0.1/32 -p tcp -j CT --notrack",
	}
	_, err := Parse("raw.rules", []byte(src), ParseOptions{Family: FamilyIPv4})
	var el ErrorList
	if !asList(err, &el) || len(el) != 5 {
		t.Fatalf("want 5 errors (-i, CT --helper, TRACE, -I, MYCHAIN), got %v", err)
	}
	for i, w := range []struct {
		line int
		msg  string
	}{{7, "-i in a NOTRACK rule is not supported"}, {8, "-j CT --helper is not supported"}, {9, "target TRACE is not supported"},
		{10, "-I in the raw table is not supported"}, {11, "chain MYCHAIN of the raw table is not supported"}} {
		if e := el[i]; e.Pos.Line != w.line || !strings.Contains(e.Msg, w.msg) || !e.Unsupported {
			t.Errorf("error %d: %v, want line %d: %s", i, e, w.line, w.msg)
		}
	}
	rs, err := Parse("raw.rules", []byte(src), ParseOptions{Family: FamilyIPv4, SkipUnsupported: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs.Raw {
		got = append(got, r.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(rs.Skipped) != 5 || len(rs.Rules) != 0 || rs.Empty() {
		t.Errorf("raw rules:\n%s\nwant\n%s\n(%d skipped)", strings.Join(got, "\n"), strings.Join(want, "\n"), len(rs.Skipped))
	}
	if rs.Raw[0].Chain != ChainPrerouting || rs.Raw[1].Chain != ChainOutput || rs.Raw[0].Target.Verdict != VerdictNotrack || !rs.Raw[1].Target.CT {
		t.Errorf("raw rules: %+v", rs.Raw)
	}
	// the canonical text ("-t raw -A ...", the state's) reads back
	again, err := Parse("again", []byte(rs.String()), ParseOptions{})
	if err != nil || again.String() != rs.String() || len(again.Raw) != 3 {
		t.Errorf("round trip: %v\n%s\nvs\n%s", err, rs.String(), again.String())
	}
	// what only changes which packets the NOTRACK rules reach (ACCEPT,
	// RETURN, jumps and gotos, user chains: firewalld's zone chains) or
	// reports them (LOG) is skippable
	rs, err = Parse("zones", []byte(`*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:PRE_public - [0:0]
:PRE_public_allow - [0:0]
-A PREROUTING -p ipv6-icmp -j ACCEPT
-A PREROUTING -i eth0 -g PRE_public
-A PREROUTING -j LOG --log-prefix "raw "
-A PREROUTING -p udp -j NOTRACK
-A PREROUTING -j RETURN
-A PRE_public -j PRE_public_allow
-A PRE_public_allow -p tcp --dport 21 -j CT --helper ftp
-A PRE_public_allow -p udp -j NOTRACK
COMMIT
`), ParseOptions{Family: FamilyIPv6, SkipUnsupported: true})
	if err != nil {
		t.Fatalf("raw zone chains: %v", err)
	}
	if len(rs.Raw) != 1 || len(rs.Skipped) != 7 || rs.Raw[0].String() != "-t raw -A PREROUTING -6 -p udp -j NOTRACK" {
		t.Errorf("raw zone chains: %+v", rs)
	}
	for _, sk := range rs.Skipped {
		if sk.Pos.Line == 6 && !strings.Contains(sk.Why, "-j ACCEPT in the raw table is not supported: xdpfw runs -j NOTRACK and -j CT --notrack there; "+
			"left out, it changes only which packets later NOTRACK rules exempt from tracking") ||
			sk.Pos.Line == 7 && !strings.Contains(sk.Why, "-g PRE_public in the raw table is not supported") {
			t.Errorf("raw zone chains: line %d skipped for %q", sk.Pos.Line, sk.Why)
		}
	}
	// a second *raw section replaces the first, as iptables-restore does
	rs, err = Parse("two", []byte("*raw\n-A PREROUTING -p udp -j NOTRACK\nCOMMIT\n*raw\n-A OUTPUT -p tcp -j NOTRACK\nCOMMIT\n"), ParseOptions{})
	if err != nil || len(rs.Raw) != 1 || rs.Raw[0].Chain != ChainOutput {
		t.Errorf("two raw sections: %v %+v", err, rs)
	}
	for _, c := range []struct {
		src, msg string
		skip     bool
	}{
		// a DROP in raw decides packets: refused even with SkipUnsupported
		{"-t raw -A PREROUTING -s 10.0.0.0/8 -j DROP", "-j DROP in the raw table is not supported", true},
		{"*raw\n:z - [0:0]\n-A PREROUTING -j z\n-A z -p udp -j DROP\nCOMMIT\n", "-j DROP in the raw table is not supported", true},
		{"*raw\n:z - [0:0]\n-A z -j REJECT\nCOMMIT\n", "-j REJECT in the raw table is not supported", true},
		{"-t raw -A PREROUTING -p udp -j CT", "-j CT without --notrack is not supported", false},
		// no -j: it would only count in iptables; read as a raw rule it untracked (FuzzParse)
		{"-t raw -A PREROUTING -p udp", "a raw table rule without -j is not supported", false},
		{"-A INPUT -j NOTRACK", "target NOTRACK is not supported: it exempts packets from conntrack: it belongs to the raw table", false},
		{"-A INPUT -j CT --notrack", "target CT is not supported", false},
		{"-t raw -A PREROUTING -p tcp -m multiport --dports 1,2 -j NOTRACK", "-m multiport in a NOTRACK rule is not supported", false},
	} {
		_, err := Parse("c", []byte(c.src), ParseOptions{SkipUnsupported: c.skip})
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %q", c.src, err, c.msg)
		}
	}
}

// TestMarkSpellings: -m mark --mark in OUTPUT, read as iptables reads it and
// printed as iptables-save v1.8.9 printed it (nf_tables, throwaway
// namespace); refused where no mark exists.
func TestMarkSpellings(t *testing.T) {
	for _, c := range [][2]string{
		{"--mark 3/1", "--mark 0x3/0x1"}, // never matches; iptables takes it, the compiler warns
		{"--mark 7", "--mark 0x7"},
		{"! --mark 0x10/0xf0", "! --mark 0x10/0xf0"},
		{"--mark 010", "--mark 0x8"},
		{"--mark 0xffffffff/0xffffffff", "--mark 0xffffffff"},
		{"--mark 1/0xffffffff", "--mark 0x1"},
	} {
		rs, err := Parse("m", []byte("-A OUTPUT -m mark "+c[0]+" -j DROP"), ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c[0], err)
		}
		if got, want := rs.Rules[0].String(), "-A OUTPUT -m mark "+c[1]+" -j DROP"; got != want {
			t.Errorf("%s: %s, want %s", c[0], got, want)
		}
		assertRoundTrip(t, rs)
	}
	for _, c := range []struct{ src, msg string }{
		{"-A INPUT -m mark --mark 1 -j DROP", "-m mark in INPUT is not supported: INPUT and FORWARD run in XDP"},
		{"-A FORWARD -m mark --mark 1 -j DROP", "-m mark in FORWARD is not supported"},
		{"-A OUTPUT -m connmark --mark 1 -j DROP", "module connmark is not supported: xdpfw's conntrack keeps no mark"},
		{"-A OUTPUT -m mark --mark x -j DROP", "bad --mark"},
		{"-A OUTPUT -m mark --mark 0x100000000 -j DROP", "bad --mark"},
		{"-A OUTPUT -m mark -j DROP", "-m mark needs --mark"},
		{"-A OUTPUT --mark 1 -j DROP", "--mark needs -m mark before it"},
		{"-A OUTPUT -j MARK --set-mark 1", "target MARK is not supported"},
	} {
		if _, err := Parse("m", []byte(c.src), ParseOptions{}); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %q", c.src, err, c.msg)
		}
	}
}

// liveSpellings are raw-table and -m mark rules as written, and what
// iptables-save v1.8.9 printed for them (nf_tables and legacy);
// TestRawMarkSpellingsLive checks the record against iptables itself.
var liveSpellings = []struct{ table, chain, args, saved string }{
	{"raw", "PREROUTING", "-p udp --dport 53 -j NOTRACK", "-p udp -m udp --dport 53 -j NOTRACK"},
	{"raw", "OUTPUT", "-p udp --sport 53 -j CT --notrack", "-p udp -m udp --sport 53 -j CT --notrack"},
	{"raw", "PREROUTING", "-s 10.0.0.0/8 ! -d 10.0.0.1 -j CT --notrack", "-s 10.0.0.0/8 ! -d 10.0.0.1/32 -j CT --notrack"},
	{"filter", "OUTPUT", "-m mark --mark 3/1 -j DROP", "-m mark --mark 0x3/0x1 -j DROP"},
	{"filter", "OUTPUT", "-m mark ! --mark 0x10/0xf0 -j DROP", "-m mark ! --mark 0x10/0xf0 -j DROP"},
	{"filter", "OUTPUT", "-m mark --mark 010 -j DROP", "-m mark --mark 0x8 -j DROP"},
}

// TestRawMarkSpellingsLive: iptables-save prints what liveSpellings
// records, and it reads back into the rule xdpfw made of the rule as
// written.
func TestRawMarkSpellingsLive(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iptables-nft"); err != nil {
		t.Skip("iptables-nft not installed")
	}
	ns := testutil.NewNetNS(t)
	for _, backend := range []string{"iptables-legacy", "iptables-nft"} {
		for _, c := range liveSpellings {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if out, err := ns.Exec(ctx, backend, "-t", c.table, "-F"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if out, err := ns.Exec(ctx, backend, append([]string{"-t", c.table, "-A", c.chain}, splitArgs(t, c.args)...)...); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			out, err := ns.Exec(ctx, backend+"-save", "-t", c.table)
			cancel()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			got := ""
			for _, l := range strings.Split(string(out), "\n") {
				if s, ok := strings.CutPrefix(l, "-A "+c.chain+" "); ok {
					got = s
				}
			}
			if got != c.saved {
				t.Errorf("%s -t %s -A %s %s: iptables-save printed %q, the record says %q", backend, c.table, c.chain, c.args, got, c.saved)
			}
			line := func(spec string) string {
				return "*" + c.table + "\n-A " + c.chain + " " + spec + "\nCOMMIT\n"
			}
			theirs, err1 := Parse("saved", []byte(line(got)), ParseOptions{Family: FamilyIPv4})
			ours, err2 := Parse("args", []byte(line(c.args)), ParseOptions{Family: FamilyIPv4})
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: %v / %v", c.args, err1, err2)
			}
			if theirs.String() != ours.String() {
				t.Errorf("%s: iptables-save's %q is another rule:\n%s\nvs\n%s", c.args, got, theirs, ours)
			}
		}
	}
}

// TestKernelNATNote: skipped nat lines that translate addresses give the
// note of what xdpfw sees of them; other skipped lines give none.
func TestKernelNATNote(t *testing.T) {
	src := "*nat\n:POSTROUTING ACCEPT [0:0]\n:PREROUTING ACCEPT [0:0]\n" +
		"-A POSTROUTING -o eth0 -j MASQUERADE\n" +
		"-A PREROUTING -i eth0 -p tcp --dport 8080 -j DNAT --to-destination 10.0.0.2:80\n" +
		"-A PREROUTING -i eth0 -p tcp --dport 2222 -j REDIRECT --to-ports 22\n" +
		"COMMIT\n*mangle\n:FORWARD ACCEPT [0:0]\n-A FORWARD -j TCPMSS --clamp-mss-to-pmtu\nCOMMIT\n" +
		"*filter\n:INPUT DROP [0:0]\nCOMMIT\n"
	rs, err := Parse("nat.rules", []byte(src), ParseOptions{Family: FamilyIPv4, SkipUnsupported: true})
	if err != nil {
		t.Fatal(err)
	}
	note := KernelNATNote(rs.Skipped)
	for _, want := range []string{"2 skipped nat rule(s) translate destinations", "1 skipped nat rule(s) translate sources"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	if note := KernelNATNote(rs.Skipped[3:]); note != "" {
		t.Errorf("a mangle line alone: note %q, want none", note)
	}
}

// logFlagSpellings are -j LOG rules with LOG's flags as written, and what
// iptables-save v1.8.9 prints for them (its order, whatever the order
// written).
var logFlagSpellings = []struct{ args, saved string }{
	{"-j LOG --log-uid", "-j LOG --log-uid"},
	{`-p tcp -j LOG --log-macdecode --log-ip-options --log-prefix "x: " --log-tcp-options --log-tcp-sequence --log-uid`,
		`-p tcp -j LOG --log-prefix "x: " --log-tcp-sequence --log-tcp-options --log-ip-options --log-uid --log-macdecode`},
}

// TestLogFlags: LOG's flags parse, print in iptables-save's order and
// parse back; they are options of -j LOG (or of a rule with --log), not of
// NFLOG, and given once. Live: iptables-save in a throwaway namespace
// prints the same text (legacy and nft).
func TestLogFlags(t *testing.T) {
	for _, tt := range logFlagSpellings {
		rs, err := Parse("a", []byte("-A INPUT "+tt.args), ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tt.args, err)
		}
		if got := rs.Rules[0].Spec(); got != tt.saved {
			t.Errorf("%s: canonical %q, iptables-save prints %q", tt.args, got, tt.saved)
		}
		assertRoundTrip(t, rs)
	}
	rs, err := Parse("d", []byte("-A INPUT -j DROP --log --log-uid --log-tcp-sequence"), ParseOptions{})
	if err != nil || rs.Rules[0].Target.LogFlags != LogUID|LogTCPSeq {
		t.Errorf("--log on DROP with flags: %v %+v", err, rs)
	}
	for _, bad := range []struct{ text, msg string }{
		{"-A INPUT -j NFLOG --log-uid", "--log-uid is an option of -j LOG, not of -j NFLOG"},
		{"-A INPUT -j DROP --log-uid", "--log-uid on -j DROP needs --log"},
		{"-A INPUT --log-macdecode -j LOG", "--log-macdecode needs -j LOG before it"},
		{"-A INPUT -j LOG --log-uid --log-uid", "--log-uid given twice"},
	} {
		if _, err := Parse("e", []byte(bad.text), ParseOptions{}); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%s: %v, want %q", bad.text, err, bad.msg)
		}
	}
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	for _, backend := range []string{"iptables-legacy", "iptables-nft"} {
		for _, tt := range logFlagSpellings {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if out, err := ns.Exec(ctx, backend, "-F", "INPUT"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if out, err := ns.Exec(ctx, backend, append([]string{"-A", "INPUT"}, splitArgs(t, tt.args)...)...); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			out, err := ns.Exec(ctx, backend+"-save", "-t", "filter")
			cancel()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !strings.Contains(string(out), "-A INPUT "+tt.saved+"\n") {
				t.Errorf("%s: iptables-save printed\n%s\nthe record says %q", backend, out, tt.saved)
			}
		}
	}
}
