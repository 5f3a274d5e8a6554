package firewall

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

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
}

// Iface is an attached interface.
type Iface struct {
	Index int    `json:"ifindex"`
	Mode  string `json:"mode"`
}

// state is what is in force, saved as JSON after every change. With no
// interface it records named sets only (made before any load, or kept
// when the last interface was detached).
type state struct {
	Version    int              `json:"version"`
	Generation uint64           `json:"generation"`
	Rules      string           `json:"rules"` // canonical rule file (policies and rules)
	IDs        []uint32         `json:"ids"`   // stable counter id of each rule, in order
	Interfaces map[string]Iface `json:"interfaces"`
	Malformed  string           `json:"malformed"` // "drop" or "accept"
	// Conntrack settings in force: timeouts (seconds, 0: default) and
	// what NEW connections get when the table is full ("drop", "accept").
	CTTimeouts conntrack.Timeouts `json:"ct_timeouts"`
	CTFull     string             `json:"ct_full,omitempty"`
	// Version 2: named sets, by name; their elements are in fw_sets.
	Sets      map[string]*setState `json:"sets,omitempty"`
	NextSetID uint32               `json:"next_set_id,omitempty"` // set ids are never reused
	// REJECT's per-source answer budget in force (0 in states written
	// before REJECT answered: the defaults).
	RejectRate  uint32 `json:"reject_rate,omitempty"`
	RejectBurst uint32 `json:"reject_burst,omitempty"`
	// Program is the datapath.ProgramVersion the last load put in force
	// ("" in states written before it was recorded).
	Program string `json:"program,omitempty"`
	// Logging's settings in force: the default rate limit of logged rules
	// ("" and 0: compile's defaults) and the bytes of a logged packet
	// events carry (nil in states written before logging: the default).
	LogRate  string `json:"log_rate,omitempty"`
	LogBurst uint32 `json:"log_burst,omitempty"`
	LogSnap  *int   `json:"log_snap,omitempty"`
}

// setState is a named set.
type setState struct {
	ID     uint32        `json:"id"`
	Type   rules.SetType `json:"type"`
	Family string        `json:"family"` // inet or inet6
	Size   int           `json:"size"`   // the most elements it may hold
	Count  int           `json:"count"`  // the elements it holds
}

// Version 1 has no sets. This xdpfw reads both and writes version 1 while
// there are no sets, so that an older xdpfw can still read the state.
const (
	stateVersion   = 2
	stateVersionV1 = 1
)

func newState() *state {
	return &state{Version: stateVersion, Interfaces: map[string]Iface{}, Sets: map[string]*setState{}}
}

// loaded reports whether the firewall is loaded (attached somewhere), as
// opposed to holding named sets only.
func (st *state) loaded() bool { return len(st.Interfaces) > 0 }

func (p Paths) StateFile() string { return filepath.Join(p.StateDir, "state.json") }

func loadState(p Paths) (*state, *rules.RuleSet, error) {
	b, err := os.ReadFile(p.StateFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p.StateFile(), err)
	}
	if st.Version != stateVersion && st.Version != stateVersionV1 {
		return nil, nil, fmt.Errorf("%s: state version %d, this xdpfw reads %d and %d", p.StateFile(), st.Version, stateVersionV1, stateVersion)
	}
	rs, err := rules.Parse(p.StateFile(), []byte(st.Rules), rules.ParseOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("state rules do not parse (corrupt state?): %w", err)
	}
	if len(rs.Rules) != len(st.IDs) {
		return nil, nil, fmt.Errorf("%s: %d rules but %d ids", p.StateFile(), len(rs.Rules), len(st.IDs))
	}
	if st.Interfaces == nil {
		st.Interfaces = map[string]Iface{}
	}
	if st.Sets == nil {
		st.Sets = map[string]*setState{}
	}
	return &st, rs, nil
}

// InForce is what a reader of the log events needs of the firewall in
// force.
type InForce struct {
	Rules   *rules.RuleSet
	IDs     []uint32 // the rules' ids, in order
	LogSnap int      // bytes of a logged packet an event carries
}

// ReadInForce reads the rule set in force without taking the lock (the
// state file is replaced atomically), for readers that must not hold up
// changes (`xdpfw log --follow`). It fails with datapath.ErrNotLoaded when
// nothing is loaded.
func ReadInForce(p Paths) (*InForce, error) {
	st, rs, err := loadState(p)
	if err != nil {
		return nil, err
	}
	if st == nil || !st.loaded() {
		return nil, datapath.ErrNotLoaded
	}
	in := &InForce{Rules: rs, IDs: st.IDs, LogSnap: compile.DefaultLogSnap}
	if st.LogSnap != nil {
		in.LogSnap = *st.LogSnap
	}
	return in, nil
}

// save writes the state atomically (temp file + rename).
func (st *state) save(p Paths) error {
	if err := os.MkdirAll(p.StateDir, 0o700); err != nil {
		return err
	}
	st.Version = stateVersionV1
	if len(st.Sets) > 0 || st.NextSetID > 0 {
		st.Version = stateVersion
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := p.StateFile() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p.StateFile())
}

// lock serializes xdpfw invocations that change the firewall.
func lock(p Paths) (func(), error) {
	if err := os.MkdirAll(p.StateDir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(p.StateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}
