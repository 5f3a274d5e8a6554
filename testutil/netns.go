package testutil

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NetNSPrefix starts the name of every namespace NewNetNS creates, so leaked
// ones are recognisable.
const NetNSPrefix = "xdpfwt-"

// netnsDir is where named network namespaces are bind-mounted (the
// directory `ip netns` uses).
const netnsDir = "/run/netns"

// NetNS is a named network namespace created by NewNetNS.
type NetNS struct {
	Name   string         // name under /run/netns, usable with `ip netns exec`
	Handle netns.NsHandle // open handle to the namespace, closed in cleanup
}

// namespaceSysctls are written in every new namespace: IPv6 on, and no
// duplicate address detection so addresses are usable at once.
var namespaceSysctls = map[string]string{
	"net/ipv6/conf/all/disable_ipv6":     "0",
	"net/ipv6/conf/default/disable_ipv6": "0",
	"net/ipv6/conf/all/accept_dad":       "0",
	"net/ipv6/conf/default/accept_dad":   "0",
}

// NewNetNS creates a named network namespace "xdpfwt-<short random>" with lo
// up, IPv6 enabled and DAD off (net.ipv6.conf.{all,default}.disable_ipv6=0,
// accept_dad=0), and removes it in t.Cleanup. It does not change the network
// namespace of the calling thread.
func NewNetNS(t testing.TB) *NetNS {
	t.Helper()
	RequireRoot(t)

	var (
		n   *NetNS
		err error
	)
	for range 5 { // retry on the unlikely name collision
		name := fmt.Sprintf("%s%08x", NetNSPrefix, rand.Uint32())
		n, err = createNamed(name)
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		t.Fatalf("creating network namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Handle.Close(); err != nil {
			t.Errorf("closing handle of netns %s: %v", n.Name, err)
		}
		if err := netns.DeleteNamed(n.Name); err != nil {
			t.Errorf("deleting netns %s: %v", n.Name, err)
		}
	})

	if err := setLinkUp(n, "lo"); err != nil {
		t.Fatalf("netns %s: %v", n.Name, err)
	}
	err = n.Do(func() error {
		for key, val := range namespaceSysctls {
			if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(val), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(key, "/", "."), val, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("netns %s: %v", n.Name, err)
	}
	return n
}

// createNamed creates the named namespace on a dedicated, locked OS thread
// (netns.NewNamed switches the calling thread into the new namespace) and
// switches that thread back. If switching back fails the thread stays
// locked and the runtime discards it when the goroutine exits, so no other
// goroutine ever runs in the wrong namespace.
func createNamed(name string) (*NetNS, error) {
	type result struct {
		n   *NetNS
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("getting current netns: %w", err)}
			return
		}
		defer orig.Close()

		h, err := netns.NewNamed(name)
		restoreErr := netns.Set(orig)
		if restoreErr == nil {
			runtime.UnlockOSThread()
		}
		switch {
		case err != nil:
			if !errors.Is(err, os.ErrExist) {
				// NewNamed may leave the (unmounted) file behind.
				_ = os.Remove(filepath.Join(netnsDir, name))
			}
			err = fmt.Errorf("netns.NewNamed(%q): %w", name, err)
		case restoreErr != nil:
			h.Close()
			_ = netns.DeleteNamed(name)
			err = fmt.Errorf("switching back to the original netns: %w", restoreErr)
		}
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{n: &NetNS{Name: name, Handle: h}}
	}()
	r := <-done
	return r.n, r.err
}

// setLinkUp sets the named link of namespace n up.
func setLinkUp(n *NetNS, link string) error {
	h, err := netlink.NewHandleAt(n.Handle)
	if err != nil {
		return fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		return fmt.Errorf("finding %s: %w", link, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("setting %s up: %w", link, err)
	}
	return nil
}

// Do runs fn with the calling goroutine's OS thread switched into the
// namespace (runtime.LockOSThread, setns, then restore and unlock) and
// returns fn's error, or an error when switching fails. Goroutines that fn
// starts run on other threads, in the original namespace.
//
// If switching back fails, the thread stays locked to the calling goroutine
// (and is discarded when that goroutine exits) and Do returns an error.
func (n *NetNS) Do(fn func() error) (err error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("getting current netns: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(n.Handle); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering netns %s: %w", n.Name, err)
	}
	defer func() {
		if rerr := netns.Set(orig); rerr != nil {
			err = errors.Join(err, fmt.Errorf("leaving netns %s (thread stays locked): %w", n.Name, rerr))
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}

// Exec runs a command inside the namespace (`ip netns exec NAME name
// args...`) and returns its combined output and error; the error names the
// command and wraps the *exec.ExitError on failure.
func (n *NetNS) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	argv := append([]string{"netns", "exec", n.Name, name}, args...)
	out, err := exec.CommandContext(ctx, "ip", argv...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ip %s: %w", strings.Join(argv, " "), err)
	}
	return out, nil
}

// String returns the namespace name.
func (n *NetNS) String() string {
	return n.Name
}
