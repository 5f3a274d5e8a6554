package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// The classic stateful host policy, with the ND messages
// IPv6 cannot live without (they are UNTRACKED, as in Linux).
var classicPolicy = []string{
	"-P INPUT DROP",
	"-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
	"-A INPUT -m conntrack --ctstate INVALID -j DROP",
	"-A INPUT -p ipv6-icmp --icmpv6-type 135 -j ACCEPT",
	"-A INPUT -p ipv6-icmp --icmpv6-type 136 -j ACCEPT",
	"-A INPUT -p tcp --dport 22 -m conntrack --ctstate NEW -j ACCEPT",
	"-A OUTPUT -j ACCEPT",
}

// serveEcho runs a TCP echo server on port in ns until the test ends.
func serveEcho(t *testing.T, ns *testutil.NetNS, port int) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port)); return err }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Wrapped so io.Copy does not splice: splice keeps pooled
			// pipes open, which the fd-leak check would report.
			wg.Go(func() { _, _ = io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c}); c.Close() })
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
}

// echoConn is an open connection to an echo server.
type echoConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialEcho(t *testing.T, ns *testutil.NetNS, addr string) *echoConn {
	t.Helper()
	var c net.Conn
	if err := ns.Do(func() (err error) { c, err = net.DialTimeout("tcp", addr, connectTimeout); return err }); err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &echoConn{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and waits (bounded) for it to come back.
func (e *echoConn) roundTrip(line string) error {
	_ = e.c.SetDeadline(time.Now().Add(connectTimeout))
	if _, err := fmt.Fprintln(e.c, line); err != nil {
		return err
	}
	got, err := e.r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		return fmt.Errorf("echoed %q, want %q", got, line)
	}
	return nil
}

// ruleCounter returns the packets counted on the rule with this text.
func (f *fw) ruleCounter(t *testing.T, text string) uint64 {
	t.Helper()
	return f.list().rule(t, text).Counters.Packets
}

// TestStatefulHostPolicy: the classic host policy with xdpfw alone. ssh
// comes in (and a 1 MB transfer over it completes, then the connection
// closes), other ports and pings are dropped, connections the host opens
// get their replies (TCP, UDP, ping; both families), and a crafted FIN for
// no connection is INVALID and dropped.
func TestStatefulHostPolicy(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveEcho(t, l.srv, 22)
	serveTCP(t, l.srv, 8080)
	serveTCP(t, l.cli, 9000)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "host.rules", classicPolicy...))

	// Incoming: ssh yes (new connections, both families), 8080 and ping no.
	for _, a := range []string{l.srv4, l.srv6} {
		c := dialEcho(t, l.cli, hostPort(a, 22))
		big := strings.Repeat("x", 1000)
		for i := 0; i < 1000; i++ { // about 1 MB each way
			if err := c.roundTrip(fmt.Sprintf("%d %s", i, big)); err != nil {
				t.Fatalf("ssh to %s, round trip %d: %v", a, i, err)
			}
		}
		if err := c.c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	checkTCP(t, "policy", tcpProbe{from: l.cli, addr: hostPort(l.srv4, 8080)}, tcpProbe{from: l.cli, addr: hostPort(l.srv6, 8080)})
	checkPing(t, "incoming ping", l.cli, l.srv4, false)

	// Outgoing: the host's own connections get their replies.
	checkTCP(t, "host connects out",
		tcpProbe{from: l.srv, addr: hostPort(l.cli4, 9000), ok: true},
		tcpProbe{from: l.srv, addr: hostPort(l.cli6, 9000), ok: true})
	checkPing(t, "host pings out", l.srv, l.cli4, true)
	checkPing(t, "host pings out", l.srv, l.cli6, true)
	for _, a := range []string{l.cli4, l.cli6} {
		if err := udpExchange(t, l.cli, l.srv, a); err != nil {
			t.Errorf("UDP request from the host to %s: %v", a, err)
		}
	}

	// The connections are in the table; both directions counted.
	var conns []struct {
		Proto   uint8     `json:"proto"`
		Src     string    `json:"src"`
		Dst     string    `json:"dst"`
		State   string    `json:"state"`
		Packets [2]uint64 `json:"packets"`
	}
	f.decode(&conns, "conntrack", "list", "--json")
	seen := map[string]bool{}
	for _, c := range conns {
		if c.Packets[0] > 0 && c.Packets[1] > 0 {
			seen[fmt.Sprintf("%d %s", c.Proto, c.Dst)] = true
		}
	}
	for _, want := range []string{"6 " + hostPort(l.srv4, 22), "6 " + hostPort(l.cli4, 9000), "17 " + hostPort(l.cli4, 5300)} {
		if !seen[want] {
			t.Errorf("conntrack list lacks a two-way %s: %+v", want, conns)
		}
	}

	// A crafted FIN for no connection: INVALID, dropped, counted. (A bare
	// ACK would be picked up, NEW, as in Linux: TestPickupOnLoad.)
	const invalidRule = "-A INPUT -m conntrack --ctstate INVALID -j DROP"
	before := f.ruleCounter(t, invalidRule)
	sendCrafted(t, l, &packet.Packet{Src: netip.MustParseAddr(l.cli4), Dst: netip.MustParseAddr(l.srv4),
		Proto: packet.ProtoTCP, SPort: 45000, DPort: 22, TCPFlags: packet.TCPFin | packet.TCPAck})
	if !poll(t.Context(), 5*time.Second, func() bool { return f.ruleCounter(t, invalidRule) == before+1 }) {
		t.Errorf("crafted ACK: INVALID rule counted %d, want %d", f.ruleCounter(t, invalidRule), before+1)
	}
	r := f.mustRun("conntrack", "stats")
	if !strings.Contains(r.stdout, "invalid") {
		t.Errorf("conntrack stats: %s", r)
	}
}

// udpExchange has a server in cli answer one datagram the host (srv) sends
// to addr:5300, and reports whether the answer came back.
func udpExchange(t *testing.T, cli, srv *testutil.NetNS, addr string) error {
	t.Helper()
	var pc net.PacketConn
	if err := cli.Do(func() (err error) { pc, err = net.ListenPacket("udp", ":5300"); return err }); err != nil {
		return err
	}
	defer pc.Close()
	go func() {
		b := make([]byte, 100)
		_ = pc.SetDeadline(time.Now().Add(connectTimeout))
		n, from, err := pc.ReadFrom(b)
		if err == nil {
			_, _ = pc.WriteTo(b[:n], from)
		}
	}()
	return srv.Do(func() error {
		c, err := net.Dial("udp", hostPort(addr, 5300))
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(connectTimeout))
		if _, err := c.Write([]byte("question")); err != nil {
			return err
		}
		b := make([]byte, 100)
		n, err := c.Read(b)
		if err != nil {
			return err
		}
		if string(b[:n]) != "question" {
			return fmt.Errorf("answer %q", b[:n])
		}
		return nil
	})
}

// sendCrafted puts frames on the wire from the client end, addressed to
// the server end's MAC, through an AF_PACKET socket.
func sendCrafted(t *testing.T, l *link, pkts ...*packet.Packet) {
	t.Helper()
	var srvMAC, cliMAC net.HardwareAddr
	_ = l.srv.Do(func() error {
		i, err := net.InterfaceByName(l.srvIf)
		if err == nil {
			srvMAC = i.HardwareAddr
		}
		return err
	})
	_ = l.cli.Do(func() error {
		i, err := net.InterfaceByName(l.cliIf)
		if err == nil {
			cliMAC = i.HardwareAddr
		}
		return err
	})
	frames := make([][]byte, len(pkts))
	for i, p := range pkts {
		copy(p.SrcMAC[:], cliMAC)
		copy(p.DstMAC[:], srvMAC)
		frames[i] = p.Bytes()
	}
	sendFrames(t, l, frames...)
}

// sendFrames puts frames on the wire from the client end of l, as they
// are, through an AF_PACKET socket.
func sendFrames(t *testing.T, l *link, frames ...[]byte) {
	t.Helper()
	err := l.cli.Do(func() error {
		i, err := net.InterfaceByName(l.cliIf)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, f := range frames {
			// ENOBUFS: the device's queue is full for now (a flood on a
			// loaded machine); the frame goes again once it drains,
			// within a bound
			err := unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: i.Index})
			for try := 0; errors.Is(err, unix.ENOBUFS) && try < 1000; try++ {
				time.Sleep(time.Millisecond)
				err = unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: i.Index})
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending crafted frames: %v", err)
	}
}

// TestConntrackTableFullUnderFlood: a small table, a SYN flood from random
// sources to the open ssh port fills it many times over; with no daemon,
// established connections keep passing both ways throughout, the flood's
// entries (never assured) make room for each other (early drop, counted),
// and a real client connects during and after the flood. Then a flush
// under the live streams: they carry on, picked up mid-stream.
func TestConntrackTableFullUnderFlood(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveEcho(t, l.srv, 22)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, "--ct-max", "256", writeRules(t, "host.rules", classicPolicy...))

	est := []*echoConn{dialEcho(t, l.cli, hostPort(l.srv4, 22)), dialEcho(t, l.cli, hostPort(l.srv6, 22))}
	var flood []*packet.Packet
	for i := 0; i < 2000; i++ {
		flood = append(flood, &packet.Packet{Src: netip.AddrFrom4([4]byte{10, 200, 0, byte(100 + i%150)}),
			Dst: netip.MustParseAddr(l.srv4), Proto: packet.ProtoTCP, SPort: uint16(1024 + i), DPort: 22, TCPFlags: packet.TCPSyn})
	}
	for round := 0; round < 4; round++ {
		sendCrafted(t, l, flood[round*500:(round+1)*500]...)
		for i, c := range est {
			if err := c.roundTrip(fmt.Sprintf("round %d", round)); err != nil {
				t.Fatalf("established connection %d during the flood: %v", i, err)
			}
		}
		if round == 1 { // a real client, in the middle of the flood
			checkTCP(t, "during the flood", tcpProbe{from: l.cli, addr: hostPort(l.srv4, 22), ok: true})
		}
	}
	var st struct {
		Entries  int               `json:"entries"`
		Max      int               `json:"max"`
		Counters map[string]uint64 `json:"counters"`
	}
	f.decode(&st, "conntrack", "stats", "--json")
	if st.Max != 256 || st.Entries > 256 || st.Counters["early_drop"] < 2000-256 || st.Counters["table_full"] != 0 {
		t.Fatalf("conntrack stats %+v: want a table of 256, the flood's entries evicted (early_drop), nothing refused", st)
	}
	// A new connection after the flood gets in, both families.
	checkTCP(t, "after the flood", tcpProbe{from: l.cli, addr: hostPort(l.srv4, 22), ok: true},
		tcpProbe{from: l.cli, addr: hostPort(l.srv6, 22), ok: true})
	var reasons struct {
		Reasons map[string]struct{ Packets uint64 } `json:"reasons"`
	}
	r := f.mustRun("status", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &reasons); err != nil {
		t.Fatal(err)
	}
	if n := reasons.Reasons["conntrack-full"].Packets; n != 0 {
		t.Errorf("status: %d conntrack-full drops, want none: %s", n, r.stdout)
	}
	// Flushing the table under the live streams: their next packets pick
	// them up mid-stream (NEW, accepted by the ssh rule), they carry on.
	f.mustRun("conntrack", "flush")
	for i, c := range est {
		if err := c.roundTrip("after the flush"); err != nil {
			t.Fatalf("established connection %d after a flush: %v (not picked up)", i, err)
		}
	}
	f.decode(&st, "conntrack", "stats", "--json")
	if st.Counters["picked_up"] < 2 {
		t.Errorf("conntrack stats %+v: want the 2 connections picked up", st)
	}
}

// TestPickupOnLoad: the quick start on a remote machine. A TCP stream open
// before the firewall (the operator's ssh session) survives the first
// stateful load; with --ct-tcp-pickup strict a stream the table does not
// know is cut (its packets are INVALID), and status shows the setting.
func TestPickupOnLoad(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveEcho(t, l.srv, 22)
	f := newFW(t, l.srv)
	ssh := dialEcho(t, l.cli, hostPort(l.srv4, 22))
	if err := ssh.roundTrip("before the firewall"); err != nil {
		t.Fatal(err)
	}
	file := writeRules(t, "host.rules", classicPolicy...)
	f.mustRun("load", "-i", l.srvIf, file)
	for i := 0; i < 3; i++ {
		if err := ssh.roundTrip(fmt.Sprintf("after load %d", i)); err != nil {
			t.Fatalf("the session open before load, after it: %v (load cut it)", err)
		}
	}
	if r := f.mustRun("status"); !strings.Contains(r.stdout, "TCP pickup loose") {
		t.Errorf("status does not show the pickup in force: %s", r.stdout)
	}
	f.mustRun("apply", "--ct-tcp-pickup", "strict", file)
	f.mustRun("conntrack", "flush")
	if r := f.mustRun("status"); !strings.Contains(r.stdout, "TCP pickup strict") {
		t.Errorf("status does not show strict pickup: %s", r.stdout)
	}
	if err := ssh.roundTrip("strict, after a flush"); err == nil {
		t.Errorf("strict pickup: a stream the table does not know still passes")
	}
	if r := f.run("apply", "--ct-tcp-pickup", "maybe", file); r.code != 2 {
		t.Errorf("--ct-tcp-pickup maybe: exit %d, want 2 (bad flag value): %s", r.code, r)
	}
}

// TestOutputChainAttachModes: the OUTPUT chain is enforced whether the
// egress program is attached with tcx (a pinned link) or, as on kernels
// before 6.6, as a clsact filter; detach removes either.
func TestOutputChainAttachModes(t *testing.T) {
	testutil.RequireRoot(t)
	for _, how := range []string{"tcx", "clsact"} {
		t.Run(how, func(t *testing.T) {
			t.Setenv("XDPFW_TC_ATTACH", how)
			l := newPair(t)
			serveTCP(t, l.cli, 9000, 9001)
			f := newFW(t, l.srv)
			f.mustRun("load", "-i", l.srvIf, writeRules(t, "out.rules",
				"-A OUTPUT -p tcp --dport 9001 -j DROP", "-A OUTPUT -j ACCEPT"))
			checkTCP(t, how,
				tcpProbe{from: l.srv, addr: hostPort(l.cli4, 9000), ok: true},
				tcpProbe{from: l.srv, addr: hostPort(l.cli4, 9001)},
				tcpProbe{from: l.srv, addr: hostPort(l.cli6, 9001)})
			if n := f.ruleCounter(t, "-A OUTPUT -p tcp --dport 9001 -j DROP"); n == 0 {
				t.Errorf("the OUTPUT DROP rule counted nothing")
			}
			filters := func() string {
				out, _ := l.srv.Exec(t.Context(), "tc", "filter", "show", "dev", l.srvIf, "egress")
				return string(out)
			}
			hasPin := false
			for _, p := range f.pins() {
				hasPin = hasPin || strings.HasPrefix(p, "link_tc_")
			}
			switch how {
			case "tcx":
				if !hasPin || strings.Contains(filters(), "xdpfw_egress") {
					t.Errorf("tcx: want a pinned link_tc_ and no clsact filter; pins %v, filters %q", f.pins(), filters())
				}
			case "clsact":
				if hasPin || !strings.Contains(filters(), "xdpfw_egress") {
					t.Errorf("clsact: want the xdpfw_egress filter and no link pin; pins %v, filters %q", f.pins(), filters())
				}
			}
			f.mustRun("detach", "-i", l.srvIf)
			if strings.Contains(filters(), "xdpfw_egress") {
				t.Errorf("after detach the clsact filter is still there: %s", filters())
			}
			checkTCP(t, how+" detached", tcpProbe{from: l.srv, addr: hostPort(l.cli4, 9001), ok: true})
		})
	}
}
