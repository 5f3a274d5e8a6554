package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/btf"
)

// KernelCTAvailable tells whether XDP can ask the kernel's conntrack about
// kernel-NATed connections (bpf/lib/kct.h): the kfuncs bpf_xdp_ct_lookup
// and bpf_ct_release must be in the kernel's BTF (Linux 5.18+ with
// nf_conntrack built in, or its module loaded). nil: it can.
func KernelCTAvailable() error {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return fmt.Errorf("no kernel BTF: %w", err)
	}
	for _, name := range []string{"bpf_xdp_ct_lookup", "bpf_ct_release"} {
		var fn *btf.Func
		if err := spec.TypeByName(name, &fn); err == nil {
			continue
		}
		// a module's BTF (nf_conntrack as a module)
		h, err := btf.FindHandle(func(info *btf.HandleInfo) bool { return info.IsModule() && info.Name == "nf_conntrack" })
		if err == nil {
			m, merr := h.Spec(spec)
			h.Close()
			if merr == nil && m.TypeByName(name, &fn) == nil {
				continue
			}
		}
		if errors.Is(err, btf.ErrNotFound) || err == nil {
			return fmt.Errorf("the kernel has no kfunc %s (Linux 5.18+ with nf_conntrack)", name)
		}
		return fmt.Errorf("the kernel has no kfunc %s (Linux 5.18+ with nf_conntrack): %w", name, err)
	}
	return nil
}
