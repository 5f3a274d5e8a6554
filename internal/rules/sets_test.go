package rules

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

var (
	net4 = SetKind{Type: SetHashNet, Family: FamilyIPv4}
	net6 = SetKind{Type: SetHashNet, Family: FamilyIPv6}
	ip4  = SetKind{Type: SetHashIP, Family: FamilyIPv4}
	ip6  = SetKind{Type: SetHashIP, Family: FamilyIPv6}
)

func mustPrefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestValidSetName(t *testing.T) {
	for _, ok := range []string{"a", "blk", "block-list_v4.2", strings.Repeat("x", 31), "9lives"} {
		if !ValidSetName(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 32), "-x", "a b", "a/b", "a:b", "ä", "a,b"} {
		if ValidSetName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseSetElems(t *testing.T) {
	src := "# blocklist\n\n10.1.2.3\n  192.0.2.0/24   # a comment\n198.51.100.77/16\r\n10.9.9.9/255.255.0.0\n"
	got, err := ParseSetElems("blk.txt", []byte(src), net4)
	if err != nil {
		t.Fatal(err)
	}
	// host bits are cleared, as ipset does
	want := mustPrefixes("10.1.2.3/32", "192.0.2.0/24", "198.51.0.0/16", "10.9.0.0/16")
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	got, err = ParseSetElems("v6.txt", []byte("2001:db8::1\n2001:db8:1::/48\n::ffff:10.0.0.1\n"), net6)
	if err != nil || !slices.Equal(got, mustPrefixes("2001:db8::1/128", "2001:db8:1::/48", "::ffff:10.0.0.1/128")) {
		t.Errorf("v6: %v %v", got, err)
	}
	got, err = ParseSetElems("ip.txt", []byte("10.0.0.1\n10.0.0.2/32\n"), ip4)
	if err != nil || !slices.Equal(got, mustPrefixes("10.0.0.1/32", "10.0.0.2/32")) {
		t.Errorf("hash:ip: %v %v", got, err)
	}
	if got, err = ParseSetElems("empty", []byte("# nothing\n\n"), ip6); err != nil || len(got) != 0 {
		t.Errorf("empty: %v %v", got, err)
	}
}

// TestParseSetElemsErrors: every bad line is reported at file:line:col
// with the offending token, and nothing is returned.
func TestParseSetElemsErrors(t *testing.T) {
	cases := []struct {
		name string
		kind SetKind
		src  string
		want []string // error lines, in order
	}{
		{"bad address", net4, "10.0.0.1\n  300.1.2.3\n", []string{`f:2:3: "300.1.2.3": not an IPv4 address`}},
		{"bad prefix", net4, "10.0.0.0/33\n", []string{`f:1:10: "33": prefix length out of range (0-32)`}},
		{"wrong family", net4, "# v4 only\n2001:db8::/32\n", []string{`f:2:1: "2001:db8::/32": an IPv6 address in an IPv4 set`}},
		{"wrong family v6", net6, "10.0.0.0/8\n", []string{`f:1:1: "10.0.0.0/8": an IPv4 address in an IPv6 set`}},
		{"network in hash:ip", ip4, "10.0.0.1\n10.0.0.0/8\n", []string{`f:2:1: "10.0.0.0/8": a network in a hash:ip set`}},
		{"network in hash:ip v6", ip6, "2001:db8::/64\n", []string{`f:1:1: "2001:db8::/64": a network in a hash:ip set`}},
		{"two per line", net4, "10.0.0.1 10.0.0.2\n", []string{`f:1:10: "10.0.0.2": one element per line`}},
		{"range", net4, "10.0.0.1-10.0.0.9\n", []string{`f:1:9: "10.0.0.1-10.0.0.9": address ranges are not supported`}},
		{"host name", net4, "example.com\n", []string{`f:1:1: "example.com": not an IPv4 address`}},
		{"quote", net4, "\"10.0.0.1\n", []string{`f:1:1: unterminated double quote`}},
		{"several", net4, "x\n10.0.0.1\n1.2.3.4/40\n\n::1\n", []string{
			`f:1:1: "x": not an IPv4 address`,
			`f:3:9: "40": prefix length out of range (0-32)`,
			`f:5:1: "::1": an IPv6 address in an IPv4 set`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseSetElems("f", []byte(c.src), c.kind)
			var el ErrorList
			if !errors.As(err, &el) || got != nil {
				t.Fatalf("got %v, %v; want an ErrorList", got, err)
			}
			if len(el) != len(c.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(el), len(c.want), err)
			}
			for i, e := range el {
				if first, _, _ := strings.Cut(e.Error(), "\n"); !strings.HasPrefix(first, c.want[i]) {
					t.Errorf("error %d: %q, want %q", i, first, c.want[i])
				}
			}
		})
	}
}

func TestParseSetElemsTooManyErrors(t *testing.T) {
	src := strings.Repeat("bad\n", 5000)
	_, err := ParseSetElems("f", []byte(src), net4)
	var el ErrorList
	if !errors.As(err, &el) || len(el) != maxElemErrors+1 || !strings.Contains(el[maxElemErrors].Msg, "stopped") {
		t.Fatalf("got %d errors", len(el))
	}
	if !strings.HasSuffix(err.Error(), "and 981 more errors") {
		t.Errorf("message ends %q", err.Error()[len(err.Error())-40:])
	}
}

func TestParseSetElemArgs(t *testing.T) {
	got, err := ParseSetElemArgs([]string{"10.0.0.1", "10.2.0.0/16"}, net4)
	if err != nil || !slices.Equal(got, mustPrefixes("10.0.0.1/32", "10.2.0.0/16")) {
		t.Fatalf("%v %v", got, err)
	}
	_, err = ParseSetElemArgs([]string{"10.0.0.1", "10.2.0.0/16"}, ip4)
	if err == nil || !strings.HasPrefix(err.Error(), `<command line>:1:10: "10.2.0.0/16": a network in a hash:ip set`) {
		t.Errorf("hash:ip: %v", err)
	}
	_, err = ParseSetElemArgs([]string{"1.2.3.4", "nope", "::1"}, net4)
	var el ErrorList
	if !errors.As(err, &el) || len(el) != 2 || el[0].Pos.Col != 9 || el[1].Pos.Col != 14 {
		t.Errorf("got %v", err)
	}
}

func TestParseIpsetSave(t *testing.T) {
	src := `# ipset save, ipset v7.17
create blk hash:net family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x4c8f0b1e
add blk 10.0.0.0/8
add blk 192.0.2.1
create six hash:ip family inet6 hashsize 1024 maxelem 500
add six 2001:db8::1
add blk 198.51.100.0/24
add old 203.0.113.9
-A old 203.0.113.10
`
	existing := func(name string) (SetKind, bool) { return ip4, name == "old" }
	r, err := ParseIpsetSave("s", []byte(src), existing)
	if err != nil {
		t.Fatal(err)
	}
	wantCreates := []SetCreate{
		{Name: "blk", Kind: net4, Size: 65536, Pos: Pos{"s", 2, 8}},
		{Name: "six", Kind: ip6, Size: 500, Pos: Pos{"s", 5, 8}},
	}
	if !slices.Equal(r.Creates, wantCreates) {
		t.Errorf("creates %+v, want %+v", r.Creates, wantCreates)
	}
	wantAdds := map[string][]netip.Prefix{
		"blk": mustPrefixes("10.0.0.0/8", "192.0.2.1/32", "198.51.100.0/24"),
		"six": mustPrefixes("2001:db8::1/128"),
		"old": mustPrefixes("203.0.113.9/32", "203.0.113.10/32"),
	}
	var order []string
	for _, a := range r.Adds {
		order = append(order, a.Name)
		if !slices.Equal(a.Elems, wantAdds[a.Name]) {
			t.Errorf("%s: %v, want %v", a.Name, a.Elems, wantAdds[a.Name])
		}
	}
	if !slices.Equal(order, []string{"blk", "six", "old"}) {
		t.Errorf("adds in order %v", order)
	}
}

func TestParseIpsetSaveErrors(t *testing.T) {
	none := func(string) (SetKind, bool) { return SetKind{}, false }
	cases := []struct{ src, want string }{
		{"create x list:set\n", `s:1:10: "list:set": unsupported set type`},
		{"create x hash:net family inet timeout 300\n", `s:1:31: "timeout": unsupported set option`},
		{"create x hash:ip netmask 24\n", `s:1:18: "netmask": unsupported set option`},
		// fail2ban's sets (ipset save): one error, at the create line, saying
		// why; the add lines of the refused set add none
		{"create f2b-sshd hash:ip family inet hashsize 1024 maxelem 65536 timeout 0 bucketsize 12 initval 0x3d2d1904\n" +
			"add f2b-sshd 203.0.113.77 timeout 599\nadd f2b-sshd 192.0.2.14 timeout 3599\n",
			`s:1:65: "timeout": unsupported set option: the set's elements expire`},
		{"create x hash:ip family ipx\nadd x 10.0.0.1\n", `s:1:25: "ipx": not a set family`},
		{"create x list:set\nadd x y\n", `s:1:10: "list:set": unsupported set type`},
		{"create x hash:ip maxelem 0\n", `s:1:26: "0": not a positive number`},
		{"create x hash:ip maxelem\n", `s:1:18: "maxelem": missing value`},
		{"create bad/name hash:ip\n", `s:1:8: "bad/name": not a set name`},
		{"create x hash:ip\ncreate x hash:ip\n", `s:2:8: "x": set created twice`},
		{"add nope 10.0.0.1\n", `s:1:5: "nope": no such set`},
		{"create x hash:ip\nadd x 10.0.0.0/8\n", `s:2:7: "10.0.0.0/8": a network in a hash:ip set`},
		{"create x hash:net\nadd x 10.0.0.0/8 nomatch\n", `s:2:18: "nomatch": per-element options are not supported`},
		{"create x hash:net family inet6\nadd x 10.0.0.0/8\n", `s:2:7: "10.0.0.0/8": an IPv4 address in an IPv6 set`},
		{"flush x\n", `s:1:1: "flush": not an ipset save line`},
		{"add x\n", `s:1:1: "add": incomplete line`},
	}
	for _, c := range cases {
		_, err := ParseIpsetSave("s", []byte(c.src), none)
		var el ErrorList
		if !errors.As(err, &el) || len(el) != 1 || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %s", c.src, err, c.want)
		}
	}
}

func TestParseSetTypeFamily(t *testing.T) {
	if typ, err := ParseSetType("hash:ip"); typ != SetHashIP || err != nil {
		t.Error(typ, err)
	}
	if _, err := ParseSetType("bitmap:ip"); err == nil {
		t.Error("bitmap:ip accepted")
	}
	for s, want := range map[string]Family{"inet": FamilyIPv4, "inet6": FamilyIPv6, "ipv4": FamilyIPv4, "ipv6": FamilyIPv6} {
		if f, err := ParseSetFamily(s); f != want || err != nil {
			t.Errorf("%s: %v %v", s, f, err)
		}
	}
	if _, err := ParseSetFamily("inet4"); err == nil {
		t.Error("inet4 accepted")
	}
	if s := (SetKind{SetHashNet, FamilyIPv6}).String(); s != "hash:net inet6" {
		t.Error(s)
	}
}

// FuzzParseSetElems checks that element files never panic the parser, that
// errors carry positions inside the input, and that every element accepted
// fits the set (so the firewall's own check never fires).
func FuzzParseSetElems(f *testing.F) {
	f.Add([]byte("# blocklist\n10.0.0.0/8\n192.0.2.1 # host\n\n"), uint8(0))
	f.Add([]byte("2001:db8::/32\n::ffff:10.0.0.1\n"), uint8(1))
	f.Add([]byte("10.0.0.1\n10.0.0.0/255.0.0.0\n'10.0.0.2'\n"), uint8(2))
	f.Add([]byte("x\n1.2.3.4/40\n\"\n"), uint8(3))
	kinds := []SetKind{net4, net6, ip4, ip6}
	f.Fuzz(func(t *testing.T, src []byte, kind uint8) {
		k := kinds[int(kind)%len(kinds)]
		ps, err := ParseSetElems("fuzz", src, k)
		if err != nil {
			var list ErrorList
			if ps != nil || !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T %v (elements %v)", err, err, ps)
			}
			lines := strings.Count(string(src), "\n") + 1
			for _, e := range list {
				if e.Pos.File != "fuzz" || e.Pos.Line < 1 || e.Pos.Line > lines || e.Pos.Col < 1 || e.Msg == "" {
					t.Fatalf("bad error position or message: %+v", e)
				}
			}
			return
		}
		for _, p := range ps {
			if !k.Accepts(p) {
				t.Fatalf("%s accepted into a %s set", p, k)
			}
		}
	})
}
