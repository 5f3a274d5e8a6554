package datapath_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// The header matches and -m conntrack's other tests, as counting rules
// (no -j) in iptables / ip6tables.
var (
	headerRules4 = []string{
		"-m length --length 35", "-m length ! --length 36:100", "-m length --length 0:40",
		"-m ttl --ttl-eq 64", "-m ttl ! --ttl-eq 64", "-m ttl --ttl-lt 64", "-m ttl --ttl-gt 64",
		"-m dscp --dscp 46", "-m dscp ! --dscp-class AF41", "-m tos --tos Minimize-Delay", "-m tos --tos 8",
		"-m tos ! --tos 0x02/0x03", "-m ecn --ecn-ip-ect 3", "-m ecn ! --ecn-ip-ect 0",
		"-p tcp -m ecn --ecn-tcp-ece", "-p tcp -m ecn --ecn-tcp-ece ! --ecn-tcp-cwr",
		"-m iprange --src-range 10.0.0.5-10.0.0.9", "-m iprange ! --src-range 10.0.0.5-10.0.0.9",
		"-m iprange --dst-range 10.201.0.0-10.201.0.2",
		"-m conntrack --ctstatus CONFIRMED", "-m conntrack ! --ctstatus CONFIRMED", "-m conntrack --ctdir ORIGINAL",
		"-m conntrack --ctproto udp", "-m conntrack ! --ctproto udp", "-m conntrack --ctstatus SEEN_REPLY",
		"-p tcp -m tcpmss --mss 1:1460", "-p tcp -m tcpmss ! --mss 536",
		"-m conntrack --ctstate NEW --ctorigsrc 10.0.0.4/31", "-m conntrack --ctstate NEW,ESTABLISHED --ctreplsrc 10.201.0.2",
		"-m conntrack --ctstate NEW ! --ctrepldst 10.0.0.8/30",
	}
	headerRules6 = []string{
		"-m length --length 55", "-m length --length 40:60", "-m hl --hl-eq 1", "-m hl --hl-lt 64", "-m hl ! --hl-eq 64",
		"-m hl --hl-gt 64", "-m dscp --dscp-class EF", "-m tos --tos 0x10/0x3f", "-m ecn --ecn-ip-ect 3",
		"-p tcp -m ecn ! --ecn-tcp-cwr",
		"-m iprange --src-range 2001:db8::ffff:ffff-2001:db8::1:0:5", "-m iprange ! --src-range fd00:201::-fd00:201::1",
		"-m conntrack --ctstatus CONFIRMED", "-m conntrack --ctproto tcp", "-p tcp -m tcpmss --mss 1440",
		"-m conntrack --ctstate NEW --ctorigdst fd00:201::2", "-m conntrack --ctstate NEW ! --ctorigsrc 2001:db8::/64",
		"-m rt", "-m rt --rt-type 0", "-m rt ! --rt-type 0 --rt-segsleft 1:3", "-m rt --rt-len 16", "-m rt ! --rt-len 16",
	}
)

// TestHeaderMatchesAgainstIptables sends crafted frames to a namespace
// whose iptables / ip6tables (legacy and nft back ends, where installed)
// hold the header matches as counting rules, and requires the reference
// matcher (which the data plane agrees with: TestDifferential,
// TestHeaderMatches) to match each packet with exactly the rules whose
// counters it moved. Each flow is new; some are sent twice, the second
// packet CONFIRMED.
func TestHeaderMatchesAgainstIptables(t *testing.T) {
	testutil.RequireRoot(t)
	for _, backend := range []string{"legacy", "nft"} {
		if _, err := exec.LookPath("iptables-" + backend); err != nil {
			t.Logf("iptables-%s not installed: skipped", backend)
			continue
		}
		t.Run(backend, func(t *testing.T) { iptablesOracle(t, backend) })
	}
}

func iptablesOracle(t *testing.T, backend string) {
	snd, rcv := testutil.NewNetNS(t), testutil.NewNetNS(t)
	a, b := testutil.VethPair(t, snd, "hs0", []string{"10.201.0.1/24", "fd00:201::1/64"},
		rcv, "hr0", []string{"10.201.0.2/24", "fd00:201::2/64"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(name string, args ...string) []byte {
		t.Helper()
		out, err := rcv.Exec(ctx, name, args...)
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return out
	}
	// any source is local traffic here: no reverse-path filter; ND and
	// the peer's MLD are accepted before the counting rules
	run("sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.hr0.rp_filter=0")
	run("ip", "route", "add", "default", "dev", "hr0")
	run("ip", "-6", "route", "add", "default", "dev", "hr0")
	// the answers (port unreachable, RST) to every source the probes use go
	// to the sender, which drops them: no failed neighbour resolution
	// comes back as a local ICMP error through INPUT
	for _, src := range append(oracleSrc4, oracleSrc6...) {
		run("ip", "neigh", "replace", src, "lladdr", a.MAC.String(), "dev", "hr0", "nud", "permanent")
	}
	ipt := map[rules.Family]string{rules.FamilyIPv4: "iptables-" + backend, rules.FamilyIPv6: "ip6tables-" + backend}
	run(ipt[rules.FamilyIPv6], "-A", "INPUT", "-p", "ipv6-icmp", "-j", "ACCEPT")
	sets := map[rules.Family]*rules.RuleSet{}
	for fam, list := range map[rules.Family][]string{rules.FamilyIPv4: headerRules4, rules.FamilyIPv6: headerRules6} {
		var text strings.Builder
		for _, r := range list {
			run(ipt[fam], append([]string{"-A", "INPUT"}, strings.Fields(r)...)...)
			fmt.Fprintf(&text, "-A INPUT %s -j LOG\n", r) // LOG: matches and goes on, as a counting rule
		}
		run(ipt[fam], "-A", "INPUT") // every packet: exactly one per probe
		rs, err := rules.Parse("oracle", []byte(text.String()), rules.ParseOptions{Family: fam})
		if err != nil {
			t.Fatal(err)
		}
		sets[fam] = rs
	}
	counters := func(fam rules.Family) []uint64 {
		out := run(ipt[fam]+"-save", "-c", "-t", "filter")
		var n []uint64
		for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
			line := sc.Text()
			if !strings.HasPrefix(line, "[") || !strings.Contains(line, "-A INPUT") || strings.Contains(line, "-j ACCEPT") {
				continue
			}
			pk, _, _ := strings.Cut(line[1:], ":")
			v, err := strconv.ParseUint(pk, 10, 64)
			if err != nil {
				t.Fatalf("counter of %q: %v", line, err)
			}
			n = append(n, v)
		}
		return n
	}

	r := rand.New(rand.NewPCG(15, 4))
	seen := map[string]bool{} // flows sent before: the next packet is CONFIRMED
	oracleLast := map[rules.Family]*packet.Packet{}
	matched, checked := 0, 0
	for i := range 160 {
		fam := rules.FamilyIPv4
		if i%2 == 1 {
			fam = rules.FamilyIPv6
		}
		p := oracleProbe(r, fam, a, b)
		if last := oracleLast[fam]; last != nil && last.Proto == packet.ProtoUDP && r.IntN(4) == 0 {
			p = last // a UDP flow again (its port unreachable changes no status; a TCP SYN's RST would)
		}
		oracleLast[fam] = p
		flow := fmt.Sprintf("%s %s %d %d %d", p.Src, p.Dst, p.Proto, p.SPort, p.DPort)
		before := counters(fam)
		sendRaw(t, snd, a.Index, p.Bytes())
		var after []uint64
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			after = counters(fam)
			if moved(before, after) || time.Now().After(deadline) {
				break // no rule may match: wait the deadline out then
			}
		}
		if all := len(after) - 1; after[all]-before[all] != 1 {
			out, _ := rcv.Exec(ctx, "ip", "-s", "link", "show", "hr0")
			t.Fatalf("%s: %d packets reached INPUT, want 1\n%s", p, after[all]-before[all], out)
		}
		ref := compile.RefPacketOf(p, "hr0")
		ref.CTState = compile.CTNew
		if seen[flow] {
			ref.CTInfo = compile.CTIConfirmed
		}
		seen[flow] = true
		rs := sets[fam]
		for k := range rs.Rules {
			got := after[k] != before[k]
			if want := compile.Matches(&rs.Rules[k].Match, ref); got != want {
				t.Errorf("%s: %q: iptables-%s says match %v, the reference matcher %v (packet %s, frame %x)",
					p, rs.Rules[k].Text, backend, got, want, p, p.Bytes())
			}
			checked++
			if got {
				matched++
			}
		}
	}
	if matched == 0 || matched == checked {
		t.Fatalf("%d of %d rule-packet pairs matched: the probes test nothing", matched, checked)
	}
	t.Logf("iptables-%s: %d rule-packet pairs agree, %d of them matches", backend, checked, matched)
}

func moved(a, b []uint64) bool {
	for i := range a {
		if i < len(b) && a[i] != b[i] {
			return true
		}
	}
	return len(a) != len(b)
}

// The sources of the probes: around the rules' address ranges.
var (
	oracleSrc4 = []string{"10.201.0.1", "10.0.0.4", "10.0.0.5", "10.0.0.7", "10.0.0.9", "10.0.0.10"}
	oracleSrc6 = []string{"fd00:201::1", "fd00:201::", "fd00:201::3", "2001:db8::ffff:fffe", "2001:db8::ffff:ffff",
		"2001:db8::1:0:0", "2001:db8::1:0:5", "2001:db8::1:0:6"}
)

// oracleProbe is a UDP or TCP packet from the sender a to the receiver b,
// with TTL, TOS, length and source drawn around the rules' edges.
func oracleProbe(r *rand.Rand, fam rules.Family, a, b testutil.VethEnd) *packet.Packet {
	var dst netip.Addr
	for _, pf := range b.Addrs {
		if pf.Addr().Is4() == (fam == rules.FamilyIPv4) {
			dst = pf.Addr()
		}
	}
	srcs := oracleSrc4
	if fam == rules.FamilyIPv6 {
		srcs = oracleSrc6
	}
	p := &packet.Packet{SrcMAC: [6]byte(a.MAC), DstMAC: [6]byte(b.MAC), Src: netip.MustParseAddr(pick(r, srcs)), Dst: dst,
		Proto: packet.ProtoUDP, SPort: uint16(20000 + r.IntN(40000)), DPort: 9, Payload: make([]byte, r.IntN(30))}
	if r.IntN(3) == 0 {
		p.Proto, p.DPort = packet.ProtoTCP, 9
		p.TCPFlags = packet.TCPSyn | pick(r, []uint8{0, 0x40, 0x80, 0xc0})
		mss := pick(r, []uint16{536, 1440, 1460, 1461})
		p.TCPOptions = pick(r, [][]byte{nil, {2, 4, byte(mss >> 8), byte(mss)}, {1, 1, 4, 2, 2, 4, byte(mss >> 8), byte(mss)},
			{0, 2, 4, byte(mss >> 8), byte(mss)}, {2, 3, byte(mss >> 8), byte(mss)}})
	}
	if fam == rules.FamilyIPv6 && r.IntN(3) == 0 { // a routing header, segments left 0: delivered
		h := packet.ExtHdr{Type: 43, Len: pick(r, []int{8, 16, 24}), Routing: []byte{pick(r, []uint8{0, 2, 4, 253}), 0}}
		p.IPv6Ext = pick(r, [][]packet.ExtHdr{{h}, {{Type: 0, Len: 8}, h}, {{Type: 60, Len: 8}, h, {Type: 43, Len: 8}}})
	}
	p.TTL = pick(r, []uint8{1, 2, 63, 64, 65, 128, 255})
	p.TOS = pick(r, []uint8{0, 1, 2, 3, 0x08, 0x09, 0x10, 0x12, 0x50, 0x88, 0xb8, 0xbb, 0xd0, uint8(r.UintN(256))})
	return p
}
