package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestOutInterfaceInUserChain: -o in a user chain FORWARD jumps to names
// any interface of the host, as in FORWARD itself: rc, which xdpfw is not
// attached to, is matched by `-o rc` and by `r+` there. iptables, in the
// router's namespace first, is the oracle (kernelThenXdpfw). Found by
// TestIptablesDifferential (seed 4, set forward/2): xdpfw resolved such a
// rule's -o against the attached interfaces only.
func TestOutInterfaceInUserChain(t *testing.T) {
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		t.Skip("iptables-restore is not installed: no oracle")
	}
	x := newRouter(t)
	for _, ns := range []*testutil.NetNS{x.b, x.c} {
		serveTCP(t, ns, 80, 81, 82)
	}
	ruleText := strings.Join([]string{
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		":fwd - [0:0]",
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -i ra -p tcp -j fwd",
		"-A fwd -o rc -p tcp -m tcp --dport 81 -j ACCEPT",
		"-A fwd ! -o r+ -p tcp -m tcp --dport 82 -j ACCEPT",
		"-A fwd -o rb -p tcp -m tcp --dport 80 -j ACCEPT",
		"COMMIT",
	}, "\n") + "\n"
	probes := func(what string) {
		t.Helper()
		checkTCP(t, what,
			tcpProbe{from: x.a, addr: hostPort(x.lc.cli4, 81), ok: true},  // -o rc: rc is not attached
			tcpProbe{from: x.a, addr: hostPort(x.lb.cli4, 81), ok: false}, // leaves by rb
			tcpProbe{from: x.a, addr: hostPort(x.lc.cli4, 82), ok: false}, // ! -o r+: rc is r+
			tcpProbe{from: x.a, addr: hostPort(x.lb.cli4, 82), ok: false},
			tcpProbe{from: x.a, addr: hostPort(x.lb.cli4, 80), ok: true},
			tcpProbe{from: x.a, addr: hostPort(x.lc.cli4, 80), ok: false},
		)
	}
	f := kernelThenXdpfw(t, x, ruleText, func() { probes("iptables") })
	probes("xdpfw")
	if c := f.list().rule(t, "-A fwd -4 -o rc -p tcp --dport 81 -j ACCEPT"); c.Counters.Packets == 0 {
		t.Errorf("-o rc in chain fwd counted no packet: %+v", c)
	}
}
