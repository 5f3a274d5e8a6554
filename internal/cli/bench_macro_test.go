package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchMacroUsage: bad flags exit 2 before anything is set up, and
// --help teaches with examples.
func TestBenchMacroUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--rules", "0"},
		{"--rules", "1000000"},
		{"--sizes", "20"},
		{"--sizes", "9000"},
		{"--dut", "pf"},
		{"--duration", "1ms"},
		{"--rounds", "0"},
	} {
		var out, errb bytes.Buffer
		code := Main(append([]string{"bench", "macro"}, args...), &out, &errb)
		if code != 2 || !strings.HasPrefix(errb.String(), "xdpfw: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"bench", "macro", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, want := range []string{"xdpfw bench macro --rules", "--report", "iptables-nft", "xdp-drop", "docs/bench.md"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}
