package packet

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tcpdumpPath returns the tcpdump binary, skipping the test when it is not
// installed (CI installs it).
func tcpdumpPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/tcpdump", "/usr/sbin/tcpdump"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("tcpdump not installed (CI installs it)")
	return ""
}

// frames returns the frames of pkts.
func frames(pkts []Packet) [][]byte {
	f := make([][]byte, len(pkts))
	for i := range pkts {
		f[i] = pkts[i].Bytes()
	}
	return f
}

// tcpdump writes frames to a pcap file, runs `tcpdump -r file -nn -e -vv` and
// returns each packet's text (first line plus indented continuation lines).
// -vv rather than -v: only -vv makes tcpdump verify UDP-over-IPv4 checksums.
func tcpdump(t *testing.T, frames [][]byte) []string {
	t.Helper()
	bin := tcpdumpPath(t)
	var buf bytes.Buffer
	if err := WritePcap(&buf, frames); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "built.pcap")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-r", file, "-nn", "-e", "-vv")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tcpdump: %v\n%s", err, stderr.String())
	}
	var texts []string
	for _, line := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			texts = append(texts, line)
		} else if len(texts) > 0 {
			texts[len(texts)-1] += "\n" + line
		}
	}
	if len(texts) != len(frames) {
		t.Fatalf("tcpdump printed %d packets, wrote %d\n%s", len(texts), len(frames), stdout.String())
	}
	return texts
}

// TestTcpdumpAgrees has tcpdump, an independent implementation, parse built
// packets and verify their checksums.
func TestTcpdumpAgrees(t *testing.T) {
	// tcpdump stops dissecting at the routing type the builder uses
	// (RoutingType, experimental), so routing headers only get their
	// length field checked, in TestTcpdumpRoutingHeader.
	var pkts []Packet
	for _, v := range vectors() {
		if !slices.ContainsFunc(v.pkt.IPv6Ext, func(e ExtHdr) bool { return e.Type == ProtoRouting }) {
			pkts = append(pkts, v.pkt)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 400 {
		pkts = append(pkts, randPacket(r, genOptions{wellFormed: true}))
	}
	correct := 0
	for i, text := range tcpdump(t, frames(pkts)) {
		if bad := complaint(text); bad != "" {
			t.Errorf("packet %d %v: tcpdump reports %q:\n%s", i, pkts[i], bad, text)
		}
		correct += strings.Count(text, "(correct)") + strings.Count(text, "sum ok")
	}
	if correct < 50 {
		t.Errorf("tcpdump verified only %d checksums", correct)
	}
	t.Logf("tcpdump parsed %d packets, %d checksums reported correct", len(pkts), correct)
}

// complaint returns the first sign of a malformed packet in tcpdump's text,
// or "".
func complaint(text string) string {
	for _, bad := range []string{"bad cksum", "bad udp cksum", "bad icmp6 cksum", "incorrect", "wrong",
		"truncated", "[|", "bad-len", "bad length", "invalid"} {
		if strings.Contains(text, bad) {
			return bad
		}
	}
	return ""
}

// TestTcpdumpDetectsCorruption is the negative control of
// TestTcpdumpAgrees: a flipped checksum byte must be reported.
func TestTcpdumpDetectsCorruption(t *testing.T) {
	cases := []struct {
		p   Packet
		off int // offset of a checksum byte in the frame
	}{
		{Packet{Src: v4a, Dst: v4b, Proto: ProtoTCP, SPort: 30001, DPort: 30002}, 14 + 10},
		{Packet{Src: v4a, Dst: v4b, Proto: ProtoTCP, SPort: 30001, DPort: 30002}, 14 + 20 + 16},
		{Packet{Src: v4a, Dst: v4b, Proto: ProtoUDP, SPort: 30001, DPort: 30002}, 14 + 20 + 6},
		{Packet{Src: v4a, Dst: v4b, Proto: ProtoICMP, ICMPType: 8}, 14 + 20 + 2},
		{Packet{Src: v6a, Dst: v6b, Proto: ProtoTCP, SPort: 30001, DPort: 30002}, 14 + 40 + 16},
		{Packet{Src: v6a, Dst: v6b, Proto: ProtoUDP, SPort: 30001, DPort: 30002}, 14 + 40 + 6},
		{Packet{Src: v6a, Dst: v6b, Proto: ProtoICMPv6, ICMPType: 128}, 14 + 40 + 2},
	}
	var fs [][]byte
	for _, c := range cases {
		f := c.p.Bytes()
		f[c.off] ^= 0x5a
		fs = append(fs, f)
	}
	for i, text := range tcpdump(t, fs) {
		if complaint(text) == "" {
			t.Errorf("corrupted %v (byte %d) not reported:\n%s", cases[i].p, cases[i].off, text)
		}
	}
}

// TestTcpdumpRoutingHeader checks the routing header's length field and type
// as tcpdump reads them.
func TestTcpdumpRoutingHeader(t *testing.T) {
	pkts := []Packet{
		{Src: v6a, Dst: v6b, Proto: ProtoUDP, IPv6Ext: []ExtHdr{{Type: ProtoRouting, Len: 24}}},
		{Src: v6a, Dst: v6b, Proto: ProtoUDP, IPv6Ext: []ExtHdr{{Type: ProtoDestOpts, Len: 16}, {Type: ProtoRouting}}},
	}
	want := []string{
		"RT6 (len=2, type=253, segleft=0",
		"DSTOPT (opt_type 0x1e: len=12) RT6 (len=0, type=253, segleft=0",
	}
	for i, text := range tcpdump(t, frames(pkts)) {
		if !strings.Contains(text, want[i]) {
			t.Errorf("packet %d %v: tcpdump output lacks %q:\n%s", i, pkts[i], want[i], text)
		}
	}
}

// TestTcpdumpRewrite has tcpdump write a nanosecond pcap of built frames
// (an independent writer) and reads it back with ReadFrames.
func TestTcpdumpRewrite(t *testing.T) {
	bin := tcpdumpPath(t)
	r := rand.New(rand.NewPCG(7, 8))
	var in [][]byte
	for range 30 {
		p := randPacket(r, genOptions{})
		in = append(in, p.Bytes())
	}
	var buf bytes.Buffer
	if err := WritePcap(&buf, in); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	if err := os.WriteFile(src, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "-r", src, "--time-stamp-precision=nano", "-w", dst).CombinedOutput(); err != nil {
		t.Fatalf("tcpdump: %v\n%s", err, out)
	}
	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var magic [4]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil || magic != [4]byte{0x4d, 0x3c, 0xb2, 0xa1} {
		t.Fatalf("tcpdump did not write a little-endian nanosecond file: % x %v", magic, err)
	}
	got, err := ReadFrames(f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, in, bytes.Equal) {
		t.Fatalf("read %d frames back, wrote %d; contents differ", len(got), len(in))
	}
}
