package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// traceMagic is FW_TRACE_MAGIC; traceSize is sizeof(struct fw_trace).
const (
	traceMagic = 0x78647066775f7472
	traceSize  = 24
	// FW_TRACE_CTSTATE
	traceAssumeCTState = 0x01
	// NoCTState: let conntrack decide (Trace's assume argument).
	NoCTState = -1
)

// XDP actions.
const (
	XDPAborted  = 0
	XDPDrop     = 1
	XDPPass     = 2
	XDPTx       = 3
	XDPRedirect = 4 // the forwarding fast path (bpf/lib/fwd.h)
)

// TraceResult is the loaded program's decision on one frame.
type TraceResult struct {
	XDPAction uint32         `json:"xdp_action"` // XDP_PASS, XDP_DROP, ...
	RuleID    uint32         `json:"rule_id"`    // deciding rule id (policy ids for policies, 0 for none)
	Action    compile.Action `json:"-"`          // the entry's action
	Reason    compile.Reason `json:"-"`
	Chain     uint8          `json:"-"`
	CTState   uint8          `json:"-"` // the connection state the packet had (compile.CTNew...)
	Reject    compile.Reject `json:"-"` // with ActReject: what answers
	// LogRules is how many LOG rules logged the packet, LogSelf whether
	// its deciding rule did too (--log); before the rate limits.
	LogRules int  `json:"-"`
	LogSelf  bool `json:"-"`
	// Frame is the frame as the program left it: with XDP_TX (tc:
	// TC_ACT_REDIRECT), the answer.
	Frame []byte `json:"-"`
}

// xdpMd is struct xdp_md, the test-run context.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// fw_trace_mode (bpf/maps.h): which instance of the object a program is.
const (
	traceOff    = 0 // the live instance: no trace code at all
	traceReport = 1 // reports its decision, writes no live state
	traceRecord = 2 // reports, and records as a live packet (tests)
)

// tracer is a trace instance of the data plane's programs for one hook:
// the embedded object loaded again with fw_trace_mode set, sharing the
// live instance's state maps (tables, counters, conntrack, REJECT and LOG
// budgets), so it decides as the live program would, on the state the
// live program has. The live program has no trace code: nothing a packet
// carries can make it report or assume anything.
type tracer struct {
	prog   *ebpf.Program
	stages *ebpf.Map // the XDP instance's own classify stage (fw_xdp_stages)
}

func (t *tracer) close() {
	if t == nil {
		return
	}
	t.prog.Close()
	if t.stages != nil {
		t.stages.Close()
	}
}

// liveStateMaps are the maps a trace instance shares with the live one
// besides the pinned ones: REJECT's per-source budget and its OUTPUT
// answers on their way in, and conntrack's search for room. Per-packet
// scratch (fw_xdp_handoff, fw_log_scratch) and the classify stage stay the
// instance's own. Kernel map names are cut to 15 characters.
var liveStateMaps = []string{"fw_reject_rl", "fw_reject_own", "fw_reject_own_last", "fw_ct_gc"}

// liveMaps returns the live instance's state maps by name (see tracer);
// the caller closes those in the second result.
func (d *Datapath) liveMaps() (map[string]*ebpf.Map, []*ebpf.Map, error) {
	out := map[string]*ebpf.Map{}
	for name, m := range d.maps() {
		if *m != nil {
			out[specMapName(name)] = *m
		}
	}
	want := map[string]string{}
	for _, n := range liveStateMaps {
		want[n[:min(len(n), 15)]] = n
	}
	var opened []*ebpf.Map
	for _, p := range []*ebpf.Program{d.prog, d.egress} {
		info, err := p.Info()
		if err != nil {
			return nil, opened, fmt.Errorf("reading the live program's maps: %w", err)
		}
		ids, ok := info.MapIDs()
		if !ok {
			return nil, opened, fmt.Errorf("reading the live program's maps: the kernel does not report them")
		}
		for _, id := range ids {
			m, err := ebpf.NewMapFromID(id)
			if err != nil {
				return nil, opened, fmt.Errorf("opening the live program's map %d: %w", id, err)
			}
			mi, err := m.Info()
			name, ok := want[mi.Name]
			if err != nil || !ok || out[name] != nil {
				m.Close()
				continue
			}
			opened = append(opened, m)
			out[name] = m
		}
	}
	for _, n := range liveStateMaps {
		if out[n] == nil {
			return nil, opened, fmt.Errorf("the live program has no map %s (loaded by another xdpfw version? `xdpfw load` again)", n)
		}
	}
	return out, opened, nil
}

// instanceSpec is the embedded object for another instance than the live
// one (fw_trace_mode mode: a trace or the audit), sized as lim, pinning
// nothing, and the live instance's maps by name (liveMaps); the caller
// calls done once loaded.
func (d *Datapath) instanceSpec(mode uint32, lim Limits) (spec *ebpf.CollectionSpec, _ Limits, live map[string]*ebpf.Map, done func(), err error) {
	if spec, err = loadXdpfw(); err != nil {
		return nil, lim, nil, nil, fmt.Errorf("loading embedded BPF objects: %w", err)
	}
	if lim, err = sizeSpec(spec, lim); err != nil {
		return nil, lim, nil, nil, err
	}
	if err := spec.Variables["fw_trace_mode"].Set(mode); err != nil {
		return nil, lim, nil, nil, fmt.Errorf("setting fw_trace_mode: %w", err)
	}
	nameLatSection(spec) // as the live one's
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone // shares the live maps; pins nothing of its own here
	}
	live, opened, err := d.liveMaps()
	done = func() {
		for _, m := range opened {
			m.Close()
		}
	}
	if err != nil {
		done()
		return nil, lim, nil, nil, err
	}
	return spec, lim, live, done, nil
}

// loadTracer loads a trace instance (mode) of one hook's program.
func (d *Datapath) loadTracer(mode uint32, egress bool) (*tracer, error) {
	spec, _, live, done, err := d.instanceSpec(mode, d.limits)
	if err != nil {
		return nil, err
	}
	defer done()
	opts := &ebpf.CollectionOptions{MapReplacements: live}
	if egress {
		var o struct {
			Prog *ebpf.Program `ebpf:"xdpfw_egress"`
		}
		if err := spec.LoadAndAssign(&o, opts); err != nil {
			return nil, instanceLoadErr("trace", err)
		}
		return &tracer{prog: o.Prog}, nil
	}
	var o struct {
		Prog     *ebpf.Program `ebpf:"xdpfw_ingress"`
		Classify *ebpf.Program `ebpf:"xdpfw_ingress_classify"`
		Stages   *ebpf.Map     `ebpf:"fw_xdp_stages"` // held: the kernel empties a program array nothing holds
	}
	if err := spec.LoadAndAssign(&o, opts); err != nil {
		return nil, instanceLoadErr("trace", err)
	}
	o.Classify.Close() // the program array holds it
	return &tracer{prog: o.Prog, stages: o.Stages}, nil
}

// instanceLoadErr says why loading the what instance's program failed.
func instanceLoadErr(what string, err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("loading the %s program: the kernel's verifier rejected it: %+v", what, ve)
	}
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		return fmt.Errorf("loading the %s program: the loaded data plane was made by another xdpfw version (`xdpfw load` again): %w", what, err)
	}
	return fmt.Errorf("loading the %s program: %w", what, err)
}

// tracerFor returns d's trace instance (mode) for a hook, loaded on first
// use and kept until Close.
func (d *Datapath) tracerFor(mode uint32, egress bool) (*tracer, error) {
	i := 0
	if egress {
		i = 1
	}
	if mode == traceRecord {
		i += 2
	}
	if d.tracers[i] == nil {
		t, err := d.loadTracer(mode, egress)
		if err != nil {
			return nil, err
		}
		d.tracers[i] = t
	}
	return d.tracers[i], nil
}

// Trace runs frame through a trace instance of the XDP program (see
// tracer) with BPF_PROG_TEST_RUN, the frame arriving on ifindex (0: the
// loopback device of the caller's namespace), and returns the decision and
// the frame the program left (a REJECT's answer). It changes no live
// state: counters, conntrack, REJECT's and LOG's budgets and the log ring
// stay as they were (a trace cannot tell whether a full conntrack table
// would refuse a new connection). ctstate: the connection state to assume
// (compile.CTNew...; AssumeConn adds the connection's direction, status
// and protocol) instead of what conntrack says, or NoCTState. The
// first trace of a handle loads the instance (the kernel verifies it:
// 0.7–0.8 s measured).
func (d *Datapath) Trace(frame []byte, ifindex uint32, ctstate int) (TraceResult, error) {
	t, err := d.tracerFor(traceReport, false)
	if err != nil {
		return TraceResult{}, err
	}
	return traceXDP(t.prog, frame, ifindex, ctstate)
}

// TraceEgress is Trace through the tc egress program (the OUTPUT chain),
// for a packet this host sends. XDPAction holds the tc verdict (TCActOK,
// TCActShot, or TCActRedirect for an answered REJECT, whose answer is
// Frame; the test run performs no redirect).
func (d *Datapath) TraceEgress(frame []byte, ctstate int) (TraceResult, error) {
	t, err := d.tracerFor(traceReport, true)
	if err != nil {
		return TraceResult{}, err
	}
	return traceTC(t.prog, frame, ctstate)
}

// AssumeConn is a Trace argument: assume connection state state, in the
// direction and with the status ctinfo says (compile.CTI*), of protocol
// proto (0: the packet's). A plain state assumes the original direction
// and no status bits.
func AssumeConn(state, ctinfo, proto uint8) int {
	return int(state) | int(ctinfo)<<8 | int(proto)<<16
}

// traceXDP runs frame through prog, a trace instance of the XDP program,
// with the trace metadata in front of it.
func traceXDP(prog *ebpf.Program, frame []byte, ifindex uint32, ctstate int) (TraceResult, error) {
	in := make([]byte, traceSize+len(frame))
	ne.PutUint64(in[0:8], traceMagic)
	if ctstate >= 0 {
		in[16], in[17], in[21], in[22] = traceAssumeCTState, uint8(ctstate), uint8(ctstate>>8), uint8(ctstate>>16)
	}
	copy(in[traceSize:], frame)
	out := make([]byte, len(in)+256) // an ICMP answer grows the frame by 48 bytes at most
	ctx := xdpMd{Data: traceSize, DataEnd: uint32(len(in)), IngressIfindex: ifindex}
	opts := &ebpf.RunOptions{Data: in, DataOut: out, Context: ctx}
	ret, err := prog.Run(opts)
	if err != nil {
		return TraceResult{}, fmt.Errorf("BPF_PROG_TEST_RUN: %w", err)
	}
	out = opts.DataOut // cut to what the program left: metadata and frame
	if len(out) < traceSize || ne.Uint64(out[0:8]) != traceMagic {
		return TraceResult{}, fmt.Errorf("trace metadata lost (program did not keep it)")
	}
	return TraceResult{
		XDPAction: ret,
		RuleID:    ne.Uint32(out[8:12]),
		Action:    compile.Action(out[12]),
		Reason:    compile.Reason(out[13]),
		Chain:     out[14],
		CTState:   out[15],
		Reject:    compile.Reject(out[18]),
		LogRules:  int(out[19]),
		LogSelf:   out[20] != 0,
		Frame:     out[traceSize:],
	}, nil
}

// skbCtx is the prefix of struct __sk_buff that BPF_PROG_TEST_RUN takes for
// tc programs (fields other than mark, priority, ifindex and cb must be 0).
type skbCtx struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTci, VlanProto uint32
	Priority, IngressIfindex, Ifindex, TcIndex                                  uint32
	Cb                                                                          [5]uint32
}

// sizeof(struct __sk_buff) and offsetof(struct __sk_buff, cb).
const (
	skbSize     = 192
	skbCbOffset = 48
)

// FW_TRACE_CB_MAGIC and the tc verdicts.
const (
	traceCBMagic  = 0x78647066
	TCActOK       = 0
	TCActShot     = 2
	TCActRedirect = 7 // a REJECT answered: the answer goes into this host's stack
)

// traceTC runs frame through prog, a trace instance of the tc egress
// program, with the trace request in skb->cb.
func traceTC(prog *ebpf.Program, frame []byte, ctstate int) (TraceResult, error) {
	ctx := skbCtx{}
	ctx.Cb[0] = traceCBMagic
	if ctstate >= 0 {
		ctx.Cb[3] = traceAssumeCTState<<8 | uint32(ctstate)&0xff | uint32(ctstate)>>8&0xffff<<16
	}
	out := make([]byte, skbSize) // the kernel returns the whole struct __sk_buff
	opts := &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+512), Context: ctx, ContextOut: out}
	ret, err := prog.Run(opts)
	if err != nil {
		return TraceResult{}, fmt.Errorf("BPF_PROG_TEST_RUN (tc): %w", err)
	}
	cb := out[skbCbOffset:]
	v, lg := ne.Uint32(cb[8:12]), ne.Uint32(cb[16:20])
	return TraceResult{XDPAction: ret, RuleID: ne.Uint32(cb[4:8]), Action: compile.Action(v), Reason: compile.Reason(v >> 8),
		Chain: uint8(v >> 16), CTState: uint8(v >> 24), LogRules: int(lg & 0xff), LogSelf: lg>>8&1 != 0,
		Reject: compile.Reject(lg >> 16 & 0xff), Frame: opts.DataOut}, nil
}
