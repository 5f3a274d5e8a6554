package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/testutil"
)

// statsJSON is `xdpfw stats --json` (the fields the tests rely on).
type statsJSON struct {
	Time       time.Time `json:"time"`
	Generation uint64    `json:"generation"`
	Interfaces []struct {
		Name string `json:"name"`
		Mode string `json:"mode"`
	} `json:"interfaces"`
	Rules []struct {
		Chain   string    `json:"chain"`
		Num     int       `json:"num"`
		Rule    string    `json:"rule"`
		Hash    string    `json:"hash"`
		Packets uint64    `json:"packets"`
		Bytes   uint64    `json:"bytes"`
		LastHit time.Time `json:"last_hit"`
	} `json:"rules"`
	Policies []struct {
		Chain   string `json:"chain"`
		Family  string `json:"family"`
		Verdict string `json:"verdict"`
		Packets uint64 `json:"packets"`
	} `json:"policies"`
	Reasons []struct {
		Reason  string `json:"reason"`
		Packets uint64 `json:"packets"`
		Dropped uint64 `json:"dropped"`
	} `json:"reasons"`
	Actions []struct {
		Hook    string `json:"hook"`
		Action  string `json:"action"`
		Packets uint64 `json:"packets"`
	} `json:"actions"`
	Conntrack struct {
		Max     int               `json:"max"`
		ByState map[string]int    `json:"by_state"`
		Events  map[string]uint64 `json:"events"`
	} `json:"conntrack"`
	raw string
}

func (s *statsJSON) reason(name string) (pkts, dropped uint64) {
	for _, r := range s.Reasons {
		if r.Reason == name {
			return r.Packets, r.Dropped
		}
	}
	return 0, 0
}

func (s *statsJSON) action(hook, action string) uint64 {
	for _, a := range s.Actions {
		if a.Hook == hook && a.Action == action {
			return a.Packets
		}
	}
	return 0
}

// topJSON is one frame of `xdpfw top --json`.
type topJSON struct {
	Seconds float64 `json:"seconds"`
	Total   struct {
		PPS float64 `json:"pps"`
	} `json:"total"`
	Rules []struct {
		Chain   string  `json:"chain"`
		Num     int     `json:"num"`
		Rule    string  `json:"rule"`
		Packets uint64  `json:"packets"`
		PPS     float64 `json:"pps"`
	} `json:"rules"`
	Reasons []struct {
		Reason string  `json:"reason"`
		PPS    float64 `json:"pps"`
	} `json:"reasons"`
}

// TestStatsTopMetrics sends known traffic through a loaded firewall (N
// datagrams to a port a rule drops, M to one a rule accepts, K to one only
// the policy decides) and checks that `stats --json`, `stats`, `top`,
// `stats --prometheus` and a scrape of `metrics serve` all report exactly
// that traffic on the right rules, reasons and actions, with a recent last
// hit; and that stats never waits for the lock a change holds.
func TestStatsTopMetrics(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	const (
		ruleDrop   = "-A INPUT -p udp --dport 5001 -j DROP"
		ruleAccept = "-A INPUT -p udp --dport 5000 -j ACCEPT"
		ruleNever  = "-A INPUT -p tcp --dport 7 -j ACCEPT"
		nDrop      = 7
		nAccept    = 5
		nPolicy    = 3
	)
	accepted, dropped, policy := newUDPSink(t, l.srv, 5000), newUDPSink(t, l.srv, 5001), newUDPSink(t, l.srv, 5002)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "stats.rules", ruleDrop, ruleAccept, ruleNever))

	udp := newUDPSender(t, l.cli, "")
	sent := time.Now()
	udp.send(t, hostPort(l.srv4, 5001), "drop", 0, nDrop)
	udp.send(t, hostPort(l.srv4, 5000), "acc", 0, nAccept)
	udp.send(t, hostPort(l.srv4, 5002), "pol", 0, nPolicy)
	if n := accepted.wait(t, "acc", nAccept); n != nAccept {
		t.Fatalf("%d datagrams reached the accepted port, want %d", n, nAccept)
	}
	if n := policy.wait(t, "pol", nPolicy); n != nPolicy {
		t.Fatalf("%d datagrams reached the policy's port, want %d", n, nPolicy)
	}
	dropped.sync(t) // the dropped ones went first: they are through XDP
	if n := dropped.count("drop"); n != 0 {
		t.Fatalf("%d datagrams reached the dropped port", n)
	}

	var s statsJSON
	s.raw = f.decode(&s, "stats", "--json").stdout
	wantHash := func(text string) string {
		sum := sha256.Sum256([]byte(text))
		return hex.EncodeToString(sum[:8])
	}
	if len(s.Rules) != 3 || s.Generation != 1 || len(s.Interfaces) != 1 || s.Interfaces[0].Name != l.srvIf ||
		s.Interfaces[0].Mode != "native" {
		t.Fatalf("stats --json: want generation 1, 3 rules, %s in native mode:\n%s", l.srvIf, s.raw)
	}
	for i, c := range []struct {
		text string
		pkts uint64
	}{{ruleDrop, nDrop}, {ruleAccept, nAccept}, {ruleNever, 0}} {
		r := s.Rules[i]
		if r.Rule != c.text || r.Num != i+1 || r.Chain != "INPUT" || r.Packets != c.pkts || r.Hash != wantHash(c.text) {
			t.Errorf("rule %d: %+v, want %q with %d packets, hash %s", i+1, r, c.text, c.pkts, wantHash(c.text))
		}
		// Last hit: the kernel's coarse clock converted to wall time; a
		// wrong clock would be off by hours, not by this slack.
		switch {
		case c.pkts == 0 && !r.LastHit.IsZero():
			t.Errorf("rule %d was never hit, but stats says last hit %s", i+1, r.LastHit)
		case c.pkts > 0 && (r.LastHit.Before(sent.Add(-time.Second)) || r.LastHit.After(s.Time.Add(time.Second))):
			t.Errorf("rule %d: last hit %s, want between %s (sending) and %s (stats)", i+1, r.LastHit, sent, s.Time)
		}
	}
	for _, p := range s.Policies {
		if p.Chain == "INPUT" && p.Family == "ipv4" && (p.Verdict != "ACCEPT" || p.Packets < nPolicy) {
			t.Errorf("INPUT ipv4 policy: %+v, want ACCEPT with at least the %d datagrams no rule matched", p, nPolicy)
		}
	}
	if pkts, drops := s.reason("rule-drop"); pkts != nDrop || drops != nDrop {
		t.Errorf("reason rule-drop: %d packets, %d dropped; want %d and %d", pkts, drops, nDrop, nDrop)
	}
	if pkts, drops := s.reason("rule-accept"); pkts != nAccept || drops != 0 {
		t.Errorf("reason rule-accept: %d packets, %d dropped; want %d and 0", pkts, drops, nAccept)
	}
	if got := s.action("xdp", "XDP_DROP"); got != nDrop {
		t.Errorf("XDP_DROP: %d packets, want %d (nothing else is dropped)", got, nDrop)
	}
	if got := s.action("xdp", "XDP_PASS"); got < nAccept+nPolicy {
		t.Errorf("XDP_PASS: %d packets, want at least %d", got, nAccept+nPolicy)
	}
	if s.Conntrack.Max == 0 || len(s.Conntrack.ByState) == 0 || len(s.Conntrack.Events) == 0 {
		t.Errorf("stats --json lacks the conntrack table's size, states or events:\n%s", s.raw)
	}
	if t.Failed() {
		t.Fatalf("stats --json:\n%s", s.raw)
	}

	t.Run("text", func(t *testing.T) {
		out := f.with(t).mustRun("stats").stdout
		for _, want := range []string{ruleDrop, ruleAccept, ruleNever, wantHash(ruleDrop), "never", "rule-drop", "XDP_DROP",
			l.srvIf + " (native)"} {
			if !strings.Contains(out, want) {
				t.Errorf("stats lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("no lock", func(t *testing.T) {
		// A change in progress holds the state lock; stats must not wait
		// for it (it would hang until the command's timeout).
		lock, err := os.OpenFile(filepath.Join(f.stateDir, "lock"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Close()
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
		var again statsJSON
		f.with(t).decode(&again, "stats", "--json")
		if len(again.Rules) != 3 || again.Rules[0].Packets != nDrop {
			t.Errorf("stats under the lock: %+v", again.Rules)
		}
	})

	t.Run("top", func(t *testing.T) {
		f := f.with(t)
		var fr topJSON
		f.decode(&fr, "top", "--once", "--json", "--interval", "300ms", "-n", "2")
		if fr.Seconds < 0.3 || len(fr.Rules) != 2 {
			t.Fatalf("top --once --json: %+v, want 2 rules over at least 0.3 s", fr)
		}
		// Nothing was sent during the interval: every rule's rate is 0 (a
		// rate computed from a cumulative count would not be).
		for _, r := range fr.Rules {
			if r.PPS != 0 || r.Chain != "INPUT" || r.Packets != map[string]uint64{ruleDrop: nDrop, ruleAccept: nAccept, ruleNever: 0}[r.Rule] {
				t.Errorf("top rule %+v: want INPUT, its packets so far, 0 per second", r)
			}
		}
		out := f.mustRun("top", "--once", "--interval", "100ms").stdout
		for _, want := range []string{"pkt/s", "INPUT 1: " + ruleDrop, "INPUT 2: " + ruleAccept, "INPUT 3: " + ruleNever} {
			if !strings.Contains(out, want) {
				t.Errorf("top --once lacks %q:\n%s", want, out)
			}
		}
		// Not a terminal, no --once: one frame per interval until stopped.
		if out := f.mustRun("top", "--frames", "2", "--interval", "100ms").stdout; strings.Count(out, "xdpfw top") != 2 {
			t.Errorf("top --frames 2 printed %d frames:\n%s", strings.Count(out, "xdpfw top"), out)
		}
	})

	t.Run("top on a terminal", func(t *testing.T) {
		for _, key := range []string{"q", "\x03"} { // q, Ctrl-C
			topOnTerminal(t, f, key)
		}
	})

	wantMetrics := func(t *testing.T, mfs map[string]*dto.MetricFamily, what string, drops uint64) {
		t.Helper()
		for _, c := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"xdpfw_loaded", nil, 1},
			{"xdpfw_generation", nil, 1},
			{"xdpfw_rules", nil, 3},
			{"xdpfw_rule_packets_total", map[string]string{"chain": "INPUT", "rule": "1", "hash": wantHash(ruleDrop)}, float64(drops)},
			{"xdpfw_rule_packets_total", map[string]string{"chain": "INPUT", "rule": "2", "hash": wantHash(ruleAccept)}, nAccept},
			{"xdpfw_rule_packets_total", map[string]string{"chain": "INPUT", "rule": "3", "hash": wantHash(ruleNever)}, 0},
			{"xdpfw_packets_by_reason_total", map[string]string{"reason": "rule-drop"}, float64(drops)},
			{"xdpfw_dropped_packets_total", map[string]string{"reason": "rule-drop"}, float64(drops)},
			{"xdpfw_packets_by_reason_total", map[string]string{"reason": "rule-accept"}, nAccept},
			{"xdpfw_dropped_packets_total", map[string]string{"reason": "rule-accept"}, 0},
			{"xdpfw_packets_by_action_total", map[string]string{"hook": "xdp", "action": "XDP_DROP"}, float64(drops)},
			{"xdpfw_interface_info", map[string]string{"interface": l.srvIf, "mode": "native"}, 1},
		} {
			got, ok := metricValue(mfs, c.name, c.labels)
			if !ok || got != c.want {
				t.Errorf("%s: %s%v = %v (present: %v), want %v", what, c.name, c.labels, got, ok, c.want)
			}
		}
		if _, ok := metricValue(mfs, "xdpfw_rule_last_hit_timestamp_seconds", map[string]string{"rule": "3"}); ok {
			t.Errorf("%s: a last-hit time for a rule never hit", what)
		}
		v, ok := metricValue(mfs, "xdpfw_rule_last_hit_timestamp_seconds", map[string]string{"rule": "1"})
		if hit := time.Unix(0, int64(v*1e9)); !ok || hit.Before(sent.Add(-time.Second)) || hit.After(time.Now().Add(time.Second)) {
			t.Errorf("%s: rule 1 last hit at %s (present: %v), want after %s", what, hit, ok, sent)
		}
	}

	t.Run("stats --prometheus", func(t *testing.T) {
		out := f.with(t).mustRun("stats", "--prometheus").stdout
		wantMetrics(t, parseMetrics(t, out), "stats --prometheus", nDrop)
	})

	t.Run("metrics serve", func(t *testing.T) {
		addr, stop := startMetricsServe(t, f)
		wantMetrics(t, scrape(t, l.srv, addr), "first scrape", nDrop)
		// More traffic shows in the next scrape, exactly.
		const more = 4
		udp.send(t, hostPort(l.srv4, 5001), "drop", nDrop, more)
		udp.send(t, hostPort(l.srv4, 5000), "acc", nAccept, 1)
		if n := accepted.wait(t, "acc", nAccept+1); n != nAccept+1 {
			t.Fatalf("%d datagrams reached the accepted port, want %d", n, nAccept+1)
		}
		mfs := scrape(t, l.srv, addr)
		for _, c := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"xdpfw_rule_packets_total", map[string]string{"rule": "1", "hash": wantHash(ruleDrop)}, nDrop + more},
			{"xdpfw_rule_packets_total", map[string]string{"rule": "2", "hash": wantHash(ruleAccept)}, nAccept + 1},
			{"xdpfw_dropped_packets_total", map[string]string{"reason": "rule-drop"}, nDrop + more},
		} {
			if got, ok := metricValue(mfs, c.name, c.labels); !ok || got != c.want {
				t.Errorf("second scrape: %s%v = %v (present: %v), want %v", c.name, c.labels, got, ok, c.want)
			}
		}
		if code := stop(); code != 0 {
			t.Errorf("metrics serve exited %d on SIGTERM, want 0", code)
		}
	})
}

// parseMetrics parses Prometheus text exposition.
func parseMetrics(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, text)
	}
	return mfs
}

// metricValue finds the sample of name whose labels include labels.
func metricValue(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.Metric {
		have := map[string]string{}
		for _, lp := range m.Label {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

// startMetricsServe runs `xdpfw metrics serve --listen 127.0.0.1:0` in
// the firewall's namespace and returns the address it listens on, and a
// function that stops it with SIGTERM and returns its exit status.
func startMetricsServe(t *testing.T, f *fw) (string, func() int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", f.ns.Name, xdpfwBin, "--pin-dir", f.pinDir,
		"--state-dir", f.stateDir, "metrics", "serve", "--listen", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	var (
		exited bool
		code   = -1
	)
	stop := func() int {
		if !exited {
			exited = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			code = cmd.ProcessState.ExitCode()
			cancel()
		}
		return code
	}
	t.Cleanup(func() { stop() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case line := <-lines:
		addr, ok := strings.CutPrefix(line, "serving metrics at http://")
		if !ok {
			t.Fatalf("metrics serve said %q", line)
		}
		return strings.TrimSuffix(addr, "/metrics"), stop
	case <-time.After(cmdTimeout):
		t.Fatal("metrics serve did not say where it listens")
	}
	return "", stop
}

// scrape GETs /metrics from addr inside ns (the connection is made in
// the namespace; an http.Client would dial from another thread).
func scrape(t *testing.T, ns *testutil.NetNS, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	var body string
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, cmdTimeout)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(cmdTimeout))
		if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			return fmt.Errorf("GET /metrics: %s, %s\n%s", resp.Status, resp.Header.Get("Content-Type"), b)
		}
		body = string(b)
		return nil
	})
	if err != nil {
		t.Fatalf("scraping %s: %v", addr, err)
	}
	return parseMetrics(t, body)
}

// topOnTerminal runs `xdpfw top` on a pseudo-terminal, waits for a frame
// drawn on the alternate screen, presses key and checks that top exits 0,
// leaves the alternate screen and restores the terminal's modes.
func topOnTerminal(t *testing.T, f *fw, key string) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	var ptn uint32
	if err := control(master, func(fd int) (err error) {
		if err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err == nil {
			ptn, err = unix.IoctlGetUint32(fd, unix.TIOCGPTN)
		}
		return err
	}); err != nil {
		t.Fatalf("pseudo-terminal: %v", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", ptn), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	termios := func() *unix.Termios {
		var tio *unix.Termios
		if err := control(slave, func(fd int) (err error) { tio, err = unix.IoctlGetTermios(fd, unix.TCGETS); return err }); err != nil {
			t.Fatal(err)
		}
		return tio
	}
	before := termios()

	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", f.ns.Name, xdpfwBin, "--pin-dir", f.pinDir,
		"--state-dir", f.stateDir, "top", "--interval", "200ms")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		screen strings.Builder
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			mu.Lock()
			screen.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	shown := func() string {
		mu.Lock()
		defer mu.Unlock()
		return screen.String()
	}
	framed := poll(ctx, cmdTimeout, func() bool { return strings.Contains(shown(), "INPUT 1: ") })
	if _, err := master.Write([]byte(key)); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	after := termios()
	slave.Close()
	master.SetReadDeadline(time.Now().Add(time.Second)) // the reader ends with the terminal
	wg.Wait()
	out := shown()
	switch {
	case !framed:
		t.Errorf("key %q: no frame drawn:\n%q", key, out)
	case err != nil:
		t.Errorf("key %q: top exited with %v:\n%q", key, err, out)
	case !strings.Contains(out, "\x1b[?1049h") || !strings.HasSuffix(out, "\x1b[?25h\x1b[?1049l"):
		t.Errorf("key %q: top did not enter and leave the alternate screen:\n%q", key, out)
	case after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag:
		t.Errorf("key %q: terminal modes not restored: before %+v, after %+v", key, before, after)
	}
}

// control runs fn on the descriptor of f without making it blocking.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
