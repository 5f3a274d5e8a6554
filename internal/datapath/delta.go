package datapath

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// The delta stage (docs/classifier.md, "Single edits"): a small table of
// edits the data plane applies after the main generation's trees, put in
// force with one write of fw_active and cleared by the next Install.

// active is fw_active decoded: FW_ACTIVE(gen, delta) = 1 + gen + 2*delta.
type active struct {
	installed bool
	gen       uint32 // main generation, 0 or 1
	delta     uint32 // 0: none; 1+h: delta half h in force
}

// activeValue is FW_ACTIVE(gen, delta).
func activeValue(gen, delta uint32) uint32 { return 1 + gen + 2*delta }

func (d *Datapath) activeState() (active, error) {
	var v uint32
	if err := d.active.Lookup(uint32(0), &v); err != nil {
		return active{}, fmt.Errorf("reading fw_active: %w", err)
	}
	return decodeActive(v), nil
}

// decodeActive is activeValue's inverse (0: none installed).
func decodeActive(v uint32) active {
	if v == 0 {
		return active{}
	}
	return active{installed: true, gen: (v - 1) & 1, delta: (v - 1) >> 1}
}

// ErrStaleBase means the main generation in force is not the one a delta
// was built against (a record on disk behind the kernel, which records the
// kernel confirms never are): the rule set must be rebuilt in full.
var ErrStaleBase = errors.New("the classifier in force is not the one the edit was computed against")

// Stamp is the rule-set generation the main generation in force was
// installed as (InstallStamped), 0 when none is installed.
func (d *Datapath) Stamp() (uint64, error) {
	a, err := d.activeState()
	if err != nil || !a.installed {
		return 0, err
	}
	var s uint64
	if err := d.stamps.Lookup(a.gen, &s); err != nil {
		return 0, fmt.Errorf("reading fw_stamps: %w", err)
	}
	return s, nil
}

// InstallDelta puts dl in force on top of the main generation, which must
// be the one installed as stamp (else ErrStaleBase), and returns when the
// switch happened. The delta is written into the half of fw_deltas packets
// do not use, then one write of fw_active switches every new packet to it,
// then it waits for an RCU grace period (as Install) before returning. An
// empty dl clears the delta stage. A packet sees the delta before or after
// the edit, never a mix.
func (d *Datapath) InstallDelta(dl *compile.Delta, stamp uint64) (time.Time, error) {
	a, err := d.activeState()
	if err != nil {
		return time.Time{}, err
	}
	if have, err := d.Stamp(); err != nil {
		return time.Time{}, err
	} else if !a.installed || have != stamp || stamp == 0 {
		return time.Time{}, fmt.Errorf("%w (installed as generation %d, the edit is for %d)", ErrStaleBase, have, stamp)
	}
	if dl.Empty() {
		if a.delta == 0 {
			return time.Now(), nil
		}
		if err := d.active.Put(uint32(0), activeValue(a.gen, 0)); err != nil {
			return time.Time{}, fmt.Errorf("clearing the delta stage: %w", err)
		}
		return time.Now(), graceperiod()
	}
	if len(dl.Entries) > compile.DeltaMax || len(dl.Dead) > compile.DeltaDeadMax || len(dl.Pos) != len(dl.Entries) {
		return time.Time{}, fmt.Errorf("delta of %d entries and %d deleted rules: %w", len(dl.Entries), len(dl.Dead), compile.ErrDeltaFull)
	}
	half := uint32(0)
	if a.delta == 1 { // half 0 in force
		half = 1
	}
	v, ents := deltaToBPF(dl)
	if err := putRange(d.deltaEn, half*compile.DeltaMax, ents); err != nil {
		return time.Time{}, fmt.Errorf("writing the delta entries: %w", err)
	}
	if err := d.deltas.Put(half, &v); err != nil {
		return time.Time{}, fmt.Errorf("writing the delta stage: %w", err)
	}
	if err := d.active.Put(uint32(0), activeValue(a.gen, 1+half)); err != nil {
		return time.Time{}, fmt.Errorf("switching to the delta stage: %w", err)
	}
	live := time.Now()
	return live, graceperiod()
}

// DeltaInForce reports whether a delta stage is in force.
func (d *Datapath) DeltaInForce() (bool, error) {
	a, err := d.activeState()
	return a.delta != 0, err
}

// deltaToBPF is dl as the data plane holds it: a fw_deltas half and its
// entries.
func deltaToBPF(dl *compile.Delta) (xdpfwFwDelta, []xdpfwFwEntry) {
	v := xdpfwFwDelta{Count: uint32(len(dl.Entries)), DeadCount: uint32(len(dl.Dead))}
	copy(v.Dead[:], dl.Dead)
	copy(v.Pos[:], dl.Pos)
	for r := range dl.Roots {
		v.Roots[r] = rootToBPF(&dl.Roots[r])
	}
	ents := make([]xdpfwFwEntry, len(dl.Entries))
	for i := range dl.Entries {
		ents[i] = toBPF(&dl.Entries[i])
	}
	return v, ents
}

// InForce names what the classifier has in force, as the kernel holds it:
// the stamp of the main generation (InstallStamped) and a tag of the
// delta stage. The control plane names the record of each rule set it
// installs by the InForce it will have (firewall/record.go), so that the
// kernel's one switch (fw_active) commits the record too.
type InForce struct {
	Installed bool   `json:"installed"`
	Stamp     uint64 `json:"stamp"`
	// Delta is DeltaTag of the delta stage in force ("": none).
	Delta string `json:"delta,omitempty"`
}

// InForce reads what the classifier has in force.
func (d *Datapath) InForce() (InForce, error) {
	a, err := d.activeState()
	if err != nil || !a.installed {
		return InForce{}, err
	}
	in := InForce{Installed: true}
	if err := d.stamps.Lookup(a.gen, &in.Stamp); err != nil {
		return InForce{}, fmt.Errorf("reading fw_stamps: %w", err)
	}
	if a.delta == 0 {
		return in, nil
	}
	half := a.delta - 1
	var v xdpfwFwDelta
	if err := d.deltas.Lookup(half, &v); err != nil {
		return InForce{}, fmt.Errorf("reading the delta stage: %w", err)
	}
	if v.Count > compile.DeltaMax {
		return InForce{}, fmt.Errorf("the delta stage in force holds %d entries, more than %d", v.Count, compile.DeltaMax)
	}
	ents := make([]xdpfwFwEntry, v.Count)
	for i := range ents {
		if err := d.deltaEn.Lookup(half*compile.DeltaMax+uint32(i), &ents[i]); err != nil {
			return InForce{}, fmt.Errorf("reading the delta entries: %w", err)
		}
	}
	in.Delta = deltaTag(&v, ents)
	return in, nil
}

// DeltaTag is the tag InForce reports once dl is in force ("" for an
// empty dl): a digest of exactly what the kernel will hold. Two deltas
// with the same tag on the same main generation hold the same entries,
// rule ids included, so they make the same decisions and, since rule ids
// are never reused while in force, name the same rules.
func DeltaTag(dl *compile.Delta) string {
	if dl.Empty() {
		return ""
	}
	v, ents := deltaToBPF(dl)
	return deltaTag(&v, ents)
}

func deltaTag(v *xdpfwFwDelta, ents []xdpfwFwEntry) string {
	h := sha256.New()
	h.Write(unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v)))
	if len(ents) > 0 {
		h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&ents[0])), uintptr(len(ents))*unsafe.Sizeof(ents[0])))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// RuleIDsInForce lists the rule ids the classifier in force may count on
// (entries of the main generation in force, used or not, and of the delta
// stage in force): for a control plane that lost its record of them, so
// that it gives none of them to a new rule while they may still count.
func (d *Datapath) RuleIDsInForce() (map[uint32]bool, error) {
	a, err := d.activeState()
	if err != nil || !a.installed {
		return nil, err
	}
	ids := map[uint32]bool{}
	var e xdpfwFwEntry
	base := a.gen * uint32(d.limits.Entries)
	for i := uint32(0); i < uint32(d.limits.Entries); i++ {
		if err := d.entries.Lookup(base+i, &e); err != nil {
			return nil, fmt.Errorf("reading fw_entries: %w", err)
		}
		ids[e.RuleId] = true
	}
	for r := uint32(0); r < uint32(compile.NumRoots); r++ {
		var root xdpfwFwRoot
		if err := d.roots.Lookup(a.gen*uint32(compile.NumRoots)+r, &root); err != nil {
			return nil, fmt.Errorf("reading fw_roots: %w", err)
		}
		ids[root.RuleId], ids[root.FastRuleId] = true, true
	}
	if a.delta != 0 {
		for i := uint32(0); i < compile.DeltaMax; i++ {
			if err := d.deltaEn.Lookup((a.delta-1)*compile.DeltaMax+i, &e); err != nil {
				return nil, fmt.Errorf("reading the delta entries: %w", err)
			}
			ids[e.RuleId] = true
		}
	}
	return ids, nil
}
