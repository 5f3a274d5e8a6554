package datapath

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// MinKernel is the oldest Linux that has everything the program needs
// (bpf_xdp_load_bytes came last, in 5.18; TestMinKernel keeps it the
// newest version kernelFeatures names). Kernel BTF is needed too.
const MinKernel = "5.18"

// feature is one thing the kernel must offer, the Linux version that
// brought it, and how to find out.
type feature struct {
	what  string // "helper bpf_xdp_load_bytes (XDP programs)"
	since string // "5.18" ("" unknown)
	probe func() error
}

// helperSince is the Linux version that brought each helper the programs
// call (include/uapi/linux/bpf.h history); a helper missing here is named
// without one.
var helperSince = map[asm.BuiltinFunc]string{
	asm.FnMapLookupElem: "3.19", asm.FnMapUpdateElem: "3.19", asm.FnMapDeleteElem: "3.19",
	asm.FnKtimeGetNs: "4.1", asm.FnGetPrandomU32: "4.1", asm.FnSkbStoreBytes: "4.1", asm.FnL3CsumReplace: "4.1", asm.FnL4CsumReplace: "4.1", asm.FnTailCall: "4.2", asm.FnRedirect: "4.4",
	asm.FnSkbLoadBytes: "4.5", asm.FnSkbChangeTail: "4.9", asm.FnSkbPullData: "4.9", asm.FnSkbChangeHead: "4.10",
	asm.FnXdpAdjustHead: "4.10", asm.FnSkbAdjustRoom: "4.13", asm.FnXdpAdjustTail: "4.18", asm.FnFibLookup: "4.18",
	asm.FnMapPushElem: "4.20", asm.FnMapPopElem: "4.20", asm.FnForEachMapElem: "5.13", asm.FnLoop: "5.17",
	asm.FnJiffies64: "5.5", asm.FnRingbufReserve: "5.8", asm.FnRingbufSubmit: "5.8", asm.FnKtimeGetCoarseNs: "5.11",
	asm.FnXdpLoadBytes: "5.18", asm.FnRedirectMap: "4.14", asm.FnProbeReadKernel: "5.5", asm.FnXdpAdjustMeta: "4.15",
	asm.FnRedirectNeigh: "5.10", asm.FnGetSmpProcessorId: "4.1",
}

// mapTypes names each map type the program uses and the Linux version
// that brought it.
var mapTypes = map[ebpf.MapType]struct{ name, since string }{
	ebpf.Hash: {"BPF_MAP_TYPE_HASH", "3.19"}, ebpf.Array: {"BPF_MAP_TYPE_ARRAY", "3.19"},
	ebpf.ProgramArray: {"BPF_MAP_TYPE_PROG_ARRAY", "4.2"}, ebpf.PerCPUHash: {"BPF_MAP_TYPE_PERCPU_HASH", "4.6"},
	ebpf.PerCPUArray: {"BPF_MAP_TYPE_PERCPU_ARRAY", "4.6"}, ebpf.LRUHash: {"BPF_MAP_TYPE_LRU_HASH", "4.10"},
	ebpf.LPMTrie: {"BPF_MAP_TYPE_LPM_TRIE", "4.11"}, ebpf.Queue: {"BPF_MAP_TYPE_QUEUE", "4.20"},
	ebpf.RingBuf: {"BPF_MAP_TYPE_RINGBUF", "5.8"}, ebpf.DevMapHash: {"BPF_MAP_TYPE_DEVMAP_HASH", "5.4"},
	// a program in a cpumap entry (priority's bulk CPUs): 5.9
	ebpf.CPUMap: {"BPF_MAP_TYPE_CPUMAP (with programs)", "5.9"},
}

// progTypes names each program type and the Linux version that brought
// it: XDP (the filter), tc (OUTPUT), syscall (the clock probe, clock.c).
var progTypes = map[ebpf.ProgramType]struct{ name, since string }{
	ebpf.XDP: {"XDP", "4.8"}, ebpf.SchedCLS: {"tc", "4.1"}, ebpf.Syscall: {"syscall", "5.14"},
}

// kernelFeatures lists what spec needs: the instruction set (-mcpu=v3),
// programs of up to a million instructions and bounded loops, BTF of the
// kernel (CO-RE relocations), each program type, each helper each program
// calls (read from its instructions) and each map type. kfuncs are
// declared __weak and tested before use: optional.
func kernelFeatures(spec *ebpf.CollectionSpec) []feature {
	fs := []feature{
		{"the v3 instruction set (32-bit jumps)", "5.1", features.HaveV3ISA},
		{"programs of up to 1M instructions", "5.2", features.HaveLargeInstructions},
		{"bounded loops", "5.3", features.HaveBoundedLoops},
		{"kernel BTF (CONFIG_DEBUG_INFO_BTF)", "5.4", func() error {
			_, err := btf.LoadKernelSpec()
			if errors.Is(err, btf.ErrNotFound) {
				return fmt.Errorf("%w: %w", ebpf.ErrNotSupported, err)
			}
			return err
		}},
	}
	type helper struct {
		pt ebpf.ProgramType
		fn asm.BuiltinFunc
	}
	types, helpers := map[ebpf.ProgramType]bool{}, map[helper]bool{}
	for _, p := range spec.Programs {
		types[p.Type] = true
		for _, ins := range p.Instructions {
			if ins.IsBuiltinCall() {
				helpers[helper{p.Type, asm.BuiltinFunc(ins.Constant)}] = true
			}
		}
	}
	for pt := range types {
		fs = append(fs, feature{fmt.Sprintf("%s programs", progTypeName(pt)), progTypes[pt].since,
			func() error { return features.HaveProgramType(pt) }})
	}
	for h := range helpers {
		fs = append(fs, feature{fmt.Sprintf("helper %s in %s programs", helperName(h.fn), progTypeName(h.pt)), helperSince[h.fn],
			func() error { return features.HaveProgramHelper(h.pt, h.fn) }})
	}
	mts := map[ebpf.MapType]bool{}
	for _, m := range spec.Maps {
		if m.Type != ebpf.Array || !strings.HasPrefix(m.Name, ".") { // .rodata and friends: plain arrays
			mts[m.Type] = true
		}
	}
	for mt := range mts {
		name := mapTypes[mt].name
		if name == "" {
			name = mt.String()
		}
		fs = append(fs, feature{name + " maps", mapTypes[mt].since, func() error { return features.HaveMapType(mt) }})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].what < fs[j].what })
	return fs
}

// helperName is a helper's C name: FnXdpLoadBytes is bpf_xdp_load_bytes.
func helperName(fn asm.BuiltinFunc) string {
	s := strings.TrimPrefix(fn.String(), "Fn")
	var b strings.Builder
	b.WriteString("bpf")
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func progTypeName(pt ebpf.ProgramType) string {
	if n := progTypes[pt].name; n != "" {
		return n
	}
	return pt.String()
}

// ErrKernelTooOld is the error of a load on a kernel that lacks something
// the program needs.
var ErrKernelTooOld = errors.New("this kernel lacks what xdpfw needs")

// missingFeatures probes fs and words what is missing: a probe that says
// "not supported" names the feature (and its version); a probe that fails
// otherwise is reported too (whether the feature is there is unknown, and
// the load would fail later in a less clear way). nil: everything is there.
func missingFeatures(fs []feature, release string) error {
	var missing, failed []string
	for _, f := range fs {
		err := f.probe()
		switch {
		case err == nil:
		case errors.Is(err, ebpf.ErrNotSupported):
			if f.since != "" {
				missing = append(missing, fmt.Sprintf("%s (Linux %s)", f.what, f.since))
			} else {
				missing = append(missing, f.what)
			}
		default:
			failed = append(failed, fmt.Sprintf("%s: %v", f.what, err))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: Linux %s has no %s; xdpfw needs Linux %s or newer with BTF", ErrKernelTooOld, release,
			strings.Join(missing, ", no "), MinKernel)
	}
	if len(failed) > 0 {
		return fmt.Errorf("probing the kernel's BPF features failed (xdpfw needs Linux %s or newer with BTF): %s", MinKernel, strings.Join(failed, "; "))
	}
	return nil
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "?"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// CheckKernel reports what this kernel lacks of what the embedded
// programs need (nil: nothing), probed once per process. Load calls it
// first; a caller may call it earlier, before it changes anything else.
func CheckKernel() error { return checkKernel() }

var checkKernel = sync.OnceValue(func() error {
	spec, err := baseSpec()
	if err != nil {
		return fmt.Errorf("loading embedded BPF objects: %w", err)
	}
	return missingFeatures(kernelFeatures(spec), kernelRelease())
})
