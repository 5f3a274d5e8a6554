package rules

import (
	"errors"
	"io"
)

// Sources names the rule files of a load or apply: a file for both
// families (File), and iptables-save / ip6tables-save output whose rules
// and policies apply to one family only (IPv4File, IPv6File). Empty names
// are left out; "-" is standard input (Stdin; one of the three at most).
type Sources struct {
	File, IPv4File, IPv6File string
	Stdin                    io.Reader
	// SkipUnsupported: see ParseOptions.
	SkipUnsupported bool
}

// StdinName is how positions name standard input.
const StdinName = "<stdin>"

// ReadFiles parses the files of src, in that order, into one rule set. The
// CLI's load, apply and import and the daemon read rules through it.
func ReadFiles(src Sources) (*RuleSet, error) {
	out := &RuleSet{}
	stdin := 0
	for _, f := range []struct {
		path string
		fam  Family
	}{{src.File, FamilyAny}, {src.IPv4File, FamilyIPv4}, {src.IPv6File, FamilyIPv6}} {
		if f.path == "" {
			continue
		}
		opt := ParseOptions{Family: f.fam, SkipUnsupported: src.SkipUnsupported}
		var rs *RuleSet
		var err error
		if f.path == "-" {
			if stdin++; stdin > 1 || src.Stdin == nil {
				return nil, errors.New("standard input (-) can be one rule file only")
			}
			var b []byte
			if b, err = ReadInput(StdinName, src.Stdin); err == nil {
				rs, err = Parse(StdinName, b, opt)
			}
		} else {
			rs, err = ParseFile(f.path, opt)
		}
		if err != nil {
			return nil, err
		}
		out.Rules = append(out.Rules, rs.Rules...)
		out.Policies = append(out.Policies, rs.Policies...)
		out.Tables += rs.Tables
		out.Skipped = append(out.Skipped, rs.Skipped...)
	}
	return out, nil
}
