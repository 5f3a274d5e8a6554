package datapath_test

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// BenchmarkTailCall measures what the XDP program's split into two
// programs costs per jump (docs/bench.md, "The fixed cost per packet"):
// the same small step (a per-CPU counter looked up, tested and bumped)
// done 33 times per run three ways, each as its own XDP program under
// BPF_PROG_TEST_RUN:
//
//   - inline: the 33 steps one after the other;
//   - tail: one step per program run, which tail-calls itself 32 times;
//   - call: each step a BPF-to-BPF call and its return.
//
// It reports each way's ns per run and, per step, what a tail call
// (tail-ns/jump) and a call with its return (call-ns/call) add to the
// step done inline:
//
//	go test -run '^$' -bench TailCall -benchtime 1000000x ./internal/datapath/
func BenchmarkTailCall(b *testing.B) {
	const hops = 32 // tail calls per run: the kernel allows 33
	cnt, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer cnt.Close()
	progs, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ProgramArray, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer progs.Close()

	// step leaves in R0 1 while the counter is below hops (and bumps it),
	// else 0 (and clears it); R6 and R7 are kept.
	step := func(label string) asm.Instructions {
		return asm.Instructions{
			asm.StoreImm(asm.R10, -4, 0, asm.Word).WithSymbol(label),
			asm.Mov.Reg(asm.R2, asm.R10),
			asm.Add.Imm(asm.R2, -4),
			asm.LoadMapPtr(asm.R1, cnt.FD()),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, label+"_none"),
			asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
			asm.JGE.Imm(asm.R1, hops, label+"_last"),
			asm.Add.Imm(asm.R1, 1),
			asm.StoreMem(asm.R0, 0, asm.R1, asm.Word),
			asm.Mov.Imm(asm.R0, 1),
			asm.Ja.Label(label + "_end"),
			asm.StoreImm(asm.R0, 0, 0, asm.Word).WithSymbol(label + "_last"),
			asm.Mov.Imm(asm.R0, 0),
			asm.Ja.Label(label + "_end"),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(label + "_none"),
			asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(label + "_end"), // where every path meets
		}
	}
	const xdpDrop = 1
	// tail: a step, then the jump back into this program while it says so;
	// only the last step (the counter at hops) returns XDP_DROP
	tail := append(asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}, step("s")...)
	tail = append(tail,
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.LoadMapPtr(asm.R2, progs.FD()),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnTailCall.Call(),
		asm.Mov.Imm(asm.R0, 0), // the jump failed: XDP_ABORTED
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpDrop).WithSymbol("out"),
		asm.Return(),
	)
	// inline: hops+1 steps, R7 counting those that said 1
	inline := asm.Instructions{asm.Mov.Imm(asm.R7, 0)}
	// call: the same, each step a call of the subprogram "step"
	call := asm.Instructions{asm.Mov.Imm(asm.R7, 0)}
	for i := 0; i <= hops; i++ {
		inline = append(inline, step(fmt.Sprintf("i%d", i))...)
		inline = append(inline, asm.Add.Reg(asm.R7, asm.R0))
		call = append(call, asm.Call.Label("step"), asm.Add.Reg(asm.R7, asm.R0))
	}
	for _, p := range []*asm.Instructions{&inline, &call} {
		*p = append(*p,
			asm.Mov.Imm(asm.R0, 0),
			asm.JNE.Imm(asm.R7, hops, "bad"), // every way must take hops steps that say 1
			asm.Mov.Imm(asm.R0, xdpDrop),
			asm.Return().WithSymbol("bad"),
		)
	}
	call = append(call, step("step")...)
	call = append(call, asm.Return())

	load := func(insns asm.Instructions) *ebpf.Program {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: insns})
		if err != nil {
			b.Fatalf("%+v", err)
		}
		b.Cleanup(func() { p.Close() })
		return p
	}
	ways := []struct {
		name string
		prog *ebpf.Program
	}{{"inline", load(inline)}, {"tail", load(tail)}, {"call", load(call)}}
	if err := progs.Put(uint32(0), ways[1].prog); err != nil {
		b.Fatal(err)
	}
	frame := make([]byte, 64)
	ns := make([][]float64, len(ways))
	for r := 0; r < 15; r++ {
		for i, w := range ways {
			act, per, err := w.prog.Benchmark(frame, b.N, nil)
			if err != nil || act != xdpDrop {
				b.Fatalf("%s: action %d, %v", w.name, act, err)
			}
			ns[i] = append(ns[i], float64(per.Nanoseconds()))
		}
	}
	in, tl, cl := medianOf(ns[0]), medianOf(ns[1]), medianOf(ns[2])
	b.ReportMetric(in, "inline-ns/run")
	b.ReportMetric(tl, "tail-ns/run")
	b.ReportMetric(cl, "call-ns/run")
	b.ReportMetric((tl-in)/hops, "tail-ns/jump")
	b.ReportMetric((cl-in)/(hops+1), "call-ns/call")
}
