package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/conntrack"
)

// ctNow is the data plane's conntrack clock, bpf_ktime_get_coarse_ns().
func ctNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts)
	return uint64(ts.Nano())
}

func keyAddr(w [2]uint64, family uint8) netip.Addr {
	var b [16]byte
	ne.PutUint64(b[0:8], w[0])
	ne.PutUint64(b[8:16], w[1])
	if family == 4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b)
}

// ctEntry turns a table entry into a connection oriented as its first
// packet went.
func ctEntry(k *xdpfwFwCtKey, v *xdpfwFwCtEntry, now uint64) conntrack.Entry {
	a := netip.AddrPortFrom(keyAddr(k.A, k.Family), k.Pa)
	b := netip.AddrPortFrom(keyAddr(k.B, k.Family), k.Pb)
	if v.Flags&ctfOrigA == 0 {
		a, b = b, a
	}
	exp := time.Duration(int64(v.Expires) - int64(now))
	e := conntrack.Entry{
		Proto: k.Proto, Src: a, Dst: b,
		State: conntrack.State(v.State), StateStr: conntrack.State(v.State).String(),
		Replied: v.Flags&ctfReplied != 0, Assured: v.Flags&ctfAssured != 0, PickedUp: v.Flags&ctfPickup != 0,
		Expires: exp, TTL: int64(exp / time.Second),
		RuleID: v.RuleId, Chain: v.Chain, Packets: v.Packets, Bytes: v.Bytes,
	}
	if v.NatSaddr != 0 { // the source translation the entry keeps (bpf/lib/natct.h fw_nat_ct_kept); its binding says the same
		e.NAT = &conntrack.NATReply{Src: b, Dst: netip.AddrPortFrom(natAddr(v.NatSaddr), natSwap16(v.NatSport)), Kind: "SNAT"}
	}
	return e
}

// FW_CTF_* (bpf/types.h).
const (
	ctfOrigA   = 0x01
	ctfReplied = 0x02
	ctfAssured = 0x10
	ctfPickup  = 0x20
)

// Connections lists the tracked connections, expired ones included (they
// are shown with Expires <= 0 until GC removes them).
func (d *Datapath) Connections() ([]conntrack.Entry, error) {
	now := ctNow()
	var out []conntrack.Entry
	err := d.ctWalk(func(k *xdpfwFwCtKey, v *xdpfwFwCtEntry) { out = append(out, ctEntry(k, v, now)) })
	if err != nil {
		return nil, err
	}
	if err := d.natReplies(out); err != nil {
		return nil, err
	}
	conntrack.Sort(out)
	return out, nil
}

// ctBatch is how many connections one batch lookup reads.
const ctBatch = 4096

// ctWalk calls fn for every entry of the table, reading it in batches
// (one system call per ctBatch entries: a full default table in 16
// instead of 131,072), or one by one where the kernel has no batch
// operations for hash maps (before 5.6). Entries the data plane adds or
// removes meanwhile may or may not be seen, as with any walk.
func (d *Datapath) ctWalk(fn func(*xdpfwFwCtKey, *xdpfwFwCtEntry)) error {
	keys := make([]xdpfwFwCtKey, ctBatch)
	vals := make([]xdpfwFwCtEntry, ctBatch)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := d.ct.BatchLookup(&cursor, keys, vals, nil)
		if errors.Is(err, ebpf.ErrNotSupported) {
			return d.ctWalkOneByOne(fn)
		}
		for i := 0; i < n; i++ {
			fn(&keys[i], &vals[i])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil // the end
		}
		if err != nil {
			return fmt.Errorf("reading the conntrack table: %w", err)
		}
	}
}

func (d *Datapath) ctWalkOneByOne(fn func(*xdpfwFwCtKey, *xdpfwFwCtEntry)) error {
	var (
		k xdpfwFwCtKey
		v xdpfwFwCtEntry
	)
	it := d.ct.Iterate()
	for it.Next(&k, &v) {
		fn(&k, &v)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the conntrack table: %w", err)
	}
	return nil
}

// CTFlush removes every tracked connection and returns how many there were.
// Established connections then look NEW to the rules (TCP: picked up by
// their next ACK; with strict pickup INVALID) until they are re-created.
func (d *Datapath) CTFlush() (int, error) {
	n, err := d.ctDelete(func(*xdpfwFwCtEntry, uint64) bool { return true })
	if err != nil {
		return n, err
	}
	// The early-drop queue names only entries gone now: emptied, so that
	// the data plane need not skip them one by one.
	var k xdpfwFwCtKey
	for d.ctEvict != nil && d.ctEvict.LookupAndDelete(nil, &k) == nil {
	}
	return n, nil
}

// CTGC removes expired connections and returns how many it removed.
func (d *Datapath) CTGC() (int, error) {
	return d.ctDelete(func(v *xdpfwFwCtEntry, now uint64) bool { return v.Expires <= now })
}

func (d *Datapath) ctDelete(doomed func(*xdpfwFwCtEntry, uint64) bool) (int, error) {
	now := ctNow()
	var (
		keys []xdpfwFwCtKey
		v    xdpfwFwCtEntry
		vals []xdpfwFwCtEntry // of the entries removed
	)
	err := d.ctWalk(func(k *xdpfwFwCtKey, v *xdpfwFwCtEntry) {
		if doomed(v, now) {
			keys = append(keys, *k)
		}
	})
	if err != nil {
		return 0, err
	}
	n := 0
	gone := keys[:0] // the entries removed, whose nat bindings go too (natgc.go)
	for i := range keys {
		// Look again just before deleting: a new connection may have
		// replaced an expired entry since the walk. (Lookup and delete
		// are two calls; the window left is microseconds, and losing it
		// costs that connection its entry.)
		if err := d.ct.Lookup(&keys[i], &v); err != nil || !doomed(&v, ctNow()) {
			continue
		}
		if err := d.ct.Delete(&keys[i]); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return n, fmt.Errorf("deleting a conntrack entry: %w", err)
		}
		n++
		gone = append(gone, keys[i])
		vals = append(vals, v)
	}
	_, err = d.natUnbind(gone, vals)
	return n, err
}

// CTStats counts the table by state and reads the event counters.
func (d *Datapath) CTStats() (conntrack.Stats, error) {
	now := ctNow()
	var byState [256]int
	st := conntrack.Stats{Max: int(d.ct.MaxEntries()), ByState: map[string]int{}, Counters: map[string]uint64{}}
	err := d.ctWalk(func(_ *xdpfwFwCtKey, v *xdpfwFwCtEntry) {
		st.Entries++
		if v.Expires <= now { // as Connections: expired, not yet collected
			st.Expired++
			return
		}
		byState[v.State]++
	})
	if err != nil {
		return st, err
	}
	for s, n := range byState {
		if n > 0 {
			st.ByState[conntrack.State(s).String()] = n
		}
	}
	// A table pinned by an earlier version may have fewer counters (until
	// the next load carries them over): the others read 0.
	for i := 0; i < min(conntrack.NumStats, int(d.ctStats.MaxEntries())); i++ {
		var per []uint64
		if err := d.ctStats.Lookup(uint32(i), &per); err != nil {
			return st, fmt.Errorf("reading conntrack counters: %w", err)
		}
		var sum uint64
		for _, x := range per {
			sum += x
		}
		st.Counters[conntrack.StatNames[i]] = sum
	}
	var cfg xdpfwFwConfig
	if err := d.lookupConfig(&cfg); err == nil {
		st.Timeouts = conntrack.Timeouts(cfg.CtTimeout).Effective().Map()
	}
	return st, nil
}
