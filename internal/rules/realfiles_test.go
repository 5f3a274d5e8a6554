package rules

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// The cases below encode what iptables v1.8.9 (nf_tables and legacy back
// ends) printed in a throwaway network namespace: `iptables -A INPUT ARGS`
// followed by `iptables-save`, or `iptables-restore FILE`.

func TestRealFileSyntaxCanonical(t *testing.T) {
	any, v4, v6 := ParseOptions{}, ParseOptions{Family: FamilyIPv4}, ParseOptions{Family: FamilyIPv6}
	tests := []struct {
		in, want string
		opt      ParseOptions
	}{
		// --reject-with: every spelling of libipt_REJECT / libip6t_REJECT;
		// iptables-save prints the long form.
		{"-A INPUT -j REJECT --reject-with net-unreach", "-4 -j REJECT --reject-with icmp-net-unreachable", v4},
		{"-A INPUT -j REJECT --reject-with host-unreach", "-4 -j REJECT --reject-with icmp-host-unreachable", v4},
		{"-A INPUT -j REJECT --reject-with proto-unreach", "-4 -j REJECT --reject-with icmp-proto-unreachable", v4},
		{"-A INPUT -j REJECT --reject-with port-unreach", "-4 -j REJECT --reject-with icmp-port-unreachable", v4},
		{"-A INPUT -j REJECT --reject-with net-prohib", "-4 -j REJECT --reject-with icmp-net-prohibited", v4},
		{"-A INPUT -j REJECT --reject-with host-prohib", "-4 -j REJECT --reject-with icmp-host-prohibited", v4},
		{"-A INPUT -j REJECT --reject-with admin-prohib", "-4 -j REJECT --reject-with icmp-admin-prohibited", v4},
		{"-A INPUT -p tcp -j REJECT --reject-with tcp-rst", "-4 -p tcp -j REJECT --reject-with tcp-reset", v4},
		{"-A INPUT -j REJECT --reject-with no-route", "-6 -j REJECT --reject-with icmp6-no-route", v6},
		{"-A INPUT -j REJECT --reject-with adm-prohibited", "-6 -j REJECT --reject-with icmp6-adm-prohibited", v6},
		{"-A INPUT -j REJECT --reject-with addr-unreach", "-6 -j REJECT --reject-with icmp6-addr-unreachable", v6},
		{"-A INPUT -j REJECT --reject-with port-unreach", "-6 -j REJECT --reject-with icmp6-port-unreachable", v6},
		// In a rule for both families port-unreach is the default answer.
		{"-A INPUT -j REJECT --reject-with port-unreach", "-j REJECT", any},
		// ttl-exceeded is time-exceeded (iptables-save: 11; ip6tables-save: 3).
		{"-A INPUT -p icmp --icmp-type ttl-exceeded -j DROP", "-p icmp --icmp-type 11 -j DROP", any},
		{"-A INPUT -p ipv6-icmp --icmpv6-type ttl-exceeded -j DROP", "-p ipv6-icmp --icmpv6-type 3 -j DROP", any},
		// '+' is a wildcard only at the end of an interface name.
		{"-A INPUT -i e+th -j DROP", "-i e+th -j DROP", any},
		{"-A INPUT -i eth+0 -j DROP", "-i eth+0 -j DROP", any},
		{"-A INPUT -i eth++ -j DROP", "-i eth++ -j DROP", any},
		// -t filter, before or after -A.
		{"-t filter -A INPUT -j DROP", "-j DROP", any},
		{"-A INPUT --table filter -p tcp -j DROP", "-p tcp -j DROP", any},
		// -4/-6 before -A.
		{"-4 -A INPUT -j DROP", "-4 -j DROP", any},
		{"-6 -A INPUT -p tcp -j DROP", "-6 -p tcp -j DROP", any},
		{"-t filter -6 -A INPUT -j DROP", "-6 -j DROP", any},
		// Each -m comment keeps its text; list prints them in order, as
		// iptables-save does.
		{"-A INPUT -m comment --comment a -p tcp -m comment --comment 'b c' -j DROP",
			`-p tcp -m comment --comment a -m comment --comment "b c" -j DROP`, any},
		// A match module given twice is one match (iptables-save keeps
		// both -m tcp; the meaning is the same).
		{"-A INPUT -p tcp -m tcp -m tcp --dport 22 -j DROP", "-p tcp --dport 22 -j DROP", any},
		{"-A INPUT -p tcp -m multiport -m multiport --dports 1,2 -j DROP", "-p tcp -m multiport --dports 1,2 -j DROP", any},
		{"-A INPUT -p tcp -m tcp -m tcp -j DROP", "-p tcp -m tcp -j DROP", any},
		// What iptables-save prints for --dport 0:65535, --tcp-flags NONE
		// NONE and --icmp-type 255 (all three read the L4 header, so no
		// non-first fragment matches them).
		{"-A INPUT -p tcp -m tcp -j DROP", "-p tcp -m tcp -j DROP", any},
		{"-A INPUT -p icmp -m icmp --icmp-type any -j DROP", "-p icmp --icmp-type any -j DROP", any},
		// --dport beside -m multiport --dports: iptables tests both
		// (iptables-save prints both), so the rule matches the ports they
		// share.
		{"-A INPUT -p tcp --dport 22 -m multiport --dports 22,80 -j DROP", "-p tcp --dport 22 -j DROP", any},
		{"-A INPUT -p tcp -m multiport --dports 20:30,80 -m tcp --dport 25:90 -j DROP", "-p tcp -m multiport --dports 25:30,80 -j DROP", any},
		{"-A INPUT -p tcp --dport 22 -m multiport --dports 80,443 -j DROP", "-p tcp ! --dport 0:65535 -j DROP", any},
		{"-A INPUT -p tcp ! --dport 22 -m multiport ! --dports 80,443 -j DROP", "-p tcp -m multiport ! --dports 22,80,443 -j DROP", any},
		{"-A INPUT -p tcp --dport 1:1000 -m multiport ! --dports 22 -j DROP", "-p tcp -m multiport --dports 1:21,23:1000 -j DROP", any},
		{"-A INPUT -p udp -m multiport ! --sports 53 -m udp --sport 1:65535 -j DROP", "-p udp -m multiport ! --sports 0,53 -j DROP", any},
		// ADDRESS/NETMASK in both families (ip6tables-save prints /32).
		{"-A INPUT -s 10.1.2.3/255.255.0.0 -j DROP", "-s 10.1.0.0/16 -j DROP", any},
		{"-A INPUT -d 2001:db8:1::/ffff:ffff:: -j DROP", "-d 2001:db8::/32 -j DROP", any},
		{"-A INPUT -s ::/:: -j DROP", "-s ::/0 -j DROP", any},
		// Counters before -A (iptables-save -c).
		{"[12:3400] -A INPUT -j DROP", "-j DROP", any},
		{"[0:0] -4 -A INPUT -j DROP", "-4 -j DROP", any},
	}
	for _, tt := range tests {
		got := parseLine(t, tt.in, tt.opt)
		if got.Text != tt.want {
			t.Errorf("%q: Text = %q, want %q", tt.in, got.Text, tt.want)
		}
	}
}

// TestDualFamilyFile: one file for iptables-restore and ip6tables-restore.
// iptables-restore skipped the lines with -6 (before -A or after it) and
// ip6tables-restore those with -4, including lines that would be errors in
// the other family.
func TestDualFamilyFile(t *testing.T) {
	src := `*filter
:INPUT ACCEPT [0:0]
-4 -A INPUT -s 1.2.3.4 -j DROP
-6 -A INPUT -s ::1 -j DROP
-A INPUT -6 -p ipv6-icmp -j ACCEPT
-A INPUT -p tcp -4 -j REJECT --reject-with net-unreach
[5:6] -A INPUT -p udp -j DROP
-6 -P FORWARD DROP
-P OUTPUT DROP -4
COMMIT
`
	tests := []struct {
		opt      ParseOptions
		rules    []string
		policies []string
	}{
		{ParseOptions{Family: FamilyIPv4},
			[]string{"-A INPUT -s 1.2.3.4/32 -j DROP", "-A INPUT -4 -p tcp -j REJECT --reject-with icmp-net-unreachable", "-A INPUT -4 -p udp -j DROP"},
			[]string{"-P INPUT ACCEPT -4", "-P OUTPUT DROP -4"}},
		{ParseOptions{Family: FamilyIPv6},
			[]string{"-A INPUT -s ::1/128 -j DROP", "-A INPUT -p ipv6-icmp -j ACCEPT", "-A INPUT -6 -p udp -j DROP"},
			[]string{"-P INPUT ACCEPT -6", "-P FORWARD DROP -6"}},
		{ParseOptions{},
			[]string{"-A INPUT -s 1.2.3.4/32 -j DROP", "-A INPUT -s ::1/128 -j DROP", "-A INPUT -p ipv6-icmp -j ACCEPT",
				"-A INPUT -4 -p tcp -j REJECT --reject-with icmp-net-unreachable", "-A INPUT -p udp -j DROP"},
			[]string{"-P INPUT ACCEPT", "-P FORWARD DROP -6", "-P OUTPUT DROP -4"}},
	}
	for _, tt := range tests {
		rs, err := Parse("dual.rules", []byte(src), tt.opt)
		if err != nil {
			t.Fatalf("family %v: %v", tt.opt.Family, err)
		}
		var rules, pols []string
		for _, r := range rs.Rules {
			rules = append(rules, r.String())
		}
		for _, p := range rs.Policies {
			pols = append(pols, p.String())
		}
		if strings.Join(rules, "\n") != strings.Join(tt.rules, "\n") || strings.Join(pols, "\n") != strings.Join(tt.policies, "\n") {
			t.Errorf("family %v:\n%s\n%s\nwant\n%s\n%s", tt.opt.Family, strings.Join(rules, "\n"), strings.Join(pols, "\n"),
				strings.Join(tt.rules, "\n"), strings.Join(tt.policies, "\n"))
		}
		assertRoundTrip(t, rs)
	}
	// On a command line -6 in an IPv4 context is still an error.
	if _, err := ParseRuleArgs("INPUT", []string{"-6", "-j", "DROP"}, ParseOptions{Family: FamilyIPv4}); err == nil {
		t.Error("ParseRuleArgs -6 with an IPv4 default: no error")
	}
}

func TestRealFileSyntaxErrors(t *testing.T) {
	tests := []struct{ src, pos, tok, msg string }{
		{"-t nat -A INPUT -j DROP", "1:4", "nat", "table nat is not supported"},
		{"-t nat -A POSTROUTING -o eth0 -j MASQUERADE", "1:4", "nat", "table nat is not supported"},
		{"-A INPUT -t mangle -j DROP", "1:13", "mangle", "table mangle is not supported"},
		{"-P INPUT DROP -t raw", "1:18", "raw", "table raw is not supported"},
		{"[1:2] -P INPUT DROP", "1:7", "", "counters [PACKETS:BYTES] must be followed by -A"},
		{"-A INPUT -6 -j REJECT --reject-with policy-fail", "1:37", "policy-fail", "--reject-with policy-fail is not supported"},
		{"-A INPUT -6 -j REJECT --reject-with icmp6-reject-route", "1:37", "icmp6-reject-route", "is not supported"},
		// Masks with holes: iptables takes them, xdpfw's classifier
		// matches prefixes only.
		{"-A INPUT -s 10.0.0.0/255.0.255.0 -j DROP", "1:22", "255.0.255.0", "netmask is not contiguous"},
		{"-A INPUT -s 2001:db8::/ffff:0:ffff:: -j DROP", "1:24", "ffff:0:ffff::", "netmask is not contiguous"},
		{"-A INPUT -s 10.0.0.0/ffff:: -j DROP", "1:22", "ffff::", "not an IPv4 netmask"},
		{"-A INPUT -4 -j REJECT --reject-with no-route", "1:37", "no-route", "IPv6 reject type in an IPv4 rule"},
	}
	for _, tt := range tests {
		_, err := Parse("f", []byte(tt.src), ParseOptions{})
		var e *Error
		if !errors.As(err, &e) || e.Pos.String() != "f:"+tt.pos || e.Token != tt.tok || !strings.Contains(e.Msg, tt.msg) {
			t.Errorf("%q: err = %v (token %q), want %s %q %s", tt.src, err, func() string {
				if e != nil {
					return e.Token
				}
				return ""
			}(), tt.pos, tt.tok, tt.msg)
		}
	}
}

// TestProtocolAndPortNames: what iptables-save printed for -p NAME and
// --dport NAME (Debian 12, netbase 6.4).
func TestProtocolAndPortNames(t *testing.T) {
	tests := []struct{ in, want string }{
		{"-p igmp", "-p igmp"}, {"-p IGMP", "-p igmp"}, {"-p 2", "-p igmp"},
		{"-p 4", "-p ipencap"}, {"-p ipencap", "-p ipencap"},
		{"-p 43", "-p ipv6-route"}, {"-p ipv6-frag", "-p ipv6-frag"}, {"-p 60", "-p ipv6-opts"},
		{"-p ipv6-nonxt", "-p ipv6-nonxt"}, {"-p 103", "-p pim"},
		{"-p 135", "-p mobility-header"}, {"-p mh", "-p mobility-header"}, {"-p ipv6-mh", "-p mobility-header"},
		{"-p 47", "-p gre"}, {"-p 50", "-p esp"}, {"-p 51", "-p ah"}, {"-p 132", "-p sctp"}, {"-p 136", "-p udplite"},
		{"-p ICMPv6", "-p ipv6-icmp"}, {"-p 58", "-p ipv6-icmp"}, {"-p 200", "-p 200"},
		{"-p ip", ""}, {"-p hopopt", ""}, {"-p all", ""},
		{"-p tcp --dport ssh", "-p tcp --dport 22"},
		{"-p tcp --dport ssh:http", "-p tcp --dport 22:80"},
		{"-p tcp --sport ssh: --dport :www", "-p tcp --sport 22:65535 --dport 0:80"},
		{"-p udp --dport ssh", "-p udp --dport 22"}, // --dport takes a name of any protocol
		{"-p tcp -m multiport --dports domain,http:https", "-p tcp -m multiport --dports 53,80:443"},
		{"-p udp -m multiport --sports domain,ntp", "-p udp -m multiport --sports 53,123"},
	}
	for _, tt := range tests {
		want := strings.TrimSpace(tt.want + " -j DROP")
		got := parseLine(t, "-A INPUT "+tt.in+" -j DROP", ParseOptions{})
		if got.Text != want {
			t.Errorf("%q: Text = %q, want %q", tt.in, got.Text, want)
		}
	}
}

// TestBuiltinNetDB: without /etc/protocols and /etc/services the built-in
// copies answer, and they agree with the host's files where it has them.
func TestBuiltinNetDB(t *testing.T) {
	dir := t.TempDir()
	db := loadNetDB(dir+"/protocols", dir+"/services")
	if n, ok := db.protoByName["igmp"]; !ok || n != 2 {
		t.Errorf("built-in igmp = %d, %v", n, ok)
	}
	if n, ok := db.portByName["domain"]; !ok || n != 53 {
		t.Errorf("built-in domain = %d, %v", n, ok)
	}
	builtin := parseNetDB(builtinProtocols, builtinServices)
	if len(builtin.protoByName) < 50 || len(builtin.portByName) < 200 {
		t.Fatalf("built-in tables too small: %d protocols, %d services", len(builtin.protoByName), len(builtin.portByName))
	}
	host := loadNetDB("/etc/protocols", "/etc/services")
	agree := func(what string, a, b map[string]uint16) {
		t.Helper()
		for name, n := range a {
			if m, ok := b[name]; ok && m != n {
				t.Errorf("%s %s: host %d, built-in %d", what, name, n, m)
			}
		}
	}
	widen := func(m map[string]uint8) map[string]uint16 {
		out := map[string]uint16{}
		for k, v := range m {
			out[k] = uint16(v)
		}
		return out
	}
	if _, err := os.Stat("/etc/protocols"); err == nil {
		agree("protocol", widen(host.protoByName), widen(builtin.protoByName))
		for n, name := range host.protoName {
			if b, ok := builtin.protoName[n]; ok && b != name {
				t.Errorf("protocol %d: host names it %s, built-in %s", n, name, b)
			}
		}
	}
	if _, err := os.Stat("/etc/services"); err == nil {
		agree("service", host.portByName, builtin.portByName)
		agree("service", host.portByProto, builtin.portByProto)
	}
}

// TestProtoNameReadsBack: every protocol number prints as a word -p reads
// back as that number.
func TestProtoNameReadsBack(t *testing.T) {
	for p := 1; p < 256; p++ {
		name := protoName(uint8(p))
		if got, ve := parseProto(name); ve != nil || got != uint8(p) {
			t.Errorf("protocol %d prints as %q, which reads as %d (%v)", p, name, got, ve)
		}
	}
}

// TestReadFilesOneFileForBoth: one file given as --ipv4-file and
// --ipv6-file loads each family's lines once.
func TestReadFilesOneFileForBoth(t *testing.T) {
	const f = "testdata/dual-family.rules"
	rs, err := ReadFiles(Sources{IPv4File: f, IPv6File: f})
	if err != nil {
		t.Fatal(err)
	}
	fams := map[Family]int{}
	for _, r := range rs.Rules {
		fams[r.Match.Family]++
	}
	if fams[FamilyIPv4] != 12 || fams[FamilyIPv6] != 10 || len(rs.Rules) != 22 {
		t.Errorf("rules by family: %v (%d in all), want 12 IPv4, 10 IPv6", fams, len(rs.Rules))
	}
}

// TestDualFamilyTestdata: the seed file of real-file syntax loads for each
// family with the rules iptables-restore and ip6tables-restore kept (their
// iptables-save output, in xdpfw's canonical form; the file less its
// "-t filter", which iptables-restore refuses).
func TestDualFamilyTestdata(t *testing.T) {
	src, err := os.ReadFile("testdata/dual-family.rules")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		fam  Family
		want []string
	}{
		{FamilyIPv4, []string{
			"-A INPUT -4 -i lo -j ACCEPT",
			"-A INPUT -4 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
			"-A INPUT -p icmp --icmp-type 8 -j ACCEPT",
			"-A INPUT -p icmp --icmp-type 11 -j ACCEPT",
			"-A INPUT -4 -p igmp -j ACCEPT",
			`-A INPUT -4 -p tcp --dport 22 -m comment --comment ssh -m comment --comment "from anywhere" -j ACCEPT`,
			"-A INPUT -4 -p udp -m multiport --dports 53,123 -j ACCEPT",
			"-A INPUT -4 -p tcp -m multiport --dports 1000:1499,1501:2000 -j ACCEPT",
			"-A INPUT -4 -i wg+0 -j ACCEPT",
			"-A INPUT -s 10.0.0.0/16 -p tcp -j REJECT --reject-with tcp-reset",
			"-A INPUT -4 -j REJECT --reject-with icmp-host-prohibited",
			"-A FORWARD -4 -j REJECT --reject-with icmp-port-unreachable",
		}},
		{FamilyIPv6, []string{
			"-A INPUT -6 -i lo -j ACCEPT",
			"-A INPUT -6 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
			"-A INPUT -p ipv6-icmp -j ACCEPT",
			"-A INPUT -s fe80::/64 -p udp --dport 546 -j ACCEPT",
			`-A INPUT -6 -p tcp --dport 22 -m comment --comment ssh -m comment --comment "from anywhere" -j ACCEPT`,
			"-A INPUT -6 -p udp -m multiport --dports 53,123 -j ACCEPT",
			"-A INPUT -6 -p tcp -m multiport --dports 1000:1499,1501:2000 -j ACCEPT",
			"-A INPUT -6 -i wg+0 -j ACCEPT",
			"-A INPUT -6 -j REJECT --reject-with icmp6-adm-prohibited",
			"-A FORWARD -6 -j REJECT --reject-with icmp6-port-unreachable",
		}},
	} {
		rs, err := Parse("dual-family.rules", src, ParseOptions{Family: tt.fam})
		if err != nil {
			t.Fatalf("family %v: %v", tt.fam, err)
		}
		var got []string
		for _, r := range rs.Rules {
			got = append(got, r.String())
		}
		if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
			t.Errorf("family %v:\n%s\nwant\n%s", tt.fam, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
		}
		assertRoundTrip(t, rs)
	}
}

// TestReadFilesChains: user chains of an iptables-save and an
// ip6tables-save file are kept (one chain per name, each file's rules for
// its family), so that the record and list show them.
func TestReadFilesChains(t *testing.T) {
	dir := t.TempDir()
	v4 := dir + "/v4"
	v6 := dir + "/v6"
	if err := os.WriteFile(v4, []byte("*filter\n:a - [0:0]\n:only4 - [0:0]\n-A INPUT -j a\n-A a -j RETURN\nCOMMIT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(v6, []byte("*filter\n:a - [0:0]\n-A INPUT -j a\n-A a -p tcp -j DROP\nCOMMIT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := ReadFiles(Sources{IPv4File: v4, IPv6File: v6})
	if err != nil {
		t.Fatal(err)
	}
	want := "-N a\n-N only4\n-A INPUT -4 -j a\n-A a -4 -j RETURN\n-A INPUT -6 -j a\n-A a -6 -p tcp -j DROP\n"
	if got := rs.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
