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
	// "nat": this build loaded with --nat xdpfw (fw_nat_mode), and its nat stage
	for _, c := range []struct {
		name, path string
		nat        bool
	}{{"before", os.Getenv("XDPFW_OBJ_BEFORE"), false}, {"before-nat", os.Getenv("XDPFW_OBJ_BEFORE"), true},
		{"this", "", false}, {"nat", "", true}} {
		if (c.name == "before" || c.name == "before-nat") && c.path == "" {
			continue
		}
		d, err := LoadObject(c.path, Limits{NAT: c.nat})
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
		if d.cpumapProg != nil {
			report("cpumap", d.cpumapProg)
		}
		// map names are cut at 15 bytes: fw_cpumap_stages is fw_cpumap_stage
		for _, st := range []struct {
			prog, array string
			slot        uint32
		}{{"classify", "fw_xdp_stages", 0}, {"finish", "fw_xdp_stages", stageFinish}, {"cpumap-classify", "fw_cpumap_stage", 0},
			{"cpumap-finish", "fw_cpumap_stage", stageFinish}} {
			var stages *ebpf.Map
			for _, m := range d.unpinned { // LoadObject keeps the program arrays unpinned
				if mi, err := m.Info(); err == nil && mi.Name == st.array {
					stages = m
				}
			}
			var id ebpf.ProgramID
			if stages != nil && stages.Lookup(st.slot, &id) == nil {
				if p, err := ebpf.NewProgramFromID(id); err == nil {
					report(st.prog, p)
					p.Close()
				}
			}
		}
		if c.name == "this" {
			a, err := d.loadAudit(0)
			if err != nil {
				b.Fatalf("audit: %+v", err)
			}
			report("audit", a.objs.Prog)
			report("cpumap-audit", a.objs.CPUProg)
			a.Close()
		}
		if c.nat && c.path == "" { // the nat instance is this build's embedded object
			n, err := d.loadNAT()
			if err != nil {
				b.Fatalf("nat: %+v", err)
			}
			report("stage", n.objs.Prog)
			report("tc-stage", n.objs.TcProg) // nat OUTPUT (bpf/lib/natout.h)
			n.close()
		}
		d.Close()
	}
}
