package datapath_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/testutil"
)

// renamed is spec's map name with its struct value (or key) members
// renamed as from says (old name -> earlier name): the layout an earlier
// version had.
func renamed(spec *ebpf.CollectionSpec, name string, key bool, from map[string]string) {
	ms := spec.Maps[name]
	t := &ms.Value
	if key {
		t = &ms.Key
	}
	s := btf.Copy(*t)
	st := btf.UnderlyingType(s).(*btf.Struct)
	for i, m := range st.Members {
		if n, ok := from[m.Name]; ok {
			st.Members[i].Name = n
		}
	}
	*t = st
}

// earlierLayouts: fw_ct_entry's padding was "zone" (gone since), and
// fw_node had padding where dim2 and mask are: the same sizes, values
// laid out otherwise.
func earlierLayouts(spec *ebpf.CollectionSpec) {
	renamed(spec, "fw_ct", false, map[string]string{"_pad": "zone"})
	renamed(spec, "fw_nodes", false, map[string]string{"dim2": "_pad0", "mask": "_pad1"})
}

// TestUpgradeLayouts: over the pins of an earlier version whose fw_ct
// and fw_nodes values are laid out otherwise at the same sizes (and with
// a -P INPUT DROP + ESTABLISHED rule set in force), commands of this
// version refuse the pins rather than misread them, and a load of this
// version goes through, make before break: the classifier tables are made
// anew and filled from the rules, the connections are carried over with
// their fields, and a UDP stream through a veth (an accepted port, a
// dropped port, and a flow only its conntrack entry lets in) loses
// nothing and lets nothing through across the program swap.
func TestUpgradeLayouts(t *testing.T) {
	restore := datapath.EditSpec(earlierLayouts)
	f := newFixture(t)
	restore()
	f.installText(`
-P INPUT DROP
-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A INPUT -p udp --dport 5001 -j ACCEPT
-A INPUT -p udp --dport 5002 -j DROP
`)
	peer, fw, _ := f.peerPairAddrs([]string{"10.77.0.1/24"}, []string{"10.77.0.2/24"})
	if err := f.ns.Do(func() error { _, err := f.dp.Attach(fw.Name, datapath.ModeNative); return err }); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	if _, err := datapath.Open(f.dp.Dir()); !errors.Is(err, ebpf.ErrMapIncompatible) || !strings.Contains(err.Error(), "fw_ct") {
		t.Fatalf("open an earlier layout's pins: %v, want refused naming fw_ct", err)
	}

	// receivers on the firewall's side: 5001, 5002, and 5003 connected
	// to the peer's 6003, which only conntrack lets in (OUTPUT made it)
	srv := netip.MustParseAddr("10.77.0.1")
	cli := netip.MustParseAddr("10.77.0.2")
	r1 := udpSocket(t, f.ns, srv, 5001, netip.AddrPort{})
	r2 := udpSocket(t, f.ns, srv, 5002, netip.AddrPort{})
	r3 := udpSocket(t, f.ns, srv, 5003, netip.AddrPortFrom(cli, 6003))
	s3 := udpSocket(t, peer, cli, 6003, netip.AddrPortFrom(srv, 5003))
	s := udpSocket(t, peer, cli, 7000, netip.AddrPort{})
	if err := unix.Send(r3, []byte("open"), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := unix.Recvfrom(s3, make([]byte, 64), 0); err != nil {
		t.Fatalf("the opening datagram: %v", err)
	}
	var got [3]int
	var wg sync.WaitGroup
	var stopping atomic.Bool
	for i, fd := range []int{r1, r2, r3} {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = drain(fd, &stopping) }()
	}
	stop := make(chan struct{})
	sent := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				sent <- n
				return
			default:
			}
			for _, port := range []int{5001, 5002} {
				if err := unix.Sendto(s, []byte("x"), 0, &unix.SockaddrInet4{Port: port, Addr: srv.As4()}); err != nil {
					t.Errorf("send: %v", err)
				}
			}
			if err := unix.Send(s3, []byte("x"), 0); err != nil {
				t.Errorf("send: %v", err)
			}
			n++
			time.Sleep(200 * time.Microsecond)
		}
	}()
	waitFor(t, "the stream to start", func() bool { _, ok := connections(t, f.dp)["10.77.0.2:7000>10.77.0.1:5001"]; return ok })
	before := connections(t, f.dp)

	// the upgrade, as `xdpfw load` makes it
	var dp *datapath.Datapath
	err := f.ns.Do(func() (err error) { dp, err = datapath.Load(f.dp.Dir(), datapath.Limits{}); return err })
	if err != nil {
		close(stop)
		<-sent
		t.Fatalf("load over an earlier layout's pins: %v", err)
	}
	old := f.dp
	f.dp = dp
	tables, _ := f.compileFor(f.rs)
	if err := dp.Install(tables); err != nil {
		t.Fatal(err)
	}
	if err := f.ns.Do(func() error { _, err := dp.Attach(fw.Name, datapath.ModeAuto); return err }); err != nil {
		t.Fatal(err)
	}
	if err := dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	old.Close()
	time.Sleep(50 * time.Millisecond) // some of the stream after the swap
	close(stop)
	n := <-sent
	stopping.Store(true) // the receivers return at their next read timeout
	wg.Wait()
	lines, lost := dp.Upgrades()
	t.Logf("sent %d datagrams per port; received %v; upgrades: %s", n, got, strings.Join(lines, "; "))
	if lost != 0 {
		t.Errorf("entries lost: %d", lost)
	}
	for _, want := range []string{"fw_ct:", "fw_nodes:", "fw_entries:", "fw_active:"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("upgrades %q: want %s made anew", lines, want)
		}
	}
	if got[0] != n || got[2] != n {
		t.Errorf("accepted port received %d of %d, the established flow %d of %d: the upgrade lost packets", got[0], n, got[2], n)
	}
	if got[1] != 0 {
		t.Errorf("the dropped port received %d datagrams", got[1])
	}

	// the pins are this version's now; the connections kept their fields
	od, err := datapath.Open(dp.Dir())
	if err != nil {
		t.Fatalf("open after the upgrade: %v", err)
	}
	defer od.Close()
	after := connections(t, od)
	for k, b := range before {
		a, ok := after[k]
		if !ok {
			t.Errorf("connection %v lost", k)
			continue
		}
		if a.RuleID != b.RuleID || a.State != b.State || a.Replied != b.Replied || a.Chain != b.Chain ||
			a.Packets[0] < b.Packets[0] || a.Packets[1] < b.Packets[1] || a.Bytes[0] < b.Bytes[0] || a.Expires <= 0 {
			t.Errorf("connection %v: before %+v, after %+v", k, b, a)
		}
	}
	// the classifier answers per the rules
	p := v4pkt(17, "10.77.0.2", "10.77.0.1", 7001, 5002)
	if r := f.mustRun(p.Bytes(), "eth0"); r.XDPAction != datapath.XDPDrop || r.RuleID != f.ids[2] {
		t.Errorf("udp to 5002 after the upgrade: %+v, want dropped by rule %d", r, f.ids[2])
	}
	p.DPort = 5001
	if r := f.mustRun(p.Bytes(), "eth0"); r.XDPAction != datapath.XDPPass || r.RuleID != f.ids[1] {
		t.Errorf("udp to 5001 after the upgrade: %+v, want accepted by rule %d", r, f.ids[1])
	}
}

// TestUpgradeRefused: a pinned map whose key the generic copy cannot map
// (a member of the old key with no place in the new one: two entries
// could become one) refuses the load before anything is created, naming
// the map and the difference; the pins stay as they were.
func TestUpgradeRefused(t *testing.T) {
	testutil.RequireRoot(t)
	dir := testutil.BPFFS(t) + "/xdpfw"
	restore := datapath.EditSpec(func(spec *ebpf.CollectionSpec) {
		renamed(spec, "fw_ct", true, map[string]string{"pa": "port_a"})
	})
	dp, err := datapath.Load(dir, datapath.Limits{})
	restore()
	if err != nil {
		t.Fatal(err)
	}
	if err := dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	dp.Close()
	t.Cleanup(func() { _ = datapath.Unpin(dir) })
	pins := func() []string {
		ents, _ := os.ReadDir(dir)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	was := pins()
	dp, err = datapath.Load(dir, datapath.Limits{})
	if err == nil {
		dp.Close()
		t.Fatal("load over a conntrack table whose key lost a member succeeded")
	}
	if !errors.Is(err, ebpf.ErrMapIncompatible) || !strings.Contains(err.Error(), "fw_ct: its key") || !strings.Contains(err.Error(), "port_a") {
		t.Fatalf("load over fw_ct of another key: %v, want ErrMapIncompatible naming the map, its key and the difference", err)
	}
	t.Logf("refused as it should be: %v", err)
	if now := pins(); !slices.Equal(was, now) {
		t.Errorf("pins before %v, after the refused load %v", was, now)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "fw_ct"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if key, _, err := datapath.PinnedTypes(m); err != nil || !strings.Contains(datapath.Layout(key), "port_a") {
		t.Errorf("the pinned fw_ct must stay the earlier one: %v", err)
	}
}

// peerPairAddrs is peerPair with addresses on the firewall's end (fw0)
// and the peer's (far0).
func (f *fixture) peerPairAddrs(fwAddrs, farAddrs []string) (peer *testutil.NetNS, fw, far testutil.VethEnd) {
	f.t.Helper()
	peer = testutil.NewNetNS(f.t)
	for _, ns := range []*testutil.NetNS{f.ns, peer} {
		if err := ns.Do(func() error {
			return os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0)
		}); err != nil {
			f.t.Fatal(err)
		}
	}
	fw, far = testutil.VethPair(f.t, f.ns, "fw0", fwAddrs, peer, "far0", farAddrs)
	return peer, fw, far
}

// connections are dp's connections by their tuple.
func connections(t *testing.T, dp *datapath.Datapath) map[string]conntrack.Entry {
	t.Helper()
	cs, err := dp.Connections()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]conntrack.Entry{}
	for _, c := range cs {
		out[c.Src.String()+">"+c.Dst.String()] = c
	}
	return out
}

// udpSocket is a UDP socket of ns bound to addr:port (connected to peer
// where it is valid), with a receive timeout.
func udpSocket(t *testing.T, ns *testutil.NetNS, addr netip.Addr, port int, peer netip.AddrPort) int {
	t.Helper()
	var fd int
	err := ns.Do(func() (err error) {
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0); err != nil {
			return err
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		tv := unix.NsecToTimeval(int64(500 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: addr.As4()}); err != nil {
			return err
		}
		if peer.IsValid() {
			return unix.Connect(fd, &unix.SockaddrInet4{Port: int(peer.Port()), Addr: peer.Addr().As4()})
		}
		return nil
	})
	if err != nil {
		t.Fatalf("udp socket %v:%d in %s: %v", addr, port, ns, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// drain counts the datagrams fd receives until a read times out once
// stopping is set, or fails.
func drain(fd int, stopping *atomic.Bool) int {
	n := 0
	buf := make([]byte, 64)
	for {
		_, _, err := unix.Recvfrom(fd, buf, 0)
		switch {
		case err == nil:
			n++
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN) && !stopping.Load():
		default:
			return n
		}
	}
}

// waitFor polls cond (bounded).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("waiting for %s: not within 5s", what)
}

// TestUpgradeResize: a load with other table sizes (--max-rules,
// --ct-max) makes the classifier tables anew and carries the connections
// over into the new conntrack table, counting those it cannot hold; the
// classifier answers per the rules at the new size.
func TestUpgradeResize(t *testing.T) {
	lim := datapath.LimitsFor(1024)
	lim.Conntrack = 64
	f := newFixtureLimits(t, lim)
	f.installText("-P INPUT DROP\n-A INPUT -p udp --dport 5001 -j ACCEPT\n")
	if err := f.dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	ct, err := ebpf.LoadPinnedMap(filepath.Join(f.dp.Dir(), "fw_ct"), nil)
	if err != nil {
		t.Fatal(err)
	}
	const conns = 40
	for i := range conns {
		k := make([]byte, ct.KeySize())
		k[0], k[1], k[16] = 10, byte(i), 10  // a = 10.i.0.0, b = 10.0.0.0
		k[32], k[36], k[37] = byte(i), 17, 4 // pa, proto, family
		v := make([]byte, ct.ValueSize())
		v[0] = 0xff // expires: far away
		v[7] = 0x7f
		if err := ct.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	ct.Close()
	// a rule's counters, per CPU (fw_rule_stats grows with --max-rules)
	stats, err := ebpf.LoadPinnedMap(filepath.Join(f.dp.Dir(), "fw_rule_stats"), nil)
	if err != nil {
		t.Fatal(err)
	}
	per := make([][]byte, ebpf.MustPossibleCPU())
	var packets uint64
	for i := range per {
		per[i] = make([]byte, stats.ValueSize())
		packets += uint64(i + 1)
		per[i][0] = byte(i + 1)
	}
	if err := stats.Put(f.ids[0], per); err != nil {
		t.Fatal(err)
	}
	stats.Close()

	lim = datapath.LimitsFor(40000)
	lim.Conntrack = 32
	var dp *datapath.Datapath
	if err := f.ns.Do(func() (err error) { dp, err = datapath.Load(f.dp.Dir(), lim); return err }); err != nil {
		t.Fatalf("load with other sizes: %v", err)
	}
	f.dp.Close()
	f.dp = dp
	lines, lost := dp.Upgrades()
	t.Logf("upgrades: %s", strings.Join(lines, "; "))
	if lost != conns-32 || !slices.Contains(lines, "fw_ct: 32 entries carried over, 8 did not fit and are lost") {
		t.Errorf("lost %d, lines %q; want fw_ct's 8 connections over 32 lost", lost, lines)
	}
	if cs, err := dp.Connections(); err != nil || len(cs) != 32 {
		t.Errorf("%d connections carried (%v), want 32", len(cs), err)
	}
	if c, err := dp.RuleCounter(f.ids[0]); err != nil || c.Packets != packets {
		t.Errorf("rule %d's counter after fw_rule_stats grew: %+v %v, want %d packets", f.ids[0], c, err, packets)
	}
	if !slices.Contains(lines, "fw_ct_evict: made anew, 32 connections queued as early-drop candidates") {
		t.Errorf("lines %q: want the 32 connections queued in fw_ct_evict", lines)
	}
	f.install(f.rs)
	if err := dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	p := v4pkt(17, "10.77.0.2", "10.77.0.1", 7001, 5001)
	if r := f.mustRun(p.Bytes(), "eth0"); r.XDPAction != datapath.XDPPass || r.RuleID != f.ids[0] {
		t.Errorf("udp to 5001 after the resize: %+v, want accepted by rule %d", r, f.ids[0])
	}
	od, err := datapath.Open(dp.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer od.Close()
	if got := od.Limits(); got.Entries != 40000 || got.Conntrack != 32 || got.RuleIDs != 80000 {
		t.Errorf("pinned sizes %+v, want 40000 entries, 80000 rule ids, 32 connections", got)
	}
}

// TestLayoutsRecorded: the program that pins the maps records their
// layouts beside them, so that the same version reloads and reads its
// own pins where the pinned maps' BTF cannot be read (without
// CAP_SYS_ADMIN: the daemon under the systemd unit's capabilities); pins
// the record does not vouch for are refused then, never reused unchecked.
func TestLayoutsRecorded(t *testing.T) {
	testutil.RequireRoot(t)
	dir := testutil.BPFFS(t) + "/xdpfw"
	dp, err := datapath.Load(dir, datapath.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	dp.Close()
	t.Cleanup(func() { _ = datapath.Unpin(dir) })
	if _, err := os.Stat(filepath.Join(dir, datapath.LayoutsPin)); err != nil {
		t.Fatalf("no record of the layouts after the load: %v", err)
	}
	restore := datapath.PinnedTypesUnreadable()
	defer restore()
	o, err := datapath.Open(dir)
	if err != nil {
		t.Fatalf("Open of this version's own pins, BTF unreadable: %v", err)
	}
	o.Close()
	dp, err = datapath.Load(dir, datapath.Limits{})
	if err != nil {
		t.Fatalf("Load over this version's own pins, BTF unreadable: %v", err)
	}
	if err := dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	dp.Close()
	// Pins of a version that recorded nothing: their types must be read.
	if err := os.Remove(filepath.Join(dir, datapath.LayoutsPin)); err != nil {
		t.Fatal(err)
	}
	if o, err := datapath.Open(dir); err == nil {
		o.Close()
		t.Fatal("Open of pins no record vouches for, BTF unreadable: succeeded, want refused")
	} else if !strings.Contains(err.Error(), "CAP_SYS_ADMIN") {
		t.Errorf("Open refused with %q, want the reason (CAP_SYS_ADMIN)", err)
	}
	if dp, err := datapath.Load(dir, datapath.Limits{}); err == nil {
		dp.Close()
		t.Fatal("Load over pins no record vouches for, BTF unreadable: succeeded, want refused")
	}
	restore()
	o, err = datapath.Open(dir)
	if err != nil {
		t.Fatalf("Open with the BTF readable: %v", err)
	}
	o.Close()
}

// TestLayoutsRecordOwnMaps: the record vouches for the load's own maps,
// not for what is pinned under their names when it is written: a pin
// replaced meanwhile (another xdpfw's load, another layout) is read from
// its BTF, and refused where that cannot be read, rather than vouched
// for with this version's layout.
func TestLayoutsRecordOwnMaps(t *testing.T) {
	testutil.RequireRoot(t)
	dir := testutil.BPFFS(t) + "/xdpfw"
	dp, err := datapath.Load(dir, datapath.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = datapath.Unpin(dir) })
	foreign, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 16, MaxEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	pin := filepath.Join(dir, "fw_ct_stats")
	if err := os.Remove(pin); err != nil {
		t.Fatal(err)
	}
	if err := foreign.Pin(pin); err != nil {
		t.Fatal(err)
	}
	if err := dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	dp.Close()
	restore := datapath.PinnedTypesUnreadable()
	defer restore()
	if o, err := datapath.Open(dir); err == nil {
		o.Close()
		t.Fatal("Open with fw_ct_stats replaced by another map before the record was written, BTF unreadable: succeeded " +
			"(the record vouched for a map the load did not make), want refused")
	} else if !strings.Contains(err.Error(), "fw_ct_stats") {
		t.Errorf("Open refused with %q, want the map named (fw_ct_stats)", err)
	}
}
