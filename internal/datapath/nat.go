package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// NAT in xdpfw's data plane (`--nat xdpfw`, bpf/lib/natfw.h, docs/nat.md).
// The live program, loaded with Limits.NAT, looks every IPv4 packet up in
// the bindings (fw_nat_binds) and sends a forwarded connection's first
// packet, accepted, to the nat stage: the embedded object loaded again as
// the nat instance (fw_trace_mode traceNAT), whose classifier tables hold
// the nat table (compile.CompileNAT) and whose fw_nat_targets hold each
// nat rule's translation. It shares the live instance's hand-over slot,
// sets, bindings and nat counters, and returns to the live program's
// finish stage through its own fw_audit_next (pinned as natNextPin + the
// live program's id: the kernel empties a program array nothing holds).

// NATHook is a nat hook whose stage a new connection's first packet
// skips when no rule of the hook translates: FW_NAT_HOOK_*, the index of
// fw_nat_no_hook (bpf/maps.h).
type NATHook int

const (
	NATPrerouting NATHook = iota // FW_NAT_HOOK_PRE: the nat stage of XDP
	NATOutput                    // FW_NAT_HOOK_OUTPUT: the nat stage of tc egress
	natHooks                     // FW_NAT_HOOKS
)

// natHookChains: each NATHook's chain.
var natHookChains = [natHooks]rules.Chain{NATPrerouting: rules.ChainPrerouting, NATOutput: rules.ChainOutput}

// NATHooks is a set of NATHook.
type NATHooks uint8

// Has reports whether h is in s.
func (s NATHooks) Has(h NATHook) bool { return s&(1<<h) != 0 }

// NATNoHooksOf is the hooks of the nat table nat where no rule translates
// (compile.NATHookTranslates): Limits.NATNoHooks.
func NATNoHooksOf(nat *rules.RuleSet) NATHooks {
	var s NATHooks
	for h, chain := range natHookChains {
		if !compile.NATHookTranslates(nat, chain) {
			s |= 1 << h
		}
	}
	return s
}

const (
	traceNAT   = 4 // FW_TRACE_NAT
	stageNAT   = 4 // FW_XDP_STAGE_NAT
	natNextPin = "natnext_"
	// tcStagesPin + program id: the live program's fw_tc_stages (nat
	// OUTPUT at tc egress, bpf/lib/natout.h), pinned by StartNAT.
	tcStagesPin = "tcstages_"
	// tcStageNAT, tcStageEgress are FW_TC_STAGE_NAT and FW_TC_STAGE_EGRESS.
	tcStageNAT, tcStageEgress = 0, 1
	// natNextIngress is FW_NAT_NEXT_INGRESS: the nat instance's way back
	// to the live xdpfw_ingress after nat PREROUTING.
	natNextIngress = 1
	stageIngress   = 1 // FW_XDP_STAGE_INGRESS
	// natMaxRules is FW_NAT_MAX_RULES: nat rules the data plane can hold.
	natMaxRules = 4096
)

// natShared are the live maps the nat instance uses: the packet in the
// hand-over slot, what its classifier reads, and what it writes (the
// bindings, the nat counters, a translated connection's conntrack mark, a
// fragmented first packet's translation, a dying DNATed first packet's).
var natShared = []string{"fw_sets", "fw_addrtypes", "fw_recent", "fw_hashlimit", "fw_connlimit", "fw_log_ring", "fw_log_counters",
	"fw_config_map", "fw_xdp_handoff", "fw_nat_binds", "fw_nat_counts", "fw_nat_ifaddr", "fw_ct", "fw_tc_pkt", "fw_tc_stages", "fw_nat_frags", "fw_nat_dying", "fw_vlan_devs"}

// NAT counters (enum fw_nat_counter).
type NATCounters struct {
	Bound        Counter `json:"bound"`        // connections translated (bound both ways)
	NoPort       Counter `json:"no_port"`      // first packets dropped: no free port (or tuple) among those tried
	Full         Counter `json:"full"`         // first packets dropped: the binding map refused the entry
	NoAddr       Counter `json:"no_addr"`      // MASQUERADE first packets dropped: no source address from the FIB
	Untranslated Counter `json:"untranslated"` // first packets of forwarded connections the nat table leaves alone
	Lost         Counter `json:"lost"`         // packets dropped: a translated connection, past its first packet, without its binding
	Frag         Counter `json:"fragment"`     // packets dropped: IPv4 fragments whose translation is not known (a new connection's first packet; a later fragment without its datagram's record)
	DNAT         Counter `json:"dnat"`         // connections bound whose destination PREROUTING translated (DNAT, REDIRECT)
	NoLocal      Counter `json:"no_local"`     // REDIRECT first packets dropped: their device has no IPv4 address
	ICMPError    Counter `json:"icmp_error"`   // ICMP errors about translated connections, translated (outer header and quote)
	Stale        Counter `json:"stale"`        // bindings found stale (their connection gone from conntrack), removed
	KernelICMP   Counter `json:"kernel_icmp"`  // packets passed unbound, their source untranslated: the kernel answers them with an ICMP error (TTL, DF); a DNATed first packet's translation recorded for it (fw_nat_dying)
	NoCT         Counter `json:"no_conntrack"` // first packets dropped: a translated connection conntrack could not record (table full, --ct-full accept)
	Output       Counter `json:"output"`       // connections bound whose destination nat OUTPUT translated (locally generated)
	NoRoute      Counter `json:"no_route"`     // locally generated packets dropped: nat OUTPUT's destination has no route from the FIB
	FragNAT      Counter `json:"frag_nat"`     // later fragments given their datagram's translation (its first fragment's addresses)
}

const natCounterNum = 16 // FW_NAT_C_NUM

// natKinds maps the nat table's targets to enum fw_nat_kind.
var natKinds = map[rules.NATKind]uint32{rules.NATDNAT: 1, rules.NATSNAT: 2, rules.NATMasquerade: 3, rules.NATRedirect: 4}

// CheckNATScope refuses a nat table the data plane does not translate yet
// (docs/nat.md, Status): PREROUTING's DNAT and REDIRECT, POSTROUTING's
// SNAT and MASQUERADE and OUTPUT's DNAT (tc egress) are built; OUTPUT's
// REDIRECT (to the loopback address: delivered over lo, which xdpfw does
// not see) and the INPUT chain are not, nor IPv6.
func CheckNATScope(nat *rules.RuleSet) error {
	if nat == nil {
		return nil
	}
	if len(nat.Rules) > natMaxRules {
		return fmt.Errorf("the nat table has %d rules; the data plane holds %d", len(nat.Rules), natMaxRules)
	}
	reach := rules.NATReach(nat)
	for i := range nat.Rules {
		r := &nat.Rules[i]
		if r.Chain == rules.ChainInput {
			if r.Target.NAT != nil || r.Target.Verdict == rules.VerdictJump || r.Target.Verdict == rules.VerdictGoto {
				return fmt.Errorf("%s: the nat table's INPUT chain (SNAT of packets delivered to this host) is not translated by "+
					"--nat xdpfw: its rules need classifier tables of their own (nat PREROUTING holds INPUT's slot in the nat "+
					"stage's), a third program instance (docs/nat.md); hint: load with --nat kernel", r.Pos)
			}
		}
		out := r.Chain == rules.ChainOutput || (r.Chain == rules.ChainUser && reach[r.UserChain][rules.ChainOutput])
		if out && r.Target.NAT != nil && r.Target.NAT.Kind == rules.NATRedirect {
			return fmt.Errorf("%s: -j REDIRECT in the nat table's OUTPUT chain is not translated by --nat xdpfw: the kernel "+
				"redirects locally generated traffic to 127.0.0.1, delivered over lo, where xdpfw's tc egress never sees it "+
				"(docs/nat.md); hint: load with --nat kernel, or DNAT to an address of another host", r.Pos)
		}
		if o := r.Match.OutIface; out && r.Target.NAT != nil && o != nil && !o.Invert && !o.Prefix && o.Name == "lo" {
			return fmt.Errorf("%s: -o lo in the nat table's OUTPUT chain: xdpfw is not on lo and never sees these packets "+
				"(docs/nat.md); hint: load with --nat kernel", r.Pos)
		}
		if t := r.Target.NAT; t != nil && (t.AddrLo.Is6() || t.AddrHi.Is6()) {
			return fmt.Errorf("%s: --nat xdpfw translates IPv4 only", r.Pos)
		}
	}
	return nil
}

// natTarget is rule r's translation as the nat stage reads it.
func natTarget(t *rules.NATTarget) xdpfwFwNatTarget {
	be := func(a netip.Addr) uint32 {
		if !a.Is4() {
			return 0
		}
		b := a.As4()
		return binary.NativeEndian.Uint32(b[:]) // the bytes as they go on the wire
	}
	v := xdpfwFwNatTarget{Kind: natKinds[t.Kind], AddrLo: be(t.AddrLo), AddrHi: be(t.AddrHi)}
	if !t.AddrHi.IsValid() {
		v.AddrHi = v.AddrLo
	}
	if t.Ports {
		v.PortLo, v.PortHi = t.PortLo, t.PortHi
	}
	return v
}

// StartNAT loads the nat instance for the live program (loaded with
// Limits.NAT), installs the nat table nt (compiled from nat, the
// RuleSet.NAT, with the interfaces of the filter's tables) in its tables
// and each rule's translation, and puts its program in the live program's
// path: before the program is attached, or a connection's first packet
// finds no nat stage and is dropped (fail closed).
func (d *Datapath) StartNAT(nt *compile.NATTables, nat *rules.RuleSet) error {
	if !d.limits.NAT {
		return errors.New("the program was loaded without NAT (--nat kernel)")
	}
	if err := CheckNATScope(nat); err != nil {
		return err
	}
	stages, err := d.liveStages()
	if err != nil {
		return err
	}
	defer stages.Close()
	var finishID ebpf.ProgramID
	if err := stages.Lookup(uint32(stageFinish), &finishID); err != nil {
		return fmt.Errorf("the loaded program has no finish stage: %w", err)
	}
	finish, err := ebpf.NewProgramFromID(finishID)
	if err != nil {
		return fmt.Errorf("opening the finish stage: %w", err)
	}
	defer finish.Close()
	var ingressID ebpf.ProgramID
	if err := stages.Lookup(uint32(stageIngress), &ingressID); err != nil {
		return fmt.Errorf("the loaded program has no ingress stage: %w", err)
	}
	ingress, err := ebpf.NewProgramFromID(ingressID)
	if err != nil {
		return fmt.Errorf("opening the ingress program: %w", err)
	}
	defer ingress.Close()

	n, err := d.loadNAT()
	if err != nil {
		return err
	}
	defer n.close()
	view, o := n.view, &n.objs
	if err := view.Install(nt.Tables); err != nil {
		return fmt.Errorf("installing the nat table: %w", err)
	}
	for i := range nat.Rules {
		t := nat.Rules[i].Target.NAT
		if t == nil {
			continue
		}
		if err := o.FwNatTargets.Put(uint32(i), natTarget(t)); err != nil {
			return fmt.Errorf("writing the translation of %s: %w", nat.Rules[i].Pos, err)
		}
	}
	if err := o.FwAuditNext.Put(uint32(0), finish); err != nil {
		return fmt.Errorf("linking the nat stage to the finish stage: %w", err)
	}
	if err := o.FwAuditNext.Put(uint32(natNextIngress), ingress); err != nil {
		return fmt.Errorf("linking the nat stage's PREROUTING to the ingress program: %w", err)
	}
	name, err := pinStages(d.dir, natNextPin, d.prog, o.FwAuditNext)
	if err != nil {
		return err
	}
	tcName, err := d.startNATOutput(o.TcProg)
	if err != nil {
		_ = os.Remove(filepath.Join(d.dir, name))
		return err
	}
	if err := stages.Put(uint32(stageNAT), o.Prog); err != nil {
		_ = os.Remove(filepath.Join(d.dir, name))
		_ = os.Remove(filepath.Join(d.dir, tcName))
		return fmt.Errorf("putting the nat stage in the program's path: %w", err)
	}
	d.natNextPin = name
	d.tcStagesName = tcName
	return nil
}

// startNATOutput puts the nat instance's tc stage (nat OUTPUT,
// xdpfw_egress_nat) and the live egress program, which it enters again,
// in the live program's fw_tc_stages, and pins that (tcStagesPin + the
// live program's id: the kernel empties a program array nothing holds).
// Returns the pin's name.
func (d *Datapath) startNATOutput(stage *ebpf.Program) (string, error) {
	if d.egress == nil {
		return "", errors.New("nat OUTPUT: the live egress program is not open")
	}
	tc, err := d.liveArray(d.tcStages, tcStagesPin)
	if err != nil {
		return "", err
	}
	defer tc.Close()
	if err := tc.Put(uint32(tcStageEgress), d.egress); err != nil {
		return "", fmt.Errorf("linking the tc nat stage back to the egress program: %w", err)
	}
	name, err := pinStages(d.dir, tcStagesPin, d.prog, tc)
	if err != nil {
		return "", err
	}
	if err := tc.Put(uint32(tcStageNAT), stage); err != nil {
		_ = os.Remove(filepath.Join(d.dir, name))
		return "", fmt.Errorf("putting the tc nat stage (nat OUTPUT) in the egress program's path: %w", err)
	}
	return name, nil
}

// natObjs are the nat instance's program and own maps.
type natObjs struct {
	Prog   *ebpf.Program `ebpf:"xdpfw_nat"`
	TcProg *ebpf.Program `ebpf:"xdpfw_egress_nat"`
	instanceTables
	FwNatTargets *ebpf.Map `ebpf:"fw_nat_targets"`
	FwAuditNext  *ebpf.Map `ebpf:"fw_audit_next"`
}

// natInstance is a loaded nat instance, not yet in any path: its
// objects, and a view whose tables are its own (Install works on them).
type natInstance struct {
	objs natObjs
	view *Datapath
}

// close releases n's file descriptors (what the program array holds
// stays loaded).
func (n *natInstance) close() { closeInstance(&n.objs) }

// loadNAT loads the nat instance of the live program (not yet in its path).
func (d *Datapath) loadNAT() (*natInstance, error) {
	spec, lim, live, done, err := d.instanceSpec(traceNAT, d.limits)
	if err != nil {
		return nil, err
	}
	defer done()
	repl, closeShared, err := d.sharedMaps(live, natShared)
	if err != nil {
		return nil, err
	}
	defer closeShared()
	for name, m := range repl { // sized as the live ones (instanceSpec sizes without NAT)
		if s := spec.Maps[name]; s != nil {
			s.MaxEntries = m.MaxEntries()
		}
	}
	n := &natInstance{}
	o := &n.objs
	if err := spec.LoadAndAssign(o, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, instanceLoadErr("nat", err)
	}
	n.view = o.view(d, lim)
	return n, nil
}

// SetNATIfAddrs makes fw_nat_ifaddr, REDIRECT's address of each
// interface (lib/natdst.h), hold addrs (ifindex: its primary IPv4
// address): stale entries removed, new and changed ones written.
func (d *Datapath) SetNATIfAddrs(addrs map[uint32]netip.Addr) error {
	if d.natIfAddr == nil {
		return errors.New("this program has no REDIRECT address table (loaded by an earlier xdpfw version): load again")
	}
	want := make(map[uint32]uint32, len(addrs))
	for ifindex, a := range addrs {
		if a.Is4() {
			b := a.As4()
			want[ifindex] = binary.NativeEndian.Uint32(b[:]) // the bytes as they go on the wire
		}
	}
	if len(want) > int(d.natIfAddr.MaxEntries()) {
		return fmt.Errorf("%d interfaces have an IPv4 address; REDIRECT's table holds %d", len(want), d.natIfAddr.MaxEntries())
	}
	return syncMap(d.natIfAddr, want, "REDIRECT's address table", func(k uint32) string { return fmt.Sprintf("interface %d", k) })
}

// NATCounters reads the nat counters; ok false when the program has none
// (an earlier version's).
func (d *Datapath) NATCounters() (c NATCounters, ok bool, err error) {
	if d.natCounts == nil {
		return c, false, nil
	}
	// a map pinned by an earlier version has fewer counters (until the
	// next load carries them over): the others read 0
	slots, err := readSlots(d.natCounts, min(natCounterNum, d.natCounts.MaxEntries()))
	if err != nil {
		return c, true, fmt.Errorf("reading the nat counters: %w", err)
	}
	slots = append(slots, make([][]xdpfwFwCounter, natCounterNum-len(slots))...)
	clk := d.clock()
	return NATCounters{Bound: clk.sum(slots[0]), NoPort: clk.sum(slots[1]), Full: clk.sum(slots[2]), NoAddr: clk.sum(slots[3]),
		Untranslated: clk.sum(slots[4]), Lost: clk.sum(slots[5]), Frag: clk.sum(slots[6]), DNAT: clk.sum(slots[7]),
		NoLocal: clk.sum(slots[8]), ICMPError: clk.sum(slots[9]), Stale: clk.sum(slots[10]), KernelICMP: clk.sum(slots[11]),
		NoCT: clk.sum(slots[12]), Output: clk.sum(slots[13]), NoRoute: clk.sum(slots[14]), FragNAT: clk.sum(slots[15])}, true, nil
}

// NATBinding is one direction of a translated connection: packets
// arriving with From leave with To (docs/nat.md, Bindings).
type NATBinding struct {
	Proto    uint8
	From, To NATTuple
}

// NATTuple is an IPv4 tuple (ICMP echo: the id as both ports).
type NATTuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

// String is the tuple as listings show it: SRC:PORT > DST:PORT.
func (t NATTuple) String() string {
	return fmt.Sprintf("%s:%d > %s:%d", t.Src, t.SrcPort, t.Dst, t.DstPort)
}

// NATBindingOf looks up the binding of the packets of protocol proto
// that arrive with tuple from (one direction of a translated connection,
// or of one the nat table leaves as it is): the tuple they leave with; ok
// false when there is none (or the program has no bindings).
func (d *Datapath) NATBindingOf(proto uint8, from NATTuple) (to NATTuple, ok bool, err error) {
	if d.natBinds == nil || !from.Src.Is4() || !from.Dst.Is4() {
		return to, false, nil
	}
	addr := func(a netip.Addr) uint32 { b := a.As4(); return binary.NativeEndian.Uint32(b[:]) }
	k := xdpfwFwNatTuple{Saddr: addr(from.Src), Daddr: addr(from.Dst), Sport: natSwap16(from.SrcPort), Dport: natSwap16(from.DstPort), Proto: proto}
	var v xdpfwFwNatRw
	if err := d.natBinds.Lookup(&k, &v); errors.Is(err, ebpf.ErrKeyNotExist) {
		return to, false, nil
	} else if err != nil {
		return to, false, fmt.Errorf("looking up the binding of %v: %w", from, err)
	}
	return NATTuple{natAddr(v.Saddr), natAddr(v.Daddr), natSwap16(v.Sport), natSwap16(v.Dport)}, true, nil
}

// natAddr is the IPv4 address of a struct fw_nat_tuple or fw_nat_rw
// field (its bytes as on the wire).
func natAddr(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// NATBindings lists the bindings in force (both directions of each
// translated connection).
func (d *Datapath) NATBindings() ([]NATBinding, error) {
	if d.natBinds == nil {
		return nil, nil
	}
	addr, port := natAddr, natSwap16
	var out []NATBinding
	var k xdpfwFwNatTuple
	var v xdpfwFwNatRw
	it := d.natBinds.Iterate()
	for it.Next(&k, &v) {
		if v.Daddr == 0 { // nat OUTPUT's mark of a judged tuple (bpf/lib/natout.h), no translation
			continue
		}
		out = append(out, NATBinding{Proto: k.Proto,
			From: NATTuple{addr(k.Saddr), addr(k.Daddr), port(k.Sport), port(k.Dport)},
			To:   NATTuple{addr(v.Saddr), addr(v.Daddr), port(v.Sport), port(v.Dport)}})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the nat bindings: %w", err)
	}
	return out, nil
}

// natReplies gives each connection of es that xdpfw translates its reply
// tuple (conntrack.Entry.NAT), from its original direction's binding: the
// one whose arriving source and leaving destination are the entry's
// originator and responder (the filter sees the source before SNAT, the
// destination after DNAT).
func (d *Datapath) natReplies(es []conntrack.Entry) error {
	bs, err := d.NATBindings()
	if err != nil || len(bs) == 0 {
		return err
	}
	natRepliesFrom(bs, es)
	return nil
}

// natRepliesFrom is natReplies with the bindings bs.
func natRepliesFrom(bs []NATBinding, es []conntrack.Entry) {
	type key struct {
		proto    uint8
		src, dst netip.AddrPort
	}
	byEnds := map[key]NATBinding{}
	for _, b := range bs {
		dport := b.To.DstPort
		if b.Proto == 1 {
			dport = 0
		}
		byEnds[key{b.Proto, netip.AddrPortFrom(b.From.Src, b.From.SrcPort), netip.AddrPortFrom(b.To.Dst, dport)}] = b
	}
	for i := range es {
		e := &es[i]
		dst := e.Dst
		if e.Proto == 1 {
			dst = netip.AddrPortFrom(dst.Addr(), 0)
		}
		b, ok := byEnds[key{e.Proto, e.Src, dst}]
		if !ok {
			continue
		}
		snat := b.To.Src != b.From.Src || b.To.SrcPort != b.From.SrcPort
		dnat := b.To.Dst != b.From.Dst || b.To.DstPort != b.From.DstPort
		if !snat && !dnat {
			continue // not translated
		}
		n := &conntrack.NATReply{Src: netip.AddrPortFrom(b.To.Dst, b.To.DstPort), Dst: netip.AddrPortFrom(b.To.Src, b.To.SrcPort)}
		switch {
		case snat && dnat:
			n.Kind = "SNAT,DNAT"
		case dnat:
			n.Kind = "DNAT"
		default:
			n.Kind = "SNAT"
		}
		if dnat {
			n.OrigDst = netip.AddrPortFrom(b.From.Dst, b.From.DstPort)
		}
		e.NAT = n
	}
}

// NATFlush removes every binding (both directions of every translated
// connection) and returns how many entries it removed: what `conntrack
// flush` leaves of a connection's translation. A packet of a connection
// bound before takes the nat stage again as a first packet once its
// conntrack entry is gone too; with the entry still there, a translated
// connection's next packet is dropped as lost (fail closed), but for the
// original direction of one whose entry keeps its source translation
// (docs/nat.md), which goes on with it.
func (d *Datapath) NATFlush() (int, error) {
	if d.natBinds == nil {
		return 0, nil
	}
	var (
		keys []xdpfwFwNatTuple
		k    xdpfwFwNatTuple
		v    xdpfwFwNatRw
	)
	it := d.natBinds.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("reading the nat bindings: %w", err)
	}
	n := 0
	for i := range keys {
		if err := d.natBinds.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, fmt.Errorf("removing a nat binding: %w", err)
		}
		n++
	}
	return n, nil
}
