// Package telemetry turns the data plane's log events (bpf/lib/log.h) into
// what people and tools read: text lines in the style of the kernel's
// iptables LOG target, JSON records, and pcapng files. `xdpfw log` and the
// daemon share it; docs/log.md describes the events.
package telemetry

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// Hook is where an event was taken (enum fw_hook in bpf/types.h).
type Hook uint8

const (
	HookIngress Hook = 0 // the XDP program: INPUT and FORWARD
	HookEgress  Hook = 1 // the tc egress program: OUTPUT
)

func (h Hook) String() string {
	if h == HookEgress {
		return "egress"
	}
	return "ingress"
}

// Event flags (FW_LOG_F_* in bpf/types.h).
const (
	flagTarget = 0x01
	flagTrace  = 0x02
	flagAudit  = 0x04 // FW_LOG_F_AUDIT
)

// Event is one log event.
type Event struct {
	Time      time.Time      // when the data plane logged it (wall clock)
	RuleID    uint32         // the rule that logs: a LOG rule, or the deciding rule (--log)
	VerdictID uint32         // the rule (or policy id) that decided the packet
	Ifindex   uint32         // arrived on (ingress) or leaves by (egress)
	PktLen    int            // the frame's length
	Hook      Hook           //
	Chain     rules.Chain    //
	Action    compile.Action // the decision: ACCEPT, DROP or REJECT
	Reason    compile.Reason // the decision's counter reason (REJECT: before its answer)
	CTState   uint8          // the packet's connection state (compile.CTNew...)
	ByLOG     bool           // logged by a LOG rule (false: by its deciding rule's --log)
	Trace     bool           // a packet of `xdpfw trace`, not traffic
	// Audit: the candidate rule set would decide the packet otherwise
	// (docs/audit.md): RuleID, Action and Reason are the candidate's,
	// VerdictID the enforced rule (or policy id) that decided it.
	Audit bool
	Data  []byte // the frame's first bytes (up to the snap length)
}

// headerSize is sizeof(struct fw_log_event).
var headerSize = binary.Size(datapath.LogEventHeader{})

// Decode parses one ring-buffer record.
func Decode(raw []byte) (Event, error) {
	var h datapath.LogEventHeader
	if len(raw) < headerSize {
		return Event{}, fmt.Errorf("log event of %d bytes, shorter than its %d-byte header", len(raw), headerSize)
	}
	if _, err := binary.Decode(raw, binary.NativeEndian, &h); err != nil {
		return Event{}, fmt.Errorf("decoding a log event: %w", err)
	}
	data := raw[headerSize:]
	if int(h.CapLen) > len(data) {
		return Event{}, fmt.Errorf("log event claims %d packet bytes, holds %d", h.CapLen, len(data))
	}
	return Event{
		Time:      monoToWall(h.TsNs),
		RuleID:    h.RuleId,
		VerdictID: h.VerdictId,
		Ifindex:   h.Ifindex,
		PktLen:    int(h.PktLen),
		Hook:      Hook(h.Hook),
		Chain:     rules.Chain(h.Chain),
		Action:    compile.Action(h.Action),
		Reason:    compile.Reason(h.Reason),
		CTState:   h.Ctstate,
		ByLOG:     h.Flags&flagTarget != 0,
		Trace:     h.Flags&flagTrace != 0,
		Audit:     h.Flags&flagAudit != 0,
		Data:      bytes.Clone(data[:h.CapLen]),
	}, nil
}

// monoToWall converts a bpf_ktime_get_ns() time (CLOCK_MONOTONIC) to wall
// clock time.
func monoToWall(ns uint64) time.Time {
	var ts unix.Timespec
	now := time.Now()
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return now
	}
	return now.Add(-time.Duration(uint64(ts.Nano()) - ns))
}

// RuleInfo is what an event's text needs of a rule.
type RuleInfo struct {
	Chain  rules.Chain
	Num    int    // 1-based within its chain, as `xdpfw list` numbers it
	Prefix string // --log-prefix (--nflog-prefix, --ulog-prefix)
	Level  string // --log-level ("": the default, warning)
	// Flags are -j LOG's --log-tcp-sequence, --log-tcp-options,
	// --log-ip-options, --log-macdecode (and --log-uid, which adds
	// nothing: writePacket).
	Flags rules.LogFlags
	Text  string // the rule, canonical
	// Target is "NFLOG" or "ULOG" for such a rule ("" for LOG and --log);
	// Group is then its netlink group, and Size its --nflog-size or
	// --ulog-cprange when Cut.
	Target string
	Group  uint16
	Size   uint32
	Cut    bool
}

// Rules finds rules by id; a nil Rules knows none.
type Rules map[uint32]RuleInfo

// IndexRules indexes the rules of rs by their ids.
func IndexRules(rs *rules.RuleSet, ids []uint32) Rules {
	out := Rules{}
	num := map[rules.Chain]int{}
	for i, r := range rs.Rules {
		num[r.Chain]++
		if i < len(ids) {
			info := RuleInfo{Chain: r.Chain, Num: num[r.Chain], Prefix: r.Target.LogPrefix, Level: r.Target.LogLevel, Text: r.String(),
				Flags: r.Target.LogFlags}
			if g := r.Target.Group; g != nil {
				info.Target, info.Group, info.Size, info.Cut = g.Name(), g.Number(), g.Size, g.Cut
			}
			out[ids[i]] = info
		}
	}
	return out
}

// Trim cuts the captured bytes of e to what its rule keeps: an NFLOG rule's
// --nflog-size (ULOG's --ulog-cprange), when under the snap length. Readers
// call it once per event, before printing or writing it.
func (rs Rules) Trim(e *Event) {
	if r, ok := rs[e.RuleID]; ok && r.Cut && int(r.Size) < len(e.Data) {
		e.Data = e.Data[:r.Size]
	}
}

// DefaultLevel is the syslog level of events whose rule names none (as
// iptables' LOG: warning).
const DefaultLevel = rules.DefaultLogLevel

// Level is the syslog level an event is forwarded with.
func (rs Rules) Level(e *Event) string {
	if r, ok := rs[e.RuleID]; ok && r.Level != "" {
		return r.Level
	}
	return DefaultLevel
}

// IfName names interfaces by index ("" when unknown: the index is shown).
type IfName func(ifindex uint32) string

// KernelIfNames names interfaces by index, asking the kernel once per index.
func KernelIfNames() IfName {
	cache := map[uint32]string{}
	return func(i uint32) string {
		if n, ok := cache[i]; ok {
			return n
		}
		n := ""
		if ifc, err := net.InterfaceByIndex(int(i)); err == nil {
			n = ifc.Name
		}
		cache[i] = n
		return n
	}
}

func ifname(names IfName, idx uint32) string {
	if names != nil {
		if n := names(idx); n != "" {
			return n
		}
	}
	return "if" + strconv.Itoa(int(idx))
}

// Line formats an event as the kernel's iptables LOG target would (the
// message without syslog's time stamp), with xdpfw's own fields at the end:
//
//	ssh: IN=eth0 OUT= MAC=02:00:00:00:00:02:02:00:00:00:00:01:08:00 SRC=10.0.0.1 DST=10.0.0.2 LEN=60 TOS=0x00 PREC=0x00 TTL=64 ID=4660 DF PROTO=TCP SPT=40000 DPT=22 WINDOW=64240 RES=0x00 SYN URGP=0 CHAIN=INPUT RULE=1 VERDICT=ACCEPT BY=3
//
// RULE is the logging rule's number in its chain; BY names the rule (or
// the policy) that decided, when another than RULE; REASON appears when
// the decision's reason is not the rule's or policy's own (e.g.
// conntrack-full).
//
// An audit event is AuditLine's, its candidate rule by id.
func (e *Event) Line(rs Rules, names IfName) string {
	if e.Audit {
		return e.AuditLine(nil, rs, names)
	}
	var b strings.Builder
	r, known := rs[e.RuleID]
	b.WriteString(r.Prefix)
	in, out := ifname(names, e.Ifindex), ""
	if e.Hook == HookEgress {
		in, out = "", in
	}
	fmt.Fprintf(&b, "IN=%s OUT=%s", in, out)
	writePacket(&b, e.Data, e.PktLen, r.Flags)
	fmt.Fprintf(&b, " CHAIN=%s", e.Chain)
	if known {
		fmt.Fprintf(&b, " RULE=%d", r.Num)
	} else {
		fmt.Fprintf(&b, " RULEID=%d", e.RuleID)
	}
	if known && r.Target != "" {
		fmt.Fprintf(&b, " %s=%d", r.Target, r.Group)
	}
	fmt.Fprintf(&b, " VERDICT=%s", e.Action)
	if e.VerdictID != e.RuleID {
		fmt.Fprintf(&b, " BY=%s", rs.verdictRule(e))
	}
	if !plainReason(e.Reason) {
		fmt.Fprintf(&b, " REASON=%s", e.Reason)
	}
	if e.Trace {
		b.WriteString(" TRACE")
	}
	return b.String()
}

// AuditVerdict is what an audit event says: "would accept" (the candidate
// accepts what the rules in force did not), "would drop" (the candidate
// drops or rejects what they accepted); "" for other events.
func (e *Event) AuditVerdict() string {
	switch {
	case !e.Audit:
		return ""
	case e.Action == compile.ActAccept:
		return "would accept"
	}
	return "would drop"
}

// AuditLine formats an audit event: what the candidate would do and by
// which of its rules (cand), what the rules in force did and by which
// (enforced), then the packet as Line writes it:
//
//	AUDIT would drop: CANDIDATE=3 VERDICT=DROP ENFORCED=1 IN=eth0 ... CHAIN=INPUT
func (e *Event) AuditLine(cand, enforced Rules, names IfName) string {
	var b strings.Builder
	fmt.Fprintf(&b, "AUDIT %s: CANDIDATE=%s VERDICT=%s", e.AuditVerdict(), cand.Name(e.RuleID), e.Action)
	fmt.Fprintf(&b, " ENFORCED=%s", enforced.Name(e.VerdictID))
	in, out := ifname(names, e.Ifindex), ""
	fmt.Fprintf(&b, " IN=%s OUT=%s", in, out)
	writePacket(&b, e.Data, e.PktLen, 0)
	fmt.Fprintf(&b, " CHAIN=%s", e.Chain)
	if !plainReason(e.Reason) {
		fmt.Fprintf(&b, " REASON=%s", e.Reason)
	}
	return b.String()
}

// Name names a rule by id: its number, "policy", or its id.
func (rs Rules) Name(id uint32) string {
	if id < compile.FirstRuleID {
		return "policy"
	}
	if r, ok := rs[id]; ok {
		return strconv.Itoa(r.Num)
	}
	return "id" + strconv.Itoa(int(id))
}

// verdictRule names the deciding rule: its number, "policy", or its id.
func (rs Rules) verdictRule(e *Event) string { return rs.Name(e.VerdictID) }

// plainReason: the reason a rule's or a policy's verdict has by itself.
func plainReason(r compile.Reason) bool {
	switch r {
	case compile.ReasonRuleAccept, compile.ReasonRuleDrop, compile.ReasonRuleReject,
		compile.ReasonPolicyAccept, compile.ReasonPolicyDrop:
		return true
	}
	return false
}

// writePacket writes the kernel LOG target's packet fields for the
// captured bytes of a frame of length n (FRAMELEN= alone when they hold no
// IP header), with what the LOG flags add where the kernel's nf_log puts
// it: --log-macdecode's MACSRC= MACDST= MACPROTO= instead of MAC=,
// --log-ip-options' OPT (hex) of an IPv4 header's options,
// --log-tcp-sequence's SEQ= ACK= and --log-tcp-options' OPT (hex), each
// printed when the captured bytes hold it whole. --log-uid adds nothing:
// the kernel prints UID= GID= only for a packet a local socket owns, which
// no packet has at XDP, and tc egress can read the socket's user but not
// its group (docs/log.md).
func writePacket(b *strings.Builder, data []byte, n int, flags rules.LogFlags) {
	switch {
	case len(data) >= 14 && flags&rules.LogMACDecode != 0:
		typ := 12
		for typ+4 <= len(data) && (data[typ] == 0x81 && data[typ+1] == 0x00 || data[typ] == 0x88 && data[typ+1] == 0xa8) {
			typ += 4 // a VLAN tag: the kernel's header is the untagged frame's
		}
		fmt.Fprintf(b, " MACSRC=%s MACDST=%s", net.HardwareAddr(data[6:12]), net.HardwareAddr(data[0:6]))
		if typ+2 <= len(data) {
			fmt.Fprintf(b, " MACPROTO=%04x", binary.BigEndian.Uint16(data[typ:]))
		}
	case len(data) >= 14:
		b.WriteString(" MAC=")
		for i := 0; i < 14; i++ {
			if i > 0 {
				b.WriteByte(':')
			}
			fmt.Fprintf(b, "%02x", data[i])
		}
	}
	p, err := packet.DecodeCut(data)
	if (err != nil && !errors.Is(err, packet.ErrTruncated)) || !p.Src.IsValid() {
		fmt.Fprintf(b, " FRAMELEN=%d", n)
		return
	}
	writeIP(b, data, p, err, flags, false)
}

// writeIP writes the fields of the IP packet of a frame DecodeCut decoded
// (p, err), from VLAN= (SRC= in the kernel's) on; quoted: the packet an
// ICMP error quotes, whose own errors' quotes the kernel does not print.
func writeIP(b *strings.Builder, data []byte, p packet.Packet, err error, flags rules.LogFlags, quoted bool) {
	if len(p.VLANs) > 0 { // the outer tag: its id and priority code point
		fmt.Fprintf(b, " VLAN=%d PCP=%d", p.VLANs[0], p.PCP(0))
	}
	fmt.Fprintf(b, " SRC=%s DST=%s LEN=%d", logAddr(p.Src), logAddr(p.Dst), ipLen(data, p))
	l3 := l3Offset(p)
	frag, l4, l4ok := ipHeaders(data, p, l3)
	if p.Src.Is4() {
		tos, fo := data[l3+1], binary.BigEndian.Uint16(data[l3+6:])
		fmt.Fprintf(b, " TOS=0x%02X PREC=0x%02X TTL=%d ID=%d", tos&0x1e, tos&0xe0, p.TTL, binary.BigEndian.Uint16(data[l3+4:]))
		for _, f := range []struct {
			bit  uint16
			name string
		}{{0x8000, "CE"}, {0x4000, "DF"}, {0x2000, "MF"}} {
			if fo&f.bit != 0 {
				b.WriteString(" " + f.name)
			}
		}
		if p.FragOffset != 0 {
			fmt.Fprintf(b, " FRAG:%d", p.FragOffset)
		}
	} else {
		w := binary.BigEndian.Uint32(data[l3:])
		fmt.Fprintf(b, " TC=%d HOPLIMIT=%d FLOWLBL=%d", w>>20&0xff, p.TTL, w&0xfffff)
		if frag > 0 { // the fragment header: offset in bytes, M, identification
			fo := binary.BigEndian.Uint16(data[frag+2:])
			fmt.Fprintf(b, " FRAG:%d", fo&0xfff8)
			if fo&1 != 0 {
				b.WriteString(" INCOMPLETE")
			}
			fmt.Fprintf(b, " ID:%08x", binary.BigEndian.Uint32(data[frag+4:]))
		}
	}
	if flags&rules.LogIPOpt != 0 && p.Src.Is4() {
		if ihl := 4 * int(data[l3]&0x0f); ihl > 20 && l3+ihl <= len(data) {
			writeOpt(b, data[l3+20:l3+ihl])
		}
	}
	fmt.Fprintf(b, " PROTO=%s", protoName(p.Proto))
	if !p.L4Present() || err != nil && p.SPort == 0 && p.DPort == 0 && p.ICMPType == 0 {
		return
	}
	has := func(n int) bool { return l4ok && l4+n <= len(data) }
	switch p.Proto {
	case packet.ProtoTCP:
		fmt.Fprintf(b, " SPT=%d DPT=%d", p.SPort, p.DPort)
		if has(12) && flags&rules.LogTCPSeq != 0 {
			fmt.Fprintf(b, " SEQ=%d ACK=%d", binary.BigEndian.Uint32(data[l4+4:]), binary.BigEndian.Uint32(data[l4+8:]))
		}
		tcpFlags := uint8(p.TCPFlags)
		if has(20) {
			tcpFlags = data[l4+13]
			fmt.Fprintf(b, " WINDOW=%d RES=0x%02x", binary.BigEndian.Uint16(data[l4+14:]), (data[l4+12]&0x0f)<<2)
		}
		for i, name := range []string{"CWR", "ECE", "URG", "ACK", "PSH", "RST", "SYN", "FIN"} {
			if tcpFlags&(0x80>>i) != 0 {
				b.WriteString(" " + name)
			}
		}
		if has(20) {
			fmt.Fprintf(b, " URGP=%d", binary.BigEndian.Uint16(data[l4+18:]))
		}
		if has(13) && flags&rules.LogTCPOpt != 0 {
			if doff := 4 * int(data[l4+12]>>4); doff > 20 && l4+doff <= len(data) {
				writeOpt(b, data[l4+20:l4+doff])
			}
		}
	case packet.ProtoUDP:
		fmt.Fprintf(b, " SPT=%d DPT=%d", p.SPort, p.DPort)
		if has(8) {
			fmt.Fprintf(b, " LEN=%d", binary.BigEndian.Uint16(data[l4+4:]))
		}
	case packet.ProtoICMP, packet.ProtoICMPv6:
		fmt.Fprintf(b, " TYPE=%d CODE=%d", p.ICMPType, p.ICMPCode)
		if has(8) {
			writeICMP(b, p, data[l4:], flags, quoted)
		}
	}
}

// writeICMP writes what the kernel's nf_log prints after an ICMP or ICMPv6
// TYPE= CODE= from the rest of the message h (8 bytes or more): an echo's
// ID= SEQ=, PARAMETER=/POINTER=, GATEWAY=, an error's quoted packet in
// brackets (unless the message is itself quoted), MTU=.
func writeICMP(b *strings.Builder, p packet.Packet, h []byte, flags rules.LogFlags, quoted bool) {
	v4 := p.Proto == packet.ProtoICMP
	t := p.ICMPType
	switch {
	case v4 && (t == 0 || t == 8), !v4 && (t == 128 || t == 129):
		fmt.Fprintf(b, " ID=%d SEQ=%d", binary.BigEndian.Uint16(h[4:]), binary.BigEndian.Uint16(h[6:]))
		return
	case v4 && t == 12:
		fmt.Fprintf(b, " PARAMETER=%d", h[4])
		return
	case v4 && t == 5:
		fmt.Fprintf(b, " GATEWAY=%s", netip.AddrFrom4([4]byte(h[4:8])))
	case !v4 && t == 4:
		fmt.Fprintf(b, " POINTER=%08x", binary.BigEndian.Uint32(h[4:]))
	case v4 && (t == 3 || t == 4 || t == 11), !v4 && (t == 1 || t == 2 || t == 3):
	default:
		return
	}
	if !quoted && len(h) > 8 {
		// The quoted packet behind a made-up Ethernet header, for DecodeCut.
		frame := make([]byte, 14, 14+len(h)-8)
		frame[12], frame[13] = 0x86, 0xdd
		if v4 {
			frame[12], frame[13] = 0x08, 0x00
		}
		frame = append(frame, h[8:]...)
		if q, err := packet.DecodeCut(frame); (err == nil || errors.Is(err, packet.ErrTruncated)) && q.Src.IsValid() {
			var in strings.Builder
			writeIP(&in, frame, q, err, flags, true)
			fmt.Fprintf(b, " [%s ]", strings.TrimPrefix(in.String(), " "))
		}
	}
	switch {
	case v4 && t == 3 && p.ICMPCode == 4:
		fmt.Fprintf(b, " MTU=%d", binary.BigEndian.Uint16(h[6:]))
	case !v4 && t == 2:
		fmt.Fprintf(b, " MTU=%d", binary.BigEndian.Uint32(h[4:]))
	}
}

// logAddr writes an address as the kernel's nf_log: IPv6 in full, eight
// groups of four hex digits (%pI6), not the short form.
func logAddr(a netip.Addr) string {
	if a.Is4() {
		return a.String()
	}
	b := a.As16()
	var s strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			s.WriteByte(':')
		}
		fmt.Fprintf(&s, "%02x%02x", b[i], b[i+1])
	}
	return s.String()
}

// writeOpt writes option bytes as the kernel's nf_log does: OPT (hex).
func writeOpt(b *strings.Builder, opt []byte) {
	fmt.Fprintf(b, " OPT (%X)", opt)
}

// l3Offset is where the IP header of a frame DecodeCut decoded starts.
func l3Offset(p packet.Packet) int {
	l3 := 14 + 4*len(p.VLANs)
	if p.PPPoE {
		l3 += 8 // the session header and the PPP protocol
	}
	return l3
}

// ipHeaders finds, in a frame DecodeCut decoded, IPv6's fragment header
// (frag > 0) and where the L4 header of a first fragment or whole packet
// starts (behind IPv6's extension headers), if the captured bytes say.
func ipHeaders(data []byte, p packet.Packet, l3 int) (frag, l4 int, ok bool) {
	if p.Src.Is4() {
		return 0, l3 + 4*int(data[l3]&0x0f), true
	}
	next, at := data[l3+6], l3+40
	for next != p.Proto {
		if at+2 > len(data) {
			return frag, 0, false
		}
		switch next {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			next, at = data[at], at+8*(int(data[at+1])+1)
		case 44: // fragment
			if at+8 <= len(data) {
				frag = at
			}
			next, at = data[at], at+8
		case 51: // authentication header
			next, at = data[at], at+4*(int(data[at+1])+2)
		default:
			return frag, 0, false
		}
	}
	return frag, at, true
}

// ipLen is the IP packet's length its header announces (as the kernel's
// LEN=; Ethernet padding does not count). DecodeCut found the IP header.
func ipLen(data []byte, p packet.Packet) int {
	l3 := l3Offset(p)
	if p.Src.Is4() {
		return int(binary.BigEndian.Uint16(data[l3+2:]))
	}
	return 40 + int(binary.BigEndian.Uint16(data[l3+4:]))
}

// protoName is the kernel LOG target's name of a protocol.
func protoName(p uint8) string {
	switch p {
	case packet.ProtoTCP:
		return "TCP"
	case packet.ProtoUDP:
		return "UDP"
	case packet.ProtoICMP:
		return "ICMP"
	case packet.ProtoICMPv6:
		return "ICMPv6"
	}
	return strconv.Itoa(int(p))
}

// Record is an event as `xdpfw log --json` prints it, one object per line.
type Record struct {
	Time      time.Time `json:"time"`
	RuleID    uint32    `json:"rule_id"`
	Rule      int       `json:"rule,omitempty"` // number in its chain (0: not in the rule set in force any more)
	Chain     string    `json:"chain"`
	Prefix    string    `json:"prefix,omitempty"`
	Level     string    `json:"level"`
	Target    string    `json:"target,omitempty"` // NFLOG or ULOG: the rule's target (with group)
	Group     *uint16   `json:"group,omitempty"`  // its netlink group
	ByLOG     bool      `json:"by_log_rule"`      // a LOG rule logged it (false: the deciding rule's --log)
	Verdict   string    `json:"verdict"`
	Reason    string    `json:"reason"`
	VerdictID uint32    `json:"verdict_rule_id"`
	By        string    `json:"decided_by"` // the deciding rule's number, or "policy"
	Hook      string    `json:"hook"`
	In        string    `json:"in,omitempty"`
	Out       string    `json:"out,omitempty"`
	Ifindex   uint32    `json:"ifindex"`
	CTState   string    `json:"ctstate"`
	Len       int       `json:"len"`    // the frame's length
	CapLen    int       `json:"caplen"` // bytes captured (data)
	Src       string    `json:"src,omitempty"`
	Dst       string    `json:"dst,omitempty"`
	Proto     *uint8    `json:"proto,omitempty"`
	SPort     *uint16   `json:"sport,omitempty"`
	DPort     *uint16   `json:"dport,omitempty"`
	TCPFlags  string    `json:"tcp_flags,omitempty"`
	ICMPType  *uint8    `json:"icmp_type,omitempty"`
	ICMPCode  *uint8    `json:"icmp_code,omitempty"`
	VLANs     []uint16  `json:"vlans,omitempty"`
	PCPs      []int     `json:"pcps,omitempty"` // each tag's priority code point (802.1p), as vlans
	Trace     bool      `json:"trace,omitempty"`
	// Audit: an audit event (Event.Audit): rule_id, rule, verdict are the
	// candidate's; verdict_id, by the enforced decision's rule.
	Audit string `json:"audit,omitempty"` // "would drop" or "would accept"
	Data  string `json:"data"`            // the captured bytes, hex
}

// Record returns the event as a JSON record.
func (e *Event) Record(rs Rules, names IfName) Record {
	r := rs[e.RuleID]
	rec := Record{Time: e.Time, RuleID: e.RuleID, Rule: r.Num, Chain: e.Chain.String(), Prefix: r.Prefix, Level: rs.Level(e),
		ByLOG: e.ByLOG, Verdict: e.Action.String(), Reason: e.Reason.String(), VerdictID: e.VerdictID, By: rs.verdictRule(e),
		Hook: e.Hook.String(), Ifindex: e.Ifindex, CTState: compile.CTStateName(e.CTState), Len: e.PktLen, CapLen: len(e.Data),
		Trace: e.Trace, Audit: e.AuditVerdict(), Data: hex.EncodeToString(e.Data)}
	if r.Target != "" {
		rec.Target, rec.Group = r.Target, &r.Group
	}
	if e.Hook == HookEgress {
		rec.Out = ifname(names, e.Ifindex)
	} else {
		rec.In = ifname(names, e.Ifindex)
	}
	p, err := packet.DecodeCut(e.Data)
	if (err != nil && !errors.Is(err, packet.ErrTruncated)) || !p.Src.IsValid() {
		return rec
	}
	rec.Src, rec.Dst, rec.Proto, rec.VLANs = p.Src.String(), p.Dst.String(), &p.Proto, p.VLANs
	for i := range p.VLANs {
		rec.PCPs = append(rec.PCPs, int(p.PCP(i)))
	}
	if !p.L4Present() || err != nil && p.SPort == 0 && p.DPort == 0 && p.ICMPType == 0 {
		return rec
	}
	switch p.Proto {
	case packet.ProtoTCP, packet.ProtoUDP:
		rec.SPort, rec.DPort = &p.SPort, &p.DPort
		if p.Proto == packet.ProtoTCP {
			rec.TCPFlags = packet.TCPFlagsString(p.TCPFlags)
		}
	case packet.ProtoICMP, packet.ProtoICMPv6:
		rec.ICMPType, rec.ICMPCode = &p.ICMPType, &p.ICMPCode
	}
	return rec
}
