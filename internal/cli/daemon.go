package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/daemon"
	"github.com/xdpfw/xdpfw/internal/telemetry"
)

func newDaemon(e *env) *cobra.Command {
	var (
		config string
		check  bool
	)
	cmd := &cobra.Command{
		Use:   "daemon [--config FILE] [--check]",
		Short: "Keep a configuration file in force: reload, conntrack GC, metrics",
		Long: `daemon puts the configuration file in force (interfaces and attach modes,
the rules file, sets files, conntrack and REJECT settings) and keeps it so. SIGHUP, or a change of the configuration or of a file it names
(watch: true), reloads; a file with errors is logged with file:line:col and
changes nothing: the rules in force stay in force. Expired conntrack entries
are collected at an adaptive interval. Metrics are served at
http://127.0.0.1:9477/metrics (metrics.listen).

The daemon is not on the packet path. It adopts what is pinned when it
starts: after a crash, kill -9 or an upgrade, filtering never stopped, and
an unchanged configuration changes nothing (same generation, same counters).
SIGTERM stops the daemon and leaves the firewall in force (detach_on_stop:
true removes it). It tells systemd when it is ready (Type=notify).

--check reads the configuration and every file it names and compiles the
rules, changing nothing; exit status 2 on any error.

deploy/xdpfw.yaml documents every option with its default; deploy/ also has
a systemd unit and a Kubernetes DaemonSet.`,
		Example: `  xdpfw daemon --config /etc/xdpfw/xdpfw.yaml
  xdpfw daemon --check --config /etc/xdpfw/xdpfw.yaml
  systemctl reload xdpfw        # SIGHUP`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if check {
				msg, err := daemon.Check(e.paths, config)
				if err != nil {
					return usageError{err}
				}
				fmt.Fprintln(e.stdout, msg)
				return nil
			}
			d := &daemon.Daemon{Paths: e.paths, ConfigPath: config, Stderr: e.stderr,
				Metrics: telemetry.MetricsHandler}
			return d.Run(context.Background())
		},
	}
	cmd.Flags().StringVarP(&config, "config", "c", daemon.DefaultConfigPath, "configuration file (YAML)")
	cmd.Flags().BoolVar(&check, "check", false, "check the configuration and the files it names; change nothing")
	return cmd
}
