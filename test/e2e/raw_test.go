package e2e

import (
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestRawNotrack: real traffic through a raw table. Datagrams to a port a
// NOTRACK rule names are UNTRACKED (a --ctstate UNTRACKED rule lets them
// in; conntrack records none of them), those to another port are tracked
// (NEW, recorded). The raw table survives an edit and a policy change (it
// is kept in the state), and once a file without it is applied the same
// datagrams are NEW and the UNTRACKED rule no longer matches them.
func TestRawNotrack(t *testing.T) {
	testutil.RequireRoot(t)
	const raw, tracked = 5053, 5054
	l := newPair(t)
	sinkRaw, sinkTracked := newUDPSink(t, l.srv, raw), newUDPSink(t, l.srv, tracked)
	filter := []string{
		"*filter",
		":INPUT DROP [0:0]",
		"-A INPUT -p udp -m conntrack --ctstate UNTRACKED --dport 5053 -j ACCEPT",
		"-A INPUT -p udp -m conntrack --ctstate NEW --dport 5054 -j ACCEPT",
		"COMMIT",
	}
	withRaw := writeRules(t, "raw.rules", append([]string{"*raw", ":PREROUTING ACCEPT [0:0]",
		"-A PREROUTING -p udp -m udp --dport 5053 -j NOTRACK", "COMMIT"}, filter...)...)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, withRaw)
	sender := newUDPSender(t, l.cli, "")
	// ARP first: the sink on the tracked port answers nothing, but the
	// first datagram resolves the neighbour
	sender.send(t, hostPort(l.srv4, tracked), "warm", 0, 1)
	sinkTracked.wait(t, "warm", 1)

	send := func(tag string) (gotRaw, gotTracked int) {
		t.Helper()
		sender.send(t, hostPort(l.srv4, raw), tag, 0, 5)
		sender.send(t, hostPort(l.srv4, tracked), tag, 0, 5)
		sinkTracked.wait(t, tag, 5)
		sinkRaw.sync(t)
		return sinkRaw.count(tag), sinkTracked.count(tag)
	}
	if r, k := send("a"); r != 5 || k != 5 {
		t.Fatalf("with the raw table: %d of 5 untracked datagrams, %d of 5 tracked ones arrived", r, k)
	}
	conns := f.mustRun("conntrack", "list").stdout
	if !strings.Contains(conns, ":5054") || strings.Contains(conns, ":5053") {
		t.Errorf("conntrack list: want the tracked flow only:\n%s", conns)
	}
	lst := f.mustRun("list").stdout
	if !strings.Contains(lst, "Table raw") || !strings.Contains(lst, "-t raw -A PREROUTING -p udp --dport 5053 -j NOTRACK") {
		t.Errorf("list does not show the raw table:\n%s", lst)
	}
	if n := f.ruleCounter(t, "-A INPUT -p udp -m conntrack --ctstate UNTRACKED --dport 5053 -j ACCEPT"); n != 5 {
		t.Errorf("the UNTRACKED rule counted %d packets, want 5", n)
	}

	// an edit (the delta stage) and a policy change keep the raw table
	f.mustRun("add", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT")
	f.mustRun("policy", "FORWARD", "DROP")
	if r, k := send("b"); r != 5 || k != 5 {
		t.Errorf("after an edit: %d and %d of 5 arrived", r, k)
	}
	if lst := f.mustRun("list").stdout; !strings.Contains(lst, "-j NOTRACK") {
		t.Errorf("list after an edit lost the raw table:\n%s", lst)
	}

	// without the raw table the datagrams are NEW: the UNTRACKED rule
	// does not take them, the policy drops them (and conntrack records
	// only what is accepted)
	f.mustRun("apply", writeRules(t, "filter.rules", filter...))
	if r, k := send("c"); r != 0 || k != 5 {
		t.Errorf("without the raw table: %d of 5 datagrams to the NOTRACK port arrived (want 0), %d of 5 tracked ones", r, k)
	}
}
