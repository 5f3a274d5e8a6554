package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// bench forward: how every packet is accounted for, and the established
// flows.

// fwdCounts are the running counts a forward measurement reads.
type fwdCounts struct {
	sinkOK, sinkNAT, sinkBad uint64
	// refused: the router's egress veth's tx_dropped, every frame the
	// sink's full ring refused (veth counts an skb's refusal there, and
	// an XDP frame's there and as the sink's rx_dropped too: sinkDrop,
	// the same frames, or frames the sink dropped after taking them).
	refused, sinkDrop uint64
	proof             uint64
	proofWhat         string
	sinkNS            uint64
	// natC: xdpfw's nat counters summed (xnat configurations): every
	// binding made, refused or found missing, every packet the nat stage
	// took or dropped. None in a run of bound flows.
	natC uint64
}

func (b *fwdBench) counts(c *fwdConfig) (fwdCounts, error) {
	var n fwdCounts
	var err error
	for _, e := range []struct {
		slot uint32
		to   *uint64
	}{{dutSlotSinkOK, &n.sinkOK}, {dutSlotSinkNAT, &n.sinkNAT}, {dutSlotSinkBad, &n.sinkBad}} {
		if *e.to, err = b.progs.count(e.slot); err != nil {
			return n, err
		}
	}
	st, err := linkStats(b.topo.Sink, b.topo.SinkIf.Index)
	if err != nil {
		return n, err
	}
	n.sinkDrop = st.RxDropped
	if st, err = linkStats(b.topo.DUT, b.topo.RouteIf.Index); err != nil {
		return n, err
	}
	n.refused = st.TxDropped
	if c.proof != nil {
		if n.proof, n.proofWhat, err = c.proof(); err != nil {
			return n, err
		}
	}
	if c.xnat {
		nc, _, err := c.dp.NATCounters()
		if err != nil {
			return n, err
		}
		for _, x := range []datapath.Counter{nc.Bound, nc.NoPort, nc.Full, nc.NoAddr, nc.Untranslated, nc.Lost, nc.Frag} {
			n.natC += x.Packets
		}
	}
	n.sinkNS, err = ThreadRuntime(b.sinkNAPI)
	return n, err
}

// fwdDUT adapts a configuration to bench.measure: "dropped" is the sink's
// intact count plus what the sink's full ring refused.
type fwdDUT struct {
	b         *fwdBench
	c         *fwdConfig
	started   bool
	pre, post fwdCounts // read by dropped at the start and the end of a measurement
}

func (d *fwdDUT) name() string { return d.c.name }

func (d *fwdDUT) use(int) error { return nil }

func (d *fwdDUT) close() {}

func (d *fwdDUT) check(uint64, uint64) error {
	return nil // fwdBench.verify checks, with more than two counts
}

func (d *fwdDUT) dropped() (uint64, error) {
	n, err := d.b.counts(d.c)
	if !d.started {
		d.pre, d.started = n, true
	}
	d.post = n
	return n.sinkOK + n.sinkNAT + n.refused, err
}

// measure sends with send against configuration c (in force) and checks
// that every packet is accounted for (verify).
func (b *fwdBench) measure(c *fwdConfig, send func() (time.Duration, error)) (ForwardRun, fwdCounts, error) {
	d := &fwdDUT{b: b, c: c}
	m, err := b.bench.measure(d, send)
	if err != nil {
		return ForwardRun{}, fwdCounts{}, err
	}
	pre, post := d.pre, d.post
	delta := fwdCounts{sinkOK: post.sinkOK - pre.sinkOK, sinkNAT: post.sinkNAT - pre.sinkNAT, sinkBad: post.sinkBad - pre.sinkBad,
		refused: post.refused - pre.refused, sinkDrop: post.sinkDrop - pre.sinkDrop, proof: post.proof - pre.proof,
		proofWhat: post.proofWhat, sinkNS: post.sinkNS - pre.sinkNS, natC: post.natC - pre.natC}
	r := ForwardRun{Offered: m.Offered, Delivered: m.Delivered, RingDropped: m.RingDropped, Forwarded: m.Dropped,
		SinkFull: delta.refused, WindowS: m.WindowS, NAPINS: m.NAPINS, SinkNS: delta.sinkNS}
	if err := errors.Join(m.accounted(), b.verify(c, r, delta)); err != nil {
		return r, delta, fmt.Errorf("%w\n%s", err, b.diagnose())
	}
	return r, delta, nil
}

// verify checks that every packet the router took in was forwarded as it
// must be: intact at the sink (or refused by its full ring), translated
// exactly when the configuration translates, none otherwise, and, where
// the configuration has one, by the rule or path intended.
func (b *fwdBench) verify(c *fwdConfig, r ForwardRun, d fwdCounts) error {
	var errs []error
	if d.sinkBad != 0 {
		errs = append(errs, fmt.Errorf("the sink received %d frames not as forwarding must make them (MACs, TTL, IPv4 checksum, length, addresses)", d.sinkBad))
	}
	good, wrong, wrongWhat := d.sinkOK, d.sinkNAT, "translated"
	if c.nat {
		good, wrong, wrongWhat = d.sinkNAT, d.sinkOK, "untranslated"
	}
	if wrong != 0 {
		errs = append(errs, fmt.Errorf("the sink received %d frames %s", wrong, wrongWhat))
	}
	if got := good + d.refused; got != r.Delivered {
		errs = append(errs, fmt.Errorf("the router took in %d packets; the sink received %d intact, its full ring refused %d: %d unaccounted for",
			r.Delivered, good, d.refused, int64(r.Delivered)-int64(got)))
	}
	if d.sinkDrop > d.refused {
		errs = append(errs, fmt.Errorf("the sink dropped %d frames it had taken in (rx_dropped %d, of which %d refused at its ring)",
			d.sinkDrop-d.refused, d.sinkDrop, d.refused))
	}
	if c.proof != nil && d.proof != r.Delivered {
		errs = append(errs, fmt.Errorf("the router took in %d packets, %s counted %d", r.Delivered, d.proofWhat, d.proof))
	}
	if c.xnat && d.natC != 0 {
		errs = append(errs, fmt.Errorf("xdpfw's nat counters moved by %d (bindings made, refused or lost, or first packets in the nat stage): "+
			"the flows were not all translated by bindings made before", d.natC))
	}
	return errors.Join(errs...)
}

// diagnose reads where a router loses packets: its IP counters and the
// veths' drops.
func (b *fwdBench) diagnose() string {
	var sb strings.Builder
	sb.WriteString("router:")
	_ = b.topo.DUT.Do(func() error {
		snmp, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		lines := strings.Split(string(snmp), "\n")
		for i := 0; i+1 < len(lines); i++ {
			if strings.HasPrefix(lines[i], "Ip: ") && strings.HasPrefix(lines[i+1], "Ip: ") {
				ks, vs := strings.Fields(lines[i]), strings.Fields(lines[i+1])
				for j := 1; j < min(len(ks), len(vs)); j++ {
					if vs[j] != "0" && ks[j] != "Forwarding" && ks[j] != "DefaultTTL" {
						fmt.Fprintf(&sb, " Ip%s=%s", ks[j], vs[j])
					}
				}
				break
			}
		}
		return nil
	})
	for _, e := range []struct {
		ns *Namespace
		i  Iface
	}{{b.topo.DUT, b.topo.DUTIf}, {b.topo.DUT, b.topo.RouteIf}, {b.topo.Sink, b.topo.SinkIf}} {
		if st, err := linkStats(e.ns, e.i.Index); err == nil {
			fmt.Fprintf(&sb, "; %s rx %d (dropped %d) tx %d (dropped %d)", e.i.Name, st.RxPackets, st.RxDropped, st.TxPackets, st.TxDropped)
		}
	}
	return sb.String()
}

// check puts c in force and sends a burst of the traffic (after making
// its flows established where c keeps state): every count must add up.
func (b *fwdBench) check(c *fwdConfig, flows string, size int) (ForwardCheck, error) {
	if err := b.use(c); err != nil {
		return ForwardCheck{}, err
	}
	est, err := b.establish(c, flows)
	if err != nil {
		return ForwardCheck{}, err
	}
	g := b.gens[flows]
	b.gen = g
	if err := b.sinkCheckMode(true); err != nil {
		return ForwardCheck{}, err
	}
	r, d, err := b.measure(c, func() (time.Duration, error) { return g.RunPackets(b.frames[size], sanityPackets) })
	if err := errors.Join(err, b.sinkCheckMode(false)); err != nil {
		return ForwardCheck{}, err
	}
	if err := b.checkFlows(c, flows, d.sinkOK+d.sinkNAT); err != nil {
		return ForwardCheck{}, err
	}
	if r.Delivered == 0 {
		return ForwardCheck{}, fmt.Errorf("the generator sent %d packets, the router took in none", r.Offered)
	}
	proof := "the sink's counts"
	if c.proof != nil {
		proof = d.proofWhat
	}
	b.say("check %-12s %4d B %-4s flow(s): %d sent, %d taken in by the router, %d forwarded intact%s (%s: %d)",
		c.name, size, flows, r.Offered, r.Delivered, r.Forwarded, map[bool]string{true: ", translated", false: ""}[c.nat], proof, max(d.proof, r.Forwarded))
	return ForwardCheck{Config: c.name, Flows: flows, Size: size, Sent: r.Offered, Delivered: r.Delivered, Forwarded: r.Forwarded,
		Established: est, Proof: proof}, nil
}

// establish makes every flow of the traffic an established connection
// for a stateful configuration: the first packet of each flow from the
// generator's namespace, then its reply from the sink's, both through the
// router and paced so no ring overflows; every one must arrive (the sink's
// and the generator's counters). It returns the number of flows.
func (b *fwdBench) establish(c *fwdConfig, flows string) (int, error) {
	if !c.stateful {
		return 0, nil
	}
	aims := b.aims[flows]
	fwd := make([][]byte, len(aims))
	rep := make([][]byte, len(aims))
	for i, a := range aims {
		src, port := aimFlow(a)
		var err error
		if fwd[i], err = ipPacket(src, sinkAddr.Addr(), oneFlowSPort, port); err != nil {
			return 0, err
		}
		if rep[i], err = ipPacket(sinkAddr.Addr(), src, port, oneFlowSPort); err != nil {
			return 0, err
		}
	}
	sink := func() (uint64, error) {
		var n uint64
		for _, slot := range []uint32{dutSlotSinkOK, dutSlotSinkBad, dutSlotSinkNAT} {
			k, err := b.progs.count(slot)
			if err != nil {
				return 0, err
			}
			n += k
		}
		return n, nil
	}
	var bound0 uint64
	if c.xnat {
		// Every establish binds its flows anew (use flushes only when
		// the configuration changes), so that the bound counter shows
		// this traffic's bindings were made here, by its first packets.
		if err := flushXdpfw(c.dp); err != nil {
			return 0, err
		}
		nc, _, err := c.dp.NATCounters()
		if err != nil {
			return 0, err
		}
		bound0 = nc.Bound.Packets
	}
	if err := b.sendPaced(b.topo.Gen, fwd, sink, "first packets, generator to sink"); err != nil {
		return 0, err
	}
	if c.xnat {
		// The answers go to the tuple each flow was translated to.
		binds, err := b.flowBindings(c, flows)
		if err != nil {
			return 0, err
		}
		nc, _, err := c.dp.NATCounters()
		if err != nil {
			return 0, err
		}
		if got := nc.Bound.Packets - bound0; got != uint64(len(aims)) {
			return 0, fmt.Errorf("first packets of %d flows: xdpfw bound %d connections", len(aims), got)
		}
		for i, a := range aims {
			_, port := aimFlow(a)
			if rep[i], err = ipPacket(sinkAddr.Addr(), routeAddr.Addr(), port, binds[i]); err != nil {
				return 0, err
			}
		}
	}
	if err := b.sendPaced(b.topo.Sink, rep, func() (uint64, error) { return b.progs.count(dutSlotReply) }, "replies, sink to generator"); err != nil {
		return 0, err
	}
	return len(aims), nil
}

// aimFlow is an aim's source address and destination port.
func aimFlow(a trafficgenGenAim) (netip.Addr, uint16) {
	var s4 [4]byte
	binary.NativeEndian.PutUint32(s4[:], a.Saddr)
	return netip.AddrFrom4(s4), bits.ReverseBytes16(a.Dport)
}

// flowBindings reads xdpfw's bindings (c.dp) of the traffic's flows: the
// source port each flow is translated to, flow by flow. Every flow must
// be bound, from the router's address to the sink's same port, and no
// two flows to one tuple.
func (b *fwdBench) flowBindings(c *fwdConfig, flows string) ([]uint16, error) {
	bs, err := c.dp.NATBindings()
	if err != nil {
		return nil, err
	}
	type orig struct {
		src   netip.Addr
		dport uint16
	}
	to := map[orig]datapath.NATTuple{}
	for _, x := range bs {
		if x.Proto == unix.IPPROTO_UDP && x.From.SrcPort == oneFlowSPort && x.From.Dst == sinkAddr.Addr() {
			to[orig{x.From.Src, x.From.DstPort}] = x.To
		}
	}
	aims := b.aims[flows]
	ports := make([]uint16, len(aims))
	used := map[[2]uint16]int{}
	for i, a := range aims {
		src, port := aimFlow(a)
		t, ok := to[orig{src, port}]
		switch {
		case !ok:
			return nil, fmt.Errorf("flow %d (%v:%d > %v:%d): no binding in xdpfw after its first packet", i, src, oneFlowSPort, sinkAddr.Addr(), port)
		case t.Src != routeAddr.Addr() || t.Dst != sinkAddr.Addr() || t.DstPort != port:
			return nil, fmt.Errorf("flow %d (%v:%d > %v:%d): bound to %v:%d > %v:%d, want the router's address %v to the same destination",
				i, src, oneFlowSPort, sinkAddr.Addr(), port, t.Src, t.SrcPort, t.Dst, t.DstPort, routeAddr.Addr())
		}
		if j, dup := used[[2]uint16{t.SrcPort, port}]; dup {
			return nil, fmt.Errorf("flows %d and %d are both bound to %v:%d > %v:%d", j, i, t.Src, t.SrcPort, t.Dst, port)
		}
		used[[2]uint16{t.SrcPort, port}] = i
		ports[i] = t.SrcPort
	}
	return ports, nil
}

// sinkCheckMode turns bench_sink's check mode on (its flow table
// emptied first) or off.
func (b *fwdBench) sinkCheckMode(on bool) error {
	if on {
		m := b.progs.objs.SinkFlows
		n := int(m.MaxEntries())
		keys, vals := make([]uint32, n), make([]dutSinkFlow, n)
		for i := range keys {
			keys[i] = uint32(i)
		}
		if _, err := m.BatchUpdate(keys, vals, nil); err != nil {
			return fmt.Errorf("emptying the sink's flow table: %w", err)
		}
	}
	return b.progs.objs.SinkCtl.Update(uint32(0), uint32(b2u8(on)), ebpf.UpdateAny)
}

// checkFlows reads the sink's flow table after a check of c (check mode):
// received frames in all, each flow's with one tuple, the tuple it must
// have: its own; the router's address, its destination port and the
// source port of its xdpfw binding (xnat); the router's address, its
// destination port and one source port no other flow of that destination
// has (the kernel's MASQUERADE, whose bindings xdpfw does not read).
func (b *fwdBench) checkFlows(c *fwdConfig, flows string, received uint64) error {
	aims := b.aims[flows]
	var binds []uint16
	if c.xnat {
		var err error
		if binds, err = b.flowBindings(c, flows); err != nil {
			return err
		}
	}
	var total uint64
	seen := map[[2]uint16]int{}
	var f dutSinkFlow
	for i, a := range aims {
		if err := b.progs.objs.SinkFlows.Lookup(uint32(i), &f); err != nil {
			return fmt.Errorf("reading the sink's flow table: %w", err)
		}
		if f.Changed != 0 {
			return fmt.Errorf("flow %d: %d frames arrived with another tuple than its first", i, f.Changed)
		}
		if f.Packets == 0 {
			continue // all its frames refused at a full ring
		}
		total += uint64(f.Packets)
		src, port := aimFlow(a)
		sport, dport := bits.ReverseBytes16(f.Sport), bits.ReverseBytes16(f.Dport)
		want := fmt.Sprintf("%v:%d > :%d", src, oneFlowSPort, port)
		ok := f.Saddr == a.Saddr && sport == oneFlowSPort && dport == port
		if c.nat {
			wsport := sport
			if c.xnat {
				wsport = binds[i]
			}
			want = fmt.Sprintf("%v:%d > :%d", routeAddr.Addr(), wsport, port)
			ok = f.Saddr == wire4(routeAddr.Addr()) && sport == wsport && dport == port
			if j, dup := seen[[2]uint16{sport, dport}]; dup {
				return fmt.Errorf("flows %d and %d both arrived as from port %d to port %d", j, i, sport, dport)
			}
			seen[[2]uint16{sport, dport}] = i
		}
		if !ok {
			var s4 [4]byte
			binary.NativeEndian.PutUint32(s4[:], f.Saddr)
			return fmt.Errorf("flow %d arrived as %v:%d > :%d, want %s", i, netip.AddrFrom4(s4), sport, dport, want)
		}
	}
	if total != received {
		return fmt.Errorf("the sink counted %d frames intact, its flow table %d", received, total)
	}
	return nil
}

// ipPacket is an IPv4/UDP packet without payload (raw socket: no
// Ethernet header).
func ipPacket(src, dst netip.Addr, sport, dport uint16) ([]byte, error) {
	p := packet.Packet{Src: src, Dst: dst, Proto: packet.ProtoUDP, SPort: sport, DPort: dport}
	f, err := p.Encode()
	if err != nil {
		return nil, err
	}
	return f[14:], nil
}

// sendPaced sends pkts from ns's raw socket, 64 at a time, each batch
// once arrived reads the previous one's count (no ring in the path ever
// holds more than 64); all must arrive within a second of the last.
func (b *fwdBench) sendPaced(ns *Namespace, pkts [][]byte, arrived func() (uint64, error), what string) error {
	const batch = 64
	base, err := arrived()
	if err != nil {
		return err
	}
	fd := b.raw[ns]
	wait := func(want int) error {
		deadline := time.Now().Add(time.Second)
		for {
			n, err := arrived()
			if err != nil {
				return err
			}
			if n-base >= uint64(want) {
				if n-base > uint64(want) {
					return fmt.Errorf("%s: %d sent, %d arrived", what, want, n-base)
				}
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %d sent, %d arrived within a second\n%s", what, want, n-base, b.diagnose())
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	for i, p := range pkts {
		var sa unix.SockaddrInet4
		copy(sa.Addr[:], p[16:20])
		if err := unix.Sendto(fd, p, 0, &sa); err != nil {
			return fmt.Errorf("%s: sending: %w", what, err)
		}
		if (i+1)%batch == 0 || i == len(pkts)-1 {
			if err := wait(i + 1); err != nil {
				return err
			}
		}
	}
	return nil
}
