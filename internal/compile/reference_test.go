package compile

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestReferenceSemantics pins down the iptables semantics the oracle
// encodes (and the data plane must match).
func TestReferenceSemantics(t *testing.T) {
	rs := parse(t, `-P INPUT DROP -6
-A INPUT -p tcp ! --dport 22 -j DROP
-A INPUT -p tcp -j ACCEPT
-A INPUT -j LOG
-A INPUT -m vlan ! --vlan-id 5 -p udp -j REJECT
-A INPUT -f -j ACCEPT
`)
	tcp := func(dport uint16) RefPacket {
		return RefPacket{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 6, L4: true, DPort: dport}
	}
	frag := tcp(80)
	frag.L4, frag.Fragment = false, true
	udpTagged := RefPacket{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 17, L4: true, Tagged: true, VLAN: 5}
	udpUntagged := udpTagged
	udpUntagged.Tagged, udpUntagged.VLAN = false, 0
	v6 := RefPacket{Src: netip.MustParseAddr("::1"), Dst: netip.MustParseAddr("::2"), Proto: 47}
	v4 := RefPacket{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 47}
	cases := []struct {
		name string
		p    RefPacket
		idx  int
		v    rules.Verdict
	}{
		{"negated port", tcp(80), 0, rules.VerdictDrop},
		{"port 22 passes the negation", tcp(22), 1, rules.VerdictAccept},
		{"non-first fragment: port tests fail, even negated ones", frag, 1, rules.VerdictAccept},
		{"LOG does not decide; ! --vlan-id 5 on tag 5", udpTagged, -1, rules.VerdictAccept},
		{"untagged matches ! --vlan-id 5", udpUntagged, 3, rules.VerdictReject},
		{"per-family policy v6", v6, -1, rules.VerdictDrop},
		{"per-family policy v4", v4, -1, rules.VerdictAccept},
	}
	for _, c := range cases {
		idx, v := Evaluate(rs, c.p)
		if idx != c.idx || v != c.v {
			t.Errorf("%s: got rule %d %s, want %d %s", c.name, idx, v, c.idx, c.v)
		}
	}
}

// TestReferenceReached: what a packet reaching a chain from two places
// counts. iptables counts every rule each time it reaches and matches it
// (Reached; checked with iptables-legacy and iptables-nft by
// TestIptablesDifferential, seed 4 set forward/23); xdpfw logs a LOG
// rule once per packet even when another LOG rule comes between its two
// places (Logs), and counts a jump once (Counts).
func TestReferenceReached(t *testing.T) {
	rs := parse(t, `-N c
-N r
-A INPUT -p udp -j r
-A INPUT -j c
-A INPUT -j DROP
-A r -j c
-A r -j LOG --log-prefix r
-A c -j LOG --log-prefix c
`)
	p := RefPacket{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 17, L4: true, DPort: 53}
	d := Decide(rs, p)
	// indices: 0 INPUT->r, 1 INPUT->c, 2 DROP, 3 r->c, 4 r LOG, 5 c LOG
	if fmt.Sprint(d.Reached) != "[0 3 5 4 1 5 2]" || fmt.Sprint(d.Logs) != "[5 4]" || fmt.Sprint(d.Counts) != "[0 3 1]" || d.Rule != 2 {
		t.Errorf("reached %v, logs %v, counts %v, rule %d; want reached [0 3 5 4 1 5 2], logs [5 4], counts [0 3 1], rule 2",
			d.Reached, d.Logs, d.Counts, d.Rule)
	}
}

// TestRejectReason pins down which REJECTed packets are answered and why
// the others are not (RFC 1122 3.2.2, RFC 4443 2.4(e), RFC 9293).
func TestRejectReason(t *testing.T) {
	mac := [6]byte{2, 0, 0, 0, 0, 1}
	pkt := func(src, dst string, proto uint8, fn func(*RefPacket)) RefPacket {
		p := RefPacket{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Proto: proto, L4: true, SrcMAC: mac, DstMAC: mac}
		if fn != nil {
			fn(&p)
		}
		return p
	}
	icmp := func(typ uint8) func(*RefPacket) { return func(p *RefPacket) { p.ICMPType = typ } }
	for _, c := range []struct {
		name string
		p    RefPacket
		k    Reject
		want Reason
	}{
		{"udp", pkt("192.0.2.1", "198.51.100.1", 17, nil), RejectPortUnreach, ReasonRuleReject},
		{"udp v6", pkt("2001:db8::1", "2001:db8::2", 17, nil), RejectPortUnreach, ReasonRuleReject},
		{"tcp syn, tcp-reset", pkt("192.0.2.1", "198.51.100.1", 6, func(p *RefPacket) { p.TCPFlags = 0x02 }), RejectTCPReset, ReasonRuleReject},
		{"tcp rst, tcp-reset", pkt("192.0.2.1", "198.51.100.1", 6, func(p *RefPacket) { p.TCPFlags = 0x14 }), RejectTCPReset, ReasonRejectError},
		{"tcp rst, icmp answer", pkt("192.0.2.1", "198.51.100.1", 6, func(p *RefPacket) { p.TCPFlags = 0x04 }), RejectPortUnreach, ReasonRuleReject},
		{"non-first fragment", pkt("192.0.2.1", "198.51.100.1", 6, func(p *RefPacket) { p.L4, p.Fragment = false, true }), RejectTCPReset, ReasonRejectFrag},
		{"echo request", pkt("192.0.2.1", "198.51.100.1", 1, icmp(8)), RejectPortUnreach, ReasonRuleReject},
		{"echo reply", pkt("192.0.2.1", "198.51.100.1", 1, icmp(0)), RejectPortUnreach, ReasonRuleReject},
		{"address mask reply (18)", pkt("192.0.2.1", "198.51.100.1", 1, icmp(18)), RejectPortUnreach, ReasonRuleReject},
		{"unreachable", pkt("192.0.2.1", "198.51.100.1", 1, icmp(3)), RejectPortUnreach, ReasonRejectError},
		{"source quench", pkt("192.0.2.1", "198.51.100.1", 1, icmp(4)), RejectPortUnreach, ReasonRejectError},
		{"redirect", pkt("192.0.2.1", "198.51.100.1", 1, icmp(5)), RejectPortUnreach, ReasonRejectError},
		{"time exceeded", pkt("192.0.2.1", "198.51.100.1", 1, icmp(11)), RejectPortUnreach, ReasonRejectError},
		{"parameter problem", pkt("192.0.2.1", "198.51.100.1", 1, icmp(12)), RejectPortUnreach, ReasonRejectError},
		{"unknown icmp type 19", pkt("192.0.2.1", "198.51.100.1", 1, icmp(19)), RejectPortUnreach, ReasonRejectError},
		{"icmpv6 echo request", pkt("2001:db8::1", "2001:db8::2", 58, icmp(128)), RejectPortUnreach, ReasonRuleReject},
		{"icmpv6 neighbour solicitation", pkt("2001:db8::1", "2001:db8::2", 58, icmp(135)), RejectPortUnreach, ReasonRuleReject},
		{"icmpv6 error 127", pkt("2001:db8::1", "2001:db8::2", 58, icmp(127)), RejectPortUnreach, ReasonRejectError},
		{"icmp type 3 in ipv6 is no icmpv6 error", pkt("2001:db8::1", "2001:db8::2", 1, icmp(3)), RejectPortUnreach, ReasonRuleReject},
		{"broadcast", pkt("192.0.2.1", "255.255.255.255", 17, nil), RejectPortUnreach, ReasonRejectBcast},
		{"multicast", pkt("192.0.2.1", "224.0.0.1", 17, nil), RejectPortUnreach, ReasonRejectBcast},
		{"class e", pkt("192.0.2.1", "240.1.2.3", 17, nil), RejectPortUnreach, ReasonRejectBcast},
		{"dst 0/8", pkt("192.0.2.1", "0.1.2.3", 17, nil), RejectPortUnreach, ReasonRejectBcast},
		{"src 127/8", pkt("127.0.0.2", "198.51.100.1", 17, nil), RejectPortUnreach, ReasonRejectBcast},
		{"v6 multicast", pkt("2001:db8::1", "ff02::1", 17, nil), RejectPortUnreach, ReasonRejectBcast},
		{"v6 loopback source", pkt("::1", "2001:db8::2", 17, nil), RejectPortUnreach, ReasonRejectBcast},
		{"v6 unspecified source", pkt("::", "2001:db8::2", 17, nil), RejectPortUnreach, ReasonRejectBcast},
		{"v4-mapped is one host (bytes, not unmapped)", pkt("::ffff:127.0.0.1", "2001:db8::2", 17, nil), RejectPortUnreach, ReasonRuleReject},
		{"link-layer broadcast", pkt("192.0.2.1", "198.51.100.255", 17, func(p *RefPacket) { p.DstMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} }), RejectPortUnreach, ReasonRejectBcast},
		{"link-layer multicast source", pkt("192.0.2.1", "198.51.100.1", 17, func(p *RefPacket) { p.SrcMAC = [6]byte{1, 0, 0x5e, 0, 0, 1} }), RejectPortUnreach, ReasonRejectBcast},
	} {
		if got := RejectReason(c.p, c.k); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestL4ModuleNeedsHeader: a bare -m tcp (udp, sctp) and --icmp-type any
// (255) need the L4 header, as xt_tcpudp and xt_icmp do in the kernel:
// they match no non-first fragment, which -p tcp / -p icmp alone match.
// The reference and the compiled tree must both say so.
func TestL4ModuleNeedsHeader(t *testing.T) {
	pkt := func(proto uint8, frag bool) RefPacket {
		return RefPacket{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
			Proto: proto, L4: !frag, Fragment: frag, DPort: 22, ICMPType: 13}
	}
	v6 := func(p RefPacket) RefPacket {
		p.Src, p.Dst = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
		return p
	}
	cases := []struct {
		rule string
		p    RefPacket
		want int // the deciding rule, -1: the policy
	}{
		{"-A INPUT -p tcp -m tcp -j DROP", pkt(6, false), 0},
		{"-A INPUT -p tcp -m tcp -j DROP", pkt(6, true), -1},
		{"-A INPUT -p tcp -m tcp -j DROP", v6(pkt(6, true)), -1},
		{"-A INPUT -p tcp --dport 0:65535 -j DROP", pkt(6, true), -1},
		{"-A INPUT -p tcp --tcp-flags NONE NONE -j DROP", pkt(6, true), -1},
		{"-A INPUT -p tcp -j DROP", pkt(6, true), 0},
		{"-A INPUT -p tcp -j DROP", v6(pkt(6, true)), 0},
		{"-A INPUT -p udp -m udp -j DROP", pkt(17, true), -1},
		{"-A INPUT -p sctp -m sctp -j DROP", pkt(132, true), -1},
		{"-A INPUT -p sctp -m sctp -j DROP", pkt(132, false), 0},
		{"-A INPUT -p icmp --icmp-type 255 -j DROP", pkt(1, false), 0},
		{"-A INPUT -p icmp --icmp-type 255/7 -j DROP", pkt(1, false), 0},
		{"-A INPUT -p icmp --icmp-type 255 -j DROP", pkt(1, true), -1},
		{"-A INPUT -p icmp -j DROP", pkt(1, true), 0},
		{"-A INPUT -p ipv6-icmp --icmpv6-type 255 -j DROP", v6(pkt(58, false)), -1}, // ip6tables: type 255 only
	}
	for _, c := range cases {
		rs := parse(t, c.rule+"\n")
		if got, _ := Evaluate(rs, c.p); got != c.want {
			t.Errorf("%q, %+v: reference says rule %d, want %d", c.rule, c.p, got, c.want)
		}
		tb := compileTest(t, rs)
		got := -1
		if cl := tb.Classify(&c.p, Dev{}); cl.Entry >= 0 {
			got = int(tb.Entries[cl.Entry].RuleID - FirstRuleID)
		}
		if got != c.want {
			t.Errorf("%q, %+v: compiled tree says rule %d, want %d", c.rule, c.p, got, c.want)
		}
	}
}

// TestAddrTypeOK: the kernel's xt_addrtype answers, case by case (IPv4:
// inet_dev_addr_type; IPv6: match_type6's conjunction of conditions).
func TestAddrTypeOK(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	onEth0 := func(r *AddrRoute) bool { return r.Dev == "eth0" }
	cases := []struct {
		addr string
		mask uint16
		on   func(*AddrRoute) bool
		want bool
	}{
		{"10.0.0.1", rules.AddrLocal, nil, true},
		{"10.0.0.1", rules.AddrLocal, onEth0, true},
		{"10.0.0.2", rules.AddrLocal, onEth0, false},  // local on veth0
		{"10.0.0.2", rules.AddrUnicast, onEth0, true}, // another device's route: UNICAST
		{"10.0.0.3", rules.AddrBroadcast, nil, true},
		{"10.0.0.0", rules.AddrThrow, nil, true},
		{"10.0.0.0", rules.AddrThrow, onEth0, false}, // the /31 is on eth1
		{"10.0.0.0", rules.AddrUnicast, onEth0, true},
		{"0.1.2.3", rules.AddrBroadcast, nil, true},
		{"255.255.255.255", rules.AddrBroadcast, nil, true},
		{"224.0.0.1", rules.AddrMulticast, nil, true},
		{"239.1.1.1", rules.AddrMulticast | rules.AddrUnicast, nil, true}, // IPv4: one type, in the mask
		{"8.8.8.8", rules.AddrUnicast, nil, true},
		{"8.8.8.8", rules.AddrLocal, nil, false},
		{"2000::1", rules.AddrLocal, nil, true},
		{"2000::1", rules.AddrLocal | rules.AddrUnicast, nil, true},
		{"2000::1", rules.AddrLocal | rules.AddrMulticast, nil, false}, // IPv6: every type a condition
		{"2000::3", rules.AddrLocal, onEth0, false},
		{"2000::2", rules.AddrAnycast, nil, true},
		{"2000::2", rules.AddrLocal, nil, false},
		{"ff02::1", rules.AddrMulticast, nil, true},
		{"ff02::1", rules.AddrUnicast, nil, false},
		{"::", rules.AddrUnspec, nil, true},
		{"::", rules.AddrUnicast, nil, false},
		{"::ffff:10.0.0.1", rules.AddrUnicast, nil, false},
		{"::1", rules.AddrUnicast, nil, true},
		{"fe80::1", rules.AddrUnicast | rules.AddrMulticast, nil, false},
	}
	tbl := AddrTable{
		{Prefix: netip.MustParsePrefix("10.0.0.0/31"), Type: 9, Dev: "eth1"},
		{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Type: 2, Dev: "eth0"},
		{Prefix: netip.MustParsePrefix("10.0.0.2/32"), Type: 2, Dev: "veth0"},
		{Prefix: netip.MustParsePrefix("10.0.0.3/32"), Type: 3, Dev: "eth0"},
		{Prefix: netip.MustParsePrefix("2000::1/128"), Type: 2, Dev: "eth0"},
		{Prefix: netip.MustParsePrefix("2000::2/128"), Type: 4, Dev: "eth1"},
		{Prefix: netip.MustParsePrefix("2000::3/128"), Type: 2, Dev: "lo"},
	}
	for _, c := range cases {
		if got := tbl.TypeOK(a(c.addr), c.mask, c.on); got != c.want {
			t.Errorf("%s mask %#x (limited %v): %v, want %v", c.addr, c.mask, c.on != nil, got, c.want)
		}
	}
}
