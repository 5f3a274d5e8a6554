// Package bench measures xdpfw: `xdpfw bench micro` runs the loaded
// program with BPF_PROG_TEST_RUN on rule sets of growing size.
package bench

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"time"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// MicroOptions configure a micro benchmark.
type MicroOptions struct {
	Sizes    []int         // rule counts
	Rounds   int           // interleaved rounds (each size once per round)
	Repeat   int           // BPF_PROG_TEST_RUN repetitions per measurement
	Families []string      // "ipv4", "ipv6"
	Progress io.Writer     // progress lines (nil: none)
	Budget   time.Duration // stop adding rounds after this long (0: none)
	// Delta is the number of rules in the delta stage for the second set
	// of measurements (0: none): rules no probe matches, inserted first,
	// so every probe checks them all.
	Delta int
	// RuleSet names the rule set (RuleSets; "": RuleSetDisjoint).
	RuleSet string
	// Spread is the number of frames (K) aimed at different rules for
	// the spread measurement, at most the rule count (0: none).
	Spread int
	// LatencySamples are latency sampling settings (1 in N) whose cost
	// each round measures too, on the last-rule probe, beside sampling
	// off (docs/realtime.md).
	LatencySamples []uint32
	// Audit: each round also measures the probes (and the spread frames)
	// with the rule set audited beside itself (docs/audit.md): the
	// candidate decides as the rules in force, so every probe is
	// classified twice and no event is sent.
	Audit bool
	// Cold is how many of the Spread frames to measure cache-cold after
	// the rounds, each run alone after evicting the caches (0: none;
	// cold.go, docs/realtime.md).
	Cold int
}

// MicroResult is one rule count and family.
type MicroResult struct {
	Family    string  `json:"family"`
	RuleSet   string  `json:"ruleset"`
	Rules     int     `json:"rules"`
	Entries   int     `json:"entries"`
	CompileMS float64 `json:"compile_ms"` // rules -> tables (Go)
	InstallMS float64 `json:"install_ms"` // tables -> kernel, incl. the grace period
	KernelKiB int64   `json:"kernel_kib"` // classifier tables, both generations
	// MaxRules is the --max-rules the tables needed (the smallest power
	// of two times the default that holds them); TableBytes what one
	// generation of them occupies in the kernel maps.
	MaxRules     int       `json:"max_rules"`
	TableBytes   int64     `json:"table_bytes"`
	BytesPerRule float64   `json:"bytes_per_rule"`
	Tree         TreeShape `json:"tree"`
	LastNS       []float64 `json:"last_rule_ns"`  // per round: only the last rule matches
	MissNS       []float64 `json:"no_match_ns"`   // per round: no rule matches (policy)
	FirstNS      []float64 `json:"first_rule_ns"` // per round: the first rule matches
	LastMed      float64   `json:"last_rule_ns_median"`
	MissMed      float64   `json:"no_match_ns_median"`
	FirstMed     float64   `json:"first_rule_ns_median"`
	// MissVsFirst is the median per-round ratio of no-match to first-rule.
	MissVsFirst float64 `json:"no_match_vs_first_rule"`
	// Ratios to the smallest size of the same family, the median of the
	// per-round ratios (each round measures all sizes side by side).
	LastRatio float64 `json:"last_rule_ratio"`
	MissRatio float64 `json:"no_match_ratio"`
	// With MicroOptions.Delta rules in the delta stage, measured in the
	// same rounds: per round, and the median per-round ratio to the same
	// probe with the delta stage empty.
	DeltaRules   int       `json:"delta_rules,omitempty"`
	DeltaLastNS  []float64 `json:"delta_last_rule_ns,omitempty"`
	DeltaMissNS  []float64 `json:"delta_no_match_ns,omitempty"`
	DeltaLastMed float64   `json:"delta_last_rule_ns_median,omitempty"`
	DeltaMissMed float64   `json:"delta_no_match_ns_median,omitempty"`
	DeltaLastX   float64   `json:"delta_last_rule_vs_empty,omitempty"`
	DeltaMissX   float64   `json:"delta_no_match_vs_empty,omitempty"`
	// Spread: with MicroOptions.Spread, one frame repeated (K = 1)
	// against K frames aimed at K different rules, measured in the same
	// rounds.
	Spread *SpreadResult `json:"spread,omitempty"`
	// Latency sampling's cost (MicroOptions.LatencySamples), measured in
	// the same rounds.
	Latency []LatencyCost `json:"latency_sampling,omitempty"`
	// With MicroOptions.Audit, measured in the same rounds: the probes
	// with the audit stage in the path, and their median per-round ratio
	// to the same probes without it.
	AuditLastNS  []float64     `json:"audit_last_rule_ns,omitempty"`
	AuditMissNS  []float64     `json:"audit_no_match_ns,omitempty"`
	AuditLastMed float64       `json:"audit_last_rule_ns_median,omitempty"`
	AuditMissMed float64       `json:"audit_no_match_ns_median,omitempty"`
	AuditLastX   float64       `json:"audit_last_rule_vs_off,omitempty"`
	AuditMissX   float64       `json:"audit_no_match_vs_off,omitempty"`
	AuditSpread  *SpreadResult `json:"audit_spread,omitempty"`
	// Cold: with MicroOptions.Cold, the frames measured cache-cold.
	Cold *ColdResult `json:"cold,omitempty"`
}

// LatencyCost is the last-rule probe's cost with latency sampling 1 in
// Sample: per round, the median, and the median per-round ratio to
// sampling off (LastNS).
type LatencyCost struct {
	Sample uint32    `json:"sample"`
	LastNS []float64 `json:"last_rule_ns"`
	Med    float64   `json:"last_rule_ns_median"`
	VsOff  float64   `json:"vs_off"`
}

// TreeShape is compile.TreeStats.
type TreeShape = compile.TreeStats

// RuleSetText is the benchmark's rule set of n rules in iptables syntax:
// distinct /24 (IPv4) or /64 (IPv6) sources with a UDP port each; the last
// rule alone matches the probe packet (ProbeLast).
func RuleSetText(n int, family string) string { return rulesText(disjointRules(n, family)) }

// probes returns the packet matching only the last rule, one matching
// none, and one matching the first rule.
func probes(family string) (last, miss, first []byte) {
	mk := func(src, dst string, dport uint16) []byte {
		p := packet.Packet{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
			Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Proto: packet.ProtoUDP,
			SPort: 40000, DPort: dport, Payload: make([]byte, 18)}
		return p.Bytes()
	}
	if family == "ipv6" {
		return mk("2001:db8:ffff::7", "2001:db8::1", 53), mk("2001:db9::7", "2001:db8::1", 53),
			mk("2001:db8::7", "2001:db8::1", 1000)
	}
	return mk("192.0.2.7", "10.255.0.1", 53), mk("198.51.100.7", "10.255.0.1", 53), mk("10.0.0.7", "10.255.0.1", 1000)
}

type subject struct {
	res                 *MicroResult
	dp                  *datapath.Datapath
	last, miss, first   []byte
	lastRule, firstRule int             // the rules (indices) that decide last and first
	delta               *compile.Delta  // MicroOptions.Delta rules, nil: none
	rig                 *spreadRig      // MicroOptions.Spread, nil: none
	audit               *datapath.Audit // MicroOptions.Audit, nil: none
	auditRig            *spreadRig      // the spread frames with the audit in the path
	aims                []aim           // the spread frames
	bound               int             // the tables' compile.Work steps
}

// deltaStamp is the generation number the benchmark installs its tables
// as, so that it can put a delta stage on top.
const deltaStamp = 1

// benchDelta is the delta stage of k rules no probe matches, inserted
// before every rule of tables (so each probe checks them all), and checks
// that the probes still get their verdicts with it in force.
func benchDelta(k int, fam string, tables *compile.Tables, ids []uint32) (*compile.Delta, error) {
	chains := make([]rules.Chain, len(ids))
	o := compile.NewOverlay(tables, ids, chains)
	for i := 0; i < k; i++ {
		text := fmt.Sprintf("-A INPUT -s 203.0.113.%d -p udp --dport 53 -j DROP", i+1)
		if fam == "ipv6" {
			text = fmt.Sprintf("-A INPUT -s 2001:db8:beef::%x -p udp --dport 53 -j DROP", i+1)
		}
		rs, err := rules.Parse("delta", []byte(text), rules.ParseOptions{})
		if err != nil {
			return nil, err
		}
		id := uint32(compile.FirstRuleID + len(ids) + i)
		ents, _, err := compile.RuleEntries(&rs.Rules[0], id, compile.Names{}, nil)
		if err != nil {
			return nil, err
		}
		if err := o.Insert(1, compile.Addition{Rule: rs.Rules[0], ID: id, Entries: ents}); err != nil {
			return nil, err
		}
	}
	return o.Delta()
}

// Micro runs the benchmark in a throwaway network namespace (so the FIB
// answer is the same for every size) with a private bpffs, and removes both.
func Micro(opt MicroOptions) ([]*MicroResult, error) {
	dir, undo, err := sandbox("xdpfw-bench-")
	if err != nil {
		return nil, err
	}
	defer undo()

	var subs []*subject
	defer func() {
		for _, s := range subs {
			if s.audit != nil {
				s.audit.Close()
			}
			s.dp.Close()
			for _, r := range []*spreadRig{s.rig, s.auditRig} {
				if r != nil {
					r.Close()
				}
			}
		}
	}()
	say := sayer(opt.Progress)
	for _, fam := range opt.Families {
		for _, n := range opt.Sizes {
			res := &MicroResult{Family: fam, Rules: n, RuleSet: cmp.Or(opt.RuleSet, RuleSetDisjoint)}
			brs, err := benchRules(opt.RuleSet, n, fam)
			if err != nil {
				return nil, err
			}
			c, err := compileText(rulesText(brs), n, rules.ParseOptions{})
			if err != nil {
				return nil, err
			}
			tables, ids, lim := c.tables, c.ids, c.lim
			res.CompileMS = c.compileMS
			res.Entries, res.Tree, res.KernelKiB = len(tables.Entries), tables.Stats, lim.Bytes()>>10
			dp, err := datapath.Load(filepath.Join(dir, fmt.Sprintf("%s-%d", fam, n)), lim)
			if err != nil {
				return nil, err
			}
			s := &subject{res: res, dp: dp}
			for _, n := range opt.LatencySamples {
				res.Latency = append(res.Latency, LatencyCost{Sample: n})
			}
			subs = append(subs, s)
			t0 := time.Now()
			if err := dp.InstallStamped(tables, deltaStamp); err != nil {
				return nil, err
			}
			res.InstallMS = msSince(t0)
			res.MaxRules = lim.Entries
			res.TableBytes = dp.TableBytes(len(tables.Entries), tables.Stats.Nodes, tables.Stats.LeafSlots)
			res.BytesPerRule = float64(res.TableBytes) / float64(n)
			var aims []aim
			if res.RuleSet == RuleSetDisjoint {
				s.last, s.miss, s.first = probes(fam)
				s.lastRule = n - 1
				if n == 1 {
					s.first = s.last // the only rule is the first and the last
				}
				if opt.Spread > 0 {
					aims, res.Spread = spreadAims(brs, c, min(opt.Spread, n), fam)
				}
			} else {
				// the first and the last rule a frame can reach, and a
				// frame from and to addresses no generated rule names
				all, sr := spreadAims(brs, c, n, fam)
				if len(all) == 0 {
					return nil, fmt.Errorf("%s %d rules: no rule reachable", res.RuleSet, n)
				}
				first := slices.MinFunc(all, func(a, b aim) int { return a.rule - b.rule })
				last := slices.MaxFunc(all, func(a, b aim) int { return a.rule - b.rule })
				s.first, s.firstRule, s.last, s.lastRule = first.frame, first.rule, last.frame, last.rule
				s.miss = framePacket(netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.1"),
					packet.ProtoUDP, 40000, 53).Bytes()
				if opt.Spread > 0 {
					aims, res.Spread = all[:min(opt.Spread, len(all))], sr
					res.Spread.K, res.Spread.Walk = len(aims), walkOf(aims)
				}
			}
			if opt.Delta > 0 {
				if s.delta, err = benchDelta(opt.Delta, fam, tables, ids); err != nil {
					return nil, err
				}
				res.DeltaRules = opt.Delta
			}
			// the probes must get the verdicts the benchmark claims, with
			// and without the delta stage
			deltas := []*compile.Delta{nil}
			if s.delta != nil {
				deltas = append(deltas, s.delta)
			}
			for _, d := range deltas {
				if _, err := dp.InstallDelta(d, deltaStamp); err != nil {
					return nil, err
				}
				for _, c := range []struct {
					frame []byte
					id    uint32
				}{{s.last, ids[s.lastRule]}, {s.miss, compile.PolicyID(0, fam == "ipv6")}, {s.first, ids[s.firstRule]}} {
					tr, err := dp.Trace(c.frame, 0, datapath.NoCTState)
					if err != nil {
						return nil, err
					}
					if tr.RuleID != c.id {
						return nil, fmt.Errorf("%s %d rules (delta stage in force: %v): probe decided by rule id %d, want %d",
							fam, n, d != nil, tr.RuleID, c.id)
					}
				}
			}
			if _, err := dp.InstallDelta(nil, deltaStamp); err != nil {
				return nil, err
			}
			s.aims, s.bound = aims, tables.Stats.Work.Steps()
			if len(aims) > 0 {
				if err := checkAims(dp, aims, ids); err != nil {
					return nil, fmt.Errorf("%s %d rules: %w", fam, n, err)
				}
				if s.rig, err = newSpreadRig(aims); err != nil {
					return nil, err
				}
				if opt.Audit {
					if s.auditRig, err = newSpreadRig(aims); err != nil {
						return nil, err
					}
				}
				say("  %s %7d rules: %d spread frames, each checked to be decided by its rule (%d rules tried were unreachable)",
					fam, n, len(aims), res.Spread.Unreachable)
			}
			if opt.Audit {
				// the rule set audited beside itself; in the path only
				// while measure measures it
				if s.audit, err = dp.StartAudit(tables, compile.DefaultLogSnap, time.Second, 1); err != nil {
					return nil, err
				}
				if err := s.audit.SetInPath(false); err != nil {
					return nil, err
				}
			}
			wk := res.Tree.Work
			say("  %s %7d rules: compiled in %7.1f ms, installed in %6.1f ms, %d nodes, depth %d, leaf <= %d, %d KiB; "+
				"worst case per packet: %d trees, %d node steps, %d candidates (%d whole entry tests)",
				fam, n, res.CompileMS, res.InstallMS, res.Tree.Nodes, res.Tree.MaxDepth, res.Tree.MaxLeaf, res.KernelKiB,
				wk.Trees, wk.Levels, wk.Candidates, wk.FullTests)
		}
	}

	start := time.Now()
	for round := 0; round < opt.Rounds; round++ {
		if opt.Budget > 0 && round >= 3 && time.Since(start) > opt.Budget {
			say("  time budget reached after %d rounds", round)
			break
		}
		for _, s := range subs {
			if err := s.measure(round, opt.Repeat); err != nil {
				return nil, err
			}
		}
		say("  round %d/%d done", round+1, opt.Rounds)
	}

	if opt.Cold > 0 {
		empty, err := emptyXDP()
		if err != nil {
			return nil, err
		}
		defer empty.Close()
		for _, s := range subs {
			if len(s.aims) == 0 {
				continue
			}
			say("  %s %7d rules: %d packets cache-cold (%d frames)", s.res.Family, s.res.Rules, opt.Cold, min(opt.Cold, len(s.aims)))
			if s.res.Cold, err = measureCold(s.dp, empty, s.aims, opt.Cold, s.bound); err != nil {
				return nil, err
			}
		}
	}

	out := make([]*MicroResult, 0, len(subs))
	for _, s := range subs {
		r := s.res
		r.LastMed, r.MissMed, r.FirstMed = median(r.LastNS), median(r.MissNS), median(r.FirstNS)
		r.MissVsFirst = medianRatio(r.MissNS, r.FirstNS)
		if s.delta != nil {
			r.DeltaLastMed, r.DeltaMissMed = median(r.DeltaLastNS), median(r.DeltaMissNS)
			r.DeltaLastX, r.DeltaMissX = medianRatio(r.DeltaLastNS, r.LastNS), medianRatio(r.DeltaMissNS, r.MissNS)
		}
		if s.rig != nil {
			sr := s.rig.result()
			sr.Unreachable, sr.Walk = r.Spread.Unreachable, r.Spread.Walk
			r.Spread = &sr
		}
		for i := range r.Latency {
			l := &r.Latency[i]
			l.Med, l.VsOff = median(l.LastNS), medianRatio(l.LastNS, r.LastNS)
		}
		if s.audit != nil {
			r.AuditLastMed, r.AuditMissMed = median(r.AuditLastNS), median(r.AuditMissNS)
			r.AuditLastX, r.AuditMissX = medianRatio(r.AuditLastNS, r.LastNS), medianRatio(r.AuditMissNS, r.MissNS)
		}
		if s.auditRig != nil {
			sr := s.auditRig.result()
			r.AuditSpread = &sr
		}
		out = append(out, r)
	}
	for _, r := range out {
		for _, base := range out {
			if base.Family == r.Family && base.Rules == opt.Sizes[0] {
				r.LastRatio = medianRatio(r.LastNS, base.LastNS)
				r.MissRatio = medianRatio(r.MissNS, base.MissNS)
			}
		}
	}
	return out, nil
}

// measure runs one round of s: the three probes with the delta stage
// empty, then the last-rule and no-match probes with it in force, then the
// last-rule probe with each latency sampling (off again after).
func (s *subject) measure(round, repeat int) error {
	run := func(frame []byte, out *[]float64) error {
		_, per, err := s.dp.Program().Benchmark(frame, repeat, nil)
		if err != nil {
			return fmt.Errorf("BPF_PROG_TEST_RUN: %w", err)
		}
		*out = append(*out, float64(per.Nanoseconds()))
		return nil
	}
	r := s.res
	for i := range r.Latency {
		if err := s.dp.SetLatencySample(r.Latency[i].Sample); err != nil {
			return err
		}
		err := run(s.last, &r.Latency[i].LastNS)
		if err2 := s.dp.SetLatencySample(0); err == nil {
			err = err2
		}
		if err != nil {
			return err
		}
	}
	for _, c := range []struct {
		frame []byte
		out   *[]float64
	}{{s.last, &r.LastNS}, {s.miss, &r.MissNS}, {s.first, &r.FirstNS}} {
		if err := run(c.frame, c.out); err != nil {
			return err
		}
	}
	if s.rig != nil {
		if err := s.rig.round(round, s.dp.Program(), repeat); err != nil {
			return err
		}
	}
	if s.audit != nil {
		if err := s.measureAudit(round, repeat, run); err != nil {
			return err
		}
	}
	if s.delta == nil {
		return nil
	}
	if _, err := s.dp.InstallDelta(s.delta, deltaStamp); err != nil {
		return err
	}
	if err := run(s.last, &r.DeltaLastNS); err != nil {
		return err
	}
	if err := run(s.miss, &r.DeltaMissNS); err != nil {
		return err
	}
	_, err := s.dp.InstallDelta(nil, deltaStamp)
	return err
}

// measureAudit measures the last-rule and no-match probes, and the
// spread frames, with the audit stage in the path (out again after).
func (s *subject) measureAudit(round, repeat int, run func([]byte, *[]float64) error) error {
	if err := s.audit.SetInPath(true); err != nil {
		return err
	}
	err := run(s.last, &s.res.AuditLastNS)
	if err == nil {
		err = run(s.miss, &s.res.AuditMissNS)
	}
	if err == nil && s.auditRig != nil {
		err = s.auditRig.round(round, s.dp.Program(), repeat)
	}
	if err2 := s.audit.SetInPath(false); err == nil {
		err = err2
	}
	return err
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianRatio is the median over rounds of a[i]/b[i]: each round measured
// both side by side, so slow phases of a noisy machine cancel out.
func medianRatio(a, b []float64) float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return median(r)
}

// WriteTable prints results as a table.
func WriteTable(w io.Writer, res []*MicroResult) {
	fmt.Fprintf(w, "%-6s %8s %8s %10s %10s %9s %5s %4s %9s %8s %9s %8s %9s %9s\n", "family", "rules", "entries",
		"compile_ms", "install_ms", "kern_KiB", "depth", "leaf", "last_ns", "last_x1", "nomat_ns", "nomat_x1", "first_ns", "nomat/1st")
	for _, r := range res {
		fmt.Fprintf(w, "%-6s %8d %8d %10.1f %10.1f %9d %5d %4d %9.0f %7.2fx %9.0f %7.2fx %9.0f %8.2fx\n", r.Family, r.Rules, r.Entries,
			r.CompileMS, r.InstallMS, r.KernelKiB, r.Tree.MaxDepth, r.Tree.MaxLeaf, r.LastMed, r.LastRatio, r.MissMed, r.MissRatio,
			r.FirstMed, r.MissVsFirst)
	}
	fmt.Fprintln(w, "ns: median per packet over the rounds; x1: median per-round ratio to the smallest rule count")
	writeDeltaCost(w, res)
	writeLatencyCost(w, res)
}

// writeDeltaCost prints the delta stage's cost, when measured.
func writeDeltaCost(w io.Writer, res []*MicroResult) {
	if len(res) == 0 || res[0].DeltaRules == 0 {
		return
	}
	fmt.Fprintf(w, "\nwith %d rules in the delta stage (checked by every probe), measured in the same rounds:\n", res[0].DeltaRules)
	fmt.Fprintf(w, "%-6s %8s %9s %9s %9s %9s %9s %9s\n", "family", "rules", "last_ns", "dl_last", "dl/empty", "nomat_ns", "dl_nomat", "dl/empty")
	for _, r := range res {
		fmt.Fprintf(w, "%-6s %8d %9.0f %9.0f %8.2fx %9.0f %9.0f %8.2fx\n", r.Family, r.Rules, r.LastMed, r.DeltaLastMed, r.DeltaLastX,
			r.MissMed, r.DeltaMissMed, r.DeltaMissX)
	}
	fmt.Fprintln(w, "dl/empty: median per-round ratio to the same probe with the delta stage empty")
}

// WriteSpreadTable prints the memory of each rule set and, with
// MicroOptions.Spread, the warm (K = 1) and spread (K frames) costs.
func WriteSpreadTable(w io.Writer, res []*MicroResult) {
	fmt.Fprintf(w, "%-6s %-15s %8s %8s %9s %8s", "family", "ruleset", "rules", "entries", "max_rules", "B/rule")
	if len(res) > 0 && res[0].Spread != nil {
		fmt.Fprintf(w, " %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %8s %8s %7s %7s %6s", "K", "warm_mn", "warm50", "warm90", "warm99",
			"sprd_mn", "sprd50", "sprd90", "sprd99", "sprd999", "mean_x", "p50_x", "drv_w50", "drv_s50", "unrch")
		fmt.Fprintf(w, " %5s %5s %4s %5s %4s %5s", "trees", "nodes", "n99", "cands", "c99", "slotl")
	}
	fmt.Fprintln(w)
	for _, r := range res {
		fmt.Fprintf(w, "%-6s %-15s %8d %8d %9d %8.0f", r.Family, r.RuleSet, r.Rules, r.Entries, r.MaxRules, r.BytesPerRule)
		if sp := r.Spread; sp != nil {
			fmt.Fprintf(w, " %7d %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %7.2fx %7.2fx %7.0f %7.0f %6d", sp.K, sp.Warm.Mean, sp.Warm.P50,
				sp.Warm.P90, sp.Warm.P99, sp.Spread.Mean, sp.Spread.P50, sp.Spread.P90, sp.Spread.P99, sp.Spread.P999, sp.MeanRatio, sp.Ratio,
				sp.DriverWarm.P50, sp.DriverSpread.P50, sp.Unreachable)
			wk := sp.Walk
			fmt.Fprintf(w, " %5.2f %5.1f %4d %5.1f %4d %5.2f", wk.Trees, wk.Nodes, wk.NodesP99, wk.Cands, wk.CandsP99, wk.Slots)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "B/rule: one generation of tables in kernel memory per rule; max_rules: the --max-rules they needed")
	if len(res) > 0 && res[0].Spread != nil {
		fmt.Fprintln(w, "warm: one frame repeated (K = 1); sprd: K frames aimed at K different rules, random order; ns per packet")
		fmt.Fprintln(w, "over all rounds less the driver's (drv_*: the driver and test loop alone, same frames): mn the mean less")
		fmt.Fprintln(w, "the driver's mean, 50/90/99/999 the percentiles less the driver's p50; mean_x, p50_x: median per-round ratio")
		fmt.Fprintln(w, "sprd/warm of the means and of the p50s; unrch: rules tried that no frame could reach; per sprd frame")
		fmt.Fprintln(w, "(the Go twin's walk): trees walked, fat nodes (mean, p99), candidate records (mean, p99), leaf-slot lines")
	}
}

// WriteAuditCost prints the audit's cost, when measured.
func WriteAuditCost(w io.Writer, res []*MicroResult) {
	if len(res) == 0 || len(res[0].AuditLastNS) == 0 {
		return
	}
	fmt.Fprintf(w, "\nthe audit's cost (the rule set audited beside itself), measured in the same rounds:\n")
	fmt.Fprintf(w, "%-6s %8s %9s %9s %9s %9s %9s %9s", "family", "rules", "last_ns", "audit_ns", "last_x", "nomat_ns", "audit_ns", "nomat_x")
	spread := res[0].AuditSpread != nil
	if spread {
		fmt.Fprintf(w, " %9s %9s %9s", "sprd50", "audit50", "sprd50_x")
	}
	fmt.Fprintln(w)
	for _, r := range res {
		fmt.Fprintf(w, "%-6s %8d %9.0f %9.0f %8.2fx %9.0f %9.0f %8.2fx", r.Family, r.Rules, r.LastMed, r.AuditLastMed, r.AuditLastX,
			r.MissMed, r.AuditMissMed, r.AuditMissX)
		if spread && r.Spread != nil && r.AuditSpread != nil {
			fmt.Fprintf(w, " %9.0f %9.0f %8.2fx", r.Spread.Spread.P50, r.AuditSpread.Spread.P50, r.AuditSpread.Spread.P50/r.Spread.Spread.P50)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "ns: median per packet (BPF_PROG_TEST_RUN); _x: median per-round ratio to the audit off (sprd50_x: ratio of")
	fmt.Fprintln(w, "the spread frames' p50s less the driver's, all rounds)")
}

// writeLatencyCost prints latency sampling's cost, when measured.
func writeLatencyCost(w io.Writer, res []*MicroResult) {
	if len(res) == 0 || len(res[0].Latency) == 0 {
		return
	}
	fmt.Fprintf(w, "\nlatency sampling's cost on the last-rule probe, measured in the same rounds:\n%-6s %8s %9s", "family", "rules", "off_ns")
	for _, l := range res[0].Latency {
		fmt.Fprintf(w, " %9s %9s", fmt.Sprintf("1in%d_ns", l.Sample), "vs_off")
	}
	fmt.Fprintln(w)
	for _, r := range res {
		fmt.Fprintf(w, "%-6s %8d %9.0f", r.Family, r.Rules, r.LastMed)
		for _, l := range r.Latency {
			fmt.Fprintf(w, " %9.0f %8.3fx", l.Med, l.VsOff)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "vs_off: median per-round ratio to sampling off (CPU ns per packet, BPF_PROG_TEST_RUN)")
}
