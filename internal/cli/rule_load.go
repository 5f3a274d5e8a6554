package cli

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
)

func newLoad(e *env) *cobra.Command {
	var (
		ifaces []string
		mode   string
		nat    string
		src    sourceFlags
		flags  changeFlags
	)
	cmd := &cobra.Command{
		Use:   "load -i IFACE [-i IFACE...] [RULES_FILE]",
		Short: "Attach the firewall to interfaces and load a rule file",
		Long: `load attaches the XDP program to each -i interface and puts the rules in force.
It exits at once; the firewall keeps running in the kernel (pinned under
--pin-dir) until 'xdpfw detach'. Running load again adds interfaces and
replaces the rules.

RULES_FILE holds iptables rules, one per line ('-A INPUT -p tcp --dport 22 -j
ACCEPT', '-P INPUT DROP', '# comments'), or iptables-save output. Its rules
apply to IPv4 and IPv6 unless an address, -4/-6 or the ICMP flavour says
otherwise. --ipv4-file / --ipv6-file take iptables-save / ip6tables-save
output whose rules and policies apply to that family only; a line marked
for the other family (-6 in the IPv4 file, -4 in the IPv6 one) is skipped,
as iptables-restore and ip6tables-restore do, so one file written for both
can be given as both. "-" is standard input. -I, -D and -R lines apply in
order while the file is read, as iptables-restore does.

` + skipHelp + `

A file with any error changes nothing; errors name file:line:column. A
file that holds no rule, no policy and no *filter section (empty, blank,
only comments) is refused unless --allow-empty: it would accept everything.
Two *filter sections: the later replaces the earlier, as in iptables-restore.
A load that fails (a mistyped interface, tables too small) leaves the
firewall in force as it was.

If the record of the rules in force (--state-dir) is lost or damaged while
the firewall is attached, every command says so; load then replaces the
rules in place, with one switch: packets stay filtered throughout.

REJECT answers with a TCP RST or an ICMP unreachable sent back from XDP;
in OUTPUT the answer goes to this host's own socket, which fails at once
(ECONNREFUSED, EHOSTUNREACH...), as with iptables. --reject-rate and
--reject-burst bound the answers each source (IPv4 address, IPv6 /64; in
OUTPUT each destination) gets, so REJECT cannot be used as an amplifier.

Attach modes: native (in the driver), generic (in the stack, any device),
offload (on a NIC that runs BPF), auto (native, else generic). The OUTPUT
chain runs in a tc egress program attached to the same interfaces (tcx,
or a clsact filter on kernels before 6.6; XDPFW_TC_ATTACH=tcx|clsact
chooses).

-m vlan --vlan-id N (and --vlan-prio P, the tag's 802.1p priority code
point) sees the tags in the frame. A NIC with rx VLAN offload
on strips the outer tag before XDP runs (a veth keeps a tag its peer's
sender put beside the frame): where the driver hands XDP that tag (Linux
6.16+, native mode), load attaches a small program bound to the interface,
xdpfw_rxvlan, that reads it; elsewhere load and apply warn, naming the
interface and the fix (ethtool -K IFACE rxvlan off), and status shows it.

-j LOG rules and --log on ACCEPT, DROP or REJECT rules log packets: each
event carries the packet's first --log-snap bytes and goes to a ring buffer
that 'xdpfw log' reads; each logged rule emits at most its rate
(--log-rate N/sec --log-burst N in the rule, else --log-rate/--log-burst
here, or the rule's -m limit) and counts what it suppresses.

-m limit --limit N/sec|min|hour|day --limit-burst B gives a rule a token
bucket of its own (default 3/hour, burst 5, as iptables): it matches while
the bucket has a token and takes one; a packet it refuses goes on to the
next rule. A rule kept by apply keeps its bucket. -m recent --set, --rcheck,
--update, --remove (--seconds, --hitcount, --rttl, --name, --rsource/--rdest,
--mask) keeps named address lists shared by the rules that name them, in rule
order.
-m hashlimit --hashlimit-upto|--hashlimit-above RATE --hashlimit-name NAME
(--hashlimit-burst, --hashlimit-mode srcip,srcport,dstip,dstport,
--hashlimit-srcmask/-dstmask, --hashlimit-htable-expire) is -m limit with a
bucket per key of the packet in a named table; -above takes a token when
there is one and matches when there is none. -m connlimit --connlimit-above
N (or --connlimit-upto N, at most 15) counts, per rule and per masked
source (--connlimit-daddr: destination) address, the live connections
whose packets reached the rule, the packet's own included.

Connection tracking runs when a rule uses -m conntrack (--ctstate, --ctproto,
--ctstatus, --ctdir), -m state --state or -m connlimit: the table has --ct-max entries (preallocated, about 150 bytes each)
and connections expire after per-state timeouts close to Linux's, which
--ct-timeout NAME=SECONDS changes (see 'xdpfw conntrack --help').

Fragments: every fragment of a datagram gets its first fragment's verdict
(iptables' filter table sees datagrams reassembled); the fragment table
holds --ct-max/8 datagrams, at least 1024 (docs/fragments.md).

Sizes: --max-rules and --ct-max size maps the kernel allocates at once.
load computes what they take (per-CPU maps once per CPU) and refuses sizes
that would take more than half of the memory available (MemAvailable),
before it creates anything.

NAT: --nat xdpfw reads the file's *nat section into xdpfw, which
translates IPv4 TCP, UDP and ping connections in XDP (docs/nat.md): port
forwards in PREROUTING (-j DNAT --to-destination, -j REDIRECT: the
address of the device the packet came in by) and the source of forwarded
traffic in POSTROUTING (-j SNAT, -j MASQUERADE: the egress device's
address, as the kernel picks it), both on one connection (hairpin NAT).
The connections this host opens are translated by nat OUTPUT's -j DNAT
at tc egress (on the devices xdpfw is attached to), before filter
OUTPUT, and re-routed. The filter sees the addresses iptables' filter
sees (INPUT or FORWARD is chosen on the translated destination), and
translated packets take the fast path. load refuses it while the
kernel's own nat table has rules (nothing is translated twice), and
refuses nat OUTPUT's -j REDIRECT (the kernel sends it to 127.0.0.1, over
lo) and rules of the nat INPUT chain: for those, --nat kernel, the
default (the kernel's nat table translates, and a file's *nat section is
refused or skipped).

Kernel: Linux 5.18 or newer (bpf_xdp_load_bytes); load names what an older
kernel lacks before it changes anything.`,
		Example: `  xdpfw load -i eth0 /etc/xdpfw/rules.conf
  xdpfw load -i eth0 -i eth1 --mode generic rules.conf
  xdpfw load -i eth0 --ipv4-file rules.v4 --ipv6-file rules.v6
  xdpfw load -i eth0 --reject-rate 20/s --reject-burst 50 rules.conf
  xdpfw load -i eth0 --log-rate 1/sec --log-burst 5 --log-snap 256 rules.conf
  xdpfw load -i lan0 -i wan0 --nat xdpfw router.rules`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := datapath.ParseMode(mode)
			if err != nil {
				return usageError{err}
			}
			if len(ifaces) == 0 {
				return usageError{fmt.Errorf("load needs at least one -i IFACE")}
			}
			opt, err := flags.options(cmd)
			if err != nil {
				return err
			}
			files, err := src.sources(cmd, args, false, "load")
			if err != nil {
				return err
			}
			if nat != firewall.NATKernel && nat != firewall.NATXdpfw {
				return usageError{fmt.Errorf("--nat %q: want kernel or xdpfw", nat)}
			}
			files.NAT = nat == firewall.NATXdpfw
			opt.NAT = nat
			rs, err := e.readRules(files)
			if err != nil {
				return err
			}
			res, err := firewall.Load(e.paths, ifaces, m, rs, opt)
			if err != nil {
				return err
			}
			e.printResult(res)
			names := make([]string, 0, len(res.Attached))
			for n := range res.Attached {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(e.stdout, "attached to %s (%s mode)\n", n, res.Attached[n])
			}
			e.printGeneration(res)
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&ifaces, "interface", "i", nil, "interface to attach to (repeatable)")
	cmd.Flags().StringVar(&mode, "mode", "auto", "attach mode: native, generic, offload or auto")
	cmd.Flags().StringVar(&nat, "nat", firewall.NATKernel, "who translates: kernel (the file's nat table is the kernel's: refused, or skipped) "+
		"or xdpfw (xdpfw translates it in XDP: POSTROUTING SNAT and MASQUERADE of forwarded IPv4 so far; refused while the kernel's nat table has rules)")
	src.add(cmd)
	flags.add(cmd, true)
	return cmd
}
