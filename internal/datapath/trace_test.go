package datapath_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// liveState is what traces must leave alone.
func (f *fixture) liveState(t *testing.T) string {
	t.Helper()
	rc, err := f.dp.ReasonCounters()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for r, c := range rc {
		if c.Packets > 0 {
			fmt.Fprintf(&b, "reason %s %d/%d; ", compile.Reason(r), c.Packets, c.Bytes)
		}
	}
	ids := append([]uint32{}, f.ids...)
	for chain := uint8(0); chain < 3; chain++ {
		ids = append(ids, compile.PolicyID(chain, false))
	}
	cs, err := f.dp.RuleCounters(ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		fmt.Fprintf(&b, "rule %d: %d; ", ids[i], c.Packets)
	}
	es, err := f.dp.Connections()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "connections %v; ", es)
	st, err := f.dp.CTStats()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "ct counters %v; ", st.Counters)
	ls, err := f.dp.LogStats()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "log %+v; events %d", ls, len(f.events()))
	return b.String()
}

// TestTraceChangesNothing: `xdpfw trace` (Datapath.Trace, the trace
// instance) reports what the live program decides, on the live program's
// state, and changes none of it: counters, conntrack, REJECT's budgets,
// LOG's budgets and events. Played on both hooks, with packets that would
// create a connection, be rejected, and be logged.
func TestTraceChangesNothing(t *testing.T) {
	f := newFixture(t)
	f.installText(`
-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A INPUT -p udp --dport 53 -j LOG
-A INPUT -p udp --dport 53 -j ACCEPT
-A INPUT -p udp --dport 9 -j REJECT
-A INPUT -p tcp --dport 22 -j ACCEPT
-A OUTPUT -p udp --dport 9 -j REJECT
-A OUTPUT -p udp -j LOG
`)
	// REJECT's budget: one answer per source, one for everybody.
	if err := f.dp.SetConfig(datapath.Config{RejectRate: 1, RejectBurst: 1, RejectGlobalRate: 1}); err != nil {
		t.Fatal(err)
	}
	syn := tcpPkt(ct4, false, packet.TCPSyn).Bytes()
	dns := v4pkt(packet.ProtoUDP, "10.200.0.1", "10.200.0.2", 40000, 53).Bytes()
	rej := v4pkt(packet.ProtoUDP, "10.200.0.1", "10.200.0.2", 40000, 9).Bytes()
	out := v4pkt(packet.ProtoUDP, "10.200.0.2", "10.200.0.1", 40000, 9).Bytes()
	before := f.liveState(t)
	trace := func(frame []byte, egress bool) datapath.TraceResult {
		t.Helper()
		var r datapath.TraceResult
		err := f.ns.Do(func() (err error) {
			if egress {
				r, err = f.dp.TraceEgress(frame, datapath.NoCTState)
			} else {
				r, err = f.dp.Trace(frame, f.ifaces["eth0"], datapath.NoCTState)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for i := 0; i < 3; i++ {
		if r := trace(syn, false); r.XDPAction != datapath.XDPPass || r.CTState != compile.CTNew {
			t.Fatalf("trace %d of a SYN: action %d state %s, want passed as NEW (nothing recorded by earlier traces)",
				i, r.XDPAction, compile.CTStateName(r.CTState))
		}
		if r := trace(dns, false); r.XDPAction != datapath.XDPPass || r.LogRules != 1 {
			t.Fatalf("trace %d of a logged packet: %+v", i, r)
		}
		if r := trace(rej, false); r.XDPAction != datapath.XDPTx || r.Reason != compile.ReasonRuleReject {
			t.Fatalf("trace %d of a rejected packet: action %d reason %s, want answered (no token taken by earlier traces)",
				i, r.XDPAction, r.Reason)
		}
		if r := trace(out, true); r.XDPAction != datapath.TCActRedirect || r.Reason != compile.ReasonRuleReject {
			t.Fatalf("trace %d of an OUTPUT REJECT: action %d reason %s, want answered", i, r.XDPAction, r.Reason)
		}
	}
	if after := f.liveState(t); after != before {
		t.Fatalf("traces changed live state:\nbefore %s\nafter  %s", before, after)
	}
	// The live program does record: the trace then sees its state.
	f.mustRun(syn, "eth0")
	f.mustRun(rej, "eth0")
	if r := trace(tcpPkt(ct4, true, packet.TCPSyn|packet.TCPAck).Bytes(), false); r.CTState != compile.CTEstablished {
		t.Fatalf("trace of the answer to a recorded SYN: %s, want ESTABLISHED", compile.CTStateName(r.CTState))
	}
	if r := trace(rej, false); r.XDPAction != datapath.XDPDrop || r.Reason != compile.ReasonRejectRate {
		t.Fatalf("trace after the budget was spent: action %d reason %s, want rate-limited", r.XDPAction, r.Reason)
	}
}

// TestLiveProgramIgnoresTraceRequests: the live programs have no trace
// code: a packet carrying a trace request (XDP metadata another program
// wrote, or skb->cb, which every tc program may write) is decided as any
// other, its connection state is not assumed, and nothing is reported.
func TestLiveProgramIgnoresTraceRequests(t *testing.T) {
	f := newFixture(t)
	f.installText(`
-P INPUT DROP
-P OUTPUT DROP
-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A OUTPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT
`)
	frame := tcpPkt(ct4, false, packet.TCPSyn).Bytes()
	var in, eg datapath.TraceResult
	err := f.ns.Do(func() (err error) {
		if in, err = f.dp.TraceLive(frame, f.ifaces["eth0"], int(compile.CTEstablished)); err != nil {
			return err
		}
		eg, err = f.dp.TraceLiveEgress(frame, int(compile.CTEstablished))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if in.XDPAction != datapath.XDPDrop || in.RuleID != 0 || in.Action != 0 || in.Reason != 0 {
		t.Errorf("live XDP program with a trace request assuming ESTABLISHED: %+v, want dropped, nothing reported", in)
	}
	if eg.XDPAction != datapath.TCActShot || eg.RuleID != 0 || eg.Action != 0 {
		t.Errorf("live tc program with a trace request in skb->cb: %+v, want TC_ACT_SHOT, nothing reported", eg)
	}
}
