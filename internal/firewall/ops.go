package firewall

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// clone returns a copy of the rule set in force that can be edited (the
// whole rule set parsed: for changes that recompile every rule).
func (f *Firewall) clone() (*rules.RuleSet, error) {
	rs, _, err := f.rs.ruleSet()
	if err != nil {
		return nil, err
	}
	return &rules.RuleSet{
		Rules:    append([]rules.Rule(nil), rs.Rules...),
		Policies: append([]rules.Policy(nil), rs.Policies...),
		Raw:      append([]rules.Rule(nil), rs.Raw...),
		Chains:   append([]rules.ChainDecl(nil), rs.Chains...),
		Priority: append([]rules.Rule(nil), rs.Priority...),

		PriorityPolicy: rs.PriorityPolicy,
	}, nil
}

// Flush removes every rule of chain (all chains when chain is nil). Policies
// stay, as with iptables -F.
func (f *Firewall) Flush(chain *rules.Chain) (*Result, error) {
	rs, err := f.clone()
	if err != nil {
		return nil, err
	}
	kept := rs.Rules[:0]
	for _, r := range rs.Rules {
		if chain != nil && r.Chain != *chain {
			kept = append(kept, r)
		}
	}
	rs.Rules = kept
	return f.Apply(rs, Options{AllowEmpty: true})
}

// DeleteNth removes rule number n (1-based) of the user chain name and
// returns it.
func (f *Firewall) DeleteNth(name string, n int) (*Result, rules.Rule, error) {
	var gone rules.Rule
	res, err := f.editChain(name, func(rs *rules.RuleSet, at []int) (*rules.RuleSet, error) {
		if n < 1 || n > len(at) {
			return nil, fmt.Errorf("%s has no rule %d (it has %d)", name, n, len(at))
		}
		gone = rs.Rules[at[n-1]]
		rs.Rules = slices.Delete(rs.Rules, at[n-1], at[n-1]+1)
		return rs, nil
	})
	return res, gone, err
}

// FlushChain removes every rule of the user chain name (iptables -F NAME).
func (f *Firewall) FlushChain(name string) (*Result, error) {
	return f.editChain(name, func(rs *rules.RuleSet, at []int) (*rules.RuleSet, error) {
		for k := len(at) - 1; k >= 0; k-- {
			rs.Rules = slices.Delete(rs.Rules, at[k], at[k]+1)
		}
		return rs, nil
	})
}

// NewChain creates the empty user chain name (iptables -N).
func (f *Firewall) NewChain(name string) (*Result, error) {
	rs, err := rules.Parse("<command line>", []byte("-N "+name+"\n"), rules.ParseOptions{Chains: f.rs.policies.Chains})
	if err != nil {
		return nil, err
	}
	if f.rs.policies.HasChain(name) {
		return nil, fmt.Errorf("chain %s already exists", name)
	}
	full, err := f.clone()
	if err != nil {
		return nil, err
	}
	full.Chains = append(full.Chains, rs.Chains...)
	return f.Apply(full, Options{AllowEmpty: true})
}

// DeleteChain deletes the user chain name (iptables -X): refused while it
// holds rules or a rule jumps to it, as iptables does.
func (f *Firewall) DeleteChain(name string) (*Result, error) {
	rs, err := f.clone()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(rs.Chains, func(c rules.ChainDecl) bool { return c.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("no chain %s", name)
	}
	if err := rules.CheckDeleteChain(rs, name); err != nil {
		return nil, err
	}
	rs.Chains = slices.Delete(rs.Chains, i, i+1)
	return f.Apply(rs, Options{AllowEmpty: true})
}

// SetPolicy sets the policy of chain for fam (both families: FamilyAny).
func (f *Firewall) SetPolicy(chain rules.Chain, fam rules.Family, v rules.Verdict) (*Result, error) {
	if f.readOnly {
		return nil, errReadOnly
	}
	if v != rules.VerdictAccept && v != rules.VerdictDrop {
		return nil, fmt.Errorf("a policy is ACCEPT or DROP, not %s", v)
	}
	rs := &rules.RuleSet{Policies: append(slices.Clone(f.rs.policies.Policies), rules.Policy{Chain: chain, Family: fam, Verdict: v}),
		Raw: f.rs.policies.Raw, Chains: f.rs.policies.Chains, Priority: f.rs.policies.Priority, PriorityPolicy: f.rs.policies.PriorityPolicy}
	if !f.rs.base.compiled { // rules read from an older state: compile them all
		full, err := f.clone()
		if err != nil {
			return nil, err
		}
		rs.Rules = full.Rules
	}
	// Normalize: keep only the effective policy per chain and family.
	var ps []rules.Policy
	for c := rules.Chain(0); c < rules.NumChains; c++ {
		v4, v6 := rs.PolicyFor(c, rules.FamilyIPv4), rs.PolicyFor(c, rules.FamilyIPv6)
		switch {
		case v4 == v6 && v4 != rules.VerdictAccept:
			ps = append(ps, rules.Policy{Chain: c, Family: rules.FamilyAny, Verdict: v4})
		case v4 != v6:
			ps = append(ps, rules.Policy{Chain: c, Family: rules.FamilyIPv4, Verdict: v4},
				rules.Policy{Chain: c, Family: rules.FamilyIPv6, Verdict: v6})
		}
	}
	rs.Policies = ps
	if !f.rs.base.compiled {
		return f.Apply(rs, Options{AllowEmpty: true}) // a policy command asks for what it gets
	}
	// The rules stay as they are: rebuild from their compiled entries
	// (folding any pending edits) with the new policies.
	return f.nextGeneration(func() (*Result, error) { return f.rebuild(f.rs, rs, time.Now()) })
}

// Detach removes the firewall from iface. When no interface is left, the
// whole firewall is removed (pins and state) but for the named sets, which
// stay as they were before any load (Teardown removes them too).
func (f *Firewall) Detach(iface string) (last bool, err error) {
	if f.readOnly {
		return false, errReadOnly
	}
	if _, ok := f.st.Interfaces[iface]; !ok {
		return false, fmt.Errorf("xdpfw is not attached to %s (attached: %s)", iface, strings.Join(f.Interfaces(), ", "))
	}
	if err := f.dp.Detach(iface); err != nil {
		return false, err
	}
	delete(f.st.Interfaces, iface)
	if len(f.st.Interfaces) == 0 {
		f.dp.Close()
		f.dp = nil
		if len(f.st.Sets) == 0 {
			return true, teardown(f.paths)
		}
		if err := datapath.UnpinKeepSets(f.paths.PinDir); err != nil {
			return true, err
		}
		return true, saveState(f.paths, f.st.setsOnly(), nil)
	}
	// -i matches resolve against the attached interfaces: recompile.
	rs, ids, err := f.rs.ruleSet()
	if err != nil {
		return false, err
	}
	_, err = f.nextGeneration(func() (*Result, error) { return f.install(rs, ids, nil, Options{}) })
	return false, err
}

// NumSets is the number of named sets.
func (f *Firewall) NumSets() int { return len(f.st.Sets) }

// Teardown detaches every interface and removes all pins (named sets
// included) and the state, whatever state they are in (the way back to a
// clean host).
func Teardown(p Paths) error {
	unlock, err := lock(p)
	if err != nil {
		return err
	}
	defer unlock()
	return teardown(p)
}

func teardown(p Paths) error {
	var errs []error
	for _, iface := range datapath.AttachedInterfaces(p.PinDir) {
		if err := datapath.DetachPinned(p.PinDir, iface); err != nil {
			errs = append(errs, err)
		}
	}
	// Links whose pins are gone still filter (the bpffs was unmounted
	// while something kept it alive): found through the kernel.
	// Best effort: without CAP_SYS_ADMIN they cannot be listed (status
	// says so), and that must not stop a teardown.
	rs, _ := Unpinned(p)
	if err := datapath.DetachRunning(rs); err != nil {
		errs = append(errs, err)
	}
	if err := datapath.Unpin(p.PinDir); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []string{p.StateFile(), p.auditFile(), p.interruptedFile()} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := cleanup(p, nil); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Unpinned lists xdpfw's links that the kernel runs on interfaces of this
// network namespace but that are not pinned in p.PinDir (the bpffs was
// unmounted while something kept it alive): on the interfaces the state
// records, or on any when there is no state (another firewall of this
// namespace, with its own state, keeps its own). status shows them when
// nothing is pinned; `detach --all` detaches them.
// Listing links through the kernel needs CAP_SYS_ADMIN: the error says
// when that failed.
func Unpinned(p Paths) ([]datapath.Running, error) {
	rs, derr := datapath.Discover(p.PinDir)
	st, err := loadState(p)
	var out []datapath.Running
	for _, r := range rs {
		if r.Pinned {
			continue
		}
		if err == nil && st != nil && st.loaded() {
			if _, ok := st.Interfaces[r.Interface]; !ok {
				continue
			}
		}
		out = append(out, r)
	}
	return out, derr
}

// RuleInfo is one rule in force with its counters.
type RuleInfo struct {
	Chain   string           `json:"chain"`
	Num     int              `json:"num"` // 1-based within the chain
	ID      uint32           `json:"id"`
	Rule    string           `json:"rule"`
	Counter datapath.Counter `json:"counters"`
	// Log counts the events of a rule that logs (LOG, or --log).
	Log *datapath.LogCounter `json:"log,omitempty"`
	// VLANBlind are the interfaces whose packets' VLAN tags this rule's
	// --vlan-id cannot see (the NIC strips them and XDP cannot read them
	// there: status says why and the remedy).
	VLANBlind []string `json:"vlan_blind,omitempty"`
}

// PolicyInfo is a chain policy for one family with its counters.
type PolicyInfo struct {
	Chain   string           `json:"chain"`
	Family  string           `json:"family"`
	Verdict string           `json:"verdict"`
	ID      uint32           `json:"id"` // the policy's counter id
	Counter datapath.Counter `json:"counters"`
}

// Listing is the rule set in force with counters.
type Listing struct {
	Generation uint64       `json:"generation"`
	Rules      []RuleInfo   `json:"rules"`
	Policies   []PolicyInfo `json:"policies"`
	// Raw are the raw table's NOTRACK rules in force, in order.
	Raw []string `json:"raw,omitempty"`
	// Priority is the xdpfw-priority table in force, as native lines
	// (its policy, when HIGH, then its rules in order).
	Priority []string `json:"priority,omitempty"`
	// NAT is the nat table xdpfw translates with (load --nat xdpfw), as
	// `-t nat` lines; none when the kernel's nat table is in force.
	NAT []string `json:"nat,omitempty"`
	// Chains are the user-defined chains, by name (their rules are in
	// Rules, chain by chain, after those of the built-in chains).
	Chains []string `json:"chains"`
}

// List returns the rules and policies in force with their counters.
func (f *Firewall) List() (*Listing, error) {
	l := &Listing{Generation: f.st.Generation, Rules: []RuleInfo{}, Chains: []string{}}
	for _, r := range f.rs.policies.Raw {
		l.Raw = append(l.Raw, r.String())
	}
	if pol := f.rs.policies; pol.PriorityOn() {
		l.Priority = strings.Split(strings.TrimSuffix((&rules.RuleSet{Priority: pol.Priority, PriorityPolicy: pol.PriorityPolicy}).String(), "\n"), "\n")
	}
	l.NAT = f.natListing()
	ls, err := f.dp.LogStats()
	if err != nil {
		return nil, err
	}
	// Every counter in one read: policy ids, then the rules' ids.
	var ids []uint32
	for c := rules.Chain(0); c < rules.NumChains; c++ {
		ids = append(ids, compile.PolicyID(uint8(c), false), compile.PolicyID(uint8(c), true))
	}
	refs := f.rs.refs()
	rs := make([]baseRule, len(refs))
	for i, ref := range refs {
		rs[i] = f.rs.ruleOf(ref)
		ids = append(ids, rs[i].ID)
	}
	ctrs, err := f.dp.RuleCounters(ids)
	if err != nil {
		return nil, err
	}
	policyCtr, ruleCtr := ctrs[:2*rules.NumChains], ctrs[2*rules.NumChains:]
	for c := rules.Chain(0); c < rules.NumChains; c++ {
		for v6, fam := range []rules.Family{rules.FamilyIPv4, rules.FamilyIPv6} {
			l.Policies = append(l.Policies, PolicyInfo{Chain: c.String(), Family: fam.String(),
				Verdict: f.rs.policies.PolicyFor(c, fam).String(), ID: compile.PolicyID(uint8(c), v6 == 1),
				Counter: policyCtr[2*int(c)+v6]})
		}
		n := 0
		for i := range rs {
			r := &rs[i]
			if r.Chain != c {
				continue
			}
			n++
			ri := RuleInfo{Chain: c.String(), Num: n, ID: r.ID, Rule: r.Text, Counter: ruleCtr[i]}
			if lc, ok := ls.Rules[ri.ID]; ok && r.Logs {
				ri.Log = &lc
			}
			l.Rules = append(l.Rules, ri)
		}
	}
	// User chains sorted by name, as iptables -S and iptables-save list them.
	for _, c := range slices.SortedFunc(slices.Values(f.rs.policies.Chains), func(a, b rules.ChainDecl) int { return strings.Compare(a.Name, b.Name) }) {
		l.Chains = append(l.Chains, c.Name)
		n, head := 0, "-A "+c.Name+" "
		for i := range rs {
			r := &rs[i]
			if r.Chain != rules.ChainUser || !strings.HasPrefix(r.Text+" ", head) {
				continue
			}
			n++
			ri := RuleInfo{Chain: c.Name, Num: n, ID: r.ID, Rule: r.Text, Counter: ruleCtr[i]}
			if lc, ok := ls.Rules[ri.ID]; ok && r.Logs {
				ri.Log = &lc
			}
			l.Rules = append(l.Rules, ri)
		}
	}
	return l, nil
}

// Save is the listing as iptables -S prints it: the policies (-P, with -4
// or -6 where the families differ), the user chains (-N), then every rule
// (-A), built-in chains first. Parse reads it back into the rule set in
// force.
func (l *Listing) Save() string {
	var b strings.Builder
	for _, c := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		var v4, v6 string
		for _, p := range l.Policies {
			if p.Chain == c && p.Family == rules.FamilyIPv4.String() {
				v4 = p.Verdict
			} else if p.Chain == c {
				v6 = p.Verdict
			}
		}
		if v4 == v6 {
			fmt.Fprintf(&b, "-P %s %s\n", c, v4)
		} else {
			fmt.Fprintf(&b, "-P %s %s -4\n-P %s %s -6\n", c, v4, c, v6)
		}
	}
	for _, c := range l.Chains {
		fmt.Fprintf(&b, "-N %s\n", c)
	}
	for _, r := range l.Rules {
		b.WriteString(r.Rule + "\n")
	}
	for _, r := range l.Priority {
		b.WriteString(r + "\n")
	}
	for _, r := range l.NAT {
		b.WriteString(r + "\n")
	}
	return b.String()
}

// Status summarizes the firewall in force.
type Status struct {
	Generation uint64                 `json:"generation"`
	ProgramID  uint32                 `json:"program_id"`
	PinDir     string                 `json:"pin_dir"`
	Interfaces map[string]IfaceStatus `json:"interfaces"`
	Rules      int                    `json:"rules"`
	Malformed  string                 `json:"malformed"`
	Limits     datapath.Limits        `json:"limits"`       // classifier table sizes (load --max-rules)
	Sets       int                    `json:"sets"`         // named sets
	SetElems   int                    `json:"set_elements"` // their elements, all together
	Reject     RejectLimit            `json:"reject"`       // REJECT's answer budgets
	// CTTCPPickup is conntrack's mid-stream pickup of TCP as the kernel has
	// it: "loose" or "strict".
	CTTCPPickup string        `json:"ct_tcp_pickup"`
	Forward     ForwardStatus `json:"forward"`
	// CTKernelNAT is whether XDP asks the kernel's conntrack about
	// kernel-NATed connections: "on", "off", or "on, inactive: ..." where
	// the kernel cannot be asked (datapath.KernelCTAvailable).
	CTKernelNAT string                      `json:"ct_kernel_nat"`
	Log         LogStatus                   `json:"log"`   // logging's settings and counters
	Delta       DeltaStatus                 `json:"delta"` // single-rule edits waiting for a rebuild
	Priority    PriorityStatus              `json:"priority"`
	Reasons     map[string]datapath.Counter `json:"reasons"`
	// Audit is the candidate rule set checked beside the rules in force
	// (docs/audit.md), when its stage is in the program's path.
	Audit *AuditStatus `json:"audit,omitempty"`
	NAT   NATStatus    `json:"nat"`

	// Work is the most classifier work one packet can cause in the main
	// generation in force (nil: recorded by an earlier version); the
	// delta stage's entries (Delta.Entries) come on top. Bound is what
	// the data plane's loops allow whatever the rules.
	Work  *compile.Work `json:"work,omitempty"`
	Bound compile.Work  `json:"work_bound"`
}

// NATStatus is who translates (load --nat) and, with xdpfw, its counters
// and the bindings in force (docs/nat.md).
type NATStatus struct {
	Mode     string            `json:"mode"` // "kernel" or "xdpfw"
	Counters map[string]uint64 `json:"counters,omitempty"`
	Bindings []string          `json:"bindings,omitempty"` // "proto from -> to", one per direction
}

// AuditStatus is the audit in force, in short (audit list has it all).
type AuditStatus struct {
	File        string    `json:"file"`
	Started     time.Time `json:"started"`
	Seen        uint64    `json:"seen"`
	WouldDrop   uint64    `json:"would_drop"`
	WouldAccept uint64    `json:"would_accept"`
}

// PriorityStatus is the priority classes in force (docs/realtime.md,
// Priority): the bulk CPUs, whether the rules have a priority table, what
// that makes of a packet arriving, and what the data plane did.
type PriorityStatus struct {
	Setting string                 `json:"setting"` // --priority-cpus in force ("auto", "none", a list)
	CPUs    string                 `json:"cpus"`    // the bulk CPUs in force ("none": off)
	Table   bool                   `json:"table"`   // the rules have an xdpfw-priority table
	State   string                 `json:"state"`   // in words
	Stats   datapath.PriorityStats `json:"stats"`
}

// ForwardStatus is how packets FORWARD accepts are delivered: the mode
// in force, the devices the fast path may send to, and the packets by how
// they went (datapath.FwdReason names: "xdp", the fast path; the others,
// the kernel's forwarding and why).
type ForwardStatus struct {
	Mode     datapath.ForwardMode        `json:"mode"`
	Ports    []string                    `json:"ports"`
	Counters map[string]datapath.Counter `json:"counters"`
	// PPPoE are the PPPoE sessions the data plane knows (docs/pppoe.md),
	// by ppp device; PPPoEUnpaired says why the kernel's are not there.
	PPPoE         []string `json:"pppoe_sessions,omitempty"`
	PPPoEUnpaired []string `json:"pppoe_unpaired,omitempty"`
}

// LogStatus is logging's settings in force and its counters.
type LogStatus struct {
	Rate    string            `json:"rate"`             // default rate limit of a logged rule, e.g. "10/sec"
	Burst   uint32            `json:"burst"`            // ... and its burst
	Snap    int               `json:"snap"`             // bytes of a logged packet an event carries
	Rules   int               `json:"rules"`            // rules that log now
	Reader  string            `json:"reader,omitempty"` // pid of the process reading the events, if any (filled by the CLI: telemetry.ReaderPID)
	Counter datapath.LogStats `json:"counters"`
}

// RejectLimit is how many REJECT answers each source (IPv4 address, IPv6
// /64) gets: Rate a second, Burst at once.
type RejectLimit struct {
	Rate  uint32 `json:"rate"`
	Burst uint32 `json:"burst"`
	// GlobalRate is how many all sources together get, a second and at
	// once; 0: no global budget (a program of an earlier version in force).
	GlobalRate uint32 `json:"global_rate"`
}

// IfaceStatus is a configured interface as the kernel reports it
// (datapath.IfaceState): its index, the XDP mode in effect, and whether
// xdpfw filters it (not when it was deleted, or deleted and re-created).
type IfaceStatus = datapath.IfaceState

// Status reports what is loaded and attached, with the per-reason counters.
func (f *Firewall) Status() (*Status, error) {
	s := &Status{Generation: f.st.Generation, PinDir: f.paths.PinDir, Rules: f.rs.count(), Limits: f.dp.Limits(),
		Delta:     f.deltaStatus(),
		Malformed: f.st.Malformed, Interfaces: map[string]IfaceStatus{}, Reasons: map[string]datapath.Counter{},
		Sets: len(f.st.Sets), SetElems: f.st.setElems(),
		// The record holds the settings as the kernel has them (setConfig):
		// a global rate of 0 is an earlier program's, with no global budget.
		Reject: RejectLimit{Rate: pick(f.st.RejectRate, compile.DefaultRejectRate), Burst: pick(f.st.RejectBurst, compile.DefaultRejectBurst),
			GlobalRate: f.st.RejectGlobalRate},
		CTTCPPickup: orDefault(f.st.CTTCPPickup, "loose"), CTKernelNAT: orDefault(f.st.CTKernelNAT, "on")}
	s.Work, s.Bound = f.st.Work, compile.StructuralWork()
	if s.CTKernelNAT == "on" {
		if err := datapath.KernelCTAvailable(); err != nil {
			s.CTKernelNAT = "on, inactive: " + err.Error()
		}
	}
	if info, err := f.dp.Program().Info(); err == nil {
		id, _ := info.ID()
		s.ProgramID = uint32(id)
	}
	ps, err := f.priorityStatus()
	if err != nil {
		return nil, err
	}
	s.Priority = ps
	for name := range f.st.Interfaces {
		s.Interfaces[name] = datapath.InterfaceState(f.paths.PinDir, name)
	}
	ls, err := f.logStatus()
	if err != nil {
		return nil, err
	}
	s.Log = ls
	if s.Forward, err = f.forwardStatus(); err != nil {
		return nil, err
	}
	rc, err := f.dp.ReasonCounters()
	if err != nil {
		return nil, err
	}
	for r, c := range rc {
		s.Reasons[compile.Reason(r).String()] = c
	}
	if s.NAT, err = f.natStatus(); err != nil {
		return nil, err
	}
	if s.Audit, err = f.auditStatus(); err != nil {
		return nil, err
	}
	return s, nil
}

// AddDeviceWarnings fills in the Warnings of s's filtering interfaces: the
// device caveats the rules in force run into (deviceWarnings). Not part of
// Status, which metrics scrapes call: it reads the whole rule set when a
// device has a caveat.
func (f *Firewall) AddDeviceWarnings(s *Status) error {
	var rs *rules.RuleSet
	for name, is := range s.Interfaces {
		c := datapath.CheckDevice(name, is.Mode)
		if !is.Filtering || c == (datapath.DeviceCaveats{}) {
			continue
		}
		if rs == nil {
			var err error
			if rs, _, err = f.rs.ruleSet(); err != nil {
				return err
			}
		}
		is.Warnings = deviceWarnings(rs, name, c)
		s.Interfaces[name] = is
	}
	return nil
}

// logStatus reports logging's settings in force and its counters.
func (f *Firewall) logStatus() (LogStatus, error) {
	ls := LogStatus{Rate: compile.DefaultLogRate.String(), Burst: pick(f.st.LogBurst, compile.DefaultLogBurst),
		Snap: compile.DefaultLogSnap}
	if f.st.LogRate != "" {
		ls.Rate = f.st.LogRate
	}
	if f.st.LogSnap != nil {
		ls.Snap = *f.st.LogSnap
	}
	ls.Rules = f.rs.logRules()
	var err error
	ls.Counter, err = f.dp.LogStats()
	return ls, err
}

// TraceResult explains the verdict on one frame.
type TraceResult struct {
	// Verdict: XDP_PASS / XDP_DROP / XDP_TX (a REJECT answered); with
	// --out the tc verdict: TC_ACT_OK / TC_ACT_SHOT / TC_ACT_REDIRECT (a
	// REJECT answered: the answer goes into this host's stack).
	Verdict   string `json:"verdict"`
	XDPAction uint32 `json:"xdp_action"` // the numeric XDP action (with --out: the tc verdict)
	Chain     string `json:"chain"`      // INPUT / FORWARD / OUTPUT
	RuleID    uint32 `json:"rule_id"`    // the deciding counter id (0: none)
	Rule      string `json:"rule,omitempty"`
	RuleNum   int    `json:"rule_num,omitempty"` // number within the chain, as list shows it
	Policy    bool   `json:"policy"`             // decided by the chain policy
	Action    string `json:"action"`             // ACCEPT / DROP / REJECT / PASS (not IP)
	Reason    string `json:"reason"`             // counter reason, e.g. rule-accept, malformed-ipv4
	CTState   string `json:"ctstate,omitempty"`  // the connection state the packet had (with conntrack)
	Reject    string `json:"reject,omitempty"`   // with REJECT: the --reject-with kind
	// LogRules LOG rules logged the packet; LogSelf: its deciding rule
	// did too (--log). Before rate limits: a trace's events are emitted,
	// marked as a trace, when the budget allows.
	LogRules int  `json:"log_rules"`
	LogSelf  bool `json:"logged_by_rule"`
	// NAT: with --nat xdpfw, a packet FORWARD accepts whose connection
	// has no binding: the translation the nat table picks for a
	// connection whose first packet it is (POSTROUTING, on the route's
	// egress device), "" otherwise.
	NAT string `json:"nat,omitempty"`
	// Binding: with --nat xdpfw, the binding of the packet's connection,
	// if it has one: the chain and rule above judged the packet as
	// Binding.FilterSees.
	Binding *TraceBinding `json:"binding,omitempty"`
}

// TraceOptions say how a frame is traced.
type TraceOptions struct {
	Iface string // arrives on ("" = the first attached interface)
	// Egress traces the frame as a packet this host sends (the OUTPUT
	// chain, tc egress program) instead of one arriving.
	Egress bool
	// CTState >= 0 assumes this connection state (compile.CTNew...; or
	// datapath.AssumeConn: with the connection's direction, status and
	// protocol) instead of asking conntrack; nothing is then recorded in
	// conntrack.
	// datapath.NoCTState: as conntrack says (and the run is recorded).
	CTState int
}

// Trace runs frame through the loaded program as if it arrived on
// o.Iface (or left the host, o.Egress) and names the deciding rule. The run
// counts like a real packet.
func (f *Firewall) Trace(frame []byte, o TraceOptions) (*TraceResult, error) {
	iface := o.Iface
	if iface == "" {
		names := f.Interfaces()
		if len(names) == 0 {
			return nil, errors.New("no interface attached")
		}
		iface = names[0]
	}
	nl, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", iface, err)
	}
	// a bound connection's packet is judged as the chains see it (the
	// trace instance does not translate)
	binding, judged, err := f.traceBinding(frame)
	if err != nil {
		return nil, err
	}
	var r datapath.TraceResult
	if o.Egress {
		r, err = f.dp.TraceEgress(judged, o.CTState)
	} else {
		r, err = f.dp.Trace(judged, uint32(nl.Index), o.CTState)
	}
	if err != nil {
		return nil, err
	}
	out := &TraceResult{XDPAction: r.XDPAction, Chain: rules.Chain(r.Chain).String(), RuleID: r.RuleID,
		Action: r.Action.String(), Reason: r.Reason.String(), LogRules: r.LogRules, LogSelf: r.LogSelf, Binding: binding}
	if f.usesConntrack() || o.CTState >= 0 {
		out.CTState = compile.CTStateName(r.CTState)
	}
	if r.Action == compile.ActReject {
		out.Reject = r.Reject.String()
	}
	if !o.Egress && binding == nil && r.Action == compile.ActAccept && out.Chain == "FORWARD" {
		if out.NAT, err = f.traceNAT(frame, iface); err != nil {
			return nil, err
		}
	}
	switch {
	case o.Egress && r.XDPAction == datapath.TCActOK:
		out.Verdict = "TC_ACT_OK"
	case o.Egress && r.XDPAction == datapath.TCActShot:
		out.Verdict = "TC_ACT_SHOT"
	case o.Egress && r.XDPAction == datapath.TCActRedirect:
		out.Verdict = "TC_ACT_REDIRECT"
	case o.Egress:
		out.Verdict = fmt.Sprintf("tc action %d", r.XDPAction)
	case r.XDPAction == datapath.XDPPass:
		out.Verdict = "XDP_PASS"
	case r.XDPAction == datapath.XDPDrop:
		out.Verdict = "XDP_DROP"
	case r.XDPAction == datapath.XDPTx:
		out.Verdict = "XDP_TX"
	default:
		out.Verdict = fmt.Sprintf("XDP action %d", r.XDPAction)
	}
	if r.RuleID >= compile.FirstRuleID {
		num := map[rules.Chain]int{}
		for _, ref := range f.rs.refs() {
			c := f.rs.ov.Chain(ref)
			num[c]++
			if f.rs.ov.ID(ref) == r.RuleID {
				out.Rule, out.RuleNum = f.rs.ruleOf(ref).Text, num[c]
				break
			}
		}
	} else if r.RuleID != 0 {
		out.Policy = true
	}
	return out, nil
}

// usesConntrack: conntrack runs only when some rule tests the connection.
func (f *Firewall) usesConntrack() bool {
	for _, ref := range f.rs.refs() {
		if f.rs.ruleOf(ref).CT {
			return true
		}
	}
	return false
}

// forwardStatus reads the forwarding mode the data plane has, the devices
// of fw_fwd_ports by name, and the counters by delivery.
func (f *Firewall) forwardStatus() (ForwardStatus, error) {
	s := ForwardStatus{Mode: datapath.ForwardStack, Counters: map[string]datapath.Counter{}}
	cfg, err := f.dp.ConfigInForce()
	if err != nil {
		return s, err
	}
	s.Mode = cfg.Forward
	if s.Mode == datapath.ForwardXDP && f.st.Forward == string(datapath.ForwardXDPVeth) {
		s.Mode = datapath.ForwardXDPVeth // the same program setting; more devices in fw_fwd_ports
	}
	ports, err := f.dp.ForwardPorts()
	if errors.Is(err, datapath.ErrNoFastPath) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	for _, i := range ports {
		name := fmt.Sprintf("ifindex %d", i)
		if nl, err := net.InterfaceByIndex(i); err == nil {
			name = nl.Name
		}
		s.Ports = append(s.Ports, name)
	}
	slices.Sort(s.Ports)
	fc, err := f.dp.ForwardCounters()
	if err != nil {
		return s, err
	}
	for r, c := range fc {
		s.Counters[datapath.FwdReason(r).String()] = c
	}
	if ss, why, err := PPPoESessions(); err == nil {
		for _, p := range ss {
			s.PPPoE = append(s.PPPoE, fmt.Sprintf("%s: session %d on %s, peer %s", p.PPPName, p.SID, p.DevName, p.Peer))
		}
		s.PPPoEUnpaired = why
	}
	return s, nil
}

// priorityStatus reads the priority classes in force.
func (f *Firewall) priorityStatus() (PriorityStatus, error) {
	cpus, err := f.dp.PriorityInForce()
	if err != nil {
		return PriorityStatus{}, err
	}
	st, err := f.dp.PriorityCounters()
	if err != nil {
		return PriorityStatus{}, err
	}
	ps := PriorityStatus{Setting: orDefault(f.st.PriorityCPUs, "auto"), CPUs: datapath.FormatCPUList(cpus),
		Table: f.rs.policies.PriorityOn(), Stats: st}
	switch {
	case !ps.Table:
		ps.State = "off: the rules have no xdpfw-priority table; every packet is judged on the CPU that received it"
	case len(cpus) == 0 && ps.Setting == "auto":
		ps.State = "off: one CPU, nowhere to hand the bulk class to; every packet is judged on the CPU that received it, in arrival order"
	case len(cpus) == 0:
		ps.State = "off: --priority-cpus none; every packet is judged on the CPU that received it"
	default:
		ps.State = "on: HIGH judged on the CPU that received it, BULK handed to CPUs " + ps.CPUs
		// A bulk packet reaches the kernel as an skb built anew on the
		// bulk CPU, without the checksum state a veth's peer left it.
		for _, name := range slices.Sorted(maps.Keys(f.st.Interfaces)) {
			if f.st.Interfaces[name].Mode != string(datapath.ModeNative) {
				continue
			}
			if l, err := netlink.LinkByName(name); err == nil && l.Type() == "veth" {
				ps.State += "; warning: " + name + " is a veth in native mode: BULK packets the kernel accepts must " +
					"come with finished checksums (ethtool -K PEER tx off), a bulk CPU cannot finish an offloaded one"
			}
		}
	}
	return ps, nil
}
