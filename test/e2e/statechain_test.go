package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// stateChainsOracle is a small rule set after ufw's and OpenWrt fw3's own
// files, where -m limit and -m recent sit on rules that decide nothing
// themselves: OpenWrt's syn_flood (a -m limit RETURN, then DROP), ufw's
// logging-deny (a -m limit jump to a chain with a -m limit RETURN) and
// ufw's ssh limit (a -m recent --set counting rule, then --update jumping
// to a chain that drops). Rates of 2 an hour: no token comes back while
// the test runs.
var stateChainsOracle = []string{
	":INPUT DROP [0:0]",
	":flood - [0:0]",
	":logging-deny - [0:0]",
	":user-input - [0:0]",
	":user-limit - [0:0]",
	"-A INPUT -i lo -j ACCEPT", // the sink's sync markers (iptables sees loopback; XDP does not)
	"-A INPUT -p udp --dport 5353 -j flood",
	"-A INPUT -p udp -m limit --limit 2/hour --limit-burst 6 -j logging-deny",
	"-A INPUT -p udp -j user-input",
	"-A flood -p udp -m limit --limit 2/hour --limit-burst 4 -j RETURN",
	"-A flood -j DROP",
	"-A logging-deny -p udp --dport 5354 -m limit --limit 2/hour --limit-burst 1 -j RETURN",
	"-A logging-deny -p udp --dport 5354 -j DROP",
	"-A user-input -p udp --dport 5355 -m recent --set --name DEFAULT --mask 255.255.255.255 --rsource",
	"-A user-input -p udp --dport 5355 -m recent --update --seconds 60 --hitcount 3 --name DEFAULT --mask 255.255.255.255 --rsource -j user-limit",
	"-A user-input -p udp -j ACCEPT",
	"-A user-limit -j DROP",
}

// stateChainsCounted are the chains compared, and the rules each has
// before the first compared one (INPUT's -i lo rule: xdpfw never sees lo).
var stateChainsCounted = []struct {
	name string
	skip int
}{{"INPUT", 1}, {"flood", 0}, {"logging-deny", 0}, {"user-input", 0}, {"user-limit", 0}}

// TestStateOnChainsAgreeWithIptables: the same rules and the same
// datagrams (10 to each of four ports, in turn) through the kernel's
// iptables (legacy and nf_tables back ends, where installed) and through
// xdpfw give every rule of every chain, and the policy, the same packet
// counts: tokens are taken when a packet reaches a -m limit rule that
// decides nothing and its other matches pass, -m recent records and looks
// up in rule order, RETURN and jumps follow the bucket and the list.
func TestStateOnChainsAgreeWithIptables(t *testing.T) {
	testutil.RequireRoot(t)
	send := func(l *link) {
		snd := newUDPSender(t, l.cli, "")
		for _, port := range []int{5353, 5354, 5355, 5356} {
			snd.send(t, hostPort(l.srv4, port), "x", 0, 10)
		}
	}
	want := map[string]string{}
	for _, bin := range []string{"iptables-legacy", "iptables-nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Logf("%s not installed: skipped", bin)
			continue
		}
		l := newPair(t)
		sink := newUDPSink(t, l.srv, 5353)
		ctx := t.Context()
		mustRestore(t, l.srv, bin, filterText(stateChainsOracle))
		send(l)
		sink.sync(t)
		out, err := l.srv.Exec(ctx, bin+"-save", "-c", "-t", "filter")
		if err != nil {
			t.Fatalf("%s-save: %v\n%s", bin, err, out)
		}
		rs, pol := parseSave(t, string(out))
		var got []string
		for _, c := range stateChainsCounted {
			var n []uint64
			for _, x := range rs[c.name][c.skip:] {
				n = append(n, x.pkts)
			}
			got = append(got, fmt.Sprintf("%s %v", c.name, n))
		}
		want[bin] = strings.Join(got, "; ") + fmt.Sprintf("; policy %d", pol["INPUT"].pkts)
	}
	l := newPair(t)
	sink := newUDPSink(t, l.srv, 5353)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "state-chains.rules", stateChainsOracle...))
	send(l)
	sink.sync(t)
	lst := f.list()
	var got []string
	for _, c := range stateChainsCounted {
		var n []uint64
		for _, r := range lst.Rules {
			if r.Chain == c.name && r.Num > c.skip {
				n = append(n, r.Counters.Packets)
			}
		}
		got = append(got, fmt.Sprintf("%s %v", c.name, n))
	}
	gotS := strings.Join(got, "; ") + fmt.Sprintf("; policy %d", lst.policy(t, "INPUT", "ipv4").Counters.Packets)
	// 5353: 4 back from flood, 6 dropped there; the 4 take logging-deny's
	// INPUT tokens, so 5354's first 2 reach it: 1 back, 1 dropped; 5355:
	// the third datagram from the address is its third in the list.
	const expect = "INPUT [10 6 33]; flood [4 6]; logging-deny [1 1]; user-input [10 8 25]; user-limit [8]; policy 0"
	if gotS != expect {
		t.Errorf("xdpfw counted\n  %s\nwant\n  %s", gotS, expect)
	}
	for bin, w := range want {
		if w != gotS {
			t.Errorf("%s counted\n  %s\nxdpfw\n  %s", bin, w, gotS)
		}
	}
}
