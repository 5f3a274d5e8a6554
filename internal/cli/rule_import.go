package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// importLine is one line of `xdpfw import --json`.
type importLine struct {
	Pos    string `json:"pos"`
	Line   string `json:"line"`
	Result string `json:"result"`
	Rule   string `json:"rule,omitempty"`
	Why    string `json:"why,omitempty"`
}

// importSummary is the last object of `xdpfw import --json`.
type importSummary struct {
	Lines      int  `json:"lines"`
	Taken      int  `json:"taken"`
	Translated int  `json:"translated"`
	Skipped    int  `json:"skipped"`
	Refused    int  `json:"refused"`
	Loads      bool `json:"loads"`
}

func newImport(e *env) *cobra.Command {
	var (
		src    sourceFlags
		asJSON bool
		output string
	)
	cmd := &cobra.Command{
		Use:   "import [RULES_FILE|-]",
		Short: "Report what xdpfw makes of each line of an iptables-save file; change nothing",
		Long: `import reads rule files as apply does (RULES_FILE for both families,
--ipv4-file / --ipv6-file for iptables-save / ip6tables-save output, "-"
for standard input) and prints, for each line that is not blank or a
comment, what xdpfw makes of it:

  taken       it means in xdpfw what it means in iptables (the rule as
              'xdpfw list' will show it follows)
  translated  it loads, and xdpfw does what it asks its own way, which the
              line says (-j NFLOG: the events go to xdpfw log, not netlink)
  skipped     xdpfw cannot run it (nat, mangle, security, raw rules;
              -j TCPMSS, -j MARK...): apply refuses the file unless
              --skip-unsupported, which leaves these lines out
  refused     xdpfw cannot load it: apply refuses the file

then a summary. It changes nothing: no firewall, no state. With -o FILE
it also writes the rules that load (when no line is refused) as an xdpfw
rule file, each rule in the canonical form with its family: 'xdpfw apply
FILE' loads it as it is.

Exit status: 0 when the file loads (with --skip-unsupported if a line is
skipped), 2 when a line is refused.`,
		Example: `  iptables-save | xdpfw import --ipv4-file -
  xdpfw import --ipv4-file rules.v4 --ipv6-file rules.v6
  xdpfw import --ipv4-file rules.v4 -o /etc/xdpfw/rules.conf && xdpfw apply /etc/xdpfw/rules.conf
  xdpfw import --json --ipv4-file rules.v4`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := src.sources(cmd, args, true, "import")
			if err != nil {
				return err
			}
			lines, rs, err := rules.ReportFiles(files)
			if err != nil {
				return err
			}
			var sum importSummary
			enc := json.NewEncoder(e.stdout)
			for _, l := range lines {
				sum.Lines++
				switch l.Result {
				case rules.LineTaken:
					sum.Taken++
				case rules.LineTranslated:
					sum.Translated++
				case rules.LineSkipped:
					sum.Skipped++
				default:
					sum.Refused++
				}
				if asJSON {
					if err := enc.Encode(importLine{Pos: l.Pos.String(), Line: l.Line, Result: l.Result.String(), Rule: l.Rule, Why: l.Why}); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(e.stdout, "%s: %s: %s\n", l.Pos, l.Result, l.Line)
				if l.Rule != "" && l.Rule != l.Line {
					fmt.Fprintf(e.stdout, "\tas: %s\n", l.Rule)
				}
				if l.Why != "" {
					fmt.Fprintf(e.stdout, "\twhy: %s\n", l.Why)
				}
			}
			sum.Loads = rs != nil
			if asJSON {
				if err := enc.Encode(sum); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(e.stdout, "%d lines: %d taken, %d translated, %d skipped, %d refused\n",
					sum.Lines, sum.Taken, sum.Translated, sum.Skipped, sum.Refused)
				switch {
				case rs == nil:
					fmt.Fprintln(e.stdout, "the files do not load: fix or remove the refused lines")
				case sum.Skipped > 0:
					fmt.Fprintln(e.stdout, "the files load with --skip-unsupported (without it, apply refuses them)")
					if note := rules.KernelNATNote(rs.Skipped); note != "" {
						fmt.Fprintln(e.stdout, note)
					}
				default:
					fmt.Fprintln(e.stdout, "the files load as they are")
				}
			}
			if rs == nil {
				return refusedLines{sum.Refused}
			}
			if output != "" {
				rs.Skipped = nil
				if err := os.WriteFile(output, []byte(rs.String()), 0o644); err != nil {
					return fmt.Errorf("writing %s: %w", output, err)
				}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&src.v4file, "ipv4-file", "", "iptables-save file whose rules apply to IPv4 only (- for standard input)")
	fs.StringVar(&src.v6file, "ipv6-file", "", "ip6tables-save file whose rules apply to IPv6 only (- for standard input)")
	fs.BoolVar(&asJSON, "json", false, "one JSON object per line (pos, line, result, rule, why), then the summary")
	fs.StringVarP(&output, "output", "o", "", "also write the rules that load to this file, as an xdpfw rule file (only when no line is refused)")
	return cmd
}

// refusedLines is import's failure: lines were refused (exit status 2).
type refusedLines struct{ n int }

func (r refusedLines) Error() string { return fmt.Sprintf("%d lines refused", r.n) }
