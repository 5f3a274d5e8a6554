// Package cli holds the xdpfw commands, one file per command.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// Version is set at build time (-ldflags "-X .../cli.Version=...").
var Version = "dev"

// usageError makes the process exit with status 2 (bad invocation or rule file).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

type env struct {
	paths  firewall.Paths
	stdout io.Writer
	stderr io.Writer
}

// Main runs the CLI and returns the exit status: 0 ok, 1 failure, 2 bad
// usage or a rule file with errors (nothing was changed).
func Main(args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "xdpfw: %v\n", err)
	return exitCode(err)
}

// exitCode is the exit status of a command that failed with err: 2 for
// bad usage or a rule file with errors (nothing was changed), else 1.
func exitCode(err error) int {
	var ue usageError
	var el rules.ErrorList
	var re *rules.Error
	var ie *firewall.InvalidError
	var rl refusedLines
	if errors.As(err, &ue) || errors.As(err, &el) || errors.As(err, &re) || errors.As(err, &ie) || errors.As(err, &rl) {
		return 2
	}
	return 1
}

// usageErrors makes every error of cobra's own checks (an unknown flag or
// command, a bad flag value, a wrong number of arguments) a usageError,
// in cmd and its subcommands. A command made of subcommands shows its
// help, or refuses an unknown one ("xdpfw nosuch").
func usageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{errors.New(clipWords(err.Error()))} })
	if cmd.HasSubCommands() && !cmd.Runnable() {
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(c *cobra.Command, a []string) error {
			if len(a) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q (see %s --help)", rules.Clip(a[0]), c.CommandPath(), c.CommandPath())}
			}
			return c.Help()
		}
	}
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, c := range cmd.Commands() {
		usageErrors(c)
	}
}

// clipWords shortens every word of a message longer than a token an
// error may quote (rules.Clip): pflag's errors quote the bad value whole.
func clipWords(msg string) string {
	var b strings.Builder
	for len(msg) > 0 {
		i := strings.IndexAny(msg, " \t\n")
		if i < 0 {
			i = len(msg)
		}
		b.WriteString(rules.Clip(msg[:i]))
		if i < len(msg) {
			b.WriteByte(msg[i])
			i++
		}
		msg = msg[i:]
	}
	return b.String()
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "xdpfw",
		Short: "A stateful firewall in XDP/eBPF with iptables syntax",
		Long: `xdpfw filters packets in XDP, at the earliest point they reach a host, with
rules written in iptables syntax (or loaded from iptables-save output).

  xdpfw load -i eth0 rules.conf     attach and load rules; the firewall keeps running
  iptables-save | xdpfw import --ipv4-file -    what xdpfw makes of each line
  xdpfw list                        rules in force with packet/byte counters
  xdpfw stats / xdpfw top           every counter / live rates (metrics serve: Prometheus)
  xdpfw add INPUT -p tcp --dport 22 -j ACCEPT
  xdpfw trace -p tcp --dst 10.0.0.1 --dport 22   what would the loaded rules do?
  xdpfw log --follow                what -j LOG and --log rules log
  xdpfw set create blk hash:net     a named set for -m set --match-set blk src
  xdpfw set add blk --file blk.txt  fill it (no reload, no traffic disturbed)
  xdpfw detach --all                remove it again

The firewall lives in the kernel, pinned under --pin-dir; the rule set in
force is recorded under --state-dir. Every change compiles a new table and
swaps it in atomically: packets see the old rules or the new, never a mix.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetVersionTemplate(fmt.Sprintf("xdpfw {{.Version}} (BPF program %s, %s)\n", datapath.ProgramVersion(), runtime.Version()))
	root.PersistentFlags().StringVar(&e.paths.PinDir, "pin-dir", envOr("XDPFW_PIN_DIR", datapath.DefaultPinDir),
		"bpffs directory holding the pinned program, maps and links (env XDPFW_PIN_DIR)")
	root.PersistentFlags().StringVar(&e.paths.StateDir, "state-dir", envOr("XDPFW_STATE_DIR", firewall.DefaultStateDir),
		"directory recording the rule set in force (env XDPFW_STATE_DIR)")
	var wait float64
	root.PersistentFlags().Float64Var(&wait, "wait", -1,
		"how many seconds to wait for another xdpfw's change to finish (0: fail at once; default: as long as it takes, "+
			"saying after a second whom it waits for)")
	root.PersistentPreRun = func(*cobra.Command, []string) { e.setWait(wait) }
	root.AddCommand(newLoad(e), newApply(e), newImport(e), newAdd(e), newInsert(e), newReplace(e), newDelete(e), newRebuild(e),
		newList(e), newAudit(e), newFlush(e), newPolicy(e), newChain(e), newDetach(e), newStatus(e), newStats(e), newTop(e), newMetrics(e),
		newTrace(e), newLog(e), newConntrack(e), newSet(e), newBench(e), newDaemon(e), newMan(e))
	usageErrors(root)
	return root
}

// setWait sets how long a change waits for the lock (--wait: seconds,
// 0 not at all, < 0 as long as it takes) and how it says so.
func (e *env) setWait(wait float64) {
	switch {
	case wait == 0:
		e.paths.LockWait = firewall.NoWait
	case wait > 0:
		e.paths.LockWait = time.Duration(wait * float64(time.Second))
	default:
		e.paths.LockWait = 0
	}
	e.paths.LockWaiting = func(msg string) { fmt.Fprintf(e.stderr, "xdpfw: %s\n", msg) }
}

func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// open opens the firewall in force.
func (e *env) open() (*firewall.Firewall, error) {
	return firewall.Open(e.paths)
}

// openRead opens the firewall in force for reading only, without waiting
// for a change in progress (firewall.OpenReadOnly).
func (e *env) openRead() (*firewall.Firewall, error) {
	return firewall.OpenReadOnly(e.paths)
}

func (e *env) printResult(res *firewall.Result) {
	for _, u := range res.Upgraded {
		fmt.Fprintf(e.stderr, "upgraded: %s\n", u)
	}
	e.printWarnings(res.Warnings)
}

// printWarnings prints ws on stderr, one "warning: " line each.
func (e *env) printWarnings(ws []string) {
	for _, w := range ws {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
}

// printGeneration reports a change put in force, with the shape of the
// classifier it compiled to.
func (e *env) printGeneration(res *firewall.Result) {
	fmt.Fprintf(e.stdout, "generation %d: %d rules in force (%d classifier entries, %d trees, depth <= %d, <= %d candidates per leaf)\n",
		res.Generation, res.Rules, res.Entries, res.Tree.Trees, res.Tree.MaxDepth, res.Tree.MaxLeaf)
}
