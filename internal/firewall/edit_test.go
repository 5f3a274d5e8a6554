package firewall

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// open opens the firewall (in the namespace: traces resolve fw0 there).
func (e *env) open() *Firewall {
	e.t.Helper()
	f, err := Open(e.p)
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

// trace traces a udp packet to dport arriving on fw0.
func (e *env) trace(f *Firewall, dport uint16) *TraceResult {
	e.t.Helper()
	p := packet.Packet{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.200.9.2"), Dst: netip.MustParseAddr("10.200.9.1"), Proto: packet.ProtoUDP,
		SPort: 40000, DPort: dport, Payload: []byte("x")}
	var tr *TraceResult
	err := e.ns.Do(func() (err error) {
		if tr, err = f.Trace(p.Bytes(), TraceOptions{Iface: "fw0", CTState: datapath.NoCTState}); err != nil {
			return err
		}
		// A trace counts nothing: the packet itself goes through the live
		// program too, arriving on fw0, so that counters count it.
		nl, err := net.InterfaceByName("fw0")
		if err != nil {
			return err
		}
		ctx := struct{ Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32 }{
			DataEnd: uint32(len(p.Bytes())), IngressIfindex: uint32(nl.Index)}
		_, err = f.Datapath().Program().Run(&ebpf.RunOptions{Data: p.Bytes(), Context: ctx})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return tr
}

// decides traces a udp packet to dport and returns the deciding rule's text
// ("policy" for the policy) and whether it passed.
func (e *env) decides(f *Firewall, dport uint16) (string, bool) {
	e.t.Helper()
	tr := e.trace(f, dport)
	if tr.Policy {
		return "policy", tr.Verdict == "XDP_PASS"
	}
	return tr.Rule, tr.Verdict == "XDP_PASS"
}

// testChains are the user chains the rules of e.rule may name (the chain
// tests declare them).
var testChains = []rules.ChainDecl{{Name: "a"}, {Name: "b"}, {Name: "reject"}}

func (e *env) rule(text string) rules.Rule {
	e.t.Helper()
	r, err := parseRule("t", text, testChains)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestEditPaths: an edit goes through the delta stage and Rebuild folds it
// (same generation, same ids); an edit that does not fit is rebuilt at
// once; one made while the kernel holds another generation than the state
// says, or on rules read from a version 1 state, is compiled in full.
// Each time, the traced verdicts are those of the edited rule set.
func TestEditPaths(t *testing.T) {
	e := newEnv(t)
	if _, err := e.load("-P INPUT DROP\n-A INPUT -p udp --dport 1 -j ACCEPT\n-A INPUT -p udp --dport 2 -j ACCEPT\n"); err != nil {
		t.Fatal(err)
	}
	three := "-A INPUT -p udp --dport 3 -j ACCEPT"
	f := e.open()
	res, err := f.Add(e.rule(three), 0)
	if err != nil || !res.Delta || res.Rebuilt || !f.Pending() || res.Generation != 2 {
		t.Fatalf("add: %+v %v, pending %v; want it in the delta stage, generation 2", res, err, f.Pending())
	}
	if r, pass := e.decides(f, 3); r != three || !pass {
		t.Errorf("udp/3 with the add in the delta stage: %q %v", r, pass)
	}
	id := f.rs.ov.Added[0].ID
	if res, err = f.Rebuild(); err != nil || !res.Rebuilt || res.Generation != 2 || f.Pending() {
		t.Fatalf("rebuild: %+v %v; want a rebuild of generation 2, nothing pending", res, err)
	}
	if r, pass := e.decides(f, 3); r != three || !pass {
		t.Errorf("udp/3 after the rebuild: %q %v", r, pass)
	}
	if l, err := f.List(); err != nil || len(l.Rules) != 3 || l.Rules[2].ID != id || l.Rules[2].Counter.Packets != 2 {
		t.Errorf("after the rebuild: %+v %v; want rule 3 with id %d and the 2 packets sent", l, err, id)
	}
	if res, err = f.Rebuild(); err != nil || res.Rebuilt {
		t.Errorf("rebuild with nothing pending: %+v %v", res, err)
	}
	f.Close()

	// More than the delta stage holds: folded into a rebuild at once.
	f = e.open()
	for i := 0; i <= compile.DeltaMax; i++ {
		res, err = f.Add(e.rule(fmt.Sprintf("-A INPUT -p udp --dport %d -j DROP", 100+i)), 1)
		if err != nil {
			t.Fatal(err)
		}
		if i < compile.DeltaMax && !res.Delta || i == compile.DeltaMax && (res.Delta || !res.Rebuilt || f.Pending()) {
			t.Fatalf("add %d: %+v, pending %v", i+1, res, f.Pending())
		}
	}
	if r, pass := e.decides(f, 100); r != "-A INPUT -p udp --dport 100 -j DROP" || pass {
		t.Errorf("udp/100 after the delta stage filled up: %q %v", r, pass)
	}
	f.Close()

	// The kernel holds a generation the state does not know (as after a
	// crash between installing and saving): the edit is compiled in full.
	f = e.open()
	rogue, _, err := compile.Compile(compile.Input{RuleSet: e.parse("-A INPUT -p udp -j ACCEPT\n"), IDs: []uint32{16}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Datapath().InstallStamped(rogue, 9999); err != nil {
		t.Fatal(err)
	}
	four := "-A INPUT -p udp --dport 4 -j ACCEPT"
	if res, err = f.Add(e.rule(four), 0); err != nil || res.Delta || !res.Rebuilt {
		t.Fatalf("add on a stale base: %+v %v; want a full build", res, err)
	}
	for port, want := range map[uint16]bool{1: true, 4: true, 5: false, 100: false} {
		if _, pass := e.decides(f, port); pass != want {
			t.Errorf("udp/%d after the full build: pass %v, want %v", port, pass, want)
		}
	}
	f.Close()

	// A version 1 state: the rules are compiled in full, then written as a
	// base, and the next edit uses the delta stage again.
	st, err := loadState(e.p)
	if err != nil {
		t.Fatal(err)
	}
	st.Version, st.Rules, st.IDs, st.Base, st.Delta = 1, "-P INPUT DROP\n"+four+"\n", []uint32{16}, "", nil
	if err := st.save(e.p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.p.StateDir + "/" + baseName(st.Builds)); !os.IsNotExist(err) {
		t.Fatalf("the old base should be gone: %v", err)
	}
	f = e.open()
	if res, err = f.Add(e.rule(three), 0); err != nil || res.Delta || !res.Rebuilt {
		t.Fatalf("add on a version 1 state: %+v %v; want a full build", res, err)
	}
	for port, want := range map[uint16]bool{1: false, 3: true, 4: true} {
		if _, pass := e.decides(f, port); pass != want {
			t.Errorf("udp/%d after the version 1 state's edit: pass %v, want %v", port, pass, want)
		}
	}
	f.Close()
	f = e.open()
	defer f.Close()
	if f.st.Version != stateVersion || !f.rs.base.compiled {
		t.Fatalf("state version %d, compiled base %v: want version 3 with a compiled base", f.st.Version, f.rs.base.compiled)
	}
	if res, _, err = f.Delete(rules.ChainInput, 1); err != nil || !res.Delta {
		t.Fatalf("delete after the migration: %+v %v; want the delta stage", res, err)
	}
	if r, pass := e.decides(f, 4); r != "policy" || pass {
		t.Errorf("udp/4 after deleting its rule: %q %v", r, pass)
	}
}

// traceLogs traces a udp packet to dport and returns how many LOG rules
// logged it and whether its deciding rule did (--log).
func (e *env) traceLogs(f *Firewall, dport uint16) (int, bool) {
	e.t.Helper()
	tr := e.trace(f, dport)
	return tr.LogRules, tr.LogSelf
}

// TestEditLogs: an edit whose rule set logs before or after it (-j LOG,
// --log) is compiled in full, never put in the delta stage: adding a LOG
// rule, adding a --log rule (its budget installed: no event goes
// unbudgeted), editing next to them, and deleting the last one. Once no
// rule logs, edits use the delta stage again. Each time, traces show the
// edited rule set's verdicts and LOG notes.
func TestEditLogs(t *testing.T) {
	e := newEnv(t)
	if _, err := e.load("-P INPUT DROP\n-A INPUT -p udp --dport 1 -j ACCEPT\n"); err != nil {
		t.Fatal(err)
	}
	f := e.open()
	defer func() { f.Close() }()
	full := func(what string, res *Result, err error) {
		t.Helper()
		if err != nil || res.Delta || !res.Rebuilt || f.Pending() {
			t.Fatalf("%s: %+v %v, pending %v; want a full build, nothing in the delta stage", what, res, err, f.Pending())
		}
		if in, err := f.Datapath().DeltaInForce(); err != nil || in {
			t.Fatalf("%s: a delta stage is in force (%v)", what, err)
		}
	}
	logRule := "-A INPUT -p udp --dport 5 -j LOG"
	res, err := f.Add(e.rule(logRule), 1)
	full("add a LOG rule", res, err)
	if n, self := e.traceLogs(f, 5); n != 1 || self {
		t.Errorf("udp/5 after adding the LOG rule: %d LOG rules, --log %v; want 1, false", n, self)
	}
	if r, pass := e.decides(f, 5); r != "policy" || pass {
		t.Errorf("udp/5: %q %v; the LOG rule must not decide", r, pass)
	}
	// An edit that logs nothing itself, on a rule set that logs.
	two := "-A INPUT -p udp --dport 2 -j ACCEPT"
	res, err = f.Add(e.rule(two), 0)
	full("add next to a LOG rule", res, err)
	if r, pass := e.decides(f, 2); r != two || !pass {
		t.Errorf("udp/2: %q %v", r, pass)
	}
	// A deciding rule with --log: its budget comes with the full build.
	logged := "-A INPUT -p udp --dport 5 -j ACCEPT --log"
	res, err = f.Add(e.rule(logged), 0)
	full("add a --log rule", res, err)
	if n, self := e.traceLogs(f, 5); n != 1 || !self {
		t.Errorf("udp/5 after adding the --log rule: %d LOG rules, --log %v; want 1, true", n, self)
	}
	if r, pass := e.decides(f, 5); r != logged || !pass {
		t.Errorf("udp/5: %q %v, want %q", r, pass, logged)
	}
	l, err := f.List()
	if err != nil {
		t.Fatal(err)
	}
	ls, err := f.Datapath().LogStats()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range l.Rules {
		if _, ok := ls.Rules[r.ID]; ok != (r.Rule == logRule || r.Rule == logged) {
			t.Errorf("rule %q (id %d): log budget %v", r.Rule, r.ID, ok)
		}
	}
	if ls.Unbudgeted != 0 {
		t.Errorf("%d events of rules without a log budget", ls.Unbudgeted)
	}
	// Delete both logging rules: the first delete still logs before it.
	res, _, err = f.Delete(rules.ChainInput, 1)
	full("delete the LOG rule", res, err)
	if n, self := e.traceLogs(f, 5); n != 0 || !self {
		t.Errorf("udp/5 after deleting the LOG rule: %d LOG rules, --log %v; want 0, true", n, self)
	}
	res, err = f.DeleteSpec(e.rule(logged))
	full("delete the --log rule", res, err)
	if n, self := e.traceLogs(f, 5); n != 0 || self {
		t.Errorf("udp/5 after deleting the --log rule: %d LOG rules, --log %v", n, self)
	}
	// Nothing logs any more: the next edit uses the delta stage again.
	res, err = f.Add(e.rule("-A INPUT -p udp --dport 3 -j ACCEPT"), 0)
	if err != nil || !res.Delta {
		t.Fatalf("add once nothing logs: %+v %v; want the delta stage", res, err)
	}
	// And adding a LOG rule while an edit waits folds both in a full build.
	res, err = f.Add(e.rule(logRule), 1)
	full("add a LOG rule with an edit pending", res, err)
	for port, want := range map[uint16]bool{1: true, 2: true, 3: true, 5: false} {
		if _, pass := e.decides(f, port); pass != want {
			t.Errorf("udp/%d at the end: pass %v, want %v", port, pass, want)
		}
	}
	if n, _ := e.traceLogs(f, 5); n != 1 {
		t.Errorf("udp/5 at the end: %d LOG rules, want 1", n)
	}
	f.Close()
	f = e.open()
	if got := f.rs.logRules(); got != 1 || !f.rs.logs() {
		t.Errorf("reopened: %d rules log (logs %v), want 1", got, f.rs.logs())
	}
}

// TestEditStateMatches: edits of rule sets with -m limit or -m recent
// (before or after the edit) are compiled in full (their buckets and list
// settings come with full builds), and the added rule works at once.
func TestEditStateMatches(t *testing.T) {
	e := newEnv(t)
	if _, err := e.load("-P INPUT DROP\n-A INPUT -p udp --dport 1 -j ACCEPT\n"); err != nil {
		t.Fatal(err)
	}
	f := e.open()
	defer func() { f.Close() }()
	for _, text := range []string{
		"-A INPUT -p udp --dport 7 -m limit --limit 3/hour -j ACCEPT",
		"-A INPUT -p udp --dport 8 -m recent --set --name X -j ACCEPT",
	} {
		res, err := f.Add(e.rule(text), 0)
		if err != nil || res.Delta || !res.Rebuilt {
			t.Fatalf("add %q: %+v %v; want a full build", text, res, err)
		}
		if in, err := f.Datapath().DeltaInForce(); err != nil || in {
			t.Fatalf("add %q: a delta stage is in force (%v)", text, err)
		}
	}
	for port, want := range map[uint16]string{
		7: "-A INPUT -p udp --dport 7 -m limit --limit 3/hour -j ACCEPT",
		8: "-A INPUT -p udp --dport 8 -m recent --set --name X --rsource -j ACCEPT",
	} {
		if r, pass := e.decides(f, port); r != want || !pass {
			t.Errorf("udp/%d: %q %v, want %q", port, r, pass, want)
		}
	}
	// An edit that has no state itself, on a rule set that has some.
	res, err := f.Add(e.rule("-A INPUT -p udp --dport 2 -j ACCEPT"), 0)
	if err != nil || res.Delta {
		t.Fatalf("add next to them: %+v %v; want a full build", res, err)
	}
}
