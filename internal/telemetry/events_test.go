package telemetry

import (
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// record builds a ring-buffer record as the data plane writes it: the
// header, then the frame's first snap bytes, then the unused rest of the
// fixed-size record.
func record(t *testing.T, h datapath.LogEventHeader, frame []byte, snap int) []byte {
	t.Helper()
	n := min(len(frame), snap)
	h.PktLen, h.CapLen = uint32(len(frame)), uint16(n)
	raw, err := binary.Append(nil, binary.NativeEndian, &h)
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw, frame[:n]...)
	return append(raw, make([]byte, snap-n)...)
}

func testRules(t *testing.T) (*rules.RuleSet, Rules) {
	t.Helper()
	rs, err := rules.Parse("t.rules", []byte(`-A INPUT -p tcp --dport 22 -j LOG --log-prefix "ssh: " --log-level info
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -j DROP --log
-A OUTPUT -j LOG
-A INPUT -j NFLOG --nflog-group 5 --nflog-prefix "nf: " --nflog-size 20
-A INPUT -j ULOG --ulog-prefix "u: "
-A INPUT -j NFLOG --nflog-size 0
`), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rs, IndexRules(rs, []uint32{16, 17, 18, 19, 20, 21, 22})
}

var names = IfName(func(i uint32) string { return map[uint32]string{2: "eth0", 3: "eth1"}[i] })

func TestDecodeAndFormat(t *testing.T) {
	_, rs := testRules(t)
	syn := (&packet.Packet{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: packet.ProtoTCP,
		SPort: 40000, DPort: 22, TCPFlags: packet.TCPSyn, TTL: 63, Payload: make([]byte, 100)}).Bytes()
	udp6 := (&packet.Packet{Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8::2"),
		Proto: packet.ProtoUDP, SPort: 53, DPort: 5353, VLANs: []uint16{10}, PCPs: []uint8{5}, Payload: make([]byte, 300)}).Bytes()
	for _, c := range []struct {
		name  string
		h     datapath.LogEventHeader
		frame []byte
		snap  int
		line  string
		check func(t *testing.T, r Record)
	}{
		{"LOG rule, then ACCEPT", datapath.LogEventHeader{TsNs: 1, RuleId: 16, VerdictId: 17, Ifindex: 2, Hook: 0, Chain: 0,
			Action: uint8(compile.ActAccept), Reason: uint8(compile.ReasonRuleAccept), Flags: flagTarget}, syn, 128,
			"ssh: IN=eth0 OUT= MAC=02:00:00:00:00:02:02:00:00:00:00:01:08:00 SRC=10.0.0.1 DST=10.0.0.2 LEN=140 TOS=0x00 PREC=0x00 TTL=63 ID=7238 PROTO=TCP SPT=40000 DPT=22 WINDOW=64240 RES=0x00 SYN URGP=0 CHAIN=INPUT RULE=1 VERDICT=ACCEPT BY=2",
			func(t *testing.T, r Record) {
				if r.Rule != 1 || r.Prefix != "ssh: " || r.Level != "info" || !r.ByLOG || r.By != "2" || *r.DPort != 22 || r.TCPFlags != "SYN" || r.CapLen != 128 || r.Len != len(syn) {
					t.Errorf("record %+v", r)
				}
			}},
		{"--log on DROP, cut at 60 bytes, conntrack full", datapath.LogEventHeader{RuleId: 18, VerdictId: 18, Ifindex: 3,
			Action: uint8(compile.ActDrop), Reason: uint8(compile.ReasonCTFull), Ctstate: compile.CTNew}, udp6, 60,
			"IN=eth1 OUT= MAC=00:00:00:00:00:00:00:00:00:00:00:00:81:00 VLAN=10 PCP=5 SRC=2001:0db8:0000:0000:0000:0000:0000:0001 DST=2001:0db8:0000:0000:0000:0000:0000:0002 LEN=348 TC=0 HOPLIMIT=64 FLOWLBL=0 PROTO=UDP CHAIN=INPUT RULE=3 VERDICT=DROP REASON=conntrack-full",
			func(t *testing.T, r Record) {
				if r.Level != DefaultLevel || r.ByLOG || r.Len != len(udp6) || r.CapLen != 60 || r.SPort != nil || r.Src != "2001:db8::1" || r.VLANs[0] != 10 || len(r.PCPs) != 1 || r.PCPs[0] != 5 {
					t.Errorf("record %+v", r)
				}
			}},
		{"egress, unknown interface, snap 0, policy, trace", datapath.LogEventHeader{RuleId: 19, VerdictId: compile.PolicyID(2, false),
			Ifindex: 9, Hook: 1, Chain: 2, Action: uint8(compile.ActAccept), Reason: uint8(compile.ReasonPolicyAccept), Flags: flagTarget | flagTrace},
			syn, 0, "IN= OUT=if9 FRAMELEN=154 CHAIN=OUTPUT RULE=1 VERDICT=ACCEPT BY=policy TRACE",
			func(t *testing.T, r Record) {
				if r.Out != "if9" || r.In != "" || r.Hook != "egress" || r.By != "policy" || r.Data != "" || !r.Trace {
					t.Errorf("record %+v", r)
				}
			}},
		{"NFLOG: group and prefix", datapath.LogEventHeader{RuleId: 20, VerdictId: compile.PolicyID(0, false), Ifindex: 2,
			Action: uint8(compile.ActDrop), Reason: uint8(compile.ReasonPolicyDrop), Flags: flagTarget}, syn, 128,
			"nf: IN=eth0 OUT= MAC=02:00:00:00:00:02:02:00:00:00:00:01:08:00 SRC=10.0.0.1 DST=10.0.0.2 LEN=140 TOS=0x00 PREC=0x00 TTL=63 ID=7238 PROTO=TCP SPT=40000 DPT=22 WINDOW=64240 RES=0x00 SYN URGP=0 CHAIN=INPUT RULE=4 NFLOG=5 VERDICT=DROP BY=policy",
			func(t *testing.T, r Record) {
				if r.Target != "NFLOG" || r.Group == nil || *r.Group != 5 || r.Prefix != "nf: " || r.Level != DefaultLevel {
					t.Errorf("record %+v", r)
				}
			}},
		{"ULOG: default group 1", datapath.LogEventHeader{RuleId: 21, VerdictId: compile.PolicyID(0, false), Ifindex: 2,
			Action: uint8(compile.ActDrop), Reason: uint8(compile.ReasonPolicyDrop), Flags: flagTarget}, syn, 0,
			"u: IN=eth0 OUT= FRAMELEN=154 CHAIN=INPUT RULE=5 ULOG=1 VERDICT=DROP BY=policy",
			func(t *testing.T, r Record) {
				if r.Target != "ULOG" || *r.Group != 1 {
					t.Errorf("record %+v", r)
				}
			}},
		{"a rule no longer in force", datapath.LogEventHeader{RuleId: 99, VerdictId: 99, Ifindex: 2, Action: uint8(compile.ActDrop)}, syn, 128,
			"IN=eth0 OUT= MAC=02:00:00:00:00:02:02:00:00:00:00:01:08:00 SRC=10.0.0.1 DST=10.0.0.2 LEN=140 TOS=0x00 PREC=0x00 TTL=63 ID=7238 PROTO=TCP SPT=40000 DPT=22 WINDOW=64240 RES=0x00 SYN URGP=0 CHAIN=INPUT RULEID=99 VERDICT=DROP",
			nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := time.Now()
			e, err := Decode(record(t, c.h, c.frame, c.snap))
			if err != nil {
				t.Fatal(err)
			}
			if n := min(len(c.frame), c.snap); string(e.Data) != string(c.frame[:n]) || e.PktLen != len(c.frame) {
				t.Errorf("data %x (len %d), want the frame's first %d bytes", e.Data, e.PktLen, n)
			}
			// ts 1 ns after boot: long before now
			if c.h.TsNs == 1 && !e.Time.Before(before.Add(-time.Second)) {
				t.Errorf("time %v for a time stamp at boot", e.Time)
			}
			if got := e.Line(rs, names); got != c.line {
				t.Errorf("line\n got %s\nwant %s", got, c.line)
			}
			r := e.Record(rs, names)
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var back Record
			if err := json.Unmarshal(b, &back); err != nil || back.RuleID != c.h.RuleId || back.Verdict != compile.Action(c.h.Action).String() {
				t.Errorf("JSON %s: %v", b, err)
			}
			if c.check != nil {
				c.check(t, back)
			}
		})
	}
	if _, err := Decode(make([]byte, 10)); err == nil || !strings.Contains(err.Error(), "shorter than its") {
		t.Errorf("short record: %v", err)
	}
	bad := record(t, datapath.LogEventHeader{}, syn, 20)
	binary.NativeEndian.PutUint16(bad[24:], 200) // cap_len beyond the record
	if _, err := Decode(bad); err == nil {
		t.Error("a record claiming more bytes than it holds decoded")
	}
}

// TestTrimNFLOGSize: --nflog-size cuts what an event of its rule keeps
// (--nflog-size 0: nothing, as the kernel's); other rules' events keep the
// snap length.
func TestTrimNFLOGSize(t *testing.T) {
	_, rs := testRules(t)
	frame := make([]byte, 100)
	for _, c := range []struct {
		rule uint32
		want int
	}{{20, 20}, {16, 64}, {21, 64}, {99, 64}, {22, 0}} {
		e, err := Decode(record(t, datapath.LogEventHeader{RuleId: c.rule}, frame, 64))
		if err != nil {
			t.Fatal(err)
		}
		rs.Trim(&e)
		if len(e.Data) != c.want || e.PktLen != 100 {
			t.Errorf("rule %d: %d bytes kept (frame %d), want %d", c.rule, len(e.Data), e.PktLen, c.want)
		}
	}
}

// TestEventTime: an event stamped now (CLOCK_MONOTONIC, as
// bpf_ktime_get_ns) gets the wall-clock time of now.
func TestEventTime(t *testing.T) {
	now := time.Now()
	e := monoToWall(monoNow(t))
	if d := e.Sub(now); d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Errorf("time %v is %v off now", e, d)
	}
}

func monoNow(t *testing.T) uint64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// TestPPPoELogLine: a LOG event of a packet that came in a PPPoE session
// frame shows the IP packet's addresses and length (LEN= is read past the
// session header, not at the Ethernet header's end).
func TestPPPoELogLine(t *testing.T) {
	p := &packet.Packet{PPPoE: true, PPPoESID: 7, Src: netip.MustParseAddr("198.51.100.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		Proto: packet.ProtoUDP, SPort: 53, DPort: 5353, TTL: 60, Payload: make([]byte, 100)}
	frame := p.Bytes()
	var b strings.Builder
	writePacket(&b, frame, len(frame), 0)
	if want := " SRC=198.51.100.1 DST=10.0.0.2 LEN=128 TOS=0x00 PREC=0x00 TTL=60 ID=7238 PROTO=UDP SPT=53 DPT=5353 LEN=108"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("LOG line %q, want it to end %q", b.String(), want)
	}
}

// TestLogFlagsLine: LOG's flags add to a line what the kernel's nf_log
// prints (nf_log_syslog.c): --log-macdecode's MACSRC= MACDST= MACPROTO=
// (the EtherType behind the tags) instead of MAC=, --log-ip-options' OPT
// (hex) of the IPv4 options after the fragment bits, --log-tcp-sequence's
// SEQ= ACK= after the ports, --log-tcp-options' OPT (hex) after the flags
// (behind IPv6 extension headers too); --log-uid nothing.
func TestLogFlagsLine(t *testing.T) {
	v4 := &packet.Packet{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, VLANs: []uint16{5},
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: packet.ProtoTCP, SPort: 4000, DPort: 22,
		TCPFlags: packet.TCPSyn, TTL: 64, IPv4Options: []byte{0x94, 4, 0, 0}, TCPOptions: []byte{2, 4, 5, 0xb4}}
	v6 := &packet.Packet{Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8::2"), Proto: packet.ProtoTCP,
		SPort: 4000, DPort: 22, TCPFlags: packet.TCPAck, TTL: 64, IPv6Ext: []packet.ExtHdr{{Type: 0, Len: 8}},
		TCPOptions: []byte{1, 1, 4, 2}}
	all := rules.LogTCPSeq | rules.LogTCPOpt | rules.LogIPOpt | rules.LogUID | rules.LogMACDecode
	for _, c := range []struct {
		p     *packet.Packet
		flags rules.LogFlags
		want  string
	}{
		{v4, 0, " MAC=02:00:00:00:00:02:02:00:00:00:00:01:81:00 VLAN=5 PCP=0 SRC=10.0.0.1 DST=10.0.0.2 LEN=48 TOS=0x00 PREC=0x00 TTL=64 ID=7238 PROTO=TCP SPT=4000 DPT=22 WINDOW=64240 RES=0x00 SYN URGP=0"},
		{v4, rules.LogUID, " MAC=02:00:00:00:00:02:02:00:00:00:00:01:81:00 VLAN=5 PCP=0 SRC=10.0.0.1 DST=10.0.0.2 LEN=48 TOS=0x00 PREC=0x00 TTL=64 ID=7238 PROTO=TCP SPT=4000 DPT=22 WINDOW=64240 RES=0x00 SYN URGP=0"},
		{v4, all, " MACSRC=02:00:00:00:00:01 MACDST=02:00:00:00:00:02 MACPROTO=0800 VLAN=5 PCP=0 SRC=10.0.0.1 DST=10.0.0.2 LEN=48 TOS=0x00 PREC=0x00 TTL=64 ID=7238 OPT (94040000) " +
			"PROTO=TCP SPT=4000 DPT=22 SEQ=287454020 ACK=1432778632 WINDOW=64240 RES=0x00 SYN URGP=0 OPT (020405B4)"},
		{v6, rules.LogTCPSeq | rules.LogTCPOpt, " MAC=00:00:00:00:00:00:00:00:00:00:00:00:86:dd SRC=2001:0db8:0000:0000:0000:0000:0000:0001 DST=2001:0db8:0000:0000:0000:0000:0000:0002 LEN=72 TC=0 HOPLIMIT=64 FLOWLBL=0 " +
			"PROTO=TCP SPT=4000 DPT=22 SEQ=287454020 ACK=1432778632 WINDOW=64240 RES=0x00 ACK URGP=0 OPT (01010402)"},
	} {
		frame := c.p.Bytes()
		var b strings.Builder
		writePacket(&b, frame, len(frame), c.flags)
		if b.String() != c.want {
			t.Errorf("flags %#x:\n got %q\nwant %q", c.flags, b.String(), c.want)
		}
	}
}
