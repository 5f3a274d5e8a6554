package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// LoadObject is Load for another build's object file (xdpfw_bpfel.o of an
// earlier commit; "": this build's), so that a benchmark can run two builds
// side by side, both loaded the same way. Nothing is pinned; the maps are
// found by name, so the object may lack maps this build added.
func LoadObject(path string, lim Limits) (*Datapath, error) {
	load := func() (*ebpf.CollectionSpec, error) { return ebpf.LoadCollectionSpec(path) }
	if path == "" {
		load = loadXdpfw
	}
	spec, err := load()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if lim, err = sizeSpec(spec, lim); err != nil {
		return nil, err
	}
	if _, ok := spec.Maps[latSection]; ok {
		nameLatSection(spec) // as Load does: the trace instance shares it by that name
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone
	}
	delete(spec.Programs, rxvlanProgName) // device-bound: loaded per interface
	for _, name := range []string{"xdpfw_audit", "xdpfw_cpumap_audit", "xdpfw_nat"} {
		delete(spec.Programs, name) // the audit and nat instances' (audit.go, nat.go)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	d := &Datapath{prog: coll.Programs["xdpfw_ingress"], egress: coll.Programs["xdpfw_egress"],
		clockProg: coll.Programs["xdpfw_clock"], limits: lim, objPath: path}
	named := map[string]**ebpf.Map{}
	for pin, dst := range d.maps() {
		named[specMapName(pin)] = dst
	}
	for name, m := range coll.Maps {
		if dst, ok := named[name]; ok {
			*dst = m
		} else {
			d.unpinned = append(d.unpinned, m)
		}
	}
	if d.prog == nil || d.egress == nil {
		coll.Close()
		return nil, fmt.Errorf("%s: want the programs xdpfw_ingress and xdpfw_egress, have %v", path, coll.Programs)
	}
	for _, name := range []string{"xdpfw_ingress_classify", "xdpfw_ingress_finish", "xdpfw_cpumap_classify", "xdpfw_cpumap_finish"} {
		if p := coll.Programs[name]; p != nil {
			p.Close() // its program array (in d.unpinned) holds it
		}
	}
	d.cpumapProg = coll.Programs["xdpfw_cpumap"] // nil in objects of earlier builds
	return d, nil
}

// StagesPin is the name of d's classify stage pin ("": none).
func (d *Datapath) StagesPin() string { return d.stagesPin }

// DropClassifyStage empties d's program array, as the kernel does once
// nothing holds it.
func (d *Datapath) DropClassifyStage() error { return d.stages.Delete(uint32(0)) }

// StagesPins lists the classify stage pins in dir.
func StagesPins(dir string) []string { return pinsWithPrefix(dir, stagesPin) }

// RXVLANOffload is rxVLANOffload, for the tests.
func RXVLANOffload(iface string) (bool, error) { return rxVLANOffload(iface) }

// CTDeadlines are the tracked connections' deadlines as the data plane
// wrote them (CLOCK_MONOTONIC_COARSE ns).
func (d *Datapath) CTDeadlines() ([]uint64, error) {
	var out []uint64
	err := d.ctWalk(func(_ *xdpfwFwCtKey, v *xdpfwFwCtEntry) { out = append(out, v.Expires) })
	return out, err
}

// ExpireConnections puts every tracked connection past its deadline, as
// if its timeout had run out: tests drive conntrack's clock without
// waiting.
func (d *Datapath) ExpireConnections() error {
	var keys []xdpfwFwCtKey
	var vals []xdpfwFwCtEntry
	if err := d.ctWalk(func(k *xdpfwFwCtKey, v *xdpfwFwCtEntry) {
		keys = append(keys, *k)
		vals = append(vals, *v)
	}); err != nil {
		return err
	}
	for i := range keys {
		vals[i].Expires = 1
		if err := d.ct.Update(&keys[i], &vals[i], ebpf.UpdateExist); err != nil {
			return err
		}
	}
	return nil
}

// Record is Trace through the recording trace instance: the decision is
// reported and the packet recorded (counters, conntrack, budgets, log
// events) as the live program would, so that tests can play sequences.
// Another build's object (LoadObject) is traced through its own program,
// as builds before trace instances traced.
func (d *Datapath) Record(frame []byte, ifindex uint32, ctstate int) (TraceResult, error) {
	if d.objPath != "" {
		return traceXDP(d.prog, frame, ifindex, ctstate)
	}
	t, err := d.tracerFor(traceRecord, false)
	if err != nil {
		return TraceResult{}, err
	}
	return traceXDP(t.prog, frame, ifindex, ctstate)
}

// RecordEgress is Record through the tc egress program.
func (d *Datapath) RecordEgress(frame []byte, ctstate int) (TraceResult, error) {
	if d.objPath != "" {
		return traceTC(d.egress, frame, ctstate)
	}
	t, err := d.tracerFor(traceRecord, true)
	if err != nil {
		return TraceResult{}, err
	}
	return traceTC(t.prog, frame, ctstate)
}

// TraceLive runs frame through the live XDP program with a trace request
// in its metadata, as a packet carrying one would arrive: the live
// program must ignore it (TraceLiveEgress: the same in skb->cb at tc).
func (d *Datapath) TraceLive(frame []byte, ifindex uint32, ctstate int) (TraceResult, error) {
	return traceXDP(d.prog, frame, ifindex, ctstate)
}

// TraceLiveEgress is TraceLive through the live tc egress program.
func (d *Datapath) TraceLiveEgress(frame []byte, ctstate int) (TraceResult, error) {
	return traceTC(d.egress, frame, ctstate)
}

// LimitTat reads the theoretical arrival time of rule id's -m limit
// bucket (fw_limits).
func (d *Datapath) LimitTat(id uint32) (uint64, error) {
	var b xdpfwFwBucket
	err := d.limBkt.Lookup(id, &b)
	return b.Tat, err
}

// Refill gives rule id's -m limit bucket the tokens n intervals bring
// (up to its burst): its timeline moves back n intervals, as if the
// clock had moved on (timing-free tests).
func (d *Datapath) Refill(id uint32, n uint64) error {
	var b xdpfwFwBucket
	if err := d.limBkt.Lookup(id, &b); err != nil {
		return err
	}
	b.Tat -= min(b.Tat, n*b.IntervalNs)
	return d.limBkt.Put(id, &b)
}

// StateOf is the reference's view (compile.State) of the -m
// limit buckets of the rules whose ids are ids (rule i has ids[i]), at
// the data plane's clock now (bpf_ktime_get_ns: CLOCK_MONOTONIC).
func (d *Datapath) StateOf(ids []uint32) (*compile.State, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return nil, err
	}
	st := &compile.State{Now: uint64(ts.Nano()), Tat: map[int]uint64{}}
	for i, id := range ids {
		var b xdpfwFwBucket
		if d.limBkt != nil && d.limBkt.Lookup(id, &b) == nil { // another build's object may have none
			st.Tat[i] = b.Tat
		}
	}
	return st, nil
}

// AgeRecent moves every time stamp of every -m recent list back by ns, as
// if the clock had moved on by ns (timing-free tests); it returns how
// many addresses it aged.
func (d *Datapath) AgeRecent(ns uint64) (int, error) {
	var (
		k    xdpfwFwRecentKey
		v    xdpfwFwRecentEntry
		keys []xdpfwFwRecentKey
	)
	it := d.recent.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := d.recent.Lookup(&k, &v); err != nil {
			return 0, err
		}
		for i := range v.Stamps {
			v.Stamps[i] -= min(v.Stamps[i], ns)
		}
		if err := d.recent.Put(&k, &v); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// RecentAddresses counts the addresses of every -m recent list.
func (d *Datapath) RecentAddresses() int {
	var (
		k xdpfwFwRecentKey
		v xdpfwFwRecentEntry
		n int
	)
	if d.recent == nil {
		return 0
	}
	it := d.recent.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	return n
}

// ClearRecent empties every -m recent list.
func (d *Datapath) ClearRecent() error {
	if d.recent == nil {
		return nil
	}
	return d.dropRecent(nil, nil)
}

// ClearHashLimit empties every -m hashlimit table (the rules' settings
// stay).
func (d *Datapath) ClearHashLimit() error {
	if d.hashBkt == nil {
		return nil
	}
	return d.dropHashLimit(nil, nil)
}

// FlushFrags empties the fragment table (fw_frag): no datagram in flight.
func (d *Datapath) FlushFrags() error {
	var k xdpfwFwFragKey
	var keys []xdpfwFwFragKey
	it := d.frag.Iterate()
	for it.Next(&k, new(xdpfwFwFragEntry)) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := d.frag.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// AgeFrags moves every recorded datagram's deadline by dt (negative:
// into the past), as if that much time had passed.
func (d *Datapath) AgeFrags(dt time.Duration) error {
	var k xdpfwFwFragKey
	var e xdpfwFwFragEntry
	type kv struct {
		k xdpfwFwFragKey
		e xdpfwFwFragEntry
	}
	var all []kv
	it := d.frag.Iterate()
	for it.Next(&k, &e) {
		all = append(all, kv{k, e})
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, x := range all {
		x.e.Expires = uint64(int64(x.e.Expires) - int64(dt))
		if err := d.frag.Update(&x.k, &x.e, ebpf.UpdateExist); err != nil {
			return err
		}
	}
	return nil
}

// WithoutRXVLAN makes d attach as a kernel that refuses xdpfw_rxvlan
// (before Linux 6.16) does: xdpfw_ingress alone.
func WithoutRXVLAN(d *Datapath) { d.rxvlan = nil }

// AgeHashLimit moves every -m hashlimit bucket's times ns into the past
// (as if its packets came that much earlier); it returns how many buckets
// there are.
func (d *Datapath) AgeHashLimit(ns uint64) (int, error) {
	var (
		k    xdpfwFwHashlimitKey
		v    xdpfwFwHashlimitBucket
		keys []xdpfwFwHashlimitKey
	)
	it := d.hashBkt.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := d.hashBkt.Lookup(&k, &v); err != nil {
			return 0, err
		}
		v.Tat -= min(v.Tat, ns)
		v.Seen -= min(v.Seen, ns)
		if err := d.hashBkt.Put(&k, &v); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// HashLimitBuckets counts the buckets of every -m hashlimit table.
func (d *Datapath) HashLimitBuckets() int {
	var (
		k xdpfwFwHashlimitKey
		v xdpfwFwHashlimitBucket
		n int
	)
	it := d.hashBkt.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	return n
}

// EditSpec makes Load load the program as edit changes it (a map laid out
// as an earlier version did), until the returned function is called.
func EditSpec(edit func(*ebpf.CollectionSpec)) (restore func()) {
	editSpec = edit
	return func() { editSpec = nil }
}

// PinnedTypesUnreadable makes reading a pinned map's BTF fail as it does
// without CAP_SYS_ADMIN, until the returned function is called.
func PinnedTypesUnreadable() (restore func()) {
	readPinnedTypes = func(*ebpf.Map, map[btf.ID]*btf.Spec) (btf.Type, btf.Type, error) {
		return nil, nil, fmt.Errorf("BPF_BTF_GET_FD_BY_ID: %w", unix.EPERM)
	}
	return func() { readPinnedTypes = pinnedTypes }
}

// LayoutsPin is the name of the pinned record of map layouts.
const LayoutsPin = layoutsPin

// PinnedTypes are the BTF types of a pinned map's keys and values.
func PinnedTypes(m *ebpf.Map) (key, value btf.Type, err error) { return pinnedTypes(m, nil) }

// Layout is t's layout as the upgrade compares it.
func Layout(t btf.Type) string { return valueLayout(t) }

// NATUnbind removes the binding of the IPv4 tuple from (protocol proto),
// one direction, as the bindings' LRU takes one to make room.
func (d *Datapath) NATUnbind(proto uint8, from NATTuple) error {
	a, b := from.Src.As4(), from.Dst.As4()
	k := xdpfwFwNatTuple{Saddr: binary.NativeEndian.Uint32(a[:]), Daddr: binary.NativeEndian.Uint32(b[:]),
		Sport: natSwap16(from.SrcPort), Dport: natSwap16(from.DstPort), Proto: proto}
	return d.natBinds.Delete(&k)
}

// CTForgetNAT clears the source translation kept in the conntrack entries
// of the connections with port port (either end): their packets then
// take the binding, as before the entry kept it (bpf/lib/natct.h).
func (d *Datapath) CTForgetNAT(port uint16) error {
	var keys []xdpfwFwCtKey
	var vals []xdpfwFwCtEntry
	if err := d.ctWalk(func(k *xdpfwFwCtKey, v *xdpfwFwCtEntry) {
		if k.Pa == port || k.Pb == port {
			keys = append(keys, *k)
			vals = append(vals, *v)
		}
	}); err != nil {
		return err
	}
	for i := range keys {
		vals[i].NatSaddr, vals[i].NatSport = 0, 0
		if err := d.ct.Update(&keys[i], &vals[i], ebpf.UpdateExist); err != nil {
			return err
		}
	}
	return nil
}
