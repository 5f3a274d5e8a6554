package firewall

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestAutoMaxRules: a first load given no --max-rules sizes the tables for
// the rule file (a quarter to spare, a power of two), not for the default
// that 20,000 rules do not fit; small rule sets keep the default.
func TestAutoMaxRules(t *testing.T) {
	for _, c := range []struct{ entries, nodes, slots, want int }{
		{1, 0, 0, compile.DefaultMaxEntries},
		{13000, 5000, 0, compile.DefaultMaxEntries},
		{14000, 5000, 0, 2 * compile.DefaultMaxEntries},
		{100000, 30000, 1200000, 131072},
		{100000, 30000, 2000000, 262144}, // leaf slots: 16 per entry of the size
	} {
		if got := SizeFor(c.entries, c.nodes, c.slots); got != c.want {
			t.Errorf("SizeFor(%d, %d, %d) = %d, want %d", c.entries, c.nodes, c.slots, got, c.want)
		}
	}
	var b strings.Builder
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&b, "-A INPUT -s 10.%d.%d.0/24 -p udp --dport %d -j ACCEPT\n", i>>8, i&255, 1+i%60000)
	}
	rs, err := rules.Parse("t.rules", []byte(b.String()), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := Paths{StateDir: t.TempDir()}
	if got := autoMaxRules(p, rs, 0); got != 32768 {
		t.Errorf("20,000 rules: --max-rules %d, want 32768", got)
	}
}
