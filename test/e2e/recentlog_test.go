package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRecentLogRuleAgainstIptables: LOG rules with -m recent and
// -m hashlimit, as the port-scan guides write them (a probe of a trap port
// is logged and listed, then every packet of the listed address is logged
// and dropped) and a rate-limited log per source, loaded into iptables and
// then into xdpfw on the same namespace for the same datagrams: each
// rule's counter must be iptables'. The lists and buckets act when the
// packet reaches the rule, in rule order: a LOG rule that tests a list
// logs only what the list passes.
func TestRecentLogRuleAgainstIptables(t *testing.T) {
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		t.Skip("iptables-restore is not installed: no oracle")
	}
	l := newPair(t)
	ruleText := strings.Join([]string{
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		`-A INPUT -p udp -m recent --rcheck --seconds 86400 --name portscan --mask 255.255.255.255 --rsource -j LOG --log-prefix "banned:"`,
		"-A INPUT -p udp -m recent --rcheck --seconds 86400 --name portscan --mask 255.255.255.255 --rsource -j DROP",
		"-A INPUT -p udp -m recent --remove --name portscan --mask 255.255.255.255 --rsource",
		`-A INPUT -p udp -m udp --dport 7139 -m recent --set --name portscan --mask 255.255.255.255 --rsource -j LOG --log-prefix "portscan:"`,
		"-A INPUT -p udp -m udp --dport 7139 -m recent --set --name portscan --mask 255.255.255.255 --rsource -j DROP",
		`-A INPUT -p udp -m udp --dport 7001 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name lograte -j LOG --log-prefix "rate:"`,
		"-A INPUT -p udp -m udp --dport 7001 -j ACCEPT",
		"-A INPUT -p udp -m udp --dport 7000 -j ACCEPT",
		"COMMIT",
	}, "\n") + "\n"
	send := func() {
		sendUDP(t, l.cli, l.cliIf, l.srv4, 7001, 5) // two logged by their bucket, all accepted
		sendUDP(t, l.cli, l.cliIf, l.srv4, 7000, 2) // not listed: accepted
		sendUDP(t, l.cli, l.cliIf, l.srv4, 7139, 1) // the trap: logged, listed, dropped
		sendUDP(t, l.cli, l.cliIf, l.srv4, 7000, 3) // listed now: logged and dropped
	}
	countsAsIptables(t, l, "recentlog.rules", ruleText, send, []uint64{3, 3, 0, 1, 1, 2, 5, 2})
}
