package datapath

import (
	"os"
	"strings"
	"testing"
)

// TestActiveMirrorsHeader: activeValue is FW_ACTIVE, and every value the
// control plane writes stays in one byte (a write is never seen torn).
func TestActiveMirrorsHeader(t *testing.T) {
	h, err := os.ReadFile("../../bpf/types.h")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(h), "#define FW_ACTIVE(gen, delta) (1 + (gen) + 2 * (delta))") {
		t.Error("FW_ACTIVE changed; update activeValue and activeState")
	}
	for gen := uint32(0); gen < 2; gen++ {
		for delta := uint32(0); delta < 3; delta++ {
			v := activeValue(gen, delta)
			if v == 0 || v > 0xff {
				t.Errorf("FW_ACTIVE(%d, %d) = %d: not in one byte, or 'none'", gen, delta, v)
			}
			a := decodeActive(v)
			if a.gen != gen || a.delta != delta {
				t.Errorf("FW_ACTIVE(%d, %d) = %d decodes as %+v", gen, delta, v, a)
			}
		}
	}
}
