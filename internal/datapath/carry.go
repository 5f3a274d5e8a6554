package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// The generic carry-over of a pinned map that an earlier (or later)
// xdpfw laid out otherwise: its contents are copied into this program's
// map member by member, by name, as the BTF of both programs describes
// them. A member of this program's type takes the value of the old
// member of the same name where their types agree (integers and enums of
// the same size and sign, structs member by member, arrays element by
// element for the elements both have); any other member starts at zero,
// as the data plane's own new fields do. Keys are converted the same
// way, but a key must lose nothing: every member of the old key (but
// padding, named _pad...) must find its place in the new one, or two
// entries could collide; a key that cannot be mapped so is refused.

// span copies n bytes at src of an old value to dst of a new one.
type span struct{ dst, src, n uint32 }

// conversion is the byte copy from one layout to another.
type conversion struct {
	spans            []span
	oldSize, newSize uint32
	// covered: the bytes of the old type's members (but padding) that
	// the spans carry, out of data.
	covered, data uint32
	// identity: the same layout, a plain copy.
	identity bool
}

// convert applies c to old, giving a value of the new layout.
func (c *conversion) convert(old []byte) []byte {
	if c.identity {
		return slices.Clone(old)
	}
	out := make([]byte, c.newSize)
	for _, s := range c.spans {
		copy(out[s.dst:s.dst+s.n], old[s.src:s.src+s.n])
	}
	return out
}

// lossless says whether every member of the old type is carried (for
// keys: distinct old keys stay distinct).
func (c *conversion) lossless() bool { return c.identity || c.covered == c.data }

// newConversion plans the copy from type old to type cur. Either may be
// nil (a map made without BTF, by hand or by a test): the copy is then
// the identity when the sizes agree; with grow, a shorter old value is
// taken as what the structs of this project are, grown at their end
// (copied, the rest zero); else it is impossible (an error).
func newConversion(old, cur btf.Type, oldSize, newSize uint32, grow bool) (*conversion, error) {
	c := &conversion{oldSize: oldSize, newSize: newSize}
	if old == nil || cur == nil {
		switch {
		case oldSize == newSize:
			c.identity = true
		case grow && oldSize < newSize:
			c.spans = []span{{0, 0, oldSize}}
			c.covered, c.data = oldSize, oldSize
		default:
			return nil, fmt.Errorf("%d bytes, this program's %d, and no BTF to say how they map", oldSize, newSize)
		}
		return c, nil
	}
	if valueLayout(old) == valueLayout(cur) && oldSize == newSize {
		c.identity = true
		return c, nil
	}
	c.data = dataBytes(old, 0)
	c.plan(old, cur, 0, 0, 0)
	c.spans = mergeSpans(c.spans)
	return c, nil
}

// plan adds the spans that carry old (at src) into cur (at dst).
func (c *conversion) plan(old, cur btf.Type, src, dst uint32, depth int) {
	if depth > 16 {
		return
	}
	o, n := btf.UnderlyingType(old), btf.UnderlyingType(cur)
	if valueLayout(o) == valueLayout(n) {
		size, err := btf.Sizeof(n)
		if err == nil && size > 0 {
			c.spans = append(c.spans, span{dst, src, uint32(size)})
			c.covered += dataBytes(o, 0)
		}
		return
	}
	switch nv := n.(type) {
	case *btf.Struct:
		ov, ok := o.(*btf.Struct)
		if !ok {
			return
		}
		olds := flatMembers(ov.Members, 0)
		for _, m := range flatMembers(nv.Members, 0) {
			om, ok := olds[m.name]
			if !ok || m.bitfield || om.bitfield || isPadding(m.name) {
				continue
			}
			c.plan(om.typ, m.typ, src+om.off, dst+m.off, depth+1)
		}
	case *btf.Array:
		ov, ok := o.(*btf.Array)
		if !ok {
			return
		}
		os, err1 := btf.Sizeof(ov.Type)
		ns, err2 := btf.Sizeof(nv.Type)
		if err1 != nil || err2 != nil {
			return
		}
		for i := uint32(0); i < min(ov.Nelems, nv.Nelems); i++ {
			c.plan(ov.Type, nv.Type, src+i*uint32(os), dst+i*uint32(ns), depth+1)
		}
	case *btf.Int, *btf.Enum:
		// an integer and an enum of the same size and sign hold the same
		if scalarOf(o) != "" && scalarOf(o) == scalarOf(n) {
			size, _ := btf.Sizeof(n)
			c.spans = append(c.spans, span{dst, src, uint32(size)})
			c.covered += dataBytes(o, 0)
		}
	}
	// unions, pointers and anything else of another layout: zero
}

// scalarOf is an integer's or enum's size and sign ("" for other types).
func scalarOf(t btf.Type) string {
	switch v := t.(type) {
	case *btf.Int:
		return fmt.Sprintf("%d%v", v.Size, v.Encoding&btf.Signed != 0)
	case *btf.Enum:
		return fmt.Sprintf("%d%v", v.Size, v.Signed)
	}
	return ""
}

// member is a struct member with its byte offset, anonymous members'
// members flattened into their parent.
type member struct {
	name     string
	off      uint32
	typ      btf.Type
	bitfield bool
}

// flatMembers indexes ms by name (offsets from base bytes).
func flatMembers(ms []btf.Member, base uint32) map[string]member {
	out := map[string]member{}
	for _, m := range ms {
		off := base + uint32(m.Offset)/8
		if m.Name == "" {
			switch v := btf.UnderlyingType(m.Type).(type) {
			case *btf.Struct:
				for k, x := range flatMembers(v.Members, off) {
					out[k] = x
				}
			case *btf.Union:
				for k, x := range flatMembers(v.Members, off) {
					out[k] = x
				}
			}
			continue
		}
		out[m.Name] = member{name: m.Name, off: off, typ: m.Type, bitfield: m.BitfieldSize != 0 || m.Offset%8 != 0}
	}
	return out
}

// dataBytes is how many bytes of t its members hold (padding members,
// named _pad..., and the holes between members not counted).
func dataBytes(t btf.Type, depth int) uint32 {
	if depth > 16 {
		return 0
	}
	switch v := btf.UnderlyingType(t).(type) {
	case *btf.Struct:
		n := uint32(0)
		for _, m := range v.Members {
			if !isPadding(m.Name) {
				n += dataBytes(m.Type, depth+1)
			}
		}
		return n
	case *btf.Array:
		return v.Nelems * dataBytes(v.Type, depth+1)
	default:
		s, err := btf.Sizeof(v)
		if err != nil {
			return 0
		}
		return uint32(s)
	}
}

// isPadding: a member named as padding (_pad, __pad1, ...), always zero.
func isPadding(name string) bool {
	return strings.HasPrefix(strings.TrimLeft(name, "_"), "pad") && name[0] == '_'
}

// mergeSpans sorts spans and joins adjacent ones.
func mergeSpans(s []span) []span {
	slices.SortFunc(s, func(a, b span) int { return int(a.dst) - int(b.dst) })
	var out []span
	for _, x := range s {
		if l := len(out) - 1; l >= 0 && out[l].dst+out[l].n == x.dst && out[l].src+out[l].n == x.src {
			out[l].n += x.n
			continue
		}
		out = append(out, x)
	}
	return out
}

// carrier copies one pinned map of an earlier layout into this program's.
type carrier struct {
	name     string
	key, val *conversion
	// seen: the old map's keys at the first copy (hash maps), each with
	// the digest of the value written for it into the new map, so that
	// the second copy, after the switch, brings what the old program did
	// meanwhile (entries it made, changed or removed: a connection closed
	// during the load) to the entries the new program and the control
	// plane left as the first copy wrote them, and no further: what they
	// made, changed or removed since stays.
	seen map[string]uint64
	// expiresAt: the offset of the old value's u64 member expires (a
	// deadline: fw_ct's connections, fw_frag's datagrams), -1 for none.
	// Into a smaller map, the entries that expire last are carried first
	// (as conntrack's early drop makes room by the oldest).
	expiresAt int
}

// expiresOffset is the offset of t's member expires, a u64 (-1: none).
func expiresOffset(t btf.Type) int {
	s, ok := btf.UnderlyingType(t).(*btf.Struct)
	if !ok {
		return -1
	}
	m, ok := flatMembers(s.Members, 0)["expires"]
	if !ok || m.bitfield || scalarOf(btf.UnderlyingType(m.typ)) != scalarOf(&btf.Int{Size: 8}) {
		return -1
	}
	return int(m.off)
}

// byExpiry orders keys, old's, by their values' u64 at off, the latest
// first (entries gone meanwhile last).
func byExpiry(old *ebpf.Map, keys [][]byte, off uint32) [][]byte {
	at := make(map[string]uint64, len(keys))
	for _, k := range keys {
		var v []byte
		if old.Lookup(k, &v) == nil && int(off)+8 <= len(v) {
			at[string(k)] = ne.Uint64(v[off:])
		}
	}
	slices.SortStableFunc(keys, func(a, b []byte) int { return cmp.Compare(at[string(b)], at[string(a)]) })
	return keys
}

// digest is a value's fingerprint, for seen.
func digest(v []byte) uint64 {
	h := fnv.New64a()
	h.Write(v)
	return h.Sum64()
}

// The generic copy reads arrays by index (arrayLike) and hashes, tries
// and device hashes by key (hashLike). Any other kind of map (a queue, a
// ring buffer, a CPU map) of another layout is made anew, empty.
func hashLike(t ebpf.MapType) bool {
	switch t {
	case ebpf.Hash, ebpf.LRUHash, ebpf.PerCPUHash, ebpf.LRUCPUHash, ebpf.LPMTrie, ebpf.DevMapHash:
		return true
	}
	return false
}

func arrayLike(t ebpf.MapType) bool { return t == ebpf.Array || t == ebpf.PerCPUArray }

// sameKind: maps of types a and b hold their entries alike (an LRU hash
// is a hash that forgets; the per-CPU ones per CPU).
func sameKind(a, b ebpf.MapType) bool {
	plain := func(t ebpf.MapType) ebpf.MapType {
		switch t {
		case ebpf.LRUHash:
			return ebpf.Hash
		case ebpf.LRUCPUHash:
			return ebpf.PerCPUHash
		}
		return t
	}
	return plain(a) == plain(b)
}

// lru: a map of type t makes room for an entry by forgetting another.
func lru(t ebpf.MapType) bool { return t == ebpf.LRUHash || t == ebpf.LRUCPUHash }

// countKeys is how many entries m holds.
func countKeys(m *ebpf.Map) (int, error) {
	keys, walked, err := listKeys(m)
	if err == nil && !walked {
		err = errors.New("the walk of its keys restarted")
	}
	return len(keys), err
}

// listKeys lists m's keys; walked: all of them (a map written meanwhile
// may restart its walk, which stops at twice its size).
func listKeys(m *ebpf.Map) (keys [][]byte, walked bool, err error) {
	var k []byte
	for {
		next := make([]byte, m.KeySize())
		if k == nil {
			err = m.NextKey(nil, &next)
		} else {
			err = m.NextKey(k, &next)
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return keys, true, nil
		}
		if err != nil {
			return keys, false, fmt.Errorf("listing the keys: %w", err)
		}
		keys = append(keys, next)
		k = next
		if len(keys) > int(m.MaxEntries())*2 {
			return keys, false, nil
		}
	}
}

func perCPU(t ebpf.MapType) bool {
	return t == ebpf.PerCPUArray || t == ebpf.PerCPUHash || t == ebpf.LRUCPUHash
}

// newCarrier plans the copy of the pinned map old (key and value types
// okey, oval from its BTF; nil without) into a map of spec ms, or says
// why it cannot be carried.
func newCarrier(name string, old *ebpf.Map, okey, oval btf.Type, ms *ebpf.MapSpec) (*carrier, error) {
	ot := old.Type()
	if !sameKind(ot, ms.Type) {
		return nil, fmt.Errorf("a %v map, this program's is a %v", ot, ms.Type)
	}
	c := &carrier{name: name, expiresAt: -1}
	if oval != nil {
		c.expiresAt = expiresOffset(oval)
	}
	if !hashLike(ot) && !arrayLike(ot) {
		return c, nil // nothing to read
	}
	var err error
	if c.key, err = newConversion(okey, ms.Key, old.KeySize(), ms.KeySize, false); err != nil {
		return nil, fmt.Errorf("its key: %w", err)
	}
	if arrayLike(ot) && !c.key.identity {
		return nil, fmt.Errorf("its index is a %d-byte %v, this program's a %d-byte %v", old.KeySize(), okey, ms.KeySize, ms.Key)
	}
	if !c.key.lossless() {
		w, i := firstDiff(valueLayout(okey), valueLayout(ms.Key))
		return nil, fmt.Errorf("its key is laid out otherwise, and not every member of the old key has a place in the new one "+
			"(pinned: …%s…; this program: …%s…)", w, i)
	}
	if c.val, err = newConversion(oval, ms.Value, old.ValueSize(), ms.ValueSize, true); err != nil {
		return nil, fmt.Errorf("its value: %w", err)
	}
	return c, nil
}

// carryStats counts what a copy carried and what it could not.
type carryStats struct{ carried, lost int }

// copyInto copies old's entries into cur. first: the copy before the new
// program runs anywhere (every entry, replacing cur's); else the copy
// after the switch, once the old program runs nowhere (hash maps only):
// the entries the old program made since the first, where cur has none
// of that key yet, and for the entries of the first copy that cur still
// holds as it wrote them, what the old program did since: their values
// as they are now in old, or their removal (a connection closed or
// collected: carried as it was, a closed connection would let its
// packets through as established in the new program). The new
// program's own changes win; one written between this copy's read of
// an entry and its write is lost (a BPF map has no compare-and-swap).
func (c *carrier) copyInto(old, cur *ebpf.Map, first bool) (carryStats, error) {
	var st carryStats
	if c.key == nil {
		return st, nil
	}
	ncpu := 1
	if perCPU(old.Type()) {
		n, err := ebpf.PossibleCPU()
		if err != nil {
			return st, err
		}
		ncpu = n
	}
	lookup := func(k []byte) ([]byte, error) {
		if !perCPU(old.Type()) {
			var v []byte
			err := old.Lookup(k, &v)
			return c.val.convert(v), err
		}
		per := make([][]byte, ncpu)
		if err := old.Lookup(k, per); err != nil {
			return nil, err
		}
		out := make([]byte, 0, ncpu*int(c.val.newSize))
		for _, v := range per {
			out = append(out, c.val.convert(v)...)
		}
		return out, nil
	}
	// current is cur's value of key k, as lookup gives old's (nil: none).
	current := func(k []byte) ([]byte, error) {
		if !perCPU(cur.Type()) {
			var v []byte
			err := cur.Lookup(k, &v)
			return v, err
		}
		per := make([][]byte, ncpu)
		if err := cur.Lookup(k, per); err != nil {
			return nil, err
		}
		return slices.Concat(per...), nil
	}
	put := func(k, v []byte, flags ebpf.MapUpdateFlags) error {
		if !perCPU(cur.Type()) {
			return cur.Update(k, v, flags)
		}
		per := make([][]byte, ncpu)
		for i := range per {
			per[i] = v[i*int(c.val.newSize) : (i+1)*int(c.val.newSize)]
		}
		return cur.Update(k, per, flags)
	}
	if arrayLike(old.Type()) {
		if !first {
			return st, nil // an array's slots are all there: the first copy has them
		}
		for i := uint32(0); i < old.MaxEntries(); i++ {
			k := c.key.convert(u32Bytes(i))
			v, err := lookup(u32Bytes(i))
			if err != nil {
				return st, fmt.Errorf("reading slot %d: %w", i, err)
			}
			if i >= cur.MaxEntries() {
				if !allZero(v) {
					st.lost++
				}
				continue
			}
			if err := put(k, v, ebpf.UpdateAny); err != nil {
				return st, fmt.Errorf("writing slot %d: %w", i, err)
			}
			st.carried++
		}
		return st, nil
	}
	if first {
		c.seen = map[string]uint64{}
	}
	keys, walked, err := listKeys(old)
	if err != nil {
		return st, err
	}
	if first && c.expiresAt >= 0 && !perCPU(old.Type()) && len(keys) > int(cur.MaxEntries()) {
		keys = byExpiry(old, keys, uint32(c.expiresAt))
	}
	listed := map[string]bool{}
	for _, k := range keys {
		if !first {
			if sum, ok := c.seen[string(k)]; ok {
				there, err := c.refresh(k, sum, lookup, current, put)
				if err != nil {
					return st, err
				}
				listed[string(k)] = there
				continue
			}
		}
		v, err := lookup(k)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			continue // gone meanwhile
		}
		if err != nil {
			return st, fmt.Errorf("reading an entry: %w", err)
		}
		flags := ebpf.UpdateNoExist
		if first {
			flags = ebpf.UpdateAny
			c.seen[string(k)] = digest(v) // (one that does not fit: the second copy finds it missing, and leaves it)
			if lru(cur.Type()) && st.carried >= int(cur.MaxEntries()) {
				st.lost++ // an LRU map takes it, but by forgetting one carried already
				continue
			}
		}
		switch err := put(c.key.convert(k), v, flags); {
		case err == nil:
			st.carried++
		case !first && errors.Is(err, ebpf.ErrKeyExist):
		default:
			st.lost++ // the new map is full (or smaller)
		}
	}
	if first && lru(cur.Type()) {
		// An LRU map may forget an entry to take another before it is full
		// (its free slots are kept per CPU): what it holds is what was carried.
		if n, err := countKeys(cur); err == nil && n < st.carried {
			st.lost += st.carried - n
			st.carried = n
		}
	}
	if first || !walked {
		return st, nil // (a walk cut short says nothing of the keys it did not list)
	}
	// The entries of the first copy that old no longer has: removed by
	// the old program (or the control plane) since.
	for k, sum := range c.seen {
		if listed[k] {
			continue
		}
		var v []byte
		if err := old.Lookup([]byte(k), &v); !errors.Is(err, ebpf.ErrKeyNotExist) {
			continue // there after all (or unreadable): left as it is
		}
		nk := c.key.convert([]byte(k))
		if now, err := current(nk); err == nil && digest(now) == sum {
			if err := cur.Delete(nk); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return st, fmt.Errorf("removing an entry the old program removed: %w", err)
			}
		}
	}
	return st, nil
}

// refresh brings the entry of old key k, which the first copy wrote into
// cur with digest sum, to its value in old now, unless cur's entry is
// gone or changed since (the new program's, or the control plane's).
// there: old still has k (else the caller removes it, as the others
// old no longer has).
func (c *carrier) refresh(k []byte, sum uint64, lookup, current func([]byte) ([]byte, error),
	put func(k, v []byte, flags ebpf.MapUpdateFlags) error) (there bool, err error) {
	v, err := lookup(k)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("reading an entry: %w", err)
	}
	if digest(v) == sum {
		return true, nil // unchanged in old
	}
	nk := c.key.convert(k)
	now, err := current(nk)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return true, nil // the new program removed it
	}
	if err != nil {
		return true, fmt.Errorf("reading a carried entry: %w", err)
	}
	if digest(now) != sum {
		return true, nil // the new program changed it: its value is newer
	}
	if err := put(nk, v, ebpf.UpdateExist); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return true, fmt.Errorf("bringing a carried entry up to date: %w", err)
	}
	return true, nil
}

func u32Bytes(i uint32) []byte {
	b := make([]byte, 4)
	ne.PutUint32(b, i)
	return b
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
