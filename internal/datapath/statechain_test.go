package datapath_test

import (
	"fmt"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// TestStateOnChains: -m limit and -m recent on rules that decide nothing
// themselves, through the data plane, packet by packet, each decision the
// reference's (chains walked with a stack, buckets and lists of its own),
// then every rule's counter. OpenWrt fw3's syn_flood (a -m limit RETURN,
// then DROP): the SYNs within the burst go back to INPUT, the others are
// dropped, other packets take no token. A ufw-like host: ufw's ssh limit
// pair (a -m recent --set counting rule, then --update jumping to a
// REJECT chain) and a -m limit jump to a chain whose -m limit RETURN lets
// the first packet back (rates of one an hour: no token comes back while
// the test runs).
func TestStateOnChains(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		send        []*packet.Packet
		seq         string
		counts      []uint64
	}{{
		name: "syn_flood",
		rules: `-P INPUT DROP
-N syn_flood
-A INPUT -p tcp --syn -j syn_flood
-A INPUT -p tcp -j ACCEPT
-A syn_flood -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -m limit --limit 1/hour --limit-burst 3 -j RETURN
-A syn_flood -j DROP
`,
		send: append(repeat(tcpFlags(v4pkt(packet.ProtoTCP, "10.2.0.1", "10.0.0.1", 40000, 22), 0x02), 5),
			repeat(tcpFlags(v4pkt(packet.ProtoTCP, "10.2.0.1", "10.0.0.1", 40000, 22), 0x10), 2)...),
		seq:    "[1 1 1 3 3 1 1]",
		counts: []uint64{5, 5, 3, 2},
	}, {
		name: "ufw-like",
		rules: `-P INPUT DROP
-N logging-deny
-N user-input
-N user-limit
-A INPUT -p udp -m limit --limit 1/hour --limit-burst 2 -j logging-deny
-A INPUT -j user-input
-A logging-deny -m limit --limit 1/hour --limit-burst 1 -j RETURN
-A logging-deny -j DROP
-A user-input -p tcp --dport 22 -m recent --set --name DEFAULT --rsource
-A user-input -p tcp --dport 22 -m recent --update --seconds 30 --hitcount 3 --name DEFAULT --rsource -j user-limit
-A user-input -p tcp --dport 22 -j ACCEPT
-A user-input -p udp -j ACCEPT
-A user-limit -j REJECT
`,
		send: append(repeat(v4pkt(packet.ProtoTCP, "10.2.0.1", "10.0.0.1", 40000, 22), 4),
			repeat(v4pkt(packet.ProtoUDP, "10.2.0.1", "10.0.0.1", 5353, 53), 4)...),
		seq:    "[6 6 8 8 7 3 7 7]",
		counts: []uint64{2, 7, 1, 1, 4, 2, 2, 3, 2},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.installText(tc.rules)
			st := &compile.State{Now: 1e12}
			var seq []int
			for _, p := range tc.send {
				seq = append(seq, f.sendDecided(p, 1, st)...)
			}
			if fmt.Sprint(seq) != tc.seq {
				t.Errorf("rules %v, want %v", seq, tc.seq)
			}
			for i, want := range tc.counts {
				if c, err := f.dp.RuleCounter(f.ids[i]); err != nil || c.Packets != want {
					t.Errorf("rule %d (%s) counted %d packets (%v), want %d", i, f.rs.Rules[i].String(), c.Packets, err, want)
				}
			}
		})
	}
}

func repeat(p *packet.Packet, n int) []*packet.Packet {
	out := make([]*packet.Packet, n)
	for i := range out {
		out[i] = p
	}
	return out
}

func tcpFlags(p *packet.Packet, flags uint8) *packet.Packet {
	p.TCPFlags = flags
	return p
}
