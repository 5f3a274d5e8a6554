package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/syslog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/internal/telemetry"
)

// Where log events (of -j LOG and --log rules) go: log.events.
const (
	EventsNone    = "none"    // not read: `xdpfw log` may read them
	EventsJournal = "journal" // lines on standard error, "<N>"-prefixed: journald files them at the rule's level
	EventsSyslog  = "syslog"  // the local syslog (facility daemon, tag xdpfw)
)

// retryEvents is how long the forwarder waits before trying again to
// open the ring buffer (e.g. while `xdpfw log` holds it).
const retryEvents = 5 * time.Second

// eventSink writes one event line at a syslog priority (0 emerg .. 7 debug).
type eventSink interface {
	write(prio int, line string) error
	close()
}

// journalSink writes "<N>line" to the daemon's standard error, the
// prefix sd-daemon(3) defines: journald stores the line at priority N.
type journalSink struct{ w io.Writer }

func (j journalSink) write(prio int, line string) error {
	_, err := fmt.Fprintf(j.w, "<%d>%s\n", prio, line)
	return err
}

func (journalSink) close() {}

type syslogSink struct{ w *syslog.Writer }

func (s syslogSink) write(prio int, line string) error {
	byPrio := [...]func(string) error{s.w.Emerg, s.w.Alert, s.w.Crit, s.w.Err, s.w.Warning, s.w.Notice, s.w.Info, s.w.Debug}
	return byPrio[min(max(prio, 0), len(byPrio)-1)](line)
}

func (s syslogSink) close() { s.w.Close() }

// forwarder reads the log ring buffer and writes each event to a sink
// until stopped.
type forwarder struct {
	stop func()
	wg   sync.WaitGroup
}

// forwardEvents starts forwarding events as cfg says (nil: not at all).
func (d *Daemon) forwardEvents(cfg *Config) *forwarder {
	if cfg.Log.Events == EventsNone {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwarder{stop: cancel}
	c := cfg.Log
	f.wg.Go(func() { d.forward(ctx, c) })
	return f
}

// close stops the forwarder and waits for it.
func (f *forwarder) close() {
	if f == nil {
		return
	}
	f.stop()
	f.wg.Wait()
}

func (d *Daemon) forward(ctx context.Context, c LogConfig) {
	for {
		err := d.forwardOnce(ctx, c)
		if ctx.Err() != nil {
			return
		}
		d.log().Warn("log events not forwarded; trying again", "events", c.Events, "error", err.Error(), "in", retryEvents.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryEvents):
		}
	}
}

// forwardOnce opens the ring buffer (taking the one reader's lock) and
// forwards until ctx ends or reading fails.
func (d *Daemon) forwardOnce(ctx context.Context, c LogConfig) error {
	var sink eventSink
	switch c.Events {
	case EventsJournal:
		sink = journalSink{w: d.stderr()}
	case EventsSyslog:
		network, addr, _ := strings.Cut(c.SyslogAddress, ":") // checked; "" and "": the local syslog
		w, err := syslog.Dial(network, addr, syslog.LOG_DAEMON|syslog.LOG_WARNING, "xdpfw")
		if err != nil {
			return fmt.Errorf("connecting to syslog: %w", err)
		}
		sink = syslogSink{w: w}
	}
	defer sink.close()
	rd, err := telemetry.OpenReader(d.Paths.PinDir, d.Paths.StateDir)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { rd.Close() })
	defer stop()
	defer rd.Close()
	d.log().Info("forwarding log events", "to", c.Events)
	names := telemetry.KernelIfNames()
	var (
		idx     telemetry.Rules
		indexed time.Time // the state file's time when idx was made
	)
	// Rule numbers shift with every change, the daemon's or a command's:
	// index again when the state file changed.
	index := func() {
		fi, err := os.Stat(d.Paths.StateFile())
		if err != nil || fi.ModTime().Equal(indexed) {
			return
		}
		if in, err := firewall.ReadInForce(d.Paths); err == nil {
			idx, indexed = telemetry.IndexRules(in.Rules, in.IDs), fi.ModTime()
		}
	}
	for {
		ev, err := rd.Next(true)
		if errors.Is(err, os.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		index()
		idx.Trim(&ev)
		r := idx[ev.RuleID]
		if err := sink.write(rules.SyslogPriority(r.Level), ev.Line(idx, names)); err != nil {
			return err
		}
	}
}
