package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchForwardUsage: bad flags exit 2 before anything is set up
// (xdpfw-nat says why it is not there yet), and --help teaches with
// examples.
func TestBenchForwardUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sizes", "20"}, "frame size 20"},
		{[]string{"--flows", "some"}, `traffic "some"`},
		{[]string{"--routes", "1000,0"}, "ascending"},
		{[]string{"--rules", "0"}, "0 rules"},
		{[]string{"--config", "pf"}, `configuration "pf"`},
		{[]string{"--config", "xdpfw-nat"}, "xdpfw's own NAT is not built yet"},
		{[]string{"--duration", "1ms"}, "--duration"},
		{[]string{"--rounds", "0"}, "round"},
	} {
		var out, errb bytes.Buffer
		code := Main(append([]string{"bench", "forward"}, c.args...), &out, &errb)
		if code != 2 || !strings.HasPrefix(errb.String(), "xdpfw: ") || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", c.args, code, errb.String(), c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"bench", "forward", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, want := range []string{"xdpfw bench forward --quick", "--report", "iptables", "nftables", "xdpfw-kmasq", "xdp-fib", "docs/bench.md"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}
