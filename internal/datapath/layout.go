package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// A pinned map is reused by the next load when its type, key and value
// sizes, entries and flags are this program's (cilium/ebpf's
// MapSpec.Compatible), or carried over when upgradable says how. The
// sizes alone do not say that the value means the same: a field renamed,
// moved or given a meaning in what was padding (fw_node's second
// dimension, fw_entry's NAT byte) keeps the size, and this program would
// read the old program's data as its own (and the old program, running
// until the new one is attached, this program's). checkPinnedLayouts
// compares the value's layout as the BTF of both programs gives it.

// checkPinnedLayouts refuses, before anything is created, the maps pinned
// in dir that this program would reuse (spec's PinByName maps; those
// upgradeSpec replaces are not) whose value type is laid out otherwise
// than this program's: another member name, offset, size or element
// count anywhere in it. A map pinned without BTF (made by hand, or by a
// test) cannot be compared and is left to the size check.
func checkPinnedLayouts(spec *ebpf.CollectionSpec, dir string) error {
	var differ []string
	for name, ms := range spec.Maps {
		if ms.Pinning != ebpf.PinByName || ms.Value == nil {
			continue
		}
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("opening pinned map %s: %w", name, err)
		}
		old, err := pinnedValueType(m)
		m.Close()
		if err != nil {
			return fmt.Errorf("reading the value type of pinned map %s: %w", name, err)
		}
		if old == nil {
			continue
		}
		if was, is := valueLayout(old), valueLayout(ms.Value); was != is {
			w, i := firstDiff(was, is)
			differ = append(differ, fmt.Sprintf("%s (pinned: …%s…; this program: …%s…)", name, w, i))
		}
	}
	if len(differ) == 0 {
		return nil
	}
	slices.Sort(differ)
	return fmt.Errorf("maps pinned in %s were made by another xdpfw version: their values are laid out otherwise "+
		"than this program's at the same size, so neither program could read the other's; run `xdpfw detach --all` "+
		"first: %s: %w", dir, strings.Join(differ, "; "), ebpf.ErrMapIncompatible)
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

// pinnedValueType is the BTF type of m's values, or nil when m was made
// without BTF. (cilium/ebpf's MapInfo has the BTF object's id but not the
// value's type id: BPF_OBJ_GET_INFO_BY_FD here.)
func pinnedValueType(m *ebpf.Map) (btf.Type, error) {
	var info bpfMapInfo
	attr := struct {
		fd, infoLen uint32
		info        uint64
	}{fd: uint32(m.FD()), infoLen: uint32(unsafe.Sizeof(info)), info: uint64(uintptr(unsafe.Pointer(&info)))}
	const objGetInfoByFD = 15 // BPF_OBJ_GET_INFO_BY_FD
	if _, _, errno := unix.Syscall(unix.SYS_BPF, objGetInfoByFD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr)); errno != 0 {
		return nil, fmt.Errorf("BPF_OBJ_GET_INFO_BY_FD: %w", errno)
	}
	if info.BTFID == 0 || info.BTFValueTypeID == 0 {
		return nil, nil
	}
	h, err := btf.NewHandleFromID(btf.ID(info.BTFID))
	if err != nil {
		return nil, err
	}
	defer h.Close()
	spec, err := h.Spec(nil)
	if err != nil {
		return nil, err
	}
	return spec.TypeByID(btf.TypeID(info.BTFValueTypeID))
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
