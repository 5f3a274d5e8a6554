package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// router is a namespace that routes between three clients' links: ra
// (10.200.1.0/24, to ns a), rb (10.200.2.0/24, to b) and rc
// (10.200.3.0/24, to c). Each client's default route is the router.
type router struct {
	r, a, b, c *testutil.NetNS
	la, lb, lc *link
}

func newRouter(t *testing.T) *router {
	t.Helper()
	x := &router{r: testutil.NewNetNS(t), a: testutil.NewNetNS(t), b: testutil.NewNetNS(t), c: testutil.NewNetNS(t)}
	x.la = newLink(t, x.r, "ra", x.a, "xa", 1)
	x.lb = newLink(t, x.r, "rb", x.b, "xb", 2)
	x.lc = newLink(t, x.r, "rc", x.c, "xc", 3)
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	for _, c := range []struct {
		ns   *testutil.NetNS
		args []string
	}{
		{x.r, []string{"sysctl", "-qw", "net.ipv4.ip_forward=1"}},
		{x.a, []string{"ip", "route", "add", "default", "via", x.la.srv4}},
		{x.b, []string{"ip", "route", "add", "default", "via", x.lb.srv4}},
		{x.c, []string{"ip", "route", "add", "default", "via", x.lc.srv4}},
	} {
		if out, err := c.ns.Exec(ctx, c.args[0], c.args[1:]...); err != nil {
			t.Fatalf("%s in %s: %v\n%s", c.args, c.ns, err, out)
		}
	}
	return x
}

// TestOutInterface: -o as iptables means it, on a router. FORWARD's -o is
// the device the kernel routes a packet out of (rc is one xdpfw is not
// attached to), beside -i; OUTPUT's -o is the device a locally sent packet
// leaves by. The same rule file, run through iptables in the router's
// namespace first, gives the same outcomes: iptables is the oracle.
func TestOutInterface(t *testing.T) {
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		t.Skip("iptables-restore is not installed: no oracle")
	}
	x := newRouter(t)
	for _, ns := range []*testutil.NetNS{x.a, x.b, x.c} {
		serveTCP(t, ns, 80, 81, 82)
	}
	ruleText := strings.Join([]string{
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -i ra -o rb -p tcp -m tcp --dport 80 -j ACCEPT",
		"-A FORWARD -i ra -o rc -p tcp -m tcp --dport 81 -j ACCEPT",
		"-A FORWARD -i ra ! -o rb+ -p tcp -m tcp --dport 82 -j ACCEPT",
		"-A OUTPUT -o rb -p tcp -m tcp --dport 82 -j DROP",
		"-A OUTPUT -o lo -j ACCEPT",
		"COMMIT",
	}, "\n") + "\n"
	probes := func(what string) {
		t.Helper()
		checkTCP(t, what,
			// FORWARD: a -> b by rb, a -> c by rc
			tcpProbe{from: x.a, addr: hostPort(x.lb.cli4, 80), ok: true},
			tcpProbe{from: x.a, addr: hostPort(x.lb.cli4, 81), ok: false},
			tcpProbe{from: x.a, addr: hostPort(x.lb.cli4, 82), ok: false},
			tcpProbe{from: x.a, addr: hostPort(x.lc.cli4, 80), ok: false},
			tcpProbe{from: x.a, addr: hostPort(x.lc.cli4, 81), ok: true},
			tcpProbe{from: x.a, addr: hostPort(x.lc.cli4, 82), ok: true},
			// -i: b -> c comes in by rb, which no ACCEPT names
			tcpProbe{from: x.b, addr: hostPort(x.lc.cli4, 81), ok: false},
			// OUTPUT: the router's own connections
			tcpProbe{from: x.r, addr: hostPort(x.lb.cli4, 82), ok: false},
			tcpProbe{from: x.r, addr: hostPort(x.la.cli4, 82), ok: true},
			tcpProbe{from: x.r, addr: hostPort(x.lb.cli4, 81), ok: true},
		)
	}

	iptablesRestoreText(t, x.r, ruleText)
	probes("iptables")
	iptablesRestoreText(t, x.r, "")
	if t.Failed() {
		t.FailNow() // the oracle disagrees with the test's expectations
	}

	f := newFW(t, x.r)
	path := writeRules(t, "router.rules", ruleText)
	r := f.mustRun("load", "-i", "ra", "-i", "rb", path)
	// -o lo: kept, no effect, said once
	if n := strings.Count(r.stderr, "loopback"); n != 1 || !strings.Contains(r.stderr, path+":10:1") {
		t.Errorf("load: want one note about the loopback rule (%s:10:1), got\n%s", path, r.stderr)
	}
	probes("xdpfw")

	l := f.list()
	l.wantChain(t, "FORWARD",
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -i ra -o rb -p tcp --dport 80 -j ACCEPT",
		"-A FORWARD -i ra -o rc -p tcp --dport 81 -j ACCEPT",
		"-A FORWARD -i ra ! -o rb+ -p tcp --dport 82 -j ACCEPT")
	if c := l.rule(t, "-A FORWARD -i ra -o rc -p tcp --dport 81 -j ACCEPT"); c.Counters.Packets == 0 {
		t.Errorf("-i ra -o rc counted no packet: %+v", c)
	}
	if c := l.rule(t, "-A OUTPUT -o rb -p tcp --dport 82 -j DROP"); c.Counters.Packets == 0 {
		t.Errorf("OUTPUT -o rb counted no packet: %+v", c)
	}

	// INPUT refuses -o, as iptables does ("Can't use -o with INPUT").
	bad := writeRules(t, "bad.rules", "-A INPUT -o ra -j DROP")
	if r := f.runWant(2, "apply", bad); !strings.Contains(r.stderr, bad+":1:10: -o cannot be used in the INPUT chain") {
		t.Errorf("apply of INPUT -o: %s", r)
	}

	// With the daemon, -o follows the host's interfaces: rd does not exist
	// when the rules are put in force; once it is created (and routed),
	// the daemon compiles the rules again and a -> d by rd is accepted.
	dirD := t.TempDir()
	dRules := filepath.Join(dirD, "router.rules")
	writeAtomic(t, dRules, "-P FORWARD DROP", "-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -i ra -o rd -p tcp --dport 80 -j ACCEPT")
	cfg := filepath.Join(dirD, "xdpfw.yaml")
	writeAtomic(t, cfg, "interfaces: [ra, rb]", "rules: router.rules")
	d := f.startDaemon(cfg)
	nsD := testutil.NewNetNS(t)
	ld := newLink(t, x.r, "rd", nsD, "xd", 4)
	serveTCP(t, nsD, 80)
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := nsD.Exec(ctx, "ip", "route", "add", "default", "via", ld.srv4); err != nil {
		t.Fatalf("route in d: %v\n%s", err, out)
	}
	var err error
	if !poll(t.Context(), arriveTimeout, func() bool { err = dialTCP(t.Context(), x.a, "", hostPort(ld.cli4, 80)); return err == nil }) {
		t.Fatalf("a -> d by the new rd never accepted (%v): the daemon did not compile -o rd again; its log:\n%s", err, d.stderr)
	}
	checkTCP(t, "daemon, rd created", tcpProbe{from: x.a, addr: hostPort(x.lb.cli4, 80), ok: false})
}
