package nat

import (
	"net/netip"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// Tuple is a connection's tuple in one direction (ICMP echo: the id as
// both ports).
type Tuple struct {
	Src, Dst     netip.Addr
	SPort, DPort uint16
	Proto        uint8
}

// Addrs are the addresses a translation may take its own from: Local, the
// address of the interface a packet came in by (REDIRECT); Egress, the
// egress interface's address for the next hop (MASQUERADE).
type Addrs struct {
	Local, Egress netip.Addr
}

// Translate returns orig as target t translates it at its hook, as the
// kernel's NAT does where its choice is deterministic: one address, one
// port or none, and the connection's own source port kept by SNAT and
// MASQUERADE (the kernel keeps it when no other connection holds the
// reply tuple: fw_nat_claim does the same). false where the kernel picks
// by hash or at random (address or port ranges, --random, a source port
// out of --to-ports): the caller cannot know the result in advance.
func Translate(t *rules.NATTarget, orig Tuple, a Addrs) (Tuple, bool) {
	out := orig
	ports := orig.Proto == 6 || orig.Proto == 17
	if t.AddrLo != t.AddrHi || t.Random || t.RandomFully || t.Ports && (t.PortLo != t.PortHi || !ports) {
		return out, false
	}
	switch t.Kind {
	case rules.NATDNAT:
		if t.AddrLo.IsValid() {
			out.Dst = t.AddrLo
		}
		if t.Ports && ports {
			out.DPort = t.PortLo
		}
	case rules.NATRedirect:
		out.Dst = a.Local
		if t.Ports && ports {
			out.DPort = t.PortLo
		}
	case rules.NATSNAT, rules.NATMasquerade:
		if t.Ports && ports && orig.SPort != t.PortLo {
			return out, false // a port the kernel picks (one port: collisions aside, that one)
		}
		out.Src = a.Egress
		if t.Kind == rules.NATSNAT {
			out.Src = t.AddrLo
			if !t.AddrLo.IsValid() {
				out.Src = orig.Src
			}
		}
	}
	return out, true
}
