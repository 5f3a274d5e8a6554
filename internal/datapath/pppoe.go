package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
)

// PPPoESession is a PPPoE session the kernel has (its pppoe driver), with
// the ppp device it carries the packets of: what the data plane needs to
// parse its frames into the IP packets the ppp device sees, and to send
// that device's packets itself (bpf/lib/pppoe.h, docs/pppoe.md).
type PPPoESession struct {
	PPP     int    // the ppp device's ifindex
	PPPName string // its name
	// Dev is the device xdpfw runs on that the session's frames arrive
	// by: the session's Ethernet device, or the lower device of the VLAN
	// device(s) it runs on, whose tags VLANs holds, outermost first.
	Dev     int
	DevName string // the session's own device (a VLAN device's name where VLANs has tags)
	VLANs   []uint16
	SID     uint16           // the session id
	Peer    net.HardwareAddr // the access concentrator's MAC
	MAC     net.HardwareAddr // the session device's own MAC: the source of the frames it sends
	MTU     int              // the session device's MTU
}

// pppoeHeader is the PPPoE session header and PPP protocol field.
const pppoeHeader = 8

func (s *PPPoESession) keys() (xdpfwFwPppoeKey, xdpfwFwPppoeOut, error) {
	var k xdpfwFwPppoeKey
	var v xdpfwFwPppoeOut
	if len(s.Peer) != 6 || len(s.MAC) != 6 {
		return k, v, fmt.Errorf("PPPoE session %d on %s: MAC addresses %v, %v are not Ethernet's", s.SID, s.DevName, s.Peer, s.MAC)
	}
	if len(s.VLANs) > 2 {
		return k, v, fmt.Errorf("PPPoE session %d on %s: %d VLAN tags (xdpfw parses two)", s.SID, s.DevName, len(s.VLANs))
	}
	k.Ifindex = uint32(s.Dev)
	copy(k.Vlan[:], s.VLANs)
	copy(k.Peer[:], s.Peer)
	k.Sid = htons(s.SID)
	copy(v.Peer[:], s.Peer)
	copy(v.Mac[:], s.MAC)
	v.Sid = k.Sid
	if len(s.VLANs) == 0 { // over a VLAN the fast path hands the packets to the kernel
		v.Ifindex = uint32(s.Dev)
	}
	v.Mtu = uint16(max(0, min(s.MTU-pppoeHeader, 0xffff)))
	return k, v, nil
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// SetPPPoE makes fw_pppoe_rx and fw_pppoe_tx hold exactly the sessions ss:
// new and changed ones are written before stale ones go, so a frame of a
// session that stays meets it all along.
func (d *Datapath) SetPPPoE(ss []PPPoESession) error {
	if d.pppoeRx == nil || d.pppoeTx == nil {
		return errors.New("this program has no PPPoE tables (loaded by an earlier xdpfw version): load again")
	}
	rx := map[xdpfwFwPppoeKey]uint32{}
	tx := map[uint32]xdpfwFwPppoeOut{}
	for i := range ss {
		k, v, err := ss[i].keys()
		if err != nil {
			return err
		}
		rx[k] = uint32(ss[i].PPP)
		tx[uint32(ss[i].PPP)] = v
	}
	if len(rx) > int(d.pppoeRx.MaxEntries()) {
		return fmt.Errorf("%d PPPoE sessions; xdpfw's table holds %d", len(rx), d.pppoeRx.MaxEntries())
	}
	if err := syncMap(d.pppoeRx, rx, "PPPoE sessions (fw_pppoe_rx)", func(k xdpfwFwPppoeKey) string { return fmt.Sprintf("%+v", k) }); err != nil {
		return err
	}
	return syncMap(d.pppoeTx, tx, "PPPoE sessions (fw_pppoe_tx)", func(k uint32) string { return fmt.Sprintf("ppp device %d", k) })
}

// PPPoESessions counts the sessions the data plane holds (-1: this
// program has no PPPoE tables).
func (d *Datapath) PPPoESessions() (int, error) {
	if d.pppoeRx == nil {
		return -1, nil
	}
	var (
		k xdpfwFwPppoeKey
		v uint32
		n int
	)
	it := d.pppoeRx.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("reading fw_pppoe_rx: %w", err)
	}
	return n, nil
}
