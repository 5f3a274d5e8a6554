package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/nat"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
	"golang.org/x/sys/unix"
)

// TestNATDecisionsLikeKernel is the differential test of xdpfw's NAT
// semantics against the kernel's: random nat tables (rules.RandomNAT:
// user chains, RETURN, ACCEPT, the filter table's matches) are loaded into
// a router's kernel, and the first packets of random TCP, UDP and ping
// connections from the LAN cross it. For each, xdpfw's reference
// (compile.DecideNAT at PREROUTING, then POSTROUTING on the egress device,
// and nat.Translate) predicts the tuple the kernel sends on, which must be
// what arrives. Translations are drawn where the kernel's choice is
// deterministic (one address, one port or none, the source port kept);
// a packet whose prediction is not (REDIRECT, a DNAT to no sink) is not
// sent. Seeded (XDPFW_NATDEC_SEED, default 22). A DNAT may send a packet back into the LAN it came from (hairpin),
// where POSTROUTING's rules for ra (a MASQUERADE) apply. Rules test
// --ctstate SNAT and DNAT too: a first packet is neither in PREROUTING,
// and DNAT in POSTROUTING when PREROUTING changed its tuple (the kernel's
// IPS_DST_NAT, set by nf_nat_setup_info).
func TestNATDecisionsLikeKernel(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iptables-legacy-restore"); err != nil {
		t.Skip("iptables-legacy is not installed")
	}
	defer func(h bool) { rules.RandomHeaderMatches = h }(rules.RandomHeaderMatches)
	rules.RandomHeaderMatches = false
	x := newRouter(t) // a: the LAN (ra), b (rb) and c (rc): two WAN sides
	capA, capB, capC := newCapture(t, x.a, "xa"), newCapture(t, x.b, "xb"), newCapture(t, x.c, "xc")
	// the client's own frames would fill capA's buffer (it is read only
	// for the hairpin packets) and crowd out what comes back
	if err := unix.SetsockoptInt(capA.fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		t.Fatal(err)
	}
	cli := netip.MustParseAddr(x.la.cli4)
	lanHost := netip.MustParseAddr("10.200.1.3") // another host of the LAN (an address of a's too)
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := x.a.Exec(ctx, "ip", "addr", "add", lanHost.String()+"/24", "dev", "xa"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	sinks := map[netip.Addr]struct {
		iface  string
		egress netip.Addr
		cap    *capture
	}{
		netip.MustParseAddr(x.lb.cli4): {"rb", netip.MustParseAddr(x.lb.srv4), capB},
		netip.MustParseAddr(x.lc.cli4): {"rc", netip.MustParseAddr(x.lc.srv4), capC},
		lanHost:                        {"ra", netip.MustParseAddr(x.la.srv4), capA}, // hairpin: DNAT back into the LAN
	}
	dsts := []netip.Addr{netip.MustParseAddr(x.lb.cli4), netip.MustParseAddr(x.lc.cli4), netip.MustParseAddr(x.la.srv4)}
	ifaces := []string{"ra", "rb", "rc", "r+"}
	ra, xa := macOf(t, x.r, "ra"), macOf(t, x.a, "xa")
	seed := envUint(t, "XDPFW_NATDEC_SEED", 22) // another seed: XDPFW_NATDEC_SEED=N
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 11))
	sport := uint16(20000)
	sent, translated, hairpins, dnats, ctnat := 0, 0, 0, 0, 0
	var ctnatCounted uint64 // packets counted by filter rules on --ctstate DNAT
	for set := range 25 {
		tbl := rules.RandomNAT(r, 1+r.IntN(12), rules.RandomKnobs{IptablesOnly: true, NoCTOptions: true})
		for i := range tbl.Rules {
			natForSinks(r, &tbl.Rules[i], []netip.Addr{dsts[0], dsts[1], lanHost}, ifaces)
			if c := tbl.Rules[i].Match.CTState; c != nil && c.Mask&(rules.CTSNAT|rules.CTDNAT) != 0 {
				ctnat++
			}
		}
		var file strings.Builder
		file.WriteString("*nat\n")
		for _, c := range tbl.Chains {
			file.WriteString(":" + c.Name + " - [0:0]\n")
		}
		for _, x := range tbl.Rules {
			file.WriteString("-A " + x.ChainName() + " " + x.Spec() + "\n")
		}
		file.WriteString("COMMIT\n")
		filter, filterText := ctNATFilter(t, r, cli)
		file.WriteString(filterText)
		counts := make([]uint64, len(filter.Rules))
		ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", x.r.Name, "iptables-legacy-restore")
		cmd.Stdin = strings.NewReader(file.String())
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("set %d: iptables-restore: %v: %s\n%s", set, err, out, file.String())
		}
		for k := range 16 {
			proto := []uint8{packet.ProtoTCP, packet.ProtoUDP, packet.ProtoICMP}[r.IntN(3)]
			sport++
			p := compile.RefPacket{InIface: "ra", Src: cli, Dst: dsts[r.IntN(len(dsts))], Proto: proto, L4: true,
				SPort: sport, DPort: []uint16{22, 53, 80, 443, 8080, uint16(1 + r.IntN(65535))}[r.IntN(6)],
				SrcMAC: xa, DstMAC: ra, CTState: compile.CTNew, TTL: 64}
			switch proto {
			case packet.ProtoTCP:
				p.TCPFlags = packet.TCPSyn
			case packet.ProtoICMP:
				p.ICMPType, p.DPort = 8, sport // the id: both "ports"
			}
			orig := nat.Tuple{Src: p.Src, Dst: p.Dst, SPort: p.SPort, DPort: p.DPort, Proto: proto}
			// PREROUTING, then the route, then POSTROUTING on its device
			cur, ok := orig, true
			if d := compile.DecideNAT(tbl, rules.ChainPrerouting, p); d.Target != nil {
				if d.Target.Kind != rules.NATDNAT {
					continue // REDIRECT: delivered here
				}
				cur, ok = nat.Translate(d.Target, cur, nat.Addrs{})
			}
			sink, toSink := sinks[cur.Dst]
			if !ok || !toSink {
				continue
			}
			q := p
			q.Dst, q.DPort, q.InIface, q.OutIface = cur.Dst, cur.DPort, "", sink.iface
			if cur != orig { // PREROUTING changed the tuple: the connection is DNAT in POSTROUTING (IPS_DST_NAT)
				q.CTInfo |= compile.CTIDstNAT
				dnats++
			}
			if d := compile.DecideNAT(tbl, rules.ChainPostrouting, q); d.Target != nil {
				if cur, ok = nat.Translate(d.Target, cur, nat.Addrs{Egress: sink.egress}); !ok {
					continue
				}
			}
			tag := fmt.Sprintf("set %d packet %d", set, k)
			f := (&packet.Packet{SrcMAC: xa, DstMAC: ra, Src: p.Src, Dst: p.Dst, Proto: proto, SPort: p.SPort, DPort: p.DPort,
				TCPFlags: p.TCPFlags, ICMPType: p.ICMPType, TTL: 64, Payload: []byte(tag)}).Bytes()
			if proto == packet.ProtoICMP {
				setEchoID(f, sport)
			}
			sendFrames(t, x.la, f)
			got := sink.cap.next(func(d *packet.Packet) bool { return string(d.Payload) == tag })
			if got == nil {
				t.Fatalf("%s (%+v): predicted to leave by %s as %+v, but nothing arrived\n%s", tag, orig, sink.iface, cur, file.String())
			}
			d, _ := packet.Decode(got)
			seen := nat.Tuple{Src: d.Src, Dst: d.Dst, SPort: d.SPort, DPort: d.DPort, Proto: d.Proto}
			if proto == packet.ProtoICMP {
				id := binary.BigEndian.Uint16(got[14+20+4:])
				seen.SPort, seen.DPort = id, id
			}
			if seen != cur {
				t.Fatalf("%s: %+v left the kernel as %+v; xdpfw's reference says %+v\n%s", tag, orig, seen, cur, file.String())
			}
			for i := range filter.Rules { // FORWARD: after PREROUTING, before POSTROUTING
				if compile.Matches(&filter.Rules[i].Match, q) {
					counts[i]++
				}
			}
			sent++
			if sink.iface == "ra" {
				hairpins++
			}
			if cur != orig {
				translated++
			}
		}
		if got := saveCounts(t, x.r, "FORWARD", "iptables-legacy-save", "-c", "-t", "filter"); !slices.Equal(got, counts) {
			t.Fatalf("set %d: filter FORWARD counted %v; xdpfw's reference says %v\n%s", set, got, counts, file.String())
		}
		for i, x := range filter.Rules {
			if c := x.Match.CTState; c != nil && c.Mask&rules.CTDNAT != 0 && !c.Invert {
				ctnatCounted += counts[i]
			}
		}
	}
	if translated < sent/4 || hairpins == 0 || dnats == 0 || ctnat == 0 || ctnatCounted == 0 {
		t.Errorf("only %d of %d packets translated, %d hairpins, %d DNATed in POSTROUTING, %d nat rules with --ctstate SNAT/DNAT, %d packets counted by filter rules on DNAT: the random tables hardly test NAT",
			translated, sent, hairpins, dnats, ctnat, ctnatCounted)
	}
	t.Logf("%d first packets through 25 random nat tables: the kernel's translation is the reference's (%d translated, %d hairpins, %d DNATed in POSTROUTING; %d nat rules with --ctstate SNAT/DNAT); filter FORWARD counted as the reference (%d packets by rules on DNAT)",
		sent, translated, hairpins, dnats, ctnat, ctnatCounted)
}

// ctNATFilter: a filter table whose FORWARD chain (policy ACCEPT) has a
// few rules without a target on the client's packets (cli: its address;
// what comes back is not counted) and random --ctstate lists with SNAT
// and DNAT among the states, some negated: the table, and its
// iptables-restore text.
func ctNATFilter(t *testing.T, r *rand.Rand, cli netip.Addr) (*rules.RuleSet, string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	names := []string{"NEW", "ESTABLISHED", "RELATED", "INVALID", "SNAT", "DNAT"}
	for range 2 + r.IntN(4) {
		var states []string
		for _, n := range names {
			if r.IntN(3) == 0 || n == "DNAT" && r.IntN(2) == 0 {
				states = append(states, n)
			}
		}
		if len(states) == 0 {
			states = []string{names[r.IntN(len(names))]}
		}
		not := ""
		if r.IntN(4) == 0 {
			not = "! "
		}
		fmt.Fprintf(&b, "-A FORWARD -s %s/32 -m conntrack %s--ctstate %s\n", cli, not, strings.Join(states, ","))
	}
	b.WriteString("COMMIT\n")
	rs, err := rules.Parse("filter", []byte(b.String()), rules.ParseOptions{Family: rules.FamilyIPv4})
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return rs, b.String()
}

// natForSinks makes random nat rule x fit the router of
// TestNATDecisionsLikeKernel: DNAT to one of the sinks (one port or
// none), SNAT to one address and MASQUERADE without port ranges or
// --random (the kernel's choice then is deterministic), interfaces of the
// router; a --ctstate test gets SNAT or DNAT beside its states in one
// rule of four.
func natForSinks(r *rand.Rand, x *rules.Rule, sinks []netip.Addr, ifaces []string) {
	if t := x.Target.NAT; t != nil {
		t.Random, t.RandomFully = false, false
		switch t.Kind {
		case rules.NATDNAT:
			t.AddrLo = sinks[r.IntN(len(sinks))]
			t.AddrHi = t.AddrLo
			t.PortHi = t.PortLo
		case rules.NATSNAT:
			if !t.AddrLo.IsValid() {
				t.AddrLo = netip.MustParseAddr("10.200.9.9")
			}
			t.AddrHi, t.Ports = t.AddrLo, false
		case rules.NATMasquerade:
			t.Ports = false
		case rules.NATRedirect:
			t.PortHi = t.PortLo
		}
	}
	m := &x.Match
	for _, i := range []*rules.IfaceMatch{m.InIface, m.OutIface} {
		if i != nil && r.IntN(10) < 7 {
			name := ifaces[r.IntN(len(ifaces))]
			i.Name, i.Prefix = strings.TrimSuffix(name, "+"), strings.HasSuffix(name, "+")
		}
	}
	if c := m.CTState; c != nil && r.IntN(4) == 0 {
		c.Mask |= []uint8{rules.CTSNAT, rules.CTDNAT}[r.IntN(2)]
	}
	x.Text = x.Spec()
}

// setEchoID gives the ICMP echo in frame (IPv4 without options) the id
// id, its checksum updated.
func setEchoID(f []byte, id uint16) {
	l4 := f[14+20:]
	binary.BigEndian.PutUint16(l4[4:], id)
	l4[2], l4[3] = 0, 0
	binary.BigEndian.PutUint16(l4[2:], packet.Checksum(l4))
}
