package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/packet"
)

// Frame sizes the generator can send: an Ethernet, IPv4 and UDP header at
// least, and no more than the veth's MTU carries (1500-byte IP packets).
const (
	MinFrameSize = 14 + 20 + 8
	MaxFrameSize = 14 + 1500
)

// Generator is the live-frames traffic generator (bpf/bench/trafficgen.c),
// loaded in the generator's namespace and redirecting to its veth.
type Generator struct {
	topo *Topology
	dst  netip.Addr // the frames' destination
	objs trafficgenObjects
	rate float64 // packets per second of the last call (0: none yet)
}

// NewGenerator loads the generator program for topology t, with room for
// maxAims aims (Aim): frames to the DUT, every one a new flow.
func NewGenerator(t *Topology, maxAims int) (*Generator, error) {
	return newGenerator(t, dutAddr.Addr(), false, maxAims)
}

// oneFlowSPort is the UDP source port of one-flow traffic.
const oneFlowSPort = 1024

// newGenerator loads the generator program for topology t with frames to
// dst, every one a new flow, or (fixedSPort) all from one source address
// and port, oneFlowSPort (aims then make the flows; each frame tagged with
// its aim's index and UDP-checksummed: trafficgen.c's tagged mode), with
// room for maxAims aims.
func newGenerator(t *Topology, dst netip.Addr, fixedSPort bool, maxAims int) (*Generator, error) {
	spec, err := loadTrafficgen()
	if err != nil {
		return nil, fmt.Errorf("loading embedded trafficgen objects: %w", err)
	}
	spec.Maps["gen_aims"].MaxEntries = uint32(max(1, maxAims))
	src, daddr := TrafficSrc.Addr().As4(), dst.As4()
	srcMask, portMask, portBase := uint32(1)<<(32-TrafficSrc.Bits())-1, uint32(0xffff), uint16(0)
	if fixedSPort {
		srcMask, portMask, portBase = 0, 0, oneFlowSPort
	}
	var dmac, smac [6]byte
	copy(dmac[:], t.DUTIf.MAC)
	copy(smac[:], t.GenIf.MAC)
	for name, v := range map[string]any{
		"gen_ifindex":   uint32(t.GenIf.Index),
		"gen_src_base":  binary.BigEndian.Uint32(src[:]),
		"gen_src_mask":  srcMask,
		"gen_port_mask": portMask,
		"gen_port_base": portBase,
		"gen_dmac":      dmac,
		"gen_smac":      smac,
		"gen_ttl":       uint8(packet.DefaultTTL),
		"gen_daddr":     binary.NativeEndian.Uint32(daddr[:]),
		"gen_dport":     uint16(TrafficDPort),
		"gen_tag":       b2u8(fixedSPort),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	g := &Generator{topo: t, dst: dst}
	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the verifier rejected trafficgen: %+v", ve)
		}
		return nil, fmt.Errorf("loading trafficgen: %w", err)
	}
	return g, nil
}

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Aim makes the generator walk aims (macroAims: each packet the next
// pair's source address and port); nil: back to one /17, the template's
// port.
func (g *Generator) Aim(aims []trafficgenGenAim) error {
	if len(aims) > int(g.objs.GenAims.MaxEntries()) {
		return fmt.Errorf("generator: %d aims, room for %d", len(aims), g.objs.GenAims.MaxEntries())
	}
	keys := make([]uint32, len(aims))
	for i := range keys {
		keys[i] = uint32(i)
	}
	if len(aims) > 0 {
		if _, err := g.objs.GenAims.BatchUpdate(keys, aims, nil); err != nil {
			return fmt.Errorf("generator: writing %d aims: %w", len(aims), err)
		}
	}
	return g.objs.GenAimN.Update(uint32(0), uint32(len(aims)), ebpf.UpdateAny)
}

// Close unloads the program.
func (g *Generator) Close() { g.objs.Close() }

// Frame is the template the generator sends at an Ethernet frame size
// (without FCS): templateFrame to the destination it was loaded with,
// source port 0 (the generator rewrites ports and addresses).
func (g *Generator) Frame(size int) ([]byte, error) { return templateFrame(g.topo, g.dst, 0, size) }

// templateFrame is a live-frames generator's template at an Ethernet
// frame size (without FCS): IPv4/UDP from the first traffic source and
// sport to dst, destination port TrafficDPort, through the DUT's MAC, UDP
// checksum 0 ("none", valid for IPv4: a generator rewrites ports and
// addresses without touching it).
func templateFrame(t *Topology, dst netip.Addr, sport uint16, size int) ([]byte, error) {
	if size < MinFrameSize || size > MaxFrameSize {
		return nil, fmt.Errorf("frame size %d: want %d..%d bytes", size, MinFrameSize, MaxFrameSize)
	}
	p := packet.Packet{Src: TrafficSrc.Addr(), Dst: dst, Proto: packet.ProtoUDP,
		SPort: sport, DPort: TrafficDPort, Payload: make([]byte, size-MinFrameSize)}
	copy(p.SrcMAC[:], t.GenIf.MAC)
	copy(p.DstMAC[:], t.DUTIf.MAC)
	f, err := p.Encode()
	if err != nil {
		return nil, err
	}
	if len(f) != size {
		return nil, fmt.Errorf("frame of %d bytes built for size %d", len(f), size)
	}
	f[14+20+6], f[14+20+7] = 0, 0 // UDP checksum: none
	return f, nil
}

// Sent is the number of packets the generator produced so far (all CPUs).
func (g *Generator) Sent() (uint64, error) {
	var per []trafficgenBenchCounter
	if err := g.objs.GenStats.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("reading generator counters: %w", err)
	}
	var n uint64
	for _, c := range per {
		n += c.Packets
	}
	return n, nil
}

// genChunkTime bounds one BPF_PROG_RUN call, so a run ends close to its
// deadline and Ctrl-C is noticed within a second. Each call also costs a
// fixed ~20 ms in the kernel (setting up and tearing down the page pool
// and its memory model, which waits for an RCU grace period), during which
// nothing is sent: calls are made long so that gap is a small part of the
// run. Calls are sized with the rate the previous call achieved.
const genChunkTime = time.Second

// Run sends frame, a new flow each time, for d (or until ctx ends), and
// returns how long it ran.
func (g *Generator) Run(ctx context.Context, frame []byte, d time.Duration) (time.Duration, error) {
	return g.run(frame, func(run func(n uint32) error) error {
		// The rate another DUT or frame size saw may be off: aim short at
		// first, a second call fills up the time left.
		rate := 0.8 * g.rate
		if rate == 0 {
			rate = 1e6 // until measured
		}
		deadline := time.Now().Add(d)
		for ctx.Err() == nil {
			left := time.Until(deadline)
			if left < 30*time.Millisecond {
				break
			}
			n := uint32(max(1024, min(rate*min(left, genChunkTime).Seconds(), 1<<28)))
			t0 := time.Now()
			if err := run(n); err != nil {
				return err
			}
			rate = float64(n) / time.Since(t0).Seconds()
			g.rate = rate
		}
		return nil
	})
}

// RunPackets sends n packets (new flows) in one BPF_PROG_RUN call.
func (g *Generator) RunPackets(frame []byte, n uint32) (time.Duration, error) {
	return g.run(frame, func(run func(n uint32) error) error { return run(n) })
}

// run sends with the generator's program (liveRuns).
func (g *Generator) run(frame []byte, loop func(run func(n uint32) error) error) (time.Duration, error) {
	return liveRuns(g.topo, g.objs.Trafficgen, frame, 0, loop)
}

// liveRuns calls loop from a thread in the generator's namespace pinned
// to GenCPU; loop sends with run(n), one live-frames BPF_PROG_RUN of prog
// on n copies of frame, flushed to the veth every batch frames (0: the
// kernel's default, 64).
func liveRuns(t *Topology, prog *ebpf.Program, frame []byte, batch uint32, loop func(run func(n uint32) error) error) (time.Duration, error) {
	var ran time.Duration
	err := t.Gen.Do(func() error {
		// Pin this (locked) thread for the run, then give the runtime
		// back a thread with its old affinity.
		var old, set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			return err
		}
		set.Set(t.GenCPU)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("pinning the generator to CPU %d: %w", t.GenCPU, err)
		}
		defer unix.SchedSetaffinity(0, &old)

		// ingress_ifindex is resolved in this thread's namespace: the
		// generator's veth. The frame "arrives" there and is redirected
		// back out of it, to the DUT.
		opts := &ebpf.RunOptions{Data: frame, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES, BatchSize: batch,
			Context: xdpMd{DataEnd: uint32(len(frame)), IngressIfindex: uint32(t.GenIf.Index)}}
		start := time.Now()
		err := loop(func(n uint32) error {
			opts.Repeat = n
			if _, err := prog.Run(opts); err != nil {
				return fmt.Errorf("BPF_PROG_RUN in live-frames mode (needs Linux 5.18+): %w", err)
			}
			return nil
		})
		ran = time.Since(start)
		return err
	})
	return ran, err
}

// xdpMd is struct xdp_md, the BPF_PROG_RUN context of an XDP program.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}
