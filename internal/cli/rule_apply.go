package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
)

func newApply(e *env) *cobra.Command {
	var (
		src           sourceFlags
		flags         changeFlags
		check, onHost bool
	)
	cmd := &cobra.Command{
		Use:   "apply [RULES_FILE]",
		Short: "Replace the whole rule set atomically",
		Long: `apply compiles a rule file and swaps it in as one generation: every packet
sees either the old rules or the new ones. Counters of rules whose text is
unchanged carry over. A file with any error changes nothing.

A file with no rule, no policy and no *filter section (empty, blank, only
comments) is refused unless --allow-empty: it would accept everything.

RULES_FILE - reads standard input: iptables-save | xdpfw apply -, and
ip6tables-save | xdpfw apply --ipv6-file -. -I, -D and -R lines apply in
order while the file is read, as iptables-restore does.

With --nat xdpfw in force (load), a file's *nat section is read too: the
same nat table keeps the translations in force; a changed one is refused
(load --nat xdpfw replaces it, its live connections keeping their
translation); a file without one keeps the nat table in force, as
iptables-restore leaves a table the file does not name.

` + skipHelp + `

--check validates the file and the options exactly as apply does and
compiles the rules, changing nothing (exit status 2 on errors), and prints
the warnings apply would print. It takes -i names as interfaces that exist
unless --on-host: then it resolves them as apply on this host would.
--priority-cpus names this host's CPUs: --check resolves it as apply
would (each CPU online) and warns where the CPUs leave the rules'
xdpfw-priority table without effect.`,
		Example: `  xdpfw apply /etc/xdpfw/rules.conf
  xdpfw apply --check rules.conf
  xdpfw apply --check --on-host rules.conf
  iptables-save | xdpfw apply --skip-unsupported -
  ip6tables-save | xdpfw apply --ipv6-file -`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := src.sources(cmd, args, true, "apply")
			if err != nil {
				return err
			}
			opt, err := flags.options(cmd)
			if err != nil {
				return err
			}
			// with --nat xdpfw in force, a file's *nat section is read:
			// the same nat table is kept, a changed one refused (SameNAT)
			files.NAT = firewall.NATMode(e.paths) == firewall.NATXdpfw
			rs, err := e.readRules(files)
			if err != nil {
				return err
			}
			nat := rs.NAT
			rs.NAT = nil
			if err := firewall.Validate(rs, opt); err != nil {
				return err // what Apply and Check would say, before touching anything
			}
			if check {
				res, err := firewall.Check(e.paths, rs, opt, nil, onHost)
				if err != nil {
					return usageError{err}
				}
				e.printWarnings(res.Warnings)
				fmt.Fprintf(e.stdout, "ok: %d rules, %d classifier entries\n", len(rs.Rules), res.Entries)
				return nil
			}
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			if err := fw.SameNAT(nat); err != nil {
				return err
			}
			res, err := fw.Apply(rs, opt)
			if err != nil {
				return err
			}
			e.printResult(res)
			e.printGeneration(res)
			return nil
		},
	}
	src.add(cmd)
	flags.add(cmd, false)
	cmd.Flags().BoolVar(&check, "check", false, "validate and compile only, exactly as apply would, and print its warnings; change nothing")
	cmd.Flags().BoolVar(&onHost, "on-host", false, "with --check: judge -i names against the interfaces of this host's firewall "+
		"(else every -i name is taken to exist)")
	return cmd
}
