package datapath

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

func TestZZInsns(t *testing.T) {
	for _, path := range []string{os.Getenv("OBJ_BEFORE"), ""} {
		d, err := LoadObject(path, Limits{})
		if err != nil {
			t.Fatalf("%s: %+v", path, err)
		}
		show := func(name string, p *ebpf.Program) {
			info, err := p.Info()
			if err != nil {
				t.Fatal(err)
			}
			n, _ := info.VerifiedInstructions()
			t.Logf("%-8s %-12s verified_insns %d", map[bool]string{true: "before", false: "after"}[path != ""], name, n)
		}
		show("ingress", d.prog)
		show("egress", d.egress)
		var id ebpf.ProgramID
		st := d.stages
		for _, m := range d.unpinned {
			if mi, err := m.Info(); err == nil && mi.Name == "fw_xdp_stages" {
				st = m
			}
		}
		if st != nil && st.Lookup(uint32(0), &id) == nil {
			p, err := ebpf.NewProgramFromID(id)
			if err == nil {
				show("classify", p)
				p.Close()
			}
		}
		d.Close()
	}
}
