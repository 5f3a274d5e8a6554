package datapath_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/datapath"
)

// TestFwdReasonMirrorsHeader: datapath.FwdReason is enum fw_fwd_reason of
// bpf/types.h, member for member (the names: FW_FWD_NO_NEIGH is
// "no-neighbour" and so on, checked by their order).
func TestFwdReasonMirrorsHeader(t *testing.T) {
	h, err := os.ReadFile("../../bpf/types.h")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)enum fw_fwd_reason \{(.*?)\};`).FindSubmatch(h)
	if body == nil {
		t.Fatal("enum fw_fwd_reason not found in bpf/types.h")
	}
	members := regexp.MustCompile(`(?m)^\s*(FW_[A-Z_]+)\s*(?:=\s*\d+)?,`).FindAllSubmatch(body[1], -1)
	want := map[string]string{"FW_FWD_XDP": "xdp", "FW_FWD_STACK": "stack", "FW_FWD_NO_NEIGH": "no-neighbour",
		"FW_FWD_TTL": "ttl", "FW_FWD_MTU": "mtu", "FW_FWD_IP_OPTIONS": "ip-options", "FW_FWD_NOT_ATTACHED": "not-attached",
		"FW_FWD_VLAN": "vlan", "FW_FWD_UNROUTED": "unrouted", "FW_FWD_FRAG": "fragment", "FW_FWD_NOT_HOST": "not-for-host",
		"FW_FWD_MARTIAN": "martian", "FW_FWD_HAIRPIN": "hairpin", "FW_FWD_TRIM": "trim"}
	if len(members) != int(datapath.NumFwdReasons)+1 || string(members[len(members)-1][1]) != "FW_NUM_FWD" {
		t.Fatalf("enum fw_fwd_reason has %d members, Go mirrors %d and FW_NUM_FWD", len(members), datapath.NumFwdReasons)
	}
	for i, m := range members[:len(members)-1] {
		name := string(m[1])
		if got := datapath.FwdReason(i).String(); want[name] != got {
			t.Errorf("enum fw_fwd_reason member %d %s: Go names it %q, want %q", i, name, got, want[name])
		}
	}
	if !strings.Contains(datapath.FwdReason(200).String(), "200") {
		t.Errorf("an unknown reason prints as %q", datapath.FwdReason(200))
	}
}

// TestParseForwardMode: the --forward values, and a clear refusal.
func TestParseForwardMode(t *testing.T) {
	for _, s := range []string{"xdp", "xdp-veth", "stack"} {
		if m, err := datapath.ParseForwardMode(s); err != nil || string(m) != s {
			t.Errorf("ParseForwardMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := datapath.ParseForwardMode("fast"); err == nil || !strings.Contains(err.Error(), "want xdp") {
		t.Errorf("ParseForwardMode(fast): %v", err)
	}
}
