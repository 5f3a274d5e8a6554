package e2e

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/testutil"
)

// recentTTLRules list from INPUT and FORWARD into one list, and look it
// up there with --rttl.
var recentTTLRules = []string{
	":INPUT ACCEPT [0:0]",
	":FORWARD ACCEPT [0:0]",
	":OUTPUT ACCEPT [0:0]",
	"-A INPUT -p udp -m udp --dport 7001 -m recent --set --name T --mask 255.255.255.255 --rsource -j ACCEPT",
	"-A INPUT -p udp -m udp --dport 7002 -m recent --rcheck --rttl --name T --mask 255.255.255.255 --rsource -j ACCEPT",
	"-A INPUT -p udp -m udp --dport 7003 -m recent --update --rttl --name T --mask 255.255.255.255 --rsource -j ACCEPT",
	"-A INPUT -p udp -j ACCEPT",
	"-A FORWARD -p udp -m udp --dport 7001 -m recent --set --name T --mask 255.255.255.255 --rsource -j ACCEPT",
	"-A FORWARD -p udp -m udp --dport 7002 -m recent --rcheck --rttl --name T --mask 255.255.255.255 --rsource -j ACCEPT",
	"-A FORWARD -p udp -m udp --dport 7003 -m recent --update --rttl --name T --mask 255.255.255.255 --rsource -j ACCEPT",
	"-A FORWARD -p udp -j ACCEPT",
}

// TestRecentTTLAgreesWithIptables: on a router, datagrams of different
// TTLs from one address, one at a time, to the router itself (INPUT) and
// through it (FORWARD), through the kernel's iptables (legacy and
// nf_tables back ends, where installed) and through xdpfw, give every
// rule the same packet count: --rttl finds the address only for the TTL
// of the packet that set or last updated it, as it arrived (FORWARD's
// decremented TTL plus the one xt_recent adds back).
func TestRecentTTLAgreesWithIptables(t *testing.T) {
	testutil.RequireRoot(t)
	// to the router (r) or through it (f), a port, the sender's TTL
	probes := []struct {
		to   byte
		port int
		ttl  int
	}{
		{'r', 7001, 64}, // listed with TTL 64
		{'f', 7002, 64}, // FORWARD sees 63 and adds one back: found
		{'f', 7002, 63},
		{'r', 7002, 63},
		{'r', 7002, 64},
		{'f', 7001, 50}, // --set of a listed address: TTL 50
		{'r', 7002, 64},
		{'r', 7003, 50}, // a matching --update: TTL 50
		{'f', 7003, 49},
		{'f', 7003, 50},
	}
	run := func(t *testing.T, load func(x *router)) *router {
		x := newRouter(t)
		sinks := map[byte]map[int]*udpSink{'r': {}, 'f': {}}
		for _, port := range []int{7001, 7002, 7003} {
			sinks['r'][port] = newUDPSink(t, x.r, port)
			sinks['f'][port] = newUDPSink(t, x.b, port)
		}
		load(x)
		snd := newUDPSender(t, x.a, "")
		for i, p := range probes {
			setTTL(t, snd.conn.(syscall.Conn), p.ttl)
			addr := map[byte]string{'r': x.la.srv4, 'f': x.lb.cli4}[p.to]
			tag := fmt.Sprintf("p%d", i)
			snd.send(t, hostPort(addr, p.port), tag, 0, 1)
			if n := sinks[p.to][p.port].wait(t, tag, 1); n != 1 {
				t.Fatalf("probe %d (%c %d ttl %d) did not arrive", i, p.to, p.port, p.ttl)
			}
		}
		return x
	}
	// INPUT: 7001 ttl 64; 7002 ttl 64 once; 7003 ttl 50; the rest.
	// FORWARD: 7001; 7002 ttl 64; 7003 ttl 50; 7002 ttl 63, 7003 ttl 49.
	const expect = "INPUT [1 1 1 2]; FORWARD [1 1 1 2]"
	count := func(n func(chain string) []uint64) string {
		return fmt.Sprintf("INPUT %v; FORWARD %v", n("INPUT"), n("FORWARD"))
	}
	for _, bin := range []string{"iptables-legacy", "iptables-nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Logf("%s not installed: skipped", bin)
			continue
		}
		t.Run(bin, func(t *testing.T) {
			x := run(t, func(x *router) {
				mustRestore(t, x.r, bin, filterText(recentTTLRules))
			})
			out, err := x.r.Exec(t.Context(), bin+"-save", "-c", "-t", "filter")
			if err != nil {
				t.Fatalf("%s-save: %v\n%s", bin, err, out)
			}
			rs, _ := parseSave(t, string(out))
			got := count(func(chain string) []uint64 {
				var n []uint64
				for _, r := range rs[chain] {
					n = append(n, r.pkts)
				}
				return n
			})
			if got != expect {
				t.Errorf("%s counted\n  %s\nwant\n  %s", bin, got, expect)
			}
		})
	}
	t.Run("xdpfw", func(t *testing.T) {
		var f *fw
		run(t, func(x *router) {
			f = newFW(t, x.r)
			f.mustRun("load", "-i", "ra", writeRules(t, "recent-ttl.rules", recentTTLRules...))
		})
		lst := f.list()
		got := count(func(chain string) []uint64 {
			var n []uint64
			for _, r := range lst.Rules {
				if r.Chain == chain {
					n = append(n, r.Counters.Packets)
				}
			}
			return n
		})
		if got != expect {
			t.Errorf("xdpfw counted\n  %s\nwant\n  %s", got, expect)
		}
	})
}

// setTTL sets the TTL of the datagrams socket c sends (IP_TTL).
func setTTL(t *testing.T, c syscall.Conn, ttl int) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err == nil {
		cerr := raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TTL, ttl) })
		err = errors.Join(err, cerr)
	}
	if err != nil {
		t.Fatalf("IP_TTL %d: %v", ttl, err)
	}
}
