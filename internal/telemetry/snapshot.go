// Package telemetry reads what the data plane counts into one typed value,
// the Snapshot, and presents it: rates between two snapshots (xdpfw top)
// and Prometheus metrics (xdpfw metrics, the daemon). `xdpfw stats`,
// `xdpfw top` and /metrics all read through Take, so a counter means the
// same thing everywhere. docs/observability.md describes every field.
package telemetry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
)

// Snapshot is everything xdpfw counts, read at one moment. Counters are
// cumulative since the data plane was first loaded (a rule's since it got
// its id); rates come from two snapshots (Diff).
//
// A new counter family is one field here, filled in Take, and one entry in
// the collector (metrics.go); the LOG ring buffer's losses are meant to go
// in that way.
type Snapshot struct {
	Time       time.Time   `json:"time"`
	Generation uint64      `json:"generation"`
	ProgramID  uint32      `json:"program_id"`
	Interfaces []Interface `json:"interfaces"`
	Rules      []Rule      `json:"rules"`    // every rule in force, chain by chain, in order
	Policies   []Policy    `json:"policies"` // every chain and family
	Reasons    []Reason    `json:"reasons"`  // every reason, in enum order
	Actions    []Action    `json:"actions"`  // every program outcome, in enum order
	Conntrack  Conntrack   `json:"conntrack"`
	// Forward counts the packets FORWARD accepted by how they were
	// forwarded (datapath.FwdReason, in enum order; empty while the
	// program in force predates the fast path).
	Forward []Forwarded `json:"forwarded"`
	// Log counts the events of LOG and --log rules (per rule: Rule.Log).
	Log datapath.LogStats `json:"log"`
	// BPFStats says whether the kernel collects program run time and run
	// counts now: sysctl kernel.bpf_stats_enabled=1, or this process
	// holds BPF_ENABLE_STATS (EnableProgramStats). Another process holding
	// it is invisible. Programs is empty while the kernel does not
	// collect and never counted a run of these programs; it holds the
	// counts so far (frozen) when collection has stopped.
	BPFStats bool      `json:"bpf_stats_enabled"`
	Programs []Program `json:"programs,omitempty"`
	// Latency is the sampled per-packet processing time; nil when the
	// program in force predates it.
	Latency *Latency `json:"latency,omitempty"`
}

// Forwarded is how many packets FORWARD accepted went one way: How "xdp",
// the fast path; any other, the kernel's forwarding, and why.
type Forwarded struct {
	How string `json:"how"`
	datapath.Counter
}

// Interface is a configured interface with the XDP mode the kernel reports
// now ("" when none) and whether xdpfw filters it.
type Interface struct {
	Name  string `json:"name"`
	Index int    `json:"ifindex"`
	Mode  string `json:"mode"`
	// Filtering: xdpfw filters it (false: deleted, or deleted and
	// re-created, and not attached again yet; Problem says which).
	Filtering bool   `json:"filtering"`
	Problem   string `json:"problem,omitempty"`
}

// State is how a listing shows the interface: its XDP mode, or NOT
// FILTERING.
func (i Interface) State() string {
	if !i.Filtering {
		return "NOT FILTERING"
	}
	return i.Mode
}

// Rule is one rule in force and its counters.
type Rule struct {
	Chain string `json:"chain"`
	Num   int    `json:"num"` // 1-based within the chain, as list and delete count
	ID    uint32 `json:"id"`  // the stable counter id
	Text  string `json:"rule"`
	// Hash identifies the rule's text across renumbering: RuleHash(Text).
	Hash string `json:"hash"`
	datapath.Counter
	Log *datapath.LogCounter `json:"log,omitempty"` // a rule that logs: its events
}

// Policy is a chain's policy for one family and the packets it decided.
type Policy struct {
	Chain   string `json:"chain"`
	Family  string `json:"family"`
	Verdict string `json:"verdict"`
	datapath.Counter
}

// Reason counts packets by why they got their verdict (compile.Reason).
// Dropped is how many of them the program dropped (XDP_DROP, TC_ACT_SHOT);
// the others passed or, REJECT answers, left as XDP_TX.
type Reason struct {
	Reason string `json:"reason"`
	datapath.Counter
	Dropped      uint64 `json:"dropped"`
	DroppedBytes uint64 `json:"dropped_bytes"`
}

// Action counts packets by what the program returned.
type Action struct {
	Hook   string `json:"hook"`   // xdp (ingress) or tc (egress)
	Action string `json:"action"` // XDP_PASS, XDP_DROP, XDP_TX, ..., TC_ACT_OK, TC_ACT_SHOT
	datapath.Counter
}

// Conntrack is the connection table by state and its event counters.
type Conntrack struct {
	Entries int `json:"entries"` // in the table, expired ones not yet collected included
	Max     int `json:"max"`
	// ByState counts live connections by state (every state, zeros
	// included); Expired those past their deadline not yet collected.
	ByState map[string]int `json:"by_state"`
	Expired int            `json:"expired_not_collected"`
	// Events: created, table_full, invalid, expired_replaced, early_drop,
	// picked_up, frag_tracked, frag_unknown, frag_expired, frag_overlap,
	// kernel_nat (see conntrack.StatNames).
	Events map[string]uint64 `json:"events"`
}

// Program is one entry program's run statistics, kept by the kernel while
// BPF stats are enabled.
type Program struct {
	Name            string        `json:"name"` // xdpfw_ingress, xdpfw_egress
	Hook            string        `json:"hook"` // xdp, tc
	ID              uint32        `json:"id"`
	RunTime         time.Duration `json:"run_time_ns"`
	Runs            uint64        `json:"runs"`
	RecursionMisses uint64        `json:"recursion_misses"`
}

// RuleHash is a rule's stable identity for metrics: the first 16 hex
// digits of the SHA-256 of its canonical text ("-A INPUT -p tcp ... -j
// ACCEPT", as list prints it). Numbers change when rules are inserted
// before; the hash changes only when the rule's text does.
func RuleHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:8])
}

// Take reads a snapshot of the firewall in force, opened read-only (never
// waiting behind a change in progress; see firewall.OpenReadOnly). It
// fails with datapath.ErrNotLoaded when nothing is loaded.
func Take(p firewall.Paths) (*Snapshot, error) {
	fw, err := firewall.OpenReadOnly(p)
	if err != nil {
		return nil, err
	}
	defer fw.Close()
	return TakeFrom(fw)
}

// TakeFrom reads a snapshot through an open firewall.
func TakeFrom(fw *firewall.Firewall) (*Snapshot, error) {
	st, err := fw.Status()
	if err != nil {
		return nil, err
	}
	l, err := fw.List()
	if err != nil {
		return nil, err
	}
	dp := fw.Datapath()
	oc, err := dp.ReadOutcomes()
	if err != nil {
		return nil, err
	}
	ct, err := dp.CTStats()
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Time: time.Now().Round(0), Generation: l.Generation, ProgramID: st.ProgramID,
		Rules: make([]Rule, 0, len(l.Rules))}
	for name, i := range st.Interfaces {
		s.Interfaces = append(s.Interfaces, Interface{Name: name, Index: i.Index, Mode: string(i.Mode), Filtering: i.Filtering, Problem: i.Problem})
	}
	sort.Slice(s.Interfaces, func(i, j int) bool { return s.Interfaces[i].Name < s.Interfaces[j].Name })
	for _, r := range l.Rules {
		s.Rules = append(s.Rules, Rule{Chain: r.Chain, Num: r.Num, ID: r.ID, Text: r.Rule, Hash: RuleHash(r.Rule),
			Counter: r.Counter, Log: r.Log})
	}
	for _, p := range l.Policies {
		s.Policies = append(s.Policies, Policy{Chain: p.Chain, Family: p.Family, Verdict: p.Verdict, Counter: p.Counter})
	}
	if s.Latency, err = TakeLatency(dp); err != nil {
		return nil, err
	}
	s.Reasons, s.Actions = fromOutcomes(oc)
	s.Conntrack = fromCT(ct)
	if fc, err := dp.ForwardCounters(); err == nil {
		for r, c := range fc {
			s.Forward = append(s.Forward, Forwarded{How: datapath.FwdReason(r).String(), Counter: c})
		}
	} else if !errors.Is(err, datapath.ErrNoFastPath) {
		return nil, err
	}
	s.Log = st.Log.Counter
	s.BPFStats, s.Programs = programStats(map[string]*ebpf.Program{
		"xdpfw_ingress": dp.Program(), "xdpfw_egress": dp.EgressProgram()})
	return s, nil
}

// fromOutcomes turns the (outcome, reason) counters into per-reason counts
// with their drops, and per-outcome counts.
func fromOutcomes(oc *datapath.OutcomeCounters) ([]Reason, []Action) {
	reasons := make([]Reason, compile.NumReasons)
	for r, c := range oc.Reasons() {
		reasons[r] = Reason{Reason: compile.Reason(r).String(), Counter: c}
		for o := datapath.Outcome(0); o < datapath.NumOutcomes; o++ {
			if o.Dropped() {
				reasons[r].Dropped += oc[o][r].Packets
				reasons[r].DroppedBytes += oc[o][r].Bytes
			}
		}
	}
	actions := make([]Action, datapath.NumOutcomes)
	for o, c := range oc.Outcomes() {
		out := datapath.Outcome(o)
		actions[o] = Action{Hook: out.Hook(), Action: out.String(), Counter: c}
	}
	return reasons, actions
}

func fromCT(st conntrack.Stats) Conntrack {
	c := Conntrack{Entries: st.Entries, Max: st.Max, Expired: st.Expired, ByState: map[string]int{},
		Events: st.Counters}
	for s := conntrack.State(1); s < conntrack.NumStates; s++ { // NONE never stays in the table
		c.ByState[s.String()] = st.ByState[s.String()]
	}
	return c
}

// bpfStatsSysctl is where the kernel says whether it collects program
// statistics for everyone.
const bpfStatsSysctl = "/proc/sys/kernel/bpf_stats_enabled"

// programStats reads the programs' run statistics.
func programStats(progs map[string]*ebpf.Program) (bool, []Program) {
	b, _ := os.ReadFile(bpfStatsSysctl)
	enabled := strings.TrimSpace(string(b)) == "1" || statsHeld.Load() > 0
	var out []Program
	counted := false
	for name, p := range progs {
		if p == nil {
			continue
		}
		ps, err := p.Stats()
		if err != nil {
			continue
		}
		pr := Program{Name: name, Hook: "xdp", RunTime: ps.Runtime, Runs: ps.RunCount, RecursionMisses: ps.RecursionMisses}
		if name == "xdpfw_egress" {
			pr.Hook = "tc"
		}
		if info, err := p.Info(); err == nil {
			id, _ := info.ID()
			pr.ID = uint32(id)
		}
		counted = counted || pr.Runs > 0
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name > out[j].Name }) // ingress first
	if !enabled && !counted {
		return false, nil
	}
	return enabled, out
}

// statsHeld counts this process's live EnableProgramStats handles.
var statsHeld atomic.Int32

// statsHandle undoes one EnableProgramStats.
type statsHandle struct {
	fd   io.Closer
	once sync.Once
}

func (h *statsHandle) Close() error {
	var err error
	h.once.Do(func() {
		err = h.fd.Close()
		statsHeld.Add(-1)
	})
	return err
}

// EnableProgramStats asks the kernel to collect program run time and run
// counts (BPF_ENABLE_STATS) until the returned Closer is closed or the
// process exits. It costs every BPF program on the host two clock reads
// per run, which is why the kernel leaves it off.
func EnableProgramStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enabling BPF program statistics: %w", err)
	}
	statsHeld.Add(1)
	return &statsHandle{fd: c}, nil
}
