package datapath

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// A pinned map is reused by the next load when its type, key and value
// sizes, entries and flags are this program's (cilium/ebpf's
// MapSpec.Compatible) and its key and value are laid out as this
// program's BTF lays them out; otherwise upgradeSpec gives the program a
// new map beside it, whose contents are carried over (carry.go, or
// upgradable), or refuses the load. The sizes alone do not say that the
// value means the same: a field renamed, moved or given a meaning in what
// was padding (fw_node's second dimension, fw_entry's NAT byte) keeps the
// size, and this program would read the old program's data as its own
// (and the old program, running until the new one is attached, this
// program's). The layouts compared are the BTF of both programs.

// sameMap: the pinned map old (key and value types okey, oval from its
// BTF, nil without) is one this program reuses as it is.
func sameMap(ms *ebpf.MapSpec, old *ebpf.Map, okey, oval btf.Type) bool {
	return ms.Compatible(old) == nil && sameLayout(okey, ms.Key) && sameLayout(oval, ms.Value)
}

// sameLayout: the types are laid out alike, or one is unknown (a map
// made without BTF, by hand or by a test: its sizes alone are compared).
func sameLayout(old, cur btf.Type) bool {
	return old == nil || cur == nil || valueLayout(old) == valueLayout(cur)
}

// layoutDiff describes how old's layout differs from cur, a layout
// valueLayout wrote ("" when it does not, or either is unknown).
func layoutDiff(old btf.Type, cur string) string {
	if old == nil || cur == "" {
		return ""
	}
	was := valueLayout(old)
	if was == cur {
		return ""
	}
	w, i := firstDiff(was, cur)
	return fmt.Sprintf("pinned: …%s…; this program: …%s…", w, i)
}

// checkOpenLayouts refuses pins whose keys or values this binary would
// misread: an earlier or later xdpfw's (Open: list, status, conntrack
// list, ...). Sizes may differ (a table loaded larger, counters grown at
// their end): what is read is read slot by slot.
func checkOpenLayouts(dir string, opened map[string]*ebpf.Map) error {
	layouts, err := embeddedLayouts()
	if err != nil {
		return fmt.Errorf("loading embedded BPF objects: %w", err)
	}
	var differ []string
	specs := map[btf.ID]*btf.Spec{}
	rec := recordedLayouts(dir)
	for name, m := range opened {
		l, ok := layouts[name]
		if m == nil || !ok {
			continue
		}
		if layoutVouched(rec, name, m, l.key, l.value) {
			continue // recorded by the program that pinned it: laid out as here
		}
		okey, oval, err := readPinnedTypes(m, specs)
		if err != nil {
			return typesErr(name, err)
		}
		if d := layoutDiff(okey, l.key); d != "" {
			differ = append(differ, fmt.Sprintf("%s's key (%s)", name, d))
		}
		if d := layoutDiff(oval, l.value); d != "" {
			differ = append(differ, fmt.Sprintf("%s (%s)", name, d))
		}
	}
	if len(differ) == 0 {
		return nil
	}
	slices.Sort(differ)
	return fmt.Errorf("the maps pinned in %s were made by another xdpfw version, which lays them out otherwise: "+
		"this one would misread them; `xdpfw load` with this version upgrades them (or use the version that loaded them): %s: %w",
		dir, strings.Join(differ, "; "), ebpf.ErrMapIncompatible)
}

// mapLayout is a map's key and value layouts (valueLayout; "": no BTF).
type mapLayout struct{ key, value string }

// embeddedLayouts are this binary's maps' layouts, by name, worked out
// once per process (parsing the object takes ~15 ms; the layouts are
// all that is kept).
var embeddedLayouts = sync.OnceValues(func() (map[string]mapLayout, error) {
	spec, err := loadXdpfw()
	if err != nil {
		return nil, err
	}
	out := map[string]mapLayout{}
	for name, ms := range spec.Maps {
		out[name] = layoutOf(ms)
	}
	return out, nil
})

// layoutOf is ms's key and value layouts ("" for what has no BTF type).
func layoutOf(ms *ebpf.MapSpec) mapLayout {
	var l mapLayout
	if ms.Key != nil {
		l.key = valueLayout(ms.Key)
	}
	if ms.Value != nil {
		l.value = valueLayout(ms.Value)
	}
	return l
}

// bpfMapInfo is the head of the kernel's struct bpf_map_info, up to
// btf_vmlinux_id (Linux 5.x; the kernel fills what it has and zeroes the
// rest).
type bpfMapInfo struct {
	Type, ID, KeySize, ValueSize, MaxEntries, MapFlags uint32
	Name                                               [16]byte
	Ifindex, BTFVmlinuxValueTypeID                     uint32
	NetnsDev, NetnsIno                                 uint64
	BTFID, BTFKeyTypeID, BTFValueTypeID, BTFVmlinuxID  uint32
}

// pinnedTypes are the BTF types of m's keys and values, nil when m was
// made without BTF. (cilium/ebpf's MapInfo has the BTF object's id but
// not the types' ids: BPF_OBJ_GET_INFO_BY_FD here.) The maps of one
// program share one BTF object: specs keeps those read, by id (nil: read
// it for this call alone).
func pinnedTypes(m *ebpf.Map, specs map[btf.ID]*btf.Spec) (key, value btf.Type, err error) {
	var info bpfMapInfo
	attr := struct {
		fd, infoLen uint32
		info        uint64
	}{fd: uint32(m.FD()), infoLen: uint32(unsafe.Sizeof(info)), info: uint64(uintptr(unsafe.Pointer(&info)))}
	const objGetInfoByFD = 15 // BPF_OBJ_GET_INFO_BY_FD
	if _, _, errno := unix.Syscall(unix.SYS_BPF, objGetInfoByFD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr)); errno != 0 {
		return nil, nil, fmt.Errorf("BPF_OBJ_GET_INFO_BY_FD: %w", errno)
	}
	if info.BTFID == 0 || info.BTFValueTypeID == 0 {
		return nil, nil, nil
	}
	spec := specs[btf.ID(info.BTFID)]
	if spec == nil {
		h, err := btf.NewHandleFromID(btf.ID(info.BTFID))
		if err != nil {
			return nil, nil, err
		}
		defer h.Close()
		if spec, err = h.Spec(nil); err != nil {
			return nil, nil, err
		}
		if specs != nil {
			specs[btf.ID(info.BTFID)] = spec
		}
	}
	if info.BTFKeyTypeID != 0 {
		if key, err = spec.TypeByID(btf.TypeID(info.BTFKeyTypeID)); err != nil {
			return nil, nil, err
		}
	}
	value, err = spec.TypeByID(btf.TypeID(info.BTFValueTypeID))
	return key, value, err
}

// valueLayout writes t's layout: for a struct or union its name, size and
// each member's name, bit offset and bitfield size with the member's own
// layout; arrays with their length; integers by size and sign; enums by
// size; pointers as such (not followed). Typedefs and qualifiers are
// looked through. Two layouts are the same when their strings are.
func valueLayout(t btf.Type) string {
	var b strings.Builder
	var walk func(t btf.Type, depth int)
	walk = func(t btf.Type, depth int) {
		if depth > 16 {
			b.WriteString("...")
			return
		}
		switch v := btf.UnderlyingType(t).(type) {
		case *btf.Struct:
			fmt.Fprintf(&b, "struct %s(%d){", v.Name, v.Size)
			members(&b, v.Members, func(t btf.Type) { walk(t, depth+1) })
			b.WriteString("}")
		case *btf.Union:
			fmt.Fprintf(&b, "union %s(%d){", v.Name, v.Size)
			members(&b, v.Members, func(t btf.Type) { walk(t, depth+1) })
			b.WriteString("}")
		case *btf.Array:
			fmt.Fprintf(&b, "[%d]", v.Nelems)
			walk(v.Type, depth+1)
		case *btf.Int:
			fmt.Fprintf(&b, "int%d", v.Size*8)
			if v.Encoding&btf.Signed != 0 {
				b.WriteString("s")
			}
		case *btf.Enum:
			fmt.Fprintf(&b, "enum%d", v.Size*8)
		case *btf.Pointer:
			b.WriteString("ptr")
		default:
			fmt.Fprintf(&b, "%T", v)
		}
	}
	walk(t, 0)
	return b.String()
}

// members writes each member's name, bit offset and bitfield size, then
// its type with layout.
func members(b *strings.Builder, ms []btf.Member, layout func(btf.Type)) {
	for i, m := range ms {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(b, "%s@%d", m.Name, m.Offset)
		if m.BitfieldSize != 0 {
			fmt.Fprintf(b, ":%d", m.BitfieldSize)
		}
		b.WriteString(" ")
		layout(m.Type)
	}
}

// firstDiff is a stretch of a and of b around where they first differ
// (from the start of the member it is in, 60 bytes at most).
func firstDiff(a, b string) (string, string) {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, strings.LastIndexAny(a[:i], "{ ")+1)
	cut := func(s string) string {
		return s[min(from, len(s)):min(from+60, len(s))]
	}
	return cut(a), cut(b)
}

// readPinnedTypes is pinnedTypes (a test makes it fail as without
// CAP_SYS_ADMIN).
var readPinnedTypes = pinnedTypes

// The pinned maps' BTF is read by its id (BPF_BTF_GET_FD_BY_ID), which
// the kernel allows with CAP_SYS_ADMIN only: the daemon under the systemd
// unit's capabilities (CAP_BPF, CAP_NET_ADMIN, ...) cannot. So the
// program that pins the maps records their layouts beside them
// (layoutsPin: map name -> layoutSum of key and value, and the map's id), and a map whose
// record is this binary's layout needs no BTF read: the same version
// reloading, reading or upgrading its own pins works with the unit's
// capabilities. What the record does not vouch for (pins of another
// version, or of one that recorded nothing) is read from BTF, and
// without CAP_SYS_ADMIN refused (typesErr): never reused unchecked.
const layoutsPin = "fw_layouts"

// layoutSum is the digest of a map's key and value layouts (valueLayout).
func layoutSum(key, value string) [32]byte {
	return sha256.Sum256([]byte(key + "\x00" + value))
}

// specLayoutSums are the layout digests of spec's pinned maps.
func specLayoutSums(spec *ebpf.CollectionSpec) map[string][32]byte {
	out := map[string][32]byte{}
	for name, ms := range spec.Maps {
		if ms.Pinning == ebpf.PinByName {
			l := layoutOf(ms)
			out[name] = layoutSum(l.key, l.value)
		}
	}
	return out
}

// layoutsKey is a map name in the record (bpffs pins may be longer than
// a BPF object name).
type layoutsKey [64]byte

// layoutRecord is what the record holds of one pinned map: its layout
// digest, and its id, so that a pin replaced since (by another program,
// by hand) is not vouched for.
type layoutRecord struct {
	Sum [32]byte
	ID  uint32
}

// mapID is m's id (0 when it cannot be read).
func mapID(m *ebpf.Map) uint32 {
	info, err := m.Info()
	if err != nil {
		return 0
	}
	id, _ := info.ID()
	return uint32(id)
}

// layoutVouched says whether dir's record vouches that the pinned map m,
// pinned as name, is laid out as key and value.
func layoutVouched(rec map[string]layoutRecord, name string, m *ebpf.Map, key, value string) bool {
	r, ok := rec[name]
	return ok && r.ID != 0 && r.ID == mapID(m) && r.Sum == layoutSum(key, value)
}

// recordedLayouts reads dir's record of layouts; empty when there is none
// (an earlier version's pins) or it cannot be read.
func recordedLayouts(dir string) map[string]layoutRecord {
	out := map[string]layoutRecord{}
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, layoutsPin), nil)
	if err != nil {
		return out
	}
	defer m.Close()
	if m.KeySize() != uint32(len(layoutsKey{})) || m.ValueSize() != uint32(binary.Size(layoutRecord{})) {
		return out
	}
	var k layoutsKey
	var v layoutRecord
	for it := m.Iterate(); it.Next(&k, &v); {
		out[string(bytes.TrimRight(k[:], "\x00"))] = v
	}
	return out
}

// pinLayouts replaces dir's record of layouts with d.layouts, for this
// program's maps (a new map pinned under a temporary name, then renamed
// over the old record). Each is recorded with the id of d's own map, not
// of whatever is pinned under its name now: a pin another load replaced
// meanwhile (another version's map) is not vouched for.
func (d *Datapath) pinLayouts() error {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "fw_layouts", Type: ebpf.Hash, KeySize: uint32(len(layoutsKey{})),
		ValueSize: uint32(binary.Size(layoutRecord{})), MaxEntries: uint32(max(len(d.layouts), 1))})
	if err != nil {
		return fmt.Errorf("making the record of map layouts: %w", err)
	}
	defer m.Close()
	own := d.maps()
	for name, sum := range d.layouts {
		var k layoutsKey
		if len(name) > len(k) {
			return fmt.Errorf("map name %q is longer than the layout record's key", name)
		}
		mp := own[name]
		if mp == nil || *mp == nil {
			continue // not this program's to vouch for
		}
		copy(k[:], name)
		if err := m.Put(&k, &layoutRecord{Sum: sum, ID: mapID(*mp)}); err != nil {
			return fmt.Errorf("recording the layout of %s: %w", name, err)
		}
	}
	pin := filepath.Join(d.dir, layoutsPin)
	tmp := pin + "_new"
	_ = os.Remove(tmp)
	if err := m.Pin(tmp); err != nil {
		return fmt.Errorf("pinning the record of map layouts: %w", err)
	}
	if err := os.Rename(tmp, pin); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("replacing the record of map layouts: %w", err)
	}
	return nil
}

// typesErr is the error of a pinned map whose types could not be read.
func typesErr(name string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("reading the types of pinned map %s: %w (the maps pinned were made by another xdpfw version, "+
			"or by one that did not record their layouts, and reading their BTF needs CAP_SYS_ADMIN: "+
			"run `xdpfw load` once with it, or `xdpfw detach --all` first)", name, err)
	}
	return fmt.Errorf("reading the types of pinned map %s: %w", name, err)
}
