package rules

import "testing"

// TestRecentSpelling: -m recent as iptables v1.8.9 saved each rule (checked
// in a namespace); xdpfw reads it and prints it back the same.
func TestRecentSpelling(t *testing.T) {
	v4, v6 := ParseOptions{Family: FamilyIPv4}, ParseOptions{Family: FamilyIPv6}
	tests := []spelling{
		{"-A INPUT -p tcp -m recent --set --name DEFAULT --mask 255.255.255.255 --rsource -j DROP", v4, ""},
		{"-A INPUT -p tcp -m recent --set --name SSH --mask 255.255.255.255 --rdest -j DROP", v4, ""},
		{"-A INPUT -p tcp -m recent --rcheck --seconds 60 --hitcount 4 --name SSH --mask 255.255.255.255 --rsource -j DROP", v4, ""},
		{"-A INPUT -p tcp -m recent --remove --name X --mask 255.255.255.255 --rsource -j DROP", v4, ""},
		{"-A INPUT -p tcp -m recent --set --name DEFAULT --mask 255.255.255.0 --rsource -j DROP", v4, ""},
		{"-A INPUT -p tcp -m recent ! --rcheck --seconds 10 --name DEFAULT --mask 255.255.255.255 --rsource -j DROP", v4, ""},
		{"-A INPUT -m recent --set --name SSH --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource -j ACCEPT", v6, ""},
		{"-A INPUT -m recent --update --rttl --name DEFAULT --mask 255.255.255.255 --rsource -j DROP", v4, ""},
		{"-A INPUT -m recent ! --rcheck --rttl --name DEFAULT --mask 255.255.0.0 --rsource", v4, ""},
		{"-A INPUT -m recent --rcheck --rttl --name DEFAULT --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource", v6, ""},
		{"-A INPUT -m recent --rttl --rcheck --seconds 5 --rdest --name X --hitcount 2 -j DROP", v4,
			"-A INPUT -m recent --rcheck --seconds 5 --hitcount 2 --rttl --name X --mask 255.255.255.255 --rdest -j DROP"},
		{"-A INPUT -m recent --set --name SSH --mask ffff:ffff:ffff:ffff:: --rsource -j ACCEPT", v6, ""},
		// native files: the family stays open without a mask
		{"-A INPUT -p tcp --dport 22 -m recent --update --seconds 60 --hitcount 4 --name SSH -j DROP", ParseOptions{},
			"-A INPUT -p tcp --dport 22 -m recent --update --seconds 60 --hitcount 4 --name SSH --rsource -j DROP"},
		{"-A INPUT -m recent --rcheck -j DROP", ParseOptions{}, "-A INPUT -m recent --rcheck --name DEFAULT --rsource -j DROP"},
	}
	checkSpellings(t, tests)
}

// TestHashLimitSpelling: -m hashlimit as iptables v1.8.9 saved each rule
// (legacy and nft alike, checked in a namespace); xdpfw reads it and
// prints it back the same. The defaults iptables-save leaves out: burst 5
// is printed, the expiry only when it is not the printed rate's unit (a
// rate of 120/min prints as 2/sec with its minute's expiry), masks only
// when not the family's every bit.
func TestHashLimitSpelling(t *testing.T) {
	v6 := ParseOptions{Family: FamilyIPv6}
	tests := []spelling{
		{"-A INPUT -p tcp --dport 22 -m hashlimit --hashlimit-upto 3/min --hashlimit-burst 3 --hashlimit-mode srcip --hashlimit-name ssh -j ACCEPT", ParseOptions{}, ""},
		{"-A INPUT -m hashlimit --hashlimit-above 1/sec --hashlimit-burst 4 --hashlimit-mode srcip --hashlimit-name tor-or --hashlimit-htable-expire 60000 -j DROP", ParseOptions{}, ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 5 --hashlimit-name x -j ACCEPT", ParseOptions{},
			"-A INPUT -m hashlimit --hashlimit-upto 5/sec --hashlimit-burst 5 --hashlimit-name x -j ACCEPT"},
		{"-A INPUT -m hashlimit --hashlimit 7/hour --hashlimit-name y --hashlimit-mode srcip,dstport --hashlimit-srcmask 24 --hashlimit-htable-size 100 --hashlimit-htable-max 200 --hashlimit-htable-gcinterval 500 -j ACCEPT", ParseOptions{},
			"-A INPUT -m hashlimit --hashlimit-upto 7/hour --hashlimit-burst 5 --hashlimit-mode srcip,dstport --hashlimit-name y --hashlimit-htable-size 100 --hashlimit-htable-max 200 --hashlimit-htable-gcinterval 500 --hashlimit-srcmask 24 -j ACCEPT"},
		{"-A INPUT -m hashlimit --hashlimit-upto 2000/sec --hashlimit-name w --hashlimit-mode dstip,srcip,srcport,dstport --hashlimit-dstmask 16 -j ACCEPT", ParseOptions{},
			"-A INPUT -m hashlimit --hashlimit-upto 2000/sec --hashlimit-burst 5 --hashlimit-mode srcip,srcport,dstip,dstport --hashlimit-name w --hashlimit-dstmask 16 -j ACCEPT"},
		{"-A INPUT -m hashlimit --hashlimit-upto 120/min --hashlimit-name a -j ACCEPT", ParseOptions{},
			"-A INPUT -m hashlimit --hashlimit-upto 2/sec --hashlimit-burst 5 --hashlimit-name a --hashlimit-htable-expire 60000 -j ACCEPT"},
		{"-A INPUT -m hashlimit --hashlimit-upto 86400/day --hashlimit-name a -j ACCEPT", ParseOptions{},
			"-A INPUT -m hashlimit --hashlimit-upto 1/sec --hashlimit-burst 5 --hashlimit-name a --hashlimit-htable-expire 86400000 -j ACCEPT"},
		{"-A INPUT -s 10.0.0.0/8 -m hashlimit --hashlimit-upto 1/s --hashlimit-name d --hashlimit-htable-expire 10000 --hashlimit-srcmask 32 --hashlimit-htable-gcinterval 1000 -j ACCEPT", ParseOptions{},
			"-A INPUT -s 10.0.0.0/8 -m hashlimit --hashlimit-upto 1/sec --hashlimit-burst 5 --hashlimit-name d --hashlimit-htable-expire 10000 -j ACCEPT"},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/sec --hashlimit-burst 1000000 --hashlimit-name e -j ACCEPT", ParseOptions{}, ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/sec --hashlimit-burst 5 --hashlimit-mode srcip --hashlimit-name f --hashlimit-srcmask 0 -j ACCEPT", ParseOptions{}, ""},
		{"-A INPUT -m hashlimit ! --hashlimit-upto 1/s --hashlimit-name g -j ACCEPT", ParseOptions{},
			"-A INPUT -m hashlimit --hashlimit-above 1/sec --hashlimit-burst 5 --hashlimit-name g -j ACCEPT"},
		{"-A INPUT -m hashlimit ! --hashlimit-above 1/s --hashlimit-name g -j ACCEPT", ParseOptions{},
			"-A INPUT -m hashlimit --hashlimit-upto 1/sec --hashlimit-burst 5 --hashlimit-name g -j ACCEPT"},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/sec --hashlimit-burst 5 --hashlimit-mode srcip --hashlimit-name s --hashlimit-srcmask 64 -j ACCEPT", v6, ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/sec --hashlimit-name s --hashlimit-srcmask 128 -j ACCEPT", v6,
			"-A INPUT -6 -m hashlimit --hashlimit-upto 1/sec --hashlimit-burst 5 --hashlimit-name s -j ACCEPT"},
		// native files: the family stays open; a mask over 32 makes the rule IPv6
		{"-A INPUT -m hashlimit --hashlimit-upto 1/sec --hashlimit-burst 5 --hashlimit-name s --hashlimit-srcmask 32 -j ACCEPT", ParseOptions{}, ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/sec --hashlimit-burst 5 --hashlimit-name s --hashlimit-dstmask 48 -j ACCEPT", ParseOptions{}, ""},
	}
	checkSpellings(t, tests)
	rs, err := Parse("t", []byte("-A INPUT -m hashlimit --hashlimit-upto 1/sec --hashlimit-name s --hashlimit-dstmask 48 -j ACCEPT"), ParseOptions{})
	if err != nil || rs.Rules[0].Match.Family != FamilyIPv6 {
		t.Errorf("--hashlimit-dstmask 48 leaves the rule's family open (%v)", err)
	}
}

// TestConnLimitSpelling: -m connlimit as iptables v1.8.9 saved it (legacy
// and nft alike, checked in a namespace): the limit, the mask (the
// family's full one when none is given), the side; ! turns upto into above
// and above into upto.
func TestConnLimitSpelling(t *testing.T) {
	v6 := ParseOptions{Family: FamilyIPv6}
	tests := []spelling{
		{"-A INPUT -p tcp -m tcp --dport 80 --tcp-flags FIN,SYN,RST,ACK SYN -m connlimit --connlimit-above 2 --connlimit-mask 32 --connlimit-saddr -j REJECT --reject-with icmp-port-unreachable", ParseOptions{Family: FamilyIPv4},
			"-A INPUT -4 -p tcp --dport 80 --syn -m connlimit --connlimit-above 2 --connlimit-mask 32 --connlimit-saddr -j REJECT --reject-with icmp-port-unreachable"},
		{"-A INPUT -p tcp --syn --dport 80 -m connlimit --connlimit-above 2 -j REJECT", ParseOptions{},
			"-A INPUT -p tcp --dport 80 --syn -m connlimit --connlimit-above 2 --connlimit-saddr -j REJECT"},
		{"-A INPUT -m connlimit --connlimit-upto 5 --connlimit-mask 24 --connlimit-daddr -j ACCEPT", ParseOptions{}, ""},
		{"-A INPUT -m connlimit ! --connlimit-upto 5 --connlimit-mask 32 -j DROP", ParseOptions{}, "-A INPUT -m connlimit --connlimit-above 5 --connlimit-mask 32 --connlimit-saddr -j DROP"},
		{"-A INPUT -m connlimit ! --connlimit-above 7 --connlimit-saddr --connlimit-mask 0 -j ACCEPT", ParseOptions{},
			"-A INPUT -m connlimit --connlimit-upto 7 --connlimit-mask 0 --connlimit-saddr -j ACCEPT"},
		{"-A INPUT -m connlimit --connlimit-above 0 --connlimit-mask 32 --connlimit-saddr -j DROP", ParseOptions{}, ""},
		{"-A INPUT -m connlimit --connlimit-above 4294967295 --connlimit-mask 32 --connlimit-saddr -j DROP", ParseOptions{}, ""},
		{"-A INPUT -m connlimit --connlimit-above 3 -j DROP", v6, "-A INPUT -6 -m connlimit --connlimit-above 3 --connlimit-mask 128 --connlimit-saddr -j DROP"},
		{"-A INPUT -m connlimit --connlimit-above 3 --connlimit-mask 64 --connlimit-saddr -j DROP", v6, ""},
		// native files: the family stays open; a mask over 32 makes the rule IPv6
		{"-A INPUT -m connlimit --connlimit-above 3 --connlimit-saddr -j DROP", ParseOptions{}, ""},
		{"-A INPUT -m connlimit --connlimit-above 3 --connlimit-mask 48 --connlimit-saddr -j DROP", ParseOptions{}, ""},
	}
	checkSpellings(t, tests)
}

// spelling is a rule as iptables-save wrote it, the options it is read
// with, and what xdpfw prints ("": the same).
type spelling struct {
	in   string
	opt  ParseOptions
	save string
}

// checkSpellings reads each rule, requires it to print as save (or as
// written) and to read back the same.
func checkSpellings(t *testing.T, tests []spelling) {
	t.Helper()
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
