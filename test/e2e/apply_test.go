package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestApplyUnderTraffic swaps rule sets with `xdpfw apply` again and again
// while a steady UDP stream flows to two ports, one accepted and one
// dropped by both rule sets. A generation swap is atomic, so not one
// datagram to the accepted port may be lost and not one to the dropped
// port may get through. The counters of the two rules, whose text never
// changes, carry over every apply and so count the whole stream exactly.
func TestApplyUnderTraffic(t *testing.T) {
	testutil.RequireRoot(t)
	const (
		portA, portB = 5001, 5002
		acceptA      = "-A INPUT -p udp --dport 5001 -j ACCEPT"
		dropB        = "-A INPUT -p udp --dport 5002 -j DROP"
		applies      = 20
		minStream    = 20000  // datagrams, half to each port, at least
		maxStream    = 200000 // at most, should the applies be very slow
		perTick      = 8      // datagrams sent every millisecond
	)
	l := newPair(t)
	sinkA, sinkB := newUDPSink(t, l.srv, portA), newUDPSink(t, l.srv, portB)
	// X: accept A, drop B, policy ACCEPT. Y: the same two rules (A's now
	// second) among others, and policy ACCEPT for another chain spelled out.
	x := writeRules(t, "x.rules", acceptA, dropB)
	y := writeRules(t, "y.rules",
		"-P FORWARD ACCEPT",
		"-A INPUT -s 198.51.100.0/24 -j DROP",
		acceptA,
		"-A INPUT -p tcp --dport 22 -j ACCEPT",
		dropB,
		"-A INPUT -p udp -m multiport --dports 6000:6100 -j DROP",
		"-A FORWARD -p tcp --dport 25 -j DROP")

	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, x)
	idA := f.list().rule(t, acceptA).ID
	sender := newUDPSender(t, l.cli, "")
	sender.send(t, hostPort(l.srv4, portA), "warmup", 0, 1) // resolves the neighbour
	if n := sinkA.wait(t, "warmup", 1); n != 1 {
		t.Fatalf("the warm-up datagram did not reach udp %d", portA)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st := startStream(ctx, sender, &net.UDPAddr{IP: net.ParseIP(l.srv4), Port: portA},
		&net.UDPAddr{IP: net.ParseIP(l.srv4), Port: portB}, minStream, maxStream, perTick)
	defer func() {
		cancel()
		st.stop()
	}()
	if n := sinkA.wait(t, "a", 1); n < 1 {
		t.Fatalf("the stream does not reach udp %d", portA)
	}

	// The applies are spread over the stream: apply i waits until the
	// (i+1)th of applies+1 equal parts of minStream has gone out.
	start := time.Now()
	applied := 0
	for i := range applies {
		if !st.waitSent(ctx, (i+1)*minStream/(applies+1)) {
			t.Fatalf("the stream stalled at %d datagrams", st.sent.Load())
		}
		file := y
		if i%2 == 1 {
			file = x
		}
		r := f.run("apply", file)
		if r.code != 0 {
			t.Errorf("apply #%d: %s", i+1, r)
			break
		}
		applied++
	}
	applyTime := time.Since(start)
	s := st.stop()
	if s.err != nil {
		t.Fatalf("sending the stream: %v (sent %d + %d)", s.err, s.a, s.b)
	}
	t.Logf("%d applies in %v under a stream of %d datagrams (%d to each port) over %v",
		applied, applyTime.Round(time.Millisecond), s.a+s.b, s.a, time.Since(start).Round(time.Millisecond))
	s.wantExact(t, sinkA, sinkB, func() string {
		return ipOut(t, "-n", l.srv.Name, "-s", "link", "show", "dev", l.srvIf) + f.status().raw
	})

	list := f.list()
	if list.Generation != uint64(1+applied) {
		t.Errorf("generation %d after a load and %d applies:\n%s", list.Generation, applied, list.raw)
	}
	list.wantChain(t, "INPUT", acceptA, dropB) // the last apply was X
	if r := list.rule(t, acceptA); r.ID != idA || r.Counters.Packets != uint64(sinkA.total()) {
		t.Errorf("rule %q: id %d, %d packets; want id %d (as loaded) and the %d datagrams udp %d received (counters carry over):\n%s",
			acceptA, r.ID, r.Counters.Packets, idA, sinkA.total(), portA, list.raw)
	}
	if r := list.rule(t, dropB); r.Counters.Packets != uint64(s.b) {
		t.Errorf("rule %q counted %d packets, want the %d datagrams sent to udp %d:\n%s", dropB, r.Counters.Packets, s.b, portB, list.raw)
	}
}
