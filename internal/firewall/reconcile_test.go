package firewall

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// desired is a complete configuration as the daemon builds it.
func (e *env) desired(text string, ifaces ...string) Desired {
	d := Desired{Rules: e.parse(text), Options: Options{Malformed: "drop", CTFull: "drop", CTTimeoutsSet: true,
		RejectRate: compile.DefaultRejectRate, RejectBurst: compile.DefaultRejectBurst}}
	for _, n := range ifaces {
		d.Interfaces = append(d.Interfaces, IfaceMode{Name: n, Mode: datapath.ModeGeneric})
	}
	return d
}

func (e *env) reconcile(d Desired) (*Change, error) {
	var ch *Change
	err := e.ns.Do(func() (err error) {
		ch, err = Reconcile(e.p, d)
		return err
	})
	return ch, err
}

// ids are the stable ids of the rules in force.
func (e *env) ids() []uint32 {
	e.t.Helper()
	st, _, ids, err := loadRules(e.p)
	if err != nil || st == nil {
		e.t.Fatalf("state: %v", err)
	}
	return ids
}

// TestReconcile: the daemon's path. A configuration is loaded once; the
// same one again changes nothing (no new generation, no program load);
// edited rules or settings are applied with the ids of unchanged rules
// kept; other table sizes are refused with nothing changed; another
// program version is loaded again; interfaces come and go with the
// configuration.
func TestReconcile(t *testing.T) {
	e := newEnv(t)
	testutil.VethPair(t, e.ns, "fw1", []string{"10.200.10.1/24"}, testutil.NewNetNS(t), "peer1", []string{"10.200.10.2/24"})
	const rs1 = "-A INPUT -p tcp --dport 22 -j ACCEPT\n-A INPUT -p udp --dport 53 -j DROP\n"
	ch := must[*Change](t)(e.reconcile(e.desired(rs1, "fw0")))
	if !ch.Loaded || ch.Result == nil || e.generation() != 1 {
		t.Fatalf("first reconcile: %+v, generation %d", ch, e.generation())
	}
	ch = must[*Change](t)(e.reconcile(e.desired(rs1, "fw0")))
	if ch.Changed() || e.generation() != 1 {
		t.Errorf("unchanged configuration: %+v (why %v), generation %d", ch, ch.Why, e.generation())
	}
	before := e.ids()
	ch = must[*Change](t)(e.reconcile(e.desired("-A INPUT -p icmp -j ACCEPT\n"+rs1, "fw0")))
	if ch.Loaded || !ch.Applied || e.generation() != 2 || !slices.Equal(ch.Why, []string{"rules"}) {
		t.Errorf("edited rules: %+v, generation %d", ch, e.generation())
	}
	if after := e.ids(); !slices.Equal(after[1:], before) {
		t.Errorf("ids of unchanged rules: %v, then %v", before, after)
	}
	d := e.desired("-A INPUT -p icmp -j ACCEPT\n"+rs1, "fw0")
	d.Options.CTTimeouts = must[conntrack.Timeouts](t)(conntrack.ParseTimeouts([]string{"udp=5"}))
	ch = must[*Change](t)(e.reconcile(d))
	if !ch.Applied || !slices.Equal(ch.Why, []string{"conntrack timeouts"}) {
		t.Errorf("edited timeouts: %+v", ch)
	}
	gen := e.generation()
	d.Options.CTMax = 1024
	ch = must[*Change](t)(e.reconcile(d))
	if !ch.Loaded || !slices.Equal(ch.Why, []string{"conntrack max 1024 (loaded: 65536)"}) || e.generation() != gen+1 {
		t.Errorf("another table size: %+v, generation %d (was %d), want a load", ch, e.generation(), gen)
	}
	if lim, err := datapath.PinnedLimits(e.p.PinDir); err != nil || lim.Conntrack != 1024 {
		t.Errorf("conntrack table after the load: %+v %v, want 1024 entries", lim, err)
	}
	gen = e.generation()
	d.Options.CTMax = 0

	// Another program version pinned: loaded again, rules kept.
	unlock := must[func()](t)(lock(e.p))
	st, err := loadState(e.p)
	if err != nil {
		t.Fatal(err)
	}
	st.Program = "older"
	if err := st.save(e.p); err != nil {
		t.Fatal(err)
	}
	unlock()
	ch = must[*Change](t)(e.reconcile(d))
	if !ch.Loaded || !slices.Equal(ch.Why, []string{"program upgrade"}) || e.generation() != gen+1 {
		t.Errorf("upgrade: %+v, generation %d", ch, e.generation())
	}

	// A second interface, then back to one.
	ch = must[*Change](t)(e.reconcile(e.desired(rs1, "fw0", "fw1")))
	if !ch.Loaded || len(ch.Result.Attached) != 2 {
		t.Errorf("second interface: %+v", ch)
	}
	ch = must[*Change](t)(e.reconcile(e.desired(rs1, "fw1")))
	if !slices.Equal(ch.Detached, []string{"fw0"}) || ch.Loaded || ch.Applied {
		t.Errorf("interface removed: %+v", ch)
	}
	if st, err = loadState(e.p); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Interfaces["fw0"]; ok || len(st.Interfaces) != 1 {
		t.Errorf("interfaces in force: %v", st.Interfaces)
	}
}

// TestSetSync: a sets file is kept in force exactly: new elements added,
// those no longer listed removed, sets it does not name left alone.
func TestSetSync(t *testing.T) {
	e := newEnv(t)
	sync := func(src string) *SyncResult {
		var res *SyncResult
		e.sets(func(s *Sets) {
			existing := func(name string) (rules.SetKind, bool) {
				k, err := s.Kind(name)
				return k, err == nil
			}
			r := must[*rules.SetRestore](t)(rules.ParseIpsetSave("s", []byte(src), existing))
			res = must[*SyncResult](t)(s.Sync(r))
		})
		return res
	}
	elems := func(name string) (out []string) {
		e.sets(func(s *Sets) { out = must[*SetContents](t)(s.Get(name)).Elements })
		return out
	}
	res := sync("create blk hash:net family inet maxelem 100\nadd blk 10.0.0.0/8\nadd blk 192.0.2.0/24\ncreate other hash:ip\nadd other 10.9.9.9\n")
	if res.Added != 3 || res.Removed != 0 {
		t.Errorf("first sync: %+v", res)
	}
	res = sync("create blk hash:net family inet maxelem 100\nadd blk 192.0.2.0/24\nadd blk 198.51.100.0/24\n")
	if res.Added != 1 || res.Skipped != 1 || res.Removed != 1 {
		t.Errorf("second sync: %+v", res)
	}
	if got := elems("blk"); !slices.Equal(got, []string{"192.0.2.0/24", "198.51.100.0/24"}) {
		t.Errorf("blk holds %v", got)
	}
	if got := elems("other"); !slices.Equal(got, []string{"10.9.9.9"}) {
		t.Errorf("a set the file does not name changed: %v", got)
	}
	res = sync("create blk hash:net family inet maxelem 100\n")
	if res.Removed != 2 || len(elems("blk")) != 0 {
		t.Errorf("emptied: %+v, %v", res, elems("blk"))
	}
}

// TestReconcileRecordLost: the daemon replaces the rules of a firewall
// whose record is lost in place, and says why.
func TestReconcileRecordLost(t *testing.T) {
	e := newEnv(t)
	const rs = "-P INPUT DROP\n-A INPUT -p udp --dport 1001 -j ACCEPT\n"
	must[*Change](t)(e.reconcile(e.desired(rs, "fw0")))
	if err := os.Remove(e.p.StateFile()); err != nil {
		t.Fatal(err)
	}
	ch := must[*Change](t)(e.reconcile(e.desired(rs, "fw0")))
	if !ch.Loaded || len(ch.Why) != 1 || !strings.Contains(ch.Why[0], "record of the rules in force is lost") {
		t.Errorf("reconcile with the record lost: %+v (why %q)", ch, ch.Why)
	}
	f := e.open()
	defer f.Close()
	if got := e.agree(f, []uint16{1001, 1002}); !slices.Equal(got, []string{"-A INPUT -p udp --dport 1001 -j ACCEPT"}) {
		t.Errorf("listed %q", got)
	}
}

// TestReconcilePriorityCPUs: a configuration's priority_cpus changed on
// reload is put in force (the daemon used to keep the loaded ones), with
// the rules, all or nothing: CPUs that are not online, or a rule set that
// fails to compile, leave the CPUs, the rules and the record as they were.
func TestReconcilePriorityCPUs(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs: CPU 1 takes the bulk class")
	}
	e := newEnv(t)
	const rs1 = "-A INPUT -p tcp --dport 22 -j ACCEPT\n-t xdpfw-priority -A PRIORITY -p udp --dport 319 -j HIGH\n"
	inForce := func() (spec string, cpus []int) {
		t.Helper()
		f := e.open()
		defer f.Close()
		cpus, err := f.dp.PriorityInForce()
		if err != nil {
			t.Fatal(err)
		}
		return f.st.PriorityCPUs, cpus
	}
	want := func(what, spec string, cpus []int) {
		t.Helper()
		if s, c := inForce(); s != spec || !slices.Equal(c, cpus) {
			t.Errorf("%s: priority CPUs %q %v in force, want %q %v", what, s, c, spec, cpus)
		}
	}
	d := e.desired(rs1, "fw0")
	d.Options.PriorityCPUs = "none"
	must[*Change](t)(e.reconcile(d))
	want("loaded with none", "none", []int{})
	gen := e.generation()

	d.Options.PriorityCPUs = "1"
	ch := must[*Change](t)(e.reconcile(d))
	if ch.Loaded || !ch.Applied || !slices.Equal(ch.Why, []string{"priority CPUs"}) || e.generation() != gen+1 {
		t.Errorf("priority_cpus changed: %+v, generation %d", ch, e.generation())
	}
	want("reloaded with 1", "1", []int{1})
	ch = must[*Change](t)(e.reconcile(d))
	if ch.Changed() {
		t.Errorf("unchanged priority_cpus: %+v (why %v)", ch, ch.Why)
	}

	// Refused, nothing changed: a CPU that is not online (with new rules);
	// new CPUs with rules that do not compile (a set that does not exist).
	gen = e.generation()
	bad := e.desired("-A INPUT -p udp -j DROP\n"+rs1, "fw0")
	bad.Options.PriorityCPUs = "63"
	if _, err := e.reconcile(bad); err == nil || !strings.Contains(err.Error(), "CPU 63 is not online") ||
		!strings.Contains(err.Error(), "nothing changed") {
		t.Errorf("priority_cpus 63: %v", err)
	}
	bad = e.desired("-A INPUT -m set --match-set nosuch src -j DROP\n"+rs1, "fw0")
	bad.Options.PriorityCPUs = "0-1"
	if _, err := e.reconcile(bad); err == nil || !strings.Contains(err.Error(), `set "nosuch" does not exist`) {
		t.Errorf("priority_cpus 0-1 with a rule set that fails: %v", err)
	}
	want("after the refusals", "1", []int{1})
	if e.generation() != gen {
		t.Errorf("generation %d after the refusals, want %d", e.generation(), gen)
	}
	if _, rs, _, err := loadRules(e.p); err != nil || rs.String() != e.parse(rs1).String() {
		t.Errorf("rules in force after the refusals (%v):\n%s", err, rs)
	}
}
