package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

func newApply(e *env) *cobra.Command {
	var (
		v4file, v6file string
		malformed      string
		ct             ctFlags
		check          bool
		reject         rejectFlags
		logs           logFlags
	)
	cmd := &cobra.Command{
		Use:   "apply [RULES_FILE]",
		Short: "Replace the whole rule set atomically",
		Long: `apply compiles a rule file and swaps it in as one generation: every packet
sees either the old rules or the new ones. Counters of rules whose text is
unchanged carry over. A file with any error changes nothing.

--check only parses and compiles (exit status 2 on errors).`,
		Example: `  xdpfw apply /etc/xdpfw/rules.conf
  xdpfw apply --check rules.conf`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			if file == "" && v4file == "" && v6file == "" {
				return usageError{fmt.Errorf("apply needs a rule file")}
			}
			rate, burst, err := reject.values()
			if err != nil {
				return err
			}
			var logOpt firewall.Options
			if err := logs.apply(cmd, &logOpt); err != nil {
				return err
			}
			rs, err := rules.ReadFiles(file, v4file, v6file)
			if err != nil {
				return err
			}
			if check {
				n, err := firewall.CheckCompiles(e.paths, rs, nil)
				if err != nil {
					return usageError{err}
				}
				fmt.Fprintf(e.stdout, "ok: %d rules, %d classifier entries\n", len(rs.Rules), n)
				return nil
			}
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			opt := firewall.Options{Malformed: malformed, RejectRate: rate, RejectBurst: burst}
			if err := reject.setGlobal(&opt); err != nil {
				return err
			}
			if err := ct.apply(cmd, &opt, false); err != nil {
				return err
			}
			opt.LogRate, opt.LogBurst = logOpt.LogRate, logOpt.LogBurst
			res, err := fw.Apply(rs, opt)
			if err != nil {
				return err
			}
			e.printResult(res)
			e.printGeneration(res)
			return nil
		},
	}
	cmd.Flags().StringVar(&v4file, "ipv4-file", "", "iptables-save file whose rules apply to IPv4 only")
	cmd.Flags().StringVar(&v6file, "ipv6-file", "", "ip6tables-save file whose rules apply to IPv6 only")
	cmd.Flags().StringVar(&malformed, "malformed", "", "verdict for malformed packets: drop or accept (default: unchanged)")
	ct.register(cmd, false)
	reject.add(cmd, "default: unchanged")
	logs.add(cmd, false, "default: unchanged")
	cmd.Flags().BoolVar(&check, "check", false, "parse and validate only; change nothing")
	return cmd
}
