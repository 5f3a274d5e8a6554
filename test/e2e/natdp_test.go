package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/testutil"
)

// natRules is masqRules with its nat table: what leaves by rb is
// masqueraded (xdpfw's with --nat xdpfw).
var natRules = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
	"-A POSTROUTING -o rb -j MASQUERADE\nCOMMIT\n" + masqRules

// natConn is a connection of `conntrack list --json` with --nat xdpfw:
// as the filter saw it, and its translation.
type natConn struct {
	Proto uint8  `json:"proto"`
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	NAT   *struct {
		Src     string `json:"reply_src"`
		Dst     string `json:"reply_dst"`
		OrigDst string `json:"orig_dst"`
		Kind    string `json:"kind"`
	} `json:"nat"`
}

// servePeer answers, in ns, every TCP connection to port and every UDP
// datagram to port with the address and port it came from: what a
// server behind the NAT sees.
func servePeer(t *testing.T, ns *testutil.NetNS, port int) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	if err := ns.Do(func() (err error) {
		if ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, c.RemoteAddr())
			c.Close()
		}
	}()
	go func() {
		b := make([]byte, 100)
		for {
			_, from, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(from.String()), from)
		}
	}()
}

// peerSeen connects from ns to addr over network (tcp4, udp4) and returns
// its local address and the one servePeer saw.
func peerSeen(t *testing.T, ns *testutil.NetNS, network, addr string) (local, seen string, err error) {
	t.Helper()
	var c net.Conn
	if err := ns.Do(func() (err error) { c, err = net.DialTimeout(network, addr, connectTimeout); return err }); err != nil {
		return "", "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(connectTimeout))
	if network == "udp4" {
		if _, err := c.Write([]byte("who")); err != nil {
			return "", "", err
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if network == "udp4" && line != "" {
		err = nil
	}
	return c.LocalAddr().String(), strings.TrimSpace(line), err
}

// TestNATMasqueradeXdpfw: a LAN client (a) reaches a WAN server (b)
// through a router whose filter and MASQUERADE are xdpfw's (--nat xdpfw):
// TCP connects and echoes, UDP answers, ping answers; b has no route back
// to the LAN, so every answer that comes back was translated, and the
// server sees the router's address and the client's own port, as it does
// when the kernel's iptables masquerades the same flows (checked first,
// on the same namespaces). The kernel's conntrack of the router sees the
// translated connections only. --nat xdpfw is refused while the kernel's
// nat table has a rule; a nat INPUT rule is refused (not built).
func TestNATMasqueradeXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x := newRouter(t)
	vethPeerReady(t, x.a, "xa") // for the fast path's run, last
	vethPeerReady(t, x.b, "xb")
	servePeer(t, x.b, 8080)
	serveEcho(t, x.b, 80)
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	// b's answers reach a only translated
	if out, err := x.b.Exec(ctx, "ip", "route", "del", "default"); err != nil {
		t.Fatalf("ip route del default in %s: %v\n%s", x.b, err, out)
	}
	wan := hostPort(x.lb.cli4, 8080)
	var debug func()
	flows := func(what string) {
		t.Helper()
		for _, network := range []string{"tcp4", "udp4"} {
			local, seen, err := peerSeen(t, x.a, network, wan)
			if err != nil {
				t.Errorf("%s: %s to %s: %v", what, network, wan, err)
				continue
			}
			_, lport, _ := net.SplitHostPort(local)
			if want := hostPort(x.lb.srv4, 0); !strings.HasPrefix(seen, strings.TrimSuffix(want, "0")) || !strings.HasSuffix(seen, ":"+lport) {
				t.Errorf("%s: %s: the server saw %s, want the router's address %s and the client's port %s", what, network, seen, x.lb.srv4, lport)
			}
		}
		if t.Failed() && debug != nil {
			debug()
		}
		e := dialEcho(t, x.a, hostPort(x.lb.cli4, 80))
		for i := range 3 {
			if err := e.roundTrip(fmt.Sprintf("line %d", i)); err != nil {
				t.Errorf("%s: echo over the masqueraded connection: %v", what, err)
			}
		}
		checkPing(t, what+": ping", x.a, x.lb.cli4, true)
	}

	// The oracle: the kernel's iptables, nat and filter.
	kernelNAT(t, x.r, "-A", "POSTROUTING", "-o", "rb", "-j", "MASQUERADE")
	iptablesRestoreText(t, x.r, masqRules)
	flows("iptables")
	iptablesRestoreText(t, x.r, "")
	if t.Failed() {
		t.FailNow()
	}

	f := newFW(t, x.r)
	path := writeRules(t, "nat.rules", natRules)
	// the kernel's nat table still has its rule: refused, nothing loaded
	r := f.runWant(1, "load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", path)
	if !strings.Contains(r.stderr, "the kernel translates already") {
		t.Errorf("--nat xdpfw with a kernel nat rule: %s", r.stderr)
	}
	kernelNAT(t, x.r, "-F")
	// the nat INPUT chain (SNAT of packets delivered here) is not
	// translated by xdpfw: refused, at its line, with the hint
	natIn := strings.Replace(natRules, "COMMIT", "-A INPUT -p tcp --dport 8080 -j SNAT --to-source 10.200.1.1\nCOMMIT", 1)
	r = f.runWant(1, "load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "natin.rules", natIn))
	if !strings.Contains(r.stderr, "natin.rules:7:") || !strings.Contains(r.stderr, "INPUT chain") || !strings.Contains(r.stderr, "--nat kernel") {
		t.Errorf("--nat xdpfw with a nat INPUT rule: %s", r.stderr)
	}
	// a filter without connection tracking: refused
	stateless := strings.Replace(natRules, "-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n", "", 1)
	stateless = strings.Replace(stateless, "-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n", "", 1)
	r = f.runWant(1, "load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "stateless.rules", stateless))
	if !strings.Contains(r.stderr, "needs connection tracking") {
		t.Errorf("--nat xdpfw with a stateless filter: %s", r.stderr)
	}
	// and without --nat xdpfw the nat table is the kernel's, as before
	if r = f.run("load", "-i", "ra", "-i", "rb", "--ipv4-file", path); r.code == 0 || !strings.Contains(r.stderr, "table nat") {
		t.Errorf("load of a nat table without --nat xdpfw: %s", r.stderr)
	}

	f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", path)
	debug = func() { t.Logf("status:\n%s", f.mustRun("status", "--json").stdout) }
	flows("xdpfw")
	if t.Failed() {
		t.Logf("status:\n%s", f.mustRun("status", "--json").stdout)
	}
	// the filter judged the answers in FORWARD, ESTABLISHED, addressed to the client
	if n := f.list().rule(t, "-A FORWARD -4 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT").Counters.Packets; n == 0 {
		t.Errorf("xdpfw: FORWARD ESTABLISHED counted no answer")
	}
	if n := f.list().rule(t, "-A INPUT -4 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT").Counters.Packets; n != 0 {
		t.Errorf("xdpfw: INPUT ESTABLISHED counted %d packets: answers judged before their translation", n)
	}
	// conntrack list: the connection as the filter saw it, and its reply
	// tuple as the kernel's conntrack -L shows a masqueraded one's
	var cts []natConn
	f.decode(&cts, "conntrack", "list", "--json")
	translated := 0
	for _, c := range cts {
		if c.NAT == nil {
			continue
		}
		translated++
		_, sport, _ := net.SplitHostPort(c.Src)
		if c.NAT.Src != c.Dst || c.NAT.Dst != hostPort(x.lb.srv4, 0)[:len(x.lb.srv4)+1]+sport || c.NAT.Kind != "SNAT" {
			t.Errorf("conntrack list: %s > %s: reply %+v; want from %s to the router's %s:%s, SNAT", c.Src, c.Dst, *c.NAT, c.Dst, x.lb.srv4, sport)
		}
	}
	if translated < 3 {
		t.Errorf("conntrack list: %d translated connections, want the TCP, UDP and ping ones: %+v", translated, cts)
	}
	if l := f.mustRun("conntrack", "list").stdout; !strings.Contains(l, "reply: src="+x.lb.cli4) || !strings.Contains(l, "[SNAT]") {
		t.Errorf("conntrack list shows no translation:\n%s", l)
	}
	st := f.natStatus()
	if st.Mode != "xdpfw" || st.Counters["bound"] != 4 || st.Counters["no_port"] != 0 {
		t.Errorf("status: nat %+v; want mode xdpfw, 4 connections bound (2 TCP, UDP, ping), none refused", st)
	}
	if out := f.mustRun("status").stdout; !strings.Contains(out, "NAT: xdpfw translates (load --nat xdpfw): 4 connections bound") {
		t.Errorf("status does not say xdpfw translates:\n%s", out)
	}
	found := false
	for _, b := range st.Bindings {
		if strings.Contains(b, x.la.cli4) && strings.Contains(b, x.lb.srv4) {
			found = true
		}
	}
	if !found {
		t.Errorf("status: no binding of %s to %s: %v", x.la.cli4, x.lb.srv4, st.Bindings)
	}

	// A masqueraded connection whose original direction's binding is
	// gone (the LRU's room) goes on: its conntrack entry keeps the
	// translation (docs/nat.md "The translation kept in the conntrack
	// entry"), as the kernel's does; its answers keep their binding.
	// (A connection without the copy is dropped, lost: natdnat_test.go.)
	e := dialEcho(t, x.a, hostPort(x.lb.cli4, 80))
	if err := e.roundTrip("bound"); err != nil {
		t.Fatalf("echo: %v", err)
	}
	f.unbind(t, netip.MustParseAddrPort(e.c.LocalAddr().String()), netip.MustParseAddrPort(hostPort(x.lb.cli4, 80)))
	if err := e.roundTrip("kept"); err != nil {
		t.Errorf("echo over a masqueraded connection whose binding went: %v; want its entry's translation", err)
	}
	if st := f.natStatus(); st.Counters["lost"] != 0 {
		t.Errorf("status: nat counters %v; want nothing lost", st.Counters)
	}

	// SNAT to a range of two ports: two UDP flows get them, a third finds
	// none free and its datagram is dropped, counted (the kernel drops
	// what it cannot translate too)
	snat := strings.Replace(natRules, "-A POSTROUTING -o rb -j MASQUERADE",
		"-A POSTROUTING -o rb -p udp -j SNAT --to-source "+x.lb.srv4+":2000-2001\n-A POSTROUTING -o rb -j MASQUERADE", 1)
	f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "snat.rules", snat))
	got := map[string]bool{}
	for range 2 {
		_, seen, err := peerSeen(t, x.a, "udp4", wan)
		if err != nil {
			t.Fatalf("SNAT to 2000-2001: %v", err)
		}
		got[seen] = true
	}
	if !got[hostPort(x.lb.srv4, 2000)] || !got[hostPort(x.lb.srv4, 2001)] {
		t.Errorf("SNAT to 2000-2001: the server saw %v, want both ports of the range", got)
	}
	if _, seen, err := peerSeen(t, x.a, "udp4", wan); err == nil {
		t.Errorf("SNAT to 2000-2001, a third flow: the server saw %s; want no port left, the datagram dropped", seen)
	}
	st = f.natStatus()
	if st.Counters["no_port"] != 1 {
		t.Errorf("status: nat counters %v; want no_port 1", st.Counters)
	}
	checkTCP(t, "SNAT: TCP still masqueraded", tcpProbe{from: x.a, addr: hostPort(x.lb.cli4, 80), ok: true})

	// The fast path: translated packets redirected in XDP, both ways
	f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--forward", "xdp-veth", "--ipv4-file", path)
	var fs fwdStatus
	f.decode(&fs, "status", "--json")
	before := fs.Forward.Counters["xdp"].Packets
	flows("xdpfw, fast path")
	f.decode(&fs, "status", "--json")
	if n := fs.Forward.Counters["xdp"].Packets - before; n < 10 {
		t.Errorf("fast path: %d translated packets forwarded in XDP, want the flows' (counters %v)", n, fs.Forward.Counters)
	}
}

// unbindLost deletes the binding of the TCP tuple from > to (f.unbind):
// e's connection, which it translates, must then fail closed, its
// packets dropped and counted lost, never forwarded untranslated.
func (f *fw) unbindLost(t *testing.T, e *echoConn, from, to netip.AddrPort) {
	t.Helper()
	f.unbind(t, from, to)
	if err := e.roundTrip("unbound"); err == nil {
		t.Errorf("echo over a translated connection without its binding of %s > %s: answered; want its packets dropped", from, to)
	}
	if st := f.natStatus(); st.Counters["lost"] == 0 {
		t.Errorf("status: nat counters %v; want the packets without a binding counted (lost)", st.Counters)
	}
}

// unbind deletes the binding of the TCP tuple from > to (struct
// fw_nat_tuple, from the pinned fw_nat_binds).
func (f *fw) unbind(t *testing.T, from, to netip.AddrPort) {
	t.Helper()
	binds, err := ebpf.LoadPinnedMap(filepath.Join(f.pinDir, "fw_nat_binds"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer binds.Close()
	key := make([]byte, 16)
	copy(key[0:4], from.Addr().AsSlice())
	copy(key[4:8], to.Addr().AsSlice())
	binary.BigEndian.PutUint16(key[8:], from.Port())
	binary.BigEndian.PutUint16(key[10:], to.Port())
	key[12] = 6
	if err := binds.Delete(key); err != nil {
		t.Fatalf("deleting the binding of %s > %s: %v", from, to, err)
	}
}

// natStatus is what `status --json` says of xdpfw's NAT.
type natStatus struct {
	Mode     string            `json:"mode"`
	Counters map[string]uint64 `json:"counters"`
	Bindings []string          `json:"bindings"`
}

// natStatus reads the NAT part of `status --json`.
func (f *fw) natStatus() natStatus {
	var st struct {
		NAT natStatus `json:"nat"`
	}
	f.decode(&st, "status", "--json")
	return st.NAT
}
