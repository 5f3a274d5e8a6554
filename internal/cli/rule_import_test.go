package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// run runs the CLI with stdin and returns exit status, stdout, stderr.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	code := 0
	if err := root.Execute(); err != nil {
		errb.WriteString("xdpfw: " + err.Error() + "\n")
		code = exitCode(err)
	}
	return code, out.String(), errb.String()
}

// TestImportReport: import prints what becomes of each line of an
// OpenWrt-like router's iptables-save (raw, mangle and nat sections, NFLOG,
// -I and -D lines) and of a ufw-like host's (-m connmark refused here,
// -m mark in OUTPUT, MARK),
// with a summary, and changes nothing; -o writes a file apply loads.
func TestImportReport(t *testing.T) {
	dir := t.TempDir()
	state := []string{"--pin-dir", dir + "/pins", "--state-dir", dir + "/state"}
	ow := "testdata/import/openwrt-like.rules"
	out := filepath.Join(dir, "out.rules")
	code, stdout, stderr := runCLI(t, "", append(state, "import", "--ipv4-file", ow, "-o", out)...)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		ow + ":6:1: skipped: -A PREROUTING -i br-lan -p udp --dport 53 -j CT --helper dns\n\twhy: -j CT --helper is not supported: it sets the kernel's conntrack",
		ow + ":14:1: skipped: -A FORWARD -o pppoe-wan",
		ow + ":21:1: skipped: -A POSTROUTING -o pppoe-wan -m comment --comment \"!fw3\" -j MASQUERADE\n\twhy: table nat is not supported: the nat table is the kernel's unless xdpfw loads it",
		ow + ":24:1: taken: :INPUT DROP [0:0]\n",
		ow + ":30:1: taken: -A INPUT -i pppoe-wan -p udp -m udp --dport 68 -j ACCEPT\n\tas: -A INPUT -4 -i pppoe-wan -p udp --dport 68 -j ACCEPT\n",
		ow + ":32:1: translated: -A INPUT -i pppoe-wan -j NFLOG --nflog-prefix \"wan drop: \" --nflog-group 1\n",
		"\twhy: -j NFLOG: its events go to xdpfw's log ring buffer (xdpfw log shows NFLOG=1), not to netlink",
		ow + ":34:1: taken: -I INPUT 4 -i pppoe-wan -p tcp --dport 22 -j DROP\n\tas: -A INPUT -4 -i pppoe-wan -p tcp --dport 22 -j DROP\n\twhy: rule 4 of INPUT at this line",
		ow + ":38:1: taken: -D FORWARD -i br-lan -p udp --dport 9 -j DROP\n\twhy: deletes a rule read before",
		"\n37 lines: 33 taken, 1 translated, 3 skipped, 0 refused\nthe files load with --skip-unsupported (without it, apply refuses them)\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("import output lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(dir + "/state"); err == nil {
		t.Error("import made the state directory")
	}
	// -o: the rules that load, in order, which apply --check takes as they are
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "-A INPUT -4 -i br-lan -j ACCEPT\n-A INPUT -4 -i pppoe-wan -p tcp --dport 22 -j DROP\n") ||
		strings.Contains(string(b), "--dport 9") {
		t.Errorf("-o wrote:\n%s", b)
	}
	// (stderr: the note on rules for loopback alone, -i lo)
	if code, stdout, stderr := runCLI(t, "", append(state, "apply", "--check", out)...); code != 0 || stderr != "" && !strings.Contains(stderr, "concern only loopback traffic") {
		t.Errorf("apply --check of import -o: exit %d: %s%s", code, stdout, stderr)
	}

	// refused lines: exit 2, no -o file
	uf := "testdata/import/ufw-like.rules"
	out2 := filepath.Join(dir, "out2.rules")
	code, stdout, _ = runCLI(t, "", append(state, "import", "--ipv4-file", uf, "-o", out2)...)
	if code != 2 || !strings.Contains(stdout, uf+":19:1: taken: -A OUTPUT -p udp -m mark --mark 0x1 -j DROP\n\tas: -A OUTPUT -4 -p udp -m mark --mark 0x1 -j DROP\n") ||
		!strings.Contains(stdout, uf+":20:1: skipped: -A OUTPUT -j MARK --set-xmark 0x2/0xffffffff\n\twhy: target MARK is not supported") ||
		!strings.Contains(stdout, uf+":21:31: refused: -A INPUT -p tcp --dport 22 -m connmark") ||
		!strings.Contains(stdout, "the files do not load") {
		t.Errorf("ufw-like: exit %d:\n%s", code, stdout)
	}
	if _, err := os.Stat(out2); err == nil {
		t.Error("-o written though lines were refused")
	}

	// --json from standard input: one object per line, then the summary
	code, stdout, stderr = runCLI(t, "*filter\n-A INPUT -j ULOG\n-A INPUT -j SET --add-set x src\nCOMMIT\n", append(state, "import", "--json", "--ipv4-file", "-")...)
	if code != 0 {
		t.Fatalf("--json: exit %d: %s%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var l importLine
	var sum importSummary
	if len(lines) != 5 || json.Unmarshal([]byte(lines[1]), &l) != nil || json.Unmarshal([]byte(lines[4]), &sum) != nil {
		t.Fatalf("--json:\n%s", stdout)
	}
	if l.Pos != rules.StdinName+":2:1" || l.Result != "translated" || l.Rule != "-A INPUT -4 -j ULOG" ||
		sum != (importSummary{Lines: 4, Taken: 2, Translated: 1, Skipped: 1, Loads: true}) {
		t.Errorf("--json: %+v %+v", l, sum)
	}
}

// TestApplyStdinSkipUnsupported: apply reads "-" from standard input;
// --check prints each line --skip-unsupported leaves out and every warning
// apply would print (a rule that can never match), and without the flag
// the file is refused with the reason.
func TestApplyStdinSkipUnsupported(t *testing.T) {
	dir := t.TempDir()
	state := []string{"--pin-dir", dir + "/pins", "--state-dir", dir + "/state"}
	src := "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -o eth0 -j MASQUERADE\nCOMMIT\n*filter\n:INPUT DROP [0:0]\n" +
		"-A INPUT -p tcp --dport 22 -m multiport --dports 80 -j ACCEPT\n-A FORWARD -p tcp -j TCPMSS --clamp-mss-to-pmtu\nCOMMIT\n"
	code, stdout, stderr := runCLI(t, src, append(state, "apply", "--check", "--ipv4-file", "-")...)
	if code != 2 || !strings.Contains(stderr, "<stdin>:1:1: table nat is not supported") ||
		!strings.Contains(stderr, "<stdin>:8:22: \"TCPMSS\": target TCPMSS is not supported") || !strings.Contains(stderr, "--skip-unsupported") {
		t.Errorf("without --skip-unsupported: exit %d: %s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, src, append(state, "apply", "--check", "--skip-unsupported", "--ipv4-file", "-")...)
	for _, want := range []string{
		"<stdin>:3: skipped: table nat is not supported: the nat table is the kernel's unless xdpfw loads it (load --nat xdpfw: docs/nat.md): -A POSTROUTING -o eth0 -j MASQUERADE\n",
		"<stdin>:8: skipped: target TCPMSS is not supported: it rewrites the MSS option of TCP SYNs; xdpfw decides and never changes a packet: -A FORWARD -p tcp -j TCPMSS --clamp-mss-to-pmtu\n",
		"2 lines skipped (--skip-unsupported)\n",
		"warning: <stdin>:7:1: -A INPUT -4 -p tcp ",
		": its port tests leave no port; the rule never matches\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("--check --skip-unsupported: stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code != 0 || !strings.HasPrefix(stdout, "ok: 1 rules") {
		t.Errorf("--check --skip-unsupported: exit %d, stdout %q", code, stdout)
	}
}
