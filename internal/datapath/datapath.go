// Package datapath loads the XDP program (bpf2go objects), pins it and its
// maps under a bpffs directory so the firewall outlives the CLI, attaches it
// to interfaces, installs compiled rule-set generations with one atomic map
// swap, and reads counters back.
package datapath

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// DefaultPinDir is where programs, maps and links are pinned.
const DefaultPinDir = "/sys/fs/bpf/xdpfw"

const (
	progPin   = "prog_xdpfw_ingress"
	egressPin = "prog_xdpfw_egress"
	// stagesPin + program id: the ingress program's fw_xdp_stages (its
	// classify stage). The kernel empties a program array that no file
	// descriptor or pin holds, so each loaded program's is pinned from
	// load on, under its own name: a program still attached while a newer
	// one is loaded keeps its own stage.
	stagesPin = "stages_"
	// cpumapPin is xdpfw_cpumap, the bulk CPUs' program (priority.go);
	// cpuStagesPin + the ingress program's id its fw_cpumap_stages.
	cpumapPin    = "prog_xdpfw_cpumap"
	cpuStagesPin = "cpustages_"
)

// Limits are one generation's table sizes. The data plane holds two
// generations of the classifier tables; what a size costs in kernel memory
// is Limits.Cost (memory.go), computed from the maps themselves.
type Limits struct {
	Entries   int `json:"entries"`
	Nodes     int `json:"nodes"`
	LeafSlots int `json:"leaf_slots"`
	// Conntrack is the connection-tracking table's size (0: the default).
	Conntrack int `json:"conntrack"`
	// LogSnap is how many bytes of a logged packet an event carries
	// (0..compile.MaxLogSnap). Load sets it; Open leaves it 0 (the firewall's state
	// records it).
	LogSnap int `json:"-"`
	// RuleIDs is the number of per-rule counter slots (rule ids).
	RuleIDs int `json:"rule_ids"`
	// NAT: the program translates (`--nat xdpfw`, fw_nat_mode): it looks
	// every IPv4 packet up in the bindings and enters the nat stage
	// (nat.go) for a forwarded connection's first packet. Load sets it;
	// Open leaves it false (the firewall's state records it).
	NAT bool `json:"-"`
	// NATNoHooks: with NAT, the nat hooks where no rule translates
	// (NATNoHooksOf): a new connection's first packet skips their stage
	// (fw_nat_no_hook). Load sets it, from the nat table (which changes
	// only with a load); Open leaves it empty (what a later instance
	// gets: the stages run).
	NATNoHooks NATHooks `json:"-"`
}

// minRuleIDs is FW_MAX_RULE_IDS: the counter slots of the default tables.
const minRuleIDs = 65536

// ruleIDsFor is the counter slots for tables of entries: room for every
// rule of a full table and as many again (rule ids stay unique while
// edits wait in the delta stage, and assignIDs reuses freed ones).
func ruleIDsFor(entries int) int { return max(minRuleIDs, 2*entries) }

// DefaultConntrack is the default size of the connection-tracking table
// (preallocated; Limits.Cost says what an entry takes).
const DefaultConntrack = 65536

// FragsFor is the size of the fragment table (fw_frag: datagrams in
// flight, lib/frag.h) for a conntrack table of ct entries: an eighth of
// it, at least minFrags. A datagram is in flight from its first fragment
// to its last, microseconds on a LAN; an entry stays until the LRU needs
// its room or 30 s pass.
func FragsFor(ct int) int { return max(minFrags, ct/8) }

// minFrags is the smallest fragment table.
const minFrags = 1024

// LimitsFor sizes the tables for a number of classifier entries (rules,
// after multiport and -i expansion).
func LimitsFor(entries int) Limits {
	if entries <= 0 {
		entries = compile.DefaultMaxEntries
	}
	return Limits{Entries: entries, Nodes: entries, LeafSlots: min(16*entries, compile.MaxLeafSlots), Conntrack: DefaultConntrack,
		LogSnap: compile.DefaultLogSnap, RuleIDs: ruleIDsFor(entries)}
}

// Datapath is a handle on the pinned data plane.
type Datapath struct {
	dir         string
	prog        *ebpf.Program // XDP ingress
	egress      *ebpf.Program // tc egress (OUTPUT)
	limits      Limits
	active      *ebpf.Map // fw_active: FW_ACTIVE(generation, delta), 0 none
	entries     *ebpf.Map
	cands       *ebpf.Map // fw_cands: the entries' candidate records (nil: a program before them)
	nodes       *ebpf.Map
	leaves      *ebpf.Map
	roots       *ebpf.Map
	raw         *ebpf.Map // fw_raw: the raw table's NOTRACK entries, a half per generation
	deltas      *ebpf.Map // fw_deltas: the delta stage's two halves
	deltaEn     *ebpf.Map // fw_delta_entries
	stamps      *ebpf.Map // fw_stamps: the generation number each half holds
	ruleCtr     *ebpf.Map
	reasons     *ebpf.Map
	config      *ebpf.Map
	sets        *ebpf.Map // fw_sets: LPM trie of (set id, prefix)
	addrTyp     *ebpf.Map // fw_addrtypes: this host's local routing table (-m addrtype)
	ct          *ebpf.Map // fw_ct: connections
	ctStats     *ebpf.Map // fw_ct_stats
	frag        *ebpf.Map // fw_frag
	ctEvict     *ebpf.Map // fw_ct_evict: early-drop candidates
	logRing     *ebpf.Map // fw_log_ring: events
	logLim      *ebpf.Map // fw_log_limits: per logged rule id
	limBkt      *ebpf.Map // fw_limits: per -m limit rule id
	recentRules *ebpf.Map // fw_recent_rules: per -m recent rule id
	recent      *ebpf.Map // fw_recent: the -m recent lists' addresses
	hashRules   *ebpf.Map // fw_hashlimit_rules: per -m hashlimit rule id
	hashBkt     *ebpf.Map // fw_hashlimit: the -m hashlimit tables' buckets
	connRules   *ebpf.Map // fw_connlimit_rules: per -m connlimit rule id
	connCnt     *ebpf.Map // fw_connlimit: the connections -m connlimit rules count
	logStat     *ebpf.Map // fw_log_stats: per logged rule id, per CPU
	logCtr      *ebpf.Map // fw_log_counters
	rejGlob     *ebpf.Map // fw_reject_global: REJECT's global budget
	latSample   *ebpf.Map // .data.latency: fw_lat_every, one packet in how many is timed
	latency     *ebpf.Map // fw_latency: processing-time histograms, per CPU
	fwdPorts    *ebpf.Map // fw_fwd_ports: the devices the forwarding fast path may redirect to
	fwdStats    *ebpf.Map // fw_fwd_stats: FORWARD-accepted packets by delivery (fwd.go)
	pppoeRx     *ebpf.Map // fw_pppoe_rx: PPPoE sessions by Ethernet device, id and peer (pppoe.go)
	pppoeTx     *ebpf.Map // fw_pppoe_tx: the same by ppp device
	// Not pinned (none when opened from pins): fw_reject_rl, REJECT's
	// per-source budget; fw_reject_own and fw_reject_own_last, the OUTPUT
	// answers on their way in; fw_log_scratch, per-packet LOG notes;
	// fw_ct_gc, conntrack's search for room; fw_ct_clock, its clock.
	unpinned []*ebpf.Map
	// layouts are the layout digests of this program's pinned maps, which
	// PinProgram records beside them (layout.go, layoutsPin); nil from Open.
	layouts map[string][32]byte
	// upgraded are the pinned maps this program has anew (another layout
	// or size: upgradeSpec), by name, with how their contents carry over;
	// PinProgram puts the new ones in their place. Upgrades reports them,
	// after the commit too.
	upgraded map[string]*upgrade
	// stages is fw_xdp_stages, pinned as stagesPin + the program's id (none
	// when opened from pins).
	stages    *ebpf.Map
	stagesPin string
	// The priority table (priority.go): its roots, the bulk CPUs and the
	// counters (pinned; nil when opened from an earlier version's pins),
	// fw_cpumap, and xdpfw_cpumap with its stages (nil when opened from
	// pins; the program from its pin where there is one).
	prioRoots, prioCfg, prioStats, cpumap *ebpf.Map
	// NAT (nat.go): the bindings and the nat counters (pinned; nil when
	// opened from an earlier version's pins).
	natBinds, natCounts *ebpf.Map
	// natIfAddr: REDIRECT's address of each interface (pinned; nil when
	// opened from an earlier version's pins).
	natIfAddr *ebpf.Map
	// vlanDevs: the VLAN device of each (lower device, VID) (vlan.go;
	// pinned; nil when opened from an earlier version's pins).
	vlanDevs *ebpf.Map
	// natNextPin: the nat instance's way back to this program's finish
	// stage, pinned (StartNAT); "" without NAT.
	natNextPin string
	// tcStages is fw_tc_stages (nat OUTPUT's way to the nat instance's tc
	// stage and back: nat.go), pinned as tcStagesPin + the program's id
	// by StartNAT (tcStagesName); nil when opened from pins.
	tcStages     *ebpf.Map
	tcStagesName string
	// instance: the view of a second instance (audit.go: an audit's
	// candidate rule set, or the nat table), which has no priority roots:
	// the class a packet gets is the enforced rule set's.
	instance     bool
	cpumapProg   *ebpf.Program
	cpuStages    *ebpf.Map
	cpuStagesPin string
	// rxvlan is xdpfw_rxvlan's spec, loaded per interface with handoff
	// (fw_xdp_handoff, also in unpinned) and stages (rxvlan.go); nil
	// when opened from pins.
	rxvlan  *ebpf.ProgramSpec
	handoff *ebpf.Map
	// tracers are the trace instances, loaded on first use (trace.go):
	// XDP and tc, reporting; XDP and tc, recording (tests).
	tracers [4]*tracer
	// objPath: the object file of another build a benchmark loaded
	// (export_test.go LoadObject); "" for this build's.
	objPath string
	// clockProg is the clock probe (bpf/clock.c), never pinned: loaded
	// with the program, or on first use by a handle from Open.
	clockProg *ebpf.Program
}

func (d *Datapath) maps() map[string]**ebpf.Map {
	return map[string]**ebpf.Map{
		"fw_active": &d.active, "fw_entries": &d.entries, "fw_cands": &d.cands, "fw_nodes": &d.nodes, "fw_leaves": &d.leaves,
		"fw_roots": &d.roots, "fw_rule_stats": &d.ruleCtr, "fw_reason_stats": &d.reasons, "fw_config_map": &d.config,
		"fw_sets": &d.sets, "fw_ct": &d.ct, "fw_ct_stats": &d.ctStats, "fw_ct_evict": &d.ctEvict, "fw_frag": &d.frag,
		"fw_log_ring": &d.logRing, "fw_log_limits": &d.logLim, "fw_limits": &d.limBkt, "fw_recent_rules": &d.recentRules, "fw_recent": &d.recent,
		"fw_hashlimit_rules": &d.hashRules, "fw_hashlimit": &d.hashBkt,
		"fw_connlimit_rules": &d.connRules, "fw_connlimit": &d.connCnt, "fw_log_stats": &d.logStat, "fw_log_counters": &d.logCtr,
		"fw_deltas": &d.deltas, "fw_delta_entries": &d.deltaEn, "fw_stamps": &d.stamps,
		"fw_reject_global": &d.rejGlob, "fw_raw": &d.raw, "fw_addrtypes": &d.addrTyp,
		latPin: &d.latSample, "fw_latency": &d.latency,
		"fw_fwd_ports": &d.fwdPorts, "fw_fwd_stats": &d.fwdStats,
		"fw_pppoe_rx": &d.pppoeRx, "fw_pppoe_tx": &d.pppoeTx,
		"fw_prio_roots": &d.prioRoots, "fw_prio": &d.prioCfg, "fw_prio_stats": &d.prioStats, "fw_cpumap": &d.cpumap,
		"fw_nat_binds": &d.natBinds, "fw_nat_counts": &d.natCounts, "fw_nat_ifaddr": &d.natIfAddr,
		"fw_vlan_devs": &d.vlanDevs,
	}
}

// editSpec, set by tests (export_test.go), changes the program Load
// loads: an earlier version's layout of a map.
var editSpec func(*ebpf.CollectionSpec)

// Load loads the embedded program, reusing maps already pinned in dir (so
// counters and the installed generation survive an upgrade of the program),
// and pins any new maps. The program is not pinned until PinProgram, so a
// load that fails midway leaves the pinned program in place. It attaches
// nothing.
func Load(dir string, lim Limits) (*Datapath, error) {
	// Before anything changes: an old kernel fails here, naming what it lacks.
	if err := checkKernel(); err != nil {
		return nil, err
	}
	if err := ensureBPFFS(dir); err != nil {
		return nil, err
	}
	spec, err := loadXdpfw()
	if err != nil {
		return nil, fmt.Errorf("loading embedded BPF objects: %w", err)
	}
	if editSpec != nil {
		editSpec(spec)
	}
	if lim, err = sizeSpec(spec, lim); err != nil {
		return nil, err
	}
	// The pinned maps of another layout get new ones beside them (not
	// pinned until PinProgram), or the load is refused here, before
	// anything is created.
	layouts := specLayoutSums(spec) // before upgradeSpec unpins what it makes anew
	upgraded, err := upgradeSpec(spec, dir)
	if err != nil {
		return nil, err
	}
	closeUpgraded := func() {
		for _, u := range upgraded {
			u.old.Close()
		}
	}
	// Preallocated maps are taken from the kernel at once: refuse sizes
	// the machine cannot hold before creating any (the new maps of an
	// upgrade included: the pinned ones stay until the new are in place).
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		closeUpgraded()
		return nil, fmt.Errorf("counting the possible CPUs: %w", err)
	}
	avail, err := memAvailable()
	if err != nil {
		closeUpgraded()
		return nil, fmt.Errorf("reading the memory available: %w", err)
	}
	if err := checkMemory(specCost(spec, dir, cpus), lim, avail); err != nil {
		closeUpgraded()
		return nil, err
	}
	// xdpfw_rxvlan is loaded per interface, bound to it (rxvlan.go).
	rxvlan := spec.Programs[rxvlanProgName]
	delete(spec.Programs, rxvlanProgName)
	nameLatSection(spec)
	spec.Maps[latSection].Pinning = ebpf.PinByName
	if err := keepLatSample(spec, dir); err != nil {
		closeUpgraded()
		return nil, err
	}
	var objs struct {
		loadObjects
		LatSection *ebpf.Map `ebpf:".data.latency"`
	}
	opts := &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}}
	if err := spec.LoadAndAssign(&objs, opts); err != nil {
		closeUpgraded()
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel's verifier rejected the xdpfw program: %+v", ve)
		}
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			// upgradeSpec found them reusable: another xdpfw replaced them meanwhile
			return nil, fmt.Errorf("maps pinned in %s changed while this load read them (another xdpfw loading?): "+
				"load again: %w", dir, err)
		}
		return nil, fmt.Errorf("loading the xdpfw program: %w", err)
	}
	// The program arrays hold the classify (and finish) stages: no other
	// handle needed.
	objs.XdpfwIngressClassify.Close()
	objs.XdpfwIngressFinish.Close()
	objs.XdpfwCpumapClassify.Close()
	objs.XdpfwCpumapFinish.Close()
	// The audit instance's own maps (audit.go): no program here uses them.
	// The nat instance's translations (nat.go) too.
	for _, m := range []*ebpf.Map{objs.FwAuditNext, objs.FwAuditCpumapNext, objs.FwAuditSlot, objs.FwAuditBudget, objs.FwAuditCounts, objs.FwNatTargets} {
		m.Close()
	}
	stagesName, err := pinStages(dir, stagesPin, objs.XdpfwIngress, objs.FwXdpStages)
	if err != nil {
		objs.Close()
		objs.LatSection.Close()
		closeUpgraded()
		return nil, err
	}
	cpuStagesName, err := pinStages(dir, cpuStagesPin, objs.XdpfwIngress, objs.FwCpumapStages)
	if err != nil {
		_ = os.Remove(filepath.Join(dir, stagesName))
		objs.Close()
		objs.LatSection.Close()
		closeUpgraded()
		return nil, err
	}
	d := &Datapath{
		dir:         dir,
		layouts:     layouts,
		prog:        objs.XdpfwIngress,
		egress:      objs.XdpfwEgress,
		limits:      lim,
		active:      objs.FwActive,
		entries:     objs.FwEntries,
		cands:       objs.FwCands,
		nodes:       objs.FwNodes,
		leaves:      objs.FwLeaves,
		roots:       objs.FwRoots,
		raw:         objs.FwRaw,
		ruleCtr:     objs.FwRuleStats,
		reasons:     objs.FwReasonStats,
		config:      objs.FwConfigMap,
		sets:        objs.FwSets,
		addrTyp:     objs.FwAddrtypes,
		ct:          objs.FwCt,
		ctStats:     objs.FwCtStats,
		ctEvict:     objs.FwCtEvict,
		frag:        objs.FwFrag,
		deltas:      objs.FwDeltas,
		deltaEn:     objs.FwDeltaEntries,
		stamps:      objs.FwStamps,
		logRing:     objs.FwLogRing,
		logLim:      objs.FwLogLimits,
		limBkt:      objs.FwLimits,
		recentRules: objs.FwRecentRules,
		recent:      objs.FwRecent,
		hashRules:   objs.FwHashlimitRules,
		hashBkt:     objs.FwHashlimit,
		connRules:   objs.FwConnlimitRules,
		connCnt:     objs.FwConnlimit,
		logStat:     objs.FwLogStats,
		logCtr:      objs.FwLogCounters,
		rejGlob:     objs.FwRejectGlobal,
		latSample:   objs.LatSection,
		latency:     objs.FwLatency,
		fwdPorts:    objs.FwFwdPorts,
		fwdStats:    objs.FwFwdStats,
		pppoeRx:     objs.FwPppoeRx,
		pppoeTx:     objs.FwPppoeTx,
		stages:      objs.FwXdpStages,
		stagesPin:   stagesName,
		prioRoots:   objs.FwPrioRoots,
		prioCfg:     objs.FwPrio,
		prioStats:   objs.FwPrioStats,
		cpumap:      objs.FwCpumap,
		natBinds:    objs.FwNatBinds,
		tcStages:    objs.FwTcStages,
		natCounts:   objs.FwNatCounts,
		natIfAddr:   objs.FwNatIfaddr,
		vlanDevs:    objs.FwVlanDevs,
		cpumapProg:  objs.XdpfwCpumap,
		cpuStages:   objs.FwCpumapStages,

		cpuStagesPin: cpuStagesName,
		rxvlan:       rxvlan,
		handoff:      objs.FwXdpHandoff,
		unpinned: []*ebpf.Map{objs.FwXdpHandoff, objs.FwRejectRl, objs.FwRejectOwn, objs.FwRejectOwnLast, objs.FwLogScratch, objs.FwStateScratch,
			objs.FwCtGc, objs.FwCtClock, objs.FwAddrtypeKey, objs.FwTcPkt, objs.FwFragScratch, objs.FwTcStages, objs.FwNatFrags, objs.FwNatDying, objs.FwCtDying},
		upgraded: upgraded,

		clockProg: objs.XdpfwClock,
	}
	// Before any interface runs the program: the state of the maps it
	// has anew, as the program in force left it (the rest, made since,
	// at PinProgram).
	if err := d.carryUpgrades(true); err != nil {
		_ = os.Remove(filepath.Join(dir, stagesName))
		_ = os.Remove(filepath.Join(dir, cpuStagesName))
		d.Close()
		return nil, err
	}
	return d, nil
}

// loadObjects are what Load loads: all but xdpfw_rxvlan.
type loadObjects struct {
	xdpfwMaps
	XdpfwClock           *ebpf.Program `ebpf:"xdpfw_clock"`
	XdpfwEgress          *ebpf.Program `ebpf:"xdpfw_egress"`
	XdpfwIngress         *ebpf.Program `ebpf:"xdpfw_ingress"`
	XdpfwIngressClassify *ebpf.Program `ebpf:"xdpfw_ingress_classify"`
	XdpfwIngressFinish   *ebpf.Program `ebpf:"xdpfw_ingress_finish"`
	XdpfwCpumap          *ebpf.Program `ebpf:"xdpfw_cpumap"`
	XdpfwCpumapClassify  *ebpf.Program `ebpf:"xdpfw_cpumap_classify"`
	XdpfwCpumapFinish    *ebpf.Program `ebpf:"xdpfw_cpumap_finish"`
}

func (o *loadObjects) Close() error {
	return _XdpfwClose(&o.xdpfwMaps, o.XdpfwClock, o.XdpfwEgress, o.XdpfwIngress, o.XdpfwIngressClassify,
		o.XdpfwIngressFinish, o.XdpfwCpumap, o.XdpfwCpumapClassify, o.XdpfwCpumapFinish)
}

// upgradable are the pinned maps whose contents a new program's map of
// another size carries over otherwise than by the generic copy
// (carry.go), and how: per-CPU counters indexed by an enum that only
// grows (new values at the end), summed into the new map once every
// interface runs the new program (commitUpgrades), so that neither the
// counts the old program made until then nor those the new one made
// since are lost (the generic copy, before the switch, would lose the
// former, and replace the latter after it). fw_reason_stats' slot is
// out * FW_NUM_REASONS + reason: a new reason moves every slot, which
// addReasonCounters follows. They apply only while the value is laid out
// as before (only the number of slots changed); otherwise the generic
// copy carries them.
var upgradable = map[string]func(old, cur *ebpf.Map) error{
	"fw_ct_stats":     addCounters,
	"fw_log_counters": addCounters,   // FW_LOG_C_COUNT_OVERFLOW, FW_LOG_C_CONNLIMIT_FULL came later
	"fw_nat_counts":   addFwCounters, // FW_NAT_C_DNAT, _NO_LOCAL, _ICMP_ERROR, _STALE, _KERNEL_ICMP, _NO_CT, _OUTPUT, _NO_ROUTE, _FRAG_NAT came later
	"fw_reason_stats": addReasonCounters,
}

// classifierTables hold the classifier's two generations: what the rule
// set compiles to, fw_active saying which generation packets use. They
// go together: when one of them is made anew (another layout, another
// --max-rules), all are, or the new program's switch (fw_active) would
// point the old program at tables it never wrote. They are made empty
// but for what says which rule set is in force (inForceTables: carried,
// so that the load finds the record of the rules in force), and no packet
// sees them so: the load writes a whole generation from the rules into
// the new tables, and switches to it, before any interface runs the new
// program. So their layout is never a reason to refuse.
var classifierTables = []string{"fw_active", "fw_stamps", "fw_entries", "fw_cands", "fw_nodes", "fw_leaves", "fw_roots",
	"fw_raw", "fw_deltas", "fw_delta_entries", "fw_prio_roots"}

// inForceTables are the classifier tables InForce reads.
var inForceTables = map[string]bool{"fw_active": true, "fw_stamps": true, "fw_deltas": true, "fw_delta_entries": true}

// addFwCounters is addCounters for per-CPU struct fw_counter slots: the
// packets and bytes added, the latest time kept.
func addFwCounters(old, cur *ebpf.Map) error {
	return addPerCPU(old, cur, addFwCounter)
}

func addFwCounter(dst *xdpfwFwCounter, src xdpfwFwCounter) {
	dst.Packets += src.Packets
	dst.Bytes += src.Bytes
	dst.Last = max(dst.Last, src.Last)
}

// addReasonCounters is addFwCounters for fw_reason_stats, whose slot is
// outcome * FW_NUM_REASONS + reason: old's slots are those of its own
// number of reasons.
func addReasonCounters(old, cur *ebpf.Map) error {
	outs := uint32(NumOutcomes)
	if old.MaxEntries()%outs != 0 || cur.MaxEntries()%outs != 0 {
		return fmt.Errorf("%d slots, not a multiple of the %d outcomes", old.MaxEntries(), outs)
	}
	was, is := old.MaxEntries()/outs, cur.MaxEntries()/outs
	for o := range outs {
		for r := range min(was, is) {
			var a, b []xdpfwFwCounter
			if err := old.Lookup(o*was+r, &a); err != nil {
				return err
			}
			if err := cur.Lookup(o*is+r, &b); err != nil {
				return err
			}
			for c := range min(len(a), len(b)) {
				addFwCounter(&b[c], a[c])
			}
			if err := cur.Put(o*is+r, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// natBindsSize is fw_nat_binds' size: 65,536 connections with NAT, one
// entry without (an LRU map is preallocated).
func natBindsSize(nat bool) uint32 {
	if nat {
		return 1 << 17
	}
	return 1
}

// upgrade is a pinned map this program has anew.
type upgrade struct {
	old *ebpf.Map
	// carry copies old's contents (carry.go); nil: upgradable[name] does,
	// at the commit.
	carry *carrier
	// carried: what the copies carried and lost, for Upgrades.
	carried carryStats
	// done: pinned in the old one's place (old closed).
	done bool
}

// upgradeSpec finds the maps pinned in dir that this program does not
// reuse as they are (another type, size, number of entries, flags, or
// key or value layout): spec gets fresh ones for them (not pinned yet:
// the pinned ones stay in place, and the program in force keeps using
// them, until PinProgram), and the pinned ones are returned by name with
// how their contents carry over. A pinned map whose contents cannot be
// carried (a key whose members do not all have a place in the new key,
// another kind of map) refuses the load, before anything is created,
// naming each map and the difference.
func upgradeSpec(spec *ebpf.CollectionSpec, dir string) (map[string]*upgrade, error) {
	out := map[string]*upgrade{}
	closeAll := func() {
		for _, u := range out {
			u.old.Close()
		}
	}
	type types struct{ key, value btf.Type }
	typ := map[string]types{}
	specs := map[btf.ID]*btf.Spec{}
	rec := recordedLayouts(dir)
	// open adds the pinned map name to out unless it is reused as it is
	// (together: one of the classifier tables, which go together).
	open := func(name string, together bool) error {
		ms := spec.Maps[name]
		if ms == nil || ms.Pinning != ebpf.PinByName || out[name] != nil {
			return nil
		}
		old, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("opening pinned map %s: %w", name, err)
		}
		okey, oval := ms.Key, ms.Value // recorded by the program that pinned it as this spec lays it out
		if l := layoutOf(ms); !layoutVouched(rec, name, old, l.key, l.value) {
			if okey, oval, err = readPinnedTypes(old, specs); err != nil {
				old.Close()
				return typesErr(name, err)
			}
		}
		if !together && sameMap(ms, old, okey, oval) {
			old.Close()
			return nil
		}
		out[name], typ[name] = &upgrade{old: old}, types{okey, oval}
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Maps)) {
		if err := open(name, false); err != nil {
			closeAll()
			return nil, err
		}
	}
	if slices.ContainsFunc(classifierTables, func(n string) bool { return out[n] != nil }) {
		for _, name := range classifierTables {
			if err := open(name, true); err != nil {
				closeAll()
				return nil, err
			}
		}
	}
	var refused []string
	for _, name := range slices.Sorted(maps.Keys(out)) {
		u, ms, t := out[name], spec.Maps[name], typ[name]
		classifier := slices.Contains(classifierTables, name)
		var err error
		switch {
		case classifier && !inForceTables[name]:
			u.carry = &carrier{name: name} // filled from the rules
		case upgradable[name] != nil && u.old.Type() == ms.Type && u.old.KeySize() == ms.KeySize &&
			u.old.ValueSize() == ms.ValueSize && sameLayout(t.value, ms.Value):
			// counters: upgradable[name] at the commit
		default:
			if u.carry, err = newCarrier(name, u.old, t.key, t.value, ms); err != nil && classifier {
				u.carry, err = &carrier{name: name}, nil // rewritten from the rules anyway
			}
		}
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s: %v", name, err))
		}
	}
	if len(refused) > 0 {
		closeAll()
		return nil, fmt.Errorf("maps pinned in %s were made by another xdpfw version, laid out otherwise than this program's "+
			"in a way no upgrade carries over (a load could carry them over only by losing or confusing their entries); "+
			"run `xdpfw detach --all` first (the host is unfiltered until the next load, and the connections are forgotten): %s: %w",
			dir, strings.Join(refused, "; "), ebpf.ErrMapIncompatible)
	}
	for name := range out {
		spec.Maps[name].Pinning = ebpf.PinNone
	}
	return out, nil
}

// carryUpgrades copies the contents of the maps upgradeSpec replaced into
// this program's: first, before any interface runs it, everything the
// generic copy carries; then (at the commit) the hash maps' entries the
// old program made meanwhile.
func (d *Datapath) carryUpgrades(first bool) error {
	named := d.maps()
	for _, name := range slices.Sorted(maps.Keys(d.upgraded)) {
		u := d.upgraded[name]
		cur := named[name]
		if cur == nil || *cur == nil {
			return fmt.Errorf("carrying %s over to the new program: the program has no such map", name)
		}
		if u.carry == nil || u.done {
			continue
		}
		st, err := u.carry.copyInto(u.old, *cur, first)
		u.carried.carried += st.carried
		u.carried.lost += st.lost
		if err != nil {
			return fmt.Errorf("carrying %s over to the new program: %w", name, err)
		}
	}
	if u := d.upgraded[evictQueue]; first && u != nil && u.carry != nil && u.carry.key == nil {
		n, err := d.queueConnections()
		u.carried.carried += n
		if err != nil {
			return fmt.Errorf("queueing the connections in the new %s: %w", evictQueue, err)
		}
	}
	return nil
}

// evictQueue is fw_ct_evict, the conntrack table's early-drop
// candidates: a queue, which cannot be read without emptying it (and the
// program in force pops it). Made anew, it is filled with the keys of the
// connections carried over (queueConnections), the soonest to expire
// first, as the oldest would be; the connections the old program makes
// after that are not candidates.
const evictQueue = "fw_ct_evict"

// queueConnections pushes the key of every connection into fw_ct_evict,
// the soonest to expire first, and returns how many.
func (d *Datapath) queueConnections() (int, error) {
	type conn struct {
		k   xdpfwFwCtKey
		exp uint64
	}
	var cs []conn
	if err := d.ctWalk(func(k *xdpfwFwCtKey, v *xdpfwFwCtEntry) { cs = append(cs, conn{*k, v.Expires}) }); err != nil {
		return 0, err
	}
	slices.SortStableFunc(cs, func(a, b conn) int { return cmp.Compare(a.exp, b.exp) })
	for i, c := range cs {
		if err := d.ctEvict.Update(nil, &c.k, ebpf.UpdateExist); err != nil {
			return i, err
		}
	}
	return len(cs), nil
}

// Upgrades says, one line per map, what a load carried over from pinned
// maps of another layout or size (none: the pinned maps were reused).
// Lost: entries that did not fit (a smaller table); they are in the
// lines.
func (d *Datapath) Upgrades() (lines []string, lost int) {
	for _, name := range slices.Sorted(maps.Keys(d.upgraded)) {
		u := d.upgraded[name]
		switch {
		case u.carry == nil:
			lines = append(lines, name+": counters added into the new map")
		case name == evictQueue && u.carry != nil && u.carry.key == nil:
			lines = append(lines, fmt.Sprintf("%s: made anew, %d connections queued as early-drop candidates", name, u.carried.carried))
		case u.carry.key == nil && slices.Contains(classifierTables, name):
			lines = append(lines, name+": made anew, filled from the rules")
		case u.carry.key == nil:
			lines = append(lines, name+": made anew, empty (its kind of map cannot be read without emptying it)")
		case u.carried.lost > 0:
			lines = append(lines, fmt.Sprintf("%s: %d entries carried over, %d did not fit and are lost", name, u.carried.carried, u.carried.lost))
		default:
			lines = append(lines, fmt.Sprintf("%s: %d entries carried over", name, u.carried.carried))
		}
		lost += u.carried.lost
	}
	return lines, lost
}

// commitUpgrades carries the rest of the maps upgradeSpec replaced into
// this program's (carryUpgrades, upgradable), and pins them in their
// place. Called once every interface runs this program: what the old
// program writes into an array after the first copy (a per-rule counter,
// a setting) is lost.
func (d *Datapath) commitUpgrades() error {
	if err := d.carryUpgrades(false); err != nil {
		return err
	}
	named := d.maps()
	for _, name := range slices.Sorted(maps.Keys(d.upgraded)) {
		u := d.upgraded[name]
		if u.done {
			continue
		}
		cur := *named[name]
		if u.carry == nil {
			if err := upgradable[name](u.old, cur); err != nil {
				return fmt.Errorf("carrying %s over to the new program: %w", name, err)
			}
		}
		pin := filepath.Join(d.dir, name)
		tmp := pin + "_new"
		_ = os.Remove(tmp)
		if err := cur.Pin(tmp); err != nil {
			return fmt.Errorf("pinning the new %s: %w", name, err)
		}
		if err := os.Rename(tmp, pin); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("replacing the pinned %s: %w", name, err)
		}
		u.old.Close()
		u.done = true
	}
	return nil
}

// addCounters adds the per-CPU u64 counters of old to cur, slot by slot.
func addCounters(old, cur *ebpf.Map) error {
	return addPerCPU(old, cur, func(dst *uint64, src uint64) { *dst += src })
}

// addPerCPU adds the per-CPU values of old's slots to cur's with add, slot
// by slot (the slots both have).
func addPerCPU[T any](old, cur *ebpf.Map, add func(dst *T, src T)) error {
	n := min(old.MaxEntries(), cur.MaxEntries())
	for i := uint32(0); i < n; i++ {
		var a, b []T
		if err := old.Lookup(i, &a); err != nil {
			return err
		}
		if err := cur.Lookup(i, &b); err != nil {
			return err
		}
		for c := range b {
			if c < len(a) {
				add(&b[c], a[c])
			}
		}
		if err := cur.Put(i, b); err != nil {
			return err
		}
	}
	return nil
}

// pinStages pins stages, a program array of prog's, in dir as prefix + the
// program's id, and returns that name.
func pinStages(dir, prefix string, prog *ebpf.Program, stages *ebpf.Map) (string, error) {
	id, err := progID(prog)
	if err != nil {
		return "", err
	}
	name := prefix + strconv.FormatUint(uint64(id), 10)
	path := filepath.Join(dir, name)
	_ = os.Remove(path) // a stale pin of an earlier program with this id
	if err := stages.Pin(path); err != nil {
		return "", fmt.Errorf("pinning the classify stage at %s: %w", path, err)
	}
	return name, nil
}

// progID is a loaded program's id.
func progID(p *ebpf.Program) (ebpf.ProgramID, error) {
	info, err := p.Info()
	if err != nil {
		return 0, fmt.Errorf("reading the program's id: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("reading the program's id: the kernel does not report it")
	}
	return id, nil
}

// sizeSpec sets the table sizes of lim (defaults for zero fields) in spec
// and returns the limits in effect.
func sizeSpec(spec *ebpf.CollectionSpec, lim Limits) (Limits, error) {
	if lim.Entries == 0 {
		c, nat, noHooks := lim.Conntrack, lim.NAT, lim.NATNoHooks
		lim = LimitsFor(0)
		lim.NAT, lim.NATNoHooks = nat, noHooks
		if c > 0 {
			lim.Conntrack = c
		}
	}
	if lim.Conntrack <= 0 {
		lim.Conntrack = DefaultConntrack
	}
	if err := lim.check(); err != nil {
		return lim, err
	}
	for name, n := range map[string]int{"fw_max_entries": lim.Entries, "fw_max_nodes": lim.Nodes, "fw_max_leaves": lim.LeafSlots,
		"fw_log_snap": lim.LogSnap} {
		if err := spec.Variables[name].Set(uint32(n)); err != nil {
			return lim, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	if v := spec.Variables["fw_nat_mode"]; v != nil { // absent in objects of earlier builds (LoadObject)
		nat := uint32(0)
		if lim.NAT {
			nat = 1
		}
		if err := v.Set(nat); err != nil {
			return lim, fmt.Errorf("setting fw_nat_mode: %w", err)
		}
		spec.Maps["fw_nat_binds"].MaxEntries = natBindsSize(lim.NAT)
		for _, name := range []string{"fw_nat_frags", "fw_nat_dying"} {
			if m := spec.Maps[name]; m != nil && !lim.NAT { // absent in objects of earlier builds (LoadObject)
				m.MaxEntries = 1 // an LRU map is preallocated: one entry without --nat xdpfw
			}
		}
	}
	if v := spec.Variables["fw_nat_no_hook"]; v != nil { // absent in objects of earlier builds (LoadObject)
		var skip [natHooks]uint32
		for h := range NATHook(natHooks) {
			if lim.NAT && lim.NATNoHooks.Has(h) {
				skip[h] = 1
			}
		}
		if err := v.Set(skip); err != nil {
			return lim, fmt.Errorf("setting fw_nat_no_hook: %w", err)
		}
	}
	spec.Maps["fw_entries"].MaxEntries = uint32(2 * lim.Entries)
	if m := spec.Maps["fw_cands"]; m != nil { // absent in objects of earlier builds (LoadObject)
		m.MaxEntries = uint32(2 * lim.Entries)
	}
	spec.Maps["fw_nodes"].MaxEntries = uint32(2 * lim.Nodes)
	spec.Maps["fw_leaves"].MaxEntries = uint32(2 * lim.LeafSlots)
	spec.Maps["fw_ct"].MaxEntries = uint32(lim.Conntrack)
	if m := spec.Maps["fw_frag"]; m != nil { // absent in objects of earlier builds (LoadObject)
		m.MaxEntries = uint32(FragsFor(lim.Conntrack))
	}
	if m := spec.Maps["fw_ct_evict"]; m != nil { // absent in objects of earlier builds (LoadObject)
		m.MaxEntries = uint32(lim.Conntrack)
	}
	lim.RuleIDs = ruleIDsFor(lim.Entries)
	spec.Maps["fw_rule_stats"].MaxEntries = uint32(lim.RuleIDs)
	return lim, nil
}

// PinProgram makes this program the pinned one (the one status reports and
// trace runs), replacing the previous pin atomically (rename on bpffs).
func (d *Datapath) PinProgram() error {
	if err := d.commitUpgrades(); err != nil {
		return err
	}
	if d.layouts != nil { // every map pinned is this program's now: record their layouts
		if err := d.pinLayouts(); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		prog *ebpf.Program
		name string
	}{{d.cpumapProg, cpumapPin}, {d.egress, egressPin}, {d.prog, progPin}} { // the ingress pin last: Open looks for it
		pin := filepath.Join(d.dir, p.name)
		tmp := pin + "_new" // bpffs refuses dots in names
		_ = os.Remove(tmp)
		if err := p.prog.Pin(tmp); err != nil {
			return fmt.Errorf("pinning the program at %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, pin); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("replacing the pinned program: %w", err)
		}
	}
	// Every interface runs this program now: the stages of earlier ones
	// go with them.
	old := append(pinsWithPrefix(d.dir, stagesPin), pinsWithPrefix(d.dir, cpuStagesPin)...)
	old = append(old, pinsWithPrefix(d.dir, tcStagesPin)...)
	for _, name := range append(old, pinsWithPrefix(d.dir, natNextPin)...) {
		if name != d.stagesPin && name != d.cpuStagesPin && name != d.natNextPin && name != d.tcStagesName {
			_ = os.Remove(filepath.Join(d.dir, name))
		}
	}
	return nil
}

// pinsWithPrefix lists the pins in dir whose names start with prefix.
func pinsWithPrefix(dir, prefix string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// laterPins are maps that programs of earlier versions did not have: Open
// leaves them nil when they are not pinned, so that commands still work
// until the next load brings the program they belong to.
var laterPins = map[string]bool{"fw_ct_evict": true, "fw_reject_global": true, "fw_frag": true, "fw_addrtypes": true,
	"fw_hashlimit_rules": true, "fw_hashlimit": true, latPin: true, "fw_latency": true, "fw_fwd_ports": true, "fw_fwd_stats": true,
	"fw_pppoe_rx": true, "fw_pppoe_tx": true,
	"fw_prio_roots": true, "fw_prio": true, "fw_prio_stats": true, "fw_cpumap": true,
	"fw_cands": true, "fw_nat_binds": true, "fw_nat_counts": true, "fw_nat_ifaddr": true,
	"fw_connlimit_rules": true, "fw_connlimit": true, "fw_vlan_devs": true}

// ErrNotLoaded means nothing is pinned: the firewall is not loaded.
var ErrNotLoaded = errors.New("xdpfw is not loaded (no program pinned); run `xdpfw load` first")

// Open opens the pinned program and maps without loading anything new.
func Open(dir string) (*Datapath, error) {
	prog, err := ebpf.LoadPinnedProgram(filepath.Join(dir, progPin), nil)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNotLoaded
		}
		return nil, fmt.Errorf("opening the pinned program: %w", err)
	}
	d := &Datapath{dir: dir, prog: prog}
	if d.egress, err = ebpf.LoadPinnedProgram(filepath.Join(dir, egressPin), nil); err != nil {
		d.Close()
		return nil, fmt.Errorf("opening the pinned egress program (made by another xdpfw version? `xdpfw detach --all` resets): %w", err)
	}
	for name, dst := range d.maps() {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if errors.Is(err, os.ErrNotExist) && laterPins[name] {
			continue // a program of an earlier version: nil until the next load
		}
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("opening pinned map %s (made by another xdpfw version? `xdpfw detach --all` resets): %w", name, err)
		}
		*dst = m
	}
	opened := map[string]*ebpf.Map{}
	for name, m := range d.maps() {
		opened[name] = *m
	}
	if err := checkOpenLayouts(dir, opened); err != nil {
		d.Close()
		return nil, err
	}
	if p, err := ebpf.LoadPinnedProgram(filepath.Join(dir, cpumapPin), nil); err == nil {
		d.cpumapProg = p // for SetPriority; an earlier version pinned none
	}
	d.limits = limitsOf(d.entries, d.nodes, d.leaves, d.ct, d.ruleCtr)
	if d.natBinds != nil {
		d.limits.NAT = d.natBinds.MaxEntries() > 1
	}
	return d, nil
}

// limitsOf are the table sizes of a data plane with these maps.
func limitsOf(entries, nodes, leaves, ct, ruleCtr *ebpf.Map) Limits {
	return Limits{Entries: int(entries.MaxEntries() / 2), Nodes: int(nodes.MaxEntries() / 2),
		LeafSlots: int(leaves.MaxEntries() / 2), Conntrack: int(ct.MaxEntries()), RuleIDs: int(ruleCtr.MaxEntries())}
}

// PinnedLimits are the table sizes of the data plane pinned in dir, read
// from its maps' sizes alone: what a load that upgrades pins Open
// refuses (another version's layout) keeps.
func PinnedLimits(dir string) (Limits, error) {
	var ms [5]*ebpf.Map
	defer func() {
		for _, m := range ms {
			if m != nil {
				m.Close()
			}
		}
	}()
	for i, name := range []string{"fw_entries", "fw_nodes", "fw_leaves", "fw_ct", "fw_rule_stats"} {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if err != nil {
			return Limits{}, fmt.Errorf("opening pinned map %s: %w", name, err)
		}
		ms[i] = m
	}
	return limitsOf(ms[0], ms[1], ms[2], ms[3], ms[4]), nil
}

// Dir is the pin directory.
func (d *Datapath) Dir() string { return d.dir }

// Program is the loaded XDP program.
func (d *Datapath) Program() *ebpf.Program { return d.prog }

// EgressProgram is the loaded tc egress program (the OUTPUT chain).
func (d *Datapath) EgressProgram() *ebpf.Program { return d.egress }

// Limits are the table sizes this data plane was loaded with.
func (d *Datapath) Limits() Limits { return d.limits }

// Close releases the file descriptors; pinned objects stay.
func (d *Datapath) Close() {
	for _, m := range d.maps() {
		if *m != nil {
			(*m).Close()
		}
	}
	for _, m := range d.unpinned {
		m.Close()
	}
	for _, u := range d.upgraded {
		if !u.done {
			u.old.Close()
		}
	}
	for _, t := range d.tracers {
		t.close()
	}
	if d.stages != nil {
		d.stages.Close()
	}
	if d.cpuStages != nil {
		d.cpuStages.Close()
	}
	for _, p := range []*ebpf.Program{d.prog, d.egress, d.clockProg, d.cpumapProg} {
		if p != nil {
			p.Close()
		}
	}
}

// Unpin removes every pin in dir (program, maps, links) and the directory.
// Removing a link's pin detaches it once no process holds it.
func Unpin(dir string) error {
	if err := unpin(dir, ""); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// UnpinKeepSets is Unpin but for the set map (named sets outlive the
// program) and the directory.
func UnpinKeepSets(dir string) error { return unpin(dir, setsMap) }

// unpin removes every pin in dir but keep.
func unpin(dir, keep string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if e.Name() == keep {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ensureBPFFS makes sure dir exists on a bpf filesystem, mounting
// /sys/fs/bpf when the default location is used and nothing is mounted.
func ensureBPFFS(dir string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", parent, err)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		if parent != "/sys/fs/bpf" {
			return fmt.Errorf("%s is not on a bpf filesystem (mount -t bpf bpf %s)", dir, parent)
		}
		// A bpffs mounted in a private mount namespace (as under
		// `ip netns exec`, which remounts /sys) vanishes with the process,
		// and the firewall with it: refuse rather than fail open later.
		self, _ := os.Readlink("/proc/self/ns/mnt")
		init, _ := os.Readlink("/proc/1/ns/mnt")
		if self != init {
			return fmt.Errorf("no bpffs at /sys/fs/bpf in this mount namespace (ip netns exec remounts /sys); " +
				"pins made here would vanish with this process: use --pin-dir on a bpffs mounted outside /sys")
		}
		if err := unix.Mount("bpf", parent, "bpf", 0, "mode=0700"); err != nil {
			return fmt.Errorf("mounting bpffs at %s: %w", parent, err)
		}
	}
	return os.MkdirAll(dir, 0o700)
}

// ProgramVersion identifies the BPF object this binary embeds (a hash of
// its bytes): the control plane records it at load, so a daemon that
// starts again knows whether the pinned program is the one it would load.
// Hashed once per process.
var ProgramVersion = sync.OnceValue(func() string {
	sum := sha256.Sum256(_XdpfwBytes)
	return hex.EncodeToString(sum[:8])
})
