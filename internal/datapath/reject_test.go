package datapath_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// wantXDP is the XDP action the data plane must return for the reference
// matcher's decision: a REJECT the reference says is answered is sent back
// (XDP_TX); one it must not answer is dropped.
func wantXDP(d compile.Decision) uint32 {
	switch {
	case d.Verdict == rules.VerdictAccept:
		return datapath.XDPPass
	case d.Verdict == rules.VerdictReject && d.Reason == compile.ReasonRuleReject:
		return datapath.XDPTx
	}
	return datapath.XDPDrop
}

// unlimitedRejects lifts REJECT's rate limits (10^9 answers a
// second, as many at once), for tests that send many packets from one
// source and compare with the reference matcher, which has no clock.
func (f *fixture) unlimitedRejects() {
	f.t.Helper()
	if err := f.dp.SetConfig(datapath.Config{RejectRate: 1e9, RejectBurst: 1e9, RejectGlobalRate: 1e9}); err != nil {
		f.t.Fatal(err)
	}
}

const rejectRules = `
-P INPUT ACCEPT
-A INPUT -p tcp --dport 1 -j REJECT --reject-with tcp-reset
-A INPUT -p tcp --dport 2 -j REJECT
-A INPUT -4 -p udp --dport 3 -j REJECT --reject-with icmp-admin-prohibited
-A INPUT -6 -p udp --dport 3 -j REJECT --reject-with icmp6-adm-prohibited
-A INPUT -p udp --dport 4 -j REJECT
-A INPUT -p icmp -j REJECT --reject-with icmp-host-unreachable
-A INPUT -p ipv6-icmp -j REJECT --reject-with icmp6-addr-unreachable
-A INPUT -p tcp -j REJECT --reject-with tcp-reset
-A INPUT -p udp -j REJECT
-A INPUT -4 -p 47 -j REJECT --reject-with icmp-proto-unreachable
-A INPUT -4 -p 50 -j REJECT --reject-with icmp-net-unreachable
-A INPUT -4 -p 51 -j REJECT --reject-with icmp-net-prohibited
-A INPUT -4 -p 132 -j REJECT --reject-with icmp-host-prohibited
-A INPUT -6 -p 47 -j REJECT --reject-with icmp6-no-route
`

// Addresses of the REJECT tests: a client and the firewalled host.
var (
	cli4, srv4 = netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("198.51.100.1")
	cli6, srv6 = netip.MustParseAddr("2001:db8:7::7"), netip.MustParseAddr("2001:db8:1::1")
)

// rpkt is a packet from the client to the host.
func rpkt(v6 bool, proto uint8, dport uint16, fn func(*packet.Packet)) *packet.Packet {
	p := &packet.Packet{SrcMAC: macA, DstMAC: macB, Src: cli4, Dst: srv4, Proto: proto,
		SPort: 40000, DPort: dport, TCPFlags: packet.TCPSyn, Payload: []byte("hello, firewall")}
	if v6 {
		p.Src, p.Dst = cli6, srv6
	}
	if proto == packet.ProtoICMP || proto == packet.ProtoICMPv6 {
		p.ICMPType = map[bool]uint8{false: 8, true: 128}[v6] // echo request
	}
	if fn != nil {
		fn(p)
	}
	return p
}

// rstWant is the RST a segment must get (RFC 9293 3.10.7.1).
type rstWant struct {
	seq, ack uint32
	flags    uint8
}

// rejectHook is one of the two programs that answer REJECTs: XDP for
// packets that arrive (INPUT), tc egress for packets this host sends
// (OUTPUT), with the verdicts each returns for an answer and a drop.
type rejectHook struct {
	name         string
	chain        rules.Chain
	answer, drop uint32
}

var rejectHooks = []rejectHook{
	{"xdp INPUT", rules.ChainInput, datapath.XDPTx, datapath.XDPDrop},
	{"tc OUTPUT", rules.ChainOutput, datapath.TCActRedirect, datapath.TCActShot},
}

// runHook runs frame through the hook's program: arriving on eth0, or
// sent by this host.
func (f *fixture) runHook(h rejectHook, frame []byte) datapath.TraceResult {
	f.t.Helper()
	if h.chain != rules.ChainOutput {
		return f.mustRun(frame, "eth0")
	}
	var r datapath.TraceResult
	err := f.ns.Do(func() error {
		var err error
		r, err = f.dp.RecordEgress(frame, datapath.NoCTState)
		return err
	})
	if err != nil {
		f.t.Fatalf("run (tc egress): %v", err)
	}
	return r
}

// TestRejectAnswers: one packet per behaviour of REJECT, run through both
// programs (the same rules in INPUT and in OUTPUT); the frame each leaves
// is decoded and every field of the answer checked (addresses, VLAN tags,
// TTL, lengths, flags, sequence numbers, ICMP type/code, the quote, and
// every checksum, recomputed in Go), or the packet must be dropped for the
// stated reason.
func TestRejectAnswers(t *testing.T) {
	f := newFixture(t)
	f.installText(rejectRules + strings.ReplaceAll(rejectRules, "-A INPUT", "-A OUTPUT"))
	f.unlimitedRejects()
	nIn := strings.Count(rejectRules, "-A INPUT")

	bigV4 := bytes.Repeat([]byte("0123456789abcdef"), 100) // 1600 bytes: the quote is cut
	bigV6 := bytes.Repeat([]byte("fedcba9876543210"), 90)  // 1440 bytes
	opts := []byte{0x94, 4, 0, 0, 1, 1, 1, 0}              // router alert, NOPs, EOL
	syn := func(p *packet.Packet) { p.TCPFlags = packet.TCPSyn; p.Payload = nil }
	cases := []struct {
		name string
		pkt  *packet.Packet
		rule int    // 1-based rule that decides
		drop string // reason of a packet that must not be answered ("" = answered)
		rst  *rstWant
		icmp [2]uint8 // type, code of an ICMP answer
	}{
		// TCP RST (tcp-reset)
		{name: "tcp syn v4", pkt: rpkt(false, 6, 1, syn), rule: 1,
			rst: &rstWant{0, packet.TCPSeq + 1, packet.TCPRst | packet.TCPAck}},
		{name: "tcp syn v6", pkt: rpkt(true, 6, 1, syn), rule: 1,
			rst: &rstWant{0, packet.TCPSeq + 1, packet.TCPRst | packet.TCPAck}},
		{name: "tcp ack-bearing segment with data", pkt: rpkt(false, 6, 1, func(p *packet.Packet) { p.TCPFlags = packet.TCPAck | packet.TCPPsh }), rule: 1,
			rst: &rstWant{packet.TCPAckNum, 0, packet.TCPRst}},
		{name: "tcp fin with data, no ack", pkt: rpkt(false, 6, 1, func(p *packet.Packet) { p.TCPFlags = packet.TCPFin }), rule: 1,
			rst: &rstWant{0, packet.TCPSeq + 15 + 1, packet.TCPRst | packet.TCPAck}},
		{name: "tcp data, no flags", pkt: rpkt(true, 6, 1, func(p *packet.Packet) { p.TCPFlags = 0 }), rule: 1,
			rst: &rstWant{0, packet.TCPSeq + 15, packet.TCPRst | packet.TCPAck}},
		{name: "tcp fin+ack v6", pkt: rpkt(true, 6, 1, func(p *packet.Packet) { p.TCPFlags = packet.TCPFin | packet.TCPAck }), rule: 1,
			rst: &rstWant{packet.TCPAckNum, 0, packet.TCPRst}},
		{name: "tcp rst is not answered with a rst", pkt: rpkt(false, 6, 1, func(p *packet.Packet) { p.TCPFlags = packet.TCPRst }), rule: 1,
			drop: "reject-unanswered-error"},
		{name: "tcp rst+ack v6 not answered", pkt: rpkt(true, 6, 1, func(p *packet.Packet) { p.TCPFlags = packet.TCPRst | packet.TCPAck }), rule: 1,
			drop: "reject-unanswered-error"},
		{name: "tcp syn v4 with ip options", pkt: rpkt(false, 6, 1, func(p *packet.Packet) { syn(p); p.IPv4Options = opts }), rule: 1,
			rst: &rstWant{0, packet.TCPSeq + 1, packet.TCPRst | packet.TCPAck}},
		{name: "tcp syn v6 through extension headers", pkt: rpkt(true, 6, 1, func(p *packet.Packet) {
			syn(p)
			p.IPv6Ext = []packet.ExtHdr{{Type: 0, Len: 8}, {Type: 60, Len: 24}}
		}), rule: 1, rst: &rstWant{0, packet.TCPSeq + 1, packet.TCPRst | packet.TCPAck}},
		{name: "tcp syn vlan-tagged", pkt: rpkt(false, 6, 1, func(p *packet.Packet) { syn(p); p.VLANs = []uint16{42} }), rule: 1,
			rst: &rstWant{0, packet.TCPSeq + 1, packet.TCPRst | packet.TCPAck}},
		{name: "tcp syn v6 qinq, padded frame", pkt: rpkt(true, 6, 1, func(p *packet.Packet) { syn(p); p.VLANs = []uint16{100, 10}; p.PadTo60 = true }), rule: 1,
			rst: &rstWant{0, packet.TCPSeq + 1, packet.TCPRst | packet.TCPAck}},
		{name: "tcp first fragment answered", pkt: rpkt(false, 6, 1, func(p *packet.Packet) { syn(p); p.MoreFragments = true }), rule: 1,
			rst: &rstWant{0, packet.TCPSeq + 1, packet.TCPRst | packet.TCPAck}},
		// the rest of a datagram: its first fragment's REJECT, unanswered
		{name: "tcp non-first fragment not answered", pkt: rpkt(false, 6, 1, func(p *packet.Packet) { p.FragOffset = 100 }), rule: 1,
			drop: "reject-unanswered-fragment"},

		// ICMP destination unreachable, quoting
		{name: "tcp syn, default reject: port unreachable v4", pkt: rpkt(false, 6, 2, syn), rule: 2, icmp: [2]uint8{3, 3}},
		{name: "tcp syn, default reject: port unreachable v6", pkt: rpkt(true, 6, 2, syn), rule: 2, icmp: [2]uint8{1, 4}},
		{name: "tcp rst, default reject: icmp answers it", pkt: rpkt(false, 6, 2, func(p *packet.Packet) { p.TCPFlags = packet.TCPRst }), rule: 2, icmp: [2]uint8{3, 3}},
		{name: "udp v4 admin-prohibited", pkt: rpkt(false, 17, 3, nil), rule: 3, icmp: [2]uint8{3, 13}},
		{name: "udp v6 adm-prohibited", pkt: rpkt(true, 17, 3, nil), rule: 4, icmp: [2]uint8{1, 1}},
		{name: "udp v4 port unreachable", pkt: rpkt(false, 17, 4, nil), rule: 5, icmp: [2]uint8{3, 3}},
		{name: "udp v6 port unreachable", pkt: rpkt(true, 17, 4, nil), rule: 5, icmp: [2]uint8{1, 4}},
		{name: "udp v4 with ip options: quoted", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.IPv4Options = opts }), rule: 5, icmp: [2]uint8{3, 3}},
		{name: "udp v6 with extension headers: quoted", pkt: rpkt(true, 17, 4, func(p *packet.Packet) {
			p.IPv6Ext = []packet.ExtHdr{{Type: 0, Len: 16}, {Type: 43, Len: 24}, {Type: 60, Len: 8}}
		}), rule: 5, icmp: [2]uint8{1, 4}},
		{name: "udp v4 vlan-tagged", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.VLANs = []uint16{7} }), rule: 5, icmp: [2]uint8{3, 3}},
		{name: "udp v4 qinq (8100 8100)", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.VLANs = []uint16{7, 8}; p.TPID8100 = true }), rule: 5, icmp: [2]uint8{3, 3}},
		{name: "udp v6 qinq", pkt: rpkt(true, 17, 4, func(p *packet.Packet) { p.VLANs = []uint16{4095, 1} }), rule: 5, icmp: [2]uint8{1, 4}},
		{name: "udp v4 padded frame: padding not quoted", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.Payload = []byte{1}; p.PadTo60 = true }), rule: 5, icmp: [2]uint8{3, 3}},
		{name: "udp v4 odd length quote", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.Payload = []byte("odd") }), rule: 5, icmp: [2]uint8{3, 3}},
		{name: "udp v4 big: quote cut at 576 bytes", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.Payload = bigV4 }), rule: 5, icmp: [2]uint8{3, 3}},
		{name: "udp v6 big: quote cut at 1280 bytes", pkt: rpkt(true, 17, 4, func(p *packet.Packet) { p.Payload = bigV6 }), rule: 5, icmp: [2]uint8{1, 4}},
		{name: "udp first fragment answered", pkt: rpkt(true, 17, 4, func(p *packet.Packet) { p.MoreFragments = true }), rule: 5, icmp: [2]uint8{1, 4}},
		{name: "udp non-first fragment v6", pkt: rpkt(true, 17, 4, func(p *packet.Packet) { p.FragOffset = 100 }), rule: 5, drop: "reject-unanswered-fragment"},
		{name: "udp first fragment v4 answered", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.MoreFragments = true }), rule: 5, icmp: [2]uint8{3, 3}},
		{name: "udp non-first fragment v4", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.FragOffset = 100 }), rule: 5, drop: "reject-unanswered-fragment"},
		{name: "icmp echo answered with unreachable", pkt: rpkt(false, 1, 0, nil), rule: 6, icmp: [2]uint8{3, 1}},
		{name: "icmp timestamp answered", pkt: rpkt(false, 1, 0, func(p *packet.Packet) { p.ICMPType = 13 }), rule: 6, icmp: [2]uint8{3, 1}},
		{name: "icmpv6 echo answered with unreachable", pkt: rpkt(true, 58, 0, nil), rule: 7, icmp: [2]uint8{1, 3}},
		{name: "icmp error not answered", pkt: rpkt(false, 1, 0, func(p *packet.Packet) { p.ICMPType, p.ICMPCode = 3, 3 }), rule: 6, drop: "reject-unanswered-error"},
		{name: "icmp time exceeded not answered", pkt: rpkt(false, 1, 0, func(p *packet.Packet) { p.ICMPType = 11 }), rule: 6, drop: "reject-unanswered-error"},
		{name: "icmp unknown type not answered", pkt: rpkt(false, 1, 0, func(p *packet.Packet) { p.ICMPType = 42 }), rule: 6, drop: "reject-unanswered-error"},
		{name: "icmpv6 error not answered", pkt: rpkt(true, 58, 0, func(p *packet.Packet) { p.ICMPType, p.ICMPCode = 1, 4 }), rule: 7, drop: "reject-unanswered-error"},
		{name: "icmpv6 packet too big not answered", pkt: rpkt(true, 58, 0, func(p *packet.Packet) { p.ICMPType = 2 }), rule: 7, drop: "reject-unanswered-error"},
		{name: "proto 47 v4: proto unreachable", pkt: rpkt(false, 47, 0, nil), rule: 10, icmp: [2]uint8{3, 2}},
		{name: "proto 50 v4: net unreachable", pkt: rpkt(false, 50, 0, nil), rule: 11, icmp: [2]uint8{3, 0}},
		{name: "proto 51 v4: net prohibited", pkt: rpkt(false, 51, 0, func(p *packet.Packet) { p.Payload = make([]byte, 12) }), rule: 12, icmp: [2]uint8{3, 9}},
		{name: "proto 132 v4: host prohibited", pkt: rpkt(false, 132, 0, func(p *packet.Packet) { p.Payload = make([]byte, 12) }), rule: 13, icmp: [2]uint8{3, 10}},
		{name: "proto 47 v6: no route", pkt: rpkt(true, 47, 0, nil), rule: 14, icmp: [2]uint8{1, 0}},

		// broadcast, multicast, non-host sources
		{name: "limited broadcast destination", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.Dst = netip.MustParseAddr("255.255.255.255") }), rule: 5, drop: "reject-unanswered-broadcast"},
		{name: "multicast destination v4", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.Dst = netip.MustParseAddr("224.0.0.251") }), rule: 5, drop: "reject-unanswered-broadcast"},
		{name: "class e destination", pkt: rpkt(false, 6, 1, func(p *packet.Packet) { syn(p); p.Dst = netip.MustParseAddr("240.0.0.1") }), rule: 1, drop: "reject-unanswered-broadcast"},
		{name: "multicast destination v6", pkt: rpkt(true, 17, 4, func(p *packet.Packet) { p.Dst = netip.MustParseAddr("ff02::fb") }), rule: 5, drop: "reject-unanswered-broadcast"},
		{name: "link-layer broadcast (directed broadcast)", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.DstMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} }), rule: 5, drop: "reject-unanswered-broadcast"},
		{name: "link-layer multicast v6", pkt: rpkt(true, 6, 1, func(p *packet.Packet) { syn(p); p.DstMAC = [6]byte{0x33, 0x33, 0, 0, 0, 1} }), rule: 1, drop: "reject-unanswered-broadcast"},
		{name: "unspecified source v4", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.Src = netip.MustParseAddr("0.0.0.0") }), rule: 5, drop: "reject-unanswered-broadcast"},
		{name: "loopback source v4", pkt: rpkt(false, 17, 4, func(p *packet.Packet) { p.Src = netip.MustParseAddr("127.0.0.1") }), rule: 5, drop: "reject-unanswered-broadcast"},
		{name: "multicast source v4", pkt: rpkt(false, 6, 1, func(p *packet.Packet) { syn(p); p.Src = netip.MustParseAddr("239.1.1.1") }), rule: 1, drop: "reject-unanswered-broadcast"},
		{name: "unspecified source v6", pkt: rpkt(true, 17, 4, func(p *packet.Packet) { p.Src = netip.IPv6Unspecified() }), rule: 5, drop: "reject-unanswered-broadcast"},
		{name: "multicast source v6", pkt: rpkt(true, 17, 4, func(p *packet.Packet) { p.Src = netip.MustParseAddr("ff05::2") }), rule: 5, drop: "reject-unanswered-broadcast"},
		{name: "link-local source v6 is one host", pkt: rpkt(true, 17, 4, func(p *packet.Packet) { p.Src = netip.MustParseAddr("fe80::1") }), rule: 5, icmp: [2]uint8{1, 4}},
	}
	for _, h := range rejectHooks {
		for _, c := range cases {
			t.Run(h.name+"/"+c.name, func(t *testing.T) {
				in := c.pkt.Bytes()
				rule := c.rule - 1
				if h.chain == rules.ChainOutput {
					rule += nIn
				}
				r := f.runHook(h, in)
				if r.RuleID != f.ids[rule] || r.Action != compile.ActReject || r.Chain != uint8(h.chain) {
					t.Fatalf("%s: decided by rule id %d action %s in chain %d, want rule %d (id %d) REJECT in %s",
						c.pkt, r.RuleID, r.Action, r.Chain, c.rule, f.ids[rule], h.chain)
				}
				if want := mustReject(t, f.rs.Rules[rule].Target.RejectWith); r.Reject != want {
					t.Errorf("trace reports reject kind %s, want %s", r.Reject, want)
				}
				if c.drop != "" {
					if r.XDPAction != h.drop || r.Reason.String() != c.drop {
						t.Fatalf("%s: action %d reason %s, want %d (drop) for %s", c.pkt, r.XDPAction, r.Reason, h.drop, c.drop)
					}
					return
				}
				if r.XDPAction != h.answer || r.Reason != compile.ReasonRuleReject {
					t.Fatalf("%s: action %d reason %s, want %d (answered) rule-reject", c.pkt, r.XDPAction, r.Reason, h.answer)
				}
				if c.rst != nil {
					checkRST(t, c.pkt, r.Frame, *c.rst)
				} else {
					checkUnreach(t, c.pkt, in, r.Frame, c.icmp[0], c.icmp[1])
				}
			})
		}
	}
	// Every packet counted once per hook: on its rule, and by what happened.
	rc, err := f.dp.ReasonCounters()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{}
	for _, c := range cases {
		if c.drop == "" {
			want["rule-reject"] += uint64(len(rejectHooks))
		} else {
			want[c.drop] += uint64(len(rejectHooks))
		}
	}
	for reason, n := range want {
		var got uint64
		for r, ctr := range rc {
			if compile.Reason(r).String() == reason {
				got = ctr.Packets
			}
		}
		if got != n {
			t.Errorf("reason %s counted %d packets, want %d", reason, got, n)
		}
	}
}

func mustReject(t *testing.T, rejectWith string) compile.Reject {
	t.Helper()
	k, err := compile.RejectOf(rejectWith)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// answerL3 decodes the answer and checks what every answer shares: back to
// the sender's MAC from the address it was sent to, the same VLAN tags,
// the addresses swapped, TTL 64, no IPv4 options or IPv6 extension
// headers, not a fragment, the IPv4 header checksum, and a frame exactly
// as long as the IP packet. It returns the decoded answer and its L3
// offset.
func answerL3(t *testing.T, in *packet.Packet, out []byte) (packet.Packet, int) {
	t.Helper()
	a, err := packet.Decode(out)
	if err != nil {
		t.Fatalf("the answer does not decode: %v\n%x", err, out)
	}
	l3 := 14 + 4*len(in.VLANs)
	switch {
	case a.SrcMAC != in.DstMAC || a.DstMAC != in.SrcMAC:
		t.Errorf("MACs %x > %x, want %x > %x", a.SrcMAC, a.DstMAC, in.DstMAC, in.SrcMAC)
	case fmt.Sprint(a.VLANs) != fmt.Sprint(in.VLANs) || (len(in.VLANs) > 1 && a.TPID8100 != in.TPID8100):
		t.Errorf("VLAN tags %v (8100 only: %v), want %v (%v)", a.VLANs, a.TPID8100, in.VLANs, in.TPID8100)
	case a.Src != in.Dst || a.Dst != in.Src:
		t.Errorf("addresses %s > %s, want %s > %s", a.Src, a.Dst, in.Dst, in.Src)
	case a.TTL != 64:
		t.Errorf("TTL %d, want 64", a.TTL)
	case len(a.IPv4Options) != 0 || len(a.IPv6Ext) != 0 || a.IsFragment():
		t.Errorf("the answer carries options %x, extension headers %v or is a fragment (%d, %v)",
			a.IPv4Options, a.IPv6Ext, a.FragOffset, a.MoreFragments)
	}
	if !bytes.Equal(out[12:l3], in.Bytes()[12:l3]) {
		t.Errorf("EtherType and tags %x, want them kept as %x", out[12:l3], in.Bytes()[12:l3])
	}
	var iplen int
	if in.Src.Is4() {
		h := out[l3 : l3+20]
		iplen = int(binary.BigEndian.Uint16(h[2:]))
		if h[0] != 0x45 || binary.BigEndian.Uint16(h[4:]) != 0 {
			t.Errorf("IPv4 header %x: want version 4, IHL 5, id 0", h)
		}
		if packet.Checksum(h) != 0 {
			t.Errorf("IPv4 header checksum %#04x is wrong (header %x)", binary.BigEndian.Uint16(h[10:]), h)
		}
	} else {
		h := out[l3 : l3+40]
		iplen = 40 + int(binary.BigEndian.Uint16(h[4:]))
		if binary.BigEndian.Uint32(h) != 0x60000000 {
			t.Errorf("IPv6 first word %#08x, want version 6, class 0, flow 0", binary.BigEndian.Uint32(h))
		}
	}
	if len(out) != l3+iplen {
		t.Errorf("frame of %d bytes for an IP packet of %d: want no padding or trailing bytes", len(out), iplen)
	}
	return a, l3
}

// checkRST checks a TCP RST answer.
func checkRST(t *testing.T, in *packet.Packet, out []byte, want rstWant) {
	t.Helper()
	a, l3 := answerL3(t, in, out)
	hl := 20
	if in.Src.Is6() {
		hl = 40
	}
	if len(out) != l3+hl+20 {
		t.Fatalf("RST frame of %d bytes, want %d (headers only)", len(out), l3+hl+20)
	}
	seg := out[l3+hl:]
	if in.Src.Is4() {
		if frag := binary.BigEndian.Uint16(out[l3+6:]); frag != 0x4000 || out[l3+1] != 0 || out[l3+9] != 6 {
			t.Errorf("IPv4: flags/offset %#04x tos %#x proto %d, want DF, 0, TCP", frag, out[l3+1], out[l3+9])
		}
	} else if out[l3+6] != 6 {
		t.Errorf("IPv6 next header %d, want TCP", out[l3+6])
	}
	seq, ack := binary.BigEndian.Uint32(seg[4:]), binary.BigEndian.Uint32(seg[8:])
	switch {
	case a.Proto != packet.ProtoTCP || a.SPort != in.DPort || a.DPort != in.SPort:
		t.Errorf("answer %s: want TCP %d > %d", a, in.DPort, in.SPort)
	case seq != want.seq || ack != want.ack || a.TCPFlags != want.flags:
		t.Errorf("RST seq %d ack %d flags %#x, want seq %d ack %d flags %#x", seq, ack, a.TCPFlags, want.seq, want.ack, want.flags)
	case seg[12] != 5<<4 || binary.BigEndian.Uint16(seg[14:]) != 0 || binary.BigEndian.Uint16(seg[18:]) != 0:
		t.Errorf("TCP header %x: want data offset 5, window 0, urgent 0", seg)
	case len(a.Payload) != 0:
		t.Errorf("RST carries %d bytes of data", len(a.Payload))
	}
	if c := packet.L4Checksum(a.Src, a.Dst, packet.ProtoTCP, seg); c != 0 {
		t.Errorf("TCP checksum %#04x is wrong (folds to %#04x)", binary.BigEndian.Uint16(seg[16:]), c)
	}
}

// checkUnreach checks an ICMP / ICMPv6 destination unreachable that must
// quote the offending IP packet (from inFrame) up to 576 / 1280 bytes.
func checkUnreach(t *testing.T, in *packet.Packet, inFrame, out []byte, typ, code uint8) {
	t.Helper()
	a, l3 := answerL3(t, in, out)
	v6 := in.Src.Is6()
	hl, proto, limit := 20, packet.ProtoICMP, 576
	if v6 {
		hl, proto, limit = 40, packet.ProtoICMPv6, 1280
	}
	// the offending IP packet, without Ethernet padding
	orig := inFrame[l3:]
	if v6 {
		orig = orig[:40+int(binary.BigEndian.Uint16(orig[4:]))]
	} else {
		orig = orig[:binary.BigEndian.Uint16(orig[2:])]
	}
	quote := orig[:min(len(orig), limit-hl-8)]
	msg := out[l3+hl:]
	switch {
	case a.Proto != proto || a.ICMPType != typ || a.ICMPCode != code:
		t.Errorf("answer %s: proto %d type %d code %d, want %d %d/%d", a, a.Proto, a.ICMPType, a.ICMPCode, proto, typ, code)
	case len(msg) < 8 || binary.BigEndian.Uint32(msg[4:]) != 0:
		t.Errorf("ICMP header %x: want the unused word zero", msg[:min(len(msg), 8)])
	case !bytes.Equal(a.Payload, quote):
		t.Errorf("quote of %d bytes, want the first %d bytes of the %d-byte packet:\n got %x\nwant %x",
			len(a.Payload), len(quote), len(orig), a.Payload, quote)
	case l3+hl+8+len(quote) > l3+limit:
		t.Errorf("answer of %d IP bytes exceeds %d", hl+8+len(quote), limit)
	}
	if !v6 {
		if out[l3+1] != 0xc0 || out[l3+9] != 1 || binary.BigEndian.Uint16(out[l3+6:]) != 0 {
			t.Errorf("IPv4: tos %#x proto %d flags/offset %#04x, want 0xc0, ICMP, 0", out[l3+1], out[l3+9], binary.BigEndian.Uint16(out[l3+6:]))
		}
		if c := packet.Checksum(msg); c != 0 {
			t.Errorf("ICMP checksum %#04x is wrong (folds to %#04x)", binary.BigEndian.Uint16(msg[2:]), c)
		}
		return
	}
	if out[l3+6] != packet.ProtoICMPv6 {
		t.Errorf("IPv6 next header %d, want ICMPv6", out[l3+6])
	}
	if c := packet.L4Checksum(a.Src, a.Dst, packet.ProtoICMPv6, msg); c != 0 {
		t.Errorf("ICMPv6 checksum %#04x is wrong (folds to %#04x)", binary.BigEndian.Uint16(msg[2:]), c)
	}
}

// TestRejectRateLimit: each source (IPv4 address, IPv6 /64) gets at most
// reject_burst answers at once; the rest are dropped and counted, other
// sources are still answered, and packets that are never answered cost no
// tokens.
func TestRejectRateLimit(t *testing.T) {
	f := newFixture(t)
	f.installText("-A INPUT -p udp -j REJECT\n-A INPUT -p icmp -j REJECT\n")
	// 1 answer a second: no token comes back during the test (it would
	// need the runs below to take a second).
	const burst = 5
	if err := f.dp.SetConfig(datapath.Config{RejectRate: 1, RejectBurst: burst}); err != nil {
		t.Fatal(err)
	}
	udpFrom := func(src string) []byte {
		p := rpkt(false, 17, 53, nil)
		p.Src = netip.MustParseAddr(src)
		if p.Src.Is6() {
			p.Dst = srv6
		}
		return p.Bytes()
	}
	send := func(frame []byte, n int) (answered, limited int) {
		t.Helper()
		for i := 0; i < n; i++ {
			switch r := f.mustRun(frame, "eth0"); {
			case r.XDPAction == datapath.XDPTx && r.Reason == compile.ReasonRuleReject:
				answered++
			case r.XDPAction == datapath.XDPDrop && r.Reason == compile.ReasonRejectRate:
				limited++
			default:
				t.Fatalf("action %d reason %s, want answered or rate-limited", r.XDPAction, r.Reason)
			}
		}
		return
	}
	// ICMP errors from the source first: dropped, costing nothing.
	icmpErr := rpkt(false, 1, 0, func(p *packet.Packet) { p.Src = netip.MustParseAddr("203.0.113.1"); p.ICMPType = 3 })
	for i := 0; i < 3*burst; i++ {
		if r := f.mustRun(icmpErr.Bytes(), "eth0"); r.Reason != compile.ReasonRejectError {
			t.Fatalf("ICMP error: reason %s", r.Reason)
		}
	}
	if a, l := send(udpFrom("203.0.113.1"), burst+1); a != burst || l != 1 {
		t.Errorf("one IPv4 source, %d packets: %d answered, %d rate-limited; want %d and 1", burst+1, a, l, burst)
	}
	if a, l := send(udpFrom("203.0.113.2"), 1); a != 1 || l != 0 {
		t.Errorf("another IPv4 source: %d answered, %d limited; want answered", a, l)
	}
	if a, l := send(udpFrom("203.0.113.1"), 2); a != 0 || l != 2 {
		t.Errorf("the first source again: %d answered, %d limited; want limited", a, l)
	}
	// IPv6: the /64 is the source.
	if a, l := send(udpFrom("2001:db8:aa:1::1"), burst); a != burst || l != 0 {
		t.Errorf("IPv6 source: %d answered, %d limited; want %d answered", a, l, burst)
	}
	if a, l := send(udpFrom("2001:db8:aa:1:ffff::2"), 1); a != 0 || l != 1 {
		t.Errorf("same /64, other address: %d answered, %d limited; want limited", a, l)
	}
	if a, l := send(udpFrom("2001:db8:aa:2::1"), 1); a != 1 || l != 0 {
		t.Errorf("another /64: %d answered, %d limited; want answered", a, l)
	}
	rc, err := f.dp.ReasonCounters()
	if err != nil {
		t.Fatal(err)
	}
	if got := rc[compile.ReasonRejectRate].Packets; got != 1+2+1 {
		t.Errorf("reject-rate-limited counted %d, want 4", got)
	}
	if got := rc[compile.ReasonRuleReject].Packets; got != burst+1+burst+1 {
		t.Errorf("rule-reject (answered) counted %d, want %d", got, 2*burst+2)
	}
	if got := rc[compile.ReasonRejectError].Packets; got != 3*burst {
		t.Errorf("reject-unanswered-error counted %d, want %d", got, 3*burst)
	}
	// The rule counts every packet it decided, answered or not.
	if c, _ := f.dp.RuleCounter(f.ids[0]); c.Packets != burst+1+1+2+burst+1+1 {
		t.Errorf("the udp rule counted %d packets, want %d", c.Packets, 2*burst+6)
	}
}

// TestRejectGlobalRate: all sources together get at most the global
// budget (spoofed sources cannot multiply the per-source one); a source
// over its own budget spends none of the global one.
func TestRejectGlobalRate(t *testing.T) {
	f := newFixture(t)
	f.installText("-A INPUT -p udp -j REJECT\n")
	// Rates of 1 and 2 a second: no token comes back during the test.
	if err := f.dp.SetConfig(datapath.Config{RejectRate: 1, RejectBurst: 1, RejectGlobalRate: 2}); err != nil {
		t.Fatal(err)
	}
	if c, err := f.dp.ConfigInForce(); err != nil || c.RejectGlobalRate != 2 {
		t.Fatalf("config in force %+v (%v): want the global rate 2", c, err)
	}
	from := func(i int) []byte {
		p := rpkt(false, 17, 53, nil)
		p.Src = netip.AddrFrom4([4]byte{203, 0, 113, byte(i)})
		return p.Bytes()
	}
	var got []bool
	for _, src := range []int{1, 1, 1, 1, 2, 3, 4, 5} {
		r := f.mustRun(from(src), "eth0")
		switch {
		case r.XDPAction == datapath.XDPTx && r.Reason == compile.ReasonRuleReject:
			got = append(got, true)
		case r.XDPAction == datapath.XDPDrop && r.Reason == compile.ReasonRejectRate:
			got = append(got, false)
		default:
			t.Fatalf("action %d reason %s, want answered or rate-limited", r.XDPAction, r.Reason)
		}
	}
	// Source 1: one answer (its burst), then limited by its own bucket;
	// source 2 gets the global budget's second answer; 3, 4, 5 none.
	want := []bool{true, false, false, false, true, false, false, false}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("answered %v, want %v", got, want)
	}
	rc, err := f.dp.ReasonCounters()
	if err != nil {
		t.Fatal(err)
	}
	if n := rc[compile.ReasonRejectRate].Packets; n != 6 {
		t.Errorf("reject-rate-limited counted %d, want 6", n)
	}
}

// TestRejectRateDefault: with nothing configured (the zero config), a
// source gets FW_REJECT_BURST_DEFAULT answers at once, then
// FW_REJECT_RATE_DEFAULT a second: of a quick run of 300 packets, at least
// the burst and at most what the elapsed time refills are answered.
func TestRejectRateDefault(t *testing.T) {
	f := newFixture(t)
	f.installText("-A INPUT -p udp -j REJECT\n")
	frame := rpkt(false, 17, 53, nil).Bytes()
	const n = 300
	answered := 0
	start := time.Now()
	err := f.ns.Do(func() error {
		for i := 0; i < n; i++ {
			r, err := f.dp.Record(frame, f.ifaces["eth0"], datapath.NoCTState)
			if err != nil {
				return err
			}
			if r.XDPAction == datapath.XDPTx {
				answered++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	refill := int(elapsed.Seconds()*compile.DefaultRejectRate) + 1
	if answered < compile.DefaultRejectBurst || answered > compile.DefaultRejectBurst+refill {
		t.Errorf("%d of %d packets answered in %v; want %d (the default burst) plus at most %d refilled",
			answered, n, elapsed, compile.DefaultRejectBurst, refill)
	}
}

// TestRejectFastRule: a REJECT that is a root's fast rule (it tests only
// the connection state) answers with its own --reject-with kind, carried
// in fw_root.fast_reject.
func TestRejectFastRule(t *testing.T) {
	f := newFixture(t)
	rs, err := rules.Parse("fast.rules", []byte(
		"-A INPUT -4 -m conntrack --ctstate INVALID -j REJECT --reject-with icmp-admin-prohibited\n"+
			"-A INPUT -6 -m conntrack --ctstate INVALID -j REJECT --reject-with icmp6-adm-prohibited\n"), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tb, _, err := compile.Compile(compile.Input{RuleSet: rs, IDs: []uint32{compile.FirstRuleID, compile.FirstRuleID + 1}})
	if err != nil {
		t.Fatal(err)
	}
	for r, want := range map[int]compile.Reject{0: compile.RejectAdminProhib, 1: compile.Reject6AdmProhib} {
		if root := tb.Roots[r]; root.FastStates != 1<<compile.CTInvalid || root.FastAction != compile.ActReject || root.FastReject != want {
			t.Fatalf("INPUT root %d: fast states %#x action %s reject %s; want the INVALID fast rule REJECT %s",
				r, root.FastStates, root.FastAction, root.FastReject, want)
		}
	}
	f.install(rs)
	for _, c := range []struct {
		v6   bool
		want [2]uint8
	}{{false, [2]uint8{3, 13}}, {true, [2]uint8{1, 1}}} {
		p := rpkt(c.v6, 17, 53, nil)
		in := p.Bytes()
		r, err := f.runAssuming(in, "eth0", int(compile.CTInvalid))
		if err != nil {
			t.Fatal(err)
		}
		if r.XDPAction != datapath.XDPTx || r.Action != compile.ActReject || r.Reason != compile.ReasonRuleReject {
			t.Fatalf("%s (INVALID): action %d %s reason %s, want XDP_TX REJECT rule-reject", p, r.XDPAction, r.Action, r.Reason)
		}
		checkUnreach(t, p, in, r.Frame, c.want[0], c.want[1])
		// Another state: no rule matches, the policy accepts.
		if r, err := f.runAssuming(in, "eth0", int(compile.CTEstablished)); err != nil || r.XDPAction != datapath.XDPPass {
			t.Fatalf("%s (ESTABLISHED): action %d, %v; want XDP_PASS", p, r.XDPAction, err)
		}
	}
}

// egress runs frame through the tc egress program (a packet this host sends).
func (f *fixture) egress(frame []byte) datapath.TraceResult {
	f.t.Helper()
	return f.runHook(rejectHooks[1], frame)
}

// TestRejectOutputRateLimit: in OUTPUT the answers are charged to the
// destination the host tried to reach (IPv4 address, IPv6 /64), in buckets
// apart from INPUT's, which are charged to the packet's source.
func TestRejectOutputRateLimit(t *testing.T) {
	f := newFixture(t)
	f.installText("-A INPUT -p udp -j REJECT\n-A OUTPUT -p udp -j REJECT\n")
	const burst = 2
	if err := f.dp.SetConfig(datapath.Config{RejectRate: 1, RejectBurst: burst}); err != nil {
		t.Fatal(err)
	}
	udp := func(src, dst string) []byte {
		p := rpkt(false, 17, 53, nil)
		p.Src, p.Dst = netip.MustParseAddr(src), netip.MustParseAddr(dst)
		return p.Bytes()
	}
	out := func(src, dst string, n int) (answered, limited int) {
		t.Helper()
		for i := 0; i < n; i++ {
			switch r := f.egress(udp(src, dst)); {
			case r.XDPAction == datapath.TCActRedirect && r.Reason == compile.ReasonRuleReject:
				answered++
			case r.XDPAction == datapath.TCActShot && r.Reason == compile.ReasonRejectRate:
				limited++
			default:
				t.Fatalf("%s > %s: action %d reason %s, want answered or rate-limited", src, dst, r.XDPAction, r.Reason)
			}
		}
		return
	}
	const host, host2, peer = "198.51.100.1", "198.51.100.2", "192.0.2.7"
	if a, l := out(host, peer, burst+1); a != burst || l != 1 {
		t.Errorf("%d datagrams to one destination: %d answered, %d limited; want %d and 1", burst+1, a, l, burst)
	}
	if a, l := out(host, "192.0.2.8", 1); a != 1 || l != 0 {
		t.Errorf("another destination: %d answered, %d limited; want answered", a, l)
	}
	if a, l := out(host2, peer, 1); a != 0 || l != 1 {
		t.Errorf("another local source, same destination: %d answered, %d limited; want limited (the bucket is the destination)", a, l)
	}
	if a, l := out("2001:db8:1::1", "2001:db8:aa:1::1", burst); a != burst || l != 0 {
		t.Errorf("IPv6 destination: %d answered, %d limited; want %d answered", a, l, burst)
	}
	if a, l := out("2001:db8:1::1", "2001:db8:aa:1:ffff::2", 1); a != 0 || l != 1 {
		t.Errorf("same /64, other address: %d answered, %d limited; want limited", a, l)
	}
	// The peer's packets to this host have their own bucket (its address
	// as a source): not spent by this host's answers about it.
	if r := f.mustRun(udp(peer, host), "eth0"); r.XDPAction != datapath.XDPTx || r.Reason != compile.ReasonRuleReject {
		t.Errorf("INPUT from %s after its OUTPUT bucket ran dry: action %d reason %s, want answered", peer, r.XDPAction, r.Reason)
	}
}

// TestRejectOutputAnswerPassesXDP: the XDP program lets the answer of an
// OUTPUT REJECT through once, unfiltered and uncounted, as native mode
// does where it never meets it (generic mode runs it on the redirected
// answer); a copy, or a RST it did not send, meets the INPUT rules.
func TestRejectOutputAnswerPassesXDP(t *testing.T) {
	f := newFixture(t)
	f.installText("-P INPUT DROP\n-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset\n-A OUTPUT -p udp -j REJECT\n")
	// Load both hooks' recording instances first: an answer is recognized
	// within a second of being sent, and a load takes about as long.
	f.mustRun(rpkt(false, 17, 9, nil).Bytes(), "eth0")
	f.egress(rpkt(false, 17, 9, nil).Bytes())
	if _, err := f.dp.CTFlush(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*packet.Packet{
		rpkt(false, 6, 80, func(p *packet.Packet) { p.Payload = nil }),
		rpkt(true, 6, 80, func(p *packet.Packet) { p.Payload = nil }),
		rpkt(false, 17, 53, nil),
		rpkt(true, 17, 53, nil),
	} {
		r := f.egress(p.Bytes())
		if r.XDPAction != datapath.TCActRedirect {
			t.Fatalf("%s in OUTPUT: action %d reason %s, want answered", p, r.XDPAction, r.Reason)
		}
		answer := r.Frame
		before, err := f.dp.ReasonCounters()
		if err != nil {
			t.Fatal(err)
		}
		in := f.mustRun(answer, "eth0")
		if in.XDPAction != datapath.XDPPass || in.RuleID != 0 || in.Chain != uint8(rules.ChainOutput) || in.Reason != compile.ReasonRuleReject {
			t.Errorf("the answer to %s arriving: action %d rule %d chain %d reason %s; want XDP_PASS, no rule, OUTPUT's rule-reject",
				p, in.XDPAction, in.RuleID, in.Chain, in.Reason)
		}
		after, err := f.dp.ReasonCounters()
		if err != nil {
			t.Fatal(err)
		}
		for r := range before { // packets and bytes (Last is a conversion of the kernel's clock: it wobbles)
			if before[r].Packets != after[r].Packets || before[r].Bytes != after[r].Bytes {
				t.Errorf("the answer to %s was counted on its way in: reason %s %v -> %v", p, compile.Reason(r), before[r], after[r])
			}
		}
		if again := f.mustRun(answer, "eth0"); again.XDPAction != datapath.XDPDrop || again.Reason != compile.ReasonPolicyDrop {
			t.Errorf("the answer to %s a second time: action %d reason %s, want the INPUT policy's drop", p, again.XDPAction, again.Reason)
		}
	}
	// A RST this host did not make, from the same peer to the same port.
	rst := rpkt(false, 6, 80, func(p *packet.Packet) {
		p.Src, p.Dst, p.SPort, p.DPort = srv4, cli4, 80, 40000
		p.TCPFlags = packet.TCPRst
		p.Payload = nil
	})
	if r := f.mustRun(rst.Bytes(), "eth0"); r.XDPAction != datapath.XDPDrop || r.Reason != compile.ReasonPolicyDrop {
		t.Errorf("%s: action %d reason %s, want the INPUT policy's drop", rst, r.XDPAction, r.Reason)
	}
}
