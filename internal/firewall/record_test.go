package firewall

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// The crash tests run each change in a child process (this test binary,
// XDPFW_TEST_CHILD naming the change) killed with SIGKILL at a named step
// (XDPFW_TEST_CRASH, record.go crashAt), then check that what list says,
// what trace names and what the program really does agree.

// childMain runs one change as the CLI would (an edit is rebuilt right
// after), in the pin and state directories of the environment, and exits.
func childMain(op string) int {
	p := Paths{PinDir: os.Getenv("XDPFW_PIN_DIR"), StateDir: os.Getenv("XDPFW_STATE_DIR")}
	err := func() error {
		verb, arg, _ := strings.Cut(op, " ")
		var opt Options
		if verb == "loadct" { // "loadct N RULES": load with --ct-max N
			n, rest, _ := strings.Cut(arg, " ")
			ct, err := strconv.Atoi(n)
			if err != nil {
				return err
			}
			verb, arg, opt.CTMax = "load", rest, ct
		}
		if verb == "load" { // run in the test's namespace, which has fw0
			rs, err := rules.Parse("child.rules", []byte(strings.ReplaceAll(arg, ";", "\n")), rules.ParseOptions{})
			if err != nil {
				return err
			}
			_, err = Load(p, []string{"fw0"}, datapath.ModeGeneric, rs, opt)
			return err
		}
		f, err := Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		switch verb {
		case "apply":
			rs, err := rules.Parse("child.rules", []byte(strings.ReplaceAll(arg, ";", "\n")), rules.ParseOptions{})
			if err != nil {
				return err
			}
			_, err = f.Apply(rs, Options{})
			return err
		case "add":
			r, err := parseRule("child", arg, nil)
			if err != nil {
				return err
			}
			_, err = f.Add(r, 0)
		case "delete":
			n, _ := strconv.Atoi(arg)
			_, _, err = f.Delete(rules.ChainInput, n)
		default:
			return fmt.Errorf("no such change %q", op)
		}
		if err != nil {
			return err
		}
		_, err = f.Rebuild()
		return err
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child runs op in a child process that crashes at step ("": it does
// not) and reports whether it was killed.
func (e *env) child(op, step string) bool {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "XDPFW_TEST_CHILD="+op, "XDPFW_TEST_CRASH="+step,
		"XDPFW_PIN_DIR="+e.p.PinDir, "XDPFW_STATE_DIR="+e.p.StateDir)
	var (
		out []byte
		err error
	)
	if nsErr := e.ns.Do(func() error { // the child inherits the namespace of the thread that starts it
		out, err = cmd.CombinedOutput()
		return nil
	}); nsErr != nil {
		e.t.Fatal(nsErr)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	if err != nil {
		e.t.Fatalf("%s (crash at %q): %v\n%s", op, step, err, out)
	}
	return false
}

// ruleSpec reads "--dport N ... -j VERDICT" from the rules of the tests.
var ruleSpec = regexp.MustCompile(`--dport (\d+) .*-j (ACCEPT|DROP)`)

// agree checks that the listing, trace and the program agree on a udp
// packet to every port in ports, and returns the rules listed.
func (e *env) agree(f *Firewall, ports []uint16) []string {
	e.t.Helper()
	l, err := f.List()
	if err != nil {
		e.t.Fatal(err)
	}
	var listed []string
	for _, r := range l.Rules {
		listed = append(listed, r.Rule)
	}
	for _, port := range ports {
		// What the listing says: the first rule for port, else the policy.
		wantRule, wantPass := "policy", l.Policies[0].Verdict == "ACCEPT"
		for _, r := range l.Rules {
			if m := ruleSpec.FindStringSubmatch(r.Rule); r.Chain == "INPUT" && m != nil && m[1] == strconv.Itoa(int(port)) {
				wantRule, wantPass = r.Rule, m[2] == "ACCEPT"
				break
			}
		}
		if gotRule, gotPass := e.decides(f, port); gotRule != wantRule || gotPass != wantPass {
			e.t.Errorf("port %d: trace: %q, pass %v; list says %q, pass %v", port, gotRule, gotPass, wantRule, wantPass)
		}
		if pass := e.run(f, port); pass != wantPass {
			e.t.Errorf("port %d: the program passes %v; list says %v (%q)", port, pass, wantPass, wantRule)
		}
	}
	return listed
}

// run runs a udp packet to dport through the program as the NIC would
// hand it (BPF_PROG_TEST_RUN, no trace) and says whether it passed.
func (e *env) run(f *Firewall, dport uint16) bool {
	e.t.Helper()
	p := packet.Packet{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.200.9.2"), Dst: netip.MustParseAddr("10.200.9.1"), Proto: packet.ProtoUDP,
		SPort: 40000, DPort: dport, Payload: []byte("x")}
	ret, err := f.dp.Program().Run(&ebpf.RunOptions{Data: p.Bytes()})
	if err != nil {
		e.t.Fatal(err)
	}
	return ret == datapath.XDPPass
}

// settled checks that a locked open finished what a killed change left:
// no pending record, no temporary file, one base.
func (e *env) settled() {
	e.t.Helper()
	ents, err := os.ReadDir(e.p.StateDir)
	if err != nil {
		e.t.Fatal(err)
	}
	bases := 0
	for _, x := range ents {
		n := x.Name()
		switch {
		case n == nextName || strings.HasPrefix(n, tmpPrefix):
			e.t.Errorf("left after a locked open: %s", n)
		case strings.HasPrefix(n, "rules-"):
			bases++
		}
	}
	if bases != 1 {
		e.t.Errorf("%d base files, want 1", bases)
	}
}

// TestCrashConsistency kills apply, add, delete and load at every step of
// their change (issue 14.9): afterwards list, trace and the program agree,
// for a reader without the lock and after a locked open alike; the
// change is in force exactly when its switch happened; and the next
// change builds on what the kernel has in force.
func TestCrashConsistency(t *testing.T) {
	e := newEnv(t)
	const base = "-P INPUT DROP\n" +
		"-A INPUT -p udp --dport 1001 -j ACCEPT\n" +
		"-A INPUT -p udp --dport 1002 -j DROP\n" +
		"-A INPUT -p udp --dport 1003 -j ACCEPT\n"
	if _, err := e.load(base); err != nil {
		t.Fatal(err)
	}
	ports := []uint16{1001, 1002, 1003, 1004, 1005}
	reset := func() []string {
		t.Helper()
		f := e.open()
		defer f.Close()
		if _, err := f.Apply(e.parse(base), Options{}); err != nil {
			t.Fatal(err)
		}
		return e.agree(f, ports)
	}
	before := reset()
	changes := []struct {
		op   string
		want []string // the rules listed once the change is in force
	}{
		{"apply -P INPUT DROP;-A INPUT -p udp --dport 1004 -j ACCEPT;-A INPUT -p udp --dport 1001 -j DROP",
			[]string{"-A INPUT -p udp --dport 1004 -j ACCEPT", "-A INPUT -p udp --dport 1001 -j DROP"}},
		{"add -A INPUT -p udp --dport 1005 -j ACCEPT", append(slices.Clone(before), "-A INPUT -p udp --dport 1005 -j ACCEPT")},
		{"delete 1", before[1:]},
		{"load -P INPUT DROP;-A INPUT -p udp --dport 1005 -j ACCEPT", []string{"-A INPUT -p udp --dport 1005 -j ACCEPT"}},
	}
	// An edit makes two changes: the edit (delta stage), then the
	// rebuild that folds it (":2"); an apply or a load one.
	steps := []string{"recorded", "switched", "committed", "cleaned", "recorded:2", "switched:2", "committed:2", "cleaned:2"}
	for _, c := range changes {
		for _, step := range steps {
			t.Run(strings.Fields(c.op)[0]+"/"+step, func(t *testing.T) {
				e := &env{t: t, p: e.p, ns: e.ns}
				oneChange := strings.HasPrefix(c.op, "apply") || strings.HasPrefix(c.op, "load")
				if !e.child(c.op, step) && !(strings.HasSuffix(step, ":2") && oneChange) {
					t.Fatalf("not killed at %s", step)
				}
				inForce := step != "recorded" // the first switch commits the change
				want := before
				if inForce {
					want = c.want
				}
				ro, err := OpenReadOnly(e.p)
				if err != nil {
					t.Fatalf("read-only open after a crash at %s: %v", step, err)
				}
				if got := e.agree(ro, ports); !slices.Equal(got, want) {
					t.Errorf("read-only list after a crash at %s: %q, want %q", step, got, want)
				}
				ro.Close()
				f := e.open()
				if got := e.agree(f, ports); !slices.Equal(got, want) {
					t.Errorf("list after a crash at %s: %q, want %q", step, got, want)
				}
				f.Close()
				e.settled()
				// The next change builds on it.
				if got := reset(); !slices.Equal(got, before) {
					t.Errorf("after the next change: %q, want %q", got, before)
				}
			})
		}
	}
}

// TestRecordLost: with the record lost or corrupt, the firewall keeps
// filtering and says so (issue 14.11), a failed load leaves it in force
// (14.6), and a load replaces it in place (14.10).
func TestRecordLost(t *testing.T) {
	e := newEnv(t)
	if _, err := e.load("-P INPUT DROP\n-A INPUT -p udp --dport 1001 -j ACCEPT\n"); err != nil {
		t.Fatal(err)
	}
	verdicts := func() [2]bool {
		t.Helper()
		dp, err := datapath.Open(e.p.PinDir)
		if err != nil {
			t.Fatalf("the data plane is gone: %v", err)
		}
		defer dp.Close()
		f := &Firewall{dp: dp}
		return [2]bool{e.run(f, 1001), e.run(f, 1002)}
	}
	if v := verdicts(); v != [2]bool{true, false} {
		t.Fatalf("verdicts %v", v)
	}
	st, err := readRecord(e.p.StateFile())
	if err != nil {
		t.Fatal(err)
	}
	basePath := filepath.Join(e.p.StateDir, st.Base)
	baseData, err := os.ReadFile(basePath)
	if err != nil {
		t.Fatal(err)
	}
	damage := []struct {
		name, what string
		do         func()
	}{
		{"state lost", "lost", func() { os.Remove(e.p.StateFile()) }},
		{"state garbage", "corrupt", func() { os.WriteFile(e.p.StateFile(), []byte("{\"crc32c\": 1, \"state\": {}}"), 0o600) }},
		{"base patched", "corrupt", func() {
			b := slices.Clone(baseData)
			b[len(b)-5] ^= 1
			os.WriteFile(basePath, b, 0o600)
		}},
		{"base lost", "lost", func() { os.Remove(basePath) }},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			e := &env{t: t, p: e.p, ns: e.ns}
			if _, err := e.load("-P INPUT DROP\n-A INPUT -p udp --dport 1001 -j ACCEPT\n"); err != nil {
				t.Fatal(err)
			}
			st, err := readRecord(e.p.StateFile())
			if err != nil {
				t.Fatal(err)
			}
			basePath = filepath.Join(e.p.StateDir, st.Base)
			if baseData, err = os.ReadFile(basePath); err != nil {
				t.Fatal(err)
			}
			f := e.open()
			l, err := f.List()
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			oldID := l.Rules[0].ID
			d.do()
			for name, open := range map[string]func(Paths) (*Firewall, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
				_, err := open(e.p)
				var re *RecordError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), "attached and filtering") ||
					!strings.Contains(err.Error(), "is "+d.what) || errors.Is(err, datapath.ErrNotLoaded) {
					t.Errorf("%s: %v", name, err)
				}
			}
			// A load that fails leaves the firewall in force.
			err = e.ns.Do(func() error {
				_, err := Load(e.p, []string{"nosuch0"}, datapath.ModeGeneric, e.parse("-A INPUT -j ACCEPT\n"), Options{})
				return err
			})
			if err == nil {
				t.Fatal("load on a missing interface succeeded")
			}
			if v := verdicts(); v != [2]bool{true, false} {
				t.Fatalf("after a failed load: verdicts %v, want [true false]", v)
			}
			// A load replaces the rules in place: no moment without them.
			if _, err := e.load("-P INPUT DROP\n-A INPUT -p udp --dport 1002 -j ACCEPT\n"); err != nil {
				t.Fatal(err)
			}
			if v := verdicts(); v != [2]bool{false, true} {
				t.Fatalf("after the load: verdicts %v, want [false true]", v)
			}
			f = e.open()
			defer f.Close()
			if got := e.agree(f, []uint16{1001, 1002}); !slices.Equal(got, []string{"-A INPUT -p udp --dport 1002 -j ACCEPT"}) {
				t.Errorf("listed %q", got)
			}
			// The id the lost rules counted on is not reused (14.14).
			if l, err := f.List(); err != nil || l.Rules[0].ID == oldID {
				t.Errorf("the new rule has id %d, the lost rule had %d (%v)", l.Rules[0].ID, oldID, err)
			}
		})
	}
}

// TestIDsNotReused: a rule id in force is not given to a new rule of the
// same change (issue 14.14): the generation in force counts the removed
// rule on it until the switch, which would show in the new rule's count.
func TestIDsNotReused(t *testing.T) {
	e := newEnv(t)
	if _, err := e.load("-A INPUT -p udp --dport 1001 -j ACCEPT\n-A INPUT -p udp --dport 1002 -j ACCEPT\n"); err != nil {
		t.Fatal(err)
	}
	ids := func(f *Firewall) map[string]uint32 {
		l, err := f.List()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]uint32{}
		for _, r := range l.Rules {
			m[r.Rule] = r.ID
		}
		return m
	}
	f := e.open()
	defer f.Close()
	old := ids(f)
	if _, err := f.Apply(e.parse("-A INPUT -p udp --dport 1001 -j ACCEPT\n-A INPUT -p udp --dport 1003 -j ACCEPT\n"), Options{}); err != nil {
		t.Fatal(err)
	}
	now := ids(f)
	if id := now["-A INPUT -p udp --dport 1003 -j ACCEPT"]; id == old["-A INPUT -p udp --dport 1002 -j ACCEPT"] {
		t.Errorf("apply gave the removed rule's id %d to the new one", id)
	}
	// An edit replacing the rule it added last (both in the delta stage).
	if _, err := f.Add(e.rule("-A INPUT -p udp --dport 1004 -j ACCEPT"), 0); err != nil {
		t.Fatal(err)
	}
	added := ids(f)["-A INPUT -p udp --dport 1004 -j ACCEPT"]
	if _, _, err := f.Replace(3, e.rule("-A INPUT -p udp --dport 1005 -j ACCEPT")); err != nil {
		t.Fatal(err)
	}
	if id := ids(f)["-A INPUT -p udp --dport 1005 -j ACCEPT"]; id == added {
		t.Errorf("replace gave the replaced rule's id %d to the new one", id)
	}
}

// TestStateDirSafety: a state directory others may write, or owned by
// someone else, is refused; a link planted in it is never followed
// (issue 14.18).
func TestStateDirSafety(t *testing.T) {
	dir := t.TempDir()
	p := Paths{StateDir: filepath.Join(dir, "state")}
	if err := os.Mkdir(p.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.StateDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := lock(p); err == nil || !strings.Contains(err.Error(), "group or others") {
		t.Errorf("a world-writable state dir: %v", err)
	}
	if err := os.Chmod(p.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(p.StateDir, 1, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := lock(p); err == nil || !strings.Contains(err.Error(), "owned by uid 1") {
			t.Errorf("a state dir of uid 1: %v", err)
		}
		if err := os.Chown(p.StateDir, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Links planted for the record and the pending one: reads refuse
	// them, writes replace the link, and the victim stays as it was.
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{stateName, nextName, tmpPrefix + stateName + "-1"} {
		if err := os.Symlink(victim, filepath.Join(p.StateDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := loadState(p); err == nil {
		t.Error("a state.json link was followed")
	}
	st := newState()
	st.Sets["x"] = &setState{ID: 1, Type: rules.SetHashIP, Family: "inet", Size: 1}
	if err := st.save(p); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the victim of a planted link was overwritten: %q", b)
	}
	if st, err := loadState(p); err != nil || st.Sets["x"] == nil {
		t.Errorf("read back: %+v %v", st, err)
	}
}

// TestLockWait: a change waiting for the lock says whom it waits for, and
// --wait bounds the wait (issue 14.17).
func TestLockWait(t *testing.T) {
	p := Paths{StateDir: t.TempDir()}
	unlock, err := lock(p)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	holder := fmt.Sprintf("pid %d (", os.Getpid())
	p.LockWait = NoWait
	if _, err := lock(p); err == nil || !strings.Contains(err.Error(), holder) {
		t.Errorf("no wait: %v, want the holder %q", err, holder)
	}
	var told []string
	p.LockWait = lockNotice + 200*time.Millisecond
	p.LockWaiting = func(msg string) { told = append(told, msg) }
	if _, err := lock(p); err == nil || !strings.Contains(err.Error(), "gave up after") {
		t.Errorf("bounded wait: %v", err)
	}
	if len(told) != 1 || !strings.Contains(told[0], "waiting for the xdpfw lock") || !strings.Contains(told[0], holder) {
		t.Errorf("told %q", told)
	}
}

// TestRecordLostSets: after a load replaced a lost record, a new set does
// not take the id of a lost set whose elements are still in the map (its
// rules would match them while the set lists none).
func TestRecordLostSets(t *testing.T) {
	e := newEnv(t)
	kind := rules.SetKind{Type: rules.SetHashIP, Family: rules.FamilyIPv4}
	e.sets(func(s *Sets) {
		must[bool](t)(s.Create("old", SetSpec{Kind: kind}, false))
		must[*SetChange](t)(s.Add("old", prefixes("10.200.9.2/32")))
	})
	if _, err := e.load("-A INPUT -m set --match-set old src -j DROP\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e.p.StateFile()); err != nil {
		t.Fatal(err)
	}
	// Sets made and removed while the record is lost (as the daemon
	// restores its sets before it loads): the firewall stays.
	e.sets(func(s *Sets) {
		must[bool](t)(s.Create("tmp", SetSpec{Kind: kind}, false))
		if err := s.Destroy("tmp"); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := datapath.Open(e.p.PinDir); err != nil {
		t.Fatalf("destroying the last set removed the firewall: %v", err)
	}
	e.sets(func(s *Sets) {
		must[bool](t)(s.Create("mid", SetSpec{Kind: kind}, false))
		if c := must[*SetContents](t)(s.Get("mid")); len(c.Elements) != 0 {
			t.Errorf("a new set holds the lost set's elements: %v", c.Elements)
		}
	})
	// The load that replaces the record keeps them.
	if _, err := e.load("-A INPUT -m set --match-set mid src -j DROP\n"); err != nil {
		t.Fatal(err)
	}
	e.sets(func(s *Sets) {
		must[bool](t)(s.Create("new", SetSpec{Kind: kind}, false))
		if c := must[*SetContents](t)(s.Get("new")); len(c.Elements) != 0 {
			t.Errorf("a new set holds the lost set's elements: %v", c.Elements)
		}
	})
}
