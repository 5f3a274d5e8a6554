package datapath_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// fragRules: a DNS server behind a DROP policy, as in the issue.
const fragRules = `
-P INPUT DROP
-P OUTPUT DROP
-A INPUT -p udp --dport 53 -j ACCEPT
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -p udp --dport 69 -j REJECT
-A INPUT -f -j ACCEPT
-A OUTPUT -p udp --dport 53 -j ACCEPT
`

// fragments cuts the datagram p into fragments of at most size bytes of
// its fragmentable part (a multiple of 8), as a sender's stack does:
// the first carries the L4 header, the others payload bytes only.
func fragments(t *testing.T, p *packet.Packet, size int) []*packet.Packet {
	t.Helper()
	whole := *p
	whole.IPv6Ext = nil
	whole.VLANs = nil
	whole.IPv4Options = nil
	frame := whole.Bytes()
	ip := 20
	if p.Src.Is6() {
		ip = 40
	}
	seg := frame[14+ip:] // L4 header and payload
	var out []*packet.Packet
	for off := 0; off < len(seg); off += size {
		end := min(off+size, len(seg))
		q := *p
		q.MoreFragments = end < len(seg)
		q.FragOffset = uint16(off / 8)
		if off == 0 {
			q.Payload = seg[l4Len(p.Proto):end]
		} else {
			q.Payload = seg[off:end]
		}
		out = append(out, &q)
	}
	if len(out) < 2 {
		t.Fatalf("%s: one fragment of %d bytes; want several", p, len(seg))
	}
	return out
}

func l4Len(proto uint8) int {
	switch proto {
	case packet.ProtoTCP:
		return 20
	case packet.ProtoUDP, packet.ProtoICMP, packet.ProtoICMPv6:
		return 8
	}
	return 0
}

func dnsAnswer(src, dst string, dport uint16, id uint32) *packet.Packet {
	p := v4pkt(packet.ProtoUDP, src, dst, 40000, dport)
	p.Payload = make([]byte, 3000)
	for i := range p.Payload {
		p.Payload[i] = byte(i)
	}
	p.FragID = id
	return p
}

// fragStep is one frame of a sequence and what it must get.
type fragStep struct {
	pkt    *packet.Packet
	rule   int // 1-based rule of fragRules; 0: the policy; -1: none (rule id 0)
	action uint32
	reason compile.Reason
}

// TestFragmentSequences: crafted fragment sequences through the XDP
// program (BPF_PROG_TEST_RUN): every fragment of a datagram gets its first
// fragment's verdict; what comes without one, or overlaps it, is dropped.
func TestFragmentSequences(t *testing.T) {
	f := newFixture(t)
	f.installText(fragRules)
	ruleID := func(n int, p *packet.Packet) uint32 {
		switch {
		case n < 0:
			return 0
		case n == 0:
			return compile.PolicyID(0, p.Src.Is6())
		}
		return f.ids[n-1]
	}
	accept := func(p *packet.Packet, rule int) fragStep {
		return fragStep{p, rule, datapath.XDPPass, compile.ReasonRuleAccept}
	}
	drop := func(p *packet.Packet, rule int, r compile.Reason) fragStep {
		return fragStep{p, rule, datapath.XDPDrop, r}
	}
	v6 := func(p *packet.Packet) *packet.Packet {
		p.Src, p.Dst = netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("2001:db8::1")
		return p
	}

	var id uint32
	next := func(dport uint16) []*packet.Packet {
		id++
		return fragments(t, dnsAnswer("192.0.2.53", "10.9.9.9", dport, id), 1480)
	}
	next6 := func(dport uint16) []*packet.Packet {
		id++
		return fragments(t, v6(dnsAnswer("192.0.2.53", "10.9.9.9", dport, id)), 1448)
	}
	cases := []struct {
		name  string
		steps func() []fragStep
	}{
		{"in order: the datagram's port decides every fragment", func() []fragStep {
			fr := next(53)
			return []fragStep{accept(fr[0], 1), accept(fr[1], 1), accept(fr[2], 1)}
		}},
		{"in order, a port the policy drops", func() []fragStep {
			fr := next(54)
			return []fragStep{drop(fr[0], 0, compile.ReasonPolicyDrop), drop(fr[1], 0, compile.ReasonPolicyDrop),
				drop(fr[2], 0, compile.ReasonPolicyDrop)}
		}},
		{"REJECT: the first fragment answered, the rest dropped", func() []fragStep {
			fr := next(69)
			return []fragStep{{fr[0], 3, datapath.XDPTx, compile.ReasonRuleReject},
				drop(fr[1], 3, compile.ReasonRejectFrag), drop(fr[2], 3, compile.ReasonRejectFrag)}
		}},
		{"reversed: later fragments before the first are dropped, not given -f's ACCEPT", func() []fragStep {
			fr := next(53)
			return []fragStep{drop(fr[2], -1, compile.ReasonFragUnknown), drop(fr[1], -1, compile.ReasonFragUnknown),
				accept(fr[0], 1)}
		}},
		{"first fragment lost", func() []fragStep {
			fr := next(53)
			return []fragStep{drop(fr[1], -1, compile.ReasonFragUnknown), drop(fr[2], -1, compile.ReasonFragUnknown)}
		}},
		{"out of order after the first", func() []fragStep {
			fr := next(53)
			return []fragStep{accept(fr[0], 1), accept(fr[2], 1), accept(fr[1], 1)}
		}},
		{"another datagram (identification) is not this one", func() []fragStep {
			a, b := next(53), next(54)
			return []fragStep{accept(a[0], 1), drop(b[0], 0, compile.ReasonPolicyDrop), accept(a[1], 1),
				drop(b[1], 0, compile.ReasonPolicyDrop)}
		}},
		{"overlap: a later fragment inside the first drops the rest of the datagram", func() []fragStep {
			fr := next(53)
			over := *fr[1]
			over.FragOffset = 1 // bytes 8..: inside the first fragment
			return []fragStep{accept(fr[0], 1), drop(&over, -1, compile.ReasonFragOverlap),
				drop(fr[1], -1, compile.ReasonFragOverlap), drop(fr[2], -1, compile.ReasonFragOverlap)}
		}},
		{"evil offset: TCP at offset 1 (RFC 1858) overlaps the TCP header", func() []fragStep {
			id++
			p := v4pkt(packet.ProtoTCP, "192.0.2.9", "10.9.9.9", 40000, 22)
			p.Payload, p.FragID = make([]byte, 100), id
			first, evil := *p, *p
			first.MoreFragments = true
			evil.FragOffset, evil.MoreFragments = 1, false
			return []fragStep{accept(&first, 2), drop(&evil, -1, compile.ReasonFragOverlap)}
		}},
		{"a second first fragment rewriting the port is decided on its own", func() []fragStep {
			fr := next(53)
			second := *fr[0]
			second.DPort = 54
			return []fragStep{accept(fr[0], 1), drop(&second, 0, compile.ReasonPolicyDrop),
				drop(fr[1], 0, compile.ReasonPolicyDrop)}
		}},
		{"IPv6 in order", func() []fragStep {
			fr := next6(53)
			return []fragStep{accept(fr[0], 1), accept(fr[1], 1), accept(fr[2], 1)}
		}},
		{"IPv6 later fragment naming an extension header: its datagram's", func() []fragStep {
			fr := next6(53)
			dst := *fr[1]
			dst.Proto = packet.ProtoDestOpts // the fragment header's next header
			return []fragStep{accept(fr[0], 1), accept(&dst, 1)}
		}},
		{"IPv6 later fragment naming AH, no first fragment", func() []fragStep {
			fr := next6(53)
			ah := *fr[1]
			ah.Proto = packet.ProtoAH
			return []fragStep{drop(&ah, -1, compile.ReasonFragUnknown)}
		}},
		{"IPv6 atomic fragment: a whole packet", func() []fragStep {
			p := v6(v4pkt(packet.ProtoUDP, "1.1.1.1", "1.1.1.1", 1, 53))
			p.IPv6Ext = []packet.ExtHdr{{Type: packet.ProtoFragment}}
			q := v6(v4pkt(packet.ProtoUDP, "1.1.1.1", "1.1.1.1", 1, 54))
			q.IPv6Ext = []packet.ExtHdr{{Type: packet.ProtoFragment}}
			return []fragStep{accept(p, 1), drop(q, 0, compile.ReasonPolicyDrop)}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i, s := range c.steps() {
				got := f.mustRun(s.pkt.Bytes(), "eth0")
				if got.RuleID != ruleID(s.rule, s.pkt) || got.XDPAction != s.action || got.Reason != s.reason {
					t.Fatalf("frame %d (%s): rule id %d, action %d, reason %s; want rule id %d, action %d, reason %s",
						i, s.pkt, got.RuleID, got.XDPAction, got.Reason, ruleID(s.rule, s.pkt), s.action, s.reason)
				}
			}
		})
	}
}

// TestFragmentCounters: the deciding rule counts a datagram once, with
// every fragment's bytes (iptables counts the reassembled datagram once);
// the conntrack counters count what the table did.
func TestFragmentCounters(t *testing.T) {
	f := newFixture(t)
	f.installText(fragRules)
	before := f.ctCounters()
	fr := fragments(t, dnsAnswer("192.0.2.53", "10.9.9.9", 53, 7), 1480)
	var bytes uint64
	for _, p := range fr {
		b := p.Bytes()
		bytes += uint64(len(b))
		f.mustRun(b, "eth0")
	}
	c := f.ruleCounter(f.ids[0])
	if c.Packets != 1 || c.Bytes != bytes {
		t.Errorf("rule 1 counted %d packets, %d bytes; want 1 datagram of %d bytes", c.Packets, c.Bytes, bytes)
	}
	// a lost first fragment; an overlap; an expired datagram
	lost := fragments(t, dnsAnswer("192.0.2.53", "10.9.9.9", 53, 8), 1480)
	f.mustRun(lost[1].Bytes(), "eth0")
	over := fragments(t, dnsAnswer("192.0.2.53", "10.9.9.9", 53, 9), 1480)
	f.mustRun(over[0].Bytes(), "eth0")
	bad := *over[1]
	bad.FragOffset = 2
	f.mustRun(bad.Bytes(), "eth0")
	old := fragments(t, dnsAnswer("192.0.2.53", "10.9.9.9", 53, 10), 1480)
	f.mustRun(old[0].Bytes(), "eth0")
	if err := f.dp.AgeFrags(31 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := f.mustRun(old[1].Bytes(), "eth0"); got.Reason != compile.ReasonFragUnknown {
		t.Errorf("a fragment 31 s after its first: %s; want fragment-unknown", got.Reason)
	}
	after := f.ctCounters()
	for name, want := range map[string]uint64{"frag_tracked": 3, "frag_unknown": 2, "frag_expired": 1, "frag_overlap": 1} {
		if got := after[name] - before[name]; got != want {
			t.Errorf("%s: %d; want %d (all: %v)", name, got, want, after)
		}
	}
}

// TestFragmentsEgress: the tc program (OUTPUT) sees the fragments the
// stack made after the filter: the same table decides them.
func TestFragmentsEgress(t *testing.T) {
	f := newFixture(t)
	f.installText(fragRules)
	for _, c := range []struct {
		dport uint16
		want  uint32
	}{{53, datapath.TCActOK}, {54, datapath.TCActShot}} {
		fr := fragments(t, dnsAnswer("10.9.9.9", "192.0.2.53", c.dport, uint32(c.dport)), 1480)
		for i, p := range fr {
			var got datapath.TraceResult
			err := f.ns.Do(func() error {
				var err error
				got, err = f.dp.RecordEgress(p.Bytes(), datapath.NoCTState)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if got.XDPAction != c.want {
				t.Errorf("OUTPUT to port %d, fragment %d: %d (%s); want %d", c.dport, i, got.XDPAction, got.Reason, c.want)
			}
		}
	}
	// an ingress datagram's verdict is not an egress one's (the chain is in the key)
	fr := fragments(t, dnsAnswer("10.9.9.9", "192.0.2.53", 53, 99), 1480)
	f.mustRun(fr[0].Bytes(), "eth0")
	var got datapath.TraceResult
	if err := f.ns.Do(func() error {
		var err error
		got, err = f.dp.RecordEgress(fr[1].Bytes(), datapath.NoCTState)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got.Reason != compile.ReasonFragUnknown {
		t.Errorf("OUTPUT fragment of a datagram seen at ingress: %s; want fragment-unknown", got.Reason)
	}
}

// ruleCounter reads rule id's counter.
func (f *fixture) ruleCounter(id uint32) datapath.Counter {
	f.t.Helper()
	c, err := f.dp.RuleCounter(id)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// ctCounters reads the conntrack event counters by name.
func (f *fixture) ctCounters() map[string]uint64 {
	f.t.Helper()
	st, err := f.dp.CTStats()
	if err != nil {
		f.t.Fatal(err)
	}
	return st.Counters
}
