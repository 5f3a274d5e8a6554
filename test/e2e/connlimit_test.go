package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// connLimitOracle limits the connections held open to a port: per
// source address (the default, the form of tor-relay.v4), per source /24,
// and per destination address (upto: the first to each address is
// accepted, the later ones go on to a REJECT). Refusals are TCP resets:
// a refused connect fails at once, nothing is sent again.
var connLimitOracle = []string{
	"-A INPUT -p tcp --syn --dport 7001 -m connlimit --connlimit-above 2 -j REJECT --reject-with tcp-reset",
	"-A INPUT -p tcp --syn --dport 7002 -m connlimit --connlimit-above 2 --connlimit-mask 24 -j REJECT --reject-with tcp-reset",
	"-A INPUT -p tcp --syn --dport 7003 -m connlimit --connlimit-upto 1 --connlimit-daddr -j ACCEPT",
	"-A INPUT -p tcp --syn --dport 7003 -j REJECT --reject-with tcp-reset",
}

// TestConnLimitAgreesWithIptables opens TCP connections one after the
// other and holds them open, through the kernel's iptables (nft and
// legacy) and through xdpfw with the same rules: the same connections are
// refused and every rule counts the same packets. From one address, five
// to port 7001 (2 held, 3 refused), then one of the two reset (CLOSE: not
// counted), and two more (one gets in); from two addresses of one /24, three
// and two to port 7002 (the /24 holds 2); two to each of two server
// addresses on port 7003 (one each accepted by the upto rule, the second
// refused by the rule after it).
func TestConnLimitAgreesWithIptables(t *testing.T) {
	testutil.RequireRoot(t)
	want := "outcomes [ok ok refused refused refused ok refused ok ok refused refused refused ok refused ok refused] counts [4 3 2 2]"
	run := func(t *testing.T, load func(l *link)) string {
		l := newPair(t)
		ctx := t.Context()
		cli2 := strings.TrimSuffix(l.cli4, ".2") + ".3"
		srv2 := strings.TrimSuffix(l.srv4, ".1") + ".4"
		if _, err := l.cli.Exec(ctx, "ip", "addr", "add", cli2+"/24", "dev", l.cliIf); err != nil {
			t.Fatal(err)
		}
		if _, err := l.srv.Exec(ctx, "ip", "addr", "add", srv2+"/24", "dev", l.srvIf); err != nil {
			t.Fatal(err)
		}
		holdServeTCP(t, l.srv, 7000, 7001, 7002, 7003)
		// veth hands XDP_TX frames (xdpfw's resets) to its peer only when
		// the peer runs XDP too; attaching resets the link: wait for it
		xdpPass(t, l.cli, l.cliIf)
		waitTCP(t, l.cli, hostPort(l.srv4, 7000))
		load(l)
		var outcomes []string
		dialOne := func(local, addr string) net.Conn {
			c, err := holdDialTCP(ctx, l.cli, local, addr)
			switch {
			case err == nil:
				t.Cleanup(func() { c.Close() })
				outcomes = append(outcomes, "ok")
				return c
			case strings.Contains(err.Error(), "connection refused"):
				outcomes = append(outcomes, "refused")
			default:
				t.Errorf("connect %s -> %s: %v", local, addr, err)
				outcomes = append(outcomes, "failed")
			}
			return nil
		}
		var held []net.Conn
		dial := func(local, addr string) {
			if c := dialOne(local, addr); c != nil {
				held = append(held, c)
			}
		}
		for range 5 {
			dial(l.cli4, hostPort(l.srv4, 7001))
		}
		// a connection reset (CLOSE) is not counted: one more gets in.
		// The kernel walks a key's list at most once a jiffy (in the
		// jiffy of its last walk it counts the list as it stands): the
		// next SYN waits a few jiffies, so that the kernel's answer is
		// the same whatever the timing (xdpfw walks at every packet)
		if len(held) > 0 {
			held[0].(*net.TCPConn).SetLinger(0)
			held[0].Close()
		}
		time.Sleep(50 * time.Millisecond)
		dial(l.cli4, hostPort(l.srv4, 7001))
		dial(l.cli4, hostPort(l.srv4, 7001))
		for _, from := range []string{l.cli4, l.cli4, cli2, l.cli4, cli2} {
			dial(from, hostPort(l.srv4, 7002))
		}
		for _, to := range []string{l.srv4, l.srv4, srv2, srv2} {
			dial(l.cli4, hostPort(to, 7003))
		}
		return fmt.Sprintf("outcomes %v", outcomes)
	}
	for _, bin := range []string{"iptables-nft", "iptables-legacy"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Logf("%s not installed: skipped", bin)
			continue
		}
		t.Run(bin, func(t *testing.T) {
			var srv *testutil.NetNS
			got := run(t, func(l *link) {
				srv = l.srv
				mustRestore(t, l.srv, bin, filterText(connLimitOracle))
			})
			out, err := srv.Exec(t.Context(), bin, "-L", "INPUT", "-v", "-n", "-x")
			if err != nil {
				t.Fatalf("%s -L: %v\n%s", bin, err, out)
			}
			var counts []uint64
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[2:] {
				var n uint64
				fmt.Sscanf(strings.TrimSpace(line), "%d", &n)
				counts = append(counts, n)
			}
			if got += fmt.Sprintf(" counts %v", counts); got != want {
				t.Errorf("%s: %s\nwant %s", bin, got, want)
			}
		})
	}
	t.Run("xdpfw", func(t *testing.T) {
		var f *fw
		got := run(t, func(l *link) {
			f = newFW(t, l.srv)
			f.mustRun("load", "-i", l.srvIf, writeRules(t, "connlimit.rules", connLimitOracle...))
		})
		var counts []uint64
		for _, r := range f.list().Rules {
			counts = append(counts, r.Counters.Packets)
		}
		if got += fmt.Sprintf(" counts %v", counts); got != want {
			t.Errorf("xdpfw: %s\nwant %s\n%s", got, want, f.mustRun("stats"))
		}
	})
}

// holdServeTCP accepts TCP connections on ports in ns and holds them open
// until the test ends.
func holdServeTCP(t *testing.T, ns *testutil.NetNS, ports ...int) {
	t.Helper()
	for _, port := range ports {
		var ln net.Listener
		if err := ns.Do(func() (err error) {
			ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
			return err
		}); err != nil {
			t.Fatalf("listening on tcp port %d in %s: %v", port, ns, err)
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			conns []net.Conn
		)
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
		t.Cleanup(func() {
			ln.Close()
			wg.Wait()
			for _, c := range conns {
				c.Close()
			}
		})
	}
}

// holdDialTCP connects from ns (from local) to addr and returns the open
// connection.
func holdDialTCP(ctx context.Context, ns *testutil.NetNS, local, addr string) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() (err error) {
		d := net.Dialer{Timeout: connectTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}
