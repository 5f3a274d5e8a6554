package firewall

import (
	"errors"
	"strings"
	"testing"
)

// auditList is f's audit listing (fails the test on an error).
func (e *env) auditList(f *Firewall) *AuditListing {
	e.t.Helper()
	a, err := f.AuditList()
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// TestAuditLifecycle: audit start shows the candidate and counts with it
// while the rules in force decide; it goes on across apply; a candidate
// that fails leaves the audit before in place; promote enforces the
// candidate audited and ends the audit; stop ends it; load ends it.
func TestAuditLifecycle(t *testing.T) {
	e := newEnv(t)
	enforced := "-P INPUT DROP\n-A INPUT -p udp --dport 1 -j ACCEPT\n-A INPUT -p udp --dport 2 -j ACCEPT\n"
	cand := "-P INPUT DROP\n-A INPUT -p udp --dport 2 -j ACCEPT\n-A INPUT -p udp --dport 3 -j ACCEPT\n"
	if _, err := e.load(enforced); err != nil {
		t.Fatal(err)
	}
	f := e.open()
	defer func() { f.Close() }()
	if _, err := f.AuditList(); !errors.Is(err, ErrNoAudit) {
		t.Fatalf("AuditList before any audit: %v, want ErrNoAudit", err)
	}
	res, err := f.StartAudit(e.parse(cand), AuditOptions{File: "cand.rules"})
	if err != nil || res.Rules != 2 || res.Replaced {
		t.Fatalf("StartAudit: %+v %v", res, err)
	}
	for _, port := range []uint16{1, 2, 3, 3} {
		e.trace(f, port)
	}
	// the rules in force decided: udp/1 passed, udp/3 did not
	if _, pass := e.decides(f, 1); !pass {
		t.Errorf("udp/1 dropped while audited: the candidate was enforced")
	}
	if _, pass := e.decides(f, 3); pass {
		t.Errorf("udp/3 passed while audited: the candidate was enforced")
	}
	a := e.auditList(f)
	if a.File != "cand.rules" || len(a.Rules.Rules) != 2 || a.Rules.Rules[1].Rule != "-A INPUT -p udp --dport 3 -j ACCEPT" {
		t.Fatalf("audit list: %+v", a)
	}
	// udp/1 twice (trace and decides), 2 once, 3 three times
	if got := a.Rules.Rules[1].Counter.Packets; got != 3 {
		t.Errorf("the candidate's udp/3 rule counted %d packets, want 3", got)
	}
	// Seen also counts what the kernel sends on the test's link by itself
	// (IPv6 neighbour discovery, MLD), which both rule sets drop: at least
	// the probes, and exactly their differences.
	seen := a.Counters.Seen.Packets
	if seen < 6 || a.Counters.WouldAccept.Packets != 3 || a.Counters.WouldDrop.Packets != 2 {
		t.Errorf("audit counters %+v: want at least 6 seen, 3 would accept (udp/3), 2 would drop (udp/1)", a.Counters)
	}
	// the rules in force count as ever
	if l, err := f.List(); err != nil || l.Rules[0].Counter.Packets != 2 {
		t.Errorf("the rule in force for udp/1 counted %+v (%v), want 2", l.Rules[0].Counter, err)
	}

	// apply: the audit goes on, compared with the new rules in force
	if _, err := f.Apply(e.parse("-P INPUT DROP\n-A INPUT -p udp --dport 3 -j ACCEPT\n"), Options{}); err != nil {
		t.Fatal(err)
	}
	e.trace(f, 3)
	if a := e.auditList(f); a.Counters.Seen.Packets < seen+1 || a.Counters.WouldAccept.Packets != 3 || a.Counters.WouldDrop.Packets != 2 {
		t.Errorf("after apply: audit counters %+v, want at least %d seen and no new difference", a.Counters, seen+1)
	}

	// a candidate that does not compile: the audit before goes on
	if _, err := f.StartAudit(e.parse("-A OUTPUT -m recent --name x --rcheck -j DROP\n"), AuditOptions{File: "bad.rules"}); err == nil {
		t.Error("StartAudit of a candidate with -m recent in OUTPUT (refused by the compiler) succeeded")
	}
	if a := e.auditList(f); a.File != "cand.rules" {
		t.Errorf("after a failed start the audit is of %q, want cand.rules", a.File)
	}

	// promote: the candidate audited is in force, the audit is over
	if _, err := f.PromoteAudit(Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AuditList(); !errors.Is(err, ErrNoAudit) {
		t.Errorf("AuditList after promote: %v, want ErrNoAudit", err)
	}
	if on, err := f.dp.Auditing(); err != nil || on {
		t.Errorf("the audit stage is in the path after promote: %v %v", on, err)
	}
	if r, pass := e.decides(f, 2); r != "-A INPUT -p udp --dport 2 -j ACCEPT" || !pass {
		t.Errorf("udp/2 after promote: %q %v; want the candidate's rule", r, pass)
	}
	if _, pass := e.decides(f, 1); pass {
		t.Errorf("udp/1 passed after promote")
	}

	// stop
	if _, err := f.StartAudit(e.parse(enforced), AuditOptions{File: "old.rules"}); err != nil {
		t.Fatal(err)
	}
	if err := f.StopAudit(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AuditList(); !errors.Is(err, ErrNoAudit) {
		t.Errorf("AuditList after stop: %v, want ErrNoAudit", err)
	}

	// load replaces the program: the audit ends, and says so
	if _, err := f.StartAudit(e.parse(enforced), AuditOptions{File: "old.rules"}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	res2, err := e.load(cand)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(res2.Warnings, "\n"), "audit of old.rules stopped") {
		t.Errorf("load while auditing: warnings %q, want the audit's end", res2.Warnings)
	}
	f = e.open()
	if _, err := f.AuditList(); !errors.Is(err, ErrNoAudit) {
		t.Errorf("AuditList after load: %v, want ErrNoAudit", err)
	}
}
