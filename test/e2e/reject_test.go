package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	ebpflink "github.com/cilium/ebpf/link"

	"github.com/xdpfw/xdpfw/testutil"
)

// icmpConnLimit bounds a connect refused by an ICMP error: one SYN
// retransmission (after 1 s) and some slack.
const icmpConnLimit = 3 * time.Second

// TestReject's ports (each with a listener on the server) and rules.
const (
	rejPortOK, rejPortRST, rejPortICMP, rejPortUDP, rejPortAdmin = 22, 5000, 5003, 5001, 5002

	rejRuleRST    = "-A INPUT -p tcp --dport 5000 -j REJECT --reject-with tcp-reset"
	rejRuleICMP   = "-A INPUT -p tcp --dport 5003 -j REJECT"
	rejRuleUDP    = "-A INPUT -p udp --dport 5001 -j REJECT"
	rejRuleAdmin4 = "-A INPUT -4 -p udp --dport 5002 -j REJECT --reject-with icmp-admin-prohibited"
	rejRuleAdmin6 = "-A INPUT -6 -p udp --dport 5002 -j REJECT --reject-with icmp6-adm-prohibited"
)

// TestReject loads REJECT rules on the server end of a veth pair whose
// ports all have listeners, so every refusal the client sees comes from
// xdpfw's answer (XDP_TX), not from the server's kernel: a TCP connect is
// refused by a RST at once (or by ICMP port unreachable), a connected UDP socket
// reads ECONNREFUSED after sending (ICMP / ICMPv6 port unreachable), and
// admin-prohibited answers become EHOSTUNREACH (IPv4, ICMP 3/13) and
// EACCES (IPv6, ICMPv6 1/1), as Linux maps them; in native and generic
// mode. Then the per-source rate limit set with `apply --reject-rate
// --reject-burst` drops the excess.
func TestReject(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, rejPortOK, rejPortRST, rejPortICMP)
	newUDPSink(t, l.srv, rejPortUDP)
	newUDPSink(t, l.srv, rejPortAdmin)
	// veth hands XDP_TX frames (native mode) to its peer only when the
	// peer runs XDP too: a physical NIC needs nothing of the kind.
	xdpPass(t, l.cli, l.cliIf)

	// Attaching XDP resets the veth's queues; wait until the link carries
	// traffic again in both families before the first strict check.
	for _, addr := range []string{l.srv4, l.srv6} {
		waitTCP(t, l.cli, hostPort(addr, rejPortOK))
	}
	// Without the firewall everything connects and nothing is refused.
	var before []tcpProbe
	for _, addr := range []string{l.srv4, l.srv6} {
		for _, port := range []int{rejPortOK, rejPortRST, rejPortICMP} {
			before = append(before, tcpProbe{from: l.cli, addr: hostPort(addr, port), ok: true})
		}
	}
	checkTCP(t, "no firewall", before...)
	for _, addr := range []string{l.srv4, l.srv6} {
		for _, port := range []int{rejPortUDP, rejPortAdmin} {
			if err := udpRoundTrip(t, l, addr, port); err != nil {
				t.Errorf("no firewall: udp to %s: got %v, want no error", hostPort(addr, port), err)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	for _, mode := range []string{"native", "generic"} {
		t.Run(mode, func(t *testing.T) {
			f := newFW(t, l.srv)
			r := f.mustRun("load", "--mode", mode, "-i", l.srvIf, writeRules(t, "reject.rules",
				"-A INPUT -p tcp --dport 22 -j ACCEPT", rejRuleRST, rejRuleICMP, rejRuleUDP, rejRuleAdmin4, rejRuleAdmin6))
			if !strings.Contains(r.stdout, "("+mode+" mode)") || strings.Contains(r.stderr+r.stdout, "DROP") {
				t.Errorf("load: want %s mode and no word of REJECT acting as DROP: %s", mode, r)
			}
			checkRejects(t, f, l)
			if mode == "native" {
				checkRejectRate(t, f, l)
			}
		})
	}
	// Every packet BULK: judged on the bulk CPUs by xdpfw_cpumap, where
	// REJECT answers by a redirect to the interface the packet came in by
	// (a cpumap program has no XDP_TX): the same answers. In generic mode
	// the cpumap queues the skb and runs xdpfw_cpumap on it.
	for _, mode := range []string{"native", "generic"} {
		t.Run(mode+", all bulk", func(t *testing.T) { checkRejectsAllBulk(t, l, mode) })
	}
}

// checkRejectsAllBulk is checkRejects with a priority table that makes
// every packet BULK, loaded in mode: every packet is judged by the bulk
// CPUs, and the answers are the same.
func checkRejectsAllBulk(t *testing.T, l *link, mode string) {
	// A bulk packet reaches the kernel as a new skb built on the bulk
	// CPU: a veth peer's unfinished (offloaded) checksum would not
	// verify there. The client sends finished ones, as a NIC delivers.
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := l.cli.Exec(ctx, "ethtool", "-K", l.cliIf, "tx", "off"); err != nil {
		t.Fatalf("ethtool -K %s tx off: %v\n%s", l.cliIf, err, out)
	}
	defer l.cli.Exec(context.Background(), "ethtool", "-K", l.cliIf, "tx", "on")
	f := newFW(t, l.srv)
	f.mustRun("load", "--mode", mode, "--priority-cpus", "auto", "-i", l.srvIf, writeRules(t, "reject.rules",
		"-t xdpfw-priority -A PRIORITY -j BULK",
		"-A INPUT -p tcp --dport 22 -j ACCEPT", rejRuleRST, rejRuleICMP, rejRuleUDP, rejRuleAdmin4, rejRuleAdmin6))
	checkRejects(t, f, l)
	r := f.mustRun("status", "--json")
	var st struct {
		Priority struct {
			State string `json:"state"`
			Stats struct {
				High, Bulk, Fallback, Cpumap []uint64
			} `json:"stats"`
		} `json:"priority"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	total := func(v []uint64) (n uint64) {
		for _, x := range v {
			n += x
		}
		return n
	}
	p := st.Priority
	if !strings.HasPrefix(p.State, "on:") || total(p.Stats.Bulk) == 0 || total(p.Stats.Cpumap) != total(p.Stats.Bulk) ||
		total(p.Stats.High)+total(p.Stats.Fallback) != 0 {
		t.Errorf("want every packet handed over and judged by the bulk CPUs: %+v", p)
	}
}

// checkRejects probes every REJECT rule of TestReject from the client.
func checkRejects(t *testing.T, f *fw, l *link) {
	checkTCP(t, "ssh still accepted", tcpProbe{from: l.cli, addr: hostPort(l.srv4, rejPortOK), ok: true},
		tcpProbe{from: l.cli, addr: hostPort(l.srv6, rejPortOK), ok: true})
	// A RST refuses a connect at once. An ICMP error that comes back
	// while connect() still holds the socket (on a veth it comes back
	// inside the call) is dropped by Linux (TcpExtLockDroppedIcmps); the
	// SYN retransmitted a second later gets the one that refuses.
	for _, c := range []struct {
		addr  string
		port  int
		limit time.Duration
	}{
		{l.srv4, rejPortRST, connectTimeout}, // TCP RST
		{l.srv6, rejPortRST, connectTimeout}, // TCP RST over IPv6
		{l.srv4, rejPortICMP, icmpConnLimit}, // ICMP port unreachable to a SYN
		{l.srv6, rejPortICMP, icmpConnLimit}, // ICMPv6 port unreachable to a SYN
	} {
		wantConnectErr(t, l.cli, hostPort(c.addr, c.port), syscall.ECONNREFUSED, c.limit)
	}
	for _, c := range []struct {
		addr string
		port int
		want syscall.Errno
	}{
		{l.srv4, rejPortUDP, syscall.ECONNREFUSED},   // ICMP 3/3
		{l.srv6, rejPortUDP, syscall.ECONNREFUSED},   // ICMPv6 1/4
		{l.srv4, rejPortAdmin, syscall.EHOSTUNREACH}, // ICMP 3/13
		{l.srv6, rejPortAdmin, syscall.EACCES},       // ICMPv6 1/1
	} {
		if err := udpRoundTrip(t, l, c.addr, c.port); !errors.Is(err, c.want) {
			t.Errorf("udp to %s: got %v, want %v", hostPort(c.addr, c.port), err, c.want)
		}
	}

	// trace names the answer (built, reported, not sent).
	tr, r := f.trace("-p", "tcp", "--src", l.cli4, "--dst", l.srv4, "--dport", "5000")
	if len(tr) != 1 || tr[0].Verdict != "XDP_TX" || tr[0].Action != "REJECT" || tr[0].Reason != "rule-reject" || tr[0].RuleNum != 2 {
		t.Errorf("trace of a SYN to port 5000: want XDP_TX by rule 2 (REJECT, rule-reject): %s", r)
	}
	r = f.mustRun("trace", "-p", "tcp", "--src", l.cli6, "--dst", l.srv6, "--dport", "5000", "--tcp-flags", "RST")
	if !strings.Contains(r.stdout, "-> XDP_DROP by INPUT rule 2: "+rejRuleRST) || !strings.Contains(r.stdout, "not answered, dropped: reject-unanswered-error") {
		t.Errorf("trace of a RST to port 5000: want it dropped unanswered: %s", r)
	}

	list := f.list()
	for _, rule := range []string{rejRuleRST, rejRuleICMP, rejRuleUDP, rejRuleAdmin4, rejRuleAdmin6} {
		lr := list.rule(t, rule)
		if lr.Counters.Packets < 1 {
			t.Errorf("rule %q: %d packets; want counted:\n%s", rule, lr.Counters.Packets, list.raw)
		}
	}
	st := f.status()
	if n := st.Reasons["rule-reject"].Packets; n < 8 {
		t.Errorf("status counts %d answered REJECTs, want at least 8:\n%s", n, st.raw)
	}
	if n := st.Reasons["reject-rate-limited"].Packets; n != 0 {
		t.Errorf("status counts %d rate-limited REJECTs, want none:\n%s", n, st.raw)
	}
}

// checkRejectRate sets the per-source budget with apply and checks that a
// source sending more than the burst at once gets only the burst answered.
func checkRejectRate(t *testing.T, f *fw, l *link) {
	f.mustRun("apply", "--reject-rate", "1/s", "--reject-burst", "2", writeRules(t, "udp.rules", rejRuleUDP))
	var s struct {
		Reject struct {
			Rate  uint32 `json:"rate"`
			Burst uint32 `json:"burst"`
		} `json:"reject"`
	}
	f.decode(&s, "status", "--json")
	if s.Reject.Rate != 1 || s.Reject.Burst != 2 {
		t.Fatalf("status reports reject %+v, want rate 1 burst 2", s.Reject)
	}
	// A fresh source (its own bucket): 6 datagrams at once, 2 answered.
	const fresh = "10.200.0.3"
	ipOut(t, "-n", l.cli.Name, "addr", "add", fresh+"/24", "dev", l.cliIf)
	sender := newUDPSender(t, l.cli, fresh)
	sender.send(t, hostPort(l.srv4, rejPortUDP), "burst", 0, 6)
	limited := func() bool { return f.status().Reasons["reject-rate-limited"].Packets == 4 }
	if !poll(t.Context(), arriveTimeout, limited) {
		t.Errorf("6 datagrams from one source with burst 2: want 4 rate-limited:\n%s", f.status().raw)
	}
}

// udpRoundTrip is udpProbe from the client.
func udpRoundTrip(t *testing.T, l *link, addr string, port int) error {
	t.Helper()
	return udpProbe(t, l.cli, addr, port, false)
}

// wantConnectErr connects from ns to addr and fails the test unless the
// connect fails with want within limit.
func wantConnectErr(t *testing.T, ns *testutil.NetNS, addr string, want syscall.Errno, limit time.Duration) {
	t.Helper()
	start := time.Now()
	err := ns.Do(func() error {
		c, err := (&net.Dialer{Timeout: limit}).DialContext(t.Context(), "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	if !errors.Is(err, want) {
		t.Errorf("tcp connect to %s: got %v after %v, want %v within %v", addr, err, time.Since(start), want, limit)
	}
}

// xdpPass attaches an XDP_PASS program to iface in ns until the test ends.
func xdpPass(t *testing.T, ns *testutil.NetNS, iface string) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()}})
	if err != nil {
		t.Fatalf("loading an XDP_PASS program: %v", err)
	}
	var lk ebpflink.Link
	err = ns.Do(func() error {
		ifc, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		lk, err = ebpflink.AttachXDP(ebpflink.XDPOptions{Program: prog, Interface: ifc.Index})
		return err
	})
	if err != nil {
		prog.Close()
		t.Fatalf("attaching XDP_PASS to %s in %s: %v", iface, ns, err)
	}
	t.Cleanup(func() {
		lk.Close()
		prog.Close()
	})
}
