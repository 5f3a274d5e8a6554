package datapath

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
)

// Program names as the kernel knows them (bpf/xdp_fw.c, bpf/tc_fw.c; at
// most 15 bytes).
const (
	ingressProgName = "xdpfw_ingress"
	egressProgName  = "xdpfw_egress"
)

// Running is one of xdpfw's links as the kernel reports it: an xdpfw
// program attached to an interface of this network namespace. It is found
// through the kernel (link iteration), not through the pins, so it is
// found also when the pins are gone (the bpffs unmounted while something
// else kept it alive: the links stay attached, and filter, with no pin to
// reach them).
type Running struct {
	Interface string `json:"interface"`
	Ifindex   int    `json:"ifindex"`
	Hook      string `json:"hook"` // "xdp" or "tc egress"
	LinkID    uint32 `json:"link_id"`
	ProgramID uint32 `json:"program_id"`
	Tag       string `json:"tag"`    // the program's tag (a hash of its instructions)
	Pinned    bool   `json:"pinned"` // pinned in the pin directory asked about
}

// Discover lists xdpfw's links attached to interfaces of this network
// namespace, by the kernel's link iteration and the programs' names, and
// says which are pinned in dir. Links of other namespaces are left out:
// an XDP link counts when the interface with its ifindex here runs its
// program, a tcx link when that interface lists it.
func Discover(dir string) ([]Running, error) {
	pinned := map[link.ID]bool{}
	for _, name := range pinsWithPrefix(dir, "link_") {
		if l, err := link.LoadPinnedLink(dir+"/"+name, nil); err == nil {
			if info, err := l.Info(); err == nil {
				pinned[info.ID] = true
			}
			l.Close()
		}
	}
	var out []Running
	// Listing links (BPF_LINK_GET_NEXT_ID) and opening them by id need
	// CAP_SYS_ADMIN: without it the iterator reports EPERM.
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			continue
		}
		r := Running{LinkID: uint32(info.ID), ProgramID: uint32(info.Program), Pinned: pinned[info.ID]}
		want := ""
		switch {
		case info.Type == link.XDPType && info.XDP() != nil:
			r.Hook, r.Ifindex, want = "xdp", int(info.XDP().Ifindex), ingressProgName
		case info.Type == link.TCXType && info.TCX() != nil && ebpf.AttachType(info.TCX().AttachType) == ebpf.AttachTCXEgress:
			r.Hook, r.Ifindex, want = "tc egress", int(info.TCX().Ifindex), egressProgName
		default:
			continue
		}
		if r.Ifindex == 0 { // severed: attached to nothing
			continue
		}
		prog, err := ebpf.NewProgramFromID(info.Program)
		if err != nil {
			continue
		}
		pi, err := prog.Info()
		prog.Close()
		if err != nil || pi.Name != want && !(want == ingressProgName && pi.Name == rxvlanProgName) {
			continue
		}
		r.Tag = pi.Tag
		nl, err := netlink.LinkByIndex(r.Ifindex)
		if err != nil {
			continue // another namespace's interface
		}
		if !runsHere(nl, r, info.ID) {
			continue
		}
		r.Interface = nl.Attrs().Name
		out = append(out, r)
	}
	if err := it.Err(); err != nil {
		return out, fmt.Errorf("listing the kernel's BPF links: %w", err)
	}
	return out, nil
}

// runsHere says whether the interface nl of this namespace runs link id
// (r's ifindex may name another interface in another namespace).
func runsHere(nl netlink.Link, r Running, id link.ID) bool {
	if r.Hook == "xdp" {
		x := nl.Attrs().Xdp
		return x != nil && x.Attached && x.ProgId == r.ProgramID
	}
	q, err := link.QueryPrograms(link.QueryOptions{Target: r.Ifindex, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		return false
	}
	return slices.ContainsFunc(q.Programs, func(p link.AttachedProgram) bool {
		lid, ok := p.LinkID()
		return ok && lid == id
	})
}

// DetachRunning detaches the links of rs (from Discover) from their
// interfaces (BPF_LINK_DETACH: the link stays, wherever it is pinned, but
// attached to nothing), and xdpfw's clsact filter from those interfaces.
func DetachRunning(rs []Running) error {
	var errs []error
	for _, r := range rs {
		l, err := link.NewFromID(link.ID(r.LinkID))
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) { // gone meanwhile: nothing to detach
				errs = append(errs, fmt.Errorf("opening link %d (%s on %s): %w", r.LinkID, r.Hook, r.Interface, err))
			}
			continue
		}
		if err := l.Detach(); err != nil {
			errs = append(errs, fmt.Errorf("detaching link %d (%s on %s): %w", r.LinkID, r.Hook, r.Interface, err))
		}
		l.Close()
		detachClsact(r.Interface)
	}
	return errors.Join(errs...)
}
