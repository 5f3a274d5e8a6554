package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// icmpMsg is an ICMP message a raw socket read: who sent it, its type
// and code, and the packet it quotes (an error's).
type icmpMsg struct {
	from       string
	typ, code  uint8
	qsrc, qdst string // the quoted packet's addresses and ports (host:port)
	qproto     uint8
	ok         bool // the ICMP checksum is valid
}

// icmpListen opens a raw ICMP socket in ns; read returns the errors it
// received within d (echo messages left out).
func icmpListen(t *testing.T, ns *testutil.NetNS) (read func(d time.Duration) []icmpMsg) {
	t.Helper()
	var c net.PacketConn
	if err := ns.Do(func() (err error) { c, err = net.ListenPacket("ip4:icmp", "0.0.0.0"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return func(d time.Duration) []icmpMsg {
		var out []icmpMsg
		b := make([]byte, 2000)
		_ = c.SetReadDeadline(time.Now().Add(d))
		for {
			n, from, err := c.ReadFrom(b) // the IPv4 header stripped
			if err != nil {
				return out
			}
			m := b[:n]
			if n < 8+20+8 || m[0] == 0 || m[0] == 8 {
				continue
			}
			in := m[8:]
			ihl := int(in[0]&0xf) * 4
			if len(in) < ihl+8 {
				continue
			}
			l4 := in[ihl:]
			out = append(out, icmpMsg{from: from.String(), typ: m[0], code: m[1], qproto: in[9],
				qsrc: hostPort(net.IP(in[12:16]).String(), int(binary.BigEndian.Uint16(l4[0:]))),
				qdst: hostPort(net.IP(in[16:20]).String(), int(binary.BigEndian.Uint16(l4[2:]))),
				ok:   packet.Checksum(m) == 0})
		}
	}
}

// udpFrom opens a UDP socket in ns connected to addr, with setsockopt
// options (IPPROTO_IP level: name, value) set.
func udpFrom(t *testing.T, ns *testutil.NetNS, addr string, opts ...[2]int) *net.UDPConn {
	t.Helper()
	var c net.Conn
	if err := ns.Do(func() (err error) { c, err = net.Dial("udp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	uc := c.(*net.UDPConn)
	rc, err := uc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, o[0], o[1]) }); err != nil || serr != nil {
			t.Fatalf("setsockopt %v: %v %v", o, err, serr)
		}
	}
	return uc
}

// TestNATICMPErrorsXdpfw: ICMP errors about masqueraded connections cross
// an xdpfw router (--nat xdpfw) as they cross the kernel's MASQUERADE
// router (checked first on the same namespaces): a UDP port unreachable
// from the server reaches the client (ECONNREFUSED), judged RELATED in
// FORWARD, with its quote translated back; a port unreachable the client
// sends about the server's datagram to a closed socket reaches the server
// from the router's address, quoting the translated tuple; and the errors
// the router's own kernel sends about a packet it cannot forward (TTL 1;
// DF and bigger than the egress MTU) reach the client quoting what it
// sent. Every error's ICMP checksum is valid.
func TestNATICMPErrorsXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x := newRouter(t)
	vethPeerReady(t, x.a, "xa") // for the fast path's run
	vethPeerReady(t, x.b, "xb")
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	for _, c := range [][]string{{"ip", "route", "del", "default"}} {
		if out, err := x.b.Exec(ctx, c[0], c[1:]...); err != nil {
			t.Fatalf("%s in %s: %v\n%s", c, x.b, err, out)
		}
	}
	if out, err := x.r.Exec(ctx, "ip", "link", "set", "rb", "mtu", "1000"); err != nil {
		t.Fatalf("mtu: %v\n%s", err, out)
	}
	// a UDP server in b whose socket stays: its datagrams come from port 8090
	var srv net.PacketConn
	if err := x.b.Do(func() (err error) { srv, err = net.ListenPacket("udp4", ":8090"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	icmpA, icmpB := icmpListen(t, x.a), icmpListen(t, x.b)
	router, server := x.lb.srv4, x.lb.cli4

	check := func(what string) {
		t.Helper()
		// 1. a port unreachable from the server about a masqueraded datagram
		c := udpFrom(t, x.a, hostPort(server, 9))
		if _, err := c.Write([]byte("closed")); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 10)); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: UDP to a closed port of the server: %v; want connection refused (the server's port unreachable, translated back)", what, err)
		}
		local := c.LocalAddr().String()
		ms := icmpA(300 * time.Millisecond)
		if len(ms) != 1 || ms[0].from != server || ms[0].typ != 3 || ms[0].code != 3 || ms[0].qsrc != local ||
			ms[0].qdst != hostPort(server, 9) || !ms[0].ok {
			t.Errorf("%s: the client received %+v; want one port unreachable from %s quoting %s > %s:9, checksum valid", what, ms, server, local, server)
		}

		// 2. a port unreachable the client sends about the server's datagram
		c = udpFrom(t, x.a, hostPort(server, 8090))
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 100)
		_ = srv.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, from, err := srv.ReadFrom(b)
		if err != nil {
			t.Fatalf("%s: the server got nothing: %v", what, err)
		}
		c.Close() // the client's port is closed now
		if _, err := srv.WriteTo([]byte("late"), from); err != nil {
			t.Fatal(err)
		}
		ms = icmpB(time.Second)
		if len(ms) != 1 || ms[0].from != router || ms[0].typ != 3 || ms[0].code != 3 || ms[0].qsrc != hostPort(server, 8090) ||
			ms[0].qdst != from.String() || !ms[0].ok {
			t.Errorf("%s: the server received %+v; want one port unreachable from the router %s quoting %s:8090 > %s, checksum valid",
				what, ms, router, server, from)
		}

		// 3. TTL 1: the router's time exceeded, to the client, quoting what it sent
		c = udpFrom(t, x.a, hostPort(server, 8090), [2]int{syscall.IP_TTL, 1})
		if _, err := c.Write([]byte("ttl")); err != nil {
			t.Fatal(err)
		}
		local = c.LocalAddr().String()
		ms = icmpA(time.Second)
		if len(ms) != 1 || ms[0].from != x.la.srv4 || ms[0].typ != 11 || ms[0].qsrc != local || ms[0].qdst != hostPort(server, 8090) || !ms[0].ok {
			t.Errorf("%s: TTL 1: the client received %+v; want one time exceeded from %s quoting %s > %s:8090", what, ms, x.la.srv4, local, server)
		}

		// 4. DF and bigger than rb's MTU: fragmentation needed, to the client
		c = udpFrom(t, x.a, hostPort(server, 8090), [2]int{syscall.IP_MTU_DISCOVER, syscall.IP_PMTUDISC_PROBE})
		if _, err := c.Write(make([]byte, 1200)); err != nil {
			t.Fatal(err)
		}
		local = c.LocalAddr().String()
		ms = icmpA(time.Second)
		if len(ms) != 1 || ms[0].from != x.la.srv4 || ms[0].typ != 3 || ms[0].code != 4 || ms[0].qsrc != local || ms[0].qdst != hostPort(server, 8090) || !ms[0].ok {
			t.Errorf("%s: DF, 1200 bytes, MTU 1000: the client received %+v; want one fragmentation needed from %s quoting %s > %s:8090", what, ms, x.la.srv4, local, server)
		}
	}

	kernelNAT(t, x.r, "-A", "POSTROUTING", "-o", "rb", "-j", "MASQUERADE")
	iptablesRestoreText(t, x.r, masqRules)
	check("iptables")
	iptablesRestoreText(t, x.r, "")
	kernelNAT(t, x.r, "-F")
	if t.Failed() {
		t.FailNow()
	}

	f := newFW(t, x.r)
	for _, fwd := range []string{"stack", "xdp-veth"} {
		f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--forward", fwd, "--ipv4-file", writeRules(t, "nat.rules", natRules))
		check("xdpfw, --forward " + fwd)
	}
	if n := f.list().rule(t, "-A INPUT -4 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT").Counters.Packets; n != 0 {
		t.Errorf("xdpfw: INPUT RELATED,ESTABLISHED counted %d packets: errors judged before their translation", n)
	}
	st := f.natStatus()
	if c := st.Counters; c["icmp_error"] != 4 || c["kernel_icmp"] != 4 || c["lost"] != 0 {
		t.Errorf("status: nat counters %v; want icmp_error 4 (two errors each way), kernel_icmp 4 (TTL, DF: twice), lost 0", c)
	}
	if t.Failed() {
		t.Logf("status:\n%s", f.mustRun("status", "--json").stdout)
	}
}

// TestNATBindingsExpireXdpfw: a masqueraded connection's bindings go with
// its conntrack entry. Expired but not yet collected, its binding is
// never used for a new connection of the same tuple: that one is decided
// by the nat table in force (here a SNAT to ports 2000-2001 loaded since,
// where the old binding kept the client's own port), counted stale.
// Collected (`xdpfw conntrack gc`), both of its bindings are removed.
func TestNATBindingsExpireXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x, router, wan := natServedRouter(t)
	// a UDP exchange from a fixed client port; what the server saw
	exchange := func(port int) string {
		t.Helper()
		var c net.PacketConn
		if err := x.a.Do(func() (err error) { c, err = net.ListenPacket("udp4", hostPort(x.la.cli4, port)); return err }); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		to, _ := net.ResolveUDPAddr("udp4", wan)
		if _, err := c.WriteTo([]byte("who"), to); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 100)
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _, err := c.ReadFrom(b)
		if err != nil {
			t.Fatalf("UDP from port %d: %v", port, err)
		}
		return string(b[:n])
	}
	var st natStatus
	f := newFW(t, x.r)
	bindings := func(port int) (n int) {
		t.Helper()
		st = f.natStatus()
		for _, b := range st.Bindings {
			if strings.Contains(b, x.la.cli4+":"+strconv.Itoa(port)) {
				n++
			}
		}
		return n
	}
	timeouts := []string{"--ct-timeout", "udp=1", "--ct-timeout", "udp_stream=1"}
	f.mustRun(append([]string{"load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "nat.rules", natRules)}, timeouts...)...)
	// list shows the nat table; apply keeps it, and refuses to change it
	natLine := "-t nat -A POSTROUTING -4 -o rb -j MASQUERADE"
	if out := f.mustRun("list").stdout; !strings.Contains(out, "Table nat") || !strings.Contains(out, natLine) {
		t.Errorf("list shows no nat table:\n%s", out)
	}
	if out := f.mustRun("list", "-S").stdout; !strings.Contains(out, natLine) {
		t.Errorf("list -S shows no nat table:\n%s", out)
	}
	f.mustRun("apply", writeRules(t, "same.rules", natRules))
	f.mustRun("apply", writeRules(t, "filter.rules", masqRules))
	changed := strings.Replace(natRules, "-j MASQUERADE", "-j SNAT --to-source "+router, 1)
	if r := f.runWant(1, "apply", writeRules(t, "changed.rules", changed)); !strings.Contains(r.stderr, "differs from the one in force") {
		t.Errorf("apply of a changed nat table: %s", r.stderr)
	}
	// trace says what the nat table does with a new connection
	tr := f.mustRun("trace", "--in", "ra", "-p", "udp", "--src", x.la.cli4, "--dst", x.lb.cli4, "--dport", "8080", "--ctstate", "NEW").stdout
	if !strings.Contains(tr, "nat: a new connection's source translated (leaving by rb: "+natLine+")") {
		t.Errorf("trace of a forwarded packet under --nat xdpfw:\n%s", tr)
	}
	var l struct {
		NAT []string `json:"nat"`
	}
	f.decode(&l, "list", "--json")
	if len(l.NAT) != 1 || l.NAT[0] != natLine {
		t.Errorf("list --json: nat %q after apply; want the nat table loaded, [%s]", l.NAT, natLine)
	}
	if seen := exchange(41000); seen != hostPort(router, 41000) {
		t.Fatalf("MASQUERADE: the server saw %s, want %s", seen, hostPort(router, 41000))
	}
	if n := bindings(41000); n != 2 {
		t.Fatalf("status: %d bindings of the connection, want 2: %v", n, st.Bindings)
	}
	// the nat table changes; the connection expires (not collected)
	snat := strings.Replace(natRules, "-A POSTROUTING -o rb -j MASQUERADE",
		"-A POSTROUTING -o rb -p udp -j SNAT --to-source "+router+":2000-2001\n-A POSTROUTING -o rb -j MASQUERADE", 1)
	f.mustRun(append([]string{"load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "snat.rules", snat)}, timeouts...)...)
	time.Sleep(2500 * time.Millisecond) // past the 1 s timeout: expired, not collected
	if seen := exchange(41000); seen != hostPort(router, 2000) && seen != hostPort(router, 2001) {
		t.Errorf("a new connection of an expired one's tuple: the server saw %s; want the SNAT in force, %s:2000-2001, not the old binding", seen, router)
	}
	st = f.natStatus()
	if st.Counters["stale"] != 1 {
		t.Errorf("status: nat counters %v; want stale 1", st.Counters)
	}
	// expired and collected: both bindings go
	time.Sleep(2500 * time.Millisecond)
	f.mustRun("conntrack", "gc")
	if n := bindings(41000); n != 0 {
		t.Errorf("after conntrack gc: %d bindings of the expired connection left: %v", n, st.Bindings)
	}
	if len(st.Bindings) != 0 {
		t.Errorf("after conntrack gc: bindings left %v; want none (every connection expired)", st.Bindings)
	}
}

// TestNATDaemonXdpfw: the daemon's configuration names the NAT mode
// (nat: xdpfw, as load --nat xdpfw): it loads the rule file's nat table
// into xdpfw, a reload of a changed filter keeps it (applied, the
// translations in force), a changed nat table is loaded (the new
// connections get its translation), and a configuration without nat: is
// refused while xdpfw translates (its NAT never turned off by omission).
func TestNATDaemonXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x, router, wan := natServedRouter(t)
	seen := func(what string) string {
		t.Helper()
		_, s, err := peerSeen(t, x.a, "udp4", wan)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return s
	}
	dir := t.TempDir()
	rulesFile, config := filepath.Join(dir, "router.rules"), filepath.Join(dir, "xdpfw.yaml")
	writeAtomic(t, rulesFile, natRules)
	writeAtomic(t, config, "interfaces: [ra, rb]", "rules: router.rules", "nat: xdpfw", "watch: true")
	f := newFW(t, x.r)
	d := f.startDaemon(config)
	st := f.natStatus()
	if st.Mode != "xdpfw" {
		t.Fatalf("daemon with nat: xdpfw: status nat mode %q", st.Mode)
	}
	if s := seen("nat: xdpfw"); !strings.HasPrefix(s, router+":") {
		t.Errorf("nat: xdpfw: the server saw %s, want the router's address", s)
	}
	// a filter change: applied, the nat table kept
	writeAtomic(t, rulesFile, strings.Replace(natRules, "-A FORWARD -i ra -j ACCEPT", "-A FORWARD -i ra -p icmp -j ACCEPT\n-A FORWARD -i ra -j ACCEPT", 1))
	d.reloadedWant("applied")
	if l := f.mustRun("list").stdout; !strings.Contains(l, "-o rb -j MASQUERADE") || !strings.Contains(l, "-p icmp") {
		t.Errorf("after the filter's reload, list:\n%s", l)
	}
	if s := seen("after the filter's reload"); !strings.HasPrefix(s, router+":") {
		t.Errorf("after the filter's reload: the server saw %s, want the router's address", s)
	}
	// a nat table change: loaded
	writeAtomic(t, rulesFile, strings.Replace(natRules, "-A POSTROUTING -o rb -j MASQUERADE",
		"-A POSTROUTING -o rb -p udp -j SNAT --to-source "+router+":3000-3001\n-A POSTROUTING -o rb -j MASQUERADE", 1))
	d.reloadedWant("applied")
	if s := seen("after the nat table's reload"); s != hostPort(router, 3000) && s != hostPort(router, 3001) {
		t.Errorf("after the nat table's reload: the server saw %s, want %s:3000-3001; the daemon's log:\n%s", s, router, d.stderr)
	}
	// no nat: in the configuration while xdpfw translates: refused, kept
	writeAtomic(t, config, "interfaces: [ra, rb]", "rules: router.rules", "watch: true", "forward: stack")
	d.reloadedWant("failed")
	st = f.natStatus()
	if st.Mode != "xdpfw" {
		t.Errorf("a configuration without nat: turned xdpfw's NAT off: mode %q", st.Mode)
	}
}

// natServedRouter is newRouter whose server b answers on 8080
// (servePeer) and has no route back to the LAN: every answer that reaches
// a was translated. It returns the router's WAN address and the server's
// address:8080.
func natServedRouter(t *testing.T) (x *router, routerAddr, wan string) {
	t.Helper()
	x = newRouter(t)
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := x.b.Exec(ctx, "ip", "route", "del", "default"); err != nil {
		t.Fatalf("ip route del default in %s: %v\n%s", x.b, err, out)
	}
	servePeer(t, x.b, 8080)
	return x, x.lb.srv4, hostPort(x.lb.cli4, 8080)
}

// TestNATConntrackFullXdpfw: with a conntrack table full of assured
// connections and --ct-full accept, a new connection the nat table
// translates is not translated untracked: its binding would look stale
// at its next packet (NEW, no entry before it) and go. Its packets are
// dropped (no_conntrack), none leaves with the client's address or
// re-bound as stale, and once the table has room the same connection is
// translated and answered.
func TestNATConntrackFullXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x, router, wan := natServedRouter(t)
	// a UDP sink in b that records who sent to it: b has no route back
	// to the LAN, so an untranslated datagram would be seen here only
	var sink net.PacketConn
	if err := x.b.Do(func() (err error) { sink, err = net.ListenPacket("udp4", ":8091"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	seenBy := make(chan string, 100)
	go func() {
		b := make([]byte, 100)
		for {
			_, from, err := sink.ReadFrom(b)
			if err != nil {
				return
			}
			seenBy <- from.String()
		}
	}()
	const max = 8
	f := newFW(t, x.r)
	f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ct-max", strconv.Itoa(max), "--ct-full", "accept",
		"--ipv4-file", writeRules(t, "nat.rules", natRules))
	// udp sends n datagrams from the client's port to addr, each waiting
	// for an answer within d; it returns the answers.
	udp := func(port int, addr string, n int, d time.Duration) (answers []string) {
		t.Helper()
		var c net.PacketConn
		if err := x.a.Do(func() (err error) { c, err = net.ListenPacket("udp4", hostPort(x.la.cli4, port)); return err }); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		to, _ := net.ResolveUDPAddr("udp4", addr)
		for range n {
			if _, err := c.WriteTo([]byte("who"), to); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 100)
			_ = c.SetReadDeadline(time.Now().Add(d))
			if k, _, err := c.ReadFrom(b); err == nil {
				answers = append(answers, string(b[:k]))
			}
		}
		return answers
	}
	var ct struct {
		Entries int `json:"entries"`
		Max     int `json:"max"`
	}
	// fill the table with assured connections (query, answer, query)
	for port := 42000; ; port++ {
		f.decode(&ct, "conntrack", "stats", "--json")
		if ct.Entries >= max {
			break
		}
		if port == 42000+2*max {
			t.Fatalf("conntrack stats %+v: the table does not fill", ct)
		}
		if a := udp(port, wan, 2, 2*time.Second); len(a) != 2 || a[0] != hostPort(router, port) {
			t.Fatalf("filling the table: port %d answered %q, want %s twice", port, a, hostPort(router, port))
		}
	}
	// a new connection: never out untranslated, never re-bound as stale
	udp(43000, hostPort(x.lb.cli4, 8091), 3, 300*time.Millisecond)
	if n := len(seenBy); n != 0 {
		t.Errorf("the sink got %d datagrams of a connection conntrack could not record (%s first); want them dropped", n, <-seenBy)
	}
	st := f.natStatus()
	if c := st.Counters; c["no_conntrack"] != 3 || c["stale"] != 0 || c["lost"] != 0 {
		t.Errorf("status: nat counters %v; want no_conntrack 3 (each datagram of the unrecorded connection), stale 0, lost 0", c)
	}
	for _, b := range st.Bindings {
		if strings.Contains(b, ":43000 ") {
			t.Errorf("a binding of the unrecorded connection: %s", b)
		}
	}
	// room again: the same connection is translated, as the sink sees it
	f.mustRun("conntrack", "flush")
	udp(43000, hostPort(x.lb.cli4, 8091), 1, 300*time.Millisecond)
	want := hostPort(router, 43000)
	select {
	case from := <-seenBy:
		if from != want {
			t.Errorf("the sink saw %s first; want only %s (the client's address must never leave)", from, want)
		}
	case <-time.After(2 * time.Second):
		t.Errorf("after conntrack flush: the sink saw nothing; want %s", want)
	}
	time.Sleep(200 * time.Millisecond)
	for len(seenBy) > 0 {
		if from := <-seenBy; from != want {
			t.Errorf("the sink saw %s; want only %s", from, want)
		}
	}
}
