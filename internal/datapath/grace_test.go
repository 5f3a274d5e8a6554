package datapath

import "testing"

// TestGracePeriod: the wait works where membarrier may not (nohz_full),
// repeatedly, and leaves nothing open (TestMain checks descriptors).
func TestGracePeriod(t *testing.T) {
	for range 3 {
		if err := graceperiod(); err != nil {
			t.Fatal(err)
		}
	}
}
