package testutil

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// VethEnd describes one end of a veth pair created by VethPair.
type VethEnd struct {
	NS    *NetNS           // namespace the end lives in
	Name  string           // interface name
	Index int              // ifindex inside NS
	MAC   net.HardwareAddr // MAC address
	Addrs []netip.Prefix   // assigned addresses, as given (host bits kept)
}

// linkUpTimeout bounds the wait for both ends to become operationally up.
const linkUpTimeout = 5 * time.Second

// VethPair creates a veth pair with end aName in namespace a and end bName
// in namespace b, assigns the addresses (CIDR strings such as
// "10.200.1.1/24" or "fd00:200:1::1/64"; IPv6 ones with nodad), brings both
// ends up, waits until both are operationally up and returns them. The pair
// is deleted in t.Cleanup (it would also go with its namespaces).
func VethPair(t testing.TB, a *NetNS, aName string, aAddrs []string, b *NetNS, bName string, bAddrs []string) (VethEnd, VethEnd) {
	t.Helper()
	if a == nil || b == nil {
		t.Fatalf("VethPair: both ends need a namespace from NewNetNS")
	}
	for _, name := range []string{aName, bName} {
		if name == "" || len(name) >= unix.IFNAMSIZ {
			t.Fatalf("VethPair: interface name %q must be 1..%d bytes", name, unix.IFNAMSIZ-1)
		}
	}
	ea := VethEnd{NS: a, Name: aName, Addrs: parsePrefixes(t, aAddrs)}
	eb := VethEnd{NS: b, Name: bName, Addrs: parsePrefixes(t, bAddrs)}

	ha, err := netlink.NewHandleAt(a.Handle)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", a, err)
	}
	defer ha.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: aName},
		PeerName:      bName,
		PeerNamespace: netlink.NsFd(b.Handle),
	}
	if err := ha.LinkAdd(veth); err != nil {
		t.Fatalf("creating veth %s (%s) <-> %s (%s): %v", aName, a, bName, b, err)
	}
	t.Cleanup(func() { deleteLink(t, a, aName) })

	for _, e := range []*VethEnd{&ea, &eb} {
		if err := configure(e); err != nil {
			t.Fatalf("veth %s in %s: %v", e.Name, e.NS, err)
		}
	}
	for _, e := range []*VethEnd{&ea, &eb} {
		if err := waitOperUp(e); err != nil {
			t.Fatalf("veth %s in %s: %v", e.Name, e.NS, err)
		}
	}
	return ea, eb
}

// parsePrefixes parses CIDR strings, failing the test on a bad one.
func parsePrefixes(t testing.TB, cidrs []string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			t.Fatalf("VethPair: bad address %q: %v", c, err)
		}
		out = append(out, p)
	}
	return out
}

// configure assigns e's addresses, sets it up and fills Index and MAC.
func configure(e *VethEnd) error {
	h, err := netlink.NewHandleAt(e.NS.Handle)
	if err != nil {
		return fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	link, err := h.LinkByName(e.Name)
	if err != nil {
		return fmt.Errorf("finding link: %w", err)
	}
	for _, p := range e.Addrs {
		addr := &netlink.Addr{IPNet: &net.IPNet{
			IP:   p.Addr().AsSlice(),
			Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen()),
		}}
		if p.Addr().Is6() {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("adding address %v: %w", p, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	e.Index = link.Attrs().Index
	e.MAC = append(net.HardwareAddr(nil), link.Attrs().HardwareAddr...)
	return nil
}

// waitOperUp waits until e is operationally up (its peer is up too).
func waitOperUp(e *VethEnd) error {
	h, err := netlink.NewHandleAt(e.NS.Handle)
	if err != nil {
		return fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	deadline := time.Now().Add(linkUpTimeout)
	for {
		link, err := h.LinkByIndex(e.Index)
		if err != nil {
			return fmt.Errorf("finding link: %w", err)
		}
		state := link.Attrs().OperState
		if state == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still %v after %v", state, linkUpTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// deleteLink deletes a link (and so its veth peer) unless it is already
// gone; failures are reported as test errors.
func deleteLink(t testing.TB, n *NetNS, name string) {
	h, err := netlink.NewHandleAt(n.Handle)
	if err != nil {
		t.Errorf("cleanup: netlink handle in %s: %v", n, err)
		return
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if !errors.As(err, &notFound) {
			t.Errorf("cleanup: finding %s in %s: %v", name, n, err)
		}
		return
	}
	if err := h.LinkDel(link); err != nil {
		t.Errorf("cleanup: deleting %s in %s: %v", name, n, err)
	}
}
