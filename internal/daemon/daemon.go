package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
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
	mu      sync.Mutex                  // guards cfg
	cfg     *Config
	metrics *metricsServer
	events  *forwarder
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
// daemon reloads (editors write a file in several steps).
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
	if err := d.put(cfg, true); err != nil {
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

	notify("READY=1\nSTATUS=in force")
	d.log().Info("ready")
	var quiet <-chan time.Time // armed after a file event
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
			d.reload(w)
		case ev := <-w.events:
			d.log().Debug("file event", "file", ev)
			quiet = time.After(settle)
		case <-quiet:
			quiet = nil
			d.reload(w)
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

// reload reads the configuration again and puts it in force; on any
// error the configuration in force stays.
func (d *Daemon) reload(w *watcher) {
	notify("RELOADING=1")
	defer notify("READY=1")
	cfg, err := LoadConfig(d.ConfigPath)
	if err == nil {
		err = d.put(cfg, false)
	}
	if err != nil {
		d.log().Error("reload failed; the configuration in force stays", "error", err.Error())
		return
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
}

// put puts cfg in force: the sets files first (rules may name their
// sets), then interfaces, rules and settings through firewall.Reconcile.
func (d *Daemon) put(cfg *Config, start bool) error {
	want, err := cfg.desired()
	if err != nil {
		return err
	}
	restores, err := readSets(d.Paths, cfg)
	if err != nil {
		return err
	}
	if len(restores) > 0 {
		s, err := firewall.OpenSets(d.Paths)
		if err != nil {
			return err
		}
		for _, r := range restores {
			res, err := s.Sync(r.restore)
			if err != nil {
				s.Close()
				return fmt.Errorf("%s: %w", r.file, err)
			}
			if res.Added+res.Removed+len(res.Created) > 0 {
				d.log().Info("sets updated", "file", r.file, "created", res.Created, "added", res.Added, "removed", res.Removed)
			}
		}
		s.Close()
	}
	ch, err := firewall.Reconcile(d.Paths, want)
	if err != nil {
		return err
	}
	switch {
	case ch.Changed():
		attrs := []any{"why", strings.Join(ch.Why, ", "), "rules", len(want.Rules.Rules)}
		if ch.Result != nil {
			attrs = append(attrs, "generation", ch.Result.Generation, "entries", ch.Result.Entries)
			for _, w := range ch.Result.Warnings {
				d.log().Warn("rule warning", "warning", w)
			}
		}
		if len(ch.Detached) > 0 {
			attrs = append(attrs, "detached", ch.Detached)
		}
		d.log().Info("configuration in force", attrs...)
	case start:
		d.log().Info("adopted the firewall in force: it is what the configuration asks for", "rules", len(want.Rules.Rules))
	default:
		d.log().Info("configuration unchanged")
	}
	return nil
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
	want, err := cfg.desired()
	if err != nil {
		return "", err
	}
	restores, err := readSets(p, cfg)
	if err != nil {
		return "", err
	}
	more := map[string]compile.SetInfo{}
	for _, r := range restores {
		for _, c := range r.restore.Creates {
			// Any id will do for a compile that is not installed.
			more[c.Name] = compile.SetInfo{ID: uint32(1<<31 + len(more)), Family: c.Kind.Family}
		}
	}
	chk, err := firewall.Check(p, want.Rules, want.Options, more, true)
	if err != nil {
		return "", err
	}
	n := chk.Entries
	var warns string
	for _, w := range chk.Warnings {
		warns += "\nwarning: " + w
	}
	ifaces := make([]string, len(cfg.Interfaces))
	for i, ifc := range cfg.Interfaces {
		ifaces[i] = ifc.Name
	}
	return fmt.Sprintf("ok: %d interfaces (%s), %d rules (%d classifier entries), %d sets files%s",
		len(ifaces), strings.Join(ifaces, ", "), len(want.Rules.Rules), n, len(restores), warns), nil
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
// Watching files

// watcher reports changes in the directories of the watched files.
// Directories, not files: editors and Kubernetes ConfigMaps replace a file
// by renaming another over it, which a watch on the file itself loses.
type watcher struct {
	fs     *fsnotify.Watcher
	log    *slog.Logger
	files  map[string]bool // watched files (absolute)
	dirs   []string
	events chan string
	done   chan struct{}
	wg     sync.WaitGroup
}

func newWatcher(log *slog.Logger) (*watcher, error) {
	fs, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching files: %w", err)
	}
	w := &watcher{fs: fs, log: log, events: make(chan string, 16), done: make(chan struct{})}
	w.wg.Go(w.loop)
	return w, nil
}

// watch replaces the watched files.
func (w *watcher) watch(files []string) {
	var dirs []string
	w.files = map[string]bool{}
	for _, f := range files {
		w.files[f] = true
		if d := filepath.Dir(f); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range w.dirs {
		if !slices.Contains(dirs, d) {
			_ = w.fs.Remove(d)
		}
	}
	for _, d := range dirs {
		if !slices.Contains(w.dirs, d) {
			if err := w.fs.Add(d); err != nil {
				w.log.Warn("cannot watch a directory; changes there need SIGHUP", "dir", d, "error", err.Error())
			}
		}
	}
	w.dirs = dirs
}

func (w *watcher) loop() {
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			// A watched file, or a Kubernetes ConfigMap's "..data" swap.
			if w.files[ev.Name] || strings.HasPrefix(filepath.Base(ev.Name), "..") {
				select {
				case w.events <- ev.Name:
				default: // a reload is pending already
				}
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			w.log.Warn("file watch", "error", err.Error())
		}
	}
}

func (w *watcher) close() {
	close(w.done)
	w.fs.Close()
	w.wg.Wait()
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
