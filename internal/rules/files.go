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

// ReadFiles parses the files of src, in that order, into one rule set (a
// user chain of several files is one chain). The
// CLI's load and apply and the daemon read rules through it.
func ReadFiles(src Sources) (*RuleSet, error) {
	out := &RuleSet{}
	err := src.each(func(name string, b []byte, opt ParseOptions) error {
		rs, err := Parse(name, b, opt)
		if err == nil {
			out.add(rs)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReportFiles reads the files of src as ReadFiles does with
// SkipUnsupported and reports what became of each line (Report): the
// reports of every file in order, and the rule set ReadFiles would return
// with SkipUnsupported (nil when a line is refused).
func ReportFiles(src Sources) ([]LineReport, *RuleSet, error) {
	var lines []LineReport
	out := &RuleSet{}
	err := src.each(func(name string, b []byte, opt ParseOptions) error {
		lr, rs, err := Report(name, b, opt)
		lines = append(lines, lr...)
		if rs == nil {
			out = nil
		} else if out != nil {
			out.add(rs)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return lines, out, nil
}

// add appends what rs holds to out.
func (out *RuleSet) add(rs *RuleSet) {
	out.Rules = append(out.Rules, rs.Rules...)
	out.Policies = append(out.Policies, rs.Policies...)
	out.Raw = append(out.Raw, rs.Raw...)
	out.Priority = append(out.Priority, rs.Priority...) // each file's rules are for its family
	if rs.PriorityPolicy != 0 {
		out.PriorityPolicy = rs.PriorityPolicy
	}
	out.Tables += rs.Tables
	out.Skipped = append(out.Skipped, rs.Skipped...)
	// A user chain of several files is one chain: its rules of each file
	// are for that file's family (-4 / -6), so together they do what
	// iptables' and ip6tables' chains of that name do apart.
	for _, c := range rs.Chains {
		if !out.HasChain(c.Name) {
			out.Chains = append(out.Chains, c)
		}
	}
}

// each reads the files of src in order and calls fn with each one's name,
// contents and options.
func (src Sources) each(fn func(name string, b []byte, opt ParseOptions) error) error {
	stdin := 0
	for _, f := range []struct {
		path string
		fam  Family
	}{{src.File, FamilyAny}, {src.IPv4File, FamilyIPv4}, {src.IPv6File, FamilyIPv6}} {
		if f.path == "" {
			continue
		}
		name, r := f.path, src.Stdin
		if f.path == "-" {
			if stdin++; stdin > 1 || r == nil {
				return errors.New("standard input (-) can be one rule file only")
			}
			name = StdinName
		}
		var b []byte
		var err error
		if f.path == "-" {
			b, err = ReadInput(name, r)
		} else {
			b, err = readRuleFile(f.path)
		}
		if err != nil {
			return err
		}
		if err := fn(name, b, ParseOptions{Family: f.fam, SkipUnsupported: src.SkipUnsupported}); err != nil {
			return err
		}
	}
	return nil
}
