package cli

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

func TestSplitOwnFlags(t *testing.T) {
	withVal := map[string]bool{"--position": true}
	bools := map[string]bool{"-h": true}
	own, rest, err := splitOwnFlags([]string{"--position", "2", "INPUT", "-p", "tcp", "-h"}, withVal, bools)
	if err != nil || own["--position"] != "2" || !reflect.DeepEqual(rest, []string{"INPUT", "-p", "tcp", "-h"}) {
		t.Fatalf("got %v %v %v", own, rest, err)
	}
	own, rest, err = splitOwnFlags([]string{"--position=3", "INPUT"}, withVal, bools)
	if err != nil || own["--position"] != "3" || len(rest) != 1 {
		t.Fatalf("got %v %v %v", own, rest, err)
	}
	if _, _, err := splitOwnFlags([]string{"--position"}, withVal, bools); err == nil {
		t.Fatal("missing value accepted")
	}
}

func TestTraceBuild(t *testing.T) {
	f := traceFlags{proto: "tcp", dst: "2001:db8::9", sport: 1, dport: 22, tcpFlags: "SYN,ACK", icmpType: "echo-request",
		srcMAC: "02:00:00:00:00:01", dstMAC: "02:00:00:00:00:02", vlans: []uint{10}, vlanPrios: []uint{5}}
	p, err := f.build()
	if err != nil {
		t.Fatal(err)
	}
	if p.Src != netip.MustParseAddr("2001:db8::1") || p.DPort != 22 || p.TCPFlags != packet.TCPSyn|packet.TCPAck || !reflect.DeepEqual(p.VLANs, []uint16{10}) ||
		p.PCP(0) != 5 || !strings.HasPrefix(p.String(), "vlan 10 pcp 5 | ") {
		t.Fatalf("built %s", p)
	}
	if d, err := packet.Decode(p.Bytes()); err != nil || d.PCP(0) != 5 {
		t.Fatalf("the frame's PCP: %v %v", d, err)
	}
	f = traceFlags{proto: "icmp", icmpType: "port-unreachable", srcMAC: "02:00:00:00:00:01", dstMAC: "02:00:00:00:00:02"}
	if p, err = f.build(); err != nil || p.ICMPType != 3 || p.ICMPCode != 3 || !p.Src.Is4() {
		t.Fatalf("icmp: %v %v", p, err)
	}
	for _, bad := range []traceFlags{
		{proto: "tcp", src: "10.0.0.1", dst: "::1", tcpFlags: "SYN", srcMAC: "02:00:00:00:00:01", dstMAC: "02:00:00:00:00:02"},
		{proto: "bogus"},
		{proto: "tcp", tcpFlags: "SYNN", srcMAC: "02:00:00:00:00:01", dstMAC: "02:00:00:00:00:02"},
		{proto: "udp", srcMAC: "zz", dstMAC: "02:00:00:00:00:02"},
		{proto: "udp", srcMAC: "02:00:00:00:00:01", dstMAC: "02:00:00:00:00:02", vlans: []uint{10}, vlanPrios: []uint{8}},
		{proto: "udp", srcMAC: "02:00:00:00:00:01", dstMAC: "02:00:00:00:00:02", vlans: []uint{10}, vlanPrios: []uint{1, 2}},
	} {
		if _, err := bad.build(); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
}

// TestUsageErrors: bad invocations exit 2 with a message, before touching
// the kernel.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"load", "rules.conf"},                      // no -i
		{"load", "-i", "lo", "--mode", "fast", "x"}, // bad mode
		{"apply"},                     // no file
		{"add", "INPUT"},              // no rule spec
		{"delete", "NO PE", "1"},      // bad chain name
		{"policy", "INPUT", "REJECT"}, // bad policy
		{"detach"},                    // neither -i nor --all
		{"load", "-i", "lo", "--reject-rate", "0/s", "x"},       // rate below 1
		{"load", "-i", "lo", "--reject-rate", "10/minute", "x"}, // per second only
		{"apply", "--reject-rate", "many", "x"},                 // not a number
		{"apply", "--reject-burst", "2000000", "x"},             // over the bound
		{"set", "create", "bad name", "hash:net"},
		{"set", "create", "x", "bitmap:ip"},
		{"set", "create", "x", "hash:ip", "--family", "inet4"},
		{"set", "create", "x", "hash:ip", "--size", "0"},
		{"set", "create", "x"},
		{"set", "add", "x"}, // no elements
		{"set", "del", "x"},
		{"set", "flush"},
		{"set", "destroy", "a", "b"},
		{"set", "list", "a", "b"},
		{"load", "-i", "lo", "--log-rate", "0/s", "x"},          // rate below 1
		{"load", "-i", "lo", "--log-rate", "3/week", "x"},       // no such unit
		{"load", "-i", "lo", "--log-snap", "1025", "x"},         // over the bound
		{"load", "-i", "lo", "--log-snap", "-2", "x"},           // negative
		{"apply", "--log-burst", "0", "x"},                      // burst below 1
		{"apply", "--check", "--log-rate", "many", "x"},         // checked with --check too
		{"log", "--count", "-1"},                                // negative count
		{"nosuch"},                                              // unknown command
		{"set", "nosuch"},                                       // unknown subcommand
		{"load", "--bogus", "-i", "lo", "x"},                    // unknown flag
		{"apply", "a", "b"},                                     // too many arguments
		{"load", "-i", "lo", "--max-rules", "-5", "x"},          // negative size
		{"load", "-i", "lo", "--max-rules", "0", "x"},           // zero size
		{"load", "-i", "lo", "--max-rules", "99999999999", "x"}, // would be truncated to uint32
		{"load", "-i", "lo", "--max-rules", "16777217", "x"},    // over the bound
		{"load", "-i", "lo", "--max-rules", "1e9", "x"},         // not a number
		{"load", "-i", "lo", "--ct-max", "-1", "x"},
		{"load", "-i", "lo", "--ct-max", "0", "x"},
		{"load", "-i", "lo", "--ct-max", "4294967297", "x"},
		{"load", "-i", "lo", "--reject-burst", "0", "x"},
		{"load", "-i", "lo", "--reject-burst", "-5", "x"},
		{"load", "-i", "lo", "--log-burst", "4294967296", "x"},
		{"apply", "--check", "--ct-full", "maybe", "x"},             // checked with --check as apply checks it
		{"apply", "--check", "--malformed", "yes", "x"},             // idem
		{"apply", "--check", "--ct-timeout", "tcp_syn_sent=0", "x"}, // idem
		{"apply", "--ct-full", "maybe", "x"},
		{"apply", "--malformed", "yes", "x"},
	} {
		var out, errb bytes.Buffer
		code := Main(append([]string{"--pin-dir", dir + "/pins", "--state-dir", dir + "/state"}, args...), &out, &errb)
		if code != 2 || !strings.HasPrefix(errb.String(), "xdpfw: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

func TestHelpTeaches(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, cmd := range []string{"load", "apply", "add", "delete", "list", "flush", "policy", "detach", "status", "trace", "log", "set"} {
		if !strings.Contains(out.String(), "  "+cmd) {
			t.Errorf("--help does not list %s:\n%s", cmd, out.String())
		}
	}
}

// TestSetHelpTeaches: `set --help` lists every set command, and each one's
// help shows examples.
func TestSetHelpTeaches(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"set", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, cmd := range []string{"create", "add", "del", "list", "flush", "destroy", "restore"} {
		if !strings.Contains(out.String(), "  "+cmd) {
			t.Errorf("set --help does not list %s:\n%s", cmd, out.String())
		}
		var sub bytes.Buffer
		if code := Main([]string{"set", cmd, "--help"}, &sub, &errb); code != 0 || !strings.Contains(sub.String(), "Examples:") || !strings.Contains(sub.String(), "xdpfw set "+cmd+" ") {
			t.Errorf("set %s --help shows no example:\n%s", cmd, sub.String())
		}
	}
}

// TestManAndVersion: man pages come from the command definitions, one per
// command; --version names the BPF program version.
func TestManAndVersion(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := Main([]string{"man", dir}, &out, &errb); code != 0 {
		t.Fatalf("man: exit %d: %s", code, errb.String())
	}
	page, err := os.ReadFile(filepath.Join(dir, "xdpfw-daemon.1"))
	if err != nil || !bytes.Contains(page, []byte("daemon puts the configuration file")) || !bytes.Contains(page, []byte(".TH \"XDPFW\" \"1\"")) {
		t.Errorf("xdpfw-daemon.1 (%v):\n%s", err, page)
	}
	for _, name := range []string{"xdpfw.1", "xdpfw-load.1", "xdpfw-set-add.1", "xdpfw-conntrack-gc.1"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("no man page %s: %v", name, err)
		}
	}
	out.Reset()
	if code := Main([]string{"--version"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "(BPF program "+datapath.ProgramVersion()) {
		t.Errorf("--version: %q", out.String())
	}
}

// TestEmptyRuleFile: a rule file that says nothing (empty, blank, only
// comments, only carriage returns) is refused by load, apply and apply
// --check with exit status 2, before anything is touched, unless
// --allow-empty; an empty *filter section is a rule set.
func TestEmptyRuleFile(t *testing.T) {
	dir := t.TempDir()
	for i, src := range []string{"", "\n\n  \t\n", "# nothing\n# yet\n", "\r", "\r\n\r\n"} {
		path := filepath.Join(dir, fmt.Sprintf("empty%d.rules", i))
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"load", "-i", "lo", path}, {"apply", path}, {"apply", "--check", path}} {
			var out, errb bytes.Buffer
			code := Main(append([]string{"--pin-dir", dir + "/pins", "--state-dir", dir + "/state"}, args...), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), "--allow-empty") {
				t.Errorf("%q %v: exit %d, stderr %q", src, args[:len(args)-1], code, errb.String())
			}
		}
		var out, errb bytes.Buffer
		if code := Main([]string{"--state-dir", dir + "/state", "apply", "--check", "--allow-empty", path}, &out, &errb); code != 0 {
			t.Errorf("%q --check --allow-empty: exit %d: %s", src, code, errb.String())
		}
	}
	if _, err := os.Stat(dir + "/pins"); err == nil {
		t.Error("a refused load made the pin directory")
	}
	table := filepath.Join(dir, "table.rules")
	if err := os.WriteFile(table, []byte("*filter\nCOMMIT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"--state-dir", dir + "/state", "apply", "--check", table}, &out, &errb); code != 0 {
		t.Errorf("*filter/COMMIT: exit %d: %s", code, errb.String())
	}
}

// TestCheckLikeApply: apply --check prints the warnings apply would print,
// and judges -i and -o names against this host only with --on-host; the
// rules for loopback alone get one note either way.
func TestCheckLikeApply(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.rules")
	if err := os.WriteFile(path, []byte("-P INPUT DROP\n-A INPUT -i nosuch0 -p tcp --dport 22 -j ACCEPT\n-A INPUT ! -i lo -j DROP\n"+
		"-A INPUT -i lo -j ACCEPT\n-A FORWARD -o nosuch1 -j ACCEPT\n-A OUTPUT -o lo -j ACCEPT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(append([]string{"--pin-dir", dir + "/pins", "--state-dir", dir + "/state", "apply", "--check"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	loop := "warning: note: 2 rule(s) concern only loopback traffic (-i lo, -o lo), which xdpfw never sees"
	code, out, errb := run(path)
	if code != 0 || !strings.HasPrefix(errb, loop) || !strings.Contains(errb, path+":4:1, "+path+":6:1\n") ||
		strings.Count(errb, "\n") != 1 || !strings.HasPrefix(out, "ok: 5 rules") {
		t.Errorf("--check: exit %d, stdout %q, stderr %q", code, out, errb)
	}
	code, out, errb = run("--on-host", path)
	if code != 0 || !strings.Contains(errb, "warning: "+path+":2:1: ") || !strings.Contains(errb, "-i nosuch0 matches no attached interface; the rule never matches") ||
		!strings.Contains(errb, "warning: "+path+":5:1: ") || !strings.Contains(errb, "-o nosuch1 matches no interface of this host") ||
		!strings.Contains(errb, loop) || !strings.HasPrefix(out, "ok: 5 rules") {
		t.Errorf("--check --on-host: exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

// TestCheckPriorityCPUs: apply --check resolves --priority-cpus as apply
// would (a CPU not online is an error, exit status 2) and warns where the
// CPUs leave the rules' xdpfw-priority table without effect; it changes
// nothing.
func TestCheckPriorityCPUs(t *testing.T) {
	dir := t.TempDir()
	table := filepath.Join(dir, "prio.rules")
	plain := filepath.Join(dir, "plain.rules")
	if err := os.WriteFile(table, []byte("-A INPUT -p tcp --dport 22 -j ACCEPT\n-t xdpfw-priority -A PRIORITY -p udp --dport 7 -j HIGH\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("-A INPUT -p tcp --dport 22 -j ACCEPT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(append([]string{"--pin-dir", dir + "/pins", "--state-dir", dir + "/state", "apply", "--check"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	const noEffect = "warning: the xdpfw-priority table has no effect with --priority-cpus none"
	for _, c := range []struct {
		args      []string
		code      int
		errSubstr string // "" for none
	}{
		{[]string{"--priority-cpus", "63", table}, 2, "--priority-cpus 63: CPU 63 is not online (online: "},
		{[]string{"--priority-cpus", "64", table}, 2, "--priority-cpus: CPU list \"64\": CPU 64: xdpfw hands bulk packets to CPUs 0-63"},
		{[]string{"--priority-cpus", "none", table}, 0, noEffect},
		{[]string{"--priority-cpus", "none", plain}, 0, ""},
		{[]string{"--priority-cpus", "0", table}, 0, ""},
	} {
		code, out, errb := run(c.args...)
		if code != c.code || (c.errSubstr == "") != (errb == "") || !strings.Contains(errb, c.errSubstr) ||
			(code == 0) != strings.HasPrefix(out, "ok: ") {
			t.Errorf("apply --check %v: exit %d (want %d), stdout %q, stderr %q (want %q)", c.args, code, c.code, out, errb, c.errSubstr)
		}
	}
	for _, p := range []string{"/pins", "/state"} {
		if _, err := os.Stat(dir + p); err == nil {
			t.Errorf("apply --check made %s", p)
		}
	}
}

// TestLongTokenNotEchoed: a megabyte-long argument is named in an error,
// not echoed.
func TestLongTokenNotEchoed(t *testing.T) {
	long := strings.Repeat("9", 1<<20)
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "r.rules")
	if err := os.WriteFile(rulesFile, []byte("-A INPUT -p tcp --dport "+long+" -j ACCEPT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"load", "-i", "lo", "--max-rules", long, "x"}, {"apply", "--reject-rate", long, "x"}, {"apply", "--check", rulesFile}, {"apply", "--check", "--malformed", long, rulesFile}} {
		var out, errb bytes.Buffer
		code := Main(append([]string{"--pin-dir", dir + "/pins", "--state-dir", dir + "/state"}, args...), &out, &errb)
		if code != 2 || errb.Len() > 1000 || !strings.Contains(errb.String(), "bytes)") {
			t.Errorf("%.40v: exit %d, %d bytes of stderr: %.300s", args, code, errb.Len(), errb.String())
		}
	}
}
