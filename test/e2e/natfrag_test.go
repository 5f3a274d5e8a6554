package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// serveUDPEcho sends every UDP datagram to port in ns back to where it
// came from, whole; seen returns the sources of the datagrams so far.
func serveUDPEcho(t *testing.T, ns *testutil.NetNS, port int) (seen func() []string) {
	t.Helper()
	var pc net.PacketConn
	if err := ns.Do(func() (err error) { pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", port)); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var mu sync.Mutex
	var from []string
	go func() {
		b := make([]byte, 65536)
		for {
			n, a, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			mu.Lock()
			from = append(from, a.String())
			mu.Unlock()
			_, _ = pc.WriteTo(b[:n], a)
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), from...)
	}
}

// fragRules: the LAN (ra) masqueraded out of rb; a UDP port forward from
// the router's WAN address to the LAN server; a UDP service of the router
// reached through REDIRECT; UDP to port 7003 not tracked (so not
// translated).
func fragRules(wan, server string) string {
	return strings.Join([]string{
		"*raw",
		":PREROUTING ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A PREROUTING -p udp -m udp --dport 7003 -j NOTRACK",
		"COMMIT",
		"*nat",
		":PREROUTING ACCEPT [0:0]",
		":INPUT ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		":POSTROUTING ACCEPT [0:0]",
		"-A PREROUTING -d " + wan + "/32 -p udp -m udp --dport 9091 -j DNAT --to-destination " + server + ":7001",
		"-A PREROUTING -i rb -p udp -m udp --dport 2223 -j REDIRECT --to-ports 7002",
		"-A POSTROUTING -o rb -j MASQUERADE",
		"COMMIT",
		"*filter",
		":INPUT DROP [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A INPUT -i rb -p udp -m udp --dport 7002 -j ACCEPT",
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -i ra -o rb -j ACCEPT",
		"-A FORWARD -d " + server + "/32 -p udp -m udp --dport 7001 -j ACCEPT",
		"COMMIT",
	}, "\n") + "\n"
}

// TestNATFragmentsXdpfw: fragmented UDP datagrams of translated
// connections cross an xdpfw router (--nat xdpfw) as they cross the
// kernel's NAT (the same rule file through iptables first, on the same
// namespaces): 3,000-byte datagrams (three fragments on the 1,500-byte
// links) each way of a masqueraded connection (LAN client a to WAN
// server b, which has no route back: every answer was translated), of a
// port forward (b to a through the router's WAN address) and of a
// REDIRECTed service of the router (its answer fragmented by the router's
// own stack, translated at tc egress). Each connection is opened once with
// a small datagram, once with a fragmented one (its first packet: bound
// on its first fragment). The datagrams come back whole, from the address
// the client sent to; the servers see the translated source; the later
// fragments were translated by xdpfw (frag_nat), none dropped.
func TestNATFragmentsXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x, router, _ := natServedRouter(t)
	wanSeen := serveUDPEcho(t, x.b, 7000)
	untracked := serveUDPEcho(t, x.b, 7003)
	lanSeen := serveUDPEcho(t, x.a, 7001)
	serveUDPEcho(t, x.r, 7002)
	text := fragRules(router, x.la.cli4)
	big := bytes.Repeat([]byte("0123456789abcdef"), 3000/16)

	flows := func(what string) {
		t.Helper()
		for _, c := range []struct {
			name   string
			from   *testutil.NetNS
			to     string
			seen   func() []string
			seenIP string // the source the server sees
		}{
			{"MASQUERADE", x.a, hostPort(x.lb.cli4, 7000), wanSeen, router},
			{"DNAT", x.b, hostPort(router, 9091), lanSeen, x.lb.cli4},
			{"REDIRECT", x.b, hostPort(router, 2223), nil, ""},
		} {
			for _, first := range [][]byte{[]byte("open"), big} {
				u := udpFrom(t, c.from, c.to)
				for i, msg := range [][]byte{first, big, big} {
					if _, err := u.Write(msg); err != nil {
						t.Fatalf("%s: %s: %v", what, c.name, err)
					}
					b := make([]byte, 65536)
					_ = u.SetReadDeadline(time.Now().Add(2 * time.Second))
					n, err := u.Read(b) // a connected socket: only from the address it sent to
					if err != nil || !bytes.Equal(b[:n], msg) {
						t.Errorf("%s: %s: datagram %d (%d bytes; the first %d) to %s: echoed %d bytes, %v; want it whole",
							what, c.name, i, len(msg), len(first), c.to, n, err)
					}
				}
				u.Close()
				if c.seen == nil {
					continue
				}
				s := c.seen()
				if len(s) < 3 || !strings.HasPrefix(s[len(s)-1], c.seenIP+":") {
					t.Errorf("%s: %s: the server saw %v; want the datagrams from %s", what, c.name, s, c.seenIP)
				}
			}
		}
		// not tracked: forwarded as it is, fragments and all (the
		// server cannot answer the client's own address)
		u := udpFrom(t, x.a, hostPort(x.lb.cli4, 7003))
		n := len(untracked())
		if _, err := u.Write(big); err != nil {
			t.Fatal(err)
		}
		var s []string
		for range 20 {
			if s = untracked()[n:]; len(s) > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(s) != 1 || s[0] != u.LocalAddr().String() {
			t.Errorf("%s: an untracked datagram of %d bytes: the server saw %v; want it once from the client's own %s", what, len(big), s, u.LocalAddr())
		}
		u.Close()
	}

	// The oracle: the kernel's NAT (it reassembles, translates, fragments again).
	f := kernelThenXdpfw(t, x, text, func() { flows("iptables") })
	flows("xdpfw")
	st := f.natStatus()
	// 5 big datagrams (3 fragments each: 2 later ones) each way, for each
	// of MASQUERADE, DNAT and REDIRECT (its answers at tc egress): 60; and
	// the untracked one's, as they are: 62
	if c := st.Counters; c["frag_nat"] != 62 || c["fragment"] != 0 || c["lost"] != 0 {
		t.Errorf("status: nat counters %v; want frag_nat 62 (every later fragment given its datagram's translation), fragment 0, lost 0", c)
	}
	if t.Failed() {
		t.Logf("status:\n%s", f.mustRun("status", "--json").stdout)
	}
}

// TestNATTraceBindingXdpfw: `xdpfw trace` of a packet of a bound
// connection looks its binding up and judges it as the filter chains see
// it: the answer to a masqueraded connection (arriving addressed to the
// router) in FORWARD, to the client; a packet through a port forward in
// FORWARD, to the LAN server; the answer a REDIRECTed service sends
// (--out) as it is sent, leaving from the port the client sent to; a
// packet of the router's own connection nat OUTPUT DNATed, by OUTPUT
// with its translated destination (it was judged as sent: NEW, against
// the virtual address). Each shows the tuples it arrives with, the
// chains judged and it leaves with. The translated tuple nat OUTPUT marks
// (a binding of all zeros) shows no binding (it showed one to 0.0.0.0).
func TestNATTraceBindingXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x, router, _ := natServedRouter(t)
	serveUDPEcho(t, x.b, 7000)
	serveUDPEcho(t, x.a, 7001)
	serveUDPEcho(t, x.r, 7002)
	// nat OUTPUT: the router's own connection to a virtual address,
	// DNATed to b's echo service
	const vip = "10.99.0.3"
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := x.r.Exec(ctx, "ip", "route", "add", vip+"/32", "via", x.lb.cli4); err != nil {
		t.Fatalf("a route to %s: %v\n%s", vip, err, out)
	}
	text := strings.Replace(fragRules(router, x.la.cli4), "-A POSTROUTING -o rb -j MASQUERADE\n",
		"-A POSTROUTING -o rb -j MASQUERADE\n-A OUTPUT -d "+vip+"/32 -p udp -m udp --dport 9999 -j DNAT --to-destination "+hostPort(x.lb.cli4, 7000)+"\n", 1)
	f := newFW(t, x.r)
	f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "trace.rules", text))
	open := func(from *testutil.NetNS, lport int, to string) {
		t.Helper()
		u := udpFromPort(t, from, lport, to)
		if _, err := u.Write([]byte("open")); err != nil {
			t.Fatal(err)
		}
		_ = u.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := u.Read(make([]byte, 10)); err != nil {
			t.Fatalf("UDP from port %d to %s: %v", lport, to, err)
		}
	}
	open(x.a, 41001, hostPort(x.lb.cli4, 7000))
	open(x.b, 41002, hostPort(router, 9091))
	open(x.b, 41003, hostPort(router, 2223))
	open(x.r, 41004, hostPort(vip, 9999))
	server, client, wanClient := x.lb.cli4, x.la.cli4, x.lb.cli4
	for _, c := range []struct {
		args                    []string
		chain                   string
		arrives, judged, leaves string
	}{
		{[]string{"--in", "rb", "--src", server, "--sport", "7000", "--dst", router, "--dport", "41001"}, "FORWARD",
			"udp " + hostPort(server, 7000) + " > " + hostPort(router, 41001), hostPort(server, 7000) + " > " + hostPort(client, 41001),
			hostPort(server, 7000) + " > " + hostPort(client, 41001)},
		{[]string{"--in", "ra", "--src", client, "--sport", "41001", "--dst", server, "--dport", "7000"}, "FORWARD",
			"udp " + hostPort(client, 41001) + " > " + hostPort(server, 7000), hostPort(client, 41001) + " > " + hostPort(server, 7000),
			hostPort(router, 41001) + " > " + hostPort(server, 7000)},
		{[]string{"--in", "rb", "--src", wanClient, "--sport", "41002", "--dst", router, "--dport", "9091"}, "FORWARD",
			"udp " + hostPort(wanClient, 41002) + " > " + hostPort(router, 9091), hostPort(wanClient, 41002) + " > " + hostPort(client, 7001),
			hostPort(wanClient, 41002) + " > " + hostPort(client, 7001)},
		{[]string{"--out", "--src", router, "--sport", "7002", "--dst", wanClient, "--dport", "41003"}, "OUTPUT",
			"udp " + hostPort(router, 7002) + " > " + hostPort(wanClient, 41003), hostPort(router, 7002) + " > " + hostPort(wanClient, 41003),
			hostPort(router, 2223) + " > " + hostPort(wanClient, 41003)},
		// nat OUTPUT: judged by filter OUTPUT with its destination
		// translated (fw_nat_out_pre), as the kernel's nat OUTPUT runs
		// before filter OUTPUT
		{[]string{"--out", "--src", router, "--sport", "41004", "--dst", vip, "--dport", "9999"}, "OUTPUT",
			"udp " + hostPort(router, 41004) + " > " + hostPort(vip, 9999), hostPort(router, 41004) + " > " + hostPort(server, 7000),
			hostPort(router, 41004) + " > " + hostPort(server, 7000)},
	} {
		var rs []struct {
			Chain   string `json:"chain"`
			Action  string `json:"action"`
			CTState string `json:"ctstate"`
			Binding *struct {
				Arrives    string `json:"arrives"`
				FilterSees string `json:"filter_sees"`
				Leaves     string `json:"leaves"`
			} `json:"binding"`
		}
		f.decode(&rs, append([]string{"trace", "--json", "-p", "udp"}, c.args...)...)
		if len(rs) != 1 || rs[0].Binding == nil {
			t.Errorf("trace %v: %+v; want one result with its binding", c.args, rs)
			continue
		}
		r, b := rs[0], rs[0].Binding
		if r.Chain != c.chain || r.Action != "ACCEPT" || r.CTState != "ESTABLISHED" ||
			b.Arrives != c.arrives || b.FilterSees != c.judged || b.Leaves != c.leaves {
			t.Errorf("trace %v: %s %s %s, binding %+v;\nwant %s ACCEPT ESTABLISHED, arrives %q, judged %q, leaves %q",
				c.args, r.Chain, r.Action, r.CTState, *b, c.chain, c.arrives, c.judged, c.leaves)
		}
	}
	// the translated tuple of the nat OUTPUT connection holds nat
	// OUTPUT's mark (all zeros), which is no binding
	tr := f.mustRun("trace", "--out", "-p", "udp", "--src", router, "--sport", "41004", "--dst", server, "--dport", "7000").stdout
	if strings.Contains(tr, "nat binding") || strings.Contains(tr, "0.0.0.0") {
		t.Errorf("trace of nat OUTPUT's translated tuple (its mark):\n%s", tr)
	}
	tr = f.mustRun("trace", "--in", "rb", "-p", "udp", "--src", server, "--sport", "7000", "--dst", router, "--dport", "41001").stdout
	if !strings.Contains(tr, "nat binding: arrives udp "+hostPort(server, 7000)+" > "+hostPort(router, 41001)+"; the filter judged ") {
		t.Errorf("trace of a bound packet:\n%s", tr)
	}
}
