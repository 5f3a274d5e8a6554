package testutil

import (
	"os"
	"testing"
)

// RequireRoot fails (not skips) the test when the process is not running as
// root: CI runs as root, so a silent skip would hide tests.
func RequireRoot(t testing.TB) {
	t.Helper()
	if euid := os.Geteuid(); euid != 0 {
		t.Fatalf("this test needs root (euid is %d); CI runs the tests as root, run them locally with sudo", euid)
	}
}
