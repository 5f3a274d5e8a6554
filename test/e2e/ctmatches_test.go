package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestSeveralCTMatches: rules of several -m conntrack and -m state matches
// (xdpfw keeps their intersection, one -m conntrack), with real datagrams,
// against iptables in the same namespace: each rule's counter must be
// iptables'. Three one-way UDP flows of four datagrams: each flow's first
// is NEW and not CONFIRMED, the rest NEW and CONFIRMED, none ESTABLISHED.
func TestSeveralCTMatches(t *testing.T) {
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		t.Skip("iptables-restore is not installed: no oracle")
	}
	l := newPair(t)
	const port = 7100
	sel := fmt.Sprintf("-A INPUT -p udp -m udp --dport %d ", port)
	ruleText := strings.Join([]string{
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		sel + "-m conntrack --ctstate NEW -m conntrack --ctstatus CONFIRMED",
		sel + "-m state --state NEW,ESTABLISHED -m conntrack --ctstate NEW,RELATED",
		sel + "-m conntrack ! --ctstate NEW -m state ! --state INVALID",
		sel + "-m conntrack --ctstate INVALID,NEW -m conntrack --ctdir ORIGINAL",
		sel + "-m conntrack ! --ctstatus CONFIRMED -m conntrack ! --ctstatus SEEN_REPLY",
		sel + "-m conntrack --ctproto 17 -m state ! --state INVALID,UNTRACKED",
		sel + "-m conntrack --ctstate NEW -m conntrack --ctstate NEW,SNAT",
		sel + "-m conntrack --ctstate ESTABLISHED -m conntrack --ctdir ORIGINAL",
		"COMMIT",
	}, "\n") + "\n"
	send := func() {
		for range 3 {
			sendUDP(t, l.cli, l.cliIf, l.srv4, port, 4)
		}
	}
	countsAsIptables(t, l, "ct.rules", ruleText, send, []uint64{9, 12, 0, 12, 3, 12, 12, 0})
}
