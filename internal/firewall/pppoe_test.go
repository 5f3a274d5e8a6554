package firewall

import (
	"encoding/binary"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/datapath"
)

// TestParseProcPPPoE reads /proc/net/pppoe as pppoe_seq_show writes it:
// the session id is the kernel's network-order number printed as a host
// number (on a little-endian host, session 0x1234 prints as 00003412).
func TestParseProcPPPoE(t *testing.T) {
	var wire [2]byte
	binary.BigEndian.PutUint16(wire[:], 0x1234)
	host := binary.NativeEndian.Uint16(wire[:])
	text := "Id       Address              Device\n" +
		"0000" + hex4(host) + " 02:00:00:00:00:aa     eth1\n"
	got, err := ParseProcPPPoE([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []PPPoEProcSession{{SID: 0x1234, Peer: net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, Dev: "eth1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed %+v, want %+v (from %q)", got, want, text)
	}
	for _, bad := range []string{"Id Address Device\n00001234 02:00:00:00:00:aa\n", "Id\n1234567890 02:00:00:00:00:aa eth0\n",
		"Id\n00001234 02:00:00:00:00 eth0\n"} {
		if _, err := ParseProcPPPoE([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if got, err := ParseProcPPPoE([]byte("Id       Address              Device\n")); err != nil || len(got) != 0 {
		t.Errorf("no sessions: %v, %v", got, err)
	}
}

func hex4(v uint16) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[v>>12], digits[v>>8&15], digits[v>>4&15], digits[v&15]})
}

// TestPairPPPoE: a session is paired with the ppp device when that is
// unambiguous (one of each), keyed by the device under its VLAN devices
// with their tags outermost first; otherwise none, and why.
func TestPairPPPoE(t *testing.T) {
	peer := net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	eth := PPPoELink{Index: 2, Name: "eth1", MAC: mac, MTU: 1500}
	v7 := PPPoELink{Index: 3, Name: "eth1.7", MAC: mac, MTU: 1500, IsVLAN: true, VLAN: 7, Parent: 2}
	q := PPPoELink{Index: 4, Name: "eth1.7.8", MAC: mac, MTU: 1496, IsVLAN: true, VLAN: 8, Parent: 3}
	ppp := PPPoELink{Index: 9, Name: "pppoe-wan", PPP: true, MTU: 1492}
	ppp2 := PPPoELink{Index: 10, Name: "ppp1", PPP: true}
	s := func(dev string) []PPPoEProcSession { return []PPPoEProcSession{{SID: 5, Peer: peer, Dev: dev}} }
	for _, tc := range []struct {
		name  string
		ss    []PPPoEProcSession
		links []PPPoELink
		want  []datapath.PPPoESession
		why   string
	}{
		{"untagged", s("eth1"), []PPPoELink{eth, ppp}, []datapath.PPPoESession{{PPP: 9, PPPName: "pppoe-wan", Dev: 2,
			DevName: "eth1", SID: 5, Peer: peer, MAC: mac, MTU: 1500}}, ""},
		{"vlan 7", s("eth1.7"), []PPPoELink{eth, v7, ppp}, []datapath.PPPoESession{{PPP: 9, PPPName: "pppoe-wan", Dev: 2,
			DevName: "eth1.7", VLANs: []uint16{7}, SID: 5, Peer: peer, MAC: mac, MTU: 1500}}, ""},
		{"qinq 7 8", s("eth1.7.8"), []PPPoELink{eth, v7, q, ppp}, []datapath.PPPoESession{{PPP: 9, PPPName: "pppoe-wan", Dev: 2,
			DevName: "eth1.7.8", VLANs: []uint16{7, 8}, SID: 5, Peer: peer, MAC: mac, MTU: 1496}}, ""},
		{"two ppp devices", s("eth1"), []PPPoELink{eth, ppp, ppp2}, nil, "1 PPPoE sessions and 2 ppp devices"},
		{"no ppp device yet", s("eth1"), []PPPoELink{eth}, nil, "no ppp device yet"},
		{"device gone", s("eth9"), []PPPoELink{eth, ppp}, nil, "is gone"},
		{"no sessions", nil, []PPPoELink{eth, ppp}, nil, ""},
	} {
		got, why := PairPPPoE(tc.ss, tc.links)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: paired %+v, want %+v", tc.name, got, tc.want)
		}
		if w := strings.Join(why, "; "); (tc.why == "") != (w == "") || !strings.Contains(w, tc.why) {
			t.Errorf("%s: why %q, want %q", tc.name, w, tc.why)
		}
	}
}
