package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"net/netip"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
)

// `xdpfw bench forward` (docs/bench.md, "bench forward"): the router
// topology (NewRouterTopology), the DUT routing between the generator and
// the sink.
//
// The generator sends IPv4/UDP to the sink's address through the router's
// MAC; the router forwards (by one of the configurations below) to the
// sink, whose XDP program checks and counts every frame and drops it.
// The router's cost is the CPU time of the NAPI thread polling its
// ingress veth (everything forwarding does, up to handing the frame to
// the sink's queue, runs there), per packet forwarded.

// The configurations of the router.
const (
	FwdKernel     = DUTKernelFwd  // the kernel forwards, no firewall (an XDP_PASS program on the veths); bench latency's floor too
	FwdIptables   = "iptables"    // the kernel forwards, iptables-nft's stateful FORWARD chain (forwardRuleSet)
	FwdNft        = "nftables"    // the kernel forwards, the same chain in native nftables
	FwdXdpfwStack = "xdpfw-stack" // xdpfw with forwardRuleSet, --forward stack: the kernel forwards
	FwdXdpfwXDP   = "xdpfw-xdp"   // xdpfw with forwardRuleSet, the fast path (--forward xdp-veth on these veths)
	FwdXdpfwKMasq = "xdpfw-kmasq" // xdpfw-xdp beside the kernel's MASQUERADE (its nat table): the kernel forwards
	FwdFloor      = DUTXDPFwd     // a bare XDP FIB forwarder (bpf/bench/dut.c bench_fwd): the floor; bench latency's too
	// FwdXdpfwNAT is xdpfw's own MASQUERADE (`load --nat xdpfw`,
	// docs/nat.md): xdpfw-xdp loaded with NAT and the nat table
	// "-A POSTROUTING -o xbrPID -j MASQUERADE" (natRuleSet); every flow
	// translated by a binding made before the run (establish).
	FwdXdpfwNAT = "xdpfw-nat"
)

// ForwardConfigs is every configuration, in the order tables list them.
var ForwardConfigs = []string{FwdKernel, FwdIptables, FwdNft, FwdXdpfwStack, FwdXdpfwXDP, FwdXdpfwKMasq, FwdFloor, FwdXdpfwNAT}

// The traffics: one flow, or fwdManyFlows flows spread over the rules.
const (
	FlowsOne  = "one"
	FlowsMany = "many"
)

// fwdManyFlows is the number of flows of the many-flows traffic: the
// generator cycles through them, so each is an established connection
// after its first packet and its reply (establish).
const fwdManyFlows = 8192

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
// 3 minutes on a 2-CPU VM.
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
	Started  time.Time         `json:"started"`
	Command  string            `json:"command,omitempty"`
	Kernel   string            `json:"kernel"`
	CPUs     int               `json:"cpus"`
	GenCPU   int               `json:"gen_cpu"`
	DUTCPU   int               `json:"router_cpu"`
	Sizes    []int             `json:"sizes"`
	Flows    []string          `json:"flows"`
	Routes   []int             `json:"routes"`
	Configs  []string          `json:"configs"`
	Rules    int               `json:"rules"`
	Duration float64           `json:"duration_s"`
	Rounds   int               `json:"rounds"`
	Skipped  map[string]string `json:"skipped,omitempty"` // configuration -> why it was not measured (its tools are missing)
	Checks   []ForwardCheck    `json:"checks"`
	Points   []*ForwardPoint   `json:"points"`
	Bars     []ForwardBar      `json:"bars"`
	Load     [2]string         `json:"loadavg"`
	Elapsed  float64           `json:"elapsed_s"`
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
	// xdpfw's forwarding mode and instance (configurations running
	// xdpfw): fwdBench.dp, or fwdBench.dpNAT (loaded with NAT).
	mode datapath.ForwardMode
	dp   *datapath.Datapath
	// stateful: the flows are made established before each run.
	stateful bool
	// nat: the sink must see the router's address as the source.
	nat bool
	// xnat: xdpfw translates (dp is dpNAT): the flows' bindings are
	// made before each run, the sink must see each flow with its
	// binding's tuple, and the run must bind nothing (nat counters).
	xnat bool
	// proof counts what every delivered packet must have taken (nil:
	// the sink's counts alone).
	proof func() (uint64, string, error)
}

// fwdBench is one forward run's state.
type fwdBench struct {
	*bench
	opt      ForwardOptions
	sinkNAPI int
	progs    *benchProgs
	links    routerLinks        // XDP links on the router's ingress and egress veths
	dp       *datapath.Datapath // xdpfw, loaded without NAT
	dpNAT    *datapath.Datapath // xdpfw, loaded with NAT (--nat xdpfw): FwdXdpfwNAT
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
	skipped := map[string]string{}
	if len(opt.Configs) == 0 {
		for _, c := range ForwardConfigs {
			if err := forwardToolsMissing(c); err != nil {
				skipped[c] = err.Error()
				continue
			}
			opt.Configs = append(opt.Configs, c)
		}
	} else {
		for _, c := range opt.Configs {
			if err := forwardToolsMissing(c); err != nil {
				return nil, fmt.Errorf("configuration %s: %w", c, err)
			}
		}
	}
	b := &fwdBench{bench: &bench{ctx: ctx, frames: map[int][]byte{}, say: sayer(opt.Progress)}, opt: opt,
		gens: map[string]*Generator{}, aims: map[string][]trafficgenGenAim{}, raw: map[*Namespace]int{}}
	res = &ForwardResult{Started: time.Now(), CPUs: runtime.NumCPU(), Sizes: opt.Sizes, Flows: opt.Flows, Routes: opt.Routes,
		Configs: opt.Configs, Rules: opt.Rules, Duration: opt.Duration.Seconds(), Rounds: opt.Rounds}
	res.Load[0], res.Kernel = runStart(b.say)
	res.Skipped = skipped
	for c, why := range skipped {
		b.say("skipping %s: %s", c, why)
	}
	var undo undoSteps
	defer undo.run(&err)
	if err := b.setup(&undo); err != nil {
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

// forwardTools are the programs a configuration runs in the router's
// namespace (nft also empties the rules between configurations).
var forwardTools = map[string][]string{
	FwdIptables:   {"iptables-nft-restore", "iptables-nft-save", "nft"},
	FwdNft:        {"nft"},
	FwdXdpfwKMasq: {"iptables-nft-restore", "nft"},
}

// forwardToolsMissing says which of configuration c's tools is not
// installed, if one is.
func forwardToolsMissing(c string) error {
	for _, bin := range forwardTools[c] {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s is not installed", bin)
		}
	}
	return nil
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
		if s < minFwdFrameSize || s > MaxFrameSize {
			return fmt.Errorf("frame size %d: want %d..%d bytes (the flow's tag needs 4 bytes of payload)", s, minFwdFrameSize, MaxFrameSize)
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
	// minFwdFrameSize leaves room for the generator's flow tag (tagged
	// mode, bpf/bench/trafficgen.c).
	minFwdFrameSize = MinFrameSize + 4
)

// configs makes the configurations.
func (b *fwdBench) configs() {
	pass := func() *ebpf.Program { return b.progs.objs.BenchPass }
	xdpfw := func() *ebpf.Program { return b.dp.Program() }
	fwdReason := func(dp *datapath.Datapath, r datapath.FwdReason) func() (uint64, string, error) {
		return func() (uint64, string, error) {
			cs, err := dp.ForwardCounters()
			return cs[r].Packets, "xdpfw's forwarding reason " + r.String(), err
		}
	}
	nftEst := func(bin string, args []string, re *regexp.Regexp, what string) func() (uint64, string, error) {
		return func() (uint64, string, error) {
			out, err := runIn(b.ctx, b.topo.DUT, stackCmd{bin: bin, args: args})
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
		FwdXdpfwStack: {name: FwdXdpfwStack, prog: xdpfw, mode: datapath.ForwardStack, dp: b.dp, stateful: true, proof: fwdReason(b.dp, datapath.FwdStack)},
		FwdXdpfwXDP:   {name: FwdXdpfwXDP, prog: xdpfw, mode: datapath.ForwardXDPVeth, dp: b.dp, stateful: true, proof: fwdReason(b.dp, datapath.FwdXDP)},
		FwdXdpfwNAT: {name: FwdXdpfwNAT, prog: func() *ebpf.Program { return b.dpNAT.Program() }, mode: datapath.ForwardXDPVeth, dp: b.dpNAT,
			stateful: true, nat: true, xnat: true, proof: fwdReason(b.dpNAT, datapath.FwdXDP)},
		FwdXdpfwKMasq: {name: FwdXdpfwKMasq, prog: xdpfw, mode: datapath.ForwardXDPVeth, dp: b.dp, iptables: masqRuleSet(b.topo.RouteIf.Name), nat: true,
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
		if forwardToolsMissing(FwdNft) == nil { // without nft, no configuration loads rules
			if _, err := runIn(b.ctx, b.topo.DUT, stackCmd{bin: "nft", args: []string{"flush", "ruleset"}}); err != nil {
				return err
			}
		}
		b.nfLoaded = ""
		if err := b.flushConntrack(); err != nil {
			return err
		}
		switch {
		case c.iptables != "":
			if _, err := runIn(b.ctx, b.topo.DUT, stackCmd{"iptables-nft-restore", []string{"-w", "10"}, c.iptables}); err != nil {
				return err
			}
		case c.nft != "":
			if _, err := runIn(b.ctx, b.topo.DUT, stackCmd{"nft", []string{"-f", "-"}, c.nft}); err != nil {
				return err
			}
		}
		b.nfLoaded = c.name
	}
	if c.mode != "" {
		if err := c.dp.SetConfig(datapath.Config{MalformedAction: compile.ActDrop, Forward: c.mode}); err != nil {
			return err
		}
	}
	return b.links.set(c.prog())
}

// flushConntrack empties the kernel's connection table in the router's
// namespace and xdpfw's (both instances', and the bindings of the one
// that translates).
func (b *fwdBench) flushConntrack() error {
	h, err := netlink.NewHandleAt(b.topo.DUT.Handle)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.ConntrackTableFlush(netlink.ConntrackTable); err != nil {
		return fmt.Errorf("flushing the kernel's conntrack table in %s: %w", b.topo.DUT.Name, err)
	}
	for _, dp := range []*datapath.Datapath{b.dp, b.dpNAT} {
		if err := flushXdpfw(dp); err != nil {
			return err
		}
	}
	return nil
}

// flushXdpfw empties an xdpfw instance's connection table and bindings
// (nil: none loaded).
func flushXdpfw(dp *datapath.Datapath) error {
	if dp == nil {
		return nil
	}
	if _, err := dp.CTFlush(); err != nil {
		return fmt.Errorf("flushing xdpfw's conntrack table: %w", err)
	}
	_, err := dp.NATFlush()
	return err
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

// masqRuleSet masquerades what leaves by dev: the kernel's nat table
// (FwdXdpfwKMasq), or with forwardRuleSet xdpfw's (FwdXdpfwNAT).
func masqRuleSet(dev string) string {
	return "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A POSTROUTING -o " + dev + " -j MASQUERADE\nCOMMIT\n"
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
	if p := find(FwdXdpfwNAT, flows, size, res.Routes[0]); p != nil {
		out = append(out, bar("xdpfw MASQUERADE on every flow / bare XDP FIB forwarder", p.VsFloor, 1.5, at,
			"xdpfw's own NAT (--nat xdpfw), established flows, bound before the run"))
	} else if p := find(FwdXdpfwKMasq, flows, size, res.Routes[0]); p != nil {
		out = append(out, bar("MASQUERADE on every flow / bare XDP FIB forwarder", p.VsFloor, 1.5, at,
			"xdpfw beside the kernel's MASQUERADE (the kernel forwards); the bar is for xdpfw's own NAT (configuration xdpfw-nat)"))
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
