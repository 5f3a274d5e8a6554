package datapath_test

import (
	"fmt"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// hashLimitRules: the two rules of the real-world files (hardened-host.v4's
// ssh budget per source, tor-relay.v4's --hashlimit-above per source), a
// rule before them that decides some packets first (they take no token),
// a table keyed by source /24 and destination port, and one with no mode
// (one bucket for all). Rates of a few an hour or a minute: no token
// comes back while the test runs.
const hashLimitRules = `-P INPUT DROP
-A INPUT -s 10.1.0.0/16 -j ACCEPT
-A INPUT -p tcp --dport 22 -m hashlimit --hashlimit-upto 3/min --hashlimit-burst 3 --hashlimit-mode srcip --hashlimit-name ssh -j ACCEPT
-A INPUT -p tcp --dport 9001 -m hashlimit --hashlimit-above 2/hour --hashlimit-burst 4 --hashlimit-mode srcip --hashlimit-name tor-or --hashlimit-htable-expire 60000 -j DROP
-A INPUT -p udp -m hashlimit --hashlimit-upto 2/hour --hashlimit-burst 2 --hashlimit-mode srcip,dstport --hashlimit-srcmask 24 --hashlimit-name net -j ACCEPT
-A INPUT -p icmp -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-name all -j ACCEPT
-A INPUT -p tcp -j ACCEPT
`

// TestHashLimit: -m hashlimit through the data plane, packet by packet,
// each decision the reference matcher's with the same buckets (its clock
// standing; the data plane's moves by milliseconds, far from a token's
// period): --hashlimit-upto lets the burst of each source through, then
// the next rule decides; --hashlimit-above lets the burst on and drops
// the rest; what an earlier rule decides takes no token; masked sources
// and destination ports key their own buckets; once a bucket is idle past
// --hashlimit-htable-expire (moved back in the map: timing-free) it is
// full again.
func TestHashLimit(t *testing.T) {
	f := newFixture(t)
	f.installText(hashLimitRules)
	st := &compile.State{Now: 1e12}
	var seq []int
	send := func(p *packet.Packet, n int) {
		t.Helper()
		seq = append(seq, f.sendDecided(p, n, st)...)
	}
	tcp := func(src string, port uint16) *packet.Packet {
		return v4pkt(packet.ProtoTCP, src, "10.0.0.1", 40000, port)
	}
	udp := func(src string, port uint16) *packet.Packet {
		return v4pkt(packet.ProtoUDP, src, "10.0.0.1", 40000, port)
	}
	check := func(what, want string) {
		t.Helper()
		if fmt.Sprint(seq) != want {
			t.Errorf("%s: rules %v, want %v", what, seq, want)
		}
		seq = nil
	}
	send(tcp("10.1.2.3", 22), 4)
	check("an address an earlier rule accepts", "[0 0 0 0]")
	send(tcp("10.2.0.1", 22), 5)
	send(tcp("10.2.0.2", 22), 4)
	check("ssh: three a source, then the next rule", "[1 1 1 5 5 1 1 1 5]")
	send(tcp("10.2.0.1", 9001), 6)
	send(tcp("10.2.0.3", 9001), 5)
	check("--hashlimit-above: the burst goes on, the rest is dropped", "[5 5 5 5 2 2 5 5 5 5 2]")
	send(udp("10.2.0.1", 53), 3)
	send(udp("10.2.0.200", 53), 1)
	send(udp("10.2.1.1", 53), 1)
	send(udp("10.2.0.9", 54), 2)
	check("srcip/24,dstport", "[3 3 -1 -1 3 3 3]")
	send(v4pkt(packet.ProtoICMP, "10.2.0.1", "10.0.0.1", 0, 0), 1)
	send(v4pkt(packet.ProtoICMP, "10.3.0.1", "10.0.0.2", 0, 0), 1)
	check("no mode: one bucket", "[4 -1]")
	// 61 s later the tor-or buckets (expire 60 s) are forgotten: full
	// again; ssh's (expire 60 s by its rate's unit, 3/min: 20 s a token)
	// too. The udp buckets (2/hour, expire an hour) still are empty.
	n, err := f.dp.AgeHashLimit(61e9)
	if err != nil || n != 8 {
		t.Fatalf("aging the buckets: %d buckets (%v), want 8", n, err)
	}
	for _, b := range st.Buckets {
		b.Tat -= min(b.Tat, 61e9)
		b.Seen -= min(b.Seen, 61e9)
	}
	send(tcp("10.2.0.1", 9001), 5)
	send(tcp("10.2.0.1", 22), 4)
	send(udp("10.2.0.1", 53), 1)
	check("a minute later", "[5 5 5 5 2 1 1 1 5 -1]")
	for i, want := range []uint64{4, 9, 4, 5, 1, 16} {
		if c, err := f.dp.RuleCounter(f.ids[i]); err != nil || c.Packets != want {
			t.Errorf("rule %d counted %d packets (%v), want %d", i, c.Packets, err, want)
		}
	}
}
