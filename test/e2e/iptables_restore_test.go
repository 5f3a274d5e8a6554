package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// restoreIn puts text (iptables-save format) in force in ns with
// backend's iptables-restore (backend: "iptables", Debian's, the nft back
// end; "iptables-legacy", "iptables-nft"), within cmdTimeout.
func restoreIn(ctx context.Context, ns *testutil.NetNS, backend, text string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns.Name, backend+"-restore")
	cmd.Stdin = strings.NewReader(text)
	return cmd.CombinedOutput()
}

// mustRestore is restoreIn, failing t when iptables-restore refuses text.
func mustRestore(t *testing.T, ns *testutil.NetNS, backend, text string) {
	t.Helper()
	if out, err := restoreIn(t.Context(), ns, backend, text); err != nil {
		t.Fatalf("%s-restore in %s: %v\n%s\n%s", backend, ns, err, out, text)
	}
}

// filterText is the filter table of lines (-P, -N, -A lines as
// iptables-restore reads them) as an iptables-restore input.
func filterText(lines []string) string {
	return "*filter\n" + strings.Join(lines, "\n") + "\nCOMMIT\n"
}

// iptablesRestoreText puts rules in force in ns with iptables-restore (the
// nft back end, as Debian's iptables is), or flushes them with "".
func iptablesRestoreText(t *testing.T, ns *testutil.NetNS, rules string) {
	t.Helper()
	if rules == "" {
		rules = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
	}
	mustRestore(t, ns, "iptables", rules)
}

// iptablesRestore loads rules (xdpfw's syntax: -P and -A lines) into the
// filter table of ns with backend's iptables-restore; skips t when that
// backend is not usable here (it is the oracle, not the subject).
func iptablesRestore(t *testing.T, ns *testutil.NetNS, backend string, rules []string) {
	t.Helper()
	policy := map[string]string{"INPUT": "ACCEPT", "FORWARD": "ACCEPT", "OUTPUT": "ACCEPT"}
	var body []string
	for _, r := range rules {
		if f := strings.Fields(r); f[0] == "-P" {
			policy[f[1]] = f[2]
			continue
		}
		body = append(body, r)
	}
	for _, c := range []string{"OUTPUT", "FORWARD", "INPUT"} {
		body = append([]string{fmt.Sprintf(":%s %s [0:0]", c, policy[c])}, body...)
	}
	if out, err := restoreIn(t.Context(), ns, backend, filterText(body)); err != nil {
		t.Skipf("%s not usable here: %v\n%s", backend, err, out)
	}
}
