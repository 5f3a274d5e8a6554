package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestPacerSchedule: the packets released by any elapsed time are the
// rate's count by then, exactly, however the calls fall (no drift from
// rounding each batch), and none are released twice.
func TestPacerSchedule(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		step time.Duration
	}{
		{1000, 333 * time.Microsecond},
		{1_100_000, 50 * time.Microsecond},
		{1_100_000, 37 * time.Microsecond},
		{7, 13 * time.Millisecond},
		{2_000_000, time.Microsecond},
	} {
		p := &Pacer{Rate: tc.rate, Burst: 1 << 40}
		var total uint64
		for el := time.Duration(0); el <= 2*time.Second; el += tc.step {
			total += p.Due(el)
			want := uint64(tc.rate * float64(el) / float64(time.Second))
			if total != want {
				t.Fatalf("rate %v, steps of %v: %d released by %v, want %d", tc.rate, tc.step, total, el, want)
			}
		}
		total += p.Due(2 * time.Second)
		if got, want := total, uint64(tc.rate*2); got != want {
			t.Errorf("rate %v, steps of %v: %d released in 2 s, want %d", tc.rate, tc.step, got, want)
		}
		if p.Released() != total || p.Missed() != 0 {
			t.Errorf("rate %v: Released %d Missed %d, want %d and 0", tc.rate, p.Released(), p.Missed(), total)
		}
	}
}

// TestPacerBurst: a sender that wakes late gets at most Burst at once;
// the rest is missed (counted), not sent later as a burst, and the
// schedule goes on from where it stands.
func TestPacerBurst(t *testing.T) {
	p := NewPacer(1_000_000, 500*time.Microsecond)
	if p.Burst != 500 {
		t.Fatalf("Burst %d, want 500 (1 Mpkt/s over 0.5 ms)", p.Burst)
	}
	if n := p.Due(100 * time.Microsecond); n != 100 {
		t.Fatalf("Due(100us) = %d, want 100", n)
	}
	// descheduled for 10 ms
	if n := p.Due(10*time.Millisecond + 100*time.Microsecond); n != 500 {
		t.Fatalf("Due after a 10 ms stall = %d, want the burst, 500", n)
	}
	if got, want := p.Missed(), uint64(10_000-500); got != want {
		t.Fatalf("Missed %d, want %d", got, want)
	}
	// on schedule again: 50 us later, 50 packets
	if n := p.Due(10*time.Millisecond + 150*time.Microsecond); n != 50 {
		t.Fatalf("Due 50 us after catching up = %d, want 50", n)
	}
	if got, want := p.Released()+p.Missed(), uint64(10_150); got != want {
		t.Fatalf("released+missed %d, want the schedule's %d", got, want)
	}
	// asking again at the same time, or earlier, releases nothing
	if n := p.Due(10*time.Millisecond + 150*time.Microsecond); n != 0 {
		t.Fatalf("Due twice at one time: %d the second time", n)
	}
	if n := p.Due(time.Millisecond); n != 0 {
		t.Fatalf("Due at an earlier time: %d", n)
	}
	// a slow rate still releases one packet at a time
	if q := NewPacer(10, 50*time.Microsecond); q.Burst != 1 {
		t.Fatalf("Burst %d at 10 pkt/s over 50 us, want 1", q.Burst)
	}
}

// TestPacerNext: the sender wakes when the next packet is due, never at
// or before the time it asks at.
func TestPacerNext(t *testing.T) {
	p := &Pacer{Rate: 1000, Burst: 1000}
	if got := p.Next(0); got != time.Millisecond {
		t.Fatalf("Next before any packet: %v, want 1ms (packet 1's time)", got)
	}
	p.Due(5500 * time.Microsecond) // packets 1..5
	if got := p.Next(5500 * time.Microsecond); got != 6*time.Millisecond {
		t.Fatalf("Next after 5 packets: %v, want 6ms", got)
	}
	// behind schedule: the next packet was due already; wake just after now
	if got := p.Next(8 * time.Millisecond); got != 8*time.Millisecond+1 {
		t.Fatalf("Next when behind: %v, want just after 8ms", got)
	}
}

func TestParseBulkRate(t *testing.T) {
	for in, want := range map[string]BulkRate{
		"150%":   {Percent: 150},
		" 75.5%": {Percent: 75.5},
		"300000": {PPS: 300000},
		"300k":   {PPS: 300000},
		"1.2M":   {PPS: 1200000},
	} {
		got, err := ParseBulkRate(in)
		if err != nil || got != want {
			t.Errorf("ParseBulkRate(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, err := ParseBulkRate(got.String()); err != nil || back != got {
			t.Errorf("ParseBulkRate(%q.String() = %q) = %+v, %v", in, got.String(), back, err)
		}
	}
	for _, in := range []string{"", "%", "0", "0%", "-5%", "-1", "fast", "1.5x", "NaN", "Inf%", "10kk"} {
		if r, err := ParseBulkRate(in); err == nil {
			t.Errorf("ParseBulkRate(%q) = %+v, want an error", in, r)
		}
	}
	if got := (BulkRate{Percent: 150}).Target(700_000); got != 1_050_000 {
		t.Errorf("150%% of 700,000 pkt/s = %v", got)
	}
	if got := (BulkRate{PPS: 5000}).Target(700_000); got != 5000 {
		t.Errorf("5000 pkt/s at a capacity of 700,000 = %v", got)
	}
}

// TestAdjustAsk: a sender that delivered less than the target is asked
// for more next time, in proportion, within [target, 2 x target].
func TestAdjustAsk(t *testing.T) {
	for _, tc := range []struct{ ask, target, got, want float64 }{
		{1000, 1000, 800, 1250},  // 80 % arrived: ask 1/0.8 more
		{1250, 1000, 1000, 1250}, // on target: keep asking as much
		{1250, 1000, 1100, 1136.3636363636363},
		{1000, 1000, 1200, 1000}, // above target: never below it
		{1000, 1000, 100, 2000},  // a stalled slice: at most twice
		{1300, 1000, 0, 1300},    // nothing arrived: nothing to scale by
	} {
		if got := adjustAsk(tc.ask, tc.target, tc.got); got != tc.want {
			t.Errorf("adjustAsk(%v, %v, %v) = %v, want %v", tc.ask, tc.target, tc.got, got, tc.want)
		}
	}
}

// TestPriorityQuick runs the priority benchmark briefly at a light bulk
// load, with each sender, and checks what it claims, not its timing:
// every probe received carries its veth transmit stamp (the latency's
// start), no probe is lost at a light load, the bulk phases' offered rate
// is what arrived at the DUT veth and the others' is zero, the capacity
// was calibrated, and nothing is left behind.
func TestPriorityQuick(t *testing.T) {
	testutil.RequireRoot(t)
	for _, sender := range []string{BulkFrames, BulkPacket} {
		t.Run(sender, func(t *testing.T) {
			var progress bytes.Buffer
			res, err := Priority(PriorityOptions{Duration: 400 * time.Millisecond, Rounds: 2, ProbeRate: 500,
				BulkRate: BulkRate{PPS: 20000}, Sender: sender, Rules: 10, Progress: &progress})
			if err != nil {
				t.Fatalf("%v\nprogress:\n%s", err, progress.String())
			}
			if l := leftovers(t); len(l) > 0 {
				t.Errorf("left behind: %v", l)
			}
			if res.Capacity <= 0 || res.SenderMax <= 0 || res.Target != 20000 || res.Sender != sender {
				t.Fatalf("calibration: %+v", res)
			}
			if len(res.Phases) != 4 {
				t.Fatalf("%d phases, want 4", len(res.Phases))
			}
			// a pooled quantile lies between the two samples' own
			if q, a, b := res.QuietP99, res.Phases[0].P99, res.Phases[1].P99; q < min(a, b) || q > max(a, b) {
				t.Errorf("p99 of both phases without bulk pooled %.1f us, not between theirs, %.1f and %.1f", q, a, b)
			}
			for i, p := range res.Phases {
				bulk := i >= 2
				if p.Probes < 150 || p.Lost != 0 || p.Unstamped != 0 {
					t.Errorf("%s: %d probes, %d lost, %d without a transmit stamp (want >= 150, 0, 0)\n%s", p.Name, p.Probes, p.Lost, p.Unstamped, progress.String())
				}
				if !(p.P50 > 0 && p.P50 <= p.P99 && p.P99 <= p.P999 && p.P999 <= p.Max) {
					t.Errorf("%s: statistics out of order: %+v", p.Name, p)
				}
				if bulk != (p.BulkOffered > 0) || bulk && (p.BulkOffered > 3*res.Target || p.BulkSent <= 0) {
					t.Errorf("%s: bulk offered %.0f pkt/s, sent %.0f (target %.0f)", p.Name, p.BulkOffered, p.BulkSent, res.Target)
				}
			}
		})
	}
}
