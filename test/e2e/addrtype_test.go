package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// sendUDP sends n datagrams from ns out of dev to dst:port, broadcast and
// multicast allowed (bound to the device: no route needed).
func sendUDP(t *testing.T, ns *testutil.NetNS, dev, dst string, port, n int) {
	t.Helper()
	err := ns.Do(func() error {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1); serr == nil {
					serr = syscall.BindToDevice(int(fd), dev)
				}
			})
			if err != nil {
				return err
			}
			return serr
		}}
		c, err := lc.ListenPacket(context.Background(), "udp4", ":0")
		if err != nil {
			return err
		}
		defer c.Close()
		for i := range n {
			if _, err := c.WriteTo([]byte(fmt.Sprint("addrtype ", i)), &net.UDPAddr{IP: net.ParseIP(dst), Port: port}); err != nil {
				return fmt.Errorf("to %s: %w", dst, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending from %s: %v", ns, err)
	}
}

// iptablesCounts is the packet counter of each rule of chain, in order
// (iptables-save -c).
func iptablesCounts(t *testing.T, ns *testutil.NetNS, chain string) []uint64 {
	t.Helper()
	return saveCounts(t, ns, chain, "iptables-save", "-c")
}

// countsAsIptables is the oracle of a rule file's INPUT counters: it loads
// ruleText into iptables on l's server, runs send, and checks that the rules
// counted want (else the test is wrong); then it clears iptables, loads the
// text into xdpfw on the server's device (from a file name), runs send again
// and checks that xdpfw's rules count the same. It returns the firewall, the
// file's path and a reader of xdpfw's INPUT counters.
func countsAsIptables(t *testing.T, l *link, name, ruleText string, send func(), want []uint64) (*fw, string, func() []uint64) {
	t.Helper()
	iptablesRestoreText(t, l.srv, ruleText)
	send()
	var got []uint64
	poll(t.Context(), arriveTimeout, func() bool {
		got = iptablesCounts(t, l.srv, "INPUT")
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("iptables counts %v, want %v: the oracle disagrees with the test", got, want)
	}
	iptablesRestoreText(t, l.srv, "")

	f := newFW(t, l.srv)
	path := writeRules(t, name, ruleText)
	f.mustRun("load", "-i", l.srvIf, path)
	send()
	counts := func() []uint64 {
		var c []uint64
		for _, r := range f.list().Rules {
			if r.Chain == "INPUT" {
				c = append(c, r.Counters.Packets)
			}
		}
		return c
	}
	poll(t.Context(), arriveTimeout, func() bool { got = counts(); return fmt.Sprint(got) == fmt.Sprint(want) })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("xdpfw counts %v, iptables' %v", got, want)
	}
	return f, path, counts
}

// saveCounts is iptablesCounts from the output of the command save (with
// args: another iptables-save, a table).
func saveCounts(t *testing.T, ns *testutil.NetNS, chain, save string, args ...string) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	out, err := ns.Exec(ctx, save, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", save, err, out)
	}
	var n []uint64
	re := regexp.MustCompile(`^\[(\d+):\d+\] -A ` + chain + ` `)
	for _, line := range strings.Split(string(out), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseUint(m[1], 10, 64)
			n = append(n, v)
		}
	}
	return n
}

// TestAddrType: -m addrtype with real packets, against iptables in the
// same namespace: datagrams to the host's address (LOCAL), to its subnet's
// broadcast address and 255.255.255.255 (BROADCAST, the first a route of
// the local table, the second a fixed rule), to 224.0.0.1 (MULTICAST);
// --limit-iface-in; each rule's counter must be iptables'. Then an address
// added while loaded counts as LOCAL once apply has refreshed the table
// (the daemon does that on the kernel's route event; a one-shot load keeps
// the table it read).
func TestAddrType(t *testing.T) {
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		t.Skip("iptables-restore is not installed: no oracle")
	}
	l := newPair(t)
	const port = 7000
	ruleText := strings.Join([]string{
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		fmt.Sprintf("-A INPUT -p udp -m udp --dport %d -m addrtype --src-type LOCAL -j ACCEPT", port),
		fmt.Sprintf("-A INPUT -p udp -m udp --dport %d -m addrtype --dst-type LOCAL --limit-iface-in -j ACCEPT", port),
		fmt.Sprintf("-A INPUT -p udp -m udp --dport %d -m addrtype --dst-type BROADCAST -j ACCEPT", port),
		fmt.Sprintf("-A INPUT -p udp -m udp --dport %d -m addrtype --dst-type MULTICAST -j ACCEPT", port),
		fmt.Sprintf("-A INPUT -p udp -m udp --dport %d -m addrtype ! --dst-type UNICAST,LOCAL,BROADCAST,MULTICAST -j ACCEPT", port),
		fmt.Sprintf("-A INPUT -p udp -m udp --dport %d -j ACCEPT", port),
		"COMMIT",
	}, "\n") + "\n"
	send := func() {
		sendUDP(t, l.cli, l.cliIf, l.srv4, port, 3)         // LOCAL
		sendUDP(t, l.cli, l.cliIf, "10.200.0.255", port, 2) // the subnet's broadcast
		sendUDP(t, l.cli, l.cliIf, "255.255.255.255", port, 1)
		sendUDP(t, l.cli, l.cliIf, "224.0.0.1", port, 4) // all hosts: every host is in the group
	}
	f, path, counts := countsAsIptables(t, l, "addrtype.rules", ruleText, send, []uint64{0, 3, 3, 4, 0, 0})
	var got []uint64

	// 10.200.0.77 becomes this host's: LOCAL once the table is refreshed
	// (here: by apply; the daemon does it on the kernel's event).
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := l.srv.Exec(ctx, "ip", "addr", "add", "10.200.0.77/32", "dev", l.srvIf); err != nil {
		t.Fatalf("ip addr add: %v\n%s", err, out)
	}
	f.mustRun("apply", path)
	sendUDP(t, l.cli, l.cliIf, "10.200.0.77", port, 2)
	wantFW := []uint64{0, 5, 3, 4, 0, 0}
	poll(t.Context(), arriveTimeout, func() bool { got = counts(); return fmt.Sprint(got) == fmt.Sprint(wantFW) })
	if fmt.Sprint(got) != fmt.Sprint(wantFW) {
		t.Fatalf("after the address was added and applied: counts %v, want %v", got, wantFW)
	}

	// With the daemon, the copy follows the kernel's table by itself: an
	// address added while it runs counts as LOCAL without any apply.
	cfg := filepath.Join(t.TempDir(), "xdpfw.yaml")
	writeAtomic(t, cfg, "interfaces: ["+l.srvIf+"]", "rules: "+path)
	d := f.startDaemon(cfg)
	before := counts()[1]
	if out, err := l.srv.Exec(ctx, "ip", "addr", "add", "10.200.0.78/32", "dev", l.srvIf); err != nil {
		t.Fatalf("ip addr add: %v\n%s", err, out)
	}
	if !poll(t.Context(), arriveTimeout, func() bool {
		sendUDP(t, l.cli, l.cliIf, "10.200.0.78", port, 1)
		return counts()[1] > before
	}) {
		t.Fatalf("10.200.0.78 never counted as LOCAL with the daemon running: counts %v; its log:\n%s", counts(), d.stderr)
	}
}
