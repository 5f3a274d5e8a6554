package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// setInfo is an element of `xdpfw set list --json`'s "sets", and with
// "elements" `xdpfw set list NAME --json`.
type setInfo struct {
	Name   string `json:"name"`
	ID     uint32 `json:"id"`
	Type   string `json:"type"`
	Family string `json:"family"`
	Size   int    `json:"size"`
	Count  int    `json:"count"`
	UsedBy []struct {
		Chain string `json:"chain"`
		Num   int    `json:"num"`
		Rule  string `json:"rule"`
	} `json:"used_by"`
	Elements []string `json:"elements"`
}

// setListing is `xdpfw set list --json`.
type setListing struct {
	Sets     []setInfo `json:"sets"`
	Elements int       `json:"elements"`
	Capacity int       `json:"capacity"`
	raw      string
}

// mustRunIn runs the binary with stdin as its standard input and fails the
// test unless it exits 0.
func (f *fw) mustRunIn(stdin string, args ...string) result {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), cmdTimeout)
	defer cancel()
	r := f.execIn(ctx, stdin, args...)
	if r.code != 0 {
		f.t.Fatalf("want exit status 0: %s", r)
	}
	return r
}

func (f *fw) setList() *setListing {
	f.t.Helper()
	var l setListing
	r := f.decode(&l, "set", "list", "--json")
	l.raw = r.stdout
	return &l
}

func (f *fw) set(name string) *setInfo {
	f.t.Helper()
	var s setInfo
	f.decode(&s, "set", "list", name, "--json")
	return &s
}

// TestSets drives named sets with real traffic: sets are created before
// the load, the rules naming them load, and adding the client's address
// drops its connections at once with no reload (the generation, the
// program and the counter ids stay); deleting it lets them through again,
// IPv4 and IPv6. Along the way: a load naming a missing set and a bad
// element file are refused at file:line:col and change nothing, the sets
// survive the last detach, and a set in use cannot be destroyed.
func TestSets(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, 22)
	f := newFW(t, l.srv)
	tcp4 := func(ok bool) tcpProbe { return tcpProbe{from: l.cli, addr: hostPort(l.srv4, 22), ok: ok} }
	tcp6 := func(ok bool) tcpProbe { return tcpProbe{from: l.cli, addr: hostPort(l.srv6, 22), ok: ok} }

	// Sets first, blk6 from `ipset save` output on standard input: only
	// the set map is pinned, nothing is loaded.
	f.mustRun("set", "create", "blk", "hash:ip")
	r := f.mustRunIn("create blk6 hash:net family inet6 hashsize 1024 maxelem 100 bucketsize 12 initval 0x5a1e\n", "set", "restore")
	if want := "restored: 1 set created (blk6), 0 elements added, 0 already present\n"; r.stdout != want {
		t.Errorf("set restore: stdout, want %q: %s", want, r)
	}
	if pins := f.pins(); !slices.Equal(pins, []string{"fw_sets"}) {
		t.Errorf("pinned after set create: %v", pins)
	}
	if r := f.run("status"); r.code != 1 || !strings.Contains(r.stderr, "not loaded") {
		t.Errorf("status with sets only: want exit status 1, not loaded: %s", r)
	}

	// A rule naming a set that does not exist: refused where it names it.
	missing := writeRules(t, "missing.rules", "-A INPUT -p tcp -m set --match-set blk src -j DROP",
		"-A INPUT -p tcp -m set --match-set nope src -j DROP")
	for _, args := range [][]string{{"apply", "--check", missing}, {"load", "-i", l.srvIf, missing}} {
		r = f.runWant(2, args...)
		if want := "xdpfw: " + missing + ":2:36: set \"nope\" does not exist"; !strings.HasPrefix(r.stderr, want) ||
			!strings.Contains(r.stderr, "xdpfw set create nope") {
			t.Errorf("%s: stderr does not start with %q and teach set create: %s", args[0], want, r)
		}
	}
	if pins := f.pins(); !slices.Equal(pins, []string{"fw_sets"}) {
		t.Errorf("pinned after a refused load: %v", pins)
	}
	if prog := xdpProg(t, l.srv, l.srvIf); prog != "" {
		t.Errorf("a refused load left %s on %s", prog, l.srvIf)
	}

	rulesFile := writeRules(t, "sets.rules",
		"-A INPUT -p tcp -m set --match-set blk src -j DROP",
		"-A INPUT -p tcp -m set --match-set blk6 src -j DROP")
	f.mustRun("load", "-i", l.srvIf, rulesFile)
	checkTCP(t, "empty sets", tcp4(true), tcp6(true))
	before := f.list()
	drop4, drop6 := before.Rules[0], before.Rules[1]
	progID := f.status().ProgramID

	// noReload checks that a set change touched no rule: same generation,
	// program and counter ids; it returns the listing.
	noReload := func(what string) *listing {
		t.Helper()
		now := f.list()
		if now.Generation != before.Generation || now.Rules[0].ID != drop4.ID || now.Rules[1].ID != drop6.ID {
			t.Errorf("%s: generation %d, rule ids %d %d; want %d, %d %d (no reload):\n%s", what, now.Generation,
				now.Rules[0].ID, now.Rules[1].ID, before.Generation, drop4.ID, drop6.ID, now.raw)
		}
		if id := f.status().ProgramID; id != progID {
			t.Errorf("%s: program %d, want %d (no reload)", what, id, progID)
		}
		return now
	}

	r = f.mustRun("set", "add", "blk", l.cli4)
	if want := "blk: 1 added, 0 already present; 1 element (size 65536)\n"; r.stdout != want {
		t.Errorf("set add: stdout, want %q: %s", want, r)
	}
	checkTCP(t, "client in blk", tcp4(false), tcp6(true))
	if n := noReload("set add blk").Rules[0].Counters.Packets; n == 0 {
		t.Errorf("%q counted no packet while the client was in blk", drop4.Rule)
	}

	// IPv6: a file with comments; first one with an error, which adds nothing.
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("# clients\nfd00:200::/64\n10.200.0.0/24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = f.runWant(2, "set", "add", "blk6", "--file", bad)
	if want := "xdpfw: " + bad + ":3:1: \"10.200.0.0/24\": an IPv4 address in an IPv6 set"; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr does not start with %q: %s", want, r)
	}
	if s := f.set("blk6"); s.Count != 0 || len(s.Elements) != 0 {
		t.Errorf("a refused file added to blk6: %+v", s)
	}
	good := filepath.Join(dir, "good.txt")
	if err := os.WriteFile(good, []byte("# clients\nfd00:200::/64   # the client link\n\n2001:db8::/32\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.mustRun("set", "add", "blk6", "--file", good)
	checkTCP(t, "client in blk and blk6", tcp4(false), tcp6(false))
	if n := noReload("set add blk6").Rules[1].Counters.Packets; n == 0 {
		t.Errorf("%q counted no packet while the client was in blk6", drop6.Rule)
	}

	// The listing names the rules using each set.
	sl := f.setList()
	if len(sl.Sets) != 2 || sl.Elements != 3 || sl.Capacity != 1<<21 {
		t.Fatalf("set list --json:\n%s", sl.raw)
	}
	for i, want := range []struct {
		name, typ, family string
		size, count       int
		rule              string
	}{{"blk", "hash:ip", "inet", 65536, 1, drop4.Rule}, {"blk6", "hash:net", "inet6", 100, 2, drop6.Rule}} {
		s := sl.Sets[i]
		if s.Name != want.name || s.Type != want.typ || s.Family != want.family || s.Size != want.size || s.Count != want.count ||
			len(s.UsedBy) != 1 || s.UsedBy[0].Chain != "INPUT" || s.UsedBy[0].Num != i+1 || s.UsedBy[0].Rule != want.rule {
			t.Errorf("set %d: %+v, want %+v", i, s, want)
		}
	}
	if s := f.set("blk6"); !slices.Equal(s.Elements, []string{"2001:db8::/32", "fd00:200::/64"}) {
		t.Errorf("blk6 elements %v", s.Elements)
	}

	// Deleting lets the client through again; deleting what is not there
	// changes nothing.
	f.mustRun("set", "del", "blk", l.cli4)
	if r := f.runWant(1, "set", "del", "blk6", "fd00:200::/64", "fd00:999::/64"); !strings.Contains(r.stderr, "not in set \"blk6\": fd00:999::/64") {
		t.Errorf("del of a missing element: %s", r)
	}
	checkTCP(t, "client only in blk6", tcp4(true), tcp6(false))
	f.mustRun("set", "del", "blk6", "fd00:200::/64")
	checkTCP(t, "client in no set", tcp4(true), tcp6(true))
	noReload("set del")

	// The last detach keeps the sets; they serve the next load.
	f.mustRun("detach", "-i", l.srvIf)
	if pins := f.pins(); !slices.Equal(pins, []string{"fw_sets"}) {
		t.Errorf("pinned after the last detach: %v", pins)
	}
	if s := f.set("blk6"); s.Count != 1 || len(s.UsedBy) != 0 {
		t.Errorf("blk6 after the last detach: %+v", s)
	}
	f.mustRun("load", "-i", l.srvIf, rulesFile)
	f.mustRun("set", "add", "blk", l.cli4)
	checkTCP(t, "reloaded, client in blk", tcp4(false), tcp6(true))

	// A set in use cannot be destroyed; once no rule uses it, it can.
	r = f.runWant(1, "set", "destroy", "blk")
	if want := "INPUT rule 1: " + drop4.Rule; !strings.Contains(r.stderr, want) {
		t.Errorf("destroy of a set in use: stderr does not name %q: %s", want, r)
	}
	checkTCP(t, "refused destroy", tcp4(false))
	f.mustRun("flush")
	f.mustRun("set", "destroy", "blk")
	f.mustRun("set", "destroy", "blk6")
	if sl := f.setList(); len(sl.Sets) != 0 || sl.Elements != 0 {
		t.Errorf("sets after destroy:\n%s", sl.raw)
	}
	checkTCP(t, "sets destroyed, rules flushed", tcp4(true), tcp6(true))
	f.mustRun("detach", "--all")
	f.wantNothingLoaded(l.srvIf)
}
