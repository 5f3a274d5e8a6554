package bench

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// bench forward: the router, the sink, the programs, xdpfw and the routes.

// setup builds the topology, loads the programs and xdpfw, and makes the
// configurations; it returns undo with what to remove appended.
func (b *fwdBench) setup(undo []func() error) ([]func() error, error) {
	var err error
	if b.topo, err = NewTopology(); err != nil {
		return undo, err
	}
	undo = append(undo, b.topo.Close)
	if b.sink, b.out, b.sinkIf, err = addSink(b.topo); err != nil {
		return undo, err
	}
	b.say("topology: %s (%s) <-> %s (%s, %s) <-> %s (%s); generator on CPU %d, router on CPU %d",
		b.topo.Gen.Name, b.topo.GenIf.Name, b.topo.DUT.Name, b.topo.DUTIf.Name, b.out.Name, b.sink.Name, b.sinkIf.Name,
		b.topo.GenCPU, b.topo.DUTCPU)

	for _, flows := range b.opt.Flows {
		b.aims[flows] = fwdAims(flows, b.opt.Rules)
		g, err := newGenerator(b.topo, sinkAddr.Addr(), true, len(b.aims[flows]))
		if err != nil {
			return undo, err
		}
		undo = append(undo, func() error { g.Close(); return nil })
		if err := g.Aim(b.aims[flows]); err != nil {
			return undo, err
		}
		b.gens[flows] = g
	}
	for _, size := range b.opt.Sizes {
		if b.frames[size], err = b.gens[b.opt.Flows[0]].Frame(size); err != nil {
			return undo, err
		}
	}

	// The bare programs: the sink's checker and the floor.
	spec, err := loadDut()
	if err != nil {
		return undo, fmt.Errorf("loading the benchmark's programs: %w", err)
	}
	var dmac, smac [6]byte
	copy(dmac[:], b.sinkIf.MAC)
	copy(smac[:], b.out.MAC)
	be := func(a netip.Addr) uint32 { x := a.As4(); return binary.NativeEndian.Uint32(x[:]) }
	srcMask := netip.PrefixFrom(netip.MustParseAddr("255.255.255.255"), 32).Addr().As4()
	for i := TrafficSrc.Bits(); i < 32; i++ {
		srcMask[i/8] &^= 1 << (7 - i%8)
	}
	for name, v := range map[string]any{"sink_dmac": dmac, "sink_smac": smac, "sink_ttl": uint8(packet.DefaultTTL - 1),
		"sink_daddr": be(sinkAddr.Addr()), "sink_src_net": be(TrafficSrc.Masked().Addr()),
		"sink_src_mask": binary.NativeEndian.Uint32(srcMask[:]), "sink_nat_saddr": be(routerOutAddr.Addr())} {
		if err := spec.Variables[name].Set(v); err != nil {
			return undo, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	b.progs = &benchProgs{}
	if err := spec.LoadAndAssign(&b.progs.objs, nil); err != nil {
		return undo, fmt.Errorf("loading the benchmark's programs: %w", err)
	}
	undo = append(undo, func() error { b.progs.objs.Close(); return nil })
	// A devmap entry names a device of the namespace that writes it.
	if err := b.topo.DUT.Do(func() error {
		for _, i := range []int{b.topo.DUTIf.Index, b.out.Index} {
			if err := b.progs.objs.FwdPorts.Put(uint32(i), uint32(i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return undo, fmt.Errorf("the floor's devmap: %w", err)
	}
	// The sink: its checker, polled by its own thread on the router's CPU
	// (the generator leaves its own no time), so the router's thread does
	// none of the sink's work (below: which runs first). The generator's
	// veth counts the replies.
	for _, a := range []struct {
		ns   *Namespace
		i    Iface
		prog *ebpf.Program
	}{{b.sink, b.sinkIf, b.progs.objs.BenchSink}, {b.topo.Gen, b.topo.GenIf, b.progs.objs.BenchReply}} {
		var l link.Link
		if err := a.ns.Do(func() error {
			var err error
			l, err = link.AttachXDP(link.XDPOptions{Program: a.prog, Interface: a.i.Index, Flags: link.XDPDriverMode})
			return err
		}); err != nil {
			return undo, fmt.Errorf("attaching XDP to %s: %w", a.i.Name, err)
		}
		undo = append(undo, l.Close)
	}
	if err := setThreadedNAPI(b.sink, b.sinkIf.Name, true); err != nil {
		return undo, err
	}
	if b.sinkNAPI, err = napiThread(b.sinkIf.Name, b.topo.DUTCPU); err != nil {
		return undo, err
	}
	// The router's veths: one link each, whose program each configuration
	// sets (the egress veth's runs on the replies, and takes frames
	// redirected to it only while it has one).
	if b.in, err = attachDUTLink(b.topo, b.progs.objs.BenchPass); err != nil {
		return undo, err
	}
	undo = append(undo, b.in.l.Close)
	if b.eg, err = attachLink(b.topo.DUT, b.out, b.progs.objs.BenchPass); err != nil {
		return undo, err
	}
	undo = append(undo, b.eg.l.Close)
	if err := b.topo.SetThreadedNAPI(true); err != nil {
		return undo, err
	}
	if b.napi, err = b.topo.NAPIThread(); err != nil {
		return undo, err
	}
	// Both threads real-time on the router's CPU: other work there must
	// not delay the router's wake-ups (its ring would overflow while it
	// waits). The router above the sink: it finishes each poll before the
	// sink runs. The other way round the kernel's forwarding cost moved
	// into the sink's thread: measured, 141 ns per packet in the router's
	// thread and 1,261 in the sink's, against 873 and 29 with the router
	// above (the bare XDP forwarder 336 + 361 against 263 + 11); only
	// the router's order gives each thread its own work.
	for _, t := range []struct {
		pid, prio int
		what      string
	}{{b.napi, 10, "router"}, {b.sinkNAPI, 9, "sink"}} {
		if err := unix.SchedSetAttr(t.pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(t.prio)}, 0); err != nil {
			return undo, fmt.Errorf("the %s's NAPI thread (pid %d) real-time: %w", t.what, t.pid, err)
		}
	}
	// Raw sockets in the generator's and the sink's namespaces: the first
	// packet of each flow, and its reply (establish).
	for _, ns := range []*Namespace{b.topo.Gen, b.sink} {
		var fd int
		if err := ns.Do(func() error {
			var err error
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
			return err
		}); err != nil {
			return undo, fmt.Errorf("a raw socket in %s: %w", ns.Name, err)
		}
		b.raw[ns] = fd
		undo = append(undo, func() error { return unix.Close(fd) })
	}

	// xdpfw, on both router veths, with the stateful rule set.
	pinRoot, unmount, err := privateBPFFS()
	if err != nil {
		return undo, err
	}
	undo = append(undo, unmount)
	c, err := compileText(forwardRuleSet(b.opt.Rules), b.opt.Rules+1, rules.ParseOptions{Family: rules.FamilyIPv4})
	if err != nil {
		return undo, err
	}
	if b.dp, err = datapath.Load(filepath.Join(pinRoot, "xdpfw"), c.lim); err != nil {
		return undo, err
	}
	undo = append(undo, func() error { b.dp.Close(); return nil })
	if err := b.dp.Install(c.tables); err != nil {
		return undo, err
	}
	if err := b.topo.DUT.Do(func() error { return b.dp.SetForwardPorts([]int{b.topo.DUTIf.Index, b.out.Index}) }); err != nil {
		return undo, err
	}
	b.configs()
	return undo, nil
}

// attachLink attaches prog to i in ns (native mode) as a dutLink.
func attachLink(ns *Namespace, i Iface, prog *ebpf.Program) (*dutLink, error) {
	var l link.Link
	if err := ns.Do(func() error {
		var err error
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: i.Index, Flags: link.XDPDriverMode})
		return err
	}); err != nil {
		return nil, fmt.Errorf("attaching XDP (native mode) to %s: %w", i.Name, err)
	}
	return &dutLink{l: l}, nil
}

// setRoutes grows or shrinks the router's extra routes from have to want
// (the first want of fwdRoutes, via the sink), with one `ip -batch`.
func (b *fwdBench) setRoutes(have, want int) error {
	if len(b.routes) < max(have, want) {
		b.routes = fwdRoutes(max(have, want))
	}
	var sb strings.Builder
	verb, from, to := "add", have, want
	if want < have {
		verb, from, to = "del", want, have
	}
	for _, p := range b.routes[from:to] {
		fmt.Fprintf(&sb, "route %s %v via %v dev %s\n", verb, p, sinkAddr.Addr(), b.out.Name)
	}
	_, err := runTool(b.ctx, b.topo.DUT, stackCmd{"ip", []string{"-batch", "-"}, sb.String()})
	return err
}

// fwdRoutes are n distinct /24s at random (a fixed seed) over the unicast
// space, outside 0/8, 10/8 and 127/8: spread like a routing table's, so
// the FIB's trie grows deep and wide, not as one compact run of /24s.
func fwdRoutes(n int) []netip.Prefix {
	rnd := rand.New(rand.NewPCG(16, 6))
	seen := make(map[uint32]bool, n)
	out := make([]netip.Prefix, 0, n)
	for len(out) < n {
		v := uint32(rnd.IntN(224<<16)) << 8 // below 224.0.0.0
		if first := v >> 24; first == 0 || first == 10 || first == 127 || seen[v] {
			continue
		}
		seen[v] = true
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], v)
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(a), 24))
	}
	return out
}

// addSink adds the sink namespace behind a second veth of the DUT (the
// router), with forwarding on in the router, a route back to the
// generator's addresses in the sink, and permanent neighbours.
func addSink(t *Topology) (*Namespace, Iface, Iface, error) {
	pid := os.Getpid()
	out := Iface{Name: fmt.Sprintf("xbo%d", pid), Addr: routerOutAddr}
	in := Iface{Name: fmt.Sprintf("xbs%d", pid), Addr: sinkAddr}
	sink, err := t.newNamespace(fmt.Sprintf("%ssink-%d", NetNSPrefix, pid))
	if err != nil {
		return nil, out, in, err
	}
	if err := t.addVeth(t.DUT, &out, sink, &in); err != nil {
		return nil, out, in, err
	}
	if err := sink.Do(func() error {
		return writeSysctls(map[string]string{"net/ipv6/conf/all/disable_ipv6": "1", "net/ipv6/conf/default/disable_ipv6": "1",
			"net/ipv4/conf/all/rp_filter": "0", "net/ipv4/conf/default/rp_filter": "0"})
	}); err != nil {
		return nil, out, in, err
	}
	if err := t.DUT.Do(func() error { return writeSysctls(map[string]string{"net/ipv4/ip_forward": "1"}) }); err != nil {
		return nil, out, in, err
	}
	// No qdisc on the router's egress: a full sink ring drops at once,
	// counted in tx_dropped, instead of queueing (and dropping) unseen.
	if err := t.DUT.Do(func() error {
		l, err := netlink.LinkByName(out.Name)
		if err == nil {
			err = netlink.LinkSetTxQLen(l, 0)
		}
		return err
	}); err != nil {
		return nil, out, in, fmt.Errorf("%s: no queue: %w", out.Name, err)
	}
	if err := configure(t.DUT, &out); err != nil {
		return nil, out, in, err
	}
	if err := configure(sink, &in); err != nil {
		return nil, out, in, err
	}
	for _, e := range []struct {
		ns *Namespace
		i  *Iface
	}{{t.DUT, &out}, {sink, &in}} {
		if err := waitUp(e.ns, e.i); err != nil {
			return nil, out, in, err
		}
	}
	if err := addNeigh(t.DUT, out.Index, in); err != nil {
		return nil, out, in, err
	}
	if err := addNeigh(sink, in.Index, out); err != nil {
		return nil, out, in, err
	}
	// Replies: the sink reaches the generator's /16 through the router,
	// the generator the sink's /24, and the router the traffic's sources
	// through the generator's address (a neighbour it knows: the
	// generator's veth answers no ARP).
	for _, r := range []struct {
		ns  *Namespace
		dst netip.Prefix
		gw  netip.Addr
		dev int
	}{{sink, genAddr.Masked(), routerOutAddr.Addr(), in.Index}, {t.Gen, sinkAddr.Masked(), dutAddr.Addr(), t.GenIf.Index},
		{t.DUT, TrafficSrc, genAddr.Addr(), t.DUTIf.Index}} {
		h, err := netlink.NewHandleAt(r.ns.Handle)
		if err != nil {
			return nil, out, in, err
		}
		err = h.RouteAdd(&netlink.Route{LinkIndex: r.dev, Gw: r.gw.AsSlice(),
			Dst: &net.IPNet{IP: r.dst.Addr().AsSlice(), Mask: net.CIDRMask(r.dst.Bits(), 32)}})
		h.Close()
		if err != nil {
			return nil, out, in, fmt.Errorf("route to %v in %s: %w", r.dst, r.ns.Name, err)
		}
	}
	return sink, out, in, nil
}
