package e2e

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// kernelNAT runs iptables (the kernel's nat table) in ns: xdpfw takes the
// filter table, the kernel keeps translating.
func kernelNAT(t *testing.T, ns *testutil.NetNS, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := ns.Exec(ctx, "iptables", append([]string{"-t", "nat"}, args...)...); err != nil {
		t.Fatalf("iptables -t nat %s in %s: %v\n%s", args, ns, err, out)
	}
}

// masqRules is a stateful router's filter table: the LAN (ra) goes out,
// answers come back, nothing else; the kernel masquerades what leaves by rb.
var masqRules = strings.Join([]string{
	"*filter",
	":INPUT DROP [0:0]",
	":FORWARD DROP [0:0]",
	":OUTPUT ACCEPT [0:0]",
	"-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
	"-A FORWARD -i ra -j ACCEPT",
	"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
	"COMMIT",
}, "\n") + "\n"

// TestKernelMasquerade: a router whose kernel masquerades the LAN (its nat
// table stays in the kernel, as Docker's or a distribution's does) and
// whose filter table is xdpfw's. Answers arrive addressed to the router;
// xdpfw asks the kernel's conntrack and judges them as iptables does: in
// FORWARD, ESTABLISHED, addressed to the LAN client. The per-rule counts
// of one UDP exchange are the kernel's iptables' on the same topology.
// An ICMP error about a translated datagram (b's port unreachable) is
// RELATED and reaches the client. With --ct-kernel-nat off the answers
// are judged as they arrive: in INPUT, by a connection xdpfw never saw,
// and dropped; so are ping answers always (the kernel's conntrack cannot
// be asked about ICMP connections from XDP).
func TestKernelMasquerade(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iptables-save"); err != nil {
		t.Skip("iptables is not installed: no kernel nat table")
	}
	x := newRouter(t) // a: the LAN (ra), b: the WAN (rb)
	kernelNAT(t, x.r, "-A", "POSTROUTING", "-o", "rb", "-j", "MASQUERADE")
	serveEcho(t, x.b, 80)
	// every port unreachable b sends gets through its rate limit
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := x.b.Exec(ctx, "sysctl", "-qw", "net.ipv4.icmp_ratelimit=0"); err != nil {
		t.Fatalf("sysctl in %s: %v\n%s", x.b, err, out)
	}
	wan := hostPort(x.lb.cli4, 80)
	exchange := func(what string) {
		t.Helper()
		checkTCP(t, what, tcpProbe{from: x.a, addr: wan, ok: true})
		if err := udpExchange(t, x.b, x.a, x.lb.cli4); err != nil {
			t.Errorf("%s: UDP answer from %s: %v", what, x.lb.cli4, err)
		}
		// b's port unreachable for a datagram to a closed port quotes the
		// translated datagram: RELATED, in FORWARD, to the client
		if err := udpProbe(t, x.a, x.lb.cli4, 9999, false); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: UDP to a closed port through the MASQUERADE: %v, want the port unreachable (connection refused)", what, err)
		}
	}

	// The oracle: the kernel's own filter table, with a rule that counts
	// the packets of connections whose source the kernel translated: the
	// answer, judged with the kernel's conntrack (its IPS_SRC_NAT)
	counted := strings.Replace(masqRules, "-A FORWARD -i ra -j ACCEPT", "-A FORWARD -m conntrack --ctstate SNAT\n-A FORWARD -i ra -j ACCEPT", 1)
	iptablesRestoreText(t, x.r, counted)
	if err := udpExchange(t, x.b, x.a, x.lb.cli4); err != nil {
		t.Fatalf("iptables: UDP answer: %v", err)
	}
	want := map[string][]uint64{"INPUT": iptablesCounts(t, x.r, "INPUT"), "FORWARD": iptablesCounts(t, x.r, "FORWARD")}
	exchange("iptables")
	iptablesRestoreText(t, x.r, "")
	if t.Failed() {
		t.FailNow()
	}

	f := newFW(t, x.r)
	path := writeRules(t, "masq.rules", counted)
	f.mustRun("load", "-i", "ra", "-i", "rb", "--ipv4-file", path)
	if s := f.mustRun("status"); !strings.Contains(s.stdout, "kernel NAT: on (") {
		t.Errorf("status does not say kernel NAT is on and active:\n%s", s.stdout)
	}
	if err := udpExchange(t, x.b, x.a, x.lb.cli4); err != nil {
		t.Errorf("xdpfw: UDP answer: %v", err)
	}
	l := f.list()
	for chain, rules := range map[string][]string{
		"INPUT": {"-A INPUT -4 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"},
		"FORWARD": {"-A FORWARD -4 -m conntrack --ctstate SNAT", "-A FORWARD -4 -i ra -j ACCEPT",
			"-A FORWARD -4 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"},
	} {
		if len(want[chain]) != len(rules) {
			t.Fatalf("iptables-save lists %d %s rules, want %d", len(want[chain]), chain, len(rules))
		}
		for i, rule := range rules {
			if got := l.rule(t, rule).Counters.Packets; got != want[chain][i] {
				t.Errorf("one UDP exchange: %s counted %d packets, iptables %d", rule, got, want[chain][i])
			}
		}
	}
	exchange("xdpfw")
	// a TCP connection both ways: answers keep coming in FORWARD
	e := dialEcho(t, x.a, wan)
	for i := range 3 {
		if err := e.roundTrip("line " + strconv.Itoa(i)); err != nil {
			t.Errorf("xdpfw: echo over the masqueraded connection: %v", err)
		}
	}
	var ct struct {
		Counters map[string]uint64 `json:"counters"`
	}
	if f.decode(&ct, "conntrack", "stats", "--json"); ct.Counters["kernel_nat"] == 0 {
		t.Errorf("conntrack stats: kernel_nat counted nothing: %v", ct.Counters)
	}

	// Off: the answers are judged by the addresses they arrive with.
	f.mustRun("load", "-i", "ra", "-i", "rb", "--ct-kernel-nat", "off", "--ipv4-file", path)
	if s := f.mustRun("status"); !strings.Contains(s.stdout, "kernel NAT: off") {
		t.Errorf("status after --ct-kernel-nat off:\n%s", s.stdout)
	}
	checkTCP(t, "xdpfw --ct-kernel-nat off", tcpProbe{from: x.a, addr: wan, ok: false})
	if err := udpExchange(t, x.b, x.a, x.lb.cli4); err == nil {
		t.Errorf("xdpfw --ct-kernel-nat off: the UDP answer came back; want it dropped in INPUT")
	}
	if err := udpProbe(t, x.a, x.lb.cli4, 9999, false); err != nil {
		t.Errorf("xdpfw --ct-kernel-nat off: UDP to a closed port: %v; want the port unreachable dropped in INPUT (INVALID)", err)
	}
	// a reload keeps the setting; on again
	f.mustRun("load", "-i", "ra", "-i", "rb", "--ipv4-file", path)
	if s := f.mustRun("status"); !strings.Contains(s.stdout, "kernel NAT: off") {
		t.Errorf("a load without --ct-kernel-nat changed it:\n%s", s.stdout)
	}
	f.mustRun("load", "-i", "ra", "-i", "rb", "--ct-kernel-nat", "on", "--ipv4-file", path)
	exchange("xdpfw --ct-kernel-nat on again")

	// ICMP: the kfunc looks up TCP and UDP only. A ping's answer is judged
	// as it arrives (INPUT, INVALID: an answer to no query xdpfw saw) and
	// passes where INPUT accepts it (docs/conntrack.md "Kernel NAT").
	checkPing(t, "xdpfw, ping through the kernel's MASQUERADE", x.a, x.lb.cli4, false)
	f.mustRun("apply", "--ipv4-file", writeRules(t, "masq-ping.rules",
		strings.Replace(masqRules, "COMMIT", "-A INPUT -p icmp -m icmp --icmp-type 0 -j ACCEPT\nCOMMIT", 1)))
	checkPing(t, "xdpfw, echo replies accepted in INPUT", x.a, x.lb.cli4, true)

	// The forwarding fast path on these veth devices never takes a
	// connection the kernel translates: its packets go to the kernel
	// (kernel-ct before an answer, kernel-nat after it), which translates
	// them (lib/fwd.h fw_fwd_kernel). Before that rule, the masqueraded
	// SYN left from XDP with the LAN's address and nothing came back.
	f.mustRun("apply", "--forward", "xdp-veth", "--ipv4-file", path)
	var st0, st1 fwdStatus
	f.decode(&st0, "status", "--json")
	exchange("xdpfw --forward xdp-veth")
	f.decode(&st1, "status", "--json")
	d := func(how string) uint64 { return st1.Forward.Counters[how].Packets - st0.Forward.Counters[how].Packets }
	if d("xdp") != 0 || d("kernel-nat") == 0 || d("kernel-ct") == 0 {
		t.Errorf("--forward xdp-veth through the kernel's MASQUERADE: forwarded in XDP %d, kernel-nat %d, kernel-ct %d; "+
			"want none in XDP, both others counted (%v)", d("xdp"), d("kernel-nat"), d("kernel-ct"), st1.Forward.Counters)
	}
}

// TestKernelPortForward: the kernel forwards the router's port 8080 to a
// LAN host's port 80 (DNAT in its PREROUTING), xdpfw's FORWARD rules
// restrict it. The first packet of each connection is judged before the
// kernel translates it: in INPUT, by the router's address and port 8080
// (docs/conntrack.md "Kernel NAT"), so INPUT accepts it there. Every later
// packet is judged as iptables judges it: in FORWARD, addressed to the LAN
// host, ESTABLISHED: b's connection carries data, c's (whose source
// FORWARD drops) connects, as its SYN passed INPUT, but carries nothing.
// iptables, judging the first packet in FORWARD, drops c's SYN already.
func TestKernelPortForward(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iptables-save"); err != nil {
		t.Skip("iptables is not installed: no kernel nat table")
	}
	x := newRouter(t) // a: the LAN host (ra), b and c: outside (rb, rc)
	kernelNAT(t, x.r, "-A", "PREROUTING", "-p", "tcp", "--dport", "8080", "-j", "DNAT", "--to-destination", x.la.cli4+":80")
	serveEcho(t, x.a, 80)
	ruleText := strings.Join([]string{
		"*filter",
		":INPUT DROP [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A INPUT -p tcp -m tcp --dport 8080 -j ACCEPT",
		"-A FORWARD -s 10.200.3.0/24 -j DROP",
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -d " + x.la.cli4 + "/32 -p tcp -m tcp --dport 80 -m conntrack --ctstate NEW -j ACCEPT",
		"COMMIT",
	}, "\n") + "\n"
	fromB, fromC := hostPort(x.lb.srv4, 8080), hostPort(x.lc.srv4, 8080)

	iptablesRestoreText(t, x.r, ruleText)
	e := dialEcho(t, x.b, fromB)
	if err := e.roundTrip("iptables"); err != nil {
		t.Errorf("iptables: echo through the port forward: %v", err)
	}
	checkTCP(t, "iptables", tcpProbe{from: x.c, addr: fromC, ok: false})
	iptablesRestoreText(t, x.r, "")
	if t.Failed() {
		t.FailNow()
	}

	f := newFW(t, x.r)
	f.mustRun("load", "-i", "ra", "-i", "rb", "-i", "rc", "--ipv4-file", writeRules(t, "fwd.rules", ruleText))
	e = dialEcho(t, x.b, fromB)
	for i := range 3 {
		if err := e.roundTrip("xdpfw " + strconv.Itoa(i)); err != nil {
			t.Errorf("xdpfw: echo through the port forward: %v", err)
		}
	}
	// c: the SYN passes INPUT, its later packets meet FORWARD's DROP
	ec := dialEcho(t, x.c, fromC)
	if err := ec.roundTrip("c"); err == nil {
		t.Errorf("xdpfw: c's data went through the port forward; FORWARD -s 10.200.3.0/24 -j DROP should drop it")
	}
	l := f.list()
	if n := l.rule(t, "-A INPUT -4 -p tcp --dport 8080 -j ACCEPT").Counters.Packets; n != 2 {
		t.Errorf("INPUT --dport 8080 counted %d packets, want the 2 connections' first packets", n)
	}
	if n := l.rule(t, "-A FORWARD -s 10.200.3.0/24 -j DROP").Counters.Packets; n == 0 {
		t.Errorf("FORWARD -s 10.200.3.0/24 -j DROP counted nothing: c's later packets are judged in FORWARD")
	}
	if n := l.rule(t, "-A FORWARD -4 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT").Counters.Packets; n == 0 {
		t.Errorf("FORWARD ESTABLISHED counted nothing")
	}
}

// TestKernelMasquerade6: the same router in IPv6 (ip6tables' MASQUERADE,
// NAT66): TCP connects and a UDP answer comes back, judged in FORWARD as
// ESTABLISHED; off, they are dropped in INPUT.
func TestKernelMasquerade6(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("ip6tables"); err != nil {
		t.Skip("ip6tables is not installed: no kernel nat table")
	}
	x := newRouter(t)
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	for _, c := range []struct {
		ns   *testutil.NetNS
		args []string
	}{
		{x.r, []string{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"}},
		{x.a, []string{"ip", "-6", "route", "add", "default", "via", x.la.srv6}},
		{x.b, []string{"ip", "-6", "route", "add", "default", "via", x.lb.srv6}},
		{x.r, []string{"ip6tables", "-t", "nat", "-A", "POSTROUTING", "-o", "rb", "-j", "MASQUERADE"}},
	} {
		if out, err := c.ns.Exec(ctx, c.args[0], c.args[1:]...); err != nil {
			t.Fatalf("%s in %s: %v\n%s", c.args, c.ns, err, out)
		}
	}
	serveTCP(t, x.b, 80)
	wan := hostPort(x.lb.cli6, 80)
	rules := strings.Replace(masqRules, "COMMIT", "-A INPUT -p ipv6-icmp -j ACCEPT\nCOMMIT", 1) // neighbour discovery
	f := newFW(t, x.r)
	path := writeRules(t, "masq6.rules", rules)
	f.mustRun("load", "-i", "ra", "-i", "rb", "--ipv6-file", path)
	checkTCP(t, "xdpfw IPv6", tcpProbe{from: x.a, addr: wan, ok: true})
	if err := udpExchange(t, x.b, x.a, x.lb.cli6); err != nil {
		t.Errorf("xdpfw IPv6: UDP answer: %v", err)
	}
	if n := f.list().rule(t, "-A FORWARD -6 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT").Counters.Packets; n == 0 {
		t.Errorf("IPv6: FORWARD ESTABLISHED counted nothing")
	}
	f.mustRun("load", "-i", "ra", "-i", "rb", "--ct-kernel-nat", "off", "--ipv6-file", path)
	checkTCP(t, "xdpfw IPv6 --ct-kernel-nat off", tcpProbe{from: x.a, addr: wan, ok: false})
}
