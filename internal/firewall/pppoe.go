package firewall

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/xdpfw/xdpfw/internal/datapath"
)

// ProcPPPoE lists the kernel's PPPoE sessions (drivers/net/ppp/pppoe.c
// pppoe_seq_show); absent where the pppoe driver is not loaded.
var ProcPPPoE = "/proc/net/pppoe"

// PPPoEProcSession is one line of /proc/net/pppoe: a session the kernel's
// pppoe driver has (a connected PPPoE socket, pppd's).
type PPPoEProcSession struct {
	SID  uint16           // the session id
	Peer net.HardwareAddr // the access concentrator's MAC
	Dev  string           // the Ethernet (or VLAN) device it runs on
}

// ParseProcPPPoE parses /proc/net/pppoe: a heading, then one line per
// session, "%08X %pM %8s". The kernel prints the session id as it holds
// it, in network order read as a host number: on a little-endian host
// session 0x1234 prints as 00003412.
func ParseProcPPPoE(b []byte) ([]PPPoEProcSession, error) {
	var out []PPPoEProcSession
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if n == 1 || len(f) == 0 {
			continue // "Id       Address              Device"
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("%s line %d: %q: want id, address, device", ProcPPPoE, n, sc.Text())
		}
		id, err := strconv.ParseUint(f[0], 16, 32)
		if err != nil || id > 0xffff {
			return nil, fmt.Errorf("%s line %d: session id %q", ProcPPPoE, n, f[0])
		}
		mac, err := net.ParseMAC(f[1])
		if err != nil || len(mac) != 6 {
			return nil, fmt.Errorf("%s line %d: address %q", ProcPPPoE, n, f[1])
		}
		var wire [2]byte
		binary.NativeEndian.PutUint16(wire[:], uint16(id))
		out = append(out, PPPoEProcSession{SID: binary.BigEndian.Uint16(wire[:]), Peer: mac, Dev: f[2]})
	}
	return out, sc.Err()
}

// PPPoELink is what PairPPPoE needs of a network device.
type PPPoELink struct {
	Index int
	Name  string
	PPP   bool             // a ppp device (ARPHRD_PPP)
	MAC   net.HardwareAddr // its address
	MTU   int
	// VLAN is the VLAN id of a VLAN device, whose lower device is Parent.
	VLAN, Parent int
	IsVLAN       bool
}

// PairPPPoE pairs the kernel's PPPoE sessions with its ppp devices. The
// kernel does not say which ppp device a session carries (pppd connects
// the two inside its own file descriptors; neither netlink, sysfs nor
// /proc names the pair), so xdpfw pairs them where that is unambiguous:
// one session and one ppp device, the home router's WAN. Otherwise it
// pairs none, and says why: their session frames are then dropped
// (pppoe-session-unknown; docs/pppoe.md). A session on a VLAN device (or
// two stacked) is keyed by the lower device and the tags.
func PairPPPoE(ss []PPPoEProcSession, links []PPPoELink) ([]datapath.PPPoESession, []string) {
	var ppp []PPPoELink
	byName := map[string]PPPoELink{}
	byIndex := map[int]PPPoELink{}
	for _, l := range links {
		byName[l.Name], byIndex[l.Index] = l, l
		if l.PPP {
			ppp = append(ppp, l)
		}
	}
	switch {
	case len(ss) == 0:
		return nil, nil
	case len(ss) > 1 || len(ppp) > 1:
		return nil, []string{fmt.Sprintf("%d PPPoE sessions and %d ppp devices: the kernel does not say which carries which, "+
			"so xdpfw drops their session frames (pppoe-session-unknown); docs/pppoe.md", len(ss), len(ppp))}
	case len(ppp) == 0:
		return nil, []string{fmt.Sprintf("PPPoE session %d on %s has no ppp device yet", ss[0].SID, ss[0].Dev)}
	}
	s := ss[0]
	dev, ok := byName[s.Dev]
	if !ok {
		return nil, []string{fmt.Sprintf("PPPoE session %d: its device %s is gone", s.SID, s.Dev)}
	}
	out := datapath.PPPoESession{PPP: ppp[0].Index, PPPName: ppp[0].Name, DevName: dev.Name, SID: s.SID, Peer: s.Peer,
		MAC: dev.MAC, MTU: dev.MTU}
	lower := dev
	for lower.IsVLAN {
		if len(out.VLANs) == 2 {
			return nil, []string{fmt.Sprintf("PPPoE session %d on %s: more than two VLAN tags (xdpfw parses two)", s.SID, s.Dev)}
		}
		out.VLANs = append([]uint16{uint16(lower.VLAN)}, out.VLANs...)
		if lower, ok = byIndex[lower.Parent]; !ok {
			return nil, []string{fmt.Sprintf("PPPoE session %d on %s: its VLAN device's lower device is gone", s.SID, s.Dev)}
		}
	}
	out.Dev = lower.Index
	return []datapath.PPPoESession{out}, nil
}

// PPPoESessions reads the kernel's PPPoE sessions paired with their ppp
// devices (PairPPPoE), and why any are not paired.
func PPPoESessions() ([]datapath.PPPoESession, []string, error) {
	b, err := os.ReadFile(ProcPPPoE)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil // no pppoe driver: no sessions
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the PPPoE sessions: %w", err)
	}
	ss, err := ParseProcPPPoE(b)
	if err != nil || len(ss) == 0 {
		return nil, nil, err
	}
	list, err := netlink.LinkList()
	if err != nil {
		return nil, nil, fmt.Errorf("listing devices (PPPoE sessions): %w", err)
	}
	links := make([]PPPoELink, 0, len(list))
	for _, l := range list {
		a := l.Attrs()
		pl := PPPoELink{Index: a.Index, Name: a.Name, PPP: a.EncapType == "ppp", MAC: a.HardwareAddr, MTU: a.MTU}
		if v, ok := l.(*netlink.Vlan); ok {
			pl.IsVLAN, pl.VLAN, pl.Parent = true, v.VlanId, a.ParentIndex
		}
		links = append(links, pl)
	}
	out, why := PairPPPoE(ss, links)
	return out, why, nil
}

// refreshPPPoE writes the kernel's PPPoE sessions into the data plane
// (datapath.SetPPPoE); it fails where the data plane could not be
// written (the program has the tables: an earlier version's has none,
// and parses no PPPoE).
func refreshPPPoE(dp *datapath.Datapath) error {
	ss, _, err := PPPoESessions()
	if err != nil {
		return err
	}
	if n, _ := dp.PPPoESessions(); n < 0 {
		return nil
	}
	return dp.SetPPPoE(ss)
}

// RefreshPPPoE brings the data plane's copy of the kernel's PPPoE
// sessions up to date (the daemon calls it when a ppp device comes or
// goes, and when /proc/net/pppoe changes), with no lock: it changes no
// rule, and the last writer writes the sessions as they are then. It
// returns the sessions and why any are left unpaired. A session's ppp
// device that is new (a reconnect makes a new one) is a name -i rules
// resolve against (state.ifaceNames): the caller compiles them again.
func RefreshPPPoE(p Paths) ([]datapath.PPPoESession, []string, error) {
	dp, err := datapath.Open(p.PinDir)
	if err != nil {
		return nil, nil, err
	}
	defer dp.Close()
	ss, why, err := PPPoESessions()
	if err != nil {
		return nil, nil, err
	}
	if n, _ := dp.PPPoESessions(); n < 0 {
		return ss, why, nil
	}
	return ss, why, dp.SetPPPoE(ss)
}
