package datapath_test

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// kernelNATEntry makes the kernel's conntrack of f's namespace hold a UDP
// connection it translates: 127.0.0.1:5555 -> 192.0.2.1:9, DNATed by its
// OUTPUT chain to 127.0.0.1:9. Its answer, 127.0.0.1:9 -> 127.0.0.1:5555,
// is then the reply direction of a kernel-NATed connection.
func kernelNATEntry(tb testing.TB, f *fixture) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "route", "add", "192.0.2.0/24", "dev", "lo"},
		{"iptables", "-t", "nat", "-A", "OUTPUT", "-p", "udp", "-d", "192.0.2.1", "--dport", "9", "-j", "DNAT", "--to-destination", "127.0.0.1:9"},
	} {
		if out, err := f.ns.Exec(ctx, args[0], args[1:]...); err != nil {
			tb.Skipf("%v: %v\n%s (no kernel nat table here)", args, err, out)
		}
	}
	err := f.ns.Do(func() error {
		c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5555}, &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 9})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("x"))
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
}

const kctRules = "-P INPUT DROP\n-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT\n-A INPUT -p udp --dport 7 -j ACCEPT\n"

// TestKernelNATJudged: a packet xdpfw's conntrack does not know, answering
// a connection the kernel's conntrack translates, is ESTABLISHED as the
// kernel's conntrack says (counted kernel_nat); with the setting off, or
// for a connection the kernel does not know, it is what xdpfw's own
// conntrack makes of it (NEW: dropped by the policy).
func TestKernelNATJudged(t *testing.T) {
	if err := datapath.KernelCTAvailable(); err != nil {
		t.Skip(err)
	}
	f := newFixture(t)
	f.installText(kctRules)
	kernelNATEntry(t, f)
	answer := v4pkt(packet.ProtoUDP, "127.0.0.1", "127.0.0.1", 9, 5555).Bytes()
	stray := v4pkt(packet.ProtoUDP, "127.0.0.1", "127.0.0.1", 9, 5556).Bytes()
	for _, c := range []struct {
		name   string
		off    bool
		frame  []byte
		accept bool
		state  uint8
	}{
		{"answer", false, answer, true, compile.CTEstablished},
		{"stray", false, stray, false, compile.CTNew},
		{"answer with --ct-kernel-nat off", true, answer, false, compile.CTNew},
	} {
		if err := f.dp.SetConfig(datapath.Config{KernelNATOff: c.off}); err != nil {
			t.Fatal(err)
		}
		before, _ := f.dp.CTStats()
		var r datapath.TraceResult
		err := f.ns.Do(func() (err error) { r, err = f.dp.Record(c.frame, 0, datapath.NoCTState); return err })
		if err != nil {
			t.Fatal(err)
		}
		after, _ := f.dp.CTStats()
		if (r.XDPAction == datapath.XDPPass) != c.accept || r.CTState != c.state {
			t.Errorf("%s: %+v; want accepted %v, state %v", c.name, r, c.accept, c.state)
		}
		n := after.Counters[conntrack.StatNames[conntrack.StatKernelNAT]] - before.Counters[conntrack.StatNames[conntrack.StatKernelNAT]]
		if want := map[bool]uint64{true: 1}[c.accept]; n != want {
			t.Errorf("%s: kernel_nat counted %d, want %d", c.name, n, want)
		}
	}
}

// BenchmarkKernelCT measures what asking the kernel's conntrack costs a
// packet xdpfw's conntrack does not know (BPF_PROG_TEST_RUN, ns/packet,
// interleaved rounds with the setting on and off, medians):
//
//   - miss: a NEW packet of no kernel connection (the kfunc's lookup
//     misses; dropped by the policy, so nothing is recorded and every run
//     misses again);
//
//   - syn: a TCP SYN of no connection (not asked: nothing added);
//
//   - nat: the answer to a kernel-NATed connection (the lookup finds it,
//     the tuples are read; accepted ESTABLISHED; off: NEW, dropped).
//
//     go test -run '^$' -bench KernelCT ./internal/datapath/
func BenchmarkKernelCT(b *testing.B) {
	if err := datapath.KernelCTAvailable(); err != nil {
		b.Skip(err)
	}
	f := newFixtureB(b)
	f.installText(kctRules)
	kernelNATEntry(b, f)
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"miss", v4pkt(packet.ProtoUDP, "10.1.2.3", "127.0.0.1", 40000, 53).Bytes()},
		{"syn", (&packet.Packet{Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("127.0.0.1"), Proto: packet.ProtoTCP,
			SPort: 40000, DPort: 22, TCPFlags: packet.TCPSyn}).Bytes()},
		{"nat", v4pkt(packet.ProtoUDP, "127.0.0.1", "127.0.0.1", 9, 5555).Bytes()},
	} {
		b.Run(c.name, func(b *testing.B) {
			ns := [2][]float64{}
			for r := 0; r < 11; r++ {
				for j := range 2 {
					off := (j+r)%2 == 1
					if err := f.dp.SetConfig(datapath.Config{KernelNATOff: off}); err != nil {
						b.Fatal(err)
					}
					var per time.Duration
					err := f.ns.Do(func() (err error) { _, per, err = f.dp.Program().Benchmark(c.frame, b.N, nil); return err })
					if err != nil {
						b.Fatal(err)
					}
					i := 0
					if off {
						i = 1
					}
					ns[i] = append(ns[i], float64(per.Nanoseconds()))
				}
			}
			b.ReportMetric(medianOf(ns[0]), "on-ns/pkt")
			b.ReportMetric(medianOf(ns[1]), "off-ns/pkt")
			b.ReportMetric(medianOf(ns[0])-medianOf(ns[1]), "added-ns/pkt")
		})
	}
}

// TestUpgradeSettings: over an earlier version's fw_config_map (struct
// fw_config before kernel_ct_off), a load carries the settings over (what
// ConfigInForce reads before SetConfig), and PinProgram keeps what
// SetConfig wrote since.
func TestUpgradeSettings(t *testing.T) {
	dir := pinnedFresh(t)
	// 64 bytes: malformed_pass, ct_full_accept, ct_timeout[11],
	// ct_tcp_strict (at 52), reject_rate (56), reject_burst (60)
	old, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 64, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	v := make([]byte, 64)
	binary.LittleEndian.PutUint32(v[52:], 1)
	binary.LittleEndian.PutUint32(v[56:], 123)
	if err := old.Put(uint32(0), v); err != nil {
		t.Fatal(err)
	}
	repin(t, dir, "fw_config_map", old)
	dp, err := datapath.Load(dir, datapath.Limits{})
	if err != nil {
		t.Fatalf("load over an earlier version's fw_config_map: %v", err)
	}
	defer dp.Close()
	if c, err := dp.ConfigInForce(); err != nil || !c.CTTCPStrict || c.RejectRate != 123 || c.KernelNATOff {
		t.Fatalf("settings after the load: %+v %v; want the earlier ones (strict pickup, reject rate 123), kernel NAT on", c, err)
	}
	if err := dp.SetConfig(datapath.Config{KernelNATOff: true}); err != nil {
		t.Fatal(err)
	}
	if err := dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	od, err := datapath.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer od.Close()
	if c, err := od.ConfigInForce(); err != nil || !c.KernelNATOff || c.CTTCPStrict {
		t.Fatalf("pinned settings: %+v %v; want SetConfig's", c, err)
	}
}
