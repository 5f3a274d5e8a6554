package datapath_test

import (
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// TestChainCounters: rules without a verdict of their own (-j CHAIN,
// -g CHAIN, -j RETURN, no -j) count the packets that reach and match
// them, as iptables' counters do, and a rule of a chain jumped to from
// two places counts the packets of both; deciding and LOG rules count as
// before. Expected counts come from the reference matcher's walk of the
// chains.
func TestChainCounters(t *testing.T) {
	f := newFixture(t)
	f.setUnlimitedLogs()
	f.installText(`-N web
-N ssh
-N common
-A INPUT -p tcp
-A INPUT -p tcp --dport 80 -j web
-A INPUT -p tcp --dport 22 -g ssh
-A INPUT -p udp -j common
-A INPUT -p tcp -j common
-A web -s 10.9.0.0/16 -j RETURN
-A web -j ACCEPT
-A ssh -s 1.2.3.4 -j ACCEPT
-A ssh -j common
-A common -j LOG
-A common -p udp --dport 53 -j ACCEPT
-A common -s 1.2.3.5 -j RETURN
-A common -p tcp --dport 25 -j DROP
`)
	names := []string{"eth0"}
	var pkts []*packet.Packet
	for _, src := range []string{"1.2.3.4", "1.2.3.5", "10.9.1.1"} {
		for _, port := range []uint16{22, 25, 53, 80, 443} {
			for _, proto := range []uint8{6, 17} {
				pkts = append(pkts, v4pkt(proto, src, "10.9.9.9", 1000, port))
			}
		}
	}
	want := make([]uint64, len(f.rs.Rules))
	for _, p := range pkts {
		f.mustRun(p.Bytes(), names[0])
		d := compile.Decide(f.rs, compile.RefPacketOf(p, names[0]))
		for _, i := range d.Counts {
			want[i]++
		}
		for _, i := range d.Logs {
			want[i]++
		}
		if d.Rule >= 0 {
			want[d.Rule]++
		}
	}
	got, err := f.dp.RuleCounters(f.ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range f.rs.Rules {
		if got[i].Packets != want[i] {
			t.Errorf("%s: counted %d packets, want %d", r.String(), got[i].Packets, want[i])
		}
	}
	if want[0] != 15 || want[len(want)-4] == 0 { // -A INPUT -p tcp: every TCP packet; common's LOG: some
		t.Errorf("the expected counts are not what the test is about: %v", want)
	}
}

// TestChainLogOncePerPacket: a LOG rule of a chain a packet reaches from
// two places, with another LOG rule between them, logs and counts the
// packet once (iptables: twice; docs/compat.md, Chains), as the
// reference matcher says (Decision.Logs). Found by TestIptablesDifferential
// (seed 4, set forward/23): the reference deduplicated only a LOG rule
// reached twice in a row.
func TestChainLogOncePerPacket(t *testing.T) {
	f := newFixture(t)
	f.setUnlimitedLogs()
	f.installText(`-N c
-N r
-A INPUT -p udp -j r
-A INPUT -j c
-A INPUT -j DROP
-A r -j c
-A r -j LOG --log-prefix r
-A c -j LOG --log-prefix c
`)
	p := v4pkt(17, "10.9.1.1", "10.9.9.9", 1000, 53)
	f.mustRun(p.Bytes(), "eth0")
	d := compile.Decide(f.rs, compile.RefPacketOf(p, "eth0"))
	want := make([]uint64, len(f.rs.Rules))
	for _, i := range append(append(d.Counts, d.Logs...), d.Rule) {
		want[i]++
	}
	got, err := f.dp.RuleCounters(f.ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range f.rs.Rules {
		if got[i].Packets != want[i] {
			t.Errorf("%s: counted %d packets, want %d", r.String(), got[i].Packets, want[i])
		}
	}
	if want[5] != 1 || want[4] != 1 { // c's LOG once, r's once
		t.Errorf("the expected counts are not what the test is about: %v", want)
	}
}
