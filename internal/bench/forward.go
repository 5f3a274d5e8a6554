package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// `xdpfw bench forward`: the macro benchmark's topology with a third
// namespace, the sink, behind a second veth of the DUT, which routes:
//
//	gen xbgPID 10.200.0.1/16 <=> xbdPID 10.200.0.2/16  router  xboPID 10.201.0.1/24 <=> xbsPID 10.201.0.2/24 sink
//
// The generator sends IPv4/UDP to the sink's address through the router's
// MAC; the router forwards (by one of the configurations below) to the
// sink, whose XDP program checks and counts every frame and drops it.
// The router's cost is the CPU time of the NAPI thread polling its
// ingress veth (everything forwarding does, up to handing the frame to
// the sink's queue, runs there), per packet the sink received intact.

// The configurations of the router.
const (
	FwdKernel     = "kernel"      // the kernel forwards (an XDP_PASS program on the ingress veth)
	FwdXdpfwStack = "xdpfw-stack" // xdpfw, --forward stack: FORWARD at XDP, the kernel forwards
	FwdXdpfwXDP   = "xdpfw-xdp"   // xdpfw, the fast path (--forward xdp-veth on these veths)
	FwdFloor      = "xdp-fib"     // a bare XDP FIB forwarder (bpf/bench/dut.c bench_fwd): the floor
)

// ForwardConfigs is every configuration, in the order tables list them.
var ForwardConfigs = []string{FwdKernel, FwdXdpfwStack, FwdXdpfwXDP, FwdFloor}

var (
	routerOutAddr = netip.MustParsePrefix("10.201.0.1/24")
	sinkAddr      = netip.MustParsePrefix("10.201.0.2/24")
)

// forwardRules is xdpfw's rule set: FORWARD accepts the generated UDP
// (stateless: every packet of the many-flows traffic is a new flow).
const forwardRules = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
	"-A FORWARD -p udp -m udp --dport 9 -j ACCEPT\nCOMMIT\n"

// ForwardOptions are a forward run's settings.
type ForwardOptions struct {
	Size     int           // frame size, bytes
	Duration time.Duration // per measurement
	Rounds   int
	Progress interface{ Write([]byte) (int, error) } // progress lines (nil: none)
}

// ForwardRun is one measurement of one configuration.
type ForwardRun struct {
	Config    string  `json:"config"`
	Flows     string  `json:"flows"`     // "one" or "many"
	Offered   uint64  `json:"offered"`   // packets the generator sent
	Delivered uint64  `json:"delivered"` // packets the router's ingress veth took in
	Forwarded uint64  `json:"forwarded"` // packets the router forwarded: received intact by the sink, or dropped by its full ring
	WindowS   float64 `json:"window_s"`
	NAPINS    uint64  `json:"napi_ns"` // the router's NAPI thread CPU time
}

// NsPerPacket is the router's CPU time per packet forwarded.
func (r ForwardRun) NsPerPacket() float64 {
	if r.Forwarded == 0 {
		return 0
	}
	return float64(r.NAPINS) / float64(r.Forwarded)
}

// Mpps is the forwarding rate over the run's window.
func (r ForwardRun) Mpps() float64 { return float64(r.Forwarded) / r.WindowS / 1e6 }

// ForwardPoint is one configuration with one traffic: its runs and their
// medians, and median per-round ratios of its cost to the kernel's and to
// the floor's.
type ForwardPoint struct {
	Config      string       `json:"config"`
	Flows       string       `json:"flows"`
	Runs        []ForwardRun `json:"runs"`
	NsPerPacket float64      `json:"ns_per_packet"`
	Mpps        float64      `json:"mpps"`
	VsKernel    float64      `json:"cost_vs_kernel"` // this ns/packet / the kernel's (1/3 or less: the bar)
	VsFloor     float64      `json:"cost_vs_floor"`  // this ns/packet / the bare XDP forwarder's (1.3 or less: the bar)
}

// ForwardResult is a forward run.
type ForwardResult struct {
	Started  time.Time       `json:"started"`
	Kernel   string          `json:"kernel"`
	CPUs     int             `json:"cpus"`
	Size     int             `json:"size"`
	Duration float64         `json:"duration_s"`
	Rounds   int             `json:"rounds"`
	Routes   int             `json:"routes"` // routes in the router's table besides the connected ones
	Points   []*ForwardPoint `json:"points"`
	Load     [2]string       `json:"loadavg"`
	Elapsed  float64         `json:"elapsed_s"`
}

// fwdDUT is a router configuration as the macro harness measures it:
// "dropped" is what the router forwarded: what the sink counted intact,
// and what the sink's full ring dropped (the router's work was done; the
// sink, sharing the router's CPU, falls behind in bursts).
type fwdDUT struct {
	cfg   string
	use_  func() error
	progs *benchProgs
	lost  func() (uint64, error)
}

func (d *fwdDUT) name() string  { return d.cfg }
func (d *fwdDUT) use(int) error { return d.use_() }
func (d *fwdDUT) close()        {}
func (d *fwdDUT) dropped() (uint64, error) {
	ok, err := d.progs.count(dutSlotSinkOK)
	if err != nil {
		return 0, err
	}
	lost, err := d.lost()
	return ok + lost, err
}
func (d *fwdDUT) check(delivered, forwarded uint64) error {
	bad, err := d.progs.count(dutSlotSinkBad)
	if err != nil {
		return err
	}
	if bad != 0 {
		return fmt.Errorf("%s: the sink received %d frames not as forwarding must make them (MACs, TTL, checksum, length)", d.cfg, bad)
	}
	if forwarded != delivered {
		return fmt.Errorf("%s: the router took in %d packets, forwarded %d to the sink", d.cfg, delivered, forwarded)
	}
	return nil
}

// Forward runs `xdpfw bench forward`: it builds the three namespaces,
// checks every configuration (everything delivered arrives intact at the
// sink; none arrives otherwise), measures them side by side in
// interleaved rounds, and removes everything again, also on error or when
// ctx ends.
func Forward(ctx context.Context, opt ForwardOptions) (res *ForwardResult, err error) {
	if opt.Rounds < 1 || opt.Duration <= 0 || opt.Size < MinFrameSize || opt.Size > MaxFrameSize {
		return nil, fmt.Errorf("forward: rounds >= 1, a duration and a frame size of %d..%d bytes are needed", MinFrameSize, MaxFrameSize)
	}
	b := &bench{ctx: ctx, frames: map[int][]byte{}, say: func(string, ...any) {}}
	if opt.Progress != nil {
		b.say = func(format string, a ...any) { fmt.Fprintf(opt.Progress, format+"\n", a...) }
	}
	res = &ForwardResult{Started: time.Now(), CPUs: runtime.NumCPU(), Size: opt.Size, Duration: opt.Duration.Seconds(), Rounds: opt.Rounds}
	res.Load[0] = loadavg()
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		res.Kernel = unix.ByteSliceToString(uts.Release[:])
	}
	if gone := SweepStale(); len(gone) > 0 {
		b.say("removed what an earlier, killed run left: %s", strings.Join(gone, ", "))
	}
	var undo []func() error
	defer func() {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			if e := undo[i](); e != nil {
				errs = append(errs, e)
			}
		}
		if len(errs) > 0 {
			err = errors.Join(err, fmt.Errorf("cleaning up: %w", errors.Join(errs...)))
		}
	}()
	if b.topo, err = NewTopology(); err != nil {
		return nil, err
	}
	undo = append(undo, b.topo.Close)
	sink, out, sinkIf, err := addSink(b.topo)
	if err != nil {
		return nil, err
	}
	b.say("topology: %s (%s) <-> %s (%s, %s) <-> %s (%s); generator on CPU %d, router on CPU %d",
		b.topo.Gen.Name, b.topo.GenIf.Name, b.topo.DUT.Name, b.topo.DUTIf.Name, out.Name, sink.Name, sinkIf.Name,
		b.topo.GenCPU, b.topo.DUTCPU)

	gens := map[string]*Generator{}
	for _, flows := range []string{"one", "many"} {
		g, err := newGenerator(b.topo, sinkAddr.Addr(), flows == "one", 0)
		if err != nil {
			return nil, err
		}
		undo = append(undo, func() error { g.Close(); return nil })
		gens[flows] = g
	}
	frame, err := gens["many"].Frame(opt.Size)
	if err != nil {
		return nil, err
	}
	b.frames[opt.Size] = frame

	// The bare programs: the sink's checker (expecting the router's
	// egress MAC, its own, TTL 63) and the floor.
	spec, err := loadDut()
	if err != nil {
		return nil, fmt.Errorf("loading the benchmark's programs: %w", err)
	}
	var dmac, smac [6]byte
	copy(dmac[:], sinkIf.MAC)
	copy(smac[:], out.MAC)
	for name, v := range map[string]any{"sink_dmac": dmac, "sink_smac": smac, "sink_ttl": uint8(packetTTL - 1)} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	progs := &benchProgs{}
	if err := spec.LoadAndAssign(&progs.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the benchmark's programs: %w", err)
	}
	undo = append(undo, func() error { progs.objs.Close(); return nil })
	if err := progs.objs.FwdPorts.Put(uint32(out.Index), uint32(out.Index)); err != nil {
		return nil, fmt.Errorf("the floor's devmap: %w", err)
	}
	// The sink: its checker, polled by its own thread on the router's CPU
	// (the generator leaves its own no time), so the router's thread does
	// none of the sink's work; real-time, so it takes each frame off its
	// ring as soon as the router puts it there and the ring never fills.
	var sl link.Link
	if err := sink.Do(func() error {
		var err error
		sl, err = link.AttachXDP(link.XDPOptions{Program: progs.objs.BenchSink, Interface: sinkIf.Index, Flags: link.XDPDriverMode})
		return err
	}); err != nil {
		return nil, fmt.Errorf("attaching the sink's program: %w", err)
	}
	undo = append(undo, sl.Close)
	if err := setThreadedNAPI(sink, sinkIf.Name, true); err != nil {
		return nil, err
	}
	sinkNAPI, err := napiThread(sinkIf.Name, b.topo.DUTCPU)
	if err != nil {
		return nil, err
	}
	if err := unix.SchedSetAttr(sinkNAPI, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0); err != nil {
		return nil, fmt.Errorf("the sink's NAPI thread (pid %d) real-time: %w", sinkNAPI, err)
	}
	// The router's ingress: one link whose program each configuration sets.
	l, err := attachDUTLink(b.topo, progs.objs.BenchPass)
	if err != nil {
		return nil, err
	}
	undo = append(undo, l.l.Close)
	if err := b.topo.SetThreadedNAPI(true); err != nil {
		return nil, err
	}
	if b.napi, err = b.topo.NAPIThread(); err != nil {
		return nil, err
	}

	// xdpfw, on the router's ingress; its fast path may use both veths.
	pinRoot, unmount, err := privateBPFFS()
	if err != nil {
		return nil, err
	}
	undo = append(undo, unmount)
	c, err := compileText(forwardRules, 1, rules.ParseOptions{Family: rules.FamilyIPv4})
	if err != nil {
		return nil, err
	}
	dp, err := datapath.Load(filepath.Join(pinRoot, "xdpfw"), c.lim)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() error { dp.Close(); return nil })
	if err := dp.Install(c.tables); err != nil {
		return nil, err
	}
	if err := dp.SetForwardPorts([]int{b.topo.DUTIf.Index, out.Index}); err != nil {
		return nil, err
	}
	xdpfw := func(m datapath.ForwardMode) func() error {
		return func() error {
			if err := dp.SetConfig(datapath.Config{MalformedAction: compile.ActDrop, Forward: m}); err != nil {
				return err
			}
			return l.set(dp.Program())
		}
	}
	uses := map[string]func() error{
		FwdKernel:     func() error { return l.set(progs.objs.BenchPass) },
		FwdXdpfwStack: xdpfw(datapath.ForwardStack),
		FwdXdpfwXDP:   xdpfw(datapath.ForwardXDPVeth),
		FwdFloor:      func() error { return l.set(progs.objs.BenchFwd) },
	}
	lost := func() (uint64, error) {
		var n uint64
		for _, e := range []struct {
			ns *Namespace
			i  Iface
			rx bool
		}{{b.topo.DUT, out, false}, {sink, sinkIf, true}} {
			st, err := linkStats(e.ns, e.i.Index)
			if err != nil {
				return 0, err
			}
			if e.rx {
				n += st.RxDropped
			} else {
				n += st.TxDropped
			}
		}
		return n, nil
	}
	for _, cfg := range ForwardConfigs {
		b.duts = append(b.duts, &fwdDUT{cfg: cfg, use_: uses[cfg], progs: progs, lost: lost})
	}

	// Check each configuration, then measure.
	for _, flows := range []string{"one", "many"} {
		b.gen = gens[flows]
		for _, d := range b.duts {
			if err := d.use(0); err != nil {
				return nil, err
			}
			r, err := b.measure(d, func() (time.Duration, error) { return b.gen.RunPackets(frame, sanityPackets) })
			if err != nil {
				return nil, fmt.Errorf("checking %s: %w", d.name(), err)
			}
			if r.Delivered == 0 || r.Dropped == 0 {
				return nil, fmt.Errorf("checking %s, %s flow(s): the router took in %d packets, the sink received %d intact", d.name(), flows, r.Delivered, r.Dropped)
			}
			if err := errors.Join(r.accounted(), d.check(r.Delivered, r.Dropped)); err != nil {
				a, _ := linkStats(b.topo.DUT, out.Index)
				c, _ := linkStats(sink, sinkIf.Index)
				x, _ := linkStats(b.topo.DUT, b.topo.DUTIf.Index)
				var snmp, stat []byte
				b.topo.DUT.Do(func() error { snmp, _ = os.ReadFile("/proc/thread-self/net/snmp"); stat, _ = os.ReadFile("/proc/thread-self/net/softnet_stat"); return nil })
				fmt.Fprintf(os.Stderr, "SNMP\n%s\nSOFTNET\n%s\n", snmp, stat)
				return nil, fmt.Errorf("DEBUG out %+v\nsink %+v\nin %+v\nchecking %s, %s flow(s): %w", *a, *c, *x, d.name(), flows, err)
			}
			b.say("check %-12s %-4s flow(s): %d sent, %d taken in by the router, %d forwarded (none not intact)", d.name(), flows, r.Offered, r.Delivered, r.Dropped)
		}
	}
	points := map[string]*ForwardPoint{}
	for _, flows := range []string{"one", "many"} {
		for _, d := range b.duts {
			p := &ForwardPoint{Config: d.name(), Flows: flows}
			points[d.name()+flows] = p
			res.Points = append(res.Points, p)
		}
	}
	k := 0
	for round := range opt.Rounds {
		for _, flows := range []string{"one", "many"} {
			b.gen = gens[flows]
			order := slices.Clone(b.duts)
			rot := k % len(order)
			order = append(order[rot:], order[:rot]...)
			k++
			for _, d := range order {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("interrupted: %w", err)
				}
				if err := d.use(0); err != nil {
					return nil, err
				}
				m, err := b.measure(d, func() (time.Duration, error) { return b.gen.Run(ctx, frame, opt.Duration) })
				if err != nil {
					return nil, fmt.Errorf("%s: %w", d.name(), err)
				}
				if err := errors.Join(m.accounted(), d.check(m.Delivered, m.Dropped)); err != nil {
					return nil, fmt.Errorf("%s, %s flow(s): %w", d.name(), flows, err)
				}
				r := ForwardRun{Config: d.name(), Flows: flows, Offered: m.Offered, Delivered: m.Delivered, Forwarded: m.Dropped,
					WindowS: m.WindowS, NAPINS: m.NAPINS}
				p := points[d.name()+flows]
				p.Runs = append(p.Runs, r)
				b.say("round %d/%d %-4s flow(s) %-12s %7.3f Mpps forwarded %7.0f ns/pkt (router)", round+1, opt.Rounds, flows, d.name(),
					r.Mpps(), r.NsPerPacket())
			}
		}
	}
	for _, flows := range []string{"one", "many"} {
		for _, cfg := range ForwardConfigs {
			p := points[cfg+flows]
			var ns, mpps, vk, vf []float64
			for i, r := range p.Runs {
				ns = append(ns, r.NsPerPacket())
				mpps = append(mpps, r.Mpps())
				vk = append(vk, r.NsPerPacket()/points[FwdKernel+flows].Runs[i].NsPerPacket())
				vf = append(vf, r.NsPerPacket()/points[FwdFloor+flows].Runs[i].NsPerPacket())
			}
			p.NsPerPacket, p.Mpps, p.VsKernel, p.VsFloor = median(ns), median(mpps), median(vk), median(vf)
		}
	}
	res.Load[1] = loadavg()
	res.Elapsed = time.Since(res.Started).Seconds()
	return res, nil
}

// packetTTL is the TTL of the generator's frames (packet.DefaultTTL).
const packetTTL = 64

// addSink adds the sink namespace behind a second veth of the DUT (the
// router), with forwarding on in the router and permanent neighbours.
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
		return writeSysctls(map[string]string{"net/ipv6/conf/all/disable_ipv6": "1", "net/ipv6/conf/default/disable_ipv6": "1"})
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
	return sink, out, in, addNeigh(sink, in.Index, out)
}
