package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// Audit: a candidate rule set checked on live traffic without being
// enforced (bpf/lib/audit.h, docs/audit.md). The audit instance is the
// embedded object loaded again (fw_trace_mode traceAudit), with classifier
// tables, per-rule counters, -m limit buckets and log budgets of its own
// (auditObjs' maps, pinned in the pin directory as auditPrefix + name), and
// the live instance's hand-over slot, sets, -m recent lists, -m hashlimit
// buckets, log ring and log counters. The live program enters it through
// its fw_xdp_stages[FW_XDP_STAGE_AUDIT] and it returns to the live
// program's finish stage through its own fw_audit_next; on a bulk CPU
// (priority.go) xdpfw_cpumap enters its cpumap kind (xdpfw_cpumap_audit)
// through fw_cpumap_stages' slot, and that returns to xdpfw_cpumap_finish
// through fw_audit_cpumap_next: a program array takes one kind of program.

const (
	traceAudit = 3 // FW_TRACE_AUDIT

	// auditPrefix names the audit instance's pins in the pin directory.
	auditPrefix = "audit_"

	// Slots of fw_xdp_stages (bpf/maps.h).
	stageAudit  = 2 // FW_XDP_STAGE_AUDIT
	stageFinish = 3 // FW_XDP_STAGE_FINISH
)

// auditObjs are the audit instance's programs, [0] the XDP kind, [1] the
// cpumap kind (auditStages' order), and the maps it has of its own: the
// candidate's tables, what its rules own, its counters and ways back.
// Everything else its programs use is the live instance's (see
// loadAudit), or per-packet scratch.
type auditObjs struct {
	Prog    *ebpf.Program `ebpf:"xdpfw_audit"`
	CPUProg *ebpf.Program `ebpf:"xdpfw_cpumap_audit"`
	instanceTables
	FwAuditBudget     *ebpf.Map `ebpf:"fw_audit_budget"`
	FwAuditCounts     *ebpf.Map `ebpf:"fw_audit_counts"`
	FwAuditNext       *ebpf.Map `ebpf:"fw_audit_next"`
	FwAuditCpumapNext *ebpf.Map `ebpf:"fw_audit_cpumap_next"`
}

func (o *auditObjs) progs() [2]*ebpf.Program { return [2]*ebpf.Program{o.Prog, o.CPUProg} }
func (o *auditObjs) next() [2]*ebpf.Map      { return [2]*ebpf.Map{o.FwAuditNext, o.FwAuditCpumapNext} }

// auditShared are the live maps the audit instance reads (and writes
// nothing in but the log ring): its program finds the packet and the
// enforced decision in the hand-over slot.
var auditShared = []string{"fw_sets", "fw_addrtypes", "fw_recent", "fw_hashlimit", "fw_connlimit", "fw_ct", "fw_log_ring", "fw_log_counters",
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
// them), and its objects (the programs nil when opened from pins).
type Audit struct {
	*Datapath
	objs auditObjs
	live *Datapath
}

// liveStages opens the live program's fw_xdp_stages (pinned as stagesPin
// + its id).
func (d *Datapath) liveStages() (*ebpf.Map, error) {
	return d.liveArray(d.stages, stagesPin)
}

// liveArray opens the live program's program array m, pinned as pin + the
// program's id (m is nil in a handle from Open).
func (d *Datapath) liveArray(m *ebpf.Map, pin string) (*ebpf.Map, error) {
	if m != nil {
		return m.Clone()
	}
	id, err := progID(d.prog)
	if err != nil {
		return nil, err
	}
	m, err = ebpf.LoadPinnedMap(filepath.Join(d.dir, pin+strconv.FormatUint(uint64(id), 10)), nil)
	if err != nil {
		return nil, fmt.Errorf("opening the program's stages (%s): %w", pin, err)
	}
	return m, nil
}

// auditStages opens the live program arrays an audit stage goes in:
// fw_xdp_stages, then fw_cpumap_stages (the bulk CPUs' program's); the
// caller closes them.
func (d *Datapath) auditStages() ([2]*ebpf.Map, error) {
	xdp, err := d.liveStages()
	if err != nil {
		return [2]*ebpf.Map{}, err
	}
	cpu, err := d.liveArray(d.cpuStages, cpuStagesPin)
	if err != nil {
		xdp.Close()
		return [2]*ebpf.Map{}, err
	}
	return [2]*ebpf.Map{xdp, cpu}, nil
}

func closeAll(ms [2]*ebpf.Map) {
	for _, m := range ms {
		m.Close()
	}
}

// StartAudit loads an audit instance for the live program, installs t (the
// candidate, compiled with its own rule ids) in its tables, sets its event
// budget (burst events, then one per interval), and only then puts it in
// the live program's path. Any audit running before is replaced at that
// one write; a failure before it leaves the live program as it was.
// logSnap is the live program's fw_log_snap (events have one size).
func (d *Datapath) StartAudit(t *compile.Tables, logSnap int, interval time.Duration, burst uint32) (*Audit, error) {
	stages, err := d.auditStages()
	if err != nil {
		return nil, err
	}
	defer closeAll(stages)
	var finish [2]*ebpf.Program
	defer func() {
		for _, p := range finish {
			if p != nil {
				p.Close()
			}
		}
	}()
	for i, st := range stages {
		var id ebpf.ProgramID
		if err := st.Lookup(uint32(stageFinish), &id); err != nil {
			return nil, fmt.Errorf("the loaded program has no finish stage (loaded by an earlier xdpfw version? `xdpfw load` again): %w", err)
		}
		if finish[i], err = ebpf.NewProgramFromID(id); err != nil {
			return nil, fmt.Errorf("opening the finish stage: %w", err)
		}
	}
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
	if err := a.objs.FwAuditBudget.Put(uint32(0), b); err != nil {
		return fail(fmt.Errorf("writing the audit's event budget: %w", err))
	}
	for i, next := range a.objs.next() {
		if err := next.Put(uint32(0), finish[i]); err != nil {
			return fail(fmt.Errorf("linking the audit stage to the finish stage: %w", err))
		}
	}
	// Pins under temporary names first: an audit in force is never left
	// without its pins, and a failure here leaves the one before alone.
	tmp := map[string]*ebpf.Map{}
	for name, m := range instanceMaps(&a.objs) {
		tmp[name] = *m
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
	if err := putAuditStage(stages, a.objs.progs()); err != nil {
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
	repl, closeShared, err := d.sharedMaps(live, auditShared)
	if err != nil {
		return nil, err
	}
	defer closeShared()
	a := &Audit{live: d}
	if err := spec.LoadAndAssign(&a.objs, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, instanceLoadErr("audit", err)
	}
	a.Datapath = a.objs.view(d, lim)
	return a, nil
}

// instanceTables are the maps an instance other than the live one (the
// audit's, the nat's) has of its own: its classifier tables and what its
// rules own.
type instanceTables struct {
	FwActive         *ebpf.Map `ebpf:"fw_active"`
	FwEntries        *ebpf.Map `ebpf:"fw_entries"`
	FwCands          *ebpf.Map `ebpf:"fw_cands"`
	FwNodes          *ebpf.Map `ebpf:"fw_nodes"`
	FwLeaves         *ebpf.Map `ebpf:"fw_leaves"`
	FwRoots          *ebpf.Map `ebpf:"fw_roots"`
	FwRaw            *ebpf.Map `ebpf:"fw_raw"`
	FwDeltas         *ebpf.Map `ebpf:"fw_deltas"`
	FwDeltaEntries   *ebpf.Map `ebpf:"fw_delta_entries"`
	FwStamps         *ebpf.Map `ebpf:"fw_stamps"`
	FwRuleStats      *ebpf.Map `ebpf:"fw_rule_stats"`
	FwLogLimits      *ebpf.Map `ebpf:"fw_log_limits"`
	FwLogStats       *ebpf.Map `ebpf:"fw_log_stats"`
	FwLimits         *ebpf.Map `ebpf:"fw_limits"`
	FwRecentRules    *ebpf.Map `ebpf:"fw_recent_rules"`
	FwHashlimitRules *ebpf.Map `ebpf:"fw_hashlimit_rules"`
	FwConnlimitRules *ebpf.Map `ebpf:"fw_connlimit_rules"`
}

// view is a Datapath of live program d's whose tables are t (Install,
// RuleCounters work on them), sized lim.
func (t *instanceTables) view(d *Datapath, lim Limits) *Datapath {
	return &Datapath{dir: d.dir, limits: lim, active: t.FwActive, entries: t.FwEntries, cands: t.FwCands, nodes: t.FwNodes,
		leaves: t.FwLeaves, roots: t.FwRoots, raw: t.FwRaw, deltas: t.FwDeltas, deltaEn: t.FwDeltaEntries,
		stamps: t.FwStamps, ruleCtr: t.FwRuleStats, logLim: t.FwLogLimits, logStat: t.FwLogStats, limBkt: t.FwLimits,
		recentRules: t.FwRecentRules, hashRules: t.FwHashlimitRules, connRules: t.FwConnlimitRules, logCtr: d.logCtr, instance: true}
}

// instanceMaps are the maps of o, an instance's objects as LoadAndAssign
// fills them (a struct embedding instanceTables), by their `ebpf` names:
// the one list an instance's own maps are pinned, reopened and closed by.
func instanceMaps(o any) map[string]**ebpf.Map {
	out := map[string]**ebpf.Map{}
	instanceFields(reflect.ValueOf(o).Elem(), func(name string, f reflect.Value) {
		if m, ok := f.Addr().Interface().(**ebpf.Map); ok {
			out[name] = m
		}
	})
	return out
}

// closeInstance closes the maps and programs of o (as instanceMaps) that
// are set.
func closeInstance(o any) {
	instanceFields(reflect.ValueOf(o).Elem(), func(_ string, f reflect.Value) {
		switch c := f.Interface().(type) {
		case *ebpf.Map:
			if c != nil {
				c.Close()
			}
		case *ebpf.Program:
			if c != nil {
				c.Close()
			}
		}
	})
}

// instanceFields calls fn with each field of struct v that has an `ebpf`
// name, in embedded structs too.
func instanceFields(v reflect.Value, fn func(name string, f reflect.Value)) {
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if sf.Anonymous && f.Kind() == reflect.Struct {
			instanceFields(f, fn)
		} else if name := sf.Tag.Get("ebpf"); name != "" {
			fn(name, f)
		}
	}
}

// sharedMaps are the live maps of names another instance uses
// (MapReplacements): from live (instanceSpec's), else the live program's
// (progMap: fw_xdp_handoff, which is not pinned, for a handle from Open);
// the caller calls done once the instance is loaded.
func (d *Datapath) sharedMaps(live map[string]*ebpf.Map, names []string) (repl map[string]*ebpf.Map, done func(), err error) {
	var opened []*ebpf.Map
	done = func() {
		for _, m := range opened {
			m.Close()
		}
	}
	if d.handoff != nil {
		live["fw_xdp_handoff"] = d.handoff
	}
	repl = map[string]*ebpf.Map{}
	for _, name := range names {
		m := live[specMapName(name)]
		if m == nil {
			if m, err = d.progMap(name); err != nil {
				done()
				return nil, nil, err
			}
			opened = append(opened, m)
		}
		repl[name] = m
	}
	return repl, done, nil
}

// progMap opens the live ingress (or egress) program's map of that name
// (one not pinned: the kernel knows it by the program's map ids).
func (d *Datapath) progMap(name string) (*ebpf.Map, error) {
	for _, prog := range []*ebpf.Program{d.prog, d.egress} {
		if prog == nil {
			continue
		}
		info, err := prog.Info()
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
	}
	return nil, fmt.Errorf("the live program has no map %s (loaded by another xdpfw version? `xdpfw load` again)", name)
}

// OpenAudit opens the audit in force, from its pins; nil (and no error)
// when none runs.
func (d *Datapath) OpenAudit() (*Audit, error) {
	on, err := d.Auditing()
	if err != nil || !on {
		return nil, err
	}
	a := &Audit{live: d}
	for name, dst := range instanceMaps(&a.objs) {
		m, err := ebpf.LoadPinnedMap(filepath.Join(d.dir, auditPrefix+name), nil)
		if err != nil {
			closeInstance(&a.objs)
			return nil, fmt.Errorf("opening the audit's %s: %w", name, err)
		}
		*dst = m
	}
	lim := d.limits
	lim.RuleIDs = int(a.objs.FwRuleStats.MaxEntries())
	a.Datapath = a.objs.view(d, lim)
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
// write per program array: every packet after it is finished without it)
// and removes the audit's pins. Nothing happens when none runs.
func (d *Datapath) StopAudit() error {
	stages, err := d.auditStages()
	if err != nil {
		return err
	}
	defer closeAll(stages)
	if err := dropAuditStage(stages); err != nil {
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
	if a.objs.Prog == nil {
		return errors.New("the audit was opened from its pins: no program handle")
	}
	stages, err := a.live.auditStages()
	if err != nil {
		return err
	}
	defer closeAll(stages)
	if on {
		return putAuditStage(stages, a.objs.progs())
	}
	return dropAuditStage(stages)
}

// putAuditStage puts progs (the XDP kind, the cpumap kind) in the audit
// slots of stages (auditStages): the bulk CPUs' first, so that the XDP
// slot, which Auditing reads, is written last. A failure leaves the slots
// as they were.
func putAuditStage(stages [2]*ebpf.Map, progs [2]*ebpf.Program) error {
	var old ebpf.ProgramID
	hadOld := stages[1].Lookup(uint32(stageAudit), &old) == nil
	if err := stages[1].Put(uint32(stageAudit), progs[1]); err != nil {
		return err
	}
	if err := stages[0].Put(uint32(stageAudit), progs[0]); err != nil {
		if p, perr := ebpf.NewProgramFromID(old); hadOld && perr == nil {
			_ = stages[1].Put(uint32(stageAudit), p) // the audit before's, as it was
			p.Close()
		} else {
			_ = stages[1].Delete(uint32(stageAudit))
		}
		return err
	}
	return nil
}

// dropAuditStage empties the audit slots of stages: the XDP slot first.
func dropAuditStage(stages [2]*ebpf.Map) error {
	for _, st := range stages {
		if err := st.Delete(uint32(stageAudit)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// Counters reads the audit's own counters.
func (a *Audit) Counters() (AuditCounters, error) {
	slots, err := readSlots(a.objs.FwAuditCounts, auditCounterNum)
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
	closeInstance(&a.objs)
	if a.Datapath != nil && a.clockProg != nil { // the view's, loaded on first use
		a.clockProg.Close()
	}
}
