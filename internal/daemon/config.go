// Package daemon is `xdpfw daemon`: it keeps a configuration file (and the
// rule and set files it names) in force, reloads on SIGHUP and on change of
// those files, collects expired conntrack entries, and serves metrics. It
// holds no packet-path state: the firewall lives in the kernel, pinned, and
// the daemon may crash, be killed or be upgraded while packets keep being
// filtered; started again, it adopts what is pinned.
package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// DefaultConfigPath is where the daemon reads its configuration.
const DefaultConfigPath = "/etc/xdpfw/xdpfw.yaml"

// Defaults of the configuration (deploy/xdpfw.yaml documents each).
const (
	DefaultRulesPath     = "/etc/xdpfw/rules.conf"
	DefaultMetricsListen = "127.0.0.1:9477"
	DefaultGCMin         = time.Second
	DefaultGCMax         = time.Minute
)

// Config is the daemon's configuration file, YAML.
type Config struct {
	// Interfaces to attach to, each with its attach mode.
	Interfaces []Interface `yaml:"interfaces"`
	// Rules is the rule file (iptables syntax or iptables-save output) for
	// both families; RulesIPv4 / RulesIPv6 hold rules for one family only.
	Rules     string `yaml:"rules"`
	RulesIPv4 string `yaml:"rules_ipv4"`
	RulesIPv6 string `yaml:"rules_ipv6"`
	// AllowEmpty lets the rule files say nothing (no rule, no policy, no
	// *filter section: everything accepted); otherwise such files are
	// refused like a file with errors, the rules in force staying.
	AllowEmpty bool `yaml:"allow_empty"`
	// SkipUnsupported leaves out the lines xdpfw cannot run (nat, mangle
	// and security rules, ...: rules.ParseOptions.SkipUnsupported); each
	// is logged as a warning when the rules are put in force, and by
	// --check. Otherwise such a line is an error.
	SkipUnsupported bool `yaml:"skip_unsupported"`
	// Sets are `ipset save` files; each set they name holds exactly the
	// elements they list.
	Sets      []string `yaml:"sets"`
	Malformed string   `yaml:"malformed"` // drop or accept
	MaxRules  int      `yaml:"max_rules"` // classifier size (0: the default)
	// Forward: how packets FORWARD accepts are forwarded: xdp (the
	// fast path, the default), xdp-veth or stack (docs/forward.md).
	Forward   string          `yaml:"forward"`
	Conntrack ConntrackConfig `yaml:"conntrack"`
	Reject    RejectConfig    `yaml:"reject"`
	Metrics   MetricsConfig   `yaml:"metrics"`
	Log       LogConfig       `yaml:"log"`
	// Watch reloads when the configuration or a file it names changes
	// (SIGHUP always reloads).
	Watch bool `yaml:"watch"`
	// DetachOnStop removes the firewall when the daemon stops on SIGTERM or
	// SIGINT. By default it stays in force: the daemon is not on the
	// packet path.
	DetachOnStop bool `yaml:"detach_on_stop"`
	// PriorityCPUs: the CPUs the xdpfw-priority table's BULK class is
	// handed to, as load --priority-cpus ("auto", "none", "1", "2-3").
	// A reload that changes it puts it in force with the rules, all or
	// nothing (firewall.Options.PriorityCPUs).
	PriorityCPUs string `yaml:"priority_cpus"`
	// NAT: who translates, as load --nat: kernel (the rule files' *nat
	// sections are the kernel's: refused, or skipped) or xdpfw (xdpfw
	// translates them; docs/nat.md). "": whatever is in force, and a
	// load while xdpfw translates is refused rather than turning its
	// NAT off under its connections.
	NAT string `yaml:"nat"`

	path string // the file it was read from
}

// Interface is an interface to attach to.
type Interface struct {
	Name string `yaml:"name"`
	Mode string `yaml:"mode"` // auto, native, generic, offload
}

// UnmarshalYAML takes "eth0" as well as {name: eth0, mode: native}.
func (i *Interface) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		i.Name = n.Value
		return nil
	}
	type plain Interface
	return n.Decode((*plain)(i))
}

// ConntrackConfig sizes and times connection tracking.
type ConntrackConfig struct {
	Max  int    `yaml:"max"`  // table size (0: the default)
	Full string `yaml:"full"` // drop or accept: NEW connections when full
	// TCPPickup: loose (TCP picked up mid-stream) or strict; "": the
	// default, loose.
	TCPPickup string `yaml:"tcp_pickup"`
	// KernelNAT: on (default: packets of connections the kernel's own nat
	// table translates are judged with the kernel's conntrack) or off.
	KernelNAT string            `yaml:"kernel_nat"`
	Timeouts  map[string]uint32 `yaml:"timeouts"` // seconds by name; others: the defaults
	// GC runs at an adaptive interval between these: shorter while it
	// finds much to collect, longer while it finds little.
	GCMin Duration `yaml:"gc_min_interval"`
	GCMax Duration `yaml:"gc_max_interval"`
}

// RejectConfig is REJECT's answer budget per source, and for all
// sources together.
type RejectConfig struct {
	Rate       string `yaml:"rate"` // N/s
	Burst      uint32 `yaml:"burst"`
	GlobalRate string `yaml:"global_rate"` // N/s
}

// MetricsConfig is where Prometheus metrics are served.
type MetricsConfig struct {
	// Listen is host:port ("": no metrics). Loopback by default: metrics
	// name rules and addresses.
	Listen string `yaml:"listen"`
}

// LogConfig is the daemon's own log (standard error; journald under
// systemd).
type LogConfig struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text or json
	// Events is where the events of LOG and --log rules go: none (the
	// default: `xdpfw log` reads them), journal or syslog.
	Events string `yaml:"events"`
	// SyslogAddress is where events: syslog sends them, NETWORK:ADDRESS
	// (e.g. udp:192.0.2.1:514, unixgram:/dev/log); "": the local syslog.
	SyslogAddress string `yaml:"syslog_address"`
}

// Duration is a time.Duration written as "10s", "1m".
type Duration time.Duration

// UnmarshalYAML parses a Go duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v <= 0 {
		return fmt.Errorf("line %d: %q is not a duration like 10s or 1m", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// defaults is a configuration with every default filled in.
func defaults() Config {
	return Config{
		Rules:        DefaultRulesPath,
		Malformed:    "drop",
		Forward:      string(datapath.ForwardXDP),
		PriorityCPUs: "auto",
		Conntrack:    ConntrackConfig{Full: "drop", TCPPickup: "loose", KernelNAT: "on", GCMin: Duration(DefaultGCMin), GCMax: Duration(DefaultGCMax)},
		Reject: RejectConfig{Rate: fmt.Sprintf("%d/s", compile.DefaultRejectRate), Burst: compile.DefaultRejectBurst,
			GlobalRate: fmt.Sprintf("%d/s", compile.DefaultRejectGlobalRate)},
		Metrics: MetricsConfig{Listen: DefaultMetricsListen},
		Log:     LogConfig{Level: "info", Format: "text", Events: EventsNone},
		Watch:   true,
	}
}

// LoadConfig reads and checks a configuration file. Errors name
// file:line:col. Relative paths in it are relative to its directory.
func LoadConfig(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	return ParseConfig(path, src)
}

// ParseConfig is LoadConfig of src read from path.
func ParseConfig(path string, src []byte) (*Config, error) {
	c := defaults()
	c.path = path
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(path, err)
	}
	var root yaml.Node
	_ = yaml.Unmarshal(src, &root)
	if err := c.check(&root); err != nil {
		return nil, err
	}
	return &c, nil
}

// lineRE finds yaml.v3's "line N: " in its messages.
var lineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlError restates yaml.v3's errors as file:line: message, one per line.
func yamlError(path string, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		if g := lineRE.FindStringSubmatch(m); g != nil {
			out[i] = fmt.Sprintf("%s:%s: %s", path, g[1], g[2])
		} else {
			out[i] = fmt.Sprintf("%s: %s", path, strings.TrimPrefix(m, "yaml: "))
		}
	}
	return errors.New(strings.Join(out, "\n"))
}

// check validates the values; errors point at the key's value.
func (c *Config) check(root *yaml.Node) error {
	var errs []string
	bad := func(msg string, keys ...string) {
		errs = append(errs, fmt.Sprintf("%s: %s: %s", position(c.path, root, keys), strings.Join(keys, "."), msg))
	}
	if len(c.Interfaces) == 0 {
		bad("at least one interface is needed", "interfaces")
	}
	seen := map[string]bool{}
	for i, ifc := range c.Interfaces {
		k := []string{"interfaces", strconv.Itoa(i)}
		if ifc.Name == "" {
			bad("no name", k...)
		}
		if seen[ifc.Name] {
			bad(fmt.Sprintf("%s is named twice", ifc.Name), k...)
		}
		seen[ifc.Name] = true
		if _, err := datapath.ParseMode(ifc.Mode); err != nil && ifc.Mode != "" {
			bad(err.Error(), append(k, "mode")...)
		}
	}
	if c.Rules == "" && c.RulesIPv4 == "" && c.RulesIPv6 == "" {
		bad("no rule file", "rules")
	}
	if c.Malformed != "drop" && c.Malformed != "accept" {
		bad(fmt.Sprintf("%q: want drop or accept", c.Malformed), "malformed")
	}
	if c.PriorityCPUs != "" && c.PriorityCPUs != "auto" {
		if _, err := datapath.ParseCPUList(c.PriorityCPUs); err != nil {
			bad(err.Error(), "priority_cpus")
		}
	}
	if c.Forward != "" {
		if _, err := datapath.ParseForwardMode(c.Forward); err != nil {
			bad(err.Error(), "forward")
		}
	}
	if c.MaxRules < 0 || c.MaxRules > datapath.MaxEntries {
		bad(fmt.Sprintf("%d: want 1 to %d (0: the default)", c.MaxRules, datapath.MaxEntries), "max_rules")
	}
	if c.Conntrack.Max < 0 || c.Conntrack.Max > datapath.MaxConntrack {
		bad(fmt.Sprintf("%d: want 1 to %d (0: the default)", c.Conntrack.Max, datapath.MaxConntrack), "conntrack", "max")
	}
	if c.Conntrack.Full != "drop" && c.Conntrack.Full != "accept" {
		bad(fmt.Sprintf("%q: want drop or accept", c.Conntrack.Full), "conntrack", "full")
	}
	if p := c.Conntrack.TCPPickup; p != "" && p != "loose" && p != "strict" {
		bad(fmt.Sprintf("%q: want loose or strict", p), "conntrack", "tcp_pickup")
	}
	if n := c.NAT; n != "" && n != firewall.NATKernel && n != firewall.NATXdpfw {
		bad(fmt.Sprintf("%q: want kernel or xdpfw", n), "nat")
	}
	if k := c.Conntrack.KernelNAT; k != "" && k != "on" && k != "off" {
		bad(fmt.Sprintf("%q: want on or off", k), "conntrack", "kernel_nat")
	}
	if _, err := c.timeouts(); err != nil {
		bad(err.Error(), "conntrack", "timeouts")
	}
	if c.Conntrack.GCMin > c.Conntrack.GCMax {
		bad(fmt.Sprintf("longer than gc_max_interval (%s)", time.Duration(c.Conntrack.GCMax)), "conntrack", "gc_min_interval")
	}
	if _, err := firewall.ParseRejectRate(c.Reject.Rate); err != nil {
		bad(err.Error(), "reject", "rate")
	}
	if _, err := firewall.ParseRejectRate(c.Reject.GlobalRate); err != nil {
		bad(err.Error(), "reject", "global_rate")
	}
	if c.Reject.Burst < 1 || c.Reject.Burst > firewall.MaxRejectRate {
		bad(fmt.Sprintf("%d: want 1 to %d", c.Reject.Burst, firewall.MaxRejectRate), "reject", "burst")
	}
	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			bad(fmt.Sprintf("%q: want host:port (\"\" for no metrics)", c.Metrics.Listen), "metrics", "listen")
		}
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		bad(err.Error(), "log", "level")
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad(fmt.Sprintf("%q: want text or json", c.Log.Format), "log", "format")
	}
	if c.Log.SyslogAddress != "" {
		if n, a, ok := strings.Cut(c.Log.SyslogAddress, ":"); !ok || a == "" || !slices.Contains([]string{"udp", "tcp", "unix", "unixgram"}, n) {
			bad(fmt.Sprintf("%q: want NETWORK:ADDRESS with NETWORK udp, tcp, unix or unixgram", c.Log.SyslogAddress), "log", "syslog_address")
		}
	}
	if c.Log.Events != EventsNone && c.Log.Events != EventsJournal && c.Log.Events != EventsSyslog {
		bad(fmt.Sprintf("%q: want none, journal or syslog", c.Log.Events), "log", "events")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// position is file:line:col of the value at keys (map keys or sequence
// indices) in the document, or of the deepest part of it that exists.
func position(path string, root *yaml.Node, keys []string) string {
	n := root
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line, col := 1, 1
	if n != nil && n.Line > 0 {
		line, col = n.Line, n.Column
	}
walk:
	for _, k := range keys {
		if n == nil {
			break
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					n = n.Content[i+1]
					line, col = n.Line, n.Column
					continue walk
				}
			}
			break walk
		case yaml.SequenceNode:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(n.Content) {
				break walk
			}
			n = n.Content[i]
			line, col = n.Line, n.Column
		default:
			break walk
		}
	}
	return fmt.Sprintf("%s:%d:%d", path, line, col)
}

// timeouts are the conntrack timeouts the configuration sets.
func (c *Config) timeouts() (conntrack.Timeouts, error) {
	specs := make([]string, 0, len(c.Conntrack.Timeouts))
	for name, s := range c.Conntrack.Timeouts {
		specs = append(specs, fmt.Sprintf("%s=%d", name, s))
	}
	return conntrack.ParseTimeouts(specs)
}

// abs makes a path named in the configuration absolute, relative to the
// configuration's directory.
func (c *Config) abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(c.path), p)
}

// Files are the files the configuration names (for watching), absolute.
func (c *Config) Files() []string {
	out := []string{c.abs(c.path)}
	for _, p := range append([]string{c.Rules, c.RulesIPv4, c.RulesIPv6}, c.Sets...) {
		if p != "" {
			out = append(out, c.abs(p))
		}
	}
	return out
}

// desired is the firewall the configuration asks for, from its rule files.
func (c *Config) desired() (firewall.Desired, error) {
	d := firewall.Desired{}
	for _, i := range c.Interfaces {
		m, _ := datapath.ParseMode(i.Mode)
		if i.Mode == "" {
			m = datapath.ModeAuto
		}
		d.Interfaces = append(d.Interfaces, firewall.IfaceMode{Name: i.Name, Mode: m})
	}
	t, _ := c.timeouts() // checked
	rate, _ := firewall.ParseRejectRate(c.Reject.Rate)
	global, _ := firewall.ParseRejectRate(c.Reject.GlobalRate)
	d.Options = firewall.Options{Malformed: c.Malformed, MaxRules: c.MaxRules, CTMax: c.Conntrack.Max,
		CTTimeouts: t, CTTimeoutsSet: true, CTFull: c.Conntrack.Full, RejectRate: rate, RejectBurst: c.Reject.Burst, AllowEmpty: c.AllowEmpty,
		RejectGlobalRate: global, CTTCPPickup: c.Conntrack.TCPPickup, Forward: c.Forward, CTKernelNAT: c.Conntrack.KernelNAT,
		PriorityCPUs: c.PriorityCPUs, NAT: c.NAT}
	rs, err := rules.ReadFiles(rules.Sources{File: c.abs(c.Rules), IPv4File: c.abs(c.RulesIPv4), IPv6File: c.abs(c.RulesIPv6),
		SkipUnsupported: c.SkipUnsupported, NAT: c.NAT == firewall.NATXdpfw})
	if err != nil {
		return d, err
	}
	d.Rules = rs
	return d, nil
}
