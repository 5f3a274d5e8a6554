package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem found in a rule file or on a command line.
//
// Its text is "file:line:col: msg", or `file:line:col: "token": msg` when Token
// is set (at most its first 64 bytes: Clip), followed by a second line "\thint: ..." when Hint is set.
type Error struct {
	Pos   Pos    // where the problem is (the offending token)
	Token string // the offending text, quoted in the message; may be empty
	Msg   string // what is wrong
	Hint  string // how to fix it; may be empty
	// Unsupported marks a line xdpfw understands but cannot run, whose
	// leaving out changes nothing else the rule set does (a rule of the
	// nat or mangle table, a non-terminating target that rewrites
	// packets): ParseOptions.SkipUnsupported skips such a line.
	Unsupported bool
}

// Error implements the error interface.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Pos.String())
	b.WriteString(": ")
	if e.Token != "" {
		b.WriteString(strconv.Quote(Clip(e.Token)))
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString("\n\thint: ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// maxListedErrors is how many errors ErrorList.Error prints before summarizing.
const maxListedErrors = 20

// ErrorList is every error of a rule file (at most one per line). Parse returns
// it sorted by position.
type ErrorList []*Error

// Error implements the error interface: one error per line, in position order,
// the first 20 of them followed by "and N more errors".
func (l ErrorList) Error() string {
	s := slices.Clone(l)
	s.Sort()
	var b strings.Builder
	for i, e := range s {
		if i == maxListedErrors {
			if more := len(s) - i; more == 1 {
				b.WriteString("and 1 more error")
			} else {
				fmt.Fprintf(&b, "and %d more errors", more)
			}
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
		if i == maxListedErrors-1 && len(s) > maxListedErrors {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Unwrap returns the errors of the list, so errors.As can find an *Error.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// Sort sorts the list by file, line and column.
func (l ErrorList) Sort() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(
			cmp.Compare(a.Pos.File, b.Pos.File),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Col, b.Pos.Col),
		)
	})
}
