package datapath_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// pppoeSID is the session the tests' access concentrator (macA) runs.
const pppoeSID = 0x1234

// pppoePkt is p in a PPPoE session frame of session sid after tags vlans.
func pppoePkt(p *packet.Packet, sid uint16, vlans ...uint16) *packet.Packet {
	q := *p
	q.PPPoE, q.PPPoESID, q.VLANs = true, sid, vlans
	return &q
}

// TestPPPoEParse: a PPPoE session frame (RFC 2516, as a PPPoE server
// sends it: no kernel PPPoE here, CONFIG_PPP is off) is judged as the IP
// packet it carries, arriving by the session's ppp device (-i), for a
// session the kernel has (fw_pppoe_rx), untagged or over one or two VLAN
// tags; discovery frames and PPP's own protocols pass untouched, as not
// IP; a frame of no session the data plane knows is dropped
// (pppoe-session-unknown), as pppoe_rcv drops it; a PPPoE length past the
// frame is malformed, and so is an IP packet longer than the PPPoE
// payload; REJECT cannot answer into a session: dropped, reject-failed;
// -m pkttype is unicast whatever the frame's MAC, as the ppp device makes it.
func TestPPPoEParse(t *testing.T) {
	f := newFixture(t)
	// veth0 stands for the ppp device of the session on eth0 (this
	// kernel has no ppp driver)
	f.installText("-A INPUT -i veth0 -s 10.1.2.3 -p udp --dport 53 -j ACCEPT\n" +
		"-A INPUT -i eth0 -s 10.1.2.3 -p udp --dport 53 -j ACCEPT\n" +
		"-A INPUT -i veth0 -s 10.1.2.3 -p udp --dport 99 -j REJECT\n" +
		"-A INPUT -s 10.1.2.3 -j DROP\n" +
		"-A INPUT -i veth0 -s 10.1.2.4 -m pkttype --pkt-type unicast -j ACCEPT\n")
	viaPPP, viaEth, reject, unicast := f.ids[0], f.ids[1], f.ids[2], f.ids[4]
	eth0, ppp := int(f.ifaces["eth0"]), int(f.ifaces["veth0"])
	sess := func(sid uint16, vlans ...uint16) datapath.PPPoESession {
		return datapath.PPPoESession{PPP: ppp, PPPName: "veth0", Dev: eth0, DevName: "eth0", VLANs: vlans, SID: sid,
			Peer: net.HardwareAddr(macA[:]), MAC: net.HardwareAddr(macB[:]), MTU: 1500}
	}
	if err := f.dp.SetPPPoE([]datapath.PPPoESession{sess(pppoeSID), sess(7, 7), sess(8, 100, 8)}); err != nil {
		t.Fatal(err)
	}
	if n, err := f.dp.PPPoESessions(); n != 3 || err != nil {
		t.Fatalf("the data plane holds %d sessions (%v), want 3", n, err)
	}
	dns := v4pkt(17, "10.1.2.3", "10.9.9.9", 1, 53)
	padded := pppoePkt(dns, pppoeSID)
	padded.PadTo60 = true
	lcp := &packet.Packet{SrcMAC: macA, DstMAC: macB, PPPoE: true, PPPoESID: pppoeSID, NonIP: packet.PPPLCP,
		Payload: []byte{9, 1, 0, 8, 0, 0, 0, 1}}
	padi := &packet.Packet{SrcMAC: macA, DstMAC: macB, NonIP: packet.EtherTypePPPoEDiscovery,
		Payload: []byte{0x11, 0x09, 0, 0, 0, 4, 1, 1, 0, 0}}
	otherPeer := pppoePkt(dns, pppoeSID)
	otherPeer.SrcMAC = [6]byte{2, 0, 0, 0, 0, 9}
	// the PPPoE length 8 bytes beyond the frame; 8 bytes short of the IP packet
	long := pppoePkt(dns, pppoeSID).Bytes()
	binary.BigEndian.PutUint16(long[18:], binary.BigEndian.Uint16(long[18:])+8)
	short := pppoePkt(dns, pppoeSID).Bytes()
	binary.BigEndian.PutUint16(short[18:], binary.BigEndian.Uint16(short[18:])-8)
	v6 := &packet.Packet{SrcMAC: macA, DstMAC: macB, Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8::2"),
		Proto: packet.ProtoUDP, SPort: 1, DPort: 53}

	for _, tc := range []struct {
		name   string
		frame  []byte
		rule   uint32
		action uint32
		reason compile.Reason
	}{
		{"plain frame on eth0", dns.Bytes(), viaEth, datapath.XDPPass, compile.ReasonRuleAccept},
		{"session frame: -i the ppp device", pppoePkt(dns, pppoeSID).Bytes(), viaPPP, datapath.XDPPass, compile.ReasonRuleAccept},
		{"session frame padded to 60", padded.Bytes(), viaPPP, datapath.XDPPass, compile.ReasonRuleAccept},
		{"session over VLAN 7", pppoePkt(dns, 7, 7).Bytes(), viaPPP, datapath.XDPPass, compile.ReasonRuleAccept},
		{"session over QinQ 100, 8", pppoePkt(dns, 8, 100, 8).Bytes(), viaPPP, datapath.XDPPass, compile.ReasonRuleAccept},
		{"session 7 untagged: unknown", pppoePkt(dns, 7).Bytes(), 0, datapath.XDPDrop, compile.ReasonPPPoESession},
		{"session 7 on VLAN 8: unknown", pppoePkt(dns, 7, 8).Bytes(), 0, datapath.XDPDrop, compile.ReasonPPPoESession},
		{"unknown session id", pppoePkt(dns, 99).Bytes(), 0, datapath.XDPDrop, compile.ReasonPPPoESession},
		{"another peer's MAC", otherPeer.Bytes(), 0, datapath.XDPDrop, compile.ReasonPPPoESession},
		{"IPv6 session frame: no v6 rule", pppoePkt(v6, pppoeSID).Bytes(), 0, datapath.XDPPass, compile.ReasonPolicyAccept},
		{"LCP: the kernel's", lcp.Bytes(), 0, datapath.XDPPass, compile.ReasonNotIP},
		{"LCP of an unknown session: the kernel's", func() []byte { l := *lcp; l.PPPoESID = 99; return l.Bytes() }(), 0,
			datapath.XDPPass, compile.ReasonNotIP},
		{"discovery (PADI): the kernel's", padi.Bytes(), 0, datapath.XDPPass, compile.ReasonNotIP},
		{"PPPoE length past the frame", long, 0, datapath.XDPDrop, compile.ReasonBadPPPoE},
		{"IP packet past the PPPoE payload", short, 0, datapath.XDPDrop, compile.ReasonBadIPv4},
		{"broadcast MAC: unicast on the ppp device", func() []byte {
			p := pppoePkt(v4pkt(17, "10.1.2.4", "10.9.9.9", 1, 53), pppoeSID)
			p.DstMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			return p.Bytes()
		}(), unicast, datapath.XDPPass, compile.ReasonRuleAccept},
		{"REJECT: no answer into a session", pppoePkt(v4pkt(17, "10.1.2.3", "10.9.9.9", 1, 99), pppoeSID).Bytes(), reject,
			datapath.XDPDrop, compile.ReasonRejectFail},
	} {
		r := f.mustRun(tc.frame, "eth0")
		if r.XDPAction != tc.action || r.Reason != tc.reason || (tc.rule != 0 && r.RuleID != tc.rule) {
			t.Errorf("%s: action %d, reason %s, rule %d; want %d, %s, rule %d", tc.name, r.XDPAction, r.Reason, r.RuleID,
				tc.action, tc.reason, tc.rule)
		}
	}

	// The tc egress program leaves session frames alone (the kernel's
	// pppoe_xmit sends them for the ppp device: OUTPUT is the ppp
	// device's, which xdpfw does not run on).
	if r, err := f.dp.TraceEgress(pppoePkt(dns, pppoeSID).Bytes(), datapath.NoCTState); err != nil || r.Reason != compile.ReasonNotIP {
		t.Errorf("egress: %+v, %v; want not IP", r, err)
	}

	// The sessions follow the kernel's: one gone, its frames are dropped.
	if err := f.dp.SetPPPoE([]datapath.PPPoESession{sess(7, 7)}); err != nil {
		t.Fatal(err)
	}
	if r := f.mustRun(pppoePkt(dns, pppoeSID).Bytes(), "eth0"); r.Reason != compile.ReasonPPPoESession {
		t.Errorf("session removed: reason %s, want %s", r.Reason, compile.ReasonPPPoESession)
	}
	if n, _ := f.dp.PPPoESessions(); n != 1 {
		t.Errorf("the data plane holds %d sessions, want 1", n)
	}
}

// frameTrap reads the frames a device receives (AF_PACKET), opened before
// anything is sent.
type frameTrap struct{ fd int }

func newFrameTrap(t *testing.T, ns *testutil.NetNS, ifindex int) *frameTrap {
	t.Helper()
	all := int(binary.BigEndian.Uint16(binary.NativeEndian.AppendUint16(nil, unix.ETH_P_ALL))) // htons
	tr := &frameTrap{fd: -1}
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, all)
		if err != nil {
			return err
		}
		tr.fd = fd
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(all), Ifindex: ifindex}); err != nil {
			return err
		}
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if tr.fd >= 0 {
		t.Cleanup(func() { unix.Close(tr.fd) })
	}
	if err != nil {
		t.Fatalf("AF_PACKET socket in %s: %v", ns, err)
	}
	return tr
}

// next is the next frame received (not sent) carrying UDP payload tag,
// waiting 2 s at most; nil if none came.
func (tr *frameTrap) next(tag string) []byte {
	buf := make([]byte, 65536)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		n, from, err := unix.Recvfrom(tr.fd, buf, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if p, err := packet.Decode(buf[:n]); err == nil && p.Proto == packet.ProtoUDP && string(p.Payload) == tag {
			return bytes.Clone(buf[:n])
		}
	}
	return nil
}

// TestPPPoEForward: the forwarding fast path between a PPPoE WAN and a
// LAN, over veth in namespaces, with real redirects (generic mode). This
// kernel has no PPPoE (CONFIG_PPP off): the access concentrator's frames
// are built by hand as RFC 2516 has them, and a veth stands for the ppp
// device (routes to the WAN name it; the session xdpfw learnt names it).
// A LAN datagram's first packet goes to the kernel (no answer yet); the
// answer, arriving as a session frame on wan0, leaves from XDP to the LAN
// as the kernel's ppp device would hand it on: PPPoE off, TTL less one,
// the LAN's MACs; the next LAN datagram leaves from XDP by wan0 in a
// session frame as pppoe_xmit would build it (session id, peer MAC,
// length). Both families. Then what the fast path cannot do as the kernel
// would goes to the kernel, counted: a frame the Ethernet device under the
// ppp device cannot carry (pppoe), TTL 1 (ttl), a session over a VLAN
// (pppoe).
func TestPPPoEForward(t *testing.T) {
	f := newFixture(t)
	isp, lan := testutil.NewNetNS(t), testutil.NewNetNS(t)
	wan, ac := testutil.VethPair(t, f.ns, "wan0", nil, isp, "ac0", nil)
	lanR, cli := testutil.VethPair(t, f.ns, "lan0", []string{"10.200.1.1/24", "fd00:200:1::1/64"}, lan, "cli0",
		[]string{"10.200.1.2/24", "fd00:200:1::2/64"})
	ppp, _ := testutil.VethPair(t, f.ns, "ppp0", nil, f.ns, "ppp0peer", nil)
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"},
		{"ip", "route", "add", "default", "dev", "ppp0"},
		{"ip", "-6", "route", "add", "default", "dev", "ppp0"},
		{"ip", "neigh", "replace", "10.200.1.2", "lladdr", cli.MAC.String(), "dev", "lan0", "nud", "permanent"},
		{"ip", "-6", "neigh", "replace", "fd00:200:1::2", "lladdr", cli.MAC.String(), "dev", "lan0", "nud", "permanent"},
	} {
		if out, err := f.ns.Exec(t.Context(), args[0], args[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	for _, e := range []testutil.VethEnd{wan, lanR, ppp} {
		f.ifaces[e.Name] = uint32(e.Index)
	}
	f.installText("-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n" +
		"-A FORWARD -i lan0 -o ppp0 -j ACCEPT\n" +
		"-A FORWARD -j DROP\n")
	for _, dev := range []string{"wan0", "lan0"} {
		if err := f.ns.Do(func() error { _, err := f.dp.Attach(dev, datapath.ModeGeneric); return err }); err != nil {
			t.Fatalf("attach %s: %v", dev, err)
		}
		t.Cleanup(func() { _ = f.ns.Do(func() error { return f.dp.Detach(dev) }) })
	}
	if err := f.ns.Do(func() error { return f.dp.SetForwardPorts([]int{wan.Index, lanR.Index}) }); err != nil {
		t.Fatal(err)
	}
	session := datapath.PPPoESession{PPP: ppp.Index, PPPName: "ppp0", Dev: wan.Index, DevName: "wan0", SID: pppoeSID,
		Peer: ac.MAC, MAC: wan.MAC, MTU: 1500}
	if err := f.dp.SetPPPoE([]datapath.PPPoESession{session}); err != nil {
		t.Fatal(err)
	}
	counts := func() [datapath.NumFwdReasons]uint64 {
		c, err := f.dp.ForwardCounters()
		if err != nil {
			t.Fatal(err)
		}
		var out [datapath.NumFwdReasons]uint64
		for i := range c {
			out[i] = c[i].Packets
		}
		return out
	}
	// wantCount waits (2 s at most) for a packet to be counted, then
	// checks it was, under how alone
	wantCount := func(what string, before [datapath.NumFwdReasons]uint64, how datapath.FwdReason) {
		t.Helper()
		after := counts()
		for deadline := time.Now().Add(2 * time.Second); after == before && time.Now().Before(deadline); after = counts() {
			time.Sleep(10 * time.Millisecond)
		}
		for r := range after {
			if d, w := after[r]-before[r], map[bool]uint64{true: 1}[datapath.FwdReason(r) == how]; d != w {
				t.Errorf("%s: forwarded %s: %d packets, want %d", what, datapath.FwdReason(r), d, w)
			}
		}
	}
	mac := func(h net.HardwareAddr) (m [6]byte) { copy(m[:], h); return }
	trapCli, trapAC := newFrameTrap(t, lan, cli.Index), newFrameTrap(t, isp, ac.Index)

	for _, fam := range []struct{ cli, far string }{{"10.200.1.2", "203.0.113.7"}, {"fd00:200:1::2", "2001:db8:7::7"}} {
		cliA, farA := netip.MustParseAddr(fam.cli), netip.MustParseAddr(fam.far)
		out := func(tag string, ttl uint8) *packet.Packet { // LAN to WAN, as the client sends it
			return &packet.Packet{SrcMAC: mac(cli.MAC), DstMAC: mac(lanR.MAC), Src: cliA, Dst: farA, Proto: packet.ProtoUDP,
				SPort: 4000, DPort: 5000, TTL: ttl, Payload: []byte(tag)}
		}
		in := func(tag string, ttl uint8) *packet.Packet { // WAN to LAN, as the access concentrator sends it
			return &packet.Packet{SrcMAC: mac(ac.MAC), DstMAC: mac(wan.MAC), Src: farA, Dst: cliA, Proto: packet.ProtoUDP,
				SPort: 5000, DPort: 4000, TTL: ttl, Payload: []byte(tag), PPPoE: true, PPPoESID: pppoeSID, PadTo60: true}
		}
		what := func(s string) string { return fam.far + ": " + s }

		c0 := counts()
		sendRaw(t, lan, cli.Index, out("first", 64).Bytes()) // the kernel's: nothing comes out where it could be seen
		wantCount(what("first datagram, no answer yet"), c0, datapath.FwdKernelCT)

		// the answer: decapsulated, to the client
		c0 = counts()
		sendRaw(t, isp, ac.Index, in("answer", 50).Bytes())
		got := trapCli.next("answer")
		want := in("answer", 49)
		want.PPPoE, want.PadTo60, want.SrcMAC, want.DstMAC = false, false, mac(lanR.MAC), mac(cli.MAC)
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: the client received\n%x\nwant\n%x", what("answer"), got, want.Bytes())
		}
		wantCount(what("answer"), c0, datapath.FwdXDP)

		// the next datagram: encapsulated, to the access concentrator
		c0 = counts()
		sendRaw(t, lan, cli.Index, out("next", 64).Bytes())
		got = trapAC.next("next")
		want = out("next", 63)
		want.PPPoE, want.PPPoESID, want.SrcMAC, want.DstMAC = true, pppoeSID, mac(wan.MAC), mac(ac.MAC)
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: the access concentrator received\n%x\nwant\n%x", what("next"), got, want.Bytes())
		}
		wantCount(what("next datagram"), c0, datapath.FwdXDP)

		// TTL 1 from the WAN: the kernel's (time exceeded)
		c0 = counts()
		sendRaw(t, isp, ac.Index, in("ttl", 1).Bytes())
		wantCount(what("TTL 1"), c0, datapath.FwdTTL)
	}

	// What the Ethernet device under the ppp device cannot carry, and a
	// session over a VLAN: the kernel's.
	for _, tc := range []struct {
		name string
		s    datapath.PPPoESession
	}{{"frame over wan0's MTU", func() datapath.PPPoESession { s := session; s.MTU = 60; return s }()},
		{"session over a VLAN", func() datapath.PPPoESession { s := session; s.VLANs = []uint16{7}; return s }()}} {
		if err := f.dp.SetPPPoE([]datapath.PPPoESession{tc.s}); err != nil {
			t.Fatal(err)
		}
		c0 := counts()
		p := &packet.Packet{SrcMAC: mac(cli.MAC), DstMAC: mac(lanR.MAC), Src: netip.MustParseAddr("10.200.1.2"),
			Dst: netip.MustParseAddr("203.0.113.7"), Proto: packet.ProtoUDP, SPort: 4000, DPort: 5000, Payload: make([]byte, 100)}
		sendRaw(t, lan, cli.Index, p.Bytes())
		wantCount(tc.name, c0, datapath.FwdPPPoE)
	}
}
