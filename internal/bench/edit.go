package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// EditOptions configure the single-edit benchmark.
type EditOptions struct {
	Rules  int // rules loaded (RuleSetText, IPv4)
	Rounds int
	// Binary is the xdpfw binary whose edit commands are timed too (""
	// times the Go API only).
	Binary   string
	Progress io.Writer
}

// EditResult is the single-edit benchmark.
type EditResult struct {
	Rules  int       `json:"rules"`
	LoadMS float64   `json:"load_ms"` // xdpfw load of the rule set (parse, compile, install)
	Ops    []*EditOp `json:"edits"`
}

// EditOp is one kind of edit, measured once per round. "Visible" is the
// time from the start of the edit until a packet run through the loaded
// program (BPF_PROG_TEST_RUN, again and again) gets the new verdict.
type EditOp struct {
	Name string `json:"name"`
	// API: from calling firewall.Open (which reads the state) until
	// visible; InForce: what the edit itself reports (from the start of
	// the edit call, after Open, to the switch).
	APIms     []float64 `json:"api_visible_ms"`
	InForceMS []float64 `json:"api_in_force_ms"`
	// CLI: from starting `xdpfw ... --no-rebuild` until visible.
	CLIms []float64 `json:"cli_visible_ms,omitempty"`
	// Rebuild: firewall.Open and Rebuild, folding the edit.
	RebuildMS []float64 `json:"rebuild_ms"`
	// DeltaEntries, DeltaDeleted: the delta stage the edit filled.
	DeltaEntries int `json:"delta_entries"`
	DeltaDeleted int `json:"delta_deleted"`
}

// editStep is one edit, its CLI twin, and the probe verdict after it.
type editStep struct {
	name  string
	api   func(*firewall.Firewall) (*firewall.Result, error)
	cli   []string
	probe []byte
	pass  bool // the probe passes after the edit
}

// editSteps are the measured edits on RuleSetText(n): pairs that leave
// the rule set as it was.
func editSteps(n int) ([]editStep, error) {
	parse := func(chain string, args ...string) (rules.Rule, error) {
		return rules.ParseRuleArgs(chain, args, rules.ParseOptions{})
	}
	appended, err := parse("INPUT", "-s", "198.51.100.0/24", "-p", "udp", "--dport", "53", "-j", "ACCEPT")
	if err != nil {
		return nil, err
	}
	first, err := parse("INPUT", "-s", "192.0.2.0/24", "-j", "DROP")
	if err != nil {
		return nil, err
	}
	loaded1, err := parse("INPUT", "-s", "10.0.0.0/24", "-p", "udp", "--dport", "1000", "-j", "ACCEPT")
	if err != nil {
		return nil, err
	}
	mid := n / 2 // rule mid is RuleSetText's rule mid-1 (0-based)
	i := mid - 1
	midSrc := fmt.Sprintf("10.%d.%d.0/24", (i/250)%250, i%250)
	midPort := fmt.Sprint(1000 + i%5000)
	midAccept, err := parse("INPUT", "-s", midSrc, "-p", "udp", "--dport", midPort, "-j", "ACCEPT")
	if err != nil {
		return nil, err
	}
	midDrop, err := parse("INPUT", "-s", midSrc, "-p", "udp", "--dport", midPort, "-j", "DROP")
	if err != nil {
		return nil, err
	}
	last, _, _ := probes("ipv4")
	newProbe := udpFrame("198.51.100.7", "10.255.0.1", 40000, 53)
	firstProbe := udpFrame("10.0.0.7", "10.255.0.1", 40000, 1000)
	midProbe := udpFrame(fmt.Sprintf("10.%d.%d.7", (i/250)%250, i%250), "10.255.0.1", 40000, uint16(1000+i%5000))
	// the CLI's arguments (the benchmark's rules quote nothing)
	spec := func(r rules.Rule) []string { return append([]string{r.Chain.String()}, strings.Fields(r.Spec())...) }
	num := fmt.Sprint
	return []editStep{
		{"add (append)", func(f *firewall.Firewall) (*firewall.Result, error) { return f.Add(appended, 0) },
			append([]string{"add"}, spec(appended)...), newProbe, true},
		{"delete the appended rule", func(f *firewall.Firewall) (*firewall.Result, error) {
			res, _, err := f.Delete(rules.ChainInput, n+1)
			return res, err
		}, []string{"delete", "INPUT", num(n + 1)}, newProbe, false},
		{"insert at 1", func(f *firewall.Firewall) (*firewall.Result, error) { return f.Add(first, 1) },
			append([]string{"insert", "INPUT", "1"}, spec(first)[1:]...), last, false},
		{"delete rule 1 (the inserted)", func(f *firewall.Firewall) (*firewall.Result, error) {
			res, _, err := f.Delete(rules.ChainInput, 1)
			return res, err
		}, []string{"delete", "INPUT", "1"}, last, true},
		{"delete rule 1 (a loaded rule)", func(f *firewall.Firewall) (*firewall.Result, error) {
			res, _, err := f.Delete(rules.ChainInput, 1)
			return res, err
		}, []string{"delete", "INPUT", "1"}, firstProbe, false},
		{"insert it back at 1", func(f *firewall.Firewall) (*firewall.Result, error) { return f.Add(loaded1, 1) },
			append([]string{"insert", "INPUT", "1"}, spec(loaded1)[1:]...), firstProbe, true},
		{fmt.Sprintf("replace rule %d", mid), func(f *firewall.Firewall) (*firewall.Result, error) {
			res, _, err := f.Replace(mid, midDrop)
			return res, err
		}, append([]string{"replace", "INPUT", num(mid)}, spec(midDrop)[1:]...), midProbe, false},
		{fmt.Sprintf("replace rule %d back", mid), func(f *firewall.Firewall) (*firewall.Result, error) {
			res, _, err := f.Replace(mid, midAccept)
			return res, err
		}, append([]string{"replace", "INPUT", num(mid)}, spec(midAccept)[1:]...), midProbe, true},
	}, nil
}

// Edit loads RuleSetText(opt.Rules) through the firewall API (attached in
// generic mode to a veth in a throwaway namespace, with a private bpffs and
// state directory) and times single edits: until visible to packets, and
// the rebuild after each.
func Edit(opt EditOptions) (*EditResult, error) {
	dir, undo, err := sandbox("xdpfw-bench-edit-")
	if err != nil {
		return nil, err
	}
	defer undo()
	say := sayer(opt.Progress)
	stateDir, err := os.MkdirTemp("", "xdpfw-bench-edit-state-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stateDir)
	paths := firewall.Paths{PinDir: filepath.Join(dir, "xdpfw"), StateDir: stateDir}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "xdpfwb0"}, PeerName: "xdpfwb1"}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("adding a veth pair: %w", err)
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		return nil, err
	}
	rs, err := rules.Parse("bench", []byte(RuleSetText(opt.Rules, "ipv4")), rules.ParseOptions{})
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if _, err := firewall.Load(paths, []string{"xdpfwb0"}, datapath.ModeGeneric, rs,
		firewall.Options{MaxRules: max(opt.Rules+1024, 16384)}); err != nil {
		return nil, err
	}
	defer firewall.Teardown(paths)
	res := &EditResult{Rules: opt.Rules, LoadMS: msSince(t0)}
	say("  loaded %d rules in %.0f ms", opt.Rules, res.LoadMS)
	dp, err := datapath.Open(paths.PinDir)
	if err != nil {
		return nil, err
	}
	defer dp.Close()
	steps, err := editSteps(opt.Rules)
	if err != nil {
		return nil, err
	}
	for _, s := range steps {
		res.Ops = append(res.Ops, &EditOp{Name: s.name})
	}
	for round := 0; round < opt.Rounds; round++ {
		for k, s := range steps {
			op := res.Ops[k]
			if err := editAPI(paths, dp, s, op); err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
		}
		if opt.Binary != "" {
			for k, s := range steps {
				if err := editCLI(opt.Binary, paths, dp, s, res.Ops[k]); err != nil {
					return nil, fmt.Errorf("%s (CLI): %w", s.name, err)
				}
			}
		}
		say("  round %d/%d done", round+1, opt.Rounds)
	}
	return res, nil
}

// editAPI makes edit s through the Go API, times it until visible, then
// rebuilds.
func editAPI(paths firewall.Paths, dp *datapath.Datapath, s editStep, op *EditOp) error {
	type done struct {
		res *firewall.Result
		err error
	}
	ch := make(chan done, 1)
	start := time.Now()
	go func() {
		fw, err := firewall.Open(paths)
		if err != nil {
			ch <- done{err: err}
			return
		}
		defer fw.Close()
		res, err := s.api(fw)
		ch <- done{res, err}
	}()
	visible, perr := awaitVerdict(dp, s.probe, s.pass, start, func() bool { return len(ch) > 0 })
	d := <-ch
	if d.err != nil {
		return d.err
	}
	if perr != nil {
		return perr
	}
	if !d.res.Delta {
		return fmt.Errorf("the edit did not go through the delta stage")
	}
	op.APIms = append(op.APIms, visible)
	op.InForceMS = append(op.InForceMS, float64(d.res.InForce.Microseconds())/1000)
	op.DeltaEntries, op.DeltaDeleted = d.res.DeltaEntries, d.res.DeltaDeleted
	t0 := time.Now()
	fw, err := firewall.Open(paths)
	if err != nil {
		return err
	}
	defer fw.Close()
	if _, err := fw.Rebuild(); err != nil {
		return err
	}
	op.RebuildMS = append(op.RebuildMS, msSince(t0))
	return checkVerdict(dp, s.probe, s.pass, "after the rebuild")
}

// editCLI makes edit s with the binary (--no-rebuild), times it until
// visible, then rebuilds with it.
func editCLI(bin string, paths firewall.Paths, dp *datapath.Datapath, s editStep, op *EditOp) error {
	args := append([]string{"--pin-dir", paths.PinDir, "--state-dir", paths.StateDir}, s.cli...)
	args = append(args[:5], append([]string{"--no-rebuild"}, args[5:]...)...)
	cmd := exec.Command(bin, args...)
	out := &limitedBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	ch := make(chan error, 1)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { ch <- cmd.Wait() }()
	visible, perr := awaitVerdict(dp, s.probe, s.pass, start, func() bool { return len(ch) > 0 })
	if err := <-ch; err != nil {
		return fmt.Errorf("xdpfw %v: %w\n%s", args, err, out)
	}
	if perr != nil {
		return perr
	}
	op.CLIms = append(op.CLIms, visible)
	rb := exec.Command(bin, "--pin-dir", paths.PinDir, "--state-dir", paths.StateDir, "rebuild")
	if b, err := rb.CombinedOutput(); err != nil {
		return fmt.Errorf("xdpfw rebuild: %w\n%s", err, b)
	}
	return checkVerdict(dp, s.probe, s.pass, "after xdpfw rebuild")
}

// awaitVerdict runs probe through the program until it passes (pass) or
// not, and returns the ms since start. It gives up when the edit has
// finished without the probe getting the new verdict, or after 10 s.
func awaitVerdict(dp *datapath.Datapath, probe []byte, pass bool, start time.Time, finished func() bool) (float64, error) {
	deadline := start.Add(10 * time.Second)
	for {
		ended := finished() // before the probe: an edit in force by then shows in it
		tr, err := dp.Trace(probe, 0, datapath.NoCTState)
		if err != nil {
			return 0, err
		}
		if (tr.XDPAction == datapath.XDPPass) == pass {
			return msSince(start), nil
		}
		if ended {
			return 0, errors.New("the edit finished but the probe did not get the new verdict")
		}
		if time.Now().After(deadline) {
			return 0, errors.New("the probe never got the new verdict")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func checkVerdict(dp *datapath.Datapath, probe []byte, pass bool, when string) error {
	tr, err := dp.Trace(probe, 0, datapath.NoCTState)
	if err != nil {
		return err
	}
	if (tr.XDPAction == datapath.XDPPass) != pass {
		return fmt.Errorf("%s: the probe's verdict went back", when)
	}
	return nil
}

// limitedBuffer keeps the first max bytes written.
type limitedBuffer struct {
	b   []byte
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }

// WriteEditTable prints the single-edit benchmark.
func WriteEditTable(w io.Writer, r *EditResult) {
	fmt.Fprintf(w, "%d rules (IPv4), loaded in %.0f ms; visible: from the start of the edit until a packet run through\n", r.Rules, r.LoadMS)
	fmt.Fprintln(w, "the program (BPF_PROG_TEST_RUN, polled) gets the new verdict; median (max) over the rounds, in ms")
	fmt.Fprintf(w, "%-30s %15s %9s %15s %10s %6s\n", "edit", "api_visible", "in_force", "cli_visible", "rebuild", "delta")
	for _, op := range r.Ops {
		cli := "-"
		if len(op.CLIms) > 0 {
			cli = fmt.Sprintf("%.1f (%.1f)", median(op.CLIms), slicesMax(op.CLIms))
		}
		fmt.Fprintf(w, "%-30s %15s %9.1f %15s %10.0f %3d/%-2d\n", op.Name, fmt.Sprintf("%.1f (%.1f)", median(op.APIms), slicesMax(op.APIms)),
			median(op.InForceMS), cli, median(op.RebuildMS), op.DeltaEntries, op.DeltaDeleted)
	}
	fmt.Fprintln(w, "api_visible: from firewall.Open (reads the state) in a goroutine; in_force: as the edit reports it (from the")
	fmt.Fprintln(w, "edit call to the switch); cli_visible: from starting `xdpfw ... --no-rebuild` (process start included);")
	fmt.Fprintln(w, "rebuild: firewall.Open + Rebuild (folds the edit, clears the delta stage); delta: entries/deleted rules in it")
}

func slicesMax(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
