package datapath_test

import (
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestOutcomeCounters: every packet is counted once under the reason of
// its verdict and what the program returned (XDP action at ingress, tc
// action at egress), exactly.
func TestOutcomeCounters(t *testing.T) {
	f := newFixture(t)
	f.installText(`-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -p tcp --dport 80 -j DROP
-A INPUT -p tcp --dport 25 -j REJECT --reject-with tcp-reset
-A OUTPUT -p tcp --dport 9 -j DROP
`)
	ssh := v4pkt(6, "1.2.3.4", "10.9.9.9", 1000, 22).Bytes()
	web := v4pkt(6, "1.2.3.4", "10.9.9.9", 1000, 80).Bytes()
	smtp := v4pkt(6, "1.2.3.4", "10.9.9.9", 1000, 25).Bytes()
	other := v4pkt(17, "1.2.3.4", "10.9.9.9", 1000, 53).Bytes()
	short := web[:14+20+10] // cut short: the IPv4 total length is longer than the frame
	runs := []struct {
		frame []byte
		n     int
		want  uint32
	}{{ssh, 2, datapath.XDPPass}, {web, 3, datapath.XDPDrop}, {smtp, 1, datapath.XDPTx}, {other, 4, datapath.XDPPass},
		{short, 1, datapath.XDPDrop}}
	for _, r := range runs {
		for i := 0; i < r.n; i++ {
			if got := f.mustRun(r.frame, "eth0"); got.XDPAction != r.want {
				t.Fatalf("action %d (%s), want %d", got.XDPAction, got.Reason, r.want)
			}
		}
	}
	out := v4pkt(6, "10.9.9.9", "1.2.3.4", 1000, 9).Bytes()
	for i := 0; i < 2; i++ {
		var r datapath.TraceResult
		err := f.ns.Do(func() (err error) {
			r, err = f.dp.RecordEgress(out, datapath.NoCTState)
			return err
		})
		if err != nil || r.XDPAction != datapath.TCActShot {
			t.Fatalf("egress: %+v %v", r, err)
		}
	}

	oc, err := f.dp.ReadOutcomes()
	if err != nil {
		t.Fatal(err)
	}
	want := map[datapath.Outcome]map[compile.Reason]uint64{
		datapath.OutXDPPass: {compile.ReasonRuleAccept: 2, compile.ReasonPolicyAccept: 4},
		datapath.OutXDPDrop: {compile.ReasonRuleDrop: 3, compile.ReasonBadIPv4: 1},
		datapath.OutXDPTx:   {compile.ReasonRuleReject: 1},
		datapath.OutTCShot:  {compile.ReasonRuleDrop: 2},
	}
	for o := datapath.Outcome(0); o < datapath.NumOutcomes; o++ {
		for r := compile.Reason(0); r < compile.NumReasons; r++ {
			if got := oc[o][r].Packets; got != want[o][r] {
				t.Errorf("%s %s: %d packets, want %d", o, r, got, want[o][r])
			}
		}
	}
	if got := oc[datapath.OutXDPDrop][compile.ReasonRuleDrop].Bytes; got != 3*uint64(len(web)) {
		t.Errorf("XDP_DROP rule-drop: %d bytes, want %d", got, 3*len(web))
	}
	outs, reasons := oc.Outcomes(), oc.Reasons()
	if outs[datapath.OutXDPPass].Packets != 6 || outs[datapath.OutTCShot].Packets != 2 || outs[datapath.OutXDPTx].Packets != 1 {
		t.Errorf("per outcome: %+v", outs)
	}
	if reasons[compile.ReasonRuleDrop].Packets != 5 {
		t.Errorf("rule-drop over both hooks: %d, want 5", reasons[compile.ReasonRuleDrop].Packets)
	}
	rc, err := f.dp.ReasonCounters()
	if err != nil {
		t.Fatal(err)
	}
	for r := range rc {
		if !sameCounts(rc[r], reasons[r]) {
			t.Errorf("ReasonCounters %s: %+v, want the outcomes' sum %+v", compile.Reason(r), rc[r], reasons[r])
		}
	}
}

// TestLastHit: a rule's counter carries the wall-clock time of its last
// packet (the data plane's jiffies converted in Go); a rule never hit has
// none.
func TestLastHit(t *testing.T) {
	f := newFixture(t)
	f.installText("-A INPUT -p tcp --dport 22 -j ACCEPT\n-A INPUT -p tcp --dport 80 -j DROP\n")
	before := time.Now()
	f.mustRun(v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22).Bytes(), "")
	after := time.Now()
	// Let the stamp age by many ticks, so that a wrong tick length or
	// offset shows: the conversion must still place the packet between
	// before and after, give or take the tick it names. (No timing is
	// judged: the bounds are clock readings around the packet.)
	time.Sleep(300 * time.Millisecond)
	hit, err := f.dp.RuleCounter(f.ids[0])
	if err != nil {
		t.Fatal(err)
	}
	var res unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &res); err != nil {
		t.Fatal(err)
	}
	tick := time.Duration(res.Nano())
	lo, hi := before.Add(-2*tick-time.Millisecond), after.Add(time.Millisecond)
	if hit.Packets != 1 || hit.Last.Before(lo) || hit.Last.After(hi) {
		t.Errorf("rule hit between %s and %s (tick %s): counter %+v", before.Format(time.StampMicro),
			after.Format(time.StampMicro), tick, hit)
	}
	missed, err := f.dp.RuleCounter(f.ids[1])
	if err != nil || !missed.Last.IsZero() || missed.Packets != 0 {
		t.Errorf("rule never hit: %+v, %v", missed, err)
	}
}

// TestRuleCountersBatch: RuleCounters (batch reads, across batches) agrees
// with RuleCounter for every id asked, in the order asked.
func TestRuleCountersBatch(t *testing.T) {
	f := newFixture(t)
	rs, err := rules.Parse("t", []byte("-A INPUT -p tcp --dport 22 -j ACCEPT\n-A INPUT -p tcp --dport 80 -j DROP\n"), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint32{9000, 17} // beyond the first batch of slots, and within it
	lim := f.dp.Limits()
	tables, _, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: f.ifaces,
		MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.dp.Install(tables); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		f.mustRun(v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 22).Bytes(), "")
	}
	f.mustRun(v4pkt(6, "1.2.3.4", "10.9.9.9", 1, 80).Bytes(), "")
	ask := []uint32{17, compile.PolicyID(0, false), 9000, 5000}
	got, err := f.dp.RuleCounters(ask)
	if err != nil {
		t.Fatal(err)
	}
	wantPkts := []uint64{1, 0, 3, 0}
	for i, id := range ask {
		one, err := f.dp.RuleCounter(id)
		if err != nil {
			t.Fatal(err)
		}
		if !sameCounts(got[i], one) || got[i].Packets != wantPkts[i] {
			t.Errorf("id %d: batch %+v, single %+v, want %d packets", id, got[i], one, wantPkts[i])
		}
	}
}

// sameCounts compares two reads of one counter: the same packets and
// bytes, and last-hit times equal but for the two reads' clock pairings
// (microseconds apart).
func sameCounts(a, b datapath.Counter) bool {
	d := a.Last.Sub(b.Last)
	return a.Packets == b.Packets && a.Bytes == b.Bytes && a.Last.IsZero() == b.Last.IsZero() &&
		d < time.Millisecond && d > -time.Millisecond
}

// TestCTWalkBatches: the conntrack table is read in batches; a table of
// more entries than one batch holds is read whole, each entry once, by
// Connections, CTStats and CTFlush alike.
func TestCTWalkBatches(t *testing.T) {
	const flows = 9000 // over two batches of 4096
	f := newFixtureLimits(t, datapath.Limits{Conntrack: 16384})
	f.installText(ctRules)
	for i := 0; i < flows; i++ {
		pk := &packet.Packet{Src: netip.AddrFrom4([4]byte{10, 201, byte(i >> 8), byte(i)}), Dst: ct4.srv,
			Proto: packet.ProtoUDP, SPort: 1000, DPort: 53}
		if r := f.mustRun(pk.Bytes(), "eth0"); r.XDPAction != datapath.XDPPass {
			t.Fatalf("flow %d: action %d", i, r.XDPAction)
		}
	}
	es, err := f.dp.Connections()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.AddrPort]bool{}
	for _, e := range es {
		seen[e.Src] = true
	}
	if len(es) != flows || len(seen) != flows {
		t.Errorf("Connections: %d entries, %d distinct, want %d", len(es), len(seen), flows)
	}
	st, err := f.dp.CTStats()
	if err != nil || st.Entries != flows || st.ByState["UNREPLIED"] != flows || st.Expired != 0 {
		t.Errorf("CTStats: %+v (%v), want %d UNREPLIED", st, err, flows)
	}
	if n, err := f.dp.CTFlush(); err != nil || n != flows {
		t.Errorf("CTFlush removed %d (%v), want %d", n, err, flows)
	}
	if st, err := f.dp.CTStats(); err != nil || st.Entries != 0 {
		t.Errorf("after flush: %+v (%v)", st, err)
	}
}

// TestOutcomeMirrorsHeader: datapath.Outcome is enum fw_out of
// bpf/types.h, member for member, and the XDP outcomes are the XDP action
// values (the ingress program counts its return value as the outcome).
func TestOutcomeMirrorsHeader(t *testing.T) {
	h, err := os.ReadFile("../../bpf/types.h")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)enum fw_out \{(.*?)\};`).FindSubmatch(h)
	if body == nil {
		t.Fatal("enum fw_out not found in bpf/types.h")
	}
	want := map[string]datapath.Outcome{
		"FW_OUT_XDP_ABORTED": datapath.OutXDPAborted, "FW_OUT_XDP_DROP": datapath.OutXDPDrop,
		"FW_OUT_XDP_PASS": datapath.OutXDPPass, "FW_OUT_XDP_TX": datapath.OutXDPTx,
		"FW_OUT_XDP_REDIRECT": datapath.OutXDPRedirect, "FW_OUT_TC_OK": datapath.OutTCOK,
		"FW_OUT_TC_SHOT": datapath.OutTCShot, "FW_OUT_TC_REDIRECT": datapath.OutTCRedirect,
		"FW_NUM_OUTS": datapath.NumOutcomes,
	}
	members := regexp.MustCompile(`(?m)^\s*(FW_[A-Z_]+)\s*(?:=\s*(\d+))?,`).FindAllSubmatch(body[1], -1)
	if len(members) != len(want) {
		t.Fatalf("enum fw_out has %d members, Go mirrors %d", len(members), len(want))
	}
	for i, m := range members {
		name := string(m[1])
		if len(m[2]) > 0 {
			if v, _ := strconv.Atoi(string(m[2])); v != i {
				t.Errorf("%s = %s in C, but is member %d", name, m[2], i)
			}
		}
		if o, ok := want[name]; !ok || int(o) != i {
			t.Errorf("enum fw_out: %s is %d in C, %d in Go (known: %v)", name, i, o, ok)
		}
	}
	for o, act := range map[datapath.Outcome]int{datapath.OutXDPAborted: datapath.XDPAborted,
		datapath.OutXDPDrop: datapath.XDPDrop, datapath.OutXDPPass: datapath.XDPPass, datapath.OutXDPTx: datapath.XDPTx} {
		if int(o) != act {
			t.Errorf("%s is %d, the XDP action %d", o, o, act)
		}
	}
}
