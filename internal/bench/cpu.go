package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of /proc/stat (USER_HZ, 100 on every Linux ABI Go
// supports).
const userHZ = 100

// CPUTimes are one CPU's /proc/stat times, in jiffies (1/USER_HZ s).
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Busy is the time a DUT spends: softirq (NAPI polled in softirq) and
// system (NAPI polled in its own kernel thread, as the benchmark sets up),
// plus hard IRQ time.
func (c CPUTimes) Busy() uint64 { return c.System + c.SoftIRQ + c.IRQ }

// Total is every state.
func (c CPUTimes) Total() uint64 {
	return c.User + c.Nice + c.System + c.Idle + c.IOWait + c.IRQ + c.SoftIRQ + c.Steal
}

// Sub is c - o.
func (c CPUTimes) Sub(o CPUTimes) CPUTimes {
	return CPUTimes{c.User - o.User, c.Nice - o.Nice, c.System - o.System, c.Idle - o.Idle,
		c.IOWait - o.IOWait, c.IRQ - o.IRQ, c.SoftIRQ - o.SoftIRQ, c.Steal - o.Steal}
}

// jiffiesNS converts jiffies to nanoseconds.
func jiffiesNS(j uint64) float64 { return float64(j) * 1e9 / userHZ }

// ReadCPUTimes reads every CPU's line of /proc/stat, indexed by CPU number.
func ReadCPUTimes() (map[int]CPUTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[int]CPUTimes{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 9 || !strings.HasPrefix(fs[0], "cpu") || fs[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(fs[0][3:])
		if err != nil {
			continue
		}
		var v [8]uint64
		for i := range v {
			if v[i], err = strconv.ParseUint(fs[i+1], 10, 64); err != nil {
				return nil, fmt.Errorf("/proc/stat: %q: %w", sc.Text(), err)
			}
		}
		out[n] = CPUTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}
	}
	return out, sc.Err()
}

// ThreadRuntime is the CPU time a thread has run, in ns
// (/proc/PID/schedstat, first field).
func ThreadRuntime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, err
	}
	fs := strings.Fields(string(b))
	if len(fs) == 0 {
		return 0, fmt.Errorf("/proc/%d/schedstat: empty", pid)
	}
	return strconv.ParseUint(fs[0], 10, 64)
}

// threadState is the state letter of /proc/PID/stat (R running, S sleeping...).
func threadState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	return b[i+2], nil
}
