package datapath_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/xdpfw/xdpfw/internal/datapath"
)

// TestPinnedLayoutChecked: a pinned map of this program's type and sizes
// whose value an earlier version laid out otherwise (here: fw_config_map
// holding one byte array, not struct fw_config's fields) is not reused
// by a load, which fails, naming the map, before it creates anything;
// the map as this program lays it out is reused as before.
func TestPinnedLayoutChecked(t *testing.T) {
	dir := pinnedFresh(t)
	const name = "fw_config_map"
	cur, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cur.Info()
	if err != nil {
		t.Fatal(err)
	}
	vs := cur.ValueSize()
	cur.Close()
	u8 := &btf.Int{Name: "unsigned char", Size: 1}
	other, err := ebpf.NewMap(&ebpf.MapSpec{
		Type: info.Type, KeySize: info.KeySize, ValueSize: vs, MaxEntries: info.MaxEntries, Flags: info.Flags,
		Key: &btf.Int{Name: "unsigned int", Size: 4},
		Value: &btf.Struct{Name: "fw_config", Size: vs, Members: []btf.Member{
			{Name: "blob", Type: &btf.Array{Index: &btf.Int{Name: "unsigned int", Size: 4}, Type: u8, Nelems: vs}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	pin := repin(t, dir, name, other)

	dp, err := datapath.Load(dir, datapath.Limits{})
	if err == nil {
		dp.Close()
		t.Fatalf("load over %s of another layout at the same size succeeded", name)
	}
	if !errors.Is(err, ebpf.ErrMapIncompatible) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "blob") {
		t.Fatalf("load over %s of another layout: %v, want ErrMapIncompatible naming the map and the difference", name, err)
	}
	t.Logf("refused as it should be: %v", err)
	if m, err := ebpf.LoadPinnedMap(pin, nil); err != nil {
		t.Fatalf("the pinned map must stay: %v", err)
	} else {
		m.Close()
	}

	// this program's own pins (the usual reload) are reused
	dir2 := pinnedFresh(t)
	dp, err = datapath.Load(dir2, datapath.Limits{})
	if err != nil {
		t.Fatalf("load over this program's own pins: %v", err)
	}
	dp.Close()
}
