package datapath_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/datapath"
)

// TestFwdReasonMirrorsHeader: datapath.FwdReason is enum fw_fwd_reason of
// bpf/types.h, member for member (the names: FW_FWD_NO_NEIGH is
// "no-neighbour" and so on, checked by their order).
func TestFwdReasonMirrorsHeader(t *testing.T) {
	h, err := os.ReadFile("../../bpf/types.h")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)enum fw_fwd_reason \{(.*?)\};`).FindSubmatch(h)
	if body == nil {
		t.Fatal("enum fw_fwd_reason not found in bpf/types.h")
	}
	members := regexp.MustCompile(`(?m)^\s*(FW_[A-Z_]+)\s*(?:=\s*\d+)?,`).FindAllSubmatch(body[1], -1)
	want := map[string]string{"FW_FWD_XDP": "xdp", "FW_FWD_STACK": "stack", "FW_FWD_NO_NEIGH": "no-neighbour",
		"FW_FWD_TTL": "ttl", "FW_FWD_MTU": "mtu", "FW_FWD_IP_OPTIONS": "ip-options", "FW_FWD_NOT_ATTACHED": "not-attached",
		"FW_FWD_VLAN": "vlan", "FW_FWD_UNROUTED": "unrouted", "FW_FWD_FRAG": "fragment", "FW_FWD_NOT_HOST": "not-for-host",
		"FW_FWD_MARTIAN": "martian", "FW_FWD_HAIRPIN": "hairpin", "FW_FWD_TRIM": "trim",
		"FW_FWD_KERNEL_NAT": "kernel-nat", "FW_FWD_KERNEL_CT": "kernel-ct", "FW_FWD_PPPOE": "pppoe"}
	if len(members) != int(datapath.NumFwdReasons)+1 || string(members[len(members)-1][1]) != "FW_NUM_FWD" {
		t.Fatalf("enum fw_fwd_reason has %d members, Go mirrors %d and FW_NUM_FWD", len(members), datapath.NumFwdReasons)
	}
	for i, m := range members[:len(members)-1] {
		name := string(m[1])
		if got := datapath.FwdReason(i).String(); want[name] != got {
			t.Errorf("enum fw_fwd_reason member %d %s: Go names it %q, want %q", i, name, got, want[name])
		}
	}
	if !strings.Contains(datapath.FwdReason(200).String(), "200") {
		t.Errorf("an unknown reason prints as %q", datapath.FwdReason(200))
	}
}

// TestParseForwardMode: the --forward values, and a clear refusal.
func TestParseForwardMode(t *testing.T) {
	for _, s := range []string{"xdp", "xdp-veth", "stack"} {
		if m, err := datapath.ParseForwardMode(s); err != nil || string(m) != s {
			t.Errorf("ParseForwardMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := datapath.ParseForwardMode("fast"); err == nil || !strings.Contains(err.Error(), "want xdp") {
		t.Errorf("ParseForwardMode(fast): %v", err)
	}
}

// TestUpgradeForwardConfig: the settings map of an earlier version (no
// forward_stack) and no fast-path maps: commands work on them (the
// program in force has no fast path: the kernel forwards), and a load
// puts a settings map of the new layout in place.
func TestUpgradeForwardConfig(t *testing.T) {
	dir := pinnedFresh(t)
	pin := filepath.Join(dir, "fw_config_map")
	cur, err := ebpf.LoadPinnedMap(pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	size := cur.ValueSize()
	cur.Close()
	old, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: size - 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	for _, name := range []string{"fw_fwd_ports", "fw_fwd_stats"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	repin(t, dir, "fw_config_map", old)

	od, err := datapath.Open(dir)
	if err != nil {
		t.Fatalf("open an earlier version's pins: %v", err)
	}
	if err := od.SetConfig(datapath.Config{RejectRate: 7, Forward: datapath.ForwardXDP}); err != nil {
		t.Errorf("settings into an earlier version's map: %v", err)
	}
	if c, err := od.ConfigInForce(); err != nil || c.RejectRate != 7 || c.Forward != datapath.ForwardStack {
		t.Errorf("settings of an earlier version's program: %+v %v, want reject rate 7, forwarding by the kernel", c, err)
	}
	if _, err := od.ForwardCounters(); !errors.Is(err, datapath.ErrNoFastPath) {
		t.Errorf("forwarding counters of an earlier version's program: %v", err)
	}
	od.Close()

	dp, err := datapath.Load(dir, datapath.Limits{})
	if err != nil {
		t.Fatalf("load over an earlier version's settings map: %v", err)
	}
	if err := dp.SetConfig(datapath.Config{Forward: datapath.ForwardStack}); err != nil {
		t.Fatal(err)
	}
	if err := dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	dp.Close()
	od, err = datapath.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer od.Close()
	if c, err := od.ConfigInForce(); err != nil || c.Forward != datapath.ForwardStack {
		t.Errorf("settings after the load: %+v %v, want forwarding by the kernel (as set)", c, err)
	}
	if _, err := od.ForwardCounters(); err != nil {
		t.Errorf("forwarding counters after the load: %v", err)
	}
	m, err := ebpf.LoadPinnedMap(pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.ValueSize() != size {
		t.Errorf("settings map after the load: %d-byte values, want %d", m.ValueSize(), size)
	}
}

// TestFastPathDevices: every device when all run in generic mode; else
// the native ones (veth devices only with xdp-veth); none with stack.
func TestFastPathDevices(t *testing.T) {
	const gone = 1 << 30 // no such device: not known to be anything but a veth
	for _, c := range []struct {
		mode datapath.ForwardMode
		devs map[int]datapath.Mode
		want []int
	}{
		{datapath.ForwardXDPVeth, map[int]datapath.Mode{3: datapath.ModeGeneric, 4: datapath.ModeGeneric}, []int{3, 4}},
		{datapath.ForwardXDP, map[int]datapath.Mode{gone: datapath.ModeGeneric, 4: datapath.ModeGeneric}, []int{4, gone}},
		{datapath.ForwardXDPVeth, map[int]datapath.Mode{3: datapath.ModeGeneric, 4: datapath.ModeNative, 5: datapath.ModeNative}, []int{4, 5}},
		{datapath.ForwardXDP, map[int]datapath.Mode{gone: datapath.ModeNative}, nil},
		{datapath.ForwardXDPVeth, map[int]datapath.Mode{4: ""}, nil}, // not attached yet
		{datapath.ForwardStack, map[int]datapath.Mode{3: datapath.ModeGeneric, 4: datapath.ModeGeneric}, nil},
	} {
		if got := datapath.FastPathDevices(c.mode, c.devs); !slices.Equal(got, c.want) {
			t.Errorf("FastPathDevices(%s, %v) = %v, want %v", c.mode, c.devs, got, c.want)
		}
	}
}
