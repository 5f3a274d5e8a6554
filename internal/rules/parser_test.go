package rules

import (
	"net/netip"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// Helpers that build AST values compactly.

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func src(s string) *AddrMatch   { return &AddrMatch{Prefix: pfx(s)} }
func nsrc(s string) *AddrMatch  { return &AddrMatch{Prefix: pfx(s), Invert: true} }
func proto(p uint8) *ProtoMatch { return &ProtoMatch{Proto: p} }
func rng(lo, hi uint16) PortRange {
	return PortRange{lo, hi}
}
func ports(rs ...PortRange) *PortMatch  { return &PortMatch{Ranges: rs} }
func nports(rs ...PortRange) *PortMatch { return &PortMatch{Ranges: rs, Invert: true} }
func one(p uint16) PortRange            { return PortRange{p, p} }
func boolp(b bool) *bool                { return &b }

var (
	accept = Target{Verdict: VerdictAccept}
	drop   = Target{Verdict: VerdictDrop}
)

// strip clears the fields that round trips ignore.
func strip(r Rule) Rule {
	r.Pos, r.Text = Pos{}, ""
	for _, sm := range []**SetMatch{&r.Match.SrcSet, &r.Match.DstSet} {
		if *sm != nil {
			c := **sm
			c.Pos = Pos{}
			*sm = &c
		}
	}
	return r
}

// parseLine parses one rule line as a whole file.
func parseLine(t *testing.T, line string, opt ParseOptions) Rule {
	t.Helper()
	rs, err := Parse("test.rules", []byte(line+"\n"), opt)
	if err != nil {
		t.Fatalf("Parse(%q): %v", line, err)
	}
	if len(rs.Rules) != 1 {
		t.Fatalf("Parse(%q): %d rules", line, len(rs.Rules))
	}
	return rs.Rules[0]
}

func TestParseRules(t *testing.T) {
	v4, v6 := ParseOptions{Family: FamilyIPv4}, ParseOptions{Family: FamilyIPv6}
	tests := []struct {
		in   string
		opt  ParseOptions
		want Rule
	}{
		// Targets.
		{"-A INPUT -j ACCEPT", ParseOptions{}, Rule{Target: accept}},
		// Named sets.
		{"-A INPUT -m set --match-set blocklist src -j DROP", ParseOptions{},
			Rule{Match: Match{SrcSet: &SetMatch{Name: "blocklist"}}, Target: drop}},
		{"-A INPUT -m set ! --match-set allow.v6 dst -m set --match-set bad_src src -j DROP", ParseOptions{},
			Rule{Match: Match{DstSet: &SetMatch{Name: "allow.v6", Invert: true}, SrcSet: &SetMatch{Name: "bad_src"}}, Target: drop}},
		{"-A FORWARD -j DROP", ParseOptions{}, Rule{Chain: ChainForward, Target: drop}},
		{"-A OUTPUT -j DROP", ParseOptions{}, Rule{Chain: ChainOutput, Target: drop}},
		{"--append INPUT --jump REJECT", ParseOptions{}, Rule{Target: Target{Verdict: VerdictReject}}},
		{"-A INPUT -p tcp -j REJECT --reject-with tcp-reset", ParseOptions{},
			Rule{Match: Match{Proto: proto(6)}, Target: Target{Verdict: VerdictReject, RejectWith: "tcp-reset"}}},
		{"-A INPUT -j REJECT --reject-with icmp-admin-prohibited", v4,
			Rule{Match: Match{Family: FamilyIPv4}, Target: Target{Verdict: VerdictReject, RejectWith: "icmp-admin-prohibited"}}},
		{"-A INPUT -4 -j REJECT --reject-with icmp-net-unreachable", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4}, Target: Target{Verdict: VerdictReject, RejectWith: "icmp-net-unreachable"}}},
		{"-A INPUT -j REJECT --reject-with addr-unreach", v6,
			Rule{Match: Match{Family: FamilyIPv6}, Target: Target{Verdict: VerdictReject, RejectWith: "icmp6-addr-unreachable"}}},
		{"-A INPUT -s 2001:db8::/32 -j REJECT --reject-with no-route", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv6, Src: src("2001:db8::/32")}, Target: Target{Verdict: VerdictReject, RejectWith: "icmp6-no-route"}}},
		{"-A INPUT -6 -j REJECT --reject-with adm-prohibited", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv6}, Target: Target{Verdict: VerdictReject, RejectWith: "icmp6-adm-prohibited"}}},
		{"-A INPUT -6 -j REJECT --reject-with port-unreach", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv6}, Target: Target{Verdict: VerdictReject, RejectWith: "icmp6-port-unreachable"}}},
		{`-A INPUT -j LOG --log-prefix "dropped: " --log-level 4`, ParseOptions{},
			Rule{Target: Target{Verdict: VerdictLog, LogPrefix: "dropped: "}}}, // 4 is the default: stored as none
		{`-A INPUT -j LOG --log-level DEBUG`, ParseOptions{},
			Rule{Target: Target{Verdict: VerdictLog, LogLevel: "debug"}}},
		{`-A INPUT -j LOG --log-rate 5/min --log-burst 3`, ParseOptions{},
			Rule{Target: Target{Verdict: VerdictLog, LogRate: LogRate{N: 5, Unit: PerMinute}, LogBurst: 3}}},
		{`-A INPUT -j LOG --log-rate 7`, ParseOptions{},
			Rule{Target: Target{Verdict: VerdictLog, LogRate: LogRate{N: 7, Unit: PerSecond}}}},
		{`-A INPUT -j LOG --log-rate 2/Hour`, ParseOptions{},
			Rule{Target: Target{Verdict: VerdictLog, LogRate: LogRate{N: 2, Unit: PerHour}}}},
		{`-A INPUT -j LOG --log-rate 1/d`, ParseOptions{},
			Rule{Target: Target{Verdict: VerdictLog, LogRate: LogRate{N: 1, Unit: PerDay}}}},
		{`-A INPUT -j DROP --log-prefix "dropped: " --log`, ParseOptions{},
			Rule{Target: Target{Verdict: VerdictDrop, Log: true, LogPrefix: "dropped: "}}},
		{`-A INPUT -p tcp -j REJECT --log --reject-with tcp-reset --log-level 3`, ParseOptions{},
			Rule{Match: Match{Proto: &ProtoMatch{Proto: 6}}, Target: Target{Verdict: VerdictReject, RejectWith: "tcp-reset", Log: true, LogLevel: "error"}}},
		{`-A INPUT -j ACCEPT --log --log-rate 100/s --log-burst 1`, ParseOptions{},
			Rule{Target: Target{Verdict: VerdictAccept, Log: true, LogRate: LogRate{N: 100}, LogBurst: 1}}},
		{`-A INPUT -j LOG --log-prefix "12345678901234567890123456789"`, ParseOptions{},
			Rule{Target: Target{Verdict: VerdictLog, LogPrefix: "12345678901234567890123456789"}}},

		// Families.
		{"-A INPUT -4 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4}, Target: drop}},
		{"-A INPUT --ipv6 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv6}, Target: drop}},
		{"-A INPUT -j DROP", v4, Rule{Match: Match{Family: FamilyIPv4}, Target: drop}},
		{"-A INPUT -j DROP", v6, Rule{Match: Match{Family: FamilyIPv6}, Target: drop}},
		{"-A INPUT -4 -s 10.0.0.1 -j DROP", v4, Rule{Match: Match{Family: FamilyIPv4, Src: src("10.0.0.1/32")}, Target: drop}},

		// Protocols.
		{"-A INPUT -p tcp -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(6)}, Target: drop}},
		{"-A INPUT --protocol UDP -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(17)}, Target: drop}},
		{"-A INPUT -p icmp -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1)}, Target: drop}},
		{"-A INPUT -p 1 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1)}, Target: drop}},
		{"-A INPUT -p ipv6-icmp -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv6, Proto: proto(58)}, Target: drop}},
		{"-A INPUT -p icmpv6 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv6, Proto: proto(58)}, Target: drop}},
		{"-A INPUT -p sctp -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(132)}, Target: drop}},
		{"-A INPUT -p udplite -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(136)}, Target: drop}},
		{"-A INPUT -p gre -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(47)}, Target: drop}},
		{"-A INPUT -p esp -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(50)}, Target: drop}},
		{"-A INPUT -p AH -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(51)}, Target: drop}},
		{"-A INPUT -p 255 -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(255)}, Target: drop}},
		{"-A INPUT -p all -j DROP", ParseOptions{}, Rule{Target: drop}},
		{"-A INPUT -p 0 -j DROP", ParseOptions{}, Rule{Target: drop}},
		{"-A INPUT ! -p tcp -j DROP", ParseOptions{}, Rule{Match: Match{Proto: &ProtoMatch{6, true}}, Target: drop}},
		{"-A INPUT ! -p icmp -j DROP", ParseOptions{}, Rule{Match: Match{Proto: &ProtoMatch{1, true}}, Target: drop}},
		{"-A INPUT ! -p icmp -j DROP", v6, Rule{Match: Match{Family: FamilyIPv6, Proto: &ProtoMatch{1, true}}, Target: drop}},

		// Addresses.
		{"-A INPUT -s 10.1.2.3 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Src: src("10.1.2.3/32")}, Target: drop}},
		{"-A INPUT -s 10.1.2.3/8 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Src: src("10.0.0.0/8")}, Target: drop}},
		{"-A INPUT --source 10.1.2.3/255.255.0.0 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Src: src("10.1.0.0/16")}, Target: drop}},
		{"-A INPUT -s 10.1.2.3/0.0.0.0 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Src: src("0.0.0.0/0")}, Target: drop}},
		{"-A INPUT -s 10.1.2.3/255.255.255.255 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Src: src("10.1.2.3/32")}, Target: drop}},
		{"-A INPUT -d 0.0.0.0/0 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Dst: src("0.0.0.0/0")}, Target: drop}},
		{"-A INPUT ! -s 10.0.0.0/8 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Src: nsrc("10.0.0.0/8")}, Target: drop}},
		{"-A INPUT --src 10.0.0.1 ! --destination 10.0.0.2 -j DROP", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4, Src: src("10.0.0.1/32"), Dst: nsrc("10.0.0.2/32")}, Target: drop}},
		{"-A INPUT -s 2001:db8::1/32 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv6, Src: src("2001:db8::/32")}, Target: drop}},
		{"-A INPUT --dst ::1 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv6, Dst: src("::1/128")}, Target: drop}},
		{"-A INPUT -d ::/0 -j DROP", v6, Rule{Match: Match{Family: FamilyIPv6, Dst: src("::/0")}, Target: drop}},
		{"-A INPUT -s ::ffff:10.0.0.1 -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv6, Src: src("::ffff:10.0.0.1/128")}, Target: drop}},

		// Ports.
		{"-A INPUT -p tcp --dport 22 -j ACCEPT", ParseOptions{}, Rule{Match: Match{Proto: proto(6), DPort: ports(one(22))}, Target: accept}},
		{"-A INPUT --dport 22 -p tcp -j ACCEPT", ParseOptions{}, Rule{Match: Match{Proto: proto(6), DPort: ports(one(22))}, Target: accept}},
		{"-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT", ParseOptions{}, Rule{Match: Match{Proto: proto(6), DPort: ports(one(22))}, Target: accept}},
		// a bare -m tcp needs the header: no non-first fragment matches it
		{"-A INPUT -p tcp -m tcp -j ACCEPT", ParseOptions{}, Rule{Match: Match{Proto: proto(6), L4Header: true}, Target: accept}},
		{"-A INPUT -m udp -p udp -j ACCEPT", ParseOptions{}, Rule{Match: Match{Proto: proto(17), L4Header: true}, Target: accept}},
		{"-A INPUT -p tcp -m tcp --tcp-flags NONE NONE -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Proto: proto(6), TCPFlags: &TCPFlagsMatch{}}, Target: accept}},
		{"-A INPUT -p udp -m udp --sport 67:68 --destination-port 0 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Proto: proto(17), SPort: ports(rng(67, 68)), DPort: ports(one(0))}, Target: accept}},
		{"-A INPUT -p sctp -m sctp --source-port :1023 -j ACCEPT", ParseOptions{}, Rule{Match: Match{Proto: proto(132), SPort: ports(rng(0, 1023))}, Target: accept}},
		{"-A INPUT -p udplite -m udplite --dport 1024: -j ACCEPT", ParseOptions{}, Rule{Match: Match{Proto: proto(136), DPort: ports(rng(1024, 65535))}, Target: accept}},
		{"-A INPUT -p tcp --dport : -j ACCEPT", ParseOptions{}, Rule{Match: Match{Proto: proto(6), DPort: ports(rng(0, 65535))}, Target: accept}},
		{"-A INPUT -p tcp --dport 65535:65535 -j ACCEPT", ParseOptions{}, Rule{Match: Match{Proto: proto(6), DPort: ports(one(65535))}, Target: accept}},
		{"-A INPUT -p tcp ! --dport 22 -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(6), DPort: nports(one(22))}, Target: drop}},
		{"-A INPUT -p tcp -m multiport --dports 80,443,8000:8099 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Proto: proto(6), DPort: ports(one(80), one(443), rng(8000, 8099))}, Target: accept}},
		{"-A INPUT -p udp -m multiport ! --source-ports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Proto: proto(17), SPort: nports(one(1), one(2), one(3), one(4), one(5), one(6), one(7), one(8),
				one(9), one(10), one(11), one(12), one(13), one(14), one(15))}, Target: accept}},
		{"-A INPUT -p tcp -m multiport --destination-ports 1:2,3:4,5:6,7:8,9:10,11:12,13:14,15 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Proto: proto(6), DPort: ports(rng(1, 2), rng(3, 4), rng(5, 6), rng(7, 8), rng(9, 10), rng(11, 12), rng(13, 14), one(15))}, Target: accept}},
		{"-A INPUT -p tcp -m multiport --ports 5000:5100 -j ACCEPT", ParseOptions{}, Rule{Match: Match{Proto: proto(6), Ports: ports(rng(5000, 5100))}, Target: accept}},
		{"-A INPUT -p tcp -m multiport --sports 1,2 -m multiport --dports 3 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Proto: proto(6), SPort: ports(one(1), one(2)), DPort: ports(one(3))}, Target: accept}},
		{"-A INPUT -p tcp --sport 1 -m multiport --dports 3,4 -m multiport --ports 5 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Proto: proto(6), SPort: ports(one(1)), DPort: ports(one(3), one(4)), Ports: ports(one(5))}, Target: accept}},

		// Interfaces.
		{"-A INPUT -i eth0 -j ACCEPT", ParseOptions{}, Rule{Match: Match{InIface: &IfaceMatch{Name: "eth0"}}, Target: accept}},
		{"-A INPUT --in-interface eth+ -j ACCEPT", ParseOptions{}, Rule{Match: Match{InIface: &IfaceMatch{Name: "eth", Prefix: true}}, Target: accept}},
		{"-A INPUT ! -i veth0 -j ACCEPT", ParseOptions{}, Rule{Match: Match{InIface: &IfaceMatch{Name: "veth0", Invert: true}}, Target: accept}},
		{"-A INPUT -i + -j ACCEPT", ParseOptions{}, Rule{Match: Match{InIface: &IfaceMatch{Prefix: true}}, Target: accept}},
		{"-A INPUT -i abcdefghijklmno -j ACCEPT", ParseOptions{}, Rule{Match: Match{InIface: &IfaceMatch{Name: "abcdefghijklmno"}}, Target: accept}},
		{"-A INPUT -i br-lan.10@x -j ACCEPT", ParseOptions{}, Rule{Match: Match{InIface: &IfaceMatch{Name: "br-lan.10@x"}}, Target: accept}},
		{"-A FORWARD -i lan -o wan -j ACCEPT", ParseOptions{}, Rule{Chain: ChainForward,
			Match: Match{InIface: &IfaceMatch{Name: "lan"}, OutIface: &IfaceMatch{Name: "wan"}}, Target: accept}},
		{"-A OUTPUT ! --out-interface wg+ -j DROP", ParseOptions{}, Rule{Chain: ChainOutput,
			Match: Match{OutIface: &IfaceMatch{Name: "wg", Prefix: true, Invert: true}}, Target: drop}},
		{"-A OUTPUT -o lo -j ACCEPT", ParseOptions{}, Rule{Chain: ChainOutput, Match: Match{OutIface: &IfaceMatch{Name: "lo"}}, Target: accept}},

		// MAC.
		{"-A INPUT -m mac --mac-source 00:1A:2b:3C:4d:5E -j DROP", ParseOptions{},
			Rule{Match: Match{MACSrc: &MACMatch{Addr: [6]byte{0, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e}}}, Target: drop}},
		{"-A INPUT -m mac ! --mac-source 0:1:2:3:4:5 -j DROP", ParseOptions{},
			Rule{Match: Match{MACSrc: &MACMatch{Addr: [6]byte{0, 1, 2, 3, 4, 5}, Invert: true}}, Target: drop}},
		{"-A INPUT -m mac --mac-destination ff:ff:ff:ff:ff:ff -j DROP", ParseOptions{},
			Rule{Match: Match{MACDst: &MACMatch{Addr: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}}, Target: drop}},

		// TCP flags.
		{"-A INPUT -p tcp --syn -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(6), TCPFlags: &TCPFlagsMatch{Mask: 0x17, Comp: 0x02}}, Target: drop}},
		{"-A INPUT -p tcp ! --syn -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(6), TCPFlags: &TCPFlagsMatch{Mask: 0x17, Comp: 0x02, Invert: true}}, Target: drop}},
		{"-A INPUT -p tcp --tcp-flags FIN,SYN,RST,ACK SYN -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(6), TCPFlags: &TCPFlagsMatch{Mask: 0x17, Comp: 0x02}}, Target: drop}},
		{"-A INPUT -p tcp --tcp-flags ALL NONE -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(6), TCPFlags: &TCPFlagsMatch{Mask: 0x3f, Comp: 0}}, Target: drop}},
		{"-A INPUT -p tcp --tcp-flags all fin,psh,urg -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(6), TCPFlags: &TCPFlagsMatch{Mask: 0x3f, Comp: 0x29}}, Target: drop}},
		{"-A INPUT -p tcp ! --tcp-flags SYN,ACK ACK -j DROP", ParseOptions{}, Rule{Match: Match{Proto: proto(6), TCPFlags: &TCPFlagsMatch{Mask: 0x12, Comp: 0x10, Invert: true}}, Target: drop}},

		// ICMP.
		{"-A INPUT -p icmp --icmp-type echo-request -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1), ICMP: &ICMPMatch{Type: 8, Code: -1}}, Target: accept}},
		{"-A INPUT -p icmp -m icmp --icmp-type ping -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1), ICMP: &ICMPMatch{Type: 8, Code: -1}}, Target: accept}},
		{"-A INPUT -p icmp --icmp-type pong -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1), ICMP: &ICMPMatch{Type: 0, Code: -1}}, Target: accept}},
		{"-A INPUT -p icmp --icmp-type fragmentation-needed -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1), ICMP: &ICMPMatch{Type: 3, Code: 4}}, Target: accept}},
		{"-A INPUT -p icmp --icmp-type tos-host-redirect -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1), ICMP: &ICMPMatch{Type: 5, Code: 3}}, Target: accept}},
		{"-A INPUT -p icmp --icmp-type 3/4 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1), ICMP: &ICMPMatch{Type: 3, Code: 4}}, Target: accept}},
		// type 255 is iptables' "any", whatever the code (ip6tables has no such type)
		{"-A INPUT -p icmp --icmp-type 255/255 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1), ICMP: &ICMPMatch{Any: true, Code: -1}}, Target: accept}},
		{"-A INPUT -p icmp ! --icmp-type 255 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1), ICMP: &ICMPMatch{Any: true, Code: -1, Invert: true}}, Target: accept}},
		{"-A INPUT -p ipv6-icmp --icmpv6-type 255 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv6, Proto: proto(58), ICMP: &ICMPMatch{Type: 255, Code: -1}}, Target: accept}},
		{"-A INPUT -p icmp --icmp-type 11 -j ACCEPT", v4,
			Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1), ICMP: &ICMPMatch{Type: 11, Code: -1}}, Target: accept}},
		{"-A INPUT -p icmp ! --icmp-type any -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv4, Proto: proto(1), ICMP: &ICMPMatch{Any: true, Code: -1, Invert: true}}, Target: accept}},
		{"-A INPUT -p ipv6-icmp --icmpv6-type neighbour-solicitation -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv6, Proto: proto(58), ICMP: &ICMPMatch{Type: 135, Code: -1}}, Target: accept}},
		{"-A INPUT -p icmpv6 -m icmp6 --icmpv6-type neighbor-advertisement -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv6, Proto: proto(58), ICMP: &ICMPMatch{Type: 136, Code: -1}}, Target: accept}},
		{"-A INPUT -p ipv6-icmp --icmpv6-type port-unreachable -j ACCEPT", v6,
			Rule{Match: Match{Family: FamilyIPv6, Proto: proto(58), ICMP: &ICMPMatch{Type: 1, Code: 4}}, Target: accept}},
		{"-A INPUT -p ipv6-icmp ! --icmpv6-type 128/0 -j ACCEPT", ParseOptions{},
			Rule{Match: Match{Family: FamilyIPv6, Proto: proto(58), ICMP: &ICMPMatch{Type: 128, Code: 0, Invert: true}}, Target: accept}},

		// VLAN, fragments, comments, counters.
		{"-A INPUT -m vlan --vlan-id 4095 -j DROP", ParseOptions{}, Rule{Match: Match{VLAN: &VLANMatch{ID: 4095}}, Target: drop}},
		{"-A INPUT -m vlan ! --vlan-id 0 -j DROP", ParseOptions{}, Rule{Match: Match{VLAN: &VLANMatch{ID: 0, Invert: true}}, Target: drop}},
		{"-A INPUT -m vlan --vlan-prio 7 -j DROP", ParseOptions{}, Rule{Match: Match{VLANPrio: &VLANPrioMatch{Prio: 7}}, Target: drop}},
		{"-A INPUT -m vlan --vlan-prio 5 ! --vlan-id 10 -j DROP", ParseOptions{},
			Rule{Match: Match{VLAN: &VLANMatch{ID: 10, Invert: true}, VLANPrio: &VLANPrioMatch{Prio: 5}}, Target: drop}},
		{"-A INPUT -m vlan ! --vlan-prio 0 -j DROP", ParseOptions{}, Rule{Match: Match{VLANPrio: &VLANPrioMatch{Invert: true}}, Target: drop}},
		{"-A INPUT -f -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Fragment: boolp(true)}, Target: drop}},
		{"-A INPUT ! --fragment -j DROP", ParseOptions{}, Rule{Match: Match{Family: FamilyIPv4, Fragment: boolp(false)}, Target: drop}},
		{`-A INPUT -m comment --comment "allow \"x\"" -j ACCEPT`, ParseOptions{}, Rule{Comments: []string{`allow "x"`}, Target: accept}},
		{`-A INPUT -m comment --comment 'a # b' -j ACCEPT # trailing`, ParseOptions{}, Rule{Comments: []string{"a # b"}, Target: accept}},
		{`-A INPUT -m comment --comment ! -j ACCEPT`, ParseOptions{}, Rule{Comments: []string{"!"}, Target: accept}},
		{`-A INPUT -m comment --comment "" -j ACCEPT`, ParseOptions{}, Rule{Target: accept}},
		{"[12:345] -A INPUT -j ACCEPT", ParseOptions{}, Rule{Target: accept}},
		{"-A INPUT -c 12 345 -j ACCEPT", ParseOptions{}, Rule{Target: accept}},

		// Everything at once.
		{"-A FORWARD -i eth+ ! -s 10.0.0.0/8 -d 10.1.2.3 -p tcp -m mac --mac-source 02:00:00:00:00:01 " +
			"-m vlan --vlan-id 7 --sport 1024: -m multiport ! --dports 22,80 --syn -m comment --comment x -j REJECT --reject-with tcp-reset",
			ParseOptions{},
			Rule{Chain: ChainForward, Match: Match{
				Family: FamilyIPv4, InIface: &IfaceMatch{Name: "eth", Prefix: true}, Src: nsrc("10.0.0.0/8"), Dst: src("10.1.2.3/32"),
				Proto: proto(6), MACSrc: &MACMatch{Addr: [6]byte{2, 0, 0, 0, 0, 1}}, VLAN: &VLANMatch{ID: 7},
				SPort: ports(rng(1024, 65535)), DPort: nports(one(22), one(80)), TCPFlags: &TCPFlagsMatch{Mask: 0x17, Comp: 0x02},
			}, Comments: []string{"x"}, Target: Target{Verdict: VerdictReject, RejectWith: "tcp-reset"}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := parseLine(t, tt.in, tt.opt)
			if !reflect.DeepEqual(strip(got), tt.want) {
				t.Errorf("got  %#v\nwant %#v", strip(got), tt.want)
			}
			if got.Text != got.Spec() || got.String() != "-A "+got.Chain.String()+" "+got.Text {
				t.Errorf("Text %q, String %q", got.Text, got.String())
			}
			col := strings.Index(tt.in, "-A") + 1
			if strings.HasPrefix(tt.in, "--append") {
				col = 1
			}
			if want := (Pos{File: "test.rules", Line: 1, Col: col}); got.Pos != want {
				t.Errorf("Pos = %v, want %v", got.Pos, want)
			}
			assertRoundTrip(t, &RuleSet{Rules: []Rule{got}})
		})
	}
}

func TestParseCanonicalText(t *testing.T) {
	tests := []struct {
		in, want string
		opt      ParseOptions
	}{
		{"-A INPUT -p tcp -s 10.1.2.3/8 --dport 22 -j ACCEPT", "-s 10.0.0.0/8 -p tcp --dport 22 -j ACCEPT", ParseOptions{}},
		{"-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT", "-4 -p tcp --dport 22 -j ACCEPT", ParseOptions{Family: FamilyIPv4}},
		{"-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT", "-6 -p tcp --dport 22 -j ACCEPT", ParseOptions{Family: FamilyIPv6}},
		{"-A INPUT -4 -s 10.0.0.1 -j DROP", "-s 10.0.0.1/32 -j DROP", ParseOptions{}},
		{"-A INPUT -4 -p icmp -j DROP", "-p icmp -j DROP", ParseOptions{}},
		{"-A INPUT -6 -p 58 -j DROP", "-p ipv6-icmp -j DROP", ParseOptions{}},
		{"-A INPUT -4 ! -p icmp -j DROP", "-4 ! -p icmp -j DROP", ParseOptions{}},
		{"-A INPUT -p 99 -j DROP", "-p 99 -j DROP", ParseOptions{}},
		{"-A INPUT -p tcp -m multiport --dports 22 -j DROP", "-p tcp --dport 22 -j DROP", ParseOptions{}},
		{"-A INPUT -p tcp -m multiport ! --sports 22:22,1:2 -j DROP", "-p tcp -m multiport ! --sports 22,1:2 -j DROP", ParseOptions{}},
		{"-A INPUT -p tcp -m multiport --ports 7 -j DROP", "-p tcp -m multiport --ports 7 -j DROP", ParseOptions{}},
		// single ports first: after -m multiport, iptables reads --dport as multiport's --dports
		{"-A INPUT -p udp -m multiport --sports 1,2 -m udp --dport 80 -j DROP", "-p udp --dport 80 -m multiport --sports 1,2 -j DROP", ParseOptions{}},
		{"-A INPUT -p tcp -m multiport --dports 1,2 -m multiport --ports 3,4 -m tcp ! --sport 5 -j DROP", "-p tcp ! --sport 5 -m multiport --dports 1,2 -m multiport --ports 3,4 -j DROP", ParseOptions{}},
		{"-A INPUT -p tcp --tcp-flags SYN,FIN,ACK,RST SYN -j DROP", "-p tcp --syn -j DROP", ParseOptions{}},
		{"-A INPUT -p tcp --tcp-flags ACK,SYN,URG,PSH,RST,FIN NONE -j DROP", "-p tcp --tcp-flags ALL NONE -j DROP", ParseOptions{}},
		{"-A INPUT -p tcp --tcp-flags URG,SYN ACK,SYN -j DROP", "-p tcp --tcp-flags SYN,URG SYN,ACK -j DROP", ParseOptions{}},
		{"-A INPUT -p icmp --icmp-type port-unreachable -j DROP", "-p icmp --icmp-type 3/3 -j DROP", ParseOptions{}},
		{"-A INPUT -p icmp --icmp-type ANY -j DROP", "-p icmp --icmp-type any -j DROP", ParseOptions{}},
		{"-A INPUT -p ipv6-icmp --icmpv6-type echo-request -j DROP", "-p ipv6-icmp --icmpv6-type 128 -j DROP", ParseOptions{}},
		{"-A INPUT -m mac --mac-destination AA:bb:0:1:2:3 --mac-source 1:2:3:4:5:6 -j DROP",
			"-m mac --mac-source 01:02:03:04:05:06 --mac-destination aa:bb:00:01:02:03 -j DROP", ParseOptions{}},
		{"-A INPUT -j LOG --log-level 7 --log-prefix 'a\"b'", `-j LOG --log-prefix "a\"b" --log-level 7`, ParseOptions{}},
		{"-A INPUT -j LOG --log-burst 5 --log-rate 3/minute", `-j LOG --log-rate 3/min --log-burst 5`, ParseOptions{}},
		// strings as iptables-save's xtables_save_string: bare when [A-Za-z0-9_-]+
		{`-A INPUT -m comment --comment "a_b-9" -j LOG --log-prefix "ssh"`, `-m comment --comment a_b-9 -j LOG --log-prefix ssh`, ParseOptions{}},
		{`-A INPUT -m comment --comment "it's" -j LOG --log-prefix 'ssh:'`, `-m comment --comment "it\'s" -j LOG --log-prefix "ssh:"`, ParseOptions{}},
		{`-A INPUT -j NFLOG --nflog-prefix ssh`, `-j NFLOG --nflog-prefix ssh`, ParseOptions{}},
		{"-A INPUT -j DROP --log-rate 10 --log", `-j DROP --log --log-rate 10/sec`, ParseOptions{}},
		{"-A INPUT -m comment --comment 'x y' -d ::1 -i lo -j DROP", `-i lo -d ::1/128 -m comment --comment "x y" -j DROP`, ParseOptions{}},
		{"-A INPUT ! -f -j DROP", "! -f -j DROP", ParseOptions{}},
		{"-A INPUT -m addrtype --dst-type local,Broadcast -j DROP", "-m addrtype --dst-type LOCAL,BROADCAST -j DROP", ParseOptions{}},
		{"-A INPUT -m addrtype ! --src-type LOCAL --limit-iface-in -j DROP", "-m addrtype ! --src-type LOCAL --limit-iface-in -j DROP", ParseOptions{}},
		{"-A FORWARD -m addrtype --limit-iface-out --dst-type UNICAST -m addrtype --src-type MULTICAST -j DROP",
			"-m addrtype --src-type MULTICAST --dst-type UNICAST --limit-iface-out -j DROP", ParseOptions{}},
		{"-A INPUT -m addrtype --src-type XRESOLVE,NAT,THROW,PROHIBIT,UNREACHABLE,BLACKHOLE,MULTICAST,ANYCAST,UNSPEC -j DROP",
			"-m addrtype --src-type UNSPEC,ANYCAST,MULTICAST,BLACKHOLE,UNREACHABLE,PROHIBIT,THROW,NAT,XRESOLVE -j DROP", ParseOptions{}},
		{"-A INPUT -6 -m addrtype --dst-type UNSPEC,UNICAST,LOCAL,ANYCAST,MULTICAST -j DROP", "-6 -m addrtype --dst-type UNSPEC,UNICAST,LOCAL,ANYCAST,MULTICAST -j DROP", ParseOptions{}},
		{"-A INPUT -m pkttype --pkt-type BCAST -j DROP", "-m pkttype --pkt-type broadcast -j DROP", ParseOptions{}},
		{"-A INPUT -m pkttype ! --pkt-type host -j DROP", "-m pkttype ! --pkt-type unicast -j DROP", ParseOptions{}},
		{"-A INPUT -m pkttype --pkt-type Mcast -j DROP", "-m pkttype --pkt-type multicast -j DROP", ParseOptions{}},
		{"-A INPUT -m pkttype --pkt-type otherhost -j DROP", "-m pkttype --pkt-type otherhost -j DROP", ParseOptions{}},
		{"-A FORWARD -o wan -s 10.0.0.0/8 ! -i lan+ -j DROP", "! -i lan+ -o wan -s 10.0.0.0/8 -j DROP", ParseOptions{}},
		// what iptables-save prints for --dport 0:65535 and --tcp-flags NONE NONE
		{"-A INPUT -p tcp -m tcp -j DROP", "-p tcp -m tcp -j DROP", ParseOptions{}},
		{"-A INPUT -m sctp -p sctp -s 10.0.0.0/8 -m comment --comment c -j DROP", `-s 10.0.0.0/8 -p sctp -m sctp -m comment --comment c -j DROP`, ParseOptions{}},
		{"-A INPUT -p udplite -m udplite -j DROP", "-p udplite -m udplite -j DROP", ParseOptions{}},
		{"-A INPUT -p udp -m udp --sport 53 -j DROP", "-p udp --sport 53 -j DROP", ParseOptions{}},
		{"-A INPUT -p icmp -m icmp --icmp-type 255 -j DROP", "-p icmp --icmp-type any -j DROP", ParseOptions{}},
		{"-A INPUT -p icmp --icmp-type 255/3 -j DROP", "-p icmp --icmp-type any -j DROP", ParseOptions{}},
		{"-A INPUT -p ipv6-icmp --icmpv6-type 255 -j DROP", "-p ipv6-icmp --icmpv6-type 255 -j DROP", ParseOptions{}},
		{"-A INPUT -m vlan ! --vlan-id 12 -j DROP", "-m vlan ! --vlan-id 12 -j DROP", ParseOptions{}},
		{"-A INPUT -m vlan ! --vlan-prio 3 --vlan-id 12 -j DROP", "-m vlan --vlan-id 12 ! --vlan-prio 3 -j DROP", ParseOptions{}},
		{"-A INPUT -m vlan --vlan-prio 6 -j DROP", "-m vlan --vlan-prio 6 -j DROP", ParseOptions{}},
	}
	for _, tt := range tests {
		got := parseLine(t, tt.in, tt.opt)
		if got.Text != tt.want {
			t.Errorf("%q: Text = %q, want %q", tt.in, got.Text, tt.want)
		}
		if again := parseLine(t, "-A "+strings.Fields(tt.in)[1]+" "+got.Text, tt.opt); again.Text != got.Text {
			t.Errorf("%q: %q parses back as %q", tt.in, got.Text, again.Text)
		}
	}
}

// TestLogLevelAsIptablesSave checks every --log-level spelling iptables
// v1.8.9 accepts against what iptables-save (legacy and nft) printed for
// `-A INPUT -j LOG --log-level L` in a netns: the number, none for 4.
func TestLogLevelAsIptablesSave(t *testing.T) {
	for in, want := range logLevelSaved {
		got := parseLine(t, "-A INPUT -j LOG --log-level "+in, ParseOptions{})
		if got.Text != want {
			t.Errorf("--log-level %s: Text = %q, want %q", in, got.Text, want)
		}
		if again := parseLine(t, "-A INPUT "+got.Text, ParseOptions{}); again.Target.LogLevel != got.Target.LogLevel || again.Text != want {
			t.Errorf("--log-level %s: %q parses back as level %q, text %q", in, got.Text, again.Target.LogLevel, again.Text)
		}
	}
	// iptables refuses these too ("log level \"err\" unknown").
	for _, in := range []string{"err", "warn", "8"} {
		if _, err := Parse("t", []byte("-A INPUT -j LOG --log-level "+in+"\n"), ParseOptions{}); err == nil {
			t.Errorf("--log-level %s: accepted", in)
		}
	}
}

// TestLogLevelLive: iptables-save in a throwaway namespace prints what
// logLevelSaved records.
func TestLogLevelLive(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iptables-nft"); err != nil {
		t.Skip("iptables-nft not installed")
	}
	ns := testutil.NewNetNS(t)
	for _, backend := range []string{"iptables-legacy", "iptables-nft"} {
		for in, want := range logLevelSaved {
			if got := iptablesSaved(t, ns, backend, "-j LOG --log-level "+in); got != want {
				t.Errorf("%s -j LOG --log-level %s: iptables-save printed %q, the record says %q", backend, in, got, want)
			}
		}
	}
}

// logLevelSaved: each --log-level spelling iptables accepts, and what
// iptables-save prints for `-A INPUT -j LOG --log-level L`.
var logLevelSaved = map[string]string{
	"0": "-j LOG --log-level 0", "emerg": "-j LOG --log-level 0", "panic": "-j LOG --log-level 0",
	"1": "-j LOG --log-level 1", "alert": "-j LOG --log-level 1",
	"2": "-j LOG --log-level 2", "crit": "-j LOG --log-level 2",
	"3": "-j LOG --log-level 3", "error": "-j LOG --log-level 3",
	"4": "-j LOG", "warning": "-j LOG",
	"5": "-j LOG --log-level 5", "notice": "-j LOG --log-level 5",
	"6": "-j LOG --log-level 6", "info": "-j LOG --log-level 6",
	"7": "-j LOG --log-level 7", "debug": "-j LOG --log-level 7",
}

func TestParsePolicies(t *testing.T) {
	src := "-P INPUT DROP\n--policy FORWARD ACCEPT\n-P OUTPUT DROP -6\n-P INPUT ACCEPT --ipv4\n"
	rs, err := Parse("p.rules", []byte(src), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Policy{
		{Chain: ChainInput, Family: FamilyAny, Verdict: VerdictDrop, Pos: Pos{"p.rules", 1, 1}},
		{Chain: ChainForward, Family: FamilyAny, Verdict: VerdictAccept, Pos: Pos{"p.rules", 2, 1}},
		{Chain: ChainOutput, Family: FamilyIPv6, Verdict: VerdictDrop, Pos: Pos{"p.rules", 3, 1}},
		{Chain: ChainInput, Family: FamilyIPv4, Verdict: VerdictAccept, Pos: Pos{"p.rules", 4, 1}},
	}
	if !reflect.DeepEqual(rs.Policies, want) {
		t.Errorf("Policies = %+v, want %+v", rs.Policies, want)
	}
	if got := rs.PolicyFor(ChainInput, FamilyIPv4); got != VerdictAccept {
		t.Errorf("PolicyFor(INPUT, IPv4) = %v", got)
	}
	if got := rs.PolicyFor(ChainInput, FamilyIPv6); got != VerdictDrop {
		t.Errorf("PolicyFor(INPUT, IPv6) = %v", got)
	}
	if got, want := rs.String(), "-P INPUT DROP\n-P FORWARD ACCEPT\n-P OUTPUT DROP -6\n-P INPUT ACCEPT -4\n"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	assertRoundTrip(t, rs)

	rs, err = Parse("p.rules", []byte("-P INPUT DROP\n"), ParseOptions{Family: FamilyIPv6})
	if err != nil || rs.Policies[0].Family != FamilyIPv6 {
		t.Errorf("policy in an IPv6 file: %+v, %v", rs, err)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, src := range []string{"", "\n\n", "# only comments\n  # indented\n", "*filter\nCOMMIT\n"} {
		rs, err := Parse("e", []byte(src), ParseOptions{})
		if err != nil || rs == nil || len(rs.Rules) != 0 || len(rs.Policies) != 0 {
			t.Errorf("Parse(%q) = %+v, %v", src, rs, err)
		}
	}
}

func TestParseSaveFiles(t *testing.T) {
	tests := []struct {
		file     string
		opt      ParseOptions
		rules    int
		policies []Policy
		first    []string // Text of the first rules
	}{
		{"testdata/iptables-save.v4", ParseOptions{Family: FamilyIPv4}, 22,
			[]Policy{
				{Chain: ChainInput, Family: FamilyIPv4, Verdict: VerdictDrop},
				{Chain: ChainForward, Family: FamilyIPv4, Verdict: VerdictDrop},
				{Chain: ChainOutput, Family: FamilyIPv4, Verdict: VerdictAccept},
			},
			[]string{"-4 -i lo -j ACCEPT", "! -i lo -s 127.0.0.0/8 -j DROP", "-p icmp --icmp-type 8 -j ACCEPT", "-p icmp --icmp-type 3/4 -j ACCEPT"}},
		{"testdata/ip6tables-save.v6", ParseOptions{Family: FamilyIPv6}, 20,
			[]Policy{
				{Chain: ChainInput, Family: FamilyIPv6, Verdict: VerdictDrop},
				{Chain: ChainForward, Family: FamilyIPv6, Verdict: VerdictDrop},
				{Chain: ChainOutput, Family: FamilyIPv6, Verdict: VerdictAccept},
			},
			[]string{"-6 -i lo -j ACCEPT", "! -i lo -s ::1/128 -j DROP", "-p ipv6-icmp --icmpv6-type 1 -j ACCEPT"}},
		{"testdata/native.rules", ParseOptions{}, 16,
			[]Policy{
				{Chain: ChainInput, Family: FamilyAny, Verdict: VerdictDrop},
				{Chain: ChainForward, Family: FamilyAny, Verdict: VerdictDrop},
				{Chain: ChainOutput, Family: FamilyIPv6, Verdict: VerdictAccept},
			},
			[]string{"-i lo -j ACCEPT", "-p icmp --icmp-type 8 -j ACCEPT", "-p ipv6-icmp --icmpv6-type 135 -j ACCEPT"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			rs, err := ParseFile(tt.file, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs.Rules) != tt.rules {
				t.Errorf("%d rules, want %d", len(rs.Rules), tt.rules)
			}
			var pols []Policy
			for _, p := range rs.Policies {
				p.Pos = Pos{}
				pols = append(pols, p)
			}
			if !reflect.DeepEqual(pols, tt.policies) {
				t.Errorf("policies %+v, want %+v", pols, tt.policies)
			}
			for i, want := range tt.first {
				if rs.Rules[i].Text != want {
					t.Errorf("rule %d: %q, want %q", i, rs.Rules[i].Text, want)
				}
			}
			for _, r := range rs.Rules {
				if r.Match.Family != tt.opt.Family && tt.opt.Family != FamilyAny {
					t.Errorf("rule %q: family %v", r.Text, r.Match.Family)
				}
				if r.Pos.File != tt.file || r.Pos.Col != 1 {
					t.Errorf("rule %q: pos %v", r.Text, r.Pos)
				}
			}
			assertRoundTrip(t, rs)
			// The canonical form reads back the same with the file's own family too.
			again, err := Parse("again", []byte(rs.String()), tt.opt)
			if err != nil {
				t.Fatalf("re-parse with %v: %v", tt.opt.Family, err)
			}
			if d := diffRuleSets(rs, again); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestParseSaveFileDetails(t *testing.T) {
	rs, err := ParseFile("testdata/iptables-save.v4", ParseOptions{Family: FamilyIPv4})
	if err != nil {
		t.Fatal(err)
	}
	find := func(substr string) Rule {
		for _, r := range rs.Rules {
			if strings.Contains(r.Text, substr) {
				return r
			}
		}
		t.Fatalf("no rule contains %q", substr)
		return Rule{}
	}
	if r := find("ssh"); strings.Join(r.Comments, "|") != "ssh from the office" || r.Match.DPort.Ranges[0] != one(22) || r.Pos.Line != 11 {
		t.Errorf("ssh rule: %+v", r)
	}
	if r := find("LOG"); r.Target.LogPrefix != "blocked net: " || r.Target.LogLevel != "" {
		t.Errorf("LOG rule: %+v", r.Target)
	}
	if r := find("-f -j"); r.Match.Fragment == nil || !*r.Match.Fragment {
		t.Errorf("-f rule: %+v", r.Match)
	}
	if r := find("993:995"); r.Chain != ChainForward || len(r.Match.DPort.Ranges) != 3 {
		t.Errorf("multiport rule: %+v", r)
	}
}

func TestParseRuleArgs(t *testing.T) {
	r, err := ParseRuleArgs("INPUT", strings.Fields("-p tcp --dport 22 -j ACCEPT"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := Rule{Chain: ChainInput, Match: Match{Proto: proto(6), DPort: ports(one(22))}, Target: accept}
	if !reflect.DeepEqual(strip(r), want) {
		t.Errorf("got %+v", r)
	}
	if r.Pos != (Pos{File: "<command line>", Line: 1, Col: 1}) || r.Text != "-p tcp --dport 22 -j ACCEPT" {
		t.Errorf("Pos %v Text %q", r.Pos, r.Text)
	}
	// Arguments with spaces come as one word from the shell.
	r, err = ParseRuleArgs("FORWARD", []string{"-m", "comment", "--comment", "two words", "-j", "DROP"}, ParseOptions{Family: FamilyIPv6})
	if err != nil || strings.Join(r.Comments, "|") != "two words" || r.Match.Family != FamilyIPv6 || r.Chain != ChainForward {
		t.Errorf("got %+v, %v", r, err)
	}
}

func TestParseOptionsFamilyInvalid(t *testing.T) {
	if _, err := Parse("f", nil, ParseOptions{Family: 5}); err == nil {
		t.Error("Parse accepted family 5")
	}
	if _, err := ParseRuleArgs("INPUT", []string{"-j", "DROP"}, ParseOptions{Family: 5}); err == nil {
		t.Error("ParseRuleArgs accepted family 5")
	}
}

func TestParseFileMissing(t *testing.T) {
	if _, err := ParseFile("testdata/does-not-exist", ParseOptions{}); err == nil || !strings.Contains(err.Error(), "reading rules") {
		t.Errorf("err = %v", err)
	}
}

// TestParseCTState checks both spellings, case, order and negation of the
// connection-state match, and that both print as -m conntrack --ctstate.
func TestParseCTState(t *testing.T) {
	tests := []struct {
		line, spec string
		mask       uint8
		invert     bool
	}{
		{"-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
			"-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", CTEstablished | CTRelated, false},
		{"-A INPUT -m state --state new -j ACCEPT", "-A INPUT -m conntrack --ctstate NEW -j ACCEPT", CTNew, false},
		{"-A OUTPUT -m conntrack ! --ctstate INVALID,UNTRACKED -j ACCEPT",
			"-A OUTPUT -m conntrack ! --ctstate INVALID,UNTRACKED -j ACCEPT", CTInvalid | CTUntracked, true},
	}
	for _, tt := range tests {
		rs, err := Parse("t.rules", []byte(tt.line), ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		c := rs.Rules[0].Match.CTState
		if c == nil || c.Mask != tt.mask || c.Invert != tt.invert {
			t.Errorf("%s: CTState = %+v, want mask %#x invert %v", tt.line, c, tt.mask, tt.invert)
		}
		if got := "-A " + rs.Rules[0].Chain.String() + " " + rs.Rules[0].Spec(); got != tt.spec {
			t.Errorf("%s: Spec() = %q, want %q", tt.line, got, tt.spec)
		}
	}
}
