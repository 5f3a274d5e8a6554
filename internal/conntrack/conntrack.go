// Package conntrack holds the control plane's side of connection tracking:
// the connection states, timeout classes and event counters the data plane
// uses (mirrors of bpf/types.h), connections as Go values, and the timeout
// settings operators give on the command line. Reading and writing the
// kernel table is internal/datapath's job (ct.go); this package is pure Go.
package conntrack

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// State is enum fw_ct_conn: where a tracked connection is.
type State uint8

const (
	StateNone State = iota
	StateSynSent
	StateSynSent2
	StateSynRecv
	StateEstablished
	StateFinWait
	StateLastAck
	StateTimeWait
	StateClose
	StateUnreplied
	StateReplied
	NumStates
)

var stateNames = [NumStates]string{"NONE", "SYN_SENT", "SYN_SENT2", "SYN_RECV", "ESTABLISHED", "FIN_WAIT",
	"LAST_ACK", "TIME_WAIT", "CLOSE", "UNREPLIED", "REPLIED"}

func (s State) String() string {
	if s < NumStates {
		return stateNames[s]
	}
	return fmt.Sprintf("state%d", uint8(s))
}

// Timeout classes (enum fw_ct_timeout), in order.
const (
	TimeoutTCPSynSent = iota
	TimeoutTCPSynRecv
	TimeoutTCPEstablished
	TimeoutTCPFinWait
	TimeoutTCPLastAck
	TimeoutTCPTimeWait
	TimeoutTCPClose
	TimeoutUDP
	TimeoutUDPStream
	TimeoutICMP
	TimeoutOther
	NumTimeouts
)

// TimeoutNames are the names `--ct-timeout NAME=SECONDS` takes, in class order.
var TimeoutNames = [NumTimeouts]string{"tcp_syn_sent", "tcp_syn_recv", "tcp_established", "tcp_fin_wait",
	"tcp_last_ack", "tcp_time_wait", "tcp_close", "udp", "udp_stream", "icmp", "other"}

// DefaultTimeouts are the data plane's defaults in seconds (lib/ct.h
// fw_ct_default_timeout), close to Linux nf_conntrack's.
var DefaultTimeouts = [NumTimeouts]uint32{120, 60, 432000, 120, 30, 120, 10, 30, 120, 30, 600}

// Timeouts are seconds per class; 0 means the default.
type Timeouts [NumTimeouts]uint32

// ParseTimeouts reads NAME=SECONDS settings (e.g. "tcp_established=3600").
func ParseTimeouts(specs []string) (Timeouts, error) {
	var t Timeouts
	for _, s := range specs {
		name, val, ok := strings.Cut(s, "=")
		if !ok {
			return t, fmt.Errorf("--ct-timeout %q: want NAME=SECONDS (names: %s)", rules.Clip(s), strings.Join(TimeoutNames[:], ", "))
		}
		i := -1
		for k, n := range TimeoutNames {
			if n == name {
				i = k
			}
		}
		if i < 0 {
			return t, fmt.Errorf("--ct-timeout %q: unknown timeout %q (names: %s)", rules.Clip(s), rules.Clip(name), strings.Join(TimeoutNames[:], ", "))
		}
		secs, err := strconv.ParseUint(val, 10, 32)
		if err != nil || secs == 0 {
			return t, fmt.Errorf("--ct-timeout %q: seconds must be a positive whole number", rules.Clip(s))
		}
		t[i] = uint32(secs)
	}
	return t, nil
}

// Effective returns the timeouts in force: the defaults where t has 0.
func (t Timeouts) Effective() Timeouts {
	for i := range t {
		if t[i] == 0 {
			t[i] = DefaultTimeouts[i]
		}
	}
	return t
}

// Map is t by name (for JSON and status output).
func (t Timeouts) Map() map[string]uint32 {
	m := make(map[string]uint32, NumTimeouts)
	for i, v := range t {
		m[TimeoutNames[i]] = v
	}
	return m
}

// Stat counters (enum fw_ct_stat), in order.
const (
	StatCreated = iota
	StatTableFull
	StatInvalid
	StatExpired
	StatEarlyDrop
	StatPickup
	StatFragTracked
	StatFragUnknown
	StatFragExpired
	StatFragOverlap
	StatKernelNAT
	NumStats
)

// StatNames name the counters, in order: entries created; NEW connections
// refused (table full of assured connections); INVALID packets; expired
// entries the data plane replaced or removed (the name is older than the
// removal); not-assured entries evicted for a new connection; TCP
// connections picked up mid-stream; fragmented datagrams whose first
// fragment's verdict was recorded; later fragments of no recorded datagram
// (dropped), of which those whose entry had expired; later fragments
// overlapping their first fragment (dropped, with their datagram). See
// docs/fragments.md. kernel_nat: packets judged with the kernel's
// conntrack, their connection translated by the kernel's nat table
// (docs/conntrack.md "Kernel NAT").
var StatNames = [NumStats]string{"created", "table_full", "invalid", "expired_replaced", "early_drop", "picked_up",
	"frag_tracked", "frag_unknown", "frag_expired", "frag_overlap", "kernel_nat"}

// Stats is what `xdpfw conntrack stats` reports.
type Stats struct {
	Entries   int               `json:"entries"`
	Max       int               `json:"max"`
	ByState   map[string]int    `json:"by_state"`
	Expired   int               `json:"expired_not_collected"`
	Counters  map[string]uint64 `json:"counters"`
	Timeouts  map[string]uint32 `json:"timeouts_seconds"`
	FullDrops uint64            `json:"-"`
}

// Entry is one tracked connection, oriented as its first packet went.
type Entry struct {
	Proto    uint8          `json:"proto"`
	Src      netip.AddrPort `json:"src"` // the originator
	Dst      netip.AddrPort `json:"dst"`
	State    State          `json:"-"`
	StateStr string         `json:"state"`
	Replied  bool           `json:"replied"`
	Assured  bool           `json:"assured"`   // a real two-way connection: never evicted from a full table
	PickedUp bool           `json:"picked_up"` // TCP picked up mid-stream (no handshake seen)
	Expires  time.Duration  `json:"-"`         // from now; <= 0: expired, not yet collected
	TTL      int64          `json:"expires_in_seconds"`
	RuleID   uint32         `json:"rule_id"`
	Chain    uint8          `json:"-"`
	Packets  [2]uint64      `json:"packets"` // original, reply
	Bytes    [2]uint64      `json:"bytes"`
	// NAT: the connection's reply tuple where xdpfw translates it
	// (`--nat xdpfw`, docs/nat.md), as the kernel's `conntrack -L` shows
	// its second tuple; nil when it is not translated.
	NAT *NATReply `json:"nat,omitempty"`
}

// NATReply is a translated connection's reply tuple: the answers come
// from Src to Dst (for SNAT and MASQUERADE, Dst is the translated source;
// for DNAT and REDIRECT, Src is the translated destination, which the
// entry's Dst is too). OrigDst: with DNAT, the destination the client
// sent to (the kernel's original tuple's).
type NATReply struct {
	Src     netip.AddrPort `json:"reply_src"`
	Dst     netip.AddrPort `json:"reply_dst"`
	OrigDst netip.AddrPort `json:"orig_dst,omitzero"`
	Kind    string         `json:"kind"` // "SNAT", "DNAT", "SNAT,DNAT"
}

// ProtoName names an IP protocol number for listings.
func ProtoName(p uint8) string {
	switch p {
	case 1:
		return "icmp"
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 58:
		return "icmpv6"
	case 132:
		return "sctp"
	case 136:
		return "udplite"
	}
	return strconv.Itoa(int(p))
}

func (e Entry) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-7s %-11s ", ProtoName(e.Proto), e.State)
	switch e.Proto {
	case 1, 58:
		fmt.Fprintf(&b, "src=%s dst=%s id=%d", e.Src.Addr(), e.Dst.Addr(), e.Src.Port())
	default:
		fmt.Fprintf(&b, "src=%s dst=%s", e.Src, e.Dst)
	}
	if !e.Replied {
		b.WriteString(" [UNREPLIED]")
	}
	if e.Assured {
		b.WriteString(" [ASSURED]")
	}
	if e.PickedUp {
		b.WriteString(" [PICKED UP]")
	}
	if n := e.NAT; n != nil {
		if n.OrigDst.IsValid() && e.Proto == 1 {
			fmt.Fprintf(&b, " orig-dst=%s", n.OrigDst.Addr())
		} else if n.OrigDst.IsValid() {
			fmt.Fprintf(&b, " orig-dst=%s", n.OrigDst)
		}
		if e.Proto == 1 {
			fmt.Fprintf(&b, " reply: src=%s dst=%s id=%d [%s]", n.Src.Addr(), n.Dst.Addr(), n.Dst.Port(), n.Kind)
		} else {
			fmt.Fprintf(&b, " reply: src=%s dst=%s [%s]", n.Src, n.Dst, n.Kind)
		}
	}
	fmt.Fprintf(&b, " packets=%d/%d bytes=%d/%d expires=%ds rule=%d", e.Packets[0], e.Packets[1],
		e.Bytes[0], e.Bytes[1], int64(e.Expires.Round(time.Second)/time.Second), e.RuleID)
	return b.String()
}

// Sort orders entries by protocol, originator and responder (stable listings).
func Sort(es []Entry) {
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		if c := a.Src.Compare(b.Src); c != 0 {
			return c < 0
		}
		return a.Dst.Compare(b.Dst) < 0
	})
}
