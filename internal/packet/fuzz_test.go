package packet

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"reflect"
	"testing"
)

// FuzzDecode checks that Decode never panics and that whatever it accepts is
// a fixed point: encoding the decoded packet and decoding again gives the
// same packet.
func FuzzDecode(f *testing.F) {
	for _, v := range vectors() {
		b, _ := hex.DecodeString(v.frame)
		f.Add(b)
	}
	r := rand.New(rand.NewPCG(9, 10))
	for range 50 {
		p := randPacket(r, genOptions{})
		f.Add(p.Bytes())
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		p, err := Decode(frame)
		if err != nil {
			return
		}
		b, err := p.Encode()
		if err != nil {
			t.Fatalf("decoded packet %#v does not encode: %v", p, err)
		}
		q, err := Decode(b)
		if err != nil {
			t.Fatalf("re-encoded frame %x does not decode: %v", b, err)
		}
		if p.TTL == 0 && p.IsIP() {
			p.TTL = DefaultTTL // TTL 0 cannot be expressed: it means DefaultTTL
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("not a fixed point\nfirst  %#v\nsecond %#v", p, q)
		}
		if again := q.Bytes(); !bytes.Equal(again, b) {
			t.Fatalf("encoding is not stable\n %x\n %x", b, again)
		}
	})
}

// FuzzReadFrames checks that ReadFrames never panics on arbitrary input.
func FuzzReadFrames(f *testing.F) {
	var buf bytes.Buffer
	_ = WritePcap(&buf, [][]byte{{1, 2, 3}})
	f.Add(buf.Bytes())
	f.Add(ngFile(leOrder, 1))
	f.Add(ngFile(beOrder, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ReadFrames(bytes.NewReader(data))
	})
}
