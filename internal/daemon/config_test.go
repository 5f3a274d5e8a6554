package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
)

// TestExampleConfig: deploy/xdpfw.yaml parses and states exactly the
// defaults (so the documentation of every option is true).
func TestExampleConfig(t *testing.T) {
	c, err := LoadConfig(filepath.Join("..", "..", "deploy", "xdpfw.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := defaults()
	want.Interfaces = []Interface{{Name: "eth0", Mode: "auto"}}
	want.Sets = []string{}
	want.Conntrack.Timeouts = map[string]uint32{}
	want.path = c.path
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("deploy/xdpfw.yaml is not the defaults:\n got %+v\nwant %+v", *c, want)
	}
}

func TestConfigDefaultsAndDesired(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "xdpfw.yaml")
	rules := filepath.Join(dir, "r.conf")
	if err := os.WriteFile(rules, []byte("-P INPUT DROP\n-A INPUT -p tcp --dport 22 -j ACCEPT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(path, []byte("interfaces: [eth1, {name: eth2, mode: native}]\nrules: r.conf\n"+
		"conntrack: {timeouts: {udp: 5}, max: 1024, tcp_pickup: strict}\nreject: {rate: 10/s, burst: 3, global_rate: 50/s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Files(); !reflect.DeepEqual(got, []string{path, rules}) {
		t.Errorf("files %v", got)
	}
	d, err := c.desired()
	if err != nil {
		t.Fatal(err)
	}
	if want := []firewall.IfaceMode{{Name: "eth1", Mode: datapath.ModeAuto}, {Name: "eth2", Mode: datapath.ModeNative}}; !reflect.DeepEqual(d.Interfaces, want) {
		t.Errorf("interfaces %v", d.Interfaces)
	}
	o := d.Options
	if o.Malformed != "drop" || o.CTFull != "drop" || o.CTMax != 1024 || !o.CTTimeoutsSet || o.CTTimeouts[7] != 5 ||
		o.RejectRate != 10 || o.RejectBurst != 3 || o.RejectGlobalRate != 50 || o.CTTCPPickup != "strict" || len(d.Rules.Rules) != 1 {
		t.Errorf("desired %+v, %d rules", o, len(d.Rules.Rules))
	}
	if time.Duration(c.Conntrack.GCMax) != DefaultGCMax || c.Metrics.Listen != DefaultMetricsListen || !c.Watch {
		t.Errorf("defaults not filled: %+v", c)
	}
	// An empty metrics address turns metrics off.
	c, err = ParseConfig(path, []byte("interfaces: [eth1]\nmetrics: {listen: \"\"}\n"))
	if err != nil || c.Metrics.Listen != "" {
		t.Errorf("listen \"\": %+v %v", c.Metrics, err)
	}
}

// TestConfigErrors: every mistake is named at file:line:col.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"interfaces: [eth0]\nbogus: 1\n", "c.yaml:2: field bogus not found"},
		{"interfaces: [eth0\n", "c.yaml:"},
		{"interfaces: []\n", "c.yaml:1:13: interfaces: at least one interface is needed"},
		{"rules: x\n", "c.yaml:1:1: interfaces: at least one interface is needed"},
		{"interfaces:\n  - eth0\n  - {name: eth1, mode: turbo}\n", `c.yaml:3:24: interfaces.1.mode: `},
		{"interfaces: [eth0, eth0]\n", "c.yaml:1:20: interfaces.1: eth0 is named twice"},
		{"interfaces: [eth0]\nmalformed: maybe\n", `c.yaml:2:12: malformed: "maybe": want drop or accept`},
		{"interfaces: [eth0]\nconntrack:\n  full: x\n", `c.yaml:3:9: conntrack.full: "x": want drop or accept`},
		{"interfaces: [eth0]\nconntrack:\n  timeouts: {tcp_forever: 3}\n", "c.yaml:3:13: conntrack.timeouts: "},
		{"interfaces: [eth0]\nconntrack:\n  gc_max_interval: soon\n", `c.yaml:3: "soon" is not a duration`},
		{"interfaces: [eth0]\nconntrack:\n  gc_min_interval: 2m\n", "c.yaml:3:20: conntrack.gc_min_interval: longer than gc_max_interval (1m0s)"},
		{"interfaces: [eth0]\nreject:\n  rate: 5/h\n", `c.yaml:3:9: reject.rate: "5/h": the unit is per second`},
		{"interfaces: [eth0]\nreject: {burst: 0}\n", "c.yaml:2:17: reject.burst: 0: want 1 to"},
		{"interfaces: [eth0]\nreject: {global_rate: 0/s}\n", "c.yaml:2:23: reject.global_rate: "},
		{"interfaces: [eth0]\nconntrack: {tcp_pickup: lax}\n", `c.yaml:2:25: conntrack.tcp_pickup: "lax": want loose or strict`},
		{"interfaces: [eth0]\nmetrics: {listen: 9477}\n", `c.yaml:2:19: metrics.listen: "9477": want host:port`},
		{"interfaces: [eth0]\nlog: {level: loud}\n", `c.yaml:2:14: log.level: "loud": want debug`},
		{"interfaces: [eth0]\nrules: \"\"\n", "c.yaml:2:8: rules: no rule file"},
	} {
		_, err := ParseConfig("c.yaml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.src, err, tc.want)
		}
	}
}

func TestPacer(t *testing.T) {
	var p pacer
	lo, hi := time.Second, time.Minute
	steps := []struct {
		removed int
		want    time.Duration
	}{
		{0, 2 * time.Second}, {0, 4 * time.Second}, {10, 8 * time.Second}, // < 0.5 % of 10000: longer
		{100, 8 * time.Second},                          // between: kept
		{500, 4 * time.Second}, {9000, 2 * time.Second}, // >= 5 %: shorter
		{9000, time.Second}, {9000, time.Second}, // bounded below
	}
	for i, s := range steps {
		if got := p.next(s.removed, 10000, lo, hi); got != s.want {
			t.Fatalf("step %d (removed %d): %v, want %v", i, s.removed, got, s.want)
		}
	}
	for range 10 {
		p.next(0, 10000, lo, hi)
	}
	if p.cur != hi {
		t.Errorf("idle: %v, want the maximum %v", p.cur, hi)
	}
}

// TestConfigSkipUnsupported: a rule file with a nat section is an error
// unless skip_unsupported, which leaves its lines out and keeps them to
// report.
func TestConfigSkipUnsupported(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "xdpfw.yaml")
	src := "*nat\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n*filter\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n"
	if err := os.WriteFile(filepath.Join(dir, "r.v4"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, skip := range []bool{false, true} {
		c, err := ParseConfig(path, []byte(fmt.Sprintf("interfaces: [eth1]\nrules: r.v4\nskip_unsupported: %v\n", skip)))
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.desired()
		switch {
		case !skip && (err == nil || !strings.Contains(err.Error(), "table nat is not supported")):
			t.Errorf("without skip_unsupported: %v", err)
		case skip && (err != nil || len(d.Rules.Rules) != 1 || len(d.Rules.Skipped) != 1 || d.Rules.Skipped[0].Pos.Line != 2):
			t.Errorf("skip_unsupported: %v, %+v", err, d.Rules)
		}
	}
}
