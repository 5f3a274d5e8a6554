package datapath

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// TestMissingFeatures: what a probe finds missing is named with the Linux
// version that brought it and the minimum; a probe that fails otherwise
// is reported, not taken as "present".
func TestMissingFeatures(t *testing.T) {
	ok := func() error { return nil }
	no := func() error { return fmt.Errorf("probe: %w", ebpf.ErrNotSupported) }
	broken := func() error { return errors.New("operation not permitted") }
	if err := missingFeatures([]feature{{"a", "4.1", ok}, {"b", "5.8", ok}}, "6.1.0"); err != nil {
		t.Errorf("all present: %v", err)
	}
	err := missingFeatures([]feature{{"XDP programs", "4.8", ok}, {"helper bpf_xdp_load_bytes in XDP programs", "5.18", no},
		{"BPF_MAP_TYPE_RINGBUF maps", "5.8", no}, {"something", "", no}}, "5.15.0-91-generic")
	if !errors.Is(err, ErrKernelTooOld) {
		t.Fatalf("missing: %v", err)
	}
	for _, s := range []string{"Linux 5.15.0-91-generic has no helper bpf_xdp_load_bytes in XDP programs (Linux 5.18)",
		"no BPF_MAP_TYPE_RINGBUF maps (Linux 5.8)", "no something;", "needs Linux " + MinKernel + " or newer"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not say %q: %v", s, err)
		}
	}
	if strings.Contains(err.Error(), "XDP programs (Linux 4.8)") {
		t.Errorf("names a feature that is there: %v", err)
	}
	err = missingFeatures([]feature{{"a", "4.1", ok}, {"bounded loops", "5.3", broken}}, "6.1")
	if err == nil || errors.Is(err, ErrKernelTooOld) || !strings.Contains(err.Error(), "bounded loops: operation not permitted") {
		t.Errorf("failed probe: %v", err)
	}
}

// TestMinKernel: every helper, map type and program type the embedded
// programs use has a known version, the newest of them is MinKernel, and
// bpf_xdp_load_bytes is among them.
func TestMinKernel(t *testing.T) {
	spec, err := baseSpec()
	if err != nil {
		t.Fatal(err)
	}
	newest, found := "0", false
	for _, f := range kernelFeatures(spec) {
		if f.since == "" {
			t.Errorf("%s: no version known (add it to helperSince, mapTypes or progTypes)", f.what)
			continue
		}
		if versionLess(newest, f.since) {
			newest = f.since
		}
		found = found || f.what == "helper bpf_xdp_load_bytes in XDP programs"
	}
	if newest != MinKernel || !found {
		t.Errorf("newest feature is from Linux %s (MinKernel %s); bpf_xdp_load_bytes found: %v", newest, MinKernel, found)
	}
	if got := helperName(asm.FnKtimeGetCoarseNs); got != "bpf_ktime_get_coarse_ns" {
		t.Errorf("helperName: %s", got)
	}
	if err := checkKernel(); err != nil {
		t.Errorf("this kernel: %v", err)
	}
}

func versionLess(a, b string) bool {
	var a1, a2, b1, b2 int
	fmt.Sscanf(a, "%d.%d", &a1, &a2)
	fmt.Sscanf(b, "%d.%d", &b1, &b2)
	return a1 < b1 || a1 == b1 && a2 < b2
}
