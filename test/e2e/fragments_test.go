package e2e

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestFragmentedDatagrams: a 3,000-byte UDP datagram, which the sender's
// stack cuts into three fragments (MTU 1500, IP_PMTUDISC_DONT), meets the
// same fate with xdpfw as with real iptables (legacy and nft back ends, in
// place of xdpfw in a namespace of their own): it reaches its socket
// through -P INPUT DROP + --dport N ACCEPT (iptables sees it reassembled;
// xdpfw gives every fragment its first fragment's verdict), a rule that
// drops its port drops all of it, and -f matches nothing in INPUT. OUTPUT
// (tc egress: the stack fragments after the filter) the same.
func TestFragmentedDatagrams(t *testing.T) {
	const port, marker = 5300, 5301 // the datagrams'; a small one after them, always let through
	cases := []struct {
		name  string
		out   bool // the firewalled namespace sends (OUTPUT); else it receives (INPUT)
		rules []string
		want  bool
	}{
		{"INPUT: accepted port behind a DROP policy", false, []string{"-P INPUT DROP",
			fmt.Sprintf("-A INPUT -p udp --dport %d -j ACCEPT", port)}, true},
		{"INPUT: a rule dropping the port", false, []string{
			fmt.Sprintf("-A INPUT -p udp --dport %d -j DROP", port)}, false},
		{"INPUT: -f matches nothing", false, []string{"-A INPUT -f -j DROP"}, true},
		{"OUTPUT: accepted port behind a DROP policy", true, []string{"-P OUTPUT DROP",
			fmt.Sprintf("-A OUTPUT -p udp --dport %d -j ACCEPT", port)}, true},
		{"OUTPUT: a rule dropping the port", true, []string{
			fmt.Sprintf("-A OUTPUT -p udp --dport %d -j DROP", port)}, false},
	}
	for _, c := range cases {
		chain := "INPUT"
		if c.out {
			chain = "OUTPUT"
		}
		rules := append([]string{fmt.Sprintf("-A %s -p udp --dport %d -j ACCEPT", chain, marker)}, c.rules...)
		for _, backend := range []string{"xdpfw", "iptables-legacy", "iptables-nft"} {
			t.Run(c.name+"/"+backend, func(t *testing.T) {
				l := newPair(t)
				fwNS, fwIf := l.srv, l.srvIf
				sender, receiver, dst := l.cli, l.srv, l.srv4
				if c.out {
					sender, receiver, dst = l.srv, l.cli, l.cli4
				}
				if backend == "xdpfw" {
					newFW(t, fwNS).mustRun("load", "-i", fwIf, writeRules(t, "frag.rules", rules...))
				} else {
					iptablesRestore(t, fwNS, backend, rules)
				}
				sink := newBigSink(t, receiver, port, marker)
				const n = 3
				sendBig(t, sender, dst, port, 3000, n)
				sendBig(t, sender, dst, marker, 10, 1)
				if !poll(t.Context(), arriveTimeout, func() bool { return sink.count(marker) == 1 }) {
					t.Fatalf("the marker after the datagrams never arrived")
				}
				got := sink.count(port)
				want := 0
				if c.want {
					want = n
				}
				if got != want {
					t.Errorf("%s: %d of %d datagrams of 3,000 bytes arrived; want %d", backend, got, n, want)
				}
			})
		}
	}
}

// bigSink counts the UDP datagrams that reach ports in ns, whole (a
// 64 KiB buffer: no datagram is cut).
type bigSink struct {
	mu  sync.Mutex
	got map[int]int // port -> datagrams
}

func newBigSink(t *testing.T, ns *testutil.NetNS, ports ...int) *bigSink {
	t.Helper()
	s := &bigSink{got: map[int]int{}}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the sockets' Close (cleanups run last first)
	for _, p := range ports {
		var pc net.PacketConn
		if err := ns.Do(func() (err error) { pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", p)); return err }); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			buf := make([]byte, 65536)
			for {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
				s.mu.Lock()
				s.got[p]++
				s.mu.Unlock()
			}
		})
		t.Cleanup(func() { pc.Close() })
	}
	return s
}

func (s *bigSink) count(port int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[port]
}

// sendBig sends n datagrams of size bytes from ns to dst:port, which the
// stack fragments where they exceed the MTU (IP_PMTUDISC_DONT: never
// refused for size, never DF). A send OUTPUT refused is not an error.
func sendBig(t *testing.T, ns *testutil.NetNS, dst string, port, size, n int) {
	t.Helper()
	err := ns.Do(func() error {
		c, err := net.Dial("udp4", net.JoinHostPort(dst, fmt.Sprint(port)))
		if err != nil {
			return err
		}
		defer c.Close()
		raw, err := c.(*net.UDPConn).SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DONT)
		}); err != nil {
			return err
		}
		if serr != nil {
			return serr
		}
		for i := 0; i < n; i++ {
			// EPERM: iptables' OUTPUT dropped it and says so to the
			// sender (xdpfw's tc egress drops it silently)
			if _, err := c.Write(make([]byte, size)); err != nil && !errors.Is(err, unix.EPERM) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending %d datagrams of %d bytes to %s:%d: %v", n, size, dst, port, err)
	}
}
