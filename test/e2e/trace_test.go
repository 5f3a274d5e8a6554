package e2e

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestTraceCommand runs described packets and a pcap's packets through the
// loaded program with `xdpfw trace` and checks the verdict and the deciding
// rule (number and text) or policy it names; traced packets count like
// real ones.
func TestTraceCommand(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	const (
		refused = "-A INPUT -s 198.51.100.0/24 -j DROP"
		ssh     = "-A INPUT -p tcp --dport 22 -j ACCEPT"
		dns     = "-A INPUT -p udp --dport 53 -j ACCEPT"
	)
	f := newFW(t, l.srv)
	if r := f.run("trace", "-p", "tcp", "--dport", "22"); r.code != 1 || !strings.Contains(r.stderr, "not loaded") {
		t.Errorf("trace with nothing loaded: want exit status 1 saying xdpfw is not loaded: %s", r)
	}
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "trace.rules", "-P INPUT DROP", refused, ssh, dns))

	type want struct {
		verdict string
		num     int    // rule number, 0 for the policy
		rule    string // rule text, "" for the policy
	}
	byPolicy := func(verdict string) want { return want{verdict: verdict} }
	for _, c := range []struct {
		name string
		args []string
		want want
	}{
		{"ssh", []string{"-p", "tcp", "--src", l.cli4, "--dst", l.srv4, "--dport", "22"}, want{"XDP_PASS", 2, ssh}},
		{"ssh over IPv6", []string{"-p", "tcp", "--src", l.cli6, "--dst", l.srv6, "--dport", "22"}, want{"XDP_PASS", 2, ssh}},
		{"ssh from the refused network", []string{"-p", "tcp", "--src", "198.51.100.7", "--dst", l.srv4, "--dport", "22"}, want{"XDP_DROP", 1, refused}},
		{"dns", []string{"-p", "udp", "--src", l.cli4, "--dst", l.srv4, "--dport", "53"}, want{"XDP_PASS", 3, dns}},
		{"tcp 8080", []string{"-p", "tcp", "--src", l.cli4, "--dst", l.srv4, "--dport", "8080"}, byPolicy("XDP_DROP")},
		{"tcp 53", []string{"-p", "tcp", "--src", l.cli6, "--dst", l.srv6, "--dport", "53"}, byPolicy("XDP_DROP")},
		{"ping", []string{"-p", "icmp", "--src", l.cli4, "--dst", l.srv4}, byPolicy("XDP_DROP")},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			tr, r := f.trace(c.args...)
			wantTrace(t, tr, r, c.want.verdict, c.want.num, c.want.rule)
		})
	}

	// A pcap of two frames: one accepted by the ssh rule, one dropped by the policy.
	frame := func(proto uint8, dport uint16) []byte {
		p := packet.Packet{
			SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 0x02}, DstMAC: [6]byte{0x02, 0, 0, 0, 0, 0x01},
			Src: netip.MustParseAddr(l.cli4), Dst: netip.MustParseAddr(l.srv4),
			Proto: proto, SPort: 40000, DPort: dport, TCPFlags: packet.TCPSyn,
			Payload: []byte("e2e"),
		}
		return p.Bytes()
	}
	var pcap bytes.Buffer
	if err := packet.WritePcap(&pcap, [][]byte{frame(packet.ProtoTCP, 22), frame(packet.ProtoUDP, 9999)}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "two.pcap")
	if err := os.WriteFile(path, pcap.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, r := f.trace("--pcap", path)
	if len(tr) != 2 {
		t.Fatalf("trace --pcap of 2 frames gave %d results: %s", len(tr), r)
	}
	wantTrace(t, tr[:1], r, "XDP_PASS", 2, ssh)
	wantTrace(t, tr[1:], r, "XDP_DROP", 0, "")

	// Plain output names the verdict and the rule.
	r = f.mustRun("trace", "-p", "tcp", "--src", l.cli4, "--dst", l.srv4, "--dport", "22")
	if want := "-> XDP_PASS by INPUT rule 2: " + ssh + "\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("trace output lacks %q: %s", want, r)
	}

	// Traces count nothing (they change no live state): no real TCP
	// reached the server, so the rules counted nothing.
	list := f.list()
	if got := list.rule(t, ssh).Counters.Packets; got != 0 {
		t.Errorf("rule %q counted %d packets, want none (traces count nothing):\n%s", ssh, got, list.raw)
	}
	if got := list.rule(t, refused).Counters.Packets; got != 0 {
		t.Errorf("rule %q counted %d packets, want none:\n%s", refused, got, list.raw)
	}
}

// wantTrace checks that tr is one result with verdict, decided in INPUT by
// rule num (text rule) or, when num is 0, by the policy.
func wantTrace(t *testing.T, tr []traceResult, r result, verdict string, num int, rule string) {
	t.Helper()
	if len(tr) != 1 {
		t.Fatalf("want one result: %s", r)
	}
	got := tr[0]
	switch {
	case got.Verdict != verdict, got.Chain != "INPUT":
		t.Errorf("want %s in INPUT: %s", verdict, r)
	case num == 0 && (!got.Policy || got.Rule != "" || got.RuleNum != 0):
		t.Errorf("want the verdict of the INPUT policy: %s", r)
	case num != 0 && (got.Policy || got.RuleNum != num || got.Rule != rule):
		t.Errorf("want the verdict of rule %d %q: %s", num, rule, r)
	}
}
