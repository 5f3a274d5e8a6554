package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrorString(t *testing.T) {
	tests := []struct {
		err  Error
		want string
	}{
		{Error{Pos: Pos{File: "rules.conf", Line: 3, Col: 18}, Token: "300.1.1.1", Msg: "not an IPv4 address"},
			`rules.conf:3:18: "300.1.1.1": not an IPv4 address`},
		{Error{Pos: Pos{File: "rules.conf", Line: 1, Col: 1}, Msg: "rule has no target", Hint: "add -j ACCEPT or -j DROP"},
			"rules.conf:1:1: rule has no target\n\thint: add -j ACCEPT or -j DROP"},
		{Error{Pos: Pos{Line: 2, Col: 5}, Token: `a"b`, Msg: "m"}, `2:5: "a\"b": m`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorListSortedAndTruncated(t *testing.T) {
	var l ErrorList
	for i := 25; i >= 1; i-- {
		l = append(l, &Error{Pos: Pos{File: "f", Line: i, Col: 1}, Msg: fmt.Sprint("e", i)})
	}
	lines := strings.Split(l.Error(), "\n")
	if len(lines) != 21 {
		t.Fatalf("got %d lines, want 21:\n%s", len(lines), l.Error())
	}
	if lines[0] != "f:1:1: e1" || lines[19] != "f:20:1: e20" {
		t.Errorf("not sorted: first %q, 20th %q", lines[0], lines[19])
	}
	if lines[20] != "and 5 more errors" {
		t.Errorf("last line = %q", lines[20])
	}
	if l[0].Pos.Line != 25 {
		t.Errorf("Error() reordered the list")
	}

	short := ErrorList{{Pos: Pos{Line: 2, Col: 1}, Msg: "b"}, {Pos: Pos{Line: 1, Col: 9}, Msg: "a"}}
	if got, want := short.Error(), "1:9: a\n2:1: b"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestErrorListUnwrap(t *testing.T) {
	_, err := Parse("f", []byte("-A INPUT -j FOO\n"), ParseOptions{})
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("errors.As(ErrorList) failed on %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Token != "FOO" {
		t.Fatalf("errors.As(*Error) failed on %v", err)
	}
}
