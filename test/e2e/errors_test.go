package e2e

import (
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestRuleFileErrors checks that rule files with errors are refused with
// exit status 2 and a message starting "file:line:col:", and change
// nothing: a failed load leaves nothing loaded, a failed apply leaves the
// rules in force (shown with traffic and list), and apply --check never
// changes anything.
func TestRuleFileErrors(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, 22, 8080)

	cases := []struct {
		name  string
		lines []string
		pos   string // line:col of the offending token
		token string // what the message must name
	}{
		{"bad address", []string{"-P INPUT DROP", "# ssh", "-A INPUT -s 300.1.1.1 -j DROP"}, "3:13", "300.1.1.1"},
		{"port out of range", []string{"-A INPUT -p tcp --dport 22 -j ACCEPT", "-A INPUT -p tcp --dport 70000 -j ACCEPT"}, "2:25", "70000"},
		{"dport without -p", []string{"", "-A INPUT --dport 22 -j ACCEPT"}, "2:10", "--dport"},
		{"unknown option", []string{"-A INPUT -p tcp --frobnicate 1 -j ACCEPT"}, "1:17", "--frobnicate"},
		{"nat table", []string{"*nat", "-A PREROUTING -j ACCEPT", "COMMIT"}, "1:1", "nat"},
	}
	t.Run("load", func(t *testing.T) {
		for _, c := range cases {
			t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
				f := newFW(t, l.srv)
				path := writeRules(t, "bad.rules", c.lines...)
				r := f.runWant(2, "load", "-i", l.srvIf, path)
				if want := "xdpfw: " + path + ":" + c.pos + ": "; !strings.HasPrefix(r.stderr, want) {
					t.Errorf("stderr does not start with %q: %s", want, r)
				}
				if !strings.Contains(r.stderr, c.token) {
					t.Errorf("stderr does not name %q: %s", c.token, r)
				}
				if r.stdout != "" {
					t.Errorf("a refused load printed on stdout: %s", r)
				}
				f.wantNothingLoaded(l.srvIf)
			})
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("apply", func(t *testing.T) {
		f := newFW(t, l.srv)
		const (
			nd  = "-A INPUT -p ipv6-icmp -j ACCEPT"
			ssh = "-A INPUT -p tcp --dport 22 -j ACCEPT"
		)
		good := writeRules(t, "good.rules", "-P INPUT DROP", nd, ssh)
		f.mustRun("load", "-i", l.srvIf, good)
		inForce := func(what string) {
			t.Helper()
			list := f.list()
			list.wantChain(t, "INPUT", nd, ssh)
			list.wantPolicy(t, "INPUT", "DROP")
			if list.Generation != 1 {
				t.Errorf("%s: generation %d, want 1 (nothing applied since the load):\n%s", what, list.Generation, list.raw)
			}
			checkTCP(t, what,
				tcpProbe{from: l.cli, addr: hostPort(l.srv4, 22), ok: true},
				tcpProbe{from: l.cli, addr: hostPort(l.srv6, 22), ok: true},
				tcpProbe{from: l.cli, addr: hostPort(l.srv4, 8080), ok: false})
		}
		inForce("loaded")

		// Its first lines would open 8080 and close ssh: none of it may apply.
		bad := writeRules(t, "bad.rules",
			"-P INPUT ACCEPT",
			"-A INPUT -p tcp --dport 8080 -j ACCEPT",
			"-A INPUT -p tcp --dport 22 -j DROP",
			"-A INPUT -p udp --dport 70000 -j ACCEPT")
		wantPos := "xdpfw: " + bad + ":4:25: "
		for _, args := range [][]string{{"apply", bad}, {"apply", "--check", bad}} {
			r := f.runWant(2, args...)
			if !strings.HasPrefix(r.stderr, wantPos) {
				t.Errorf("stderr does not start with %q: %s", wantPos, r)
			}
			inForce(strings.Join(args, " "))
		}

		open8080 := writeRules(t, "open.rules", "-P INPUT DROP", nd, ssh, "-A INPUT -p tcp --dport 8080 -j ACCEPT")
		r := f.mustRun("apply", "--check", open8080)
		if !strings.HasPrefix(r.stdout, "ok: 3 rules") {
			t.Errorf("apply --check: stdout does not start with \"ok: 3 rules\": %s", r)
		}
		inForce("apply --check open.rules")

		// The same file applied for real does change things.
		f.mustRun("apply", open8080)
		list := f.list()
		list.wantChain(t, "INPUT", nd, ssh, "-A INPUT -p tcp --dport 8080 -j ACCEPT")
		if list.Generation != 2 {
			t.Errorf("generation %d after one apply, want 2:\n%s", list.Generation, list.raw)
		}
		checkTCP(t, "apply open.rules", tcpProbe{from: l.cli, addr: hostPort(l.srv4, 8080), ok: true})
	})
}

// TestNoPartialStateOnFailedLoad checks that a load naming an interface
// that does not exist fails with exit status 1 and leaves nothing behind:
// no pins, no state, no program on the interfaces that do exist. On a
// loaded firewall such a load leaves the firewall as it was.
func TestNoPartialStateOnFailedLoad(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	rules := writeRules(t, "ssh.rules", "-P INPUT DROP", "-A INPUT -p tcp --dport 22 -j ACCEPT")

	for _, c := range []struct {
		name   string
		ifaces []string
	}{
		{"missing only", []string{"does-not-exist"}},
		{"missing after an existing one", []string{l.srvIf, "does-not-exist"}},
		{"missing before an existing one", []string{"does-not-exist", l.srvIf}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			f := newFW(t, l.srv)
			args := []string{"load"}
			for _, i := range c.ifaces {
				args = append(args, "-i", i)
			}
			r := f.runWant(1, append(args, rules)...)
			if !strings.Contains(r.stderr, "does-not-exist") {
				t.Errorf("the error does not name the missing interface: %s", r)
			}
			f.wantNothingLoaded(l.srvIf)
		})
	}

	t.Run("on a loaded firewall", func(t *testing.T) {
		serveTCP(t, l.srv, 22, 8080)
		f := newFW(t, l.srv)
		f.mustRun("load", "-i", l.srvIf, rules)
		before := f.status()
		open := writeRules(t, "open.rules", "-P INPUT ACCEPT")
		r := f.runWant(1, "load", "-i", "does-not-exist", open)
		if !strings.Contains(r.stderr, "does-not-exist") {
			t.Errorf("the error does not name the missing interface: %s", r)
		}
		list := f.list()
		list.wantChain(t, "INPUT", "-A INPUT -p tcp --dport 22 -j ACCEPT")
		list.wantPolicy(t, "INPUT", "DROP")
		after := f.status()
		if after.Generation != before.Generation || len(after.Interfaces) != 1 || after.Interfaces[l.srvIf].Mode != "native" {
			t.Errorf("status changed by a failed load:\nbefore %s\nafter %s", before.raw, after.raw)
		}
		checkTCP(t, "after the failed load",
			tcpProbe{from: l.cli, addr: hostPort(l.srv4, 22), ok: true},
			tcpProbe{from: l.cli, addr: hostPort(l.srv4, 8080), ok: false})
		wantStatusNamesAttachedProgram(t, f, l.srvIf)
	})
}

// TestEmptyRuleFileRefused: a rule file that says nothing (empty, blank,
// comments, carriage returns) is refused by load and apply with exit
// status 2, changing nothing: nothing loaded, or the rules in force stay
// (shown with traffic). --allow-empty puts it in force.
func TestEmptyRuleFileRefused(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, 22, 8080)
	f := newFW(t, l.srv)
	empties := []string{writeRules(t, "empty.rules"), writeRules(t, "blank.rules", "", "  ", "# nothing yet"), writeRules(t, "cr.rules", "\r", "\r")}
	for _, e := range empties {
		r := f.runWant(2, "load", "-i", l.srvIf, e)
		if !strings.Contains(r.stderr, "--allow-empty") {
			t.Errorf("load %s: %s", e, r)
		}
		f.wantNothingLoaded(l.srvIf)
	}
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "ssh.rules", "-P INPUT DROP", "-A INPUT -p tcp --dport 22 -j ACCEPT"))
	for _, e := range empties {
		f.runWant(2, "apply", e)
		checkTCP(t, "after apply "+e,
			tcpProbe{from: l.cli, addr: hostPort(l.srv4, 22), ok: true},
			tcpProbe{from: l.cli, addr: hostPort(l.srv4, 8080), ok: false})
	}
	f.mustRun("apply", "--allow-empty", empties[0])
	checkTCP(t, "after apply --allow-empty", tcpProbe{from: l.cli, addr: hostPort(l.srv4, 8080), ok: true})
}
