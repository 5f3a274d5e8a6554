package datapath

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestMemoryCost: the cost follows the maps' real sizes: each size option
// costs what its maps' entries take, per-CPU maps once per CPU, and the
// whole is the sum.
func TestMemoryCost(t *testing.T) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	small, err := LimitsFor(0).Cost()
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitsFor(1 << 20)
	big, err := lim.Cost()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := loadXdpfw()
	if err != nil {
		t.Fatal(err)
	}
	// The kernel rounds array values up to 8 bytes (a leaf slot, 4 bytes,
	// takes 8); per-CPU arrays add a pointer per entry.
	entry, node := round8(spec.Maps["fw_entries"].ValueSize)+round8(spec.Maps["fw_cands"].ValueSize), round8(spec.Maps["fw_nodes"].ValueSize)
	counter := round8(spec.Maps["fw_rule_stats"].ValueSize)
	want := 2*int64(lim.Entries)*entry + 2*int64(lim.Nodes)*node + 2*int64(lim.LeafSlots)*8 + int64(lim.RuleIDs)*(counter*int64(cpus)+8)
	if got := big.Of("--max-rules"); got != want {
		t.Errorf("--max-rules 1M costs %d bytes, want %d", got, want)
	}
	if big.Of("--ct-max") != small.Of("--ct-max") || big.Of("") != small.Of("") || big.Of("--ct-max") <= 0 {
		t.Errorf("--max-rules changed the cost of other maps: %v vs %v", big, small)
	}
	if big.Total() != big.Of("--max-rules")+big.Of("--ct-max")+big.Of("") {
		t.Errorf("total %d is not the sum of its parts", big.Total())
	}
	ct := LimitsFor(0)
	ct.Conntrack *= 4
	c4, err := ct.Cost()
	if err != nil {
		t.Fatal(err)
	}
	if c4.Of("--ct-max") < 4*small.Of("--ct-max")-small.Of("--ct-max")/2 {
		t.Errorf("4x --ct-max costs %d, 1x %d", c4.Of("--ct-max"), small.Of("--ct-max"))
	}
}

// TestCheckMemory: sizes over half the memory available are refused, the
// error naming each option and what it costs.
func TestCheckMemory(t *testing.T) {
	lim := LimitsFor(compile.MaxLeafSlots)
	cost, err := lim.Cost()
	if err != nil {
		t.Fatal(err)
	}
	err = checkMemory(cost, lim, 4<<30)
	if !errors.Is(err, ErrTooBig) {
		t.Fatalf("%s for 4 GiB available: %v", FormatBytes(cost.Total()), err)
	}
	for _, s := range []string{"--max-rules 16777216: 14.", "--ct-max 65536: 11.", "GiB of kernel memory", "4.0 GiB available"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not say %q: %v", s, err)
		}
	}
	if err := checkMemory(cost, lim, 2*cost.Total()); err != nil {
		t.Errorf("twice the cost available: %v", err)
	}
	if _, err := LimitsFor(MaxEntries + 1).Cost(); err == nil || !strings.Contains(err.Error(), "--max-rules") {
		t.Errorf("--max-rules over the bound: %v", err)
	}
}

// TestLoadRefusesTooBig: a load whose maps do not fit the memory available
// fails before it creates anything (here, on a machine pretended to have
// 96 MiB available; nothing big is allocated). The default sizes take
// about 35 MiB (fw_entry is 312 bytes since issue 15's matches and probes).
func TestLoadRefusesTooBig(t *testing.T) {
	testutil.RequireRoot(t)
	pins := testutil.BPFFS(t) + "/xdpfw"
	old := memAvailable
	memAvailable = func() (int64, error) { return 96 << 20, nil }
	t.Cleanup(func() { memAvailable = old })
	d, err := Load(pins, LimitsFor(1<<20))
	if err == nil {
		d.Close()
		_ = Unpin(pins)
		t.Fatal("loaded")
	}
	if !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), "--max-rules 1048576") {
		t.Fatalf("error: %v", err)
	}
	if ents, _ := os.ReadDir(pins); len(ents) != 0 {
		t.Errorf("pinned %d objects", len(ents))
	}
	// The default sizes fit.
	if d, err = Load(pins, LimitsFor(0)); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := Unpin(pins); err != nil {
		t.Error(err)
	}
}
