package telemetry

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// TestPcapngReadBack writes events of two interfaces and both directions,
// cut at a snap length, and reads the file back with an independent
// reader (internal/packet's): every packet's bytes, original length,
// interface name, direction, time (to the nanosecond) and comment.
func TestPcapngReadBack(t *testing.T) {
	_, rs := testRules(t)
	var frames [][]byte
	for i, dst := range []string{"10.0.0.2", "2001:db8::2", "10.0.0.3"} {
		src := "10.0.0.1"
		if strings.Contains(dst, ":") {
			src = "2001:db8::1"
		}
		frames = append(frames, (&packet.Packet{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst),
			Proto: packet.ProtoUDP, SPort: 1000, DPort: uint16(53 + i), Payload: make([]byte, 10+90*i)}).Bytes())
	}
	const snap = 96
	var buf bytes.Buffer
	w, err := NewPcapngWriter(&buf, snap)
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	for i, fr := range frames {
		h := datapath.LogEventHeader{RuleId: 18, VerdictId: 18, Ifindex: uint32(2 + i%2), Hook: uint8(i / 2), Chain: uint8(2 * (i / 2))}
		e, err := Decode(record(t, h, fr, snap))
		if err != nil {
			t.Fatal(err)
		}
		e.Time = time.Unix(1700000000, int64(123456789+i)) // exact to the nanosecond
		if err := w.WriteEvent(&e, rs, names); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, err := packet.ReadCapture(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if len(recs) != len(events) {
		t.Fatalf("%d packets read back, %d written", len(recs), len(events))
	}
	for i, r := range recs {
		e := events[i]
		wantIf, wantFlags := []string{"eth0", "eth1", "eth0"}[i], uint32(1)
		if e.Hook == HookEgress {
			wantFlags = 2
		}
		if !bytes.Equal(r.Data, e.Data) || len(r.Data) != min(snap, len(frames[i])) || r.OrigLen != len(frames[i]) ||
			r.IfName != wantIf || r.Flags != wantFlags || !r.Time.Equal(e.Time) || r.Comment != e.Line(rs, names) {
			t.Errorf("packet %d read back as %d bytes (orig %d) on %q flags %d at %v, comment %q;\nwrote %d bytes (orig %d) on %s flags %d at %v, comment %q",
				i, len(r.Data), r.OrigLen, r.IfName, r.Flags, r.Time, r.Comment, len(e.Data), e.PktLen, wantIf, wantFlags, e.Time, e.Line(rs, names))
		}
	}
	if recs[0].Iface != recs[2].Iface || recs[0].Iface == recs[1].Iface {
		t.Errorf("interface ids %d %d %d: one description per interface", recs[0].Iface, recs[1].Iface, recs[2].Iface)
	}

	// tcpdump reads it too (skipped where it is not installed; CI has it).
	bin, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Skip("tcpdump not installed")
	}
	file := filepath.Join(t.TempDir(), "log.pcapng")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-r", file, "-nn", "-tt").CombinedOutput()
	if err != nil {
		t.Fatalf("tcpdump -r: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var pkts []string
	for _, l := range lines {
		if strings.HasPrefix(l, "1700000000.") {
			pkts = append(pkts, l)
		}
	}
	if len(pkts) != 3 || !strings.Contains(pkts[0], "10.0.0.1.1000 > 10.0.0.2.53") ||
		!strings.Contains(pkts[1], "2001:db8::1.1000 > 2001:db8::2.54") || !strings.Contains(pkts[2], "10.0.0.1.1000 > 10.0.0.3.55") {
		t.Errorf("tcpdump -r read:\n%s", out)
	}
}

// TestPcapngEmpty: a capture no packet was written to is still a pcapng
// file (a section and one interface, "none"), with no packets.
func TestPcapngEmpty(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewPcapngWriter(&buf, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, err := packet.ReadCapture(bytes.NewReader(buf.Bytes()))
	if err != nil || len(recs) != 0 {
		t.Fatalf("%d packets, %v", len(recs), err)
	}
}
