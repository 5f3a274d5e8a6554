package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/conntrack"
)

// Config is the data-plane settings map.
type Config struct {
	MalformedAction compile.Action
	// CTFullAccept: NEW connections that do not fit the full conntrack
	// table pass untracked (when their rule accepts them); default: drop.
	CTFullAccept bool
	// CTTimeouts are seconds per conntrack timeout class (0: the default).
	CTTimeouts [conntrack.NumTimeouts]uint32
	// REJECT answers per second per source (IPv4 address, IPv6 /64), and
	// at once; 0: compile.DefaultRejectRate / DefaultRejectBurst.
	RejectRate  uint32
	RejectBurst uint32
	// RejectGlobalRate is REJECT's answers per second from all sources
	// together, as many at once (0: compile.DefaultRejectGlobalRate).
	RejectGlobalRate uint32
	// CTTCPStrict turns mid-stream pickup off: a TCP packet other than a
	// SYN that belongs to no tracked connection is INVALID (Linux's
	// nf_conntrack_tcp_loose=0). Default: a bare ACK picks it up (NEW).
	CTTCPStrict bool
	// Forward is how packets FORWARD accepts are delivered ("": ForwardXDP;
	// ForwardXDPVeth as ForwardXDP: which devices the fast path uses is
	// fw_fwd_ports', SetForwardPorts).
	Forward ForwardMode
	// KernelNATOff stops XDP asking the kernel's conntrack about packets
	// of connections the kernel's nat table translates (bpf/lib/kct.h).
	KernelNATOff bool
}

// SetConfig writes the settings map and REJECT's global budget (whose
// bucket starts full).
func (d *Datapath) SetConfig(c Config) error {
	v := xdpfwFwConfig{CtTimeout: c.CTTimeouts, RejectRate: c.RejectRate, RejectBurst: c.RejectBurst}
	if c.MalformedAction == compile.ActAccept {
		v.MalformedPass = 1
	}
	if c.CTFullAccept {
		v.CtFullAccept = 1
	}
	if c.CTTCPStrict {
		v.CtTcpStrict = 1
	}
	if c.Forward == ForwardStack {
		v.ForwardStack = 1
	}
	if c.KernelNATOff {
		v.KernelCtOff = 1
	}
	if err := d.putConfig(&v); err != nil {
		return fmt.Errorf("writing fw_config_map: %w", err)
	}
	if d.rejGlob == nil {
		return nil // a program of an earlier version, without the global budget
	}
	g := c.RejectGlobalRate
	if g == 0 {
		g = compile.DefaultRejectGlobalRate
	}
	b := xdpfwFwBucket{IntervalNs: uint64(time.Second) / uint64(g), Burst: g}
	if err := d.rejGlob.Put(uint32(0), &b); err != nil {
		return fmt.Errorf("writing fw_reject_global: %w", err)
	}
	return nil
}

// ConfigInForce reads back what SetConfig wrote: the settings packets see.
// RejectGlobalRate is 0 when the program in force has no global budget (an
// earlier version's, until the next load).
func (d *Datapath) ConfigInForce() (Config, error) {
	var v xdpfwFwConfig
	if err := d.lookupConfig(&v); err != nil {
		return Config{}, fmt.Errorf("reading fw_config_map: %w", err)
	}
	c := Config{MalformedAction: compile.ActDrop, CTFullAccept: v.CtFullAccept != 0, CTTimeouts: v.CtTimeout,
		RejectRate: v.RejectRate, RejectBurst: v.RejectBurst, CTTCPStrict: v.CtTcpStrict != 0, Forward: ForwardXDP,
		KernelNATOff: v.KernelCtOff != 0}
	if v.ForwardStack != 0 {
		c.Forward = ForwardStack
	}
	if d.fwdPorts == nil {
		c.Forward = ForwardStack // an earlier version's program: the kernel forwards
	}
	if v.MalformedPass != 0 {
		c.MalformedAction = compile.ActAccept
	}
	if d.rejGlob == nil {
		return c, nil // an earlier version's program: no global budget
	}
	var b xdpfwFwBucket
	if err := d.rejGlob.Lookup(uint32(0), &b); err != nil {
		return Config{}, fmt.Errorf("reading fw_reject_global: %w", err)
	}
	c.RejectGlobalRate = b.Burst
	if c.RejectGlobalRate == 0 {
		c.RejectGlobalRate = compile.DefaultRejectGlobalRate // what the data plane applies
	}
	return c, nil
}

// Install makes t the active generation: InstallStamped with stamp 0
// (no delta stage can be built against it).
func (d *Datapath) Install(t *compile.Tables) error { return d.InstallStamped(t, 0) }

// InstallStamped makes t the active generation, recorded as rule-set
// generation stamp (see InstallDelta), and clears the delta stage. Each
// table holds two generations: t is written into the one packets do not
// use, then one write of fw_active switches every new packet to it (and
// off any delta), and it waits for an RCU grace period so that no packet
// still walks the old one before the next change may overwrite it. A
// packet sees the old tables (with their delta) or the new ones, never a
// mix. The logged rules' budgets are written before the switch; those
// of rules gone are removed after the grace period.
func (d *Datapath) InstallStamped(t *compile.Tables, stamp uint64) error {
	lim := d.limits
	switch {
	case len(t.Entries)+len(t.Prio) > lim.Entries:
		return fmt.Errorf("the rule set needs %d classifier entries, the data plane was loaded for %d (--max-rules)", len(t.Entries)+len(t.Prio), lim.Entries)
	case len(t.Nodes) > lim.Nodes:
		return fmt.Errorf("the classifier needs %d tree nodes, the data plane was loaded for %d (--max-rules)", len(t.Nodes), lim.Nodes)
	case len(t.Leaves) > lim.LeafSlots:
		return fmt.Errorf("the classifier needs %d leaf slots, the data plane was loaded for %d (--max-rules)", len(t.Leaves), lim.LeafSlots)
	}
	cur, err := d.activeState()
	if err != nil {
		return err
	}
	gen := uint32(0)
	if cur.installed && cur.gen == 0 {
		gen = 1
	}

	if d.cands == nil {
		return fmt.Errorf("the loaded program predates candidate records (fw_cands): run `xdpfw load` to load this version's")
	}
	// the priority table's entries follow the rules' (compile.Tables.Prio)
	entries := make([]xdpfwFwEntry, len(t.Entries)+len(t.Prio))
	cands := make([]xdpfwFwCand, len(entries))
	for i := range entries {
		if i < len(t.Entries) {
			entries[i] = toBPF(&t.Entries[i])
		} else {
			entries[i] = toBPF(&t.Prio[i-len(t.Entries)])
		}
		cands[i] = candOf(&entries[i], t.Ranges, i)
	}
	prioRoots := []xdpfwFwRoot{rootToBPF(&t.PrioRoots[0]), rootToBPF(&t.PrioRoots[1])}
	nodes := make([]xdpfwFwNode, len(t.Nodes))
	for i, n := range t.Nodes {
		nodes[i] = xdpfwFwNode{Dim: n.Dim, N: n.N, Dim2: n.Dim2, Mask: n.Mask, Thresh: n.Thresh, Child: n.Child}
	}
	roots := make([]xdpfwFwRoot, len(t.Roots))
	for i := range t.Roots {
		roots[i] = rootToBPF(&t.Roots[i])
	}
	if len(t.Raw) > compile.MaxRaw {
		return fmt.Errorf("the raw table needs %d entries, the data plane holds %d", len(t.Raw), compile.MaxRaw)
	}
	// every slot of the half: an unused one (action ACCEPT) ends the table
	raw := make([]xdpfwFwEntry, compile.MaxRaw)
	for i := range t.Raw {
		raw[i] = toBPF(&t.Raw[i])
	}
	// Budgets of the logged rules first: the new generation finds them.
	staleLogs, err := d.putLogLimits(t.Logs)
	if err != nil {
		return err
	}
	staleLimits, err := d.putLimits(t.Limits)
	if err != nil {
		return err
	}
	staleRecent, err := d.putRecentRules(t.Recent)
	if err != nil {
		return err
	}
	staleHash, err := d.putHashLimitRules(t.HashLimits)
	if err != nil {
		return err
	}
	staleConn, err := d.putConnLimitRules(t.ConnLimits)
	if err != nil {
		return err
	}
	if err := putRange(d.entries, gen*uint32(lim.Entries), entries); err != nil {
		return fmt.Errorf("writing entries: %w", err)
	}
	if err := putRange(d.cands, gen*uint32(lim.Entries), cands); err != nil {
		return fmt.Errorf("writing candidate records: %w", err)
	}
	if err := putRange(d.nodes, gen*uint32(lim.Nodes), nodes); err != nil {
		return fmt.Errorf("writing tree nodes: %w", err)
	}
	if err := putRange(d.leaves, gen*uint32(lim.LeafSlots), t.Leaves); err != nil {
		return fmt.Errorf("writing leaves: %w", err)
	}
	if err := putRange(d.raw, gen*uint32(compile.MaxRaw), raw); err != nil {
		return fmt.Errorf("writing the raw table: %w", err)
	}
	if err := putRange(d.roots, gen*uint32(compile.NumRoots), roots); err != nil {
		return fmt.Errorf("writing roots: %w", err)
	}
	if d.prioRoots != nil { // nil: opened from the pins of an earlier version, which has no priority
		if err := putRange(d.prioRoots, gen*2, prioRoots); err != nil {
			return fmt.Errorf("writing the priority roots: %w", err)
		}
	} else if t.PrioRoots[0].Flags&compile.RootPrio != 0 && !d.instance {
		return errors.New("the program in force has no priority table (loaded by an earlier version): load again")
	}
	if err := d.stamps.Put(gen, stamp); err != nil {
		return fmt.Errorf("writing fw_stamps: %w", err)
	}
	if err := d.active.Put(uint32(0), activeValue(gen, 0)); err != nil {
		return fmt.Errorf("switching to the new generation: %w", err)
	}
	if err := graceperiod(); err != nil {
		return err
	}
	if err := d.dropLimitIDs(staleLimits); err != nil { // no packet uses the old generation now
		return err
	}
	if err := d.dropRecent(staleRecent, t.ListIDs()); err != nil {
		return err
	}
	if err := d.dropHashLimit(staleHash, t.HashTableIDs()); err != nil {
		return err
	}
	if err := d.dropConnLimit(staleConn, t.ConnLimits); err != nil {
		return err
	}
	return d.dropLogIDs(staleLogs)
}

func rootToBPF(r *compile.Root) xdpfwFwRoot {
	return xdpfwFwRoot{Groups: r.Groups, RuleId: r.RuleID, Action: uint8(r.Action), Reason: uint8(r.Reason),
		Flags: r.Flags, FastStates: r.FastStates, FastRuleId: r.FastRuleID,
		FastAction: uint8(r.FastAction), FastReason: uint8(r.FastReason), FastReject: uint8(r.FastReject),
		FastFlags: r.FastFlags()}
}

// putRange writes vals to consecutive slots from base, in batches.
func putRange[T any](m *ebpf.Map, base uint32, vals []T) error {
	const batch = 4096
	for off := 0; off < len(vals); off += batch {
		end := min(off+batch, len(vals))
		keys := make([]uint32, end-off)
		for i := range keys {
			keys[i] = base + uint32(off+i)
		}
		if _, err := m.BatchUpdate(keys, vals[off:end], nil); err != nil {
			for i, k := range keys { // kernels without batch ops on arrays
				if err := m.Put(k, &vals[off+i]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// graceperiod waits until every packet that may have seen the previous
// generation is done: every XDP and tc program runs inside an RCU
// read-side section, so an RCU grace period (synchronize_rcu) is enough.
// The kernel guarantees one to user space through map-in-map updates: an
// update of an array-of-maps entry from user space returns only after
// synchronize_rcu() (kernel/bpf/syscall.c maybe_wait_bpf_programs), so
// that user space knows no program still uses the inner map it replaced.
// That is the documented behaviour programs rely on to free an inner map
// (the kernel's selftests use it the same way), unlike
// membarrier(MEMBARRIER_CMD_GLOBAL), which is synchronize_rcu() today but
// is refused on nohz_full kernels. The array of maps is private to this
// process and used by no program: only the wait matters. Made anew each
// time (two map creations, microseconds against the wait's milliseconds),
// so nothing stays open.
func graceperiod() error {
	inner, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return fmt.Errorf("grace period: creating its inner map: %w", err)
	}
	defer inner.Close()
	outer, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: 1,
		InnerMap: &ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}})
	if err != nil {
		return fmt.Errorf("grace period: creating its array of maps: %w", err)
	}
	defer outer.Close()
	if err := outer.Put(uint32(0), inner); err != nil {
		return fmt.Errorf("grace period: updating the array of maps: %w", err)
	}
	return nil
}

// Installed reports whether a generation is installed.
func (d *Datapath) Installed() bool {
	var cur uint32
	return d.active.Lookup(uint32(0), &cur) == nil && cur != 0
}

// candOf is entry i's candidate record (struct fw_cand): e's verdict,
// and its compact form ranges[i] (FW_EF_RANGES) where it has one. A LOG
// entry's record has none: the walk then reads the entry, which it must
// for the note anyway (fw_tree takes a record with FW_EF_RANGES and no
// FW_EF_LIMIT, FW_EF_STATE or FW_EF_NOTE as the whole match and a
// deciding one).
func candOf(e *xdpfwFwEntry, ranges []compile.Ranges, i int) xdpfwFwCand {
	c := xdpfwFwCand{RuleId: e.RuleId, Action: e.Action, Reason: e.Reason, Reject: e.Reject, Flags: e.Flags}
	if i < len(ranges) && ranges[i].Exact && compile.Action(e.Action) != compile.ActLog {
		r := &ranges[i]
		c.Flags |= compile.EntryHasRanges
		c.Nranges, c.Rdim, c.Rlo, c.Rhi = r.N, r.Dim, r.Lo, r.Hi
	}
	return c
}

func toBPF(e *compile.Entry) xdpfwFwEntry {
	return xdpfwFwEntry{
		Src:       words(e.Src),
		SrcMask:   words(e.SrcMask),
		Dst:       words(e.Dst),
		DstMask:   words(e.DstMask),
		Match:     e.Match,
		Invert:    e.Invert,
		Ifindex:   e.Ifindex,
		OifLo:     e.OIfLo,
		OifHi:     e.OIfHi,
		RuleId:    e.RuleID,
		SportLo:   e.SPortLo,
		SportHi:   e.SPortHi,
		DportLo:   e.DPortLo,
		DportHi:   e.DPortHi,
		SrcMac:    e.SrcMAC,
		DstMac:    e.DstMAC,
		VlanId:    e.VLAN,
		VlanPcp:   e.VLANPrio,
		Chain:     uint8(e.Chain),
		Family:    uint8(e.Family),
		Proto:     e.Proto,
		TcpMask:   e.TCPMask,
		TcpCmp:    e.TCPCmp,
		IcmpType:  e.ICMPType,
		IcmpCode:  e.ICMPCode,
		Action:    uint8(e.Action),
		Reason:    uint8(e.Reason),
		Reject:    uint8(e.Reject),
		Flags:     e.Flags(),
		SrcSet:    e.SrcSet,
		DstSet:    e.DstSet,
		Ctstate:   e.CTState,
		Mark:      e.Mark,
		MarkMask:  e.MarkMask,
		Pkttypes:  e.PktTypes,
		SrcTypes:  e.SrcTypes,
		DstTypes:  e.DstTypes,
		TypeDev:   e.TypeDev,
		SrangeLo:  e.SrcRange.Lo,
		SrangeHi:  e.SrcRange.Hi,
		DrangeLo:  e.DstRange.Lo,
		DrangeHi:  e.DstRange.Hi,
		LenLo:     e.LenLo,
		LenHi:     e.LenHi,
		TtlLo:     e.TTLLo,
		TtlHi:     e.TTLHi,
		TosMask:   e.TOSMask,
		TosCmp:    e.TOSCmp,
		EcnIp:     e.ECNIP,
		EcnMask:   e.ECNMask,
		EcnCmp:    e.ECNCmp,
		Ctstatus:  e.CTStatus,
		Ctnat:     e.CTNat,
		Ctproto:   e.CTProto,
		MssLo:     e.MSSLo,
		MssHi:     e.MSSHi,
		RtLen:     e.RTLen,
		RtType:    e.RTType,
		RtSegsLo:  e.RTSegsLo,
		RtSegsHi:  e.RTSegsHi,
		Note:      e.Note,
		Probe:     e.Probe,
		GuardMask: e.GuardMask,
		GuardVal:  e.GuardVal,
	}
}

// words reinterprets 16 bytes in memory order as two host-endian u64, which
// is how the data plane compares them against packet bytes.
func words(b [16]byte) [2]uint64 {
	return [2]uint64{ne.Uint64(b[0:8]), ne.Uint64(b[8:16])}
}

// putConfig writes v into the settings map, of this program's layout or
// of an earlier version's, which lacks the later fields (struct fw_config
// grows at its end): a command run before the next load still changes
// what that program reads.
func (d *Datapath) putConfig(v *xdpfwFwConfig) error {
	b, err := binary.Append(nil, ne, v)
	if err != nil {
		return err
	}
	if n := int(d.config.ValueSize()); n < len(b) {
		b = b[:n]
	}
	return d.config.Put(uint32(0), b)
}

// lookupConfig reads the settings map into v (the fields an earlier
// version's layout lacks read 0).
func (d *Datapath) lookupConfig(v *xdpfwFwConfig) error {
	var b []byte
	if err := d.config.Lookup(uint32(0), &b); err != nil {
		return err
	}
	full := make([]byte, binary.Size(v))
	copy(full, b)
	_, err := binary.Decode(full, ne, v)
	return err
}
