package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// The priority benchmark (docs/realtime.md, Priority): the one-way
// latency of a high-priority UDP flow through xdpfw while bulk UDP offers
// more than the receiving CPU can judge, with the priority table's bulk
// CPUs on and off. Topology (NewTopology): the generator's namespace sends
// both flows from GenCPU over the veth; the DUT's veth runs xdpfw in native
// mode, its NAPI thread pinned to DUTCPU (the receiving CPU); the bulk CPU
// is GenCPU (a 2-CPU machine has no third). Each probe carries the time
// it was sent (CLOCK_REALTIME, just before sendto); the DUT's socket
// reads the time the kernel stamped it on receipt (SO_TIMESTAMPNS, taken
// after XDP judged it): the latency is the queueing behind bulk on the
// receiving CPU plus the judgment, plus the constant cost of the send.

const (
	prioProbePort = 7 // the HIGH flow (echo's port; nobody answers)
	prioBulkPort  = 9 // the BULK flow (discard)
)

// PriorityOptions set up the priority benchmark.
type PriorityOptions struct {
	Duration  time.Duration // each phase, all its slices together (0: 10 s)
	ProbeRate int           // probes per second (0: 2000)
	Overload  float64       // bulk offered, as a multiple of what the receiving CPU judges (0: 1.5)
	Rules     int           // filler rules before the accepting ones (0: 1000)
	Rounds    int           // slices each phase is measured in, interleaved with the others' (0: 10)
	Progress  io.Writer
}

// PriorityPhase is one measurement.
type PriorityPhase struct {
	Name        string  `json:"name"`
	Priority    bool    `json:"priority"`     // bulk handed to the bulk CPU
	BulkOffered float64 `json:"bulk_offered"` // bulk packets sent per second
	Judged      float64 `json:"judged"`       // packets xdpfw judged per second (both CPUs)
	Probes      int     `json:"probes"`       // probes sent
	Lost        int     `json:"lost"`         // probes not received
	P50         float64 `json:"p50_us"`
	P99         float64 `json:"p99_us"`
	P999        float64 `json:"p99_9_us"`
	Max         float64 `json:"max_us"`
	Jitter      float64 `json:"jitter_us"` // mean absolute deviation from the mean
}

// PriorityResult is the benchmark's report.
type PriorityResult struct {
	Rules      int             `json:"rules"`
	GenCPU     int             `json:"generator_cpu"`  // the senders and the bulk CPU
	DUTCPU     int             `json:"dut_cpu"`        // the receiving CPU
	Capacity   float64         `json:"capacity_pps"`   // bulk packets per second the receiving CPU judges, priority off
	SenderMax  float64         `json:"sender_max_pps"` // what the bulk sender used offers at most
	Generator  bool            `json:"generator"`      // bulk from the live-frames generator (flat out), not paced sockets
	Overloaded bool            `json:"overloaded"`     // the sender reached Overload x Capacity
	Phases     []PriorityPhase `json:"phases"`
	// Ratio is the HIGH flow's p99 under overload with priority on over
	// its p99 without bulk with priority on (the bar: <= 1.5); RatioOff the
	// same with priority off.
	Ratio    float64 `json:"ratio"`
	RatioOff float64 `json:"ratio_off"`
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
	if opt.Overload == 0 {
		opt.Overload = 1.5
	}
	if opt.Rules == 0 {
		opt.Rules = 1000
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
	res = &PriorityResult{Rules: opt.Rules, GenCPU: topo.GenCPU, DUTCPU: topo.DUTCPU}
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
	if err := realtime(napi, 50, "the DUT's NAPI thread"); err != nil {
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

	judged := func() (uint64, error) {
		rc, err := dp.ReasonCounters()
		var n uint64
		for _, c := range rc {
			n += c.Packets
		}
		return n, err
	}
	// Bulk: UDP sockets paced at Overload x the capacity where they get
	// there, else the live-frames generator (a new flow each packet), flat
	// out. Capacity: what the receiving CPU judges under the generator's
	// flood, priority off.
	gen, err := NewGenerator(topo, 0)
	if err != nil {
		return nil, err
	}
	defer gen.Close()
	frame, err := gen.Frame(MinFrameSize)
	if err != nil {
		return nil, err
	}
	say("calibrating: bulk flat out, priority off")
	measure := func(send func() (uint64, float64, error)) (offered, judgedRate float64, err error) {
		j0, err := judged()
		if err != nil {
			return 0, 0, err
		}
		sent, secs, err := send()
		if err != nil {
			return 0, 0, err
		}
		j1, err := judged()
		return float64(sent) / secs, float64(j1-j0) / secs, err
	}
	genSend := func(d time.Duration) func() (uint64, float64, error) {
		return func() (uint64, float64, error) {
			s0, err := gen.Sent()
			if err != nil {
				return 0, 0, err
			}
			ran, err := gen.Run(context.Background(), frame, d)
			if err != nil {
				return 0, 0, err
			}
			s1, err := gen.Sent()
			return s1 - s0, ran.Seconds(), err
		}
	}
	var genMax float64
	if genMax, res.Capacity, err = measure(genSend(2 * time.Second)); err != nil {
		return nil, err
	}
	sockMax, _, err := measure(func() (uint64, float64, error) { return prioBulk(topo, dst, 0, time.Second) })
	if err != nil {
		return nil, err
	}
	say("  xdpfw judged %.0f pkt/s on CPU %d; the generator offers %.0f pkt/s, UDP sockets %.0f", res.Capacity, topo.DUTCPU, genMax, sockMax)
	bulkRate := opt.Overload * res.Capacity
	useGen := sockMax < 0.95*bulkRate
	res.SenderMax, res.Generator = sockMax, useGen
	if useGen {
		res.SenderMax = genMax
		say("  bulk: the generator, flat out (%.1fx what the receiving CPU judges; sockets reach only %.1fx)", genMax/res.Capacity, sockMax/res.Capacity)
	}
	res.Overloaded = res.SenderMax >= 0.95*bulkRate

	// The four phases interleaved, Rounds slices each, so that the
	// machine's own load (other work on a shared host) falls on all four
	// alike; each phase's samples are pooled.
	phases := []struct {
		name     string
		priority bool
		bulk     bool
	}{{"no bulk, priority off", false, false}, {"no bulk, priority on", true, false},
		{"overload, priority off", false, true}, {"overload, priority on", true, true}}
	slice := opt.Duration / time.Duration(opt.Rounds)
	lats := make([][]float64, len(phases))
	res.Phases = make([]PriorityPhase, len(phases))
	var bulkSecs [4]float64
	var bulkSent [4]uint64
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
			j0, err := judged()
			if err != nil {
				return nil, err
			}
			var wg sync.WaitGroup
			var sent uint64
			var secs float64
			var bulkErr error
			if ph.bulk {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if useGen {
						sent, secs, bulkErr = genSend(slice + 200*time.Millisecond)()
					} else {
						sent, secs, bulkErr = prioBulk(topo, dst, bulkRate, slice+200*time.Millisecond)
					}
				}()
				time.Sleep(100 * time.Millisecond) // the queues fill
			}
			lat, probes, err := prioProbe(topo, dst, probe, opt.ProbeRate, slice)
			wg.Wait()
			if err == nil {
				err = bulkErr
			}
			if err != nil {
				return nil, err
			}
			j1, err := judged()
			if err != nil {
				return nil, err
			}
			bulkSent[k] += sent
			bulkSecs[k] += secs
			p.Judged += float64(j1-j0) / opt.Duration.Seconds()
			p.Probes += probes
			p.Lost += probes - len(lat)
			lats[k] = append(lats[k], lat...)
		}
		say("  round %d/%d", round+1, opt.Rounds)
	}
	for k := range res.Phases {
		p := &res.Phases[k]
		if bulkSecs[k] > 0 {
			p.BulkOffered = float64(bulkSent[k]) / bulkSecs[k]
		}
		p.P50, p.P99, p.P999, p.Max, p.Jitter = latencyStats(lats[k])
		say("  %-24s bulk %9.0f pkt/s  probes %6d lost %5d  p50 %7.1f us  p99 %7.1f us  p99.9 %7.1f us  max %8.1f us",
			p.Name, p.BulkOffered, p.Probes, p.Lost, p.P50, p.P99, p.P999, p.Max)
	}
	if err := dp.SetPriority(nil); err != nil {
		return nil, err
	}
	res.RatioOff = res.Phases[2].P99 / res.Phases[0].P99
	res.Ratio = res.Phases[3].P99 / res.Phases[1].P99
	return res, nil
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

// prioBulk sends bulk UDP to dst:prioBulkPort for d, at rate packets per
// second (0: as fast as it goes), from 64 sockets (source ports), and
// returns how many it sent and for how long.
func prioBulk(topo *Topology, dst [4]byte, rate float64, d time.Duration) (sent uint64, secs float64, err error) {
	err = onGenCPU(topo, func() error {
		var fds []int
		defer func() {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}()
		for range 64 {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			fds = append(fds, fd)
		}
		to := &unix.SockaddrInet4{Port: prioBulkPort, Addr: dst}
		payload := make([]byte, 18) // 64-byte frames
		start := time.Now()
		const tick = 200 * time.Microsecond
		for next := start; time.Since(start) < d; {
			n := 64
			if rate > 0 {
				n = max(1, int(rate*tick.Seconds()))
			}
			for i := range n {
				if err := unix.Sendto(fds[i%len(fds)], payload, 0, to); err != nil && !errors.Is(err, unix.ENOBUFS) {
					return err
				}
				sent++
			}
			if rate > 0 {
				next = next.Add(tick)
				if w := time.Until(next); w > 0 {
					ts := unix.NsecToTimespec(w.Nanoseconds())
					_ = unix.Nanosleep(&ts, nil)
				}
			}
		}
		secs = time.Since(start).Seconds()
		return nil
	})
	return sent, secs, err
}

// prioProbe sends probes to dst:prioProbePort at rate for d and reads
// them back from fd: the one-way latencies in microseconds, and how many
// were sent.
func prioProbe(topo *Topology, dst [4]byte, fd int, rate int, d time.Duration) ([]float64, int, error) {
	var (
		lat   []float64
		done  atomic.Bool
		rerr  error
		wg    sync.WaitGroup
		count int
	)
	// drain what an earlier phase left
	buf, oob := make([]byte, 64), make([]byte, 128)
	for {
		if _, _, _, _, err := unix.Recvmsg(fd, buf, oob, 0); err != nil {
			break
		}
	}
	wg.Add(1)
	go func() { // the reader: any CPU (the stamp is the kernel's)
		defer wg.Done()
		idle := 0
		for {
			n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
			if errors.Is(err, unix.EAGAIN) {
				if done.Load() {
					if idle++; idle > 200 {
						return
					}
				}
				time.Sleep(500 * time.Microsecond)
				continue
			}
			if err != nil {
				rerr = err
				return
			}
			idle = 0
			if n < 8 {
				continue
			}
			sentAt := int64(binary.LittleEndian.Uint64(buf[:8]))
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				continue
			}
			for _, m := range msgs {
				if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
					sec := int64(binary.LittleEndian.Uint64(m.Data[0:8]))
					nsec := int64(binary.LittleEndian.Uint64(m.Data[8:16]))
					lat = append(lat, float64(sec*1e9+nsec-sentAt)/1e3)
				}
			}
		}
	}()
	err := onGenCPU(topo, func() error {
		s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(s)
		to := &unix.SockaddrInet4{Port: prioProbePort, Addr: dst}
		payload := make([]byte, 18)
		// SCHED_FIFO between the stamp and the send: a preemption there
		// would count as latency (it sleeps between probes, taking
		// nothing from the bulk sender)
		if err := realtime(0, 40, "the probe sender"); err != nil {
			return err
		}
		defer unix.SchedSetAttr(0, &unix.SchedAttr{Policy: 0}, 0) // back to SCHED_OTHER
		every := time.Second / time.Duration(rate)
		start := time.Now()
		for next := start; time.Since(start) < d; next = next.Add(every) {
			if w := time.Until(next); w > 0 {
				ts := unix.NsecToTimespec(w.Nanoseconds())
				_ = unix.Nanosleep(&ts, nil)
			}
			binary.LittleEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
			if err := unix.Sendto(s, payload, 0, to); err != nil && !errors.Is(err, unix.ENOBUFS) {
				return err
			}
			count++
		}
		return nil
	})
	done.Store(true)
	wg.Wait()
	if err == nil {
		err = rerr
	}
	return lat, count, err
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
