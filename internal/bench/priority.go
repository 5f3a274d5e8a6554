package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// The priority benchmark (docs/realtime.md, Priority): the one-way
// latency of a high-priority UDP flow through xdpfw while paced bulk UDP
// offers a set share of what one receiving CPU judges (--bulk-rate,
// calibrated first; pace.go), with the priority table's bulk CPUs on and
// off. Topology (NewTopology): the generator's namespace sends both flows
// from GenCPU over the veth; the DUT's veth runs xdpfw in native mode, its
// NAPI thread pinned to DUTCPU (the receiving CPU); the bulk CPU is GenCPU
// (a 2-CPU machine has no third). A probe's latency runs from its
// software transmit stamp (taken by veth_xmit as it enters the DUT veth's
// queue) to the DUT socket's receive stamp (SO_TIMESTAMPNS, after XDP
// judged it), both CLOCK_REALTIME: the queueing behind bulk and the
// judgment on the receiving CPU, not the sender's own delay on GenCPU
// (reported apart).

const (
	prioProbePort = 7 // the HIGH flow (echo's port; nobody answers)
	prioBulkPort  = 9 // the BULK flow (discard)
)

// PriorityOptions set up the priority benchmark.
type PriorityOptions struct {
	Duration  time.Duration // each phase, all its slices together (0: 10 s)
	ProbeRate int           // probes per second (0: 2000)
	BulkRate  BulkRate      // the bulk load (zero: 150 % of the calibrated capacity)
	Sender    string        // BulkFrames (""), BulkPacket
	Rules     int           // filler rules before the accepting ones (0: 1000)
	Rounds    int           // slices each phase is measured in, interleaved with the others' (0: 10)
	Progress  io.Writer
}

// PriorityPhase is one measurement.
type PriorityPhase struct {
	Name        string  `json:"name"`
	Priority    bool    `json:"priority"`     // bulk handed to the bulk CPU
	BulkOffered float64 `json:"bulk_offered"` // bulk packets per second that reached the DUT veth (taken or dropped by its queue) while the probes ran
	BulkSent    float64 `json:"bulk_sent"`    // bulk packets per second the sender sent over its whole run (start-up included)
	BulkMissed  uint64  `json:"bulk_missed"`  // packet sender: bulk packets the pacer skipped (the sender fell behind)
	BulkLate    uint64  `json:"bulk_late"`    // frames sender: bulk packets sent late, the schedule moved on
	RingDropped uint64  `json:"ring_dropped"` // packets the DUT veth's queue refused (bulk and probes)
	Judged      float64 `json:"judged"`       // packets xdpfw judged per second (both CPUs)
	NAPIBusy    float64 `json:"napi_busy"`    // share of the time the receiving CPU's NAPI thread ran
	Probes      int     `json:"probes"`       // probes sent
	Lost        int     `json:"lost"`         // probes not received
	Unstamped   int     `json:"unstamped"`    // probes received without a transmit stamp (left out)
	P50         float64 `json:"p50_us"`
	P99         float64 `json:"p99_us"`
	P999        float64 `json:"p99_9_us"`
	Max         float64 `json:"max_us"`
	Jitter      float64 `json:"jitter_us"`         // mean absolute deviation from the mean
	SendP99     float64 `json:"send_delay_p99_us"` // p99 of the probe sender's own delay (its clock read to the veth), not in the latency
}

// PriorityResult is the benchmark's report.
type PriorityResult struct {
	Rules    int    `json:"rules"`
	GenCPU   int    `json:"generator_cpu"` // the senders and the bulk CPU
	DUTCPU   int    `json:"dut_cpu"`       // the receiving CPU
	BulkRate string `json:"bulk_rate"`     // as asked (--bulk-rate)
	Sender   string `json:"bulk_sender"`   // BulkFrames, BulkPacket
	// Capacity: bulk packets one receiving CPU judges per second of its
	// time (priority off; packets judged over the NAPI thread's CPU time
	// under the sender flat out); Flood: what it judged per second of
	// wall time then, and FloodBusy the NAPI thread's share of the time.
	Capacity  float64         `json:"capacity_pps"`
	Flood     float64         `json:"flood_judged_pps"`
	FloodBusy float64         `json:"flood_napi_busy"`
	SenderMax float64         `json:"sender_max_pps"`       // what the bulk sender offers flat out
	Target    float64         `json:"target_pps"`           // the bulk rate asked for, in packets per second
	Reached   bool            `json:"reached"`              // the phases with bulk offered >= 95 % of Target
	Load      [2]string       `json:"loadavg_before_after"` // /proc/loadavg, 1/5/15 min
	Phases    []PriorityPhase `json:"phases"`
	// Ratio is the HIGH flow's p99 under bulk with priority on over its
	// p99 without bulk with priority on (the bar: <= 1.5); RatioOff the
	// same with priority off.
	Ratio    float64 `json:"ratio"`
	RatioOff float64 `json:"ratio_off"`
	// QuietP99 is the HIGH flow's p99 over both phases without bulk
	// pooled (the same condition for a HIGH packet, twice the samples:
	// a steadier baseline on a noisy machine); RatioQuiet the p99 under
	// bulk with priority on over it.
	QuietP99   float64 `json:"quiet_p99_us"`
	RatioQuiet float64 `json:"ratio_quiet"`
}

// PriorityRuleText is the benchmark's rule file: the probe port HIGH, the
// stateful policy, n filler rules no packet matches, the two flows
// accepted.
func PriorityRuleText(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-t %s -A PRIORITY -p udp --dport %d -j HIGH\n", rules.PriorityTable, prioProbePort)
	b.WriteString("-P INPUT DROP\n-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n")
	for i := range n {
		fmt.Fprintf(&b, "-A INPUT -s 172.%d.%d.%d/32 -p tcp --dport %d -j DROP\n", 16+i>>16&15, i>>8&255, i&255, 1000+i%50000)
	}
	fmt.Fprintf(&b, "-A INPUT -p udp --dport %d -j ACCEPT\n-A INPUT -p udp --dport %d -j ACCEPT\n", prioProbePort, prioBulkPort)
	return b.String()
}

// Priority runs the priority benchmark.
func Priority(opt PriorityOptions) (res *PriorityResult, err error) {
	if opt.Duration == 0 {
		opt.Duration = 10 * time.Second
	}
	if opt.ProbeRate == 0 {
		opt.ProbeRate = 2000
	}
	if opt.BulkRate == (BulkRate{}) {
		opt.BulkRate = BulkRate{Percent: 150}
	}
	if opt.Rules == 0 {
		opt.Rules = 1000
	}
	if opt.Sender == "" {
		opt.Sender = BulkFrames
	}
	if opt.Sender != BulkFrames && opt.Sender != BulkPacket {
		return nil, fmt.Errorf("bulk sender %q: want %s or %s", opt.Sender, BulkFrames, BulkPacket)
	}
	if opt.Rounds == 0 {
		opt.Rounds = 10
	}
	say := sayer(opt.Progress)
	if runtime.NumCPU() < 2 {
		return nil, errors.New("the priority benchmark needs two CPUs: one receives, one takes the bulk class")
	}
	topo, err := NewTopology()
	if err != nil {
		return nil, err
	}
	defer topo.Close()
	// No garbage collection while measuring: with both CPUs busy with
	// real-time threads, a stop-the-world would wait for starved normal
	// threads and stall the probe sender (the samples are small).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	res = &PriorityResult{Rules: opt.Rules, GenCPU: topo.GenCPU, DUTCPU: topo.DUTCPU, BulkRate: opt.BulkRate.String(), Sender: opt.Sender}
	res.Load[0], _ = runStart(say)
	dir, err := os.MkdirTemp("", "xdpfw-bench-prio-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bpffs := filepath.Join(dir, "bpf")
	if err := os.Mkdir(bpffs, 0o700); err != nil {
		return nil, err
	}
	if err := unix.Mount("bpf", bpffs, "bpf", 0, ""); err != nil {
		return nil, fmt.Errorf("mounting a private bpffs: %w", err)
	}
	defer unix.Unmount(bpffs, unix.MNT_DETACH)
	paths := firewall.Paths{PinDir: filepath.Join(bpffs, "xdpfw"), StateDir: filepath.Join(dir, "state")}
	rs, err := rules.Parse("priority bench", []byte(PriorityRuleText(opt.Rules)), rules.ParseOptions{})
	if err != nil {
		return nil, err
	}
	say("loading xdpfw with %d rules on %s (native), NAPI on CPU %d, bulk CPU %d", opt.Rules, topo.DUTIf.Name, topo.DUTCPU, topo.GenCPU)
	if err := topo.DUT.Do(func() error {
		_, err := firewall.Load(paths, []string{topo.DUTIf.Name}, datapath.ModeNative, rs,
			firewall.Options{MaxRules: opt.Rules + 1024, PriorityCPUs: "none"})
		return err
	}); err != nil {
		return nil, err
	}
	defer topo.DUT.Do(func() error { return firewall.Teardown(paths) })
	dp, err := datapath.Open(paths.PinDir)
	if err != nil {
		return nil, err
	}
	defer dp.Close()
	if err := topo.SetThreadedNAPI(true); err != nil {
		return nil, err
	}
	napi, err := topo.NAPIThread()
	if err != nil {
		return nil, err
	}
	// The receiving CPU's NAPI thread real-time (SCHED_FIFO), as a host
	// that wants bounded latency runs it: on a shared machine a normal
	// thread waits for the scheduler, which no priority table can change.
	if err := realtime(napi, dutNAPIPrio, "the DUT's NAPI thread"); err != nil {
		return nil, err
	}
	// the DUT's sockets: the probes' (read, timestamped), bulk's sink (never read)
	probe, sink, err := prioSockets(topo)
	if err != nil {
		return nil, err
	}
	defer unix.Close(probe)
	defer unix.Close(sink)
	dst := topo.DUTIf.Addr.Addr().As4()
	var bulk bulkLoad
	if opt.Sender == BulkPacket {
		if bulk, err = newBulkSender(topo); err != nil {
			return nil, err
		}
	} else {
		f, err := newBulkFrames(topo)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		bulk = f
	}

	// counters read before and after a run
	type snap struct {
		judged, ringDrops uint64
		arrived           uint64        // frames the DUT veth took from its queue
		napi              time.Duration // the NAPI thread's CPU time
		at                time.Duration
	}
	read := func() (s snap, err error) {
		rc, err := dp.ReasonCounters()
		if err != nil {
			return s, err
		}
		for _, c := range rc {
			s.judged += c.Packets
		}
		st, err := linkStats(topo.Gen, topo.GenIf.Index)
		if err != nil {
			return s, err
		}
		s.ringDrops = st.TxDropped // the DUT veth's queue full: skbs and live frames alike
		if st, err = linkStats(topo.DUT, topo.DUTIf.Index); err != nil {
			return s, err
		}
		s.arrived = st.RxPackets
		if s.napi, err = threadCPUTime(napi); err != nil {
			return s, err
		}
		s.at = monotonic()
		return s, nil
	}

	// waitArrivals waits until the DUT veth's count of arrivals moves
	// (bulk has started), at most limit. It runs on the probe sender's
	// thread, so it sleeps in the kernel (sleep), not in Go's scheduler.
	waitArrivals := func(limit time.Duration) error {
		s0, err := read()
		if err != nil {
			return err
		}
		for end := s0.at + limit; monotonic() < end; {
			sleep(2 * time.Millisecond)
			s, err := read()
			if err != nil {
				return err
			}
			if s.arrived-s0.arrived > 100 {
				return nil
			}
		}
		return nil
	}

	// Calibration: the bulk sender flat out, priority off. The capacity
	// is the packets judged per second of the NAPI thread's CPU time
	// (what one CPU handles, whatever else ran on it), checked against
	// the throughput when the thread was busy all the time.
	say("calibrating: bulk (%s) flat out for 2 s, priority off", opt.Sender)
	if err := dp.SetPriority(nil); err != nil {
		return nil, err
	}
	s0, err := read()
	if err != nil {
		return nil, err
	}
	flat, err := bulk.run(0, 2*time.Second)
	if err != nil {
		return nil, err
	}
	s1, err := read()
	if err != nil {
		return nil, err
	}
	wall := (s1.at - s0.at).Seconds()
	res.SenderMax = flat.Rate()
	res.Flood = float64(s1.judged-s0.judged) / wall
	res.FloodBusy = (s1.napi - s0.napi).Seconds() / wall
	if s1.napi == s0.napi || s1.judged == s0.judged {
		return nil, errors.New("calibration: the DUT judged nothing, or its NAPI thread did not run")
	}
	res.Capacity = float64(s1.judged-s0.judged) / (s1.napi - s0.napi).Seconds()
	res.Target = opt.BulkRate.Target(res.Capacity)
	say("  one CPU judges %.0f bulk pkt/s of its time (%.0f pkt/s judged, NAPI thread busy %.0f %%); the sender offers %.0f pkt/s flat out",
		res.Capacity, res.Flood, 100*res.FloodBusy, res.SenderMax)
	say("  bulk: %s = %.0f pkt/s paced (%.2fx the capacity)", opt.BulkRate, res.Target, res.Target/res.Capacity)
	if res.SenderMax < 0.95*res.Target {
		say("  the sender reaches only %.0f pkt/s flat out (%.2fx the capacity): the bulk phases offer less than asked", res.SenderMax, res.SenderMax/res.Capacity)
	}

	// The four phases interleaved, Rounds slices each, so that the
	// machine's own load (other work on a shared host) falls on all four
	// alike; each phase's samples are pooled.
	phases := []struct {
		name     string
		priority bool
		bulk     bool
	}{{"no bulk, priority off", false, false}, {"no bulk, priority on", true, false},
		{"bulk, priority off", false, true}, {"bulk, priority on", true, true}}
	slice := opt.Duration / time.Duration(opt.Rounds)
	lats := make([][]float64, len(phases))
	sends := make([][]float64, len(phases))
	res.Phases = make([]PriorityPhase, len(phases))
	var bulkSent [4]BulkSent
	ask := [4]float64{res.Target, res.Target, res.Target, res.Target} // the rate asked of the sender, per phase
	var secs, napiSecs [4]float64
	for round := range opt.Rounds {
		for k, ph := range phases {
			cpus := []int(nil)
			if ph.priority {
				cpus = []int{topo.GenCPU}
			}
			if err := dp.SetPriority(cpus); err != nil {
				return nil, err
			}
			p := &res.Phases[k]
			p.Name, p.Priority = ph.name, ph.priority
			var wg sync.WaitGroup
			var sent BulkSent
			var bulkErr error
			if ph.bulk {
				// longer than the probes: a live-frames run takes time to
				// start (tens of ms, more on a loaded machine)
				wg.Add(1)
				go func() {
					defer wg.Done()
					sent, bulkErr = bulk.run(ask[k], slice+600*time.Millisecond)
				}()
			}
			// The probe sender starts the window once bulk arrives and
			// the queues have filled, and ends it: this thread may wait
			// for a CPU while both are busy with real-time threads.
			var s0, s1 snap
			begin := func() error {
				if ph.bulk {
					if err := waitArrivals(500 * time.Millisecond); err != nil {
						return err
					}
					sleep(50 * time.Millisecond)
				}
				var err error
				s0, err = read()
				return err
			}
			end := func() error {
				var err error
				s1, err = read()
				return err
			}
			pr, err := prioProbe(topo, dst, probe, opt.ProbeRate, slice, begin, end)
			wg.Wait()
			if err == nil {
				err = bulkErr
			}
			if err != nil {
				return nil, err
			}
			window := (s1.at - s0.at).Seconds()
			offered := (float64(s1.arrived-s0.arrived) + float64(s1.ringDrops-s0.ringDrops) - float64(pr.sent)) / window
			if ph.bulk {
				p.BulkOffered += max(0, offered) * window
				ask[k] = adjustAsk(ask[k], res.Target, offered)
			}
			bulkSent[k].Sent += sent.Sent
			bulkSent[k].Missed += sent.Missed
			bulkSent[k].Late += sent.Late
			bulkSent[k].Secs += sent.Secs
			secs[k] += window
			napiSecs[k] += (s1.napi - s0.napi).Seconds()
			p.Judged += float64(s1.judged - s0.judged)
			p.RingDropped += s1.ringDrops - s0.ringDrops
			p.Probes += pr.sent
			p.Lost += pr.sent - pr.received
			p.Unstamped += pr.unstamped
			lats[k] = append(lats[k], pr.lat...)
			sends[k] = append(sends[k], pr.send...)
		}
		say("  round %d/%d", round+1, opt.Rounds)
	}
	res.Reached = true
	for k := range res.Phases {
		p := &res.Phases[k]
		p.BulkSent, p.BulkMissed, p.BulkLate = bulkSent[k].Rate(), bulkSent[k].Missed, bulkSent[k].Late
		if secs[k] > 0 {
			p.BulkOffered /= secs[k]
			p.Judged /= secs[k]
			p.NAPIBusy = napiSecs[k] / secs[k]
		}
		if phases[k].bulk && p.BulkOffered < 0.95*res.Target {
			res.Reached = false
		}
		p.P50, p.P99, p.P999, p.Max, p.Jitter = latencyStats(lats[k])
		_, p.SendP99, _, _, _ = latencyStats(sends[k])
		say("  %-22s bulk %8.0f pkt/s (sent %8.0f, missed %d, late %d)  judged %8.0f pkt/s  NAPI busy %3.0f %%  ring drops %7d  probes %6d lost %5d  p50 %7.1f us  p99 %7.1f us  p99.9 %7.1f us  max %8.1f us  (sender's own delay p99 %.1f us)",
			p.Name, p.BulkOffered, p.BulkSent, p.BulkMissed, p.BulkLate, p.Judged, 100*p.NAPIBusy, p.RingDropped, p.Probes, p.Lost, p.P50, p.P99, p.P999, p.Max, p.SendP99)
	}
	if err := dp.SetPriority(nil); err != nil {
		return nil, err
	}
	res.Load[1] = loadavg()
	res.RatioOff = res.Phases[2].P99 / res.Phases[0].P99
	res.Ratio = res.Phases[3].P99 / res.Phases[1].P99
	_, res.QuietP99, _, _, _ = latencyStats(append(slices.Clone(lats[0]), lats[1]...))
	res.RatioQuiet = res.Phases[3].P99 / res.QuietP99
	return res, nil
}

// adjustAsk is the rate to ask of the bulk sender next, after asking
// ask brought got packets per second to the DUT, for target: scaled by
// what was missing (a sender that slips, preempted or starting late,
// falls short of what it is asked), never below target nor above twice
// it; unchanged if nothing arrived (nothing to scale by).
func adjustAsk(ask, target, got float64) float64 {
	if got <= 0 {
		return ask
	}
	return min(2*target, max(target, ask*target/got))
}

// sleep sleeps in the kernel (nanosleep), on this thread: no Go timer,
// which another, maybe starved, thread would have to fire.
func sleep(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_ = unix.Nanosleep(&ts, nil)
}

// threadCPUTime is the time thread tid ran on a CPU (/proc/TID/schedstat).
func threadCPUTime(tid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", tid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/%d/schedstat: empty", tid)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/schedstat: %w", tid, err)
	}
	return time.Duration(ns), nil
}

// prioSockets opens the DUT's UDP sockets: the probes' (SO_TIMESTAMPNS,
// non-blocking) and bulk's sink, which nobody reads.
func prioSockets(topo *Topology) (probe, sink int, err error) {
	err = topo.DUT.Do(func() error {
		open := func(port int, rcvbuf int) (int, error) {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return -1, err
			}
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf); err != nil {
				unix.Close(fd)
				return -1, err
			}
			if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
				unix.Close(fd)
				return -1, err
			}
			return fd, nil
		}
		var err error
		if probe, err = open(prioProbePort, 4<<20); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(probe, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			unix.Close(probe)
			return err
		}
		if sink, err = open(prioBulkPort, 4096); err != nil {
			unix.Close(probe)
			return err
		}
		return nil
	})
	return probe, sink, err
}

// onGenCPU runs fn on a thread in the generator's namespace pinned to GenCPU.
func onGenCPU(topo *Topology, fn func() error) error {
	return topo.Gen.Do(func() error {
		var old, set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			return err
		}
		set.Set(topo.GenCPU)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("pinning to CPU %d: %w", topo.GenCPU, err)
		}
		defer unix.SchedSetaffinity(0, &old)
		return fn()
	})
}

// probeRun is what one run of prioProbe saw.
type probeRun struct {
	sent, received, unstamped int
	lat                       []float64 // one-way latency, us: the veth's transmit stamp to the DUT's receive stamp
	send                      []float64 // the sender's own delay, us: its clock read before sendto to the veth's transmit stamp
}

// probeTimestamping asks the probe socket for the software transmit stamp
// (taken by veth_xmit, right before the frame enters the DUT veth's
// queue), reported with the send's number (OPT_ID, from 0) and without
// the packet (OPT_TSONLY).
const probeTimestamping = unix.SOF_TIMESTAMPING_TX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE |
	unix.SOF_TIMESTAMPING_OPT_ID | unix.SOF_TIMESTAMPING_OPT_TSONLY

// prioProbe sends probes to dst:prioProbePort at rate for d and reads
// them back from fd. Each probe's latency runs from the moment the
// generator's veth hands it to the DUT veth's queue (the transmit stamp,
// CLOCK_REALTIME) to the DUT's receive stamp (SO_TIMESTAMPNS, same clock,
// after XDP judged it): the wait behind bulk in the queue and on the
// receiving CPU, and the judgment. The sender's own delay before that
// (waking, the socket's send path, on the CPU the bulk sender shares)
// is kept apart.
//
// begin and end run on the sender's thread (SCHED_FIFO, GenCPU) right
// before the first probe and right after the last; they must not block in
// Go's scheduler (time.Sleep, channels): with both CPUs busy with
// real-time threads, the Go threads that would wake them wait too.
func prioProbe(topo *Topology, dst [4]byte, fd int, rate int, d time.Duration, begin, end func() error) (probeRun, error) {
	var (
		run    probeRun
		done   atomic.Bool
		rerr   error
		wg     sync.WaitGroup
		rxAt   = map[uint64]int64{} // seq -> receive stamp
		userAt = map[uint64]int64{} // seq -> the sender's clock before sendto
		txAt   = map[uint64]int64{} // seq -> transmit stamp
	)
	// drain what an earlier phase left
	buf, oob := make([]byte, 64), make([]byte, 128)
	for {
		if _, _, _, _, err := unix.Recvmsg(fd, buf, oob, 0); err != nil {
			break
		}
	}
	wg.Add(1)
	go func() { // the reader, any CPU, late or not: the stamp is the kernel's
		defer wg.Done()
		rerr = func() error {
			idle := 0
			for {
				n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
				if errors.Is(err, unix.EAGAIN) {
					if done.Load() {
						if idle++; idle > 200 {
							return nil
						}
					}
					time.Sleep(500 * time.Microsecond)
					continue
				}
				if err != nil {
					return err
				}
				idle = 0
				if n < 16 {
					continue
				}
				seq := binary.LittleEndian.Uint64(buf[:8])
				userAt[seq] = int64(binary.LittleEndian.Uint64(buf[8:16]))
				msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
				if err != nil {
					continue
				}
				for _, m := range msgs {
					if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
						rxAt[seq] = tsNanos(m.Data)
					}
				}
			}
		}()
	}()
	err := onGenCPU(topo, func() error {
		s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(s)
		if err := unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, probeTimestamping); err != nil {
			return fmt.Errorf("probe sender: SO_TIMESTAMPING: %w", err)
		}
		to := &unix.SockaddrInet4{Port: prioProbePort, Addr: dst}
		payload := make([]byte, 18)
		ebuf, eoob := make([]byte, 64), make([]byte, 256)
		// the transmit stamps: veth_xmit queues them on the socket's
		// error queue during sendto
		drain := func() {
			for {
				_, oobn, _, _, err := unix.Recvmsg(s, ebuf, eoob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
				if err != nil {
					return
				}
				if id, ts, ok := txStamp(eoob[:oobn]); ok {
					txAt[id] = ts
				}
			}
		}
		// SCHED_FIFO: the probes leave on time whatever the bulk sender
		// does (it sleeps between probes, taking nothing from the bulk
		// sender)
		if err := realtime(0, probePrio, "the probe sender"); err != nil {
			return err
		}
		defer unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
		if err := begin(); err != nil {
			return err
		}
		every := time.Second / time.Duration(rate)
		start := time.Now()
		for next := start; time.Since(start) < d; next = next.Add(every) {
			if w := time.Until(next); w > 0 {
				ts := unix.NsecToTimespec(w.Nanoseconds())
				_ = unix.Nanosleep(&ts, nil)
			}
			binary.LittleEndian.PutUint64(payload, uint64(run.sent))
			binary.LittleEndian.PutUint64(payload[8:], uint64(time.Now().UnixNano()))
			if err := unix.Sendto(s, payload, 0, to); err != nil && !errors.Is(err, unix.ENOBUFS) {
				return err
			}
			run.sent++
			drain()
		}
		if err := end(); err != nil {
			return err
		}
		sleep(time.Millisecond)
		drain()
		return nil
	})
	done.Store(true)
	wg.Wait()
	if err == nil {
		err = rerr
	}
	run.received = len(rxAt)
	for seq, rx := range rxAt {
		tx, ok := txAt[seq]
		if !ok {
			run.unstamped++
			continue
		}
		run.lat = append(run.lat, float64(rx-tx)/1e3)
		run.send = append(run.send, float64(tx-userAt[seq])/1e3)
	}
	return run, err
}

// tsNanos is a struct timespec's nanoseconds.
func tsNanos(b []byte) int64 {
	return int64(binary.LittleEndian.Uint64(b[0:8]))*1e9 + int64(binary.LittleEndian.Uint64(b[8:16]))
}

// txStamp reads a transmit stamp from an error queue message's control
// data: the send's number (OPT_ID) and the software stamp.
func txStamp(oob []byte) (id uint64, ts int64, ok bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, 0, false
	}
	var haveID, haveTS bool
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPING && len(m.Data) >= 16:
			ts, haveTS = tsNanos(m.Data), true // ts[0]: the software stamp
		case m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_RECVERR && len(m.Data) >= int(unsafe.Sizeof(unix.SockExtendedErr{})):
			ee := (*unix.SockExtendedErr)(unsafe.Pointer(&m.Data[0]))
			if ee.Origin == unix.SO_EE_ORIGIN_TIMESTAMPING {
				id, haveID = uint64(ee.Data), true
			}
		}
	}
	return id, ts, haveID && haveTS
}

// latencyStats are p50, p99, p99.9, max and the jitter (mean absolute
// deviation from the mean) of lat.
func latencyStats(lat []float64) (p50, p99, p999, maxV, jitter float64) {
	if len(lat) == 0 {
		return
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	q := func(f float64) float64 { return s[min(len(s)-1, int(math.Ceil(f*float64(len(s))))-1)] }
	var mean float64
	for _, v := range s {
		mean += v
	}
	mean /= float64(len(s))
	for _, v := range s {
		jitter += math.Abs(v - mean)
	}
	return q(0.50), q(0.99), q(0.999), s[len(s)-1], jitter / float64(len(s))
}
