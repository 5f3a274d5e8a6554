package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// Audit: a candidate rule set checked on live traffic without being
// enforced (bpf/lib/audit.h, docs/audit.md). The audit instance is the
// embedded object loaded again (fw_trace_mode traceAudit), with classifier
// tables, per-rule counters, -m limit buckets and log budgets of its own
// (auditPrivate, pinned in the pin directory as auditPrefix + name), and
// the live instance's hand-over slot, sets, -m recent lists, -m hashlimit
// buckets, log ring and log counters. The live program enters it through
// its fw_xdp_stages[FW_XDP_STAGE_AUDIT] and it returns to the live
// program's finish stage through its own fw_audit_next.

const (
	traceAudit = 3 // FW_TRACE_AUDIT

	// auditPrefix names the audit instance's pins in the pin directory.
	auditPrefix = "audit_"

	// Slots of fw_xdp_stages (bpf/maps.h).
	stageAudit  = 2 // FW_XDP_STAGE_AUDIT
	stageFinish = 3 // FW_XDP_STAGE_FINISH
)

// auditPrivate are the maps the audit instance has of its own: the
// candidate's tables and what its rules own. Everything else its program
// uses is the live instance's (see loadAudit), or per-packet scratch.
var auditPrivate = []string{"fw_active", "fw_entries", "fw_cands", "fw_nodes", "fw_leaves", "fw_roots", "fw_raw", "fw_deltas",
	"fw_delta_entries", "fw_stamps", "fw_rule_stats", "fw_log_limits", "fw_log_stats", "fw_limits", "fw_recent_rules",
	"fw_hashlimit_rules", "fw_audit_budget", "fw_audit_counts", "fw_audit_next"}

// auditShared are the live maps the audit instance reads (and writes
// nothing in but the log ring): its program finds the packet and the
// enforced decision in the hand-over slot.
var auditShared = []string{"fw_sets", "fw_addrtypes", "fw_recent", "fw_hashlimit", "fw_log_ring", "fw_log_counters",
	"fw_config_map", "fw_xdp_handoff"}

// AuditCounters are the audit's own counters (enum fw_audit_counter).
type AuditCounters struct {
	Seen        Counter `json:"seen"`         // packets the candidate classified
	WouldDrop   Counter `json:"would_drop"`   // enforced accepted, the candidate would not
	WouldAccept Counter `json:"would_accept"` // enforced did not accept, the candidate would
	Suppressed  Counter `json:"suppressed"`   // events over the budget
	Lost        Counter `json:"lost"`         // events the full ring buffer had no room for
}

// Audit is a handle on the audit instance: a Datapath whose tables and
// rule-owned maps are the candidate's (Install, RuleCounters work on
// them), plus the program and its way back.
type Audit struct {
	*Datapath
	prog   *ebpf.Program // xdpfw_audit; nil when opened from pins
	budget *ebpf.Map
	counts *ebpf.Map
	next   *ebpf.Map
	live   *Datapath
}

// liveStages opens the live program's fw_xdp_stages (pinned as stagesPin
// + its id).
func (d *Datapath) liveStages() (*ebpf.Map, error) {
	if d.stages != nil {
		return d.stages.Clone()
	}
	id, err := progID(d.prog)
	if err != nil {
		return nil, err
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(d.dir, stagesPin+strconv.FormatUint(uint64(id), 10)), nil)
	if err != nil {
		return nil, fmt.Errorf("opening the program's stages: %w", err)
	}
	return m, nil
}

// StartAudit loads an audit instance for the live program, installs t (the
// candidate, compiled with its own rule ids) in its tables, sets its event
// budget (burst events, then one per interval), and only then puts it in
// the live program's path. Any audit running before is replaced at that
// one write; a failure before it leaves the live program as it was.
// logSnap is the live program's fw_log_snap (events have one size).
func (d *Datapath) StartAudit(t *compile.Tables, logSnap int, interval time.Duration, burst uint32) (*Audit, error) {
	stages, err := d.liveStages()
	if err != nil {
		return nil, err
	}
	defer stages.Close()
	var finishID ebpf.ProgramID
	if err := stages.Lookup(uint32(stageFinish), &finishID); err != nil {
		return nil, fmt.Errorf("the loaded program has no finish stage (loaded by an earlier xdpfw version? `xdpfw load` again): %w", err)
	}
	finish, err := ebpf.NewProgramFromID(finishID)
	if err != nil {
		return nil, fmt.Errorf("opening the finish stage: %w", err)
	}
	defer finish.Close()
	a, err := d.loadAudit(logSnap)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Audit, error) {
		a.Close()
		return nil, err
	}
	if err := a.Install(t); err != nil {
		return fail(fmt.Errorf("installing the candidate: %w", err))
	}
	b := xdpfwFwBucket{IntervalNs: uint64(interval), Burst: burst}
	if err := a.budget.Put(uint32(0), b); err != nil {
		return fail(fmt.Errorf("writing the audit's event budget: %w", err))
	}
	if err := a.next.Put(uint32(0), finish); err != nil {
		return fail(fmt.Errorf("linking the audit stage to the finish stage: %w", err))
	}
	// Pins under temporary names first: an audit in force is never left
	// without its pins, and a failure here leaves the one before alone.
	tmp := map[string]*ebpf.Map{}
	for _, name := range auditPrivate {
		tmp[name] = *a.privateMaps()[name]
	}
	for name, m := range tmp {
		p := filepath.Join(d.dir, auditPrefix+name+"_new")
		_ = os.Remove(p)
		if err := m.Pin(p); err != nil {
			for n := range tmp {
				_ = os.Remove(filepath.Join(d.dir, auditPrefix+n+"_new"))
			}
			return fail(fmt.Errorf("pinning the audit's %s: %w", name, err))
		}
	}
	if err := stages.Put(uint32(stageAudit), a.prog); err != nil {
		for n := range tmp {
			_ = os.Remove(filepath.Join(d.dir, auditPrefix+n+"_new"))
		}
		return fail(fmt.Errorf("putting the audit stage in the program's path: %w", err))
	}
	for name := range tmp {
		p := filepath.Join(d.dir, auditPrefix+name)
		if err := os.Rename(p+"_new", p); err != nil {
			return a, fmt.Errorf("the audit runs, but pinning its %s failed: %w", name, err)
		}
	}
	return a, nil
}

// loadAudit loads the audit instance (not yet in any path).
func (d *Datapath) loadAudit(logSnap int) (*Audit, error) {
	lim := d.limits
	lim.LogSnap = logSnap
	spec, lim, live, done, err := d.instanceSpec(traceAudit, lim)
	if err != nil {
		return nil, err
	}
	defer done() // StartAudit pins the audit's own maps under their audit names
	handoff := d.handoff
	if handoff == nil {
		if handoff, err = d.progMap("fw_xdp_handoff"); err != nil {
			return nil, err
		}
		defer handoff.Close()
	}
	live["fw_xdp_handoff"] = handoff
	repl := map[string]*ebpf.Map{}
	for _, name := range auditShared {
		m := live[specMapName(name)]
		if m == nil {
			return nil, fmt.Errorf("the live program has no map %s (loaded by another xdpfw version? `xdpfw load` again)", name)
		}
		repl[name] = m
	}
	var o struct {
		Prog             *ebpf.Program `ebpf:"xdpfw_audit"`
		FwActive         *ebpf.Map     `ebpf:"fw_active"`
		FwEntries        *ebpf.Map     `ebpf:"fw_entries"`
		FwCands          *ebpf.Map     `ebpf:"fw_cands"`
		FwNodes          *ebpf.Map     `ebpf:"fw_nodes"`
		FwLeaves         *ebpf.Map     `ebpf:"fw_leaves"`
		FwRoots          *ebpf.Map     `ebpf:"fw_roots"`
		FwRaw            *ebpf.Map     `ebpf:"fw_raw"`
		FwDeltas         *ebpf.Map     `ebpf:"fw_deltas"`
		FwDeltaEntries   *ebpf.Map     `ebpf:"fw_delta_entries"`
		FwStamps         *ebpf.Map     `ebpf:"fw_stamps"`
		FwRuleStats      *ebpf.Map     `ebpf:"fw_rule_stats"`
		FwLogLimits      *ebpf.Map     `ebpf:"fw_log_limits"`
		FwLogStats       *ebpf.Map     `ebpf:"fw_log_stats"`
		FwLimits         *ebpf.Map     `ebpf:"fw_limits"`
		FwRecentRules    *ebpf.Map     `ebpf:"fw_recent_rules"`
		FwHashlimitRules *ebpf.Map     `ebpf:"fw_hashlimit_rules"`
		FwAuditBudget    *ebpf.Map     `ebpf:"fw_audit_budget"`
		FwAuditCounts    *ebpf.Map     `ebpf:"fw_audit_counts"`
		FwAuditNext      *ebpf.Map     `ebpf:"fw_audit_next"`
	}
	if err := spec.LoadAndAssign(&o, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, instanceLoadErr("audit", err)
	}
	view := &Datapath{dir: d.dir, limits: lim, active: o.FwActive, entries: o.FwEntries, cands: o.FwCands, nodes: o.FwNodes,
		leaves: o.FwLeaves, roots: o.FwRoots, raw: o.FwRaw, deltas: o.FwDeltas, deltaEn: o.FwDeltaEntries,
		stamps: o.FwStamps, ruleCtr: o.FwRuleStats, logLim: o.FwLogLimits, logStat: o.FwLogStats, limBkt: o.FwLimits,
		recentRules: o.FwRecentRules, hashRules: o.FwHashlimitRules, logCtr: d.logCtr, audit: true}
	return &Audit{Datapath: view, prog: o.Prog, budget: o.FwAuditBudget, counts: o.FwAuditCounts, next: o.FwAuditNext, live: d}, nil
}

// progMap opens the live ingress program's map of that name (one not
// pinned: the kernel knows it by the program's map ids).
func (d *Datapath) progMap(name string) (*ebpf.Map, error) {
	info, err := d.prog.Info()
	if err != nil {
		return nil, fmt.Errorf("reading the live program's maps: %w", err)
	}
	ids, ok := info.MapIDs()
	if !ok {
		return nil, errors.New("reading the live program's maps: the kernel does not report them")
	}
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			return nil, fmt.Errorf("opening the live program's map %d: %w", id, err)
		}
		if mi, err := m.Info(); err == nil && mi.Name == name {
			return m, nil
		}
		m.Close()
	}
	return nil, fmt.Errorf("the live program has no map %s (loaded by another xdpfw version? `xdpfw load` again)", name)
}

// privateMaps are a's own maps by name (auditPrivate).
func (a *Audit) privateMaps() map[string]**ebpf.Map {
	d := a.Datapath
	return map[string]**ebpf.Map{"fw_active": &d.active, "fw_entries": &d.entries, "fw_cands": &d.cands, "fw_nodes": &d.nodes, "fw_leaves": &d.leaves,
		"fw_roots": &d.roots, "fw_raw": &d.raw, "fw_deltas": &d.deltas, "fw_delta_entries": &d.deltaEn, "fw_stamps": &d.stamps,
		"fw_rule_stats": &d.ruleCtr, "fw_log_limits": &d.logLim, "fw_log_stats": &d.logStat, "fw_limits": &d.limBkt,
		"fw_recent_rules": &d.recentRules, "fw_hashlimit_rules": &d.hashRules,
		"fw_audit_budget": &a.budget, "fw_audit_counts": &a.counts, "fw_audit_next": &a.next}
}

// OpenAudit opens the audit in force, from its pins; nil (and no error)
// when none runs.
func (d *Datapath) OpenAudit() (*Audit, error) {
	on, err := d.Auditing()
	if err != nil || !on {
		return nil, err
	}
	a := &Audit{Datapath: &Datapath{dir: d.dir, limits: d.limits, logCtr: d.logCtr, audit: true}, live: d}
	for name, dst := range a.privateMaps() {
		m, err := ebpf.LoadPinnedMap(filepath.Join(d.dir, auditPrefix+name), nil)
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("opening the audit's %s: %w", name, err)
		}
		*dst = m
	}
	a.limits.RuleIDs = int(a.ruleCtr.MaxEntries())
	return a, nil
}

// Auditing tells whether the live program's path has an audit stage.
func (d *Datapath) Auditing() (bool, error) {
	stages, err := d.liveStages()
	if err != nil {
		return false, err
	}
	defer stages.Close()
	var id ebpf.ProgramID
	err = stages.Lookup(uint32(stageAudit), &id)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the program's stages: %w", err)
	}
	return true, nil
}

// StopAudit takes the audit stage out of the live program's path (one
// write: every packet after it is finished without it) and removes the
// audit's pins. Nothing happens when none runs.
func (d *Datapath) StopAudit() error {
	stages, err := d.liveStages()
	if err != nil {
		return err
	}
	defer stages.Close()
	if err := stages.Delete(uint32(stageAudit)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("taking the audit stage out of the program's path: %w", err)
	}
	var errs []error
	for _, name := range pinsWithPrefix(d.dir, auditPrefix) {
		if err := os.Remove(filepath.Join(d.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetInPath puts a's program in the live program's path (on) or takes
// it out, leaving everything else as it is: for benchmarks, which measure
// the same packets with and without it. Only for an Audit StartAudit
// returned.
func (a *Audit) SetInPath(on bool) error {
	if a.prog == nil {
		return errors.New("the audit was opened from its pins: no program handle")
	}
	stages, err := a.live.liveStages()
	if err != nil {
		return err
	}
	defer stages.Close()
	if on {
		return stages.Put(uint32(stageAudit), a.prog)
	}
	if err := stages.Delete(uint32(stageAudit)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}

// Counters reads the audit's own counters.
func (a *Audit) Counters() (AuditCounters, error) {
	slots, err := readSlots(a.counts, auditCounterNum)
	if err != nil {
		return AuditCounters{}, fmt.Errorf("reading the audit's counters: %w", err)
	}
	clk := a.live.clock()
	return AuditCounters{Seen: clk.sum(slots[0]), WouldDrop: clk.sum(slots[1]), WouldAccept: clk.sum(slots[2]),
		Suppressed: clk.sum(slots[3]), Lost: clk.sum(slots[4])}, nil
}

// auditCounterNum is FW_AUDIT_C_NUM.
const auditCounterNum = 5

// Close releases a's file descriptors; its pins (and the audit, when in
// force) stay.
func (a *Audit) Close() {
	for _, m := range a.privateMaps() {
		if *m != nil {
			(*m).Close()
		}
	}
	for _, p := range []*ebpf.Program{a.prog, a.clockProg} {
		if p != nil {
			p.Close()
		}
	}
}
