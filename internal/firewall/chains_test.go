package firewall

import (
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// chainSet is a small rule set with user chains: OpenWrt's "reject"
// chain, a chain jumped to from INPUT, a RETURN, an empty chain.
const chainSet = `*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:a - [0:0]
:b - [0:0]
:reject - [0:0]
-A INPUT -p udp -j a
-A INPUT -p udp --dport 9 -j reject
-A a -p udp --dport 1 -j ACCEPT
-A a -p udp --dport 2 -j RETURN
-A a -p udp --dport 2:3 -j ACCEPT
-A reject -j DROP
COMMIT
`

// TestChainsLoadListRestart: a rule set with user chains loads, decides
// as iptables would, lists as iptables -S (which parses back into the
// same rule set), and after the firewall is opened again (a daemon
// restart) lists the same, empty chain included. Edits inside user
// chains and -N/-X work, and a chain in use cannot be deleted.
func TestChainsLoadListRestart(t *testing.T) {
	e := newEnv(t)
	rs, err := rules.Parse("t.rules", []byte(chainSet), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ns.Do(func() error {
		_, err := Load(e.p, []string{"fw0"}, datapath.ModeGeneric, rs, Options{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	f := e.open()
	defer func() { f.Close() }()
	want := map[uint16]string{1: "-A a -p udp --dport 1 -j ACCEPT", 2: "policy", 3: "-A a -p udp --dport 2:3 -j ACCEPT",
		9: "-A reject -j DROP", 10: "policy"}
	check := func(when string) {
		t.Helper()
		for port, rule := range want {
			if got, _ := e.decides(f, port); got != rule {
				t.Errorf("%s: udp/%d decided by %q, want %q", when, port, got, rule)
			}
		}
	}
	check("loaded")
	l, err := f.List()
	if err != nil {
		t.Fatal(err)
	}
	save := l.Save()
	wantSave := "-P INPUT DROP\n-P FORWARD ACCEPT\n-P OUTPUT ACCEPT\n-N a\n-N b\n-N reject\n" +
		"-A INPUT -p udp -j a\n-A INPUT -p udp --dport 9 -j reject\n-A a -p udp --dport 1 -j ACCEPT\n" +
		"-A a -p udp --dport 2 -j RETURN\n-A a -p udp --dport 2:3 -j ACCEPT\n-A reject -j DROP\n"
	if save != wantSave {
		t.Errorf("list -S:\n%s\nwant:\n%s", save, wantSave)
	}
	back, err := rules.Parse("list", []byte(save), rules.ParseOptions{})
	if err != nil || back.String() != save {
		t.Errorf("list -S does not parse back: %v\n%s", err, back)
	}
	// a restart: the record gives the same listing, empty chain b included
	f.Close()
	f = e.open()
	l2, err := f.List()
	if err != nil || l2.Save() != save {
		t.Errorf("after reopening: %v\n%s", err, l2.Save())
	}
	check("reopened")

	// edits inside a user chain, by number and by spec
	if _, err := f.Add(e.rule("-A a -p udp --dport 4 -j ACCEPT"), 2); err != nil {
		t.Fatal(err)
	}
	want[4] = "-A a -p udp --dport 4 -j ACCEPT"
	check("added to a")
	if _, gone, err := f.DeleteNth("a", 3); err != nil || gone.String() != "-A a -p udp --dport 2 -j RETURN" {
		t.Fatalf("delete a 3: %v %v", gone, err)
	}
	want[2] = "-A a -p udp --dport 2:3 -j ACCEPT"
	check("RETURN deleted")
	if _, _, err := f.Replace(1, e.rule("-A reject -j ACCEPT")); err != nil {
		t.Fatal(err)
	}
	want[9] = "-A reject -j ACCEPT"
	check("replaced in reject")
	// -X of a chain in use, of a chain with rules, of the empty one
	if _, err := f.DeleteChain("reject"); err == nil || !strings.Contains(err.Error(), "chain reject is still in use: the rule -A INPUT -p udp --dport 9 -j reject jumps to it") {
		t.Errorf("delete chain reject: %v", err)
	}
	if _, err := f.DeleteChain("a"); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("delete chain a: %v", err)
	}
	nope, err := rules.ParseRuleArgs("INPUT", []string{"-j", "nope"}, rules.ParseOptions{}) // as xdpfw add reads it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Add(nope, 0); err == nil || !strings.Contains(err.Error(), "no chain or target nope") {
		t.Errorf("jump to a missing chain: %v", err)
	}
	if _, err := f.DeleteChain("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.NewChain("c"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.FlushChain("a"); err != nil {
		t.Fatal(err)
	}
	want[1], want[3], want[4] = "policy", "policy", "policy"
	delete(want, 2)
	check("a flushed")
	l, err = f.List()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(l.Chains, " "); got != "a c reject" {
		t.Errorf("chains %q, want a c reject (by name, as iptables -S)", got)
	}
}
