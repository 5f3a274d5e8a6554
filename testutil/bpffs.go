package testutil

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BPFFS mounts a fresh, private bpffs instance (`mount -t bpf bpf DIR`, mode
// 0700) at a new temporary directory and returns the directory. Pins made
// there are invisible to /sys/fs/bpf and to other tests. The filesystem is
// unmounted (lazily, if busy) in t.Cleanup, before the directory is removed.
func BPFFS(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mounting bpffs at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmounting bpffs at %s: %v", dir, err)
			}
		}
	})
	return dir
}
