package e2e

import (
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
