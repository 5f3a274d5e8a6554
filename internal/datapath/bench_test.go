package datapath_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// BenchmarkClassify measures the program's ns/packet with
// BPF_PROG_TEST_RUN for N rules where only the last one matches (and for a
// packet that matches none and falls to the policy). Run with
//
//	go test -run '^$' -bench Classify ./internal/datapath/
//
// The decision-tree classifier's cost should not grow with N.
func BenchmarkClassify(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000, 10000, 100000} {
		var sb strings.Builder
		sb.WriteString("-P INPUT DROP\n")
		for i := 0; i < n-1; i++ {
			fmt.Fprintf(&sb, "-A INPUT -s 10.%d.%d.0/24 -p udp --dport %d -j ACCEPT\n", (i/250)%250, i%250, 1000+i%5000)
		}
		sb.WriteString("-A INPUT -s 192.0.2.0/24 -p udp --dport 53 -j ACCEPT\n")
		for _, c := range []struct {
			name string
			src  string
		}{{"last-rule", "192.0.2.7"}, {"no-match", "198.51.100.7"}} {
			b.Run(fmt.Sprintf("rules=%d/%s", n, c.name), func(b *testing.B) {
				f := newFixtureLimits(b, datapath.LimitsFor(max(n, 16384)))
				f.installText(sb.String())
				frame := v4pkt(packet.ProtoUDP, c.src, "10.255.0.1", 40000, 53).Bytes()
				var per time.Duration
				err := f.ns.Do(func() error {
					var err error
					_, per, err = f.dp.Program().Benchmark(frame, b.N, nil)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(per.Nanoseconds()), "ns/pkt")
			})
		}
	}
}
