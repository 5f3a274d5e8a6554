package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

const tableRules = `
-P INPUT DROP
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -s 10.0.0.0/8 -p udp --dport 1000:2000 -j ACCEPT
-A INPUT ! -s 192.168.0.0/16 -p udp --dport 53 -j ACCEPT
-A INPUT -p tcp --tcp-flags SYN,ACK SYN --dport 80 -j ACCEPT
-A INPUT -p icmp --icmp-type echo-request -j ACCEPT
-A INPUT -p ipv6-icmp --icmpv6-type neighbour-solicitation -j ACCEPT
-A INPUT -m mac --mac-source 02:00:00:00:00:aa -j ACCEPT
-A INPUT -m vlan --vlan-id 42 -j ACCEPT
-A INPUT -f -j ACCEPT
-A INPUT -s 2001:db8::/32 -p tcp -m multiport --dports 443,8443 -j ACCEPT
-A INPUT -p udp -m multiport ! --dports 0:1023,5353 -j REJECT
-A INPUT -i eth+ -p tcp --dport 7000 -j ACCEPT
-A INPUT -p tcp -m multiport --ports 9000 -j ACCEPT
-A INPUT -p udp ! --dport 0:1023 -j ACCEPT
`

// TestVerdicts: one packet per behaviour, expected rule number (0 = the
// policy) and XDP action.
func TestVerdicts(t *testing.T) {
	f := newFixture(t)
	f.installText(tableRules)

	mod := func(p *packet.Packet, fn func(*packet.Packet)) *packet.Packet { fn(p); return p }
	v6 := func(proto uint8, src, dst string, dport uint16) *packet.Packet {
		p := v4pkt(proto, "1.1.1.1", "2.2.2.2", 40000, dport)
		p.Src, p.Dst = netip.MustParseAddr(src), netip.MustParseAddr(dst)
		return p
	}
	cases := []struct {
		name   string
		pkt    *packet.Packet
		iface  string
		rule   int // 1-based; 0: policy; -1: none
		action uint32
	}{
		{"tcp 22", v4pkt(6, "203.0.113.1", "10.9.9.9", 1234, 22), "", 1, datapath.XDPPass},
		{"tcp 23 falls to policy", v4pkt(6, "203.0.113.1", "10.9.9.9", 1234, 23), "", 0, datapath.XDPDrop},
		{"udp range low edge", v4pkt(17, "10.1.1.1", "10.9.9.9", 1, 1000), "", 2, datapath.XDPPass},
		{"udp range high edge", v4pkt(17, "10.255.255.255", "10.9.9.9", 1, 2000), "", 2, datapath.XDPPass},
		{"udp range outside source", v4pkt(17, "11.0.0.0", "10.9.9.9", 1, 1500), "", 11, datapath.XDPTx},
		{"negated source matches", v4pkt(17, "172.16.0.1", "10.9.9.9", 1, 53), "", 3, datapath.XDPPass},
		{"negated source excludes", v4pkt(17, "192.168.3.3", "10.9.9.9", 1, 53), "", 0, datapath.XDPDrop},
		{"syn to 80", v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 80), "", 4, datapath.XDPPass},
		{"syn-ack to 80 not matched", mod(v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 80), func(p *packet.Packet) { p.TCPFlags = packet.TCPSyn | packet.TCPAck }), "", 0, datapath.XDPDrop},
		{"ping", mod(v4pkt(1, "1.2.3.4", "10.9.9.9", 0, 0), func(p *packet.Packet) { p.ICMPType = 8 }), "", 5, datapath.XDPPass},
		{"echo reply not matched", mod(v4pkt(1, "1.2.3.4", "10.9.9.9", 0, 0), func(p *packet.Packet) { p.ICMPType = 0 }), "", 0, datapath.XDPDrop},
		{"icmpv6 NS", mod(v6(58, "fe80::1", "ff02::1:ff00:1", 0), func(p *packet.Packet) { p.ICMPType = 135 }), "", 6, datapath.XDPPass},
		{"mac source", mod(v4pkt(47, "1.2.3.4", "10.9.9.9", 0, 0), func(p *packet.Packet) { p.SrcMAC = [6]byte{2, 0, 0, 0, 0, 0xaa} }), "", 7, datapath.XDPPass},
		{"vlan 42", mod(v4pkt(47, "1.2.3.4", "10.9.9.9", 0, 0), func(p *packet.Packet) { p.VLANs = []uint16{42} }), "", 8, datapath.XDPPass},
		{"vlan 42 outer of QinQ", mod(v4pkt(47, "1.2.3.4", "10.9.9.9", 0, 0), func(p *packet.Packet) { p.VLANs = []uint16{42, 7} }), "", 8, datapath.XDPPass},
		{"vlan 42 inner only", mod(v4pkt(47, "1.2.3.4", "10.9.9.9", 0, 0), func(p *packet.Packet) { p.VLANs = []uint16{7, 42} }), "", 0, datapath.XDPDrop},
		{"tagged tcp 22 still rule 1", mod(v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22), func(p *packet.Packet) { p.VLANs = []uint16{5} }), "", 1, datapath.XDPPass},
		// fragments: the first has ports; the rest take its verdict
		// (-f never matches: iptables sees datagrams reassembled), and
		// without it are dropped (frag_test.go)
		{"non-first fragment without its first", mod(v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22), func(p *packet.Packet) { p.FragOffset = 100 }), "", -1, datapath.XDPDrop},
		{"first fragment has ports", mod(v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22), func(p *packet.Packet) { p.MoreFragments = true }), "", 1, datapath.XDPPass},
		{"non-first fragment after it", mod(v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22), func(p *packet.Packet) { p.FragOffset = 100 }), "", 1, datapath.XDPPass},
		{"ipv4 options", mod(v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22), func(p *packet.Packet) { p.IPv4Options = []byte{1, 1, 1, 1, 1, 1, 1, 0} }), "", 1, datapath.XDPPass},
		{"v6 multiport", v6(6, "2001:db8::5", "2001:db8::1", 8443), "", 10, datapath.XDPPass},
		{"v6 multiport other prefix", v6(6, "2001:db9::5", "2001:db8::1", 8443), "", 0, datapath.XDPDrop},
		{"v6 through ext headers", mod(v6(6, "2001:db8::5", "2001:db8::1", 443), func(p *packet.Packet) {
			p.IPv6Ext = []packet.ExtHdr{{Type: 0, Len: 8}, {Type: 43, Len: 24}, {Type: 60, Len: 16}, {Type: 51, Len: 24}}
		}), "", 10, datapath.XDPPass},
		{"v6 non-first fragment without its first", mod(v6(6, "2001:db8::5", "2001:db8::1", 443), func(p *packet.Packet) { p.FragOffset = 10 }), "", -1, datapath.XDPDrop},
		{"v6 first fragment", mod(v6(6, "2001:db8::5", "2001:db8::1", 443), func(p *packet.Packet) { p.MoreFragments = true }), "", 10, datapath.XDPPass},
		{"v6 non-first fragment after it", mod(v6(6, "2001:db8::5", "2001:db8::1", 443), func(p *packet.Packet) { p.FragOffset = 10 }), "", 10, datapath.XDPPass},
		{"udp to high port rejected (answered)", v4pkt(17, "1.2.3.4", "10.9.9.9", 1, 40000), "", 11, datapath.XDPTx},
		{"udp 5353 escapes negated multiport", v4pkt(17, "1.2.3.4", "10.9.9.9", 1, 5353), "", 14, datapath.XDPPass},
		{"-i eth+ on eth1", v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 7000), "eth1", 12, datapath.XDPPass},
		{"-i eth+ not on veth0", v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 7000), "veth0", 0, datapath.XDPDrop},
		{"--ports: source side", v4pkt(6, "1.2.3.4", "10.9.9.9", 9000, 1), "", 13, datapath.XDPPass},
		{"--ports: destination side", v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 9000), "", 13, datapath.XDPPass},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.mustRun(c.pkt.Bytes(), c.iface)
			wantID := compile.PolicyID(0, c.pkt.Src.Is6())
			switch {
			case c.rule > 0:
				wantID = f.ids[c.rule-1]
			case c.rule < 0: // no rule: a fragment of no datagram seen
				wantID = 0
			}
			if r.XDPAction != c.action || r.RuleID != wantID {
				t.Errorf("%s: got action %d rule id %d (%s), want action %d rule id %d",
					c.pkt, r.XDPAction, r.RuleID, r.Reason, c.action, wantID)
			}
		})
	}
}

// TestNotIPPasses: ARP and other non-IP frames pass unfiltered (iptables
// never sees them either), counted as not-ip, whatever the policy.
func TestNotIPPasses(t *testing.T) {
	f := newFixture(t)
	f.installText("-P INPUT DROP\n")
	arp := &packet.Packet{SrcMAC: macA, DstMAC: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, NonIP: packet.EtherTypeARP, Payload: make([]byte, 28)}
	r := f.mustRun(arp.Bytes(), "")
	if r.XDPAction != datapath.XDPPass || r.Reason != compile.ReasonNotIP {
		t.Fatalf("ARP: got action %d reason %s", r.XDPAction, r.Reason)
	}
	rc, err := f.dp.ReasonCounters()
	if err != nil {
		t.Fatal(err)
	}
	if rc[compile.ReasonNotIP].Packets != 1 || rc[compile.ReasonNotIP].Bytes != uint64(len(arp.Bytes())) {
		t.Fatalf("not-ip counter %+v, want 1 packet of %d bytes", rc[compile.ReasonNotIP], len(arp.Bytes()))
	}
}

// TestNoRulesetFailsClosed: a loaded program without a generation drops.
func TestNoRulesetFailsClosed(t *testing.T) {
	f := newFixture(t)
	r := f.mustRun(v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22).Bytes(), "")
	if r.XDPAction != datapath.XDPDrop || r.Reason != compile.ReasonNoRuleset {
		t.Fatalf("got action %d reason %s, want drop no-ruleset", r.XDPAction, r.Reason)
	}
}

// TestCountersAndSwap: counters count packets and bytes per rule id; a new
// generation takes effect at once, and counters live by id, not position.
func TestCountersAndSwap(t *testing.T) {
	f := newFixture(t)
	f.installText("-A INPUT -p tcp --dport 22 -j ACCEPT\n-A INPUT -p tcp --dport 80 -j DROP\n")
	ssh := v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22).Bytes()
	web := v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 80).Bytes()
	for i := 0; i < 5; i++ {
		f.mustRun(ssh, "")
	}
	for i := 0; i < 3; i++ {
		if r := f.mustRun(web, ""); r.XDPAction != datapath.XDPDrop {
			t.Fatalf("web before swap: action %d", r.XDPAction)
		}
	}
	c, err := f.dp.RuleCounter(f.ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if c.Packets != 5 || c.Bytes != 5*uint64(len(ssh)) {
		t.Fatalf("ssh counter %+v, want 5 packets, %d bytes", c, 5*len(ssh))
	}
	if c, _ := f.dp.RuleCounter(f.ids[1]); c.Packets != 3 {
		t.Fatalf("web counter %+v, want 3", c)
	}
	// New generation: web accepted now.
	f.installText("-A INPUT -p tcp --dport 80 -j ACCEPT\n")
	if r := f.mustRun(web, ""); r.XDPAction != datapath.XDPPass || r.RuleID != f.ids[0] {
		t.Fatalf("web after swap: action %d rule %d", r.XDPAction, r.RuleID)
	}
	if !f.dp.Installed() {
		t.Fatal("Installed() false after install")
	}
}

// TestMalformedAccept: the malformed verdict is a setting.
func TestMalformedAccept(t *testing.T) {
	f := newFixture(t)
	f.installText("-P INPUT DROP\n")
	bad := v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22).Bytes()[:30] // cut inside the IPv4 header
	if r := f.mustRun(bad, ""); r.XDPAction != datapath.XDPDrop || r.Reason != compile.ReasonBadIPv4 {
		t.Fatalf("default: action %d reason %s", r.XDPAction, r.Reason)
	}
	if err := f.dp.SetConfig(datapath.Config{MalformedAction: compile.ActAccept}); err != nil {
		t.Fatal(err)
	}
	if r := f.mustRun(bad, ""); r.XDPAction != datapath.XDPPass || r.Reason != compile.ReasonBadIPv4 {
		t.Fatalf("accept: action %d reason %s", r.XDPAction, r.Reason)
	}
}

// TestL4ModuleFragments: a bare -m tcp (what iptables-save writes for
// --dport 0:65535) and --icmp-type any (255) read the L4 header, which a
// non-first fragment lacks (xt_tcpudp, xt_icmp: fragoff != 0 matches
// nothing); but the filter table sees datagrams reassembled, so a later
// fragment gets what its first fragment got, for these as for -p alone.
func TestL4ModuleFragments(t *testing.T) {
	f := newFixture(t)
	mod := func(p *packet.Packet, fn func(*packet.Packet)) *packet.Packet { fn(p); return p }
	frag := func(p *packet.Packet) { p.FragOffset = 100 }
	tcp := func() *packet.Packet { return v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22) }
	icmp := func() *packet.Packet {
		return mod(v4pkt(1, "1.2.3.4", "10.9.9.9", 0, 0), func(p *packet.Packet) { p.ICMPType = 13 })
	}
	v6 := func() *packet.Packet {
		p := tcp()
		p.Src, p.Dst = netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("2001:db8::1")
		return p
	}
	cases := []struct {
		rules  string
		pkt    *packet.Packet
		rule   int // 1-based; 0: the policy (ACCEPT)
		action uint32
	}{
		{"-A INPUT -p tcp -m tcp -j DROP", tcp(), 1, datapath.XDPDrop},
		{"-A INPUT -p tcp -m tcp -j DROP", mod(tcp(), frag), 1, datapath.XDPDrop},
		{"-A INPUT -p tcp -m tcp -j DROP", mod(v6(), frag), 1, datapath.XDPDrop},
		{"-A INPUT -p tcp -m tcp -j DROP", mod(tcp(), func(p *packet.Packet) { p.MoreFragments = true }), 1, datapath.XDPDrop},
		{"-A INPUT -p tcp -j DROP", mod(tcp(), frag), 1, datapath.XDPDrop},
		{"-A INPUT -p tcp -j DROP", mod(v6(), frag), 1, datapath.XDPDrop},
		{"-A INPUT -p udp -m udp -j DROP", mod(v4pkt(17, "1.2.3.4", "10.9.9.9", 1, 53), frag), 1, datapath.XDPDrop},
		{"-A INPUT -p icmp --icmp-type 255 -j DROP", icmp(), 1, datapath.XDPDrop},
		{"-A INPUT -p icmp --icmp-type 255/3 -j DROP", icmp(), 1, datapath.XDPDrop},
		{"-A INPUT -p icmp --icmp-type any -j DROP", mod(icmp(), frag), 1, datapath.XDPDrop},
		{"-A INPUT -p icmp -j DROP", mod(icmp(), frag), 1, datapath.XDPDrop},
	}
	for _, c := range cases {
		f.installText(c.rules)
		if c.pkt.FragOffset != 0 { // its first fragment before it
			first := *c.pkt
			first.FragOffset, first.MoreFragments = 0, true
			f.mustRun(first.Bytes(), "")
		}
		r := f.mustRun(c.pkt.Bytes(), "")
		wantID := compile.PolicyID(0, c.pkt.Src.Is6())
		if c.rule > 0 {
			wantID = f.ids[c.rule-1]
		}
		if r.XDPAction != c.action || r.RuleID != wantID {
			t.Errorf("%q, %s: got action %d rule id %d (%s), want action %d rule id %d",
				c.rules, c.pkt, r.XDPAction, r.RuleID, r.Reason, c.action, wantID)
		}
	}
}
