package rules

import "testing"

// TestRecentSpelling: -m recent as iptables v1.8.9 saved each rule (checked
// in a namespace); xdpfw reads it and prints it back the same.
func TestRecentSpelling(t *testing.T) {
	v4, v6 := ParseOptions{Family: FamilyIPv4}, ParseOptions{Family: FamilyIPv6}
	tests := []struct {
		in   string
		opt  ParseOptions
		save string // "": as in
	}{
		{"-A INPUT -p tcp -m recent --set --name DEFAULT --mask 255.255.255.255 --rsource -j DROP", v4, ""},
		{"-A INPUT -p tcp -m recent --set --name SSH --mask 255.255.255.255 --rdest -j DROP", v4, ""},
		{"-A INPUT -p tcp -m recent --rcheck --seconds 60 --hitcount 4 --name SSH --mask 255.255.255.255 --rsource -j DROP", v4, ""},
		{"-A INPUT -p tcp -m recent --remove --name X --mask 255.255.255.255 --rsource -j DROP", v4, ""},
		{"-A INPUT -p tcp -m recent --set --name DEFAULT --mask 255.255.255.0 --rsource -j DROP", v4, ""},
		{"-A INPUT -p tcp -m recent ! --rcheck --seconds 10 --name DEFAULT --mask 255.255.255.255 --rsource -j DROP", v4, ""},
		{"-A INPUT -m recent --set --name SSH --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource -j ACCEPT", v6, ""},
		{"-A INPUT -m recent --set --name SSH --mask ffff:ffff:ffff:ffff:: --rsource -j ACCEPT", v6, ""},
		// native files: the family stays open without a mask
		{"-A INPUT -p tcp --dport 22 -m recent --update --seconds 60 --hitcount 4 --name SSH -j DROP", ParseOptions{},
			"-A INPUT -p tcp --dport 22 -m recent --update --seconds 60 --hitcount 4 --name SSH --rsource -j DROP"},
		{"-A INPUT -m recent --rcheck -j DROP", ParseOptions{}, "-A INPUT -m recent --rcheck --name DEFAULT --rsource -j DROP"},
	}
	for _, tc := range tests {
		rs, err := Parse("t", []byte(tc.in), tc.opt)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		want := tc.save
		if want == "" {
			want = tc.in
		}
		if got := rs.Rules[0].String(); got != want {
			t.Errorf("%s:\n  prints %s\n  want   %s", tc.in, got, want)
		}
		back, err := Parse("t", []byte(rs.Rules[0].String()), tc.opt)
		if err != nil || back.Rules[0].String() != want {
			t.Errorf("%s: does not read back (%v)", want, err)
		}
	}
}
