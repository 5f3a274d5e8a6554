package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// Daemon keeps a configuration in force.
type Daemon struct {
	Paths      firewall.Paths
	ConfigPath string
	// Stderr receives the daemon's log (nil: os.Stderr).
	Stderr io.Writer
	// Metrics, when set, makes the handler served at /metrics, with the
	// daemon's own collectors (Collectors) added.
	Metrics func(firewall.Paths, ...prometheus.Collector) http.Handler

	logp    atomic.Pointer[slog.Logger] // replaced by a reload; read by every goroutine
	reloads atomic.Uint64               // reloads begun: the sequence number of the last
	// namesOut: the rules in force have FORWARD -o, whose names resolve
	// against every interface of the host: a link created, removed or
	// renamed makes a reload (watchLinks).
	namesOut  atomic.Bool
	mu        sync.Mutex // guards cfg
	cfg       *Config
	metrics   *metricsServer
	events    *forwarder
	pppoeWhy  string // why PPPoE sessions are unpaired, as last logged (refreshPPPoE)
	pppoeDevs string // the PPPoE sessions' ppp devices the rules were compiled with (refreshPPPoE)
}

// log is the daemon's logger.
func (d *Daemon) log() *slog.Logger { return d.logp.Load() }

// stderr is where the daemon logs.
func (d *Daemon) stderr() io.Writer {
	if d.Stderr == nil {
		return os.Stderr
	}
	return d.Stderr
}

// settle is how long the files must stay quiet after a change before the
// daemon reloads (editors write a file in several steps). A file still open
// for writing holds the reload back however long it takes (watcher).
const settle = 200 * time.Millisecond

// Run starts the daemon: it reads the configuration and puts it in force
// (adopting what is pinned), then reloads on SIGHUP and file changes and
// collects conntrack garbage until ctx ends or SIGTERM/SIGINT. A
// configuration that cannot be put in force at start is an error (the
// firewall pinned before, if any, stays in force); later, a bad reload is
// logged and the configuration in force stays.
func (d *Daemon) Run(ctx context.Context) error {
	d.logp.Store(newLogger(d.stderr(), LogConfig{Level: "info", Format: "text"}))
	cfg, err := LoadConfig(d.ConfigPath)
	if err != nil {
		return err
	}
	d.logp.Store(newLogger(d.stderr(), cfg.Log))
	d.log().Info("starting", "config", d.ConfigPath, "pin_dir", d.Paths.PinDir, "program", datapath.ProgramVersion())
	pl, err := readPlan(d.Paths, cfg)
	if err == nil {
		_, err = d.put(pl, true)
	}
	if err != nil {
		return fmt.Errorf("%w (what was in force before, if anything, stays in force)", err)
	}
	d.setConfig(cfg)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	w, err := newWatcher(d.log())
	if err != nil {
		return err
	}
	defer w.close()
	if cfg.Watch {
		w.watch(cfg.Files())
	}
	d.serveMetrics(cfg)
	defer d.metrics.stop()
	d.events = d.forwardEvents(cfg)
	defer func() { d.events.close() }()

	gcCtx, stopGC := context.WithCancel(ctx)
	var gcDone sync.WaitGroup
	gcDone.Go(func() { d.collect(gcCtx) })
	defer func() { stopGC(); gcDone.Wait() }()

	linksDone := make(chan struct{})
	defer close(linksDone)
	links, linkSet := d.watchLinks(linksDone)
	routes := d.watchLocalRoutes(linksDone)
	pppoe := d.watchPPPoE(linksDone)
	if ss, _, err := firewall.PPPoESessions(); err == nil {
		d.pppoeDevs = pppoeDevices(ss) // those the rules were compiled with
	}

	notify("READY=1\nSTATUS=in force")
	d.log().Info("ready")
	var quiet <-chan time.Time // armed after a file event
	why := ""                  // what the pending reload is for
	for {
		select {
		case <-ctx.Done():
			return d.stop()
		case s := <-sigs:
			if s != syscall.SIGHUP {
				d.log().Info("stopping", "signal", s.String())
				return d.stop()
			}
			d.log().Info("reloading", "signal", "SIGHUP")
			quiet, why = nil, "SIGHUP"
			if d.tryReload(w, why) {
				quiet = time.After(settle)
			}
		case ev := <-w.events:
			d.log().Debug("file event", "file", ev)
			quiet, why = time.After(settle), "file change"
		case name := <-links:
			d.log().Info("a configured interface is not filtered (re-created?); attaching it again", "interface", name)
			quiet, why = time.After(settle), "interface "+name
		case <-linkSet:
			d.log().Debug("interfaces changed; -o names are resolved again")
			quiet, why = time.After(settle), "interfaces changed (-o)"
		case <-routes:
			if err := firewall.RefreshAddrTypes(d.Paths); err != nil {
				d.log().Warn("the local routing table changed; -m addrtype's copy not refreshed", "error", err.Error())
			}
		case <-pppoe:
			if d.refreshPPPoE() {
				quiet, why = time.After(settle), "PPPoE sessions changed (-i of their ppp devices)"
			}
		case <-quiet:
			quiet = nil
			if d.tryReload(w, why) {
				quiet = time.After(settle)
			}
		}
	}
}

func (d *Daemon) setConfig(c *Config) {
	d.mu.Lock()
	d.cfg = c
	d.mu.Unlock()
}

func (d *Daemon) config() *Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// tryReload reloads unless a watched file is being written: then the
// writer's close (a file event) brings the reload back. It reports
// whether the reload must be tried again once the files are quiet (they
// changed while being read).
func (d *Daemon) tryReload(w *watcher, why string) (again bool) {
	if busy := w.beingWritten(); len(busy) > 0 {
		d.log().Info("reload waits: a file is being written (modified, not closed yet); the configuration in force stays",
			"files", busy, "why", why)
		return false
	}
	return d.reload(w, why)
}

// Reload results, as the "reload done" log line and the STATUS= sent to
// systemd name them.
const (
	reloadApplied   = "applied"   // something in force changed
	reloadUnchanged = "unchanged" // the configuration is what is in force
	reloadFailed    = "failed"    // an error; the configuration in force stays
	reloadChanging  = "changing"  // a file changed while it was read; tried again
)

// reload reads the configuration again and puts it in force; on any
// error the configuration in force stays. Each reload has a sequence
// number, logged with its result when it is done ("reload done", seq,
// result) and sent to systemd (STATUS=reload N: RESULT): what waits for a
// reload waits for that line, not for the next READY=1 (which a reload
// of its own, or none, may send). It reports whether to try again (the
// files changed while they were read: nothing was applied).
func (d *Daemon) reload(w *watcher, why string) (again bool) {
	seq := d.reloads.Add(1)
	notify("RELOADING=1")
	result := d.reloadOnce(w)
	d.log().Info("reload done", "seq", seq, "result", result, "why", why)
	notify(fmt.Sprintf("READY=1\nSTATUS=reload %d: %s", seq, result))
	return result == reloadChanging
}

func (d *Daemon) reloadOnce(w *watcher) string {
	// Stamp the files before reading and after parsing: a file that
	// changed meanwhile may have been read half-written.
	before := stamp(nil, d.ConfigPath)
	cfg, err := LoadConfig(d.ConfigPath)
	var pl *plan
	if err == nil {
		stamp(before, cfg.Files()...)
		pl, err = readPlan(d.Paths, cfg)
	}
	if after := stamp(nil, slices.Collect(maps.Keys(before))...); !maps.Equal(before, after) {
		d.log().Warn("a file changed while it was read; nothing applied, reading it again when it is quiet")
		return reloadChanging
	}
	changed := false
	if err == nil {
		changed, err = d.put(pl, false)
	}
	if err != nil {
		d.log().Error("reload failed; the configuration in force stays", "error", err.Error())
		return reloadFailed
	}
	old := d.config()
	d.setConfig(cfg)
	if cfg.Watch {
		w.watch(cfg.Files())
	} else {
		w.watch(nil)
	}
	if old.Metrics.Listen != cfg.Metrics.Listen {
		d.metrics.stop()
		d.serveMetrics(cfg)
	}
	if old.Log != cfg.Log {
		d.logp.Store(newLogger(d.stderr(), cfg.Log))
	}
	if old.Log.Events != cfg.Log.Events {
		d.events.close()
		d.events = d.forwardEvents(cfg)
	}
	if changed {
		return reloadApplied
	}
	return reloadUnchanged
}

// stamp adds to m (nil: a new map) an identity of each file's content as
// the file system reports it: inode, size and modification time; a file
// that cannot be read is stamped with the error.
func stamp(m map[string]string, files ...string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			m[f] = err.Error()
			continue
		}
		var ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		m[f] = fmt.Sprintf("%d %d %d", ino, fi.Size(), fi.ModTime().UnixNano())
	}
	return m
}

// plan is a configuration read whole, every file it names parsed, nothing
// put in force yet.
type plan struct {
	want     firewall.Desired
	restores []setsFile
}

// readPlan reads and parses every file cfg names.
func readPlan(p firewall.Paths, cfg *Config) (*plan, error) {
	want, err := cfg.desired()
	if err != nil {
		return nil, err
	}
	restores, err := readSets(p, cfg)
	if err != nil {
		return nil, err
	}
	return &plan{want: want, restores: restores}, nil
}

// put puts pl in force: the sets files first (rules may name their sets),
// then interfaces, rules and settings through firewall.Reconcile. It
// reports whether anything changed.
func (d *Daemon) put(pl *plan, start bool) (bool, error) {
	want := pl.want
	defer func() {
		d.namesOut.Store(slices.ContainsFunc(want.Rules.Rules, func(r rules.Rule) bool {
			return r.Chain == rules.ChainForward && r.Match.OutIface != nil
		}))
	}()
	changed := false
	if len(pl.restores) > 0 {
		s, err := firewall.OpenSets(d.Paths)
		if err != nil {
			return false, err
		}
		for _, r := range pl.restores {
			res, err := s.Sync(r.restore)
			if err != nil {
				s.Close()
				return changed, fmt.Errorf("%s: %w", r.file, err)
			}
			if res.Added+res.Removed+len(res.Created) > 0 {
				changed = true
				d.log().Info("sets updated", "file", r.file, "created", res.Created, "added", res.Added, "removed", res.Removed)
			}
		}
		s.Close()
	}
	ch, err := firewall.Reconcile(d.Paths, want)
	if err != nil {
		return changed, err
	}
	switch {
	case ch.Changed():
		attrs := []any{"why", strings.Join(ch.Why, ", "), "rules", len(want.Rules.Rules)}
		if ch.Result != nil {
			attrs = append(attrs, "generation", ch.Result.Generation, "entries", ch.Result.Entries)
			for _, u := range ch.Result.Upgraded {
				d.log().Info("pinned map upgraded", "map", u)
			}
			for _, w := range ch.Result.Warnings {
				d.log().Warn("rule warning", "warning", w)
			}
			for _, s := range want.Rules.Skipped {
				d.log().Warn("line skipped (skip_unsupported)", "line", s.String())
			}
		}
		if len(ch.Detached) > 0 {
			attrs = append(attrs, "detached", ch.Detached)
		}
		d.log().Info("configuration in force", attrs...)
		return true, nil
	case start:
		d.log().Info("adopted the firewall in force: it is what the configuration asks for", "rules", len(want.Rules.Rules))
	case !changed:
		d.log().Info("configuration unchanged")
	}
	return changed, nil
}

// setsFile is a parsed sets file.
type setsFile struct {
	file    string
	restore *rules.SetRestore
}

// readSets parses every sets file of cfg (errors at file:line:col).
func readSets(p firewall.Paths, cfg *Config) ([]setsFile, error) {
	if len(cfg.Sets) == 0 {
		return nil, nil
	}
	s, err := firewall.OpenSets(p)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	existing := func(name string) (rules.SetKind, bool) {
		k, err := s.Kind(name)
		return k, err == nil
	}
	var out []setsFile
	for _, f := range cfg.Sets {
		path := cfg.abs(f)
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("sets file: %w", err)
		}
		r, err := rules.ParseIpsetSave(path, src, existing)
		if err != nil {
			return nil, err
		}
		out = append(out, setsFile{file: path, restore: r})
	}
	return out, nil
}

// Check reads the configuration at path and every file it names and
// compiles the rules, changing nothing (`xdpfw daemon --check`). It
// returns a summary.
func Check(p firewall.Paths, path string) (string, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return "", err
	}
	pl, err := readPlan(p, cfg)
	if err != nil {
		return "", err
	}
	more := map[string]compile.SetInfo{}
	for _, r := range pl.restores {
		for _, c := range r.restore.Creates {
			// Any id will do for a compile that is not installed.
			more[c.Name] = compile.SetInfo{ID: uint32(1<<31 + len(more)), Family: c.Kind.Family}
		}
	}
	chk, err := firewall.Check(p, pl.want.Rules, pl.want.Options, more, true)
	if err != nil {
		return "", err
	}
	n := chk.Entries
	var warns string
	for _, w := range chk.Warnings {
		warns += "\nwarning: " + w
	}
	for _, s := range pl.want.Rules.Skipped {
		warns += "\n" + s.String()
	}
	ifaces := make([]string, len(cfg.Interfaces))
	for i, ifc := range cfg.Interfaces {
		ifaces[i] = ifc.Name
	}
	return fmt.Sprintf("ok: %d interfaces (%s), %d rules (%d classifier entries), %d sets files%s",
		len(ifaces), strings.Join(ifaces, ", "), len(pl.want.Rules.Rules), n, len(pl.restores), warns), nil
}

// stop ends the daemon; the firewall stays in force unless the
// configuration says detach_on_stop.
func (d *Daemon) stop() error {
	notify("STOPPING=1")
	cfg := d.config()
	if cfg == nil || !cfg.DetachOnStop {
		d.log().Info("stopped; the firewall stays in force (xdpfw detach --all removes it)")
		return nil
	}
	fw, err := firewall.Open(d.Paths)
	if err != nil {
		return err
	}
	defer fw.Close()
	for _, name := range fw.Interfaces() {
		last, err := fw.Detach(name)
		if err != nil {
			return err
		}
		if last {
			break
		}
	}
	d.log().Info("stopped and detached (detach_on_stop)")
	return nil
}

// ---------------------------------------------------------------------------
// Metrics

type metricsServer struct {
	srv  *http.Server
	done chan struct{}
}

// serveMetrics serves /metrics on cfg's listen address, if any.
func (d *Daemon) serveMetrics(cfg *Config) {
	d.metrics = nil
	if cfg.Metrics.Listen == "" || d.Metrics == nil {
		return
	}
	ln, err := net.Listen("tcp", cfg.Metrics.Listen)
	if err != nil {
		d.log().Error("metrics not served", "listen", cfg.Metrics.Listen, "error", err.Error())
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", d.Metrics(d.Paths, Collectors()...))
	m := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log().Error("metrics server", "error", err.Error())
		}
	}()
	d.metrics = m
	d.log().Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
}

func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
}

// ---------------------------------------------------------------------------
// Log and systemd

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q: want debug, info, warn or error", s)
	}
	return l, nil
}

func newLogger(w io.Writer, c LogConfig) *slog.Logger {
	l, _ := parseLevel(c.Level)
	opts := &slog.HandlerOptions{Level: l}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// notify tells systemd (Type=notify) about the daemon's state; nothing
// without $NOTIFY_SOCKET.
func notify(state string) {
	sock := os.Getenv("NOTIFY_SOCKET")
	if sock == "" {
		return
	}
	if sock[0] == '@' {
		sock = "\x00" + sock[1:] // abstract namespace
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	_, _ = c.Write([]byte(state))
}
