package rules

import (
	"fmt"
	"io"
	"os"
)

// MaxInput is the most bytes xdpfw reads from one rule file, set file or
// standard input: 128 MiB holds a million rules or two million set
// elements (more than the tables take), and bounds what a wrong name such
// as /dev/zero or an endless pipe can make xdpfw hold in memory.
const MaxInput = 128 << 20

// ReadInput reads r whole, name being how errors call it; more than
// MaxInput bytes is an error (an *Error at name).
func ReadInput(name string, r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(b) > MaxInput {
		return nil, &Error{Pos: Pos{File: name}, Msg: fmt.Sprintf("more than %d MiB: xdpfw reads at most that much from a file", MaxInput>>20),
			Hint: "is it the right file?"}
	}
	return b, nil
}

// ReadInputFile is ReadInput of the file at path.
func ReadInputFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadInput(path, f)
}

// maxQuoted is how much of a token an error quotes.
const maxQuoted = 64

// Clip shortens s for an error message: at most its first 64 bytes (cut
// at a character boundary), then "…(N bytes)" giving its length. A
// megabyte-long token is named, not echoed.
func Clip(s string) string { return clipTo(s, maxQuoted) }

// maxLine is how much of a line a skipped-line report quotes.
const maxLine = 512

// clipTo shortens s as Clip does, to at most max bytes.
func clipTo(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 { // not inside a UTF-8 sequence
		n--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:n], len(s))
}
