package datapath

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// Priority (bpf/lib/priority.h, docs/realtime.md "Priority"): packets the
// xdpfw-priority table puts in the bulk class are handed through fw_cpumap
// to the bulk CPUs, where xdpfw_cpumap judges them.

// PriorityQueue is the length of each bulk CPU's queue (fw_cpumap's
// qsize): the bulk packets one CPU holds before it drops more.
const PriorityQueue = 2048

// MaxPriorityCPUs is how many bulk CPUs fw_prio holds (FW_PRIO_MAX_CPUS),
// and the highest CPU number + 1 fw_cpumap takes.
const MaxPriorityCPUs = 64

// ParseCPUList parses a CPU list as the kernel writes one ("1", "1-3",
// "0,2-3"), sorted, without repeats. "" and "none" are no CPUs.
func ParseCPUList(s string) ([]int, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("CPU list %q: %q is not a CPU or a range N-M", s, part)
		}
		if b >= MaxPriorityCPUs {
			return nil, fmt.Errorf("CPU list %q: CPU %d: xdpfw hands bulk packets to CPUs 0-%d", s, b, MaxPriorityCPUs-1)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatCPUList writes cpus as ParseCPUList reads them ("none" for none).
func FormatCPUList(cpus []int) string {
	if len(cpus) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// OnlineCPUs are the CPUs the kernel runs (/sys/devices/system/cpu/online).
func OnlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("reading the online CPUs: %w", err)
	}
	return ParseCPUList(strings.TrimSpace(string(b)))
}

// PriorityCPUs resolves a --priority-cpus value: "" or "auto" is every
// online CPU where there are two or more (a single CPU has nowhere to hand
// bulk to: none, every packet judged where it arrives), "none" none, else
// the list, each of which must be online.
func PriorityCPUs(s string) ([]int, error) {
	online, err := OnlineCPUs()
	if err != nil {
		return nil, err
	}
	if s == "" || s == "auto" {
		if len(online) < 2 || runtime.NumCPU() < 2 {
			return nil, nil
		}
		return slices.DeleteFunc(online, func(c int) bool { return c >= MaxPriorityCPUs }), nil
	}
	cpus, err := ParseCPUList(s)
	if err != nil {
		return nil, err
	}
	for _, c := range cpus {
		if !slices.Contains(online, c) {
			return nil, fmt.Errorf("--priority-cpus %s: CPU %d is not online (online: %s)", s, c, FormatCPUList(online))
		}
	}
	return cpus, nil
}

// SetPriority makes cpus the bulk CPUs (none: priority off, every packet
// judged where it arrives, whatever the priority table says). Each gets a
// fw_cpumap entry running xdpfw_cpumap, before fw_prio names it; CPUs no
// longer named lose theirs after (their queues drain first: the kernel
// stops an entry's thread once its queue is empty).
func (d *Datapath) SetPriority(cpus []int) error {
	if d.prioCfg == nil || d.cpumap == nil {
		if len(cpus) == 0 {
			return nil
		}
		return errors.New("the program in force has no priority steering (loaded by an earlier version): load again")
	}
	if len(cpus) > MaxPriorityCPUs {
		return fmt.Errorf("%d bulk CPUs: xdpfw holds %d", len(cpus), MaxPriorityCPUs)
	}
	old, err := d.PriorityInForce()
	if err != nil {
		return err
	}
	if len(cpus) > 0 && d.cpumapProg == nil {
		return errors.New("the bulk CPUs' program is not pinned (loaded by an earlier version): load again")
	}
	for _, c := range cpus {
		if c < 0 || c >= MaxPriorityCPUs {
			return fmt.Errorf("CPU %d: xdpfw hands bulk packets to CPUs 0-%d", c, MaxPriorityCPUs-1)
		}
		val := [2]uint32{PriorityQueue, uint32(d.cpumapProg.FD())} // struct bpf_cpumap_val: qsize, bpf_prog.fd
		if err := d.cpumap.Put(uint32(c), val); err != nil {
			return fmt.Errorf("handing bulk packets to CPU %d (fw_cpumap): %w", c, err)
		}
	}
	var cfg xdpfwFwPrioCfg
	cfg.Ncpus = uint32(len(cpus))
	for i, c := range cpus {
		cfg.Cpus[i] = uint32(c)
	}
	if err := d.prioCfg.Put(uint32(0), &cfg); err != nil {
		return fmt.Errorf("writing the bulk CPUs (fw_prio): %w", err)
	}
	if err := graceperiod(); err != nil { // no packet reads the old list now
		return err
	}
	for _, c := range old {
		if !slices.Contains(cpus, c) {
			if err := d.cpumap.Delete(uint32(c)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("removing CPU %d from fw_cpumap: %w", c, err)
			}
		}
	}
	return nil
}

// PriorityInForce are the bulk CPUs in force (none: priority off).
func (d *Datapath) PriorityInForce() ([]int, error) {
	if d.prioCfg == nil {
		return nil, nil
	}
	var cfg xdpfwFwPrioCfg
	if err := d.prioCfg.Lookup(uint32(0), &cfg); err != nil {
		return nil, fmt.Errorf("reading fw_prio: %w", err)
	}
	n := min(int(cfg.Ncpus), MaxPriorityCPUs)
	out := make([]int, n)
	for i := range n {
		out[i] = int(cfg.Cpus[i])
	}
	return out, nil
}

// PriorityStats are what the priority stage did, per CPU (index: CPU).
type PriorityStats struct {
	High     []uint64 `json:"high"`     // judged at once where they arrived
	Bulk     []uint64 `json:"bulk"`     // handed to a bulk CPU
	Fallback []uint64 `json:"fallback"` // bulk, judged where they arrived (the hand-over failed)
	Cpumap   []uint64 `json:"cpumap"`   // judged on this CPU by xdpfw_cpumap
}

// Sum is each counter over all CPUs: high, bulk, fallback, cpumap.
func (s PriorityStats) Sum() (high, bulk, fallback, cpumap uint64) {
	sum := func(v []uint64) (t uint64) {
		for _, x := range v {
			t += x
		}
		return t
	}
	return sum(s.High), sum(s.Bulk), sum(s.Fallback), sum(s.Cpumap)
}

// PriorityCounters reads fw_prio_stats (zero from an earlier version's
// pins, which have none).
func (d *Datapath) PriorityCounters() (PriorityStats, error) {
	var s PriorityStats
	if d.prioStats == nil {
		return s, nil
	}
	for i, dst := range []*[]uint64{&s.High, &s.Bulk, &s.Fallback, &s.Cpumap} {
		var per []uint64
		if err := d.prioStats.Lookup(uint32(i), &per); err != nil {
			return s, fmt.Errorf("reading fw_prio_stats: %w", err)
		}
		*dst = per
	}
	return s, nil
}
