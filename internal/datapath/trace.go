package datapath

import (
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
	XDPAborted = 0
	XDPDrop    = 1
	XDPPass    = 2
	XDPTx      = 3
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

// Trace runs frame through the program with BPF_PROG_TEST_RUN, the frame
// arriving on ifindex (0: the loopback device of the caller's namespace),
// and returns the decision the program wrote into the trace metadata and
// the frame it left (a REJECT's answer). Counters, conntrack and REJECT's
// per-source rate limit are updated as for a real packet.
func Trace(prog *ebpf.Program, frame []byte, ifindex uint32) (TraceResult, error) {
	return TraceAssuming(prog, frame, ifindex, NoCTState)
}

// TraceAssuming is Trace with the packet assumed to be in connection state
// ctstate (compile.CTNew...) instead of what conntrack says; such a trace
// records nothing in the conntrack table. NoCTState: plain Trace.
func TraceAssuming(prog *ebpf.Program, frame []byte, ifindex uint32, ctstate int) (TraceResult, error) {
	in := make([]byte, traceSize+len(frame))
	ne.PutUint64(in[0:8], traceMagic)
	if ctstate >= 0 {
		in[16], in[17] = traceAssumeCTState, uint8(ctstate)
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

// TraceEgress runs frame through the tc egress program (the OUTPUT chain)
// as a packet this host sends, with BPF_PROG_TEST_RUN; ctstate as in
// TraceAssuming. XDPAction holds the tc verdict (TCActOK, TCActShot, or
// TCActRedirect for an answered REJECT, whose answer is Frame; the test
// run performs no redirect).
func TraceEgress(prog *ebpf.Program, frame []byte, ctstate int) (TraceResult, error) {
	ctx := skbCtx{}
	ctx.Cb[0] = traceCBMagic
	if ctstate >= 0 {
		ctx.Cb[3] = traceAssumeCTState<<8 | uint32(ctstate)
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
