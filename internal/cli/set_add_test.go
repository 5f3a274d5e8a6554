package cli

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// stdinProbe is standard input that, when read, checks that no xdpfw holds
// the lock: a command must read its input before taking the lock, or
// every other command waits for whoever feeds it (issue 14.17).
type stdinProbe struct {
	paths firewall.Paths
	data  string
	read  bool
	err   error
}

func (r *stdinProbe) Read(b []byte) (int, error) {
	if r.read {
		return 0, io.EOF
	}
	r.read = true
	p := r.paths
	p.LockWait = firewall.NoWait
	s, err := firewall.OpenSets(p)
	if err != nil {
		r.err = err
	} else {
		s.Close()
	}
	return copy(b, r.data), nil
}

func TestSetInputBeforeLock(t *testing.T) {
	testutil.RequireRoot(t)
	paths := firewall.Paths{PinDir: filepath.Join(testutil.BPFFS(t), "xdpfw"), StateDir: t.TempDir()}
	s, err := firewall.OpenSets(paths)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("x", firewall.SetSpec{Kind: rules.SetKind{Type: rules.SetHashIP, Family: rules.FamilyIPv4}}, false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Cleanup(func() { _ = firewall.Teardown(paths) })
	for _, args := range [][]string{{"set", "add", "x", "--file", "-"}, {"set", "del", "x", "--file", "-"}, {"set", "restore", "-"}} {
		in := &stdinProbe{paths: paths, data: "10.0.0.1\n"}
		if args[1] == "restore" {
			in.data = "add x 10.0.0.2\n"
		}
		var out, errOut bytes.Buffer
		root := newRoot(&env{stdout: &out, stderr: &errOut})
		root.SetArgs(append([]string{"--pin-dir", paths.PinDir, "--state-dir", paths.StateDir}, args...))
		root.SetIn(in)
		root.SetOut(&out)
		root.SetErr(&errOut)
		if err := root.Execute(); err != nil {
			t.Errorf("%s: %v", strings.Join(args, " "), err)
		}
		if !in.read {
			t.Errorf("%s: standard input not read", strings.Join(args, " "))
		}
		if in.err != nil {
			t.Errorf("%s: the lock was held while standard input was read: %v", strings.Join(args, " "), in.err)
		}
	}
}
