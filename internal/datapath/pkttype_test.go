package datapath_test

import (
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestPktType: -m pkttype as iptables' xt_pkttype has it, through the
// data plane and against the reference matcher: at ingress the type comes
// from the destination MAC (broadcast, the group bit: multicast, else to
// this host); a locally sent packet is "unicast" in OUTPUT whatever its
// destination (checked with iptables in a namespace: a broadcast send
// counts in OUTPUT's --pkt-type unicast, in the receiver's INPUT as
// broadcast).
func TestPktType(t *testing.T) {
	f := newFixture(t)
	f.installText(`-A INPUT -m pkttype --pkt-type broadcast -j DROP
-A INPUT -m pkttype ! --pkt-type MULTICAST -j ACCEPT
-A INPUT -m pkttype --pkt-type mcast -j REJECT
-A OUTPUT -m pkttype --pkt-type multicast -j DROP
-A OUTPUT -m pkttype --pkt-type broadcast -j DROP
-A OUTPUT -m pkttype --pkt-type unicast -j REJECT
`)
	macs := map[string][6]byte{
		"unicast":          macB,
		"broadcast":        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"multicast v4":     {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03},
		"multicast v6":     {0x33, 0x33, 0, 0, 0, 1},
		"almost broadcast": {0xff, 0xff, 0xff, 0xff, 0xff, 0xfe},
	}
	wantIn := map[string]int{"unicast": 1, "broadcast": 0, "multicast v4": 2, "multicast v6": 2, "almost broadcast": 2}
	for name, mac := range macs {
		p := v4pkt(17, "10.0.0.1", "10.0.0.255", 1000, 53)
		p.DstMAC = mac
		frame := p.Bytes()
		r := f.mustRun(frame, "eth0")
		ref := compile.RefPacketOf(p, "eth0")
		d := compile.Decide(f.rs, ref)
		if d.Rule != wantIn[name] || r.RuleID != f.ids[d.Rule] {
			t.Errorf("INPUT %s: data plane rule id %d, reference rule %d, want rule %d", name, r.RuleID, d.Rule, wantIn[name])
		}
		var out datapath.TraceResult
		if err := f.ns.Do(func() (err error) { out, err = f.dp.RecordEgress(frame, datapath.NoCTState); return err }); err != nil {
			t.Fatal(err)
		}
		ref.Chain = rules.ChainOutput
		if d := compile.Decide(f.rs, ref); d.Rule != 5 || out.RuleID != f.ids[5] {
			t.Errorf("OUTPUT %s: data plane rule id %d, reference rule %d, want rule 5 (unicast: sent by this host)", name, out.RuleID, d.Rule)
		}
	}
}
