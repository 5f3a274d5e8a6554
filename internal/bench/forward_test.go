package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/bits"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestTrafficgenRewritesRouterFields: a page-pool frame comes back to the
// generator with what a router wrote into it (the next hop's MACs, TTL one
// less, a translated destination); the generator's next frame from that
// page must be its template again. Without it the kernel router dropped
// most frames of a burst as not addressed to it (OTHERHOST).
func TestTrafficgenRewritesRouterFields(t *testing.T) {
	testutil.RequireRoot(t)
	topo := &Topology{GenIf: Iface{Index: 1, MAC: []byte{2, 0, 0, 0, 0, 1}}, DUTIf: Iface{MAC: []byte{2, 0, 0, 0, 0, 2}}}
	g, err := newGenerator(topo, sinkAddr.Addr(), true, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	src := TrafficSrc.Addr().As4()
	if err := g.Aim([]trafficgenGenAim{{Saddr: binary.NativeEndian.Uint32(src[:]), Dport: bits.ReverseBytes16(TrafficDPort)}}); err != nil {
		t.Fatal(err)
	}
	frame, err := g.Frame(64)
	if err != nil {
		t.Fatal(err)
	}
	used := slices.Clone(frame)
	copy(used[0:6], []byte{2, 9, 9, 9, 9, 9})  // the sink's MAC
	copy(used[6:12], []byte{2, 8, 8, 8, 8, 8}) // the router's egress MAC
	used[14+8] = 63                            // TTL
	copy(used[14+16:14+20], []byte{10, 9, 9, 9})
	used[14+20+2], used[14+20+3] = 0x12, 0x34 // destination port
	out := make([]byte, len(used))
	ret, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: used, DataOut: out})
	if err != nil {
		t.Fatal(err)
	}
	if ret != 4 { // XDP_REDIRECT
		t.Fatalf("XDP action %d, want XDP_REDIRECT", ret)
	}
	p, err := packet.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[0:6], topo.DUTIf.MAC) || !bytes.Equal(out[6:12], topo.GenIf.MAC) {
		t.Errorf("MACs %v -> %v, want %v -> %v", net.HardwareAddr(out[6:12]), net.HardwareAddr(out[0:6]), topo.GenIf.MAC, topo.DUTIf.MAC)
	}
	if out[14+8] != packet.DefaultTTL || p.Dst != sinkAddr.Addr() || p.DPort != TrafficDPort || p.SPort != oneFlowSPort {
		t.Errorf("got TTL %d, %s; want TTL %d to %v port %d from port %d", out[14+8], p, packet.DefaultTTL, sinkAddr.Addr(), TrafficDPort, oneFlowSPort)
	}
	if sum := packet.Checksum(out[14:34]); sum != 0 {
		t.Errorf("IPv4 header checksum does not verify (%#x)", sum)
	}
	// Tagged mode: the aim's index (0, the only one) in the payload, and
	// a UDP checksum that verifies.
	if tag := out[14+28 : 14+32]; !bytes.Equal(tag, []byte{0, 0, 0, 0}) {
		t.Errorf("tag %v, want aim 0", tag)
	}
	if out[14+26] == 0 && out[14+27] == 0 {
		t.Error("no UDP checksum")
	} else if sum := packet.L4Checksum(p.Src, p.Dst, packet.ProtoUDP, out[14+20:]); sum != 0 {
		t.Errorf("UDP checksum does not verify (%#x)", sum)
	}
}

// TestForwardVerify: the accounting refuses a frame the sink found wrong,
// a translation where none is due (and the reverse), a packet unaccounted
// for, and a packet that did not take the intended path.
func TestForwardVerify(t *testing.T) {
	b := &fwdBench{}
	plain, nat := &fwdConfig{name: "plain", proof: func() (uint64, string, error) { return 0, "", nil }}, &fwdConfig{name: "nat", nat: true}
	xnat := &fwdConfig{name: "xnat", nat: true, xnat: true}
	run := ForwardRun{Delivered: 100}
	for _, c := range []struct {
		name string
		cfg  *fwdConfig
		d    fwdCounts
		want string // "" = accepted
	}{
		{"all intact", plain, fwdCounts{sinkOK: 100, proof: 100}, ""},
		{"some refused by the sink's full ring", plain, fwdCounts{sinkOK: 90, refused: 10, sinkDrop: 10, proof: 100}, ""},
		{"dropped by the sink after taking them", plain, fwdCounts{sinkOK: 90, refused: 10, sinkDrop: 12, proof: 100}, "the sink dropped 2 frames"},
		{"translated", nat, fwdCounts{sinkNAT: 100}, ""},
		{"a bad frame", plain, fwdCounts{sinkOK: 99, sinkBad: 1, proof: 100}, "not as forwarding must make them"},
		{"one lost", plain, fwdCounts{sinkOK: 99, proof: 100}, "1 unaccounted for"},
		{"translated, not due", plain, fwdCounts{sinkOK: 99, sinkNAT: 1, proof: 100}, "1 frames translated"},
		{"untranslated, due", nat, fwdCounts{sinkOK: 1, sinkNAT: 99}, "1 frames untranslated"},
		{"another path", plain, fwdCounts{sinkOK: 100, proof: 99, proofWhat: "the rule"}, "the rule counted 99"},
		{"xdpfw translated by bindings", xnat, fwdCounts{sinkNAT: 100}, ""},
		{"xdpfw bound during the run", xnat, fwdCounts{sinkNAT: 100, natC: 3}, "nat counters moved by 3"},
	} {
		err := b.verify(c.cfg, run, c.d)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestForwardRuleSets: the FORWARD chain parses as xdpfw reads it (one
// ESTABLISHED rule, then one NEW rule per port), the many-flows traffic
// walks every rule, and the one flow hits one rule.
func TestForwardRuleSets(t *testing.T) {
	const n = 100
	rs, err := rules.Parse("forward", []byte(forwardRuleSet(n)), rules.ParseOptions{Family: rules.FamilyIPv4})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Rules) != n+1 {
		t.Fatalf("%d rules, want %d", len(rs.Rules), n+1)
	}
	if nft := nftForwardRuleSet(n); strings.Count(nft, "ct state new accept") != n || !strings.Contains(nft, "policy drop") {
		t.Errorf("nft rule set:\n%s", nft)
	}
	ports := map[uint16]int{}
	for _, a := range fwdAims(FlowsMany, n) {
		ports[a.Dport>>8|a.Dport<<8]++
	}
	if len(ports) != n || len(fwdAims(FlowsMany, n)) != fwdManyFlows || len(fwdAims(FlowsOne, n)) != 1 {
		t.Errorf("many flows hit %d of %d rules; %d flows", len(ports), n, len(fwdAims(FlowsMany, n)))
	}
}

// TestForwardQuick runs `xdpfw bench forward --quick` (with a few extra
// routes): every configuration is checked (each packet the router took in
// forwarded intact, established flows, by the intended rule or path) and
// run, nothing is left behind, and the table, report and bars come out.
func TestForwardQuick(t *testing.T) {
	testutil.RequireRoot(t)
	opt := QuickForwardOptions()
	opt.Routes = []int{0, 1000}
	var progress bytes.Buffer
	opt.Progress = &progress
	res, err := Forward(context.Background(), opt)
	if l := leftovers(t); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	stateful := map[string]bool{FwdIptables: true, FwdNft: true, FwdXdpfwStack: true, FwdXdpfwXDP: true, FwdXdpfwNAT: true}
	if !slices.Contains(res.Configs, FwdXdpfwNAT) {
		t.Errorf("configurations %v: no %s", res.Configs, FwdXdpfwNAT)
	}
	for c := range res.Skipped {
		if forwardToolsMissing(c) == nil {
			t.Errorf("%s skipped although its tools are installed: %s", c, res.Skipped[c])
		}
	}
	want := len(res.Configs) * len(opt.Flows) * len(opt.Sizes) * len(opt.Routes)
	if len(res.Checks) != want || len(res.Points) != want {
		t.Fatalf("%d checks, %d points; want %d", len(res.Checks), len(res.Points), want)
	}
	for _, c := range res.Checks {
		flows := 1
		if c.Flows == FlowsMany {
			flows = fwdManyFlows
		}
		switch {
		case c.Delivered == 0 || c.Forwarded != c.Delivered:
			t.Errorf("check %+v: the router forwarded %d of %d", c, c.Forwarded, c.Delivered)
		case stateful[c.Config] && c.Established != flows:
			t.Errorf("check %+v: %d flows established, want %d", c, c.Established, flows)
		case c.Config != FwdKernel && c.Proof == "the sink's counts":
			t.Errorf("check %+v: no proof of the path", c)
		}
	}
	for _, p := range res.Points {
		if len(p.Runs) != 1 {
			t.Fatalf("%+v: %d runs", p, len(p.Runs))
		}
		r := p.Runs[0]
		if r.Offered == 0 || r.Delivered+r.RingDropped != r.Offered || r.Forwarded != r.Delivered || r.NAPINS == 0 {
			t.Errorf("%s %s %d routes: %+v", p.Config, p.Flows, p.Routes, r)
		}
		if p.NsPerPacket <= 0 || p.VsKernel <= 0 || p.VsFloor <= 0 || (p.Routes != 0) != (p.VsNoRoutes > 0) {
			t.Errorf("%s %s %d routes: medians or ratios missing: %+v", p.Config, p.Flows, p.Routes, p)
		}
	}
	bars := 3 // the fast path against the kernel and the floor, the routes
	if slices.Contains(res.Configs, FwdXdpfwNAT) || slices.Contains(res.Configs, FwdXdpfwKMasq) {
		bars++ // MASQUERADE
	}
	if len(res.Bars) != bars {
		t.Errorf("bars: %+v", res.Bars)
	}
	var table strings.Builder
	WriteForwardTable(&table, res)
	for _, cfg := range append(slices.Clone(res.Configs), "bars (issue 16)") {
		if !strings.Contains(table.String(), cfg) {
			t.Errorf("table lacks %s:\n%s", cfg, table.String())
		}
	}
	dir := t.TempDir()
	if err := WriteForwardReport(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index.html", "results.json", "cost-64-many.png", "rate-64-one.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("report file %s: %v", f, err)
		}
	}
}

// TestFwdRoutes: the extra routes are distinct unicast /24s that never
// cover the topology's addresses, and a shorter table is a prefix of a
// longer one (setRoutes removes the tail).
func TestFwdRoutes(t *testing.T) {
	rs := fwdRoutes(100000)
	seen := map[netip.Prefix]bool{}
	for _, p := range rs {
		a := p.Addr().As4()
		if seen[p] || p.Bits() != 24 || a[0] == 0 || a[0] == 10 || a[0] == 127 || a[0] >= 224 {
			t.Fatalf("route %v (seen before: %v)", p, seen[p])
		}
		seen[p] = true
	}
	if !slices.Equal(fwdRoutes(1000), rs[:1000]) {
		t.Error("fwdRoutes(1000) is not the first 1000 of fwdRoutes(100000)")
	}
}

// TestForwardInterrupted: ending the context (what Ctrl-C does) stops a
// run in its first measurement, and everything is removed.
func TestForwardInterrupted(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opt := QuickForwardOptions()
	opt.Flows, opt.Configs, opt.Duration = []string{FlowsMany}, []string{FwdXdpfwXDP}, time.Minute
	opt.Progress = &watchWriter{want: "check xdp-fwd", seen: cancel}
	_, err := Forward(ctx, opt)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want an interrupted run", err)
	}
	if l := leftovers(t); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestForwardToolsMissing: without nft and iptables, asking for a
// netfilter configuration fails before anything is set up, naming the
// tool; the others need none.
func TestForwardToolsMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, c := range []string{FwdKernel, FwdXdpfwStack, FwdXdpfwXDP, FwdFloor} {
		if err := forwardToolsMissing(c); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
	opt := QuickForwardOptions()
	opt.Configs = []string{FwdNft}
	_, err := Forward(context.Background(), opt)
	if err == nil || !strings.Contains(err.Error(), "configuration nftables: nft is not installed") {
		t.Errorf("got %v", err)
	}
}

// TestSinkCheckMode: in check mode the sink counts a frame intact only
// with a valid UDP checksum and its flow's first tuple; translated frames
// (the router's source) count as such, with the same rules; out of check
// mode neither is looked at.
func TestSinkCheckMode(t *testing.T) {
	testutil.RequireRoot(t)
	topo := &Topology{GenIf: Iface{Index: 1, MAC: []byte{2, 0, 0, 0, 0, 1}}, DUTIf: Iface{MAC: []byte{2, 0, 0, 0, 0, 2}}}
	g, err := newGenerator(topo, sinkAddr.Addr(), true, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Aim(fwdAims(FlowsMany, 4)[:4]); err != nil {
		t.Fatal(err)
	}
	b := &fwdBench{}
	// The frames as the generator sends them (no router between).
	b.progs, err = loadDUTPrograms(&Topology{}, map[string]any{"sink_dmac": [6]byte{2, 0, 0, 0, 0, 2}, "sink_smac": [6]byte{2, 0, 0, 0, 0, 1},
		"sink_ttl": uint8(packet.DefaultTTL), "sink_daddr": wire4(sinkAddr.Addr()), "sink_src_net": wire4(TrafficSrc.Masked().Addr()),
		"sink_src_mask": wire4(netip.MustParseAddr("255.255.128.0")), "sink_nat_saddr": wire4(routeAddr.Addr())})
	if err != nil {
		t.Fatal(err)
	}
	defer b.progs.objs.Close()
	template, err := g.Frame(64)
	if err != nil {
		t.Fatal(err)
	}
	next := func() []byte { // the generator's next frame: flows 0, 1, 2, 3, 0, ...
		out := make([]byte, len(template))
		if _, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: template, DataOut: out}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// edit rewrites a frame's source address and port with both checksums
	// recomputed (as a translating router would), or breaks its UDP
	// checksum.
	edit := func(f []byte, src netip.Addr, sport uint16) []byte {
		a := src.As4()
		copy(f[14+12:14+16], a[:])
		binary.BigEndian.PutUint16(f[34:36], sport)
		f[14+10], f[14+11], f[40], f[41] = 0, 0, 0, 0
		binary.BigEndian.PutUint16(f[14+10:], packet.Checksum(f[14:34]))
		binary.BigEndian.PutUint16(f[40:], packet.L4Checksum(src, sinkAddr.Addr(), packet.ProtoUDP, f[34:]))
		return f
	}
	send := func(f []byte) (ok, nat, bad uint64) {
		if _, err := b.progs.objs.BenchSink.Run(&ebpf.RunOptions{Data: f}); err != nil {
			t.Fatal(err)
		}
		for _, e := range []struct {
			slot uint32
			to   *uint64
		}{{dutSlotSinkOK, &ok}, {dutSlotSinkNAT, &nat}, {dutSlotSinkBad, &bad}} {
			if *e.to, err = b.progs.count(e.slot); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if err := b.sinkCheckMode(true); err != nil {
		t.Fatal(err)
	}
	f0 := next()
	if ok, _, bad := send(f0); ok != 1 || bad != 0 {
		t.Fatalf("a frame as the generator sends it: %d intact, %d bad", ok, bad)
	}
	f1 := next()
	f1[len(f1)-1] ^= 1 // the payload changed, the checksum not
	if _, _, bad := send(f1); bad != 1 {
		t.Errorf("a frame whose UDP checksum does not verify: %d bad, want 1", bad)
	}
	f2 := edit(next(), routeAddr.Addr(), 2000) // flow 2, translated
	if _, nat, bad := send(f2); nat != 1 || bad != 1 {
		t.Errorf("a translated frame: %d translated, %d bad; want 1, 1", nat, bad)
	}
	_ = next()                                  // flow 3
	f0b := edit(next(), routeAddr.Addr(), 2000) // flow 0 again, now with another tuple
	if _, _, bad := send(f0b); bad != 2 {
		t.Errorf("a flow with a second tuple: %d bad, want 2", bad)
	}
	var f dutSinkFlow
	if err := b.progs.objs.SinkFlows.Lookup(uint32(0), &f); err != nil || f.Packets != 1 || f.Changed != 1 {
		t.Errorf("flow 0: %+v (%v), want one frame and one changed", f, err)
	}
	if err := b.sinkCheckMode(false); err != nil {
		t.Fatal(err)
	}
	if ok, _, bad := send(f1); ok != 2 || bad != 2 {
		t.Errorf("out of check mode, the bad checksum: %d intact, %d bad; want 2, 2", ok, bad)
	}
}
