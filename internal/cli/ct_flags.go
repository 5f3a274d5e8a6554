package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
)

// ctFlags are the conntrack settings load and apply take.
type ctFlags struct {
	max      int
	timeouts []string
	full     string
	pickup   string
	kernel   string
}

func (c *ctFlags) register(cmd *cobra.Command, load bool) {
	if load {
		cmd.Flags().IntVar(&c.max, "ct-max", 0, fmt.Sprintf("conntrack table size, 1 to %d (default %d; preallocated; the fragment table gets an eighth, at least 1024; changing it makes the table anew and carries the connections over, those it cannot hold lost and counted)",
			datapath.MaxConntrack, datapath.DefaultConntrack))
	}
	cmd.Flags().StringSliceVar(&c.timeouts, "ct-timeout", nil, "conntrack timeout NAME=SECONDS (repeatable; names: "+
		strings.Join(conntrack.TimeoutNames[:], ", ")+"); giving any resets the others to their defaults")
	cmd.Flags().StringVar(&c.full, "ct-full", "", "NEW connections when the conntrack table is full of assured connections: drop (default) or accept (untracked; "+
		"with --nat xdpfw, a connection the nat table translates is dropped still: its translation lives with its conntrack entry)")
	cmd.Flags().StringVar(&c.pickup, "ct-tcp-pickup", "", "TCP connections conntrack does not know (they predate the rules, or the table was flushed): "+
		"loose (default) picks them up mid-stream, their next bare ACK being NEW to the rules, as Linux's nf_conntrack_tcp_loose=1; "+
		"strict starts connections with a SYN only, such ACKs are INVALID (a reload or apply keeps the value in force)")
	cmd.Flags().StringVar(&c.kernel, "ct-kernel-nat", "", "connections the kernel's own nat table translates (Docker, kube-proxy, a MASQUERADE kept in iptables): "+
		"on (default, where the kernel has nf_conntrack and the kfunc bpf_xdp_ct_lookup) judges the packets xdpfw's conntrack does not know with the kernel's conntrack, "+
		"as iptables would see them (an answer to a masqueraded connection: in FORWARD, ESTABLISHED, addressed to the original source); "+
		"off judges them by the addresses they arrive with (docs/conntrack.md \"Kernel NAT\"; a reload or apply keeps the value in force)")
}

func (c *ctFlags) apply(cmd *cobra.Command, opt *firewall.Options, load bool) error {
	if load && cmd.Flags().Changed("ct-max") && (c.max < 1 || c.max > datapath.MaxConntrack) {
		return usageError{fmt.Errorf("--ct-max %d: want 1 to %d", c.max, datapath.MaxConntrack)}
	}
	opt.CTMax = c.max
	opt.CTFull = c.full
	if c.pickup != "" && c.pickup != "loose" && c.pickup != "strict" {
		return usageError{fmt.Errorf("--ct-tcp-pickup %q: want loose or strict", c.pickup)}
	}
	opt.CTTCPPickup = c.pickup
	if c.kernel != "" && c.kernel != "on" && c.kernel != "off" {
		return usageError{fmt.Errorf("--ct-kernel-nat %q: want on or off", c.kernel)}
	}
	opt.CTKernelNAT = c.kernel
	if cmd.Flags().Changed("ct-timeout") {
		t, err := conntrack.ParseTimeouts(c.timeouts)
		if err != nil {
			return usageError{err}
		}
		opt.CTTimeouts, opt.CTTimeoutsSet = t, true
	}
	return nil
}
