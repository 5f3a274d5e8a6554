package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// The devices under test.
const (
	DUTXdpfw          = "xdpfw"           // the firewall with the generated rule set
	DUTDrop           = "xdp-drop"        // a bare XDP_DROP program: the floor
	DUTIptablesNFT    = "iptables-nft"    // iptables (nf_tables back end), the Debian default
	DUTIptablesLegacy = "iptables-legacy" // iptables (x_tables back end)
	DUTNftLinear      = "nft-linear"      // nftables, one rule per iptables rule
	DUTNftSet         = "nft-set"         // nftables best practice: one rule, a concatenated interval set
	// DUTXdpfwAudit is xdpfw with its rule set audited beside itself
	// (docs/audit.md): every packet classified twice. Measured only when
	// asked (--dut).
	DUTXdpfwAudit = "xdpfw-audit"
)

// AllDUTs is every DUT, in the order tables list them.
var AllDUTs = []string{DUTDrop, DUTXdpfw, DUTIptablesNFT, DUTIptablesLegacy, DUTNftLinear, DUTNftSet, DUTXdpfwAudit}

// Slots of dut_stats (bpf/bench/dut.c).
const (
	dutSlotDrop    = 0
	dutSlotPass    = 1
	dutSlotFwd     = 2 // bench_fwd
	dutSlotSinkOK  = 3 // bench_sink: as forwarded frames must be
	dutSlotSinkBad = 4 // bench_sink: anything else
	dutSlotSinkNAT = 5 // bench_sink: as forwarded frames must be, source translated
	dutSlotReply   = 6 // bench_reply
)

// MacroRuleSet is the benchmark's rule set of n rules in iptables-save
// format, given to iptables-restore and to xdpfw alike: n-1 rules that do
// not match the traffic (a /32 source in 10.201.0.0/16 and up, a UDP port
// each), then the one that drops it. INPUT's policy is ACCEPT, so the last
// rule alone decides. Rules are written the way iptables-save prints them,
// so its counter line can be found again.
func MacroRuleSet(n int) string { return macroShape.iptables(n) }

// ruleShape is where a benchmark's rule set sits and what its rules do:
// the macro benchmark's drop in INPUT; the latency benchmark's accept in
// FORWARD (policy DROP), after one rule accepting the answers that come
// back from the sink (established, in by answersIf), so that xdpfw and
// the kernel track the connections.
type ruleShape struct {
	chain     string // iptables chain: INPUT or FORWARD
	target    string // the rules' target: DROP or ACCEPT
	policy    string // the chain's policy
	answersIf string // FORWARD: the interface the answers come in by ("": no such rule)
}

var macroShape = ruleShape{chain: "INPUT", target: "DROP", policy: "ACCEPT"}

// iptables is the rule set of n rules (plus the answers' rule) in
// iptables-save format.
func (s ruleShape) iptables(n int) string {
	var b strings.Builder
	pol := map[string]string{"INPUT": "ACCEPT", "FORWARD": "ACCEPT", "OUTPUT": "ACCEPT"}
	pol[s.chain] = s.policy
	fmt.Fprintf(&b, "*filter\n:INPUT %s [0:0]\n:FORWARD %s [0:0]\n:OUTPUT %s [0:0]\n", pol["INPUT"], pol["FORWARD"], pol["OUTPUT"])
	if s.answersIf != "" {
		fmt.Fprintf(&b, "-A %s -i %s -m conntrack --ctstate ESTABLISHED -j ACCEPT\n", s.chain, s.answersIf)
	}
	writeNonMatching(&b, n, "-A "+s.chain+" -s %v/32 -p udp -m udp --dport %d -j "+s.target+"\n")
	b.WriteString(s.last() + "\n")
	b.WriteString("COMMIT\n")
	return b.String()
}

// last is the rule for the traffic from TrafficSrc, as iptables-save
// prints it.
func (s ruleShape) last() string {
	return fmt.Sprintf("-A %s -s %v -p udp -m udp --dport %d -j %s", s.chain, TrafficSrc, TrafficDPort, s.target)
}

// writeNonMatching writes the n-1 rules that do not match the traffic,
// each with format (its verbs: the source address, the UDP port).
func writeNonMatching(b *strings.Builder, n int, format string) {
	for i := 0; i < n-1; i++ {
		src, port := nonMatching(i)
		fmt.Fprintf(b, format, src, port)
	}
}

// nonMatching is rule i's source address and UDP port (i < n-1).
func nonMatching(i int) (netip.Addr, uint16) {
	return netip.AddrFrom4([4]byte{10, byte(201 + i>>16), byte(i >> 8), byte(i)}), uint16(1000 + i%5000)
}

// macroAims are the (source address, UDP port) pairs that walk
// MacroRuleSet(n) (`bench macro --spread`): one per rule, the last rule's
// from its /17, in a random order fixed by n.
func macroAims(n int) []trafficgenGenAim {
	aims := make([]trafficgenGenAim, n)
	rnd := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range aims {
		src, port := nonMatching(i)
		if i == n-1 {
			src, port = randIn(rnd, TrafficSrc, false), TrafficDPort
		}
		a := src.As4()
		aims[i] = trafficgenGenAim{Saddr: binary.NativeEndian.Uint32(a[:]), Dport: bits.ReverseBytes16(port)}
	}
	rnd.Shuffle(n, func(i, j int) { aims[i], aims[j] = aims[j], aims[i] })
	return aims
}

// MaxMacroRules bounds the rule count (the rule sources of MacroRuleSet,
// and xdpfw's counter slots).
const MaxMacroRules = 60000

// lastRule drops the generated traffic.
var lastRule = macroShape.last()

// dut is one device under test: an XDP program on the DUT's veth, and for
// iptables the rules in the DUT's namespace.
type dut interface {
	name() string
	// use puts the DUT with a rule set of n rules in force on the veth.
	use(n int) error
	// dropped is the running count of packets its intended rule dropped.
	dropped() (uint64, error)
	// check tells whether the counts of a run are consistent with every
	// delivered packet having been dropped by the intended rule.
	check(delivered, dropped uint64) error
	close()
}

// dutLink is the one XDP link on the DUT's veth (native mode). Switching
// DUTs updates the link's program atomically: the veth keeps its NAPI
// instance (and so its NAPI thread) from one DUT to the next.
type dutLink struct {
	l link.Link
}

// attachXDP attaches prog to i in ns (native mode).
func attachXDP(ns *Namespace, i Iface, prog *ebpf.Program) (*dutLink, error) {
	var l link.Link
	err := ns.Do(func() error {
		var err error
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: i.Index, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attaching XDP (native mode) to %s: %w", i.Name, err)
	}
	return &dutLink{l: l}, nil
}

// routerLinks are the DUT's XDP links on its two veths of a router
// topology (from the generator, to the sink), which a configuration sets
// to one program at once.
type routerLinks [2]*dutLink

// attachRouter attaches prog to both of the router's veths, each link's
// removal on undo.
func attachRouter(t *Topology, prog *ebpf.Program, undo *undoSteps) (routerLinks, error) {
	var r routerLinks
	for i, ifc := range []Iface{t.DUTIf, t.RouteIf} {
		l, err := attachXDP(t.DUT, ifc, prog)
		if err != nil {
			return r, err
		}
		*undo = append(*undo, l.l.Close)
		r[i] = l
	}
	return r, nil
}

// attachEnds attaches sink to the sink's veth and gen to the generator's
// (router topology: what reaches the sink, what comes back), each link's
// removal on undo.
func attachEnds(t *Topology, sink, gen *ebpf.Program, undo *undoSteps) error {
	for _, a := range []struct {
		ns   *Namespace
		i    Iface
		prog *ebpf.Program
	}{{t.Sink, t.SinkIf, sink}, {t.Gen, t.GenIf, gen}} {
		l, err := attachXDP(a.ns, a.i, a.prog)
		if err != nil {
			return err
		}
		*undo = append(*undo, l.l.Close)
	}
	return nil
}

// set puts prog on both of the router's veths.
func (r routerLinks) set(prog *ebpf.Program) error {
	for _, l := range r {
		if err := l.set(prog); err != nil {
			return err
		}
	}
	return nil
}

func (d *dutLink) set(prog *ebpf.Program) error {
	if err := d.l.Update(prog); err != nil {
		return fmt.Errorf("switching the DUT's XDP program: %w", err)
	}
	return nil
}

// benchProgs are the bare programs of bpf/bench/dut.c.
type benchProgs struct {
	objs dutObjects
}

// loadDUTPrograms loads bpf/bench/dut.c's programs with vars set (what
// bench_sink expects) and, on a router topology t, the floor's devmap
// holding the DUT's two veths.
func loadDUTPrograms(t *Topology, vars map[string]any) (*benchProgs, error) {
	spec, err := loadDut()
	if err != nil {
		return nil, fmt.Errorf("loading the benchmark's DUT programs: %w", err)
	}
	for name, v := range vars {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	p := &benchProgs{}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the benchmark's DUT programs: %w", err)
	}
	if t.Sink == nil {
		return p, nil
	}
	// The floor (bench_fwd) redirects between the router's two veths. A
	// devmap entry names a device of the namespace that writes it.
	if err := t.DUT.Do(func() error {
		for _, i := range []int{t.DUTIf.Index, t.RouteIf.Index} {
			if err := p.objs.FwdPorts.Put(uint32(i), uint32(i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		p.objs.Close()
		return nil, fmt.Errorf("the floor's devmap: %w", err)
	}
	return p, nil
}

func (p *benchProgs) count(slot uint32) (uint64, error) {
	var per []dutBenchCounter
	if err := p.objs.DutStats.Lookup(slot, &per); err != nil {
		return 0, fmt.Errorf("reading dut_stats: %w", err)
	}
	var n uint64
	for _, c := range per {
		n += c.Packets
	}
	return n, nil
}

// dropDUT is the floor: count and XDP_DROP.
type dropDUT struct {
	link  *dutLink
	progs *benchProgs
}

func (d *dropDUT) name() string             { return DUTDrop }
func (d *dropDUT) use(int) error            { return d.link.set(d.progs.objs.BenchDrop) }
func (d *dropDUT) dropped() (uint64, error) { return d.progs.count(dutSlotDrop) }
func (d *dropDUT) close()                   {}
func (d *dropDUT) check(delivered, dropped uint64) error {
	if dropped != delivered {
		return fmt.Errorf("the veth delivered %d packets, the XDP_DROP program counted %d", delivered, dropped)
	}
	return nil
}

// xdpfwDUT is the firewall: one data plane per rule count (loaded and
// installed with the datapath API, as `xdpfw load` does) in a private
// bpffs; use switches the veth's program to that rule count's.
type xdpfwDUT struct {
	link *dutLink
	dps  map[int]*datapath.Datapath
	last map[int]uint32   // id of the last rule, per rule count
	ids  map[int][]uint32 // every rule's id, per rule count
	cur  int
	// spread: the traffic walks the rule set (macroAims): every rule
	// counts what it drops.
	spread bool
	// audits: with DUTXdpfwAudit, each data plane's rule set audited
	// beside itself.
	audits []*datapath.Audit
}

// XdpfwSetup is what loading one rule count cost.
type XdpfwSetup struct {
	Rules     int     `json:"rules"`
	CompileMS float64 `json:"compile_ms"`
	InstallMS float64 `json:"install_ms"`
}

// newXdpfwDUT loads a data plane for every rule count under pinRoot and
// checks, with BPF_PROG_TEST_RUN in the DUT's namespace (the chain is
// picked by a FIB lookup there), that the generator's frame is dropped by
// the last rule.
func newXdpfwDUT(t *Topology, l *dutLink, pinRoot string, counts []int, frame []byte, spread, audit bool) (*xdpfwDUT, []XdpfwSetup, error) {
	d := &xdpfwDUT{link: l, dps: map[int]*datapath.Datapath{}, last: map[int]uint32{}, ids: map[int][]uint32{}, spread: spread}
	var setups []XdpfwSetup
	for _, n := range counts {
		if _, ok := d.dps[n]; ok {
			continue
		}
		c, err := compileText(MacroRuleSet(n), n, rules.ParseOptions{Family: rules.FamilyIPv4})
		if err != nil {
			d.close()
			return nil, nil, fmt.Errorf("%d rules: %w", n, err)
		}
		tables, ids := c.tables, c.ids
		s := XdpfwSetup{Rules: n, CompileMS: c.compileMS}
		dp, err := datapath.Load(filepath.Join(pinRoot, fmt.Sprintf("xdpfw-%d", n)), c.lim)
		if err != nil {
			d.close()
			return nil, nil, err
		}
		d.dps[n] = dp
		t0 := time.Now()
		if err := dp.Install(tables); err != nil {
			d.close()
			return nil, nil, err
		}
		s.InstallMS = msSince(t0)
		if err := dp.SetConfig(datapath.Config{MalformedAction: compile.ActDrop}); err != nil {
			d.close()
			return nil, nil, err
		}
		if audit {
			a, err := dp.StartAudit(tables, compile.DefaultLogSnap, time.Second, 1)
			if err != nil {
				d.close()
				return nil, nil, err
			}
			d.audits = append(d.audits, a)
		}
		d.last[n], d.ids[n] = ids[len(ids)-1], ids
		setups = append(setups, s)
		if err := checkXdpfwFrames(t, dp, n, frame, ids, spread); err != nil {
			d.close()
			return nil, nil, err
		}
	}
	return d, setups, nil
}

// checkXdpfwFrames runs the generator's frame through dp with
// BPF_PROG_TEST_RUN in the DUT's namespace (the chain is picked by a FIB
// lookup there): it must be dropped by the last rule, and with spread each
// rule's frame (macroAims) by its rule.
func checkXdpfwFrames(t *Topology, dp *datapath.Datapath, n int, frame []byte, ids []uint32, spread bool) error {
	check := func(f []byte, want uint32) error {
		var tr datapath.TraceResult
		err := t.DUT.Do(func() error {
			var err error
			tr, err = dp.Trace(f, uint32(t.DUTIf.Index), datapath.NoCTState)
			return err
		})
		if err != nil {
			return err
		}
		if tr.RuleID != want || tr.XDPAction != datapath.XDPDrop {
			return fmt.Errorf("xdpfw with %d rules: a benchmark frame got XDP action %d by rule id %d, want XDP_DROP by rule id %d",
				n, tr.XDPAction, tr.RuleID, want)
		}
		return nil
	}
	if err := check(frame, ids[n-1]); err != nil || !spread {
		return err
	}
	byPair := map[trafficgenGenAim]uint32{}
	for i := 0; i < n-1; i++ {
		src, port := nonMatching(i)
		a := src.As4()
		byPair[trafficgenGenAim{Saddr: binary.NativeEndian.Uint32(a[:]), Dport: bits.ReverseBytes16(port)}] = ids[i]
	}
	f := slices.Clone(frame)
	for _, a := range macroAims(n) {
		want, ok := byPair[a]
		if !ok {
			want = ids[n-1]
		}
		binary.NativeEndian.PutUint32(f[14+12:], a.Saddr)
		binary.NativeEndian.PutUint16(f[14+20+2:], a.Dport)
		if err := check(f, want); err != nil {
			return err
		}
	}
	return nil
}

func (d *xdpfwDUT) name() string {
	if d.audits != nil {
		return DUTXdpfwAudit
	}
	return DUTXdpfw
}

func (d *xdpfwDUT) use(n int) error {
	dp, ok := d.dps[n]
	if !ok {
		return fmt.Errorf("xdpfw: no data plane loaded for %d rules", n)
	}
	d.cur = n
	return d.link.set(dp.Program())
}

func (d *xdpfwDUT) dropped() (uint64, error) {
	if !d.spread {
		c, err := d.dps[d.cur].RuleCounter(d.last[d.cur])
		return c.Packets, err
	}
	cs, err := d.dps[d.cur].RuleCounters(d.ids[d.cur])
	var sum uint64
	for _, c := range cs {
		sum += c.Packets
	}
	return sum, err
}

func (d *xdpfwDUT) check(delivered, dropped uint64) error {
	if dropped != delivered && d.spread {
		return fmt.Errorf("the veth delivered %d packets, xdpfw's %d rules counted %d", delivered, d.cur, dropped)
	}
	if dropped != delivered {
		return fmt.Errorf("the veth delivered %d packets, xdpfw's last rule (id %d of %d rules) counted %d",
			delivered, d.last[d.cur], d.cur, dropped)
	}
	return nil
}

func (d *xdpfwDUT) close() {
	for _, a := range d.audits {
		a.Close()
	}
	for _, dp := range d.dps {
		dp.Close()
	}
	d.dps = nil
}

// privateBPFFS mounts a bpffs on a new temporary directory: the data
// planes are pinned there, and unmounting removes every pin at once.
func privateBPFFS() (dir string, cleanup func() error, err error) {
	dir, err = os.MkdirTemp("", fmt.Sprintf("%s%d-", bpffsPrefix, os.Getpid()))
	if err != nil {
		return "", nil, err
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		os.Remove(dir)
		return "", nil, fmt.Errorf("mounting a private bpffs: %w", err)
	}
	return dir, func() error {
		return errors.Join(unix.Unmount(dir, unix.MNT_DETACH), os.Remove(dir))
	}, nil
}
