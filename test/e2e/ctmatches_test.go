package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/packet"
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

// TestCTConnless: -m conntrack and -m state on packets without a
// connection, against iptables (legacy and nf_tables) in the same
// namespace. The kernel's xt_conntrack judges such a packet (INVALID: an
// echo reply or a FIN for no connection; UNTRACKED: a raw-table NOTRACK)
// by a match's --ctstate alone, skipping its other options, and fails a
// match without --ctstate; several matches are each judged so (a pair
// whose state test passes only such packets beside a match without one,
// "--ctstate INVALID -m conntrack --ctstatus ASSURED", matches nothing:
// the parser refuses it, TestSeveralCTMatchesRefused). Three echo replies
// and two FINs (INVALID), four datagrams to a NOTRACK port.
func TestCTConnless(t *testing.T) {
	for _, c := range []string{"iptables-legacy-restore", "iptables-restore"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s is not installed: no oracle", c)
		}
	}
	l := newPair(t)
	const port = 7201
	icmp, tcp := "-A INPUT -p icmp ", "-A INPUT -p tcp -m tcp --dport 7202 "
	udp := fmt.Sprintf("-A INPUT -p udp -m udp --dport %d ", port)
	raw := []string{"*raw", ":PREROUTING ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]"}
	filter := []string{"*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]"}
	ruleText := strings.Join(slices.Concat(raw, []string{
		fmt.Sprintf("-A PREROUTING -p udp -m udp --dport %d -j NOTRACK", port),
		"COMMIT"}, filter, []string{
		icmp + "-m conntrack --ctstate INVALID,NEW --ctstatus ASSURED",
		icmp + "-m conntrack ! --ctstate NEW --ctproto 17",
		icmp + "-m conntrack --ctstate INVALID --ctdir REPLY",
		icmp + "-m conntrack --ctstate INVALID --ctorigsrc 10.9.9.9",
		icmp + "-m conntrack ! --ctstate NEW -m conntrack --ctstatus ASSURED",
		icmp + "-m conntrack ! --ctstatus ASSURED",
		icmp + "-m state --state INVALID -m conntrack --ctstate INVALID,ESTABLISHED --ctproto 6",
		tcp + "-m conntrack ! --ctstate ESTABLISHED --ctstatus SEEN_REPLY",
		tcp + "-m conntrack --ctproto 6",
		udp + "-m conntrack --ctstate UNTRACKED --ctstatus CONFIRMED",
		udp + "-m conntrack ! --ctstate NEW,ESTABLISHED ! --ctproto 17",
		udp + "-m state ! --state NEW -m conntrack --ctproto 17",
		udp + "-m conntrack --ctproto 17",
		udp + "-m state --state UNTRACKED -m conntrack ! --ctstate NEW --ctdir ORIGINAL",
		"COMMIT",
	}), "\n") + "\n"
	want := []uint64{3, 3, 3, 3, 0, 0, 3, 2, 0, 4, 4, 0, 0, 4}
	send := func() {
		var pkts []*packet.Packet
		for i := range 3 {
			pkts = append(pkts, &packet.Packet{Src: netip.MustParseAddr(l.cli4), Dst: netip.MustParseAddr(l.srv4),
				Proto: packet.ProtoICMP, ICMPType: 0, SPort: uint16(100 + i)})
		}
		for i := range 2 {
			pkts = append(pkts, &packet.Packet{Src: netip.MustParseAddr(l.cli4), Dst: netip.MustParseAddr(l.srv4),
				Proto: packet.ProtoTCP, SPort: uint16(45000 + i), DPort: 7202, TCPFlags: packet.TCPFin | packet.TCPAck})
		}
		sendCrafted(t, l, pkts...)
		sendUDP(t, l.cli, l.cliIf, l.srv4, port, 4)
	}
	// the legacy back end first; countsAsIptables then asks nf_tables
	mustRestore(t, l.srv, "iptables-legacy", ruleText)
	send()
	var got []uint64
	poll(t.Context(), arriveTimeout, func() bool {
		got = saveCounts(t, l.srv, "INPUT", "iptables-legacy-save", "-c")
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("iptables-legacy counts %v, want %v: the oracle disagrees with the test", got, want)
	}
	mustRestore(t, l.srv, "iptables-legacy", strings.Join(slices.Concat(raw, []string{"COMMIT"}, filter, []string{"COMMIT"}), "\n")+"\n")
	countsAsIptables(t, l, "ctnull.rules", ruleText, send, want)
}
