package cli

import (
	"bytes"
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
		srcMAC: "02:00:00:00:00:01", dstMAC: "02:00:00:00:00:02", vlans: []uint{10}}
	p, err := f.build()
	if err != nil {
		t.Fatal(err)
	}
	if p.Src != netip.MustParseAddr("2001:db8::1") || p.DPort != 22 || p.TCPFlags != packet.TCPSyn|packet.TCPAck || !reflect.DeepEqual(p.VLANs, []uint16{10}) {
		t.Fatalf("built %s", p)
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
		{"delete", "NOPE", "1"},       // bad chain
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
		{"load", "-i", "lo", "--log-rate", "0/s", "x"},    // rate below 1
		{"load", "-i", "lo", "--log-rate", "3/week", "x"}, // no such unit
		{"load", "-i", "lo", "--log-snap", "1025", "x"},   // over the bound
		{"load", "-i", "lo", "--log-snap", "-2", "x"},     // negative
		{"apply", "--log-burst", "0", "x"},                // burst below 1
		{"apply", "--check", "--log-rate", "many", "x"},   // checked with --check too
		{"log", "--count", "-1"},                          // negative count
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
