package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// `xdpfw bench forward` (docs/bench.md, "bench forward"): the macro
// benchmark's topology with a third namespace, the sink, behind a second
// veth of the DUT, which routes:
//
//	gen xbgPID 10.200.0.1/16 <=> xbdPID 10.200.0.2/16  router  xboPID 10.201.0.1/24 <=> xbsPID 10.201.0.2/24 sink
//
// The generator sends IPv4/UDP to the sink's address through the router's
// MAC; the router forwards (by one of the configurations below) to the
// sink, whose XDP program checks and counts every frame and drops it.
// The router's cost is the CPU time of the NAPI thread polling its
// ingress veth (everything forwarding does, up to handing the frame to
// the sink's queue, runs there), per packet forwarded.

// The configurations of the router.
const (
	FwdKernel     = "kernel"      // the kernel forwards, no firewall (an XDP_PASS program on the veths)
	FwdIptables   = "iptables"    // the kernel forwards, iptables-nft's stateful FORWARD chain (forwardRuleSet)
	FwdNft        = "nftables"    // the kernel forwards, the same chain in native nftables
	FwdXdpfwStack = "xdpfw-stack" // xdpfw with forwardRuleSet, --forward stack: the kernel forwards
	FwdXdpfwXDP   = "xdpfw-xdp"   // xdpfw with forwardRuleSet, the fast path (--forward xdp-veth on these veths)
	FwdXdpfwKMasq = "xdpfw-kmasq" // xdpfw-xdp beside the kernel's MASQUERADE (its nat table): the kernel forwards
	FwdFloor      = "xdp-fib"     // a bare XDP FIB forwarder (bpf/bench/dut.c bench_fwd): the floor
	// FwdXdpfwNAT is kept for xdpfw's own MASQUERADE (issue 16 point 3,
	// being built on branch nat): xdpfw-xdp with a *nat table
	// "-A POSTROUTING -o xboPID -j MASQUERADE" loaded into xdpfw, the
	// sink expecting translated frames as for xdpfw-kmasq. Not in
	// ForwardConfigs until that lands; asking for it says so.
	FwdXdpfwNAT = "xdpfw-nat"
)

// ForwardConfigs is every configuration, in the order tables list them.
var ForwardConfigs = []string{FwdKernel, FwdIptables, FwdNft, FwdXdpfwStack, FwdXdpfwXDP, FwdXdpfwKMasq, FwdFloor}

// The traffics: one flow, or fwdManyFlows flows spread over the rules.
const (
	FlowsOne  = "one"
	FlowsMany = "many"
)

// fwdManyFlows is the number of flows of the many-flows traffic: the
// generator cycles through them, so each is an established connection
// after its first packet and its reply (establish).
const fwdManyFlows = 8192

var (
	routerOutAddr = netip.MustParsePrefix("10.201.0.1/24")
	sinkAddr      = netip.MustParsePrefix("10.201.0.2/24")
)

// fwdPortBase is the UDP destination port of FORWARD rule i's traffic
// (fwdPortBase + i).
const fwdPortBase = 10000

// ForwardOptions are a forward run's settings.
type ForwardOptions struct {
	Sizes    []int    // frame sizes, bytes
	Flows    []string // FlowsOne, FlowsMany
	Routes   []int    // extra routes in the router's table, ascending (0: the connected ones only)
	Configs  []string // subset of ForwardConfigs (nil: all); the kernel and the floor are always measured
	Rules    int      // NEW rules of the stateful FORWARD chain
	Duration time.Duration
	Rounds   int
	Progress io.Writer // progress lines (nil: none)
}

// DefaultForwardOptions are `xdpfw bench forward` without flags: about
// three minutes on a 2-CPU VM.
func DefaultForwardOptions() ForwardOptions {
	return ForwardOptions{Sizes: []int{64, MaxFrameSize}, Flows: []string{FlowsMany, FlowsOne}, Routes: []int{0, 100000},
		Rules: 1000, Duration: 400 * time.Millisecond, Rounds: 3}
}

// QuickForwardOptions are --quick: every configuration checked and run
// once, 64-byte frames, no extra routes (seconds; what the tests run).
func QuickForwardOptions() ForwardOptions {
	return ForwardOptions{Sizes: []int{64}, Flows: []string{FlowsMany, FlowsOne}, Routes: []int{0},
		Rules: 1000, Duration: 100 * time.Millisecond, Rounds: 1}
}

// ForwardRun is one measurement of one configuration.
type ForwardRun struct {
	Offered     uint64  `json:"offered"`      // packets the generator sent
	Delivered   uint64  `json:"delivered"`    // packets the router's ingress veth took in
	RingDropped uint64  `json:"ring_dropped"` // packets its full ring refused
	Forwarded   uint64  `json:"forwarded"`    // packets the router forwarded: received intact by the sink, or refused by the sink's full ring
	SinkFull    uint64  `json:"sink_full"`    // of which refused by the sink's full ring
	WindowS     float64 `json:"window_s"`
	NAPINS      uint64  `json:"napi_ns"` // the router's NAPI thread CPU time
	SinkNS      uint64  `json:"sink_ns"` // the sink's NAPI thread CPU time (same CPU)
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

// ForwardPoint is one configuration with one traffic, frame size and
// route count: its runs, their medians, and median per-round ratios.
type ForwardPoint struct {
	Config      string       `json:"config"`
	Flows       string       `json:"flows"`
	Size        int          `json:"size"`
	Routes      int          `json:"routes"`
	Runs        []ForwardRun `json:"runs"`
	NsPerPacket float64      `json:"ns_per_packet"` // router CPU per packet (median)
	Mpps        float64      `json:"mpps"`          // forwarded per second of window (median)
	SinkNs      float64      `json:"sink_ns_per_packet"`
	Busy        float64      `json:"busy"`           // router NAPI thread CPU / window
	VsKernel    float64      `json:"cost_vs_kernel"` // ns/pkt over the kernel's, same traffic and round
	VsFloor     float64      `json:"cost_vs_floor"`  // ns/pkt over the bare XDP forwarder's
	VsNoRoutes  float64      `json:"cost_vs_no_routes,omitempty"`
}

// ForwardResult is a forward run.
type ForwardResult struct {
	Started  time.Time       `json:"started"`
	Command  string          `json:"command,omitempty"`
	Kernel   string          `json:"kernel"`
	CPUs     int             `json:"cpus"`
	GenCPU   int             `json:"gen_cpu"`
	DUTCPU   int             `json:"router_cpu"`
	Sizes    []int           `json:"sizes"`
	Flows    []string        `json:"flows"`
	Routes   []int           `json:"routes"`
	Configs  []string        `json:"configs"`
	Rules    int             `json:"rules"`
	Duration float64         `json:"duration_s"`
	Rounds   int             `json:"rounds"`
	Checks   []ForwardCheck  `json:"checks"`
	Points   []*ForwardPoint `json:"points"`
	Bars     []ForwardBar    `json:"bars"`
	Load     [2]string       `json:"loadavg"`
	Elapsed  float64         `json:"elapsed_s"`
}

// ForwardCheck is what the check of one configuration saw.
type ForwardCheck struct {
	Config    string `json:"config"`
	Flows     string `json:"flows"`
	Size      int    `json:"size"`
	Routes    int    `json:"routes"`
	Sent      uint64 `json:"sent"`
	Delivered uint64 `json:"delivered"`
	Forwarded uint64 `json:"forwarded"`
	// Established: the flows made established (forwarded and answered)
	// before (0: the configuration keeps no state, or the traffic is
	// left unanswered).
	Established int `json:"established"`
	// Proof is what else was counted to equal Delivered: the rule or
	// reason every packet took.
	Proof string `json:"proof"`
}

// fwdConfig is how the router is set up for one configuration.
type fwdConfig struct {
	name string
	// prog is the XDP program on both router veths.
	prog func() *ebpf.Program
	// netfilter is what the router's stack holds (nft flush ruleset
	// first): an iptables-nft-restore file, or an nft -f file.
	iptables, nft string
	// xdpfw's forwarding mode (configurations running xdpfw).
	mode datapath.ForwardMode
	// stateful: the flows are made established before each run.
	stateful bool
	// nat: the sink must see the router's address as the source.
	nat bool
	// proof counts what every delivered packet must have taken (nil:
	// the sink's counts alone).
	proof func() (uint64, string, error)
}

// fwdBench is one forward run's state.
type fwdBench struct {
	*bench
	opt      ForwardOptions
	sink     *Namespace
	out      Iface // the router's egress veth
	sinkIf   Iface
	sinkNAPI int
	progs    *benchProgs
	in, eg   *dutLink // XDP links on the router's ingress and egress veths
	dp       *datapath.Datapath
	gens     map[string]*Generator
	aims     map[string][]trafficgenGenAim
	cfgs     map[string]*fwdConfig
	nfLoaded string         // the configuration whose netfilter rules are in force
	routes   []netip.Prefix // the extra routes (fwdRoutes)
	raw      map[*Namespace]int
}

// Forward runs `xdpfw bench forward`: it builds the three namespaces,
// checks every configuration at every point (every packet the router took
// in reaches the sink intact, by the rule or path intended), measures them
// side by side in interleaved rounds, and removes everything again, also
// on error or when ctx ends.
func Forward(ctx context.Context, opt ForwardOptions) (res *ForwardResult, err error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if len(opt.Configs) == 0 {
		opt.Configs = ForwardConfigs
	}
	b := &fwdBench{bench: &bench{ctx: ctx, frames: map[int][]byte{}, say: sayer(opt.Progress)}, opt: opt,
		gens: map[string]*Generator{}, aims: map[string][]trafficgenGenAim{}, raw: map[*Namespace]int{}}
	res = &ForwardResult{Started: time.Now(), CPUs: runtime.NumCPU(), Sizes: opt.Sizes, Flows: opt.Flows, Routes: opt.Routes,
		Configs: opt.Configs, Rules: opt.Rules, Duration: opt.Duration.Seconds(), Rounds: opt.Rounds}
	res.Load[0], res.Kernel = runStart(b.say)
	var undo []func() error
	defer func() { err = errors.Join(err, undoAll(undo)) }()
	if undo, err = b.setup(undo); err != nil {
		return nil, err
	}
	res.GenCPU, res.DUTCPU = b.topo.GenCPU, b.topo.DUTCPU

	points := map[string]*ForwardPoint{}
	key := func(cfg, flows string, size, routes int) string {
		return fmt.Sprintf("%s/%s/%d/%d", cfg, flows, size, routes)
	}
	for _, routes := range opt.Routes {
		for _, size := range opt.Sizes {
			for _, flows := range opt.Flows {
				for _, cfg := range opt.Configs {
					p := &ForwardPoint{Config: cfg, Flows: flows, Size: size, Routes: routes}
					points[key(cfg, flows, size, routes)] = p
					res.Points = append(res.Points, p)
				}
			}
		}
	}
	// Rounds outermost, so the route counts are measured side by side
	// too: each round visits them in turn (odd rounds downwards, so each
	// round changes the table once), checking every configuration at a
	// route count the first time it is reached.
	routesNow, k := 0, 0
	checked := map[int]bool{}
	for round := range opt.Rounds {
		walk := slices.Clone(opt.Routes)
		if round%2 == 1 {
			slices.Reverse(walk)
		}
		for _, routes := range walk {
			if routes != routesNow {
				t0 := time.Now()
				if err := b.setRoutes(routesNow, routes); err != nil {
					return nil, err
				}
				b.say("routes: %d in the router's table besides the connected ones (%.1f s to change)", routes, time.Since(t0).Seconds())
				routesNow = routes
			}
			if !checked[routes] {
				checked[routes] = true
				for _, size := range opt.Sizes {
					for _, flows := range opt.Flows {
						for _, cfg := range opt.Configs {
							c, err := b.check(b.cfgs[cfg], flows, size)
							if err != nil {
								return nil, fmt.Errorf("checking %s, %s flow(s), %d B, %d routes: %w", cfg, flows, size, routes, err)
							}
							c.Routes = routes
							res.Checks = append(res.Checks, c)
						}
					}
				}
			}
			for _, size := range opt.Sizes {
				for _, flows := range opt.Flows {
					order := slices.Clone(opt.Configs)
					rot := k % len(order)
					order = append(order[rot:], order[:rot]...)
					k++
					for _, cfg := range order {
						r, err := b.run(b.cfgs[cfg], flows, size, opt.Duration)
						if err != nil {
							return nil, fmt.Errorf("%s, %s flow(s), %d B, %d routes: %w", cfg, flows, size, routes, err)
						}
						p := points[key(cfg, flows, size, routes)]
						p.Runs = append(p.Runs, r)
						b.say("round %d/%d %6d routes %4d B %-4s flow(s) %-12s %7.3f Mpps (offered %.3f, %2.0f%% refused) %6.0f ns/pkt (router, busy %3.0f%%) %6.0f ns/pkt (sink, busy %3.0f%%)",
							round+1, opt.Rounds, routes, size, flows, cfg, r.Mpps(), float64(r.Offered)/r.WindowS/1e6,
							100*float64(r.RingDropped)/float64(max(r.Offered, 1)), r.NsPerPacket(),
							100*float64(r.NAPINS)/1e9/r.WindowS, float64(r.SinkNS)/float64(max(r.Forwarded, 1)), 100*float64(r.SinkNS)/1e9/r.WindowS)
					}
				}
			}
		}
	}
	summarizeForward(res, points, key)
	res.Bars = ForwardBars(res)
	res.Load[1] = loadavg()
	res.Elapsed = time.Since(res.Started).Seconds()
	return res, nil
}

// Validate refuses options Forward cannot run, and completes Configs with
// the two references (the kernel and the floor).
func (opt *ForwardOptions) Validate() error {
	if opt.Rounds < 1 || opt.Duration <= 0 {
		return fmt.Errorf("forward: at least one round and a duration are needed")
	}
	if len(opt.Sizes) == 0 || len(opt.Flows) == 0 || len(opt.Routes) == 0 {
		return fmt.Errorf("forward: at least one frame size, traffic and route count are needed")
	}
	for _, s := range opt.Sizes {
		if s < MinFrameSize || s > MaxFrameSize {
			return fmt.Errorf("frame size %d: want %d..%d bytes", s, MinFrameSize, MaxFrameSize)
		}
	}
	for _, f := range opt.Flows {
		if f != FlowsOne && f != FlowsMany {
			return fmt.Errorf("traffic %q: want %s or %s", f, FlowsOne, FlowsMany)
		}
	}
	if !slices.IsSorted(opt.Routes) || opt.Routes[0] < 0 || opt.Routes[len(opt.Routes)-1] > maxFwdRoutes {
		return fmt.Errorf("route counts %v: want ascending, 0..%d", opt.Routes, maxFwdRoutes)
	}
	if opt.Rules < 1 || opt.Rules > maxFwdRules {
		return fmt.Errorf("%d rules: want 1..%d", opt.Rules, maxFwdRules)
	}
	for _, c := range opt.Configs {
		if c == FwdXdpfwNAT {
			return fmt.Errorf("configuration %s: xdpfw's own NAT is not built yet (issue 16 point 3); %s measures xdpfw beside the kernel's MASQUERADE", c, FwdXdpfwKMasq)
		}
		if !slices.Contains(ForwardConfigs, c) {
			return fmt.Errorf("configuration %q: want one of %s", c, strings.Join(ForwardConfigs, ", "))
		}
	}
	if len(opt.Configs) > 0 {
		// The ratios need both references.
		for _, must := range []string{FwdKernel, FwdFloor} {
			if !slices.Contains(opt.Configs, must) {
				opt.Configs = append(opt.Configs, must)
			}
		}
		slices.SortFunc(opt.Configs, func(a, b string) int {
			return slices.Index(ForwardConfigs, a) - slices.Index(ForwardConfigs, b)
		})
	}
	return nil
}

// Bounds: the extra routes are /24s (fwdRoutes), the rules' ports
// fwdPortBase and up.
const (
	maxFwdRoutes = 1 << 20
	maxFwdRules  = 50000
)

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

// configs makes the configurations.
func (b *fwdBench) configs() {
	pass := func() *ebpf.Program { return b.progs.objs.BenchPass }
	xdpfw := func() *ebpf.Program { return b.dp.Program() }
	fwdReason := func(r datapath.FwdReason) func() (uint64, string, error) {
		return func() (uint64, string, error) {
			cs, err := b.dp.ForwardCounters()
			return cs[r].Packets, "xdpfw's forwarding reason " + r.String(), err
		}
	}
	nftEst := func(bin string, args []string, re *regexp.Regexp, what string) func() (uint64, string, error) {
		return func() (uint64, string, error) {
			out, err := runTool(b.ctx, b.topo.DUT, stackCmd{bin: bin, args: args})
			if err != nil {
				return 0, "", err
			}
			m := re.FindSubmatch(out)
			if m == nil {
				return 0, "", fmt.Errorf("no counter of the ESTABLISHED rule in %s's output:\n%s", bin, out)
			}
			n, err := strconv.ParseUint(string(m[1]), 10, 64)
			return n, what, err
		}
	}
	b.cfgs = map[string]*fwdConfig{
		FwdKernel: {name: FwdKernel, prog: pass},
		FwdIptables: {name: FwdIptables, prog: pass, iptables: forwardRuleSet(b.opt.Rules), stateful: true,
			proof: nftEst("iptables-nft-save", []string{"-c", "-t", "filter"},
				regexp.MustCompile(`(?m)^\[(\d+):\d+\] -A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT$`),
				"iptables' ESTABLISHED rule")},
		FwdNft: {name: FwdNft, prog: pass, nft: nftForwardRuleSet(b.opt.Rules), stateful: true,
			proof: nftEst("nft", []string{"list", "chain", "ip", nftTable, "forward"},
				regexp.MustCompile(`ct state established,related counter packets (\d+) `), "nftables' ESTABLISHED rule")},
		FwdXdpfwStack: {name: FwdXdpfwStack, prog: xdpfw, mode: datapath.ForwardStack, stateful: true, proof: fwdReason(datapath.FwdStack)},
		FwdXdpfwXDP:   {name: FwdXdpfwXDP, prog: xdpfw, mode: datapath.ForwardXDPVeth, stateful: true, proof: fwdReason(datapath.FwdXDP)},
		FwdXdpfwKMasq: {name: FwdXdpfwKMasq, prog: xdpfw, mode: datapath.ForwardXDPVeth, iptables: masqRuleSet(b.out.Name), nat: true,
			proof: func() (uint64, string, error) {
				// Unanswered flows: each packet is NEW for xdpfw (and
				// the kernel), accepted by its rule; the kernel forwards.
				cs, err := b.dp.ForwardCounters()
				return cs[datapath.FwdKernelCT].Packets + cs[datapath.FwdKernelNAT].Packets, "xdpfw handing to the kernel (kernel-ct, kernel-nat)", err
			}},
		FwdFloor: {name: FwdFloor, prog: func() *ebpf.Program { return b.progs.objs.BenchFwd },
			proof: func() (uint64, string, error) {
				n, err := b.progs.count(dutSlotFwd)
				return n, "the bare forwarder's redirects", err
			}},
	}
}

// use puts configuration c in force on the router.
func (b *fwdBench) use(c *fwdConfig) error {
	if b.nfLoaded != c.name {
		// Each configuration starts from empty rules and connection
		// tables, the kernel's and xdpfw's: a connection another one
		// left must not decide how this one forwards (a connection the
		// kernel tracked before its nat table came is never
		// translated; one xdpfw saw answered takes its fast path).
		if _, err := runTool(b.ctx, b.topo.DUT, stackCmd{bin: "nft", args: []string{"flush", "ruleset"}}); err != nil {
			return err
		}
		b.nfLoaded = ""
		if err := b.flushConntrack(); err != nil {
			return err
		}
		switch {
		case c.iptables != "":
			if _, err := runTool(b.ctx, b.topo.DUT, stackCmd{"iptables-nft-restore", []string{"-w", "10"}, c.iptables}); err != nil {
				return err
			}
		case c.nft != "":
			if _, err := runTool(b.ctx, b.topo.DUT, stackCmd{"nft", []string{"-f", "-"}, c.nft}); err != nil {
				return err
			}
		}
		b.nfLoaded = c.name
	}
	if c.mode != "" {
		if err := b.dp.SetConfig(datapath.Config{MalformedAction: compile.ActDrop, Forward: c.mode}); err != nil {
			return err
		}
	}
	return errors.Join(b.in.set(c.prog()), b.eg.set(c.prog()))
}

// flushConntrack empties the kernel's connection table in the router's
// namespace and xdpfw's.
func (b *fwdBench) flushConntrack() error {
	h, err := netlink.NewHandleAt(b.topo.DUT.Handle)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.ConntrackTableFlush(netlink.ConntrackTable); err != nil {
		return fmt.Errorf("flushing the kernel's conntrack table in %s: %w", b.topo.DUT.Name, err)
	}
	if _, err := b.dp.CTFlush(); err != nil {
		return fmt.Errorf("flushing xdpfw's conntrack table: %w", err)
	}
	return nil
}

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
	st, err := linkStats(b.sink, b.sinkIf.Index)
	if err != nil {
		return n, err
	}
	n.sinkDrop = st.RxDropped
	if st, err = linkStats(b.topo.DUT, b.out.Index); err != nil {
		return n, err
	}
	n.refused = st.TxDropped
	if c.proof != nil {
		if n.proof, n.proofWhat, err = c.proof(); err != nil {
			return n, err
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

func (d *fwdDUT) name() string  { return d.c.name }
func (d *fwdDUT) use(int) error { return nil }
func (d *fwdDUT) close()        {}
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
		proofWhat: post.proofWhat, sinkNS: post.sinkNS - pre.sinkNS}
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
	}{{b.topo.DUT, b.topo.DUTIf}, {b.topo.DUT, b.out}, {b.sink, b.sinkIf}} {
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
	r, d, err := b.measure(c, func() (time.Duration, error) { return g.RunPackets(b.frames[size], sanityPackets) })
	if err != nil {
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

// run measures c with the traffic for dur.
func (b *fwdBench) run(c *fwdConfig, flows string, size int, dur time.Duration) (ForwardRun, error) {
	if err := b.ctx.Err(); err != nil {
		return ForwardRun{}, fmt.Errorf("interrupted: %w", err)
	}
	if err := b.use(c); err != nil {
		return ForwardRun{}, err
	}
	if _, err := b.establish(c, flows); err != nil {
		return ForwardRun{}, err
	}
	g := b.gens[flows]
	b.gen = g
	r, _, err := b.measure(c, func() (time.Duration, error) { return g.Run(b.ctx, b.frames[size], dur) })
	if err == nil {
		err = b.ctx.Err()
	}
	return r, err
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
		var s4 [4]byte
		binary.NativeEndian.PutUint32(s4[:], a.Saddr)
		src, port := netip.AddrFrom4(s4), bits.ReverseBytes16(a.Dport)
		var err error
		if fwd[i], err = ipPacket(src, sinkAddr.Addr(), oneFlowSPort, port); err != nil {
			return 0, err
		}
		if rep[i], err = ipPacket(sinkAddr.Addr(), src, port, oneFlowSPort); err != nil {
			return 0, err
		}
	}
	sink := func() (uint64, error) {
		ok, err := b.progs.count(dutSlotSinkOK)
		if err != nil {
			return 0, err
		}
		bad, err := b.progs.count(dutSlotSinkBad)
		return ok + bad, err
	}
	if err := b.sendPaced(b.topo.Gen, fwd, sink, "first packets, generator to sink"); err != nil {
		return 0, err
	}
	if err := b.sendPaced(b.sink, rep, func() (uint64, error) { return b.progs.count(dutSlotReply) }, "replies, sink to generator"); err != nil {
		return 0, err
	}
	return len(aims), nil
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

// fwdAims are the flows of a traffic (the generator's source address and
// destination port per packet, its source port fixed): many flows from
// successive addresses of TrafficSrc, their ports walking the n rules;
// one flow, the middle rule's.
func fwdAims(flows string, n int) []trafficgenGenAim {
	k := 1
	if flows == FlowsMany {
		k = fwdManyFlows
	}
	base := TrafficSrc.Addr().As4()
	b0 := binary.BigEndian.Uint32(base[:])
	aims := make([]trafficgenGenAim, k)
	for j := range aims {
		rule := j % n
		if k == 1 {
			rule = n / 2
		}
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], b0+1+uint32(j))
		aims[j] = trafficgenGenAim{Saddr: binary.NativeEndian.Uint32(a[:]), Dport: bits.ReverseBytes16(uint16(fwdPortBase + rule))}
	}
	return aims
}

// forwardRuleSet is the router's stateful FORWARD chain in iptables-save
// format, for iptables-nft-restore and xdpfw alike: established and
// related traffic accepted first, then n rules each accepting new UDP
// connections from the generator's addresses to the sink on one port
// (the many-flows traffic walks them all), policy DROP.
func forwardRuleSet(n int) string {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	b.WriteString("-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n")
	for i := range n {
		fmt.Fprintf(&b, "-A FORWARD -s %v -d %v/32 -p udp -m udp --dport %d -m conntrack --ctstate NEW -j ACCEPT\n",
			TrafficSrc, sinkAddr.Addr(), fwdPortBase+i)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// nftForwardRuleSet is forwardRuleSet in native nftables.
func nftForwardRuleSet(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n\tchain forward {\n\t\ttype filter hook forward priority filter; policy drop;\n", nftTable)
	b.WriteString("\t\tct state established,related counter accept\n")
	for i := range n {
		fmt.Fprintf(&b, "\t\tip saddr %v ip daddr %v udp dport %d ct state new accept\n", TrafficSrc, sinkAddr.Addr(), fwdPortBase+i)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// masqRuleSet masquerades what leaves by dev (the kernel's nat table).
func masqRuleSet(dev string) string {
	return "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A POSTROUTING -o " + dev + " -j MASQUERADE\nCOMMIT\n"
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

// summarizeForward fills each point's medians and its median per-round
// ratios to the kernel, the floor and (with extra routes) itself without.
func summarizeForward(res *ForwardResult, points map[string]*ForwardPoint, key func(string, string, int, int) string) {
	ns := func(p *ForwardPoint) []float64 {
		var v []float64
		for _, r := range p.Runs {
			v = append(v, r.NsPerPacket())
		}
		return v
	}
	for _, p := range res.Points {
		var mpps, sink, busy []float64
		for _, r := range p.Runs {
			mpps = append(mpps, r.Mpps())
			sink = append(sink, float64(r.SinkNS)/float64(max(r.Forwarded, 1)))
			busy = append(busy, float64(r.NAPINS)/1e9/r.WindowS)
		}
		p.NsPerPacket, p.Mpps, p.SinkNs, p.Busy = median(ns(p)), median(mpps), median(sink), median(busy)
		if k := points[key(FwdKernel, p.Flows, p.Size, p.Routes)]; k != nil {
			p.VsKernel = medianRatio(ns(p), ns(k))
		}
		if f := points[key(FwdFloor, p.Flows, p.Size, p.Routes)]; f != nil {
			p.VsFloor = medianRatio(ns(p), ns(f))
		}
		if z := points[key(p.Config, p.Flows, p.Size, 0)]; z != nil && p.Routes != 0 {
			p.VsNoRoutes = medianRatio(ns(p), ns(z))
		}
	}
}

// ForwardBar is one of issue 16's bars, as this run measured it.
type ForwardBar struct {
	Bar    string  `json:"bar"`
	Value  float64 `json:"value"`
	Target float64 `json:"target"` // at most
	Met    bool    `json:"met"`    // Value <= Target
	Margin float64 `json:"margin"` // Target / Value: above 1, the room left; below, the shortfall
	Where  string  `json:"where"`  // the points compared
	Note   string  `json:"note,omitempty"`
}

// ForwardBars evaluates the bars on the many-flows traffic at the
// smallest frame size measured (the costliest per byte): the fast path
// against the kernel with no firewall and against the bare XDP forwarder,
// and its cost growth with the most routes against the floor's.
func ForwardBars(res *ForwardResult) []ForwardBar {
	find := func(cfg, flows string, size, routes int) *ForwardPoint {
		for _, p := range res.Points {
			if p.Config == cfg && p.Flows == flows && p.Size == size && p.Routes == routes {
				return p
			}
		}
		return nil
	}
	if len(res.Sizes) == 0 || len(res.Routes) == 0 {
		return nil
	}
	size, flows := slices.Min(res.Sizes), res.Flows[0]
	if slices.Contains(res.Flows, FlowsMany) {
		flows = FlowsMany
	}
	bar := func(name string, v, target float64, where, note string) ForwardBar {
		b := ForwardBar{Bar: name, Value: v, Target: target, Met: v > 0 && v <= target, Where: where, Note: note}
		if v > 0 {
			b.Margin = target / v
		}
		return b
	}
	var out []ForwardBar
	at := fmt.Sprintf("%s flows, %d B, %d routes, %d rules", flows, size, res.Routes[0], res.Rules)
	if p := find(FwdXdpfwXDP, flows, size, res.Routes[0]); p != nil {
		out = append(out,
			bar("xdpfw fast path / kernel forwarding without a firewall", p.VsKernel, 1.0/3, at, ""),
			bar("xdpfw fast path / bare XDP FIB forwarder", p.VsFloor, 1.3, at, ""))
	}
	if p := find(FwdXdpfwKMasq, flows, size, res.Routes[0]); p != nil {
		out = append(out, bar("MASQUERADE on every flow / bare XDP FIB forwarder", p.VsFloor, 1.5, at,
			"xdpfw beside the kernel's MASQUERADE (the kernel forwards); the bar is for xdpfw's own NAT (configuration xdpfw-nat, branch nat)"))
	}
	if most := res.Routes[len(res.Routes)-1]; most != 0 {
		x, f := find(FwdXdpfwXDP, flows, size, most), find(FwdFloor, flows, size, most)
		if x != nil && f != nil && f.VsNoRoutes > 0 {
			out = append(out, bar(fmt.Sprintf("%d routes: xdpfw's cost growth / the floor's", most), x.VsNoRoutes/f.VsNoRoutes, 1,
				fmt.Sprintf("%s flows, %d B: xdpfw x%.3f, floor x%.3f", flows, size, x.VsNoRoutes, f.VsNoRoutes), ""))
		}
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
