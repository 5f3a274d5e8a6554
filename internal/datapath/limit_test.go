package datapath_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// limitRules: rates of a few an hour, so that no token comes back while a
// test runs (a token takes 20 minutes); refills are driven by moving a
// bucket's timeline back (Datapath.Refill), and the reference matcher
// (compile.DecideAt) models the same buckets with its clock standing.
const limitRules = `-P INPUT DROP
-P OUTPUT DROP
-A INPUT -s 10.1.0.0/16 -j ACCEPT
-A INPUT -p udp --dport 53 -m limit --limit 3/hour --limit-burst 4 -j ACCEPT
-A INPUT -p udp --dport 53 -m limit --limit 2/hour --limit-burst 2 -j REJECT
-A INPUT -p udp --dport 54 -m limit --limit 3/hour --limit-burst 2 -j LOG
-A INPUT -p udp -j DROP
-A INPUT -p tcp -m limit -j ACCEPT
-A OUTPUT -p udp -m limit --limit 1/hour --limit-burst 2 -j ACCEPT
`

// TestLimitBurstRefill: a -m limit rule decides the packets that reach it
// while its bucket has a token, exactly burst of them at once, then one
// per refill; packets an earlier rule decides (in another tree) take no
// token; a rule whose bucket is empty lets the packet go on to the next
// rule. Each packet's decision is the reference matcher's with the same
// buckets, and the rule counters count what each rule decided.
func TestLimitBurstRefill(t *testing.T) {
	f := newFixture(t)
	f.installText(limitRules)
	st := &compile.State{}
	udp := func(src string, dport uint16) *packet.Packet {
		return v4pkt(packet.ProtoUDP, src, "10.0.0.1", 1234, dport)
	}
	var seq []int
	send := func(p *packet.Packet, n int) {
		t.Helper()
		seq = append(seq, f.sendDecided(p, n, st)...)
	}
	send(udp("10.1.2.3", 53), 10) // rule 0 decides, in the source tree: no token is taken
	send(udp("10.2.0.1", 53), 7)  // 4 by rule 1 (its burst), 2 by rule 2, then rule 4
	if want := "[0 0 0 0 0 0 0 0 0 0 1 1 1 1 2 2 4]"; fmt.Sprint(seq) != want {
		t.Errorf("deciding rules %v, want %v", seq, want)
	}
	// One interval: one more token for rule 1, none for rule 2.
	if err := f.dp.Refill(f.ids[1], 1); err != nil {
		t.Fatal(err)
	}
	st.Tat[1] -= f.rs.Rules[1].Match.Limit.IntervalNS()
	seq = nil
	send(udp("10.2.0.1", 53), 3)
	if want := "[1 4 4]"; fmt.Sprint(seq) != want {
		t.Errorf("after one refill: %v, want %v", seq, want)
	}
	// Ten intervals: the bucket fills up to its burst, no more.
	if err := f.dp.Refill(f.ids[1], 10); err != nil {
		t.Fatal(err)
	}
	st.Tat[1] = 0
	seq = nil
	send(udp("10.2.0.1", 53), 6)
	if want := "[1 1 1 1 4 4]"; fmt.Sprint(seq) != want {
		t.Errorf("after ten refills: %v, want %v", seq, want)
	}
	// -m limit alone: 3/hour, burst 5.
	seq = nil
	send(v4pkt(packet.ProtoTCP, "10.2.0.1", "10.0.0.1", 1234, 80), 7)
	if want := "[5 5 5 5 5 -1 -1]"; fmt.Sprint(seq) != want {
		t.Errorf("-m limit alone: %v, want %v", seq, want)
	}
	for i, want := range []uint64{10, 9, 2, 0, 5, 5} {
		if c, err := f.dp.RuleCounter(f.ids[i]); err != nil || c.Packets != want {
			t.Errorf("rule %d counted %d packets (%v), want %d", i, c.Packets, err, want)
		}
	}
	// A trace tells what the next packet meets and takes no token.
	var tr datapath.TraceResult
	if err := f.ns.Do(func() (err error) {
		f.dp.Refill(f.ids[1], 1)
		for range 3 {
			if tr, err = f.dp.Trace(udp("10.2.0.1", 53).Bytes(), f.ifaces["eth0"], datapath.NoCTState); err != nil {
				return err
			}
		}
		return nil
	}); err != nil || tr.RuleID != f.ids[1] {
		t.Fatalf("trace: decided by rule id %d (%v), want %d", tr.RuleID, err, f.ids[1])
	}
	if r := f.mustRun(udp("10.2.0.1", 53).Bytes(), "eth0"); r.RuleID != f.ids[1] {
		t.Errorf("after the traces, decided by rule id %d: a trace took the token", r.RuleID)
	}
}

// sendDecided runs p n times through the data plane (arriving on eth0)
// and each time through the reference with the state st (which it
// changes); it fails the test on the first packet they decide apart, and
// returns the deciding rules (-1: the policy).
func (f *fixture) sendDecided(p *packet.Packet, n int, st *compile.State) []int {
	f.t.Helper()
	var seq []int
	for range n {
		r := f.mustRun(p.Bytes(), "eth0")
		d := compile.DecideAt(f.rs, compile.RefPacketOf(p, "eth0"), st)
		want := compile.PolicyID(0, false)
		if d.Rule >= 0 {
			want = f.ids[d.Rule]
		}
		if r.RuleID != want {
			f.t.Fatalf("%s: decided by rule id %d, the reference says %d (rule %d)", p, r.RuleID, want, d.Rule)
		}
		seq = append(seq, d.Rule)
	}
	return seq
}

// TestLimitLog: on a LOG rule -m limit is the rule's log budget: the
// packets it lets through are logged and counted, the others are not the
// rule's (counted as suppressed in the log counters only).
func TestLimitLog(t *testing.T) {
	f := newFixture(t)
	f.installText(limitRules)
	p := v4pkt(packet.ProtoUDP, "10.2.0.1", "10.0.0.1", 1234, 54)
	for range 5 {
		if r := f.mustRun(p.Bytes(), "eth0"); r.RuleID != f.ids[4] {
			t.Fatalf("decided by rule id %d, want %d (the udp DROP)", r.RuleID, f.ids[4])
		}
	}
	evs := f.events()
	if len(evs) != 2 {
		t.Errorf("%d events, want 2 (the limit's burst)", len(evs))
	}
	if c, _ := f.dp.RuleCounter(f.ids[3]); c.Packets != 2 {
		t.Errorf("the LOG rule counted %d packets, want the 2 it let through", c.Packets)
	}
	if s := f.logStats().Rules[f.ids[3]]; s.Emitted != 2 || s.Suppressed != 3 {
		t.Errorf("log counters %+v, want 2 emitted and 3 suppressed", s)
	}
}

// TestLimitOutput: OUTPUT (tc egress) limits as INPUT does.
func TestLimitOutput(t *testing.T) {
	f := newFixture(t)
	f.installText(limitRules)
	p := v4pkt(packet.ProtoUDP, "10.0.0.1", "10.9.0.1", 1234, 53)
	var got []uint32
	for range 4 {
		got = append(got, f.egress(p.Bytes()).RuleID)
	}
	pol := compile.PolicyID(uint8(rules.ChainOutput), false)
	if want := fmt.Sprint([]uint32{f.ids[6], f.ids[6], pol, pol}); fmt.Sprint(got) != want {
		t.Errorf("OUTPUT decided by %v, want %v", got, want)
	}
}

// TestLimitKeepsBucket: an apply that keeps a rule (its id) keeps its
// bucket's state; a rule that is gone loses its bucket.
func TestLimitKeepsBucket(t *testing.T) {
	f := newFixture(t)
	f.installText(limitRules)
	p := v4pkt(packet.ProtoUDP, "10.2.0.1", "10.0.0.1", 1234, 53)
	for range 3 {
		f.mustRun(p.Bytes(), "eth0")
	}
	id := f.ids[1]
	before, err := f.dp.LimitTat(id)
	if err != nil || before == 0 {
		t.Fatalf("rule 1's bucket: tat %d (%v), want spent", before, err)
	}
	f.install(f.rs) // the same ids
	if after, err := f.dp.LimitTat(id); err != nil || after != before {
		t.Errorf("after a reinstall: tat %d (%v), want %d", after, err, before)
	}
	f.installText("-A INPUT -p udp -j DROP\n")
	if _, err := f.dp.LimitTat(id); err == nil {
		t.Error("the bucket of a rule no longer in force is still there")
	}
}

// BenchmarkLimit: what -m limit costs a packet (BPF_PROG_TEST_RUN of the
// live program): a 1,000-rule set, the probe decided by its last rule,
// the cases side by side (benchInterleaved). "elsewhere": a -m limit rule
// the probe never meets; "passes": the probe is decided by a -m limit
// rule with a token (refilled between runs); "refused": it meets a -m
// limit rule whose bucket is empty and goes on to the last rule;
// "recent-miss": it meets a -m recent --rcheck rule whose list does not
// hold it and goes on; "recent-set": a -m recent --set rule decides it
// (and writes its address's time stamp); "hashlimit-miss": it meets a
// -m hashlimit --hashlimit-upto rule whose bucket for its source is empty
// and goes on; "hashlimit-above": a --hashlimit-above rule decides it
// (its bucket empty; each packet marks the bucket seen).
// "connlimit-miss": a --connlimit-above 3 rule counts the probe's
// connection (tracked since the first run: 1) and goes on;
// "connlimit-above": a --connlimit-above 0 rule drops it (its connection,
// never accepted, is the one its key's list holds).
//
//	go test -run '^$' -bench BenchmarkLimit -benchtime 1x ./internal/datapath/
func BenchmarkLimit(b *testing.B) {
	var base strings.Builder
	base.WriteString("-P INPUT DROP\n")
	for i := 0; i < 999; i++ {
		fmt.Fprintf(&base, "-A INPUT -s 10.%d.%d.0/24 -p udp --dport %d -j ACCEPT\n", (i/250)%250, i%250, 1000+i%5000)
	}
	last := "-A INPUT -s 192.0.2.0/24 -p udp --dport 53 -j ACCEPT\n"
	cases := []struct{ name, first string }{
		{"none", ""},
		{"elsewhere", "-A INPUT -s 203.0.113.0/24 -m limit --limit 10/sec -j ACCEPT\n"},
		{"passes", "-A INPUT -s 192.0.2.0/24 -m limit --limit 10000/sec --limit-burst 10000 -j ACCEPT\n"},
		{"refused", "-A INPUT -s 192.0.2.0/24 -m limit --limit 1/day --limit-burst 1 -j ACCEPT\n"},
		{"recent-miss", "-A INPUT -s 192.0.2.0/24 -m recent --rcheck --name B -j DROP\n"},
		{"recent-set", "-A INPUT -s 192.0.2.0/24 -m recent --set --name B -j ACCEPT\n"},
		{"hashlimit-miss", "-A INPUT -s 192.0.2.0/24 -m hashlimit --hashlimit-upto 1/day --hashlimit-burst 1 --hashlimit-mode srcip --hashlimit-name B -j ACCEPT\n"},
		{"hashlimit-above", "-A INPUT -s 192.0.2.0/24 -m hashlimit --hashlimit-above 1/day --hashlimit-burst 1 --hashlimit-mode srcip --hashlimit-name B -j DROP\n"},
		{"connlimit-miss", "-A INPUT -s 192.0.2.0/24 -m connlimit --connlimit-above 3 -j DROP\n"},
		{"connlimit-above", "-A INPUT -s 192.0.2.0/24 -m connlimit --connlimit-above 0 -j DROP\n"},
	}
	frame := v4pkt(packet.ProtoUDP, "192.0.2.7", "10.255.0.1", 40000, 53).Bytes()
	fixtures := make([]*fixture, len(cases))
	names := make([]string, len(cases))
	for i, c := range cases {
		fixtures[i] = newFixtureB(b)
		fixtures[i].installText(c.first + base.String() + last)
		names[i] = c.name
	}
	measure := func(i, n int) float64 {
		f := fixtures[i]
		var total time.Duration
		for done := 0; done < n; {
			k := min(n-done, 4000)
			if cases[i].name == "passes" { // a full bucket: every packet of the run has a token
				if err := f.dp.Refill(f.ids[0], 10000); err != nil {
					b.Fatal(err)
				}
			}
			var per time.Duration
			if err := f.ns.Do(func() (err error) {
				_, per, err = f.dp.Program().Benchmark(frame, k, nil)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			total += per * time.Duration(k)
			done += k
		}
		return float64(total.Nanoseconds()) / float64(n)
	}
	benchInterleaved(b, names, measure)
	// the cases measured what they say
	for i, at := range map[int]int{2: 0, 3: 1000, 4: 1000, 5: 0, 6: 1000, 7: 0, 8: 1000, 9: 0} {
		f := fixtures[i]
		if err := f.dp.Refill(f.ids[0], 1); err != nil && i == 2 {
			b.Fatal(err)
		}
		if i == 3 {
			f.mustRun(frame, "lo") // the bucket of 1 may have its token back: spend it
		}
		if r := f.mustRun(frame, "lo"); r.RuleID != f.ids[at] {
			b.Fatalf("%s: the probe was decided by rule id %d, want %d", cases[i].name, r.RuleID, f.ids[at])
		}
	}
}
