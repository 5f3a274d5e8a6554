package rules

import "testing"

// TestLimitSpelling checks -m limit against what iptables v1.8.9 makes of
// each spelling: the rule iptables-save prints for it (checked by hand in a
// namespace, with the nf_tables and the legacy back end), which xdpfw must
// print too, and the interval one token takes to come back.
func TestLimitSpelling(t *testing.T) {
	tests := []struct {
		in, save string
		interval uint64
		burst    uint32
	}{
		{"-m limit", "-m limit --limit 3/hour", 1200e9, 5},
		{"-m limit --limit 2/s", "-m limit --limit 2/sec", 500e6, 5},
		{"-m limit --limit 7/sec", "-m limit --limit 7/sec", 142857142, 5},
		{"-m limit --limit 60/min", "-m limit --limit 1/sec", 1e9, 5}, // iptables keeps the period only
		{"-m limit --limit 90/m", "-m limit --limit 90/min", 666666666, 5},
		{"-m limit --limit 3/H", "-m limit --limit 3/hour", 1200e9, 5},
		{"-m limit --limit 1/day --limit-burst 4", "-m limit --limit 1/day --limit-burst 4", 86400e9, 4},
		{"-m limit --limit 2/s --limit-burst 5", "-m limit --limit 2/sec", 500e6, 5},
		{"-m limit --limit-burst 10000 --limit 20/hour", "-m limit --limit 20/hour --limit-burst 10000", 180e9, 10000},
		{"-m limit --limit 10000/s", "-m limit --limit 10000/sec", 100e3, 5},
		{"-m limit --limit 5", "-m limit --limit 5/sec", 200e6, 5},
		{"-m limit --limit 61/minute", "-m limit --limit 61/min", 983606557, 5},
		{"-m limit --limit 1/Seco", "-m limit --limit 1/sec", 1e9, 5},
	}
	for _, tc := range tests {
		src := "-A INPUT -p icmp " + tc.in + " -j ACCEPT"
		rs, err := Parse("t", []byte(src), ParseOptions{})
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		r := rs.Rules[0]
		if want := "-A INPUT -p icmp " + tc.save + " -j ACCEPT"; r.String() != want {
			t.Errorf("%s: prints %q, iptables-save %q", src, r.String(), want)
		}
		if l := r.Match.Limit; l.IntervalNS() != tc.interval || l.Burst != tc.burst {
			t.Errorf("%s: interval %d burst %d, want %d and %d", src, l.IntervalNS(), l.Burst, tc.interval, tc.burst)
		}
		back, err := Parse("t", []byte(r.String()), ParseOptions{})
		if err != nil || back.Rules[0].String() != r.String() {
			t.Errorf("%s: does not read back: %v", r.String(), err)
		}
	}
}

// TestLimitLast: matches may come before -m limit and comments after it,
// as iptables-save prints a rule whose limit was written last.
func TestLimitLast(t *testing.T) {
	src := "-A INPUT -p tcp -m conntrack --ctstate NEW -m tcp --dport 22 --syn -m limit --limit 3/min --limit-burst 10 -m comment --comment ssh -j LOG --log-prefix \"ssh: \""
	rs, err := Parse("t", []byte(src), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `-A INPUT -p tcp -m conntrack --ctstate NEW --dport 22 --syn -m limit --limit 3/min --limit-burst 10 -m comment --comment ssh -j LOG --log-prefix "ssh: "`
	if got := rs.Rules[0].String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !rs.Rules[0].Budgeted() {
		t.Error("a -m limit rule has a bucket")
	}
}
