package datapath

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestConversion: the generic carry-over copies each member of the new
// layout from the old member of the same name wherever it was (moved,
// in a nested struct, in an array that grew), zero for the new ones and
// for those whose type changed; a key that loses a member is not
// lossless, one that only gains one (or drops padding) is.
func TestConversion(t *testing.T) {
	u8 := &btf.Int{Name: "u8", Size: 1}
	u16 := &btf.Int{Name: "u16", Size: 2}
	u32 := &btf.Int{Name: "u32", Size: 4}
	u64 := &btf.Int{Name: "u64", Size: 8}
	arr := func(t btf.Type, n uint32) *btf.Array { return &btf.Array{Index: u32, Type: t, Nelems: n} }
	inner := func(name string, ms ...btf.Member) *btf.Struct {
		s := &btf.Struct{Name: name, Members: ms}
		for _, m := range ms {
			sz, _ := btf.Sizeof(m.Type)
			s.Size = max(s.Size, uint32(m.Offset.Bytes())+uint32(sz))
		}
		return s
	}
	m := func(name string, off uint32, t btf.Type) btf.Member {
		return btf.Member{Name: name, Offset: btf.Bits(off * 8), Type: t}
	}
	oldIn := inner("in", m("x", 0, u16), m("y", 2, u16))
	newIn := inner("in", m("y", 0, u16), m("z", 2, u16), m("x", 4, u16))
	old := &btf.Struct{Name: "v", Size: 32, Members: []btf.Member{
		m("a", 0, u32), m("kind", 4, u32), m("b", 8, u64), m("c", 16, arr(u16, 2)), m("in", 20, oldIn),
		m("gone", 24, u8), m("_pad", 25, arr(u8, 7)),
	}}
	cur := &btf.Struct{Name: "v", Size: 40, Members: []btf.Member{
		m("b", 0, u64), m("a", 8, u32), m("kind", 12, u16), m("c", 14, arr(u16, 3)), m("in", 20, newIn),
		m("fresh", 28, u32), m("_pad", 32, arr(u8, 8)),
	}}
	c, err := newConversion(old, cur, 32, 40, true)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, 32)
	ne.PutUint32(src[0:], 0x11111111)
	ne.PutUint32(src[4:], 7) // kind: u32 -> u16, another type: zero
	ne.PutUint64(src[8:], 0x2222222222222222)
	ne.PutUint16(src[16:], 0x3333)
	ne.PutUint16(src[18:], 0x4444)
	ne.PutUint16(src[20:], 0x5555) // in.x
	ne.PutUint16(src[22:], 0x6666) // in.y
	src[24] = 0x77
	want := make([]byte, 40)
	ne.PutUint64(want[0:], 0x2222222222222222)
	ne.PutUint32(want[8:], 0x11111111)
	ne.PutUint16(want[14:], 0x3333)
	ne.PutUint16(want[16:], 0x4444)
	ne.PutUint16(want[20:], 0x6666) // in.y
	ne.PutUint16(want[24:], 0x5555) // in.x
	if got := c.convert(src); !bytes.Equal(got, want) {
		t.Fatalf("converted\n%x\nwant\n%x", got, want)
	}
	if c.lossless() {
		t.Error("gone and kind are not carried: the conversion is not lossless")
	}

	// keys: gaining a member (and losing padding) keeps keys apart;
	// losing one does not
	k1 := &btf.Struct{Name: "k", Size: 8, Members: []btf.Member{m("a", 0, u32), m("p", 4, u16), m("_pad", 6, arr(u8, 2))}}
	k2 := &btf.Struct{Name: "k", Size: 12, Members: []btf.Member{m("p", 0, u16), m("zone", 2, u16), m("a", 4, u32), m("x", 8, u32)}}
	k3 := &btf.Struct{Name: "k", Size: 8, Members: []btf.Member{m("a", 0, u32), m("port", 4, u16), m("_pad", 6, arr(u8, 2))}}
	if c, err := newConversion(k1, k2, 8, 12, false); err != nil || !c.lossless() {
		t.Errorf("a key that gains members: lossless %v, %v; want lossless", c != nil && c.lossless(), err)
	}
	if c, err := newConversion(k1, k3, 8, 8, false); err != nil || c.lossless() {
		t.Errorf("a key whose member p is renamed: lossless %v, %v; want not lossless", c != nil && c.lossless(), err)
	}
	// kinds of map carried into one another
	for _, k := range []struct {
		a, b ebpf.MapType
		same bool
	}{{ebpf.Hash, ebpf.LRUHash, true}, {ebpf.LRUCPUHash, ebpf.PerCPUHash, true}, {ebpf.Hash, ebpf.LPMTrie, false},
		{ebpf.Array, ebpf.PerCPUArray, false}, {ebpf.Hash, ebpf.PerCPUHash, false}, {ebpf.Queue, ebpf.Queue, true}} {
		if sameKind(k.a, k.b) != k.same {
			t.Errorf("sameKind(%v, %v) = %v", k.a, k.b, !k.same)
		}
	}
	// without BTF: the same size, or (values) grown at the end
	if _, err := newConversion(nil, nil, 8, 12, false); err == nil || !strings.Contains(err.Error(), "no BTF") {
		t.Errorf("a key of another size without BTF: %v, want refused", err)
	}
	if c, err := newConversion(nil, nil, 8, 12, true); err != nil || !bytes.Equal(c.convert([]byte{1, 2, 3, 4, 5, 6, 7, 8}), []byte{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0}) {
		t.Errorf("a value grown at its end without BTF: %v", err)
	}
}

// TestCarryCatchesUp: the copy after the switch brings the entries of the
// first copy to what the old program did with them meanwhile (a value
// changed, an entry removed: a connection closed while the load ran must
// not come back as established in the new program), adds the ones it
// made, and leaves what the new program changed, made or removed since.
// Per-CPU hash maps alike.
func TestCarryCatchesUp(t *testing.T) {
	testutil.RequireRoot(t)
	for _, typ := range []ebpf.MapType{ebpf.Hash, ebpf.LRUHash, ebpf.PerCPUHash} {
		t.Run(typ.String(), func(t *testing.T) {
			mk := func() *ebpf.Map { return testMap(t, typ, 4, 8, 16) }
			ncpu := 1
			if perCPU(typ) {
				n, err := ebpf.PossibleCPU()
				if err != nil {
					t.Fatal(err)
				}
				ncpu = n
			}
			set := func(m *ebpf.Map, k uint32, v uint64) {
				t.Helper()
				var err error
				if perCPU(typ) {
					err = m.Put(k, slices.Repeat([]uint64{v}, ncpu))
				} else {
					err = m.Put(k, v)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			get := func(m *ebpf.Map, k uint32) (uint64, bool) {
				if perCPU(typ) {
					var vs []uint64
					if m.Lookup(k, &vs) != nil {
						return 0, false
					}
					return vs[ncpu-1], true
				}
				var v uint64
				return v, m.Lookup(k, &v) == nil
			}
			old, cur := mk(), mk()
			c, err := newCarrier("fw_test", old, nil, nil, &ebpf.MapSpec{Type: typ, KeySize: 4, ValueSize: 8, MaxEntries: 16})
			if err != nil {
				t.Fatal(err)
			}
			for k := uint32(1); k <= 5; k++ {
				set(old, k, uint64(k*10))
			}
			if _, err := c.copyInto(old, cur, true); err != nil {
				t.Fatal(err)
			}
			// while the load runs: the old program changes 1, removes 2 (a
			// connection closed), makes 6; the new program (after the
			// switch) changes 4, removes 5 and makes 7
			set(old, 1, 11)
			if err := old.Delete(uint32(2)); err != nil {
				t.Fatal(err)
			}
			set(old, 6, 60)
			set(cur, 4, 44)
			if err := cur.Delete(uint32(5)); err != nil {
				t.Fatal(err)
			}
			set(cur, 7, 77)
			if _, err := c.copyInto(old, cur, false); err != nil {
				t.Fatal(err)
			}
			want := map[uint32]uint64{1: 11, 3: 30, 4: 44, 6: 60, 7: 77}
			for k := uint32(1); k <= 7; k++ {
				v, ok := get(cur, k)
				w, wok := want[k]
				if ok != wok || v != w {
					t.Errorf("key %d after the second copy: %d (there %v), want %d (there %v)", k, v, ok, w, wok)
				}
			}
		})
	}
}

// TestCarryIntoSmallerLRU: an LRU map takes every update, forgetting
// entries to make room: the copy into a smaller one says how many it
// holds and how many were lost, not that all were carried.
func TestCarryIntoSmallerLRU(t *testing.T) {
	testutil.RequireRoot(t)
	old, cur := testMap(t, ebpf.LRUHash, 4, 8, 64), testMap(t, ebpf.LRUHash, 4, 8, 16)
	for k := uint32(0); k < 40; k++ {
		if err := old.Put(k, uint64(k)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := newCarrier("fw_test", old, nil, nil, &ebpf.MapSpec{Type: ebpf.LRUHash, KeySize: 4, ValueSize: 8, MaxEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.copyInto(old, cur, true)
	if err != nil {
		t.Fatal(err)
	}
	held, err := countKeys(cur)
	if err != nil {
		t.Fatal(err)
	}
	if st.carried != held || st.carried+st.lost != 40 || held > 16 {
		t.Errorf("40 entries into an LRU map of 16: carried %d, lost %d; the map holds %d", st.carried, st.lost, held)
	}
}

// TestCarryKeepsLatest: into a smaller table (a smaller --ct-max), the
// entries carried are those that expire last (the most recently active
// connections), not the first the walk of the old map finds.
func TestCarryKeepsLatest(t *testing.T) {
	testutil.RequireRoot(t)
	u32 := &btf.Int{Name: "u32", Size: 4}
	u64 := &btf.Int{Name: "u64", Size: 8}
	val := &btf.Struct{Name: "v", Size: 16, Members: []btf.Member{
		{Name: "state", Type: u32}, {Name: "expires", Offset: 64, Type: u64}}}
	old, cur := testMap(t, ebpf.Hash, 4, 16, 64), testMap(t, ebpf.Hash, 4, 16, 16)
	for k := uint32(0); k < 40; k++ {
		v := make([]byte, 16)
		ne.PutUint64(v[8:], uint64(1000+37*((k*7)%40))) // expiry order unlike key order
		if err := old.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	c, err := newCarrier("fw_test", old, nil, val, &ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 16, MaxEntries: 16, Value: val})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.copyInto(old, cur, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.carried != 16 || st.lost != 24 {
		t.Errorf("40 entries into 16: carried %d, lost %d", st.carried, st.lost)
	}
	var k uint32
	var v []byte
	for it := cur.Iterate(); it.Next(&k, &v); {
		if exp := ne.Uint64(v[8:]); exp < 1000+37*24 {
			t.Errorf("key %d carried, expiring at %d: one of the 24 that expire first", k, exp)
		}
	}
}

// testMap is a map of the test's own, closed when it ends.
func testMap(t *testing.T, typ ebpf.MapType, key, value, n uint32) *ebpf.Map {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: typ, KeySize: key, ValueSize: value, MaxEntries: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
