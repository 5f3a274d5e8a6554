package datapath

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// BenchmarkVerifiedInstructions reports how many instructions the kernel's
// verifier processed for each program of this build (the budget is 1M per
// program; docs/classifier.md, docs/limits.md), and of another build's
// object when XDPFW_OBJ_BEFORE names one (git show REV:internal/datapath/xdpfw_bpfel.o):
//
//	go test -run '^$' -bench VerifiedInstructions -benchtime 1x ./internal/datapath/
func BenchmarkVerifiedInstructions(b *testing.B) {
	for _, c := range []struct{ name, path string }{{"before", os.Getenv("XDPFW_OBJ_BEFORE")}, {"this", ""}} {
		if c.name == "before" && c.path == "" {
			continue
		}
		d, err := LoadObject(c.path, Limits{})
		if err != nil {
			b.Fatalf("%s: %+v", c.name, err)
		}
		report := func(prog string, p *ebpf.Program) {
			info, err := p.Info()
			if err != nil {
				b.Fatal(err)
			}
			n, _ := info.VerifiedInstructions()
			b.ReportMetric(float64(n), c.name+"-"+prog+"-insns")
		}
		report("ingress", d.prog)
		report("egress", d.egress)
		stages := d.stages
		for _, m := range d.unpinned { // LoadObject keeps the program array unpinned
			if mi, err := m.Info(); err == nil && mi.Name == "fw_xdp_stages" {
				stages = m
			}
		}
		for slot, name := range map[uint32]string{0: "classify", stageFinish: "finish"} {
			var id ebpf.ProgramID
			if stages != nil && stages.Lookup(slot, &id) == nil {
				if p, err := ebpf.NewProgramFromID(id); err == nil {
					report(name, p)
					p.Close()
				}
			}
		}
		if c.name == "this" {
			a, err := d.loadAudit(0)
			if err != nil {
				b.Fatalf("audit: %+v", err)
			}
			report("audit", a.prog)
			a.Close()
		}
		d.Close()
	}
}
