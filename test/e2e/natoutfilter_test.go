package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestNATOutputFilterSeesDNATXdpfw: filter OUTPUT judges a nat OUTPUT
// connection's packets, its first included, with the destination nat
// OUTPUT gave them, as the kernel's does (its nat OUTPUT hook runs before
// filter OUTPUT; the route is looked up again after the DNAT, but the
// hook's out device stays the original route's). One rule file through the
// kernel's iptables, then xdpfw (--nat xdpfw), on the same namespaces, the
// same UDP exchanges (and a TCP connect, not counted: how many packets it
// takes is timing): every filter OUTPUT and INPUT rule, counting rules on
// the translated and on the original destination, on each device and on
// --ctstate DNAT, counts what iptables' counted.
func TestNATOutputFilterSeesDNATXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x, server, peer := natOutputRouter(t)
	text := strings.Join(append(natOutputDNATs(server, peer),
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A INPUT -p udp -m udp --sport 8080",
		"-A INPUT -p udp -m udp --sport 80",
		"-A INPUT -p udp -m conntrack --ctstate DNAT",
		"-A OUTPUT -d "+server+"/32 -p udp -m udp --dport 8080",
		"-A OUTPUT -d "+vipFar+"/32 -p udp -m udp --dport 80",
		"-A OUTPUT -d "+peer+"/32 -p udp -m udp --dport 8080",
		"-A OUTPUT -d "+vipNear+"/32 -p udp -m udp --dport 80",
		"-A OUTPUT -p udp -m conntrack --ctstate NEW,DNAT",
		"-A OUTPUT -p udp -m conntrack --ctstate DNAT",
		"-A OUTPUT -o rb -p udp -m udp --dport 8080",
		"-A OUTPUT -o ra -p udp -m udp --dport 8080",
		"-A OUTPUT -o rb -p udp -m udp --dport 80",
		"-A OUTPUT -o ra -p udp",
		"COMMIT",
	), "\n") + "\n"
	const rounds = 3
	flows := func(what string) {
		t.Helper()
		for _, to := range []string{hostPort(vipFar, 80), hostPort(vipNear, 80)} {
			if err := udpRounds(t, x.r, to, rounds); err != nil {
				t.Errorf("%s: %d datagrams from the router to %s: %v", what, rounds, to, err)
			}
		}
		if local, seen, err := peerSeen(t, x.r, "tcp4", hostPort(vipFar, 80)); err != nil || seen != local {
			t.Errorf("%s: a TCP connect from the router to %s: the server saw %q (want %s), %v", what, vipFar, seen, local, err)
		}
	}
	var wantOut, wantIn []uint64
	f := kernelThenXdpfw(t, x, text, func() {
		flows("iptables")
		// iptables-save lists filter before nat: OUTPUT's first
		// ten rules are filter's
		wantOut, wantIn = iptablesCounts(t, x.r, "OUTPUT"), iptablesCounts(t, x.r, "INPUT")
		if len(wantOut) > 10 {
			wantOut = wantOut[:10]
		}
	})
	if len(wantOut) != 10 || len(wantIn) != 3 || wantOut[0] == 0 || wantOut[1] != 0 || wantIn[0] == 0 {
		t.Fatalf("iptables counted OUTPUT %v, INPUT %v: want the translated destinations counted, not the original", wantOut, wantIn)
	}
	flows("xdpfw")
	l := f.list()
	got := l.packetsByChain()
	if !slices.Equal(got["OUTPUT"], wantOut) || !slices.Equal(got["INPUT"], wantIn) {
		t.Errorf("xdpfw counted OUTPUT %v, INPUT %v; iptables OUTPUT %v, INPUT %v\nlist:\n%s", got["OUTPUT"], got["INPUT"], wantOut, wantIn, l.raw)
	}
}

// TestNATOutputNoForwardingXdpfw: nat OUTPUT on a host that does not
// forward (net.ipv4.ip_forward=0): the kernel's OUTPUT DNAT does not need
// forwarding (the re-route is an output route, ip_route_me_harder), so
// neither may xdpfw's. The router's own client reaches two virtual
// addresses routed through b: one DNATed to the LAN server a (re-routed
// out of another device), one to b itself (the same device); through the
// kernel's iptables, then xdpfw, on the same namespaces. Before load set
// net.ipv4.conf.lo.forwarding, each was dropped (no_route: bpf_fib_lookup
// refuses a device that does not forward).
func TestNATOutputNoForwardingXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x, server, peer := natOutputRouter(t)
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := x.r.Exec(ctx, "sysctl", "-qw", "net.ipv4.ip_forward=0"); err != nil {
		t.Fatalf("forwarding off: %v\n%s", err, out)
	}
	text := strings.Join(append(natOutputDNATs(server, peer),
		"*filter",
		":INPUT DROP [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"COMMIT",
	), "\n") + "\n"
	flows := func(what string) {
		t.Helper()
		for _, c := range []struct{ network, to string }{
			{"udp4", hostPort(vipFar, 80)}, {"tcp4", hostPort(vipFar, 80)}, {"udp4", hostPort(vipNear, 80)},
		} {
			if local, seen, err := peerSeen(t, x.r, c.network, c.to); err != nil || seen != local {
				t.Errorf("%s, forwarding off: %s from the router to %s: the server saw %q (want %s), %v", what, c.network, c.to, seen, local, err)
			}
		}
	}
	f := kernelThenXdpfw(t, x, text, func() { flows("iptables") })
	flows("xdpfw")
	// load turned on the loopback's forwarding only (what bpf_fib_lookup
	// needs): the host still forwards nothing
	ctx, cancel = context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	for _, c := range []struct{ key, want string }{{"net.ipv4.ip_forward", "0"}, {"net.ipv4.conf.ra.forwarding", "0"},
		{"net.ipv4.conf.rb.forwarding", "0"}, {"net.ipv4.conf.lo.forwarding", "1"}} {
		if out, err := x.r.Exec(ctx, "sysctl", "-n", c.key); err != nil || strings.TrimSpace(string(out)) != c.want {
			t.Errorf("after load: %s = %q, %v; want %s", c.key, out, err, c.want)
		}
	}
	if st := f.natStatus(); st.Counters["output"] != 3 || st.Counters["no_route"] != 0 {
		t.Errorf("status: nat counters %v; want 3 connections translated by nat OUTPUT, none without a route", st.Counters)
	}
}

// natOutputDNATs is the nat table both nat OUTPUT filter tests load: UDP
// and TCP to vipFar:80 DNATed to server:8080, UDP to vipNear:80 to
// peer:8080.
func natOutputDNATs(server, peer string) []string {
	return []string{
		"*nat",
		":PREROUTING ACCEPT [0:0]",
		":INPUT ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		":POSTROUTING ACCEPT [0:0]",
		"-A OUTPUT -d " + vipFar + "/32 -p udp -m udp --dport 80 -j DNAT --to-destination " + server + ":8080",
		"-A OUTPUT -d " + vipFar + "/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination " + server + ":8080",
		"-A OUTPUT -d " + vipNear + "/32 -p udp -m udp --dport 80 -j DNAT --to-destination " + peer + ":8080",
		"COMMIT",
	}
}
