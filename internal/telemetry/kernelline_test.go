package telemetry

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestLineAsKernel compares the packet fields of a LOG line with the
// kernel's (v6.18 nf_log, `-j LOG --log-prefix "LFK: "` in a netns, read
// with dmesg) for the same frames, captured with tcpdump on the logging
// interface: everything from MAC= on, the kernel's trailing space dropped.
func TestLineAsKernel(t *testing.T) {
	for _, c := range []struct{ name, frame, kernel string }{
		{"IPv4 ICMP echo request",
			"0200000000020200000000010800450000549d0940004001898b0a0900010a0900020800b54e1aa3000153340a6b00000000039b08000000" +
				"0000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031323334353637",
			"LFK: IN=lfvb OUT= MAC=02:00:00:00:00:02:02:00:00:00:00:01:08:00 SRC=10.9.0.1 DST=10.9.0.2 LEN=84 TOS=0x00 PREC=0x00 TTL=64 ID=40201 DF PROTO=ICMP TYPE=8 CODE=0 ID=6819 SEQ=1 "},
		{"IPv4 UDP",
			"02000000000202000000000108004500001fb44f40004011726a0a0900010a090002e34214e9000b143168690a",
			"LFK: IN=lfvb OUT= MAC=02:00:00:00:00:02:02:00:00:00:00:01:08:00 SRC=10.9.0.1 DST=10.9.0.2 LEN=31 TOS=0x00 PREC=0x00 TTL=64 ID=46159 DF PROTO=UDP SPT=58178 DPT=5353 LEN=11 "},
		{"IPv4 TCP SYN",
			"02000000000202000000000108004500003ceee04000400637c70a0900010a090002c13c08aecc801d1000000000a002faf014430000020405b4" +
				"0402080a6ae29e89000000000103030a",
			"LFK: IN=lfvb OUT= MAC=02:00:00:00:00:02:02:00:00:00:00:01:08:00 SRC=10.9.0.1 DST=10.9.0.2 LEN=60 TOS=0x00 PREC=0x00 TTL=64 ID=61152 DF PROTO=TCP SPT=49468 DPT=2222 WINDOW=64240 RES=0x00 SYN URGP=0 "},
		{"IPv6 TCP SYN",
			"02000000000202000000000186dd6001683c0028064020010db800090000000000000000000120010db8000900000000000000000002a0c608ae" +
				"b4c37e0c00000000a002fd205bb50000020405a00402080a73d7be2a000000000103030a",
			"LFK6: IN=lfvb OUT= MAC=02:00:00:00:00:02:02:00:00:00:00:01:86:dd SRC=2001:0db8:0009:0000:0000:0000:0000:0001 DST=2001:0db8:0009:0000:0000:0000:0000:0002 LEN=80 TC=0 HOPLIMIT=64 FLOWLBL=92220 PROTO=TCP SPT=41158 DPT=2222 WINDOW=64800 RES=0x00 SYN URGP=0 "},
	} {
		frame, err := hex.DecodeString(c.frame)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		writePacket(&b, frame, len(frame), 0)
		_, want, _ := strings.Cut(strings.TrimSuffix(c.kernel, " "), " OUT= ")
		if got := strings.TrimPrefix(b.String(), " "); got != want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
	}
}
