package e2e

import (
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

func TestScratchDiff(t *testing.T) {
	b := newDiffBed(t)
	b.setPhase(diffPhase{"input", false, false})
	b.setPhase(diffPhase{"forward", true, false})
	rulesText, _ := os.ReadFile(os.Getenv("SCR_RULES"))
	rs, err := rules.Parse("x", rulesText, rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := b.run(b.sides[2].ns, "", "ip", "-o", "link")
	t.Logf("links:\n%s", out)
	files := diffFiles(rs)
	ref := b.reference(files)
	if err := b.loadAll(files); err != nil {
		t.Fatal(err)
	}
	for _, fr := range []string{os.Getenv("SCR_FRAME")} {
		raw, _ := hex.DecodeString(fr)
		pk, err := packet.Decode(raw)
		pkp := &pk
		if v := os.Getenv("SCR_SRC"); v != "" {
			pkp.Src = mustAddr(v)
			raw = pkp.Bytes()
		}
		for _, pr := range []uint8{17, 47, 50, 59, 93, 6, 132} {
			q := *pkp
			q.Proto = pr
			b.send([]*diffSide{b.sides[2]}, []*probe{{pkt: &q, frame: q.Bytes(), chain: rules.ChainForward, iface: "eth0"}})
			time.Sleep(500 * time.Millisecond)
			t.Logf("after proto %d: %s", pr, b.counters(b.sides[2], ref).describe(ref))
		}
		if err != nil {
			t.Fatal(err)
		}
		p := &probe{pkt: pkp, frame: raw, chain: rules.Chain(rules.ChainForward), iface: os.Getenv("SCR_IFACE"), addrs: b.addrs}
		for _, s := range b.sides {
			x := b.alone(s, ref, []*probe{p}, diffSettleOne)
			t.Logf("%s: got %s want %s", s.name, x.got.describe(ref), x.want.describe(ref))
			if s.fw != nil {
				t.Logf("%s", s.fw.run("status").stdout)
			}
		}
	}
}
