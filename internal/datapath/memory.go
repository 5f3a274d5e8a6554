package datapath

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// Bounds of the sizes a load takes (load --max-rules, --ct-max; the
// daemon's max_rules, conntrack.max).
const (
	// MaxEntries bounds Limits.Entries: a one-candidate leaf holds an
	// entry index in 24 bits.
	MaxEntries = compile.MaxLeafSlots
	// MaxConntrack bounds Limits.Conntrack: 16M connections, about 3 GiB
	// preallocated.
	MaxConntrack = 1 << 24
)

// MemoryShare is the largest share of the memory the machine has available
// (MemAvailable in /proc/meminfo) that the maps a load creates may take:
// preallocated maps are taken from the kernel at once, and a load that
// asks for more than the machine has ends in the OOM killer, not in an
// error.
const MemoryShare = 2 // 1/MemoryShare: half

// sizeOptions names the option that sizes each map sized at load.
var sizeOptions = map[string]string{
	"fw_entries": "--max-rules", "fw_cands": "--max-rules", "fw_nodes": "--max-rules", "fw_leaves": "--max-rules", "fw_rule_stats": "--max-rules",
	"fw_ct": "--ct-max", "fw_frag": "--ct-max",
}

// check refuses sizes out of their bounds, naming the option.
func (l Limits) check() error {
	if l.Entries < 0 || l.Entries > MaxEntries {
		return fmt.Errorf("--max-rules %d: want 1 to %d", l.Entries, MaxEntries)
	}
	if l.Conntrack < 0 || l.Conntrack > MaxConntrack {
		return fmt.Errorf("--ct-max %d: want 1 to %d", l.Conntrack, MaxConntrack)
	}
	if l.Nodes < 0 || l.Nodes > MaxEntries || l.LeafSlots < 0 || l.LeafSlots > compile.MaxLeafSlots {
		return fmt.Errorf("table sizes out of range: %d nodes, %d leaf slots", l.Nodes, l.LeafSlots)
	}
	if l.LogSnap < 0 || l.LogSnap > compile.MaxLogSnap {
		return fmt.Errorf("--log-snap %d: want 0 to %d bytes", l.LogSnap, compile.MaxLogSnap)
	}
	return nil
}

// MemoryCost is the kernel memory, in bytes, of each map a load creates.
type MemoryCost map[string]int64

// Total is the sum over the maps.
func (c MemoryCost) Total() int64 {
	var n int64
	for _, b := range c {
		n += b
	}
	return n
}

// Of is what the maps that option sizes take ("": the fixed-size maps).
func (c MemoryCost) Of(option string) int64 {
	var n int64
	for name, b := range c {
		if sizeOptions[name] == option {
			n += b
		}
	}
	return n
}

// baseSpec is the embedded collection, parsed once; callers copy it.
var baseSpec = sync.OnceValues(loadXdpfw)

// Cost is the kernel memory the maps of a load with lim take, every one
// of them (as a first load creates them): the one place the cost of a size
// is computed, from the maps' real key and value sizes and entry counts.
func (l Limits) Cost() (MemoryCost, error) {
	spec, err := baseSpec()
	if err != nil {
		return nil, fmt.Errorf("loading embedded BPF objects: %w", err)
	}
	spec = spec.Copy()
	if _, err := sizeSpec(spec, l); err != nil {
		return nil, err
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("counting the possible CPUs: %w", err)
	}
	return specCost(spec, "", cpus), nil
}

// Bytes is the kernel memory the maps of a load with lim take (Cost's
// total; 0 if the embedded objects cannot be read).
func (l Limits) Bytes() int64 {
	c, err := l.Cost()
	if err != nil {
		return 0
	}
	return c.Total()
}

// specCost is the kernel memory of the maps of spec that a load into pin
// directory dir creates: maps pinned there already are reused, not
// created ("" counts every map). Per-CPU values are counted once per
// possible CPU (cpus). The figures follow the kernel's allocations
// (kernel/bpf/arraymap.c, hashtab.c, ringbuf.c) closely enough to judge
// whether a size fits the machine: arrays of values rounded up to 8 bytes;
// preallocated hash tables of elements with a 48-byte header, the key and
// the value, plus a bucket (16 bytes) per power-of-two slot; maps that are
// not preallocated (BPF_F_NO_PREALLOC, LPM tries) take memory as entries
// are added, not at load, and count 0 here.
func specCost(spec *ebpf.CollectionSpec, dir string, cpus int) MemoryCost {
	const htabElem, bucket = 48, 16
	c := MemoryCost{}
	for name, m := range spec.Maps {
		if dir != "" && m.Pinning == ebpf.PinByName {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				continue
			}
		}
		n, key, val := int64(m.MaxEntries), round8(m.KeySize), round8(m.ValueSize)
		prealloc := m.Flags&noPrealloc == 0
		var b int64
		switch m.Type {
		case ebpf.Array:
			b = n * val
		case ebpf.PerCPUArray:
			b = n * (val*int64(cpus) + 8)
		case ebpf.Hash, ebpf.LRUHash:
			if prealloc {
				b = (n+int64(cpus))*(htabElem+key+val) + pow2(n)*bucket
			}
		case ebpf.PerCPUHash, ebpf.LRUCPUHash:
			if prealloc {
				b = (n+int64(cpus))*(htabElem+key+8) + n*val*int64(cpus) + pow2(n)*bucket
			}
		case ebpf.RingBuf:
			b = n
		case ebpf.ProgramArray:
			b = n * 8
		}
		c[name] = b
	}
	return c
}

// noPrealloc is BPF_F_NO_PREALLOC.
const noPrealloc = 1

func round8(n uint32) int64 { return (int64(n) + 7) &^ 7 }

// pow2 is the smallest power of two >= n.
func pow2(n int64) int64 {
	p := int64(1)
	for p < n {
		p <<= 1
	}
	return p
}

// memAvailable reads MemAvailable from /proc/meminfo, in bytes (a variable
// so tests can pretend a smaller machine).
var memAvailable = func() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: MemAvailable %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable")
}

// ErrTooBig is the error of a load whose maps would not fit the machine.
var ErrTooBig = errors.New("the tables do not fit this machine's memory")

// checkMemory refuses a load whose new maps (cost) would take more than
// 1/MemoryShare of avail bytes, naming the options that size them and
// what each costs.
func checkMemory(cost MemoryCost, lim Limits, avail int64) error {
	total := cost.Total()
	if total <= avail/MemoryShare {
		return nil
	}
	var parts []string
	for opt, val := range map[string]int{"--max-rules": lim.Entries, "--ct-max": lim.Conntrack} {
		if b := cost.Of(opt); b > 0 {
			parts = append(parts, fmt.Sprintf("%s %d: %s", opt, val, FormatBytes(b)))
		}
	}
	sort.Strings(parts)
	if b := cost.Of(""); b > 0 {
		parts = append(parts, "fixed-size maps: "+FormatBytes(b))
	}
	return fmt.Errorf("%w: the maps would take %s of kernel memory (%s), more than 1/%d of the %s available (MemAvailable); "+
		"give smaller sizes", ErrTooBig, FormatBytes(total), strings.Join(parts, ", "), MemoryShare, FormatBytes(avail))
}

// FormatBytes writes n in B, KiB, MiB or GiB.
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// TableBytes is the kernel memory that one generation of tables of
// entries entries, nodes fat nodes and leafSlots leaf slots occupies in
// this data plane's maps (the maps are sized for two generations of the
// loaded limits; this is what a rule set uses of them).
func (d *Datapath) TableBytes(entries, nodes, leafSlots int) int64 {
	ent := round8(d.entries.ValueSize())
	if d.cands != nil {
		ent += round8(d.cands.ValueSize())
	}
	return int64(entries)*ent + int64(nodes)*round8(d.nodes.ValueSize()) +
		int64(leafSlots)*round8(d.leaves.ValueSize())
}

// LargestFitting is the largest --max-rules, a power of two from
// compile.DefaultMaxEntries up to MaxEntries, whose maps Load's memory
// check would let a first load create on this machine now (at most
// 1/MemoryShare of the memory available), with conntrack sized ct (0:
// the default). It is compile.DefaultMaxEntries when even that does not
// fit: Load then says why.
func LargestFitting(ct int) (int, error) {
	avail, err := memAvailable()
	if err != nil {
		return 0, fmt.Errorf("reading the memory available: %w", err)
	}
	best := compile.DefaultMaxEntries
	for m := best * 2; m <= MaxEntries; m *= 2 {
		lim := LimitsFor(m)
		if ct > 0 {
			lim.Conntrack = ct
		}
		c, err := lim.Cost()
		if err != nil {
			return 0, err
		}
		if c.Total() > avail/MemoryShare {
			break
		}
		best = m
	}
	return best, nil
}
