package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"golang.org/x/sys/unix"
)

// The paced bulk sender of `bench priority`: raw frames from an AF_PACKET
// socket on the generator's veth (the qdisc bypassed, sendmmsg), released
// by a Pacer in timed batches, so the bulk class offers a set rate, not
// whatever the sender reaches flat out.

// BulkRate is the bulk load of `bench priority --bulk-rate`: a fixed
// rate in packets per second, or a percentage of the calibrated capacity
// (what one receiving CPU judges per second of its time).
type BulkRate struct {
	PPS     float64 // packets per second, if > 0
	Percent float64 // else: percent of the capacity
}

// ParseBulkRate reads "150%" (percent of the calibrated capacity) or
// "300000" (packets per second; a k or M suffix multiplies by 1e3 or 1e6).
func ParseBulkRate(s string) (BulkRate, error) {
	t := strings.TrimSpace(s)
	bad := func(why string) (BulkRate, error) {
		return BulkRate{}, fmt.Errorf("bulk rate %q: %s (want a percentage of the calibrated capacity, e.g. 150%%, or packets per second, e.g. 300000 or 300k)", s, why)
	}
	pct := strings.HasSuffix(t, "%")
	mult := 1.0
	switch {
	case pct:
		t = strings.TrimSuffix(t, "%")
	case strings.HasSuffix(t, "k"):
		t, mult = strings.TrimSuffix(t, "k"), 1e3
	case strings.HasSuffix(t, "M"):
		t, mult = strings.TrimSuffix(t, "M"), 1e6
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return bad("not a number")
	}
	if v <= 0 {
		return bad("must be above 0")
	}
	if pct {
		return BulkRate{Percent: v}, nil
	}
	return BulkRate{PPS: v * mult}, nil
}

// String is the rate as ParseBulkRate reads it.
func (r BulkRate) String() string {
	if r.PPS > 0 {
		return strconv.FormatFloat(r.PPS, 'f', -1, 64)
	}
	return strconv.FormatFloat(r.Percent, 'f', -1, 64) + "%"
}

// Target is the rate in packets per second for a calibrated capacity.
func (r BulkRate) Target(capacity float64) float64 {
	if r.PPS > 0 {
		return r.PPS
	}
	return r.Percent / 100 * capacity
}

// Pacer is a paced sender's schedule: Rate packets per second from time
// 0, released in batches of at most Burst (the bucket's depth). A sender
// that falls behind by more than Burst (descheduled, or slower than the
// rate) does not catch up in one burst: the packets beyond it are Missed,
// and the offered rate shows the shortfall. Pure arithmetic: the caller
// brings the clock.
type Pacer struct {
	Rate     float64 // packets per second (> 0)
	Burst    uint64  // most packets released at once (>= 1)
	released uint64
	missed   uint64
}

// NewPacer is a Pacer at rate packets per second whose bursts hold at most
// what the rate makes in window (at least one packet).
func NewPacer(rate float64, window time.Duration) *Pacer {
	return &Pacer{Rate: rate, Burst: max(1, uint64(rate*window.Seconds()))}
}

// Due is how many packets to send at elapsed time t: the schedule's count
// by t less what was released or missed before, at most Burst. They count
// as released.
func (p *Pacer) Due(t time.Duration) uint64 {
	if t <= 0 {
		return 0
	}
	// float64 holds the count exactly up to 2^53 packets
	want := uint64(p.Rate * float64(t) / float64(time.Second))
	done := p.released + p.missed
	if want <= done {
		return 0
	}
	n := want - done
	if n > p.Burst {
		p.missed += n - p.Burst
		n = p.Burst
	}
	p.released += n
	return n
}

// Released is the packets Due handed out; Missed those it skipped.
func (p *Pacer) Released() uint64 { return p.released }
func (p *Pacer) Missed() uint64   { return p.missed }

// Next is the elapsed time at which the next packet is due, the earliest
// the sender needs to wake (at least after, so a sender always advances).
func (p *Pacer) Next(after time.Duration) time.Duration {
	next := p.released + p.missed + 1
	t := time.Duration(math.Ceil(float64(next) / p.Rate * float64(time.Second)))
	return max(t, after+1)
}

// bulkFlows is how many flows (source ports) the bulk frames cycle through.
const bulkFlows = 64

// pacedTick is the bulk sender's batch window: it wakes at most this
// often, and a batch holds what the rate makes in it (the burst's bound).
const pacedTick = 50 * time.Microsecond

// pacedSlack bounds how far a descheduled sender catches up at once: the
// packets due beyond it are missed, not sent in one burst.
const pacedSlack = 500 * time.Microsecond

// BulkSent is what a bulk run sent.
type BulkSent struct {
	Sent    uint64  // packets handed to the veth
	Missed  uint64  // packets the schedule skipped: the sender fell behind
	Refused uint64  // packets sendmmsg refused (ENOBUFS)
	Late    uint64  // live frames: packets sent more than a burst late (the schedule moved on)
	Secs    float64 // how long it ran
}

// Rate is the offered rate in packets per second.
func (b BulkSent) Rate() float64 {
	if b.Secs <= 0 {
		return 0
	}
	return float64(b.Sent) / b.Secs
}

// bulkLoad is a bulk sender: bulkFrames or bulkSocket.
type bulkLoad interface {
	run(rate float64, d time.Duration) (BulkSent, error)
}

// Bulk senders (--bulk-sender).
const (
	BulkFrames = "frames" // live frames from latgen (bulkFrames), the default
	BulkPacket = "packet" // an AF_PACKET socket paced by a Pacer (bulkSender)
)

// bulkSender sends the bulk frames from an AF_PACKET socket on the
// generator's veth.
type bulkSender struct {
	topo *Topology
	msgs []unix.Mmsghdr
	iovs []unix.Iovec
	bufs [][]byte
}

func newBulkSender(topo *Topology) (*bulkSender, error) {
	b := &bulkSender{topo: topo}
	dst := topo.DUTIf.Addr.Addr()
	for i := range bulkFlows {
		f, err := templateFrame(topo, dst, uint16(1024+i), 60) // the minimum Ethernet frame
		if err != nil {
			return nil, err
		}
		b.bufs = append(b.bufs, f)
	}
	b.iovs = make([]unix.Iovec, len(b.bufs))
	b.msgs = make([]unix.Mmsghdr, len(b.bufs))
	for i, f := range b.bufs {
		b.iovs[i].Base = &f[0]
		b.iovs[i].SetLen(len(f))
		b.msgs[i].Hdr.Iov = &b.iovs[i]
		b.msgs[i].Hdr.SetIovlen(1)
	}
	return b, nil
}

// run sends for d from a thread in the generator's namespace pinned to
// GenCPU, SCHED_FIFO (with priority on, the cpumap's kthread, which
// judges the bulk class on that CPU, runs while it sleeps), at rate
// packets per second (0: flat out, as fast as sendmmsg goes).
func (b *bulkSender) run(rate float64, d time.Duration) (res BulkSent, err error) {
	err = onGenCPU(b.topo, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol 0: send only
		if err != nil {
			return fmt.Errorf("bulk sender: AF_PACKET socket: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: b.topo.GenIf.Index}); err != nil {
			return fmt.Errorf("bulk sender: binding to %s: %w", b.topo.GenIf.Name, err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return fmt.Errorf("bulk sender: PACKET_QDISC_BYPASS: %w", err)
		}
		// the veth's queue (256 frames), not the socket's send buffer,
		// decides what is dropped, as a NIC's ring would
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 16<<20); err != nil {
			return fmt.Errorf("bulk sender: SO_SNDBUFFORCE: %w", err)
		}
		// SCHED_FIFO below the probe sender: on a shared machine a normal
		// thread gets what the scheduler leaves it, and the offered rate
		// would be other people's load's; it sleeps between batches
		if err := realtime(0, bulkPrio, "the bulk sender"); err != nil {
			return err
		}
		defer unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
		// wake on time (the default slack of a normal thread is 50 us)
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("bulk sender: timer slack: %w", err)
		}
		defer unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0) // back to the default
		var p *Pacer
		if rate > 0 {
			p = NewPacer(rate, pacedSlack)
		}
		next := 0 // the next frame (flow) to send
		send := func(n int) error {
			for n > 0 {
				k := min(n, len(b.msgs)-next)
				r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.msgs[next])), uintptr(k), unix.MSG_DONTWAIT, 0, 0)
				if e != 0 && e != unix.ENOBUFS && e != unix.EAGAIN {
					return fmt.Errorf("bulk sender: sendmmsg: %w", e)
				}
				if e != 0 { // the device refused the batch: counted, not retried
					res.Refused += uint64(k)
					r = uintptr(k)
				} else {
					res.Sent += uint64(r)
				}
				next = (next + int(r)) % len(b.msgs)
				n -= int(r)
			}
			return nil
		}
		start := monotonic()
		for {
			el := monotonic() - start
			if el >= d {
				break
			}
			if p == nil {
				if err := send(len(b.msgs)); err != nil {
					return err
				}
				continue
			}
			if n := p.Due(el); n > 0 {
				if err := send(int(n)); err != nil {
					return err
				}
			}
			// sleep to the next batch: a tick on, or the next packet's time
			wake := min(max(p.Next(monotonic()-start), el+pacedTick), d)
			ts := unix.NsecToTimespec(int64(start + wake))
			if err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
				return fmt.Errorf("bulk sender: sleeping: %w", err)
			}
		}
		res.Secs = (monotonic() - start).Seconds()
		if p != nil {
			res.Missed = p.Missed()
		}
		return nil
	})
	return res, err
}

// monotonic is CLOCK_MONOTONIC, the clock the bulk sender sleeps on.
func monotonic() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail for this clock
	return time.Duration(ts.Nano())
}

// bulkFrames sends the bulk frames as live frames (BPF_PROG_RUN in
// live-frames mode) from latgen (bpf/bench/latency.c), which paces them
// itself: packet k waits, spinning on the clock, until start + k/rate
// (only the first of each flush's burst waits), and a generator more
// than a burst late moves its schedule instead of catching up (counted
// late). The DUT receives them as a NIC's frames arrive, without the
// copy an skb from a socket costs the veth; the generator costs far less
// per packet than a socket, which is what lets one CPU offer more than
// the receiving CPU judges.
type bulkFrames struct {
	topo  *Topology
	objs  latbenchObjects
	frame []byte
	rate  float64 // flat out, as the last flat-out run reached (0: not yet)
}

func newBulkFrames(topo *Topology) (*bulkFrames, error) {
	spec, err := loadLatbench()
	if err != nil {
		return nil, fmt.Errorf("loading embedded latbench objects: %w", err)
	}
	spec.Maps["lat_aims"].MaxEntries = bulkFlows
	spec.Maps["lat_samples"].MaxEntries = 1 // the sink's; not used here
	if err := spec.Variables["gen_ifindex"].Set(uint32(topo.GenIf.Index)); err != nil {
		return nil, err
	}
	b := &bulkFrames{topo: topo}
	if err := spec.LoadAndAssign(&b.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the verifier rejected latgen: %+v", ve)
		}
		return nil, fmt.Errorf("loading latgen: %w", err)
	}
	if b.frame, err = templateFrame(topo, topo.DUTIf.Addr.Addr(), 1024, 60); err != nil {
		b.Close()
		return nil, err
	}
	var head latbenchLatHead
	for i := range head.W {
		head.W[i] = binary.NativeEndian.Uint64(b.frame[8*i:])
	}
	src := TrafficSrc.Addr().As4()
	keys, aims := make([]uint32, bulkFlows), make([]latbenchLatAim, bulkFlows)
	for i := range aims {
		keys[i] = uint32(i)
		aims[i] = latbenchLatAim{Saddr: binary.NativeEndian.Uint32(src[:]),
			Sport: bits.ReverseBytes16(uint16(1024 + i)), Dport: bits.ReverseBytes16(prioBulkPort)}
	}
	if err := b.objs.LatTmpl.Put(uint32(0), head); err != nil {
		b.Close()
		return nil, fmt.Errorf("writing the frame template: %w", err)
	}
	if _, err := b.objs.LatAims.BatchUpdate(keys, aims, nil); err != nil {
		b.Close()
		return nil, fmt.Errorf("writing the bulk flows: %w", err)
	}
	return b, nil
}

func (b *bulkFrames) Close() { b.objs.Close() }

// run sends for about d at rate packets per second (0: flat out) from a
// thread pinned to GenCPU.
func (b *bulkFrames) run(rate float64, d time.Duration) (res BulkSent, err error) {
	n := rate * d.Seconds()
	burst := latBurst(rate)
	if rate == 0 { // flat out: sized by the last flat-out run, or a first guess
		n, burst = max(b.rate, 2e6)*d.Seconds(), 64
	}
	c := latbenchLatCtl{Aims: bulkFlows, Burst: burst}
	if rate > 0 {
		c.Interval = uint64(1e9 / rate)
	}
	if err := b.objs.LatCtlMap.Put(uint32(0), c); err != nil {
		return res, err
	}
	count := uint32(min(max(n, 1), 1<<31))
	ran, err := liveRuns(b.topo, b.objs.Latgen, b.frame, burst, func(run func(uint32) error) error {
		// SCHED_FIFO below the probe sender: a normal thread gets what
		// the scheduler leaves it on a shared machine. Between bursts it
		// spins in the kernel, so that CPU's normal threads (the cpumap's
		// kthread) run only when the fair server lets them (5 %).
		if err := realtime(0, bulkPrio, "the bulk generator"); err != nil {
			return err
		}
		defer unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
		return run(count)
	})
	if err != nil {
		return res, err
	}
	if err := b.objs.LatCtlMap.Lookup(uint32(0), &c); err != nil {
		return res, err
	}
	res = BulkSent{Sent: uint64(count), Late: c.Late, Secs: ran.Seconds()}
	if rate == 0 {
		b.rate = res.Rate()
	}
	return res, nil
}

// Priorities (SCHED_FIFO) of the priority bench's threads: the DUT's
// NAPI thread on DUTCPU; on GenCPU the probe sender above the bulk
// sender (which spins or sends flat out). The bench's other threads are
// normal ones: with priority off and bulk above capacity both CPUs are
// busy with real-time threads and they wait (for the kernel's fair
// server, 5 % of a CPU), so nothing timed is left to them: the probe
// sender starts and ends the measured window itself.
const (
	bulkPrio    = 30
	probePrio   = 40
	dutNAPIPrio = 50
)
