package cli

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

type traceFlags struct {
	proto, src, dst, srcMAC, dstMAC string
	sport, dport                    uint16
	tcpFlags, icmpType              string
	vlans, vlanPrios                []uint
	frag                            bool
	iface, pcap                     string
	asJSON, out                     bool
	ctstate                         string
}

func newTrace(e *env) *cobra.Command {
	var f traceFlags
	cmd := &cobra.Command{
		Use:   "trace [packet flags | --pcap FILE]",
		Short: "Run a described packet (or a pcap's packets) through the loaded firewall",
		Long: `trace is the what-if tool: it builds the packet the flags describe (or reads
every frame of a pcap/pcapng file) and runs it with BPF_PROG_TEST_RUN through
a trace instance of the LOADED program, as if it arrived on --in: the same
code on the same rules, connections and budgets. It prints the verdict, the
chain and the deciding rule. Nothing is sent anywhere (a REJECT's answer
is built, reported as XDP_TX, and discarded) and nothing packets see
changes: no counter counts it, conntrack records nothing, no REJECT or LOG
token is taken, no log event is sent. (It cannot tell whether a full
conntrack table would refuse a new connection.) Loading the trace instance
takes most of a second: the kernel verifies it.

With --nat xdpfw in force, the packet's binding is looked up in the live
bindings (xdpfw status lists them). A packet of a bound connection is
judged as the filter chains see it, its destination translated (DNAT, or
the answer to a masqueraded connection going back to its client), and
"nat binding:" shows the tuple it arrives with, the one the chains judged
and the one it leaves with. A packet FORWARD accepts whose connection has
no binding gets the translation the nat table picks for a connection
whose first packet it is ("nat:": the POSTROUTING rule, on the egress
device of the kernel's route). Later fragments and ICMP errors, translated
by their datagram's first fragment and by their quote, are not looked up.

--out traces a packet this host sends instead: the OUTPUT chain, run by
the tc egress program. Its verdicts are TC_ACT_OK, TC_ACT_SHOT, and
TC_ACT_REDIRECT for an answered REJECT (live, the answer goes into this
host's stack on the same interface, so the sending socket fails at once;
the trace builds it and discards it).`,
		Example: `  xdpfw trace -p tcp --src 198.51.100.7 --dst 10.0.0.1 --dport 22
  xdpfw trace -p tcp --dst 10.0.0.1 --dport 80 --tcp-flags SYN
  xdpfw trace -p icmp --dst 10.0.0.1 --icmp-type echo-request
  xdpfw trace -p udp --src 2001:db8::1 --dst 2001:db8::2 --dport 53 --vlan 10
  xdpfw trace -p udp --dst 10.0.0.1 --dport 5004 --vlan 10 --vlan-prio 5
  xdpfw trace -p tcp --src 198.51.100.7 --dport 443 --tcp-flags ACK --ctstate ESTABLISHED
  xdpfw trace --out -p udp --dst 192.0.2.53 --dport 53
  xdpfw trace --out -p tcp --src 10.0.0.1 --dst 203.0.113.9 --dport 25
  xdpfw trace --pcap capture.pcapng --in eth0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var frames [][]byte
			var descs []string
			if f.pcap != "" {
				fh, err := os.Open(f.pcap)
				if err != nil {
					return err
				}
				defer fh.Close()
				if frames, err = packet.ReadFrames(fh); err != nil {
					return fmt.Errorf("%s: %w", f.pcap, err)
				}
				for _, fr := range frames {
					d := "undecodable frame"
					if p, err := packet.Decode(fr); err == nil {
						d = p.String()
					}
					descs = append(descs, d)
				}
			} else {
				p, err := f.build()
				if err != nil {
					return usageError{err}
				}
				frames, descs = [][]byte{p.Bytes()}, []string{p.String()}
			}
			ctstate := datapath.NoCTState
			if f.ctstate != "" {
				rs, err := rules.ParseRuleArgs("INPUT", []string{"-m", "conntrack", "--ctstate", f.ctstate, "-j", "ACCEPT"}, rules.ParseOptions{})
				if err != nil {
					return usageError{fmt.Errorf("--ctstate: %w", err)}
				}
				m := rs.Match.CTState.Mask & rules.CTAll
				nat := rs.Match.CTState.Mask &^ rules.CTAll
				if m&(m-1) != 0 || m == 0 {
					return usageError{fmt.Errorf("--ctstate: give one state (and SNAT, DNAT if NAT changed the connection)")}
				}
				for ctstate = 0; m>>ctstate != 1; ctstate++ {
				}
				// what -m conntrack's other tests then see: the original
				// direction; an established connection has seen a reply
				var info uint8
				switch uint8(ctstate) {
				case compile.CTEstablished:
					info = compile.CTISeenReply | compile.CTIConfirmed
				case compile.CTRelated:
					info = compile.CTIConfirmed
				}
				if nat != 0 && uint8(ctstate) != compile.CTNew && uint8(ctstate) != compile.CTEstablished &&
					uint8(ctstate) != compile.CTRelated {
					return usageError{fmt.Errorf("--ctstate %s: a packet without a connection has no NAT state", f.ctstate)}
				}
				if nat&rules.CTSNAT != 0 {
					info |= compile.CTISrcNAT
				}
				if nat&rules.CTDNAT != 0 {
					info |= compile.CTIDstNAT
				}
				if info != 0 {
					ctstate = datapath.AssumeConn(uint8(ctstate), info, 0)
				}
			}
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			var results []*firewall.TraceResult
			for i, fr := range frames {
				r, err := fw.Trace(fr, firewall.TraceOptions{Iface: f.iface, Egress: f.out, CTState: ctstate})
				if err != nil {
					return fmt.Errorf("frame %d: %w", i+1, err)
				}
				results = append(results, r)
				if !f.asJSON {
					fmt.Fprintf(e.stdout, "%s\n  -> %s", descs[i], r.Verdict)
					switch {
					case r.Reject != "":
						fmt.Fprintf(e.stdout, " by %s rule %d: %s\n     (%s)\n", r.Chain, r.RuleNum, r.Rule, rejectOutcome(r))
					case r.Rule != "":
						fmt.Fprintf(e.stdout, " by %s rule %d: %s\n", r.Chain, r.RuleNum, r.Rule)
					case r.Policy:
						fmt.Fprintf(e.stdout, " by %s policy\n", r.Chain)
					default:
						fmt.Fprintf(e.stdout, " (%s)\n", r.Reason)
					}
					if r.CTState != "" {
						fmt.Fprintf(e.stdout, "  connection state: %s\n", r.CTState)
					}
					if r.NAT != "" {
						fmt.Fprintf(e.stdout, "  nat: %s\n", r.NAT)
					}
					if b := r.Binding; b != nil {
						fmt.Fprintf(e.stdout, "  nat binding: arrives %s; the filter judged %s; leaves %s\n", b.Arrives, b.FilterSees, b.Leaves)
					}
					if r.LogRules > 0 || r.LogSelf {
						fmt.Fprintf(e.stdout, "  logged: %s (xdpfw log shows the events, marked TRACE, within the rules' rate limits)\n", logWho(r))
					}
				}
			}
			if f.asJSON {
				return e.printJSON(results)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.proto, "protocol", "p", "tcp", "tcp, udp, icmp, ipv6-icmp or a protocol number")
	fl.StringVar(&f.src, "src", "", "source address (default 192.0.2.1, or 2001:db8::1 when --dst is IPv6)")
	fl.StringVar(&f.dst, "dst", "", "destination address (default 192.0.2.2, or 2001:db8::2 when --src is IPv6)")
	fl.Uint16Var(&f.sport, "sport", 40000, "source port")
	fl.Uint16Var(&f.dport, "dport", 80, "destination port")
	fl.StringVar(&f.tcpFlags, "tcp-flags", "SYN", "TCP flags set, comma separated (SYN,ACK,FIN,RST,PSH,URG) or NONE")
	fl.StringVar(&f.icmpType, "icmp-type", "echo-request", "ICMP type: name, TYPE or TYPE/CODE")
	fl.StringVar(&f.srcMAC, "src-mac", "02:00:00:00:00:01", "source MAC")
	fl.StringVar(&f.dstMAC, "dst-mac", "02:00:00:00:00:02", "destination MAC")
	fl.UintSliceVar(&f.vlans, "vlan", nil, "VLAN tag(s), outermost first")
	fl.UintSliceVar(&f.vlanPrios, "vlan-prio", nil, "the --vlan tags' priority code points (802.1p PCP, 0-7; what -m vlan "+
		"--vlan-prio matches: the outermost), outermost first (default 0)")
	fl.BoolVar(&f.frag, "fragment", false, "make it a non-first fragment (no L4 header)")
	fl.StringVar(&f.iface, "in", "", "interface the packet arrives on (default: the first attached)")
	fl.BoolVar(&f.out, "out", false, "trace a packet this host sends (OUTPUT chain, tc egress) instead")
	fl.StringVar(&f.ctstate, "ctstate", "", "assume this connection state (NEW, ESTABLISHED, RELATED, INVALID, UNTRACKED) "+
		"instead of asking conntrack, with SNAT, DNAT where NAT changed its connection (ESTABLISHED,DNAT); "+
		"the packet goes in the original direction, a NEW one is its connection's first "+
		"(--ctstatus sees ESTABLISHED as SEEN_REPLY,CONFIRMED)")
	fl.StringVar(&f.pcap, "pcap", "", "trace every frame of a pcap or pcapng file instead")
	fl.BoolVar(&f.asJSON, "json", false, "print JSON")
	return cmd
}

func (f *traceFlags) build() (*packet.Packet, error) {
	p := &packet.Packet{SPort: f.sport, DPort: f.dport}
	var err error
	if p.Proto, err = protoNumber(f.proto); err != nil {
		return nil, err
	}
	v6 := strings.Contains(f.src, ":") || strings.Contains(f.dst, ":") || p.Proto == packet.ProtoICMPv6
	src, dst := f.src, f.dst
	if src == "" {
		src = map[bool]string{false: "192.0.2.1", true: "2001:db8::1"}[v6]
	}
	if dst == "" {
		dst = map[bool]string{false: "192.0.2.2", true: "2001:db8::2"}[v6]
	}
	if p.Src, err = netip.ParseAddr(src); err != nil {
		return nil, fmt.Errorf("--src: %w", err)
	}
	if p.Dst, err = netip.ParseAddr(dst); err != nil {
		return nil, fmt.Errorf("--dst: %w", err)
	}
	if p.Src.Is4() != p.Dst.Is4() {
		return nil, fmt.Errorf("--src and --dst must be of one family")
	}
	for _, m := range []struct {
		s   string
		dst *[6]byte
	}{{f.srcMAC, &p.SrcMAC}, {f.dstMAC, &p.DstMAC}} {
		hw, err := net.ParseMAC(m.s)
		if err != nil || len(hw) != 6 {
			return nil, fmt.Errorf("bad MAC %q", m.s)
		}
		copy(m.dst[:], hw)
	}
	for _, v := range f.vlans {
		if v > 4095 {
			return nil, fmt.Errorf("--vlan %d: VLAN ids are 0-4095", v)
		}
		p.VLANs = append(p.VLANs, uint16(v))
	}
	if len(f.vlanPrios) > len(f.vlans) {
		return nil, fmt.Errorf("--vlan-prio: %d priorities for %d --vlan tags", len(f.vlanPrios), len(f.vlans))
	}
	for _, c := range f.vlanPrios {
		if c > 7 {
			return nil, fmt.Errorf("--vlan-prio %d: priority code points are 0-7", c)
		}
		p.PCPs = append(p.PCPs, uint8(c))
	}
	if p.Proto == packet.ProtoTCP {
		for _, name := range strings.Split(strings.ToUpper(f.tcpFlags), ",") {
			bit, ok := map[string]uint8{"SYN": packet.TCPSyn, "ACK": packet.TCPAck, "FIN": packet.TCPFin,
				"RST": packet.TCPRst, "PSH": packet.TCPPsh, "URG": packet.TCPUrg, "NONE": 0}[strings.TrimSpace(name)]
			if !ok {
				return nil, fmt.Errorf("--tcp-flags: unknown flag %q", name)
			}
			p.TCPFlags |= bit
		}
	}
	if p.Proto == packet.ProtoICMP || p.Proto == packet.ProtoICMPv6 {
		t, c, err := rules.LookupICMP(p.Proto == packet.ProtoICMPv6, f.icmpType)
		if err != nil {
			return nil, fmt.Errorf("--icmp-type: %w", err)
		}
		p.ICMPType, p.ICMPCode = t, c
	}
	if f.frag {
		p.FragOffset = 185 // 1480 bytes in: a non-first fragment
	}
	p.Payload = []byte("xdpfw trace")
	return p, nil
}

// logWho says what logged a traced packet.
func logWho(r *firewall.TraceResult) string {
	var parts []string
	if r.LogRules == 1 {
		parts = append(parts, "by 1 LOG rule")
	} else if r.LogRules > 1 {
		parts = append(parts, fmt.Sprintf("by %d LOG rules", r.LogRules))
	}
	if r.LogSelf {
		parts = append(parts, "by the deciding rule (--log)")
	}
	return strings.Join(parts, " and ")
}

// rejectOutcome says what a REJECT did with the traced packet.
func rejectOutcome(r *firewall.TraceResult) string {
	switch {
	case r.Reason == compile.ReasonRuleReject.String() && r.Chain == rules.ChainOutput.String():
		return "answered: " + r.Reject + ", to this host's own socket"
	case r.Reason == compile.ReasonRuleReject.String():
		return "answered: " + r.Reject
	}
	return "not answered, dropped: " + r.Reason
}

func protoNumber(s string) (uint8, error) {
	switch strings.ToLower(s) {
	case "tcp":
		return packet.ProtoTCP, nil
	case "udp":
		return packet.ProtoUDP, nil
	case "icmp":
		return packet.ProtoICMP, nil
	case "ipv6-icmp", "icmpv6":
		return packet.ProtoICMPv6, nil
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("-p %q: tcp, udp, icmp, ipv6-icmp or a number 0-255", s)
	}
	return uint8(n), nil
}
