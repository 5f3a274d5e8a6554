package firewall

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// Audit: a candidate rule set checked on live traffic beside the one in
// force, never enforced (docs/audit.md, internal/datapath/audit.go). The
// record of the audit in force is auditName in the state directory: the
// candidate's rules as a rule file, their ids, where they came from.

const auditName = "audit.json"

// AuditOptions are audit start's settings.
type AuditOptions struct {
	// File names where the candidate came from (shown by audit list).
	File string
	// Rate and Burst: events for packets whose verdict would differ, at
	// most Burst at once, then Rate per second, over all rules together
	// (0: DefaultAuditRate, DefaultAuditBurst).
	Rate  float64
	Burst uint32
}

// Defaults of AuditOptions.
const (
	DefaultAuditRate  = 10
	DefaultAuditBurst = 20
)

// auditRecord is what auditName holds.
type auditRecord struct {
	File    string    `json:"file"`
	Started time.Time `json:"started"`
	// Rules is the candidate as a rule file (iptables-save form); rule i
	// has counter id compile.FirstRuleID + i in the audit's own counters.
	Rules string  `json:"rules"`
	Rate  float64 `json:"rate"`
	Burst uint32  `json:"burst"`
}

func (p Paths) auditFile() string { return filepath.Join(p.StateDir, auditName) }

// readAudit reads the audit record; nil when none is there.
func readAudit(p Paths) (*auditRecord, error) {
	b, err := os.ReadFile(p.auditFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r auditRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", p.auditFile(), err)
	}
	return &r, nil
}

// ruleSet parses the candidate back, with its rule ids.
func (r *auditRecord) ruleSet(p Paths) (*rules.RuleSet, []uint32, error) {
	rs, err := rules.Parse(p.auditFile(), []byte(r.Rules), rules.ParseOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("the audit's candidate: %w", err)
	}
	return rs, auditIDs(len(rs.Rules)), nil
}

// auditIDs are the candidate's rule ids: its own counters, its own space.
func auditIDs(n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(compile.FirstRuleID + i)
	}
	return ids
}

// AuditResult is what StartAudit reports.
type AuditResult struct {
	Rules    int      `json:"rules"`
	Entries  int      `json:"entries"`
	Replaced bool     `json:"replaced"` // an audit ran before and this one took its place
	Warnings []string `json:"warnings,omitempty"`
}

// StartAudit compiles rs as a candidate and puts it beside the rules in
// force: every packet the XDP program decides by a rule is classified by
// the candidate too, counted by its rules, and reported when the verdict
// would differ. Enforcement is untouched; a candidate that fails to
// compile or load changes nothing, and an audit running before goes on.
func (f *Firewall) StartAudit(rs *rules.RuleSet, opt AuditOptions) (*AuditResult, error) {
	if f.readOnly {
		return nil, errors.New("the firewall was opened read-only")
	}
	if opt.Rate == 0 {
		opt.Rate = DefaultAuditRate
	}
	if opt.Burst == 0 {
		opt.Burst = DefaultAuditBurst
	}
	if opt.Rate < 0 || opt.Rate > 1e6 {
		return nil, fmt.Errorf("--log-rate %g: want a rate per second in (0, 1000000]", opt.Rate)
	}
	names, err := f.st.ifaceNames()
	if err != nil {
		return nil, err
	}
	var logRate rules.LogRate
	if f.st.LogRate != "" {
		if logRate, err = rules.ParseLogRate(f.st.LogRate); err != nil {
			return nil, fmt.Errorf("the log rate in force (%s): %w", f.paths.StateFile(), err)
		}
	}
	lim := f.dp.Limits()
	ids := auditIDs(len(rs.Rules))
	tables, warns, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: names.Attached, HostIfaces: names.Host,
		Sets: f.st.compileSets(), LogRate: logRate, LogBurst: f.st.LogBurst,
		MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
	if err != nil {
		return nil, err
	}
	res := &AuditResult{Rules: len(rs.Rules), Entries: len(tables.Entries), Warnings: ruleWarnings(rs, warns)}
	res.Warnings = append(res.Warnings, f.auditWarnings(rs)...)
	prev, err := readAudit(f.paths)
	if err != nil {
		return nil, err
	}
	res.Replaced = prev != nil
	rec := auditRecord{File: opt.File, Started: time.Now().UTC(), Rules: rs.String(), Rate: opt.Rate, Burst: opt.Burst}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	// The record first: an audit in force always has one (a record
	// without an audit is harmless: list says none runs).
	if err := writeFileAtomic(f.paths.auditFile(), b); err != nil {
		return nil, fmt.Errorf("writing %s: %w", f.paths.auditFile(), err)
	}
	snap := compile.DefaultLogSnap
	if f.st.LogSnap != nil {
		snap = *f.st.LogSnap
	}
	a, err := f.dp.StartAudit(tables, snap, time.Duration(float64(time.Second)/opt.Rate), opt.Burst)
	if a != nil && err != nil { // in the path, but a pin failed: the record is this audit's
		a.Close()
		return res, err
	}
	if err != nil {
		if prev != nil { // the audit before goes on: its record back
			if pb, merr := json.MarshalIndent(prev, "", "  "); merr == nil {
				_ = writeFileAtomic(f.paths.auditFile(), pb)
			}
		} else {
			_ = os.Remove(f.paths.auditFile())
		}
		return nil, err
	}
	a.Close()
	return res, nil
}

// auditWarnings says what the audit of rs cannot show.
func (f *Firewall) auditWarnings(rs *rules.RuleSet) []string {
	var out []string
	for i := range rs.Rules {
		if rs.Rules[i].Chain == rules.ChainOutput {
			out = append(out, "the candidate's OUTPUT rules are not audited: the audit runs in the XDP program (INPUT and FORWARD)")
			break
		}
	}
	cand := false
	for i := range rs.Rules {
		cand = cand || rs.Rules[i].Match.NeedsConntrack()
	}
	if cand && !f.usesConntrack() {
		out = append(out, "the candidate tests connection states but the rules in force track no connections: "+
			"it sees every packet as NEW until rules in force use conntrack")
	}
	if len(rs.Raw) > 0 {
		out = append(out, "the candidate's raw table is not audited: it sees the connection states of the rules in force")
	}
	return out
}

// StopAudit ends the audit in force (none: nothing happens).
func (f *Firewall) StopAudit() error {
	if f.readOnly {
		return errors.New("the firewall was opened read-only")
	}
	return stopAudit(f.paths, f.dp)
}

// stopAudit takes the audit out of dp's path and removes its record.
func stopAudit(p Paths, dp *datapath.Datapath) error {
	if err := dp.StopAudit(); err != nil {
		return err
	}
	if err := os.Remove(p.auditFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// PromoteAudit enforces the audited candidate, as apply of its rules (the
// record's copy: what was audited, not the file as it may be now), then
// ends the audit.
func (f *Firewall) PromoteAudit(opt Options) (*Result, error) {
	rec, err := readAudit(f.paths)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, errors.New("no audit runs (xdpfw audit start FILE)")
	}
	rs, _, err := rec.ruleSet(f.paths)
	if err != nil {
		return nil, err
	}
	res, err := f.Apply(rs, opt)
	if err != nil {
		return nil, err
	}
	if err := f.StopAudit(); err != nil {
		return res, fmt.Errorf("the candidate is in force, but stopping its audit: %w", err)
	}
	return res, nil
}

// AuditListing is the audit in force: the candidate's rules with their
// counters, as list shows the rules in force, and the audit's totals.
type AuditListing struct {
	File     string                 `json:"file"`
	Started  time.Time              `json:"started"`
	Counters datapath.AuditCounters `json:"counters"`
	Rules    *Listing               `json:"candidate"`
	Rate     float64                `json:"log_rate"`
	Burst    uint32                 `json:"log_burst"`
}

// ErrNoAudit: no audit runs.
var ErrNoAudit = errors.New("no audit runs (xdpfw audit start FILE)")

// AuditList returns the audit in force, or ErrNoAudit.
func (f *Firewall) AuditList() (*AuditListing, error) {
	rec, err := readAudit(f.paths)
	if err != nil {
		return nil, err
	}
	a, err := f.dp.OpenAudit()
	if err != nil {
		return nil, err
	}
	if a == nil || rec == nil {
		if a != nil {
			a.Close()
		}
		return nil, ErrNoAudit
	}
	defer a.Close()
	rs, ids, err := rec.ruleSet(f.paths)
	if err != nil {
		return nil, err
	}
	b := rulesOnlyBase(rs, ids)
	defer b.close()
	view := &Firewall{paths: f.paths, st: &state{Generation: 0}, dp: a.Datapath,
		rs: &ruleStore{policies: policiesOf(rs), base: b, ov: b.overlay()}}
	l, err := view.List()
	if err != nil {
		return nil, err
	}
	c, err := a.Counters()
	if err != nil {
		return nil, err
	}
	return &AuditListing{File: rec.File, Started: rec.Started, Counters: c, Rules: l, Rate: rec.Rate, Burst: rec.Burst}, nil
}

// ReadAudit returns the candidate under audit and its rule ids (nil when
// no audit is recorded): what `xdpfw log` names audit events by.
func ReadAudit(p Paths) (*rules.RuleSet, []uint32, error) {
	rec, err := readAudit(p)
	if err != nil || rec == nil {
		return nil, nil, err
	}
	return rec.ruleSet(p)
}

// auditStatus is the audit whose stage is in the program's path, nil when
// none is.
func (f *Firewall) auditStatus() (*AuditStatus, error) {
	a, err := f.dp.OpenAudit()
	if err != nil || a == nil {
		return nil, err
	}
	defer a.Close()
	c, err := a.Counters()
	if err != nil {
		return nil, err
	}
	s := &AuditStatus{Seen: c.Seen.Packets, WouldDrop: c.WouldDrop.Packets, WouldAccept: c.WouldAccept.Packets}
	if rec, err := readAudit(f.paths); err == nil && rec != nil {
		s.File, s.Started = rec.File, rec.Started
	}
	return s, nil
}
