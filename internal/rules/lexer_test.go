package rules

import (
	"reflect"
	"testing"
)

func TestLexLine(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []token
	}{
		{"empty", "", nil},
		{"blank", " \t ", nil},
		{"comment line", "# just a comment", nil},
		{"indented comment", "   # x", nil},
		{"words", "-A INPUT  -j\tACCEPT", []token{
			{text: "-A", col: 1}, {text: "INPUT", col: 4}, {text: "-j", col: 11}, {text: "ACCEPT", col: 14}}},
		{"trailing comment", "-j DROP # why", []token{{text: "-j", col: 1}, {text: "DROP", col: 4}}},
		{"hash inside word", "a#b", []token{{text: "a#b", col: 1}}},
		{"double quotes", `--comment "two words"`, []token{
			{text: "--comment", col: 1}, {text: "two words", col: 11, quoted: true}}},
		{"single quotes", `'it''s' x`, []token{{text: "its", col: 1, quoted: true}, {text: "x", col: 9}}},
		{"single quotes keep backslash", `'a\b'`, []token{{text: `a\b`, col: 1, quoted: true}}},
		{"escapes in double quotes", `"a \"b\" \\ c"`, []token{{text: `a "b" \ c`, col: 1, quoted: true}}},
		{"adjacent parts", `pre"fix x"'y'`, []token{{text: "prefix xy", col: 1, quoted: true}}},
		{"empty quoted", `"" ''`, []token{{text: "", col: 1, quoted: true}, {text: "", col: 4, quoted: true}}},
		{"hash in quotes", `"# not a comment"`, []token{{text: "# not a comment", col: 1, quoted: true}}},
		{"quoted bang", `"!" !`, []token{{text: "!", col: 1, quoted: true}, {text: "!", col: 5}}},
		{"carriage return", "-j DROP\r", []token{{text: "-j", col: 1}, {text: "DROP", col: 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lexLine(tt.in, Pos{File: "f", Line: 1})
			if err != nil {
				t.Fatalf("lexLine(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("lexLine(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestLexLineErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{`--comment "open`, `f:3:11: unterminated double quote`},
		{`--comment 'open`, `f:3:11: unterminated single quote`},
		{`-j "x\"`, `f:3:4: unterminated double quote`},
		{`"a" 'b`, `f:3:5: unterminated single quote`},
	}
	for _, tt := range tests {
		_, err := lexLine(tt.in, Pos{File: "f", Line: 3})
		if err == nil {
			t.Errorf("lexLine(%q): no error", tt.in)
			continue
		}
		err.Hint = ""
		if got := err.Error(); got != tt.want {
			t.Errorf("lexLine(%q) error = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"", "x", "two words", `a "b"`, `back\slash`, `\"`, "# hash", "'single'", "!"} {
		toks, err := lexLine("x "+quote(s)+" y", Pos{})
		if err != nil {
			t.Fatalf("quote(%q) = %s: %v", s, quote(s), err)
		}
		if len(toks) != 3 || toks[1].text != s || toks[2].text != "y" {
			t.Errorf("quote(%q) = %s lexes to %+v", s, quote(s), toks)
		}
	}
}
