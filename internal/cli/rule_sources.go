package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// sourceFlags are the rule files of load and apply (and import) beside the
// RULES_FILE argument: --ipv4-file, --ipv6-file and --skip-unsupported. "-"
// names standard input.
type sourceFlags struct {
	v4file, v6file string
	skip           bool
}

// skipHelp explains --skip-unsupported.
const skipHelp = `iptables-save output often holds more than the filter table. xdpfw
refuses, with the reason, what it cannot run: the rules of the nat, mangle
and security tables (sections of chain declarations only are fine), the raw
table's rules but -j NOTRACK / -j CT --notrack (which it runs: the packets
are UNTRACKED), and targets that rewrite, mark or report packets (-j TCPMSS,
-j MARK...).
--skip-unsupported loads the rest and prints each line it left out, with
file:line and why. A target that would decide the packet (-j NFQUEUE) is
refused even then: its packets would go on to the next rule.`

func (s *sourceFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&s.v4file, "ipv4-file", "", "iptables-save file whose rules apply to IPv4 only (- for standard input)")
	fs.StringVar(&s.v6file, "ipv6-file", "", "ip6tables-save file whose rules apply to IPv6 only (- for standard input)")
	fs.BoolVar(&s.skip, "skip-unsupported", false, "leave out the lines xdpfw cannot run (nat, mangle, security rules, raw rules but NOTRACK; "+
		"-j TCPMSS, MARK...) and print each with its reason, instead of refusing the file")
}

// sources are the files: the argument (both families, if any) and the
// flags'. With need, naming none is a usage error of command what.
func (s *sourceFlags) sources(cmd *cobra.Command, args []string, need bool, what string) (rules.Sources, error) {
	src := rules.Sources{IPv4File: s.v4file, IPv6File: s.v6file, Stdin: cmd.InOrStdin(), SkipUnsupported: s.skip}
	if len(args) == 1 {
		src.File = args[0]
	}
	if need && src.File == "" && src.IPv4File == "" && src.IPv6File == "" {
		return src, usageError{fmt.Errorf("%s needs a rule file (- for standard input)", what)}
	}
	return src, nil
}

// readRules reads the rule files of files, and lists on stderr the lines
// --skip-unsupported left out (printSkipped).
func (e *env) readRules(files rules.Sources) (*rules.RuleSet, error) {
	rs, err := rules.ReadFiles(files)
	if err != nil {
		return nil, err
	}
	e.printSkipped(rs)
	return rs, nil
}

// printSkipped lists the lines --skip-unsupported left out, on stderr.
func (e *env) printSkipped(rs *rules.RuleSet) {
	for _, s := range rs.Skipped {
		fmt.Fprintln(e.stderr, s)
	}
	if n := len(rs.Skipped); n > 0 {
		fmt.Fprintf(e.stderr, "%d lines skipped (--skip-unsupported)\n", n)
	}
	if note := rules.KernelNATNote(rs.Skipped); note != "" {
		fmt.Fprintln(e.stderr, note)
	}
}
