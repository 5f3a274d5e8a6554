package bench

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// bench forward: the router, the sink, the programs, xdpfw and the routes.

// setup builds the topology, loads the programs and xdpfw, and makes the
// configurations; what it made goes on undo.
func (b *fwdBench) setup(undo *undoSteps) error {
	var err error
	if b.topo, err = NewRouterTopology(); err != nil {
		return err
	}
	*undo = append(*undo, b.topo.Close)
	t := b.topo
	// No qdisc on the router's egress: a full sink ring drops at once,
	// counted in tx_dropped, instead of queueing (and dropping) unseen.
	if err := t.DUT.Do(func() error {
		l, err := netlink.LinkByIndex(t.RouteIf.Index)
		if err == nil {
			err = netlink.LinkSetTxQLen(l, 0)
		}
		return err
	}); err != nil {
		return fmt.Errorf("%s: no queue: %w", t.RouteIf.Name, err)
	}
	b.say("topology: %s (%s) <-> %s (%s, %s) <-> %s (%s); generator on CPU %d, router on CPU %d",
		t.Gen.Name, t.GenIf.Name, t.DUT.Name, t.DUTIf.Name, t.RouteIf.Name, t.Sink.Name, t.SinkIf.Name, t.GenCPU, t.DUTCPU)

	for _, flows := range b.opt.Flows {
		b.aims[flows] = fwdAims(flows, b.opt.Rules)
		g, err := newGenerator(t, sinkAddr.Addr(), true, len(b.aims[flows]))
		if err != nil {
			return err
		}
		*undo = append(*undo, func() error { g.Close(); return nil })
		if err := g.Aim(b.aims[flows]); err != nil {
			return err
		}
		b.gens[flows] = g
	}
	for _, size := range b.opt.Sizes {
		if b.frames[size], err = b.gens[b.opt.Flows[0]].Frame(size); err != nil {
			return err
		}
	}

	// The bare programs: the sink's checker and the floor.
	var dmac, smac [6]byte
	copy(dmac[:], t.SinkIf.MAC)
	copy(smac[:], t.RouteIf.MAC)
	srcMask := netip.PrefixFrom(netip.MustParseAddr("255.255.255.255"), 32).Addr().As4()
	for i := TrafficSrc.Bits(); i < 32; i++ {
		srcMask[i/8] &^= 1 << (7 - i%8)
	}
	if b.progs, err = loadDUTPrograms(t, map[string]any{"sink_dmac": dmac, "sink_smac": smac, "sink_ttl": uint8(packet.DefaultTTL - 1),
		"sink_daddr": wire4(sinkAddr.Addr()), "sink_src_net": wire4(TrafficSrc.Masked().Addr()),
		"sink_src_mask": binary.NativeEndian.Uint32(srcMask[:]), "sink_nat_saddr": wire4(routeAddr.Addr())}); err != nil {
		return err
	}
	*undo = append(*undo, func() error { b.progs.objs.Close(); return nil })
	// The sink: its checker, polled by its own thread on the router's CPU
	// (the generator leaves its own no time), so the router's thread does
	// none of the sink's work (below: which runs first). The generator's
	// veth counts the replies.
	if err := attachEnds(t, b.progs.objs.BenchSink, b.progs.objs.BenchReply, undo); err != nil {
		return err
	}
	if err := setThreadedNAPI(t.Sink, t.SinkIf.Name, true); err != nil {
		return err
	}
	if b.sinkNAPI, err = napiThread(t.SinkIf.Name, t.DUTCPU); err != nil {
		return err
	}
	// The router's veths: one link each, whose program each configuration
	// sets (the egress veth's runs on the replies, and takes frames
	// redirected to it only while it has one).
	if b.links, err = attachRouter(t, b.progs.objs.BenchPass, undo); err != nil {
		return err
	}
	if err := t.SetThreadedNAPI(true); err != nil {
		return err
	}
	if b.napi, err = t.NAPIThread(); err != nil {
		return err
	}
	// Both threads real-time on the router's CPU: other work there must
	// not delay the router's wake-ups (its ring would overflow while it
	// waits). The router above the sink: it finishes each poll before the
	// sink runs. The other way round the kernel's forwarding cost moved
	// into the sink's thread: measured, 141 ns per packet in the router's
	// thread and 1,261 in the sink's, against 873 and 29 with the router
	// above (the bare XDP forwarder 336 + 361 against 263 + 11); only
	// the router's order gives each thread its own work.
	if err := realtime(b.napi, 10, "the router's NAPI thread"); err != nil {
		return err
	}
	if err := realtime(b.sinkNAPI, 9, "the sink's NAPI thread"); err != nil {
		return err
	}
	// Raw sockets in the generator's and the sink's namespaces: the first
	// packet of each flow, and its reply (establish).
	for _, ns := range []*Namespace{t.Gen, t.Sink} {
		var fd int
		if err := ns.Do(func() error {
			var err error
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
			return err
		}); err != nil {
			return fmt.Errorf("a raw socket in %s: %w", ns.Name, err)
		}
		b.raw[ns] = fd
		*undo = append(*undo, func() error { return unix.Close(fd) })
	}

	// xdpfw, on both router veths, with the stateful rule set.
	pinRoot, unmount, err := privateBPFFS()
	if err != nil {
		return err
	}
	*undo = append(*undo, unmount)
	c, err := compileText(forwardRuleSet(b.opt.Rules), b.opt.Rules+1, rules.ParseOptions{Family: rules.FamilyIPv4})
	if err != nil {
		return err
	}
	if b.dp, err = datapath.Load(filepath.Join(pinRoot, "xdpfw"), c.lim); err != nil {
		return err
	}
	*undo = append(*undo, func() error { b.dp.Close(); return nil })
	if err := b.dp.Install(c.tables); err != nil {
		return err
	}
	if err := t.DUT.Do(func() error { return b.dp.SetForwardPorts([]int{t.DUTIf.Index, t.RouteIf.Index}) }); err != nil {
		return err
	}
	if slices.Contains(b.opt.Configs, FwdXdpfwNAT) {
		if err := b.loadNAT(filepath.Join(pinRoot, "xdpfw-nat"), c, undo); err != nil {
			return fmt.Errorf("xdpfw with NAT: %w", err)
		}
	}
	b.configs()
	return nil
}

// loadNAT loads xdpfw a second time, with NAT (what `load --nat xdpfw`
// does: docs/nat.md), the filter c and the nat table masqRuleSet of the
// router's egress veth, on the router's veths' devmap; a source-translated
// packet the fast path handed to the kernel must not be a martian there,
// so the veths accept local sources (as load sets it).
func (b *fwdBench) loadNAT(dir string, c *compiled, undo *undoSteps) error {
	t := b.topo
	rs, err := rules.Parse("bench-nat", []byte(masqRuleSet(t.RouteIf.Name)), rules.ParseOptions{Family: rules.FamilyIPv4, NAT: true})
	if err != nil {
		return err
	}
	lim := c.lim
	lim.NAT = true
	lim.NATNoHooks = datapath.NATNoHooksOf(rs.NAT) // as load sets it
	if b.dpNAT, err = datapath.Load(dir, lim); err != nil {
		return err
	}
	*undo = append(*undo, func() error { b.dpNAT.Close(); return nil })
	if err := b.dpNAT.Install(c.tables); err != nil {
		return err
	}
	ifaces := map[string]uint32{t.DUTIf.Name: uint32(t.DUTIf.Index), t.RouteIf.Name: uint32(t.RouteIf.Index)}
	nt, _, err := compile.CompileNAT(rs.NAT, compile.Input{Ifaces: ifaces, HostIfaces: ifaces,
		MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
	if err != nil {
		return err
	}
	if err := b.dpNAT.StartNAT(nt, rs.NAT); err != nil {
		return err
	}
	return t.DUT.Do(func() error {
		for _, name := range []string{t.DUTIf.Name, t.RouteIf.Name} {
			if err := os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf", name, "accept_local"), []byte("1\n"), 0o644); err != nil {
				return err
			}
		}
		return b.dpNAT.SetForwardPorts([]int{t.DUTIf.Index, t.RouteIf.Index})
	})
}

// wire4 is IPv4 address a as a BPF program reads it from a packet (its
// bytes in network order, loaded as a native u32).
func wire4(a netip.Addr) uint32 { x := a.As4(); return binary.NativeEndian.Uint32(x[:]) }

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
		fmt.Fprintf(&sb, "route %s %v via %v dev %s\n", verb, p, sinkAddr.Addr(), b.topo.RouteIf.Name)
	}
	_, err := runIn(b.ctx, b.topo.DUT, stackCmd{"ip", []string{"-batch", "-"}, sb.String()})
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
