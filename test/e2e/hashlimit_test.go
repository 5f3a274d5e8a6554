package e2e

import (
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// hashLimitOracle is a rule set whose -m hashlimit rules iptables decides
// as xdpfw must: buckets per source (upto and above, the forms of
// hardened-host.v4 and tor-relay.v4), per source /24 and destination port
// in a table two rules share, and one bucket for all (no mode). Rates of
// 2 an hour: no token comes back while the test runs.
var hashLimitOracle = []string{
	"-P INPUT DROP",
	"-A INPUT -i lo -j ACCEPT", // the sink's sync markers (iptables sees loopback; XDP does not)
	"-A INPUT -p udp --dport 5353 -m hashlimit --hashlimit-upto 2/hour --hashlimit-burst 3 --hashlimit-mode srcip --hashlimit-name a -j ACCEPT",
	"-A INPUT -p udp --dport 5354 -m hashlimit --hashlimit-above 2/hour --hashlimit-burst 4 --hashlimit-mode srcip --hashlimit-name b --hashlimit-htable-expire 60000 -j DROP",
	"-A INPUT -p udp --dport 5354 -j ACCEPT",
	"-A INPUT -p udp --dport 5355 -m hashlimit --hashlimit-upto 2/hour --hashlimit-burst 2 --hashlimit-mode srcip,dstport --hashlimit-name c --hashlimit-srcmask 24 -j ACCEPT",
	"-A INPUT -p udp --dport 5356 -m hashlimit --hashlimit-upto 2/hour --hashlimit-burst 2 --hashlimit-mode srcip,dstport --hashlimit-name c --hashlimit-srcmask 24 -j ACCEPT",
	"-A INPUT -p udp -m hashlimit --hashlimit-upto 2/hour --hashlimit-burst 5 --hashlimit-name d -j ACCEPT",
}

// TestHashLimitAgreesWithIptables: ten datagrams to each of four ports
// from each of two client addresses, through the kernel's iptables and
// through xdpfw: every rule and the policy count the same packets. Per
// source: 3 accepted by the upto rule, 4 let on by the above rule (and
// accepted after it), 6 dropped by it; per /24 and port 2 accepted; the
// table without a mode accepts 5 of everything left.
func TestHashLimitAgreesWithIptables(t *testing.T) {
	testutil.RequireRoot(t)
	send := func(l *link) {
		second := strings.TrimSuffix(l.cli4, ".2") + ".3"
		if _, err := l.cli.Exec(t.Context(), "ip", "addr", "add", second+"/24", "dev", l.cliIf); err != nil {
			t.Fatal(err)
		}
		for _, from := range []string{l.cli4, second} {
			snd := newUDPSender(t, l.cli, from)
			for _, port := range []int{5353, 5354, 5355, 5356} {
				snd.send(t, hostPort(l.srv4, port), "x", 0, 10)
			}
		}
	}
	compareCounts(t, hashLimitOracle, send, "[6 12 8 2 2 5 45]")
}
