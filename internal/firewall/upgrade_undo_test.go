package firewall

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/datapath"
)

// TestUpgradeUndone: a load that makes maps anew (another --ct-max) and
// fails after it switched the interfaces filtered before to its program
// (here: pinning its new fw_ct, whose temporary pin is taken) puts them
// back on the program pinned, whose maps are the pinned ones: left on the
// new program, they filtered with maps nothing else reads (list, status
// and the next apply read and write the pinned ones). A --priority-cpus
// that names a CPU not online is refused before anything changes.
func TestUpgradeUndone(t *testing.T) {
	e := newEnv(t)
	const text = "-A INPUT -p tcp --dport 22 -j ACCEPT\n"
	load := func(opt Options) error {
		return e.ns.Do(func() error {
			_, err := Load(e.p, []string{"fw0"}, datapath.ModeGeneric, e.parse(text), opt)
			return err
		})
	}
	if err := load(Options{CTMax: 1024}); err != nil {
		t.Fatal(err)
	}
	runsPinned := func(what string) {
		t.Helper()
		pinned, err := ebpf.LoadPinnedProgram(filepath.Join(e.p.PinDir, "prog_xdpfw_ingress"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pinned.Close()
		info, err := pinned.Info()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := info.ID()
		var running []datapath.Running
		if err := e.ns.Do(func() (err error) { running, err = datapath.Discover(e.p.PinDir); return err }); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range running {
			if r.Interface == "fw0" && r.Hook == "xdp" {
				found = true
				if r.ProgramID != uint32(want) {
					t.Errorf("%s: fw0 runs program %d, want the pinned one, %d", what, r.ProgramID, want)
				}
			}
		}
		if !found {
			t.Fatalf("%s: fw0 runs no xdpfw program: %+v", what, running)
		}
		f := e.open()
		defer f.Close()
		if got := f.dp.Limits().Conntrack; got != 1024 {
			t.Errorf("%s: conntrack table pinned: %d, want 1024", what, got)
		}
	}

	err := load(Options{CTMax: 2048, PriorityCPUs: "63"})
	if err == nil || !strings.Contains(err.Error(), "not online") {
		t.Fatalf("load with --ct-max 2048 --priority-cpus 63: %v, want refused (CPU 63 not online)", err)
	}
	runsPinned("after --priority-cpus 63 refused")

	// fw_ct's temporary pin taken (a directory that is not empty): the
	// commit fails at its first map, after the switch
	block := filepath.Join(e.p.PinDir, "fw_ct_new")
	if err := os.Mkdir(block, 0o700); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Pin(filepath.Join(block, "x")); err != nil {
		t.Fatal(err)
	}
	err = load(Options{CTMax: 2048})
	_ = os.Remove(filepath.Join(block, "x"))
	_ = os.Remove(block)
	if err == nil || !strings.Contains(err.Error(), "fw_ct") {
		t.Fatalf("load with --ct-max 2048, fw_ct_new taken: %v, want failed pinning fw_ct", err)
	}
	runsPinned("after the failed commit")
}

// TestUpgradeInterrupted: a load that makes maps anew (another --ct-max)
// killed after it switched the interfaces to its program, before it
// pinned its maps: the interfaces run a program whose maps are pinned
// nowhere, and a change (apply) would write the old pinned ones, which no
// packet reads. Changes are refused, naming the cause; the daemon's
// reconcile loads again, which ends it.
func TestUpgradeInterrupted(t *testing.T) {
	e := newEnv(t)
	const text = "-A INPUT -p tcp --dport 22 -j ACCEPT\n"
	if err := e.ns.Do(func() error {
		_, err := Load(e.p, []string{"fw0"}, datapath.ModeGeneric, e.parse(text), Options{CTMax: 1024})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !e.child("loadct 2048 -A INPUT -p tcp --dport 22 -j ACCEPT", "load-switched") {
		t.Fatal("the load was not killed at load-switched")
	}
	if f, err := Open(e.p); err == nil {
		f.Close()
		t.Fatal("a change after the interrupted load: opened, want refused (its writes would reach no packet)")
	} else if !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("a change after the interrupted load: %v, want the reason", err)
	}
	d := e.desired(text, "fw0")
	d.Options.CTMax = 2048
	ch, err := e.reconcile(d)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Loaded || !slices.ContainsFunc(ch.Why, func(w string) bool { return strings.Contains(w, "interrupted") }) {
		t.Errorf("reconcile after the interrupted load: %+v, want a load for it", ch)
	}
	f := e.open()
	defer f.Close()
	if got := f.dp.Limits().Conntrack; got != 2048 {
		t.Errorf("conntrack table after the load: %d, want 2048", got)
	}
}
