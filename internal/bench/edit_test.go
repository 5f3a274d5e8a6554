package bench

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestEditRuns: a small single-edit benchmark runs every edit through the
// Go API and the CLI (the binary built from this tree), sees each probe
// get its new verdict and keep it after the rebuild, fills every field,
// and leaves nothing behind. Timing values are not judged.
func TestEditRuns(t *testing.T) {
	testutil.RequireRoot(t)
	bin := filepath.Join(t.TempDir(), "xdpfw")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-mod=mod", "-o", bin, "../../cmd/xdpfw").CombinedOutput(); err != nil {
		t.Fatalf("building xdpfw: %v\n%s", err, out)
	}
	res, err := Edit(EditOptions{Rules: 200, Rounds: 2, Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rules != 200 || res.LoadMS <= 0 || len(res.Ops) != 8 {
		t.Fatalf("result %+v", res)
	}
	for _, op := range res.Ops {
		if len(op.APIms) != 2 || len(op.CLIms) != 2 || len(op.RebuildMS) != 2 || len(op.InForceMS) != 2 ||
			op.DeltaEntries+op.DeltaDeleted == 0 {
			t.Errorf("incomplete %+v", op)
		}
	}
	var b strings.Builder
	WriteEditTable(&b, res)
	if strings.Count(b.String(), "\n") != 14 {
		t.Errorf("table:\n%s", b.String())
	}
}
