package rules

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
)

// Named sets (ipset-style): the names rules use in -m set --match-set, the
// kinds of set, and the elements they hold, as given on the command line,
// in element files and in `ipset save` output.

// SetType is the type of a named set, spelled as ipset spells it.
type SetType string

// The set types.
const (
	SetHashIP  SetType = "hash:ip"  // single addresses (/32, /128)
	SetHashNet SetType = "hash:net" // networks of any prefix length
)

// ParseSetType parses "hash:ip" or "hash:net".
func ParseSetType(s string) (SetType, error) {
	switch t := SetType(s); t {
	case SetHashIP, SetHashNet:
		return t, nil
	}
	return "", fmt.Errorf("set type %q: want hash:ip (single addresses) or hash:net (networks); "+
		"other ipset types are not supported", Clip(s))
}

// ParseSetFamily parses a set's family: "inet" or "inet6" as ipset spells
// them ("ipv4" and "ipv6" are accepted too).
func ParseSetFamily(s string) (Family, error) {
	switch s {
	case "inet", "ipv4":
		return FamilyIPv4, nil
	case "inet6", "ipv6":
		return FamilyIPv6, nil
	}
	return FamilyAny, fmt.Errorf("set family %q: want inet (IPv4) or inet6 (IPv6)", Clip(s))
}

// SetFamilyName is the ipset name of a set's family: "inet" or "inet6".
func SetFamilyName(f Family) string {
	if f == FamilyIPv6 {
		return "inet6"
	}
	return "inet"
}

// SetKind is what decides which elements a set takes.
type SetKind struct {
	Type   SetType
	Family Family // FamilyIPv4 or FamilyIPv6
}

func (k SetKind) String() string { return string(k.Type) + " " + SetFamilyName(k.Family) }

// SetNameHint says what a set name may be.
const SetNameHint = "set names are 1-31 characters of letters, digits, '.', '_' and '-', not starting with '-'"

// ValidSetName reports whether s is a valid set name: ipset's length limit
// (31) and a conservative character set.
func ValidSetName(s string) bool {
	if len(s) == 0 || len(s) > 31 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return s[0] != '-'
}

// parseSetElem parses one element of a set of kind k: an address, or a
// CIDR for hash:net (host bits are cleared, as ipset does). hash:ip takes
// an address, or one written as a /32 (/128) prefix.
func parseSetElem(s string, k SetKind) (netip.Prefix, *valueErr) {
	if i := strings.IndexByte(s, '-'); i >= 0 {
		return netip.Prefix{}, &valueErr{off: i, tok: s, msg: "address ranges are not supported",
			hint: "write the range as CIDRs (one per line)"}
	}
	p, ve := parsePrefix(s)
	if ve != nil {
		return p, ve
	}
	if fam := familyOf(p.Addr()); fam != k.Family {
		return p, &valueErr{tok: s, msg: fmt.Sprintf("an %s address in an %s set", famName(fam), famName(k.Family)),
			hint: fmt.Sprintf("a set holds one family; create another with --family %s", SetFamilyName(fam))}
	}
	if k.Type == SetHashIP && p.Bits() != p.Addr().BitLen() {
		return p, &valueErr{tok: s, msg: "a network in a hash:ip set, which holds single addresses",
			hint: "use a hash:net set for networks"}
	}
	return p, nil
}

func familyOf(a netip.Addr) Family {
	if a.Is4() {
		return FamilyIPv4
	}
	return FamilyIPv6
}

// maxElemErrors bounds the errors collected from one element or restore
// file.
const maxElemErrors = 1000

// lexLines lexes src line by line and calls fn with the tokens of every line
// that has any; fn reports at most one error per line. It returns the
// errors, stopping after maxElemErrors of them.
func lexLines(file string, src []byte, fn func(line int, toks []token) *Error) ErrorList {
	var errs ErrorList
	line := 0
	for len(src) > 0 {
		line++
		if len(errs) == maxElemErrors {
			errs = append(errs, &Error{Pos: Pos{file, line, 1}, Msg: "too many errors; stopped reading"})
			break
		}
		text := src
		if i := bytes.IndexByte(src, '\n'); i >= 0 {
			text, src = src[:i], src[i+1:]
		} else {
			src = nil
		}
		toks, err := lexLine(string(text), Pos{File: file, Line: line})
		if err == nil && len(toks) > 0 {
			err = fn(line, toks)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// ParseSetElems parses an element file for a set of kind k: one element
// per line, '#' starting a comment, blank lines ignored. It returns every
// element in file order, or every error (an ErrorList at file:line:col).
func ParseSetElems(file string, src []byte, k SetKind) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, bytes.Count(src, []byte{'\n'})+1)
	errs := lexLines(file, src, func(line int, toks []token) *Error {
		if len(toks) > 1 {
			t := toks[1]
			return &Error{Pos: Pos{file, line, t.col}, Token: t.text, Msg: "one element per line",
				Hint: "put each address or network on its own line ('#' starts a comment)"}
		}
		p, ve := parseSetElem(toks[0].text, k)
		if ve != nil {
			return elemErr(Pos{file, line, toks[0].col}, ve)
		}
		out = append(out, p)
		return nil
	})
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// ParseSetElemArgs parses elements given as command-line arguments;
// errors are at line 1 of "<command line>", at the column within the
// arguments joined by single spaces.
func ParseSetElemArgs(args []string, k SetKind) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(args))
	var errs ErrorList
	col := 1
	for _, a := range args {
		p, ve := parseSetElem(a, k)
		if ve != nil {
			errs = append(errs, elemErr(Pos{commandLine, 1, col}, ve))
		}
		out = append(out, p)
		col += len(a) + 1
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func elemErr(at Pos, ve *valueErr) *Error {
	at.Col += ve.off
	return &Error{Pos: at, Token: ve.tok, Msg: ve.msg, Hint: ve.hint}
}

// Accepts reports whether p is an element a set of kind k takes (see
// parseSetElem, which says why not).
func (k SetKind) Accepts(p netip.Prefix) bool {
	return p.IsValid() && familyOf(p.Addr()) == k.Family && p == p.Masked() &&
		(k.Type == SetHashNet || p.Bits() == p.Addr().BitLen())
}
