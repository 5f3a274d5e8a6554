package datapath

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Named sets live in one LPM trie, fw_sets, keyed by (set id, prefix), so a
// rule's set test is one lookup whatever the set's size.
//
// The value of an element is its key's prefixlen (never 0). The data plane
// only tests for presence; the control plane uses the value to tell an
// element from a shorter prefix that covers it: an LPM lookup returns the
// longest element that matches the key, which is the key itself exactly
// when the value found is the key's prefixlen. So membership is one lookup,
// and add/del can count and check what they change before changing it.

const setsMap = "fw_sets"

// ErrNoSets means no set map is pinned.
var ErrNoSets = errors.New("no set map is pinned")

// ErrSetsFull means fw_sets holds as many elements as it can (all sets
// together).
var ErrSetsFull = errors.New("the set map is full")

// Sets is a handle on fw_sets.
type Sets struct {
	m     *ebpf.Map
	owned bool // opened by OpenSets: Close closes it
}

// Sets is the set map of the loaded data plane (closed with it).
func (d *Datapath) Sets() *Sets { return &Sets{m: d.sets} }

// OpenSets opens fw_sets as pinned in dir. When nothing is pinned it
// fails with ErrNoSets, or with create creates the map and pins it, so
// that sets can be made and filled before the firewall is loaded: Load
// then reuses the pinned map.
func OpenSets(dir string, create bool) (*Sets, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, setsMap), nil)
	if err == nil {
		return &Sets{m: m, owned: true}, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("opening the pinned set map: %w", err)
	}
	if !create {
		return nil, fmt.Errorf("%w in %s", ErrNoSets, dir)
	}
	if err := ensureBPFFS(dir); err != nil {
		return nil, err
	}
	spec, err := loadXdpfw()
	if err != nil {
		return nil, fmt.Errorf("loading embedded BPF objects: %w", err)
	}
	m, err = ebpf.NewMapWithOptions(spec.Maps[setsMap], ebpf.MapOptions{PinPath: dir})
	if err != nil {
		return nil, fmt.Errorf("creating the set map: %w", err)
	}
	return &Sets{m: m, owned: true}, nil
}

// Close releases the map (a handle from Datapath.Sets stays open with it).
func (s *Sets) Close() {
	if s.owned {
		s.m.Close()
	}
}

// Capacity is the number of elements all sets together can hold
// (FW_MAX_SET_ELEMS in bpf/maps.h).
func (s *Sets) Capacity() int { return int(s.m.MaxEntries()) }

// Elems are elements of one set as trie keys, sorted and without
// duplicates. Sorted because writing a trie in key order keeps its walk in
// the cache: twice as fast as random order for a million prefixes.
type Elems struct {
	id   uint32
	keys []xdpfwFwSetKey
}

// NewElems makes the elements ps of set id.
func NewElems(id uint32, ps []netip.Prefix) *Elems {
	keys := make([]xdpfwFwSetKey, len(ps))
	for i, p := range ps {
		keys[i] = setKey(id, p)
	}
	sortKeys(keys)
	return &Elems{id: id, keys: slices.Compact(keys)}
}

// sortKeys sorts the keys of one set. IPv4 keys are sorted as packed
// integers: five times faster than comparing the structs, a third of the
// time a million-element add takes otherwise.
func sortKeys(keys []xdpfwFwSetKey) {
	if slices.IsSortedFunc(keys, compareKeys) {
		return
	}
	for i := range keys {
		if a := keys[i].Addr[:]; ne.Uint32(a[4:8]) != 0 || ne.Uint64(a[8:]) != 0 { // not IPv4
			slices.SortFunc(keys, compareKeys)
			return
		}
	}
	packed := make([]uint64, len(keys))
	for i := range keys {
		packed[i] = uint64(binary.BigEndian.Uint32(keys[i].Addr[:4]))<<32 | uint64(keys[i].Prefixlen)
	}
	slices.Sort(packed)
	for i, v := range packed {
		binary.BigEndian.PutUint32(keys[i].Addr[:4], uint32(v>>32))
		keys[i].Prefixlen = uint32(v)
	}
}

func compareKeys(a, b xdpfwFwSetKey) int {
	return cmp.Or(
		cmp.Compare(binary.BigEndian.Uint64(a.Addr[:8]), binary.BigEndian.Uint64(b.Addr[:8])),
		cmp.Compare(binary.BigEndian.Uint64(a.Addr[8:]), binary.BigEndian.Uint64(b.Addr[8:])),
		cmp.Compare(a.Prefixlen, b.Prefixlen))
}

// Len is the number of distinct elements.
func (e *Elems) Len() int { return len(e.keys) }

// Prefixes returns the elements (v6: the set holds IPv6 addresses), in
// address order.
func (e *Elems) Prefixes(v6 bool) []netip.Prefix {
	out := make([]netip.Prefix, len(e.keys))
	for i := range e.keys {
		out[i] = keyPrefix(&e.keys[i], v6)
	}
	return out
}

func setKey(id uint32, p netip.Prefix) xdpfwFwSetKey {
	k := xdpfwFwSetKey{Prefixlen: uint32(32 + p.Bits()), SetId: htonl(id)}
	if p.Addr().Is4() {
		a := p.Addr().As4()
		copy(k.Addr[:], a[:])
	} else {
		k.Addr = p.Addr().As16()
	}
	return k
}

func keyPrefix(k *xdpfwFwSetKey, v6 bool) netip.Prefix {
	a := netip.AddrFrom16(k.Addr)
	if !v6 {
		a = netip.AddrFrom4([4]byte(k.Addr[:4]))
	}
	return netip.PrefixFrom(a, int(k.Prefixlen)-32)
}

// value is what an element maps to: its prefixlen (see the top of this file).
func value(k *xdpfwFwSetKey) uint8 { return uint8(k.Prefixlen) }

// Split divides e into the elements its set holds and those it does not.
// trieLen is the number of elements in the whole trie (all sets): with
// fewer than half as many elements to check, each is looked up; with
// more, reading the trie once is cheaper.
func (s *Sets) Split(e *Elems, trieLen int) (in, out *Elems, err error) {
	in, out = &Elems{id: e.id}, &Elems{id: e.id}
	if len(e.keys) == 0 {
		return in, out, nil
	}
	if 2*len(e.keys) < trieLen {
		var v uint8
		for i := range e.keys {
			k := &e.keys[i]
			err := s.m.Lookup(k, &v)
			switch {
			case err == nil && v == value(k):
				in.keys = append(in.keys, *k)
			case err == nil || errors.Is(err, ebpf.ErrKeyNotExist):
				out.keys = append(out.keys, *k)
			default:
				return nil, nil, fmt.Errorf("looking up a set element: %w", err)
			}
		}
		return in, out, nil
	}
	have, err := s.scan(e.id)
	if err != nil {
		return nil, nil, err
	}
	held := make(map[xdpfwFwSetKey]struct{}, len(have))
	for _, k := range have {
		held[k] = struct{}{}
	}
	for _, k := range e.keys {
		if _, ok := held[k]; ok {
			in.keys = append(in.keys, k)
		} else {
			out.keys = append(out.keys, k)
		}
	}
	return in, out, nil
}

// setBatch is the number of elements per batch syscall.
const setBatch = 16384

// Insert writes the elements of e. If the kernel refuses one (the map is
// full: ErrSetsFull), those written before are removed again and the set
// is as it was.
func (s *Sets) Insert(e *Elems) error {
	vals := make([]uint8, min(len(e.keys), setBatch))
	for off := 0; off < len(e.keys); off += setBatch {
		keys := e.keys[off:min(off+setBatch, len(e.keys))]
		for i := range keys {
			vals[i] = value(&keys[i])
		}
		n, err := s.m.BatchUpdate(keys, vals[:len(keys)], nil)
		if errors.Is(err, ebpf.ErrNotSupported) { // kernels without batch ops on LPM tries
			for n, err = 0, nil; n < len(keys); n++ {
				if err = s.m.Put(&keys[n], &vals[n]); err != nil {
					break
				}
			}
		}
		if err != nil {
			if uerr := s.remove(e.keys[:off+n]); uerr != nil {
				err = fmt.Errorf("%w; removing the elements added before also failed: %v", err, uerr)
			}
			if errors.Is(err, unix.ENOSPC) {
				return fmt.Errorf("%w (%d elements, all sets together): %v", ErrSetsFull, s.Capacity(), err)
			}
			return fmt.Errorf("adding set elements: %w", err)
		}
	}
	return nil
}

// Remove deletes the elements of e, which must all be in the set (see
// Split). If the kernel refuses one, those removed before are put back.
func (s *Sets) Remove(e *Elems) error {
	if err := s.remove(e.keys); err != nil {
		return fmt.Errorf("removing set elements: %w", err)
	}
	return nil
}

// remove deletes keys; on failure it puts back those it deleted.
func (s *Sets) remove(keys []xdpfwFwSetKey) error {
	for off := 0; off < len(keys); off += setBatch {
		batch := keys[off:min(off+setBatch, len(keys))]
		n, err := s.m.BatchDelete(batch, nil)
		if errors.Is(err, ebpf.ErrNotSupported) {
			for n, err = 0, nil; n < len(batch); n++ {
				if err = s.m.Delete(&batch[n]); err != nil {
					break
				}
			}
		}
		if err != nil {
			for i := range keys[:off+n] {
				_ = s.m.Put(&keys[i], value(&keys[i]))
			}
			return err
		}
	}
	return nil
}

// List returns the elements of set id (v6: it holds IPv6 addresses), in
// address order.
func (s *Sets) List(id uint32, v6 bool) ([]netip.Prefix, error) {
	keys, err := s.scan(id)
	if err != nil {
		return nil, err
	}
	sortKeys(keys)
	e := &Elems{id: id, keys: keys}
	return e.Prefixes(v6), nil
}

// Flush removes every element of set id and returns how many there were.
func (s *Sets) Flush(id uint32) (int, error) {
	keys, err := s.scan(id)
	if err != nil {
		return 0, err
	}
	if err := s.remove(keys); err != nil {
		return 0, fmt.Errorf("flushing a set: %w", err)
	}
	return len(keys), nil
}

// scan reads the keys of set id. The trie cannot be read from a given set
// on, so this reads all of it.
func (s *Sets) scan(id uint32) ([]xdpfwFwSetKey, error) {
	var out []xdpfwFwSetKey
	err := s.each(func(k *xdpfwFwSetKey) {
		if setID(k) == id {
			out = append(out, *k)
		}
	})
	return out, err
}

// HighestID is the highest set id of an element in the map (0: none): for
// a control plane that lost its record of the sets, so that a new set
// never shares an id with elements left in the map.
func (s *Sets) HighestID() (uint32, error) {
	var hi uint32
	err := s.each(func(k *xdpfwFwSetKey) { hi = max(hi, setID(k)) })
	return hi, err
}

// each calls fn on every key of the map, read in batches (one by one on
// kernels without batch lookups on LPM tries).
func (s *Sets) each(fn func(*xdpfwFwSetKey)) error {
	keys := make([]xdpfwFwSetKey, setBatch)
	vals := make([]uint8, setBatch)
	var cursor ebpf.MapBatchCursor
	for first := true; ; first = false {
		n, err := s.m.BatchLookup(&cursor, keys, vals, nil)
		for i := range keys[:n] {
			fn(&keys[i])
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported) && first:
			return s.iterate(fn)
		case err != nil:
			return fmt.Errorf("reading the set map: %w", err)
		}
	}
}

// iterate is each for kernels without batch lookups on LPM tries.
func (s *Sets) iterate(fn func(*xdpfwFwSetKey)) error {
	var k xdpfwFwSetKey
	var v uint8
	it := s.m.Iterate()
	for it.Next(&k, &v) {
		fn(&k)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the set map: %w", err)
	}
	return nil
}

func setID(k *xdpfwFwSetKey) uint32 { return htonl(k.SetId) }

// htonl converts between host order and the big-endian set id in the key
// (big-endian so the id leads the LPM key's bit string); its own inverse.
func htonl(v uint32) uint32 { return ne.Uint32(binary.BigEndian.AppendUint32(nil, v)) }

// MaxSetElems is the number of elements all sets together can hold: the
// max_entries of fw_sets, FW_MAX_SET_ELEMS in bpf/maps.h (a test checks
// they agree).
const MaxSetElems = 1 << 21
