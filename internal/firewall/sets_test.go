package firewall

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

func TestMain(m *testing.M) {
	if op := os.Getenv("XDPFW_TEST_CHILD"); op != "" { // record_test.go
		os.Exit(childMain(op))
	}
	os.Exit(testutil.RunWithFDCheck(m))
}

var (
	net4 = rules.SetKind{Type: rules.SetHashNet, Family: rules.FamilyIPv4}
	ip6  = rules.SetKind{Type: rules.SetHashIP, Family: rules.FamilyIPv6}
)

// env is a private bpffs and state dir, and a namespace with a veth end
// ("fw0") to attach to.
type env struct {
	t  *testing.T
	p  Paths
	ns *testutil.NetNS
}

func newEnv(t *testing.T) *env {
	testutil.RequireRoot(t)
	e := &env{t: t, p: Paths{PinDir: filepath.Join(testutil.BPFFS(t), "xdpfw"), StateDir: t.TempDir()},
		ns: testutil.NewNetNS(t)}
	testutil.VethPair(t, e.ns, "fw0", []string{"10.200.9.1/24"}, testutil.NewNetNS(t), "peer0", []string{"10.200.9.2/24"})
	t.Cleanup(func() {
		if err := Teardown(e.p); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return e
}

func (e *env) parse(text string) *rules.RuleSet {
	e.t.Helper()
	rs, err := rules.Parse("t.rules", []byte(text), rules.ParseOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

func (e *env) load(text string) (*Result, error) {
	var res *Result
	err := e.ns.Do(func() (err error) {
		res, err = Load(e.p, []string{"fw0"}, datapath.ModeGeneric, e.parse(text), Options{})
		return err
	})
	return res, err
}

// sets runs fn on the open sets.
func (e *env) sets(fn func(s *Sets)) {
	e.t.Helper()
	s, err := OpenSets(e.p)
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close()
	fn(s)
}

// generation is the generation in force (0: not loaded).
func (e *env) generation() uint64 {
	e.t.Helper()
	st, err := loadState(e.p)
	if err != nil {
		e.t.Fatal(err)
	}
	if st == nil {
		return 0
	}
	return st.Generation
}

func (e *env) pins() []string {
	ents, _ := os.ReadDir(e.p.PinDir)
	var out []string
	for _, x := range ents {
		out = append(out, x.Name())
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// must[T](t)(f()) is f's value; the test fails if f fails.
func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestSetsBeforeLoad: sets are made and filled before anything is loaded
// (only the set map is pinned); a load of rules naming a missing set fails
// at the set name and changes nothing; a load naming existing sets uses
// them; detaching the last interface keeps them, Teardown removes them.
func TestSetsBeforeLoad(t *testing.T) {
	e := newEnv(t)
	e.sets(func(s *Sets) {
		if l := s.List(); len(l) != 0 {
			t.Fatalf("sets before any: %v", l)
		}
		if created := must[bool](t)(s.Create("blk", SetSpec{Kind: net4}, false)); !created {
			t.Fatal("not created")
		}
		must[bool](t)(s.Create("six", SetSpec{Kind: ip6, Size: 10}, false))
		must[*SetChange](t)(s.Add("blk", prefixes("10.0.0.0/8", "192.0.2.7/32")))
	})
	if pins := e.pins(); !slices.Equal(pins, []string{"fw_sets"}) {
		t.Errorf("pinned before load: %v", pins)
	}
	if _, err := Open(e.p); !errors.Is(err, datapath.ErrNotLoaded) {
		t.Errorf("rules commands before load: %v", err)
	}

	_, err := e.load("-P INPUT ACCEPT\n-A INPUT -m set --match-set blk src -j DROP\n-A INPUT -m set --match-set nope dst -j DROP\n")
	var re *rules.Error
	if !errors.As(err, &re) || re.Pos.String() != "t.rules:3:29" || !strings.Contains(err.Error(), `set "nope" does not exist`) {
		t.Fatalf("load naming a missing set: %v", err)
	}
	if pins := e.pins(); !slices.Equal(pins, []string{"fw_sets"}) {
		t.Errorf("pinned after a failed load: %v", pins)
	}
	e.sets(func(s *Sets) {
		if c := must[*SetContents](t)(s.Get("blk")); c.Count != 2 || !slices.Equal(c.Elements, []string{"10.0.0.0/8", "192.0.2.7"}) {
			t.Errorf("after a failed load: %+v", c)
		}
	})

	const rule = "-A INPUT -m set --match-set blk src -j DROP"
	must[*Result](t)(e.load("-A INPUT -p tcp --dport 22 -j ACCEPT\n" + rule + "\n"))
	e.sets(func(s *Sets) {
		info := s.List()
		if len(info) != 2 || info[0].Name != "blk" || !slices.Equal(info[0].UsedBy, []SetUser{{"INPUT", 2, rule}}) ||
			len(info[1].UsedBy) != 0 || info[1].Size != 10 || info[1].Family != "inet6" || info[1].Type != "hash:ip" {
			t.Errorf("list: %+v", info)
		}
	})

	err = e.ns.Do(func() error {
		fw, err := Open(e.p)
		if err != nil {
			return err
		}
		defer fw.Close()
		last, err := fw.Detach("fw0")
		if !last {
			t.Error("fw0 was not the last interface")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if pins := e.pins(); !slices.Equal(pins, []string{"fw_sets"}) {
		t.Errorf("pinned after the last detach: %v", pins)
	}
	e.sets(func(s *Sets) {
		c := must[*SetContents](t)(s.Get("blk"))
		if c.Count != 2 || len(c.UsedBy) != 0 {
			t.Errorf("after the last detach: %+v", c)
		}
	})
	// and loads again
	must[*Result](t)(e.load(rule + "\n"))
	if err := Teardown(e.p); err != nil {
		t.Fatal(err)
	}
	if pins := e.pins(); len(pins) != 0 {
		t.Errorf("pinned after teardown: %v", pins)
	}
	e.sets(func(s *Sets) {
		if l := s.List(); len(l) != 0 {
			t.Errorf("sets after teardown: %v", l)
		}
	})
}

// TestSetEdits: element changes never recompile (the generation stays);
// counts are exact; a set's size and the data plane's capacity are
// enforced with nothing added; del is all or nothing unless missingOK;
// destroy is refused while a rule uses the set; set ids are not reused.
func TestSetEdits(t *testing.T) {
	e := newEnv(t)
	e.sets(func(s *Sets) {
		must[bool](t)(s.Create("blk", SetSpec{Kind: net4, Size: 5}, false))
		must[bool](t)(s.Create("other", SetSpec{Kind: net4}, false))
	})
	must[*Result](t)(e.load("-A INPUT -p udp -j ACCEPT\n-A INPUT -m set ! --match-set blk dst -j DROP\n"))
	gen := e.generation()
	e.sets(func(s *Sets) {
		ch := must[*SetChange](t)(s.Add("blk", prefixes("10.0.0.0/8", "10.0.0.0/8", "192.0.2.1/32")))
		if ch.Changed != 2 || ch.Skipped != 0 || ch.Count != 2 || ch.Size != 5 {
			t.Errorf("add: %+v", ch)
		}
		// 10.1.0.0/16 lies in 10.0.0.0/8 but is another element
		ch = must[*SetChange](t)(s.Add("blk", prefixes("10.0.0.0/8", "10.1.0.0/16")))
		if ch.Changed != 1 || ch.Skipped != 1 || ch.Count != 3 {
			t.Errorf("add again: %+v", ch)
		}
		// 3 + 3 new > 5: nothing added
		_, err := s.Add("blk", prefixes("10.1.0.0/16", "1.0.0.0/8", "2.0.0.0/8", "3.0.0.0/8"))
		if err == nil || !strings.Contains(err.Error(), "would hold 6 elements (3 now, 3 new), more than its size 5; nothing was added") {
			t.Errorf("over size: %v", err)
		}
		// the other family, a network in a hash:ip set: refused
		if _, err := s.Add("blk", prefixes("2001:db8::/32")); err == nil {
			t.Error("IPv6 in an inet set accepted")
		}
		// all sets together: capacity
		s.st.Sets["other"].Count = datapath.MaxSetElems - 4 // as if full
		_, err = s.Add("blk", prefixes("1.0.0.0/8", "2.0.0.0/8"))
		if err == nil || !strings.Contains(err.Error(), "all sets together would hold") {
			t.Errorf("over capacity: %v", err)
		}
		s.st.Sets["other"].Count = 0
		c := must[*SetContents](t)(s.Get("blk"))
		if !slices.Equal(c.Elements, []string{"10.0.0.0/8", "10.1.0.0/16", "192.0.2.1"}) {
			t.Errorf("after refused adds: %v", c.Elements)
		}

		// del: all or nothing
		_, err = s.Del("blk", prefixes("10.0.0.0/8", "10.2.0.0/16"), false)
		if err == nil || !strings.Contains(err.Error(), `not in set "blk": 10.2.0.0/16; nothing was removed`) {
			t.Errorf("del of a missing element: %v", err)
		}
		ch = must[*SetChange](t)(s.Del("blk", prefixes("10.0.0.0/8", "10.2.0.0/16"), true))
		if ch.Changed != 1 || ch.Skipped != 1 || ch.Count != 2 {
			t.Errorf("del --missing-ok: %+v", ch)
		}

		// destroy: refused while used, naming the rule
		err = s.Destroy("blk")
		if err == nil || !strings.Contains(err.Error(), "INPUT rule 2: -A INPUT -m set ! --match-set blk dst -j DROP") {
			t.Errorf("destroy of a set in use: %v", err)
		}
		n := must[int](t)(s.Flush("blk"))
		if n != 2 || s.st.Sets["blk"].Count != 0 {
			t.Errorf("flush: %d", n)
		}
		if err := s.Destroy("other"); err != nil {
			t.Error(err)
		}
		must[bool](t)(s.Create("other", SetSpec{Kind: net4}, false))
		if id := s.st.Sets["other"].ID; id != 3 {
			t.Errorf("re-created set has id %d, want 3 (ids are not reused)", id)
		}
	})
	if g := e.generation(); g != gen {
		t.Errorf("set changes moved the generation from %d to %d", gen, g)
	}
}

// TestSetCreate: names, sizes, --exist semantics and resizing.
func TestSetCreate(t *testing.T) {
	e := newEnv(t)
	e.sets(func(s *Sets) {
		for _, bad := range []string{"", "a b", strings.Repeat("x", 32), "-x"} {
			if _, err := s.Create(bad, SetSpec{Kind: net4}, false); err == nil {
				t.Errorf("name %q accepted", bad)
			}
		}
		if _, err := s.Create("big", SetSpec{Kind: net4, Size: datapath.MaxSetElems + 1}, false); err == nil {
			t.Error("size beyond the capacity accepted")
		}
		if created := must[bool](t)(s.Create("a", SetSpec{Kind: net4}, false)); !created || s.st.Sets["a"].Size != DefaultSetSize {
			t.Errorf("created %v %+v", created, s.st.Sets["a"])
		}
		if _, err := s.Create("a", SetSpec{Kind: net4}, false); err == nil || !strings.Contains(err.Error(), "exists already") {
			t.Errorf("created twice: %v", err)
		}
		if created := must[bool](t)(s.Create("a", SetSpec{Kind: net4}, true)); created {
			t.Error("--exist created a second set")
		}
		if _, err := s.Create("a", SetSpec{Kind: ip6}, true); err == nil || !strings.Contains(err.Error(), "as hash:net inet, not hash:ip inet6") {
			t.Errorf("--exist with another kind: %v", err)
		}
		must[*SetChange](t)(s.Add("a", prefixes("10.0.0.0/8", "11.0.0.0/8")))
		if _, err := s.Create("a", SetSpec{Kind: net4, Size: 1}, true); err == nil {
			t.Error("resized below its count")
		}
		must[bool](t)(s.Create("a", SetSpec{Kind: net4, Size: 2}, true))
		if s.st.Sets["a"].Size != 2 {
			t.Errorf("not resized: %+v", s.st.Sets["a"])
		}
		if _, err := s.Add("nope", prefixes("10.0.0.0/8")); err == nil || !strings.Contains(err.Error(), `set "nope" does not exist`) {
			t.Errorf("add to a missing set: %v", err)
		}
	})
	// Destroying the last set, with nothing loaded, leaves no trace.
	e.sets(func(s *Sets) {
		if err := s.Destroy("a"); err != nil {
			t.Fatal(err)
		}
	})
	if pins := e.pins(); len(pins) != 0 {
		t.Errorf("pinned after the last set went: %v", pins)
	}
	if _, err := os.Stat(e.p.StateFile()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file after the last set went: %v", err)
	}
}

// TestSetRestore: ipset save output creates and fills sets; a file that
// contradicts an existing set changes nothing.
func TestSetRestore(t *testing.T) {
	e := newEnv(t)
	restore := func(s *Sets, src string) (*RestoreResult, error) {
		existing := func(name string) (rules.SetKind, bool) {
			k, err := s.Kind(name)
			return k, err == nil
		}
		r, err := rules.ParseIpsetSave("s", []byte(src), existing)
		if err != nil {
			return nil, err
		}
		return s.Restore(r)
	}
	e.sets(func(s *Sets) {
		res := must[*RestoreResult](t)(restore(s, `create blk hash:net family inet hashsize 1024 maxelem 100 bucketsize 12 initval 0x1
add blk 10.0.0.0/8
add blk 192.0.2.0/24
create adm hash:ip family inet6 hashsize 1024 maxelem 65536
add adm 2001:db8::1
`))
		if !slices.Equal(res.Created, []string{"blk", "adm"}) || res.Added != 3 || res.Skipped != 0 {
			t.Errorf("restore: %+v", res)
		}
		// again, with one more element: the sets are kept
		res = must[*RestoreResult](t)(restore(s, "create blk hash:net family inet maxelem 100\nadd blk 10.0.0.0/8\nadd blk 10.1.0.0/16\n"))
		if len(res.Created) != 0 || res.Added != 1 || res.Skipped != 1 {
			t.Errorf("restore again: %+v", res)
		}
		// a different set of the same name: refused, nothing changes
		_, err := restore(s, "create new hash:net\nadd new 10.0.0.0/8\ncreate blk hash:ip\nadd adm 2001:db8::2\n")
		var el rules.ErrorList
		if !errors.As(err, &el) || !strings.HasPrefix(err.Error(), `s:3:8: "blk": set exists already as hash:net inet with size 100`) {
			t.Errorf("conflicting create: %v", err)
		}
		// too many for a set: refused, nothing changes
		_, err = restore(s, "create new hash:net maxelem 1\nadd new 10.0.0.0/8\nadd adm 2001:db8::2\nadd new 11.0.0.0/8\n")
		if err == nil || !strings.Contains(err.Error(), `s:2:5: set "new" would hold 2 elements`) {
			t.Errorf("over size: %v", err)
		}
		info := s.List()
		if len(info) != 2 || info[0].Name != "adm" || info[0].Count != 1 || info[1].Name != "blk" || info[1].Count != 3 {
			t.Errorf("after refused restores: %+v", info)
		}
		if c := must[*SetContents](t)(s.Get("adm")); !slices.Equal(c.Elements, []string{"2001:db8::1"}) {
			t.Errorf("adm: %v", c.Elements)
		}
	})
}

// TestStateVersions: a version 1 state (rules in the JSON) is read, and
// written back as a version 4 record with its rules, ids and policies in
// a base file; so is a version 2 state with sets and logging's settings;
// a record that fails its checksum (a policy changed by hand) is refused,
// as is a newer version.
func TestStateVersions(t *testing.T) {
	p := Paths{StateDir: t.TempDir()}
	v1 := `{"version": 1, "generation": 3, "rules": "-P INPUT DROP\n-A INPUT -p tcp --dport 22 -j ACCEPT\n", "ids": [16],
	"interfaces": {"eth0": {"ifindex": 2, "mode": "generic"}}, "malformed": "drop"}`
	if err := os.WriteFile(p.StateFile(), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := loadState(p)
	if err != nil || st.Generation != 3 || len(st.Sets) != 0 || !st.loaded() {
		t.Fatalf("v1: %+v %v", st, err)
	}
	store, err := openStore(p, st)
	if err != nil {
		t.Fatal(err)
	}
	rs, ids, err := store.ruleSet()
	if err != nil || len(rs.Rules) != 1 || !slices.Equal(ids, []uint32{16}) || rs.PolicyFor(rules.ChainInput, rules.FamilyIPv4) != rules.VerdictDrop {
		t.Fatalf("v1 rules: %v %v %v", rs, ids, err)
	}
	if err := saveState(p, st, store); err != nil {
		t.Fatal(err)
	}
	store.close()
	st, err = loadState(p)
	if err != nil || st.Version != 4 || st.Rules != "" || st.Base == "" {
		t.Fatalf("saved: %+v %v", st, err)
	}
	store, err = openStore(p, st)
	if err != nil {
		t.Fatal(err)
	}
	if refs := store.refs(); len(refs) != 1 || store.ruleOf(refs[0]).Text != "-A INPUT -p tcp --dport 22 -j ACCEPT" ||
		store.ruleOf(refs[0]).ID != 16 || store.policies.PolicyFor(rules.ChainInput, rules.FamilyIPv6) != rules.VerdictDrop {
		t.Errorf("version 4 read back: %v", refs)
	}
	store.close()

	// Version 2 as the xdpfw before version 3 wrote it: sets, the program,
	// logging's settings and a rule that logs; read, then kept in version 4.
	v2 := Paths{StateDir: t.TempDir()}
	old := `{"version": 2, "generation": 5, "rules": "-A INPUT -p udp --dport 53 -j LOG --log-prefix \"dns \"\n-A INPUT -j DROP --log\n",
	"ids": [16, 17], "interfaces": {"eth0": {"ifindex": 2, "mode": "native"}}, "malformed": "drop",
	"sets": {"x": {"id": 1, "type": "hash:ip", "family": "inet", "size": 8, "count": 0}}, "next_set_id": 2,
	"program": "abc", "log_rate": "5/minute", "log_burst": 7, "log_snap": 64}`
	if err := os.WriteFile(v2.StateFile(), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{2, 4} {
		st, err := loadState(v2)
		if err != nil || st.Version != want || st.Program != "abc" || st.LogRate != "5/minute" || st.LogBurst != 7 ||
			st.LogSnap == nil || *st.LogSnap != 64 || st.Sets["x"] == nil || st.NextSetID != 2 {
			t.Fatalf("version %d: %+v %v", want, st, err)
		}
		store, err := openStore(v2, st)
		if err != nil {
			t.Fatal(err)
		}
		rs, ids, err := store.ruleSet()
		if err != nil || len(rs.Rules) != 2 || !slices.Equal(ids, []uint32{16, 17}) || !store.logs() || store.logRules() != 2 {
			t.Fatalf("version %d rules: %v %v %v, logs %v", want, rs, ids, err, store.logs())
		}
		if err := saveState(v2, st, store); err != nil {
			t.Fatal(err)
		}
		store.close()
	}

	// A record changed by hand (the policy made ACCEPT while the kernel
	// drops: issue 14.10) fails its checksum.
	b, err := os.ReadFile(p.StateFile())
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(string(b), "-P INPUT DROP", "-P INPUT ACCEPT", 1)
	if tampered == string(b) {
		t.Fatalf("no policy in %s", b)
	}
	if err := os.WriteFile(p.StateFile(), []byte(tampered), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(p); err == nil || !strings.Contains(err.Error(), "corrupt (checksum") {
		t.Errorf("tampered record: %v", err)
	}

	sets := Paths{StateDir: t.TempDir()}
	st = newState()
	st.Sets["x"] = &setState{ID: 1, Type: rules.SetHashIP, Family: "inet", Size: 1}
	if err := st.save(sets); err != nil {
		t.Fatal(err)
	}
	if st, err := loadState(sets); err != nil || st.Version != 4 || st.Sets["x"] == nil {
		t.Errorf("sets saved: %+v, %v", st, err)
	}
	if err := os.WriteFile(sets.StateFile(), []byte(`{"version": 4}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(sets); err == nil || !strings.Contains(err.Error(), "no checksum") {
		t.Errorf("version 4 without a checksum: %v", err)
	}
	if err := os.WriteFile(sets.StateFile(), []byte(`{"version": 5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(sets); err == nil || !strings.Contains(err.Error(), "state version 5") {
		t.Errorf("version 5: %v", err)
	}
}
