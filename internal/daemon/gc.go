package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdpfw/xdpfw/internal/datapath"
)

// gcRemoved and gcRuns are the daemon's own metrics (served with the
// firewall's at /metrics): what its conntrack GC did.
var (
	gcRemoved = prometheus.NewCounter(prometheus.CounterOpts{Name: "xdpfw_conntrack_gc_removed_total",
		Help: "Expired conntrack entries the daemon's GC removed (their room given back)."})
	gcRuns = prometheus.NewCounter(prometheus.CounterOpts{Name: "xdpfw_conntrack_gc_runs_total",
		Help: "Runs of the daemon's conntrack GC."})
	gcInterval = prometheus.NewGauge(prometheus.GaugeOpts{Name: "xdpfw_conntrack_gc_interval_seconds",
		Help: "The adaptive interval until the daemon's next conntrack GC run."})
)

// Collectors are the daemon's own metrics.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{gcRemoved, gcRuns, gcInterval}
}

// pacer chooses the conntrack GC interval. The data plane treats expired
// entries as absent already, so GC only gives their room back; it must run
// often when many connections expire (a flood's, or a busy host's) and may
// rest when few do. The interval halves while a run frees at least 5 % of
// the table and doubles while a run frees less than 0.5 %, within [min, max].
type pacer struct {
	cur time.Duration
}

func (p *pacer) next(removed, capacity int, min, max time.Duration) time.Duration {
	if p.cur == 0 {
		p.cur = min
	}
	switch {
	case capacity > 0 && removed*20 >= capacity:
		p.cur /= 2
	case capacity <= 0 || removed*200 < capacity:
		p.cur *= 2
	}
	p.cur = clamp(p.cur, min, max)
	return p.cur
}

func clamp(v, lo, hi time.Duration) time.Duration {
	return max(lo, min(v, hi))
}

// collect runs conntrack GC until ctx ends. It opens the pinned maps
// without the firewall's lock, so it never waits for (or delays) a
// command; map operations are safe alongside any change.
func (d *Daemon) collect(ctx context.Context) {
	var p pacer
	wait := time.Duration(d.config().Conntrack.GCMin)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		removed, capacity, err := gcOnce(d.Paths.PinDir)
		if err != nil {
			d.log().Warn("conntrack gc", "error", err.Error())
		} else if removed > 0 {
			d.log().Debug("conntrack gc", "removed", removed, "table", capacity)
		}
		gcRuns.Inc()
		gcRemoved.Add(float64(removed))
		c := d.config().Conntrack
		wait = p.next(removed, capacity, time.Duration(c.GCMin), time.Duration(c.GCMax))
		gcInterval.Set(wait.Seconds())
	}
}

// gcOnce removes the expired conntrack entries.
func gcOnce(pinDir string) (removed, capacity int, err error) {
	dp, err := datapath.Open(pinDir)
	if errors.Is(err, datapath.ErrNotLoaded) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	defer dp.Close()
	n, err := dp.CTGC()
	return n, dp.Limits().Conntrack, err
}
