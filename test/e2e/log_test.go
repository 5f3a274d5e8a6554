package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// logRecord is one line of `xdpfw log --json` (the test's own type: the
// contract).
type logRecord struct {
	RuleID    uint32  `json:"rule_id"`
	Rule      int     `json:"rule"`
	Chain     string  `json:"chain"`
	Prefix    string  `json:"prefix"`
	Level     string  `json:"level"`
	ByLOG     bool    `json:"by_log_rule"`
	Verdict   string  `json:"verdict"`
	By        string  `json:"decided_by"`
	Hook      string  `json:"hook"`
	In        string  `json:"in"`
	Out       string  `json:"out"`
	Len       int     `json:"len"`
	CapLen    int     `json:"caplen"`
	Src       string  `json:"src"`
	Dst       string  `json:"dst"`
	Proto     *uint8  `json:"proto"`
	SPort     *uint16 `json:"sport"`
	DPort     *uint16 `json:"dport"`
	TCPFlags  string  `json:"tcp_flags"`
	Data      string  `json:"data"`
	Trace     bool    `json:"trace"`
	Time      string  `json:"time"`
	VerdictID uint32  `json:"verdict_rule_id"`
}

// logStatsJSON is `xdpfw log --stats --json`.
type logStatsJSON struct {
	Rules []struct {
		Num        int    `json:"num"`
		Chain      string `json:"chain"`
		Emitted    uint64 `json:"emitted"`
		Suppressed uint64 `json:"suppressed"`
		Lost       uint64 `json:"lost"`
	} `json:"rules"`
}

func (f *fw) logStats() logStatsJSON {
	f.t.Helper()
	var s logStatsJSON
	f.decode(&s, "log", "--stats", "--json")
	return s
}

func (r logRecord) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// logJSON runs `xdpfw log --json ARGS...` and decodes its lines.
func (f *fw) logJSON(args ...string) ([]logRecord, result) {
	f.t.Helper()
	r := f.mustRun(append([]string{"log", "--json"}, args...)...)
	var out []logRecord
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for {
		var rec logRecord
		if err := dec.Decode(&rec); err == io.EOF {
			return out, r
		} else if err != nil {
			f.t.Fatalf("decoding `xdpfw log --json`: %v\n%s", err, r)
		}
		out = append(out, rec)
	}
}

const (
	logPortSSH, logPortDrop, logPortUDP, logPortOut = 5022, 5099, 5053, 6000
	logRuleSSH                                      = `-A INPUT -p tcp --dport 5022 --syn -j LOG --log-prefix "e2e ssh: "`
	logRuleDrop                                     = `-A INPUT -p tcp --dport 5099 --syn -j DROP --log --log-prefix "e2e drop: "`
	logRuleUDP                                      = "-A INPUT -p udp --dport 5053 -j LOG --log-level info --log-rate 1/day --log-burst 2"
	logRuleOut                                      = "-A OUTPUT -p udp --dport 6000 -j LOG --log-prefix out:"
)

// TestLog loads LOG rules and --log rules on the server end of a veth pair,
// sends real traffic through them, and reads the events back with the
// real CLI: `xdpfw log --count 1 --json`, then `--json --pcap FILE` (the
// file read back by a pcapng reader, and by tcpdump where installed), then
// --stats. The UDP LOG rule's budget (1/day, burst 2) lets 2 of 5
// datagrams log and counts 3 suppressed. Then `xdpfw log --follow` prints
// an event as it happens, a second reader is refused, and SIGTERM ends the
// follower cleanly.
func TestLog(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, logPortSSH)
	sink := newUDPSink(t, l.srv, logPortUDP)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "log.rules",
		logRuleSSH, "-A INPUT -p tcp --dport 5022 -j ACCEPT", logRuleDrop, logRuleUDP, logRuleOut))

	// Traffic, one kind after the other so the events come in this order.
	for _, addr := range []string{l.srv4, l.srv6} {
		if err := dialTCP(t.Context(), l.cli, "", hostPort(addr, logPortSSH)); err != nil {
			t.Fatalf("ssh to %s: %v", addr, err)
		}
	}
	checkTCP(t, "dropped and logged", tcpProbe{from: l.cli, addr: hostPort(l.srv4, logPortDrop)})
	newUDPSender(t, l.cli, "").send(t, hostPort(l.srv4, logPortUDP), "u", 0, 5)
	if n := sink.wait(t, "u", 5); n != 5 {
		t.Fatalf("%d of 5 datagrams arrived: LOG must not drop", n)
	}
	newUDPSender(t, l.srv, "").send(t, hostPort(l.cli4, logPortOut), "o", 0, 1)
	ctx := t.Context()
	st := &struct {
		Log struct {
			Rules    int `json:"rules"`
			Counters struct {
				Total struct{ Emitted uint64 } `json:"total"`
			} `json:"counters"`
		} `json:"log"`
	}{}
	// the egress datagram is logged as it leaves: wait for its event
	if !poll(ctx, arriveTimeout, func() bool { f.decode(st, "status", "--json"); return st.Log.Counters.Total.Emitted >= 6 }) {
		t.Fatalf("status: %d events emitted, want at least 6", st.Log.Counters.Total.Emitted)
	}

	first, _ := f.logJSON("--count", "1")
	if len(first) != 1 {
		t.Fatalf("log --count 1: %d events", len(first))
	}
	ssh4 := first[0]
	if ssh4.Prefix != "e2e ssh: " || ssh4.Rule != 1 || !ssh4.ByLOG || ssh4.Verdict != "ACCEPT" || ssh4.By != "2" ||
		ssh4.Chain != "INPUT" || ssh4.Hook != "ingress" || ssh4.In != l.srvIf || ssh4.Src != l.cli4 || ssh4.Dst != l.srv4 ||
		ssh4.DPort == nil || *ssh4.DPort != logPortSSH || ssh4.TCPFlags != "SYN" || ssh4.Level != "warning" || ssh4.CapLen != min(ssh4.Len, 128) {
		t.Errorf("first event: %s", ssh4)
	}

	pcapFile := filepath.Join(t.TempDir(), "log.pcapng")
	rest, r := f.logJSON("--pcap", pcapFile)
	if !strings.Contains(r.stderr, fmt.Sprintf("xdpfw log: %d events", len(rest))) || !strings.Contains(r.stderr, "3 suppressed") {
		t.Errorf("summary on stderr: %s", r)
	}
	var ssh6, drops, udps, outs []logRecord
	for _, e := range rest {
		switch {
		case e.Prefix == "e2e ssh: ":
			ssh6 = append(ssh6, e)
		case e.Prefix == "e2e drop: ":
			drops = append(drops, e)
		case e.Level == "info":
			udps = append(udps, e)
		case e.Prefix == "out:":
			outs = append(outs, e)
		default:
			t.Errorf("an event of no rule of this test: %s", e)
		}
	}
	if len(ssh6) != 1 || ssh6[0].Src != l.cli6 || ssh6[0].Dst != l.srv6 || ssh6[0].Verdict != "ACCEPT" {
		t.Errorf("IPv6 ssh events: %v", ssh6)
	}
	// the SYN, and retransmissions while connect waited
	if len(drops) < 1 || drops[0].Verdict != "DROP" || drops[0].ByLOG || drops[0].By != fmt.Sprint(drops[0].Rule) || drops[0].Rule != 3 ||
		*drops[0].DPort != logPortDrop {
		t.Errorf("DROP --log events: %v", drops)
	}
	if len(udps) != 2 || udps[0].Verdict != "ACCEPT" || udps[0].By != "policy" || *udps[0].DPort != logPortUDP {
		t.Errorf("UDP LOG events (burst 2 of 5 datagrams): %v", udps)
	}
	if len(outs) != 1 || outs[0].Hook != "egress" || outs[0].Out != l.srvIf || outs[0].In != "" || outs[0].Chain != "OUTPUT" ||
		outs[0].Src != l.srv4 || outs[0].Dst != l.cli4 {
		t.Errorf("OUTPUT events: %v", outs)
	}
	checkLogPcap(t, pcapFile, rest, l.srvIf)

	if again, r := f.logJSON(); len(again) != 0 || !strings.Contains(r.stderr, "xdpfw log: 0 events") {
		t.Errorf("the ring buffer was drained, yet: %v\n%s", again, r)
	}
	stats := f.logStats()
	for _, rs := range stats.Rules {
		if rs.Chain == "INPUT" && rs.Num == 4 && (rs.Emitted != 2 || rs.Suppressed != 3) || rs.Lost != 0 {
			t.Errorf("log --stats: %+v; want the UDP LOG rule at 2 emitted, 3 suppressed, nothing lost", stats.Rules)
		}
	}
	if len(stats.Rules) != 4 {
		t.Errorf("log --stats lists %d rules, want the 4 that log", len(stats.Rules))
	}

	checkLogReload(t, f, l, sink)
	checkLogFollow(t, f, l)
}

// checkLogReload loads again with --log-snap and --log-rate: status shows
// them, an apply without them keeps them, and the rules' buckets and
// counters survive the program's reload (the UDP rule's budget, spent, lets
// no datagram log).
func checkLogReload(t *testing.T, f *fw, l *link, sink *udpSink) {
	t.Helper()
	file := writeRules(t, "log.rules", logRuleSSH, "-A INPUT -p tcp --dport 5022 -j ACCEPT", logRuleDrop, logRuleUDP, logRuleOut)
	f.mustRun("load", "-i", l.srvIf, "--log-snap", "64", "--log-rate", "5/min", "--log-burst", "7", file)
	f.mustRun("apply", file)
	var st struct {
		Log struct {
			Rate  string `json:"rate"`
			Burst uint32 `json:"burst"`
			Snap  int    `json:"snap"`
		} `json:"log"`
	}
	f.decode(&st, "status", "--json")
	if st.Log.Rate != "5/min" || st.Log.Burst != 7 || st.Log.Snap != 64 {
		t.Errorf("status after load --log-snap 64 --log-rate 5/min --log-burst 7 and an apply: %+v", st.Log)
	}
	newUDPSender(t, l.cli, "").send(t, hostPort(l.srv4, logPortUDP), "v", 0, 4)
	sink.wait(t, "v", 4)
	if evs, _ := f.logJSON(); len(evs) != 0 {
		t.Errorf("the UDP rule's spent budget (1/day) logged again after a reload: %v", evs)
	}
	for _, r := range f.logStats().Rules {
		if r.Chain == "INPUT" && r.Num == 4 && (r.Emitted != 2 || r.Suppressed != 7) {
			t.Errorf("the UDP rule after a reload and 4 more datagrams: %+v, want 2 emitted, 7 suppressed", r)
		}
	}
	// the smaller snap length is in force
	if err := dialTCP(t.Context(), l.cli, "", hostPort(l.srv4, logPortSSH)); err != nil {
		t.Fatal(err)
	}
	if evs, _ := f.logJSON(); len(evs) != 1 || evs[0].CapLen != 64 || len(evs[0].Data) != 128 {
		t.Errorf("after load --log-snap 64: %v", evs)
	}
}

// checkLogPcap reads the pcapng file `xdpfw log --pcap` wrote: a packet per
// event, with the event's bytes, the frame's length, the interface, the
// direction, and the log line as comment; and tcpdump reads it.
// lineAddr is the address of a LOG line's field (SRC= or DST=), as
// netip writes it (the line has IPv6 in full, as the kernel's).
func lineAddr(line, field string) string {
	_, rest, _ := strings.Cut(line, " "+field)
	f := strings.Fields(rest)
	if len(f) == 0 {
		return ""
	}
	a, err := netip.ParseAddr(f[0])
	if err != nil {
		return ""
	}
	return a.String()
}

func checkLogPcap(t *testing.T, file string, events []logRecord, iface string) {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	recs, err := packet.ReadCapture(fh)
	if err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	if len(recs) != len(events) {
		t.Fatalf("%s holds %d packets, xdpfw log printed %d events", file, len(recs), len(events))
	}
	for i, rec := range recs {
		e := events[i]
		data, _ := hex.DecodeString(e.Data)
		wantFlags := uint32(1)
		if e.Hook == "egress" {
			wantFlags = 2
		}
		if !bytes.Equal(rec.Data, data) || rec.OrigLen != e.Len || rec.IfName != iface || rec.Flags != wantFlags ||
			!strings.HasPrefix(rec.Comment, e.Prefix) || lineAddr(rec.Comment, "SRC=") != e.Src || lineAddr(rec.Comment, "DST=") != e.Dst {
			t.Errorf("packet %d of %s: %d bytes (orig %d) on %s flags %d comment %q; event %s", i, file, len(rec.Data), rec.OrigLen,
				rec.IfName, rec.Flags, rec.Comment, e)
		}
		if p, err := packet.DecodeCut(rec.Data); (err != nil && !strings.Contains(err.Error(), "truncated")) || p.Src.String() != e.Src {
			t.Errorf("packet %d of %s does not decode to the event's source: %v %v", i, file, p, err)
		}
	}
	bin, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Log("tcpdump not installed: the pcapng file was read back by internal/packet only")
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-r", file, "-nn").CombinedOutput()
	if err != nil {
		t.Fatalf("tcpdump -r %s: %v\n%s", file, err, out)
	}
	if n := strings.Count(string(out), "\n") - strings.Count(string(out), "reading from file"); n != len(events) {
		t.Errorf("tcpdump -r printed %d packet lines, want %d:\n%s", n, len(events), out)
	}
}

// checkLogFollow runs `xdpfw log --follow`: it prints an event as the
// packet passes; a second reader is refused while it runs; SIGTERM ends
// it with exit status 0 and its summary.
func checkLogFollow(t *testing.T, f *fw, l *link) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", f.ns.Name, xdpfwBin, "--pin-dir", f.pinDir, "--state-dir", f.stateDir,
		"log", "--follow")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	defer func() {
		if !done {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	var st struct {
		Log struct {
			Reader string `json:"reader"`
		} `json:"log"`
	}
	if !poll(ctx, arriveTimeout, func() bool { f.decode(&st, "status", "--json"); return st.Log.Reader != "" }) {
		t.Fatalf("status never named the follower as the reader; its stderr: %s", stderr.String())
	}
	if st.Log.Reader != fmt.Sprint(cmd.Process.Pid) {
		t.Errorf("status names pid %s as the reader, the follower is %d", st.Log.Reader, cmd.Process.Pid)
	}
	if r := f.runWant(1, "log"); !strings.Contains(r.stderr, "another process reads the log events") {
		t.Errorf("a second reader: %s", r)
	}
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if err := dialTCP(ctx, l.cli, "", hostPort(l.srv4, logPortSSH)); err != nil {
		t.Fatal(err)
	}
	var line string
	select {
	case line = <-lines:
	case <-time.After(arriveTimeout):
		t.Fatalf("log --follow printed nothing for a logged SYN; stderr: %s", stderr.String())
	}
	for _, want := range []string{"e2e ssh: IN=" + l.srvIf + " OUT= MAC=", "SRC=" + l.cli4 + " DST=" + l.srv4,
		" TOS=0x00 PREC=0x00 TTL=64 ID=", " DF PROTO=TCP SPT=", "DPT=5022 WINDOW=", " RES=0x00 SYN URGP=0 CHAIN=INPUT RULE=1 VERDICT=ACCEPT BY=2"} {
		if !strings.Contains(line, want) {
			t.Errorf("log --follow line lacks %q:\n%s", want, line)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range lines { // drain until EOF
	}
	err = cmd.Wait()
	done = true
	if err != nil || !strings.Contains(stderr.String(), "xdpfw log: 1 events") {
		t.Errorf("log --follow after SIGTERM: %v; stderr: %s", err, stderr.String())
	}
}
