package bench

import (
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// sandbox locks the calling goroutine to its OS thread, moves that thread
// into a new network namespace (so the FIB answers the same for every
// measurement) and mounts a private bpffs on a temporary directory, dir.
// undo reverses all of it; call it on the same goroutine.
func sandbox(prefix string) (dir string, undo func(), err error) {
	runtime.LockOSThread()
	var steps []func()
	undo = func() {
		for i := len(steps) - 1; i >= 0; i-- {
			steps[i]()
		}
		runtime.UnlockOSThread()
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	orig, err := netns.Get()
	if err != nil {
		return "", nil, err
	}
	steps = append(steps, func() { orig.Close() })
	ns, err := netns.New() // also enters it, on this thread
	if err != nil {
		return "", nil, fmt.Errorf("creating a network namespace: %w", err)
	}
	steps = append(steps, func() { netns.Set(orig); ns.Close() })
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", nil, err
	}
	steps = append(steps, func() { os.RemoveAll(dir) })
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		return "", nil, fmt.Errorf("mounting a private bpffs: %w", err)
	}
	steps = append(steps, func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir, undo, nil
}
