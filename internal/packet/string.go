package packet

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// String returns a one-line human summary of the packet, for example
//
//	vlan 10 | 10.0.0.1:1234 > 10.0.0.2:80 tcp [SYN] len 74
//	vlan 10 pcp 5 | 10.0.0.1:1234 > 10.0.0.2:80 tcp [SYN] len 74
//	qinq 100.10 | [fd00::1]:53 > [fd00::2]:5353 udp ext hbh(8) frag off 0 MF len 86
//	10.0.0.1 > 10.0.0.2 tcp ttl 3 ipopts(4) frag off 185 len 38
//	ethertype 0x0806 (arp) len 42
//
// pcp, the tags' priority code points (outermost first), is shown when
// one is not 0. len is the frame length Bytes returns; a packet that cannot be encoded ends
// in "invalid: <reason>" instead.
func (p Packet) String() string {
	var sb strings.Builder
	if len(p.VLANs) > 0 {
		kind := "qinq"
		if p.TPID8100 || len(p.VLANs) == 1 {
			kind = "vlan"
		}
		ids, pcps := make([]string, len(p.VLANs)), make([]string, len(p.VLANs))
		for i, v := range p.VLANs {
			ids[i], pcps[i] = strconv.Itoa(int(v)), strconv.Itoa(int(p.PCP(i)))
		}
		fmt.Fprintf(&sb, "%s %s ", kind, strings.Join(ids, "."))
		if slices.ContainsFunc(p.PCPs, func(c uint8) bool { return c != 0 }) {
			fmt.Fprintf(&sb, "pcp %s ", strings.Join(pcps, "."))
		}
		sb.WriteString("| ")
	}

	switch {
	case p.NonIP != 0:
		fmt.Fprintf(&sb, "ethertype %#04x", p.NonIP)
		if name := etherTypeName(p.NonIP); name != "" {
			fmt.Fprintf(&sb, " (%s)", name)
		}
	case !p.Src.IsValid():
		sb.WriteString("no addresses")
	default:
		p.writeIP(&sb)
	}

	if b, err := p.Encode(); err != nil {
		fmt.Fprintf(&sb, " invalid: %v", err)
	} else {
		fmt.Fprintf(&sb, " len %d", len(b))
	}
	return sb.String()
}

// writeIP writes the IP part of the summary.
func (p *Packet) writeIP(sb *strings.Builder) {
	ports := p.L4Present() && (p.Proto == ProtoTCP || p.Proto == ProtoUDP)
	endpoint := func(a netip.Addr, port uint16) string {
		if ports {
			return netip.AddrPortFrom(a, port).String()
		}
		return a.String()
	}
	fmt.Fprintf(sb, "%s > %s ", endpoint(p.Src, p.SPort), endpoint(p.Dst, p.DPort))

	switch p.Proto {
	case ProtoTCP:
		sb.WriteString("tcp")
		if p.L4Present() {
			fmt.Fprintf(sb, " [%s]", TCPFlagsString(p.TCPFlags))
		}
	case ProtoUDP:
		sb.WriteString("udp")
	case ProtoICMP, ProtoICMPv6:
		name := "icmp"
		if p.Proto == ProtoICMPv6 {
			name = "icmp6"
		}
		sb.WriteString(name)
		if p.L4Present() {
			fmt.Fprintf(sb, " type %d code %d", p.ICMPType, p.ICMPCode)
		}
	default:
		fmt.Fprintf(sb, "proto %d", p.Proto)
	}

	if p.TTL != 0 && p.TTL != DefaultTTL {
		fmt.Fprintf(sb, " ttl %d", p.TTL)
	}
	if len(p.IPv4Options) > 0 && !p.IsIPv6() {
		fmt.Fprintf(sb, " ipopts(%d)", len(p.paddedIPv4Options()))
	}
	if len(p.IPv6Ext) > 0 && p.IsIPv6() {
		parts := make([]string, len(p.IPv6Ext))
		for i, e := range p.IPv6Ext {
			n, err := extHdrLen(e)
			if err != nil {
				n = e.Len
			}
			parts[i] = fmt.Sprintf("%s(%d)", extName(e.Type), n)
		}
		fmt.Fprintf(sb, " ext %s", strings.Join(parts, ","))
	}
	if p.IsFragment() {
		fmt.Fprintf(sb, " frag off %d", p.FragOffset)
		if p.MoreFragments {
			sb.WriteString(" MF")
		}
	}
	if p.PadTo60 {
		sb.WriteString(" pad")
	}
}

// tcpFlagNames are the TCP flag names, lowest bit first.
var tcpFlagNames = [8]string{"FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"}

// TCPFlagsString returns the set TCP flags as a comma-separated list in bit
// order ("SYN,ACK"), or "none".
func TCPFlagsString(flags uint8) string {
	var names []string
	for i, n := range tcpFlagNames {
		if flags&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// extName returns a short name for an IPv6 extension header type.
func extName(t uint8) string {
	switch t {
	case ProtoHopByHop:
		return "hbh"
	case ProtoRouting:
		return "rt"
	case ProtoFragment:
		return "frag"
	case ProtoDestOpts:
		return "dst"
	case ProtoAH:
		return "ah"
	}
	return "ext" + strconv.Itoa(int(t))
}

// etherTypeName returns a short name for well-known non-IP EtherTypes.
func etherTypeName(et uint16) string {
	switch et {
	case EtherTypeARP:
		return "arp"
	case 0x8035:
		return "rarp"
	case 0x88cc:
		return "lldp"
	case 0x8863, 0x8864:
		return "pppoe"
	case 0x8847, 0x8848:
		return "mpls"
	case 0x88e5:
		return "macsec"
	}
	return ""
}
