package datapath

import (
	"maps"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

// TestInstanceMaps: the audit and nat instances' own maps, which they are
// pinned, reopened and closed by, are their objects' `ebpf` names, the
// embedded tables' included, and each names a map of the object.
func TestInstanceMaps(t *testing.T) {
	spec, err := loadXdpfw()
	if err != nil {
		t.Fatal(err)
	}
	tables := len(instanceMaps(&instanceTables{}))
	for _, c := range []struct {
		name string
		objs any
		own  []string
	}{
		{"audit", &auditObjs{}, []string{"fw_audit_budget", "fw_audit_counts", "fw_audit_next", "fw_audit_cpumap_next"}},
		{"nat", &natObjs{}, []string{"fw_nat_targets", "fw_audit_next"}},
	} {
		got := instanceMaps(c.objs)
		if len(got) != tables+len(c.own) || tables != 17 {
			t.Errorf("%s: %d maps (%d of the tables), want %d + %v", c.name, len(got), tables, 17, c.own)
		}
		for name := range got {
			if spec.Maps[name] == nil {
				t.Errorf("%s: %s is no map of the object", c.name, name)
			}
		}
		for _, name := range append(c.own, "fw_entries", "fw_hashlimit_rules", "fw_connlimit_rules") {
			if got[name] == nil {
				t.Errorf("%s: no %s among %v", c.name, name, slices.Sorted(maps.Keys(got)))
			}
		}
	}
	// closeInstance closes what is set and passes over what is not.
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	o := &auditObjs{FwAuditCounts: m}
	closeInstance(o)
	if m.FD() >= 0 {
		t.Errorf("closeInstance left fw_audit_counts open (fd %d)", m.FD())
	}
}
