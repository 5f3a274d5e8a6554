package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/telemetry"
)

func newMetrics(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "metrics",
		Short: "Serve the counters as Prometheus metrics",
		Long: `metrics serves what 'xdpfw stats' shows as Prometheus metrics at /metrics
(text exposition). xdpfw daemon serves the same handler at its
metrics.listen address; without the daemon, run 'xdpfw metrics serve', or
write the exposition to a file for node_exporter's textfile collector with
'xdpfw stats --prometheus'.
Metric names and meanings: docs/observability.md. A Grafana dashboard:
deploy/grafana/xdpfw-dashboard.json.`,
	}
	cmd.AddCommand(newMetricsServe(e))
	return cmd
}

func newMetricsServe(e *env) *cobra.Command {
	var (
		listen   string
		bpfStats bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve /metrics over HTTP until interrupted",
		Long: `serve listens on --listen (default: loopback only) and answers GET /metrics
with a fresh snapshot of every counter. Each scrape opens the pinned firewall
read-only: it never waits for a change in progress, and it works whether
xdpfw is loaded or not (xdpfw_loaded says which).

--bpf-stats asks the kernel to measure the programs' run time while serving
(BPF_ENABLE_STATS; xdpfw_program_run_time_seconds_total and
xdpfw_program_runs_total). It costs every BPF program on the host two clock
reads per run while it is on, so it is off by default; sysctl
kernel.bpf_stats_enabled=1 does the same for everyone.`,
		Example: `  xdpfw metrics serve
  xdpfw metrics serve --listen 0.0.0.0:9477 --bpf-stats
  curl -s 127.0.0.1:9477/metrics | grep '^xdpfw_dropped_packets_total'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", listen, err)
			}
			if bpfStats {
				c, err := telemetry.EnableProgramStats()
				if err != nil {
					ln.Close()
					return err
				}
				defer c.Close()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(e.stderr, "serving metrics at http://%s/metrics\n", ln.Addr())
			return serveMetrics(ctx, ln, telemetry.MetricsHandler(e.paths))
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9477", "address to listen on (host:port)")
	cmd.Flags().BoolVar(&bpfStats, "bpf-stats", false, "have the kernel measure program run time while serving")
	return cmd
}

// serveMetrics serves h at /metrics on ln until ctx ends, then shuts down.
func serveMetrics(ctx context.Context, ln net.Listener, h http.Handler) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "xdpfw: metrics at /metrics")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
