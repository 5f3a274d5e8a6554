package datapath_test

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.RunWithFDCheck(m)) }

// fixture is a loaded data plane inside a throwaway network namespace, with
// dummy interfaces packets can "arrive" on.
type fixture struct {
	t      testing.TB
	ns     *testutil.NetNS
	dp     *datapath.Datapath
	ifaces map[string]uint32
	rs     *rules.RuleSet
	ids    []uint32
	// the default log budget install compiles with (zero: compile's)
	logRate  rules.LogRate
	logBurst uint32
	tables   *compile.Tables   // the installed tables
	addrs    compile.AddrTable // the local routing table fw_addrtypes holds (setAddrs)
}

// setAddrs puts tbl in the data plane's local routing table (-m addrtype).
func (f *fixture) setAddrs(tbl compile.AddrTable) {
	f.t.Helper()
	if err := f.dp.SetAddrTypes(tbl); err != nil {
		f.t.Fatal(err)
	}
	got, err := f.dp.AddrTypes()
	if err != nil || len(got) != len(tbl) {
		f.t.Fatalf("fw_addrtypes holds %d routes (%v), want %d", len(got), err, len(tbl))
	}
	f.addrs = tbl
}

var fixtureIfaces = []string{"eth0", "eth1", "veth0"}

func newFixture(t *testing.T) *fixture { return newFixtureB(t) }

// newFixtureB is newFixture for tests and benchmarks alike.
func newFixtureB(t testing.TB) *fixture { return newFixtureLimits(t, datapath.Limits{}) }

// newFixtureLimits loads the data plane with the given table sizes.
func newFixtureLimits(t testing.TB, lim datapath.Limits) *fixture {
	t.Helper()
	testutil.RequireRoot(t)
	f := &fixture{t: t, ns: testutil.NewNetNS(t), ifaces: map[string]uint32{}}
	pins := testutil.BPFFS(t) + "/xdpfw"
	err := f.ns.Do(func() error {
		for i, name := range fixtureIfaces {
			// veth, not dummy: kernels without CONFIG_DUMMY exist (this VM's)
			veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: fmt.Sprintf("peer%d", i)}
			if err := netlink.LinkAdd(veth); err != nil {
				return fmt.Errorf("adding %s: %w", name, err)
			}
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
			f.ifaces[name] = uint32(l.Attrs().Index)
		}
		f.ifaces["lo"] = 1
		var err error
		f.dp, err = datapath.Load(pins, lim)
		return err
	})
	if err != nil {
		t.Fatalf("setting up: %v", err)
	}
	t.Cleanup(func() {
		f.dp.Close()
		if err := datapath.Unpin(pins); err != nil {
			t.Errorf("unpin: %v", err)
		}
	})
	return f
}

// compileFor compiles rs for f's data plane (and its default log budget)
// with ids FirstRuleID+i.
func (f *fixture) compileFor(rs *rules.RuleSet) (*compile.Tables, []uint32) {
	f.t.Helper()
	ids := make([]uint32, len(rs.Rules))
	for i := range ids {
		ids[i] = uint32(compile.FirstRuleID + i)
	}
	lim := f.dp.Limits()
	tables, _, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: f.ifaces,
		LogRate: f.logRate, LogBurst: f.logBurst,
		MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
	if err != nil {
		f.t.Fatalf("compile: %v\n%s", err, head(rs.String(), 40))
	}
	return tables, ids
}

// install compiles and installs rs with ids FirstRuleID+i.
func (f *fixture) install(rs *rules.RuleSet) {
	f.t.Helper()
	tables, ids := f.compileFor(rs)
	if err := f.dp.Install(tables); err != nil {
		f.t.Fatalf("install: %v", err)
	}
	f.rs, f.ids, f.tables = rs, ids, tables
}

func (f *fixture) installText(text string) {
	f.t.Helper()
	rs, err := rules.Parse("test.rules", []byte(text), rules.ParseOptions{})
	if err != nil {
		f.t.Fatalf("parse: %v", err)
	}
	f.install(rs)
}

// run traces frame arriving on iface ("" = lo) inside the namespace.
func (f *fixture) run(frame []byte, iface string) (datapath.TraceResult, error) {
	return f.runAssuming(frame, iface, datapath.NoCTState)
}

// runAssuming is run with the packet in connection state ctstate
// (datapath.NoCTState: as conntrack says).
func (f *fixture) runAssuming(frame []byte, iface string, ctstate int) (datapath.TraceResult, error) {
	var res datapath.TraceResult
	ifindex := uint32(1)
	if iface != "" {
		ifindex = f.ifaces[iface]
	}
	err := f.ns.Do(func() error {
		var err error
		res, err = f.dp.Record(frame, ifindex, ctstate)
		return err
	})
	return res, err
}

func (f *fixture) mustRun(frame []byte, iface string) datapath.TraceResult {
	f.t.Helper()
	r, err := f.run(frame, iface)
	if err != nil {
		f.t.Fatalf("run: %v", err)
	}
	return r
}

var (
	macA = [6]byte{2, 0, 0, 0, 0, 1}
	macB = [6]byte{2, 0, 0, 0, 0, 2}
)

func v4pkt(proto uint8, src, dst string, sport, dport uint16) *packet.Packet {
	return &packet.Packet{SrcMAC: macA, DstMAC: macB, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst),
		Proto: proto, SPort: sport, DPort: dport, TCPFlags: packet.TCPSyn, Payload: []byte("payload")}
}

// head is the first n lines of s (failure messages of large rule sets).
func head(s string, n int) string {
	lines := strings.SplitAfterN(s, "\n", n+1)
	if len(lines) > n {
		return strings.Join(lines[:n], "") + fmt.Sprintf("... (%d more lines)\n", strings.Count(lines[n], "\n"))
	}
	return s
}
