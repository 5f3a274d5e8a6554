package telemetry

import (
	"os"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.RunWithFDCheck(m)) }
