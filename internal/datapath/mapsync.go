package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// syncMap makes hash map m hold want: stale keys removed, new and changed
// entries written (written first: a lookup meets the old or the new value
// of a key that stays, never none). what names the map in errors, name a
// key.
func syncMap[K, V comparable](m *ebpf.Map, want map[K]V, what string, name func(K) string) error {
	var (
		k     K
		v     V
		stale []K
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		if w, ok := want[k]; !ok {
			stale = append(stale, k)
		} else if w == v {
			delete(want, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the %s: %w", what, err)
	}
	for k, v := range want {
		if err := m.Put(k, v); err != nil {
			return fmt.Errorf("%s: adding %s: %w", what, name(k), err)
		}
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("%s: removing %s: %w", what, name(k), err)
		}
	}
	return nil
}
