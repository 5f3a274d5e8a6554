package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/latency"
)

// fullSnapshot has something in every field, so that every metric the
// collector can export appears.
func fullSnapshot() *Snapshot {
	hit := time.Unix(1700000000, 250_000_000)
	return &Snapshot{
		Time: hit.Add(time.Second), Generation: 7, ProgramID: 42,
		Interfaces: []Interface{{Name: "eth0", Index: 2, Mode: "native", Filtering: true}, {Name: "eth1", Problem: "deleted"}},
		Rules: []Rule{
			{Chain: "INPUT", Num: 1, ID: 16, Text: "-A INPUT -p udp --dport 9 -j DROP", Hash: RuleHash("-A INPUT -p udp --dport 9 -j DROP"),
				Counter: datapath.Counter{Packets: 10, Bytes: 640, Last: hit}, Log: &datapath.LogCounter{Emitted: 6, Suppressed: 4, Lost: 1}},
			{Chain: "INPUT", Num: 2, ID: 17, Text: "-A INPUT -j ACCEPT", Hash: RuleHash("-A INPUT -j ACCEPT")},
		},
		Policies: []Policy{{Chain: "INPUT", Family: "ipv4", Verdict: "DROP", Counter: datapath.Counter{Packets: 3, Bytes: 180}}},
		Reasons:  []Reason{{Reason: "rule-drop", Counter: datapath.Counter{Packets: 10, Bytes: 640}, Dropped: 10, DroppedBytes: 640}},
		Actions:  []Action{{Hook: "xdp", Action: "XDP_DROP", Counter: datapath.Counter{Packets: 10, Bytes: 640}}},
		Conntrack: Conntrack{Entries: 5, Max: 1024, Expired: 1, ByState: map[string]int{"ESTABLISHED": 4},
			Events: map[string]uint64{"created": 9, "table_full": 2}},
		Forward:  []Forwarded{{How: "xdp", Counter: datapath.Counter{Packets: 7, Bytes: 448}}, {How: "ttl", Counter: datapath.Counter{Packets: 1, Bytes: 64}}},
		Log:      datapath.LogStats{Total: datapath.LogCounter{Emitted: 6, Suppressed: 4, Lost: 1}, Overflow: 3},
		BPFStats: true,
		Programs: []Program{{Name: "xdpfw_ingress", Hook: "xdp", ID: 42, RunTime: 1500 * time.Millisecond, Runs: 3000, RecursionMisses: 1}},
		Latency:  latencySnapshot(),
	}
}

// latencySnapshot samples 1 in 64 and has INPUT/accept packets of 20,
// 100, 100, 5000 and 2,000,000 ns (the last past the buckets), nothing
// elsewhere.
func latencySnapshot() *Latency {
	l := &Latency{Sample: 64}
	for _, c := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		for _, o := range []string{"accept", "drop", "reject", "pass"} {
			h := LatencyHist{Chain: c, Outcome: o}
			if c == "INPUT" && o == "accept" {
				for _, v := range []uint64{20, 100, 100, 5000, 2_000_000} {
					h.Hist.Add(v)
				}
			}
			h.Summary = h.Hist.Summarize()
			l.Hists = append(l.Hists, h)
		}
	}
	return l
}

// The latency histogram: cumulative counts at exact bucket bounds, in
// seconds; only chains and outcomes that timed packets.
func TestCollectorLatency(t *testing.T) {
	mfs := gather(t, func() (*Snapshot, error) { return fullSnapshot(), nil })
	if got := value(t, mfs, "xdpfw_latency_sample", nil); got != 64 {
		t.Errorf("xdpfw_latency_sample = %v, want 64", got)
	}
	mf := mfs["xdpfw_packet_processing_seconds"]
	if mf == nil || len(mf.Metric) != 1 {
		t.Fatalf("want one histogram (INPUT/accept), have %v", mf)
	}
	h := mf.Metric[0].Histogram
	if h.GetSampleCount() != 5 || h.GetSampleSum() != 2_005_220e-9 {
		t.Errorf("count %d sum %g, want 5 and 2005220 ns", h.GetSampleCount(), h.GetSampleSum())
	}
	want := map[float64]uint64{16e-9: 0, 24e-9: 1, 96e-9: 1, 128e-9: 3, 4096e-9: 3, 6144e-9: 4, 1048576e-9: 4}
	seen := 0
	prev := 0.0
	for _, b := range h.Bucket {
		if b.GetUpperBound() <= prev {
			t.Errorf("bounds out of order: %g after %g", b.GetUpperBound(), prev)
		}
		prev = b.GetUpperBound()
		if w, ok := want[b.GetUpperBound()]; ok {
			seen++
			if b.GetCumulativeCount() != w {
				t.Errorf("le %g: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
			}
		}
	}
	if seen != len(want) || len(h.Bucket) != 2*(latency.MaxExp-latency.SubBits)+1 {
		t.Errorf("%d buckets (%d of the expected bounds), want %d", len(h.Bucket), seen, 2*(latency.MaxExp-latency.SubBits)+1)
	}
}

func gather(t *testing.T, take func() (*Snapshot, error)) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(take))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// value is the sample of family mf whose labels include want.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	mf := mfs[name]
	if mf == nil {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range mf.Metric {
		for _, lp := range m.Label {
			if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
				continue next
			}
		}
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	t.Fatalf("no %s%v", name, want)
	return 0
}

func TestCollector(t *testing.T) {
	s := fullSnapshot()
	mfs := gather(t, func() (*Snapshot, error) { return s, nil })
	h := s.Rules[0].Hash
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"xdpfw_loaded", nil, 1},
		{"xdpfw_generation", nil, 7},
		{"xdpfw_rules", nil, 2},
		{"xdpfw_interface_info", map[string]string{"interface": "eth0", "mode": "native"}, 1},
		{"xdpfw_interface_filtering", map[string]string{"interface": "eth0"}, 1},
		{"xdpfw_interface_filtering", map[string]string{"interface": "eth1"}, 0},
		{"xdpfw_rule_packets_total", map[string]string{"chain": "INPUT", "rule": "1", "hash": h}, 10},
		{"xdpfw_rule_bytes_total", map[string]string{"chain": "INPUT", "rule": "1", "hash": h}, 640},
		{"xdpfw_rule_packets_total", map[string]string{"rule": "2"}, 0},
		{"xdpfw_rule_last_hit_timestamp_seconds", map[string]string{"rule": "1"}, 1700000000.25},
		{"xdpfw_policy_packets_total", map[string]string{"chain": "INPUT", "family": "ipv4", "verdict": "DROP"}, 3},
		{"xdpfw_packets_by_reason_total", map[string]string{"reason": "rule-drop"}, 10},
		{"xdpfw_dropped_packets_total", map[string]string{"reason": "rule-drop"}, 10},
		{"xdpfw_packets_by_action_total", map[string]string{"hook": "xdp", "action": "XDP_DROP"}, 10},
		{"xdpfw_conntrack_entries", map[string]string{"state": "ESTABLISHED"}, 4},
		{"xdpfw_conntrack_expired_entries", nil, 1},
		{"xdpfw_conntrack_max_entries", nil, 1024},
		{"xdpfw_forwarded_packets_total", map[string]string{"how": "xdp"}, 7},
		{"xdpfw_forwarded_bytes_total", map[string]string{"how": "ttl"}, 64},
		{"xdpfw_conntrack_events_total", map[string]string{"event": "table_full"}, 2},
		{"xdpfw_log_events_total", map[string]string{"outcome": "emitted"}, 6},
		{"xdpfw_log_events_total", map[string]string{"outcome": "suppressed"}, 4},
		{"xdpfw_log_events_total", map[string]string{"outcome": "lost"}, 1},
		{"xdpfw_log_overflow_packets_total", nil, 3},
		{"xdpfw_rule_log_events_total", map[string]string{"rule": "1", "hash": h, "outcome": "suppressed"}, 4},
		{"xdpfw_bpf_stats_enabled", nil, 1},
		{"xdpfw_program_run_time_seconds_total", map[string]string{"program": "xdpfw_ingress"}, 1.5},
		{"xdpfw_program_runs_total", map[string]string{"program": "xdpfw_ingress"}, 3000},
	} {
		if got := value(t, mfs, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// A rule never hit has no last-hit time (rather than 1970).
	if n := len(mfs["xdpfw_rule_last_hit_timestamp_seconds"].Metric); n != 1 {
		t.Errorf("%d last-hit samples, want 1 (rule 2 was never hit)", n)
	}
	// Without BPF stats there are no program metrics.
	s.BPFStats, s.Programs = false, nil
	mfs = gather(t, func() (*Snapshot, error) { return s, nil })
	if mfs["xdpfw_program_runs_total"] != nil || value(t, mfs, "xdpfw_bpf_stats_enabled", nil) != 0 {
		t.Error("program metrics without BPF stats")
	}
}

func TestCollectorNotLoaded(t *testing.T) {
	mfs := gather(t, func() (*Snapshot, error) { return nil, datapath.ErrNotLoaded })
	if len(mfs) != 1 || value(t, mfs, "xdpfw_loaded", nil) != 0 {
		t.Errorf("not loaded: %v", mfs)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(func() (*Snapshot, error) { return nil, errors.New("boom") }))
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a failing read gathers without the error: %v", err)
	}
}

// TestCollectorLint: names and help follow Prometheus' conventions (the
// client's own linter: _total counters, base units, no camel case).
func TestCollectorLint(t *testing.T) {
	s := fullSnapshot()
	probs, err := testutil.CollectAndLint(NewCollector(func() (*Snapshot, error) { return s, nil }))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// exported is every metric name the collector exports: the names its
// descriptors declare, which must be the names a full snapshot produces.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 100)
	NewCollector(nil).Describe(ch)
	close(ch)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	described := map[string]bool{}
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		described[m[1]] = true
	}
	s := fullSnapshot()
	for name := range gather(t, func() (*Snapshot, error) { return s, nil }) {
		if !described[name] {
			t.Errorf("%s is collected but not described", name)
		}
		delete(described, name)
	}
	for name := range described {
		t.Errorf("%s is described but a full snapshot does not produce it", name)
	}
	for name := range gather(t, func() (*Snapshot, error) { return s, nil }) {
		described[name] = true
	}
	return described
}

// TestDashboard: deploy/grafana/xdpfw-dashboard.json is a dashboard
// Grafana can import (JSON with a title, uid, schema version, panels with
// unique ids, positions and queries), it has the panels the docs promise,
// and every xdpfw_ metric its queries name is one the collector exports.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "xdpfw-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title         string `json:"title"`
		UID           string `json:"uid"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name  string          `json:"name"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Annotations struct {
			List []struct {
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			GridPos *struct {
				H, W, X, Y int
			} `json:"gridPos"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("not a dashboard: %v", err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 || len(d.Panels) == 0 {
		t.Fatalf("title %q uid %q schemaVersion %d, %d panels", d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.Type == "" || p.Title == "" || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 ||
			p.GridPos.X+p.GridPos.W > 24 || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: duplicate id, no type, title, position within 24 columns or query", p.ID, p.Title)
		}
		ids[p.ID] = true
		for _, q := range p.Targets {
			if q.RefID == "" || q.Expr == "" {
				t.Errorf("panel %q: a query without refId or expr", p.Title)
			}
			exprs = append(exprs, q.Expr)
		}
	}
	for _, v := range d.Templating.List {
		exprs = append(exprs, string(v.Query))
	}
	for _, a := range d.Annotations.List {
		exprs = append(exprs, a.Expr)
	}

	names := exported(t)
	metric := regexp.MustCompile(`\bxdpfw_[a-zA-Z0-9_]*`)
	used := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metric.FindAllString(e, -1) {
			used[m] = true
			if !names[m] {
				t.Errorf("the dashboard uses %s, which the collector does not export (in %s)", m, e)
			}
		}
	}
	// The panels the issue asks for, by what they query.
	all := strings.Join(exprs, "\n")
	for _, want := range []string{
		"sum by (reason) (rate(xdpfw_dropped_packets_total",       // drops by reason
		"topk(10, sum by (chain, rule, hash) (rate(xdpfw_rule_pa", // top rules by packet rate
		"sum by (state) (xdpfw_conntrack_entries",                 // conntrack entries by state
		"rate(xdpfw_program_run_time_seconds_total",               // run time per packet ...
		"/ sum by (program) (rate(xdpfw_program_runs_total",       // ... = run time / runs
		"xdpfw_generation",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no dashboard query contains %q", want)
		}
	}
	var unused []string
	for n := range names {
		if !used[n] {
			unused = append(unused, n)
		}
	}
	sort.Strings(unused)
	t.Logf("exported but not on the dashboard: %v", unused)
}
