package rules

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestLongTokenClipped: an error quotes at most 64 bytes of a token, and
// says how long it is, wherever the token stands.
func TestLongTokenClipped(t *testing.T) {
	long := strings.Repeat("A", 1<<20)
	for _, tmpl := range []string{
		"X",
		"-A X -j ACCEPT",
		"-A INPUT -p X -j ACCEPT",
		"-A INPUT -s X -j ACCEPT",
		"-A INPUT -i X -j ACCEPT",
		"-A INPUT -i eth\x01X -j ACCEPT",
		"-A INPUT -p tcp --dport X -j ACCEPT",
		"-A INPUT -m X -j ACCEPT",
		"-A INPUT --X -j ACCEPT",
		"-A INPUT -j X",
		"-A INPUT -j LOG --log-prefix X",
		"-A INPUT -m set --match-set X src -j DROP",
		"-A INPUT -m comment --comment X -j DROP",
		"-P INPUT X",
		":X ACCEPT [0:0]",
		"*X",
		"*filter X",
		"-A INPUT -j ACCEPT X",
	} {
		_, err := Parse("f", []byte(strings.ReplaceAll(tmpl, "X", long)), ParseOptions{})
		if err == nil {
			continue // some are valid (a long comment)
		}
		if msg := err.Error(); len(msg) > 1000 || !strings.Contains(msg, "bytes)") {
			t.Errorf("%q: error of %d bytes: %.200s", tmpl, len(msg), msg)
		}
	}
	if got := Clip("ab"); got != "ab" {
		t.Errorf("Clip(ab) = %q", got)
	}
	if got := Clip(strings.Repeat("é", 40)); got != strings.Repeat("é", 32)+"…(80 bytes)" {
		t.Errorf("Clip cut a character: %q", got)
	}
}

// TestReadInputCap: input is read up to MaxInput bytes, then refused with
// the cap named (an endless reader such as /dev/zero stops there).
func TestReadInputCap(t *testing.T) {
	b, err := ReadInput("x", io.LimitReader(zeros{}, MaxInput))
	if err != nil || len(b) != MaxInput {
		t.Fatalf("%d bytes: %v", len(b), err)
	}
	_, err = ReadInput("/dev/zero", zeros{})
	var re *Error
	if !errors.As(err, &re) || !strings.HasPrefix(err.Error(), "/dev/zero: more than 128 MiB") {
		t.Fatalf("endless input: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
