package datapath_test

import (
	"fmt"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// recentRules: the ssh brute-force pair (the --update rule before the
// --set rule, each with a deciding target), a rule before them in another
// tree that decides some packets first (those are never recorded), a
// --rcheck of the same list on another port, a --remove.
const recentRules = `-P INPUT DROP
-A INPUT -s 10.1.0.0/16 -p tcp --dport 22 -j ACCEPT
-A INPUT -p tcp --dport 22 --syn -m recent --update --seconds 60 --hitcount 4 --name SSH --rsource -j DROP
-A INPUT -p tcp --dport 22 --syn -m recent --set --name SSH --rsource -j ACCEPT
-A INPUT -p tcp --dport 80 -m recent --rcheck --name SSH -j REJECT --reject-with tcp-reset
-A INPUT -p udp --dport 53 -m recent --remove --name SSH -j ACCEPT
-A INPUT -p tcp -j ACCEPT
`

// TestRecentSSH: -m recent through the data plane, packet by packet, each
// decision the reference matcher's with the same lists (its clock
// standing; the data plane's moves by milliseconds, far inside --seconds
// 60): four new connections a minute from an address are accepted and
// recorded, the fifth and later dropped (and recorded: --update); what an
// earlier rule decides is not recorded; another rule reads the same list;
// --remove takes an address out; once its time stamps are older than 60 s
// (moved back in the map: timing-free), the address is accepted again.
func TestRecentSSH(t *testing.T) {
	f := newFixture(t)
	f.installText(recentRules)
	st := &compile.State{Now: 1e12}
	var seq []int
	send := func(p *packet.Packet, n int) {
		t.Helper()
		seq = append(seq, f.sendDecided(p, n, st)...)
	}
	syn := func(src string, port uint16) *packet.Packet {
		return v4pkt(packet.ProtoTCP, src, "10.0.0.1", 40000, port)
	}
	check := func(what, want string) {
		t.Helper()
		if fmt.Sprint(seq) != want {
			t.Errorf("%s: rules %v, want %v", what, seq, want)
		}
		seq = nil
	}
	send(syn("10.1.2.3", 22), 5)
	send(syn("10.1.2.3", 80), 1)
	check("an address an earlier rule accepts", "[0 0 0 0 0 5]")
	send(syn("10.2.0.1", 22), 6)
	check("six new ssh connections", "[2 2 2 2 1 1]")
	send(syn("10.2.0.1", 80), 1)
	send(syn("10.2.0.2", 22), 1)
	send(syn("10.2.0.2", 80), 1)
	check("the list read by another rule; another address", "[3 2 3]")
	send(v4pkt(packet.ProtoUDP, "10.2.0.2", "10.0.0.1", 5353, 53), 2)
	send(syn("10.2.0.2", 80), 1)
	check("--remove", "[4 -1 5]")
	if n, err := f.dp.AgeRecent(61e9); err != nil || n != 1 {
		t.Fatalf("aging the lists: %d addresses (%v), want 1", n, err)
	}
	for _, e := range st.Lists {
		for i := range e.Stamps {
			e.Stamps[i] -= 61e9
		}
	}
	send(syn("10.2.0.1", 22), 5)
	check("a minute later", "[2 2 2 2 1]") // the old stamps no longer count
	for i, want := range []uint64{5, 3, 9, 2, 1, 2} {
		if c, err := f.dp.RuleCounter(f.ids[i]); err != nil || c.Packets != want {
			t.Errorf("rule %d counted %d packets (%v), want %d", i, c.Packets, err, want)
		}
	}
}

// recentTTLRules: a --set rule, then --rcheck and --update of the same
// list with --rttl, each followed by a rule that takes what they leave.
const recentTTLRules = `-P INPUT DROP
-A INPUT -p udp --dport 1 -m recent --set --name T -j ACCEPT
-A INPUT -p udp --dport 2 -m recent --rcheck --rttl --name T -j ACCEPT
-A INPUT -p udp --dport 3 -m recent --update --rttl --name T -j ACCEPT
-A INPUT -p udp --dport 2 -m recent --rcheck --name T -j ACCEPT
-A INPUT -p udp -j REJECT
`

// TestRecentTTL: --rttl finds an address only for a packet of the TTL
// the list holds for it, which is the TTL of the packet that set or
// updated it last (xt_recent's e->ttl: a --set of a listed address and a
// matching --update change it); a rule without --rttl finds it whatever
// the TTL. Each decision is also the reference matcher's.
func TestRecentTTL(t *testing.T) {
	f := newFixture(t)
	f.installText(recentTTLRules)
	st := &compile.State{Now: 1e12}
	var seq []int
	send := func(port uint16, ttl uint8) {
		t.Helper()
		p := v4pkt(packet.ProtoUDP, "10.2.0.1", "10.0.0.1", 4000, port)
		p.TTL = ttl
		seq = append(seq, f.sendDecided(p, 1, st)...)
	}
	send(2, 64) // not listed: the --rcheck rules fail
	send(1, 64) // listed with TTL 64
	send(2, 64)
	send(2, 63) // another TTL: only the rule without --rttl finds it
	send(3, 63)
	send(1, 50) // a --set of a listed address: its TTL is now 50
	send(2, 64)
	send(2, 50)
	send(3, 50) // a matching --update keeps TTL 50
	send(3, 50)
	if want := "[4 0 1 3 4 0 3 1 2 2]"; fmt.Sprint(seq) != want {
		t.Errorf("rules %v, want %v", seq, want)
	}
}
