package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestNATOutputXdpfw: the nat OUTPUT chain (DNAT of connections this host
// opens) in xdpfw's tc egress (--nat xdpfw), against the kernel's
// iptables running the same file on the same namespaces first. The
// router's own client reaches two virtual addresses, routed through b (the
// first packet leaves by rb): one DNATed to the LAN server a (the kernel
// re-routes it out of ra), one to b itself on another port (the same
// device). TCP, UDP, ping, a bulk TCP send (TSO), and a port unreachable
// from behind the first (translated back in INPUT). Filter OUTPUT (policy DROP) accepts only the
// translated destinations, so the filter saw them; the client's connected
// sockets take answers only from the address they sent to (so every
// answer was translated back); the server sees the router's own address.
// Each rule of OUTPUT and INPUT counts what iptables' counts; `conntrack
// list` shows each connection to its server with the address it was sent
// to.
func TestNATOutputXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x, server, peer := natOutputRouter(t)
	serveEcho(t, x.a, 80)
	text := strings.Join([]string{
		"*nat",
		":PREROUTING ACCEPT [0:0]",
		":INPUT ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		":POSTROUTING ACCEPT [0:0]",
		"-A OUTPUT -d " + vipFar + "/32 -p tcp -m tcp --dport 9090 -j DNAT --to-destination " + server + ":8080",
		"-A OUTPUT -d " + vipFar + "/32 -p udp -m udp --dport 9090 -j DNAT --to-destination " + server + ":8080",
		"-A OUTPUT -d " + vipNear + "/32 -p tcp -m tcp --dport 7070 -j DNAT --to-destination " + peer + ":8080",
		"-A OUTPUT -d " + vipNear + "/32 -p udp -m udp --dport 7070 -j DNAT --to-destination " + peer + ":8080",
		"-A OUTPUT -d " + vipFar + "/32 -p icmp -j DNAT --to-destination " + server,
		"-A OUTPUT -d " + vipNear + "/32 -p udp -m udp --dport 6060 -j DNAT --to-destination " + x.la.srv4 + ":8080",
		"-A OUTPUT -d " + vipFar + "/32 -p udp -m udp --dport 9091 -j DNAT --to-destination " + server + ":8081",
		"-A OUTPUT -d " + vipFar + "/32 -p tcp -m tcp --dport 9080 -j DNAT --to-destination " + server + ":80",
		"COMMIT",
		"*filter",
		":INPUT DROP [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT DROP [0:0]",
		"-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A OUTPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A OUTPUT -d " + server + "/32 -p tcp -m tcp --dport 8080 -j ACCEPT",
		"-A OUTPUT -d " + server + "/32 -p udp -m udp --dport 8080 -j ACCEPT",
		"-A OUTPUT -d " + peer + "/32 -p tcp -m tcp --dport 8080 -j ACCEPT",
		"-A OUTPUT -d " + peer + "/32 -p udp -m udp --dport 8080 -j ACCEPT",
		"-A OUTPUT -d " + server + "/32 -p icmp -j ACCEPT",
		"-A OUTPUT -d " + x.la.srv4 + "/32 -p udp -j ACCEPT",
		"-A OUTPUT -d " + server + "/32 -p udp -m udp --dport 8081 -j ACCEPT",
		"-A OUTPUT -d " + server + "/32 -p tcp -m tcp --dport 80 -j ACCEPT",
		"COMMIT",
	}, "\n") + "\n"

	flows := func(what string) {
		t.Helper()
		for _, c := range []struct {
			network, to string
		}{
			{"tcp4", hostPort(vipFar, 9090)}, {"udp4", hostPort(vipFar, 9090)}, // re-routed: rb to ra
			{"tcp4", hostPort(vipNear, 7070)}, {"udp4", hostPort(vipNear, 7070)}, // the same device
		} {
			local, seen, err := peerSeen(t, x.r, c.network, c.to)
			if err != nil {
				t.Errorf("%s: %s from the router to %s: %v", what, c.network, c.to, err)
				continue
			}
			if seen != local {
				t.Errorf("%s: %s from the router to %s: the server saw %s, want %s", what, c.network, c.to, seen, local)
			}
		}
		checkPing(t, what+": ping to "+vipFar, x.r, vipFar, true)
		// a bulk send (TSO: segments bigger than the MTU at tc egress),
		// re-routed
		e := dialEcho(t, x.r, hostPort(vipFar, 9080))
		if err := e.roundTrip(strings.Repeat("x", 256<<10)); err != nil {
			t.Errorf("%s: 256 KiB echoed through %s: %v", what, vipFar, err)
		}
		e.c.Close() // nothing of it left for the next phase
		// a closed port behind the virtual address: the server's port
		// unreachable, judged RELATED in INPUT, reaches the socket
		// translated back (its quote the datagram as it was sent)
		if err := udpProbe(t, x.r, vipFar, 9091, false); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: UDP to a closed port behind %s: %v, want the port unreachable (connection refused)", what, vipFar, err)
		}
	}

	iptablesRestoreText(t, x.r, text)
	flows("iptables")
	// iptables-save lists filter before nat: OUTPUT's first nine rules
	// are filter's, the eight after them nat's (each its connection's
	// first packet; the one to this host unused here)
	wantOut, wantIn := iptablesCounts(t, x.r, "OUTPUT"), iptablesCounts(t, x.r, "INPUT")
	if len(wantOut) == 17 && slices.Equal(wantOut[9:], []uint64{1, 1, 1, 1, 1, 0, 1, 1}) {
		wantOut = wantOut[:9]
	}
	iptablesRestoreText(t, x.r, "")
	kernelNAT(t, x.r, "-F")
	if t.Failed() {
		t.FailNow()
	}
	if len(wantOut) != 9 || wantOut[0] == 0 || wantOut[1] == 0 || len(wantIn) != 1 || wantIn[0] == 0 {
		t.Fatalf("iptables counted OUTPUT %v, INPUT %v: a flow uncounted", wantOut, wantIn)
	}

	f := newFW(t, x.r)
	f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "out.rules", text))
	flows("xdpfw")
	l := f.list()
	checkFirstPacketCounts(t, l, map[string][]uint64{"OUTPUT": wantOut, "INPUT": wantIn})

	var cts []natConn
	f.decode(&cts, "conntrack", "list", "--json")
	dnat := 0
	for _, c := range cts {
		if c.NAT == nil || c.NAT.Kind != "DNAT" {
			continue
		}
		dnat++
		if !strings.HasPrefix(c.NAT.OrigDst, "10.99.0.") || c.NAT.Src != c.Dst {
			t.Errorf("conntrack list: %s > %s: %+v; want orig_dst a virtual address, the reply from %s", c.Src, c.Dst, *c.NAT, c.Dst)
		}
	}
	if dnat != 7 {
		t.Errorf("conntrack list: %d DNATed connections, want 7: %+v", dnat, cts)
	}
	if st := f.natStatus(); st.Counters["output"] != 7 || st.Counters["no_route"] != 0 || st.Counters["icmp_error"] != 1 {
		t.Errorf("status: nat counters %v; want 7 connections translated by nat OUTPUT (output), one ICMP error translated", st.Counters)
	}
	if t.Failed() {
		t.Logf("list:\n%s\nstatus:\n%s\nconntrack:\n%s", l.raw, f.mustRun("status", "--json").stdout, f.mustRun("conntrack", "list").stdout)
	}

	// A connection whose answers' binding is gone (the LRU's room): the
	// answers are dropped, counted (lost), never delivered untranslated
	e := dialEcho(t, x.r, hostPort(vipFar, 9080))
	if err := e.roundTrip("bound"); err != nil {
		t.Fatalf("echo through %s: %v", vipFar, err)
	}
	binds, err := ebpf.LoadPinnedMap(filepath.Join(f.pinDir, "fw_nat_binds"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer binds.Close()
	lport := e.c.LocalAddr().(*net.TCPAddr).Port
	key := make([]byte, 16) // struct fw_nat_tuple: the answers', server to this host
	copy(key[0:4], net.ParseIP(server).To4())
	copy(key[4:8], net.ParseIP(x.lb.srv4).To4())
	binary.BigEndian.PutUint16(key[8:], 80)
	binary.BigEndian.PutUint16(key[10:], uint16(lport))
	key[12] = 6
	if err := binds.Delete(key); err != nil {
		t.Fatalf("deleting the answers' binding of port %d: %v", lport, err)
	}
	if err := e.roundTrip("unbound"); err == nil {
		t.Errorf("echo over a nat OUTPUT connection without its answers' binding: answered; want them dropped")
	}
	if st := f.natStatus(); st.Counters["lost"] == 0 {
		t.Errorf("status: nat counters %v; want the answers without a binding counted (lost)", st.Counters)
	}
	e.c.Close()

	// REDIRECT in nat OUTPUT: refused at load, at the rule
	bad := strings.Replace(text, "-j DNAT --to-destination "+server+":8080", "-j REDIRECT --to-ports 8080", 1)
	res := f.run("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "redirect.rules", bad))
	if res.code == 0 || !strings.Contains(res.stderr, "redirect.rules:6") || !strings.Contains(res.stderr, "--nat kernel") {
		t.Errorf("load of a nat OUTPUT REDIRECT: exit %d, stderr %q; want refused at redirect.rules:6 with the hint --nat kernel", res.code, res.stderr)
	}

	// DNAT to an address of this host: the kernel would deliver it
	// locally, which tc egress cannot; dropped, counted (no_route), never
	// sent to the untranslated destination
	if _, seen, err := peerSeen(t, x.r, "udp4", hostPort(vipNear, 6060)); err == nil {
		t.Errorf("DNAT of a local connection to this host: answered (the server saw %s); want dropped", seen)
	}
	if st := f.natStatus(); st.Counters["no_route"] == 0 {
		t.Errorf("status: nat counters %v; want the DNAT to a local address counted (no_route)", st.Counters)
	}
}

// vipFar and vipNear: the virtual addresses of natOutputRouter.
const vipFar, vipNear = "10.99.0.1", "10.99.0.2"

// natOutputRouter: a router whose own client reaches two virtual
// addresses, vipFar and vipNear, routed through b (a first packet to them
// leaves by rb); the LAN server a and b answer on 8080 (servePeer).
// server and peer are the addresses of a and b.
func natOutputRouter(t *testing.T) (x *router, server, peer string) {
	t.Helper()
	x = newRouter(t)
	vethPeerReady(t, x.a, "xa")
	vethPeerReady(t, x.b, "xb")
	servePeer(t, x.a, 8080)
	servePeer(t, x.b, 8080)
	server, peer = x.la.cli4, x.lb.cli4
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	for _, vip := range []string{vipFar, vipNear} {
		if out, err := x.r.Exec(ctx, "ip", "route", "add", vip+"/32", "via", peer); err != nil {
			t.Fatalf("a route to %s: %v\n%s", vip, err, out)
		}
	}
	return x, server, peer
}

// checkFirstPacketCounts holds xdpfw's rule counters (l) to iptables'
// (want, by chain), where each chain's first rule is the ESTABLISHED one
// and the others count first packets: zero where iptables' is, else as
// many, or one more (a retransmitted SYN is NEW again, in iptables too:
// retransmissions are timing).
func checkFirstPacketCounts(t *testing.T, l *listing, want map[string][]uint64) {
	t.Helper()
	got := l.packetsByChain()
	for chain, w := range want {
		g := got[chain]
		ok := len(g) == len(w) && g[0] != 0
		for i := 1; ok && i < len(g); i++ {
			ok = g[i] >= w[i] && g[i] <= w[i]+1 && (g[i] == 0) == (w[i] == 0)
		}
		if !ok {
			t.Errorf("xdpfw: %s counted %v; iptables %v (the first rule, ESTABLISHED, only nonzero)", chain, g, w)
		}
	}
}
