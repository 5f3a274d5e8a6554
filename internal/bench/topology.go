package bench

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The macro benchmark's topology, all made with netlink from Go:
//
//	namespace xdpfw-bench-gen-PID          namespace xdpfw-bench-dut-PID
//	  xbgPID 10.200.0.1/16  <=== veth ===>  xbdPID 10.200.0.2/16
//	  (trafficgen redirects here)           (the DUT's XDP program; iptables)
//
// Names carry the process id, so concurrent runs do not collide and the
// leftovers of a killed run can be recognised (SweepStale). IPv6 is off in
// both namespaces and the neighbours are permanent entries, so the
// generator's frames are the only ones on the veth: every frame the DUT
// receives must be dropped by its intended rule, exactly.
const (
	NetNSPrefix = "xdpfw-bench-" // + "gen-PID" / "dut-PID"
	netnsDir    = "/run/netns"
)

// Addresses of the topology. Traffic comes from TrafficSrc (one address
// after another, 65,536 source ports each) to the DUT's address.
var (
	genAddr    = netip.MustParsePrefix("10.200.0.1/16")
	dutAddr    = netip.MustParsePrefix("10.200.0.2/16")
	TrafficSrc = netip.MustParsePrefix("10.200.128.0/17")
)

// TrafficDPort is the UDP destination port of the generated traffic.
const TrafficDPort = 9 // discard

// Namespace is a named network namespace the benchmark created.
type Namespace struct {
	Name   string
	Handle netns.NsHandle
}

// Do runs fn on a locked OS thread switched into the namespace, and
// switches back. If switching back fails the thread stays locked and Go
// discards it when fn's goroutine ends, so no goroutine runs in the wrong
// namespace. Processes fn starts (os/exec) are born in the namespace.
func (n *Namespace) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(n.Handle); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering netns %s: %w", n.Name, err)
			return
		}
		err = fn()
		if rerr := netns.Set(orig); rerr != nil {
			errc <- errors.Join(err, fmt.Errorf("leaving netns %s: %w", n.Name, rerr))
			return // the thread stays locked: Go ends it with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// Iface is one end of the veth pair.
type Iface struct {
	Name  string
	Index int
	MAC   net.HardwareAddr
	Addr  netip.Prefix
}

// Topology is the generator and DUT namespaces and the veth between them
// (and, for a router, the sink's namespace behind the DUT).
type Topology struct {
	Gen, DUT       *Namespace
	GenIf, DUTIf   Iface
	GenCPU, DUTCPU int // where the generator and the DUT's NAPI thread run
	// The router topology (NewRouterTopology) only: the sink's namespace,
	// the DUT's veth towards it and the sink's end.
	Sink            *Namespace
	RouteIf, SinkIf Iface
	cleanups        []func() error
}

// NewTopology creates both namespaces and the veth pair and configures
// addresses, neighbours and sysctls (SetThreadedNAPI and NAPIThread come
// once the DUT's veth has an XDP program). On error, whatever was made is
// removed again; otherwise Close removes it.
func NewTopology() (*Topology, error) { return newTopology(false) }

// The router topology of `bench latency` and `bench forward` adds a sink
// behind the DUT, which forwards between its two veths (ip_forward on):
//
//	gen  xbgPID 10.200.0.1/16 <=> xbdPID 10.200.0.2/16  DUT  xbrPID 10.220.0.1/16 <=> xbsPID 10.220.0.2/16  sink
//
// The DUT routes the traffic's sources (TrafficSrc, and the rule sources
// of MacroRuleSet: 10.201/16, 10.202/16) back by the generator, so the
// sink's answers reach it.
var (
	routeAddr = netip.MustParsePrefix("10.220.0.1/16")
	sinkAddr  = netip.MustParsePrefix("10.220.0.2/16")
	genRoutes = []netip.Prefix{TrafficSrc, netip.MustParsePrefix("10.201.0.0/16"), netip.MustParsePrefix("10.202.0.0/16")}
)

// NewRouterTopology is NewTopology with the sink namespace and the DUT
// as a router between them.
func NewRouterTopology() (*Topology, error) { return newTopology(true) }

func newTopology(router bool) (t *Topology, err error) {
	t = &Topology{}
	defer func() {
		if err != nil {
			t.Close()
			t = nil
		}
	}()
	pid := os.Getpid()
	if t.Gen, err = t.newNamespace(fmt.Sprintf("%sgen-%d", NetNSPrefix, pid)); err != nil {
		return t, err
	}
	if t.DUT, err = t.newNamespace(fmt.Sprintf("%sdut-%d", NetNSPrefix, pid)); err != nil {
		return t, err
	}
	t.GenIf = Iface{Name: fmt.Sprintf("xbg%d", pid), Addr: genAddr}
	t.DUTIf = Iface{Name: fmt.Sprintf("xbd%d", pid), Addr: dutAddr}
	nss := []*Namespace{t.Gen, t.DUT}
	if router {
		if t.Sink, err = t.newNamespace(fmt.Sprintf("%ssink-%d", NetNSPrefix, pid)); err != nil {
			return t, err
		}
		t.RouteIf = Iface{Name: fmt.Sprintf("xbr%d", pid), Addr: routeAddr}
		t.SinkIf = Iface{Name: fmt.Sprintf("xbs%d", pid), Addr: sinkAddr}
		nss = append(nss, t.Sink)
	}
	// Reverse-path filtering off (a new namespace inherits the host's
	// setting: the verdict must be the DUT's alone) and IPv6 off (no
	// router solicitations or MLD reports on the veth).
	nsSysctls := map[string]string{
		"net/ipv4/conf/all/rp_filter":        "0",
		"net/ipv4/conf/default/rp_filter":    "0",
		"net/ipv6/conf/all/disable_ipv6":     "1",
		"net/ipv6/conf/default/disable_ipv6": "1",
	}
	for _, ns := range nss {
		if err := ns.Do(func() error { return writeSysctls(nsSysctls) }); err != nil {
			return t, err
		}
	}
	if router {
		if err := t.DUT.Do(func() error { return writeSysctls(map[string]string{"net/ipv4/ip_forward": "1"}) }); err != nil {
			return t, err
		}
	}
	if err := t.addVeth(t.Gen, t.DUT, &t.GenIf, &t.DUTIf); err != nil {
		return t, err
	}
	if router {
		if err := t.addVeth(t.DUT, t.Sink, &t.RouteIf, &t.SinkIf); err != nil {
			return t, err
		}
		// Routes for what answers, in the stack: the sink reaches the
		// generator's network through the DUT, the generator the sink's,
		// and the DUT the traffic's sources through the generator's
		// address (a neighbour it knows: the generator's veth answers no
		// ARP).
		for _, r := range []struct {
			ns       *Namespace
			ifindex  int
			gw       netip.Addr
			prefixes []netip.Prefix
		}{
			{t.DUT, t.DUTIf.Index, t.GenIf.Addr.Addr(), genRoutes},
			{t.Sink, t.SinkIf.Index, t.RouteIf.Addr.Addr(), []netip.Prefix{genAddr.Masked()}},
			{t.Gen, t.GenIf.Index, t.DUTIf.Addr.Addr(), []netip.Prefix{sinkAddr.Masked()}},
		} {
			if err := addRoutes(r.ns, r.ifindex, r.gw, r.prefixes); err != nil {
				return t, err
			}
		}
	}
	t.GenCPU, t.DUTCPU = 0, 1
	if runtime.NumCPU() < 2 {
		t.DUTCPU = 0
	}
	return t, nil
}

// addVeth creates the veth pair ai (in a) <-> bi (in b), configures both
// ends (address, up) and adds a permanent neighbour entry for each end at
// the other, so the stack never has to resolve anything.
func (t *Topology) addVeth(a, b *Namespace, ai, bi *Iface) error {
	h, err := netlink.NewHandleAt(a.Handle)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", a.Name, err)
	}
	defer h.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: ai.Name, TxQLen: 1000},
		PeerName:      bi.Name,
		PeerNamespace: netlink.NsFd(b.Handle),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %s <-> %s: %w", ai.Name, bi.Name, err)
	}
	t.cleanups = append(t.cleanups, func() error {
		// Deleting one end deletes both; gone already is fine.
		h, err := netlink.NewHandleAt(a.Handle)
		if err != nil {
			return err
		}
		defer h.Close()
		l, err := h.LinkByName(ai.Name)
		if err != nil {
			return nil
		}
		return h.LinkDel(l)
	})
	if err := configure(a, ai); err != nil {
		return err
	}
	if err := configure(b, bi); err != nil {
		return err
	}
	for _, e := range []struct {
		ns *Namespace
		i  *Iface
	}{{a, ai}, {b, bi}} {
		if err := waitUp(e.ns, e.i); err != nil {
			return err
		}
	}
	if err := addNeigh(a, ai.Index, *bi); err != nil {
		return err
	}
	return addNeigh(b, bi.Index, *ai)
}

// addRoutes routes each prefix in ns via gw on ifindex.
func addRoutes(ns *Namespace, ifindex int, gw netip.Addr, prefixes []netip.Prefix) error {
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		return err
	}
	defer h.Close()
	for _, p := range prefixes {
		r := &netlink.Route{LinkIndex: ifindex, Gw: gw.AsSlice(),
			Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if err := h.RouteAdd(r); err != nil {
			return fmt.Errorf("route %v via %v in %s: %w", p, gw, ns.Name, err)
		}
	}
	return nil
}

// newNamespace creates a named namespace (lo up) and registers its removal.
func (t *Topology) newNamespace(name string) (*Namespace, error) {
	var n *Namespace
	err := lockedThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		h, err := netns.NewNamed(name) // also enters it
		if err != nil {
			_ = os.Remove(filepath.Join(netnsDir, name)) // NewNamed may leave the file
			return fmt.Errorf("creating network namespace %s: %w", name, err)
		}
		n = &Namespace{Name: name, Handle: h}
		if err := netns.Set(orig); err != nil {
			return fmt.Errorf("leaving network namespace %s: %w", name, err)
		}
		return nil
	})
	if n != nil {
		t.cleanups = append(t.cleanups, func() error {
			n.Handle.Close()
			return netns.DeleteNamed(n.Name)
		})
	}
	if err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(n.Handle)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: setting lo up: %w", name, err)
	}
	return n, nil
}

// lockedThread runs fn on a locked OS thread that is discarded afterwards
// if fn fails (it may have been left in another namespace).
func lockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := fn()
		if err == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func writeSysctls(kv map[string]string) error {
	for k, v := range kv {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(k, "/", "."), v, err)
		}
	}
	return nil
}

// configure adds the address of i, sets it up and fills Index and MAC.
func configure(ns *Namespace, i *Iface) error {
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(i.Name)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", i.Name, ns.Name, err)
	}
	p := i.Addr
	a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
	if err := h.AddrAdd(l, a); err != nil {
		return fmt.Errorf("%s: adding %v: %w", i.Name, p, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("%s: set up: %w", i.Name, err)
	}
	i.Index = l.Attrs().Index
	i.MAC = l.Attrs().HardwareAddr
	return nil
}

func waitUp(ns *Namespace, i *Iface) error {
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		return err
	}
	defer h.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := h.LinkByIndex(i.Index)
		if err != nil {
			return err
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s in %s: still %v after 5s", i.Name, ns.Name, l.Attrs().OperState)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// addNeigh adds a permanent neighbour entry for peer on ifindex.
func addNeigh(ns *Namespace, ifindex int, peer Iface) error {
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		return err
	}
	defer h.Close()
	n := &netlink.Neigh{LinkIndex: ifindex, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
		IP: peer.Addr.Addr().AsSlice(), HardwareAddr: peer.MAC}
	if err := h.NeighSet(n); err != nil {
		return fmt.Errorf("neighbour %v in %s: %w", peer.Addr.Addr(), ns.Name, err)
	}
	return nil
}

// SetThreadedNAPI makes the DUT veth's NAPI poll run in its own kernel
// thread ("napi/xbdPID-ID") instead of in the softirq of the CPU that
// scheduled it. Without it, the veth of the DUT would be polled on the
// generator's CPU (live frames are flushed to the peer at the end of each
// batch, and the flush raises the receive softirq where it runs), so
// generator and DUT would share one CPU. The switch is the device's sysfs
// attribute "threaded"; sysfs shows the devices of the network namespace
// that mounted it, so a sysfs is mounted briefly from inside the DUT's
// namespace in a private temporary directory.
func (t *Topology) SetThreadedNAPI(on bool) error { return setThreadedNAPI(t.DUT, t.DUTIf.Name, on) }

// setThreadedNAPI is SetThreadedNAPI for device name in ns.
func setThreadedNAPI(ns *Namespace, name string, on bool) error {
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", sysfsPrefix, os.Getpid()))
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	val := "0"
	if on {
		val = "1"
	}
	return ns.Do(func() error {
		if err := unix.Mount("sysfs", dir, "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mounting sysfs of %s: %w", ns.Name, err)
		}
		defer unix.Unmount(dir, unix.MNT_DETACH)
		f := filepath.Join(dir, "class/net", name, "threaded")
		if err := os.WriteFile(f, []byte(val), 0o644); err != nil {
			return fmt.Errorf("threaded NAPI on %s: %w", name, err)
		}
		return nil
	})
}

// NAPIThread finds the kernel thread polling the DUT's veth (threaded
// NAPI) and pins it to DUTCPU. It returns the thread's pid.
func (t *Topology) NAPIThread() (int, error) { return napiThread(t.DUTIf.Name, t.DUTCPU) }

// napiThread finds the kernel thread polling device name (threaded NAPI)
// and pins it to cpu. It returns the thread's pid.
func napiThread(name string, cpu int) (int, error) {
	want := "napi/" + name + "-"
	if len(want) > 15 { // TASK_COMM_LEN - 1
		want = want[:15]
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || !strings.HasPrefix(string(comm), want) {
			continue
		}
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			return 0, fmt.Errorf("pinning %s (pid %d) to CPU %d: %w", strings.TrimSpace(string(comm)), pid, cpu, err)
		}
		return pid, nil
	}
	return 0, fmt.Errorf("no NAPI thread %q* for %s (is an XDP program attached and threaded NAPI on?)", want, name)
}

// realtime makes thread pid (what, for errors) SCHED_FIFO at prio.
func realtime(pid, prio int, what string) error {
	if err := unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}, 0); err != nil {
		return fmt.Errorf("SCHED_FIFO for %s (pid %d): %w", what, pid, err)
	}
	return nil
}

// LinkStats are the DUT veth's counters (netlink).
func (t *Topology) LinkStats() (*netlink.LinkStatistics, error) {
	return linkStats(t.DUT, t.DUTIf.Index)
}

// linkStats are the counters of device ifindex in ns (netlink).
func linkStats(ns *Namespace, ifindex int) (*netlink.LinkStatistics, error) {
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := h.LinkByIndex(ifindex)
	if err != nil {
		return nil, err
	}
	return l.Attrs().Statistics, nil
}

// Close removes the veth pair and both namespaces (in reverse order of
// creation) and reports what could not be removed.
func (t *Topology) Close() error {
	var errs []error
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		if err := t.cleanups[i](); err != nil {
			errs = append(errs, err)
		}
	}
	t.cleanups = nil
	return errors.Join(errs...)
}

// Temporary mount points are named PREFIX-PID-RANDOM under os.TempDir().
const (
	bpffsPrefix = "xdpfw-bench-bpffs-"
	sysfsPrefix = "xdpfw-bench-sys-"
)

// SweepStale removes what a killed earlier run left behind: namespaces
// xdpfw-bench-*-PID and temporary bpffs/sysfs mounts whose PID is gone.
// It returns what it removed.
func SweepStale() []string {
	var gone []string
	dead := func(pid string) bool {
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() {
			return false
		}
		_, err = os.Stat(filepath.Join("/proc", pid))
		return errors.Is(err, os.ErrNotExist)
	}
	ents, _ := os.ReadDir(netnsDir)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), NetNSPrefix)
		if !ok {
			continue
		}
		if _, pid, ok := strings.Cut(rest, "-"); ok && dead(pid) && netns.DeleteNamed(e.Name()) == nil {
			gone = append(gone, "namespace "+e.Name())
		}
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || filepath.Dir(f[4]) != filepath.Clean(os.TempDir()) {
			continue
		}
		base := filepath.Base(f[4])
		for _, prefix := range []string{bpffsPrefix, sysfsPrefix} {
			rest, ok := strings.CutPrefix(base, prefix)
			if !ok {
				continue
			}
			if pid, _, ok := strings.Cut(rest, "-"); ok && dead(pid) && unix.Unmount(f[4], unix.MNT_DETACH) == nil {
				os.Remove(f[4])
				gone = append(gone, "mount "+f[4])
			}
		}
	}
	return gone
}
