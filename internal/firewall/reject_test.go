package firewall

import "testing"

func TestParseRejectRate(t *testing.T) {
	for in, want := range map[string]uint32{"1": 1, "100/s": 100, "20/sec": 20, "5/second": 5, "1000000/s": 1000000} {
		if got, err := ParseRejectRate(in); err != nil || got != want {
			t.Errorf("ParseRejectRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0/s", "-1/s", "1000001/s", "10/m", "x/s", "10/s/s"} {
		if got, err := ParseRejectRate(in); err == nil {
			t.Errorf("ParseRejectRate(%q) = %d, want an error", in, got)
		}
	}
}
