package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// TestOpenFDsAndLeaks checks descriptor listing and leak detection on a file opened on purpose.
func TestOpenFDsAndLeaks(t *testing.T) {
	before, err := openFDs()
	if err != nil {
		t.Fatal(err)
	}
	for fd, target := range before {
		if strings.HasSuffix(target, "/fd") && strings.HasPrefix(target, "/proc/") {
			t.Errorf("fd %d is the /proc/self/fd directory itself", fd)
		}
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	fd := int(f.Fd())
	after, err := openFDs()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)+1 {
		t.Fatalf("%d fds before, %d with one more file open", len(before), len(after))
	}
	leaked := fdLeaks(before, after)
	if !reflect.DeepEqual(leaked, []int{fd}) {
		t.Fatalf("leaks %v, want [%d]", leaked, fd)
	}
	var buf bytes.Buffer
	reportLeaks(&buf, before, after, leaked)
	if !strings.Contains(buf.String(), "/status") {
		t.Errorf("report does not name the file:\n%s", buf.String())
	}
	if got := fdLeaks(after, before); got != nil {
		t.Errorf("fewer fds reported as leaks: %v", got)
	}
	if got := fdLeaks(before, before); got != nil {
		t.Errorf("unchanged fds reported as leaks: %v", got)
	}
}

// leakEnv makes TestLeakHelper leak a descriptor; it is set only in the
// child process TestRunWithFDCheckCatchesLeak starts.
const leakEnv = "XDPFW_TESTUTIL_LEAK_FD"

// leaked keeps the descriptor TestLeakHelper leaks reachable, so no
// finalizer closes it before the check.
var leaked *os.File

// TestLeakHelper leaks a file descriptor when run as a child process of
// TestRunWithFDCheckCatchesLeak; otherwise it does nothing.
func TestLeakHelper(t *testing.T) {
	if os.Getenv(leakEnv) == "" {
		return
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	leaked = f
}

// TestRunWithFDCheckCatchesLeak runs this test binary again with only
// TestLeakHelper, leaking, and checks that RunWithFDCheck (in TestMain)
// fails the run and names the file.
func TestRunWithFDCheckCatchesLeak(t *testing.T) {
	if os.Getenv(leakEnv) != "" {
		return
	}
	for _, leak := range []bool{false, true} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLeakHelper$", "-test.count=1")
		cmd.Env = os.Environ()
		if leak {
			cmd.Env = append(cmd.Env, leakEnv+"=1")
		}
		out, err := cmd.CombinedOutput()
		switch {
		case !leak && err != nil:
			t.Errorf("clean run failed: %v\n%s", err, out)
		case leak && err == nil:
			t.Errorf("leaking run passed:\n%s", out)
		case leak && !strings.Contains(string(out), "file descriptor leak") || leak && !strings.Contains(string(out), "/status"):
			t.Errorf("leaking run did not report the leaked file:\n%s", out)
		}
	}
}
