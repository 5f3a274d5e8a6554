package testutil

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// requirePing fails the test when ping is not installed.
func requirePing(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ping"); err != nil {
		t.Fatalf("ping not found (install iputils-ping): %v", err)
	}
}

// netnsList returns the output of `ip netns list`.
func netnsList(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v\n%s", err, out)
	}
	return string(out)
}

// TestVethPairPing creates two namespaces joined by a veth pair with IPv4
// and IPv6 addresses, pings across in both families and directions, and
// checks that cleanup removed both namespaces.
func TestVethPairPing(t *testing.T) {
	RequireRoot(t)
	requirePing(t)
	var names []string
	t.Run("create", func(t *testing.T) {
		a, b := NewNetNS(t), NewNetNS(t)
		names = []string{a.Name, b.Name}
		for _, n := range names {
			if !strings.HasPrefix(n, NetNSPrefix) || len(n) != len(NetNSPrefix)+8 {
				t.Errorf("namespace name %q, want %s<8 hex digits>", n, NetNSPrefix)
			}
		}
		if a.Name == b.Name {
			t.Fatalf("two namespaces share the name %s", a.Name)
		}
		if list := netnsList(t); !strings.Contains(list, a.Name) || !strings.Contains(list, b.Name) {
			t.Fatalf("ip netns list does not show %v:\n%s", names, list)
		}

		ea, eb := VethPair(t,
			a, "xa0", []string{"10.200.1.1/24", "fd00:200:1::1/64"},
			b, "xb0", []string{"10.200.1.2/24", "fd00:200:1::2/64"})
		for _, e := range []VethEnd{ea, eb} {
			if e.Index <= 0 || len(e.MAC) != 6 || len(e.Addrs) != 2 {
				t.Errorf("bad end %+v", e)
			}
			out, err := e.NS.Exec(context.Background(), "ip", "-o", "link", "show", "dev", e.Name)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.HasPrefix(string(out), strconv.Itoa(e.Index)+": "+e.Name+"@") {
				t.Errorf("ip link in %s: %s, want index %d", e.NS, out, e.Index)
			}
			if !strings.Contains(strings.ToLower(string(out)), e.MAC.String()) {
				t.Errorf("ip link in %s: %s, want MAC %s", e.NS, out, e.MAC)
			}
		}
		if ea.Addrs[0].String() != "10.200.1.1/24" {
			t.Errorf("address %v, want the host address kept", ea.Addrs[0])
		}

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, c := range []struct {
			from *NetNS
			to   string
		}{
			{a, "10.200.1.2"}, {a, "fd00:200:1::2"},
			{b, "10.200.1.1"}, {b, "fd00:200:1::1"},
		} {
			if out, err := c.from.Exec(ctx, "ping", "-c1", "-W1", c.to); err != nil {
				t.Errorf("ping %s from %s: %v\n%s", c.to, c.from, err, out)
			}
		}
		// Nothing of the pair is visible in the host namespace.
		for _, name := range []string{ea.Name, eb.Name} {
			if _, err := netlink.LinkByName(name); err == nil {
				t.Errorf("link %s visible in the host namespace", name)
			}
		}
	})
	if len(names) != 2 {
		t.Fatal("namespaces were not created")
	}
	list := netnsList(t)
	for _, n := range names {
		if strings.Contains(list, n) {
			t.Errorf("namespace %s still listed after cleanup:\n%s", n, list)
		}
		if _, err := os.Stat(filepath.Join(netnsDir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/%s still exists after cleanup (%v)", netnsDir, n, err)
		}
	}
}

// TestDo checks that Do runs fn inside the namespace (lo up, sysctls set) and restores the thread.
func TestDo(t *testing.T) {
	n := NewNetNS(t)

	runtime.LockOSThread() // keep this test on one thread to compare namespaces
	defer runtime.UnlockOSThread()
	host, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()

	err = n.Do(func() error {
		cur, err := netns.Get()
		if err != nil {
			return err
		}
		defer cur.Close()
		if !cur.Equal(n.Handle) || cur.Equal(host) {
			t.Errorf("Do did not run fn inside %s", n)
		}
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		if len(links) != 1 || links[0].Attrs().Name != "lo" || links[0].Attrs().Flags&(1<<0) == 0 {
			t.Errorf("fresh namespace links: %+v, want only lo, up", links)
		}
		for key, want := range namespaceSysctls {
			got, err := os.ReadFile(filepath.Join("/proc/sys", key))
			if err != nil {
				return err
			}
			if strings.TrimSpace(string(got)) != want {
				t.Errorf("sysctl %s = %q, want %q", key, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	cur, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if !cur.Equal(host) {
		t.Fatalf("Do did not restore the original namespace")
	}

	sentinel := errors.New("sentinel")
	if err := n.Do(func() error { return sentinel }); !errors.Is(err, sentinel) {
		t.Errorf("Do returned %v, want fn's error", err)
	}
}

// TestExec checks Exec output, errors and context cancellation.
func TestExec(t *testing.T) {
	n := NewNetNS(t)
	ctx := context.Background()

	out, err := n.Exec(ctx, "ip", "-o", "link", "show")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "lo:") || !strings.Contains(lines[0], "UP") {
		t.Errorf("links in a fresh namespace:\n%s", out)
	}
	out, err = n.Exec(ctx, "cat", "/proc/sys/net/ipv6/conf/default/accept_dad")
	if err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Errorf("accept_dad via Exec: %q, %v", out, err)
	}

	_, err = n.Exec(ctx, "false")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || !strings.Contains(err.Error(), n.Name) {
		t.Errorf("Exec(false) error = %v, want an *exec.ExitError naming the namespace", err)
	}

	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := n.Exec(cctx, "sleep", "10"); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("Exec ignored the context: err %v after %v", err, time.Since(start))
	}
}

// TestBPFFS checks that BPFFS mounts a fresh bpffs and that cleanup unmounts and removes it.
func TestBPFFS(t *testing.T) {
	var dir string
	t.Run("mount", func(t *testing.T) {
		dir = BPFFS(t)
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if st.Type != unix.BPF_FS_MAGIC {
			t.Fatalf("%s has filesystem magic %#x, want bpffs %#x", dir, st.Type, unix.BPF_FS_MAGIC)
		}
		if !mounted(t, dir) {
			t.Fatalf("%s not in mountinfo", dir)
		}
		// A fresh instance: nothing pinned, unlike a bind of /sys/fs/bpf
		// (kernels with CONFIG_BPF_PRELOAD add maps.debug and progs.debug).
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".debug") {
				t.Errorf("fresh bpffs contains %s", e.Name())
			}
		}
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
			t.Fatalf("mkdir in bpffs: %v", err)
		}
	})
	if dir == "" {
		t.Fatal("bpffs was not mounted")
	}
	if mounted(t, dir) {
		t.Errorf("%s still mounted after cleanup", dir)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after cleanup (%v)", dir, err)
	}
}

// mounted reports whether dir is a mount point according to mountinfo.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// TestRequireRoot checks that RequireRoot fails exactly when not root.
func TestRequireRoot(t *testing.T) {
	ft := &fatalTB{TB: t}
	RequireRoot(ft)
	if root := os.Geteuid() == 0; ft.failed == root {
		t.Errorf("RequireRoot failed=%v with euid %d", ft.failed, os.Geteuid())
	}
}

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	failed bool
}

// Helper does nothing.
func (f *fatalTB) Helper() {}

// Fatalf records the failure and returns.
func (f *fatalTB) Fatalf(string, ...any) { f.failed = true }
