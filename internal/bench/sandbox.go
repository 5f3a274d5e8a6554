package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// sandbox locks the calling goroutine to its OS thread, moves that thread
// into a new network namespace (so the FIB answers the same for every
// measurement) and mounts a private bpffs on a temporary directory, dir.
// undo reverses all of it; call it on the same goroutine.
func sandbox(prefix string) (dir string, undo func(), err error) {
	runtime.LockOSThread()
	var steps []func()
	undo = func() {
		for i := len(steps) - 1; i >= 0; i-- {
			steps[i]()
		}
		runtime.UnlockOSThread()
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	orig, err := netns.Get()
	if err != nil {
		return "", nil, err
	}
	steps = append(steps, func() { orig.Close() })
	ns, err := netns.New() // also enters it, on this thread
	if err != nil {
		return "", nil, fmt.Errorf("creating a network namespace: %w", err)
	}
	steps = append(steps, func() { netns.Set(orig); ns.Close() })
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", nil, err
	}
	steps = append(steps, func() { os.RemoveAll(dir) })
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		return "", nil, fmt.Errorf("mounting a private bpffs: %w", err)
	}
	steps = append(steps, func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir, undo, nil
}

// compiled is a benchmark rule set ready to install.
type compiled struct {
	tables    *compile.Tables
	rs        *rules.RuleSet
	ids       []uint32 // rule i's counter id
	lim       datapath.Limits
	compileMS float64
}

// maxBenchRules bounds the --max-rules a benchmark tries: 2^20 entries,
// about 1 GiB of kernel memory for both generations.
const maxBenchRules = 1 << 20

// compileText parses a benchmark's rule text (n rules) and compiles it
// for tables sized to hold it, with ids FirstRuleID+i.
func compileText(text string, n int, opt rules.ParseOptions) (*compiled, error) {
	return compileFor(text, n, opt, nil)
}

// compileFor is compileText for a data plane attached to ifaces (name:
// ifindex), which -i and -o rules name.
func compileFor(text string, n int, opt rules.ParseOptions, ifaces map[string]uint32) (*compiled, error) {
	rs, err := rules.Parse("bench", []byte(text), opt)
	if err != nil {
		return nil, err
	}
	c := &compiled{ids: make([]uint32, len(rs.Rules)), rs: rs}
	for i := range c.ids {
		c.ids[i] = uint32(compile.FirstRuleID + i)
	}
	// Overlapping rule sets may need more than n entries, nodes or leaf
	// slots: the smallest --max-rules (doubling from the default, up to
	// maxBenchRules) that holds them is the one used, and reported.
	for m := max(n, compile.DefaultMaxEntries); ; m *= 2 {
		c.lim = datapath.LimitsFor(m)
		t0 := time.Now()
		c.tables, _, err = compile.Compile(compile.Input{RuleSet: rs, IDs: c.ids, Ifaces: ifaces,
			MaxEntries: c.lim.Entries, MaxNodes: c.lim.Nodes, MaxLeafSlots: c.lim.LeafSlots})
		c.compileMS = msSince(t0)
		if err == nil {
			return c, nil
		}
		if m*2 > maxBenchRules {
			return nil, fmt.Errorf("compiling %d rules (--max-rules %d): %w", n, m, err)
		}
	}
}

// sayer prints progress lines to w (nil: nowhere).
func sayer(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", a...)
		}
	}
}
