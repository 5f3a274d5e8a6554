package firewall

import (
	"time"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// DefaultStateDir holds the rule set in force (the text of the rules and
// their stable ids) next to the pinned data plane.
const DefaultStateDir = "/run/xdpfw"

// Paths locates the pinned data plane and the state.
type Paths struct {
	PinDir   string // bpffs directory, default /sys/fs/bpf/xdpfw
	StateDir string // default /run/xdpfw
	// LockWait bounds the wait for another xdpfw's change (0: as long as
	// it takes; NoWait: not at all). LockWaiting is told, after a second
	// of waiting, whom it waits for (nil: standard error).
	LockWait    time.Duration
	LockWaiting func(msg string)
}

// Iface is an attached interface.
type Iface struct {
	Index int    `json:"ifindex"`
	Mode  string `json:"mode"`
}

// state is what is in force, saved as JSON after every change. With no
// interface it records named sets only (made before any load, or kept
// when the last interface was detached). The rules themselves are in the
// base file it names (base.go) plus the edits of Delta.
type state struct {
	Version int `json:"version"`
	// Generation counts the changes of the rule set in force (a rebuild
	// that only folds the delta stage changes nothing in force).
	Generation uint64 `json:"generation"`
	// Versions 1 and 2 held the rules here: the canonical rule file and
	// each rule's stable counter id. Read, never written.
	Rules string   `json:"rules,omitempty"`
	IDs   []uint32 `json:"ids,omitempty"`
	// Version 4: the classifier this record describes, as the kernel
	// names it (record.go). Records of version 4 are checksummed.
	Commit *datapath.InForce `json:"commit,omitempty"`
	// Version 3: the policies ("-P" lines), the base file of the main
	// generation, the number of main generations built (the last one's
	// stamp, see datapath.InstallStamped), and the single-rule edits in
	// the delta stage since.
	Policies   string           `json:"policies,omitempty"`
	Base       string           `json:"base,omitempty"`
	Builds     uint64           `json:"builds,omitempty"`
	Delta      *deltaState      `json:"delta,omitempty"`
	Interfaces map[string]Iface `json:"interfaces"`
	// OutIfaces: the host's interfaces FORWARD's -o names matched when the
	// rules in force were compiled (name -> ifindex; outBinding). One
	// created, removed, renamed or re-created since makes Reconcile apply.
	OutIfaces map[string]uint32 `json:"out_interfaces,omitempty"`
	Malformed string            `json:"malformed"` // "drop" or "accept"
	// Conntrack settings in force: timeouts (seconds, 0: default) and
	// what NEW connections get when the table is full ("drop", "accept").
	CTTimeouts conntrack.Timeouts `json:"ct_timeouts"`
	CTFull     string             `json:"ct_full,omitempty"`
	// CTTCPPickup: "loose" or "strict" ("" in states written before
	// mid-stream pickup: loose).
	CTTCPPickup string `json:"ct_tcp_pickup,omitempty"`
	// Forward: how packets FORWARD accepts are delivered, "xdp" (the
	// fast path) or "stack" ("" in states written before the fast path:
	// the next load makes it "xdp").
	Forward string `json:"forward,omitempty"`
	// CTKernelNAT: "on" or "off" ("" in states written before it: on).
	CTKernelNAT string `json:"ct_kernel_nat,omitempty"`
	// PriorityCPUs: the --priority-cpus in force ("auto", "none" or a
	// CPU list; "" in states written before priority: auto).
	PriorityCPUs string `json:"priority_cpus,omitempty"`
	// NAT: who translates, "kernel" or "xdpfw" (load --nat; "": kernel).
	NAT string `json:"nat,omitempty"`
	// NATRules: with NAT "xdpfw", the nat table xdpfw translates with, as
	// `-t nat` lines (rules.RuleSet.String): what list prints and apply
	// compares a file's nat table with.
	NATRules string `json:"nat_rules,omitempty"`
	// Version 2: named sets, by name; their elements are in fw_sets.
	Sets      map[string]*setState `json:"sets,omitempty"`
	NextSetID uint32               `json:"next_set_id,omitempty"` // set ids are never reused
	// REJECT's per-source answer budget in force (0 in states written
	// before REJECT answered: the defaults).
	RejectRate  uint32 `json:"reject_rate,omitempty"`
	RejectBurst uint32 `json:"reject_burst,omitempty"`
	// REJECT's global budget, all sources together (0 in states written
	// before it: the default).
	RejectGlobalRate uint32 `json:"reject_global_rate,omitempty"`
	// Program is the datapath.ProgramVersion the last load put in force
	// ("" in states written before it was recorded).
	Program string `json:"program,omitempty"`
	// Logging's settings in force: the default rate limit of logged rules
	// ("" and 0: compile's defaults) and the bytes of a logged packet
	// events carry (nil in states written before logging: the default).
	LogRate  string `json:"log_rate,omitempty"`
	LogBurst uint32 `json:"log_burst,omitempty"`
	LogSnap  *int   `json:"log_snap,omitempty"`
	// Work is the most classifier work one packet can cause in the main
	// generation in force (compile.Tables.Work; nil in states written
	// before it was recorded).
	Work *compile.Work `json:"work,omitempty"`
}

// setState is a named set.
type setState struct {
	ID     uint32        `json:"id"`
	Type   rules.SetType `json:"type"`
	Family string        `json:"family"` // inet or inet6
	Size   int           `json:"size"`   // the most elements it may hold
	Count  int           `json:"count"`  // the elements it holds
}

// deltaState is what the delta stage holds: base rules deleted and rules
// added since the base was built (compile.Overlay's edits).
type deltaState struct {
	Deleted []deletedRule `json:"deleted,omitempty"`
	Added   []addedRule   `json:"added,omitempty"` // in order among those of the same anchor
}

type deletedRule struct {
	Base   int      `json:"base"`             // index in the base
	Copies []uint32 `json:"copies,omitempty"` // compile.Deletion.Copies
}

type addedRule struct {
	Anchor int    `json:"anchor"` // compile.Addition.Anchor
	ID     uint32 `json:"id"`
	Rule   string `json:"rule"` // canonical text
}

// Version 1 has no sets, version 2 has, version 3 keeps the rules in a
// base file, version 4 names the classifier it describes and is
// checksummed (record.go). This xdpfw reads all four and writes version 4.
const (
	stateVersion   = 4
	stateVersionV3 = 3
	stateVersionV2 = 2
	stateVersionV1 = 1
)

func newState() *state {
	return &state{Version: stateVersion, Interfaces: map[string]Iface{}, Sets: map[string]*setState{}}
}

// loaded reports whether the firewall is loaded (attached somewhere), as
// opposed to holding named sets only.
func (st *state) loaded() bool { return len(st.Interfaces) > 0 }

// InForce is what a reader of the log events needs of the firewall in
// force.
type InForce struct {
	Rules   *rules.RuleSet
	IDs     []uint32 // the rules' ids, in order
	LogSnap int      // bytes of a logged packet an event carries
}

// ReadInForce reads the rule set in force without taking the lock (the
// record the kernel confirms, see record.go), for readers that must not hold up
// changes (`xdpfw log --follow`). It fails with datapath.ErrNotLoaded when
// nothing is loaded.
func ReadInForce(p Paths) (*InForce, error) {
	dp, st, store, err := readStore(p)
	if err != nil {
		return nil, err
	}
	dp.Close()
	defer store.close()
	rs, ids, err := store.ruleSet()
	if err != nil {
		return nil, err
	}
	in := &InForce{Rules: rs, IDs: ids, LogSnap: compile.DefaultLogSnap}
	if st.LogSnap != nil {
		in.LogSnap = *st.LogSnap
	}
	return in, nil
}
