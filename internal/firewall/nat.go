package firewall

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/nat"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// NAT modes (Options.NAT, docs/nat.md "Who translates").
const (
	NATKernel = "kernel" // the kernel's nat table translates; a file's *nat section is refused or skipped
	NATXdpfw  = "xdpfw"  // xdpfw's data plane translates the file's *nat section
)

// splitNAT returns the filter part of rs and, with --nat xdpfw, its nat
// table (empty when the file has none), after the checks that mode needs:
// nothing translated twice (the kernel's own nat table empty), a nat table
// the data plane translates, no priority table (whose bulk CPUs cannot
// enter the nat stage).
func splitNAT(rs *rules.RuleSet, mode string) (*rules.RuleSet, *rules.RuleSet, error) {
	switch mode {
	case "", NATKernel:
		return rs, nil, nil
	case NATXdpfw:
	default:
		return nil, nil, fmt.Errorf("--nat %q: want kernel or xdpfw", mode)
	}
	if err := kernelNATRules(); err != nil {
		return nil, nil, err
	}
	nat := rs.NAT
	if nat == nil {
		nat = &rules.RuleSet{}
	}
	if err := datapath.CheckNATScope(nat); err != nil {
		return nil, nil, err
	}
	ct := false
	for i := range rs.Rules {
		ct = ct || rs.Rules[i].Match.NeedsConntrack()
	}
	if !ct && len(nat.Rules) > 0 {
		return nil, nil, errors.New("--nat xdpfw needs connection tracking, which runs when a filter rule uses -m conntrack " +
			"or -m state (a stateful router's -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT): without it the answers " +
			"of a connection the nat table leaves alone look like first packets, which the nat table would translate")
	}
	if len(rs.Priority) > 0 {
		return nil, nil, errors.New("--nat xdpfw with an xdpfw-priority table: not supported yet (the bulk CPUs cannot enter the nat stage)")
	}
	filter := *rs
	filter.NAT = nil
	if err := natCTAddrs(&filter, nat); err != nil {
		return nil, nil, err
	}
	return &filter, nat, nil
}

// kernelNATRules refuses --nat xdpfw while the kernel's own nat table has
// rules (iptables-legacy's, or an nftables nat chain: iptables-nft's nat
// table is one), naming where: both would translate the same connections.
func kernelNATRules() error {
	var where []string
	// iptables-legacy: the nat table exists in this network namespace
	// only once something used it (reading it would create it)
	if b, err := os.ReadFile("/proc/net/ip_tables_names"); err == nil && strings.Contains("\n"+string(b), "\nnat\n") {
		if out, err := exec.Command("iptables-legacy-save", "-t", "nat").Output(); err == nil && countAppends(out) > 0 {
			where = append(where, fmt.Sprintf("iptables-legacy's nat table has %d rules", countAppends(out)))
		}
	}
	if out, err := exec.Command("nft", "list", "ruleset").Output(); err == nil {
		if n := nftNATRules(string(out)); n > 0 {
			where = append(where, fmt.Sprintf("nftables' nat chains have %d rules (iptables-nft's nat table is nftables' too: `nft list ruleset`)", n))
		}
	}
	if len(where) > 0 {
		return fmt.Errorf("--nat xdpfw: the kernel translates already: %s; remove them (iptables -t nat -F; nft delete ...) or load with --nat kernel", strings.Join(where, "; "))
	}
	return nil
}

// nftNATRules counts the rules of the nat chains (type nat hook ...) in
// `nft list ruleset` output: the lines of such a chain's block but its
// type, policy and closing lines.
func nftNATRules(out string) int {
	n, inChain, nat, rulesSeen := 0, false, false, 0
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "chain ") && strings.HasSuffix(l, "{"):
			inChain, nat, rulesSeen = true, false, 0
		case !inChain || l == "":
		case l == "}":
			if nat {
				n += rulesSeen
			}
			inChain = false
		case strings.HasPrefix(l, "type nat hook"):
			nat = true
		case strings.HasPrefix(l, "type ") || strings.HasPrefix(l, "policy ") || strings.HasPrefix(l, "comment "):
		default:
			rulesSeen++
		}
	}
	return n
}

// countAppends counts the -A lines of iptables-save output.
func countAppends(out []byte) int {
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "-A ") {
			n++
		}
	}
	return n
}

// startNAT compiles the nat table with the interfaces and sets of the
// filter in force and puts it in the data plane (datapath.StartNAT).
func (f *Firewall) startNAT(nat *rules.RuleSet) error {
	names, err := f.st.ifaceNames()
	if err != nil {
		return err
	}
	lim := f.dp.Limits()
	nt, _, err := compile.CompileNAT(nat, compile.Input{Ifaces: names.Attached, HostIfaces: names.Host, Sets: f.st.compileSets(),
		MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
	if err != nil {
		return err
	}
	if err := f.dp.StartNAT(nt, nat); err != nil {
		return err
	}
	// A source-translated packet the fast path cannot send (no neighbour
	// entry yet, a device it cannot redirect to, ...) goes to the kernel
	// with this host's address as its source, which the kernel drops as
	// a martian unless the device accepts local sources.
	for name := range f.st.Interfaces {
		p := filepath.Join("/proc/sys/net/ipv4/conf", name, "accept_local")
		if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("--nat xdpfw: setting %s: %w", p, err)
		}
	}
	// nat OUTPUT re-routes a translated packet with bpf_fib_lookup from
	// the loopback device (an output route's lookup), which the kernel
	// answers only for a device that forwards: the loopback's forwarding
	// does not make the host forward what its other devices receive, and
	// lets nat OUTPUT work on a host that forwards nothing, as the
	// kernel's does (bpf/lib/natout.h fw_nat_out_route).
	if !datapath.NATNoHooksOf(nat).Has(datapath.NATOutput) {
		p := "/proc/sys/net/ipv4/conf/lo/forwarding"
		if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("--nat xdpfw with nat OUTPUT: setting %s: %w", p, err)
		}
	}
	return nil
}

// natStatus is NATStatus of the firewall in force.
func (f *Firewall) natStatus() (NATStatus, error) {
	s := NATStatus{Mode: orDefault(f.st.NAT, NATKernel)}
	if s.Mode != NATXdpfw {
		return s, nil
	}
	c, ok, err := f.dp.NATCounters()
	if err != nil || !ok {
		return s, err
	}
	s.Counters = map[string]uint64{"bound": c.Bound.Packets, "no_port": c.NoPort.Packets, "full": c.Full.Packets,
		"no_addr": c.NoAddr.Packets, "untranslated": c.Untranslated.Packets, "lost": c.Lost.Packets, "fragment": c.Frag.Packets,
		"dnat": c.DNAT.Packets, "no_local": c.NoLocal.Packets,
		"icmp_error": c.ICMPError.Packets, "stale": c.Stale.Packets, "kernel_icmp": c.KernelICMP.Packets,
		"no_conntrack": c.NoCT.Packets, "output": c.Output.Packets, "no_route": c.NoRoute.Packets, "frag_nat": c.FragNAT.Packets}
	bs, err := f.dp.NATBindings()
	if err != nil {
		return s, err
	}
	for _, b := range bs {
		s.Bindings = append(s.Bindings, fmt.Sprintf("%s %s -> %s", conntrack.ProtoName(b.Proto), b.From, b.To))
	}
	return s, nil
}

// natText is the nat table nat as `-t nat` lines (rules.RuleSet.String),
// "" for none: what the state records (state.NATRules).
func natText(nat *rules.RuleSet) string {
	if nat == nil || len(nat.Rules) == 0 && len(nat.Chains) == 0 {
		return ""
	}
	return (&rules.RuleSet{NAT: nat}).String()
}

// natListing is the nat table in force as List shows it: xdpfw's, with
// --nat xdpfw.
func (f *Firewall) natListing() []string {
	if f.st.NAT != NATXdpfw || f.st.NATRules == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(f.st.NATRules, "\n"), "\n")
}

// NATMode is who translates in the firewall recorded under p (load
// --nat): NATKernel, or NATXdpfw; NATKernel when nothing is loaded. apply
// reads a file's *nat section only when xdpfw translates.
func NATMode(p Paths) string {
	st, err := loadState(p)
	if err != nil || st == nil {
		return NATKernel
	}
	return orDefault(st.NAT, NATKernel)
}

// SameNAT checks the nat table of a file apply reads (its RuleSet.NAT,
// read when xdpfw translates; nil when the file has none) against the one
// in force: apply replaces the filter table; the same nat table (or none:
// as iptables-restore leaves a table the file does not name) keeps the
// translations in force, a changed one is refused (load --nat xdpfw
// replaces the nat table).
func (f *Firewall) SameNAT(nat *rules.RuleSet) error {
	if nat == nil {
		return nil
	}
	if f.st.NAT != NATXdpfw {
		return errors.New("the file has a nat table, and the firewall in force leaves NAT to the kernel (load --nat kernel): load with --nat xdpfw for xdpfw to translate")
	}
	if got, want := natCanon(natText(nat)), natCanon(f.st.NATRules); got != want {
		return errors.New("the file's nat table differs from the one in force (xdpfw list shows it): apply replaces the filter table only; " +
			"a changed nat table needs `xdpfw load --nat xdpfw` (its bindings carry over: live connections keep their translation)")
	}
	return nil
}

// natCanon is nat table text with its rules' family left out: the nat
// table is IPv4's whichever way a file was read (a -4 from --ipv4-file).
func natCanon(text string) string {
	return strings.ReplaceAll(text, " -4 ", " ")
}

// natLoadNeeded says why Reconcile must load to put d's NAT in force: the
// mode (when d names one), or, with xdpfw's, another nat table (load
// replaces it; the bindings of live connections carry over).
func natLoadNeeded(st *state, d Desired) []string {
	if st == nil || !st.loaded() || d.Options.NAT == "" {
		return nil
	}
	if orDefault(st.NAT, NATKernel) != d.Options.NAT {
		return []string{"nat mode " + d.Options.NAT}
	}
	if d.Options.NAT == NATXdpfw && natCanon(natText(d.Rules.NAT)) != natCanon(st.NATRules) {
		return []string{"nat table"}
	}
	return nil
}

// TraceBinding is the binding of a traced packet's connection (--nat
// xdpfw, IPv4): the tuple the packet arrives with (or is sent with), the
// one the filter chains judge, and the one it leaves with. An arriving
// packet's destination is translated before the chains (as iptables'
// filter sees it after PREROUTING), its source after them; a packet this
// host sends is judged by OUTPUT as it was sent and translated after it.
type TraceBinding struct {
	Arrives    string `json:"arrives"`
	FilterSees string `json:"filter_sees"`
	Leaves     string `json:"leaves"`
}

// traceBinding looks up the binding of frame's connection in the live
// bindings (one lookup, as fw_nat_in and fw_nat_out_pre do) and returns
// it, with the frame as the filter chains see it: its destination
// translated (internal/nat.Rewrite4, the data plane's twin), its source
// not yet. That holds both ways: an arriving packet's destination is
// translated before the chain is picked (fw_nat_in), a sent one's before
// filter OUTPUT (fw_nat_out_pre: nat OUTPUT's connections; the others'
// bindings leave the destination as it is). nil, frame: no binding (nat
// OUTPUT's mark, all zeros, is none: lib/natout.h), no xdpfw NAT, or a
// packet translated otherwise (a later fragment by its datagram's first,
// an ICMP error by its quote: not looked up here).
func (f *Firewall) traceBinding(frame []byte) (*TraceBinding, []byte, error) {
	if f.st.NAT != NATXdpfw {
		return nil, frame, nil
	}
	p, err := packet.Decode(frame)
	if err != nil || !p.Src.Is4() || p.FragOffset != 0 {
		return nil, frame, nil
	}
	l3 := p.L3Offset()
	if len(frame) < l3+20 {
		return nil, frame, nil
	}
	ip := frame[l3:]
	l4 := ip[min(len(ip), int(ip[0]&0xf)*4):]
	from := datapath.NATTuple{Src: p.Src, Dst: p.Dst}
	switch {
	case (p.Proto == 6 || p.Proto == 17) && len(l4) >= 4:
		from.SrcPort, from.DstPort = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
	case p.Proto == 1 && len(l4) >= 8 && (l4[0] == 8 || l4[0] == 0): // an echo: its id as both ports
		from.SrcPort = binary.BigEndian.Uint16(l4[4:])
		from.DstPort = from.SrcPort
	case p.Proto == 6 || p.Proto == 17 || p.Proto == 1:
		return nil, frame, nil
	}
	to, ok, err := f.dp.NATBindingOf(p.Proto, from)
	if err != nil || !ok || to.Dst.IsUnspecified() {
		return nil, frame, err
	}
	seen := from
	seen.Dst, seen.DstPort = to.Dst, to.DstPort
	b := &TraceBinding{Arrives: fmt.Sprintf("%s %s", conntrack.ProtoName(p.Proto), from), FilterSees: seen.String(), Leaves: to.String()}
	if seen == from {
		return b, frame, nil
	}
	judged := slices.Clone(frame)
	if err := nat.Rewrite4(judged[l3:], nat.Rw{Src: seen.Src, Dst: seen.Dst, SPort: seen.SrcPort, DPort: seen.DstPort}); err != nil {
		return nil, frame, fmt.Errorf("translating the traced packet as its binding says: %w", err)
	}
	return b, judged, nil
}

// traceNAT says what the nat table in force (--nat xdpfw) does with a
// connection whose first packet is frame, arriving on iface, which FORWARD
// accepts: the POSTROUTING rule that decides it (compile.DecideNAT, the
// reference of the nat stage) on the egress device of the kernel's route,
// and its translation. "" without xdpfw's NAT. A packet of a bound
// connection keeps its binding's translation instead (traceBinding).
func (f *Firewall) traceNAT(frame []byte, iface string) (string, error) {
	if f.st.NAT != NATXdpfw {
		return "", nil
	}
	p, err := packet.Decode(frame)
	if err != nil || !p.Src.Is4() {
		return "", nil // IPv6: never translated
	}
	nat, err := f.st.natInForce()
	if err != nil {
		return "", err
	}
	rp := compile.RefPacketOf(&p, iface)
	rp.Chain = rules.ChainForward
	if routes, err := netlink.RouteGet(net.IP(p.Dst.AsSlice())); err == nil && len(routes) > 0 {
		if l, err := netlink.LinkByIndex(routes[0].LinkIndex); err == nil {
			rp.OutIface = l.Attrs().Name
		}
	}
	d := compile.DecideNAT(nat, rules.ChainPostrouting, rp)
	via := "by " + cmp.Or(rp.OutIface, "no device")
	if d.Target == nil {
		if d.Rule < 0 {
			return fmt.Sprintf("not translated (leaving %s: no nat rule takes it, POSTROUTING policy ACCEPT)", via), nil
		}
		return fmt.Sprintf("not translated (leaving %s: %s)", via, nat.Rules[d.Rule].String()), nil
	}
	return fmt.Sprintf("a new connection's source translated (leaving %s: %s); its later packets keep their binding's translation",
		via, nat.Rules[d.Rule].String()), nil
}

// natWarnings says where xdpfw's NAT (--nat xdpfw) translates less than
// the kernel's would: nat POSTROUTING's SNAT rules translate forwarded
// connections only (the nat stage runs for FORWARD, docs/nat.md), while
// the kernel's POSTROUTING also translates the connections this host
// opens. (MASQUERADE is left out: for a connection this host opens it
// gives the source the route picked already, unless a socket bound
// another address.)
func natWarnings(nat *rules.RuleSet) []string {
	if nat == nil {
		return nil
	}
	reach := rules.NATReach(nat)
	var out []string
	for i := range nat.Rules {
		r := &nat.Rules[i]
		post := r.Chain == rules.ChainPostrouting || (r.Chain == rules.ChainUser && reach[r.UserChain][rules.ChainPostrouting])
		if post && r.Target.NAT != nil && r.Target.NAT.Kind == rules.NATSNAT {
			out = append(out, fmt.Sprintf("%s: with --nat xdpfw this SNAT translates forwarded connections only: connections this "+
				"host opens leave with their own source address, where the kernel's nat table would translate them too "+
				"(docs/nat.md); load with --nat kernel if they must be", r.Pos))
		}
	}
	return out
}

// natCTAddrs refuses the filter rules of rs whose -m conntrack address
// tests xdpfw's NAT (--nat xdpfw, with the nat table nat) cannot answer
// as the kernel does. The kernel tests a connection's conntrack tuples:
// its original tuple as its first packet arrived (before PREROUTING's
// DNAT, REDIRECT), its reply tuple as its answers arrive (to POSTROUTING's
// SNAT, MASQUERADE address). The filter tests the packet's own addresses
// (compile's ctAddrBases), which hold every tuple address of a translated
// connection but two: a DNATed connection's original destination
// (--ctorigdst) and a source-translated one's reply destination
// (--ctrepldst). Where the nat table has a rule that translates that
// side (in a built-in chain, or a user chain one reaches), such a test would judge some connections on the wrong address:
// refused, at the rule. nil without such rules (the tests are exact then).
func natCTAddrs(rs, nat *rules.RuleSet) error {
	if nat == nil {
		return nil
	}
	var dst, src *rules.Rule // a nat rule translating each side
	reach := rules.NATReach(nat)
	for i := range nat.Rules {
		r := &nat.Rules[i]
		if r.Chain == rules.ChainUser && len(reach[r.UserChain]) == 0 {
			continue // a user chain no hook reaches translates nothing
		}
		if t := r.Target.NAT; t != nil && t.Kind.Source() && src == nil {
			src = r
		} else if t != nil && !t.Kind.Source() && dst == nil {
			dst = r
		}
	}
	for i := range rs.Rules {
		if err := natCTAddrRule(&rs.Rules[i], dst, src); err != nil {
			return err
		}
	}
	return nil
}

// natCTAddrRule is natCTAddrs for one filter rule r; dst and src are the
// nat table's first rules translating destinations and sources (nil:
// none).
func natCTAddrRule(r *rules.Rule, dst, src *rules.Rule) error {
	for _, c := range []struct {
		test bool
		nat  *rules.Rule
		opt  string
		what string
		alt  string
	}{
		{r.Match.CTOrigDst != nil, dst, "--ctorigdst", "a destination-translated connection's original destination (the address its client sent to, before DNAT or REDIRECT)",
			"test the translated destination instead (-d, or --ctreplsrc: the reply's source)"},
		{r.Match.CTReplDst != nil, src, "--ctrepldst", "a source-translated connection's reply destination (the address SNAT or MASQUERADE gave it)",
			"test the client's own address instead (--ctorigsrc)"},
	} {
		if c.test && c.nat != nil {
			return fmt.Errorf("%s: %s with --nat xdpfw: not supported while the nat table translates (%s: -j %s): the kernel tests "+
				"%s, which is not among the addresses of the packets xdpfw's filter judges, so the rule would match other "+
				"connections than iptables'; %s, or load with --nat kernel", r.Pos, c.opt, c.nat.Pos, c.nat.Target.NAT.Kind, c.what, c.alt)
		}
	}
	return nil
}

// natCTAddrsInForce is natCTAddrs of rs against the nat table in force
// (--nat xdpfw; nil otherwise).
func (f *Firewall) natCTAddrsInForce(rs *rules.RuleSet) error {
	return f.st.natCTAddrs(rs)
}

// natCTAddrs is natCTAddrs of rs against the nat table st records
// (nothing to check without one).
func (st *state) natCTAddrs(rs *rules.RuleSet) error {
	nat, err := st.natInForce()
	if err != nil {
		return err
	}
	return natCTAddrs(rs, nat)
}

// natInForce is the nat table xdpfw translates with (--nat xdpfw) in
// the firewall st records, nil without one.
func (st *state) natInForce() (*rules.RuleSet, error) {
	if st == nil || st.NAT != NATXdpfw || st.NATRules == "" {
		return nil, nil
	}
	rs, err := rules.Parse("the nat table in force", []byte(st.NATRules), rules.ParseOptions{NAT: true})
	if err != nil {
		return nil, fmt.Errorf("reading the nat table in force: %w", err)
	}
	return rs.NAT, nil
}
