// Package datapath loads the XDP program (bpf2go objects), pins it and its
// maps under a bpffs directory so the firewall outlives the CLI, attaches it
// to interfaces, installs compiled rule-set generations with one atomic map
// swap, and reads counters back.
package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// DefaultPinDir is where programs, maps and links are pinned.
const DefaultPinDir = "/sys/fs/bpf/xdpfw"

const progPin = "prog_xdpfw_ingress"

// Datapath is a handle on the pinned data plane.
type Datapath struct {
	dir     string
	prog    *ebpf.Program
	ruleset *ebpf.Map // fw_ruleset: ARRAY_OF_MAPS, slot 0 = active generation
	inner   *ebpf.MapSpec
	ruleCtr *ebpf.Map
	reasons *ebpf.Map
	config  *ebpf.Map
}

// Load loads the embedded program, reusing maps already pinned in dir (so
// counters and the installed generation survive an upgrade of the program),
// and pins any new maps. The program is not pinned until PinProgram, so a
// load that fails midway leaves the pinned program in place. It attaches
// nothing.
func Load(dir string) (*Datapath, error) {
	if err := ensureBPFFS(dir); err != nil {
		return nil, err
	}
	spec, err := loadXdpfw()
	if err != nil {
		return nil, fmt.Errorf("loading embedded BPF objects: %w", err)
	}
	var objs xdpfwObjects
	opts := &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}}
	if err := spec.LoadAndAssign(&objs, opts); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel's verifier rejected the xdpfw program: %+v", ve)
		}
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("maps pinned in %s come from an incompatible xdpfw version; "+
				"run `xdpfw detach --all` first: %w", dir, err)
		}
		return nil, fmt.Errorf("loading the xdpfw program: %w", err)
	}
	return &Datapath{
		dir:     dir,
		prog:    objs.XdpfwIngress,
		ruleset: objs.FwRuleset,
		inner:   spec.Maps["fw_ruleset"].InnerMap.Copy(),
		ruleCtr: objs.FwRuleStats,
		reasons: objs.FwReasonStats,
		config:  objs.FwConfigMap,
	}, nil
}

// PinProgram makes this program the pinned one (the one status reports and
// trace runs), replacing the previous pin atomically (rename on bpffs).
func (d *Datapath) PinProgram() error {
	pin := filepath.Join(d.dir, progPin)
	tmp := pin + "_new" // bpffs refuses dots in names
	_ = os.Remove(tmp)
	if err := d.prog.Pin(tmp); err != nil {
		return fmt.Errorf("pinning the program at %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, pin); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("replacing the pinned program: %w", err)
	}
	return nil
}

// ErrNotLoaded means nothing is pinned: the firewall is not loaded.
var ErrNotLoaded = errors.New("xdpfw is not loaded (nothing pinned); run `xdpfw load` first")

// Open opens the pinned program and maps without loading anything new.
func Open(dir string) (*Datapath, error) {
	prog, err := ebpf.LoadPinnedProgram(filepath.Join(dir, progPin), nil)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNotLoaded
		}
		return nil, fmt.Errorf("opening the pinned program: %w", err)
	}
	d := &Datapath{dir: dir, prog: prog}
	spec, err := loadXdpfw()
	if err != nil {
		d.Close()
		return nil, err
	}
	d.inner = spec.Maps["fw_ruleset"].InnerMap.Copy()
	for name, dst := range map[string]**ebpf.Map{
		"fw_ruleset": &d.ruleset, "fw_rule_stats": &d.ruleCtr,
		"fw_reason_stats": &d.reasons, "fw_config_map": &d.config,
	} {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("opening pinned map %s: %w", name, err)
		}
		*dst = m
	}
	return d, nil
}

// Dir is the pin directory.
func (d *Datapath) Dir() string { return d.dir }

// Program is the loaded XDP program.
func (d *Datapath) Program() *ebpf.Program { return d.prog }

// Close releases the file descriptors; pinned objects stay.
func (d *Datapath) Close() {
	for _, m := range []*ebpf.Map{d.ruleset, d.ruleCtr, d.reasons, d.config} {
		if m != nil {
			m.Close()
		}
	}
	if d.prog != nil {
		d.prog.Close()
	}
}

// Unpin removes every pin in dir (program, maps, links) and the directory.
// Removing a link's pin detaches it once no process holds it.
func Unpin(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ensureBPFFS makes sure dir exists on a bpf filesystem, mounting
// /sys/fs/bpf when the default location is used and nothing is mounted.
func ensureBPFFS(dir string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", parent, err)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		if parent != "/sys/fs/bpf" {
			return fmt.Errorf("%s is not on a bpf filesystem (mount -t bpf bpf %s)", dir, parent)
		}
		// A bpffs mounted in a private mount namespace (as under
		// `ip netns exec`, which remounts /sys) vanishes with the process,
		// and the firewall with it: refuse rather than fail open later.
		self, _ := os.Readlink("/proc/self/ns/mnt")
		init, _ := os.Readlink("/proc/1/ns/mnt")
		if self != init {
			return fmt.Errorf("no bpffs at /sys/fs/bpf in this mount namespace (ip netns exec remounts /sys); " +
				"pins made here would vanish with this process: use --pin-dir on a bpffs mounted outside /sys")
		}
		if err := unix.Mount("bpf", parent, "bpf", 0, "mode=0700"); err != nil {
			return fmt.Errorf("mounting bpffs at %s: %w", parent, err)
		}
	}
	return os.MkdirAll(dir, 0o700)
}
