package cli

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// liveHost is what a Docker-and-ufw-like host loads into iptables (our
// own): a raw NOTRACK, a mangle MSS clamp, nat, and a filter table with
// NFLOG.
const liveHost = `*raw
-A PREROUTING -p udp --dport 53 -j NOTRACK
COMMIT
*mangle
-A FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu
COMMIT
*nat
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
COMMIT
*filter
:INPUT DROP [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p udp -m conntrack --ctstate UNTRACKED --dport 53 -j ACCEPT
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -j NFLOG --nflog-group 2 --nflog-prefix "drop: "
COMMIT
`

// TestIptablesSavePipes: what iptables-save and ip6tables-save print of a
// real host (loaded with iptables-restore into a throwaway namespace) goes
// into xdpfw through standard input: import reports it, apply --check takes
// it with --skip-unsupported (listing the mangle and nat lines) and
// refuses it without.
func TestIptablesSavePipes(t *testing.T) {
	testutil.RequireRoot(t)
	for _, bin := range []string{"iptables-nft-restore", "iptables-nft-save", "ip6tables-nft-restore", "ip6tables-nft-save"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	ns := testutil.NewNetNS(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, fam := range []struct{ restore, save, flag, net string }{
		{"iptables-nft-restore", "iptables-nft-save", "--ipv4-file", "172.17.0.0/16"},
		{"ip6tables-nft-restore", "ip6tables-nft-save", "--ipv6-file", "fd00:17::/64"},
	} {
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns.Name, fam.restore)
		cmd.Stdin = strings.NewReader(strings.Replace(liveHost, "172.17.0.0/16", fam.net, 1))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", fam.restore, err, out)
		}
		saved, err := ns.Exec(ctx, fam.save)
		if err != nil {
			t.Fatalf("%s: %v: %s", fam.save, err, saved)
		}
		dir := t.TempDir()
		state := []string{"--pin-dir", dir + "/pins", "--state-dir", dir + "/state"}
		code, stdout, stderr := runCLI(t, string(saved), append(state, "import", fam.flag, "-")...)
		if code != 0 || !strings.Contains(stdout, "translated: -A INPUT -j NFLOG") ||
			!strings.Contains(stdout, "taken: -A PREROUTING -p udp") || !strings.Contains(stdout, "skipped: -A POSTROUTING -s "+fam.net) ||
			!strings.Contains(stdout, " 2 skipped, 0 refused\n") {
			t.Errorf("%s | xdpfw import %s -: exit %d:\n%s%s", fam.save, fam.flag, code, stdout, stderr)
		}
		code, stdout, stderr = runCLI(t, string(saved), append(state, "apply", "--check", "--skip-unsupported", fam.flag, "-")...)
		if code != 0 || strings.Count(stderr, ": skipped: ") != 2 || !strings.HasPrefix(stdout, "ok: 5 rules") {
			t.Errorf("%s | xdpfw apply --check --skip-unsupported: exit %d:\n%s%s", fam.save, code, stdout, stderr)
		}
		if code, _, stderr = runCLI(t, string(saved), append(state, "apply", "--check", fam.flag, "-")...); code != 2 ||
			!strings.Contains(stderr, "table mangle is not supported") || !strings.Contains(stderr, "table nat is not supported") {
			t.Errorf("%s | xdpfw apply --check: exit %d: %s", fam.save, code, stderr)
		}
	}
}
