package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/bench"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestBenchForwardUsage: bad flags exit 2 before anything is set up, and
// --help teaches with examples.
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
	for _, want := range []string{"xdpfw bench forward --quick", "--report", "iptables", "nftables", "xdpfw-kmasq", "xdp-fwd", "xdpfw-nat", "docs/bench.md"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestBenchForwardQuick runs the command end to end (--quick, one flow,
// --json): it exits 0 and its JSON shows every configuration checked, with
// each packet the router took in forwarded as intended and proven by the
// path it took, and measured once. No timing is judged.
func TestBenchForwardQuick(t *testing.T) {
	testutil.RequireRoot(t)
	var out, errb bytes.Buffer
	if code := Main([]string{"bench", "forward", "--quick", "--flows", "one", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	var res bench.ForwardResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(res.Checks) != len(res.Configs) || len(res.Points) != len(res.Configs) || len(res.Configs) < 2 {
		t.Fatalf("%d configurations, %d checks, %d points", len(res.Configs), len(res.Checks), len(res.Points))
	}
	nat := false
	for _, c := range res.Checks {
		if c.Delivered == 0 || c.Forwarded != c.Delivered || c.Proof == "" {
			t.Errorf("check %+v", c)
		}
		// xdpfw's own MASQUERADE: its flow bound before, every packet
		// forwarded translated by xdpfw's fast path
		if c.Config == bench.FwdXdpfwNAT {
			nat = true
			if c.Established != 1 || c.Proof != "xdpfw's forwarding reason xdp" {
				t.Errorf("check %+v: want 1 flow established and the fast path", c)
			}
		}
	}
	if !nat {
		t.Errorf("configurations %v: no %s", res.Configs, bench.FwdXdpfwNAT)
	}
	for _, p := range res.Points {
		if len(p.Runs) != 1 || p.Runs[0].Forwarded != p.Runs[0].Delivered || p.Runs[0].Delivered == 0 {
			t.Errorf("point %+v", p)
		}
	}
	if res.Command != "xdpfw bench forward --flows one --quick" {
		t.Errorf("command %q", res.Command)
	}
}
