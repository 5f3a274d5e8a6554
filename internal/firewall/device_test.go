package firewall

import (
	"testing"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestDeviceWarningsVLANPrio: --vlan-prio is as blind as --vlan-id where
// XDP cannot see tags, in the filter rules and the priority table alike.
func TestDeviceWarningsVLANPrio(t *testing.T) {
	c := datapath.DeviceCaveats{VLAN: "tags unseen"}
	for _, tc := range []struct {
		text string
		warn bool
	}{
		{"-A INPUT -m vlan --vlan-prio 5 -j DROP\n", true},
		{"-A INPUT -j DROP\n-t xdpfw-priority -A PRIORITY -m vlan ! --vlan-prio 3 -j HIGH\n", true},
		{"-A INPUT -j DROP\n-t xdpfw-priority -A PRIORITY -i eth1 -m vlan --vlan-id 3 -j HIGH\n", false}, // not on eth0
		{"-A INPUT -j DROP\n-t xdpfw-priority -A PRIORITY -p udp -j HIGH\n", false},
	} {
		rs, err := rules.Parse("t", []byte(tc.text), rules.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := deviceWarnings(rs, "eth0", c); (len(got) == 1) != tc.warn {
			t.Errorf("%q: warnings %q, want one: %v", tc.text, got, tc.warn)
		}
	}
}
