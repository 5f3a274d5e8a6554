package rules

import (
	"strings"
	"testing"
)

// TestHeaderMatchSpelling reads the header matches and -m conntrack's
// other options as people write them and checks the canonical text: what
// iptables-save v1.8.9 printed for the same rule (checked by hand in a
// namespace), which reads back to the same rule.
func TestHeaderMatchSpelling(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"-m iprange --src-range 10.0.0.1-10.0.0.9", "-m iprange --src-range 10.0.0.1-10.0.0.9"},
		{"-m iprange ! --src-range 10.0.0.1-10.0.0.9 ! --dst-range 10.1.0.0-10.2.0.0",
			"-m iprange ! --src-range 10.0.0.1-10.0.0.9 ! --dst-range 10.1.0.0-10.2.0.0"},
		{"-m iprange --src-range 10.0.0.5", "-m iprange --src-range 10.0.0.5-10.0.0.5"},
		// an IPv4-mapped IPv6 address is an IPv6 address, as ip6tables reads
		// it (found by TestIptablesDifferential, seed 16: ip6tables-save
		// printed the range and xdpfw refused it as mixing families)
		{"-m iprange --dst-range ::-::ffff:255.255.255.255", "-m iprange --dst-range ::-::ffff:255.255.255.255"},
		{"-m iprange --src-range ::ffff:10.0.0.1-::ffff:10.0.0.9", "-m iprange --src-range ::ffff:10.0.0.1-::ffff:10.0.0.9"},
		{"-m iprange --src-range 10.0.0.9-10.0.0.1", "-m iprange --src-range 10.0.0.9-10.0.0.1"},
		{"-m iprange --src-range 2001:db8::1-2001:db8::ff:1 ! --dst-range ::-::ffff",
			"-m iprange --src-range 2001:db8::1-2001:db8::ff:1 ! --dst-range ::-::ffff"},
		{"-m length --length 100", "-m length --length 100"},
		{"-m length ! --length 100:200", "-m length ! --length 100:200"},
		{"-m length --length :200", "-m length --length 0:200"},
		{"-m length --length 200:", "-m length --length 200:65535"},
		{"-m length --length 300:100", "-m length --length 300:100"},
		{"-m length --length 0x40", "-m length --length 64"},
		{"-4 -m ttl --ttl-eq 64", "-m ttl --ttl-eq 64"},
		{"-m ttl ! --ttl-eq 64", "-m ttl ! --ttl-eq 64"},
		{"-m ttl --ttl-lt 5", "-m ttl --ttl-lt 5"},
		{"-m ttl --ttl-gt 5", "-m ttl --ttl-gt 5"},
		{"-m hl --hl-eq 64", "-m hl --hl-eq 64"},
		{"-m hl ! --hl-eq 64", "-m hl ! --hl-eq 64"},
		{"-m hl --hl-lt 2", "-m hl --hl-lt 2"},
		{"-m dscp --dscp 10", "-m dscp --dscp 0x0a"},
		{"-m dscp ! --dscp-class AF41", "-m dscp ! --dscp 0x22"},
		{"-m dscp --dscp-class ef", "-m dscp --dscp 0x2e"},
		{"-m dscp --dscp 0x2e", "-m dscp --dscp 0x2e"},
		{"-m tos --tos Minimize-Delay", "-m tos --tos 0x10/0x3f"},
		{"-m tos --tos 0x10/0x1c", "-m tos --tos 0x10/0x1c"},
		{"-m tos ! --tos 8", "-m tos ! --tos 0x08/0xff"},
		{"-m ecn --ecn-ip-ect 1", "-m ecn --ecn-ip-ect 1"},
		{"-p tcp -m ecn --ecn-tcp-cwr ! --ecn-tcp-ece", "-p tcp -m ecn ! --ecn-tcp-ece --ecn-tcp-cwr"},
		{"-p tcp -m ecn ! --ecn-ip-ect 3 --ecn-tcp-ece", "-p tcp -m ecn --ecn-tcp-ece ! --ecn-ip-ect 3"},
		{"-p tcp -m tcpmss --mss 1:500", "-p tcp -m tcpmss --mss 1:500"},
		{"-p tcp -m tcpmss ! --mss 1460", "-p tcp -m tcpmss ! --mss 1460"},
		{"-p tcp -m tcpmss --mss 536:", "-p tcp -m tcpmss --mss 536:65535"},
		{"-p tcp -m tcpmss --mss :500", "-p tcp -m tcpmss --mss 0:500"},
		{"-p tcp -m tcp -m tcpmss --mss 0x10", "-p tcp -m tcpmss --mss 16"},
		{"-m rt", "-m rt"},
		{"-m rt --rt-type 0 --rt-segsleft 2:5 --rt-len 3", "-m rt --rt-type 0 --rt-segsleft 2:5 --rt-len 3"},
		{"-m rt ! --rt-len 0 ! --rt-segsleft 1 ! --rt-type 2", "-m rt ! --rt-type 2 ! --rt-segsleft 1 ! --rt-len 0"},
		{"-m rt --rt-segsleft :5", "-m rt --rt-segsleft 0:5"},
		{"-m rt --rt-segsleft 5:", "-m rt --rt-segsleft 5:4294967295"},
		{"-m rt --rt-segsleft 0:4294967295", "-m rt"},
		{"-m rt --rt-len 0x10 --rt-type 256", "-m rt --rt-type 256 --rt-len 16"},
		{"-m conntrack --ctproto tcp", "-m conntrack --ctproto 6"},
		{"-m conntrack ! --ctproto udp", "-m conntrack ! --ctproto 17"},
		{"-m conntrack --ctdir ORIGINAL", "-m conntrack --ctdir ORIGINAL"},
		{"-m conntrack ! --ctorigsrc 10.0.0.0/8 --ctorigdst 1.2.3.4 --ctreplsrc 1.1.1.1/32 ! --ctrepldst 2.2.2.0/24",
			"-m conntrack ! --ctorigsrc 10.0.0.0/8 --ctorigdst 1.2.3.4 --ctreplsrc 1.1.1.1 ! --ctrepldst 2.2.2.0/24"},
		{"-m conntrack --ctstate NEW --ctorigdst 2001:db8::/32", "-m conntrack --ctstate NEW --ctorigdst 2001:db8::/32"},
		{"-m conntrack --ctdir reply", "-m conntrack --ctdir REPLY"},
		{"-m conntrack ! --ctstatus ASSURED,SEEN_REPLY,CONFIRMED,EXPECTED,NONE",
			"-m conntrack ! --ctstatus EXPECTED,SEEN_REPLY,ASSURED,CONFIRMED"},
		{"-m conntrack --ctstatus NONE", "-m conntrack --ctstatus NONE"},
		{"-m conntrack --ctstatus NONE,ASSURED", "-m conntrack --ctstatus ASSURED"},
		{"-m conntrack --ctstate DNAT,SNAT,INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED",
			"-m conntrack --ctstate INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT"},
		{"-m conntrack --ctstatus NONE --ctproto 6 --ctstate NEW --ctdir REPLY",
			"-m conntrack --ctstate NEW --ctproto 6 --ctstatus NONE --ctdir REPLY"},
	} {
		rs, err := Parse("t", []byte("-A INPUT "+tc.in+" -j ACCEPT\n"), ParseOptions{})
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got, want := rs.Rules[0].Text, tc.want+" -j ACCEPT"; got != want {
			t.Errorf("%s: canonical %q, want %q", tc.in, got, want)
		}
		assertRoundTrip(t, rs)
	}
}

// TestHeaderMatchErrors checks what iptables refuses, and what a rule of
// the other family cannot say, with the reason.
func TestHeaderMatchErrors(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{"-m ttl ! --ttl-lt 5", "--ttl-lt cannot be negated"},
		{"-m ttl ! --ttl-gt 5", "--ttl-gt cannot be negated"},
		{"-m ttl --ttl-eq 5 --ttl-lt 3", "--ttl-eq and --ttl-lt both given"},
		{"-m ttl --ttl-eq 256", "not a TTL (0-255)"},
		{"-6 -m ttl --ttl-eq 5", "-m ttl (IPv4 TTL) conflicts with -6"},
		{"-s 10.0.0.1 -m hl --hl-eq 5", "-m hl (IPv6 hop limit) conflicts with"},
		{"--ttl-eq 5", "--ttl-eq needs -m ttl before it"},
		{"-m hl --ttl-eq 5", "--ttl-eq needs -m ttl before it"},
		{"-m ttl", "-m ttl needs --ttl-eq, --ttl-lt or --ttl-gt"},
		{"-m dscp --dscp 64", "not a DSCP value (0-63)"},
		{"-m dscp --dscp-class XX", "unknown DSCP class"},
		{"-m dscp --dscp 1 --dscp-class EF", "--dscp and --dscp-class both given"},
		{"-m tos --tos 0x100", "not a TOS value"},
		{"-m tos --tos 1/0x1ff", "not a TOS mask (0-255)"},
		{"-m ecn --ecn-ip-ect 4", "not an ECN codepoint (0-3)"},
		{"-m ecn --ecn-tcp-cwr", "--ecn-tcp-cwr needs -p tcp"},
		{"! -p tcp -m ecn --ecn-tcp-ece", "--ecn-tcp-ece needs -p tcp"},
		{"-m length --length 65536", "not a length (0-65535)"},
		{"-m length --length 1:x", "not a length"},
		{"-m iprange --src-range 10.0.0.1-2001:db8::1", "the range mixes IPv4 and IPv6"},
		{"-m iprange --src-range 10.0.0.1-", "not an IP address"},
		{"-m iprange --src-range 10.0.0.0/8", "not an IP address"},
		{"-6 -m iprange --src-range 10.0.0.1-10.0.0.2", "conflicts with -6"},
		{"-4 -m iprange --src-range ::ffff:10.0.0.1-::ffff:10.0.0.2", "conflicts with -4"},
		{"-m iprange --src-range 10.0.0.1-::ffff:10.0.0.2", "the range mixes IPv4 and IPv6"},
		{"-s 2001:db8::1 -m iprange --dst-range 10.0.0.1-10.0.0.2", "conflicts with"},
		{"-m tcpmss --mss 5", "-m tcpmss needs -p tcp"},
		{"-p tcp -m tcpmss --mss 600:500", "invalid range"},
		{"-p tcp -m tcpmss --mss 70000", "not an MSS (0-65535)"},
		{"-p tcp -m tcpmss", "-m tcpmss needs --mss"},
		{"-m rt --rt-type 0 --rt-0-res", "--rt-0-res is not supported"},
		{"-m rt --rt-type 0 --rt-0-addrs ::1", "--rt-0-addrs is not supported"},
		{"-m rt --rt-type 0 --rt-0-not-strict", "--rt-0-not-strict is not supported"},
		{"-4 -m rt", "-m rt (IPv6 routing header) conflicts with -4"},
		{"--rt-type 0", "--rt-type needs -m rt before it"},
		{"-m rt --rt-type x", "not a number"},
		{"-m conntrack ! --ctdir REPLY", "--ctdir cannot be negated"},
		{"-m conntrack --ctdir BOTH", "not a direction"},
		{"-m conntrack --ctstatus FOO", "unknown connection status"},
		{"-m state --state SNAT", "-m state has no SNAT"},
	} {
		_, err := Parse("t", []byte("-A INPUT "+tc.in+" -j ACCEPT\n"), ParseOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want %q", tc.in, err, tc.msg)
		}
	}
}
