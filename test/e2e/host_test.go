package e2e

import (
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestHostPolicy loads a host policy (policy DROP, ssh from anywhere, web
// from the local IPv4 network only, ping, ICMPv6, DNS, a refused network)
// on the server end of a veth pair and checks every verdict with real TCP,
// ICMP and UDP traffic from the client, in both families, then checks the
// counters `list --json` reports against the traffic sent.
func TestHostPolicy(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	// Extra client sources, and routes back to them, so that without the
	// firewall they reach the server: only xdpfw can make them fail.
	const otherNet, refusedSrc = "10.201.0.2", "198.51.100.7"
	ipOut(t, "-n", l.cli.Name, "addr", "add", otherNet+"/32", "dev", l.cliIf)
	ipOut(t, "-n", l.cli.Name, "addr", "add", refusedSrc+"/32", "dev", l.cliIf)
	ipOut(t, "-n", l.srv.Name, "route", "add", "10.201.0.0/24", "via", l.cli4)
	ipOut(t, "-n", l.srv.Name, "route", "add", "198.51.100.0/24", "via", l.cli4)

	serveTCP(t, l.srv, 22, 80, 443, 8080)
	dns, other := newUDPSink(t, l.srv, 53), newUDPSink(t, l.srv, 54)
	udp := newUDPSender(t, l.cli, "")

	probe := func(local, addr string, port int, ok bool) tcpProbe {
		return tcpProbe{from: l.cli, local: local, addr: hostPort(addr, port), ok: ok}
	}
	type tcpCase struct {
		local, addr string
		port        int
		withFW      bool // outcome with the firewall loaded (without: always connects)
	}
	tcpCases := []tcpCase{
		{"", l.srv4, 22, true},
		{"", l.srv6, 22, true},
		{"", l.srv4, 80, true},
		{"", l.srv4, 443, true},
		{"", l.srv4, 8080, false},
		{"", l.srv6, 8080, false},
		{"", l.srv6, 80, false},         // web is for 10.200.0.0/24 only
		{otherNet, l.srv4, 80, false},   // ... not for another network
		{refusedSrc, l.srv4, 22, false}, // the refused network comes first
	}

	// Without the firewall everything gets through.
	var before []tcpProbe
	for _, c := range tcpCases {
		before = append(before, probe(c.local, c.addr, c.port, true))
	}
	checkTCP(t, "no firewall", before...)
	udp.send(t, hostPort(l.srv4, 54), "before", 0, 1)
	if n := other.wait(t, "before", 1); n != 1 {
		t.Fatalf("no firewall: %d datagrams reached udp port 54, want 1", n)
	}
	if t.Failed() {
		t.FailNow()
	}

	rules := writeRules(t, "host.rules",
		"# a host offering ssh, web and DNS",
		"-P INPUT DROP",
		"-A INPUT -s 198.51.100.0/24 -j DROP",
		"-A INPUT -p tcp --dport 22 -j ACCEPT",
		"-A INPUT -s 10.200.0.0/24 -p tcp -m multiport --dports 80,443 -j ACCEPT",
		"-A INPUT -p icmp --icmp-type echo-request -j ACCEPT",
		"-A INPUT -p ipv6-icmp -j ACCEPT",
		"-A INPUT -p udp --dport 53 -j ACCEPT",
	)
	const (
		ruleRefused = "-A INPUT -s 198.51.100.0/24 -j DROP"
		ruleSSH     = "-A INPUT -p tcp --dport 22 -j ACCEPT"
		ruleWeb     = "-A INPUT -s 10.200.0.0/24 -p tcp -m multiport --dports 80,443 -j ACCEPT"
		rulePing    = "-A INPUT -p icmp --icmp-type 8 -j ACCEPT" // echo-request, canonical
		ruleICMPv6  = "-A INPUT -p ipv6-icmp -j ACCEPT"
		ruleDNS     = "-A INPUT -p udp --dport 53 -j ACCEPT"
	)
	f := newFW(t, l.srv)
	r := f.mustRun("load", "-i", l.srvIf, rules)
	if want := "attached to " + l.srvIf + " (native mode)\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("load output lacks %q: %s", want, r)
	}
	f.list().wantChain(t, "INPUT", ruleRefused, ruleSSH, ruleWeb, rulePing, ruleICMPv6, ruleDNS)

	var after []tcpProbe
	for _, c := range tcpCases {
		after = append(after, probe(c.local, c.addr, c.port, c.withFW))
	}
	checkTCP(t, "host.rules", after...)
	checkPing(t, "host.rules", l.cli, l.srv4, true)
	checkPing(t, "host.rules", l.cli, l.srv6, true)

	// UDP: port 54 first, then 53 over the same path; once the 53 ones are
	// in, the 54 ones have been through XDP too.
	const nDNS = 5
	udp.send(t, hostPort(l.srv4, 54), "blocked", 0, 3)
	udp.send(t, hostPort(l.srv6, 54), "blocked", 3, 3)
	udp.send(t, hostPort(l.srv4, 53), "dns", 0, nDNS)
	udp.send(t, hostPort(l.srv6, 53), "dns", nDNS, nDNS)
	if n := dns.wait(t, "dns", 2*nDNS); n != 2*nDNS {
		t.Errorf("%d datagrams reached udp port 53, want %d", n, 2*nDNS)
	}
	other.sync(t)
	if n := other.count("blocked"); n != 0 {
		t.Errorf("%d datagrams reached udp port 54, want none", n)
	}

	list := f.list()
	for _, c := range []struct {
		rule string
		min  uint64
	}{
		{ruleSSH, 1}, {ruleWeb, 1}, {ruleRefused, 1}, {rulePing, 1}, {ruleICMPv6, 1},
	} {
		if got := list.rule(t, c.rule).Counters.Packets; got < c.min {
			t.Errorf("rule %q counted %d packets, want at least %d:\n%s", c.rule, got, c.min, list.raw)
		}
	}
	if got := list.rule(t, ruleDNS).Counters; got.Packets != 2*nDNS || got.Bytes == 0 {
		t.Errorf("rule %q counted %+v, want exactly the %d datagrams sent:\n%s", ruleDNS, got, 2*nDNS, list.raw)
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		p := list.policy(t, "INPUT", fam)
		if p.Verdict != "DROP" || p.Counters.Packets < 1 {
			t.Errorf("INPUT %s policy: %+v, want DROP having dropped the blocked SYNs and datagrams:\n%s", fam, p, list.raw)
		}
	}
	if s := f.status(); s.Reasons["policy-drop"].Packets < 1 || s.Reasons["rule-drop"].Packets < 1 || s.Reasons["rule-accept"].Packets < 1 {
		t.Errorf("status reasons do not show the accepted and dropped traffic:\n%s", s.raw)
	}
}
