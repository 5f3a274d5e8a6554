package firewall

import (
	"reflect"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestBaseRoundTrip: a base file gives back its rules, spans, entries,
// roots and chain ends; one written by a build of another memory layout
// still lists the rules (ids, chains, text), not compiled.
func TestBaseRoundTrip(t *testing.T) {
	rs, err := rules.Parse("t", []byte(`-P INPUT DROP
-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -s 10.0.0.0/8 -p tcp -m multiport --dports 22,80 -j DROP
-A INPUT -p udp --dport 53 -j ACCEPT
-A INPUT -j LOG
-A OUTPUT -d 192.0.2.1 -j REJECT
`), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint32{16, 40, 17, 99, 18}
	tb, _, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]baseRule, len(rs.Rules))
	for i := range rs.Rules {
		recs[i] = baseRuleOf(&rs.Rules[i], ids[i], tb.Spans[i])
	}
	data := encodeBase(7, recs, tb)
	b, err := parseBase("t", data)
	if err != nil {
		t.Fatal(err)
	}
	if !b.compiled || b.stamp != 7 || b.maxID != 99 || b.n != len(recs) || !reflect.DeepEqual(b.entries, tb.Entries) {
		t.Fatalf("base: compiled %v stamp %d max id %d, %d rules, entries equal %v", b.compiled, b.stamp, b.maxID, b.n,
			reflect.DeepEqual(b.entries, tb.Entries))
	}
	for k := range recs {
		if got := b.rule(k); got != recs[k] {
			t.Errorf("rule %d: %+v, want %+v", k, got, recs[k])
		}
	}
	if o := b.overlay(); o.Roots != tb.Roots || o.ChainEnd != tb.ChainEnd || len(o.Base) != len(recs) {
		t.Errorf("overlay: roots or chain ends differ")
	}

	other := append([]byte(nil), data...)
	other[296] ^= 1 // another build's layout
	le.PutUint32(other[12:], checksum(other[16:]))
	b, err = parseBase("t", other)
	if err != nil {
		t.Fatal(err)
	}
	if b.compiled || b.entries != nil {
		t.Fatalf("another layout: compiled %v, %d entries; want the rules only", b.compiled, len(b.entries))
	}
	for k := range recs {
		want := recs[k]
		want.Span = compile.Span{}
		if got := b.rule(k); got != want {
			t.Errorf("another layout, rule %d: %+v, want %+v", k, got, want)
		}
	}
	if _, err := parseBase("t", data[:len(data)-1]); err == nil {
		t.Error("a truncated base: want an error")
	}
	// Damage anywhere is refused with a clear error, never a panic
	// (issue 14.10: a corrupt text length panicked every command; patched
	// entry bytes were enforced by the next rebuild).
	for _, c := range []struct {
		name string
		off  int
	}{{"a text length", baseHeader + 8}, {"an entry", len(data) - 3}, {"a rule id", baseHeader}, {"the stamp", 16}} {
		bad := append([]byte(nil), data...)
		bad[c.off] ^= 0x40
		if _, err := parseBase("t", bad); err == nil || !strings.Contains(err.Error(), "checksum") {
			t.Errorf("%s damaged: %v, want a checksum error", c.name, err)
		}
	}
	// A base of format 2 (no checksum) with a text length out of bounds.
	v2 := append([]byte(nil), data...)
	le.PutUint32(v2[8:], baseFormatV2)
	le.PutUint32(v2[baseHeader+8:], 1<<31)
	if _, err := parseBase("t", v2); err == nil || !strings.Contains(err.Error(), "out of bounds") {
		t.Errorf("format 2, text length out of bounds: %v", err)
	}
}
