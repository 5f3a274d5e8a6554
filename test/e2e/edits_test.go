package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestRuntimeEdits changes the loaded rules one command at a time (add,
// add --position, delete by number, delete by spec, flush, policy) and
// after each checks the numbered rules `list --json` shows, the new
// behaviour with real traffic, and that the counter of a rule no command
// touched carries over exactly.
func TestRuntimeEdits(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, 22, 8080)
	sink := newUDPSink(t, l.srv, 5001)
	udp := newUDPSender(t, l.cli, "")

	const (
		udpOK      = "-A INPUT -p udp --dport 5001 -j ACCEPT"
		ssh        = "-A INPUT -p tcp --dport 22 -j ACCEPT"
		web        = "-A INPUT -p tcp --dport 8080 -j ACCEPT"
		webDropped = "-A INPUT -p tcp --dport 8080 -j DROP"
		nUDP       = 3
	)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "edit.rules", "-P INPUT DROP", udpOK, ssh))

	tcp := func(port int, ok bool) tcpProbe {
		return tcpProbe{from: l.cli, addr: hostPort(l.srv4, port), ok: ok}
	}
	gen := uint64(1)
	// step checks the generation and rules after a change and returns the listing.
	step := func(what string, rules ...string) *listing {
		t.Helper()
		list := f.list()
		if list.Generation != gen {
			t.Fatalf("%s: generation %d, want %d:\n%s", what, list.Generation, gen, list.raw)
		}
		list.wantChain(t, "INPUT", rules...)
		return list
	}
	// The udp rule counts the datagrams of the first step, and nothing
	// else reaches it: every later step must show exactly that count, under
	// the same counter id.
	var udpID uint32
	udpCarriedOver := func(what string, list *listing) {
		t.Helper()
		r := list.rule(t, udpOK)
		if r.Counters.Packets != nUDP || r.ID != udpID {
			t.Errorf("%s: rule %q has id %d and %d packets, want id %d and the %d datagrams sent (counters carry over):\n%s",
				what, udpOK, r.ID, r.Counters.Packets, udpID, nUDP, list.raw)
		}
	}
	// run runs an editing command, checks its output and moves the
	// generation on. Single-rule edits say what they did, then how they
	// got in force (the delta stage, then the rebuild).
	run := func(wantOut string, args ...string) {
		t.Helper()
		r := f.mustRun(args...)
		gen++
		want := fmt.Sprintf(wantOut, gen)
		if single := args[0] == "add" || args[0] == "delete"; single {
			if !strings.HasPrefix(r.stdout, want) || !deltaLine.MatchString(strings.TrimPrefix(r.stdout, want)) {
				t.Errorf("stdout, want %q and a line matching %s: %s", want, deltaLine, r)
			}
		} else if r.stdout != want {
			t.Errorf("stdout, want %q: %s", want, r)
		}
	}

	// loaded: udp 5001 and ssh accepted, the rest dropped
	udp.send(t, hostPort(l.srv4, 5001), "loaded", 0, nUDP)
	if n := sink.wait(t, "loaded", nUDP); n != nUDP {
		t.Fatalf("%d datagrams reached udp 5001, want %d", n, nUDP)
	}
	list := step("load", udpOK, ssh)
	udpID = list.rule(t, udpOK).ID
	udpCarriedOver("load", list)
	checkTCP(t, "loaded", tcp(22, true), tcp(8080, false))

	run("added: "+web+" (generation %d)\n", "add", "INPUT", "-p", "tcp", "--dport", "8080", "-j", "ACCEPT")
	udpCarriedOver("add", step("add", udpOK, ssh, web))
	checkTCP(t, "add (append)", tcp(22, true), tcp(8080, true))

	run("added: "+webDropped+" (generation %d)\n", "add", "--position", "1", "INPUT", "-p", "tcp", "--dport", "8080", "-j", "DROP")
	udpCarriedOver("add --position 1", step("add --position 1", webDropped, udpOK, ssh, web))
	checkTCP(t, "add --position 1", tcp(22, true), tcp(8080, false))
	if n := f.list().rule(t, webDropped).Counters.Packets; n < 1 {
		t.Errorf("rule %q counted %d packets, want the dropped SYNs", webDropped, n)
	}

	run("deleted: "+webDropped+" (generation %d)\n", "delete", "INPUT", "1")
	udpCarriedOver("delete INPUT 1", step("delete INPUT 1", udpOK, ssh, web))
	checkTCP(t, "delete INPUT 1", tcp(22, true), tcp(8080, true))

	run("deleted: "+ssh+" (generation %d)\n", "delete", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT")
	udpCarriedOver("delete by spec", step("delete by spec", udpOK, web))
	checkTCP(t, "delete by spec", tcp(22, false), tcp(8080, true))

	// Deleting what is not there changes nothing.
	if r := f.run("delete", "INPUT", "5"); r.code != 1 || !strings.Contains(r.stderr, "no rule 5") {
		t.Errorf("delete INPUT 5: want exit status 1 saying there is no rule 5: %s", r)
	}
	if r := f.run("delete", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT"); r.code != 1 || !strings.Contains(r.stderr, "no such rule") {
		t.Errorf("deleting a deleted rule: want exit status 1 saying no such rule: %s", r)
	}
	udpCarriedOver("failed deletes", step("failed deletes", udpOK, web))

	run("flushed; generation %d: 0 rules in force\n", "flush", "INPUT")
	list = step("flush INPUT")
	list.wantPolicy(t, "INPUT", "DROP")
	checkTCP(t, "flush INPUT", tcp(22, false), tcp(8080, false))
	// The datagrams are dropped by the policy: its counter moves by
	// exactly their number (the TCP probes are over), and none arrives.
	dropped := f.list().policy(t, "INPUT", "ipv4").Counters.Packets
	udp.send(t, hostPort(l.srv4, 5001), "flushed", 0, nUDP)
	var now uint64
	poll(t.Context(), arriveTimeout, func() bool {
		now = f.list().policy(t, "INPUT", "ipv4").Counters.Packets
		return now >= dropped+nUDP
	})
	if now != dropped+nUDP {
		t.Errorf("flush INPUT: the ipv4 policy counted %d packets for the %d datagrams sent", now-dropped, nUDP)
	}
	sink.sync(t)
	if n := sink.count("flushed"); n != 0 {
		t.Errorf("flush INPUT: %d datagrams reached udp 5001, want none", n)
	}

	run("policy INPUT ACCEPT (any); generation %d\n", "policy", "INPUT", "ACCEPT")
	step("policy INPUT ACCEPT").wantPolicy(t, "INPUT", "ACCEPT")
	checkTCP(t, "policy ACCEPT", tcp(22, true), tcp(8080, true),
		tcpProbe{from: l.cli, addr: hostPort(l.srv6, 22), ok: true})
	udp.send(t, hostPort(l.srv4, 5001), "accepted", 0, nUDP)
	if n := sink.wait(t, "accepted", nUDP); n != nUDP {
		t.Errorf("policy ACCEPT: %d datagrams reached udp 5001, want %d", n, nUDP)
	}
}

// deltaLine is what a single edit prints once in force and rebuilt.
var deltaLine = regexp.MustCompile(`^in force after [0-9.]+ ms through the delta stage \(\d+ of 32 entries, \d+ of 32 deleted rules\); classifier rebuilt in [0-9.]+ ms\n$`)
