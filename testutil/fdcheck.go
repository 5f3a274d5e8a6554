package testutil

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"testing"
)

// RunWithFDCheck runs the tests (m.Run) and checks the process does not hold
// more open file descriptors afterwards than before (counting /proc/self/fd).
// It returns m.Run's exit code, or 1 when tests passed but descriptors
// leaked; the leaked descriptors and their targets are printed to stderr.
// Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.RunWithFDCheck(m)) }
func RunWithFDCheck(m *testing.M) int {
	warmUpRuntimeFDs()
	before, err := openFDs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testutil: fd check: %v\n", err)
		return 1
	}
	code := m.Run()
	after, err := openFDs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testutil: fd check: %v\n", err)
		return max(code, 1)
	}
	if leaked := fdLeaks(before, after); leaked != nil {
		reportLeaks(os.Stderr, before, after, leaked)
		return max(code, 1)
	}
	return code
}

// warmUpRuntimeFDs makes the Go runtime open the descriptors it opens lazily
// and keeps for good (the network poller's epoll and wake-up descriptors),
// so that the first test to use the poller is not taken for a leak.
func warmUpRuntimeFDs() {
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	r.Close()
	w.Close()
}

// openFDs returns the open descriptors of the process and their targets.
// The descriptor used to read /proc/self/fd is closed by the time targets
// are read, so it is not listed.
func openFDs() (map[int]string, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	fds := make(map[int]string, len(entries))
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed meanwhile (the directory's own descriptor)
		}
		fds[fd] = target
	}
	return fds, nil
}

// fdLeaks returns the descriptors open in after but not (or with another
// target) in before, sorted, when after has more descriptors than before;
// nil otherwise.
func fdLeaks(before, after map[int]string) []int {
	if len(after) <= len(before) {
		return nil
	}
	var leaked []int
	for fd, target := range after {
		if old, ok := before[fd]; !ok || old != target {
			leaked = append(leaked, fd)
		}
	}
	slices.Sort(leaked)
	return leaked
}

// reportLeaks prints the leaked descriptors and their targets.
func reportLeaks(w io.Writer, before, after map[int]string, leaked []int) {
	fmt.Fprintf(w, "testutil: file descriptor leak: %d open before the tests, %d after\n", len(before), len(after))
	for _, fd := range leaked {
		fmt.Fprintf(w, "  fd %d -> %s\n", fd, after[fd])
	}
}
