package testutil

import (
	"os"
	"testing"
)

// TestMain runs the package tests under the descriptor leak check.
func TestMain(m *testing.M) {
	os.Exit(RunWithFDCheck(m))
}
