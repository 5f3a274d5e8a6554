package packet

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestDecodeCut decodes every prefix of random frames, as a snap length
// cuts them: the whole frame decodes as Decode does; a cut frame never
// fails but for ErrTruncated (or Decode's own errors), and whatever it
// reports — addresses, protocol, ports, flags, ICMP type — is the packet's.
func TestDecodeCut(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	cuts, withPorts := 0, 0
	for i := range 1500 {
		p := randPacket(r, genOptions{wellFormed: true})
		frame := p.Bytes()
		whole, err := Decode(frame)
		if err != nil {
			t.Fatalf("packet %d %v: Decode: %v", i, p, err)
		}
		if got, err := DecodeCut(frame); err != nil || !reflect.DeepEqual(got, whole) {
			t.Fatalf("packet %d %v: DecodeCut of the whole frame: %v\n got %#v\nwant %#v", i, p, err, got, whole)
		}
		for n := 0; n < len(frame); n++ {
			got, err := DecodeCut(frame[:n])
			cuts++
			if err != nil && !errors.Is(err, ErrTruncated) {
				t.Fatalf("packet %d %v cut at %d: %v", i, p, n, err)
			}
			// (an IPv6 frame cut inside its extension headers has no protocol yet)
			if got.Src.IsValid() && (got.Src != whole.Src || got.Dst != whole.Dst || got.Proto != 0 && got.Proto != whole.Proto) {
				t.Fatalf("packet %d %v cut at %d: addresses %v > %v proto %d", i, p, n, got.Src, got.Dst, got.Proto)
			}
			if got.SPort != 0 || got.DPort != 0 {
				withPorts++
				if got.SPort != whole.SPort || got.DPort != whole.DPort {
					t.Fatalf("packet %d %v cut at %d: ports %d > %d", i, p, n, got.SPort, got.DPort)
				}
			}
			if got.TCPFlags != 0 && got.TCPFlags != whole.TCPFlags || got.ICMPType != 0 && got.ICMPType != whole.ICMPType {
				t.Fatalf("packet %d %v cut at %d: flags %#x icmp %d", i, p, n, got.TCPFlags, got.ICMPType)
			}
		}
	}
	if withPorts == 0 {
		t.Fatal("no cut frame kept its ports")
	}
	t.Logf("%d cut frames decoded, %d with ports", cuts, withPorts)
}
