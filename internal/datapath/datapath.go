// Package datapath loads the XDP program (bpf2go objects), pins it and its
// maps under a bpffs directory so the firewall outlives the CLI, attaches it
// to interfaces, installs compiled rule-set generations with one atomic map
// swap, and reads counters back.
package datapath

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
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
	// NATNoPrerouting: with NAT, no nat PREROUTING rule translates
	// (compile.NATHookTranslates): a new connection's first packet skips
	// the nat stage's PREROUTING (fw_nat_no_pre). Load sets it, from the
	// nat table (which changes only with a load); Open leaves it false
	// (what a later instance gets: the stage runs).
	NATNoPrerouting bool `json:"-"`
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
	// upgraded are pinned maps an earlier version made with another
	// layout, by name: this program has new ones, which PinProgram puts in
	// their place (see upgradable).
	upgraded map[string]*ebpf.Map
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
		"fw_hashlimit_rules": &d.hashRules, "fw_hashlimit": &d.hashBkt, "fw_log_stats": &d.logStat, "fw_log_counters": &d.logCtr,
		"fw_deltas": &d.deltas, "fw_delta_entries": &d.deltaEn, "fw_stamps": &d.stamps,
		"fw_reject_global": &d.rejGlob, "fw_raw": &d.raw, "fw_addrtypes": &d.addrTyp,
		latPin: &d.latSample, "fw_latency": &d.latency,
		"fw_fwd_ports": &d.fwdPorts, "fw_fwd_stats": &d.fwdStats,
		"fw_pppoe_rx": &d.pppoeRx, "fw_pppoe_tx": &d.pppoeTx,
		"fw_prio_roots": &d.prioRoots, "fw_prio": &d.prioCfg, "fw_prio_stats": &d.prioStats, "fw_cpumap": &d.cpumap,
		"fw_nat_binds": &d.natBinds, "fw_nat_counts": &d.natCounts, "fw_nat_ifaddr": &d.natIfAddr,
	}
}

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
	if lim, err = sizeSpec(spec, lim); err != nil {
		return nil, err
	}
	// Preallocated maps are taken from the kernel at once: refuse sizes
	// the machine cannot hold before creating any.
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("counting the possible CPUs: %w", err)
	}
	avail, err := memAvailable()
	if err != nil {
		return nil, fmt.Errorf("reading the memory available: %w", err)
	}
	if err := checkMemory(specCost(spec, dir, cpus), lim, avail); err != nil {
		return nil, err
	}
	upgraded, err := upgradeSpec(spec, dir)
	if err != nil {
		return nil, err
	}
	closeUpgraded := func() {
		for _, m := range upgraded {
			m.Close()
		}
	}
	if err := checkPinnedLayouts(spec, dir); err != nil {
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
			return nil, fmt.Errorf("maps pinned in %s were made by another xdpfw version or for another --max-rules "+
				"or --ct-max; run `xdpfw detach --all` first (or load with the same sizes): %w", dir, err)
		}
		return nil, fmt.Errorf("loading the xdpfw program: %w", err)
	}
	if old := upgraded["fw_nat_binds"]; old != nil {
		carryBindings(old, objs.FwNatBinds)
	}
	if old := upgraded["fw_config_map"]; old != nil {
		if err := growSettings(old, objs.FwConfigMap); err != nil {
			objs.Close()
			closeUpgraded()
			return nil, fmt.Errorf("carrying fw_config_map over to the new program: %w", err)
		}
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
	return &Datapath{
		dir:         dir,
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
		cpumapProg:  objs.XdpfwCpumap,
		cpuStages:   objs.FwCpumapStages,

		cpuStagesPin: cpuStagesName,
		rxvlan:       rxvlan,
		handoff:      objs.FwXdpHandoff,
		unpinned: []*ebpf.Map{objs.FwXdpHandoff, objs.FwRejectRl, objs.FwRejectOwn, objs.FwRejectOwnLast, objs.FwLogScratch, objs.FwStateScratch,
			objs.FwCtGc, objs.FwCtClock, objs.FwAddrtypeKey, objs.FwTcPkt, objs.FwFragScratch, objs.FwTcStages, objs.FwNatFrags, objs.FwNatDying},
		upgraded: upgraded,

		clockProg: objs.XdpfwClock,
	}, nil
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

// upgradable are the pinned maps a newer program may make with another
// layout and whose contents carry over, with how: per-CPU u64 counters
// indexed by an enum that only grows (new values at the end), summed into
// the new map; the settings, written anew. Any other pinned map of another layout makes Load fail with
// ErrMapIncompatible (`detach --all` first). fw_reason_stats is not one:
// its slot is out * FW_NUM_REASONS + reason, so a new reason moves every
// slot; it would need its own copy.
var upgradable = map[string]func(old, cur *ebpf.Map) error{
	"fw_ct_stats":     addCounters,
	"fw_log_counters": addCounters, // FW_LOG_C_COUNT_OVERFLOW came later
	// struct fw_config grows at its end (forward_stack, kernel_ct_off
	// came later): the settings are copied into the new map when the
	// program loads (growSettings: what ConfigInForce reads until
	// SetConfig writes them), nothing at the commit, which would undo
	// SetConfig.
	"fw_config_map": func(old, cur *ebpf.Map) error { return nil },
	// fw_nat_binds is sized by the NAT mode (one entry with --nat
	// kernel): the bindings are copied into the new map when the program
	// loads (carryBindings), before any interface runs it.
	"fw_nat_binds":  func(old, cur *ebpf.Map) error { return nil },
	"fw_nat_counts": addFwCounters, // FW_NAT_C_DNAT, _NO_LOCAL, _ICMP_ERROR, _STALE, _KERNEL_ICMP, _NO_CT, _OUTPUT, _NO_ROUTE, _FRAG_NAT came later
}

// addFwCounters is addCounters for per-CPU struct fw_counter slots: the
// packets and bytes added, the latest time kept.
func addFwCounters(old, cur *ebpf.Map) error {
	return addPerCPU(old, cur, func(dst *xdpfwFwCounter, src xdpfwFwCounter) {
		dst.Packets += src.Packets
		dst.Bytes += src.Bytes
		dst.Last = max(dst.Last, src.Last)
	})
}

// natBindsSize is fw_nat_binds' size: 65,536 connections with NAT, one
// entry without (an LRU map is preallocated).
func natBindsSize(nat bool) uint32 {
	if nat {
		return 1 << 17
	}
	return 1
}

// carryBindings copies the bindings of translated connections into the
// new program's map (as many as fit), so that they keep their
// translation across a load.
func carryBindings(old, cur *ebpf.Map) {
	if old.MaxEntries() <= 1 || cur.MaxEntries() <= 1 {
		return
	}
	var k xdpfwFwNatTuple
	var v xdpfwFwNatRw
	it := old.Iterate()
	for it.Next(&k, &v) {
		_ = cur.Put(&k, &v)
	}
}

// upgradeSpec finds the upgradable maps pinned in dir with a layout other
// than spec's: spec gets fresh ones for them (not pinned yet: the pinned
// ones stay in place, and the program in force keeps using them, until
// PinProgram), and the pinned ones are returned by name.
func upgradeSpec(spec *ebpf.CollectionSpec, dir string) (map[string]*ebpf.Map, error) {
	out := map[string]*ebpf.Map{}
	for name := range upgradable {
		ms := spec.Maps[name]
		old, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			for _, m := range out {
				m.Close()
			}
			return nil, fmt.Errorf("opening pinned map %s: %w", name, err)
		}
		if old.Type() == ms.Type && old.KeySize() == ms.KeySize && old.ValueSize() == ms.ValueSize &&
			old.MaxEntries() == ms.MaxEntries {
			old.Close()
			continue
		}
		ms.Pinning = ebpf.PinNone
		out[name] = old
	}
	return out, nil
}

// commitUpgrades carries the contents of the maps upgradeSpec replaced
// into this program's, and pins them in their place. Called once every
// interface runs this program: counts the old program makes after the
// copy (packets in flight) are lost.
func (d *Datapath) commitUpgrades() error {
	named := d.maps()
	for name, old := range d.upgraded {
		cur := *named[name]
		if err := upgradable[name](old, cur); err != nil {
			return fmt.Errorf("carrying %s over to the new program: %w", name, err)
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
		old.Close()
		delete(d.upgraded, name)
	}
	return nil
}

// growSettings copies the settings of an earlier version's fw_config_map
// into cur, whose struct fw_config has more fields at its end (left 0:
// their defaults).
func growSettings(old, cur *ebpf.Map) error {
	if old.ValueSize() > cur.ValueSize() {
		return fmt.Errorf("struct fw_config of %d bytes, this program's has %d", old.ValueSize(), cur.ValueSize())
	}
	v := make([]byte, old.ValueSize())
	if err := old.Lookup(uint32(0), &v); err != nil {
		return err
	}
	return cur.Put(uint32(0), append(v, make([]byte, cur.ValueSize()-old.ValueSize())...))
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
		c, nat, noPre := lim.Conntrack, lim.NAT, lim.NATNoPrerouting
		lim = LimitsFor(0)
		lim.NAT, lim.NATNoPrerouting = nat, noPre
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
	if v := spec.Variables["fw_nat_no_pre"]; v != nil { // absent in objects of earlier builds (LoadObject)
		skip := uint32(0)
		if lim.NAT && lim.NATNoPrerouting {
			skip = 1
		}
		if err := v.Set(skip); err != nil {
			return lim, fmt.Errorf("setting fw_nat_no_pre: %w", err)
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
	"fw_cands": true, "fw_nat_binds": true, "fw_nat_counts": true, "fw_nat_ifaddr": true}

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
	if p, err := ebpf.LoadPinnedProgram(filepath.Join(dir, cpumapPin), nil); err == nil {
		d.cpumapProg = p // for SetPriority; an earlier version pinned none
	}
	d.limits = Limits{Entries: int(d.entries.MaxEntries() / 2), Nodes: int(d.nodes.MaxEntries() / 2),
		LeafSlots: int(d.leaves.MaxEntries() / 2), Conntrack: int(d.ct.MaxEntries()), RuleIDs: int(d.ruleCtr.MaxEntries())}
	if d.natBinds != nil {
		d.limits.NAT = d.natBinds.MaxEntries() > 1
	}
	return d, nil
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
	for _, m := range d.upgraded {
		m.Close()
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
