package telemetry

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/latency"
)

// The metrics, one descriptor each. docs/observability.md lists them with
// their meaning; deploy/grafana/xdpfw-dashboard.json uses them (a test
// checks that every name the dashboard uses is here).
var (
	ruleLabels = []string{"chain", "rule", "hash"}

	mLoaded = prometheus.NewDesc("xdpfw_loaded",
		"1 when xdpfw is loaded (a program pinned and attached), else 0 and no other xdpfw metric.", nil, nil)
	mGeneration = prometheus.NewDesc("xdpfw_generation",
		"Generation of the rule set in force; grows by one with every change.", nil, nil)
	mRules = prometheus.NewDesc("xdpfw_rules",
		"Rules in force.", nil, nil)
	mInterface = prometheus.NewDesc("xdpfw_interface_info",
		"An attached interface and the XDP mode the kernel reports for it (always 1).", []string{"interface", "mode"}, nil)
	mFiltering = prometheus.NewDesc("xdpfw_interface_filtering",
		"1 if xdpfw filters a configured interface, 0 if not (the interface was deleted, or re-created and not attached again yet).", []string{"interface"}, nil)
	mRulePackets = prometheus.NewDesc("xdpfw_rule_packets_total",
		"Packets a rule decided. rule: its number in the chain; hash: first 16 hex digits of the SHA-256 of its text.", ruleLabels, nil)
	mRuleBytes = prometheus.NewDesc("xdpfw_rule_bytes_total",
		"Bytes (whole frames) of the packets a rule decided.", ruleLabels, nil)
	mRuleLastHit = prometheus.NewDesc("xdpfw_rule_last_hit_timestamp_seconds",
		"When a rule last decided a packet (Unix time, kernel-tick resolution); absent for rules never hit.", ruleLabels, nil)
	mPolicyPackets = prometheus.NewDesc("xdpfw_policy_packets_total",
		"Packets a chain's policy decided (no rule matched), per family.", []string{"chain", "family", "verdict"}, nil)
	mPolicyBytes = prometheus.NewDesc("xdpfw_policy_bytes_total",
		"Bytes of the packets a chain's policy decided, per family.", []string{"chain", "family", "verdict"}, nil)
	mReasonPackets = prometheus.NewDesc("xdpfw_packets_by_reason_total",
		"Packets by why they got their verdict (rule-accept, policy-drop, malformed-ipv4, conntrack-full, ...).", []string{"reason"}, nil)
	mReasonBytes = prometheus.NewDesc("xdpfw_bytes_by_reason_total",
		"Bytes by why the packets got their verdict.", []string{"reason"}, nil)
	mDropped = prometheus.NewDesc("xdpfw_dropped_packets_total",
		"Packets dropped (XDP_DROP, TC_ACT_SHOT), by reason.", []string{"reason"}, nil)
	mActionPackets = prometheus.NewDesc("xdpfw_packets_by_action_total",
		"Packets by what the program returned: hook xdp (ingress) or tc (egress), action XDP_PASS, XDP_DROP, XDP_TX, ..., TC_ACT_OK, TC_ACT_SHOT.", []string{"hook", "action"}, nil)
	mActionBytes = prometheus.NewDesc("xdpfw_bytes_by_action_total",
		"Bytes by what the program returned.", []string{"hook", "action"}, nil)
	mCTEntries = prometheus.NewDesc("xdpfw_conntrack_entries",
		"Live tracked connections by state.", []string{"state"}, nil)
	mCTExpired = prometheus.NewDesc("xdpfw_conntrack_expired_entries",
		"Entries past their deadline still in the table (until conntrack gc removes them).", nil, nil)
	mFwdPackets = prometheus.NewDesc("xdpfw_forwarded_packets_total",
		"Packets the FORWARD chain accepted, by how they were forwarded: how=xdp by the fast path in XDP, any other by the kernel and why (stack: load --forward stack; no-neighbour, ttl, mtu, ...; docs/forward.md).", []string{"how"}, nil)
	mFwdBytes = prometheus.NewDesc("xdpfw_forwarded_bytes_total",
		"Bytes of the packets the FORWARD chain accepted, by how they were forwarded.", []string{"how"}, nil)
	mCTMax = prometheus.NewDesc("xdpfw_conntrack_max_entries",
		"Size of the connection tracking table (load --ct-max).", nil, nil)
	mCTEvents = prometheus.NewDesc("xdpfw_conntrack_events_total",
		"Conntrack events: created, table_full (NEW connections refused), invalid (packets), expired_replaced (expired entries the data plane replaced or removed), early_drop (not-assured entries evicted from a full table), picked_up (TCP connections picked up mid-stream), frag_tracked (fragmented datagrams whose first fragment's verdict was recorded), frag_unknown (later fragments of no recorded datagram: dropped), frag_expired (of those, whose entry had expired), frag_overlap (later fragments overlapping their first fragment: dropped), kernel_nat (packets judged with the kernel's conntrack: their connection is translated by the kernel's nat table).", []string{"event"}, nil)
	mLogEvents = prometheus.NewDesc("xdpfw_log_events_total",
		"Events of LOG and --log rules: emitted (put in the ring buffer), suppressed (over the rule's rate limit), lost (the ring buffer was full: no reader, or a slow one).", []string{"outcome"}, nil)
	mLogOverflow = prometheus.NewDesc("xdpfw_log_overflow_packets_total",
		"Packets that more LOG rules matched than log one packet (the later rules did not log them).", nil, nil)
	mRuleLogEvents = prometheus.NewDesc("xdpfw_rule_log_events_total",
		"Events of one logging rule, by outcome (emitted, suppressed, lost).", append(append([]string{}, ruleLabels...), "outcome"), nil)
	mBPFStats = prometheus.NewDesc("xdpfw_bpf_stats_enabled",
		"1 when the kernel collects program run time (sysctl kernel.bpf_stats_enabled=1, or this process holds BPF_ENABLE_STATS); the xdpfw_program_* metrics exist only then or once runs were counted.", nil, nil)
	mProgRunTime = prometheus.NewDesc("xdpfw_program_run_time_seconds_total",
		"Time the program ran, as the kernel counts it while BPF stats are enabled.", []string{"program"}, nil)
	mProgRuns = prometheus.NewDesc("xdpfw_program_runs_total",
		"Times the program ran while BPF stats were enabled.", []string{"program"}, nil)
	mProgMisses = prometheus.NewDesc("xdpfw_program_recursion_misses_total",
		"Times the program was not run because another BPF program was running on the CPU.", []string{"program"}, nil)

	mLatSample = prometheus.NewDesc("xdpfw_latency_sample",
		"Latency sampling: one packet in this many is timed, per CPU (load/stats --latency-sample); 0: off.", nil, nil)
	mLatency = prometheus.NewDesc("xdpfw_packet_processing_seconds",
		"Sampled per-packet processing time in the data plane, from program entry to verdict (XDP: INPUT, FORWARD; tc egress: OUTPUT), by outcome (accept, drop, reject, pass); only chains and outcomes that timed packets. Buckets at 2^k and 1.5*2^k ns, 16 ns to 1 ms; a bucket counts the times below its bound.", []string{"chain", "outcome"}, nil)

	allDescs = []*prometheus.Desc{mLatSample, mLatency, mLogEvents, mLogOverflow, mRuleLogEvents, mLoaded, mGeneration, mRules, mInterface, mFiltering, mRulePackets, mRuleBytes, mRuleLastHit,
		mPolicyPackets, mPolicyBytes, mReasonPackets, mReasonBytes, mDropped, mActionPackets, mActionBytes,
		mCTEntries, mCTExpired, mCTMax, mFwdPackets, mFwdBytes, mCTEvents, mBPFStats, mProgRunTime, mProgRuns, mProgMisses}
)

// Collector is a prometheus.Collector over snapshots: every scrape takes
// one (Take) and reports it. Nothing is cached between scrapes.
type Collector struct {
	take func() (*Snapshot, error)
}

// NewCollector collects the snapshots take returns. take failing with
// datapath.ErrNotLoaded reports xdpfw_loaded 0; any other error fails the
// scrape.
func NewCollector(take func() (*Snapshot, error)) *Collector { return &Collector{take: take} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s, err := c.take()
	if errors.Is(err, datapath.ErrNotLoaded) {
		ch <- prometheus.MustNewConstMetric(mLoaded, prometheus.GaugeValue, 0)
		return
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(mLoaded, fmt.Errorf("reading xdpfw's counters: %w", err))
		return
	}
	collect(ch, s)
}

func collect(ch chan<- prometheus.Metric, s *Snapshot) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(mLoaded, 1)
	gauge(mGeneration, float64(s.Generation))
	gauge(mRules, float64(len(s.Rules)))
	for _, i := range s.Interfaces {
		gauge(mInterface, 1, i.Name, i.Mode)
		filtering := 0.0
		if i.Filtering {
			filtering = 1
		}
		gauge(mFiltering, filtering, i.Name)
	}
	for _, r := range s.Rules {
		num := strconv.Itoa(r.Num)
		counter(mRulePackets, float64(r.Packets), r.Chain, num, r.Hash)
		counter(mRuleBytes, float64(r.Bytes), r.Chain, num, r.Hash)
		if !r.Last.IsZero() {
			gauge(mRuleLastHit, float64(r.Last.Unix())+float64(r.Last.Nanosecond())/1e9, r.Chain, num, r.Hash)
		}
	}
	for _, p := range s.Policies {
		counter(mPolicyPackets, float64(p.Packets), p.Chain, p.Family, p.Verdict)
		counter(mPolicyBytes, float64(p.Bytes), p.Chain, p.Family, p.Verdict)
	}
	for _, r := range s.Reasons {
		counter(mReasonPackets, float64(r.Packets), r.Reason)
		counter(mReasonBytes, float64(r.Bytes), r.Reason)
		counter(mDropped, float64(r.Dropped), r.Reason)
	}
	for _, a := range s.Actions {
		counter(mActionPackets, float64(a.Packets), a.Hook, a.Action)
		counter(mActionBytes, float64(a.Bytes), a.Hook, a.Action)
	}
	for state, n := range s.Conntrack.ByState {
		gauge(mCTEntries, float64(n), state)
	}
	gauge(mCTExpired, float64(s.Conntrack.Expired))
	gauge(mCTMax, float64(s.Conntrack.Max))
	for _, f := range s.Forward {
		counter(mFwdPackets, float64(f.Packets), f.How)
		counter(mFwdBytes, float64(f.Bytes), f.How)
	}
	for ev, n := range s.Conntrack.Events {
		counter(mCTEvents, float64(n), ev)
	}
	logEvents := func(d *prometheus.Desc, c datapath.LogCounter, labels ...string) {
		for _, o := range []struct {
			name string
			n    uint64
		}{{"emitted", c.Emitted}, {"suppressed", c.Suppressed}, {"lost", c.Lost}} {
			counter(d, float64(o.n), append(labels, o.name)...)
		}
	}
	logEvents(mLogEvents, s.Log.Total)
	counter(mLogOverflow, float64(s.Log.Overflow))
	for _, r := range s.Rules {
		if r.Log != nil {
			logEvents(mRuleLogEvents, *r.Log, r.Chain, strconv.Itoa(r.Num), r.Hash)
		}
	}
	enabled := 0.0
	if s.BPFStats {
		enabled = 1
	}
	gauge(mBPFStats, enabled)
	for _, p := range s.Programs {
		counter(mProgRunTime, p.RunTime.Seconds(), p.Name)
		counter(mProgRuns, float64(p.Runs), p.Name)
		counter(mProgMisses, float64(p.RecursionMisses), p.Name)
	}
	if s.Latency != nil {
		gauge(mLatSample, float64(s.Latency.Sample))
		for _, h := range s.Latency.Hists {
			if h.Hist.Count > 0 {
				ch <- prometheus.MustNewConstHistogram(mLatency, h.Hist.Count, float64(h.Hist.Sum)/1e9,
					promBuckets(&h.Hist), h.Chain, h.Outcome)
			}
		}
	}
}

// promBuckets are h's counts below 2^k and 1.5*2^k ns, cumulative, by
// bound in seconds: bounds of h's own buckets, so the counts are exact
// (the 273 buckets themselves would be too many series).
func promBuckets(h *latency.Hist) map[float64]uint64 {
	out := map[float64]uint64{}
	var cum uint64
	for i := 0; i < latency.Overflow; i++ {
		cum += h.Counts[i]
		_, hi := latency.Bounds(i)
		if hi >= latency.Sub && (hi&(hi-1) == 0 || (hi/3)&(hi/3-1) == 0 && hi%3 == 0) {
			out[float64(hi)/1e9] = cum
		}
	}
	return out
}

// MetricsHandler serves the firewall under p as Prometheus metrics (text
// exposition), with the Go runtime's and the process's own: what `xdpfw
// metrics serve` and the daemon serve at /metrics. Each scrape opens the
// firewall read-only and takes one snapshot. extra are the serving
// process's own metrics (the daemon's conntrack GC).
func MetricsHandler(p firewall.Paths, extra ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(func() (*Snapshot, error) { return Take(p) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// WriteExposition writes s as Prometheus text exposition (`xdpfw stats
// --prometheus`; e.g. for node_exporter's textfile collector).
func WriteExposition(w io.Writer, s *Snapshot) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(func() (*Snapshot, error) { return s, nil }))
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return fmt.Errorf("writing metrics: %w", err)
		}
	}
	return nil
}
