package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/testutil"
)

// Bounds on everything that waits.
const (
	buildTimeout   = 5 * time.Minute
	cmdTimeout     = 30 * time.Second // one xdpfw or ip invocation
	loadTimeout    = 2 * time.Minute  // xdpfw load: on a loaded machine verifying --nat xdpfw's programs took more than cmdTimeout
	connectTimeout = 1 * time.Second  // a TCP connect the firewall drops times out after this
	arriveTimeout  = 10 * time.Second // datagrams expected to arrive
	pollInterval   = 2 * time.Millisecond
)

// xdpfwBin is the binary TestMain builds from ./cmd/xdpfw; every test runs it.
var xdpfwBin string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

// runTests builds the binary, then runs the tests under the descriptor
// leak check.
func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "xdpfw-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if xdpfwBin, err = build(dir); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	return testutil.RunWithFDCheck(m)
}

// build compiles ./cmd/xdpfw into dir and returns the binary's path.
func build(dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	root, err := repoRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "xdpfw")
	cmd := exec.CommandContext(ctx, "go", "build", "-mod=mod", "-o", bin, "./cmd/xdpfw")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/xdpfw in %s: %v\n%s", root, err, out)
	}
	return bin, nil
}

// repoRoot is the directory of the module's go.mod (go env GOMOD), or ../..
// from this package.
func repoRoot(ctx context.Context) (string, error) {
	if out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output(); err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("cannot find the repository root (go env GOMOD failed, %v)", err)
	}
	return root, nil
}

// ---------------------------------------------------------------------------
// Running the binary

// fw runs the xdpfw binary inside one namespace with the test's own pin
// and state directories.
type fw struct {
	t        *testing.T
	ns       *testutil.NetNS
	pinDir   string // on a private bpffs
	stateDir string
}

// newFW gives t a private bpffs and state dir for xdpfw running in ns, and
// registers `xdpfw detach --all` as cleanup (before the bpffs is unmounted
// and the namespace removed), so nothing stays attached or pinned.
func newFW(t *testing.T, ns *testutil.NetNS) *fw {
	t.Helper()
	f := &fw{t: t, ns: ns, pinDir: filepath.Join(testutil.BPFFS(t), "xdpfw"), stateDir: t.TempDir()}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		defer cancel()
		if r := f.exec(ctx, "detach", "--all"); r.code != 0 {
			t.Errorf("cleanup: %s", r)
		}
	})
	return f
}

// with returns a copy of f that reports to t (for use in a subtest).
func (f *fw) with(t *testing.T) *fw {
	g := *f
	g.t = t
	return &g
}

// result is one run of the binary.
type result struct {
	args           []string
	stdout, stderr string
	code           int // exit status, -1 if it did not exit normally
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("`xdpfw %s` exited %d (%v)\n--- stdout:\n%s--- stderr:\n%s--- end",
		strings.Join(r.args, " "), r.code, r.err, r.stdout, r.stderr)
}

// exec runs `ip netns exec NS xdpfw --pin-dir P --state-dir S ARGS...`.
func (f *fw) exec(ctx context.Context, args ...string) result {
	return f.execIn(ctx, "", args...)
}

// execIn is exec with stdin as the standard input.
func (f *fw) execIn(ctx context.Context, stdin string, args ...string) result {
	argv := append([]string{"netns", "exec", f.ns.Name, xdpfwBin, "--pin-dir", f.pinDir, "--state-dir", f.stateDir}, args...)
	cmd := exec.CommandContext(ctx, "ip", argv...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String(), err: err}
	if err != nil {
		r.code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.code = ee.ExitCode()
		}
	}
	return r
}

// run runs the binary with a bounded context derived from the test's:
// cmdTimeout, loadTimeout for load (it verifies every program).
func (f *fw) run(args ...string) result {
	limit := cmdTimeout
	if len(args) > 0 && args[0] == "load" {
		limit = loadTimeout
	}
	ctx, cancel := context.WithTimeout(f.t.Context(), limit)
	defer cancel()
	return f.exec(ctx, args...)
}

// mustRun runs the binary and fails the test unless it exits 0.
func (f *fw) mustRun(args ...string) result {
	f.t.Helper()
	r := f.run(args...)
	if r.code != 0 {
		f.t.Fatalf("want exit status 0: %s", r)
	}
	return r
}

// runWant runs the binary and fails the test unless it exits with code.
func (f *fw) runWant(code int, args ...string) result {
	f.t.Helper()
	r := f.run(args...)
	if r.code != code {
		f.t.Fatalf("want exit status %d: %s", code, r)
	}
	return r
}

// decode runs the binary (exit 0 required) and decodes its stdout as JSON.
func (f *fw) decode(v any, args ...string) result {
	f.t.Helper()
	r := f.mustRun(args...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		f.t.Fatalf("decoding the JSON output: %v\n%s", err, r)
	}
	return r
}

// ---------------------------------------------------------------------------
// JSON the CLI prints (decoded into the test's own types: the contract)

type counters struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

type listedRule struct {
	Chain    string   `json:"chain"`
	Num      int      `json:"num"`
	ID       uint32   `json:"id"`
	Rule     string   `json:"rule"`
	Counters counters `json:"counters"`
}

type listedPolicy struct {
	Chain    string   `json:"chain"`
	Family   string   `json:"family"`
	Verdict  string   `json:"verdict"`
	Counters counters `json:"counters"`
}

// listing is `xdpfw list --json`.
type listing struct {
	Generation uint64         `json:"generation"`
	Rules      []listedRule   `json:"rules"`
	Policies   []listedPolicy `json:"policies"`
	raw        string
}

// list runs `xdpfw list --json`; it checks the rules of each chain are
// numbered 1, 2, 3...
func (f *fw) list() *listing {
	f.t.Helper()
	var l listing
	r := f.decode(&l, "list", "--json")
	l.raw = r.stdout
	next := map[string]int{}
	for _, rule := range l.Rules {
		next[rule.Chain]++
		if rule.Num != next[rule.Chain] {
			f.t.Fatalf("rule %q is number %d of %s, want %d:\n%s", rule.Rule, rule.Num, rule.Chain, next[rule.Chain], l.raw)
		}
	}
	return &l
}

// packetsByChain returns each chain's per-rule packet counters, in order.
func (l *listing) packetsByChain() map[string][]uint64 {
	got := map[string][]uint64{}
	for _, r := range l.Rules {
		got[r.Chain] = append(got[r.Chain], r.Counters.Packets)
	}
	return got
}

// chain returns the rule texts of chain, in order.
func (l *listing) chain(chain string) []string {
	out := []string{}
	for _, r := range l.Rules {
		if r.Chain == chain {
			out = append(out, r.Rule)
		}
	}
	return out
}

// rule returns the rule whose text is text; it fails the test if there is none.
func (l *listing) rule(t *testing.T, text string) listedRule {
	t.Helper()
	for _, r := range l.Rules {
		if r.Rule == text {
			return r
		}
	}
	t.Fatalf("list has no rule %q:\n%s", text, l.raw)
	return listedRule{}
}

// policy returns the policy of chain for family ("ipv4", "ipv6").
func (l *listing) policy(t *testing.T, chain, family string) listedPolicy {
	t.Helper()
	for _, p := range l.Policies {
		if p.Chain == chain && p.Family == family {
			return p
		}
	}
	t.Fatalf("list has no %s policy for %s:\n%s", chain, family, l.raw)
	return listedPolicy{}
}

// wantChain fails the test unless chain holds exactly want, in order.
func (l *listing) wantChain(t *testing.T, chain string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got := l.chain(chain); !slices.Equal(got, want) {
		t.Fatalf("%s rules:\n  %s\nwant:\n  %s\nlist --json:\n%s", chain,
			strings.Join(got, "\n  "), strings.Join(want, "\n  "), l.raw)
	}
}

// wantPolicy fails the test unless chain has verdict for both families.
func (l *listing) wantPolicy(t *testing.T, chain, verdict string) {
	t.Helper()
	for _, fam := range []string{"ipv4", "ipv6"} {
		if p := l.policy(t, chain, fam); p.Verdict != verdict {
			t.Fatalf("%s policy for %s is %s, want %s:\n%s", chain, fam, p.Verdict, verdict, l.raw)
		}
	}
}

// statusJSON is `xdpfw status --json`.
type statusJSON struct {
	Generation uint64 `json:"generation"`
	ProgramID  uint32 `json:"program_id"`
	PinDir     string `json:"pin_dir"`
	Interfaces map[string]struct {
		Index     int      `json:"ifindex"`
		Mode      string   `json:"mode"`
		Filtering bool     `json:"filtering"`
		Problem   string   `json:"problem"`
		Warnings  []string `json:"warnings"`
		// VLANReader: xdpfw_rxvlan runs there, then program Next.
		VLANReader *struct {
			ID   uint32 `json:"program_id"`
			Next uint32 `json:"next_program_id"`
		} `json:"vlan_reader"`
	} `json:"interfaces"`
	Rules     int                 `json:"rules"`
	Malformed string              `json:"malformed"`
	Reasons   map[string]counters `json:"reasons"`
	Limits    struct {
		Entries int `json:"entries"`
	} `json:"limits"`
	raw string
}

func (f *fw) status() *statusJSON {
	f.t.Helper()
	var s statusJSON
	r := f.decode(&s, "status", "--json")
	s.raw = r.stdout
	return &s
}

// traceResult is one element of `xdpfw trace --json`.
type traceResult struct {
	Verdict   string `json:"verdict"`
	XDPAction uint32 `json:"xdp_action"`
	Chain     string `json:"chain"`
	RuleID    uint32 `json:"rule_id"`
	Rule      string `json:"rule"`
	RuleNum   int    `json:"rule_num"`
	Policy    bool   `json:"policy"`
	Action    string `json:"action"`
	Reason    string `json:"reason"`
	Reject    string `json:"reject"`
}

func (f *fw) trace(args ...string) ([]traceResult, result) {
	f.t.Helper()
	var out []traceResult
	r := f.decode(&out, append([]string{"trace", "--json"}, args...)...)
	return out, r
}

// ---------------------------------------------------------------------------
// State checks

// stateFile is where xdpfw records the rule set in force.
func (f *fw) stateFile() string { return filepath.Join(f.stateDir, "state.json") }

// wantNothingLoaded checks that no trace of a firewall is left: `status`
// fails saying it is not loaded, nothing is pinned (the pin dir is absent or
// empty and the bpffs holds nothing else), no state or rules file, and no
// XDP program on any of ifaces.
func (f *fw) wantNothingLoaded(ifaces ...string) {
	f.t.Helper()
	if r := f.run("status"); r.code != 1 || !strings.Contains(r.stderr, "not loaded") {
		f.t.Errorf("status: want exit status 1 saying xdpfw is not loaded: %s", r)
	}
	if pins := f.pins(); len(pins) != 0 {
		f.t.Errorf("left pinned in %s: %v", f.pinDir, pins)
	}
	ents, err := os.ReadDir(filepath.Dir(f.pinDir))
	if err != nil {
		f.t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != filepath.Base(f.pinDir) && !strings.HasSuffix(e.Name(), ".debug") {
			f.t.Errorf("left on the bpffs: %s", e.Name())
		}
	}
	if _, err := os.Stat(f.stateFile()); !errors.Is(err, os.ErrNotExist) {
		f.t.Errorf("state file %s left behind (%v)", f.stateFile(), err)
	}
	if bases, _ := filepath.Glob(filepath.Join(f.stateDir, "rules-*")); len(bases) > 0 {
		f.t.Errorf("rules files left behind: %v", bases)
	}
	for _, iface := range ifaces {
		if prog := xdpProg(f.t, f.ns, iface); prog != "" {
			f.t.Errorf("%s still has an XDP program: %s", iface, prog)
		}
	}
}

// pins lists the pin dir (nil when it does not exist).
func (f *fw) pins() []string {
	f.t.Helper()
	ents, err := os.ReadDir(f.pinDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

var (
	xdpFlagRE = regexp.MustCompile(` mtu \d+ (xdp\w*) `)
	xdpIDRE   = regexp.MustCompile(`prog/xdp\w* id (\d+)`)
)

// xdpProg returns what `ip -d link show dev IFACE` says about an attached
// XDP program, as "MODEFLAG id ID" ("xdp id 12" for native mode,
// "xdpgeneric id 12" for generic mode), or "" when there is none.
func xdpProg(t *testing.T, ns *testutil.NetNS, iface string) string {
	t.Helper()
	out := ipOut(t, "-n", ns.Name, "-d", "link", "show", "dev", iface)
	flag, id := xdpFlagRE.FindStringSubmatch(out), xdpIDRE.FindStringSubmatch(out)
	switch {
	case flag == nil && id == nil:
		return ""
	case flag == nil || id == nil:
		t.Fatalf("cannot tell the XDP program of %s:\n%s", iface, out)
	}
	return flag[1] + " id " + id[1]
}

// wantStatusNamesAttachedProgram checks, in a subtest, that the program
// status reports (the pinned one, which trace runs) is the one running on
// iface: attached there, or jumped to by the xdpfw_rxvlan attached there
// (a veth in native mode), which status names too.
func wantStatusNamesAttachedProgram(t *testing.T, f *fw, iface string) {
	t.Run("status names the attached program", func(t *testing.T) {
		f := f.with(t)
		st := f.status()
		prog := xdpProg(t, f.ns, iface)
		if runs := st.attachedID(t, iface); !strings.HasSuffix(prog, fmt.Sprintf(" id %d", runs)) {
			t.Errorf("status says %s runs program %d, but it runs %q:\n%s", iface, runs, prog, st.raw)
		}
	})
}

// attachedID is the id of the program status says iface runs: the pinned
// one, or the xdpfw_rxvlan that jumps to it (checked).
func (st *statusJSON) attachedID(t *testing.T, iface string) uint32 {
	t.Helper()
	r := st.Interfaces[iface].VLANReader
	if r == nil {
		return st.ProgramID
	}
	if r.Next != st.ProgramID {
		t.Errorf("status reports (and trace runs) program %d, but %s's xdpfw_rxvlan jumps to %d", st.ProgramID, iface, r.Next)
	}
	return r.ID
}

// ---------------------------------------------------------------------------
// Topology

// ip runs `ip ARGS` in the host namespace (use -n NS) and fails the test on error.
func ipOut(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// link is a veth pair between a server and a client namespace, with
// 10.200.N.1/24 + fd00:200:N::1/64 on the server end and .2 / ::2 on the
// client end.
type link struct {
	srv, cli     *testutil.NetNS
	srvIf, cliIf string
	srv4, srv6   string
	cli4, cli6   string
}

func newLink(t *testing.T, srv *testutil.NetNS, srvIf string, cli *testutil.NetNS, cliIf string, n int) *link {
	t.Helper()
	l := &link{srv: srv, cli: cli, srvIf: srvIf, cliIf: cliIf,
		srv4: fmt.Sprintf("10.200.%d.1", n), srv6: netip.MustParseAddr(fmt.Sprintf("fd00:200:%x::1", n)).String(),
		cli4: fmt.Sprintf("10.200.%d.2", n), cli6: netip.MustParseAddr(fmt.Sprintf("fd00:200:%x::2", n)).String()}
	testutil.VethPair(t,
		srv, srvIf, []string{l.srv4 + "/24", l.srv6 + "/64"},
		cli, cliIf, []string{l.cli4 + "/24", l.cli6 + "/64"})
	return l
}

// newPair creates a server and a client namespace joined by link 0
// (10.200.0.0/24, fd00:200::/64), server end "xsrv0", client end "xcli0".
func newPair(t *testing.T) *link {
	t.Helper()
	return newLink(t, testutil.NewNetNS(t), "xsrv0", testutil.NewNetNS(t), "xcli0", 0)
}

// hostPort joins an address and a port.
func hostPort(addr string, port int) string { return net.JoinHostPort(addr, strconv.Itoa(port)) }

// writeRules writes a rule file into a temporary directory and returns its path.
func writeRules(t *testing.T, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// poll calls cond every pollInterval until it returns true or timeout
// passes; it returns cond's last answer.
func poll(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-tick.C:
		}
	}
}

// ---------------------------------------------------------------------------
// TCP

// serveTCP listens on each port (every address, both families) in ns and
// accepts and closes connections until the test ends.
func serveTCP(t *testing.T, ns *testutil.NetNS, ports ...int) {
	t.Helper()
	for _, port := range ports {
		var ln net.Listener
		err := ns.Do(func() (err error) {
			ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
			return err
		})
		if err != nil {
			t.Fatalf("listening on tcp port %d in %s: %v", port, ns, err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		})
		t.Cleanup(func() {
			ln.Close()
			wg.Wait()
		})
	}
}

// tcpProbe is a TCP connect from a namespace and the expected outcome.
type tcpProbe struct {
	from  *testutil.NetNS
	local string // source address; "" lets the kernel choose
	addr  string // host:port
	ok    bool   // true: connects; false: times out (the SYN is dropped)
}

func (p tcpProbe) String() string {
	src := p.local
	if src == "" {
		src = "any"
	}
	return fmt.Sprintf("tcp connect %s -> %s (from %s)", src, p.addr, p.from)
}

// dialTCP connects from ns to addr and closes the connection.
func dialTCP(ctx context.Context, ns *testutil.NetNS, local, addr string) error {
	return ns.Do(func() error {
		d := net.Dialer{Timeout: connectTimeout}
		if local != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// waitTCP waits until a connect from ns to addr succeeds (a link just
// set up or reset), failing the test after arriveTimeout.
func waitTCP(t *testing.T, ns *testutil.NetNS, addr string) {
	t.Helper()
	var err error
	if !poll(t.Context(), arriveTimeout, func() bool { err = dialTCP(t.Context(), ns, "", addr); return err == nil }) {
		t.Fatalf("tcp %s from %s never connected: %v", addr, ns, err)
	}
}

// checkTCP runs the probes concurrently and reports every unexpected
// outcome. A blocked probe must time out: a refused connection means the
// SYN got through to a port nobody listens on, which is not what a DROP does.
func checkTCP(t *testing.T, what string, probes ...tcpProbe) {
	t.Helper()
	errs := make([]error, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() { errs[i] = dialTCP(t.Context(), p.from, p.local, p.addr) })
	}
	wg.Wait()
	for i, p := range probes {
		err := errs[i]
		var ne net.Error
		switch {
		case p.ok && err != nil:
			t.Errorf("%s: %s: want connected, got %v", what, p, err)
		case !p.ok && err == nil:
			t.Errorf("%s: %s: connected, want dropped (connect timing out)", what, p)
		case !p.ok && !(errors.As(err, &ne) && ne.Timeout()):
			t.Errorf("%s: %s: want a connect timeout (SYN dropped), got %v", what, p, err)
		}
	}
}

// ---------------------------------------------------------------------------
// ICMP

// checkPing pings addr from ns; want says whether replies must come back.
func checkPing(t *testing.T, what string, ns *testutil.NetNS, addr string, want bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	args := []string{"-c", "3", "-i", "0.2", "-W", "1", addr}
	if !want {
		args = []string{"-c", "1", "-W", "1", addr}
	}
	out, err := ns.Exec(ctx, "ping", args...)
	switch {
	case want && err != nil:
		t.Errorf("%s: ping %s from %s: want replies, got %v\n%s", what, addr, ns, err, out)
	case !want && err == nil:
		t.Errorf("%s: ping %s from %s: want no reply, got\n%s", what, addr, ns, out)
	}
}

// ---------------------------------------------------------------------------
// UDP

// udpSink is a UDP server in a namespace that records every datagram it
// receives. Datagrams carry "TAG SEQ"; the sink counts them per tag and
// sequence number.
type udpSink struct {
	ns   *testutil.NetNS
	port int
	conn net.PacketConn

	mu     sync.Mutex
	got    map[string]map[int]int // tag -> seq -> times received
	err    error                  // a read error other than closing
	nsyncs int
}

// newUDPSink listens on port (every address, both families) in ns with a
// large receive buffer and reads until the test ends.
func newUDPSink(t *testing.T, ns *testutil.NetNS, port int) *udpSink {
	t.Helper()
	var pc net.PacketConn
	err := ns.Do(func() (err error) {
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatalf("listening on udp port %d in %s: %v", port, ns, err)
	}
	raw, err := pc.(*net.UDPConn).SyscallConn()
	if err == nil {
		cerr := raw.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
		})
		err = errors.Join(err, cerr)
	}
	if err != nil {
		pc.Close()
		t.Fatalf("udp port %d: receive buffer: %v", port, err)
	}
	s := &udpSink{ns: ns, port: port, conn: pc, got: map[string]map[int]int{}}
	var wg sync.WaitGroup
	wg.Go(s.read)
	t.Cleanup(func() {
		pc.Close()
		wg.Wait()
	})
	return s
}

func (s *udpSink) read() {
	buf := make([]byte, 2048)
	for {
		n, _, err := s.conn.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
			}
			return
		}
		tag, seqText, _ := strings.Cut(string(buf[:n]), " ")
		seq, err := strconv.Atoi(seqText)
		if err != nil {
			seq = -1
		}
		s.mu.Lock()
		if s.got[tag] == nil {
			s.got[tag] = map[int]int{}
		}
		s.got[tag][seq]++
		s.mu.Unlock()
	}
}

// count is the number of datagrams received with tag.
func (s *udpSink) count(tag string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.got[tag] {
		n += k
	}
	return n
}

// total is the number of datagrams received, markers of sync excluded.
func (s *udpSink) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for tag, seqs := range s.got {
		if tag == syncTag {
			continue
		}
		for _, k := range seqs {
			n += k
		}
	}
	return n
}

// seqs returns how many times each sequence number of tag was received.
func (s *udpSink) seqs(tag string) map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.got[tag])
}

// wait waits until n datagrams with tag have arrived (or arriveTimeout
// passes) and returns how many did.
func (s *udpSink) wait(t *testing.T, tag string, n int) int {
	t.Helper()
	poll(t.Context(), arriveTimeout, func() bool { return s.count(tag) >= n })
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		t.Fatalf("udp sink on port %d: %v", s.port, err)
	}
	return s.count(tag)
}

const syncTag = "sync"

// sync makes sure the sink has read everything that was queued on its
// socket before the call: it sends a marker over the server's loopback
// (no XDP there) and waits for it; the socket queue is FIFO.
func (s *udpSink) sync(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	s.nsyncs++
	id := s.nsyncs
	s.mu.Unlock()
	err := s.ns.Do(func() error {
		c, err := net.Dial("udp", hostPort("127.0.0.1", s.port))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = fmt.Fprintf(c, "%s %d", syncTag, id)
		return err
	})
	if err != nil {
		t.Fatalf("sync marker to udp port %d: %v", s.port, err)
	}
	if !poll(t.Context(), arriveTimeout, func() bool { return s.seqs(syncTag)[id] > 0 }) {
		t.Fatalf("sync marker %d did not reach udp port %d", id, s.port)
	}
}

// udpSender is a UDP socket in a (client) namespace.
type udpSender struct {
	conn net.PacketConn
}

// newUDPSender opens an unconnected UDP socket in ns (bound to local, or
// to every address when local is "").
func newUDPSender(t *testing.T, ns *testutil.NetNS, local string) *udpSender {
	t.Helper()
	var pc net.PacketConn
	err := ns.Do(func() (err error) {
		pc, err = net.ListenPacket("udp", hostPort(local, 0))
		return err
	})
	if err != nil {
		t.Fatalf("udp socket in %s: %v", ns, err)
	}
	t.Cleanup(func() { pc.Close() })
	return &udpSender{conn: pc}
}

// send sends n datagrams "TAG first".."TAG first+n-1" to addr (host:port).
func (u *udpSender) send(t *testing.T, addr, tag string, first, n int) {
	t.Helper()
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i < first+n; i++ {
		if _, err := u.conn.WriteTo(fmt.Appendf(nil, "%s %d", tag, i), ua); err != nil {
			t.Fatalf("sending udp to %s: %v", addr, err)
		}
	}
}
