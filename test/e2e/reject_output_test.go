package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestRejectOutput's ports on the peer (each with a listener, so every
// refusal the local sockets see comes from xdpfw's answer, not from the
// peer's kernel) and the OUTPUT rules of the firewalled host.
const (
	outPortOK, outPortRST, outPortICMP, outPortHost, outPortUDP, outPortAdmin, outPortNet = 7000, 7001, 7002, 7003, 7004, 7005, 7006
)

var outRules = []string{
	// a stateful host: the answers must reach the local sockets whatever
	// INPUT says (they are never INPUT traffic)
	"-P INPUT DROP",
	"-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
	"-A INPUT -p ipv6-icmp --icmpv6-type 135 -j ACCEPT",
	"-A INPUT -p ipv6-icmp --icmpv6-type 136 -j ACCEPT",
	"-A OUTPUT -p tcp --dport 7001 -j REJECT --reject-with tcp-reset",
	"-A OUTPUT -p tcp --dport 7002 -j REJECT",
	"-A OUTPUT -4 -p tcp --dport 7003 -j REJECT --reject-with icmp-host-unreachable",
	"-A OUTPUT -6 -p tcp --dport 7003 -j REJECT --reject-with icmp6-addr-unreachable",
	"-A OUTPUT -p udp --dport 7004 -j REJECT",
	"-A OUTPUT -4 -p udp --dport 7005 -j REJECT --reject-with icmp-admin-prohibited",
	"-A OUTPUT -6 -p udp --dport 7005 -j REJECT --reject-with icmp6-adm-prohibited",
	"-A OUTPUT -4 -p udp --dport 7006 -j REJECT --reject-with icmp-net-prohibited",
	"-A OUTPUT -6 -p udp --dport 7006 -j REJECT --reject-with icmp6-no-route",
	"-A OUTPUT -4 -p udp --dport 7003 -j REJECT --reject-with icmp-host-unreachable",
	"-A OUTPUT -p icmp --icmp-type 8 -j REJECT --reject-with icmp-host-unreachable",
	"-A OUTPUT -p ipv6-icmp --icmpv6-type 128 -j REJECT --reject-with icmp6-adm-prohibited",
	"-A OUTPUT -j ACCEPT",
}

// TestRejectOutput loads OUTPUT REJECT rules on one end of a veth pair
// and runs real sockets on that host against listeners on the peer: a
// TCP connect refused by tcp-reset fails with ECONNREFUSED at once (no SYN
// retransmission, no timeout); one refused with ICMP fails with the errno
// Linux gives the ICMP code; a connected UDP socket reads that errno after
// one datagram; IPv4 and IPv6. Counters, list, status and trace --out
// agree. Both ways of attaching the egress program are covered, each with
// one XDP mode: tcx with native, clsact with generic (in generic mode the
// XDP program sees what arrives as an skb, the redirected answers
// included, so the stateful INPUT policy above would drop them if they
// were taken for traffic from the peer).
func TestRejectOutput(t *testing.T) {
	testutil.RequireRoot(t)
	for _, c := range []struct{ attach, mode string }{{"tcx", "native"}, {"clsact", "generic"}} {
		t.Run(c.attach+"-"+c.mode, func(t *testing.T) {
			t.Setenv("XDPFW_TC_ATTACH", c.attach)
			l := newPair(t)
			serveTCP(t, l.cli, outPortOK, outPortRST, outPortICMP, outPortHost)
			for _, port := range []int{outPortHost, outPortUDP, outPortAdmin, outPortNet} {
				newUDPSink(t, l.cli, port)
			}
			// Without the firewall everything connects and nothing is refused.
			for _, addr := range []string{l.cli4, l.cli6} {
				for _, port := range []int{outPortOK, outPortRST, outPortICMP, outPortHost} {
					checkTCP(t, "no firewall", tcpProbe{from: l.srv, addr: hostPort(addr, port), ok: true})
				}
				for _, port := range []int{outPortHost, outPortUDP, outPortAdmin, outPortNet} {
					if err := udpProbe(t, l.srv, addr, port, false); err != nil {
						t.Errorf("no firewall: udp to %s: got %v, want no error", hostPort(addr, port), err)
					}
				}
			}
			if t.Failed() {
				t.FailNow()
			}

			f := newFW(t, l.srv)
			r := f.mustRun("load", "--mode", c.mode, "-i", l.srvIf, writeRules(t, "out.rules", outRules...))
			if !strings.Contains(r.stdout, "("+c.mode+" mode)") {
				t.Fatalf("load: want %s mode: %s", c.mode, r)
			}
			checkOutputRejects(t, f, l)
		})
	}
}

// checkOutputRejects probes every OUTPUT REJECT rule of TestRejectOutput
// from the firewalled host.
func checkOutputRejects(t *testing.T, f *fw, l *link) {
	t.Helper()
	checkTCP(t, "accepted in OUTPUT", tcpProbe{from: l.srv, addr: hostPort(l.cli4, outPortOK), ok: true},
		tcpProbe{from: l.srv, addr: hostPort(l.cli6, outPortOK), ok: true})

	// A RST refuses a connect at once: within connectTimeout, which is
	// shorter than the first SYN retransmission (1 s), and with
	// ECONNREFUSED, not a timeout. An ICMP error that comes back while
	// connect() still holds the socket is only recorded (Linux's
	// sk_err_soft; the answer comes back inside the call here); the SYN
	// retransmitted a second later draws the one that fails the connect.
	for _, c := range []struct {
		addr  string
		port  int
		want  syscall.Errno
		limit time.Duration
	}{
		{l.cli4, outPortRST, syscall.ECONNREFUSED, connectTimeout}, // TCP RST
		{l.cli6, outPortRST, syscall.ECONNREFUSED, connectTimeout}, // TCP RST over IPv6
		{l.cli4, outPortICMP, syscall.ECONNREFUSED, icmpConnLimit}, // ICMP 3/3
		{l.cli6, outPortICMP, syscall.ECONNREFUSED, icmpConnLimit}, // ICMPv6 1/4
		{l.cli4, outPortHost, syscall.EHOSTUNREACH, icmpConnLimit}, // ICMP 3/1
		{l.cli6, outPortHost, syscall.EHOSTUNREACH, icmpConnLimit}, // ICMPv6 1/3
	} {
		wantConnectErr(t, l.srv, hostPort(c.addr, c.port), c.want, c.limit)
	}
	// A connected UDP socket reads the error after one datagram. Linux
	// reports ICMP codes it deems soft (net and host unreachable,
	// ICMPv6 no route and address unreachable) only to sockets with
	// IP_RECVERR / IPV6_RECVERR.
	for _, c := range []struct {
		addr    string
		port    int
		recverr bool
		want    syscall.Errno
	}{
		{l.cli4, outPortUDP, false, syscall.ECONNREFUSED},   // ICMP 3/3
		{l.cli6, outPortUDP, false, syscall.ECONNREFUSED},   // ICMPv6 1/4
		{l.cli4, outPortAdmin, false, syscall.EHOSTUNREACH}, // ICMP 3/13
		{l.cli6, outPortAdmin, false, syscall.EACCES},       // ICMPv6 1/1
		{l.cli4, outPortNet, false, syscall.ENETUNREACH},    // ICMP 3/9
		{l.cli4, outPortHost, true, syscall.EHOSTUNREACH},   // ICMP 3/1
		{l.cli6, outPortNet, true, syscall.ENETUNREACH},     // ICMPv6 1/0
	} {
		if err := udpProbe(t, l.srv, c.addr, c.port, c.recverr); !errors.Is(err, c.want) {
			t.Errorf("udp to %s (recverr %v): got %v, want %v", hostPort(c.addr, c.port), c.recverr, err, c.want)
		}
	}

	// ping's packets carry a checksum computed in software, and so does
	// the answer to them (the kernel keeps a TCP or UDP packet's offload
	// state, CHECKSUM_PARTIAL, in the answer, docs/reject.md): the kernel
	// verifies the answer's ICMP checksum before ping reads the error.
	for _, c := range []struct{ addr, want string }{
		{l.cli4, "Destination Host Unreachable"},
		{l.cli6, "Destination unreachable: Administratively prohibited"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
		out, err := l.srv.Exec(ctx, "ping", "-c", "1", "-W", "1", c.addr)
		cancel()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("ping %s: want it to fail with %q, got %v:\n%s", c.addr, c.want, err, out)
		}
	}

	// trace --out names the answer (built, reported, not sent).
	tr, r := f.trace("--out", "-p", "tcp", "--src", l.srv4, "--dst", l.cli4, "--dport", fmt.Sprint(outPortRST))
	if len(tr) != 1 || tr[0].Verdict != "TC_ACT_REDIRECT" || tr[0].Chain != "OUTPUT" || tr[0].Action != "REJECT" ||
		tr[0].Reason != "rule-reject" || tr[0].Reject != "tcp-reset" || tr[0].RuleNum != 1 {
		t.Errorf("trace --out of a SYN to port %d: want TC_ACT_REDIRECT by OUTPUT rule 1 (REJECT tcp-reset, rule-reject): %s", outPortRST, r)
	}
	r = f.mustRun("trace", "--out", "-p", "udp", "--src", l.srv6, "--dst", l.cli6, "--dport", fmt.Sprint(outPortAdmin))
	if !strings.Contains(r.stdout, "-> TC_ACT_REDIRECT by OUTPUT rule 7: ") ||
		!strings.Contains(r.stdout, "answered: icmp6-adm-prohibited, to this host's own socket") {
		t.Errorf("trace --out of a datagram to port %d: want it answered by OUTPUT rule 7: %s", outPortAdmin, r)
	}
	r = f.mustRun("trace", "--out", "-p", "tcp", "--src", l.srv4, "--dst", l.cli4, "--dport", fmt.Sprint(outPortRST), "--tcp-flags", "RST")
	if !strings.Contains(r.stdout, "-> TC_ACT_SHOT by OUTPUT rule 1: ") || !strings.Contains(r.stdout, "not answered, dropped: reject-unanswered-error") {
		t.Errorf("trace --out of a RST to port %d: want it dropped unanswered: %s", outPortRST, r)
	}

	list := f.list()
	for _, rule := range outRules {
		if !strings.Contains(rule, "REJECT") {
			continue
		}
		if lr := list.rule(t, rule); lr.Counters.Packets < 1 {
			t.Errorf("rule %q: %d packets; want counted:\n%s", rule, lr.Counters.Packets, list.raw)
		}
	}
	// 6 TCP probes (those refused by ICMP twice: the SYN and its
	// retransmission), 7 UDP probes and 2 pings answered at least (traces
	// count nothing).
	st := f.status()
	if n := st.Reasons["rule-reject"].Packets; n < 15 {
		t.Errorf("status counts %d answered REJECTs, want at least 15:\n%s", n, st.raw)
	}
	for _, reason := range []string{"reject-rate-limited", "reject-failed"} {
		if n := st.Reasons[reason].Packets; n != 0 {
			t.Errorf("status counts %d %s, want none:\n%s", n, reason, st.raw)
		}
	}
}

// udpProbe sends a datagram on a UDP socket connected from ns to
// addr:port (with IP_RECVERR / IPV6_RECVERR when recverr) and reads. It
// returns nil when nothing comes back (the peer's sink took the datagram),
// else the error the kernel reports for the ICMP error that came back.
func udpProbe(t *testing.T, ns *testutil.NetNS, addr string, port int, recverr bool) error {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() error {
		conn, err := net.Dial("udp", hostPort(addr, port))
		if err != nil {
			return err
		}
		c = conn.(*net.UDPConn)
		return nil
	}); err != nil {
		t.Fatalf("udp socket to %s: %v", hostPort(addr, port), err)
	}
	defer c.Close()
	if recverr {
		raw, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			if strings.Contains(addr, ":") {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1)
			} else {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVERR, 1)
			}
		}); err != nil || serr != nil {
			t.Fatalf("setting IP_RECVERR: %v %v", err, serr)
		}
	}
	if _, err := fmt.Fprintf(c, "probe 0"); err != nil {
		return err // the error of an earlier datagram (there is none) or of this one
	}
	if err := c.SetReadDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 64))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil // nothing came back: the sink took it
	}
	return err
}
