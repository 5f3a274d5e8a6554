package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// iptablesFlavour is one iptables back end, driven through its own
// restore/save tools (Debian installs both; `iptables` is nft by default).
type iptablesFlavour struct {
	dut     string // DUTIptablesNFT or DUTIptablesLegacy
	restore string // e.g. iptables-nft-restore
	save    string // e.g. iptables-nft-save
}

var iptablesFlavours = map[string]iptablesFlavour{
	DUTIptablesNFT:    {DUTIptablesNFT, "iptables-nft-restore", "iptables-nft-save"},
	DUTIptablesLegacy: {DUTIptablesLegacy, "iptables-legacy-restore", "iptables-legacy-save"},
}

// iptablesTimeout bounds one restore or save (10,000 rules take about half
// a second with nf_tables).
const iptablesTimeout = 2 * time.Minute

// emptyFilter is a filter table with no rules and ACCEPT policies.
const emptyFilter = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"

// iptablesState tracks the rule count each flavour has loaded in the DUT's
// namespace: both flavours hook the same packets, so only the one being
// measured may hold rules.
type iptablesState struct {
	loaded map[string]int // flavour -> rule count in force (0: empty)
}

// iptablesDUT runs the rule set in the DUT's network stack; its XDP
// program (bench_pass) counts and passes every frame up to it.
type iptablesDUT struct {
	fl    iptablesFlavour
	topo  *Topology
	link  *dutLink
	progs *benchProgs
	state *iptablesState
	ctx   context.Context // the benchmark's: Ctrl-C stops a restore
	cur   int
}

// newIptablesDUT checks that the flavour's tools exist and work in the
// DUT's namespace (an empty filter table), or says why not.
func newIptablesDUT(ctx context.Context, name string, t *Topology, l *dutLink, p *benchProgs, st *iptablesState) (*iptablesDUT, error) {
	fl, ok := iptablesFlavours[name]
	if !ok {
		return nil, fmt.Errorf("unknown iptables flavour %q", name)
	}
	for _, bin := range []string{fl.restore, fl.save} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not installed", bin)
		}
	}
	d := &iptablesDUT{fl: fl, topo: t, link: l, progs: p, state: st, ctx: ctx}
	if _, err := d.run(ctx, fl.restore, emptyFilter, "-w", "10"); err != nil {
		return nil, err
	}
	return d, nil
}

// run executes an iptables tool inside the DUT's namespace: the child is
// forked from a thread that entered it, so it is born there.
func (d *iptablesDUT) run(ctx context.Context, bin, stdin string, args ...string) ([]byte, error) {
	var out []byte
	err := d.topo.DUT.Do(func() error {
		ctx, cancel := context.WithTimeout(ctx, iptablesTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		var err error
		out, err = cmd.Output()
		if err != nil {
			return fmt.Errorf("%s %s in %s: %w: %s", bin, strings.Join(args, " "), d.topo.DUT.Name, err,
				strings.TrimSpace(stderr.String()))
		}
		return nil
	})
	return out, err
}

func (d *iptablesDUT) name() string { return d.fl.dut }

// use loads the rule set of n rules (unless loaded) after emptying the
// other flavour's table, and passes frames to the stack.
func (d *iptablesDUT) use(n int) error {
	ctx := d.ctx
	for other, k := range d.state.loaded {
		if other != d.fl.dut && k != 0 {
			o := iptablesFlavours[other]
			if _, err := d.run(ctx, o.restore, emptyFilter, "-w", "10"); err != nil {
				return err
			}
			d.state.loaded[other] = 0
		}
	}
	if d.state.loaded[d.fl.dut] != n {
		if _, err := d.run(ctx, d.fl.restore, MacroRuleSet(n), "-w", "10"); err != nil {
			return err
		}
		d.state.loaded[d.fl.dut] = n
	}
	d.cur = n
	return d.link.set(d.progs.objs.BenchPass)
}

// dropped is the packet counter of the last rule, from `iptables-save -c`.
func (d *iptablesDUT) dropped() (uint64, error) {
	out, err := d.run(d.ctx, d.fl.save, "", "-c", "-t", "filter")
	if err != nil {
		return 0, err
	}
	return lastRuleCounter(out)
}

// lastRuleCounter finds the benchmark's last rule in iptables-save -c
// output ("[PACKETS:BYTES] -A INPUT ...") and returns its packet count.
func lastRuleCounter(save []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		ctr, rule, ok := strings.Cut(line, "] ")
		if !ok || rule != lastRule || !strings.HasPrefix(ctr, "[") {
			continue
		}
		pkts, _, ok := strings.Cut(ctr[1:], ":")
		if !ok {
			break
		}
		return strconv.ParseUint(pkts, 10, 64)
	}
	return 0, fmt.Errorf("iptables-save -c does not list the rule %q", lastRule)
}

func (d *iptablesDUT) check(delivered, dropped uint64) error {
	if dropped != delivered {
		return fmt.Errorf("the veth delivered %d packets to the stack, %s's last rule counted %d", delivered, d.fl.dut, dropped)
	}
	return nil
}

// close empties the table (the namespace goes away anyway).
func (d *iptablesDUT) close() {
	if d.state.loaded[d.fl.dut] != 0 {
		_, _ = d.run(context.Background(), d.fl.restore, emptyFilter, "-w", "10")
		d.state.loaded[d.fl.dut] = 0
	}
}

// AvailableDUTs are the DUTs whose tools are installed here (the XDP ones
// always are).
func AvailableDUTs() []string {
	var out []string
	for _, d := range AllDUTs {
		if fl, ok := iptablesFlavours[d]; ok {
			if _, err := exec.LookPath(fl.restore); err != nil {
				continue
			}
		}
		out = append(out, d)
	}
	return out
}
