package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// deltaStatus is the "delta" of `xdpfw status --json`.
type deltaStatus struct {
	Delta struct {
		Pending bool `json:"pending"`
		Added   int  `json:"added"`
		Deleted int  `json:"deleted"`
		Entries int  `json:"entries"`
	} `json:"delta"`
	// the rules' worst case per packet (docs/realtime.md)
	Work *struct {
		Trees      int `json:"trees"`
		Levels     int `json:"levels"`
		Candidates int `json:"candidates"`
	} `json:"work"`
}

// TestSingleEditsOnLargeRuleSet makes single edits (add, insert, replace,
// delete) on 20,000 rules, through the delta stage with and without the
// rebuild after, and checks each with real traffic or a trace, that the
// rules are numbered as iptables would, and that the counters of the rules
// no edit touched carry over exactly, through every edit and rebuild. One
// step is the trap of the delta stage: deleting a rule that covered its
// whole tree region (so the rules behind it were pruned from the leaves)
// must hand its packets to the next matching rule at once.
func TestSingleEditsOnLargeRuleSet(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, 22, 8080)
	sink := newUDPSink(t, l.srv, 5001)
	udp := newUDPSender(t, l.cli, "")
	const (
		nUDP     = 3
		filler   = 20000
		udpOK    = "-A INPUT -p udp --dport 5001 -j ACCEPT"
		ssh      = "-A INPUT -p tcp --dport 22 -j ACCEPT"
		web      = "-A INPUT -p tcp --dport 8080 -j ACCEPT"
		sshDrop  = "-A INPUT -p tcp --dport 22 -j DROP"
		otherSSH = "-A INPUT -p tcp --dport 2222 -j DROP"
		udpDrop  = "-A INPUT -p udp -j DROP"
	)
	lines := []string{"-P INPUT DROP", "-A INPUT -p ipv6-icmp -j ACCEPT"}
	for i := 0; i < filler; i++ {
		lines = append(lines, fmt.Sprintf("-A INPUT -s 198.%d.%d.0/24 -p tcp --dport %d -j DROP", 18+i/50000, (i/200)%250, 1+i%200))
	}
	lines = append(lines, udpOK, ssh)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, "--max-rules", "32768", writeRules(t, "large.rules", lines...))
	tcp := func(port int, ok bool) tcpProbe { return tcpProbe{from: l.cli, addr: hostPort(l.srv4, port), ok: ok} }

	// The udp rule counts what each step sends it; the filler rules (the
	// first and the last checked) and ICMPv6 keep their ids.
	udp.send(t, hostPort(l.srv4, 5001), "loaded", 0, nUDP)
	if n := sink.wait(t, "loaded", nUDP); n != nUDP {
		t.Fatalf("%d datagrams reached udp 5001, want %d", n, nUDP)
	}
	before := f.list()
	untouched := []string{lines[1], lines[2], lines[len(lines)-3]}
	ids := map[string]uint32{}
	for _, text := range append(untouched, udpOK) {
		ids[text] = before.rule(t, text).ID
	}
	udpWant := uint64(nUDP)
	gen := before.Generation
	// carried checks the generation and that untouched rules kept their
	// ids (and the udp rule its exact count).
	carried := func(what string) *listing {
		t.Helper()
		list := f.list()
		if list.Generation != gen {
			t.Errorf("%s: generation %d, want %d", what, list.Generation, gen)
		}
		for _, text := range untouched {
			if r := list.rule(t, text); r.ID != ids[text] {
				t.Errorf("%s: rule %q has id %d, want %d (as loaded)", what, text, r.ID, ids[text])
			}
		}
		if r := list.rule(t, udpOK); r.ID != ids[udpOK] || r.Counters.Packets != udpWant {
			t.Errorf("%s: rule %q has id %d and %d packets, want id %d and %d", what, udpOK, r.ID, r.Counters.Packets, ids[udpOK], udpWant)
		}
		return list
	}
	// edit runs a single-edit command and checks it says how it got in
	// force: through the delta stage, then rebuilt or pending as asked;
	// or (full) rebuilt at once.
	edit := func(full bool, args ...string) {
		t.Helper()
		r := f.mustRun(args...)
		gen++
		want := []string{fmt.Sprintf("(generation %d)\nin force after ", gen), "through the delta stage", "; classifier rebuilt in "}
		switch {
		case full:
			want = []string{fmt.Sprintf("(generation %d)\nin force after ", gen), " ms (classifier rebuilt)\n"}
		case args[1] == "--no-rebuild":
			want[2] = "; rebuild pending"
		}
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("want %q in the output: %s", w, r)
			}
		}
	}
	pending := func(what string, want bool) {
		t.Helper()
		var s deltaStatus
		f.decode(&s, "status", "--json")
		if s.Delta.Pending != want {
			t.Errorf("%s: delta stage pending %v, want %v: %+v", what, s.Delta.Pending, want, s.Delta)
		}
		if w := s.Work; w == nil || w.Trees < 1 || w.Levels < 1 || w.Candidates < 1 {
			t.Errorf("%s: status's worst case per packet %+v: want it recorded", what, w)
		}
		if r := f.mustRun("status"); !strings.Contains(r.stdout, fmt.Sprintf("worst case per packet: %d trees, %d node steps, %d candidates",
			s.Work.Trees, s.Work.Levels, s.Work.Candidates)) || !strings.Contains(r.stdout, "the data plane's bound: 5 trees") {
			t.Errorf("%s: status does not show the worst case per packet: %s", what, r)
		}
	}
	n := filler + 3 // rules in INPUT

	// add (append), rebuilt at once
	checkTCP(t, "loaded", tcp(22, true), tcp(8080, false))
	edit(false, "add", "INPUT", "-p", "tcp", "--dport", "8080", "-j", "ACCEPT")
	n++
	checkTCP(t, "add", tcp(22, true), tcp(8080, true))
	if got := carried("add").chain("INPUT"); len(got) != n || got[n-1] != web {
		t.Fatalf("add: INPUT has %d rules ending %q, want %d ending %q", len(got), got[len(got)-1], n, web)
	}
	pending("add", false)

	// insert at 1, left in the delta stage: ssh is dropped at once
	edit(false, "insert", "--no-rebuild", "INPUT", "1", "-p", "tcp", "--dport", "22", "-j", "DROP")
	n++
	pending("insert --no-rebuild", true)
	checkTCP(t, "insert at 1 (delta stage)", tcp(22, false), tcp(8080, true))
	tr, _ := f.trace("-p", "tcp", "--src", l.cli4, "--dst", l.srv4, "--dport", "22")
	if len(tr) != 1 || tr[0].RuleNum != 1 || tr[0].Rule != sshDrop || tr[0].Verdict != "XDP_DROP" {
		t.Errorf("trace of ssh with the inserted rule in the delta stage: %+v, want rule 1 %q dropping", tr, sshDrop)
	}
	if list := carried("insert"); list.chain("INPUT")[0] != sshDrop || list.rule(t, sshDrop).Counters.Packets == 0 {
		t.Errorf("insert: rule 1 is %q with %d packets, want %q counting the dropped SYNs",
			list.chain("INPUT")[0], list.rule(t, sshDrop).Counters.Packets, sshDrop)
	}
	sshDropped := f.list().rule(t, sshDrop).Counters.Packets

	// rebuild folds it: nothing changes for packets, nor for counters
	if r := f.mustRun("rebuild"); !strings.HasPrefix(r.stdout, "rebuilt in ") {
		t.Errorf("rebuild: %s", r)
	}
	pending("rebuild", false)
	checkTCP(t, "rebuilt", tcp(22, false))
	if c := carried("rebuild").rule(t, sshDrop).Counters.Packets; c <= sshDropped {
		t.Errorf("the inserted rule counted %d packets before the rebuild and %d after more SYNs: its counter must continue", sshDropped, c)
	}
	if r := f.mustRun("rebuild"); !strings.HasPrefix(r.stdout, "nothing to rebuild") {
		t.Errorf("rebuild with nothing pending: %s", r)
	}

	// replace rule 1: ssh passes again. The replaced rule overlaps the 100
	// filler rules for port 22, which would take its packets: more copies
	// than the delta stage holds, so the edit is folded into a rebuild.
	edit(true, "replace", "INPUT", "1", "-p", "tcp", "--dport", "2222", "-j", "DROP")
	checkTCP(t, "replace", tcp(22, true), tcp(8080, true))
	if list := carried("replace"); list.chain("INPUT")[0] != otherSSH || len(list.chain("INPUT")) != n {
		t.Errorf("replace: INPUT starts %q with %d rules, want %q and %d", list.chain("INPUT")[0], len(list.chain("INPUT")), otherSSH, n)
	}

	// The trap: a rule covering all of udp ahead of the udp accept rule.
	// In the rebuilt trees the accept rule is pruned from the leaves
	// behind it; deleting it in the delta stage must hand the datagrams
	// to the accept rule at once.
	edit(false, "insert", "INPUT", "2", "-p", "udp", "-j", "DROP")
	n++
	udp.send(t, hostPort(l.srv4, 5001), "covered", 0, nUDP)
	var dropped uint64
	poll(t.Context(), arriveTimeout, func() bool {
		dropped = f.list().rule(t, udpDrop).Counters.Packets
		return dropped >= nUDP
	})
	if dropped != nUDP {
		t.Errorf("the covering udp rule counted %d datagrams, want %d", dropped, nUDP)
	}
	carried("covering rule") // the accept rule saw none of them
	edit(false, "delete", "--no-rebuild", "INPUT", "2")
	n--
	udp.send(t, hostPort(l.srv4, 5001), "uncovered", 0, nUDP)
	if got := sink.wait(t, "uncovered", nUDP); got != nUDP {
		t.Errorf("after deleting the covering rule (delta stage): %d datagrams reached udp 5001, want %d", got, nUDP)
	}
	udpWant += nUDP
	poll(t.Context(), arriveTimeout, func() bool { return f.list().rule(t, udpOK).Counters.Packets >= udpWant })
	carried("covering rule deleted")

	// delete by spec (rebuilds, folding the pending delete too)
	edit(false, "delete", "INPUT", "-p", "tcp", "--dport", "8080", "-j", "ACCEPT")
	n--
	pending("delete by spec", false)
	checkTCP(t, "delete by spec", tcp(22, true), tcp(8080, false))
	list := carried("delete by spec")
	if got := list.chain("INPUT"); len(got) != n || got[0] != otherSSH || got[len(got)-1] != ssh {
		t.Errorf("after the edits INPUT has %d rules from %q to %q, want %d from %q to %q", len(got), got[0], got[len(got)-1], n, otherSSH, ssh)
	}
}
