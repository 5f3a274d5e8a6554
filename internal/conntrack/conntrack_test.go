package conntrack

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestParseTimeouts(t *testing.T) {
	got, err := ParseTimeouts([]string{"tcp_established=3600", "udp=5"})
	if err != nil {
		t.Fatal(err)
	}
	var want Timeouts
	want[TimeoutTCPEstablished], want[TimeoutUDP] = 3600, 5
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
	eff := got.Effective()
	if eff[TimeoutTCPEstablished] != 3600 || eff[TimeoutTCPSynSent] != 120 || eff[TimeoutOther] != 600 {
		t.Errorf("effective %v", eff)
	}
	for _, bad := range []string{"tcp_established", "tcp=1", "udp=0", "udp=-1", "udp=1.5", "udp=99999999999"} {
		if _, err := ParseTimeouts([]string{bad}); err == nil || !strings.Contains(err.Error(), "--ct-timeout") {
			t.Errorf("%q: err %v, want a --ct-timeout error", bad, err)
		}
	}
}

// TestMirrorsHeader: the timeout classes, their defaults, the connection
// states and the counters are those of bpf/types.h and bpf/lib/ct.h.
func TestMirrorsHeader(t *testing.T) {
	types, err := os.ReadFile("../../bpf/types.h")
	if err != nil {
		t.Fatal(err)
	}
	ct, err := os.ReadFile("../../bpf/lib/ct.h")
	if err != nil {
		t.Fatal(err)
	}
	members := func(enum string) []string {
		body := regexp.MustCompile(`(?s)enum ` + enum + ` \{(.*?)\};`).FindStringSubmatch(string(types))
		if body == nil {
			t.Fatalf("enum %s not found", enum)
		}
		var out []string
		for _, m := range regexp.MustCompile(`(?m)^\s*(FW_[A-Z0-9_]+)`).FindAllStringSubmatch(body[1], -1) {
			out = append(out, m[1])
		}
		return out
	}
	lower := func(prefix string, names []string) []string {
		var out []string
		for _, n := range names {
			if s, ok := strings.CutPrefix(n, prefix); ok {
				out = append(out, strings.ToLower(s))
			}
		}
		return out
	}
	if got, want := lower("FW_CTT_", members("fw_ct_timeout")), append(TimeoutNames[:], "num"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("enum fw_ct_timeout %v, Go %v", got, want)
	}
	if got := lower("FW_CTS_", members("fw_ct_conn")); len(got) != int(NumStates)+1 {
		t.Errorf("enum fw_ct_conn %v, Go has %d states", got, NumStates)
	} else {
		for i := State(0); i < NumStates; i++ {
			if strings.ToUpper(got[i]) != i.String() {
				t.Errorf("state %d: C %s, Go %s", i, got[i], i)
			}
		}
	}
	if got := members("fw_ct_stat"); len(got) != NumStats+1 {
		t.Errorf("enum fw_ct_stat %v, Go %d counters", got, NumStats)
	}
	m := regexp.MustCompile(`(?s)fw_ct_default_timeout\[FW_CTT_NUM\] = \{\s*([0-9, ]+),\s*\}`).FindStringSubmatch(string(ct))
	if m == nil {
		t.Fatal("fw_ct_default_timeout not found in lib/ct.h")
	}
	var def []string
	for _, v := range DefaultTimeouts {
		def = append(def, strconv.FormatUint(uint64(v), 10))
	}
	if got := strings.Join(strings.Fields(strings.ReplaceAll(m[1], ",", " ")), ","); got != strings.Join(def, ",") {
		t.Errorf("default timeouts: C %s, Go %s", got, strings.Join(def, ","))
	}
}
