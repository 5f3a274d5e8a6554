package rules

// ReadFiles parses a rule file for both families (file) and the per-family
// files (v4file, v6file: iptables-save / ip6tables-save output whose rules
// and policies apply to that family only), in that order, into one rule
// set (a user chain of several files is one chain). Empty names are skipped. The CLI's load and apply and the daemon read
// rules through it.
func ReadFiles(file, v4file, v6file string) (*RuleSet, error) {
	out := &RuleSet{}
	for _, f := range []struct {
		path string
		fam  Family
	}{{file, FamilyAny}, {v4file, FamilyIPv4}, {v6file, FamilyIPv6}} {
		if f.path == "" {
			continue
		}
		rs, err := ParseFile(f.path, ParseOptions{Family: f.fam})
		if err != nil {
			return nil, err
		}
		out.Rules = append(out.Rules, rs.Rules...)
		out.Policies = append(out.Policies, rs.Policies...)
		out.Tables += rs.Tables
		// A user chain of both files is one chain: its rules of each file
		// are for that file's family (-4 / -6), so together they do what
		// iptables' and ip6tables' chains of that name do apart.
		for _, c := range rs.Chains {
			if !out.HasChain(c.Name) {
				out.Chains = append(out.Chains, c)
			}
		}
	}
	return out, nil
}
