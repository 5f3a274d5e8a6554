package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// stream is a steady UDP stream from a client to two ports of a server:
// "a SEQ" to A and "b SEQ" to B alternately, perTick datagrams every
// millisecond, until stopped (and at least min went out) or max went out.
// Tests that change the firewall under traffic check with wantExact that
// every datagram to A arrived exactly once and none to B.
type stream struct {
	sent    atomic.Int64 // how many went out so far
	stopC   chan struct{}
	done    chan streamCount
	stopped *streamCount
}

// streamCount is what a stream sent.
type streamCount struct {
	a, b int
	err  error
}

func startStream(ctx context.Context, u *udpSender, addrA, addrB *net.UDPAddr, min, max, perTick int) *stream {
	s := &stream{stopC: make(chan struct{}), done: make(chan streamCount, 1)}
	go func() {
		var c streamCount
		defer func() { s.done <- c }()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		stopC, stopping := s.stopC, false
		for {
			select {
			case <-ctx.Done():
				c.err = ctx.Err()
				return
			case <-stopC:
				stopC, stopping = nil, true
			case <-tick.C:
			}
			if total := c.a + c.b; stopping && total >= min || total >= max {
				return
			}
			for range perTick {
				var err error
				if (c.a+c.b)%2 == 0 {
					_, err = u.conn.WriteTo(fmt.Appendf(nil, "a %d", c.a), addrA)
					c.a++
				} else {
					_, err = u.conn.WriteTo(fmt.Appendf(nil, "b %d", c.b), addrB)
					c.b++
				}
				if err != nil {
					c.err = err
					return
				}
			}
			s.sent.Store(int64(c.a + c.b))
		}
	}()
	return s
}

// waitSent waits until n datagrams went out; false if the stream stalled.
func (s *stream) waitSent(ctx context.Context, n int) bool {
	return poll(ctx, time.Minute, func() bool { return s.sent.Load() >= int64(n) })
}

// stop ends the stream (once at least min went out) and returns what it sent.
func (s *stream) stop() streamCount {
	if s.stopped == nil {
		close(s.stopC)
		c := <-s.done
		s.stopped = &c
	}
	return *s.stopped
}

// wantExact checks that every datagram the stream sent to A arrived
// exactly once at sinkA and none of those to B at sinkB. diag is printed
// with a failure.
func (c streamCount) wantExact(t *testing.T, sinkA, sinkB *udpSink, diag func() string) {
	t.Helper()
	if c.err != nil {
		t.Fatalf("sending the stream: %v (sent %d + %d)", c.err, c.a, c.b)
	}
	got := sinkA.wait(t, "a", c.a)
	seqs := sinkA.seqs("a")
	var missing, dup []int
	for i := range c.a {
		switch seqs[i] {
		case 0:
			missing = append(missing, i)
		case 1:
		default:
			dup = append(dup, i)
		}
	}
	if got != c.a || len(missing) > 0 || len(dup) > 0 || len(seqs) != c.a {
		t.Errorf("udp %d received %d of the %d datagrams sent: %d missing (first: %v), %d duplicated (first: %v)\n%s",
			sinkA.port, got, c.a, len(missing), missing[:min(len(missing), 10)], len(dup), dup[:min(len(dup), 10)], diag())
	}
	// Same path, in order: every datagram to B has been through XDP too.
	sinkB.sync(t)
	if n := sinkB.total(); n != 0 {
		keys := slices.Sorted(maps.Keys(sinkB.seqs("b")))
		t.Errorf("%d datagrams to udp %d got through (first: %v)", n, sinkB.port, keys[:min(len(keys), 10)])
	}
}
