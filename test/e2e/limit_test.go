package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestLimitAccept: -m limit ACCEPT under a DROP policy lets exactly the
// burst through at once (a rate of 2 an hour gives no token back while
// the test runs), whatever the client sends; the rest meets the policy.
// list prints the rule as iptables-save does and counts what it accepted.
func TestLimitAccept(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	sink := newUDPSink(t, l.srv, 5353)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "limit.rules",
		"-P INPUT DROP",
		"-A INPUT -p udp --dport 5353 -m limit --limit 2/h --limit-burst 5 -j ACCEPT",
	))
	const rule = "-A INPUT -p udp --dport 5353 -m limit --limit 2/hour -j ACCEPT"
	snd := newUDPSender(t, l.cli, "")
	snd.send(t, hostPort(l.srv4, 5353), "a", 0, 20)
	sink.sync(t)
	if got := sink.count("a"); got != 5 {
		t.Errorf("%d of 20 datagrams arrived, want the burst: 5", got)
	}
	lst := f.list()
	if c := lst.rule(t, rule).Counters.Packets; c != 5 {
		t.Errorf("the limit rule counted %d packets, want 5", c)
	}
	if c := lst.policy(t, "INPUT", "ipv4").Counters.Packets; c != 15 {
		t.Errorf("the policy counted %d packets, want 15", c)
	}
	// An apply that keeps the rule keeps its (empty) bucket: nothing more
	// passes. A changed rule is a new rule with a full bucket.
	f.mustRun("apply", writeRules(t, "limit.rules",
		"-P INPUT DROP",
		"-A INPUT -p udp --dport 5353 -m limit --limit 2/hour --limit-burst 5 -j ACCEPT",
	))
	snd.send(t, hostPort(l.srv4, 5353), "b", 0, 3)
	sink.sync(t)
	if got := sink.count("b"); got != 0 {
		t.Errorf("after an apply of the same rule %d datagrams arrived, want 0 (the bucket is kept)", got)
	}
	f.mustRun("apply", writeRules(t, "limit.rules",
		"-P INPUT DROP",
		"-A INPUT -p udp --dport 5353 -m limit --limit 2/hour --limit-burst 3 -j ACCEPT",
	))
	snd.send(t, hostPort(l.srv4, 5353), "c", 0, 10)
	sink.sync(t)
	if got := sink.count("c"); got != 3 {
		t.Errorf("after an apply of a changed rule %d datagrams arrived, want its burst: 3", got)
	}
}

// limitOracle is a rule set whose -m limit rules iptables decides as
// xdpfw must: counts per rule after 20 datagrams to each port (rates of 2
// an hour: no token comes back while the test runs).
var limitOracle = []string{
	"-P INPUT DROP",
	"-A INPUT -i lo -j ACCEPT", // the sink's sync markers (iptables sees loopback; XDP does not)
	"-A INPUT -p udp --dport 5353 -m limit --limit 2/hour --limit-burst 5 -j ACCEPT",
	"-A INPUT -p udp --dport 5354 -m limit --limit 2/hour --limit-burst 3 -j ACCEPT",
	"-A INPUT -p udp --dport 5354 -m limit --limit 2/hour --limit-burst 2 -j ACCEPT",
	"-A INPUT -p udp --dport 5355 -m limit --limit 3/hour -j ACCEPT",
	"-A INPUT -s 10.200.0.2/32 -p udp --dport 5356 -j ACCEPT",
	"-A INPUT -p udp --dport 5356 -m limit --limit 2/hour --limit-burst 1 -j ACCEPT",
}

// TestLimitAgreesWithIptables: the same rules and traffic through the
// kernel's iptables (nf_tables and legacy back ends, where installed) and
// through xdpfw give every rule and the policy the same packet counts.
func TestLimitAgreesWithIptables(t *testing.T) {
	testutil.RequireRoot(t)
	send := func(l *link) {
		snd := newUDPSender(t, l.cli, "")
		for _, port := range []int{5353, 5354, 5355, 5356} {
			snd.send(t, hostPort(l.srv4, port), "x", 0, 20)
		}
	}
	compareCounts(t, limitOracle, send, "[5 3 2 5 20 0 45]")
}

// compareCounts loads the rules oracle (its first rule -A INPUT -i lo -j
// ACCEPT, for the sink's sync markers: left out of the counts) into the
// kernel's iptables (nf_tables and legacy back ends, where installed) and
// into xdpfw, each on a fresh pair, has send send the same traffic, and
// requires every rule after the first and the INPUT policy to count the
// same packets everywhere, and xdpfw's counts (rules, then the policy) to
// be want.
func compareCounts(t *testing.T, oracle []string, send func(l *link), want string) {
	t.Helper()
	kernel := map[string][]uint64{}
	for _, bin := range []string{"iptables-nft", "iptables-legacy"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Logf("%s not installed: skipped", bin)
			continue
		}
		l := newPair(t)
		sink := newUDPSink(t, l.srv, 5353)
		ctx := t.Context()
		mustRestore(t, l.srv, bin, filterText(oracle))
		send(l)
		sink.sync(t)
		out, err := l.srv.Exec(ctx, bin, "-L", "INPUT", "-v", "-n", "-x")
		if err != nil {
			t.Fatalf("%s -L: %v\n%s", bin, err, out)
		}
		// "Chain INPUT (policy DROP N packets, ...)", a header, then a line per rule
		var counts []uint64
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var pol uint64
		fmt.Sscanf(lines[0], "Chain INPUT (policy DROP %d packets", &pol)
		for _, line := range lines[3:] { // the -i lo rule left out
			var n uint64
			fmt.Sscanf(strings.TrimSpace(line), "%d", &n)
			counts = append(counts, n)
		}
		kernel[bin] = append(counts, pol)
	}
	l := newPair(t)
	sink := newUDPSink(t, l.srv, 5353)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "oracle.rules", oracle...))
	send(l)
	sink.sync(t)
	lst := f.list()
	var got []uint64
	for _, r := range lst.Rules[1:] {
		got = append(got, r.Counters.Packets)
	}
	got = append(got, lst.policy(t, "INPUT", "ipv4").Counters.Packets)
	if fmt.Sprint(got) != want {
		t.Errorf("xdpfw counted %v per rule and policy, want %s", got, want)
	}
	for bin, w := range kernel {
		if fmt.Sprint(w) != fmt.Sprint(got) {
			t.Errorf("%s counted %v per rule and policy, xdpfw %v", bin, w, got)
		}
	}
}

// sshGuard is the classic ssh brute-force guard: at most 4 new
// connections a minute from one address (the --update rule before the
// --set rule; iptables files often write the --set rule without -j,
// which xdpfw reads once rules without a target are supported).
var sshGuard = []string{
	"-P INPUT DROP",
	"-A INPUT -i lo -j ACCEPT",
	"-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
	"-A INPUT -p tcp --dport 22 -m conntrack --ctstate NEW -m recent --update --seconds 60 --hitcount 4 --name SSH --rsource -j DROP",
	"-A INPUT -p tcp --dport 22 -m conntrack --ctstate NEW -m recent --set --name SSH --rsource -j ACCEPT",
}

// TestRecentSSHGuard: four ssh connections from the client get through,
// the fifth is dropped (its SYNs and their retransmissions), another
// client address still gets in; iptables (where installed) does the same
// with the same rules; list prints the rules (in xdpfw's canonical order
// of matches, -m recent last).
func TestRecentSSHGuard(t *testing.T) {
	testutil.RequireRoot(t)
	run := func(t *testing.T, load func(l *link)) {
		l := newPair(t)
		serveTCP(t, l.srv, 22)
		load(l)
		addr := hostPort(l.srv4, 22)
		for i := range 4 {
			checkTCP(t, fmt.Sprintf("connection %d", i+1), tcpProbe{from: l.cli, addr: addr, ok: true})
		}
		checkTCP(t, "connection 5", tcpProbe{from: l.cli, addr: addr})
		if _, err := l.cli.Exec(t.Context(), "ip", "addr", "add", "10.200.0.3/24", "dev", l.cliIf); err != nil {
			t.Fatal(err)
		}
		checkTCP(t, "another address", tcpProbe{from: l.cli, local: "10.200.0.3", addr: addr, ok: true})
	}
	if _, err := exec.LookPath("iptables-nft-restore"); err == nil {
		t.Run("iptables", func(t *testing.T) {
			run(t, func(l *link) {
				mustRestore(t, l.srv, "iptables-nft", filterText(sshGuard))
			})
		})
	}
	t.Run("xdpfw", func(t *testing.T) {
		run(t, func(l *link) {
			f := newFW(t, l.srv)
			f.mustRun("load", "-i", l.srvIf, writeRules(t, "ssh.rules", sshGuard...))
			f.list().wantChain(t, "INPUT", "-A INPUT -i lo -j ACCEPT",
				"-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
				"-A INPUT -p tcp -m conntrack --ctstate NEW --dport 22 -m recent --update --seconds 60 --hitcount 4 --name SSH --rsource -j DROP",
				"-A INPUT -p tcp -m conntrack --ctstate NEW --dport 22 -m recent --set --name SSH --rsource -j ACCEPT")
		})
	})
}
