package compile

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// Input is everything a compilation depends on.
type Input struct {
	RuleSet *rules.RuleSet
	// IDs[i] is the stable counter id of RuleSet.Rules[i] (>= FirstRuleID).
	IDs []uint32
	// Ifaces maps the names of the interfaces packets can arrive on (the
	// attached ones) to their ifindex; -i matches, and OUTPUT's -o (tc
	// egress runs on the same interfaces), are resolved against it.
	Ifaces map[string]uint32
	// HostIfaces maps the names of every interface of the host to their
	// ifindex: a forwarded packet may leave by one xdpfw is not attached
	// to, so FORWARD's -o is resolved against it. nil: Ifaces.
	HostIfaces map[string]uint32
	// Sets are the named sets rules may use (-m set --match-set).
	Sets map[string]SetInfo
	// LogRate and LogBurst are the rate limit of logged rules that set
	// none (zero: DefaultLogRate, DefaultLogBurst).
	LogRate  rules.LogRate
	LogBurst uint32
	// Bounds of the data plane's tables (0: the defaults).
	MaxEntries   int
	MaxNodes     int
	MaxLeafSlots int
}

// SetInfo is what the compiler needs of a named set.
type SetInfo struct {
	ID     uint32
	Family rules.Family // FamilyIPv4 or FamilyIPv6
}

// Warning is something the operator should know about a compiled rule.
type Warning struct {
	Rule int       // index in RuleSet.Rules; -1: about a chain (Pos)
	Pos  rules.Pos // of the chain's declaration, with Rule -1
	Msg  string
}

// maxEntriesPerRule bounds the expansion of one rule (multiport x multiport x
// interfaces), so one rule cannot eat the table.
const maxEntriesPerRule = 1024

// alt is one disjunct of a rule's expansion: the fields that multiport,
// --ports, -i and -o make disjunctive.
type alt struct {
	sport, dport rules.PortRange
	ifindex      uint32    // 0: any
	oif          [2]uint32 // output ifindex range; fullOif: any
}

var (
	fullRange = rules.PortRange{Lo: 0, Hi: 65535}
	fullOif   = [2]uint32{0, ^uint32(0)}
)

// anyAlt is the alternative that constrains nothing.
var anyAlt = alt{sport: fullRange, dport: fullRange, oif: fullOif}

// Names is what interface names resolve against (Input.Ifaces,
// Input.HostIfaces).
type Names struct {
	Attached map[string]uint32
	Host     map[string]uint32 // nil: Attached
}

// LoopbackNote is the warning of a rule that concerns only the loopback
// interface (-i lo, -o lo) where xdpfw is not attached to it: XDP and tc
// never see that traffic, so the rule compiles to nothing. Callers that
// word warnings for a whole rule set say it once, for all such rules.
const LoopbackNote = "it concerns only loopback traffic, which xdpfw never sees (XDP and tc run on the attached devices, not on lo): it has no effect"

// Compile builds the classifier tables: the entries of every rule, chain by
// chain in rule order (a lower index wins, as iptables' first match), and a
// decision tree per chain and family over them whose root carries the
// chain's policy for that family.
func Compile(in Input) (*Tables, []Warning, error) {
	rs := in.RuleSet
	if len(in.IDs) != len(rs.Rules) {
		return nil, nil, fmt.Errorf("compile: %d ids for %d rules", len(in.IDs), len(rs.Rules))
	}
	if rs.NAT != nil && len(rs.NAT.Rules) > 0 {
		// The nat table parses (rules.ParseOptions.NAT) but the data
		// plane does not translate yet: never load a rule set whose
		// translations would be left out (docs/nat.md, Status).
		return nil, nil, fmt.Errorf("compile: %d nat rule(s): xdpfw's data plane does not translate addresses yet; "+
			"keep the nat table in the kernel (docs/nat.md)", len(rs.NAT.Rules))
	}
	var (
		entries []Entry
		warn    []Warning
	)
	spans := make([]Span, len(rs.Rules))
	if hasChains(rs) {
		// Chains are flattened: a rule's entries are not one span (one
		// rule may sit in several places), so edits of such a rule set
		// recompile it (firewall: the full path); Spans stay empty.
		var err, kept error
		if entries, warn, kept, err = flatten(in); err != nil {
			return nil, nil, err
		}
		t, w, err := finish(in, entries, warn, spans)
		if err != nil && kept != nil {
			// the probes that stood for such negations do not fit
			return nil, nil, fmt.Errorf("%w; with its RETURNs and gotos that negate such tests kept as probes, the rule set "+
				"does not fit either: %v", kept, err)
		}
		return t, w, err
	}
	// Entries in priority order, chain by chain; a lower index wins.
	for c := rules.Chain(0); c < rules.NumChains; c++ {
		for i := range rs.Rules {
			r := &rs.Rules[i]
			if r.Chain != c {
				continue
			}
			ents, w, err := RuleEntries(r, in.IDs[i], Names{Attached: in.Ifaces, Host: in.HostIfaces}, in.Sets)
			if err != nil {
				return nil, nil, err
			}
			for _, m := range w {
				warn = append(warn, Warning{Rule: i, Msg: m})
			}
			spans[i] = Span{Start: uint32(len(entries)), Count: uint32(len(ents))}
			entries = append(entries, ents...)
		}
	}
	return finish(in, entries, warn, spans)
}

// finish builds the tables of the compiled entries.
func finish(in Input, entries []Entry, warn []Warning, spans []Span) (*Tables, []Warning, error) {
	rs := in.RuleSet
	for i := range entries { // the notes of rule sets without chains: one per rule (flatten gives its own)
		if e := &entries[i]; e.Noted() && e.Note == 0 {
			e.Note = e.RuleID
		}
	}
	t, pw, err := Build(entries, rs, Names{Attached: in.Ifaces, Host: in.HostIfaces}, in.Sets,
		Limits{Entries: in.MaxEntries, Nodes: in.MaxNodes, LeafSlots: in.MaxLeafSlots})
	if err != nil {
		return nil, nil, err
	}
	warn = append(warn, pw...)
	t.Spans = spans
	if t.Logs, err = logLimits(in); err != nil {
		return nil, nil, err
	}
	if t.Limits, err = matchLimits(in); err != nil {
		return nil, nil, err
	}
	if t.Recent, err = recentRules(in); err != nil {
		return nil, nil, err
	}
	if t.HashLimits, err = hashLimitRules(in); err != nil {
		return nil, nil, err
	}
	if t.ConnLimits, err = connLimitRules(in); err != nil {
		return nil, nil, err
	}
	if err := checkStateNotes(in, t); err != nil {
		return nil, nil, err
	}
	t.SetNames = map[uint32]string{}
	for name, s := range in.Sets {
		t.SetNames[s.ID] = name
	}
	return t, warn, nil
}

// Limits bound one generation's tables (0: the defaults).
type Limits struct {
	Entries   int
	Nodes     int
	LeafSlots int
}

// Build makes a generation's tables from its entries (priority order,
// chain by chain) and the policies and tables of pol (its filter rules are
// not read): the trees, the roots and their fast rules, the raw table's
// entries and the priority table's (compiled here, against names and
// sets, with their warnings). Compile calls it once every rule is
// compiled; a rebuild that folds the delta stage calls it with the
// entries in force, which are compiled already. Spans and SetNames are
// left to the caller.
func Build(entries []Entry, pol *rules.RuleSet, names Names, sets map[string]SetInfo, lim Limits) (*Tables, []Warning, error) {
	limit := lim.Entries
	if limit == 0 {
		limit = DefaultMaxEntries
	}
	prio, warn, err := priorityEntries(pol, names, sets)
	if err != nil {
		return nil, nil, err
	}
	if len(entries)+len(prio) > limit {
		return nil, nil, fmt.Errorf("the rule set needs %d classifier entries; this firewall was loaded for at most %d "+
			"(multiport lists and -i wildcards expand into several entries each; load with a larger --max-rules)", len(entries)+len(prio), limit)
	}
	if len(entries)+len(prio) > MaxLeafSlots { // a one-candidate leaf holds an entry index in 24 bits
		return nil, nil, fmt.Errorf("the rule set needs %d classifier entries; a generation holds at most %d", len(entries), MaxLeafSlots)
	}
	maxNodes := lim.Nodes
	if maxNodes == 0 {
		maxNodes = DefaultMaxNodes
	}
	t := &Tables{Entries: entries, Prio: prio}
	for i := range entries {
		for c := entries[i].Chain; c < rules.NumChains; c++ {
			t.ChainEnd[c] = uint32(i + 1)
		}
	}
	st, err := buildTrees(t, pol, treeOpts{maxNodes: maxNodes, maxLeafSlots: MaxLeafSlots})
	if err != nil {
		return nil, nil, fmt.Errorf("the rule set cannot be loaded: %w", err)
	}
	if lim.LeafSlots > 0 && st.LeafSlots > lim.LeafSlots {
		return nil, nil, fmt.Errorf("the rule set cannot be loaded: its classifier needs %d leaf slots, the data plane holds %d", st.LeafSlots, lim.LeafSlots)
	}
	// The data plane walks at most MaxDepth nodes and MaxLeaf candidates
	// a tree (FW_TREE_DEPTH, FW_LEAF_MAX); a deeper walk would end
	// without a leaf (fw_tree: no match). The builder never makes one
	// (it stops splitting at the depth bound and refuses a larger leaf):
	// checked here all the same, so that a builder change cannot put a
	// tree in force that the data plane would cut.
	if st.MaxDepth > MaxDepth || st.MaxLeaf > MaxLeaf {
		return nil, nil, fmt.Errorf("the rule set cannot be loaded: its classifier walks up to %d nodes and %d candidates a tree, "+
			"past the data plane's %d and %d (a builder bug: please report it)", st.MaxDepth, st.MaxLeaf, MaxDepth, MaxLeaf)
	}
	t.Stats = st
	setFastRules(t)
	if t.Raw, err = rawEntries(pol); err != nil {
		return nil, nil, err
	}
	for i := range t.Raw {
		e := &t.Raw[i]
		for r := range t.Roots {
			fam := rules.FamilyIPv4
			if r%2 == 1 {
				fam = rules.FamilyIPv6
			}
			if rules.Chain(r/2) == e.Chain && (e.Match&MFamily == 0 || e.Family == fam) {
				t.Roots[r].Flags |= RootRaw
			}
		}
	}
	return t, warn, nil
}

// rawEntries compiles the raw table's NOTRACK rules (pol.Raw): a
// PREROUTING rule into an entry of chain INPUT and one of FORWARD (the
// packets arriving), an OUTPUT rule into one of OUTPUT. The parser lets
// them match on the family, protocol, addresses and one port range each,
// so each rule is one entry per chain.
func rawEntries(pol *rules.RuleSet) ([]Entry, error) {
	var out []Entry
	for i := range pol.Raw {
		r := pol.Raw[i]
		chains := []rules.Chain{r.Chain}
		if r.Chain == rules.ChainPrerouting {
			chains = []rules.Chain{rules.ChainInput, rules.ChainForward}
		}
		for _, c := range chains {
			r.Chain = c
			ents, _, err := RuleEntries(&r, 0, Names{}, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, ents...)
		}
	}
	if len(out) > MaxRaw {
		return nil, fmt.Errorf("the raw table has %d NOTRACK rules; xdpfw holds at most %d entries (a PREROUTING rule takes two)", len(pol.Raw), MaxRaw)
	}
	return out, nil
}

// raw is p as the classifier of root sees it: UNTRACKED when the root has
// raw entries and one matches (fw_decide_start), whatever conntrack would
// say; else p itself.
func (t *Tables) raw(root *Root, p *RefPacket, dev Dev) *RefPacket {
	if root.Flags&RootRaw == 0 || !t.RawMatch(p, dev) {
		return p
	}
	q := *p
	q.CTState = CTUntracked
	return &q
}

// RawMatch tells whether a NOTRACK rule of the raw table matches p (the
// Go twin of fw_raw_notrack).
func (t *Tables) RawMatch(p *RefPacket, dev Dev) bool {
	for i := range t.Raw {
		if t.Raw[i].Matches(p, dev, t.SetNames) {
			return true
		}
	}
	return false
}

// RuleEntries compiles one rule into its entries, all carrying id, with
// warnings about what it will not do; errors carry the rule's position.
func RuleEntries(r *rules.Rule, id uint32, ifaces Names, sets map[string]SetInfo) ([]Entry, []string, error) {
	ents, w, err := compileRule(r, id, ifaces, sets)
	var re *rules.Error
	if errors.As(err, &re) {
		return nil, nil, re // positioned already (a set name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", r.Pos, err)
	}
	return ents, w, nil
}

func compileRule(r *rules.Rule, id uint32, ifaces Names, sets map[string]SetInfo) ([]Entry, []string, error) {
	var warn []string
	base := Entry{Chain: r.Chain, RuleID: id}
	switch r.Target.Verdict {
	case rules.VerdictAccept:
		base.Action, base.Reason = ActAccept, ReasonRuleAccept
	case rules.VerdictDrop:
		base.Action, base.Reason = ActDrop, ReasonRuleDrop
	case rules.VerdictReject:
		base.Action, base.Reason = ActReject, ReasonRuleReject
		k, err := RejectOf(r.Target.RejectWith)
		if err != nil {
			return nil, nil, err
		}
		base.Reject = k
	case rules.VerdictLog:
		base.Action = ActLog // logs, decides nothing: the walk goes on
	case rules.VerdictNotrack:
		base.Action = ActNotrack // the raw table (rawEntries)
	case rules.VerdictJump, rules.VerdictGoto, rules.VerdictReturn, rules.VerdictNone:
		// decides nothing itself: its entries are its matches, which the
		// flattening of chains uses (flatten.go)
	default:
		return nil, nil, fmt.Errorf("unknown verdict %v", r.Target.Verdict)
	}
	base.Log = r.Target.Log
	base.Limit = r.Match.Limit != nil
	if mod := stateModule(&r.Match); mod != "" {
		switch {
		case r.Chain == rules.ChainOutput:
			return nil, nil, fmt.Errorf("-m %s is not supported in OUTPUT (the tc egress program has no room for it yet); "+
				"use it in INPUT or FORWARD", mod)
		case r.Target.Log || r.Target.Verdict == rules.VerdictLog && mod == "connlimit":
			// a LOG rule's -m recent or -m hashlimit is settled in rule
			// order as any other's and logs when it matches
			// (fw_state_settle); --log logs what its rule decides
			return nil, nil, fmt.Errorf("-m %s on a rule that logs is not supported; put the LOG rule beside it without -m %[1]s", mod)
		}
		base.State, base.HashLimit, base.ConnLimit = true, mod == "hashlimit", mod == "connlimit"
	}

	m := &r.Match
	if _, attached := ifaces.Attached[Loopback]; !attached && (isLoopback(m.InIface) || isLoopback(m.OutIface)) {
		return nil, []string{LoopbackNote}, nil
	}
	// test turns on a field test, negated when invert is set.
	test := func(bit uint64, invert bool) {
		base.Match |= bit
		if invert {
			base.Invert |= bit
		}
	}
	if m.Family != rules.FamilyAny {
		test(MFamily, false)
		base.Family = m.Family
	}
	if m.Proto != nil {
		test(MProto, m.Proto.Invert)
		base.Proto = m.Proto.Proto
	}
	if m.Src != nil {
		test(MSrc, m.Src.Invert)
		base.Src, base.SrcMask = prefixBytes(m.Src.Prefix)
	}
	if m.Dst != nil {
		test(MDst, m.Dst.Invert)
		base.Dst, base.DstMask = prefixBytes(m.Dst.Prefix)
	}
	if m.MACSrc != nil {
		test(MMACSrc, m.MACSrc.Invert)
		base.SrcMAC = m.MACSrc.Addr
	}
	if m.MACDst != nil {
		test(MMACDst, m.MACDst.Invert)
		base.DstMAC = m.MACDst.Addr
	}
	if m.TCPFlags != nil {
		test(MTCPFlags, m.TCPFlags.Invert)
		base.TCPMask, base.TCPCmp = m.TCPFlags.Mask, m.TCPFlags.Comp
	}
	if m.ICMP != nil {
		switch {
		case m.ICMP.Any && m.ICMP.Invert:
			return nil, append(warn, "! --icmp-type any matches no packet"), nil
		case m.ICMP.Any:
			test(ML4Hdr, false)
		default:
			bits := MICMPType
			if m.ICMP.Code >= 0 {
				bits |= MICMPCode
				base.ICMPCode = uint8(m.ICMP.Code)
			}
			test(bits, m.ICMP.Invert)
			base.ICMPType = m.ICMP.Type
		}
	}
	if m.VLAN != nil {
		test(MVLAN, m.VLAN.Invert)
		base.VLAN = m.VLAN.ID
	}
	if m.VLANPrio != nil {
		test(MVLANPrio, m.VLANPrio.Invert)
		base.VLANPrio = m.VLANPrio.Prio
	}
	if m.Fragment != nil {
		test(MFrag, !*m.Fragment)
		if *m.Fragment {
			// The classifier still tells later fragments apart, but none
			// reaches it: each takes its first fragment's verdict
			// (bpf/lib/frag.h), as the filter table sees datagrams whole.
			warn = append(warn, "-f matches no packet: later fragments get their first fragment's verdict, "+
				"as iptables' filter table sees datagrams reassembled (docs/fragments.md)")
		}
	}
	for _, s := range []struct {
		sm  *rules.SetMatch
		bit uint64
		id  *uint32
	}{{m.SrcSet, MSrcSet, &base.SrcSet}, {m.DstSet, MDstSet, &base.DstSet}} {
		if s.sm == nil {
			continue
		}
		info, ok := sets[s.sm.Name]
		if !ok {
			return nil, nil, &rules.Error{Pos: s.sm.Pos, Msg: fmt.Sprintf("set %q does not exist", s.sm.Name),
				Hint: fmt.Sprintf("create it first: xdpfw set create %s hash:net (hash:ip for single addresses; --family inet6 for IPv6)", s.sm.Name)}
		}
		// A set holds one family; the rule matches only that family.
		if base.Match&MFamily != 0 && base.Family != info.Family {
			return nil, nil, &rules.Error{Pos: s.sm.Pos,
				Msg: fmt.Sprintf("set %q holds %s addresses but the rule matches %s packets", s.sm.Name, info.Family, base.Family)}
		}
		test(MFamily, false)
		base.Family = info.Family
		test(s.bit, s.sm.Invert)
		*s.id = info.ID
	}

	if mk := m.Mark; mk != nil {
		if mk.Value&^mk.Mask != 0 && !mk.Invert {
			return nil, append(warn, "--mark VALUE has bits outside MASK; the rule never matches"), nil
		}
		test(MMark, mk.Invert)
		base.Mark, base.MarkMask = mk.Value, mk.Mask
	}
	// --ctstate SNAT, DNAT: xt_conntrack adds them to the state of a
	// packet of a connection whose source (destination) NAT changed, so
	// the rule is a disjunction: its entries are one without the NAT test
	// (states plain) and one with it (states nat): ctNATEntries.
	var nat, natStates, connless uint8
	connected := true // the rule has entries for packets of a connection
	if m.UsesConntrack() {
		const tracked = rules.CTNew | rules.CTEstablished | rules.CTRelated
		mask := rules.CTAll
		if c := m.CTState; c != nil {
			mask = c.Mask & rules.CTAll
			if c.Invert {
				mask = ^c.Mask & rules.CTAll // complemented here: the data plane never inverts it
			}
			if c.Mask&rules.CTSNAT != 0 {
				nat |= CTISrcNAT
			}
			if c.Mask&rules.CTDNAT != 0 {
				nat |= CTIDstNAT
			}
		}
		if m.CTProto != nil || m.CTStatus != nil || m.CTDir != nil || m.CTAddrs() {
			// the tests other than --ctstate read a connection: the kernel's
			// xt_conntrack judges a packet without one (INVALID, UNTRACKED)
			// by the state test alone, and without one matches none
			if m.CTState != nil {
				connless = mask &^ tracked
			}
			mask &= tracked
		}
		if nat != 0 {
			// a packet without a connection has no NAT state: ! --ctstate
			// DNAT takes it; --ctstate NEW,DNAT needs the DNAT bit only
			// where the state is not one of the rule's already
			if m.CTState.Invert {
				mask, natStates = mask&^tracked, mask&tracked
			} else {
				natStates = tracked &^ mask
			}
		}
		if connected = mask != 0 || natStates != 0; !connected && connless == 0 {
			return nil, append(warn, "its -m conntrack tests leave no connection state; the rule never matches"), nil
		}
		test(MCTState, false)
		base.CTState = mask
		if p := m.CTProto; p != nil {
			test(MCTProto, p.Invert)
			base.CTProto = p.Proto
		}
		if s := m.CTStatus; s != nil {
			test(MCTStatus, s.Invert)
			base.CTStatus = s.Mask
		}
		if d := m.CTDir; d != nil {
			test(MCTDir, *d == rules.CTDirOriginal) // the test is "in the reply direction"
		}
	}

	if w, err := headerTests(m, &base, test); err != nil || w != "" {
		if w != "" {
			warn = append(warn, w)
		}
		return nil, warn, err
	}

	if a := m.AddrType; a != nil {
		if a.Src != 0 {
			test(MSrcType, a.SrcInvert)
			base.SrcTypes = a.Src
		}
		if a.Dst != 0 {
			test(MDstType, a.DstInvert)
			base.DstTypes = a.Dst
		}
		base.TypeDev = a.Limit
	}
	if t := m.PktType; t != nil {
		mask := uint8(1) << t.Type & (1<<NumPktTypes - 1) // otherhost: none here
		if t.Invert {
			mask = ^mask & (1<<NumPktTypes - 1) // complemented here: the data plane never inverts it
		}
		switch mask {
		case 0:
			return nil, append(warn, "--pkt-type otherhost matches no packet: the kernel drops frames for another host's MAC before iptables (and xdpfw's rules) would judge them"), nil
		case 1<<NumPktTypes - 1: // ! otherhost: every packet
		default:
			test(MPktType, false)
			base.PktTypes = mask
		}
	}

	// A port test needs the L4 header even when its ranges cover every
	// port (iptables: no header, no match), so say so explicitly; so does a
	// bare -m tcp.
	if m.SPort != nil || m.DPort != nil || m.Ports != nil || m.L4Header {
		test(ML4Hdr, false)
	}

	// Disjunctive parts, expanded into alternatives (DNF).
	alts := []alt{anyAlt}
	if m.SPort != nil {
		alts = cross(alts, portAlts(m.SPort, true))
	}
	if m.DPort != nil {
		alts = cross(alts, portAlts(m.DPort, false))
	}
	if m.Ports != nil {
		if m.Ports.Invert {
			// neither port in the set: both in its complement
			comp := rules.ComplementPorts(m.Ports.Ranges)
			alts = cross(alts, rangesAlts(comp, true))
			alts = cross(alts, rangesAlts(comp, false))
		} else {
			either := append(rangesAlts(m.Ports.Ranges, true), rangesAlts(m.Ports.Ranges, false)...)
			alts = cross(alts, either)
		}
	}
	if len(alts) == 0 {
		// e.g. ! --dport 0:65535, or --dport 22 beside --dports 80,443
		warn = append(warn, "its port tests leave no port; the rule never matches")
	}
	if m.InIface != nil {
		var ia []alt
		for _, name := range sortedNames(ifaces.Attached) {
			if ifaceMatches(m.InIface, name) {
				a := anyAlt
				a.ifindex = ifaces.Attached[name]
				ia = append(ia, a)
			}
		}
		if len(ia) == 0 {
			warn = append(warn, fmt.Sprintf("%s matches no attached interface; the rule never matches", ifaceText("-i", m.InIface)))
		}
		alts = cross(alts, ia)
	}
	if m.OutIface != nil {
		// OUTPUT runs at tc egress of the attached interfaces; a
		// forwarded packet may leave by any interface of the host, and
		// so may one in a user chain (FORWARD may jump to it; for
		// OUTPUT's packets, which leave by attached interfaces only,
		// the host's names mean the same)
		devs, where := ifaces.Attached, "attached interface"
		if (r.Chain == rules.ChainForward || r.Chain == rules.ChainUser) && ifaces.Host != nil {
			devs, where = ifaces.Host, "interface of this host"
		}
		var oa []alt
		for _, rg := range ifaceRanges(m.OutIface, devs) {
			a := anyAlt
			a.oif = rg
			oa = append(oa, a)
		}
		if len(oa) == 0 {
			warn = append(warn, fmt.Sprintf("%s matches no %s; the rule never matches", ifaceText("-o", m.OutIface), where))
		}
		alts = cross(alts, oa)
	}
	if len(alts) > maxEntriesPerRule {
		return nil, nil, fmt.Errorf("rule expands into %d classifier entries (at most %d): split its multiport lists", len(alts), maxEntriesPerRule)
	}

	var bases []Entry
	var never string
	for _, b := range ctNATEntries(base, nat, natStates, m.CTState != nil && m.CTState.Invert) {
		if !connected {
			break
		}
		bs, nv, err := ctAddrBases(m, b)
		if err != nil {
			return nil, warn, err
		}
		if nv != "" {
			never = nv
		}
		bases = append(bases, bs...)
	}
	if connless != 0 {
		bases = append(bases, ctConnlessEntry(base, connless))
	}
	if len(bases) == 0 {
		return nil, append(warn, never), nil
	}
	if len(alts)*len(bases) > maxEntriesPerRule {
		return nil, nil, fmt.Errorf("rule expands into %d classifier entries (at most %d): split its multiport lists", len(alts)*len(bases), maxEntriesPerRule)
	}
	out := make([]Entry, 0, len(alts)*len(bases))
	for _, b := range bases {
		out = appendAlts(out, b, alts)
	}
	return out, warn, nil
}

// ctNATEntries are the entries of a rule whose --ctstate names SNAT or
// DNAT (nat: CTISrcNAT, CTIDstNAT): base with its states (base.CTState,
// when any), and one whose states are natStates (when any), the packet's
// connection having one of the nat bits (none of them: invert). Their
// states are apart: a packet matches one at most (a rule that only counts
// counts it once). Without nat: base.
func ctNATEntries(base Entry, nat, natStates uint8, invert bool) []Entry {
	if nat == 0 || natStates == 0 {
		return []Entry{base}
	}
	e := base
	e.CTState, e.CTNat = natStates, nat
	e.Match |= MCTNat
	if invert {
		e.Invert |= MCTNat
	}
	if base.CTState == 0 {
		return []Entry{e}
	}
	return []Entry{base, e}
}

// appendAlts appends to out base's entry for each alternative of alts.
func appendAlts(out []Entry, base Entry, alts []alt) []Entry {
	for _, a := range alts {
		e := base
		if a.sport != fullRange {
			e.Match |= MSPort
			e.SPortLo, e.SPortHi = a.sport.Lo, a.sport.Hi
		}
		if a.dport != fullRange {
			e.Match |= MDPort
			e.DPortLo, e.DPortHi = a.dport.Lo, a.dport.Hi
		}
		if a.ifindex != 0 {
			e.Match |= MIfindex
			e.Ifindex = a.ifindex
		}
		if a.oif != fullOif {
			e.Match |= MOif
			e.OIfLo, e.OIfHi = a.oif[0], a.oif[1]
		}
		out = append(out, e)
	}
	return out
}

// headerTests turns on the tests of the header matches (-m iprange,
// length, ttl/hl, dscp, tos, ecn) in base. A rule they leave matching
// nothing returns why, as a warning (and no entries).
func headerTests(m *rules.Match, base *Entry, test func(bit uint64, invert bool)) (never string, err error) {
	for _, r := range []struct {
		m   *rules.IPRangeMatch
		bit uint64
		dst *AddrRange
	}{{m.SrcRange, MSrcRange, &base.SrcRange}, {m.DstRange, MDstRange, &base.DstRange}} {
		if r.m == nil {
			continue
		}
		if r.m.To.Less(r.m.From) && !r.m.Invert {
			return fmt.Sprintf("the range %s-%s is reversed; the rule never matches", r.m.From, r.m.To), nil
		}
		test(r.bit, r.m.Invert)
		*r.dst = NewAddrRange(r.m.From, r.m.To)
	}
	if l := m.Length; l != nil {
		if l.Min > l.Max && !l.Invert {
			return fmt.Sprintf("--length %d:%d is reversed; the rule never matches", l.Min, l.Max), nil
		}
		test(MLen, l.Invert)
		base.LenLo, base.LenHi = l.Min, l.Max
	}
	if t := m.TTL; t != nil {
		lo, hi, negated, ok := t.Range()
		if !ok {
			return "its TTL (hop limit) test leaves no value; the rule never matches", nil
		}
		test(MTTL, negated)
		base.TTLLo, base.TTLHi = lo, hi
	}
	// -m dscp and -m tos test the same byte: one test when both are
	// plain (the bits both fix must agree)
	var tos *rules.TOSMatch
	if d := m.DSCP; d != nil {
		tos = &rules.TOSMatch{Value: d.Value << 2, Mask: 0xfc, Invert: d.Invert}
	}
	if t := m.TOS; t != nil {
		switch {
		case tos == nil:
			tos = t
		case tos.Invert || t.Invert:
			return "", errors.New("-m dscp and -m tos in one rule, one of them negated: not supported; " +
				"write the test on the whole byte as one -m tos --tos VALUE/MASK")
		case (tos.Value^t.Value)&tos.Mask&t.Mask != 0:
			return "its -m dscp and -m tos tests disagree; the rule never matches", nil
		default:
			tos = &rules.TOSMatch{Value: tos.Value&tos.Mask | t.Value&t.Mask, Mask: tos.Mask | t.Mask}
		}
	}
	if tos != nil {
		if tos.Value&^tos.Mask != 0 && !tos.Invert {
			return fmt.Sprintf("--tos 0x%02x/0x%02x sets bits outside its mask; the rule never matches", tos.Value, tos.Mask), nil
		}
		test(MTOS, tos.Invert)
		base.TOSMask, base.TOSCmp = tos.Mask, tos.Value
	}
	if s := m.MSS; s != nil {
		test(MMSS, s.Invert)
		base.MSSLo, base.MSSHi = s.Min, s.Max
	}
	if rt := m.RT; rt != nil {
		if never := rtTests(rt, base, test); never != "" {
			return never, nil
		}
	}
	if e := m.ECN; e != nil {
		if e.IPECT >= 0 {
			test(MECNIP, e.IPInvert)
			base.ECNIP = uint8(e.IPECT)
		}
		if e.TCPMask != 0 {
			test(MECNTCP, false)
			base.ECNMask, base.ECNCmp = e.TCPMask, e.TCPComp
		}
	}
	return "", nil
}

// rtTests turns on the tests of -m rt. The header's fields are narrower
// than iptables' values (a type and segments left are bytes, a length at
// most 2048): a value no header has makes the test never true, or, negated,
// always true of a packet with a routing header, which the segments-left
// test then stands for (-m rt alone: a routing header, any).
func rtTests(rt *rules.RTMatch, base *Entry, test func(bit uint64, invert bool)) (never string) {
	const noRT = "its -m rt tests leave no routing header; the rule never matches"
	lo, hi, inv := uint32(0), uint32(255), false
	if s := rt.Segs; s != nil {
		lo, hi, inv = s.Lo, min(s.Hi, 255), s.Invert
		if lo > hi {
			if !inv {
				return noRT
			}
			lo, hi, inv = 0, 255, false
		}
	}
	test(MRTSegs, inv)
	base.RTSegsLo, base.RTSegsHi = uint8(lo), uint8(hi)
	if v := rt.Type; v != nil {
		switch {
		case v.V <= 255:
			test(MRTType, v.Invert)
			base.RTType = uint8(v.V)
		case !v.Invert:
			return noRT
		}
	}
	if v := rt.Len; v != nil {
		switch {
		case v.V <= 0xffff:
			test(MRTLen, v.Invert)
			base.RTLen = uint16(v.V)
		case !v.Invert:
			return noRT
		}
	}
	return ""
}

// portAlts turns a port match into alternatives; an inverted set becomes
// its complement, so the data plane never inverts a port test.
func portAlts(pm *rules.PortMatch, src bool) []alt {
	rs := pm.Ranges
	if pm.Invert {
		rs = rules.ComplementPorts(rs)
	}
	return rangesAlts(rs, src)
}

func rangesAlts(rs []rules.PortRange, src bool) []alt {
	out := make([]alt, 0, len(rs))
	for _, r := range rs {
		a := anyAlt
		if src {
			a.sport = r
		} else {
			a.dport = r
		}
		out = append(out, a)
	}
	return out
}

// cross is the conjunction of two disjunctions: every pair, ranges
// intersected, empty intersections dropped.
func cross(a, b []alt) []alt {
	var out []alt
	for _, x := range a {
		for _, y := range b {
			s, ok1 := intersect(x.sport, y.sport)
			d, ok2 := intersect(x.dport, y.dport)
			if !ok1 || !ok2 {
				continue
			}
			ifx := x.ifindex
			if y.ifindex != 0 {
				if ifx != 0 && ifx != y.ifindex {
					continue
				}
				ifx = y.ifindex
			}
			oif := [2]uint32{max(x.oif[0], y.oif[0]), min(x.oif[1], y.oif[1])}
			if oif[0] > oif[1] {
				continue
			}
			out = append(out, alt{sport: s, dport: d, ifindex: ifx, oif: oif})
		}
	}
	return out
}

func intersect(a, b rules.PortRange) (rules.PortRange, bool) {
	lo, hi := max(a.Lo, b.Lo), min(a.Hi, b.Hi)
	return rules.PortRange{Lo: lo, Hi: hi}, lo <= hi
}

func ifaceMatches(im *rules.IfaceMatch, name string) bool {
	ok := name == im.Name
	if im.Prefix {
		ok = strings.HasPrefix(name, im.Name)
	}
	return ok != im.Invert
}

func ifaceText(flag string, im *rules.IfaceMatch) string {
	s := flag + " " + im.Text()
	if im.Invert {
		s = "! " + s
	}
	return s
}

// Loopback is the loopback interface's name.
const Loopback = "lo"

// isLoopback: im matches the loopback interface and no other.
func isLoopback(im *rules.IfaceMatch) bool {
	return im != nil && !im.Invert && !im.Prefix && im.Name == Loopback
}

// ifaceRanges resolves im against devs: the ifindex ranges of the
// interfaces it matches, ascending. A negated match is the complement of
// the interfaces the name matches, 0 (no device) included: a packet
// without an output device is "! -o eth0".
func ifaceRanges(im *rules.IfaceMatch, devs map[string]uint32) [][2]uint32 {
	pos := *im
	pos.Invert = false
	var idx []uint32
	for name, i := range devs {
		if ifaceMatches(&pos, name) {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	var out [][2]uint32
	if !im.Invert {
		for _, i := range idx {
			if n := len(out); n > 0 && out[n-1][1]+1 == i {
				out[n-1][1] = i
				continue
			}
			out = append(out, [2]uint32{i, i})
		}
		return out
	}
	lo := uint64(0)
	for _, i := range idx {
		if uint64(i) > lo {
			out = append(out, [2]uint32{uint32(lo), i - 1})
		}
		lo = uint64(i) + 1
	}
	if lo <= uint64(^uint32(0)) {
		out = append(out, [2]uint32{uint32(lo), ^uint32(0)})
	}
	return out
}

func sortedNames(m map[string]uint32) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// logLimits lists the rate limit of every logged rule, with the
// defaults filled in.
func logLimits(in Input) ([]LogLimit, error) {
	defRate, defBurst := in.LogRate, in.LogBurst
	if defRate.IsZero() {
		defRate = DefaultLogRate
	}
	if defBurst == 0 {
		defBurst = DefaultLogBurst
	}
	var out []LogLimit
	for i := range in.RuleSet.Rules {
		t := &in.RuleSet.Rules[i].Target
		if !t.Logs() {
			continue
		}
		if l := in.RuleSet.Rules[i].Match.Limit; l != nil && t.Verdict == rules.VerdictLog {
			// a LOG rule's -m limit is its budget: what it refuses is no match
			out = append(out, LogLimit{RuleID: in.IDs[i], IntervalNS: l.IntervalNS(), Burst: l.Burst, Match: true})
			continue
		}
		rate, burst := t.LogRate, t.LogBurst
		if rate.IsZero() {
			rate = defRate
		}
		if burst == 0 {
			burst = defBurst
		}
		out = append(out, LogLimit{RuleID: in.IDs[i], IntervalNS: rate.IntervalNS(), Burst: burst})
	}
	if len(out) > MaxLogRules {
		return nil, fmt.Errorf("the rule set has %d rules that log (LOG or --log); the data plane keeps budgets for at most %d", len(out), MaxLogRules)
	}
	return out, nil
}

// matchLimits lists the -m limit bucket of every rule that has one, but
// LOG rules (logLimits: their limit is their log budget).
func matchLimits(in Input) ([]LogLimit, error) {
	var out []LogLimit
	for i := range in.RuleSet.Rules {
		r := &in.RuleSet.Rules[i]
		if l := r.Match.Limit; l != nil && r.Target.Verdict != rules.VerdictLog {
			out = append(out, LogLimit{RuleID: in.IDs[i], IntervalNS: l.IntervalNS(), Burst: l.Burst})
		}
	}
	if len(out) > MaxLimitRules {
		return nil, fmt.Errorf("the rule set has %d rules with -m limit; the data plane keeps buckets for at most %d", len(out), MaxLimitRules)
	}
	return out, nil
}

// hdroptFlags are the root flags that make the data plane read the header
// fields e tests that the parser does not (bpf/lib/hdropt.h).
func hdroptFlags(e *Entry) uint8 {
	var f uint8
	if e.Match&MMSS != 0 {
		f |= RootMSS
	}
	if e.Match&MRTHdr != 0 {
		f |= RootRT
	}
	return f
}

// setFastRules marks the generation as using conntrack when an entry tests
// the connection state (and as reading TCP's MSS option when one tests
// that), and gives each root its fast rule (fastRule).
func setFastRules(t *Tables) {
	ct := false
	for i := range t.Entries {
		// conntrack runs where a rule tests the state or counts
		// connections (-m connlimit reads fw_ct)
		ct = ct || t.Entries[i].Match&MCTState != 0 || t.Entries[i].ConnLimit
		for r := range t.Roots {
			t.Roots[r].Flags |= hdroptFlags(&t.Entries[i])
		}
	}
	if !ct {
		return
	}
	for r := range t.Roots {
		t.Roots[r].Flags |= RootCT
		fastRule(&t.Roots[r], r, slices.Values(t.Entries))
	}
}

// fastRule gives root r its fast rule, read from entries (those of every
// chain, in priority order; it stops early): when the first entry that can
// match a packet in some state tests nothing but the state (the classic
// "-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT"), the data plane
// decides packets in those states right after the conntrack lookup,
// without walking the trees. That is the same verdict the trees give, so
// it is an optimisation only: established traffic costs one hash lookup
// whatever the rule count.
func fastRule(root *Root, r int, entries iter.Seq[Entry]) {
	root.FastStates, root.FastRuleID, root.FastAction, root.FastReason, root.FastReject = 0, 0, 0, 0, 0
	root.FastLog = false
	chain, fam := rules.Chain(r/2), rules.FamilyIPv4
	if r%2 == 1 {
		fam = rules.FamilyIPv6
	}
	var blocked uint8 // states an earlier entry may match
	for e := range entries {
		if e.Chain != chain || (e.Match&MFamily != 0 && e.Family != fam) {
			continue
		}
		states := rules.CTAll
		if e.Match&MCTState != 0 {
			states = e.CTState
		}
		// A LOG entry decides nothing but must see the packets it
		// matches, and a -m limit entry decides some: each blocks its
		// states like any other entry.
		if e.Decides() && e.Match&^(MCTState|MFamily) == 0 && e.Invert == 0 {
			if fast := states &^ blocked; fast != 0 {
				root.FastStates, root.FastRuleID = fast, e.RuleID
				root.FastAction, root.FastReason, root.FastReject = e.Action, e.Reason, e.Reject
				root.FastLog = e.Log
			}
			return
		}
		if blocked |= states; blocked == rules.CTAll {
			return
		}
	}
}
