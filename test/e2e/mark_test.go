package e2e

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/testutil"
)

// sendMarked sends n datagrams "TAG i" from a socket in ns whose SO_MARK is
// mark (0: none) to addr.
func sendMarked(t *testing.T, ns *testutil.NetNS, mark int, addr, tag string, n int) {
	t.Helper()
	err := ns.Do(func() error {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, mark) }); err != nil {
				return err
			}
			return serr
		}}
		pc, err := lc.ListenPacket(context.Background(), "udp", ":0")
		if err != nil {
			return err
		}
		defer pc.Close()
		ua, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		for i := range n {
			if _, err := pc.WriteTo(fmt.Appendf(nil, "%s %d", tag, i), ua); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending marked datagrams: %v", err)
	}
}

// TestOutputMark: -m mark in OUTPUT matches the mark a socket sets
// (SO_MARK), as the tc egress program sees it: datagrams of a socket with
// mark 0x2a are dropped, those of an unmarked socket and of one marked 0x2b
// go out; with a mask, both marks match.
func TestOutputMark(t *testing.T) {
	testutil.RequireRoot(t)
	const port = 5060
	l := newPair(t)
	sink := newUDPSink(t, l.cli, port)
	f := newFW(t, l.srv)
	dropMarked := "-A OUTPUT -p udp -m mark --mark 0x2a -j DROP"
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "mark.rules", dropMarked))
	to := hostPort(l.cli4, port)
	sendMarked(t, l.srv, 0, to, "warm", 1) // resolves the neighbour
	sink.wait(t, "warm", 1)

	sendMarked(t, l.srv, 0x2a, to, "marked", 5)
	sendMarked(t, l.srv, 0x2b, to, "other", 5)
	sendMarked(t, l.srv, 0, to, "plain", 5)
	sink.wait(t, "plain", 5)
	sink.wait(t, "other", 5)
	sink.sync(t)
	if m, o, p := sink.count("marked"), sink.count("other"), sink.count("plain"); m != 0 || o != 5 || p != 5 {
		t.Errorf("marked 0x2a: %d of 5 arrived (want 0), 0x2b: %d of 5, unmarked: %d of 5", m, o, p)
	}
	if n := f.ruleCounter(t, "-A OUTPUT -p udp -m mark --mark 0x2a -j DROP"); n != 5 {
		t.Errorf("the mark rule counted %d packets, want 5", n)
	}

	// a mask: 0x2a and 0x2b both have 0x2a under 0xfe
	f.mustRun("apply", writeRules(t, "mask.rules", "-A OUTPUT -p udp -m mark --mark 0x2a/0xfe -j DROP"))
	sendMarked(t, l.srv, 0x2b, to, "masked", 5)
	sendMarked(t, l.srv, 0, to, "plain2", 5)
	sink.wait(t, "plain2", 5)
	sink.sync(t)
	if m := sink.count("masked"); m != 0 {
		t.Errorf("mark 0x2b under --mark 0x2a/0xfe: %d of 5 arrived, want 0", m)
	}
}
