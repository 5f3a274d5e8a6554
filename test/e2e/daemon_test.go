package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// daemonProc is `xdpfw daemon` running in the firewall's namespace. It
// tells the test its state over a NOTIFY_SOCKET of the test's own, as it
// tells systemd.
type daemonProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *lockedBuffer
	states chan string // READY=1, RELOADING=1, STOPPING=1...
	exited chan error
	seq    uint64 // the sequence number of the last reload waited for
}

// lockedBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDaemon starts the daemon with config and waits until it is ready.
// wrap, if any, is a command line the binary runs under (setpriv ... --).
func (f *fw) startDaemon(config string, wrap ...string) *daemonProc {
	t := f.t
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{t: t, stderr: &lockedBuffer{}, states: make(chan string, 64), exited: make(chan error, 1)}
	go func() {
		buf := make([]byte, 512)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			for _, s := range strings.Split(string(buf[:n]), "\n") {
				if strings.HasSuffix(s, "=1") {
					d.states <- s
				}
			}
		}
	}()
	argv := append(append([]string{"netns", "exec", f.ns.Name}, wrap...), xdpfwBin, "--pin-dir", f.pinDir, "--state-dir", f.stateDir,
		"daemon", "--config", config)
	d.cmd = exec.Command("ip", argv...)
	d.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait(); conn.Close() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	})
	d.want("READY=1")
	return d
}

// want waits for the daemon to report state (skipping others).
func (d *daemonProc) want(state string) {
	d.t.Helper()
	timeout := time.After(cmdTimeout)
	for {
		select {
		case s := <-d.states:
			if s == state {
				return
			}
		case err := <-d.exited:
			d.t.Fatalf("the daemon exited (%v) before %s; its log:\n%s", err, state, d.stderr)
		case <-timeout:
			d.t.Fatalf("the daemon did not report %s within %v; its log:\n%s", state, cmdTimeout, d.stderr)
		}
	}
}

// reloaded waits for the daemon's next reload to be done and returns its
// result (applied, unchanged, failed). It waits for the log line that ends
// that reload by its sequence number ("reload done" seq=N), not for the
// next READY=1: the log before that line (an error at file:line:col) is
// then in d.stderr too, and a reload of the daemon's own is not taken for
// the one the test caused.
func (d *daemonProc) reloaded() string {
	d.t.Helper()
	d.seq++
	re := regexp.MustCompile(fmt.Sprintf(`msg="reload done" seq=%d result=(\w+)`, d.seq))
	var result string
	done := func() bool {
		if m := re.FindStringSubmatch(d.stderr.String()); m != nil {
			result = m[1]
			return true
		}
		return false
	}
	ctx, cancel := context.WithTimeout(d.t.Context(), cmdTimeout)
	defer cancel()
	for !done() {
		select {
		case err := <-d.exited:
			d.exited <- err
			d.t.Fatalf("the daemon exited (%v) before reload %d was done; its log:\n%s", err, d.seq, d.stderr)
		case <-ctx.Done():
			d.t.Fatalf("reload %d was not done within %v; the daemon's log:\n%s", d.seq, cmdTimeout, d.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return result
}

// reloadedWant is reloaded, failing the test on another result.
func (d *daemonProc) reloadedWant(result string) {
	d.t.Helper()
	if got := d.reloaded(); got != result {
		d.t.Fatalf("reload %d: %s, want %s; the daemon's log:\n%s", d.seq, got, result, d.stderr)
	}
}

func (d *daemonProc) signal(s syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(s); err != nil {
		d.t.Fatal(err)
	}
}

// wait waits for the daemon to exit and returns its error.
func (d *daemonProc) wait() error {
	d.t.Helper()
	select {
	case err := <-d.exited:
		return err
	case <-time.After(cmdTimeout):
		d.t.Fatalf("the daemon did not exit; its log:\n%s", d.stderr)
		return nil
	}
}

// writeAtomic replaces a file the way editors and config management do:
// a new file renamed over the old.
func writeAtomic(t *testing.T, path string, lines ...string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// slowWrite rewrites path in place the way a slow writer does: it
// truncates it, writes first, waits far longer than the daemon's settle
// time, calls during (the file half written, open), writes rest and
// closes.
func slowWrite(t *testing.T, path string, first, rest []string, during func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(first, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // gives a daemon that does not wait for the close every chance to apply the half
	during()
	if _, err := f.WriteString(strings.Join(rest, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDaemon: the daemon puts its configuration in force, reloads on a file
// change and on SIGHUP, keeps the rules in force when a file is bad
// (proven by traffic), collects conntrack entries by itself, survives
// kill -9 under traffic with not one datagram misjudged and counters
// continuing, adopts the pinned firewall without a new generation, and
// leaves the firewall in force when stopped.
func TestDaemon(t *testing.T) {
	testutil.RequireRoot(t)
	const (
		portA, portB, portC = 5001, 5002, 5003
		acceptA             = "-A INPUT -p udp --dport 5001 -j ACCEPT"
		dropB               = "-A INPUT -p udp --dport 5002 -j DROP"
		invalid             = "-A INPUT -m conntrack --ctstate INVALID -j DROP"
	)
	l := newPair(t)
	sinkA, sinkB, sinkC := newUDPSink(t, l.srv, portA), newUDPSink(t, l.srv, portB), newUDPSink(t, l.srv, portC)
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "rules.conf")
	writeAtomic(t, rulesFile, invalid, acceptA, dropB, "-A INPUT -p udp --dport 5003 -j DROP")
	config := filepath.Join(dir, "xdpfw.yaml")
	const metricsAddr = "127.0.0.1:9477" // the namespace's own loopback
	writeAtomic(t, config, "interfaces: ["+l.srvIf+"]", "rules: rules.conf",
		"conntrack: {timeouts: {udp: 1}, gc_min_interval: 1s, gc_max_interval: 2s}", "metrics: {listen: \""+metricsAddr+"\"}")

	f := newFW(t, l.srv)
	d := f.startDaemon(config)
	if gen := f.list().Generation; gen != 1 {
		t.Fatalf("generation %d after the daemon started, want 1", gen)
	}
	sender := newUDPSender(t, l.cli, "")
	addrC := hostPort(l.srv4, portC)
	sender.send(t, addrC, "c0", 0, 5)

	// A changed rules file is reloaded: C is accepted now.
	writeAtomic(t, rulesFile, invalid, acceptA, dropB, "-A INPUT -p udp --dport 5003 -j ACCEPT")
	d.reloadedWant("applied")
	sender.send(t, addrC, "c1", 0, 5)
	if n := sinkC.wait(t, "c1", 5); n != 5 {
		t.Fatalf("after the reload, %d of 5 datagrams to udp %d arrived; daemon log:\n%s", n, portC, d.stderr)
	}
	sinkC.sync(t)
	if n := sinkC.count("c0"); n != 0 {
		t.Errorf("%d datagrams to udp %d got through before the reload", n, portC)
	}

	// A file rewritten in place, slowly (truncated, a part written, a
	// pause far longer than the daemon's 200 ms settle time, the rest):
	// the daemon waits for the writer to close it and applies it once,
	// whole. The part alone parses (it would DROP udp 5003: policy DROP,
	// which the rest sets back to ACCEPT).
	slowRules := [][]string{{invalid, "-P INPUT DROP"},
		{acceptA, dropB, "-A INPUT -p udp --dport 5003 -j ACCEPT", "-A INPUT -p udp --dport 5009 -j DROP", "-P INPUT ACCEPT"}}
	slowWrite(t, rulesFile, slowRules[0], slowRules[1],
		func() {
			sender.send(t, addrC, "c1w", 0, 5)
			if n := sinkC.wait(t, "c1w", 5); n != 5 {
				t.Errorf("while the file was half written, %d of 5 datagrams to udp %d arrived: the half was applied", n, portC)
			}
		})
	d.reloadedWant("applied")
	if gen := f.list().Generation; gen != 3 {
		t.Fatalf("generation %d after a slow rewrite, want 3 (the whole file, once); daemon log:\n%s", gen, d.stderr)
	}
	if !strings.Contains(d.stderr.String(), "reload waits: a file is being written") {
		t.Errorf("the daemon did not log that it waits for the file being written:\n%s", d.stderr)
	}

	// A bad file is reported at file:line:col; the rules in force stay.
	writeAtomic(t, rulesFile, invalid, "-A INPUT -p udp --dport 5003 -j ACCPT")
	d.reloadedWant("failed")
	if want := rulesFile + ":2:33:"; !strings.Contains(d.stderr.String(), want) {
		t.Errorf("the daemon's log does not name %s:\n%s", want, d.stderr)
	}
	if r := f.run("apply", "--check", rulesFile); r.code != 2 {
		t.Errorf("apply --check of the bad file: want exit status 2: %s", r)
	}
	sender.send(t, addrC, "c2", 0, 5)
	if n := sinkC.wait(t, "c2", 5); n != 5 {
		t.Errorf("after a bad reload, %d of 5 datagrams to udp %d arrived (the old rules accept them)", n, portC)
	}
	if gen := f.list().Generation; gen != 3 {
		t.Errorf("generation %d after two good and one bad reload, want 3", gen)
	}
	var ct struct {
		Entries int `json:"entries"`
	}
	if f.decode(&ct, "conntrack", "stats", "--json"); ct.Entries == 0 {
		t.Errorf("no conntrack entry for the datagrams just accepted")
	}

	// The good file back (what is in force): nothing to change.
	writeAtomic(t, rulesFile, append(slowRules[0], slowRules[1]...)...)
	d.reloadedWant("unchanged")

	// SIGHUP reloads too (here: the configuration stops watching files).
	writeAtomic(t, config, "interfaces: ["+l.srvIf+"]", "rules: rules.conf", "watch: false",
		"conntrack: {timeouts: {udp: 1}, gc_min_interval: 1s, gc_max_interval: 2s}", "metrics: {listen: \""+metricsAddr+"\"}")
	d.reloadedWant("unchanged") // still watching when the configuration changed
	writeAtomic(t, rulesFile, invalid, acceptA, dropB, "-A INPUT -p udp --dport 5003 -j DROP")
	d.signal(syscall.SIGHUP)
	d.reloadedWant("applied")
	if gen := f.list().Generation; gen != 4 {
		t.Fatalf("generation %d after SIGHUP, want 4; daemon log:\n%s", gen, d.stderr)
	}
	sender.send(t, addrC, "c3", 0, 5)
	sinkC.sync(t)
	if n := sinkC.count("c3"); n != 0 {
		t.Errorf("%d datagrams to udp %d got through after SIGHUP put DROP back", n, portC)
	}

	// Conntrack entries (the datagrams above made some) are collected by
	// the daemon: 1 s UDP timeout, GC every 1-2 s.
	if !poll(t.Context(), 20*time.Second, func() bool {
		f.decode(&ct, "conntrack", "stats", "--json")
		return ct.Entries == 0
	}) {
		t.Errorf("conntrack still holds %d entries: the daemon's GC did not collect them", ct.Entries)
	}
	// ... and says so in its own metrics.
	if got, ok := metricValue(scrape(t, l.srv, metricsAddr), "xdpfw_conntrack_gc_removed_total", nil); !ok || got < 1 {
		t.Errorf("xdpfw_conntrack_gc_removed_total = %v (present: %v), want at least 1", got, ok)
	}

	// kill -9 under traffic, then start again: filtering never stops.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st := startStream(ctx, sender, &net.UDPAddr{IP: net.ParseIP(l.srv4), Port: portA},
		&net.UDPAddr{IP: net.ParseIP(l.srv4), Port: portB}, 6000, 60000, 4)
	defer func() {
		cancel()
		st.stop()
	}()
	if !st.waitSent(ctx, 2000) {
		t.Fatal("the stream stalled")
	}
	d.signal(syscall.SIGKILL)
	if err := d.wait(); err == nil {
		t.Fatal("the daemon survived SIGKILL")
	}
	if !st.waitSent(ctx, 3000) { // traffic while no daemon runs
		t.Fatal("the stream stalled")
	}
	d = f.startDaemon(config)
	s := st.stop()
	s.wantExact(t, sinkA, sinkB, func() string { return f.status().raw })
	if !strings.Contains(d.stderr.String(), "adopted the firewall in force") {
		t.Errorf("the restarted daemon did not adopt the firewall in force:\n%s", d.stderr)
	}
	list := f.list()
	if list.Generation != 4 {
		t.Errorf("generation %d after the restart, want 4 (nothing changed)", list.Generation)
	}
	// Counters continued: every datagram to A that arrived was counted
	// once (plus none lost across the restart), every one to B dropped.
	if r := list.rule(t, acceptA); r.Counters.Packets != uint64(sinkA.total()) {
		t.Errorf("%q counted %d, want the %d datagrams udp %d received", acceptA, r.Counters.Packets, sinkA.total(), portA)
	}
	if r := list.rule(t, dropB); r.Counters.Packets != uint64(s.b) {
		t.Errorf("%q counted %d, want the %d datagrams sent to udp %d", dropB, r.Counters.Packets, s.b, portB)
	}
	// The restarted daemon serves metrics; they count what was sent.
	mfs := scrape(t, l.srv, metricsAddr)
	for _, c := range []struct {
		rule string
		want int
	}{{dropB, s.b}, {acceptA, sinkA.total()}} {
		r := list.rule(t, c.rule)
		labels := map[string]string{"chain": "INPUT", "rule": strconv.Itoa(r.Num)}
		if got, ok := metricValue(mfs, "xdpfw_rule_packets_total", labels); !ok || got != float64(c.want) {
			t.Errorf("metric xdpfw_rule_packets_total%v = %v (present: %v), want %d", labels, got, ok, c.want)
		}
	}
	t.Logf("kill -9 under a stream of %d datagrams; the daemon's log after the restart:\n%s", s.a+s.b, d.stderr)

	// SIGTERM: the daemon stops, the firewall stays in force.
	d.signal(syscall.SIGTERM)
	if err := d.wait(); err != nil {
		t.Errorf("daemon exit after SIGTERM: %v\n%s", err, d.stderr)
	}
	if st := f.status(); len(st.Interfaces) != 1 {
		t.Errorf("after the daemon stopped: %s", st.raw)
	}
}

// TestDaemonCheck: --check names the mistake at file:line:col with exit
// status 2 and changes nothing; a good configuration passes.
func TestDaemonCheck(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	f := newFW(t, ns)
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "r.conf"), "-A INPUT -p tcp --dport 22 -m set --match-set adm src -j ACCEPT")
	writeAtomic(t, filepath.Join(dir, "sets.save"), "create adm hash:net family inet", "add adm 192.0.2.0/24")
	config := filepath.Join(dir, "c.yaml")
	writeAtomic(t, config, "interfaces: [lo]", "rules: r.conf", "sets: [sets.save]")
	r := f.mustRun("daemon", "--check", "--config", config)
	if !strings.Contains(r.stdout, "ok: 1 interfaces (lo), 1 rules") {
		t.Errorf("check: %s", r)
	}
	writeAtomic(t, config, "interfaces: [lo]", "rules: r.conf", "conntrack:", "  full: sometimes")
	r = f.runWant(2, "daemon", "--check", "--config", config)
	if want := fmt.Sprintf("%s:4:9: conntrack.full:", config); !strings.Contains(r.stderr, want) {
		t.Errorf("check of a bad configuration does not name %s: %s", want, r)
	}
	// Without the sets file, the rule names a set that does not exist.
	writeAtomic(t, config, "interfaces: [lo]", "rules: r.conf")
	r = f.runWant(2, "daemon", "--check", "--config", config)
	if !strings.Contains(r.stderr, filepath.Join(dir, "r.conf")+":1:") {
		t.Errorf("check of rules naming a missing set: %s", r)
	}
	if pins := f.pins(); len(pins) != 0 {
		t.Errorf("--check pinned %v", pins)
	}
}

// TestDaemonCapabilities: the daemon runs with the capabilities the
// systemd unit (and the Kubernetes DaemonSet) grants and no others: it
// loads, attaches, filters and reloads.
func TestDaemonCapabilities(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is needed: %v", err)
	}
	root, err := repoRoot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "deploy", "systemd", "xdpfw.service"))
	if err != nil {
		t.Fatal(err)
	}
	var caps []string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "CapabilityBoundingSet="); ok {
			for _, c := range strings.Fields(v) {
				caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
			}
		}
	}
	if len(caps) == 0 {
		t.Fatal("the unit names no CapabilityBoundingSet")
	}
	set := "-all," + strings.Join(caps, ",")
	wrap := []string{"setpriv", "--bounding-set=" + set, "--inh-caps=" + set, "--ambient-caps=" + set, "--"}

	l := newPair(t)
	sink := newUDPSink(t, l.srv, 5001)
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "rules.conf")
	writeAtomic(t, rulesFile, "-A INPUT -p udp --dport 5001 -j DROP")
	config := filepath.Join(dir, "xdpfw.yaml")
	writeAtomic(t, config, "interfaces: ["+l.srvIf+"]", "rules: rules.conf", `metrics: {listen: ""}`)
	f := newFW(t, l.srv)
	d := f.startDaemon(config, wrap...)
	sender := newUDPSender(t, l.cli, "")
	sender.send(t, hostPort(l.srv4, 5001), "dropped", 0, 3)
	writeAtomic(t, rulesFile, "-A INPUT -p udp --dport 5001 -j ACCEPT")
	d.reloadedWant("applied")
	sender.send(t, hostPort(l.srv4, 5001), "accepted", 0, 3)
	if n := sink.wait(t, "accepted", 3); n != 3 {
		t.Errorf("after the reload %d of 3 datagrams arrived; daemon log:\n%s", n, d.stderr)
	}
	if n := sink.count("dropped"); n != 0 {
		t.Errorf("%d datagrams got through the DROP rule", n)
	}
	if strings.Contains(d.stderr.String(), "level=ERROR") {
		t.Errorf("errors with the unit's capabilities (%s):\n%s", set, d.stderr)
	}
}

// TestDaemonLogEvents: with log.events the daemon forwards the events of
// logged rules, each at its rule's --log-level: to journald (a "<N>"
// prefix on standard error) and to a syslog socket (here the test's own).
// While it forwards, `xdpfw log` is refused (one reader at a time).
func TestDaemonLogEvents(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	dir := t.TempDir()
	sysSock := filepath.Join(dir, "syslog")
	syslogConn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sysSock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer syslogConn.Close()
	rulesFile := filepath.Join(dir, "rules.conf")
	writeAtomic(t, rulesFile, `-A INPUT -p udp --dport 5004 -j DROP --log --log-prefix "dropped: " --log-level notice`)
	config := filepath.Join(dir, "xdpfw.yaml")
	const metricsAddr = "127.0.0.1:9477"
	writeAtomic(t, config, "interfaces: ["+l.srvIf+"]", "rules: rules.conf", "metrics: {listen: \""+metricsAddr+"\"}", "log: {events: journal}")
	f := newFW(t, l.srv)
	d := f.startDaemon(config)
	if !poll(t.Context(), cmdTimeout, func() bool { return strings.Contains(d.stderr.String(), "forwarding log events") }) {
		t.Fatalf("the daemon does not forward events:\n%s", d.stderr)
	}
	if r := f.run("log", "--count", "1"); r.code == 0 || !strings.Contains(r.stderr, "pid") {
		t.Errorf("xdpfw log while the daemon forwards: want a refusal naming the reader: %s", r)
	}
	sender := newUDPSender(t, l.cli, "")
	sender.send(t, hostPort(l.srv4, 5004), "x", 0, 3)
	want := fmt.Sprintf("<5>dropped: IN=%s ", l.srvIf) // notice = 5
	if !poll(t.Context(), arriveTimeout, func() bool { return strings.Count(d.stderr.String(), want) == 3 }) {
		t.Fatalf("want 3 journal lines %q in the daemon's output:\n%s", want, d.stderr)
	}
	for _, line := range strings.Split(d.stderr.String(), "\n") {
		if strings.HasPrefix(line, want) && (!strings.Contains(line, "SRC="+l.cli4+" DST="+l.srv4) || !strings.Contains(line, "DPT=5004") ||
			!strings.Contains(line, "VERDICT=DROP")) {
			t.Errorf("journal line lacks the packet's fields: %s", line)
		}
	}

	// The metrics count the events (the ring buffer's losses too: none).
	mfs := scrape(t, l.srv, metricsAddr)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"xdpfw_log_events_total", map[string]string{"outcome": "emitted"}, 3},
		{"xdpfw_log_events_total", map[string]string{"outcome": "lost"}, 0},
		{"xdpfw_rule_log_events_total", map[string]string{"chain": "INPUT", "rule": "1", "outcome": "emitted"}, 3},
	} {
		if got, ok := metricValue(mfs, c.name, c.labels); !ok || got != c.want {
			t.Errorf("metric %s%v = %v (present: %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}

	// To syslog instead: a reload switches the forwarder.
	writeAtomic(t, config, "interfaces: ["+l.srvIf+"]", "rules: rules.conf", `metrics: {listen: ""}`,
		"log: {events: syslog, syslog_address: \"unixgram:"+sysSock+"\"}")
	d.reloadedWant("unchanged") // the daemon's own settings only
	if !poll(t.Context(), cmdTimeout, func() bool { return strings.Count(d.stderr.String(), "forwarding log events") == 2 }) {
		t.Fatalf("the daemon does not forward events to syslog:\n%s", d.stderr)
	}
	sender.send(t, hostPort(l.srv4, 5004), "y", 0, 1)
	_ = syslogConn.SetReadDeadline(time.Now().Add(arriveTimeout))
	buf := make([]byte, 4096)
	n, err := syslogConn.Read(buf)
	if err != nil {
		t.Fatalf("no syslog message: %v\n%s", err, d.stderr)
	}
	// <PRI> with facility daemon (3) and severity notice (5): 3*8+5 = 29.
	if msg := string(buf[:n]); !strings.HasPrefix(msg, "<29>") || !strings.Contains(msg, "xdpfw") || !strings.Contains(msg, "dropped: IN="+l.srvIf) {
		t.Errorf("syslog message %q: want <29>, the tag xdpfw and the event", msg)
	}
}
