package datapath_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/telemetry"
)

// events drains the ring buffer.
func (f *fixture) events() []telemetry.Event {
	f.t.Helper()
	rd, err := telemetry.NewReader(f.dp.LogRing())
	if err != nil {
		f.t.Fatal(err)
	}
	defer rd.Close()
	var out []telemetry.Event
	for {
		e, err := rd.Next(false)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e)
	}
}

func (f *fixture) logStats() datapath.LogStats {
	f.t.Helper()
	s, err := f.dp.LogStats()
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// wantEvent is what one event must say.
type wantEvent struct {
	rule   int            // index of the logging rule
	by     int            // index of the deciding rule, -1: policy
	byLOG  bool           // logged by a LOG rule
	action compile.Action // the decision
	reason compile.Reason
}

const logRules = `-P OUTPUT ACCEPT
-A INPUT -p udp --dport 53 -j LOG --log-prefix "dns: "
-A INPUT -s 10.9.0.0/16 -j NFLOG --nflog-group 3 --nflog-prefix "nf: "
-A INPUT -p udp --dport 53 -j ACCEPT
-A INPUT -p tcp --dport 22 -j DROP --log
-A INPUT -p tcp --dport 23 -j REJECT --log --reject-with tcp-reset
-A INPUT -p tcp --dport 24 -j ACCEPT
-A OUTPUT -p udp -j ULOG --ulog-nlgroup 2
-A OUTPUT -p udp --dport 9 -j DROP --log
`

// TestLogEvents runs packets through both hooks and checks every event
// that comes out of the ring buffer (NFLOG and ULOG rules log as LOG rules
// do, their events naming the group): which rules log, in which order,
// with the decision, the hook, the interface, the lengths and the
// packet's own bytes (for a REJECT, the packet, not the answer built in
// its place); and what the trace hook reports of it.
func TestLogEvents(t *testing.T) {
	f := newFixture(t)
	f.installText(logRules)
	udp := func(src string, dport uint16) []byte {
		return v4pkt(packet.ProtoUDP, src, "10.0.0.2", 40000, dport).Bytes()
	}
	tcp := func(src string, dport uint16) []byte {
		return v4pkt(packet.ProtoTCP, src, "10.0.0.2", 40000, dport).Bytes()
	}
	big := (&packet.Packet{SrcMAC: macA, DstMAC: macB, Src: netip.MustParseAddr("10.9.1.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		Proto: packet.ProtoUDP, SPort: 1, DPort: 53, Payload: make([]byte, 500)}).Bytes()
	for _, c := range []struct {
		name   string
		frame  []byte
		egress bool
		want   []wantEvent
	}{
		{"two LOG rules, then ACCEPT", udp("10.9.0.1", 53), false, []wantEvent{
			{0, 2, true, compile.ActAccept, compile.ReasonRuleAccept}, {1, 2, true, compile.ActAccept, compile.ReasonRuleAccept}}},
		{"a large packet: the first 128 bytes", big, false, []wantEvent{
			{0, 2, true, compile.ActAccept, compile.ReasonRuleAccept}, {1, 2, true, compile.ActAccept, compile.ReasonRuleAccept}}},
		{"one LOG rule, then ACCEPT", udp("192.0.2.1", 53), false, []wantEvent{
			{0, 2, true, compile.ActAccept, compile.ReasonRuleAccept}}},
		{"LOG, then DROP --log", tcp("10.9.0.1", 22), false, []wantEvent{
			{1, 3, true, compile.ActDrop, compile.ReasonRuleDrop}, {3, 3, false, compile.ActDrop, compile.ReasonRuleDrop}}},
		{"REJECT --log: the packet, not its answer", tcp("192.0.2.1", 23), false, []wantEvent{
			{4, 4, false, compile.ActReject, compile.ReasonRuleReject}}},
		{"LOG before the policy", tcp("10.9.0.1", 80), false, []wantEvent{
			{1, -1, true, compile.ActAccept, compile.ReasonPolicyAccept}}},
		{"no logged rule", tcp("192.0.2.1", 24), false, nil},
		{"no rule at all", tcp("192.0.2.1", 25), false, nil},
		{"OUTPUT: LOG, then DROP --log", udp("10.0.0.1", 9), true, []wantEvent{
			{6, 7, true, compile.ActDrop, compile.ReasonRuleDrop}, {7, 7, false, compile.ActDrop, compile.ReasonRuleDrop}}},
		{"OUTPUT: LOG before the policy", udp("10.0.0.1", 10), true, []wantEvent{
			{6, -1, true, compile.ActAccept, compile.ReasonPolicyAccept}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var res datapath.TraceResult
			err := f.ns.Do(func() error {
				var err error
				if c.egress {
					res, err = f.dp.RecordEgress(c.frame, datapath.NoCTState)
				} else {
					res, err = f.dp.Record(c.frame, f.ifaces["eth0"], datapath.NoCTState)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			evs := f.events()
			byLOG := 0
			for _, w := range c.want {
				if w.byLOG {
					byLOG++
				}
			}
			if res.LogRules != byLOG || res.LogSelf != (len(c.want) > byLOG) {
				t.Errorf("trace: %d LOG rules, own --log %v; want %d, %v", res.LogRules, res.LogSelf, byLOG, len(c.want) > byLOG)
			}
			if len(evs) != len(c.want) {
				t.Fatalf("%d events, want %d: %+v", len(evs), len(c.want), evs)
			}
			for i, w := range c.want {
				checkEvent(t, f, evs[i], w, c.frame, c.egress)
			}
		})
	}
}

// checkEvent compares one event with what it must say.
func checkEvent(t *testing.T, f *fixture, e telemetry.Event, w wantEvent, frame []byte, egress bool) {
	t.Helper()
	chain := f.rs.Rules[w.rule].Chain
	by := compile.PolicyID(uint8(chain), false)
	if w.by >= 0 {
		by = f.ids[w.by]
	}
	hook, ifindex := telemetry.HookIngress, f.ifaces["eth0"]
	if egress {
		hook, ifindex = telemetry.HookEgress, 1 // BPF_PROG_TEST_RUN's skb is on the namespace's loopback
	}
	snap := frame[:min(len(frame), compile.DefaultLogSnap)]
	if e.RuleID != f.ids[w.rule] || e.VerdictID != by || e.ByLOG != w.byLOG || e.Action != w.action || e.Reason != w.reason ||
		e.Chain != chain || e.Hook != hook || e.Ifindex != ifindex || e.PktLen != len(frame) || !bytes.Equal(e.Data, snap) ||
		!e.Trace || e.CTState != compile.CTNew {
		t.Errorf("event %+v\nwant rule id %d, decided by %d, by LOG %v, %s (%s), chain %s, hook %s, ifindex %d, %d bytes of %d, trace",
			e, f.ids[w.rule], by, w.byLOG, w.action, w.reason, chain, hook, ifindex, len(snap), len(frame))
	}
	if g := f.rs.Rules[w.rule].Target.Group; g != nil {
		line := e.Line(telemetry.IndexRules(f.rs, f.ids), nil)
		if want := fmt.Sprintf(" %s=%d ", g.Name(), g.Number()); !strings.Contains(line, want) ||
			!strings.HasPrefix(line, f.rs.Rules[w.rule].Target.LogPrefix+"IN=") {
			t.Errorf("%s event: %s, want %q and the prefix", g.Name(), line, want)
		}
	}
}

// TestLogRateLimit sends K packets in one BPF_PROG_TEST_RUN through a LOG
// rule and a DROP --log rule whose rates (1/day) cannot refill during the
// run: each emits exactly its burst, and counts K - burst suppressed. A
// new generation with the same rules keeps the buckets (no new burst);
// a larger burst for the same rule id adds the difference.
func TestLogRateLimit(t *testing.T) {
	f := newFixture(t)
	text := `-A INPUT -p udp -j LOG --log-rate 1/day --log-burst 3
-A INPUT -p udp -j DROP --log --log-rate 1/day --log-burst 5
`
	f.installText(text)
	frame := v4pkt(packet.ProtoUDP, "10.0.0.1", "10.0.0.2", 1, 2).Bytes()
	run := func(k int) {
		t.Helper()
		err := f.ns.Do(func() error {
			ret, err := f.dp.Program().Run(&ebpf.RunOptions{Data: frame, Repeat: uint32(k)})
			if err == nil && ret != datapath.XDPDrop {
				err = fmt.Errorf("XDP action %d, want DROP", ret)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, logEv, dropEv int, want map[uint32]datapath.LogCounter) {
		t.Helper()
		var got [2]int
		for _, e := range f.events() {
			got[e.RuleID-compile.FirstRuleID]++
		}
		st := f.logStats()
		if got != [2]int{logEv, dropEv} || !maps(st.Rules, want) || st.Overflow != 0 || st.Unbudgeted != 0 {
			t.Errorf("%s: events %v, want [%d %d]; counters %+v, want %+v", what, got, logEv, dropEv, st, want)
		}
	}
	const k = 200
	run(k)
	check("first run", 3, 5, map[uint32]datapath.LogCounter{
		16: {Emitted: 3, Suppressed: k - 3}, 17: {Emitted: 5, Suppressed: k - 5}})
	// The LOG rule's own counters count every packet it logged (as
	// iptables counts a LOG rule's matches), suppressed or not.
	for id := uint32(16); id <= 17; id++ {
		if c, err := f.dp.RuleCounter(id); err != nil || c.Packets != k || c.Bytes != k*uint64(len(frame)) {
			t.Errorf("rule id %d counters %+v (%v), want %d packets", id, c, err, k)
		}
	}

	f.installText(text) // a new generation: same budgets, buckets kept
	run(10)
	check("same rules again", 0, 0, map[uint32]datapath.LogCounter{
		16: {Emitted: 3, Suppressed: k + 7}, 17: {Emitted: 5, Suppressed: k + 5}})

	f.installText(strings.Replace(text, "--log-burst 5", "--log-burst 9", 1))
	run(10)
	check("burst 5 -> 9", 0, 4, map[uint32]datapath.LogCounter{
		16: {Emitted: 3, Suppressed: k + 17}, 17: {Emitted: 9, Suppressed: k + 11}})

	f.installText("-A INPUT -p udp -j DROP\n") // nothing logs: budgets and counters go
	if st := f.logStats(); len(st.Rules) != 0 {
		t.Errorf("no rule logs, counters of %v left", st.Rules)
	}
}

func maps(a, b map[uint32]datapath.LogCounter) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestLogOverflow: more LOG rules match a packet than log it (4): the
// first four in rule order log it, wherever their entries sit among the
// classifier's trees, and the packet is counted. LOG rules after the
// deciding rule never log.
func TestLogOverflow(t *testing.T) {
	f := newFixture(t)
	// one LOG rule per tree group (source, destination, destination port,
	// source port, other), and a multiport rule whose two entries both
	// match: the data plane keeps the first four rules, each once
	f.installText(`-A INPUT -p udp -m multiport --ports 53,1000 -j LOG
-A INPUT -p udp --sport 1000 -j LOG
-A INPUT -j LOG
-A INPUT -d 10.0.0.2 -j LOG
-A INPUT -p udp --dport 53 -j LOG
-A INPUT -s 10.0.0.0/8 -j LOG
-A INPUT -p udp --dport 54 -j ACCEPT
-A INPUT -p udp -j DROP
-A INPUT -j LOG
`)
	for _, c := range []struct {
		sport, dport uint16
		want         []int
		overflow     uint64
	}{
		{1000, 53, []int{0, 1, 2, 3}, 1}, // all six LOG rules match
		{1000, 54, []int{0, 1, 2, 3}, 1}, // five before the ACCEPT
		{7, 54, []int{2, 3, 5}, 0},       // three before the ACCEPT
		{7, 53, []int{0, 2, 3, 4}, 1},    // five before the DROP
	} {
		before := f.logStats().Overflow
		frame := v4pkt(packet.ProtoUDP, "10.0.0.1", "10.0.0.2", c.sport, c.dport).Bytes()
		f.mustRun(frame, "eth0")
		var got []int
		for _, e := range f.events() {
			got = append(got, int(e.RuleID-compile.FirstRuleID))
		}
		if !slices.Equal(got, c.want) || f.logStats().Overflow-before != c.overflow {
			t.Errorf("sport %d dport %d: LOG rules %v logged, overflow +%d; want %v, +%d", c.sport, c.dport, got, f.logStats().Overflow-before, c.want, c.overflow)
		}
		// the reference matcher agrees
		d := compile.Decide(f.rs, compile.RefPacket{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
			Proto: packet.ProtoUDP, L4: true, SPort: c.sport, DPort: c.dport, InIface: "eth0"})
		if !slices.Equal(d.Logs, c.want) || d.LogOverflow != (c.overflow > 0) {
			t.Errorf("sport %d dport %d: reference logs %v overflow %v", c.sport, c.dport, d.Logs, d.LogOverflow)
		}
	}
}

// TestLogSnap: the snap length set at load bounds the bytes an event
// carries (0: none).
func TestLogSnap(t *testing.T) {
	frame := (&packet.Packet{SrcMAC: macA, DstMAC: macB, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		Proto: packet.ProtoUDP, SPort: 1, DPort: 2, Payload: make([]byte, 1400)}).Bytes()
	for _, snap := range []int{0, 14, compile.MaxLogSnap} {
		t.Run(fmt.Sprint(snap), func(t *testing.T) {
			lim := datapath.LimitsFor(0)
			lim.LogSnap = snap
			f := newFixtureLimits(t, lim)
			f.installText("-A INPUT -j LOG\n")
			f.mustRun(frame, "eth0")
			evs := f.events()
			if len(evs) != 1 || !bytes.Equal(evs[0].Data, frame[:snap]) || evs[0].PktLen != len(frame) {
				t.Fatalf("events %+v, want one with the first %d bytes of %d", evs, snap, len(frame))
			}
		})
	}
	lim := datapath.LimitsFor(0)
	lim.LogSnap = compile.MaxLogSnap + 1
	if _, err := datapath.Load(t.TempDir(), lim); err == nil {
		t.Error("a snap length beyond the maximum loaded")
	}
}

// BenchmarkLog measures what logging costs a packet, with
// BPF_PROG_TEST_RUN, on a 1,000-rule set whose last rule decides the
// probe (ns/pkt, the median of interleaved rounds, and the ratio to none):
//
//	none         no rule logs
//	control      elsewhere's two rules, as ACCEPT and DROP without --log
//	elsewhere    a LOG rule and a --log rule exist, neither matches the probe
//	suppressed   a LOG rule matches the probe; its budget is spent
//	emitted      a LOG rule matches the probe; every packet becomes an event
//	             (the ring buffer is drained between runs, outside the timing)
//
// Run with
//
//	go test -run '^$' -bench Log ./internal/datapath/
//
// The cases are measured round by round, side by side, so their ratios
// hold on a noisy machine.
func BenchmarkLog(b *testing.B) {
	var base strings.Builder
	base.WriteString("-P INPUT DROP\n")
	for i := 0; i < 999; i++ {
		fmt.Fprintf(&base, "-A INPUT -s 10.%d.%d.0/24 -p udp --dport %d -j ACCEPT\n", (i/250)%250, i%250, 1000+i%5000)
	}
	last := "-A INPUT -s 192.0.2.0/24 -p udp --dport 53 -j ACCEPT\n"
	cases := []struct{ name, extra string }{
		{"none", ""},
		{"control", "-A INPUT -s 203.0.113.0/24 -j ACCEPT\n-A INPUT -s 198.51.100.0/24 -j DROP\n"},
		{"elsewhere", "-A INPUT -s 203.0.113.0/24 -j LOG\n-A INPUT -s 198.51.100.0/24 -j DROP --log\n"},
		{"suppressed", "-A INPUT -s 192.0.2.0/24 -j LOG --log-rate 1/day --log-burst 1\n"},
		{"emitted", "-A INPUT -s 192.0.2.0/24 -j LOG --log-rate 1000000/sec --log-burst 1000000\n"},
	}
	frame := v4pkt(packet.ProtoUDP, "192.0.2.7", "10.255.0.1", 40000, 53).Bytes()
	fixtures := make([]*fixture, len(cases))
	readers := make([]*telemetry.Reader, len(cases))
	for i, c := range cases {
		fixtures[i] = newFixtureB(b)
		// the LOG rule first: it sees the probe before the last rule decides
		fixtures[i].installText(c.extra + base.String() + last)
		rd, err := telemetry.NewReader(fixtures[i].dp.LogRing())
		if err != nil {
			b.Fatal(err)
		}
		defer rd.Close()
		readers[i] = rd
	}
	// measure runs n packets through case i, 4000 at a time (that many
	// events fit in the ring buffer), draining the events in between.
	measure := func(i, n int) float64 {
		var total time.Duration
		for done := 0; done < n; {
			k := min(n-done, 4000)
			var per time.Duration
			err := fixtures[i].ns.Do(func() (err error) {
				_, per, err = fixtures[i].dp.Program().Benchmark(frame, k, nil)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			total += per * time.Duration(k)
			done += k
			for {
				if _, err := readers[i].Next(false); err != nil {
					break
				}
			}
		}
		return float64(total.Nanoseconds()) / float64(n)
	}
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	benchInterleaved(b, names, measure)
	for i, c := range cases {
		if st := fixtures[i].logStats(); st.Total.Lost != 0 {
			b.Fatalf("%s: %d events lost: the benchmark measured a full ring buffer", c.name, st.Total.Lost)
		}
	}
}
