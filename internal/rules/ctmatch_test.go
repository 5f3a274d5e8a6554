package rules

import (
	"strings"
	"testing"
)

// Several -m conntrack and -m state matches in one rule: iptables v1.8.9
// (legacy and nf_tables) takes them and iptables-save prints each, in order;
// a packet must pass them all. xdpfw keeps their intersection, one
// -m conntrack, and refuses a pair whose intersection is not one test.
func TestSeveralCTMatches(t *testing.T) {
	tests := []struct{ in, want string }{
		// iptables-save: -m conntrack --ctstate NEW -m conntrack --ctstatus ASSURED
		{"-A INPUT -m conntrack --ctstate NEW -m conntrack --ctstatus ASSURED -j ACCEPT",
			"-m conntrack --ctstate NEW --ctstatus ASSURED -j ACCEPT"},
		// iptables-save: -m state --state NEW -m conntrack --ctstate NEW,ESTABLISHED
		{"-A INPUT -m state --state NEW -m conntrack --ctstate NEW,ESTABLISHED -j ACCEPT",
			"-m conntrack --ctstate NEW -j ACCEPT"},
		{"-A INPUT -m state --state NEW,RELATED -m state --state RELATED,ESTABLISHED -j ACCEPT",
			"-m conntrack --ctstate RELATED -j ACCEPT"},
		{"-A INPUT -m conntrack ! --ctstate NEW -m conntrack ! --ctstate INVALID -j ACCEPT",
			"-m conntrack ! --ctstate INVALID,NEW -j ACCEPT"},
		{"-A INPUT -m conntrack --ctstate NEW,ESTABLISHED -m state ! --state NEW -j ACCEPT",
			"-m conntrack --ctstate ESTABLISHED -j ACCEPT"},
		{"-A INPUT -m conntrack ! --ctstate NEW -m state --state NEW,ESTABLISHED -j ACCEPT",
			"-m conntrack --ctstate ESTABLISHED -j ACCEPT"},
		// SNAT beside a state: the one test implies the other.
		{"-A INPUT -m conntrack --ctstate NEW -m conntrack --ctstate NEW,SNAT -j ACCEPT",
			"-m conntrack --ctstate NEW -j ACCEPT"},
		{"-A INPUT -m conntrack ! --ctstate SNAT -m conntrack ! --ctstate DNAT -j ACCEPT",
			"-m conntrack ! --ctstate SNAT,DNAT -j ACCEPT"},
		{"-A INPUT -m conntrack --ctstatus ASSURED -m conntrack --ctstatus ASSURED,SEEN_REPLY -j ACCEPT",
			"-m conntrack --ctstatus ASSURED -j ACCEPT"},
		{"-A INPUT -m conntrack ! --ctstatus ASSURED -m conntrack ! --ctstatus CONFIRMED -j ACCEPT",
			"-m conntrack ! --ctstatus ASSURED,CONFIRMED -j ACCEPT"},
		{"-A INPUT -m conntrack --ctproto 6 -m conntrack ! --ctproto 17 -j ACCEPT",
			"-m conntrack --ctproto 6 -j ACCEPT"},
		{"-A INPUT -m conntrack --ctdir REPLY -m conntrack --ctdir REPLY --ctstate ESTABLISHED -j ACCEPT",
			"-m conntrack --ctstate ESTABLISHED --ctdir REPLY -j ACCEPT"},
		{"-A INPUT -m conntrack --ctorigsrc 10.0.0.1 -m conntrack --ctorigsrc 10.0.0.1/32 -j ACCEPT",
			"-m conntrack --ctorigsrc 10.0.0.1 -j ACCEPT"},
		// A match without a state test passes no packet without a
		// connection (the kernel: INVALID, UNTRACKED), so the state test
		// of the one -m conntrack leaves them out: beside --ctstatus in the
		// same match, iptables would let them through.
		{"-A INPUT -m conntrack --ctstate INVALID,NEW -m conntrack --ctstatus ASSURED -j ACCEPT",
			"-m conntrack --ctstate NEW --ctstatus ASSURED -j ACCEPT"},
		{"-A INPUT -m state ! --state ESTABLISHED -m conntrack --ctdir REPLY -j ACCEPT",
			"-m conntrack ! --ctstate INVALID,ESTABLISHED,UNTRACKED --ctdir REPLY -j ACCEPT"},
		{"-A INPUT -m conntrack --ctproto 6 -m state ! --state INVALID,UNTRACKED -j ACCEPT",
			"-m conntrack ! --ctstate INVALID,UNTRACKED --ctproto 6 -j ACCEPT"},
		// Every match has a state test that passes UNTRACKED: the kernel
		// passes such packets by their state tests alone, whatever
		// --ctproto says, and so does the one -m conntrack (as iptables
		// reads it too).
		{"-A INPUT -m state --state NEW,UNTRACKED -m conntrack --ctstate UNTRACKED,NEW --ctproto 6 -j ACCEPT",
			"-m conntrack --ctstate NEW,UNTRACKED --ctproto 6 -j ACCEPT"},
		{"-A INPUT -m conntrack ! --ctstate NEW --ctstatus ASSURED -m state ! --state ESTABLISHED -j ACCEPT",
			"-m conntrack ! --ctstate NEW,ESTABLISHED --ctstatus ASSURED -j ACCEPT"},
	}
	for _, tt := range tests {
		got := parseLine(t, tt.in, ParseOptions{})
		if got.Text != tt.want {
			t.Errorf("%q: Text = %q, want %q", tt.in, got.Text, tt.want)
		}
		rs, err := Parse("ct.rules", []byte("-A INPUT "+got.Text), ParseOptions{})
		if err != nil {
			t.Errorf("%q: its text does not parse back: %v", tt.in, err)
			continue
		}
		assertRoundTrip(t, rs)
	}
}

// TestSeveralCTMatchesRefused: the pairs whose intersection is no one test,
// and what iptables refuses too.
func TestSeveralCTMatchesRefused(t *testing.T) {
	tests := []struct{ in, col, msg string }{
		// iptables: conntrack: option "--ctstate" can only be used once.
		{"-A INPUT -m conntrack --ctstate NEW --ctstate INVALID -j ACCEPT", "1:37", "--ctstate given twice"},
		{"-A INPUT -m state --state NEW -m conntrack --ctstatus NONE --ctstatus ASSURED -j ACCEPT", "1:60", "once per -m conntrack"},
		{"-A INPUT -m conntrack --ctstate NEW -p tcp -m tcp --ctstate INVALID -j ACCEPT", "1:51", "--ctstate given twice"},
		// iptables: conntrack: At least one option is required
		{"-A INPUT -m conntrack --ctstate NEW -m conntrack -j ACCEPT", "1:37", "-m conntrack needs --ctstate"},
		{"-A INPUT -m state --state NEW -m state -j ACCEPT", "1:31", "-m state needs --state"},
		{"-A INPUT -m conntrack --ctstate NEW -m conntrack --ctstate SNAT -j ACCEPT", "1:50",
			"--ctstate in two -m conntrack or -m state matches of one rule: SNAT and DNAT are tested beside the state"},
		{"-A INPUT -m conntrack --ctstate NEW,DNAT -m conntrack ! --ctstate DNAT -j ACCEPT", "1:57", "SNAT and DNAT"},
		{"-A INPUT -m state --state NEW -m state --state ESTABLISHED -j ACCEPT", "1:40", "they share no state"},
		{"-A INPUT -m state --state NEW -m conntrack ! --ctstate NEW -j ACCEPT", "1:46", "they share no state"},
		{"-A INPUT -m conntrack --ctstatus ASSURED -m conntrack --ctstatus CONFIRMED -j ACCEPT", "1:55", "several status bits"},
		{"-A INPUT -m conntrack --ctstatus ASSURED -m conntrack ! --ctstatus CONFIRMED -j ACCEPT", "1:57", "several status bits"},
		{"-A INPUT -m conntrack --ctstatus ASSURED -m conntrack ! --ctstatus CONFIRMED -j ACCEPT", "1:57", "in a user chain the rule jumps to"},
		{"-A INPUT -m conntrack --ctproto 6 -m conntrack --ctproto 17 -j ACCEPT", "1:48", "one protocol, so the rule would match no packet"},
		{"-A INPUT -m conntrack ! --ctproto 6 -m conntrack ! --ctproto 17 -j ACCEPT", "1:52", "two negated protocols are no one --ctproto"},
		{"-A INPUT -m conntrack --ctdir REPLY -m conntrack --ctdir ORIGINAL -j ACCEPT", "1:50", "one direction"},
		{"-A INPUT -m conntrack --ctorigsrc 10.0.0.1 -m conntrack --ctorigsrc 10.0.0.0/8 -j ACCEPT", "1:57", "one address test per direction"},
		{"-A INPUT -m conntrack --ctstate INVALID -m conntrack --ctstatus NONE -j ACCEPT", "1:41", "match no packet"},
	}
	for _, tt := range tests {
		_, err := Parse("b", []byte(tt.in), ParseOptions{})
		if err == nil {
			t.Errorf("%q: accepted", tt.in)
			continue
		}
		if !strings.Contains(err.Error(), "b:"+tt.col+":") || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: %v, want at %s %q", tt.in, err, tt.col, tt.msg)
		}
	}
}

// TestCTIntersectionExact checks intersectCTState and intersectCTStatus
// against the kernel's test (xt_conntrack: the packet's state bits meet the
// mask, negated or not) on every state and status: where they answer, the
// one test matches exactly the packets both match.
func TestCTIntersectionExact(t *testing.T) {
	kernel := func(mask uint8, inv bool, bits uint8) bool { return (mask&bits != 0) != inv }
	var stateBits []uint8 // one state; under NAT (a connection's states) SNAT and DNAT
	for s := range uint8(5) {
		stateBits = append(stateBits, 1<<s)
		if 1<<s&(CTNew|CTEstablished|CTRelated) != 0 {
			stateBits = append(stateBits, 1<<s|CTSNAT, 1<<s|CTDNAT, 1<<s|CTSNAT|CTDNAT)
		}
	}
	answered := 0
	for a := range uint8(128) {
		for b := range uint8(128) {
			for _, inv := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				x, y := CTStateMatch{Mask: a, Invert: inv[0]}, CTStateMatch{Mask: b, Invert: inv[1]}
				r, why := intersectCTState(&x, y)
				some := false
				for _, s := range stateBits {
					both := kernel(a, inv[0], s) && kernel(b, inv[1], s)
					some = some || both
					if r != nil && kernel(r.Mask, r.Invert, s) != both {
						t.Fatalf("%+v and %+v: %+v differs on state bits %#x", x, y, *r, s)
					}
				}
				if r == nil && why == "" {
					t.Fatalf("%+v and %+v: no test and no reason", x, y)
				}
				if r != nil {
					answered++
				} else if !some && !strings.Contains(why, "no state") && !strings.Contains(why, "SNAT") {
					t.Fatalf("%+v and %+v: %s", x, y, why)
				}
			}
		}
	}
	for a := range uint8(16) {
		for b := range uint8(16) {
			for _, inv := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				x, y := CTStatusMatch{Mask: a, Invert: inv[0]}, CTStatusMatch{Mask: b, Invert: inv[1]}
				r, why := intersectCTStatus(&x, y)
				if r == nil {
					if why == "" {
						t.Fatalf("%+v and %+v: no test and no reason", x, y)
					}
					continue
				}
				for s := range uint8(16) {
					if kernel(r.Mask, r.Invert, s) != (kernel(a, inv[0], s) && kernel(b, inv[1], s)) {
						t.Fatalf("%+v and %+v: %+v differs on status %#x", x, y, *r, s)
					}
				}
			}
		}
	}
	if answered == 0 {
		t.Fatal("no state pair intersected")
	}
}
