package bench

import (
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// CTOptions configure the conntrack benchmark.
type CTOptions struct {
	Sizes    []int // rule counts
	Flows    int   // packets (distinct flows) per measurement
	TableMax int   // conntrack table size for the table-full phase
	Progress io.Writer
}

// CTResult is one rule count.
type CTResult struct {
	Rules int `json:"rules"`
	// Median ns per packet (BPF_PROG_TEST_RUN, one packet per run, so
	// every new-flow packet really is a new flow):
	Established float64 `json:"established_ns"`  // a reply-direction packet of a known flow: lookup + fast rule + update
	NewAccepted float64 `json:"new_accepted_ns"` // a new flow the last rule accepts: lookup miss + trees + insert
	NewDropped  float64 `json:"new_dropped_ns"`  // a new flow no rule accepts: lookup miss + trees + policy
	// Table full (TableMax entries, filled by assured flows):
	FullRefused     float64 `json:"full_new_refused_ns"` // a new flow refused (conntrack-full)
	FullEstablished float64 `json:"full_established_ns"` // the known flow, still passing
	Refused         int     `json:"full_refused"`        // new flows refused, of Flows
	// Floor is a non-IP frame's run (the program returns at once): the
	// fixed cost of a one-packet test run that every number above includes.
	Floor float64 `json:"one_packet_run_floor_ns"`
	// EstablishedRepeat is the known flow's packet repeated 10,000 times
	// in one run: the per-packet cost without the one-run overhead.
	EstablishedRepeat float64 `json:"established_repeat_ns"`
}

// CTRuleSetText is the classic stateful policy with n rules in all: the
// ESTABLISHED,RELATED and INVALID rules, filler rules that never match the
// probes, and a last rule accepting new flows to udp/53 from 192.0.2.0/24.
func CTRuleSetText(n int) string {
	var b strings.Builder
	b.WriteString("-P INPUT DROP\n-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n" +
		"-A INPUT -m conntrack --ctstate INVALID -j DROP\n")
	for i := 0; i < n-3; i++ {
		fmt.Fprintf(&b, "-A INPUT -s 10.%d.%d.0/24 -p udp --dport %d -j ACCEPT\n", (i/250)%250, i%250, 1000+i%5000)
	}
	b.WriteString("-A INPUT -s 192.0.2.0/24 -p udp --dport 53 -j ACCEPT\n")
	return b.String()
}

func udpFrame(src, dst string, sport, dport uint16) []byte {
	p := packet.Packet{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Proto: packet.ProtoUDP,
		SPort: sport, DPort: dport, Payload: make([]byte, 18)}
	return p.Bytes()
}

// Conntrack measures the stateful fast path against new flows, and a full
// table, in a throwaway namespace with a private bpffs.
func Conntrack(opt CTOptions) ([]*CTResult, error) {
	dir, undo, err := sandbox("xdpfw-bench-ct-")
	if err != nil {
		return nil, err
	}
	defer undo()
	say := sayer(opt.Progress)

	var out []*CTResult
	for _, n := range opt.Sizes {
		n = max(n, 3)
		c, err := compileText(CTRuleSetText(n), n, rules.ParseOptions{})
		if err != nil {
			return nil, err
		}
		c.lim.Conntrack = max(opt.TableMax, 2*opt.Flows+16)
		r, err := ctMeasure(filepath.Join(dir, fmt.Sprint(n)), c.lim, c.tables, c.ids, opt)
		if err != nil {
			return nil, fmt.Errorf("%d rules: %w", n, err)
		}
		r.Rules = n
		say("  %6d rules: established %.0f ns, new accepted %.0f ns, new dropped %.0f ns; table full: new refused %.0f ns, established %.0f ns",
			n, r.Established, r.NewAccepted, r.NewDropped, r.FullRefused, r.FullEstablished)
		out = append(out, r)
	}
	return out, nil
}

func ctMeasure(pin string, lim datapath.Limits, tables *compile.Tables, ids []uint32, opt CTOptions) (*CTResult, error) {
	dp, err := datapath.Load(pin, lim)
	if err != nil {
		return nil, err
	}
	defer dp.Close()
	defer datapath.Unpin(pin)
	if err := dp.Install(tables); err != nil {
		return nil, err
	}
	prog := dp.Program()
	// run1 runs one packet once and returns the kernel-measured ns.
	run1 := func(frame []byte) (float64, error) {
		_, d, err := prog.Benchmark(frame, 1, nil)
		return float64(d.Nanoseconds()), err
	}
	check := func(frame []byte, rule uint32, state uint8) error {
		tr, err := dp.Trace(frame, 0, datapath.NoCTState)
		if err != nil {
			return err
		}
		if tr.RuleID != rule || tr.CTState != state {
			return fmt.Errorf("probe decided by rule %d in state %s, want rule %d in %s", tr.RuleID,
				compile.CTStateName(tr.CTState), rule, compile.CTStateName(state))
		}
		return nil
	}
	// The known flow: a query accepted by the last rule, then its answer.
	query := udpFrame("192.0.2.7", "10.255.0.1", 40000, 53)
	answer := udpFrame("10.255.0.1", "192.0.2.7", 53, 40000)
	if err := check(query, ids[len(ids)-1], compile.CTNew); err != nil {
		return nil, err
	}
	if _, err := run1(query); err != nil { // the live program records it (a trace records nothing)
		return nil, err
	}
	if err := check(answer, ids[0], compile.CTEstablished); err != nil {
		return nil, err
	}
	for _, fr := range [][]byte{answer, query} { // a packet after the answer: assured, never evicted
		if _, err := run1(fr); err != nil {
			return nil, err
		}
	}
	res := &CTResult{}
	var est, acc, drop []float64
	for i := 0; i < opt.Flows; i++ {
		sport := uint16(1024 + i)
		a, err := run1(udpFrame("192.0.2.8", "10.255.0.1", sport, 53)) // new, accepted: inserted
		if err != nil {
			return nil, err
		}
		d, err := run1(udpFrame("198.51.100.8", "10.255.0.1", sport, 53)) // new, policy drop
		if err != nil {
			return nil, err
		}
		e, err := run1(answer)
		if err != nil {
			return nil, err
		}
		acc, drop, est = append(acc, a), append(drop, d), append(est, e)
	}
	res.Established, res.NewAccepted, res.NewDropped = median(est), median(acc), median(drop)
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	var floor []float64
	for i := 0; i < opt.Flows; i++ {
		f, err := run1(arp)
		if err != nil {
			return nil, err
		}
		floor = append(floor, f)
	}
	res.Floor = median(floor)
	if _, d, err := prog.Benchmark(answer, 10000, nil); err == nil {
		res.EstablishedRepeat = float64(d.Nanoseconds())
	}

	// Fill the table with assured flows (query, answer, query: a new flow
	// evicts none of them), then offer new flows and the known one.
	var reasons0 [compile.NumReasons]datapath.Counter
	for i := 0; i < lim.Conntrack+64; i++ { // more flows than the table holds: the earlier unassured ones go first
		cli, port := fmt.Sprintf("192.0.2.%d", 9+i/60000), uint16(1024+i%60000)
		q := udpFrame(cli, "10.255.0.2", port, 53)
		for _, fr := range [][]byte{q, udpFrame("10.255.0.2", cli, 53, port), q} {
			if _, err := run1(fr); err != nil {
				return nil, err
			}
		}
	}
	if st, err := dp.CTStats(); err != nil || st.Counters["table_full"] == 0 {
		return nil, fmt.Errorf("the table did not fill (%v)", err)
	}
	if reasons0, err = dp.ReasonCounters(); err != nil {
		return nil, err
	}
	var ref, fest []float64
	for i := 0; i < opt.Flows; i++ {
		r, err := run1(udpFrame("192.0.2.200", "10.255.0.3", uint16(1024+i), 53))
		if err != nil {
			return nil, err
		}
		e, err := run1(answer)
		if err != nil {
			return nil, err
		}
		ref, fest = append(ref, r), append(fest, e)
	}
	if err := check(answer, ids[0], compile.CTEstablished); err != nil {
		return nil, fmt.Errorf("with the table full: %w", err)
	}
	reasons, err := dp.ReasonCounters()
	if err != nil {
		return nil, err
	}
	res.Refused = int(reasons[compile.ReasonCTFull].Packets - reasons0[compile.ReasonCTFull].Packets)
	res.FullRefused, res.FullEstablished = median(ref), median(fest)
	return res, nil
}

// WriteCTTable prints conntrack results as a table.
func WriteCTTable(w io.Writer, res []*CTResult) {
	fmt.Fprintf(w, "%8s %8s %10s %10s %11s %12s %12s %9s %11s\n", "rules", "est_ns", "new_acc_ns", "new_drop_ns",
		"new/est", "full:new_ns", "full:est_ns", "refused", "floor_ns")
	for _, r := range res {
		fmt.Fprintf(w, "%8d %8.0f %10.0f %10.0f %10.2fx %12.0f %12.0f %9d %11.0f\n", r.Rules, r.Established, r.NewAccepted,
			r.NewDropped, r.NewAccepted/r.Established, r.FullRefused, r.FullEstablished, r.Refused, r.Floor)
	}
	fmt.Fprintln(w, "ns: median per packet, one packet per BPF_PROG_TEST_RUN (kernel-measured), every new-flow packet a new flow;")
	fmt.Fprintln(w, "floor_ns: the same for a non-IP frame (the one-packet-run overhead every column includes)")
	for _, r := range res {
		fmt.Fprintf(w, "%d rules: the established packet repeated in one run costs %.0f ns\n", r.Rules, r.EstablishedRepeat)
	}
}
