package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// stackFlavour is a firewall of the kernel's network stack (netfilter),
// driven through its own tools in the DUT's namespace: iptables with either
// back end, and nftables written two ways.
type stackFlavour struct {
	dut   string
	tools []string // binaries it needs
	// load puts a rule set of n rules of shape s in force, replacing the
	// flavour's own (spread: every rule counts, where it would not
	// otherwise).
	load func(s ruleShape, n int, spread bool) stackCmd
	// empty removes the flavour's rules (it may keep empty chains).
	empty stackCmd
	// counter prints the intended rule's counter, which parse reads;
	// with spread traffic, every rule's, which parse sums.
	counter func(s ruleShape) stackCmd
	parse   func(s ruleShape, out []byte, spread bool) (uint64, error)
}

// stackCmd is one run of a tool: its arguments and standard input.
type stackCmd struct {
	bin   string
	args  []string
	stdin string
}

// The nftables DUTs keep their rules in this table, replaced as a whole
// (nft -f applies a file as one transaction).
const nftTable = "xdpfw_bench"

// emptyFilter is a filter table with no rules and ACCEPT policies.
const emptyFilter = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"

func iptablesFlavour(dut, prefix string) stackFlavour {
	restore, save := prefix+"-restore", prefix+"-save"
	return stackFlavour{
		dut:   dut,
		tools: []string{restore, save},
		load: func(s ruleShape, n int, _ bool) stackCmd {
			return stackCmd{restore, []string{"-w", "10"}, s.iptables(n)}
		},
		empty:   stackCmd{restore, []string{"-w", "10"}, emptyFilter},
		counter: func(ruleShape) stackCmd { return stackCmd{bin: save, args: []string{"-c", "-t", "filter"}} },
		parse:   ruleShape.counted,
	}
}

func nftFlavour(dut string, ruleset func(s ruleShape, n int, spread bool) string) stackFlavour {
	return stackFlavour{
		dut:   dut,
		tools: []string{"nft"},
		load: func(s ruleShape, n int, spread bool) stackCmd {
			return stackCmd{"nft", []string{"-f", "-"}, nftReplace + ruleset(s, n, spread)}
		},
		empty: stackCmd{"nft", []string{"-f", "-"}, nftReplace},
		counter: func(s ruleShape) stackCmd {
			return stackCmd{bin: "nft", args: []string{"list", "chain", "ip", nftTable, s.nftChain()}}
		},
		parse: func(_ ruleShape, out []byte, all bool) (uint64, error) { return nftCounter(out, all) },
	}
}

var stackFlavours = map[string]stackFlavour{
	DUTIptablesNFT:    iptablesFlavour(DUTIptablesNFT, "iptables-nft"),
	DUTIptablesLegacy: iptablesFlavour(DUTIptablesLegacy, "iptables-legacy"),
	DUTNftLinear:      nftFlavour(DUTNftLinear, ruleShape.nftLinear),
	DUTNftSet:         nftFlavour(DUTNftSet, func(s ruleShape, n int, _ bool) string { return s.nftSet(n) }),
}

// nftReplace makes sure the table exists, then deletes it: what follows in
// the same file (the same transaction) starts from nothing.
var nftReplace = fmt.Sprintf("table ip %[1]s\ndelete table ip %[1]s\n", nftTable)

// NftLinearRuleSet is MacroRuleSet written as native nftables rules, one
// per iptables rule in the same order; only the last has a counter (each
// of iptables-nft's rules has one).
func NftLinearRuleSet(n int) string { return macroShape.nftLinear(n, false) }

// nftLinearRuleSet is NftLinearRuleSet, with a counter on every rule if
// every (spread traffic hits them all).
func nftLinearRuleSet(n int, every bool) string { return macroShape.nftLinear(n, every) }

// nftChain is the nftables chain of the shape's rules (named as its hook).
func (s ruleShape) nftChain() string { return strings.ToLower(s.chain) }

// nftHead opens the table and the shape's base chain, with the answers'
// rule if there is one.
func (s ruleShape) nftHead(b *strings.Builder) {
	fmt.Fprintf(b, "\tchain %[1]s {\n\t\ttype filter hook %[1]s priority filter; policy %[2]s;\n", s.nftChain(), strings.ToLower(s.policy))
	if s.answersIf != "" {
		fmt.Fprintf(b, "\t\tiifname %q ct state established accept\n", s.answersIf)
	}
}

// nftLinear is the shape's rule set of n rules written natively, one nft
// rule per iptables rule; a counter on the last only, or on every one.
func (s ruleShape) nftLinear(n int, every bool) string {
	var b strings.Builder
	verdict := strings.ToLower(s.target)
	fmt.Fprintf(&b, "table ip %s {\n", nftTable)
	s.nftHead(&b)
	if every {
		writeNonMatching(&b, n, "\t\tip saddr %v udp dport %d counter "+verdict+"\n")
	} else {
		writeNonMatching(&b, n, "\t\tip saddr %v udp dport %d "+verdict+"\n")
	}
	fmt.Fprintf(&b, "\t\tip saddr %v udp dport %d counter %s\n\t}\n}\n", TrafficSrc, TrafficDPort, verdict)
	return b.String()
}

// NftSetRuleSet is MacroRuleSet the way the nftables documentation advises
// for many rules of one shape: a single rule that looks the packet's
// (source address, UDP destination port) up in a concatenated interval set
// holding every rule's pair. All of the benchmark's rules drop, so one set
// says everything they say.
func NftSetRuleSet(n int) string { return macroShape.nftSet(n) }

// nftSet is the shape's rule set of n rules as one rule and a set.
func (s ruleShape) nftSet(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n\tset blocked {\n\t\ttype ipv4_addr . inet_service\n\t\tflags interval\n\t\telements = {\n", nftTable)
	writeNonMatching(&b, n, "\t\t\t%v . %d,\n")
	fmt.Fprintf(&b, "\t\t\t%v . %d\n\t\t}\n\t}\n", TrafficSrc, TrafficDPort)
	s.nftHead(&b)
	fmt.Fprintf(&b, "\t\tip saddr . udp dport @blocked counter %s\n\t}\n}\n", strings.ToLower(s.target))
	return b.String()
}

// stackTimeout bounds one run of a tool (10,000 rules take about half a
// second to restore with nf_tables).
const stackTimeout = 2 * time.Minute

// stackState tracks the rule count each flavour has loaded in the DUT's
// namespace: all of them hook the same packets, so only the one being
// measured may hold rules.
type stackState struct {
	loaded map[string]int // flavour -> rule count in force (0: empty)
}

// stackDUT runs the rule set in the DUT's network stack; its XDP program
// (bench_pass) counts and passes every frame up to it.
type stackDUT struct {
	fl    stackFlavour
	topo  *Topology
	link  *dutLink
	progs *benchProgs
	state *stackState
	ctx   context.Context // the benchmark's: Ctrl-C stops a restore
	// spread: the traffic walks the rule set; every rule counts.
	spread bool
	shape  ruleShape
}

// newStackDUT checks that the flavour's tools exist and work in the DUT's
// namespace (emptying its rules), or says why not.
func newStackDUT(ctx context.Context, name string, t *Topology, l *dutLink, p *benchProgs, st *stackState, shape ruleShape, spread bool) (*stackDUT, error) {
	fl, ok := stackFlavours[name]
	if !ok {
		return nil, fmt.Errorf("unknown netfilter DUT %q", name)
	}
	if err := fl.installed(); err != nil {
		return nil, err
	}
	d := &stackDUT{fl: fl, topo: t, link: l, progs: p, state: st, ctx: ctx, spread: spread, shape: shape}
	if _, err := d.run(ctx, fl.empty); err != nil {
		return nil, err
	}
	return d, nil
}

func (fl stackFlavour) installed() error {
	for _, bin := range fl.tools {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s is not installed", bin)
		}
	}
	return nil
}

// run executes a tool inside the DUT's namespace.
func (d *stackDUT) run(ctx context.Context, c stackCmd) ([]byte, error) {
	return runIn(ctx, d.topo.DUT, c)
}

// runIn executes a tool inside ns: the child is forked from a thread that
// entered it, so it is born there.
func runIn(ctx context.Context, ns *Namespace, c stackCmd) ([]byte, error) {
	var out []byte
	err := ns.Do(func() error {
		ctx, cancel := context.WithTimeout(ctx, stackTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, c.bin, c.args...)
		cmd.Stdin = strings.NewReader(c.stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		var err error
		out, err = cmd.Output()
		if err != nil {
			return fmt.Errorf("%s %s in %s: %w: %s", c.bin, strings.Join(c.args, " "), ns.Name, err,
				strings.TrimSpace(stderr.String()))
		}
		return nil
	})
	return out, err
}

func (d *stackDUT) name() string { return d.fl.dut }

// use loads the rule set of n rules (unless loaded) after emptying the
// other flavours' rules, and passes frames to the stack.
func (d *stackDUT) use(n int) error {
	for other, k := range d.state.loaded {
		if other != d.fl.dut && k != 0 {
			if _, err := d.run(d.ctx, stackFlavours[other].empty); err != nil {
				return err
			}
			d.state.loaded[other] = 0
		}
	}
	if d.state.loaded[d.fl.dut] != n {
		if _, err := d.run(d.ctx, d.fl.load(d.shape, n, d.spread)); err != nil {
			return err
		}
		d.state.loaded[d.fl.dut] = n
	}
	return d.link.set(d.progs.objs.BenchPass)
}

// dropped is the packet counter of the intended rule.
func (d *stackDUT) dropped() (uint64, error) {
	out, err := d.run(d.ctx, d.fl.counter(d.shape))
	if err != nil {
		return 0, err
	}
	return d.fl.parse(d.shape, out, d.spread)
}

// lastRuleCounter is macroShape.counted.
func lastRuleCounter(save []byte, all bool) (uint64, error) { return macroShape.counted(save, all) }

// counted finds the shape's last rule in iptables-save -c output
// ("[PACKETS:BYTES] -A INPUT ...") and returns its packet count; with all,
// the sum of every rule's of the shape's but the answers'.
func (s ruleShape) counted(save []byte, all bool) (uint64, error) {
	last, prefix := s.last(), "-A "+s.chain+" -s "
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum uint64
	found := false
	for sc.Scan() {
		line := sc.Text()
		ctr, rule, ok := strings.Cut(line, "] ")
		if !ok || !strings.HasPrefix(ctr, "[") || !(rule == last || all && strings.HasPrefix(rule, prefix)) {
			continue
		}
		pkts, _, ok := strings.Cut(ctr[1:], ":")
		if !ok {
			return 0, fmt.Errorf("iptables-save -c: counter %q", ctr)
		}
		n, err := strconv.ParseUint(pkts, 10, 64)
		if err != nil {
			return 0, err
		}
		sum, found = sum+n, found || rule == last
	}
	if !found {
		return 0, fmt.Errorf("iptables-save -c does not list the rule %q", last)
	}
	return sum, nil
}

var nftCounterRE = regexp.MustCompile(`\bcounter packets (\d+) bytes \d+`)

// nftCounter reads the one counter of `nft list chain` output: the
// nftables rule sets count with the intended rule only; with all, the sum
// of every counter (spread traffic: every rule of nft-linear counts).
func nftCounter(list []byte, all bool) (uint64, error) {
	m := nftCounterRE.FindAllSubmatch(list, -1)
	if len(m) == 0 || len(m) > 1 && !all {
		return 0, fmt.Errorf("nft list chain shows %d counters, want the intended rule's one", len(m))
	}
	var sum uint64
	for _, c := range m {
		n, err := strconv.ParseUint(string(c[1]), 10, 64)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

func (d *stackDUT) check(delivered, dropped uint64) error {
	if dropped != delivered {
		return fmt.Errorf("the veth delivered %d packets to the stack, %s's intended rule counted %d", delivered, d.fl.dut, dropped)
	}
	return nil
}

// close empties the rules (the namespace goes away anyway).
func (d *stackDUT) close() {
	if d.state.loaded[d.fl.dut] != 0 {
		_, _ = d.run(context.Background(), d.fl.empty)
		d.state.loaded[d.fl.dut] = 0
	}
}

// AvailableDUTs are the DUTs whose tools are installed here (the XDP ones
// always are).
func AvailableDUTs() []string {
	var out []string
	for _, d := range AllDUTs {
		if d == DUTXdpfwAudit { // only when asked
			continue
		}
		if fl, ok := stackFlavours[d]; ok && fl.installed() != nil {
			continue
		}
		out = append(out, d)
	}
	return out
}
