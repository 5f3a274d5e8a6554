package datapath_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/internal/telemetry"
)

// xdpCtx is struct xdp_md, BPF_PROG_TEST_RUN's context.
type xdpCtx struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// live runs frame through the live XDP program (not a trace instance: the
// audit stage is in its path only), arriving on iface; returns the XDP
// action.
func (f *fixture) live(frame []byte, iface string) uint32 {
	f.t.Helper()
	var ret uint32
	err := f.ns.Do(func() error {
		var err error
		ret, err = f.dp.Program().Run(&ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256),
			Context: xdpCtx{DataEnd: uint32(len(frame)), IngressIfindex: f.ifaces[iface]}})
		return err
	})
	if err != nil {
		f.t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return ret
}

func mustParse(t *testing.T, text string) *rules.RuleSet {
	t.Helper()
	rs, err := rules.Parse("test.rules", []byte(text), rules.ParseOptions{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return rs
}

const auditEnforced = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp --dport 53 -j ACCEPT
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -s 10.0.0.0/8 -p tcp --dport 80 -j ACCEPT
-A INPUT -p tcp -j LOG --log-prefix "enforced "
COMMIT
`

// The candidate: a counting rule, a -m limit rule, a user chain with
// RETURN (guarded entries), a LOG rule; verdicts differ from the enforced
// set's for ports 22 (past the limit's burst), 80 and 443.
const auditCandidate = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:web - [0:0]
-A INPUT -p udp --dport 53
-A INPUT -p udp --dport 53 -j ACCEPT
-A INPUT -p tcp --dport 22 -m limit --limit 1/hour --limit-burst 3 -j ACCEPT
-A INPUT -p tcp --dport 80 -j web
-A INPUT -p tcp -j LOG --log-prefix "candidate "
-A INPUT -p tcp --dport 443 -j ACCEPT
-A web -s 10.1.0.0/16 -j RETURN
-A web -j ACCEPT
COMMIT
`

// auditFrames are the test's packets: every source, protocol and port
// twice, so that the -m limit rule runs out of tokens.
func auditFrames() [][]byte {
	var out [][]byte
	for round := 0; round < 2; round++ {
		for _, src := range []string{"10.1.2.3", "10.2.0.1", "192.0.2.7"} {
			for _, pp := range []struct {
				proto uint8
				port  uint16
			}{{17, 53}, {17, 54}, {6, 22}, {6, 80}, {6, 443}, {6, 8080}} {
				out = append(out, v4pkt(pp.proto, src, "10.9.9.9", 40000, pp.port).Bytes())
			}
		}
	}
	return out
}

// TestAuditCountsReportsNeverEnforces: a candidate audited beside the
// enforced rule set counts per rule what the same rule set counts when
// loaded for real, reports each packet whose verdict would differ, and
// changes no verdict nor any enforced counter; stop takes it out.
func TestAuditCountsReportsNeverEnforces(t *testing.T) {
	frames := auditFrames()
	cand := mustParse(t, auditCandidate)

	// The candidate enforced, for reference.
	real := newFixture(t)
	real.install(cand)
	want := make([]uint32, len(frames))
	for i, fr := range frames {
		want[i] = real.live(fr, "eth0")
	}
	_, candIDs := real.compileFor(cand)
	candIDs = append(candIDs, compile.PolicyID(uint8(rules.ChainInput), false))
	wantCtr, err := real.dp.RuleCounters(candIDs)
	if err != nil {
		t.Fatal(err)
	}

	f := newFixture(t)
	f.installText(auditEnforced)
	enfIDs := append(append([]uint32{}, f.ids...), compile.PolicyID(uint8(rules.ChainInput), false))
	before := make([]uint32, len(frames))
	for i, fr := range frames {
		before[i] = f.live(fr, "eth0")
	}
	enfBefore, err := f.dp.RuleCounters(enfIDs)
	if err != nil {
		t.Fatal(err)
	}
	f.events() // the enforced LOG rule's, so far

	tables, _ := f.compileFor(cand)
	a, err := f.dp.StartAudit(tables, compile.DefaultLogSnap, time.Millisecond, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if on, err := f.dp.Auditing(); err != nil || !on {
		t.Fatalf("Auditing() = %v, %v after StartAudit", on, err)
	}
	var wouldDrop, wouldAccept uint64
	for i, fr := range frames {
		got := f.live(fr, "eth0")
		if got != before[i] {
			t.Errorf("frame %d: XDP action %d while audited, %d before: the audit changed a verdict", i, got, before[i])
		}
		switch {
		case before[i] == datapath.XDPPass && want[i] != datapath.XDPPass:
			wouldDrop++
		case before[i] != datapath.XDPPass && want[i] == datapath.XDPPass:
			wouldAccept++
		}
	}
	if wouldDrop == 0 || wouldAccept == 0 {
		t.Fatalf("the test's rule sets should differ both ways: would drop %d, would accept %d", wouldDrop, wouldAccept)
	}

	// The candidate's counters are the real load's.
	gotCtr, err := a.RuleCounters(candIDs)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range candIDs {
		if gotCtr[i].Packets != wantCtr[i].Packets || gotCtr[i].Bytes != wantCtr[i].Bytes {
			t.Errorf("candidate rule id %d: audit counted %d packets / %d bytes, loaded for real %d / %d",
				id, gotCtr[i].Packets, gotCtr[i].Bytes, wantCtr[i].Packets, wantCtr[i].Bytes)
		}
	}
	// The enforced counters counted as without the audit: twice now.
	enfAfter, err := f.dp.RuleCounters(enfIDs)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range enfIDs {
		if enfAfter[i].Packets != 2*enfBefore[i].Packets {
			t.Errorf("enforced rule id %d: %d packets after the audited round, %d before it", id, enfAfter[i].Packets, enfBefore[i].Packets)
		}
	}
	ac, err := a.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if ac.Seen.Packets != uint64(len(frames)) || ac.WouldDrop.Packets != wouldDrop || ac.WouldAccept.Packets != wouldAccept {
		t.Errorf("audit counters: seen %d, would drop %d, would accept %d; want %d, %d, %d",
			ac.Seen.Packets, ac.WouldDrop.Packets, ac.WouldAccept.Packets, len(frames), wouldDrop, wouldAccept)
	}

	// One event per differing verdict, saying what the candidate would do;
	// the enforced LOG rule's events are there too, the candidate's not.
	var audits, enforcedLogs int
	for _, e := range f.events() {
		if !e.Audit {
			if e.RuleID == f.ids[3] {
				enforcedLogs++
			} else {
				t.Errorf("an event of rule id %d, not an audit event nor the enforced LOG rule's: %+v", e.RuleID, e)
			}
			continue
		}
		audits++
		if (e.Action == compile.ActAccept) == (e.VerdictID >= compile.FirstRuleID && e.VerdictID <= f.ids[2]) {
			t.Errorf("audit event: candidate action %v by rule id %d, enforced rule id %d: the verdicts agree", e.Action, e.RuleID, e.VerdictID)
		}
	}
	if audits != int(wouldDrop+wouldAccept) {
		t.Errorf("%d audit events, want %d (one per differing verdict)", audits, wouldDrop+wouldAccept)
	}
	if enforcedLogs == 0 {
		t.Errorf("the enforced LOG rule logged nothing while audited")
	}

	// Stop: out of the path, verdicts unchanged, the audit counts no more.
	if err := f.dp.StopAudit(); err != nil {
		t.Fatal(err)
	}
	if on, err := f.dp.Auditing(); err != nil || on {
		t.Fatalf("Auditing() = %v, %v after StopAudit", on, err)
	}
	if b, err := f.dp.OpenAudit(); err != nil || b != nil {
		t.Fatalf("OpenAudit() = %v, %v after StopAudit", b, err)
	}
	for i, fr := range frames {
		if got := f.live(fr, "eth0"); got != before[i] {
			t.Errorf("frame %d: XDP action %d after stop, %d before", i, got, before[i])
		}
	}
	if ac2, err := a.Counters(); err != nil || ac2.Seen.Packets != ac.Seen.Packets {
		t.Errorf("the stopped audit still counts: seen %d, was %d (%v)", ac2.Seen.Packets, ac.Seen.Packets, err)
	}
}

// TestAuditFailedStartChangesNothing: a candidate that does not fit is
// refused, and the live program runs as before, with no audit.
func TestAuditFailedStartChangesNothing(t *testing.T) {
	f := newFixtureLimits(t, datapath.LimitsFor(64))
	f.installText(auditEnforced)
	frames := auditFrames()
	before := make([]uint32, len(frames))
	for i, fr := range frames {
		before[i] = f.live(fr, "eth0")
	}
	text := "*filter\n:INPUT DROP [0:0]\n"
	for i := 0; i < 100; i++ {
		text += fmt.Sprintf("-A INPUT -s 10.0.%d.0/24 -j ACCEPT\n", i)
	}
	rs := mustParse(t, text+"COMMIT\n")
	tables, _, err := compile.Compile(compile.Input{RuleSet: rs, IDs: make([]uint32, len(rs.Rules)), Ifaces: f.ifaces,
		MaxEntries: 1 << 20, MaxNodes: 1 << 20, MaxLeafSlots: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := f.dp.StartAudit(tables, compile.DefaultLogSnap, time.Second, 10); err == nil {
		a.Close()
		t.Fatal("StartAudit of a candidate over the table sizes succeeded")
	}
	if on, err := f.dp.Auditing(); err != nil || on {
		t.Fatalf("Auditing() = %v, %v after a failed start", on, err)
	}
	for i, fr := range frames {
		if got := f.live(fr, "eth0"); got != before[i] {
			t.Errorf("frame %d: XDP action %d after a failed start, %d before", i, got, before[i])
		}
	}
}

// TestAuditDifferential: random enforced and candidate rule sets, random
// packets through the live program with the candidate audited; against
// the reference matcher on each rule set: every XDP action is the
// enforced set's, the audit sees every packet, reports exactly the
// packets whose verdicts differ (accepted by one, refused by the other)
// naming both deciding rules, and counts per candidate rule what the
// candidate decides.
func TestAuditDifferential(t *testing.T) {
	f := newFixture(t)
	f.unlimitedRejects()
	f.setUnlimitedLogs()
	r := rand.New(rand.NewPCG(*diffSeed, 0x61756469))
	knobs := rules.RandomKnobs{NoCTState: true, NoCTOptions: true} // no conntrack: every packet NEW to both
	names := []string{"lo", "eth0", "eth1", "veth0"}
	packets, differ := 0, 0
	var a *datapath.Audit
	for set := 0; set < max(*diffSets/10, 5); set++ {
		what := fmt.Sprintf("seed %d audit set %d", *diffSeed, set)
		enf := rules.RandomRuleSetWith(r, 1+r.IntN(30), knobs)
		cand := rules.RandomRuleSetWith(r, 1+r.IntN(30), knobs)
		enf.Raw, cand.Raw = nil, nil // the candidate's raw table is not audited (docs/audit.md)
		enf = unlimitedLogs(enf)
		f.install(enf)
		tables, candIDs := f.compileFor(cand)
		// one audit instance, each candidate installed into it in turn
		// (as the rules in force are: a new generation)
		var err error
		if a == nil {
			if a, err = f.dp.StartAudit(tables, compile.DefaultLogSnap, time.Nanosecond, 1<<30); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			defer a.Close()
		} else if err := a.Install(tables); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		f.events()
		seen0, err := a.Counters()
		if err != nil {
			t.Fatal(err)
		}
		allIDs := append([]uint32{}, candIDs...)
		for c := uint8(0); c < 3; c++ {
			allIDs = append(allIDs, compile.PolicyID(c, false), compile.PolicyID(c, true))
		}
		before, err := a.RuleCounters(allIDs)
		if err != nil {
			t.Fatal(err)
		}
		ctr0 := map[uint32]uint64{}
		for i, id := range allIDs {
			ctr0[id] = before[i].Packets
		}
		wantCtr := map[uint32]uint64{}
		for i := 0; i < 40; i++ {
			src := enf
			if i%2 == 1 {
				src = cand
			}
			p, iface := genPacket(r, src, names)
			if p.FragOffset != 0 { // a later fragment takes its datagram's verdict: not audited
				continue
			}
			frame := p.Bytes()
			ref := compile.RefPacketOf(p, iface)
			dEnf, dCand := compile.DecideAt(enf, ref, nil), compile.DecideAt(cand, ref, nil)
			enfID, candID := refRuleID(dEnf, ref, f.ids), refRuleID(dCand, ref, candIDs)
			got := f.live(frame, iface)
			if want := wantXDP(dEnf); got != want {
				t.Fatalf("%s: packet %s (in %s): XDP action %d, the enforced set's is %d: the audit changed a verdict\nenforced:\n%s\ncandidate:\n%s",
					what, p, iface, got, want, enf, cand)
			}
			packets++
			wantCtr[candID]++
			var audits []telemetry.Event
			for _, e := range f.events() {
				if e.Audit {
					audits = append(audits, e)
				}
			}
			differs := (dEnf.Verdict == rules.VerdictAccept) != (dCand.Verdict == rules.VerdictAccept)
			if differs {
				differ++
			}
			switch {
			case differs && len(audits) != 1:
				t.Fatalf("%s: packet %s: verdicts %s (enforced) and %s (candidate) differ, %d audit events\nenforced:\n%s\ncandidate:\n%s",
					what, p, dEnf.Verdict, dCand.Verdict, len(audits), enf, cand)
			case !differs && len(audits) != 0:
				t.Fatalf("%s: packet %s: verdicts %s and %s agree, audit event %+v\nenforced:\n%s\ncandidate:\n%s",
					what, p, dEnf.Verdict, dCand.Verdict, audits[0], enf, cand)
			case differs:
				e := audits[0]
				if e.RuleID != candID || e.VerdictID != enfID || (e.Action == compile.ActAccept) != (dCand.Verdict == rules.VerdictAccept) {
					t.Fatalf("%s: packet %s: audit event by candidate rule id %d (%v), enforced %d; the reference: %d (%s), %d\nenforced:\n%s\ncandidate:\n%s",
						what, p, e.RuleID, e.Action, e.VerdictID, candID, dCand.Verdict, enfID, enf, cand)
				}
			}
		}
		ac, err := a.Counters()
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, c := range wantCtr {
			n += c
		}
		if ac.Seen.Packets-seen0.Seen.Packets != n {
			t.Fatalf("%s: the audit saw %d packets, %d were sent", what, ac.Seen.Packets-seen0.Seen.Packets, n)
		}
		for id, want := range wantCtr {
			c, err := a.RuleCounters([]uint32{id})
			if err != nil {
				t.Fatal(err)
			}
			if c[0].Packets-ctr0[id] != want {
				t.Fatalf("%s: candidate rule id %d counted %d packets, decided %d\ncandidate:\n%s", what, id, c[0].Packets-ctr0[id], want, cand)
			}
		}
	}
	if differ == 0 {
		t.Fatal("no verdict differed: the test checked nothing of the reports")
	}
	t.Logf("%d packets audited, %d verdicts differed: all reported, none enforced", packets, differ)
}
